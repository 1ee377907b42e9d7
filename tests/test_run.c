/* `cushim run` as a launcher: programs that use no CUDA run unchanged, exit statuses and signals
 * (forwarded, or sent to it by the program), the launched program at the top and its descendants
 * below (killed, exec'd, forked, still running at the end, a run inside a run), LD_PRELOAD kept,
 * the run directory and its variables, and what the run's summary says of a process (exited,
 * counting disabled, read_ns). Its settings are in test_settings.c, its outputs in
 * test_reports.c and test_logs.c. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MiB (1024ull * 1024)

Test(run, non_cuda_programs_run_unchanged)
{
    struct run_result r;
    const char *t[] = {"/bin/true", NULL};
    cr_expect_eq(run_status(t, sim_env(NULL), &r), 0);
    cr_expect(strstr(r.err, "no CUDA memory activity") != NULL, "%s", r.err);
    run_free(&r);
    const char *ls[] = {"sh", "-c", "ls / >/dev/null && echo listed", NULL};
    cr_expect_eq(run_status(ls, sim_env(NULL), &r), 0);
    cr_expect_str_eq(r.out, "listed\n");
    run_free(&r);
    const char *py[] = {"python3", "-c", "print('py ok')", NULL};
    cr_expect_eq(run_status(py, sim_env(NULL), &r), 0);
    cr_expect_str_eq(r.out, "py ok\n");
    run_free(&r);
}

Test(run, leaves_no_segment_for_non_cuda_programs)
{
    struct run_result r;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c cushim- || true", test_dir());
    const char *sh[] = {"sh", "-c", "true", NULL};
    run_status(sh, sim_env(NULL), &r);
    run_free(&r);
    const char *count[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, count, NULL);
    cr_expect_str_eq(r.out, "0\n");
    run_free(&r);
}

Test(run, exit_status_and_signals)
{
    struct run_result r;
    const char *three[] = {"sh", "-c", "exit 3", NULL};
    cr_expect_eq(run_status(three, sim_env(NULL), &r), 3);
    /* A program that failed before any CUDA memory is not sent looking for a driver. */
    cr_expect_str_eq(r.err, "cushim: no CUDA memory activity in `sh -c exit 3` or its descendants "
                            "before it exited with status 3\n");
    run_free(&r);
    /* ... unless no driver can be found: CUDA's own message then misleads. */
    const char *no_driver[] = {"LD_LIBRARY_PATH=/nonexistent", NULL};
    cr_expect_eq(run_status(three, no_driver, &r), 3);
    /* The build tree's simulated driver, named absolute (it works from any directory). */
    char want[PATH_MAX + 400], sim[PATH_MAX];
    cr_assert(realpath(sim_libdir(), sim));
    snprintf(want, sizeof want, "cushim: no CUDA memory activity in `sh -c exit 3` or its descendants "
             "before it exited with status 3; no CUDA driver, libcuda.so.1, is on the library "
             "path (without a GPU, the simulated one: LD_LIBRARY_PATH=%s)\n", sim);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* The same for a program that exits 0 (found by a fresh-user trial: one that handles CUDA's
     * failure was only asked whether a driver is on the library path). */
    const char *handled[] = {"true", NULL};
    cr_expect_eq(run_status(handled, no_driver, &r), 0);
    snprintf(want, sizeof want, "cushim: no CUDA memory activity in `true` or its descendants; no CUDA "
             "driver, libcuda.so.1, is on the library path (without a GPU, the simulated one: "
             "LD_LIBRARY_PATH=%s)\n", sim);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    const char *term[] = {"sh", "-c", "kill -TERM $$", NULL};
    cr_expect_eq(run_status(term, sim_env(NULL), &r), 128 + SIGTERM);
    cr_expect(strstr(r.err, "killed by signal 15") != NULL, "%s", r.err);
    run_free(&r);
    const char *segv[] = {"sh", "-c", "kill -SEGV $$", NULL};
    cr_expect_eq(run_status(segv, sim_env(NULL), &r), 128 + SIGSEGV);
    run_free(&r);
    /* A program that used CUDA and exited non-zero: its summary, then its status, last, as a
     * signal's (found by a fresh-user trial: nothing said it). */
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "%s malloc >/dev/null; exit 4", program("rt_prog"));
    const char *four[] = {"sh", "-c", cmd, NULL};
    cr_expect_eq(run_status(four, sim_env(NULL), &r), 4);
    const char *last = strrchr(r.err, '\n');
    while (last && last > r.err && last[-1] != '\n')
        last--;
    cr_expect(strstr(r.err, "device_total         1.00 MiB     1.00 GiB\n") != NULL, "%s", r.err);
    cr_expect_str_eq(last, "cushim: `sh` exited with status 4\n", "%s", r.err);
    run_free(&r);
    /* The program's own status, not the run's 2 for a --json it could not write (an attack
     * trial: "exited with status 2" for a program that exited 0). */
    snprintf(cmd, sizeof cmd, "%s malloc >/dev/null", program("rt_prog"));
    const char *json_full[] = {cushim_bin(), "run", "--json", "/dev/full", "--", "sh", "-c", cmd, NULL};
    run_cmd(&r, json_full, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "exited with status") == NULL, "%s", r.err);
    cr_expect(strstr(r.err, "\ncushim: error writing --json \"/dev/full\": No space left on device\n") != NULL, "%s",
              r.err);
    run_free(&r);
    const char *false_full[] = {cushim_bin(), "run", "--json", "/dev/full", "--", "false", NULL};
    run_cmd(&r, false_full, sim_env(NULL));
    cr_expect_eq(r.status, 1, "the program's failure first");
    cr_expect_str_eq(r.err, "cushim: no CUDA memory activity in `false` or its descendants before it exited with "
                            "status 1\ncushim: error writing --json \"/dev/full\": No space left on device\n");
    run_free(&r);
    /* The program's name is escaped in the lines after the summary, as in every message. */
    char odd[700];
    snprintf(odd, sizeof odd, "%s/ex\x1b[31mit\nFAKE", test_dir());
    FILE *f = fopen(odd, "w");
    cr_assert(f);
    fprintf(f, "#!/bin/sh\n'%s' malloc >/dev/null; exit 3\n", program("rt_prog"));
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(odd, 0755), 0);
    const char *odd_run[] = {odd, NULL};
    cr_expect_eq(run_status(odd_run, sim_env(NULL), &r), 3);
    char want_odd[900];
    snprintf(want_odd, sizeof want_odd, "cushim: `%s/ex\\x1b[31mit\\nFAKE` exited with status 3\n", test_dir());
    last = strrchr(r.err, '\n');
    while (last && last > r.err && last[-1] != '\n')
        last--;
    cr_expect_str_eq(last, want_odd, "%s", r.err);
    run_free(&r);
    const char *missing[] = {"/nonexistent/program", NULL};
    cr_expect_eq(run_status(missing, sim_env(NULL), &r), 127);
    cr_expect(strstr(r.err, "cannot run \"/nonexistent/program\"") != NULL, "%s", r.err);
    run_free(&r);
}

/* A TMPDIR the run cannot use is named as such, quoted (a trailing space shows). */
Test(run, an_unusable_tmpdir_is_named)
{
    struct run_result r;
    const char *argv[] = {"true", NULL};
    const char *extra[] = {"TMPDIR=/nonexistent ", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 2);
    cr_expect_str_eq(r.err, "cushim: cannot create a run directory under \"/nonexistent \" (TMPDIR): "
                            "No such file or directory; nothing was run\n");
    run_free(&r);
    /* Longer than a path: too long, not "Invalid argument" (a bad-input trial). */
    char tmp[4300] = "TMPDIR=/tmp/";
    memset(tmp + strlen(tmp), 'b', 4200);
    const char *extra2[] = {tmp, NULL};
    cr_expect_eq(run_status(argv, sim_env(extra2), &r), 2);
    cr_expect_str_eq(r.err, "cushim: cannot create a run directory under \"/tmp/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
                            "bbbbbbbbbbbb...\" (4205 bytes) (TMPDIR): File name too long; nothing was run\n");
    run_free(&r);
}

/* A relative TMPDIR: the run directory is made absolute from the working directory (before, the
 * shims refused it as CUSHIM_RUN_DIR and the whole summary was lost). */
Test(run, a_relative_tmpdir_keeps_the_summary)
{
    struct run_result r;
    const char *dir = fresh_dir("reltmp");
    char sub[800];
    snprintf(sub, sizeof sub, "%s/rel", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    const char *run[] = {"/bin/sh", "-c", "cd \"$2\" && TMPDIR=rel exec \"$0\" run -- \"$1\" malloc", cushim_bin(),
                         program("rt_prog"), dir, NULL};
    run_cmd(&r, run, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "    device               1.00 MiB     1.00 GiB          4          2        0\n") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "not an absolute path") == NULL, "%s", r.err);
    DIR *d = opendir(sub);
    cr_assert(d != NULL);
    int left = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        left += de->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(left, 0, "the run directory under rel/ is removed");
    run_free(&r);
}

Test(run, forwards_sigterm_to_the_program)
{
    /* cushim run -- sh -c 'trap "exit 42" TERM; ...': cushim's SIGTERM reaches sh. */
    char script[512];
    snprintf(script, sizeof script, "%s/ready.%d", test_dir(), (int)getpid());
    char body[1024];
    snprintf(body, sizeof body, "trap 'exit 42' TERM; touch %s; while :; do sleep 0.05; done", script);
    pid_t pid = fork();
    if (pid == 0) {
        execl(cushim_bin(), cushim_bin(), "run", "--quiet", "--", "sh", "-c", body, (char *)NULL);
        _exit(99);
    }
    for (int i = 0; i < 1500 && access(script, F_OK) != 0; i++)
        usleep(20000);
    /* Stopped and waited for before a failure is said: left running, it held the suite's output
     * open and meson waited on it long after the test had failed. */
    int started = access(script, F_OK) == 0;
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(started, "program did not start");
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 42, "status %d", status);
    unlink(script);
}

/* A signal the program sends its parent (now cushim run) is not sent back to it: before, `kill
 * -USR1 $PPID` killed the program itself (exit 138; found by a review helper). */
Test(run, a_signal_the_program_sends_its_parent_is_not_sent_back)
{
    struct run_result r;
    const char *usr1[] = {"sh", "-c", "kill -USR1 $PPID; sleep 0.2; echo end", NULL};
    cr_expect_eq(run_status(usr1, sim_env(NULL), &r), 0, "%s", r.err);
    cr_expect_str_eq(r.out, "end\n");
    run_free(&r);
}

Test(run, descendants_are_reported)
{
    struct run_result r;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s malloc >/dev/null; %s peaks >/dev/null", program("rt_prog"),
             program("rt_prog"));
    const char *argv[] = {"sh", "-c", cmd, NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(json_array_size(jpath(j, "devices")), 0, "sh itself used no CUDA");
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 2);
    cr_expect(strstr(json_string_value(jpath(j, "descendants.0.command")), "rt_prog malloc"));
    cr_expect(strstr(json_string_value(jpath(j, "descendants.1.command")), "rt_prog peaks"));
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.peak_bytes"), 1 + 255 + (1 << 20) + (1ull << 30));
    cr_expect_eq(jpath_u64(j, "descendants.1.devices.0.device.peak_bytes"), 350);
    cr_expect(strstr(r.err, "descendant pid") != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(run, top_level_is_the_launched_program)
{
    struct run_result r;
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    cr_expect_eq(json_array_size(jpath(j, "descendants")), 0);
    cr_expect(strstr(r.err, "cushim: pid") == r.err, "summary first on stderr: %s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(run, keeps_existing_ld_preload)
{
    struct run_result r;
    char pre[2048];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", program("libinterposer.so"));
    const char *extra[] = {pre, NULL};
    const char *argv[] = {"sh", "-c", "echo \"$LD_PRELOAD\"", NULL};
    run_status(argv, sim_env(extra), &r);
    char expect[4096];
    snprintf(expect, sizeof expect, "%s:%s\n", program("libinterposer.so"), shim_lib());
    cr_expect_str_eq(r.out, expect);
    run_free(&r);
}

/* A descendant killed during the run is over when the run says its summary: no "not sampled
 * yet" or "the driver's figures N s ago", as for a live process (found by a review helper). */
Test(run, a_killed_descendants_summary_is_not_a_live_view)
{
    struct run_result r;
    const char *ready = fresh_dir("ready-killed-desc");
    char body[2000], rd[700];
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(body, sizeof body, "%s hold & while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; kill -9 $!; wait",
             program("rt_prog"), ready);
    const char *argv[] = {cushim_bin(), "run", "--", "sh", "-c", body, NULL};
    const char *extra[] = {rd, "HOLD_FILE=/nonexistent", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect(strstr(r.err, "cushim: descendant pid ") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "  untracked never sampled\n") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "not sampled yet") == NULL && strstr(r.err, " s ago)") == NULL, "%s", r.err);
    run_free(&r);
}

/* A program killed by a signal writes no exit report: its live segment gives its last counters. */
Test(run, a_killed_program_is_reported_from_its_segment)
{
    const char *segdir = fresh_dir("seg-kill"), *ready = fresh_dir("ready-kill");
    char json[700], seg[700], rd[700];
    snprintf(json, sizeof json, "%s/killed.json", test_dir());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    const char *extra[] = {seg, rd, "HOLD_FILE=/nonexistent", NULL};
    const char *argv[] = {cushim_bin(), "run", "--json", json, "--", program("rt_prog"), "hold", NULL};
    pid_t run = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);
    kill(pid, SIGKILL);
    cr_expect_eq(wait_bg(run), 128 + SIGKILL);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "pid"), (uint64_t)pid);
    cr_expect(json_is_false(jpath(j, "exited")));
    cr_expect(json_is_null(jpath(j, "exit_code")));
    cr_expect_eq(json_integer_value(jpath(j, "exit_signal")), SIGKILL);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), (1 << 20) + 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), (4 << 20) + 4096);
    json_decref(j);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", segdir);
    struct run_result r;
    const char *ls[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, ls, NULL);
    cr_expect_str_eq(r.out, "0\n", "the dead process's segment was cleaned up");
    run_free(&r);
}

/* A program whose live segment was overwritten (another process of its user, a bad disk image)
 * writes a summary the run cannot read: said as such, not as "no CUDA memory activity", with
 * `summaries_unreadable` in the JSON and status 2 (a summary lost, as a --json lost). */
Test(run, a_corrupted_summary_is_said_unreadable)
{
    const char *segdir = fresh_dir("seg-corrupt"), *ready = fresh_dir("ready-corrupt");
    char json[700], seg[700], rd[700], hf[800], hold[700], path[900];
    snprintf(json, sizeof json, "%s/corrupt.json", test_dir());
    snprintf(hold, sizeof hold, "%s/go-corrupt", test_dir());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s", hold);
    const char *extra[] = {seg, rd, hf, NULL};
    const char *argv[] = {cushim_bin(), "run", "--json", json, "--", program("rt_prog"), "hold", NULL};
    char said[700];
    snprintf(said, sizeof said, "%s/corrupt.err", test_dir());
    pid_t run = spawn_bg_to(argv, sim_env(extra), said);
    pid_t pid;
    wait_ready(ready, 1, &pid);
    snprintf(path, sizeof path, "%s/cushim-%u-%d", segdir, (unsigned)geteuid(), (int)pid);
    int fd = open(path, O_WRONLY);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    char junk[4096];
    memset(junk, 0xa5, sizeof junk);
    cr_assert_eq(pwrite(fd, junk, sizeof junk, 64), (ssize_t)sizeof junk);
    close(fd);
    fd = open(hold, O_WRONLY | O_CREAT, 0600);
    close(fd);
    int status = wait_bg(run);
    char *out = slurp(said);
    cr_expect_eq(status, 2, "%s", out);
    char line[1200];
    snprintf(line, sizeof line, "\ncushim: no summary of `%s` could be read: 1 of this run's summaries is "
             "unreadable (said above)\n", program("rt_prog hold"));
    cr_expect(strstr(out, line) != NULL, "%s", out);
    cr_expect(strstr(out, "no CUDA memory activity") == NULL, "%s", out);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "summaries_unreadable"), 1);
    cr_expect_eq(json_array_size(jpath(j, "devices")), 0);
    cr_expect_eq(json_integer_value(jpath(j, "exit_code")), 0);
    json_decref(j);
    free(out);
}

Test(run, an_exec_keeps_the_top_level)
{
    struct run_result r;
    const char *argv[] = {"env", "SOME_VAR=1", program("rt_prog"), "peaks", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350, "env exec'd rt_prog: same process");
    cr_expect(json_is_true(jpath(j, "exited")));
    cr_expect_eq(json_array_size(jpath(j, "descendants")), 0);
    cr_expect(json_is_integer(jpath(j, "exit_code")) && json_integer_value(jpath(j, "exit_code")) == 0);
    cr_expect(json_is_null(jpath(j, "exit_signal")));
    json_decref(j);
    run_free(&r);
}

Test(run, a_forked_child_leaves_no_segment)
{
    const char *segdir = fresh_dir("seg-fork"), *ready = fresh_dir("ready-fork");
    char seg[700], rd[700], hold[800];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hold, sizeof hold, "HOLD_FILE=%s", ready);
    const char *extra[] = {preload_env(), seg, rd, hold, NULL};
    const char *argv[] = {program("rt_prog"), "fork", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", segdir);
    const char *ls[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, ls, NULL);
    cr_expect_str_eq(r.out, "0\n");
    run_free(&r);
}

Test(run, a_closed_stderr_pipe_keeps_the_status_and_the_json)
{
    struct run_result r;
    char json[700], cmd[4096];
    snprintf(json, sizeof json, "%s/pipe.json", test_dir());
    snprintf(cmd, sizeof cmd, "%s run --json %s -- sh -c '%s peaks >/dev/null; sleep 0.2; exit 3' 2>&1 | true;"
             " echo \"status=${PIPESTATUS[0]}\"", cushim_bin(), json, program("rt_prog"));
    const char *argv[] = {"bash", "-c", cmd, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_str_eq(r.out, "status=3\n");
    run_free(&r);
    json_t *j = json_load(json);
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.peak_bytes"), 350);
    json_decref(j);
}

Test(run, a_run_inside_a_run_hands_its_processes_to_the_outer_one)
{
    struct run_result r;
    char inner[800];
    snprintf(inner, sizeof inner, "%s/inner.%d.json", test_dir(), (int)getpid());
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", inner, "--", program("rt_prog"), "malloc", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "no CUDA memory activity") == NULL, "%s", r.err);
    /* The outer run: the inner cushim (no CUDA) at the top, the program among its descendants. */
    cr_expect_eq(json_array_size(jpath(j, "devices")), 0);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1);
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), 1 + MiB);
    json_decref(j);
    /* The inner run: the program at its top, as without the outer one. */
    json_t *in = json_load(inner);
    cr_expect_eq(jpath_u64(in, "devices.0.device.current_bytes"), 1 + MiB);
    cr_expect_eq(json_array_size(jpath(in, "descendants")), 0);
    json_decref(in);
    unlink(inner);
    run_free(&r);
}

Test(run, a_descendant_still_running_at_the_end_is_said)
{
    /* The program starts a CUDA process in the background and ends first: that process is not in
     * the summary, and the summary says so instead of claiming no CUDA activity. */
    const char *ready = fresh_dir("ready-orphan");
    char hold[700], cmd[2400], rd[800], hf[800];
    snprintf(hold, sizeof hold, "%s/go-orphan", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s", hold);
    snprintf(cmd, sizeof cmd, "%s hold >/dev/null 2>&1 & while [ -z \"$(ls %s)\" ]; do sleep 0.01; done",
             program("rt_prog"), ready);
    const char *extra[] = {rd, hf, NULL};
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: 1 process of this run that used CUDA was still running when `sh` ended: "
                            "not in this summary (`cushim ps` shows it)\n") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "no CUDA memory activity") == NULL, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "descendants_still_running"), 1);
    json_decref(j);
    run_free(&r);
    touch(hold); /* let it go */
    /* The same through a run inside the run: that run's live process is still running here too. */
    const char *ready2 = fresh_dir("ready-orphan-nested");
    char hold2[700], cmd2[2600], rd2[800], hf2[800];
    snprintf(hold2, sizeof hold2, "%s/go-orphan-nested", test_dir());
    snprintf(rd2, sizeof rd2, "READY_DIR=%s", ready2);
    snprintf(hf2, sizeof hf2, "HOLD_FILE=%s", hold2);
    snprintf(cmd2, sizeof cmd2, "%s run --quiet -- %s hold >/dev/null 2>&1 & while [ -z \"$(ls %s)\" ]; do sleep 0.01; done",
             cushim_bin(), program("rt_prog"), ready2);
    const char *extra2[] = {rd2, hf2, NULL};
    const char *argv2[] = {"sh", "-c", cmd2, NULL};
    j = run_under_cushim(&r, argv2, sim_env(extra2));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: 1 process of this run that used CUDA was still running when `sh` ended") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "no CUDA memory activity") == NULL, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "descendants_still_running"), 1);
    json_decref(j);
    run_free(&r);
    touch(hold2);
}

/* A copy the user made of a live segment of the run's process (a backup, `cp` to look at it) is
 * not that process: when the process ends with its exit report, the run reports that, not the
 * copy's frozen counters as "ended without its exit report", and leaves the copy where it is
 * (found by a fresh-user trial: the copy replaced the process's own report in the run's
 * directory, and was deleted). */
Test(run, a_copy_of_a_live_segment_is_not_its_process)
{
    const char *ready = fresh_dir("ready-copy"), *segdir = fresh_dir("seg-copy");
    char hold[700], cmd[3000], rd[800], hf[800], seg[800];
    snprintf(hold, sizeof hold, "%s/go-copy", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s", hold);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(cmd, sizeof cmd, "%s hold & while [ -z \"$(ls %s)\" ]; do sleep 0.01; done; "
             "cp %s/cushim-%u-$! %s/cushim-%u-$!.abcdef && touch %s; wait $!",
             program("rt_prog"), ready, segdir, (unsigned)getuid(), segdir, (unsigned)getuid(), hold);
    const char *extra[] = {rd, hf, seg, NULL};
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "without its exit report") == NULL, "%s", r.err);
    json_t *d = jpath(j, "descendants.0");
    cr_assert(d != NULL, "the hold process is the run's descendant: %s", r.err);
    cr_expect(json_is_true(json_object_get(d, "exited")), "its own exit report");
    cr_expect_neq(jpath_u64(d, "devices.0.untracked_sampled_ns"), 0, "sampled at its exit");
    cr_expect_null(jpath(j, "descendants.1"), "one descendant, not the copy as a second");
    json_decref(j);
    run_free(&r);
    DIR *dir = opendir(segdir);
    struct dirent *de;
    int copies = 0;
    while (dir && (de = readdir(dir)) != NULL)
        copies += strstr(de->d_name, ".abcdef") != NULL;
    if (dir)
        closedir(dir);
    cr_expect_eq(copies, 1, "the user's copy is left where it is");
}

/* --report=stderr: a process whose summary the run prints does not print it again; one that
 * outlives the run is not in its summary, and prints its own. */
Test(run, a_stderr_report_is_said_once_and_never_lost)
{
    const char *ready = fresh_dir("ready-outlive");
    char hold[700], cmd[2400], rd[800], hf[800], err_file[700];
    snprintf(hold, sizeof hold, "%s/go-outlive", test_dir());
    snprintf(err_file, sizeof err_file, "%s/outlive.err", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s", hold);
    snprintf(cmd, sizeof cmd, "%s hold >/dev/null 2>%s & while [ -z \"$(ls %s)\" ]; do sleep 0.01; done; %s malloc",
             program("rt_prog"), err_file, ready, program("rt_prog"));
    const char *extra[] = {rd, hf, NULL};
    const char *argv[] = {cushim_bin(), "run", "--report=stderr", "--", "sh", "-c", cmd, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    int n = 0;
    for (const char *p = r.err; (p = strstr(p, "rt_prog malloc`")) != NULL; p++)
        n++;
    cr_expect_eq(n, 1, "the descendant that ended in time, once (the run's summary):\n%s", r.err);
    cr_expect(strstr(r.err, "still running when `sh` ended") != NULL, "%s", r.err);
    run_free(&r);
    touch(hold);
    char *text = NULL;
    for (int i = 0; i < 3000; i++) {
        free(text);
        text = slurp(err_file);
        if (text && strstr(text, "rt_prog hold`"))
            break;
        usleep(10000);
    }
    cr_expect(text && strstr(text, "cushim: pid ") && strstr(text, "rt_prog hold`"),
              "the process that outlived the run printed its own report:\n%s", text ? text : "(none)");
    free(text);
    /* A quiet run inside a run that prints: the outer one says the summary, once. */
    const char *nested[] = {cushim_bin(), "run", "--", cushim_bin(), "run", "--quiet", "--", program("rt_prog"),
                            "malloc", NULL};
    const char *rep[] = {"CUSHIM_REPORT=stderr", NULL};
    run_cmd(&r, nested, sim_env(rep));
    cr_expect_eq(r.status, 0, "%s", r.err);
    n = 0;
    for (const char *p = r.err; (p = strstr(p, "rt_prog malloc`")) != NULL; p++)
        n++;
    cr_expect_eq(n, 1, "once:\n%s", r.err);
    cr_expect(strstr(r.err, "cushim: descendant pid ") != NULL, "from the outer run:\n%s", r.err);
    run_free(&r);
}

/* exit() while 16 threads still count: the run's copy of the segment is taken record by record
 * under the seqlock. Before, it was the live mapping written as it was: about one run in ten said
 * "counters_torn": true after a normal exit, some with the device figure and the device total one
 * allocation apart (found by a review helper). A race: 30 runs, each checked. */
Test(run, an_exit_while_other_threads_count_gives_a_consistent_summary)
{
    for (int i = 0; i < 30; i++) {
        struct run_result r;
        const char *argv[] = {program("rt_prog"), "exit_while_busy", NULL};
        json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
        cr_assert_eq(r.status, 0, "run %d: %s", i, r.err);
        cr_expect(json_is_true(jpath(j, "exited")), "run %d", i);
        cr_expect(json_is_false(jpath(j, "counters_torn")), "run %d: a normal exit reported torn counters", i);
        uint64_t dev = jpath_u64(j, "devices.0.device.current_bytes");
        cr_expect_eq(dev, jpath_u64(j, "devices.0.device_total.current_bytes"), "run %d", i);
        cr_expect_geq(dev, MiB, "run %d: the 1 MiB kept", i);
        cr_expect_eq((dev - MiB) % 4096, 0, "run %d: whole 4 KiB allocations", i);
        json_decref(j);
        run_free(&r);
    }
}

Test(run, stale_run_variables_are_replaced_not_reported)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_RUN_ID=foo", "CUSHIM_RUN_TOP=abc", "CUSHIM_RUN_CHECKED=garbage",
                           "CUSHIM_RUN_DIR=relative", NULL};
    const char *argv[] = {"sh", "-c", "echo \"top=$CUSHIM_RUN_TOP id=$CUSHIM_RUN_ID dir=$CUSHIM_RUN_DIR\"", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    cr_expect_str_eq(r.err, "cushim: no CUDA memory activity in "
                            "`sh -c echo \"top=$CUSHIM_RUN_TOP id=$CUSHIM_RUN_ID dir=$CUSHIM_RUN_DIR\"` "
                            "or its descendants (none allocated, or CUDA did not start)\n");
    /* The program sees the run's own values: its pid, a hexadecimal id, a cushim-run.* directory. */
    long top = 0;
    char id[32] = "", dir[600] = "";
    cr_assert_eq(sscanf(r.out, "top=%ld id=%31s dir=%599s", &top, id, dir), 3, "%s", r.out);
    cr_expect_gt(top, 1);
    cr_expect(strspn(id, "0123456789abcdef") == strlen(id) && strlen(id) >= 1, "id %s", id);
    cr_expect(dir[0] == '/' && strstr(dir, "/cushim-run.") != NULL, "dir %s", dir);
    run_free(&r);
}

Test(run, the_shim_writes_run_copies_only_into_a_run_directory)
{
    struct run_result r;
    char rd[600];
    const char *dir = fresh_dir("not-a-run-dir"); /* 01777, not cushim-run.* */
    snprintf(rd, sizeof rd, "CUSHIM_RUN_DIR=%s", dir);
    const char *extra[] = {preload_env(), rd, NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    char want[1024];
    snprintf(want, sizeof want, "CUSHIM_RUN_DIR=\"%s\" is not a directory made by `cushim run` "
             "(cushim-run.*, yours, mode 0700): summary not written there\n", dir);
    cr_expect(strstr(r.err, want) != NULL, "%s", r.err);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    char n[32] = "";
    cr_assert(fgets(n, sizeof n, p));
    pclose(p);
    cr_expect_str_eq(n, "0\n", "nothing written into %s", dir);
    run_free(&r);
    /* Bad values for the other run variables are reported and ignored. */
    const char *extra2[] = {preload_env(), "CUSHIM_RUN_TOP=-5", "CUSHIM_RUN_ID=zz", NULL};
    const char *argv2[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv2, sim_env(extra2));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_RUN_ID=\"zz\" is not 1 to 16 hexadecimal digits; using the default (none)\n"
                            "cushim: CUSHIM_RUN_TOP=\"-5\" is not a process id (1 to 2147483647); using the default (none)\n");
    run_free(&r);    /* Past the field's 15 bytes: still not a process id (a bad-input trial: "not a string of at
     * most 15 bytes"). */
    const char *extra3[] = {preload_env(), "CUSHIM_RUN_TOP=18446744073709551616", NULL};
    run_cmd(&r, argv2, sim_env(extra3));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_RUN_TOP=\"18446744073709551616\" is not a process id (1 to 2147483647); "
                            "using the default (none)\n");
    run_free(&r);
}

Test(run, wrong_phase_calls_start_nothing)
{
    /* cushim_set_phase(5), cushim_push_phase(99) and a pop with nothing pushed return -1 and
     * leave the shim unstarted: no segment, no report. */
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=stderr", NULL};
    const char *argv[] = {program("rt_prog"), "api_misuse", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "set=-1 push=-1 pop=-1\n");
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

/* A launched program that used no CUDA and was killed by a signal: "exited": false, as for one
 * with a segment (docs/SUMMARY-JSON.md). */
Test(run, a_killed_launcher_has_not_exited)
{
    struct run_result r;
    const char *dir = fresh_dir("killed-json");
    char json[700];
    snprintf(json, sizeof json, "%s/k.json", dir);
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", "sh", "-c", "kill -TERM $$", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 128 + SIGTERM);
    run_free(&r);
    char *text = slurp(json);
    cr_assert(text);
    cr_expect(strstr(text, "\"exited\": false,\n") != NULL, "%s", text);
    cr_expect(strstr(text, "\"uid\": null,\n") != NULL, "no segment, no uid known:\n%s", text);
    free(text);
}

/* With CUSHIM_DISABLE nothing is counted: the JSON says so, so that its empty `devices` is not
 * read as "this program used no CUDA". */
Test(run, a_disabled_run_says_so_in_its_json)
{
    struct run_result r;
    const char *dir = fresh_dir("disabled-json");
    char json[700];
    snprintf(json, sizeof json, "%s/d.json", dir);
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--disable", "--json", json, "--", program("rt_prog"),
                          "malloc", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "", "quiet: nothing to say");
    run_free(&r);
    /* With --quiet too, a budget, offload or spill asked for is not dropped silently (found by
     * a fresh-user trial). */
    const char *quiet_spill[] = {cushim_bin(), "run", "--quiet", "--disable", "--spill", "--", program("rt_prog"),
                                 "malloc", NULL};
    run_cmd(&r, quiet_spill, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: counting is disabled (CUSHIM_DISABLE): no device limit, offload or spill\n");
    run_free(&r);
    char *text = slurp(json);
    cr_assert(text);
    cr_expect(strstr(text, "\"devices\": [],\n") != NULL, "%s", text);
    cr_expect(strstr(text, "\"counting_disabled\": true,\n") != NULL, "%s", text);
    free(text);
    /* Without --quiet it says so, and that a budget given with it does not apply. */
    const char *told[] = {cushim_bin(), "run", "--disable", "--device-limit", "1MiB", "--", program("rt_prog"),
                          "malloc", NULL};
    run_cmd(&r, told, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: counting is disabled (CUSHIM_DISABLE): no summary, and no device limit, offload "
                            "or spill\n") != NULL, "%s", r.err);
    run_free(&r);
    const char *counted[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, counted, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    text = slurp(json);
    cr_expect(strstr(text, "\"counting_disabled\": false,\n") != NULL, "%s", text);
    free(text);
}

/* read_ns under `cushim run`: a process's final counters are of its exit (when it wrote them),
 * not of the run's later read (found by a review); a program that used no CUDA itself has none
 * (null); and its summary says "no device used" in words. */
Test(run, read_ns_of_a_final_summary_is_its_exit)
{
    char body[1200], json[600];
    snprintf(body, sizeof body, "%s malloc >/dev/null; sleep 1", program("rt_prog"));
    snprintf(json, sizeof json, "%s/read-ns.json", test_dir());
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t before = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", "sh", "-c", body, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t after = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    json_t *j = json_load(json);
    cr_assert(j);
    cr_expect(json_is_null(jpath(j, "read_ns")), "sh used no CUDA: no counters read");
    uint64_t exit_ns = jpath_u64(j, "descendants.0.read_ns");
    cr_expect(exit_ns > before && exit_ns + 500000000u < after,
              "read_ns %llu is the exit, a second before the run's end (%llu..%llu)",
              (unsigned long long)exit_ns, (unsigned long long)before, (unsigned long long)after);
    /* After the samples taken at that exit, which the counters read hold (found by a fresh-user
     * trial: the copy's time as a write stamps it lagged them by up to a clock tick). */
    uint64_t sampled = jpath_u64(j, "descendants.0.devices.0.untracked_sampled_ns");
    cr_expect(sampled > before && exit_ns >= sampled, "read_ns %llu, untracked sampled at %llu",
              (unsigned long long)exit_ns, (unsigned long long)sampled);
    json_decref(j);
    unlink(json);
    /* A process under cushim that used no device: said in words. */
    char ready[700], hold[700], want[800];
    snprintf(ready, sizeof ready, "READY_DIR=%s", fresh_dir("ready-no-device"));
    snprintf(hold, sizeof hold, "HOLD_FILE=%s", test_dir()); /* exists: no wait */
    const char *extra[] = {ready, hold, NULL};
    const char *api[] = {cushim_bin(), "run", "--", program("rt_prog"), "hold_api", NULL};
    run_cmd(&r, api, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "`%s hold_api`: no device used, phase run\n", program("rt_prog"));
    cr_expect(strstr(r.err, want) != NULL, "%s", r.err);
    run_free(&r);
}
