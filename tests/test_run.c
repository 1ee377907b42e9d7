/* `cushim run`: non-CUDA programs unchanged, exit statuses, signals, descendants, LD_PRELOAD,
 * configuration errors, --help. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/options.h"
#include "harness.h"

#define MiB (1024ull * 1024)

static int run_status(const char *const *argv, const char *const *env, struct run_result *r)
{
    const char *full[32] = {cushim_bin(), "run", "--"};
    size_t n = 3;
    for (size_t i = 0; argv[i]; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    run_cmd(r, full, env);
    return r->status;
}

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
    const char *term[] = {"sh", "-c", "kill -TERM $$", NULL};
    cr_expect_eq(run_status(term, sim_env(NULL), &r), 128 + SIGTERM);
    cr_expect(strstr(r.err, "killed by signal 15") != NULL, "%s", r.err);
    run_free(&r);
    const char *segv[] = {"sh", "-c", "kill -SEGV $$", NULL};
    cr_expect_eq(run_status(segv, sim_env(NULL), &r), 128 + SIGSEGV);
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
                            "No such file or directory\n");
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
    for (int i = 0; i < 200 && access(script, F_OK) != 0; i++)
        usleep(20000);
    cr_assert_eq(access(script, F_OK), 0, "program did not start");
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
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

Test(run, bad_configuration_value_is_one_line_and_the_program_runs)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_LOG=loud", NULL};
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect(strstr(r.err, "cushim: CUSHIM_LOG=\"loud\" is not one of off|error|warn|info|debug; "
                            "using the default \"warn\"\n") == r.err, "%s", r.err);
    run_free(&r);

    /* With plain LD_PRELOAD, the shim itself reports it, once per process. */
    const char *extra2[] = {preload_env(), "CUSHIM_OFFLOAD_MIN=12XB", NULL};
    const char *argv2[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv2, sim_env(extra2));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_OFFLOAD_MIN=\"12XB\" is not a size (e.g. 512M, 64MiB, "
                            "1g, 4096); using the default \"64MiB\"\n");
    run_free(&r);
}

Test(run, help_lists_every_variable_with_its_default)
{
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--help", NULL};
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0);
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        const struct cushim_option_info *o = &cushim_option_table[i];
        if (strncmp(o->variable, "CUSHIM_RUN_", 11) == 0)
            continue;
        char line[256];
        snprintf(line, sizeof line, "%s", o->variable);
        cr_expect(strstr(r.out, line) != NULL, "--help lacks %s", o->variable);
        /* Its own line's default: "  --flag  VARIABLE  default VALUE" (before, any occurrence of
         * the value anywhere passed; found by a test audit helper). */
        snprintf(line, sizeof line, " %-22s default %s\n", o->variable, *o->def ? o->def : "(empty)");
        cr_expect(strstr(r.out, line) != NULL, "--help lacks \"%s\"", line);
    }
    run_free(&r);
}

Test(run, usage_errors_exit_2)
{
    struct run_result r;
    const char *a1[] = {cushim_bin(), "run", NULL};
    run_cmd(&r, a1, NULL);
    cr_expect_eq(r.status, 2);
    run_free(&r);
    const char *a2[] = {cushim_bin(), "run", "--no-such-flag", "--", "true", NULL};
    run_cmd(&r, a2, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "unknown option \"--no-such-flag\"") != NULL, "%s", r.err);
    run_free(&r);
    const char *a3[] = {cushim_bin(), "frobnicate", NULL};
    run_cmd(&r, a3, NULL);
    cr_expect_eq(r.status, 2);
    run_free(&r);
    /* A value flag followed by "--" is missing its value; "--" is not taken as the value. */
    const char *a4[] = {cushim_bin(), "run", "--offload-min", "--", "true", NULL};
    run_cmd(&r, a4, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --offload-min needs a value (see cushim run --help)\n");
    run_free(&r);
    const char *a5[] = {cushim_bin(), "run", "--json", "--", "true", NULL};
    run_cmd(&r, a5, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --json needs a FILE\n");
    run_free(&r);
    /* Paths given as options must be usable before the program runs. */
    const char *a9[] = {cushim_bin(), "run", "--segment-dir", "/nonexistent-dir", "--report=/nonexistent-dir/r",
                        "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a9, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    cr_expect_str_eq(r.err, "cushim: --segment-dir \"/nonexistent-dir\": /nonexistent-dir is not a directory "
                            "(No such file or directory)\n"
                            "cushim: --report \"/nonexistent-dir/r\": /nonexistent-dir is not a directory "
                            "(No such file or directory)\n");
    run_free(&r);
    /* Every command's value options take `--name VALUE` and `--name=VALUE`, and say the same
     * when the value is missing. */
    static const struct {
        const char *args[6], *err;
        int status;
    } forms[] = {
        {{"top", "--interval", NULL}, "cushim: --interval needs SECONDS\n", 2},
        {{"top", "--interval=0.1", "--iterations=1", "--batch", NULL}, "", 0},
        {{"stat", "--output", NULL}, "cushim: --output needs a FILE\n", 2},
        {{"serve", "--listen", NULL}, "cushim: --listen needs ADDR:PORT\n", 2},
        {{"reset-peak", "1", "--device", NULL}, "cushim: --device needs a device ordinal\n", 2},
        {{"reset-peak", "1", "--device=x", NULL}, "cushim: --device needs a device ordinal 0..63 (got \"x\")\n", 2},
        /* digits only: strtol took these as device 0 */
        {{"reset-peak", "1", "--device= +0", NULL}, "cushim: --device needs a device ordinal 0..63 (got \" +0\")\n", 2},
        {{"reset-peak", "1", "--device=-0", NULL}, "cushim: --device needs a device ordinal 0..63 (got \"-0\")\n", 2},
        /* top's own short forms */
        {{"top", "-d", "0.1", "-n", "1", NULL}, "", 0},
        /* each named as typed */
        {{"top", "-n", "0", NULL}, "cushim: -n \"0\" is not a whole number from 1 to 9223372036854775807\n", 2},
        {{"top", "-d", "0x1", NULL}, "cushim: -d \"0x1\" is not a number of seconds in 0.1..3600\n", 2},
        {{"top", "--iterations", "+1", NULL}, "cushim: --iterations \"+1\" is not a whole number from 1 to 9223372036854775807\n", 2},
        {{"phase", NULL}, "cushim: phase needs a PID and a phase (usage: cushim phase PID compile|run)\n", 2},
        {{"phase", "1", NULL}, "cushim: phase needs a phase after the PID: compile or run (usage: cushim phase PID "
                               "compile|run)\n", 2},
        {{"phase", "1", "run", "x", NULL}, "cushim: unexpected argument \"x\" (usage: cushim phase PID compile|run)\n", 2},
        {{"run", "--report-format=json", "--", "/bin/true", NULL},
         "cushim: --report-format is the format of --report (each process's own report); the run's summary is "
         "text on stderr, or JSON with --json FILE\n", 2},
        /* Arguments are echoed on one line, their control characters escaped. */
        {{"stat", "12\n3", NULL}, "cushim: \"12\\n3\" is not a process id (a number from 1 to 2147483647)\n", 2},
        {{"stat", "--x\033[2J\xff", NULL}, "cushim: unknown option \"--x\\x1b[2J\\xff\" for stat (see cushim stat --help)\n", 2},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const char *argv[8] = {cushim_bin()};
        for (int a = 0; forms[k].args[a]; a++)
            argv[a + 1] = forms[k].args[a];
        run_cmd(&r, argv, NULL);
        cr_expect_eq(r.status, forms[k].status, "%s %s", forms[k].args[0], forms[k].args[1]);
        cr_expect_str_eq(r.err, forms[k].err, "%s %s", forms[k].args[0], forms[k].args[1]);
        run_free(&r);
    }
    /* A boolean option alone is a switch. */
    const char *a8[] = {cushim_bin(), "run", "--quiet", "--spill", "--disable=0", "--", "sh", "-c",
                        "echo $CUSHIM_SPILL $CUSHIM_DISABLE", NULL};
    run_cmd(&r, a8, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "1 0\n");
    run_free(&r);
    const char *a7[] = {cushim_bin(), "run", "--json", "", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a7, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "refused before the program runs");
    cr_expect_str_eq(r.err, "cushim: cannot write --json \"\": No such file or directory; nothing was run\n");
    run_free(&r);
    /* A bad value typed as a flag is named by the flag and stops the run (the same value in the
     * environment only warns: a_child_that_sets_its_own_bad_value_reports_it). */
    const char *a6[] = {cushim_bin(), "run", "--offload-min", "foo", "--log=loud", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a6, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    cr_expect_str_eq(r.err, "cushim: --log \"loud\" is not one of off|error|warn|info|debug (see cushim run --help)\n"
                            "cushim: --offload-min \"foo\" is not a size (e.g. 512M, 64MiB, 1g, 4096) "
                            "(see cushim run --help)\n");
    run_free(&r);
}

/* A value that is an option ("--json --quiet") is refused, not taken as a file named --quiet
 * (found by an attack helper); name=--VALUE still gives such a value. */
Test(run, an_option_is_not_taken_as_a_value)
{
    struct run_result r;
    const char *a1[] = {cushim_bin(), "run", "--json", "--quiet", "--", "/bin/true", NULL};
    run_cmd(&r, a1, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --json needs a value, not the option \"--quiet\" (for a value that starts "
                            "with --, write --json=--quiet)\n");
    run_free(&r);
    const char *a2[] = {cushim_bin(), "run", "--report", "--json", "x.json", "--", "/bin/true", NULL};
    run_cmd(&r, a2, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --report needs a value, not the option \"--json\" (for a value that starts "
                            "with --, write --report=--json)\n");
    run_free(&r);
    const char *a3[] = {cushim_bin(), "stat", "--output", "--json", NULL};
    run_cmd(&r, a3, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --output needs a value, not the option \"--json\" (for a value that starts "
                            "with --, write --output=--json)\n");
    run_free(&r);
}

Test(run, report_path_with_pid)
{
    struct run_result r;
    char rep[700], path[700];
    snprintf(rep, sizeof rep, "CUSHIM_REPORT=%s/rep.%%p.json", test_dir());
    const char *extra[] = {preload_env(), rep, "CUSHIM_REPORT_FORMAT=json", NULL};
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    pid_t pid = spawn_bg(argv, sim_env(extra));
    cr_assert_eq(wait_bg(pid), 0);
    snprintf(path, sizeof path, "%s/rep.%d.json", test_dir(), (int)pid);
    json_t *j = json_load(path);
    cr_expect_eq(jpath_u64(j, "pid"), (uint64_t)pid);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    json_decref(j);
    (void)r;
}

/* A report name whose %p, expanded, makes it longer than the value itself could be: written
 * under its whole name (before, the expansion was cut at 1055 bytes, which named another file). */
Test(run, report_path_with_many_pids_is_never_cut)
{
    /* Directories down to exactly 945 bytes, then a name of 35 %p: 1022 bytes, the longest value
     * (CUSHIM_PATH_MAX 1024 with its NUL) but one; any pid of 3 digits or more makes it 1057 or
     * more once expanded. */
    char dir[1024], value[1100], path[2048], rep[1200];
    snprintf(dir, sizeof dir, "%s/long", test_dir());
    cr_assert_eq(mkdir(dir, 0700), 0);
    while (strlen(dir) < 945) {
        size_t n = strlen(dir), add = 945 - n - 1 > 200 ? 200 : 945 - n - 1;
        dir[n] = '/';
        memset(dir + n + 1, 'd', add);
        dir[n + 1 + add] = '\0';
        cr_assert_eq(mkdir(dir, 0700), 0, "%s: %s", dir, strerror(errno));
    }
    cr_assert_eq(strlen(dir), 945);
    int n = snprintf(value, sizeof value, "%s/r", dir);
    for (int i = 0; i < 35; i++)
        n += snprintf(value + n, sizeof value - (size_t)n, "%%p");
    n += snprintf(value + n, sizeof value - (size_t)n, ".json");
    cr_assert_eq(n, 1022);
    snprintf(rep, sizeof rep, "CUSHIM_REPORT=%s", value);
    const char *extra[] = {preload_env(), rep, "CUSHIM_REPORT_FORMAT=json", NULL};
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    pid_t pid = spawn_bg(argv, sim_env(extra));
    cr_assert_eq(wait_bg(pid), 0);
    cr_assert_gt(pid, 99, "a pid of 3 digits at least");
    n = snprintf(path, sizeof path, "%s/r", dir);
    for (int i = 0; i < 35; i++)
        n += snprintf(path + n, sizeof path - (size_t)n, "%d", (int)pid);
    snprintf(path + n, sizeof path - (size_t)n, ".json");
    cr_assert_gt(strlen(path), 1056);
    json_t *j = json_load(path);
    cr_expect_eq(jpath_u64(j, "pid"), (uint64_t)pid);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    json_decref(j);
}

/* A file size limit (ulimit -f) below the segment and the report: the program runs on (before,
 * SIGXFSZ from sizing the segment killed it), counting in private memory, and each failed write
 * says so in one line. */
Test(run, a_file_size_limit_never_kills_the_program)
{
    struct run_result r;
    char rep[700], line[900];
    snprintf(rep, sizeof rep, "CUSHIM_REPORT=%s/fsize.json", test_dir());
    const char *extra[] = {preload_env(), rep, "CUSHIM_REPORT_FORMAT=json", NULL};
    const char *argv[] = {"/bin/sh", "-c", "ulimit -f 1 && exec \"$0\" malloc", program("rt_prog"), NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, " (File too large: the file size limit, ulimit -f, is below its size): "
                            "counting in private memory; `cushim stat` will not see this process\n") != NULL,
              "%s", r.err);
    snprintf(line, sizeof line, "] error: cannot write CUSHIM_REPORT=\"%s/fsize.json\": File too large\n", test_dir());
    cr_expect(strstr(r.err, line) != NULL, "%s", r.err);
    run_free(&r);
    /* Under cushim run: neither a segment nor the run's copy can be made; the process says its
     * summary itself, and the run says why it has none. */
    const char *run[] = {"/bin/sh", "-c", "ulimit -f 10 && exec \"$0\" run -- \"$1\" malloc", cushim_bin(),
                         program("rt_prog"), NULL};
    run_cmd(&r, run, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "File too large; the summary is said here instead (no live segment either)\n") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "    device               1.00 MiB     1.00 GiB          4          2        0\n") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "cushim: no summary of `") != NULL &&
              strstr(r.err, " malloc` reached the run: the file size limit (ulimit -f) is below a segment's ") != NULL,
              "%s", r.err);
    run_free(&r);
    /* A quiet run: nothing says the summary, and the message does not promise it (it did). */
    const char *quiet[] = {"/bin/sh", "-c", "ulimit -f 10 && exec \"$0\" run --quiet -- \"$1\" malloc", cushim_bin(),
                           program("rt_prog"), NULL};
    run_cmd(&r, quiet, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "File too large; the summary is lost (no live segment either, and the run is quiet)\n") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "said here instead") == NULL, "%s", r.err);
    cr_expect(strstr(r.err, "    device ") == NULL, "%s", r.err);
    run_free(&r);
}

/* A log at the file size limit whose fallback, stderr, is a pipe nobody reads: both writes fail
 * (EFBIG, then EPIPE), and both signals they raised are taken away (before, only the last
 * error's was, and SIGXFSZ killed the program; found by a review helper). */
Test(run, two_failed_log_writes_never_kill_the_program)
{
    struct run_result r;
    char log[700], st[700], le[800];
    snprintf(log, sizeof log, "%s/full.log", test_dir());
    snprintf(st, sizeof st, "%s/full.status", test_dir());
    FILE *f = fopen(log, "w");
    cr_assert(f != NULL);
    for (int i = 0; i < 2048; i++)
        fputc('x', f);
    fclose(f);
    snprintf(le, sizeof le, "CUSHIM_LOG_FILE=%s", log);
    const char *extra[] = {le, "CUSHIM_LOG=info", NULL};
    const char *argv[] = {"/bin/sh", "-c",
                          "ulimit -f 1; (LD_PRELOAD=\"$2\" \"$0\" malloc 2>&1 >/dev/null; echo \"status=$?\" >\"$1\") | true",
                          program("rt_prog"), st, shim_lib(), NULL};
    run_cmd(&r, argv, sim_env(extra));
    char *status = slurp(st);
    cr_expect(status != NULL && strcmp(status, "status=0\n") == 0, "%s", status ? status : "(no status)");
    free(status);
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

/* The report and the log in the same file: the report comes after the log's lines (before, it
 * emptied the file and the log was lost; found by an attack helper). */
Test(run, a_report_in_the_log_file_keeps_the_log)
{
    struct run_result r;
    char file[700];
    snprintf(file, sizeof file, "%s/one.log", test_dir());
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--log", "info", "--log-file", file, "--report", file,
                          "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    char *text = slurp(file);
    cr_assert(text != NULL);
    char *started = strstr(text, "] info: started: segment ");
    char *report = strstr(text, "    device               1.00 MiB     1.00 GiB          4          2        0\n");
    cr_expect(started != NULL && report != NULL && started < report, "%s", text);
    free(text);
    run_free(&r);
}

/* /dev/tty with no controlling terminal: open(2) says ENXIO, which is not "a FIFO with no
 * reader" (said before; found by an attack helper). */
Test(run, a_log_on_dev_tty_without_a_terminal_says_why)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG_FILE=/dev/tty", "CUSHIM_LOG=info", NULL};
    const char *argv[] = {"setsid", "-w", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "] error: cannot open CUSHIM_LOG_FILE=\"/dev/tty\": No such device or address; "
                            "logging to stderr\n") != NULL, "%s", r.err);
    run_free(&r);
}

Test(run, report_env_with_plain_ld_preload)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=stderr", NULL};
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.err, "cushim: pid ") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "    device                  350 B        350 B          4          2        0\n") != NULL,
              "%s", r.err);
    run_free(&r);
}

/* A program killed by a signal writes no exit report: its live segment gives its last counters. */
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

Test(run, an_exec_keeps_the_top_level)
{
    struct run_result r;
    const char *argv[] = {"env", "SOME_VAR=1", program("rt_prog"), "peaks", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350, "env exec'd rt_prog: same process");
    cr_expect(json_is_true(jpath(j, "exited")));
    cr_expect_eq(json_array_size(jpath(j, "descendants")), 0);
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

Test(run, an_unwritable_json_path_stops_before_running)
{
    struct run_result r;
    char marker[700], cmd[900];
    snprintf(marker, sizeof marker, "%s/ran-anyway", test_dir());
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    const char *argv[] = {cushim_bin(), "run", "--json", "/nonexistent/dir/x.json", "--", "sh", "-c", cmd, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: cannot write --json \"/nonexistent/dir/x.json\": No such file or directory; nothing was run\n");
    cr_expect_neq(access(marker, F_OK), 0, "the program must not have run");
    run_free(&r);
    const char *missing[] = {cushim_bin(), "run", "--", "/nonexistent/program", NULL};
    run_cmd(&r, missing, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"/nonexistent/program\": No such file or directory\n");
    run_free(&r);
    /* A value given to a switch with a space is taken as the program: the message says why. */
    const char *stray[] = {cushim_bin(), "run", "--spill", "on", "--", "true", NULL};
    run_cmd(&r, stray, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"on\": No such file or directory (the options end at the "
                            "\"--\" after it, so it was taken as the program; a switch takes its value "
                            "with '=', e.g. --spill=on)\n");
    run_free(&r);
    const char *dir[] = {cushim_bin(), "run", "--", "/tmp", NULL};
    run_cmd(&r, dir, sim_env(NULL));
    cr_expect_eq(r.status, 126);
    cr_expect_str_eq(r.err, "cushim: cannot run \"/tmp\": it is a directory\n");
    run_free(&r);
}

Test(run, a_child_that_sets_its_own_bad_value_reports_it)
{
    struct run_result r;
    /* cushim run checked the values it was given; a process under it that sets another value
     * is the only one that can report it. */
    const char *argv[] = {"sh", "-c", "CUSHIM_SPILL=garbage /bin/echo ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(NULL), &r), 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_SPILL=\"garbage\" is not a boolean "
                            "(1/0/true/false/yes/no/on/off); using the default \"0\"\n"
                            "cushim: no CUDA memory activity in `sh -c CUSHIM_SPILL=garbage /bin/echo ran` "
                            "or its descendants (none allocated, or CUDA did not start: is a driver, libcuda.so.1, on the library path?)\n");
    run_free(&r);
    /* The launcher's own bad value is said once, not again by each process under it. */
    const char *extra[] = {"CUSHIM_SPILL=garbage", NULL};
    const char *argv2[] = {"sh", "-c", "/bin/echo ran; /bin/echo again", NULL};
    cr_expect_eq(run_status(argv2, sim_env(extra), &r), 0);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_SPILL=\"garbage\" is not a boolean "
                            "(1/0/true/false/yes/no/on/off); using the default \"0\"\n"
                            "cushim: no CUDA memory activity in `sh -c /bin/echo ran; /bin/echo again` "
                            "or its descendants (none allocated, or CUDA did not start: is a driver, libcuda.so.1, on the library path?)\n");
    run_free(&r);
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
    for (int i = 0; i < 500; i++) {
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

Test(run, cushim_library_names_the_preloaded_library)
{
    struct run_result r;
    char lib[1200];
    snprintf(lib, sizeof lib, "CUSHIM_LIBRARY=%s", shim_lib());
    const char *extra[] = {lib, "LD_PRELOAD", NULL};
    const char *argv[] = {"sh", "-c", "echo $LD_PRELOAD", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    char want[1200];
    snprintf(want, sizeof want, "%s\n", shim_lib());
    cr_expect_str_eq(r.out, want);
    cr_expect(strstr(r.err, "not a cushim variable") == NULL, "a known variable:\n%s", r.err);
    run_free(&r);
    const char *bad[] = {cushim_bin(), "run", "--library", "/nonexistent/libcushim.so", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, bad, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    cr_expect_str_eq(r.err, "cushim: --library \"/nonexistent/libcushim.so\": No such file or directory; "
                            "expected the path of the shim library, libcushim.so\n");
    run_free(&r);
    /* A relative path is taken from the current directory, and the message says which. */
    const char *rel[] = {cushim_bin(), "run", "--library", "no/such/libcushim.so", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, rel, NULL);
    char cwd[1024], want_rel[1400];
    cr_assert(getcwd(cwd, sizeof cwd));
    snprintf(want_rel, sizeof want_rel, "cushim: --library \"no/such/libcushim.so\": No such file or directory "
             "(relative to %s); expected the path of the shim library, libcushim.so\n", cwd);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, want_rel);
    run_free(&r);
    /* Another library, or a file that is none, would run the program uncounted: refused. */
    char other_lib[1200], want_other[1600];
    snprintf(other_lib, sizeof other_lib, "--library=%s/libcuda.so.1", sim_libdir());
    const char *other[] = {cushim_bin(), "run", other_lib, "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, other, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program did not run");
    snprintf(want_other, sizeof want_other, "cushim: --library \"%s/libcuda.so.1\" is not libcushim.so (an ELF "
             "shared object without cushim's marker); expected the path of the shim library, e.g. "
             "build/shim/libcushim.so\n", sim_libdir());
    cr_expect_str_eq(r.err, want_other);
    run_free(&r);
    /* A FIFO is refused at once (never opened for a blocking read); copies of the library that
     * ld.so could not preload (cut short, another word size) are refused too. */
    const char *dir = fresh_dir("libraries");
    static const struct {
        const char *name, *why;
    } copies[] = {
        {"fifo", "not a regular file"},
        {"cut.so", "an ELF shared object cut short: a segment lies past its end"},
        {"class32.so", "an ELF file of another word size or byte order than this cushim"},
    };
    char *lib_bytes = NULL;
    size_t lib_len = 0;
    FILE *lf = fopen(shim_lib(), "rb");
    cr_assert(lf);
    FILE *mem = open_memstream(&lib_bytes, &lib_len);
    int ch;
    while ((ch = fgetc(lf)) != EOF)
        fputc(ch, mem);
    fclose(mem);
    fclose(lf);
    for (size_t k = 0; k < sizeof copies / sizeof copies[0]; k++) {
        char path[800], flag[820], want_copy[1400];
        snprintf(path, sizeof path, "%s/%s", dir, copies[k].name);
        if (k == 0) {
            cr_assert_eq(mkfifo(path, 0600), 0);
        } else {
            FILE *out = fopen(path, "wb");
            if (k == 1) {
                /* Cut just past the marker, inside the loaded segment that holds it. */
                const char *m = memmem(lib_bytes, lib_len, "cushim-preload-library ", 23);
                cr_assert(m);
                fwrite(lib_bytes, 1, (size_t)(m - lib_bytes) + 64, out);
            } else {
                lib_bytes[4] = 1; /* EI_CLASS = ELFCLASS32 */
                fwrite(lib_bytes, 1, lib_len, out);
            }
            fclose(out);
        }
        snprintf(flag, sizeof flag, "--library=%s", path);
        const char *try[] = {"timeout", "10", cushim_bin(), "run", flag, "--", "/bin/echo", "ran", NULL};
        run_cmd(&r, try, NULL);
        cr_expect_eq(r.status, 2, "%s", copies[k].name);
        cr_expect_str_eq(r.out, "", "%s: the program did not run", copies[k].name);
        snprintf(want_copy, sizeof want_copy, "cushim: --library \"%s\" is not libcushim.so (%s); expected the path "
                 "of the shim library, e.g. build/shim/libcushim.so\n", path, copies[k].why);
        cr_expect_str_eq(r.err, want_copy);
        run_free(&r);
    }
    free(lib_bytes);
    char env[64] = "CUSHIM_LIBRARY=/etc/hostname";
    const char *extra3[] = {env, NULL};
    const char *argv3[] = {cushim_bin(), "run", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, argv3, sim_env(extra3));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_LIBRARY=\"/etc/hostname\" is not libcushim.so (not an ELF shared object); "
                            "expected the path of the shim library, e.g. build/shim/libcushim.so\n");
    run_free(&r);
}

/* ld.so splits LD_PRELOAD at spaces and colons: a shim under "My Projects" preloaded nothing, and
 * the run said it saw no CUDA activity and exited 0. Now it is refused before anything runs. */
Test(run, a_library_path_ld_preload_cannot_hold_is_refused)
{
    static const char *const dirs[] = {"my proj", "a:b"};
    static const char *const what[] = {"space", "colon"};
    for (int k = 0; k < 2; k++) {
        char dir[700], copy[800], cmd[2000], flag[820], want[1400];
        snprintf(dir, sizeof dir, "%s/%s", fresh_dir("odd-lib"), dirs[k]);
        snprintf(copy, sizeof copy, "%s/libcushim.so", dir);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", dir, shim_lib(), copy);
        cr_assert_eq(system(cmd), 0);
        snprintf(flag, sizeof flag, "--library=%s", copy);
        const char *argv[] = {cushim_bin(), "run", flag, "--", "/bin/echo", "ran", NULL};
        struct run_result r;
        run_cmd(&r, argv, sim_env(NULL));
        cr_expect_eq(r.status, 2);
        cr_expect_str_eq(r.out, "", "the program did not run");
        snprintf(want, sizeof want, "cushim: the shim library's path \"%s\" has a %s, which LD_PRELOAD "
                 "cannot hold (the loader splits its list there); put cushim (or a copy of libcushim.so, "
                 "given with --library) under a path without spaces or colons; nothing was run\n",
                 copy, what[k]);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
    }
}

/* A segment directory nothing can be created in, whose mode lets root through access(2): before,
 * the program ran uncounted by ps/stat/top; now the run stops before it (exit 2). */
Test(run, a_segment_directory_root_cannot_create_in_stops_the_run)
{
    static const char *const dirs[] = {"CUSHIM_SEGMENT_DIR=/proc", "CUSHIM_SEGMENT_DIR=/sys"};
    for (int k = 0; k < 2; k++) {
        const char *extra[] = {dirs[k], NULL};
        const char *argv[] = {cushim_bin(), "run", "--", "/bin/echo", "ran", NULL};
        struct run_result r;
        run_cmd(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 2);
        cr_expect_str_eq(r.out, "");
        char want[200];
        snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\": cannot create files in %s (",
                 dirs[k] + 19, dirs[k] + 19);
        cr_expect(strncmp(r.err, want, strlen(want)) == 0 && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                  "%s", r.err);
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
                            "or its descendants (none allocated, or CUDA did not start: is a driver, libcuda.so.1, on the library path?)\n");
    /* The program sees the run's own values: its pid, a hexadecimal id, a cushim-run.* directory. */
    long top = 0;
    char id[32] = "", dir[600] = "";
    cr_assert_eq(sscanf(r.out, "top=%ld id=%31s dir=%599s", &top, id, dir), 3, "%s", r.out);
    cr_expect_gt(top, 1);
    cr_expect(strspn(id, "0123456789abcdef") == strlen(id) && strlen(id) >= 1, "id %s", id);
    cr_expect(dir[0] == '/' && strstr(dir, "/cushim-run.") != NULL, "dir %s", dir);
    run_free(&r);
}

Test(run, a_log_file_that_stops_taking_lines_falls_back_to_stderr)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG=info", "CUSHIM_LOG_FILE=/dev/full", NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    int pid = 0;
    cr_assert_eq(sscanf(r.err, "cushim[%d]", &pid), 1, "%s", r.err);
    /* Said once, first; the line that could not be written and the later ones go to stderr. */
    char want[300];
    snprintf(want, sizeof want, "cushim[%d] error: cannot write to CUSHIM_LOG_FILE: No space left on device; "
             "logging to stderr\ncushim[%d] info: started: segment ", pid, pid);
    cr_expect(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    const char *first = strstr(r.err, "cannot write to CUSHIM_LOG_FILE");
    cr_expect(first && !strstr(first + 1, "cannot write to CUSHIM_LOG_FILE"), "said once:\n%s", r.err);
    run_free(&r);
}

static int run_on_dead_pipe(int fd, const char *const *extra);

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

Test(run, a_report_name_too_long_stops_the_run)
{
    /* What the file system will refuse at the program's exit is said before it starts. */
    const char *dir = fresh_dir("long-report");
    char name[320], path[1000], want[1500];
    memset(name, 'r', 300);
    name[300] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *argv[] = {cushim_bin(), "run", "--report", path, "--", "/bin/echo", "ran", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program did not run");
    snprintf(want, sizeof want, "cushim: --report \"%s\": its file name is 300 bytes, at most 255 there\n", path);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
}

Test(run, a_report_from_a_removed_working_directory_says_so)
{
    /* A relative CUSHIM_REPORT from a working directory that was removed: the shim says the
     * directory's error, not that a link was refused. */
    const char *dir = fresh_dir("removed-cwd");
    char script[900];
    snprintf(script, sizeof script, "mkdir %s/d && cd %s/d && rmdir %s/d && exec %s malloc", dir, dir, dir,
             program("rt_prog"));
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=rel.txt", NULL};
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.err, " error: cannot write CUSHIM_REPORT=\"rel.txt\": No such file or directory\n") != NULL,
              "%s", r.err);
    run_free(&r);
}

Test(run, bad_values_are_said_in_the_log_file)
{
    /* CUSHIM_LOG_FILE is where the shim's lines go, the ones about bad values too. */
    const char *dir = fresh_dir("bad-value-log");
    char lf[900], log[800];
    snprintf(log, sizeof log, "%s/shim.log", dir);
    snprintf(lf, sizeof lf, "CUSHIM_LOG_FILE=%s", log);
    const char *extra[] = {preload_env(), lf, "CUSHIM_OFFLOAD_MIN=12XB", NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    char *text = slurp(log);
    cr_expect_str_eq(text, "cushim: CUSHIM_OFFLOAD_MIN=\"12XB\" is not a size (e.g. 512M, 64MiB, 1g, 4096); "
                           "using the default \"64MiB\"\n");
    free(text);
    run_free(&r);
}

Test(run, a_forked_child_logs_to_its_own_pid_file)
{
    /* CUSHIM_LOG_FILE with %p: a forked child that uses CUDA writes its lines to the file named
     * for its own pid, not into its parent's. */
    const char *dir = fresh_dir("fork-log");
    char lf[700];
    snprintf(lf, sizeof lf, "CUSHIM_LOG_FILE=%s/log-%%p", dir);
    const char *extra[] = {preload_env(), lf, "CUSHIM_LOG=info", NULL};
    const char *argv[] = {program("rt_prog"), "fork_child_cuda", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    DIR *d = opendir(dir);
    cr_assert(d);
    int files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int pid;
        if (sscanf(de->d_name, "log-%d", &pid) != 1)
            continue;
        files++;
        char path[1000], mine[64];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        snprintf(mine, sizeof mine, "cushim[%d] info: started: segment ", pid);
        char *text = slurp(path);
        cr_expect(strncmp(text, mine, strlen(mine)) == 0, "%s: %s", de->d_name, text);
        for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
            char who[32];
            int n = snprintf(who, sizeof who, "cushim[%d] ", pid);
            cr_expect(strncmp(l, who, (size_t)n) == 0, "%s holds another process's line: %s", de->d_name, l);
            if (!strchr(l, '\n'))
                break;
        }
        free(text);
    }
    closedir(d);
    cr_expect_eq(files, 2, "a file for the parent and one for the child");
    run_free(&r);
}

Test(run, the_log_never_writes_into_a_file_the_program_opened_in_its_place)
{
    /* The program (and its forked child) close the shim's log file and open their own, which
     * get its number: the shim's lines must not land in them. */
    const char *dir = fresh_dir("daemon-fds");
    char lf[900], dd[900], path[1000];
    snprintf(lf, sizeof lf, "CUSHIM_LOG_FILE=%s/log-%%p", dir);
    snprintf(dd, sizeof dd, "DATA_DIR=%s", dir);
    const char *extra[] = {preload_env(), lf, dd, "CUSHIM_LOG=debug", NULL};
    const char *argv[] = {program("rt_prog"), "daemon_fds", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(path, sizeof path, "%s/child", dir);
    char *text = slurp(path);
    cr_expect_str_eq(text, "child data\nend\n");
    free(text);
    snprintf(path, sizeof path, "%s/parent", dir);
    text = slurp(path);
    cr_expect_str_eq(text, "parent data\nend\n");
    free(text);
    /* The parent's later lines went to stderr. */
    cr_expect(strstr(r.err, " debug: context ") != NULL, "%s", r.err);
    run_free(&r);
}

Test(run, a_bad_value_said_on_a_dead_pipe_does_not_kill_the_program)
{
    /* The line about a bad value, written from the shim's constructor to a stderr nobody reads,
     * must not kill the program with SIGPIPE. */
    const char *extra[] = {preload_env(), "CUSHIM_OFFLOAD_MIN=zz", "CUSHIM_FOO=1", NULL};
    int status = run_on_dead_pipe(2, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Runs rt_prog malloc under the shim with `extra` in its environment and its descriptor `fd`
 * (1 or 2) a pipe whose read end is already closed: every write there meets SIGPIPE. Returns the
 * wait status. */
static int argv_on_dead_pipe(int fd, const char *const *argv, const char *const *extra);

static int run_on_dead_pipe(int fd, const char *const *extra)
{
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    return argv_on_dead_pipe(fd, argv, extra);
}

/* Runs argv with `extra` in its environment and its descriptor `fd` a pipe whose read end is
 * already closed. Returns the wait status. */
static int argv_on_dead_pipe(int fd, const char *const *argv, const char *const *extra)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(p[1], fd);
        close(p[1]);
        for (const char *const *e = sim_env(extra); *e; e++)
            putenv((char *)*e);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return status;
}

Test(run, cushim_run_on_a_dead_pipe_runs_the_program_with_sigpipe_as_given)
{
    /* `cushim run` says a bad value on a stderr nobody reads: it goes on and runs the program,
     * and the program gets SIGPIPE's default action as cushim run got it (a shell that sends it
     * to itself dies of it). */
    const char *dir = fresh_dir("run-dead-pipe");
    char script[900];
    snprintf(script, sizeof script, "echo ran > %s/ran; kill -PIPE $$; echo survived > %s/survived", dir, dir);
    const char *argv[] = {cushim_bin(), "run", "--", "/bin/sh", "-c", script, NULL};
    const char *extra[] = {"CUSHIM_OFFLOAD_MIN=zz", NULL};
    int status = argv_on_dead_pipe(2, argv, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGPIPE, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    char path[1000];
    snprintf(path, sizeof path, "%s/ran", dir);
    cr_expect_eq(access(path, F_OK), 0, "the program ran");
    snprintf(path, sizeof path, "%s/survived", dir);
    cr_expect_neq(access(path, F_OK), 0, "SIGPIPE ignored in the program");
}

Test(run, a_program_that_cannot_be_found_is_127_also_on_a_dead_pipe)
{
    /* cushim run says why it could not run the program on a stderr nobody reads: it must not die
     * of SIGPIPE saying it (the run would look like a program killed by a signal). */
    const char *argv[] = {cushim_bin(), "run", "--", "/nonexistent/program", NULL};
    const char *extra[] = {NULL};
    int status = argv_on_dead_pipe(2, argv, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 127, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(run, a_log_pipe_whose_reader_left_does_not_kill_the_program)
{
    /* The log (stderr) is a pipe nobody reads: each log line meets SIGPIPE, whose default kills.
     * The shim's writes must not: the program ends normally. */
    const char *extra[] = {preload_env(), "CUSHIM_LOG=debug", "CUSHIM_REPORT=stderr", NULL};
    int status = run_on_dead_pipe(2, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(run, the_programs_own_sigpipe_stays_its_own)
{
    /* CUSHIM_REPORT=stdout into a pipe nobody reads: the program's own buffered output meets
     * SIGPIPE first, as it would without the shim, rather than being swallowed. */
    const char *plain[] = {NULL};
    int without = run_on_dead_pipe(1, plain);
    cr_assert(WIFSIGNALED(without) && WTERMSIG(without) == SIGPIPE, "without the shim: status %#x", without);
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=stdout", NULL};
    int status = run_on_dead_pipe(1, extra);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE, "with the shim: status %#x", status);
}

Test(run, the_log_copy_of_stderr_is_not_inherited)
{
    /* CUSHIM_LOG_FILE=/dev/stderr: the shim's copy of fd 2 is close-on-exec, so a program it
     * execs holds only what it was given (a kept copy would hold a pipe open after its reader
     * expected the end). */
    const char *extra[] = {preload_env(), "CUSHIM_LOG_FILE=/dev/stderr", NULL};
    const char *plain[] = {"LD_PRELOAD", NULL};
    const char *argv[] = {"sh", "-c", "exec env -u LD_PRELOAD ls /proc/self/fd", NULL};
    struct run_result r, without;
    run_cmd(&without, argv, sim_env(plain));
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, without.out, "the same descriptors as without the shim");
    run_free(&r);
    run_free(&without);
}

Test(run, a_report_file_is_emptied_even_with_stdout_closed)
{
    /* With stdout closed the report file gets descriptor 1: it is still a file of its own
     * (emptied, then written), not taken for the program's stdout. */
    const char *dir = fresh_dir("closed-stdout");
    char file[700], rep[800], cmd[2400];
    snprintf(file, sizeof file, "%s/r.txt", dir);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    for (int i = 0; i < 5000; i++)
        fputc('#', f);
    fclose(f);
    snprintf(rep, sizeof rep, "CUSHIM_REPORT=%s", file);
    snprintf(cmd, sizeof cmd, "%s malloc >&-", program("rt_prog"));
    const char *extra[] = {preload_env(), rep, NULL};
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    run_free(&r);
    char *text = slurp(file);
    cr_expect(strncmp(text, "cushim: pid ", 12) == 0, "%s", text);
    cr_expect(strchr(text, '#') == NULL, "nothing of the old content is left:\n%s", text);
    free(text);
}

Test(run, a_report_to_the_programs_own_stderr_adds_to_it)
{
    /* CUSHIM_REPORT=/dev/stderr with stderr redirected to a file: the report goes after what the
     * program wrote, which stays. */
    const char *dir = fresh_dir("stderr-file");
    char log[700], cmd[2400];
    snprintf(log, sizeof log, "%s/err.log", dir);
    snprintf(cmd, sizeof cmd, "(echo line1 >&2; %s malloc; echo after >&2) 2>%s", program("rt_prog"), log);
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=/dev/stderr", NULL};
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    run_free(&r);
    char *text = slurp(log);
    size_t n = strlen(text);
    cr_expect(strncmp(text, "line1\ncushim: pid ", strlen("line1\ncushim: pid ")) == 0,
              "what the program wrote first stays first:\n%s", text);
    cr_expect(n > 6 && strcmp(text + n - 6, "after\n") == 0, "and its later output follows:\n%s", text);
    free(text);
}

/* The CLI reads segments from one place: a CUSHIM_SEGMENT_DIR it cannot use stops every command
 * (exit 2) before it reads, or removes, anything anywhere else. */
Test(run, a_bad_segment_dir_stops_every_reading_command)
{
    struct run_result r;
    static const struct {
        const char *value, *err;
    } bad[] = {
        {"rel", "cushim: CUSHIM_SEGMENT_DIR=\"rel\" is not an absolute directory path\n"},
        {"/nonexistent-dir", "cushim: cannot open the segment directory \"/nonexistent-dir\" (CUSHIM_SEGMENT_DIR): "
                             "No such file or directory\n"},
        {"/x\033]0;t\007", "cushim: cannot open the segment directory \"/x\\x1b]0;t\\x07\" (CUSHIM_SEGMENT_DIR): "
                          "No such file or directory\n"},
    };
    static const char *commands[][4] = {
        {"gc"}, {"ps"}, {"stat"}, {"top", "--batch", "--iterations=1"}, {"serve", "--listen", "127.0.0.1:0"},
        {"reset-peak", "1"}, {"phase", "1", "run"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char var[128];
        snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", bad[b].value);
        const char *env[] = {var, NULL};
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
            const char *argv[6] = {cushim_bin()};
            for (int a = 0; a < 4 && commands[c][a]; a++)
                argv[a + 1] = commands[c][a];
            run_cmd(&r, argv, env);
            cr_expect_eq(r.status, 2, "%s with %s", commands[c][0], bad[b].value);
            cr_expect_str_eq(r.out, "", "%s with %s", commands[c][0], bad[b].value);
            cr_expect_str_eq(r.err, bad[b].err, "%s with %s", commands[c][0], bad[b].value);
            run_free(&r);
        }
    }
    /* Help needs no directory. */
    const char *env[] = {"CUSHIM_SEGMENT_DIR=rel", NULL};
    const char *help[] = {cushim_bin(), "gc", "--help", NULL};
    run_cmd(&r, help, env);
    cr_expect_eq(r.status, 0);
    run_free(&r);
}

/* Values are echoed on one line whatever they hold: a newline in a value cannot forge a second
 * message, an escape sequence cannot drive the terminal. */
Test(run, bad_values_are_echoed_escaped)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG=warn\ncushim: all good", "CUSHIM_DEVICE_LIMIT=1G\033[2J\xe9",
                           "CUSHIM_X\033[31mRED\nFAKE=1", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_LOG=\"warn\\ncushim: all good\" is not one of off|error|warn|info|debug; "
                            "using the default \"warn\"\n"
                            "cushim: CUSHIM_DEVICE_LIMIT=\"1G\\x1b[2J\\xe9\" is not a size for every device or "
                            "ORDINAL:SIZE,... with ordinals 0..63, each once (e.g. 20GiB or 0:20GiB,1:10GiB); "
                            "using the default (none)\n"
                            "cushim: CUSHIM_X\\x1b[31mRED\\nFAKE is not a cushim variable (see `cushim run --help`); "
                            "ignored\n");
    run_free(&r);
}

/* Paths of the run are usable before the program starts, for the user who runs it; relative
 * report and log paths are the run's directory's, whatever directory the program moves to. */
Test(run, paths_are_checked_for_the_user_and_made_absolute)
{
    struct run_result r;
    const char *dir = fresh_dir("rel-report");
    char script[1200], want[2400];
    snprintf(script, sizeof script, "cd / && %s malloc >/dev/null", program("rt_prog"));
    const char *argv[] = {"sh", "-c", "cd \"$0\" && exec \"$@\"", dir, cushim_bin(), "run", "--quiet",
                          "--report=r.txt", "--", "sh", "-c", script, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "%s/r.txt", dir);
    struct stat st;
    cr_expect_eq(stat(want, &st), 0, "the report is in the run's directory: %s", want);
    cr_expect(st.st_size > 0);
    run_free(&r);
    /* A link of the user's to a file not there yet: the shims create the file through it. */
    char link[800], target[800];
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(target, sizeof target, "%s/target.txt", dir);
    unlink(target);
    cr_assert_eq(symlink("target.txt", link), 0);
    const char *via_link[] = {"sh", "-c", "cd \"$0\" && exec \"$@\"", dir, cushim_bin(), "run", "--quiet",
                              "--report=link", "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, via_link, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(stat(target, &st), 0, "the report went through the link");
    run_free(&r);
    /* Made absolute, a relative path may pass what the shims take (1023 bytes): said now. */
    char deep[1200], name[300], flag[320];
    snprintf(deep, sizeof deep, "%s", dir);
    memset(name, 'd', 200);
    name[200] = '\0';
    for (int k = 0; k < 4; k++) {
        strcat(deep, "/");
        strcat(deep, name);
        cr_assert(mkdir(deep, 0700) == 0 || errno == EEXIST, "%s", deep);
    }
    memset(name, 's', 250);
    snprintf(name + 250, sizeof name - 250, ".txt");
    snprintf(flag, sizeof flag, "--report=%s", name);
    const char *too_long[] = {"sh", "-c", "cd \"$0\" && exec \"$@\"", deep, cushim_bin(), "run", flag, "--",
                              "/bin/echo", "ran", NULL};
    run_cmd(&r, too_long, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    snprintf(want, sizeof want, "cushim: --report \"%s\": %zu bytes once made absolute (from %s), at most 1023\n",
             name, strlen(deep) + 1 + strlen(name), deep);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* stderr: the run's own summary, once (not the shim's copy too), however stderr is named. */
    static const char *const to_stderr[] = {"--report=stderr", "--report=/dev/stderr"};
    for (int k = 0; k < 2; k++) {
        const char *once[] = {cushim_bin(), "run", to_stderr[k], "--", program("rt_prog"), "malloc", NULL};
        run_cmd(&r, once, sim_env(NULL));
        cr_expect_eq(r.status, 0);
        int n = 0;
        for (const char *p = r.err; (p = strstr(p, "device 0 ")) != NULL; p++)
            n++;
        cr_expect_eq(n, 1, "%s: one summary:\n%s", to_stderr[k], r.err);
        run_free(&r);
    }
    if (geteuid() != 0) {
        /* Skipped, not passed: the part above ran, this one did not. */
        printf("not run: paths another user cannot write need root to set up (setpriv)\n");
        cr_skip_test("not run: paths another user cannot write need root to set up (setpriv)");
    }
    const char *ro = fresh_dir("read-only");
    cr_assert_eq(chmod(ro, 0555), 0);
    char seg[700], rep[700], log[700], existing[700];
    snprintf(seg, sizeof seg, "--segment-dir=%s", ro);
    snprintf(rep, sizeof rep, "--report=%s/r", ro);
    snprintf(log, sizeof log, "--log-file=%s/l", ro);
    snprintf(existing, sizeof existing, "%s/f", dir);
    FILE *f = fopen(existing, "w");
    fclose(f);
    chmod(existing, 0600);
    char rep2[800];
    snprintf(rep2, sizeof rep2, "CUSHIM_REPORT=%s", existing);
    const char *env[] = {rep2, "CUSHIM_SEGMENT_DIR=/dev/shm", NULL};
    const char *nobody[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", cushim_bin(), "run",
                            seg, rep, log, "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, nobody, sim_env(env));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    snprintf(want, sizeof want, "cushim: --segment-dir \"%s\": cannot create files in %s (Permission denied)\n"
             "cushim: --report \"%s/r\": cannot create files in %s (Permission denied)\n"
             "cushim: --log-file \"%s/l\": cannot create files in %s (Permission denied)\n", ro, ro, ro, ro, ro, ro);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    const char *nobody2[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", cushim_bin(), "run",
                             "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, nobody2, sim_env(env));
    cr_expect_eq(r.status, 2);
    snprintf(want, sizeof want, "cushim: CUSHIM_REPORT=\"%s\": cannot write it (a file of another user)\n", existing);
    cr_expect_str_eq(r.err, want);
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
    cr_expect(strstr(r.err, "cushim: counting is disabled (CUSHIM_DISABLE): no summary, and no budget, offload "
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

Test(run, log_off_silences_bad_values_in_the_shim)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG=off", "CUSHIM_SPILL=garbage", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

Test(run, an_overlong_path_is_named_with_its_limit)
{
    struct run_result r;
    static char value[5100], var[5200];
    memset(value, 'a', 5000);
    value[0] = '/';
    snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", value);
    const char *extra[] = {var, NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    char want[400];
    snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%.60s...\" (5000 bytes) is not a string "
             "of at most 1023 bytes; using the default \"/dev/shm\"\n"
             "cushim: no CUDA memory activity in `/bin/echo ran` or its descendants (none allocated, or CUDA did not start: is a driver, libcuda.so.1, on the library path?)\n", value);
    cr_expect_str_eq(r.err, want, "one line, from cushim run only; got:\n%s", r.err);
    run_free(&r);
}

Test(run, an_empty_or_relative_segment_dir_is_the_default)
{
    /* The shim and the CLI must agree on the directory: a relative value would put segments
     * where `cushim ps` does not look; an empty one is no value, like every empty CUSHIM_
     * variable (the default, silently). */
    struct run_result r;
    static const char *values[] = {"", "relative/dir"};
    for (int i = 0; i < 2; i++) {
        char var[64], want[300] = "";
        snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", values[i]);
        const char *extra[] = {preload_env(), var, "CUSHIM_REPORT=/dev/null", NULL};
        const char *argv[] = {"/bin/echo", "ran", NULL};
        run_cmd(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.out, "ran\n");
        if (*values[i])
            snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\" is not an absolute directory "
                     "path; using the default \"/dev/shm\"\n", values[i]);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
        /* The CLI refuses to look anywhere else (gc would remove files there): a usage error. */
        const char *ps[] = {cushim_bin(), "ps", NULL};
        const char *env2[] = {var, NULL};
        run_cmd(&r, ps, env2);
        if (*values[i]) {
            cr_expect_eq(r.status, 2);
            cr_expect_str_eq(r.out, "");
            snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\" is not an absolute directory path\n",
                     values[i]);
        }
        /* (Empty: the default directory, where other tests' processes may be live, or none: no
         * word about the variable either way.) */
        if (*values[i])
            cr_expect_str_eq(r.err, want, "the CLI says why");
        else
            cr_expect_eq(strstr(r.err, "CUSHIM_SEGMENT_DIR"), NULL, "%s", r.err);
        run_free(&r);
    }
    /* Empty values of other kinds: the default, silently. */
    const char *empties[] = {preload_env(), "CUSHIM_LOG=", "CUSHIM_SPILL=", "CUSHIM_OFFLOAD=", "CUSHIM_OFFLOAD_MIN=",
                             "CUSHIM_PHASE=", "CUSHIM_REPORT_FORMAT=", "CUSHIM_DEVICE_LIMIT=", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(empties));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
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
    run_free(&r);
}

Test(run, a_report_that_cannot_be_written_says_so)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=/dev/full", NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.err, "error: cannot write CUSHIM_REPORT=\"/dev/full\": No space left on device\n") != NULL,
              "%s", r.err);
    run_free(&r);
}

Test(run, json_output_never_replaces_a_device_and_keeps_the_old_file_on_failure)
{
    struct run_result r;
    struct stat st;
    /* A device is written in place: the error is said, the node stays. */
    const char *argv[] = {cushim_bin(), "run", "--json", "/dev/full", "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2, "the program succeeded, the summary asked for is lost: a failed run");
    cr_expect(strstr(r.err, "cushim: error writing --json \"/dev/full\": No space left on device\n") != NULL,
              "%s", r.err);
    cr_assert_eq(stat("/dev/full", &st), 0);
    cr_expect(S_ISCHR(st.st_mode), "/dev/full is still a character device");
    run_free(&r);
    /* A program that never runs leaves an existing report as it was, and no temporary file. */
    char path[700], cmd[900];
    snprintf(path, sizeof path, "%s/keep.json", test_dir());
    FILE *f = fopen(path, "w");
    fputs("old\n", f);
    fclose(f);
    const char *missing[] = {cushim_bin(), "run", "--json", path, "--", "/nonexistent/program", NULL};
    run_cmd(&r, missing, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    run_free(&r);
    const char *cat[] = {"cat", path, NULL};
    run_cmd(&r, cat, NULL);
    cr_expect_str_eq(r.out, "old\n");
    run_free(&r);
    snprintf(cmd, sizeof cmd, "ls %s | grep -c 'keep.json.tmp' || true", test_dir());
    const char *ls[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, ls, NULL);
    cr_expect_str_eq(r.out, "0\n");
    run_free(&r);
}

Test(run, outputs_go_through_a_link_and_a_fifo_needs_a_reader)
{
    char target[700], link[700], fifo[700];
    snprintf(target, sizeof target, "%s/through-target.json", test_dir());
    snprintf(link, sizeof link, "%s/through-link.json", test_dir());
    snprintf(fifo, sizeof fifo, "%s/no-reader.fifo", test_dir());
    unlink(link);
    touch(target);
    cr_assert_eq(symlink(target, link), 0);
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", link, "--", program("rt_prog"), "peaks", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    struct stat st;
    cr_expect(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link stays a link");
    json_t *j = json_load(target);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350, "the file it names has the summary");
    json_decref(j);
    /* A FIFO nobody reads: said, and nothing run (not a hang before the program). */
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *f[] = {cushim_bin(), "run", "--json", fifo, "--", "sh", "-c", "echo ran", NULL};
    run_cmd(&r, f, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    char want[900];
    snprintf(want, sizeof want, "cushim: cannot write --json \"%s\": a FIFO with no reader (start its reader "
             "first); nothing was run\n", fifo);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* --report too (the processes' own reports): before, the program ran and its report was lost. */
    const char *rep[] = {cushim_bin(), "run", "--report", fifo, "--", "sh", "-c", "echo ran", NULL};
    run_cmd(&r, rep, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    snprintf(want, sizeof want, "cushim: --report \"%s\": cannot write it (a FIFO with no reader; start its reader "
             "first)\n", fifo);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* With its reader there (this test, reading once the run is over), the report reaches it. */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd, 0);
    const char *rep2[] = {cushim_bin(), "run", "--report", fifo, "--", program("rt_prog"), "peaks", NULL};
    run_cmd(&r, rep2, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    static char got[65536];
    ssize_t n = read(rd, got, sizeof got - 1);
    close(rd);
    got[n > 0 ? n : 0] = '\0';
    cr_expect(strstr(got, "\n    device                  350 B        350 B") != NULL, "%s", got);
}

Test(run, an_output_named_by_a_standard_stream_is_appended_to_not_replaced)
{
    /* `--json /dev/stdout` (or `stat --output /dev/stderr`) with that stream redirected to a file
     * replaced the whole file: what a log held before, and the program's own output, were lost. */
    const char *dir = fresh_dir("stdout-output"), *segdir = fresh_dir("stdout-output-seg");
    char log[1100], script[8000], seg_env[1100];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(seg_env, sizeof seg_env, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(script, sizeof script,
             "printf 'line1\\n' > %s; (echo before; %s stat --json --output /dev/stdout; echo after) >> %s; "
             "%s run --quiet --json /dev/stdout -- echo program >> %s; "
             "%s stat --json --output /dev/stderr 2>> %s; true",
             log, cushim_bin(), log, cushim_bin(), log, cushim_bin(), log);
    const char *argv[] = {"sh", "-c", script, NULL};
    const char *extra[] = {seg_env, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err); /* (stat with nothing to show exits 1: not asked here) */
    char *text = slurp(log);
    cr_assert(text);
    /* The run's JSON (one line) follows the program's own output. */
    cr_expect(strncmp(text, "line1\nbefore\n[]\nafter\nprogram\n{", 31) == 0, "%s", text);
    cr_expect(strstr(text, "}\n[]\n") != NULL, "the stderr output after the run's JSON:\n%s", text);
    free(text);
    run_free(&r);
}

/* `cushim help help` is the general usage (before: "no help for "help": not a command", exit 2). */
Test(run, help_help_is_the_general_usage)
{
    const char *argv[] = {cushim_bin(), "help", "help", NULL};
    struct run_result r;
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strncmp(r.out, "usage: cushim COMMAND [ARGS]", 28) == 0, "%s", r.out);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
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
