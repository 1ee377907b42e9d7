/* Processes in namespaces of their own sharing one segment directory: a process in its own time
 * namespace is live, and containers (pid namespaces) whose processes have the same pids are told
 * apart by `cushim ps/stat/reset-peak/gc` and the exposition. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/procinfo.h"
#include "harness.h"
#include "live.h"

/* The environment of a held program with its own ready directory and hold file, copied into out
 * (sim_env's array is reused by the next call). */
static void held_env(const char **out, size_t cap, const char *segdir, const char *ready, const char *hold)
{
    static char bufs[4][3][700];
    static int next;
    char(*b)[700] = bufs[next++ % 4];
    snprintf(b[0], sizeof b[0], "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(b[1], sizeof b[1], "READY_DIR=%s", ready);
    snprintf(b[2], sizeof b[2], "HOLD_FILE=%s", hold);
    const char *extra[] = {preload_env(), b[0], b[1], b[2], NULL};
    const char *const *env = sim_env(extra);
    size_t n = 0;
    for (; env[n] && n + 1 < cap; n++)
        out[n] = env[n];
    out[n] = NULL;
}

/* A segment directory shared with containers (pid namespaces): two processes that are both pid 1
 * in their own namespace keep their own segments; a live one is never judged gone by its pid here;
 * one that died in a namespace still in sight is stale, and gc removes it. Needs root (unshare). */
Test(containers, a_process_in_its_own_time_namespace_is_live)
{
    /* Same pid namespace, another time namespace (its boottime 7 s ahead): its start time, as it
     * read it, differs from ours by the offset; it is the same process all the same. */
    struct run_result r;
    const char *probe[] = {"unshare", "-T", "--boottime", "7", "-f", "true", NULL};
    run_cmd(&r, probe, NULL);
    int can = r.status == 0;
    run_free(&r);
    if (!can) {
        printf("not run: needs unshare -T (time namespaces, root)\n");
        cr_skip_test("not run: cannot make time namespaces here");
    }
    const char *segdir = fresh_dir("seg-timens"), *ready = fresh_dir("ready-timens");
    char hold[700];
    snprintf(hold, sizeof hold, "%s/go-timens", test_dir());
    static const char *env[64];
    held_env(env, 64, segdir, ready, hold);
    const char *argv[] = {"unshare", "-T", "--boottime", "7", "-f", program("rt_prog"), "hold", NULL};
    pid_t bg = spawn_bg(argv, env), pid;
    wait_ready(ready, 1, &pid);
    char row[64];
    snprintf(row, sizeof row, "%7d root       live ", (int)pid);
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 0);
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0);
    cr_expect_str_eq(r.out, "", "a live process is kept");
    run_free(&r);
    /* And read from another time namespace than the host's. */
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *from_timens[] = {"unshare", "-T", "--boottime", "5", "-f", cushim_bin(), "ps", NULL};
    const char *cenv[] = {seg, NULL};
    run_cmd(&r, from_timens, cenv);
    cr_expect(strstr(r.out, row) != NULL, "%s%s", r.out, r.err);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(bg), 0);
}

Test(containers, containers_sharing_the_segment_directory)
{
    int ended_part_skipped = 0;
    struct run_result r;
    const char *probe[] = {"unshare", "-pf", "--mount-proc", "true", NULL};
    run_cmd(&r, probe, NULL);
    int can = r.status == 0;
    run_free(&r);
    if (!can) {
        printf("not run: needs unshare -pf --mount-proc (root) to make pid namespaces\n");
        cr_skip_test("not run: cannot make pid namespaces here");
    }
    const char *segdir = fresh_dir("seg-ns"), *r1 = fresh_dir("ready-ns1"), *r2 = fresh_dir("ready-ns2");
    char hold[700], kill_file[700], end_file[700], never[700];
    snprintf(hold, sizeof hold, "%s/go-ns", test_dir());
    snprintf(never, sizeof never, "%s/go-ns-never", test_dir());
    snprintf(kill_file, sizeof kill_file, "%s/kill-ns", test_dir());
    snprintf(end_file, sizeof end_file, "%s/end-ns", test_dir());
    static const char *e1[64], *e2[64];
    held_env(e1, 64, segdir, r1, hold);
    held_env(e2, 64, segdir, r2, hold);
    /* Two namespaces, rt_prog is pid 1 in each. */
    const char *argv[] = {"unshare", "-pf", "--mount-proc", program("rt_prog"), "hold", NULL};
    pid_t a = spawn_bg(argv, e1), b = spawn_bg(argv, e2);
    pid_t ra, rb;
    wait_ready(r1, 1, &ra);
    wait_ready(r2, 1, &rb);
    cr_expect_eq(ra, 1, "pid 1 in its namespace");
    cr_expect_eq(rb, 1);
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *cenv[] = {seg, NULL};
    const char *stat_all[] = {cushim_bin(), "stat", "--json", NULL};
    run_cmd(&r, stat_all, cenv);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert(j, "%s%s", r.out, r.err);
    cr_assert_eq(json_array_size(j), 2, "both pid-1 processes, each its own segment:\n%s", r.out);
    /* Each by its own pid and namespace, and by its pid here (the host's, as nvidia-smi shows). */
    uint64_t host[2], ns[2];
    for (int i = 0; i < 2; i++) {
        char key[32];
        snprintf(key, sizeof key, "%d.pid", i);
        cr_expect_eq(jpath_u64(j, key), 1);
        snprintf(key, sizeof key, "%d.host_pid", i);
        host[i] = jpath_u64(j, key);
        snprintf(key, sizeof key, "%d.pid_namespace", i);
        ns[i] = jpath_u64(j, key);
        cr_expect_gt(host[i], 1);
    }
    cr_expect_neq(host[0], host[1]);
    cr_expect_neq(ns[0], ns[1]);
    json_decref(j);
    run_free(&r);
    const char *ps_both[] = {cushim_bin(), "ps", NULL};
    run_cmd(&r, ps_both, cenv);
    const char *at[2];
    for (int i = 0; i < 2; i++) {
        char row[32];
        snprintf(row, sizeof row, "\n%7llu ", (unsigned long long)host[i]);
        at[i] = strstr(r.out, row);
        cr_expect(at[i] != NULL, "ps shows the pid here: %s", r.out);
    }
    /* In the order of the pids shown, not of the files' names (both pid 1 there: an operator
     * trial found a container's process listed by its pid in the container). */
    cr_expect(at[0] && at[1] && (host[0] < host[1]) == (at[0] < at[1]), "sorted by the pid shown:\n%s", r.out);
    run_free(&r);
    /* Prometheus: one series per process (the namespace is a label), none twice. */
    const char *prom[] = {cushim_bin(), "stat", "--prometheus", NULL};
    run_cmd(&r, prom, cenv);
    int dup = 0, series = 0;
    for (char *l = r.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        /* The series is the line up to its last space (the value follows). */
        size_t len = strcspn(l, "\n"), n = len;
        while (n > 0 && l[n - 1] != ' ')
            n--;
        if (*l == '#' || n == 0)
            continue;
        series++;
        for (char *m = l + len + (l[len] == '\n'); *m; m += strcspn(m, "\n") + (m[strcspn(m, "\n")] == '\n'))
            dup += strncmp(l, m, n) == 0 && strcspn(m + n, " \n") == strcspn(m + n, "\n");
    }
    cr_expect_gt(series, 0, "%s", r.out);
    cr_expect_eq(dup, 0, "no series twice:\n%s", r.out);
    cr_expect(strstr(r.out, "pidns=\"") != NULL, "%s", r.out);
    run_free(&r);
    /* `reset-peak 1` names both: refused; by the pid here, the one. */
    const char *amb[] = {cushim_bin(), "reset-peak", "1", NULL};
    run_cmd(&r, amb, cenv);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "cushim: pid 1 names 2 processes of other pid namespaces (pid namespace ") != NULL,
              "%s", r.err);
    run_free(&r);
    char hp[24], said[96];
    snprintf(hp, sizeof hp, "%llu", (unsigned long long)host[0]);
    const char *one[] = {cushim_bin(), "reset-peak", hp, NULL};
    run_cmd(&r, one, cenv);
    snprintf(said, sizeof said, "pid %s: peaks of 1 device set to their current values\n", hp);
    cr_expect_str_eq(r.out, said, "%s", r.err);
    run_free(&r);
    /* stat by the same rule: by the pid here, the one; `stat 1`, ambiguous. */
    const char *stat_one[] = {cushim_bin(), "stat", hp, "--json", NULL};
    run_cmd(&r, stat_one, cenv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    j = json_loads(r.out, 0, NULL);
    cr_expect_eq(json_array_size(j), 1, "%s", r.out);
    json_decref(j);
    run_free(&r);
    const char *stat_amb[] = {cushim_bin(), "stat", "1", NULL};
    run_cmd(&r, stat_amb, cenv);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "cushim: pid 1 names 2 processes of other pid namespaces (pid namespace ") != NULL,
              "%s", r.err);
    run_free(&r);
    const char *gc[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, gc, cenv);
    cr_expect_str_eq(r.out, "", "nothing live removed");
    run_free(&r);
    /* A third one in its own time namespace, whose clocks (and start times) are 1000 s ahead:
     * the same process all the same. */
    const char *tprobe[] = {"unshare", "-T", "--boottime", "1000", "-pf", "--mount-proc", "true", NULL};
    run_cmd(&r, tprobe, NULL);
    int timens_ok = r.status == 0;
    run_free(&r);
    if (timens_ok) {
        const char *r6 = fresh_dir("ready-ns6");
        static const char *e6[64];
        held_env(e6, 64, segdir, r6, hold);
        const char *targv[] = {"unshare", "-T", "--boottime", "1000", "-pf", "--mount-proc", program("rt_prog"),
                               "hold", NULL};
        pid_t t = spawn_bg(targv, e6), rt;
        wait_ready(r6, 1, &rt);
        run_cmd(&r, gc, cenv);
        cr_expect_str_eq(r.out, "", "a live process of another time namespace is kept");
        run_free(&r);
        const char *ps_all[] = {cushim_bin(), "ps", NULL};
        run_cmd(&r, ps_all, cenv);
        cr_expect(strstr(r.out, " stale ") == NULL, "%s", r.out);
        run_free(&r);
        touch(hold);
        cr_expect_eq(wait_bg(t), 0);
    } else {
        printf("not run: the time-namespace part (unshare -T --boottime)\n");
        touch(hold);
    }
    cr_expect_eq(wait_bg(a), 0);
    cr_expect_eq(wait_bg(b), 0);

    /* A namespace whose rt_prog dies by SIGKILL while the namespace lives on (its sh). */
    const char *r4 = fresh_dir("ready-ns4");
    static const char *e4[64];
    held_env(e4, 64, segdir, r4, never);
    char script[4096];
    /* ... and whose pid 2 then goes to another process (ns_last_pid), as pids do. */
    char reused[700];
    snprintf(reused, sizeof reused, "%s/reused-ns", test_dir());
    snprintf(script, sizeof script,
             "%s hold >/dev/null 2>&1 & p=$!; while [ ! -e %s ]; do sleep 0.01; done; kill -9 $p; wait $p; "
             "echo 1 > /proc/sys/kernel/ns_last_pid; sleep 1000 & echo $! > %s.tmp; mv %s.tmp %s; "
             "while [ ! -e %s ]; do sleep 0.01; done; kill $!", program("rt_prog"), kill_file, reused, reused,
             reused, end_file);
    const char *sh[] = {"unshare", "-pf", "--mount-proc", "sh", "-c", script, NULL};
    pid_t c = spawn_bg(sh, e4), rc;
    wait_ready(r4, 1, &rc);
    cr_expect_eq(rc, 2, "pid 2 in its namespace (sh is 1)");
    touch(kill_file);
    struct stat rst;
    for (int i = 0; i < 3000 && stat(reused, &rst) != 0; i++)
        usleep(10000);
    char *again = slurp(reused);
    cr_expect_str_eq(again, "2\n", "it has the dead process's pid");
    free(again);
    char segfile[800], want[900];
    snprintf(segfile, sizeof segfile, "%s/cushim-%u-2", segdir, (unsigned)getuid());
    const char *ps[] = {cushim_bin(), "ps", NULL};
    int stale = 0;
    for (int i = 0; i < 500 && !stale; i++) { /* until the kill is done */
        run_cmd(&r, ps, cenv);
        stale = strstr(r.out, " stale ") != NULL;
        run_free(&r);
        if (!stale)
            usleep(10000);
    }
    cr_expect(stale, "the killed process's segment is stale, though its pid lives again");
    struct stat st;
    cr_assert_eq(stat(segfile, &st), 0, "the killed process left its segment");
    run_cmd(&r, gc, cenv);
    snprintf(want, sizeof want, "removed %s (pid 2 of pid namespace ", segfile);
    cr_expect(strncmp(r.out, want, strlen(want)) == 0, "%s", r.out);
    cr_expect(strstr(r.out, ", dead)\n") != NULL, "%s", r.out);
    run_free(&r);
    touch(end_file);
    cr_expect_eq(wait_bg(c), 0);

    /* A container whose only process is killed: its pid namespace ends with it. The host sees
     * every pid namespace, so one with no process left is gone, and so is its segment. */
    if (cushim_pidns_inode() == CUSHIM_PIDNS_INIT_INO) {
        const char *r7 = fresh_dir("ready-ns7");
        static const char *e7[64];
        held_env(e7, 64, segdir, r7, never);
        const char *argv7[] = {"unshare", "-pf", "--mount-proc", program("rt_prog"), "hold", NULL};
        pid_t u7 = spawn_bg(argv7, e7), r7pid;
        wait_ready(r7, 1, &r7pid);
        run_cmd(&r, stat_all, cenv);
        j = json_loads(r.out, 0, NULL);
        uint64_t victim = 0, victim_ns = 0;
        for (size_t i = 0; j && i < json_array_size(j); i++) {
            char key[48];
            snprintf(key, sizeof key, "%zu.host_pid", i);
            victim = jpath_u64(j, key);
            snprintf(key, sizeof key, "%zu.pid_namespace", i);
            victim_ns = jpath_u64(j, key);
        }
        cr_expect_eq(json_array_size(j), 1, "%s", r.out);
        json_decref(j);
        run_free(&r);
        cr_assert_gt(victim, 1);
        /* Reached by its own pid (the one process of another namespace with pid 1): named by its
         * pid here too (a fresh-user trial: "pid 1: ..." named no process of the host's). */
        const char *by_own[] = {cushim_bin(), "reset-peak", "1", NULL};
        run_cmd(&r, by_own, cenv);
        char named[200];
        snprintf(named, sizeof named, "pid %llu (pid 1 of pid namespace %llu): peaks of 1 device set to their "
                 "current values\n", (unsigned long long)victim, (unsigned long long)victim_ns);
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect_str_eq(r.out, named);
        run_free(&r);
        const char *phase_own[] = {cushim_bin(), "phase", "1", "run", NULL};
        run_cmd(&r, phase_own, cenv);
        snprintf(named, sizeof named, "pid %llu (pid 1 of pid namespace %llu): already in the run phase\n",
                 (unsigned long long)victim, (unsigned long long)victim_ns);
        cr_expect(strncmp(r.out, named, strlen(named)) == 0, "%s", r.out);
        run_free(&r);
        kill((pid_t)victim, SIGKILL);
        cr_expect_neq(wait_bg(u7), 0, "unshare says its child was killed (its own way: 1 here)");
        run_cmd(&r, ps, cenv);
        cr_expect(strstr(r.out, " stale ") != NULL, "the ended namespace's process: %s", r.out);
        run_free(&r);
        run_cmd(&r, gc, cenv);
        cr_expect(strstr(r.out, "removed ") != NULL, "%s", r.out);
        run_free(&r);
    } else {
        printf("not run: the ended-namespace part (needs the initial pid namespace)\n");
        ended_part_skipped = 1;
    }

    /* A container with its own user namespace (rootless): its uid 0 is nobody here; its segment
     * is still read, live, and kept. */
    const char *userns_probe[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-U", "-r",
                                  "-pf", "--mount-proc", "true", NULL};
    run_cmd(&r, userns_probe, NULL);
    int userns_ok = r.status == 0;
    run_free(&r);
    if (!userns_ok) {
        /* Skipped, not passed: the parts above ran, this one did not. */
        printf("not run: the user-namespace part (unprivileged user namespaces are off here)\n");
        cr_skip_test("not run: the user-namespace part (unprivileged user namespaces are off here)");
    }
    const char *r5 = fresh_dir("ready-ns5");
    static const char *e5[64];
    char hold5[720];
    snprintf(hold5, sizeof hold5, "%s-5", hold);
    held_env(e5, 64, segdir, r5, hold5);
    const char *userns[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-U", "-r", "-pf",
                            "--mount-proc", program("rt_prog"), "hold", NULL};
    pid_t u = spawn_bg(userns, e5), ru;
    wait_ready(r5, 1, &ru);
    run_cmd(&r, ps, cenv);
    cr_expect(strstr(r.out, " nobody     live ") != NULL, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "      1 nobody ") == NULL, "by its pid here: %s", r.out);
    run_free(&r);
    run_cmd(&r, gc, cenv);
    cr_expect_str_eq(r.out, "", "a live container's segment is kept");
    run_free(&r);
    touch(hold5);
    cr_expect_eq(wait_bg(u), 0);
    /* Skipped, not passed, when a part could not run here (after every part that could). */
    if (!timens_ok)
        cr_skip_test("not run: the time-namespace part (unshare -T --boottime)");
    if (ended_part_skipped)
        cr_skip_test("not run: the ended-namespace part (needs the initial pid namespace)");
}

/* Skips the test ("not run") unless pid namespaces can be made here (root: unshare -pf
 * --mount-proc) from the initial pid namespace, which sees every process. */
static void need_pid_namespaces_from_the_host(void)
{
    struct run_result r;
    const char *probe[] = {"unshare", "-pf", "--mount-proc", "true", NULL};
    run_cmd(&r, probe, NULL);
    int can = r.status == 0;
    run_free(&r);
    if (!can || cushim_pidns_inode() != CUSHIM_PIDNS_INIT_INO) {
        printf("not run: needs unshare -pf --mount-proc (root), from the initial pid namespace\n");
        cr_skip_test("not run: cannot make pid namespaces here");
    }
}

/* gc inside a container sharing the segment directory with the host: a file that does not say its
 * pid namespace (junk, or an old writer's) named after a live host process is not judged there,
 * where that pid is not visible (an attack trial: it was removed as "pid N dead"); the host's gc
 * removes it once that process is gone. */
Test(containers, gc_in_a_container_leaves_files_it_cannot_judge)
{
    struct run_result r;
    need_pid_namespaces_from_the_host();
    const char *segdir = fresh_dir("seg-ns-gc");
    const char *sleeper_argv[] = {"sleep", "30", NULL};
    pid_t host = spawn_bg(sleeper_argv, NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)host);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("junk", f);
    fclose(f);
    backdate(path, 3600); /* long made */
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, NULL};
    const char *inside[] = {"unshare", "-pf", "--mount-proc", cushim_bin(), "gc", NULL};
    run_cmd(&r, inside, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
    cr_expect_eq(access(path, F_OK), 0, "left by the container's gc");
    const char *on_host[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, on_host, env);
    cr_expect_str_eq(r.out, "", "the host process lives");
    run_free(&r);
    kill(host, SIGKILL);
    wait_bg(host);
    run_cmd(&r, on_host, env);
    char want[900];
    snprintf(want, sizeof want, "removed %s (pid %d dead, invalid segment)\n", path, (int)host);
    cr_expect_str_eq(r.out, want);
    run_free(&r);
}

/* The run directory of a `cushim run` in a container sharing TMPDIR with the host: the host's gc
 * leaves it while its namespace holds that run (here: pid 1 there, started then), and removes it
 * once the container is gone (a multi-user trial: left for good). */
Test(containers, the_hosts_gc_removes_a_gone_containers_run_directory)
{
    struct run_result r;
    need_pid_namespaces_from_the_host();
    const char *argv[] = {"unshare", "-pf", "--mount-proc", "sleep", "30", NULL};
    pid_t unshare = spawn_bg(argv, NULL);
    /* The sleep: unshare's child, pid 1 of the new namespace. */
    pid_t inner = 0;
    char path[128], buf[4096];
    for (int i = 0; i < 300 && !inner; i++) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)unshare, (int)unshare);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(buf, sizeof buf, f))
                inner = (pid_t)atoi(buf);
            fclose(f);
        }
        if (!inner)
            usleep(10000);
    }
    cr_assert_gt(inner, 0, "unshare's child");
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)inner);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    unsigned long long ns = 0;
    cr_assert_eq(sscanf(buf, "pid:[%llu]", &ns), 1, "%s", buf);
    cr_assert_neq(ns, cushim_pidns_inode(), "a namespace of its own");
    const char *tmp = fresh_dir("tmp-ns-run");
    char dir[900], tmpenv[700], seg[700];
    snprintf(dir, sizeof dir, "%s/cushim-run.1-%llu-%llu.abcdef", tmp,
             (unsigned long long)cushim_proc_start_time(inner), ns);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", fresh_dir("seg-ns-run"));
    const char *env[] = {tmpenv, seg, NULL};
    const char *gc[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, gc, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "", "its run lives");
    run_free(&r);
    kill(unshare, SIGKILL);
    kill(inner, SIGKILL);
    wait_bg(unshare);
    for (int i = 0; i < 300 && kill(inner, 0) == 0; i++)
        usleep(10000);
    run_cmd(&r, gc, env);
    char want[1200];
    snprintf(want, sizeof want, "removed %s (run directory of cushim pid 1 of pid namespace %llu, gone)\n", dir, ns);
    cr_expect_str_eq(r.out, want);
    run_free(&r);
    struct stat st;
    cr_expect_neq(lstat(dir, &st), 0);
}

/* A container's process killed while its `cushim run` (in the container) goes on: the host's gc
 * leaves its segment to that run, which reports it (a trial: the host's gc removed it, and the run
 * said it saw no CUDA activity). */
Test(containers, the_hosts_gc_leaves_a_container_runs_killed_process_to_it)
{
    struct run_result r;
    need_pid_namespaces_from_the_host();
    const char *segdir = fresh_dir("seg-ns-killed"), *ready = fresh_dir("ready-ns-killed");
    char end[700], body[2000], json[700], seg[700], rd[700];
    snprintf(end, sizeof end, "%s/end-ns-killed", test_dir());
    snprintf(json, sizeof json, "%s/ns-killed.json", test_dir());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(body, sizeof body, "%s hold & while [ ! -e %s ]; do sleep 0.02; done", program("rt_prog"), end);
    const char *argv[] = {"unshare", "-pf", "--mount-proc", cushim_bin(), "run", "--quiet", "--json", json, "--",
                          "sh", "-c", body, NULL};
    const char *extra[] = {seg, rd, "HOLD_FILE=/nonexistent", NULL};
    pid_t unshare = spawn_bg(argv, sim_env(extra));
    pid_t inner;
    wait_ready(ready, 1, &inner);
    const char *stat_json[] = {cushim_bin(), "stat", "--json", NULL};
    const char *env[] = {seg, NULL};
    run_cmd(&r, stat_json, env);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert(j, "%s%s", r.out, r.err);
    pid_t host = (pid_t)jpath_u64(j, "0.host_pid");
    cr_assert_gt(host, 1, "%s", r.out);
    json_decref(j);
    run_free(&r);
    cr_assert_eq(kill(host, SIGKILL), 0, "pid %d: %s", (int)host, strerror(errno));
    /* Dead before gc looks (gone, or a zombie of the container's shell): before, 3 s of waiting
     * ran out unasserted, and gc leaves a live process's segment all the same: the test would
     * have passed without a killed process. */
    wait_dead(host, "the container's process killed");
    const char *gc[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, gc, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "", "left to its run");
    run_free(&r);
    touch(end);
    cr_expect_eq(wait_bg(unshare), 0);
    char *text = slurp(json);
    cr_assert(text);
    j = json_loads(text, 0, NULL);
    cr_assert(j, "%s", text);
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), (1 << 20) + 4096, "%s", text);
    json_decref(j);
    free(text);
}

/* A container's process that made a new time namespace for its children without exec'ing stays in
 * its own, while its timens_offsets show the children's: seen from the host it is live, not gone
 * (a review: ps said stale and gc removed its segment). */
Test(containers, a_process_that_made_a_time_namespace_for_its_children_is_live)
{
    struct run_result r;
    need_pid_namespaces_from_the_host();
    const char *tprobe[] = {"unshare", "-T", "--boottime", "500", "true", NULL};
    run_cmd(&r, tprobe, NULL);
    int can = r.status == 0;
    run_free(&r);
    if (!can) {
        printf("not run: needs time namespaces (unshare -T, root)\n");
        cr_skip_test("not run: cannot make time namespaces here");
    }
    struct live_dirs d;
    live_dirs_make(&d, "ns-timens");
    /* In a time namespace of its own already (boottime +500 s): its start time as it read it is not
     * the host's, so the offsets are what tell (then wrongly: its children's, +1000 s). */
    const char *argv[] = {"unshare", "-T", "--boottime", "500", "-pf", "--mount-proc", program("rt_prog"),
                          "hold_new_timens", NULL};
    pid_t unshare = spawn_bg(argv, live_env(d.seg, d.ready, d.hold));
    pid_t inner;
    wait_ready(d.ready, 1, &inner);
    cr_expect_eq(inner, 1);
    cr_expect_eq(cli(d.seg, &r, "ps", NULL, NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, " live ") != NULL && strstr(r.out, " stale ") == NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(d.seg, &r, "gc", NULL, NULL), 0, "%s", r.err);
    cr_expect_str_eq(r.out, "", "nothing of a live process removed");
    run_free(&r);
    live_release(d.hold, &unshare, 1);
}
