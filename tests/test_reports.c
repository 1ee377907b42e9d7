/* The summaries cushim writes to files: a process's own report (CUSHIM_REPORT / --report, with
 * %p expanded, relative to the run's directory, beside a log in the same file, into a file or
 * stream the program also writes) and the run's --json, checked before the program runs (too
 * long, unwritable, a FIFO with no reader, another user's) and written without harm (through a
 * link, never replacing a device, keeping an old file on failure, appending to a standard
 * stream). */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

Test(reports, report_path_with_pid)
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
Test(reports, report_path_with_many_pids_is_never_cut)
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

Test(reports, report_env_with_plain_ld_preload)
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

/* The report and the log in the same file: the report comes after the log's lines (before, it
 * emptied the file and the log was lost; found by an attack helper). */
Test(reports, a_report_in_the_log_file_keeps_the_log)
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

Test(reports, a_report_file_is_emptied_even_with_stdout_closed)
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

Test(reports, a_report_to_the_programs_own_stderr_adds_to_it)
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

Test(reports, a_report_name_too_long_stops_the_run)
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
    /* The path cut as every long value in a message is (cli_shown). */
    snprintf(want, sizeof want, "cushim: --report \"%.60s...\" (%zu bytes): its file name is 300 bytes, at most 255 "
             "there; nothing was run\n", path, strlen(path));
    cr_expect_str_eq(r.err, want);
    run_free(&r);
}

Test(reports, a_report_from_a_removed_working_directory_says_so)
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

Test(reports, a_report_that_cannot_be_written_says_so)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=/dev/full", NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.err, "error: cannot write CUSHIM_REPORT=\"/dev/full\": No space left on device\n") != NULL,
              "%s", r.err);
    run_free(&r);
    /* Under `cushim run`, where --report set it, by that name too (found by a fresh-user trial). */
    const char *run[] = {cushim_bin(), "run", "--quiet", "--report", "/dev/full", "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, run, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    /* The one line, "cushim[PID] error: ...", the program's pid aside. */
    const char *after_pid = strncmp(r.err, "cushim[", 7) == 0 ? strchr(r.err, ']') : NULL;
    cr_expect(after_pid != NULL, "%s", r.err);
    if (after_pid)
        cr_expect_str_eq(after_pid, "] error: cannot write --report \"/dev/full\" (CUSHIM_REPORT): No space left on "
                                    "device\n");
    run_free(&r);
}

/* Paths of the run are usable before the program starts, for the user who runs it; relative
 * report and log paths are the run's directory's, whatever directory the program moves to. */
Test(reports, paths_are_checked_for_the_user_and_made_absolute)
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
    snprintf(want, sizeof want, "cushim: --report \"%.60s...\" (%zu bytes): %zu bytes once made absolute (from %s), at "
             "most 1023; nothing was run\n", name, strlen(name), strlen(deep) + 1 + strlen(name), deep);
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
    snprintf(want, sizeof want, "cushim: --segment-dir \"%s\": cannot create files in %s (Permission denied); nothing was run\n"
             "cushim: --report \"%s/r\": cannot create files in %s (Permission denied); nothing was run\n"
             "cushim: --log-file \"%s/l\": cannot create files in %s (Permission denied); nothing was run\n", ro, ro,
             ro, ro, ro, ro);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    const char *nobody2[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", cushim_bin(), "run",
                             "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, nobody2, sim_env(env));
    cr_expect_eq(r.status, 2);
    snprintf(want, sizeof want, "cushim: CUSHIM_REPORT=\"%s\": cannot write it (a file of another user); nothing was run\n", existing);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
}

/* `cushim run -- WORD` started in `dir` cannot find its program: exit 127, and exactly `want`. */
static void expect_cannot_run_in(const char *dir, const char *word, const char *want)
{
    struct run_result r;
    const char *argv[] = {"/bin/sh", "-c", "cd \"$1\" && exec \"$0\" run -- \"$2\"", cushim_bin(), dir, word, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 127, "%s", word);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
}

Test(reports, an_unwritable_json_path_stops_before_running)
{
    struct run_result r;
    char marker[700], cmd[900];
    snprintf(marker, sizeof marker, "%s/ran-anyway", test_dir());
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    const char *argv[] = {cushim_bin(), "run", "--json", "/nonexistent/dir/x.json", "--", "sh", "-c", cmd, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --json \"/nonexistent/dir/x.json\": /nonexistent/dir does not exist; nothing was run\n");
    cr_expect_neq(access(marker, F_OK), 0, "the program must not have run");
    run_free(&r);
    const char *missing[] = {cushim_bin(), "run", "--", "/nonexistent/program", NULL};
    run_cmd(&r, missing, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"/nonexistent/program\": No such file or directory\n");
    run_free(&r);
    /* A value given to a switch with a space, right before the "--": a usage error, nothing run
     * (found by a fresh-user trial: "--spill true -- PROGRAM" ran true, "--spill yes" ran yes).
     * Here a program named "yes" on the PATH would leave the marker. */
    char bin[700], yes[800], path_env[2000];
    snprintf(bin, sizeof bin, "%s/bin", test_dir());
    snprintf(yes, sizeof yes, "%s/yes", bin);
    cr_assert(mkdir(bin, 0755) == 0 || errno == EEXIST);
    FILE *y = fopen(yes, "w");
    cr_assert(y);
    fprintf(y, "#!/bin/sh\ntouch '%s'\n", marker);
    cr_assert_eq(fclose(y), 0);
    cr_assert_eq(chmod(yes, 0755), 0);
    snprintf(path_env, sizeof path_env, "PATH=%s:%s", bin, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    const char *on_path[] = {path_env, NULL};
    const char *stray[] = {cushim_bin(), "run", "--spill", "yes", "--", "true", NULL};
    run_cmd(&r, stray, sim_env(on_path));
    cr_expect_eq(r.status, 2);
    /* (the program is after the "--": only the '=' is offered, not running yes; an attack trial) */
    cr_expect_str_eq(r.err, "cushim: \"--spill yes\": a switch takes its value after '=' (--spill=yes); nothing was "
                            "run\n");
    cr_expect_neq(access(marker, F_OK), 0, "\"yes\" must not have run");
    run_free(&r);
    /* A size written with a space: the option took the number, the unit became the program (found
     * by a fresh-user trial: the hint spoke of switches). */
    const char *spaced[] = {cushim_bin(), "run", "--device-limit", "1", "MiB", "--", "true", NULL};
    run_cmd(&r, spaced, sim_env(NULL));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: \"--device-limit 1 MiB\": a value is one word, e.g. --device-limit=1MiB "
                            "(the options end at the first word that is not one, so \"MiB\" would be run as the "
                            "program); nothing was run\n");
    run_free(&r);
    /* A size in two words, wherever the options end: said before any check of the values (found
     * by an attack trial: "--offload is off" for a typed --offload), and without a "--" too. */
    static const char *const split[][8] = {
        {"run", "--offload-min", "64", "MiB", "--offload", "compile", "--", "true"},
        {"run", "--device-limit", "20", "GiB", "python3", "x.py", NULL},
        {"run", "--device-limit=20", "GiB", "--", "true", NULL},
        {"run", "--spill", "on", "python3", "x.py", NULL},
        {"run", "--spill", "on", "x", "--", "true", NULL},
        {"run", "--spill=", "yes", "--", "true", NULL}, /* an empty value: yes ran (an attack trial) */
        {"run", "--report=", "stderr", "--", "true", NULL}};
    static const char *const split_said[] = {
        "cushim: \"--offload-min 64 MiB\": a value is one word, e.g. --offload-min=64MiB (the options end at the "
        "first word that is not one, so \"MiB\" would be run as the program); nothing was run\n",
        "cushim: \"--device-limit 20 GiB\": a value is one word, e.g. --device-limit=20GiB (the options end at "
        "the first word that is not one, so \"GiB\" would be run as the program); nothing was run\n",
        "cushim: \"--device-limit=20 GiB\": a value is one word, e.g. --device-limit=20GiB (the options end at "
        "the first word that is not one, so \"GiB\" would be run as the program); nothing was run\n",
        "cushim: \"--spill on\": a switch takes its value after '=' (--spill=on), and a program goes after \"--\" "
        "(--spill -- on); nothing was run\n",
        "cushim: \"--spill on\": a switch takes its value after '=' (--spill=on), and a program goes after \"--\" "
        "(--spill -- on); nothing was run\n",
        "cushim: \"--spill= yes\": a value is one word, e.g. --spill=yes (the options end at the first word that is "
        "not one, so \"yes\" would be run as the program); nothing was run\n",
        "cushim: \"--report= stderr\": a value is one word, e.g. --report=stderr (the options end at the first word "
        "that is not one, so \"stderr\" would be run as the program); nothing was run\n"};
    for (int k = 0; k < 7; k++) {
        const char *a[10] = {cushim_bin()};
        for (int w = 0; w < 8 && split[k][w]; w++)
            a[w + 1] = split[k][w];
        run_cmd(&r, a, sim_env(NULL));
        cr_expect_eq(r.status, 2);
        cr_expect_str_eq(r.err, split_said[k]);
        run_free(&r);
    }
    /* A mistyped program whose own arguments hold a "--" is only that (found by an attack trial:
     * the hint offered --device-limit=8GiBtorchrunn). */
    const char *typo[] = {cushim_bin(), "run", "--device-limit", "8GiB", "torchrunn", "--", "--nproc", "2", NULL};
    run_cmd(&r, typo, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"torchrunn\": not found on PATH\n");
    run_free(&r);
    /* A program in the working directory, named without ./: found there and said (a fresh-user
     * trial: "No such file or directory" for a program that was there). */
    char programs[700];
    snprintf(programs, sizeof programs, "%s", program("rt_prog"));
    *strrchr(programs, '/') = '\0';
    expect_cannot_run_in(programs, "rt_prog", "cushim: cannot run \"rt_prog\": not found on PATH (./rt_prog is in this "
                                              "directory: a program here is run as ./rt_prog)\n");
    /* One that is not executable is not offered as ./X (an attack trial: Permission denied next). */
    char script_dir[700], script[760];
    snprintf(script_dir, sizeof script_dir, "%s", fresh_dir("not-exec"));
    snprintf(script, sizeof script, "%s/train.py", script_dir);
    FILE *py = fopen(script, "w");
    cr_assert(py);
    fclose(py);
    expect_cannot_run_in(script_dir, "train.py", "cushim: cannot run \"train.py\": not found on PATH (./train.py is "
                                                 "in this directory, not executable: run it with its interpreter "
                                                 "(python3 train.py), or chmod +x it)\n");
    /* --json and --report naming one file would overwrite each other (a fresh-user trial): the
     * same name, the name relative to the working directory (no file yet: an attack trial found
     * only existing files and identical strings compared), a dangling link to the other. */
    char same[700], rel[2000], link[720], cwd[PATH_MAX];
    snprintf(same, sizeof same, "%s/both.json", test_dir());
    cr_assert(getcwd(cwd, sizeof cwd));
    size_t o = 0;
    for (const char *c = cwd; *c; c++)
        if (*c == '/' && c[1])
            o += (size_t)snprintf(rel + o, sizeof rel - o, "../");
    snprintf(rel + o, sizeof rel - o, "%s", same + 1);
    snprintf(link, sizeof link, "%s/link.json", test_dir());
    cr_assert_eq(symlink("both.json", link), 0);
    const char *seconds[] = {same, rel, link};
    for (int k = 0; k < 3; k++) {
        const char *both[] = {cushim_bin(), "run", "--json", same, "--report", seconds[k], "--", "sh", "-c", cmd, NULL};
        run_cmd(&r, both, sim_env(NULL));
        cr_expect_eq(r.status, 2, "%s", seconds[k]);
        char want[5000];
        snprintf(want, sizeof want, "cushim: --json \"%s\" and --report \"%s\" name one file: the run's summary and "
                 "the processes' exit reports would overwrite each other; give them two files; nothing was run\n",
                 same, seconds[k]);
        cr_expect_str_eq(r.err, want);
        cr_expect_neq(access(marker, F_OK), 0, "the program must not have run");
        cr_expect_neq(access(same, F_OK), 0, "nothing written");
        run_free(&r);
    }
    /* The log with the summary (an earlier trial: taken, and the summary's rename would remove
     * the log); a report may share the log's file (a_report_in_the_log_file_keeps_the_log). */
    for (int by_env = 0; by_env < 2; by_env++) { /* --log-file, relative; CUSHIM_LOG_FILE, via a link */
        const char *json = by_env ? link : same, *log = by_env ? same : rel;
        char want_log[5000], log_env[2100];
        snprintf(log_env, sizeof log_env, "CUSHIM_LOG_FILE=%s", log);
        const char *flag[] = {cushim_bin(), "run", "--json", json, "--log-file", log, "--", "sh", "-c", cmd, NULL};
        const char *env[] = {cushim_bin(), "run", "--json", json, "--", "sh", "-c", cmd, NULL};
        run_cmd(&r, by_env ? env : flag, sim_env(by_env ? (const char *[]){log_env, NULL} : NULL));
        cr_expect_eq(r.status, 2);
        snprintf(want_log, sizeof want_log, "cushim: --json \"%s\" and %s \"%s\" name one file: the run's summary "
                 "would replace the log; give them two files; nothing was run\n", json,
                 by_env ? "CUSHIM_LOG_FILE" : "--log-file", log);
        cr_expect_str_eq(r.err, want_log);
        cr_expect_neq(access(marker, F_OK), 0, "the program must not have run");
        run_free(&r);
    }
    /* Not one file: /dev/null takes both; a %p report is one file per process. */
    char per_pid[720];
    snprintf(per_pid, sizeof per_pid, "%s/r%%p.json", test_dir());
    const char *null_both[] = {cushim_bin(), "run", "--quiet", "--json", "/dev/null", "--report", "/dev/null", "--",
                               "true", NULL};
    run_cmd(&r, null_both, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *pid_both[] = {cushim_bin(), "run", "--quiet", "--json", per_pid, "--report", per_pid, "--", "true",
                              NULL};
    run_cmd(&r, pid_both, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *dir[] = {cushim_bin(), "run", "--", "/tmp", NULL};
    run_cmd(&r, dir, sim_env(NULL));
    cr_expect_eq(r.status, 126);
    cr_expect_str_eq(r.err, "cushim: cannot run \"/tmp\": it is a directory\n");
    run_free(&r);
}

/* Writes `len` bytes of `text` to test_dir()/name, mode 0755, and its path into path. */
static void put_program(char *path, size_t n, const char *name, const void *text, size_t len)
{
    snprintf(path, n, "%s/%s", test_dir(), name);
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "%s", path);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* `cushim run -- ELF` of a program whose dynamic loader `loader` does not exist: exit 127, and
 * the loader named (not "No such file or directory" of a program that exists). */
static void expect_missing_loader(const char *elf, const char *loader)
{
    struct run_result r;
    char expect[3000];
    const char *argv[] = {cushim_bin(), "run", "--", elf, NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    snprintf(expect, sizeof expect, "cushim: cannot run \"%s\": its dynamic loader \"%s\" (ELF interpreter) "
             "does not exist\n", elf, loader);
    cr_expect_str_eq(r.err, expect);
    run_free(&r);
}

Test(reports, a_missing_interpreter_is_named_not_the_program_that_exists)
{
    /* Found by a fresh-user trial: execve's ENOENT for a script whose #! interpreter is missing
     * was said as "cannot run \"x.sh\": No such file or directory" of a file that exists. */
    struct run_result r;
    char script[700], crlf[700], elf[700], path_env[800], expect[6000];
    put_program(script, sizeof script, "bad-interp.sh", "#! /nonexistent/interp -x\necho ran\n",
                strlen("#! /nonexistent/interp -x\necho ran\n"));
    const char *a1[] = {cushim_bin(), "run", "--", script, NULL};
    run_cmd(&r, a1, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    snprintf(expect, sizeof expect, "cushim: cannot run \"%s\": its interpreter \"/nonexistent/interp\" (its #! "
             "line) does not exist\n", script);
    cr_expect_str_eq(r.err, expect);
    run_free(&r);
    /* Found along PATH, as execvp found it. */
    snprintf(path_env, sizeof path_env, "PATH=/nonexistent:%s:/usr/bin:/bin", test_dir());
    const char *extra[] = {path_env, NULL};
    const char *a2[] = {cushim_bin(), "run", "--", "bad-interp.sh", NULL};
    run_cmd(&r, a2, sim_env(extra));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"bad-interp.sh\": its interpreter \"/nonexistent/interp\" "
                            "(its #! line) does not exist\n");
    run_free(&r);
    /* An empty PATH entry is the current directory (found by an attack trial: "/bad-interp.sh" was
     * looked at). */
    char in_dir[1600];
    snprintf(in_dir, sizeof in_dir, "cd %s && PATH=:/usr/bin:/bin exec \"$0\" run -- bad-interp.sh", test_dir());
    const char *a5[] = {"sh", "-c", in_dir, cushim_bin(), NULL};
    run_cmd(&r, a5, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    cr_expect_str_eq(r.err, "cushim: cannot run \"bad-interp.sh\": its interpreter \"/nonexistent/interp\" "
                            "(its #! line) does not exist\n");
    run_free(&r);
    /* An interpreter that exists (a script whose own interpreter is missing) is not named as
     * missing: the one down the #! chain is, with the script that names it (an attack trial:
     * "No such file or directory"), also two scripts down. */
    char nested[700], nested_text[800], deeper[700], deeper_text[800];
    snprintf(nested_text, sizeof nested_text, "#!%s\n", script);
    put_program(nested, sizeof nested, "nested-interp.sh", nested_text, strlen(nested_text));
    snprintf(deeper_text, sizeof deeper_text, "#!%s\n", nested);
    put_program(deeper, sizeof deeper, "deeper-interp.sh", deeper_text, strlen(deeper_text));
    /* Six files deep, the last that the kernel follows (exec_binprm: depth 0 to 5; a review: the
     * sixth's missing interpreter was said as "No such file or directory"). */
    char deep[3][700], deep_text[3][800];
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(deep_text[k], sizeof deep_text[k], "#!%s\n", k ? deep[k - 1] : deeper);
        snprintf(name, sizeof name, "deep%d-interp.sh", k);
        put_program(deep[k], sizeof deep[k], name, deep_text[k], strlen(deep_text[k]));
    }
    const char *chained[] = {nested, deeper, deep[2]};
    for (int k = 0; k < 3; k++) {
        const char *a6[] = {cushim_bin(), "run", "--", chained[k], NULL};
        run_cmd(&r, a6, sim_env(NULL));
        cr_expect_eq(r.status, 127);
        snprintf(expect, sizeof expect, "cushim: cannot run \"%s\": down its #! chain, the interpreter "
                 "\"/nonexistent/interp\" of \"%s\" (its #! line) does not exist\n", chained[k], script);
        cr_expect_str_eq(r.err, expect);
        run_free(&r);
    }
    put_program(crlf, sizeof crlf, "crlf.sh", "#!/bin/sh\r\necho ran\r\n", strlen("#!/bin/sh\r\necho ran\r\n"));
    const char *a3[] = {cushim_bin(), "run", "--", crlf, NULL};
    run_cmd(&r, a3, sim_env(NULL));
    cr_expect_eq(r.status, 127);
    snprintf(expect, sizeof expect, "cushim: cannot run \"%s\": its interpreter \"/bin/sh\" followed by a "
             "carriage return (its #! line ends in \\r\\n, Windows line endings: convert the file, e.g. "
             "dos2unix)\n", crlf);
    cr_expect_str_eq(r.err, expect);
    run_free(&r);
    /* A 64-bit ELF file whose PT_INTERP names a loader that does not exist: a copy of the
     * simulated runtime's test program with its interpreter's name changed in place. */
    struct stat st;
    cr_assert_eq(stat(program("rt_prog"), &st), 0);
    size_t len = (size_t)st.st_size;
    char *image = malloc(len);
    FILE *in = fopen(program("rt_prog"), "rb");
    cr_assert(in != NULL && image != NULL);
    cr_assert_eq(fread(image, 1, len, in), len);
    fclose(in);
    /* Its PT_INTERP, as the kernel reads it (elf(5)): the loader's last path component renamed. */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;
    cr_assert(len > sizeof *eh && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64);
    char *ld = NULL;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(image + eh->e_phoff + (size_t)i * eh->e_phentsize);
        if (ph->p_type == PT_INTERP)
            ld = image + ph->p_offset;
    }
    cr_assert(ld != NULL, "rt_prog names its dynamic loader");
    char *base = strrchr(ld, '/');
    cr_assert(base && strlen(base) > 3);
    memcpy(base + 1, "zz", 2); /* /lib64/ld-linux-x86-64.so.2: /lib64/zz-linux-x86-64.so.2 */
    char renamed[1024];
    snprintf(renamed, sizeof renamed, "%s", ld);
    put_program(elf, sizeof elf, "bad-loader", image, len);
    free(image);
    expect_missing_loader(elf, renamed);
}

/* A 32-bit ELF program (an i386 one on a system without 32-bit libraries) whose loader does not
 * exist: named from its ELF32 program headers (elf(5)). Only where the kernel runs 32-bit
 * programs: without IA-32 emulation execve says ENOEXEC before any loader is looked for. */
Test(reports, a_32_bit_program_s_missing_loader_is_named)
{
    /* The smallest image the kernel takes: an ELF32 header, PT_INTERP and PT_LOAD. */
    static const char interp[] = "/lib/zz-linux.so.2";
    unsigned char image[sizeof(Elf32_Ehdr) + 2 * sizeof(Elf32_Phdr) + sizeof interp];
    memset(image, 0, sizeof image);
    Elf32_Ehdr *eh = (Elf32_Ehdr *)image;
    Elf32_Phdr *ph = (Elf32_Phdr *)(image + sizeof *eh);
    const uint32_t base = 0x08048000, at = sizeof *eh + 2 * sizeof *ph;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS32;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_EXEC;
    eh->e_machine = EM_386;
    eh->e_version = EV_CURRENT;
    eh->e_entry = base + at;
    eh->e_phoff = sizeof *eh;
    eh->e_ehsize = sizeof *eh;
    eh->e_phentsize = sizeof *ph;
    eh->e_phnum = 2;
    ph[0] = (Elf32_Phdr){.p_type = PT_INTERP, .p_offset = at, .p_vaddr = base + at, .p_paddr = base + at,
                         .p_filesz = sizeof interp, .p_memsz = sizeof interp, .p_flags = PF_R, .p_align = 1};
    ph[1] = (Elf32_Phdr){.p_type = PT_LOAD, .p_vaddr = base, .p_paddr = base, .p_filesz = sizeof image,
                         .p_memsz = sizeof image, .p_flags = PF_R | PF_X, .p_align = 0x1000};
    memcpy(image + at, interp, sizeof interp);
    char elf[700];
    put_program(elf, sizeof elf, "bad-loader-32", image, sizeof image);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *const argv[] = {elf, NULL};
        execv(elf, argv);
        _exit(errno == ENOENT ? 2 : errno == ENOEXEC ? 3 : 4);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) >= 2, "the image ran: %#x", st);
    if (WEXITSTATUS(st) == 3) {
        printf("not run: this kernel runs no 32-bit programs (execve: ENOEXEC)\n");
        cr_skip_test("not run: this kernel runs no 32-bit programs");
    }
    cr_assert_eq(WEXITSTATUS(st), 2, "execve of a 32-bit image with a missing loader: ENOENT");
    expect_missing_loader(elf, interp);
}

Test(reports, json_output_never_replaces_a_device_and_keeps_the_old_file_on_failure)
{
    struct run_result r;
    struct stat st;
    /* A device is written in place: the error is said, the node stays. */
    const char *argv[] = {cushim_bin(), "run", "--json", "/dev/full", "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2, "the program succeeded, the summary asked for is lost: a failed run");
    /* The last line, after the text summary, where it is seen (found by a fresh-user trial: it came
     * first and scrolled away). */
    const char *lost = "\ncushim: error writing --json \"/dev/full\": No space left on device\n";
    cr_expect(strlen(r.err) > strlen(lost) && strcmp(r.err + strlen(r.err) - strlen(lost), lost) == 0 &&
              strstr(r.err, "device_total") != NULL, "%s", r.err);
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

Test(reports, outputs_go_through_a_link_and_a_fifo_needs_a_reader)
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
             "first); nothing was run\n", fifo);
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

Test(reports, an_output_named_by_a_standard_stream_is_appended_to_not_replaced)
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

/* A binary file that execve refuses (ENOEXEC: an ELF for another machine, a truncated one) is
 * not run as a shell script: exit 126, "Exec format error", as bash and dash say. (Found by an
 * odd-programs attack trial: execvp's fallback ran such a file with /bin/sh, which ran a command
 * line found among its bytes and exited 0, 2 or 127.) A text file without #! still runs with
 * /bin/sh, as a shell runs one. */
Test(reports, a_binary_that_cannot_be_executed_is_not_run_as_a_script)
{
    struct run_result r;
    char elf[700], mark[700], text[1200], expect[1600], path_env[800];
    snprintf(mark, sizeof mark, "%s/ran-as-script", test_dir());
    unlink(mark);
    /* An ELF header (64-bit, little-endian) with a bad machine, NUL bytes, then a command line. */
    char image[256] = "\x7f" "ELF\x02\x01\x01";
    int n = snprintf(image + 64, sizeof image - 64, "\ntouch '%s'\n", mark);
    cr_assert(n > 0 && n < (int)sizeof image - 64);
    put_program(elf, sizeof elf, "foreign-elf", image, 64 + (size_t)n);
    const char *a1[] = {cushim_bin(), "run", "--", elf, NULL};
    run_cmd(&r, a1, sim_env(NULL));
    cr_expect_eq(r.status, 126, "%s", r.err);
    snprintf(expect, sizeof expect, "cushim: cannot run \"%s\": Exec format error\n", elf);
    cr_expect_str_eq(r.err, expect);
    cr_expect_neq(access(mark, F_OK), 0, "the binary was run as a shell script");
    run_free(&r);
    /* Found along PATH the same. */
    snprintf(path_env, sizeof path_env, "PATH=/nonexistent:%s:/usr/bin:/bin", test_dir());
    const char *extra[] = {path_env, NULL};
    const char *a2[] = {cushim_bin(), "run", "--", "foreign-elf", NULL};
    run_cmd(&r, a2, sim_env(extra));
    cr_expect_eq(r.status, 126, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: cannot run \"foreign-elf\": Exec format error\n");
    cr_expect_neq(access(mark, F_OK), 0, "the binary was run as a shell script");
    run_free(&r);
    /* A text file without #!: /bin/sh runs it, as before. */
    snprintf(text, sizeof text, "touch '%s'\nexit 5\n", mark);
    put_program(elf, sizeof elf, "no-shebang.sh", text, strlen(text));
    const char *a3[] = {cushim_bin(), "run", "--quiet", "--", elf, NULL};
    run_cmd(&r, a3, sim_env(NULL));
    cr_expect_eq(r.status, 5, "%s", r.err);
    cr_expect_eq(access(mark, F_OK), 0, "a text file without #! runs with /bin/sh");
    run_free(&r);
    unlink(mark);
}
