/* Shared by the suites that watch programs under the shim live (test_live.c, test_segments.c,
 * test_top.c, test_containers.c, test_watch.c): held programs of tests/programs/rt_prog, the CLI
 * run against their segment directory, and their segments. */
#include "live.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

const char *const *live_env_with2(const char *segdir, const char *ready, const char *hold, const char *setting,
                                  const char *another)
{
    static char seg[600], rd[600], hd[600];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    const char *extra[] = {preload_env(), seg, rd, hd, setting, setting ? another : NULL, NULL};
    return sim_env(extra);
}

const char *const *live_env_with(const char *segdir, const char *ready, const char *hold,
                                 const char *setting)
{
    return live_env_with2(segdir, ready, hold, setting, NULL);
}

const char *const *live_env(const char *segdir, const char *ready, const char *hold)
{
    return live_env_with(segdir, ready, hold, NULL);
}

int cli(const char *segdir, struct run_result *r, const char *a, const char *b, const char *c)
{
    char seg[600];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *argv[] = {cushim_bin(), a, b, c, NULL};
    const char *env[] = {seg, NULL};
    run_cmd(r, argv, env);
    return r->status;
}

void live_dirs_make(struct live_dirs *d, const char *tag)
{
    char name[64];
    snprintf(name, sizeof name, "seg-%s", tag);
    d->seg = fresh_dir(name);
    snprintf(name, sizeof name, "ready-%s", tag);
    d->ready = fresh_dir(name);
    snprintf(d->hold, sizeof d->hold, "%s/go-%s", test_dir(), tag);
}

void live_release(const char *hold, const pid_t *pids, int n)
{
    touch(hold);
    for (int i = 0; i < n; i++)
        cr_expect_eq(wait_bg(pids[i]), 0, "pid %d", (int)pids[i]);
}

pid_t start_held(const char *scenario, const char *tag, const char **segdir, char *hold, size_t len)
{
    struct live_dirs d;
    live_dirs_make(&d, tag);
    *segdir = d.seg;
    const char *ready = d.ready;
    snprintf(hold, len, "%s", d.hold);
    const char *argv[] = {program("rt_prog"), scenario, NULL};
    pid_t pid = spawn_bg(argv, live_env(*segdir, ready, hold));
    pid_t rp;
    wait_ready(ready, 1, &rp);
    cr_assert_eq(rp, pid);
    return pid;
}

void expect_prom(const char *out, const char *labels, const char *family, const char *kind, uint64_t value)
{
    char line[1200];
    if (kind)
        snprintf(line, sizeof line, "\n%s{%s,kind=\"%s\"} %llu\n", family, labels, kind, (unsigned long long)value);
    else
        snprintf(line, sizeof line, "\n%s{%s} %llu\n", family, labels, (unsigned long long)value);
    cr_expect(strstr(out, line) != NULL, "no %s", line + 1);
}

const char *seg_path(const char *segdir, pid_t pid)
{
    static char buf[700];
    snprintf(buf, sizeof buf, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)pid);
    return buf;
}

void wait_zombie(pid_t pid, const char *what)
{
    char procstat[64], st_buf[256] = "";
    snprintf(procstat, sizeof procstat, "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 3000 && !strstr(st_buf, ") Z "); i++) {
        FILE *f = fopen(procstat, "r");
        if (f) {
            if (!fgets(st_buf, sizeof st_buf, f))
                st_buf[0] = '\0';
            fclose(f);
        }
        if (!strstr(st_buf, ") Z "))
            usleep(10000);
    }
    cr_assert(strstr(st_buf, ") Z ") != NULL, "%s: %s", what, st_buf);
}

void wait_dead(pid_t pid, const char *what)
{
    char procstat[64], st_buf[256] = "";
    snprintf(procstat, sizeof procstat, "/proc/%d/stat", (int)pid);
    int dead = 0;
    for (int i = 0; i < 3000 && !dead; i++) {
        st_buf[0] = '\0';
        FILE *f = fopen(procstat, "r");
        if (f) {
            if (!fgets(st_buf, sizeof st_buf, f))
                st_buf[0] = '\0';
            fclose(f);
        }
        dead = kill(pid, 0) != 0 || strstr(st_buf, ") Z ") != NULL;
        if (!dead)
            usleep(10000);
    }
    cr_assert(dead, "%s: pid %d still running after 30 s: %s", what, (int)pid, st_buf);
}

long row_at(const char *out, pid_t pid)
{
    char row[32];
    snprintf(row, sizeof row, "\n%7d ", (int)pid);
    const char *at = strstr(out, row);
    return at ? at - out : -1;
}
