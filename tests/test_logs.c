/* The shim's log and writes that fail: CUSHIM_LOG_FILE (per pid for a forked child, never into a
 * descriptor the program reused, not inherited across exec, falling back to stderr when it stops
 * taking lines or cannot be opened), a file size limit (ulimit -f) below the segment, the report
 * or the log, and pipes whose reader left (SIGPIPE): none of them kills the program, and the
 * program's own SIGPIPE stays its own. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/segment.h"
#include "harness.h"

/* Runs argv with `extra` in its environment and its descriptor `fd` a pipe whose read end is
 * already closed. Returns the wait status. */
static int argv_on_dead_pipe(int fd, const char *const *argv, const char *const *extra)
{
    /* The environment in the parent: sim_env makes the test's directory, which only the process
     * that made it removes at its exit (made in the child, which execs, it was left behind). */
    const char *const *env = sim_env(extra);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(p[1], fd);
        close(p[1]);
        for (const char *const *e = env; *e; e++)
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

/* Runs rt_prog malloc under the shim with `extra` in its environment and its descriptor `fd`
 * (1 or 2) a pipe whose read end is already closed: every write there meets SIGPIPE. Returns the
 * wait status. */
static int run_on_dead_pipe(int fd, const char *const *extra)
{
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    return argv_on_dead_pipe(fd, argv, extra);
}

Test(logs, a_log_file_that_stops_taking_lines_falls_back_to_stderr)
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

/* /dev/tty with no controlling terminal: open(2) says ENXIO, which is not "a FIFO with no
 * reader" (said before; found by an attack helper). */
Test(logs, a_log_on_dev_tty_without_a_terminal_says_why)
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

Test(logs, a_forked_child_logs_to_its_own_pid_file)
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

Test(logs, the_log_never_writes_into_a_file_the_program_opened_in_its_place)
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

/* A program started with stdin closed: the shim's log does not take descriptor 0 (a daemon that
 * reopens its standard descriptors would close it, or read from it; an environment trial). */
Test(logs, the_log_never_takes_a_closed_standard_descriptor)
{
    const char *dir = fresh_dir("closed-stdin"), *ready = fresh_dir("ready-closed-stdin");
    char lf[1000], rd[1000], hf[1000], hold[900], cmd[1200], log[900];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(lf, sizeof lf, "CUSHIM_LOG_FILE=%s", log);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hold, sizeof hold, "%s/go", dir);
    snprintf(hf, sizeof hf, "HOLD_FILE=%s", hold);
    snprintf(cmd, sizeof cmd, "exec %s hold <&-", program("rt_prog"));
    const char *extra[] = {preload_env(), lf, rd, hf, "CUSHIM_LOG=info", NULL};
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t sh = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);
    char fd0[64], fds[64], target[1000];
    snprintf(fd0, sizeof fd0, "/proc/%d/fd/0", (int)pid);
    cr_expect(readlink(fd0, target, sizeof target) < 0, "descriptor 0 stays closed");
    snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(fds);
    cr_assert(d);
    int log_fd = -1;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        char link[400];
        snprintf(link, sizeof link, "%s/%s", fds, de->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0 && (target[n] = '\0', strcmp(target, log) == 0))
            log_fd = atoi(de->d_name);
    }
    closedir(d);
    cr_expect_geq(log_fd, 3, "the log is open above the standard descriptors: %d", log_fd);
    touch(hold);
    cr_expect_eq(wait_bg(sh), 0);
    char *text = slurp(log);
    cr_expect(text && strstr(text, "] info: started: segment ") != NULL, "%s", text);
    free(text);
}

/* A program started with stdout and stderr closed opens data files, which take their numbers:
 * CUSHIM_REPORT=stderr (or stdout, or a path to either) and log lines for stderr are dropped,
 * never written into them (an exit-paths trial: the report was appended to the program's file;
 * a review: so it was through /dev/stderr). */
Test(logs, a_report_for_a_closed_stderr_never_lands_in_a_file_of_the_program)
{
    const char *reports[] = {"CUSHIM_REPORT=stderr", "CUSHIM_REPORT=stdout", "CUSHIM_REPORT=/dev/stderr",
                             "CUSHIM_REPORT=/proc/self/fd/1"};
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "closed-outputs-%d", k);
        const char *dir = fresh_dir(name);
        char dd[900], cmd[1200], path[1000];
        snprintf(dd, sizeof dd, "DATA_DIR=%s", dir);
        snprintf(cmd, sizeof cmd, "exec %s data_on_closed_outputs >&- 2>&-", program("rt_prog"));
        const char *extra[] = {preload_env(), dd, reports[k], "CUSHIM_LOG=debug", NULL};
        const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        struct run_result r;
        run_cmd(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 0, "%s: %d", reports[k], r.status);
        snprintf(path, sizeof path, "%s/data", dir);
        char *text = slurp(path);
        /* The program's own lines at exit follow (rt_prog prints the simulator's counters). */
        cr_expect(text && strncmp(text, "DATA\nsim.device.0=0\n", 19) == 0 && !strstr(text, "cushim"), "%s: %s",
                  reports[k], text);
        free(text);
        snprintf(path, sizeof path, "%s/data2", dir);
        text = slurp(path);
        cr_expect_str_eq(text, "DATA2\n", "%s", reports[k]);
        free(text);
        run_free(&r);
    }
}

Test(logs, the_log_copy_of_stderr_is_not_inherited)
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

/* A file size limit (ulimit -f) below the segment and the report: the program runs on (before,
 * SIGXFSZ from sizing the segment killed it), counting in private memory, and each failed write
 * says so in one line. */
Test(logs, a_file_size_limit_never_kills_the_program)
{
    struct run_result r;
    char rep[700], line[900];
    snprintf(rep, sizeof rep, "CUSHIM_REPORT=%s/fsize.json", test_dir());
    const char *extra[] = {preload_env(), rep, "CUSHIM_REPORT_FORMAT=json", NULL};
    /* 2 blocks (1 KiB in dash, 2 in bash): below the segment and the report (3.4 KB), and above
     * what is said on stderr, itself a file here under the same limit, with the paths of the
     * longest TMPDIR the harness takes (1 block cut the second line short under a 121-byte one). */
    const char *argv[] = {"/bin/sh", "-c", "ulimit -f 2 && exec \"$0\" malloc", program("rt_prog"), NULL};
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
    /* --json: refused before the program runs (it wrote a JSON of no devices, status 0: a
     * bad-input trial). */
    char json[700], cmd[1600];
    snprintf(json, sizeof json, "%s/fsize-run.json", test_dir());
    snprintf(cmd, sizeof cmd, "ulimit -f 10 && exec \"$0\" run --json %s -- \"$1\" malloc", json);
    const char *with_json[] = {"/bin/sh", "-c", cmd, cushim_bin(), program("rt_prog"), NULL};
    run_cmd(&r, with_json, sim_env(NULL));
    cr_expect_eq(r.status, 2, "%s", r.err);
    char want[400]; /* sh's ulimit -f 10: 10 blocks of 512 bytes (dash; POSIX leaves the unit open) */
    snprintf(want, sizeof want, "cushim: --json needs the processes' summaries, and none can reach the run: the "
             "file size limit (ulimit -f) is 5120 bytes, below a segment's %zu; raise it or leave out --json; "
             "nothing was run\n", sizeof(struct cushim_segment));
    cr_expect_str_eq(r.err, want);
    cr_expect_str_eq(r.out, "", "the program did not run");
    cr_expect(access(json, F_OK) != 0, "no JSON written");
    run_free(&r);
}

/* A log at the file size limit whose fallback, stderr, is a pipe nobody reads: both writes fail
 * (EFBIG, then EPIPE), and both signals they raised are taken away (before, only the last
 * error's was, and SIGXFSZ killed the program; found by a review helper). */
Test(logs, two_failed_log_writes_never_kill_the_program)
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

Test(logs, a_bad_value_said_on_a_dead_pipe_does_not_kill_the_program)
{
    /* The line about a bad value, written from the shim's constructor to a stderr nobody reads,
     * must not kill the program with SIGPIPE. */
    const char *extra[] = {preload_env(), "CUSHIM_OFFLOAD_MIN=zz", "CUSHIM_FOO=1", NULL};
    int status = run_on_dead_pipe(2, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(logs, cushim_run_on_a_dead_pipe_runs_the_program_with_sigpipe_as_given)
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

Test(logs, a_program_that_cannot_be_found_is_127_also_on_a_dead_pipe)
{
    /* cushim run says why it could not run the program on a stderr nobody reads: it must not die
     * of SIGPIPE saying it (the run would look like a program killed by a signal). */
    const char *argv[] = {cushim_bin(), "run", "--", "/nonexistent/program", NULL};
    const char *extra[] = {NULL};
    int status = argv_on_dead_pipe(2, argv, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 127, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(logs, a_log_pipe_whose_reader_left_does_not_kill_the_program)
{
    /* The log (stderr) is a pipe nobody reads: each log line meets SIGPIPE, whose default kills.
     * The shim's writes must not: the program ends normally. */
    const char *extra[] = {preload_env(), "CUSHIM_LOG=debug", "CUSHIM_REPORT=stderr", NULL};
    int status = run_on_dead_pipe(2, extra);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x (killed by %d)", status,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(logs, the_programs_own_sigpipe_stays_its_own)
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
