/* The repeating and sorted views of live programs: `cushim stat --interval/--iterations` (JSON
 * Lines, text snapshots, an --output replaced or a stream kept open, stop signals) and `cushim top
 * --sort`. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "live.h"

#define MiB (1024ull * 1024)

/* Lines of a file (at most `max`), each without its newline; returns the count, -1 when the file
 * ends in a partial line. */
static int file_lines(const char *path, char **lines, int max)
{
    char *text = slurp(path);
    if (!text)
        return 0;
    int n = 0;
    char *at = text;
    while (*at && n < max) {
        char *nl = strchr(at, '\n');
        if (!nl) {
            free(text);
            for (int i = 0; i < n; i++)
                free(lines[i]);
            return -1;
        }
        lines[n++] = strndup(at, (size_t)(nl - at));
        at = nl + 1;
    }
    free(text);
    return n;
}

/* `stat PID --json --interval`: one array per line (JSON Lines), each object with its read_ns
 * later than the line before's, exact figures in every line; the stat ends by itself, exit 0,
 * when the process has ended. */
Test(watch, stat_interval_writes_json_lines_until_the_process_ends)
{
    const char *segdir;
    char hold[600], cmd[2000], out[700];
    pid_t pid = start_held("hold", "t-jsonl", &segdir, hold, sizeof hold);
    snprintf(out, sizeof out, "%s/timeline.jsonl", test_dir());
    snprintf(cmd, sizeof cmd, "CUSHIM_SEGMENT_DIR=%s exec %s stat %d --json --interval 0.1 >%s", segdir,
             cushim_bin(), (int)pid, out);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t stat = spawn_bg(argv, NULL);
    char *lines[4096];
    int n = 0;
    for (int i = 0; i < 3000 && n < 3; i++) {
        usleep(10000);
        int k = file_lines(out, lines, 4096);
        for (int j = 0; j < k; j++)
            free(lines[j]);
        n = k;
    }
    cr_assert_geq(n, 3, "three snapshots in 30 s");
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
    cr_expect_eq(wait_bg(stat), 0, "stat --interval ends with its process, exit 0");
    n = file_lines(out, lines, 4096);
    cr_assert_geq(n, 3, "whole lines only (%d)", n);
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        json_error_t e;
        json_t *j = json_loads(lines[i], 0, &e);
        cr_assert(j, "line %d is not JSON: %s\n%s", i + 1, e.text, lines[i]);
        cr_expect_eq(json_array_size(j), 1, "line %d: %s", i + 1, lines[i]);
        cr_expect_eq(jpath_u64(j, "0.pid"), (uint64_t)pid);
        cr_expect_eq(jpath_u64(j, "0.devices.0.device_total.current_bytes"), MiB + 4096);
        cr_expect_eq(jpath_u64(j, "0.devices.0.device_total.peak_bytes"), 4 * MiB + 4096);
        uint64_t at = jpath_u64(j, "0.read_ns");
        cr_expect_gt(at, last, "line %d: read_ns %llu after %llu", i + 1, (unsigned long long)at,
                     (unsigned long long)last);
        last = at;
        json_decref(j);
        free(lines[i]);
    }
    unlink(out);
}

/* `stat --prometheus --output FILE --interval`: the file replaced at each snapshot, and SIGTERM
 * ends the stat with exit 0, the file whole and no temporary file left beside it. */
Test(watch, stat_interval_output_is_replaced_and_a_signal_stops_it_cleanly)
{
    const char *segdir;
    char hold[600], cmd[2000], labels[900];
    pid_t pid = start_held("hold", "t-promw", &segdir, hold, sizeof hold);
    const char *dir = fresh_dir("promw-out");
    char file[700];
    snprintf(file, sizeof file, "%s/cushim.prom", dir);
    snprintf(cmd, sizeof cmd, "CUSHIM_SEGMENT_DIR=%s exec %s stat --prometheus --output %s -d 0.1",
             segdir, cushim_bin(), file);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t watcher = spawn_bg(argv, NULL);
    struct stat st;
    ino_t first = 0;
    for (int i = 0; i < 3000; i++) {
        if (stat(file, &st) == 0) {
            if (!first)
                first = st.st_ino;
            else if (st.st_ino != first)
                break; /* replaced by the next snapshot (a rename: a new inode) */
        }
        usleep(10000);
    }
    cr_assert(first && stat(file, &st) == 0 && st.st_ino != first, "the file is replaced");
    kill(watcher, SIGTERM);
    cr_expect_eq(wait_bg(watcher), 0, "a stop signal is the end of a repeating stat");
    DIR *d = opendir(dir);
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') {
            cr_expect_str_eq(de->d_name, "cushim.prom", "only the output file is left");
            files++;
        }
    closedir(d);
    cr_expect_eq(files, 1);
    char *text = slurp(file);
    snprintf(labels, sizeof labels, "pid=\"%d\",command=\"%s\",device=\"0\","
             "uuid=\"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f\"", (int)pid, command_label(program("rt_prog"), "hold"));
    expect_prom(text, labels, "cushim_device_total_bytes", NULL, MiB + 4096);
    free(text);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* Text snapshots of `stat -n 2 -d 0.1`: each headed by its line, a blank line between them;
 * bad values said in one line, exit 2. */
Test(watch, stat_iterations_print_headed_text_snapshots)
{
    const char *segdir;
    char hold[600], seg[700], p[32];
    pid_t pid = start_held("hold", "t-statn", &segdir, hold, sizeof hold);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(p, sizeof p, "%d", (int)pid);
    const char *env[] = {seg, NULL};
    struct run_result r;
    const char *two[] = {cushim_bin(), "stat", p, "-n", "2", "-d", "0.1", NULL};
    run_cmd(&r, two, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    const char *second = strstr(r.out, "\n\ncushim stat: 1 process at ");
    cr_expect(strncmp(r.out, "cushim stat: 1 process at ", 26) == 0, "%s", r.out);
    cr_expect(second != NULL, "a blank line, then the second snapshot's header:\n%s", r.out);
    cr_expect(second && !strstr(second + 2, "\n\ncushim stat:"), "two snapshots only:\n%s", r.out);
    /* Each snapshot's time to the millisecond: "at YYYY-MM-DD HH:MM:SS.mmm". */
    const char *at = strstr(r.out, " process at ");
    cr_expect(at && strlen(at) > 36 && at[12 + 19] == '.' && at[12 + 23] == '\n', "%s", r.out);
    run_free(&r);
    /* Repeated expositions are refused on standard output; a repeating stat of a process that is
     * not there writes nothing. */
    const char *prom[] = {cushim_bin(), "stat", "--prometheus", "-n", "2", NULL};
    run_cmd(&r, prom, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    cr_expect_str_eq(r.err, "cushim: --prometheus with --interval or --iterations needs --output FILE (each "
                            "snapshot replaces it; expositions one after another on standard output are no "
                            "exposition)\n");
    run_free(&r);
    const char *gone[] = {cushim_bin(), "stat", "--json", "-n", "2", "-d", "0.1", "2147483647", NULL};
    run_cmd(&r, gone, env);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "", "nothing written for a process that is not there");
    run_free(&r);
    const char *zero[] = {cushim_bin(), "stat", "--interval", "0", NULL};
    run_cmd(&r, zero, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --interval \"0\" is not a number of seconds in 0.1..3600 (digits and a point, such as 0.5)\n");
    run_free(&r);
    const char *none[] = {cushim_bin(), "stat", "-n", "0", NULL};
    run_cmd(&r, none, env);
    cr_expect_eq(r.status, 2);
    /* Named as typed. */
    cr_expect_str_eq(r.err, "cushim: -n \"0\" is not a whole number of times, 1 or more\n");
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* A repeating stat whose reader has stopped reading (its pipe full, the write blocked) stops at
 * the first SIGTERM, exit 0 (it wrote on after each interrupted write; found by an attack helper);
 * a FIFO given as --output stays open from the first snapshot to the last (reopened per snapshot,
 * its reader saw an end of file after the first, and the next open failed); `--output -` keeps
 * the blank line between text snapshots. */
Test(watch, stat_interval_streams_stop_at_a_signal_and_stay_open)
{
    const char *segdir;
    char hold[600], seg[700];
    pid_t pid = start_held("hold", "t-stream", &segdir, hold, sizeof hold);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t watcher = fork();
    if (watcher == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        putenv(seg);
        execl(cushim_bin(), cushim_bin(), "stat", "--json", "-d", "0.1", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETPIPE_SZ, 4096); /* one page: full after a snapshot or two */
    /* Full: nothing more comes for 0.5 s, five snapshots' time (a pipe is full when its buffers
     * are, each write taking one: before its bytes reach F_GETPIPE_SZ). */
    int queued = 0, last = -1, still = 0;
    for (int i = 0; i < 600 && still < 5; i++) {
        usleep(100000);
        cr_assert_eq(ioctl(fds[0], FIONREAD, &queued), 0);
        /* Still only once something came: a stat slow to start (a loaded machine) is not full. */
        still = queued > 0 && queued == last ? still + 1 : 0;
        last = queued;
    }
    cr_assert(still == 5 && queued > 0, "the pipe filled up (%d bytes)", queued);
    kill(watcher, SIGTERM);
    int status = -1;
    for (int i = 0; i < 3000 && waitpid(watcher, &status, WNOHANG) == 0; i++)
        usleep(10000);
    if (status == -1) {
        kill(watcher, SIGKILL);
        waitpid(watcher, &status, 0);
        cr_expect(0, "a repeating stat blocked on a full pipe did not stop at SIGTERM");
    } else {
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit 0 (status %d)", status);
    }
    close(fds[0]);

    /* The FIFO opened for reading here first (non-blocking: no writer yet), read once the stat
     * has ended: its three snapshots wait in the FIFO's buffer. */
    char fifo[700];
    snprintf(fifo, sizeof fifo, "%s/stat.fifo", test_dir());
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd, 0);
    const char *env[] = {seg, NULL};
    struct run_result r;
    const char *to_fifo[] = {cushim_bin(), "stat", "--json", "-d", "0.1", "-n", "3", "--output", fifo, NULL};
    run_cmd(&r, to_fifo, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    static char fifo_text[65536];
    ssize_t got = read(rd, fifo_text, sizeof fifo_text - 1);
    close(rd);
    cr_assert_gt(got, 0);
    fifo_text[got] = '\0';
    int n = 0;
    for (char *line = fifo_text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1, n++) {
        *nl = '\0';
        json_t *j = json_loads(line, 0, NULL);
        cr_expect(j && jpath_u64(j, "0.pid") == (uint64_t)pid, "line %d: %s", n + 1, line);
        json_decref(j);
    }
    cr_expect_eq(n, 3, "three snapshots through one open FIFO");
    unlink(fifo);

    const char *dash[] = {cushim_bin(), "stat", "-n", "2", "-d", "0.1", "--output", "-", NULL};
    run_cmd(&r, dash, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\n\ncushim stat: 1 process at ") != NULL, "a blank line between:\n%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* `top --sort`: rows by the column asked for (largest first; pid smallest first), said in the
 * title; the default order is DEVICE-TOTAL's. A: 1 MiB + 4 KiB now, 4 MiB + 4 KiB peak; B: 4 MiB
 * now and peak. */
Test(watch, top_sorts_by_the_column_asked_for)
{
    const char *segdir = fresh_dir("seg-t-sort");
    const char *ready = fresh_dir("ready-t-sort");
    char hold[700], seg[700];
    snprintf(hold, sizeof hold, "%s/go-t-sort", test_dir());
    const char *hold_argv[] = {program("rt_prog"), "hold", NULL};
    const char *big_argv[] = {program("rt_prog"), "hold_refused", NULL};
    pid_t a = spawn_bg(hold_argv, live_env(segdir, ready, hold));
    pid_t b = spawn_bg(big_argv, live_env(segdir, ready, hold));
    pid_t pids[2];
    wait_ready(ready, 2, pids);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, NULL};
    struct run_result r;
    const char *keys[] = {NULL, "device-total", "total-peak", "pid", "pinned"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *argv[] = {cushim_bin(), "top", "-bn1", "--sort", keys[i], NULL};
        if (!keys[i])
            argv[3] = NULL;
        run_cmd(&r, argv, env);
        cr_expect_eq(r.status, 0, "%s", r.err);
        long ra = row_at(r.out, a), rb = row_at(r.out, b);
        cr_assert(ra > 0 && rb > 0, "both rows:\n%s", r.out);
        /* pinned: both 0 B, so by pid. */
        int a_first = !keys[i] || !strcmp(keys[i], "device-total") ? 0
                      : !strcmp(keys[i], "total-peak")             ? 1
                                                                   : a < b;
        cr_expect_eq(ra < rb, a_first, "--sort %s: %d %s %d\n%s", keys[i] ? keys[i] : "(default)", (int)a,
                     a_first ? "first" : "second", (int)b, r.out);
        const char *title = !keys[i] || !strcmp(keys[i], "device-total") ? "cushim top: 2 processes at "
                            : !strcmp(keys[i], "total-peak") ? ", sorted by TOTAL-PEAK\n"
                            : !strcmp(keys[i], "pid")        ? ", sorted by PID\n"
                                                             : ", sorted by PINNED\n";
        cr_expect(strstr(r.out, title) != NULL, "title says %s:\n%s", title, r.out);
        if (!keys[i] || !strcmp(keys[i], "device-total"))
            cr_expect(strstr(r.out, "sorted by") == NULL, "the default order is not said:\n%s", r.out);
        run_free(&r);
    }
    /* On the screen, < moves the order a column left (from DEVICE-TOTAL round to PID), drawn at
     * once: the frame a key asks for is not one of the -n frames. Then q ends it: the interval is
     * long, so the < is read however late printf writes it (with 0.3 s, a printf descheduled that
     * long let top end before the key came). */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "printf '<q' | %s top --interval 60 --iterations 1", cushim_bin());
    const char *screen_env[] = {seg, "TERM=xterm", "COLUMNS=160", "LINES=40", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    run_cmd(&r, sc, screen_env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, ", by DEVICE-TOTAL (< > sort, q quits)") != NULL, "%s", r.out);
    /* curses redraws only what changed: the title's word, bold, in place of DEVICE-TOTAL. */
    cr_expect(strstr(r.out, "H\033(B\033[0;1mPID\033") != NULL, "redrawn by PID:\n%s", r.out);
    run_free(&r);
    /* Without graph memory there is no GRAPH-POOL column: < moves past it, from PID to OFFLOADED. */
    snprintf(cmd, sizeof cmd, "printf '<<q' | %s top --interval 60 --iterations 1", cushim_bin());
    run_cmd(&r, sc, screen_env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "OFFLOADED (< > sort, q quits)") != NULL, "by OFFLOADED:\n%s", r.out);
    cr_expect(strstr(r.out, "GRAPH-POOL (< > sort") == NULL, "no GRAPH-POOL order:\n%s", r.out);
    run_free(&r);
    const char *bad[] = {cushim_bin(), "top", "-bn1", "-s", "memory", NULL};
    run_cmd(&r, bad, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: -s \"memory\" is not a column top sorts by (expected device-total, total-peak, "
                            "pinned, offloaded, graph-pool or pid)\n");
    run_free(&r);
    /* Bundled as top's other short options, and the column named by its heading too. */
    const char *bundled[] = {cushim_bin(), "top", "-bn1", "-sTOTAL-PEAK", NULL};
    run_cmd(&r, bundled, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, ", sorted by TOTAL-PEAK\n") != NULL, "%s", r.out);
    cr_expect_lt(row_at(r.out, a), row_at(r.out, b), "%s", r.out);
    run_free(&r);
    const char *json_name[] = {cushim_bin(), "top", "-bn1", "--sort", "total_peak", NULL};
    run_cmd(&r, json_name, env);
    cr_expect_eq(r.status, 0, "the JSON's spelling too: %s", r.err);
    cr_expect(strstr(r.out, ", sorted by TOTAL-PEAK\n") != NULL, "%s", r.out);
    run_free(&r);
    const char *bundled_b[] = {cushim_bin(), "top", "-bs", "pid", "-n1", NULL};
    run_cmd(&r, bundled_b, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, ", sorted by PID\n") != NULL, "%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(a), 0);
    cr_expect_eq(wait_bg(b), 0);
}
