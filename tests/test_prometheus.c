/* Issue 3: Prometheus text from `cushim stat --prometheus` (promtool accepts it, --output is
 * atomic) and from `cushim serve` over loopback. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/segment.h"
#include "harness.h"

struct held {
    pid_t pid;
    char segdir[600], hold[600], seg[700];
};

static void start(struct held *h, const char *name)
{
    snprintf(h->segdir, sizeof h->segdir, "%s", fresh_dir(name));
    char rdname[64];
    snprintf(rdname, sizeof rdname, "%s-ready", name);
    const char *ready = fresh_dir(rdname);
    snprintf(h->hold, sizeof h->hold, "%s/go", ready);
    snprintf(h->seg, sizeof h->seg, "CUSHIM_SEGMENT_DIR=%s", h->segdir);
    char rd[600], hd[700];
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", h->hold);
    const char *extra[] = {preload_env(), h->seg, rd, hd, NULL};
    const char *argv[] = {program("rt_prog"), "hold", NULL};
    pid_t spawned = spawn_bg(argv, sim_env(extra));
    wait_ready(ready, 1, &h->pid);
    cr_assert_eq(h->pid, spawned);
}

static void stop(struct held *h)
{
    touch(h->hold);
    cr_expect_eq(wait_bg(h->pid), 0);
}

static void expect_sample(const char *text, pid_t pid)
{
    char line[512];
    snprintf(line, sizeof line,
             "cushim_bytes{pid=\"%d\",command=\"%s\",device=\"0\","
             "uuid=\"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f\",kind=\"device\"} 1052672\n",
             (int)pid, command_label(program("rt_prog"), "hold"));
    cr_expect(strstr(text, line) != NULL, "missing %s in:\n%.2000s", line, text);
    cr_expect(strstr(text, "# TYPE cushim_allocations_total counter\n") != NULL);
    char phase[512];
    snprintf(phase, sizeof phase, "cushim_phase{pid=\"%d\",command=\"%s\",phase=\"run\"} 1\n"
             "cushim_phase{pid=\"%d\",command=\"%s\",phase=\"compile\"} 0\n",
             (int)pid, command_label(program("rt_prog"), "hold"), (int)pid, command_label(program("rt_prog"), "hold"));
    cr_expect(strstr(text, phase) != NULL, "missing %s in:\n%.2000s", phase, text);
    cr_expect(strstr(text, "# TYPE cushim_device_total_peak_bytes gauge\n") != NULL);
}

Test(prometheus, promtool_accepts_the_output_and_output_is_atomic)
{
    struct held h;
    start(&h, "prom1");
    struct run_result r;
    char out[700];
    snprintf(out, sizeof out, "%s/metrics.prom", h.segdir);
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", "--output", out, NULL};
    const char *env[] = {h.seg, NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *cat[] = {"cat", out, NULL};
    run_cmd(&r, cat, NULL);
    expect_sample(r.out, h.pid);
    run_free(&r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s", out);
    const char *check[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, check, NULL);
    cr_expect_eq(r.status, 0, "promtool: %s%s", r.out, r.err);
    run_free(&r);
    /* Nothing but the final file is left behind. */
    snprintf(cmd, sizeof cmd, "ls %s | grep -c metrics.prom.tmp || true", h.segdir);
    const char *ls[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, ls, NULL);
    cr_expect_str_eq(r.out, "0\n");
    run_free(&r);
    stop(&h);
}

/* --command-label: the program's file name alone, or no command label (the metrics are every
 * local user's on loopback, argument lists included: a multi-user trial); promtool accepts both. */
Test(prometheus, the_command_label_can_be_the_name_or_none)
{
    struct held h;
    start(&h, "prom-command");
    struct run_result r;
    const char *env[] = {h.seg, NULL};
    static const char *const modes[] = {"name", "none"};
    for (int m = 0; m < 2; m++) {
        char out[700], line[512], phase[512], cmd[1024];
        snprintf(out, sizeof out, "%s/%s.prom", test_dir(), modes[m]);
        const char *argv[] = {cushim_bin(), "stat", "--prometheus", "--command-label", modes[m], "--output", out, NULL};
        run_cmd(&r, argv, env);
        cr_expect_eq(r.status, 0, "%s", r.err);
        run_free(&r);
        char *text = slurp(out);
        cr_assert(text);
        snprintf(line, sizeof line, "\ncushim_bytes{pid=\"%d\"%s,device=\"0\","
                 "uuid=\"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f\",kind=\"device\"} 1052672\n",
                 (int)h.pid, m == 0 ? ",command=\"rt_prog\"" : "");
        cr_expect(strstr(text, line) != NULL, "missing %s in:\n%.2000s", line, text);
        snprintf(phase, sizeof phase, "\ncushim_phase{pid=\"%d\"%s,phase=\"run\"} 1\n", (int)h.pid,
                 m == 0 ? ",command=\"rt_prog\"" : "");
        cr_expect(strstr(text, phase) != NULL, "missing %s in:\n%.2000s", phase, text);
        cr_expect(strstr(text, " hold") == NULL, "no argument left:\n%.2000s", text);
        free(text);
        snprintf(cmd, sizeof cmd, "promtool check metrics < %s", out);
        const char *check[] = {"sh", "-c", cmd, NULL};
        run_cmd(&r, check, NULL);
        cr_expect_eq(r.status, 0, "promtool: %s%s", r.out, r.err);
        run_free(&r);
    }
    const char *bad[] = {cushim_bin(), "serve", "--listen", "127.0.0.1:1", "--command-label", "short", NULL};
    run_cmd(&r, bad, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --command-label \"short\" is not one of full (the command line's first 64 bytes), "
                            "name (the program's file name) or none (no command label)\n");
    run_free(&r);
    stop(&h);
}

/* A command line is bytes: a label holding one that is not UTF-8 would lose the whole scrape.
 * Labels are UTF-8 (U+FFFD for a bad byte or a control character), the text view shows '?',
 * JSON \ufffd and \u001b; promtool accepts the metrics. */
Test(prometheus, labels_are_utf8_whatever_the_command_line)
{
    const char *segdir = fresh_dir("prom-utf8"), *ready = fresh_dir("prom-utf8-ready");
    char link[700], hold[700], seg[700], rd[700], hd[800];
    /* argv[0] through a link named with a Latin-1 byte, an escape sequence, a quote, a backslash,
     * in a directory with a short name: the label holds the command's first 64 bytes. */
    char linkdir[] = "/tmp/cul.XXXXXX";
    cr_assert(mkdtemp(linkdir));
    chmod(linkdir, 0755);
    snprintf(link, sizeof link, "%s/caf\xe9\033[2J\"q\\", linkdir);
    cr_assert_eq(symlink(program("rt_prog"), link), 0);
    snprintf(hold, sizeof hold, "%s/go", ready);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    const char *extra[] = {preload_env(), seg, rd, hd, NULL};
    const char *argv[] = {link, "hold", NULL};
    pid_t pid = spawn_bg(argv, sim_env(extra)), ready_pid;
    wait_ready(ready, 1, &ready_pid);
    cr_assert_eq(ready_pid, pid);
    struct run_result r;
    char pidarg[16], want[1400];
    snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
    const char *env[] = {seg, NULL};
    const char *prom[] = {cushim_bin(), "stat", "--prometheus", pidarg, NULL};
    run_cmd(&r, prom, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "command=\"%s/caf\xef\xbf\xbd\xef\xbf\xbd[2J\\\"q\\\\ hold\",device=\"0\"", linkdir);
    cr_expect(strstr(r.out, want) != NULL, "missing %s in:\n%.1500s", want, r.out);
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.prom", segdir);
    FILE *f = fopen(path, "w");
    fputs(r.out, f);
    fclose(f);
    run_free(&r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
    const char *check[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, check, NULL);
    cr_expect_eq(r.status, 0, "promtool: %s%s", r.out, r.err);
    run_free(&r);
    const char *text[] = {cushim_bin(), "stat", pidarg, NULL};
    run_cmd(&r, text, env);
    /* The text summary escapes as the run's messages do (\xe9 not UTF-8, \x1b a control). */
    snprintf(want, sizeof want, "pid %d `%s/caf\\xe9\\x1b[2J\"q\\ hold`", (int)pid, linkdir);
    cr_expect(strstr(r.out, want) != NULL, "missing %s in:\n%s", want, r.out);
    run_free(&r);
    const char *json[] = {cushim_bin(), "stat", "--json", pidarg, NULL};
    run_cmd(&r, json, env);
    snprintf(want, sizeof want, "\"command\": \"%s/caf\\ufffd\\u001b[2J\\\"q\\\\ hold\"", linkdir);
    cr_expect(strstr(r.out, want) != NULL, "missing %s in:\n%s", want, r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
    unlink(link);
    rmdir(linkdir);
}

/* docs/PROMETHEUS.md names every metric family the exporter writes (its # TYPE lines). */
Test(prometheus, every_metric_is_documented)
{
    const char *empty = fresh_dir("prom-doc");
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", empty);
    const char *env[] = {seg, NULL};
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", NULL};
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "no process: the families, no samples, and that is an answer (cron)");
    cr_expect_str_eq(r.err, "");
    char *doc = slurp(SOURCE_ROOT "/docs/PROMETHEUS.md");
    cr_assert(doc, "docs/PROMETHEUS.md");
    int families = 0;
    for (char *p = r.out; (p = strstr(p, "# TYPE ")) != NULL; p++) {
        char name[128], row[160];
        cr_assert_eq(sscanf(p, "# TYPE %127s", name), 1);
        snprintf(row, sizeof row, "| `%s` |", name);
        cr_expect(strstr(doc, row) != NULL, "docs/PROMETHEUS.md lacks a row for %s", name);
        families++;
    }
    cr_expect_eq(families, 41, "the exporter's metric families");
    free(doc);
    run_free(&r);
    /* --output replacing a file keeps its mode (a textfile collector's user must read it). */
    char out[800], flag[820];
    snprintf(out, sizeof out, "%s/cushim.prom", empty);
    FILE *f = fopen(out, "w");
    fclose(f);
    cr_assert_eq(chmod(out, 0640), 0);
    snprintf(flag, sizeof flag, "--output=%s", out);
    const char *to_file[] = {cushim_bin(), "stat", "--prometheus", flag, NULL};
    run_cmd(&r, to_file, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
    cr_expect_gt(st.st_size, 100, "the families were written");
    /* Never group write either (README: 0660 becomes 0640). */
    cr_assert_eq(chmod(out, 0660), 0);
    run_cmd(&r, to_file, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert_eq(stat(out, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
}

static int http_get(int port, const char *path, char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t k;
    while (got + 1 < len && (k = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)k;
    buf[got] = '\0';
    close(fd);
    return 0;
}

Test(prometheus, output_to_a_device_writes_in_place)
{
    struct held h;
    start(&h, "prom3");
    struct run_result r;
    struct stat st;
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", "--output", "/dev/null", NULL};
    const char *env[] = {h.seg, NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_assert_eq(stat("/dev/null", &st), 0);
    cr_expect(S_ISCHR(st.st_mode), "/dev/null is still a character device");
    run_free(&r);
    const char *full[] = {cushim_bin(), "stat", "--prometheus", "--output", "/dev/full", NULL};
    run_cmd(&r, full, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: cannot write --output \"/dev/full\": No space left on device\n");
    run_free(&r);
    stop(&h);
}

/* The textfile collector's writer (--prometheus --output, from cron) does not speak of a file it
 * cannot read, which its exposition counts; to standard output, the file is said as before (a
 * multi-user trial: a file another user put there made root's cron speak at every run). */
Test(prometheus, the_textfile_writer_counts_unreadable_files_without_a_word)
{
    struct held h;
    start(&h, "prom-quiet");
    char junk[700], out[700];
    snprintf(junk, sizeof junk, "%s/cushim-%u-%d", h.segdir, (unsigned)getuid(), (int)getpid());
    FILE *f = fopen(junk, "w");
    cr_assert(f);
    fputs("junk", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/cushim.prom", test_dir());
    struct run_result r;
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", "--output", out, NULL};
    const char *env[] = {h.seg, NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    char *text = slurp(out);
    cr_assert(text);
    cr_expect(strstr(text, "\ncushim_invalid_segments 1\n") != NULL, "%s", text);
    free(text);
    const char *to_stdout[] = {cushim_bin(), "stat", "--prometheus", NULL};
    run_cmd(&r, to_stdout, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: skipping ") != NULL, "%s", r.err);
    run_free(&r);
    /* Asked for that pid: why it cannot be read is said (a trial: "(said above)" named a line
     * left out). */
    char p[16];
    snprintf(p, sizeof p, "%d", (int)getpid());
    const char *named[] = {cushim_bin(), "stat", "--prometheus", "--output", out, p, NULL};
    run_cmd(&r, named, env);
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: skipping ") != NULL && strstr(r.err, "(said above)") != NULL, "%s", r.err);
    run_free(&r);
    stop(&h);
}

Test(prometheus, output_names_near_and_over_the_limit)
{
    /* A 250-byte file name is written (its temporary file gets a shorter name); a 300-byte one
     * is refused as too long, not called a symbolic link. */
    struct held h;
    start(&h, "prom-names");
    const char *dir = fresh_dir("prom-names-out");
    char name[260], path[1000];
    memset(name, 'n', 250);
    name[250] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct run_result r;
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", "--output", path, NULL};
    const char *env[] = {h.seg, NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    char *text = slurp(path);
    cr_expect(text && strstr(text, "# TYPE cushim_device_total_peak_bytes gauge\n") != NULL);
    free(text);
    run_free(&r);
    char longer[320], want[1400];
    memset(longer, 'n', 300);
    longer[300] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, longer);
    run_cmd(&r, argv, env);
    /* The path cut as every long value in a message is (cli_shown). */
    snprintf(want, sizeof want, "cushim: cannot write --output \"%.60s...\" (%zu bytes): File name too long\n", path,
             strlen(path));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* A loop of the user's own links is a loop, not a link someone else planted. */
    char a[800], b[800];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    cr_assert_eq(symlink(b, a), 0);
    cr_assert_eq(symlink(a, b), 0);
    snprintf(path, sizeof path, "%s/out.prom", a);
    run_cmd(&r, argv, env);
    snprintf(want, sizeof want, "cushim: cannot write --output \"%s\": Too many levels of symbolic links (a loop)\n",
             path);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* "-" is standard output, even from a working directory that was removed. */
    char script[1400];
    snprintf(script, sizeof script, "mkdir %s/gone && cd %s/gone && rmdir %s/gone && exec %s stat --prometheus "
             "--output -", dir, dir, dir, cushim_bin());
    const char *sh[] = {"/bin/sh", "-c", script, NULL};
    run_cmd(&r, sh, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "# TYPE cushim_device_total_peak_bytes gauge\n") != NULL, "%s", r.out);
    run_free(&r);
    stop(&h);
}

/* Starts `cushim serve` on 127.0.0.1:port with CUSHIM_SEGMENT_DIR=... (seg_env) and waits until
 * it answers /metrics (the answer is left in buf). */
static pid_t start_serve_on(const char *seg_env, const char *host, int port, char *buf, size_t len)
{
    char listen[64];
    snprintf(listen, sizeof listen, "%s:%d", host, port);
    const char *argv[] = {cushim_bin(), "serve", "--listen", listen, NULL};
    const char *env[] = {seg_env, NULL};
    pid_t srv = spawn_bg(argv, env);
    int ok = -1;
    for (int i = 0; i < 3000 && ok != 0; i++) {
        ok = http_get(port, "/metrics", buf, len);
        if (ok != 0)
            usleep(10000);
    }
    cr_assert_eq(ok, 0, "cushim serve did not answer on %s", listen);
    return srv;
}

static pid_t start_serve(const char *seg_env, int port, char *buf, size_t len)
{
    return start_serve_on(seg_env, "127.0.0.1", port, buf, len);
}

Test(prometheus, serve_answers_metrics_over_loopback)
{
    struct held h;
    start(&h, "prom2");
    int port = free_port();
    static char buf[1 << 20];
    pid_t srv = start_serve(h.seg, port, buf, sizeof buf);
    cr_expect(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0,
              "%.200s", buf);
    cr_expect(strstr(buf, "Content-Type: text/plain; version=0.0.4") != NULL, "%.400s", buf);
    expect_sample(buf, h.pid);
    cr_assert_eq(http_get(port, "/nope", buf, sizeof buf), 0);
    cr_expect(strstr(buf, " 404 ") != NULL, "%.200s", buf);
    cr_expect(strstr(buf, "Content-Type: text/plain; charset=utf-8\r\n") != NULL, "%.400s", buf);
    cr_assert_eq(http_get(port, "/metrics%00", buf, sizeof buf), 0);
    cr_expect(strstr(buf, " 404 ") != NULL, "an escaped path is not unescaped into /metrics: %.200s", buf);
    kill(srv, SIGTERM);
    cr_expect_eq(wait_bg(srv), 0);
    stop(&h);
}

/* A raw request on a new connection to the server; returns the socket (or -1). */
static int http_open(int port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write(fd, request, strlen(request)) != (ssize_t)strlen(request)) {
        close(fd);
        return -1;
    }
    return fd;
}

Test(prometheus, serve_cuts_slow_clients_and_fails_a_scrape_it_cannot_answer)
{
    const char *segdir = fresh_dir("serve-slow");
    int port = free_port();
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    static char buf[1 << 16];
    pid_t srv = start_serve(seg, port, buf, sizeof buf);
    /* Two requests on one connection (HTTP/1.1 keep-alive): both answered. */
    int ka = http_open(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    cr_assert_geq(ka, 0);
    /* Read until both answers are in (the connection stays open), at most 30 s: a server slow to
     * answer the second on a loaded machine is not one that did not. */
    struct timeval two = {30, 0};
    setsockopt(ka, SOL_SOCKET, SO_RCVTIMEO, &two, sizeof two);
    size_t have = 0;
    ssize_t k;
    int answers = 0;
    while (answers < 2 && have + 1 < sizeof buf && (k = read(ka, buf + have, sizeof buf - 1 - have)) > 0) {
        have += (size_t)k;
        buf[have] = '\0';
        answers = 0;
        for (const char *p = buf; (p = strstr(p, "HTTP/1.1 200 OK")) != NULL; p++)
            answers++;
    }
    buf[have] = '\0';
    close(ka);
    cr_expect_eq(answers, 2, "%.600s", buf);
    /* Another method: 405, and what is allowed (RFC 9110). */
    int fd = http_open(port, "POST /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    cr_assert_geq(fd, 0);
    ssize_t got = read(fd, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
    cr_expect(strstr(buf, " 405 ") != NULL && strstr(buf, "\r\nAllow: GET, HEAD\r\n") != NULL, "%s", buf);
    /* A client that sends its headers a byte at a time, never finishing: libmicrohttpd's idle
     * timeout never fires, cushim's 10 s deadline does. */
    fd = http_open(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    cr_assert_geq(fd, 0);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* Timed by the clock, not by counting 1 s reads: on a loaded machine each took longer, and
     * the cut at 10 s came after fewer of them. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double closed_after = -1;
    for (int s = 0; s < 60 && closed_after < 0; s++) {
        if (write(fd, "a", 1) != 1 || read(fd, buf, sizeof buf) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            closed_after = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        }
    }
    close(fd);
    cr_expect(closed_after >= 8.5 && closed_after <= 40, "the slow client was cut after %.1f s", closed_after);
    /* The segment directory gone: not "no process" (200, empty) but a failed scrape. */
    cr_assert_eq(rmdir(segdir), 0);
    cr_assert_eq(http_get(port, "/metrics", buf, sizeof buf), 0);
    cr_expect(strstr(buf, " 503 ") != NULL, "%.300s", buf);
    cr_expect(strstr(buf, "cannot read the segment directory") != NULL, "%.300s", buf);
    kill(srv, SIGTERM);
    cr_expect_eq(wait_bg(srv), 0);
}

Test(prometheus, bad_listen_address_is_a_usage_error)
{
    struct run_result r;
    const char *argv[] = {cushim_bin(), "serve", "--listen", "localhost", NULL};
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --listen needs ADDR:PORT with a numeric address and a port 1..65535 "
                            "(e.g. 127.0.0.1:9400, [::1]:9400, :9400 for every address), got \"localhost\"\n");
    run_free(&r);
    const char *signed_port[] = {cushim_bin(), "serve", "--listen", "127.0.0.1:+9400", NULL};
    run_cmd(&r, signed_port, NULL);
    cr_expect_eq(r.status, 2, "a port is digits only");
    run_free(&r);
    const char *none[] = {cushim_bin(), "serve", "--listen", NULL};
    run_cmd(&r, none, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --listen needs ADDR:PORT\n", "a missing value, said as for every option");
    run_free(&r);
    const char *scoped[] = {cushim_bin(), "serve", "--listen", "[fe80::1%no-such-interface]:9400", NULL};
    run_cmd(&r, scoped, NULL);
    cr_expect_eq(r.status, 2, "an interface that does not exist: %s", r.err);
    cr_expect_str_eq(r.err, "cushim: --listen \"[fe80::1%no-such-interface]:9400\": no network interface of that "
                            "name here (`ip link` lists them)\n");
    run_free(&r);
    const char *other[] = {cushim_bin(), "serve", "--port", "9400", NULL};
    run_cmd(&r, other, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: unknown option \"--port\" for serve (see cushim serve --help)\n",
                     "worded as run's");
    run_free(&r);
}

/* An IPv4-mapped IPv6 address (RFC 4291 2.5.5.2) is its IPv4 address: served there. */
Test(prometheus, serve_takes_an_ipv4_mapped_address)
{
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", fresh_dir("serve-mapped"));
    int port = free_port();
    static char buf[1 << 16];
    pid_t srv = start_serve_on(seg, "[::ffff:127.0.0.1]", port, buf, sizeof buf);
    cr_expect(strstr(buf, " 200 ") != NULL, "%.200s", buf);
    kill(srv, SIGTERM);
    cr_expect_eq(wait_bg(srv), 0);
}

/* A process killed (SIGKILL: no exit report) leaves its series out and counts in
 * cushim_stale_segments until gc removes its segment (an operator trial: a kill only dropped the
 * process's series, nothing an alert could see). */
Test(prometheus, a_killed_process_counts_as_a_stale_segment)
{
    struct held h;
    start(&h, "prom-stale");
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", NULL};
    const char *env[] = {h.seg, NULL};
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect(strstr(r.out, "\ncushim_stale_segments 0\n") != NULL, "%s", r.out);
    run_free(&r);
    kill(h.pid, SIGKILL);
    cr_expect_eq(wait_bg(h.pid), 128 + SIGKILL);
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\ncushim_stale_segments 1\n") != NULL, "%s", r.out);
    char gone[64];
    snprintf(gone, sizeof gone, "pid=\"%d\"", (int)h.pid);
    cr_expect(strstr(r.out, gone) == NULL, "no series of the killed process:\n%s", r.out);
    run_free(&r);
    /* ps lists it stale and says what to do (a fresh-user trial). */
    const char *ps[] = {cushim_bin(), "ps", NULL};
    run_cmd(&r, ps, env);
    cr_expect(strstr(r.out, " stale ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\nstale: the process ended without its exit report (killed, or _exit); `cushim gc` removes "
                            "its segment\n") != NULL, "%s", r.out);
    run_free(&r);
    const char *gc[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, gc, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_cmd(&r, argv, env);
    cr_expect(strstr(r.out, "\ncushim_stale_segments 0\n") != NULL, "%s", r.out);
    run_free(&r);
}

/* cushim_stale_segments counts segments without their process's exit report only: not a copy of
 * one (a user's backup), nor one whose process wrote its exit report and left it (it could not
 * remove it), made here by marking the killed process's exit report done in place. */
Test(prometheus, only_a_segment_without_its_exit_report_counts_as_stale)
{
    struct held h;
    start(&h, "prom-stale-only");
    kill(h.pid, SIGKILL);
    cr_expect_eq(wait_bg(h.pid), 128 + SIGKILL);
    char path[700], cp[1600];
    snprintf(path, sizeof path, "%s/cushim-%u-%d", h.segdir, (unsigned)getuid(), (int)h.pid);
    snprintf(cp, sizeof cp, "cp '%s' '%s.bak001'", path, path);
    cr_assert_eq(system(cp), 0);
    const char *argv[] = {cushim_bin(), "stat", "--prometheus", NULL};
    const char *env[] = {h.seg, NULL};
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\ncushim_stale_segments 1\n") != NULL, "the copy not counted:\n%s", r.out);
    cr_expect(strstr(r.out, "\n# HELP cushim_stale_segments segments of processes that ended without their exit "
                            "report (killed: SIGKILL, the OOM killer; or _exit), copies not counted; cushim gc "
                            "removes them\n# TYPE cushim_stale_segments gauge\ncushim_stale_segments 1\n") != NULL,
              "%s", r.out);
    run_free(&r);
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    uint32_t one = 1;
    cr_assert_eq(fseek(f, (long)offsetof(struct cushim_segment_header, exited), SEEK_SET), 0);
    cr_assert_eq(fwrite(&one, sizeof one, 1, f), 1);
    cr_assert_eq(fclose(f), 0);
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\ncushim_stale_segments 0\n") != NULL, "the exit report's not counted:\n%s", r.out);
    run_free(&r);
}
