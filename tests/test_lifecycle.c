/* Process lifecycle under `cushim run` and plain LD_PRELOAD: exec (an image's summary is
 * finished by the next image), pid reuse within a run, `cushim gc` during a run, signal
 * dispositions the program inherits, descriptors it must not inherit, and descendants that
 * finish as the run closes. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MiB (1024ull * 1024)

/* Entries of dir not starting with '.'. */
static int count_entries(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", dir);
    struct run_result r;
    const char *sh[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, sh, NULL);
    int n = atoi(r.out);
    run_free(&r);
    return n;
}

/* Whether argv runs here (what a test needs: namespaces, mounts, root); if not, says
 * "not run: WHY" (the test then skips itself). */
static int probe_runs(const char *const *argv, const char *why)
{
    int ok = on_path(argv[0]); /* absent: run_cmd would fail the test */
    if (ok) {
        struct run_result r;
        run_cmd(&r, argv, NULL);
        ok = r.status == 0;
        run_free(&r);
    }
    if (!ok)
        printf("not run: %s\n", why);
    return ok;
}

static int count_lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, prefix, len) == 0;
    return n;
}

Test(lifecycle, an_exec_into_a_program_without_cuda_finishes_the_image_before)
{
    const char *segdir = fresh_dir("seg-exec-plain");
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *extra[] = {seg, "EXEC_CMD=exit 0", NULL};
    const char *argv[] = {program("rt_prog"), "exec", NULL};
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect(json_is_true(jpath(j, "exited")), "ended by its exec, not killed: %s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 1000);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 1000);
    cr_expect_eq(json_array_size(jpath(j, "descendants")), 0);
    cr_expect_eq(strstr(r.err, "ended without its exit report"), NULL, "%s", r.err);
    cr_expect_eq(count_entries(segdir), 0, "nothing left in the segment directory");
    json_decref(j);
    run_free(&r);
}

Test(lifecycle, an_exec_into_another_cuda_program_keeps_both_images)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "EXEC_CMD=exec %s peaks", program("rt_prog"));
    const char *extra[] = {cmd, NULL};
    const char *argv[] = {program("rt_prog"), "exec", NULL};
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    /* The last image is the top level; the one before the exec is listed with its own counters. */
    cr_expect(strstr(json_string_value(jpath(j, "command")), "peaks") != NULL);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1);
    cr_expect_eq(jpath_u64(j, "descendants.0.pid"), jpath_u64(j, "pid"));
    cr_expect(json_is_true(jpath(j, "descendants.0.exited")));
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), 1000);
    char want[64];
    snprintf(want, sizeof want, "cushim: before an exec, pid %llu ",
             (unsigned long long)jpath_u64(j, "pid"));
    cr_expect(strstr(r.err, want) != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(lifecycle, under_plain_ld_preload_an_exec_leaves_no_live_segment)
{
    const char *segdir = fresh_dir("seg-exec-preload");
    char seg[700], cmd[800];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    /* What `cushim ps` would read while the new image runs. */
    snprintf(cmd, sizeof cmd, "EXEC_CMD=ls %s | wc -l", segdir);
    const char *extra[] = {seg, cmd, preload_env(), "CUSHIM_REPORT=stderr", NULL};
    const char *argv[] = {program("rt_prog"), "exec", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "0\n");
    cr_expect(strstr(r.err, "device                 1000 B       1000 B          1          0") != NULL,
              "the image before the exec reports as at an exit: %s", r.err);
    run_free(&r);
}

/* Another user's file holds the segment's name (cushim-UID-PID), so the first image counts in a
 * suffixed one (cushim-UID-PID.XXXXXX); its exec into another CUDA program must still report it,
 * as when the name is free, also when that file is gone by the exec (`gone`). */
static void exec_with_name_taken(bool gone)
{
    if (geteuid() != 0) {
        printf("not run: giving a file to another user needs root\n");
        cr_skip_test("not run: giving a file to another user needs root");
    }
    const char *segdir = fresh_dir(gone ? "seg-exec-taken-gone" : "seg-exec-taken");
    char seg[700], cmd[800], script[2000];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(cmd, sizeof cmd, "EXEC_CMD=exec %s peaks", program("rt_prog"));
    snprintf(script, sizeof script, "f=%s/cushim-$(id -u)-$$; touch $f && chown 65534:65534 $f && %s exec %s exec",
             segdir, gone ? "EXEC_UNLINK=$f" : "", program("rt_prog"));
    const char *extra[] = {seg, cmd, preload_env(), "CUSHIM_REPORT=stderr", NULL};
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "device                 1000 B       1000 B          1          0") != NULL,
              "the image before the exec reports as at an exit: %s", r.err);
    cr_expect(strstr(r.err, "peaks") != NULL, "the image after it reports too: %s", r.err);
    cr_expect_eq(count_entries(segdir), gone ? 0 : 1, "only the other user's file is left, if any");
    run_free(&r);
}

Test(lifecycle, an_exec_reports_the_image_before_when_its_name_was_taken)
{
    exec_with_name_taken(false);
}

Test(lifecycle, an_exec_reports_the_image_before_when_its_name_was_taken_and_freed)
{
    exec_with_name_taken(true);
}

Test(lifecycle, an_image_killed_after_an_exec_is_reported_with_the_one_before)
{
    const char *ready = fresh_dir("ready-exec-kill");
    char json[700], rd[700], cmd[800];
    snprintf(json, sizeof json, "%s/exec-kill.json", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(cmd, sizeof cmd, "EXEC_CMD=exec %s hold", program("rt_prog"));
    const char *extra[] = {rd, cmd, "HOLD_FILE=/nonexistent", NULL};
    const char *argv[] = {cushim_bin(), "run", "--json", json, "--", program("rt_prog"), "exec", NULL};
    pid_t run = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);
    kill(pid, SIGKILL);
    cr_expect_eq(wait_bg(run), 128 + SIGKILL);
    /* Same pid twice: each image is its own summary (run directory names carry the segment's
     * creation time; the killed one is not taken for the exited one). */
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "pid"), (uint64_t)pid);
    cr_expect(json_is_false(jpath(j, "exited")));
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), MiB + 4096);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1);
    cr_expect_eq(jpath_u64(j, "descendants.0.pid"), (uint64_t)pid);
    cr_expect(json_is_true(jpath(j, "descendants.0.exited")));
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), 1000);
    json_decref(j);
}

Test(lifecycle, gc_leaves_a_dead_process_to_its_running_run)
{
    const char *segdir = fresh_dir("seg-gc-run"), *ready = fresh_dir("ready-gc-run");
    const char *tmp = fresh_dir("tmp-gc-run"); /* gc also sweeps run directories of TMPDIR */
    char json[700], seg[700], rd[700], body[2000], tmpenv[700];
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    snprintf(json, sizeof json, "%s/gc-run.json", test_dir());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    /* A worker dies by SIGKILL; `cushim gc` (from cron, say) runs while the run goes on. */
    snprintf(body, sizeof body,
             "%s hold & C=$!; while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; kill -9 $C; wait $C; "
             "%s gc; echo gc=$?",
             program("rt_prog"), ready, cushim_bin());
    const char *extra[] = {seg, rd, tmpenv, "HOLD_FILE=/nonexistent", NULL};
    const char *argv[] = {cushim_bin(), "run", "--json", json, "--", "sh", "-c", body, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "gc=0\n", "gc removed nothing of the running run's: %s", r.out);
    json_t *j = json_load(json);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1, "%s", r.err);
    cr_expect(json_is_false(jpath(j, "descendants.0.exited")));
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), MiB + 4096);
    cr_expect_eq(count_entries(segdir), 0, "the run cleaned up after its dead worker");
    json_decref(j);
    run_free(&r);
}

Test(lifecycle, ignored_signals_stay_ignored_for_the_program)
{
    /* nohup (SIGHUP) and a parent that ignores SIGCHLD (Python code that reaps nothing): the
     * program gets them ignored, as without cushim, and the run still returns its status. */
    char py[1200];
    snprintf(py, sizeof py,
             "import os, signal, sys\n"
             "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
             "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
             "os.execv('%s', ['cushim', 'run', '--quiet', '--'] + sys.argv[1:])\n",
             cushim_bin());
    struct run_result r;
    const char *mask[] = {"python3", "-c", py, "grep", "SigIgn", "/proc/self/status", NULL};
    run_cmd(&r, mask, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    unsigned long long ign = 0;
    cr_assert_eq(sscanf(r.out, "SigIgn: %llx", &ign), 1, "%s", r.out);
    cr_expect_eq(ign & ((1ull << (SIGHUP - 1)) | (1ull << (SIGCHLD - 1))),
                 (1ull << (SIGHUP - 1)) | (1ull << (SIGCHLD - 1)), "SigIgn %llx", ign);
    run_free(&r);
    const char *hup[] = {"python3", "-c", py, "sh", "-c", "kill -HUP $$; exit 42", NULL};
    run_cmd(&r, hup, sim_env(NULL));
    cr_expect_eq(r.status, 42, "SIGHUP ignored, status returned: %s", r.err);
    run_free(&r);
}

Test(lifecycle, a_signal_sent_as_the_run_starts_is_never_lost)
{
    /* Sent at once: it reaches cushim before, while or after it starts the program; each way,
     * the run ends with it (128 + SIGTERM), never after the program's 30 s. */
    for (int i = 0; i < 20; i++) {
        const char *argv[] = {cushim_bin(), "run", "--quiet", "--", "sleep", "30", NULL};
        pid_t run = spawn_bg(argv, sim_env(NULL));
        usleep((useconds_t)(i * 150));
        kill(run, SIGTERM);
        cr_expect_eq(wait_bg(run), 128 + SIGTERM, "attempt %d", i);
    }
}

Test(lifecycle, the_program_inherits_no_descriptor_of_the_run)
{
    char json[700], cmd[1200];
    snprintf(json, sizeof json, "%s/fds.json", test_dir());
    const char *ls[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", "sh", "-c",
                        "for f in /proc/$$/fd/*; do readlink $f; done", NULL};
    struct run_result r;
    run_cmd(&r, ls, sim_env(NULL));
    cr_expect_eq(r.status, 0);
    cr_expect_eq(strstr(r.out, "fds.json"), NULL, "%s", r.out);
    run_free(&r);
    /* With stdout closed, nothing the program writes (or cushim opens) lands in the JSON. */
    snprintf(cmd, sizeof cmd, "%s run --quiet --json %s -- %s peaks >&-", cushim_bin(), json,
             program("rt_prog"));
    const char *closed[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, closed, sim_env(NULL));
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    json_decref(j);
    run_free(&r);
}

Test(lifecycle, every_descendant_is_in_the_summary_or_says_its_own)
{
    /* 30 workers left running as the program ends: each either made it into the run's summary
     * or, finishing after the run closed, says its own summary on stderr; none twice, none lost,
     * no run directory left behind. */
    const char *tmp = fresh_dir("tmp-late"), *done = fresh_dir("done-late");
    char json[700], errf[700], body[1500], cmd[3000], tmpenv[700];
    snprintf(json, sizeof json, "%s/late.json", test_dir());
    snprintf(errf, sizeof errf, "%s/late.err", test_dir());
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    snprintf(body, sizeof body, "for i in $(seq 30); do (%s peaks >/dev/null; touch %s/$i) & done",
             program("rt_prog"), done);
    snprintf(cmd, sizeof cmd, "%s run --json %s -- sh -c '%s' 2>%s", cushim_bin(), json, body, errf);
    const char *sh[] = {"sh", "-c", cmd, NULL};
    const char *extra[] = {tmpenv, NULL};
    struct run_result r;
    run_cmd(&r, sh, sim_env(extra));
    cr_expect_eq(r.status, 0);
    pid_t ids[30];
    wait_ready(done, 30, ids);
    char *err = slurp(errf);
    json_t *j = json_load(json);
    int in_summary = (int)json_array_size(jpath(j, "descendants"));
    int said_own = count_lines_starting(err, "cushim: pid ");
    cr_expect_eq(in_summary + said_own, 30, "%d in the summary, %d said their own:\n%s", in_summary,
                 said_own, err);
    cr_expect_eq(count_lines_starting(err, "cushim: descendant pid "), in_summary);
    cr_expect_eq(count_entries(tmp), 0, "no run directory left");
    json_decref(j);
    free(err);
    run_free(&r);
}

Test(lifecycle, a_run_killed_by_sigkill_leaves_its_processes_to_say_their_own)
{
    const char *ready = fresh_dir("ready-run-killed");
    char hold[700], errf[700], body[2500], rd[700], hd[800];
    snprintf(hold, sizeof hold, "%s/go", test_dir());
    snprintf(errf, sizeof errf, "%s/run-killed.err", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    /* The program outlives its run (killed, SIGKILL: nothing said); at its end it finds its run
     * gone and says its own summary, where the run would have. */
    snprintf(body, sizeof body,
             "%s run -- %s hold 2>%s & R=$!; while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; "
             "P=$(ls %s); kill -9 $R; wait $R; touch %s; while kill -0 $P 2>/dev/null; do sleep 0.02; done",
             cushim_bin(), program("rt_prog"), errf, ready, ready, hold);
    const char *sh[] = {"sh", "-c", body, NULL};
    const char *extra[] = {rd, hd, NULL};
    struct run_result r;
    run_cmd(&r, sh, sim_env(extra));
    run_free(&r);
    char *err = slurp(errf);
    cr_expect(count_lines_starting(err, "cushim: pid ") == 1 && strstr(err, "hold`: 1 device, phase run\n") != NULL,
              "%s", err);
    free(err);
}

Test(lifecycle, a_killed_process_of_a_nested_run_reaches_the_outer_run)
{
    const char *ready = fresh_dir("ready-nested-kill");
    char outer[700], inner[700], body[2000], rd[700];
    snprintf(outer, sizeof outer, "%s/outer.json", test_dir());
    snprintf(inner, sizeof inner, "%s/inner.json", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(body, sizeof body,
             "%s hold & P=$!; while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; kill -9 $P; wait $P; %s peaks >/dev/null; true",
             program("rt_prog"), ready, program("rt_prog"));
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", outer, "--", cushim_bin(), "run", "--quiet",
                          "--json", inner, "--", "sh", "-c", body, NULL};
    const char *extra[] = {rd, "HOLD_FILE=/nonexistent", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    json_t *in = json_load(inner), *out = json_load(outer);
    cr_expect_eq(json_array_size(jpath(in, "descendants")), 2);
    cr_assert_eq(json_array_size(jpath(out, "descendants")), 2, "the killed one too");
    int killed = 0;
    for (int i = 0; i < 2; i++) {
        char key[32];
        snprintf(key, sizeof key, "descendants.%d.exited", i);
        killed += json_is_false(jpath(out, key));
    }
    cr_expect_eq(killed, 1);
    json_decref(in);
    json_decref(out);
}

/* Three runs nested (A holds B, B holds C) and C's cushim killed: B takes C's summaries, and
 * hands them up to A with its own (before, B handed its directory over first and A's summary
 * had no descendant; found by a review helper). */
Test(lifecycle, a_killed_run_two_levels_down_reaches_the_outermost_summary)
{
    struct run_result r;
    char a[700], b[700], c_sh[700], b_sh[700];
    snprintf(a, sizeof a, "%s/three-a.json", test_dir());
    snprintf(b, sizeof b, "%s/three-b.json", test_dir());
    snprintf(c_sh, sizeof c_sh, "%s/three-c.sh", test_dir());
    snprintf(b_sh, sizeof b_sh, "%s/three-b.sh", test_dir());
    FILE *f = fopen(c_sh, "w"); /* C's program: a CUDA process, then C's cushim killed */
    cr_assert(f != NULL);
    fprintf(f, "%s malloc >/dev/null; kill -9 $PPID\n", program("rt_prog"));
    fclose(f);
    f = fopen(b_sh, "w"); /* B's program: C */
    cr_assert(f != NULL);
    fprintf(f, "%s run --quiet --json %s/three-c.json -- sh %s\n", cushim_bin(), test_dir(), c_sh);
    fclose(f);
    char body[2000];
    snprintf(body, sizeof body, "%s run --quiet --json %s -- sh %s", cushim_bin(), b, b_sh);
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", a, "--", "sh", "-c", body, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    run_free(&r);
    json_t *ja = json_load(a), *jb = json_load(b);
    cr_assert_eq(json_array_size(jpath(jb, "descendants")), 1, "B took C's summary");
    cr_assert_eq(json_array_size(jpath(ja, "descendants")), 1, "A has it too");
    cr_expect_eq(jpath_u64(ja, "descendants.0.pid"), jpath_u64(jb, "descendants.0.pid"));
    cr_expect_eq(jpath_u64(ja, "descendants.0.devices.0.device.peak_bytes"), 1 + 255 + MiB + 1024 * MiB);
    cr_expect_eq(jpath_u64(ja, "descendants_still_running"), 0);
    json_decref(ja);
    json_decref(jb);
}

Test(lifecycle, a_pid_reused_within_a_run_keeps_both_processes)
{
    struct run_result r;
    const char *probe[] = {"unshare", "-pf", "--mount-proc", "sh", "-c", "echo 50 > /proc/sys/kernel/ns_last_pid", NULL};
    if (!probe_runs(probe, "needs unshare -pf and ns_last_pid (root) to reuse a pid on purpose"))
        cr_skip_test("not run: cannot choose pids here");
    const char *ready = fresh_dir("ready-reuse");
    char json[700], body[4000], inner[1600], rd[700];
    snprintf(json, sizeof json, "%s/reuse.json", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    /* pid 100 twice: a process killed (its segment waits for the run), then another. */
    snprintf(inner, sizeof inner,
             "echo 99 > /proc/sys/kernel/ns_last_pid; %s hold & P=$!; while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; "
             "kill -9 $P; wait $P; echo 99 > /proc/sys/kernel/ns_last_pid; %s peaks >/dev/null; echo $P",
             program("rt_prog"), ready, program("rt_prog"));
    snprintf(body, sizeof body, "%s run --quiet --json %s -- sh -c '%s'", cushim_bin(), json, inner);
    const char *argv[] = {"unshare", "-pf", "--mount-proc", "sh", "-c", body, NULL};
    const char *extra[] = {rd, "HOLD_FILE=/nonexistent", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_str_eq(r.out, "100\n", "%s", r.err);
    run_free(&r);
    json_t *j = json_load(json);
    char *all = json_dumps(jpath(j, "descendants"), JSON_COMPACT);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 2, "%s", all);
    cr_expect(strstr(all, "hold") && strstr(all, "peaks"), "%.3000s", all);
    free(all);
    cr_expect_eq(jpath_u64(j, "descendants.0.pid"), 100);
    cr_expect_eq(jpath_u64(j, "descendants.1.pid"), 100);
    cr_expect(json_is_false(jpath(j, "descendants.0.exited")), "the killed one, first");
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), MiB + 4096);
    cr_expect(json_is_true(jpath(j, "descendants.1.exited")));
    cr_expect_eq(jpath_u64(j, "descendants.1.devices.0.device.peak_bytes"), 350);
    json_decref(j);
}

Test(lifecycle, a_process_of_an_inner_pid_namespace_is_not_the_launched_program)
{
    struct run_result r;
    const char *probe[] = {"unshare", "-pf", "--mount-proc", "true", NULL};
    if (!probe_runs(probe, "needs unshare -pf (root) to make pid namespaces"))
        cr_skip_test("not run: cannot make pid namespaces here");
    /* cushim run is pid 1 of a namespace, its program (sh) pid 2; a sandbox inside runs a CUDA
     * program that is pid 2 of its own namespace: a descendant, not the launched program. */
    char json[700], inner[1200], body[3000];
    snprintf(json, sizeof json, "%s/inner-ns.json", test_dir());
    snprintf(inner, sizeof inner, "%s peaks >/dev/null; unshare -pf --mount-proc sh -c \"%s peaks >/dev/null; true\"",
             program("rt_prog"), program("rt_prog"));
    snprintf(body, sizeof body, "exec %s run --quiet --json %s -- sh -c '%s'", cushim_bin(), json, inner);
    const char *argv[] = {"unshare", "-pf", "--mount-proc", "sh", "-c", body, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "pid"), 2, "the launched sh");
    cr_expect_eq(json_array_size(jpath(j, "devices")), 0, "sh used no CUDA");
    cr_expect_eq(json_array_size(jpath(j, "descendants")), 2, "both rt_prog, the inner one included");
    json_decref(j);
}

Test(lifecycle, the_summaries_of_a_killed_nested_run_reach_the_outer_run)
{
    const char *tmp = fresh_dir("tmp-killed-nested");
    char json[700], done[700], stop[700], inner[3200], body[6500], tmpenv[700];
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    snprintf(json, sizeof json, "%s/killed-nested.json", test_dir());
    snprintf(done, sizeof done, "%s/killed-nested.done", test_dir());
    snprintf(stop, sizeof stop, "%s/killed-nested.stop", test_dir());
    unlink(done);
    unlink(stop);
    /* The inner run's program ends normally (its summary waits in the inner run's directory), then
     * the inner run is killed before it could say anything. */
    /* The inner sh outlives its killed run (an orphan): it also stops when the test directory is
     * gone (removed before it saw the stop file, it spun on for ever), and after 30 s at most. */
    snprintf(inner, sizeof inner, "%s peaks >/dev/null; touch %s; i=0; while [ ! -e %s ] && [ -d %s ] && "
             "[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
             program("rt_prog"), done, stop, test_dir());
    snprintf(body, sizeof body,
             "%s run --quiet -- sh -c '%s' & R=$!; while [ ! -e %s ]; do sleep 0.02; done; kill -9 $R; wait $R; "
             "touch %s; true", cushim_bin(), inner, done, stop);
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", "sh", "-c", body, NULL};
    const char *extra[] = {tmpenv, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    json_t *j = json_load(json);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1, "the inner run's process, from its directory");
    cr_expect(json_is_true(jpath(j, "descendants.0.exited")));
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.peak_bytes"), 350);
    json_decref(j);
    cr_expect_eq(count_entries(tmp), 0, "no run directory left");
}

/* The program of a killed nested run used CUDA itself and was killed too: it is a descendant of
 * the outer run, whose top level stays the program it launched (before, the inner program's
 * segment, marked as the top of its own run, took the outer top level: "pid" and "command" named
 * it and the launched sh was missing). 20 more runs inside the run start while it holds: before,
 * only 16 were known (the first 16 of a directory listing), and the processes of the others were
 * not the run's (found by a review helper). */
Test(lifecycle, a_killed_nested_runs_program_is_a_descendant_however_many_runs_came_before)
{
    const char *tmp = fresh_dir("tmp-killed-nested-top"), *ready = fresh_dir("ready-killed-nested-top");
    char json[700], body[4500], tmpenv[700], rd[700], hf[700];
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s/never", test_dir());
    snprintf(json, sizeof json, "%s/killed-nested-top.json", test_dir());
    snprintf(body, sizeof body,
             "%s run --quiet -- %s hold >/dev/null 2>&1 & R=$!; while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; "
             "i=0; while [ $i -lt 20 ]; do %s run --quiet -- true || exit 9; i=$((i+1)); done; "
             "P=$(ls %s); kill -9 $R; kill -9 $P; wait $R; while kill -0 $P 2>/dev/null; do sleep 0.02; done; true",
             cushim_bin(), program("rt_prog"), ready, cushim_bin(), ready);
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", "sh", "-c", body, NULL};
    const char *extra[] = {tmpenv, rd, hf, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    json_t *j = json_load(json);
    cr_assert(j);
    cr_expect(strncmp(json_string_value(jpath(j, "command")), "sh -c ", 6) == 0,
              "the launched program at the top: %s", json_string_value(jpath(j, "command")));
    cr_expect_eq(json_array_size(jpath(j, "devices")), 0, "sh used no CUDA");
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1, "the inner run's program");
    cr_expect(strstr(json_string_value(jpath(j, "descendants.0.command")), "rt_prog hold") != NULL);
    cr_expect(json_is_false(jpath(j, "descendants.0.exited")), "killed: no exit report");
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), MiB + 4096);
    cr_expect_eq(jpath_u64(j, "descendants_still_running"), 0);
    json_decref(j);
    cr_expect_eq(count_entries(tmp), 0, "no run directory left");
}

Test(lifecycle, a_full_segment_directory_never_kills_the_program)
{
    /* A container's small /dev/shm, full: the segment's space is taken when it is made, or the
     * shim counts in private memory and says so; the program never faults on a page later. */
    struct run_result r;
    const char *probe[] = {"unshare", "-m", "true", NULL};
    if (!probe_runs(probe, "needs unshare -m (root) to mount a small file system"))
        cr_skip_test("not run: cannot make mount namespaces here");
    const char *dir = fresh_dir("small-shm");
    char body[2000];
    snprintf(body, sizeof body,
             "mount --make-rprivate / && mount -t tmpfs -o size=64k tmpfs %s && "
             "dd if=/dev/zero of=%s/fill bs=1k count=56 2>/dev/null; "
             "CUSHIM_SEGMENT_DIR=%s LD_PRELOAD=%s CUSHIM_REPORT=stderr %s peaks",
             dir, dir, dir, shim_lib(), program("rt_prog"));
    const char *argv[] = {"unshare", "-m", "sh", "-c", body, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "No space left on device): counting in private memory") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "device                  350 B        350 B") != NULL, "the report all the same: %s", r.err);
    run_free(&r);
}

Test(lifecycle, without_proc_nothing_live_is_taken_for_dead)
{
    /* /proc hidden (a sandbox's mount namespace): pids are still told alive (kill 0, pidfs), so
     * the run keeps its program's summary and gc removes nothing of a live process. (cushim run
     * finds its library through /proc/self/exe: CUSHIM_LIBRARY names it here.) */
    struct run_result r;
    const char *probe[] = {"unshare", "-m", "true", NULL};
    if (!probe_runs(probe, "needs unshare -m (root) to hide /proc"))
        cr_skip_test("not run: cannot make mount namespaces here");
    const char *segdir = fresh_dir("seg-noproc"), *ready = fresh_dir("ready-noproc");
    char json[700], hold[700], body[3000];
    snprintf(json, sizeof json, "%s/noproc.json", test_dir());
    snprintf(hold, sizeof hold, "%s/go-noproc", test_dir());
    snprintf(body, sizeof body,
             "mount --make-rprivate / && mount -t tmpfs none /proc && "
             "CUSHIM_SEGMENT_DIR=%s CUSHIM_LIBRARY=%s %s run --quiet --json %s -- %s peaks >/dev/null && "
             "(READY_DIR=%s HOLD_FILE=%s CUSHIM_SEGMENT_DIR=%s LD_PRELOAD=%s %s hold >/dev/null &) && "
             "while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; CUSHIM_SEGMENT_DIR=%s %s gc; touch %s",
             segdir, shim_lib(), cushim_bin(), json, program("rt_prog"), ready, hold, segdir, shim_lib(), program("rt_prog"),
             ready, segdir, cushim_bin(), hold);
    const char *argv[] = {"unshare", "-m", "sh", "-c", body, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "", "gc removed nothing live: %s", r.out);
    run_free(&r);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350, "the program's summary reached the run");
    json_decref(j);
}

Test(lifecycle, a_full_run_directory_still_gets_the_summary)
{
    /* The run's directory (TMPDIR) full: the copy cannot be written, so the process leaves its
     * live segment, and the run reads the summary from it. */
    struct run_result r;
    const char *probe[] = {"unshare", "-m", "true", NULL};
    if (!probe_runs(probe, "needs unshare -m (root) to mount a small file system"))
        cr_skip_test("not run: cannot make mount namespaces here");
    const char *tmp = fresh_dir("small-tmp"), *segdir = fresh_dir("seg-small-tmp");
    char json[700], body[2000];
    snprintf(json, sizeof json, "%s/full-run-dir.json", test_dir());
    snprintf(body, sizeof body,
             "mount --make-rprivate / && mount -t tmpfs -o size=64k tmpfs %s && "
             "dd if=/dev/zero of=%s/fill bs=1k count=56 2>/dev/null; "
             "TMPDIR=%s CUSHIM_SEGMENT_DIR=%s %s run --quiet --json %s -- %s peaks >/dev/null",
             tmp, tmp, tmp, segdir, cushim_bin(), json, program("rt_prog"));
    const char *argv[] = {"unshare", "-m", "sh", "-c", body, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    json_decref(j);
    cr_expect_eq(count_entries(segdir), 0, "the live segment was the run's to remove");
}

Test(lifecycle, a_sandbox_without_proc_is_live_from_the_host)
{
    /* A process in its own pid namespace that cannot see /proc: it finds its namespace through
     * pidfs, and the host sees it live (its start time unknown), so gc keeps its segment. */
    struct run_result r;
    const char *probe[] = {"unshare", "-pfm", "--mount-proc", "true", NULL};
    if (!probe_runs(probe, "needs unshare -pfm (root)"))
        cr_skip_test("not run: cannot make pid and mount namespaces here");
    const char *segdir = fresh_dir("seg-sandbox"), *ready = fresh_dir("ready-sandbox");
    char hold[700], body[2000], seg[700];
    snprintf(hold, sizeof hold, "%s/go-sandbox", test_dir());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(body, sizeof body,
             "mount --make-rprivate / && mount -t tmpfs none /proc && READY_DIR=%s HOLD_FILE=%s "
             "CUSHIM_SEGMENT_DIR=%s LD_PRELOAD=%s exec %s hold >/dev/null",
             ready, hold, segdir, shim_lib(), program("rt_prog"));
    const char *argv[] = {"unshare", "-pfm", "--mount-proc", "sh", "-c", body, NULL};
    pid_t bg = spawn_bg(argv, sim_env(NULL)), inner;
    wait_ready(ready, 1, &inner);
    const char *ps[] = {cushim_bin(), "ps", NULL};
    const char *cenv[] = {seg, NULL};
    run_cmd(&r, ps, cenv);
    cr_expect(strstr(r.out, " live ") != NULL && strstr(r.out, " stale ") == NULL, "%s%s", r.out, r.err);
    run_free(&r);
    const char *gc[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, gc, cenv);
    cr_expect_str_eq(r.out, "", "nothing live removed");
    run_free(&r);
    touch(hold);
    wait_bg(bg);
}

/* A thread cancelled while the phase change it made is logged (with the phase lock held: write(2)
 * is a cancellation point): before, the lock stayed held and the next fork() hung for ever in the
 * shim's atfork handler. */
Test(lifecycle, a_thread_cancelled_while_logging_a_phase_change_blocks_no_fork)
{
    struct run_result r;
    const char *argv[] = {"timeout", "20", program("rt_prog"), "cancel_phase", NULL};
    const char *extra[] = {preload_env(), "CUSHIM_LOG=info", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "forked=1\nphase=1\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.err, "info: phase run -> compile\n") != NULL, "%s", r.err);
    run_free(&r);
}
