/* cushim run [OPTIONS] -- PROGRAM [ARGS...]
 *
 * Preloads libcushim.so into PROGRAM (keeping any LD_PRELOAD already set), passes options as
 * CUSHIM_* variables, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to cushim itself, and at exit
 * prints the summary of the program and of every descendant that used CUDA (each process's shim
 * writes its final counters into a private run directory). Returns the program's exit status,
 * or 128+N when a signal N killed it. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/path.h"
#include "common/procinfo.h"
#include "common/report.h"
#include "tools/cli.h"
#include "tools/output.h"
#include "tools/run_collect.h"
#include "tools/run_exec.h"
#include "tools/run_nested.h"
#include "tools/run_options.h"
#include "tools/run_paths.h"
#include "tools/run_signals.h"

extern char **environ;

/* Whether the process's file size limit (setrlimit(2), RLIMIT_FSIZE; inherited by the program)
 * is below a segment: no shim can make one then, nor the run's copy. */
static int fsize_below_segment(void)
{
    struct rlimit l;
    return getrlimit(RLIMIT_FSIZE, &l) == 0 && l.rlim_cur != RLIM_INFINITY &&
           l.rlim_cur < sizeof(struct cushim_segment);
}

/* The simulated driver's directory of the build tree this cushim belongs to (<build>/tools/cushim
 * beside <build>/tests/sim/libcuda.so.1), absolute, for a hint that works from any directory:
 * 0, or -1 when there is none (an installed cushim). */
static int sim_driver_dir(char *buf, size_t len)
{
    if (cli_beside_exe("../tests/sim/libcuda.so.1", buf, len) != 0)
        return -1;
    *strrchr(buf, '/') = '\0';
    return 0;
}

/* Whether the CUDA driver (libcuda.so.1) can be found where the program looked for it: this
 * process has the same library path. Loaded and unloaded at once (a failed program's run only). */
static int driver_on_library_path(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h)
        dlclose(h);
    return h != NULL;
}

/* The text summary of one process; a process that ended without writing its summary (killed by
 * a signal, or ended with _exit, as Python's os._exit and forked workers do) is shown with the
 * counters its segment held at its end. */
static void print_process(const struct cushim_snapshot *s, const char *title)
{
    /* Composed in memory, then written at once: descendants still running write their own
     * summaries to the same stderr, and line by line the two would interleave mid-line. */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    FILE *out = m ? m : stderr;
    cushim_text_process(out, s, title);
    if (!s->exited && s->device_count)
        fprintf(out, "%spid %d ended without its exit report (killed by a signal, _exit, or an exec of a program "
                "without the shim): the "
                "counters above are those of its last moment (from its live segment)\n", title, s->pid);
    if (m) {
        if (fclose(m) == 0 && text)
            fwrite(text, 1, len, stderr);
        free(text);
    }
}

/* The launched program when it never used CUDA: pid and command, no devices. */
static void synth_top(struct cushim_snapshot *s, pid_t pid, char **argv, int status)
{
    size_t o = 0;
    memset(s, 0, sizeof *s);
    s->pid = pid;
    s->pidns_inode = cushim_pidns_inode(); /* the program is our child: our pid namespace */
    s->uid = UINT32_MAX;                  /* not known: it may have changed user (setpriv) */
    snprintf(s->version, sizeof s->version, "%s", CUSHIM_VERSION);
    s->exited = !WIFSIGNALED(status); /* as for a process with a segment: killed, no exit report */
    for (int i = 0; argv[i] && o + 1 < sizeof s->command; i++)
        o += (size_t)snprintf(s->command + o, sizeof s->command - o, "%s%s", i ? " " : "", argv[i]);
}

/* Writes the run's JSON to f (opened before the run) and closes it: 0, or an errno (for
 * cli_output_strerror) for the caller to say after the summary. */
static int write_json(struct cli_output *out, const struct cushim_snapshot *top, const struct collected *c,
                      int disabled, int status)
{
    struct jsonw w;
    jsonw_init(&w, out->f);
    cushim_json_process(&w, NULL, top, 0);
    /* CUSHIM_DISABLE: nothing was counted; an empty `devices` must not read as "used no CUDA". */
    jsonw_bool(&w, "counting_disabled", disabled);
    jsonw_array_begin(&w, "descendants");
    for (int i = 0; i < c->ndesc; i++)
        cushim_json_process(&w, NULL, &c->desc[i], 1);
    jsonw_array_end(&w);
    jsonw_u64(&w, "descendants_still_running", (uint64_t)c->running);
    /* A summary that could not be read (a corrupted segment): an empty `devices` must not read as
     * "used no CUDA" (a bad-input trial). */
    jsonw_u64(&w, "summaries_unreadable", (uint64_t)c->unreadable);
    /* How the launched program ended (waitpid(2)): its exit status, or the signal that ended it
     * (a fresh-user trial: only the text summary said). */
    if (WIFEXITED(status))
        jsonw_i64(&w, "exit_code", WEXITSTATUS(status));
    else
        jsonw_string(&w, "exit_code", NULL);
    if (WIFSIGNALED(status))
        jsonw_i64(&w, "exit_signal", WTERMSIG(status));
    else
        jsonw_string(&w, "exit_signal", NULL);
    jsonw_object_end(&w);
    if (cli_output_commit(out) == 0)
        return 0;
    return errno ? errno : EIO;
}

int cmd_run(int argc, char **argv)
{
    /* A reader of our stderr that goes away must not kill us: not before the program starts (a
     * line about a bad value), nor before the summary. The program gets the disposition we were
     * given. */
    struct sigaction ignore = {.sa_handler = SIG_IGN}, given_sigpipe;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &given_sigpipe);
    const char *json = NULL;
    int quiet = 0, i = 1, dashdash = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            dashdash = 1;
            break;
        }
        if (argv[i][0] != '-')
            break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            run_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (strncmp(argv[i], "--quiet=", 8) == 0) {
            cli_error("--quiet takes no value (got %s)", cli_shown(argv[i]));
            return EXIT_USAGE;
        } else if (strncmp(argv[i], "--json", 6) == 0 && (argv[i][6] == '\0' || argv[i][6] == '=')) {
            const char *v;
            if (cli_option_value(argc, argv, &i, "--json", "a FILE", &v) < 0)
                return EXIT_USAGE;
            cli_say_replaced("--json", &json, v);
        } else {
            int used = run_config_flag(argc, argv, i);
            if (used < 0)
                return EXIT_USAGE;
            char near[64];
            size_t d = 0;
            if (used == 0 && argv[i][1] && run_nearest_flag(argv[i], near, sizeof near, &d)) {
                if (d == 0) /* the option itself, given a value it does not take: --help=1 */
                    cli_error("%s takes no value (got %s)", near, cli_shown(argv[i]));
                else
                    cli_error("unknown option %s for run (did you mean %s? see cushim run --help)", cli_shown(argv[i]),
                              near);
                return EXIT_USAGE;
            }
            if (used == 0) {
                cli_bad_word("run", argv[i], "cushim run [OPTIONS] -- PROGRAM [ARGS...]");
                return EXIT_USAGE;
            }
            i += used - 1;
        }
    }
    if (i >= argc) {
        cli_error("run needs a PROGRAM (usage: cushim run [OPTIONS] -- PROGRAM [ARGS...])");
        return EXIT_USAGE;
    }
    char **prog = argv + i;
    /* A size in two words is that wherever the options end: no program is named MiB (found by an
     * attack trial: "--offload-min 64 MiB --offload compile -- true" said --offload was missing). */
    int split = !dashdash && prog[0] ? run_split_value(argv, i) : 0;
    if (split == 2 || split == 3) {
        cli_error("\"%s%s%s %s\": a value is one word, e.g. %s%s%s%s (the options end at the first word that is "
                  "not one, so \"%s\" would be run as the program); nothing was run", split == 2 ? argv[i - 2] : "",
                  split == 2 ? " " : "", argv[i - 1], prog[0], split == 2 ? argv[i - 2] : "", split == 2 ? "=" : "",
                  argv[i - 1], prog[0], prog[0]);
        return EXIT_USAGE;
    }
    /* "--spill yes prog": a switch's value given with a space, or a program named yes? Neither is
     * run (found by attack trials: `yes` ran, printing forever, and with a "--" after it, the
     * program after the "--" did not). */
    if (split == 1 && prog[1] && strcmp(prog[1], "--") == 0) { /* the program is after it: not yes */
        cli_error("\"%s %s\": a switch takes its value after '=' (%s=%s); nothing was run", argv[i - 1], prog[0],
                  argv[i - 1], prog[0]);
        return EXIT_USAGE;
    }
    if (split == 1) {
        cli_error("\"%s %s\": a switch takes its value after '=' (%s=%s), and a program goes after \"--\" (%s -- "
                  "%s); nothing was run", argv[i - 1], prog[0], argv[i - 1], prog[0], argv[i - 1], prog[0]);
        return EXIT_USAGE;
    }

    /* A run inside a run: the outer one's directory and id, to hand it our processes at the end
     * (this run replaces the variables for its own processes). */
    struct outer_run outer;
    outer_run_find(&outer);
    /* An enclosing run that prints text summaries prints ours too (we hand it our processes). */
    const char *outer_summary = getenv("CUSHIM_RUN_SUMMARY");
    int summary_by_outer = outer.id && outer_summary && !strcmp(outer_summary, "1");
    /* A run inside a run that sees the values the outer one checked (its fingerprint, below)
     * leaves their problems unsaid: the outer run said them once. */
    char outer_checked[24] = "";
    if (getenv("CUSHIM_RUN_CHECKED") && outer.id)
        snprintf(outer_checked, sizeof outer_checked, "%s", getenv("CUSHIM_RUN_CHECKED"));
    /* The run's own variables are set below: values left in the environment (a run inside a
     * run, a stale export) are replaced, so they are not checked. */
    for (int k = 0; k < CUSHIM_OPT_COUNT; k++)
        if (cushim_option_internal((enum cushim_option)k))
            unsetenv(cushim_option_table[k].variable);
    /* Processes that see these same values stay quiet; one that sets its own reports them. */
    char checked[24];
    snprintf(checked, sizeof checked, "%llx",
             (unsigned long long)cushim_config_fingerprint((const char *(*)(const char *))getenv, environ));
    int said_by_outer = outer_checked[0] && strcmp(outer_checked, checked) == 0;
    run_env_said(said_by_outer);
    /* Report bad CUSHIM_ values once here; the shims stay quiet under `cushim run`. */
    struct cushim_config cfg;
    cushim_config_load(&cfg, (const char *(*)(const char *))getenv, environ, run_print_config_error);
    run_say_empty_flags(); /* typed here: said here, as a flag's bad value is */
    /* The report's value as given, for messages (check_paths makes a relative one absolute). */
    char report_typed[CUSHIM_PATH_MAX] = "", log_typed[CUSHIM_PATH_MAX] = "";
    if (getenv("CUSHIM_REPORT"))
        snprintf(report_typed, sizeof report_typed, "%s", getenv("CUSHIM_REPORT"));
    if (getenv("CUSHIM_LOG_FILE"))
        snprintf(log_typed, sizeof log_typed, "%s", getenv("CUSHIM_LOG_FILE"));
    if (run_flag_bad() || run_check_paths(&cfg) != 0)
        return EXIT_USAGE;
    const char *report_to = getenv("CUSHIM_REPORT");
    if (run_flag_given(CUSHIM_OPT_REPORT_FORMAT) && !(report_to && *report_to)) {
        cli_error("--report-format is the format of --report (each process's own report); the run's "
                  "summary is text on stderr, or JSON with --json FILE");
        return EXIT_USAGE;
    }
    /* One file for both: each would overwrite the other (a report named without %p is written by
     * every process at its exit, the summary after them all). */
    if (json && report_to && run_same_output_file(json, report_to)) {
        cli_error("--json %s and %s %s name one file: the run's summary and the processes' exit "
                  "reports would overwrite each other; give them two files; nothing was run", cli_shown(json),
                  run_flag_given(CUSHIM_OPT_REPORT) ? "--report" : "CUSHIM_REPORT", cli_shown(report_typed));
        return EXIT_USAGE;
    }
    /* The log with the summary: the summary's rename at the end would remove what was logged
     * (an earlier trial: `--json F --log-file F` was taken). A report may share the log's file:
     * it is written after the log's lines (test_reports). */
    const char *log_to = getenv("CUSHIM_LOG_FILE");
    if (json && log_to && *log_to && !strstr(log_to, "%p") && run_same_output_file(json, log_to)) {
        cli_error("--json %s and %s %s name one file: the run's summary would replace the log; "
                  "give them two files; nothing was run", cli_shown(json),
                  run_flag_given(CUSHIM_OPT_LOG_FILE) ? "--log-file" : "CUSHIM_LOG_FILE", cli_shown(log_typed));
        return EXIT_USAGE;
    }
    if (!run_flag_given(CUSHIM_OPT_REPORT_FORMAT) && !(report_to && *report_to)) {
        const char *env_format = getenv("CUSHIM_REPORT_FORMAT");
        if (env_format && *env_format && !said_by_outer)
            fprintf(stderr, "cushim: CUSHIM_REPORT_FORMAT is set, and CUSHIM_REPORT is not: it has no effect "
                            "(the run's summary is text on stderr, or JSON with --json FILE)\n");
    }
    /* Typed options that would do nothing (the offload policy off): a usage error, as
     * --report-format without --report, not a value silently unused. An empty value is the
     * default, as in the environment (a fresh-user trial: `--offload-min ""` was refused). */
    const char *env_min = getenv("CUSHIM_OFFLOAD_MIN"), *env_cache = getenv("CUSHIM_OFFLOAD_CACHE");
    if (run_flag_given(CUSHIM_OPT_OFFLOAD_MIN) && env_min && *env_min && cfg.offload == CUSHIM_OFFLOAD_OFF) {
        cli_error("--offload-min is the smallest request --offload compile|always moves, and offload "
                  "is off: give --offload too, or leave it out");
        return EXIT_USAGE;
    }
    if (run_flag_given(CUSHIM_OPT_OFFLOAD_CACHE) && env_cache && *env_cache && cfg.offload == CUSHIM_OFFLOAD_OFF &&
        !cfg.spill) {
        cli_error("--offload-cache keeps freed offloaded memory for reuse, and nothing is offloaded "
                  "(offload and spill are off): give --offload or --spill too, or leave it out");
        return EXIT_USAGE;
    }
    /* The same values from the environment warn, as bad values there do: the run goes on. */
    if (!run_flag_given(CUSHIM_OPT_OFFLOAD_MIN) && env_min && *env_min && cfg.offload == CUSHIM_OFFLOAD_OFF &&
        !said_by_outer)
        fprintf(stderr, "cushim: CUSHIM_OFFLOAD_MIN is set, and offload is off (CUSHIM_OFFLOAD): it "
                        "has no effect\n");
    if (!run_flag_given(CUSHIM_OPT_OFFLOAD_CACHE) && env_cache && *env_cache &&
        cfg.offload == CUSHIM_OFFLOAD_OFF && !cfg.spill && !said_by_outer)
        fprintf(stderr, "cushim: CUSHIM_OFFLOAD_CACHE is set, and nothing is offloaded (CUSHIM_OFFLOAD "
                        "and CUSHIM_SPILL are off): it has no effect\n");
    /* This run prints each process's text summary on stderr at its end: a process whose summary
     * reaches the run leaves out its own text report to stderr (a descendant that outlives the
     * run still prints its own). */
    if (!quiet || summary_by_outer)
        setenv("CUSHIM_RUN_SUMMARY", "1", 1);
    cli_config_reported = 1;
    setenv("CUSHIM_RUN_CHECKED", checked, 1);

    char lib[4096];
    if (cli_library_path(run_flag_given(CUSHIM_OPT_LIBRARY) ? "--library " : "CUSHIM_LIBRARY=", lib, sizeof lib) != 0)
        return EXIT_USAGE;
    /* ld.so splits LD_PRELOAD at spaces and colons (ld.so(8): "separated by spaces or colons", no
     * quoting): such a path would preload nothing, and the run would count nothing. */
    const char *sep = strpbrk(lib, " :");
    if (sep) {
        cli_error("the shim library's path \"%s\" has a %s, which LD_PRELOAD cannot hold (the "
                  "loader splits its list there); put cushim (or a copy of libcushim.so, given with "
                  "--library) under a path without spaces or colons; nothing was run",
                  lib, *sep == ' ' ? "space" : "colon");
        return EXIT_USAGE;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t need = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(need);
    if (!preload)
        return EXIT_USAGE;
    /* After what was there: e.g. sanitizer runtimes must stay first. */
    snprintf(preload, need, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", lib);
    setenv("LD_PRELOAD", preload, 1);
    free(preload);

    /* From here on, a SIGINT/SIGTERM/... sent to cushim is held and reaches the program once it
     * runs (the run directory below is then cleaned up as at any end). */
    struct run_signals sigs;
    run_signals_prepare(&sigs);
    /* --json needs the summaries, and none can reach the run below a segment's size (the shims
     * count in private memory and say their own text on stderr): a JSON of no devices and status
     * 0 would read as "used no CUDA" (a bad-input trial). Refused before anything runs. */
    if (json && fsize_below_segment()) {
        struct rlimit l;
        getrlimit(RLIMIT_FSIZE, &l);
        cli_error("--json needs the processes' summaries, and none can reach the run: the file size "
                  "limit (ulimit -f) is %llu bytes, below a segment's %zu; raise it or leave out "
                  "--json; nothing was run", (unsigned long long)l.rlim_cur, sizeof(struct cushim_segment));
        return EXIT_USAGE;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[4096], cwd[2048] = "";
    /* A relative TMPDIR is taken from the working directory (the shims need an absolute
     * CUSHIM_RUN_DIR: the program may change directory). */
    char shown[500];
    cushim_config_shown(tmp && *tmp ? tmp : "/tmp", shown, sizeof shown);
    if (tmp && *tmp && tmp[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        cli_error("TMPDIR=%s: cannot make it an absolute path: %s", shown, strerror(errno));
        return EXIT_USAGE;
    }
    /* cushim-run.PID-START-PIDNS.XXXXXX: `cushim gc` removes the directory of a run whose cushim
     * is gone (killed before it could clean up) by this pid and start time (procinfo.h), in its
     * own pid namespace only (a /tmp shared with a container holds runs it cannot judge). */
    size_t made = (size_t)snprintf(dir, sizeof dir, "%s%s%s/cushim-run.%d-%llu-%llu.XXXXXX", cwd,
                                   cwd[0] ? "/" : "", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
                                   (unsigned long long)cushim_self_start_time(),
                                   (unsigned long long)cushim_pidns_inode());
    /* Cut short, the name would lose its XXXXXX (mkdtemp: EINVAL, "Invalid argument": a
     * bad-input trial): too long is what it is. */
    if (made >= sizeof dir)
        errno = ENAMETOOLONG;
    if (made >= sizeof dir || !mkdtemp(dir)) {
        cli_error("cannot create a run directory under %s%s: %s; nothing was run", shown,
                  tmp && *tmp ? " (TMPDIR)" : "", strerror(errno));
        return EXIT_USAGE;
    }
    chmod(dir, 0700); /* whatever the umask: the run's processes write into it, the run reads it */
    struct stat dir_st = {0};
    lstat(dir, &dir_st);
    if (strlen(dir) >= CUSHIM_PATH_MAX) {
        /* The shims would refuse CUSHIM_RUN_DIR (config.h) and every summary would be lost. */
        cli_error("TMPDIR=%s makes the run directory %zu bytes long, at most %d (set a shorter TMPDIR); "
                  "nothing was run", shown, strlen(dir), CUSHIM_PATH_MAX - 1);
        rmdir(dir);
        return EXIT_USAGE;
    }
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != sizeof id || id == 0)
        id = (uint64_t)getpid() << 20 ^ (uint64_t)time(NULL);
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%llx", (unsigned long long)id);
    setenv("CUSHIM_RUN_DIR", dir, 1);
    setenv("CUSHIM_RUN_ID", idbuf, 1);
    if (outer.id)
        outer_run_register(&outer, id, dir);

    /* The JSON file is tried now: a bad path is a usage error before anything runs. A regular
     * file's temporary is made again at the end, so that a run killed meanwhile leaves none;
     * anything else (a FIFO, a terminal) stays open. */
    struct cli_output json_out = {0};
    if (json && cli_output_open(&json_out, json) != 0) {
        /* A directory that does not exist is said as for --report (run_paths.c; an earlier
         * trial: "No such file or directory" of a path that is only missing its directory). */
        int err = errno;
        char abs[PATH_MAX * 2], parent[PATH_MAX * 2];
        struct stat pst;
        size_t n = run_absolute_path(json, abs, sizeof abs);
        if (n != (size_t)-1 && n < sizeof abs)
            cushim_parent_dir(abs, parent, sizeof parent);
        if (err == ENOENT && n < sizeof abs && stat(parent, &pst) != 0 && errno == ENOENT)
            cli_error("--json %s: %s does not exist; nothing was run", cli_shown(json), parent);
        else
            cli_error("cannot write --json %s: %s; nothing was run", cli_shown(json), cli_output_strerror(err));
        cli_remove_run_dir(dir);
        return EXIT_USAGE;
    }
    if (json && !json_out.direct)
        cli_output_abort(&json_out);


    /* A close-on-exec pipe tells the parent whether exec succeeded. */
    int exec_pipe[2];
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
        cli_error("cannot create a pipe: %s", strerror(errno));
        cli_remove_run_dir(dir);
        return EXIT_USAGE;
    }
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("cannot fork: %s", strerror(errno));
        cli_remove_run_dir(dir);
        return EXIT_USAGE;
    }
    if (pid == 0) {
        run_signals_child(&sigs);
        sigaction(SIGPIPE, &given_sigpipe, NULL);
        close(exec_pipe[0]);
        char me[32];
        snprintf(me, sizeof me, "%d", (int)getpid());
        setenv("CUSHIM_RUN_TOP", me, 1);
        /* A binary file is not left to execvp, whose ENOEXEC fallback would run it with
         * /bin/sh (run_exec.h). */
        char binary[PATH_MAX];
        if (run_exec_binary(prog[0], binary))
            execv(binary, prog);
        else
            execvp(prog[0], prog);
        int e = errno;
        /* Still cushim run: a stderr nobody reads must not kill it before it says why. */
        sigaction(SIGPIPE, &ignore, NULL);
        struct stat st;
        char why[PATH_MAX + 128];
        /* (a value in two words, or a switch's after a space, stopped the run before: split) */
        if (e == EACCES && stat(prog[0], &st) == 0 && S_ISDIR(st.st_mode))
            cli_error("cannot run %s: it is a directory", cli_shown(prog[0]));
        else if (e == EACCES && run_exec_dir_on_path(prog[0], why, sizeof why)) {
            cli_error("cannot run %s: %s", cli_shown(prog[0]), why);
            e = ENOENT; /* not found, 127, as a shell says of it */
        }
        else if (e == ENOENT && run_exec_assignment(prog, why, sizeof why))
            cli_error("cannot run %s: %s", cli_shown(prog[0]), why);
        else if (e == ENOENT && (run_exec_missing_interpreter(prog[0], why, sizeof why) ||
                                 run_exec_not_on_path(prog[0], why, sizeof why)))
            cli_error("cannot run %s: %s", cli_shown(prog[0]), why);
        else
            cli_error("cannot run %s: %s", cli_shown(prog[0]), strerror(e));
        ssize_t w = write(exec_pipe[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? 127 : 126);
    }
    run_signals_started(&sigs, pid);
    close(exec_pipe[1]);
    int exec_errno = 0;
    ssize_t got;
    while ((got = read(exec_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(exec_pipe[0]);
    /* Ended, but not reaped yet: until it is, its pid is nobody else's, so a signal forwarded
     * meanwhile cannot reach another process. */
    siginfo_t ended;
    while (waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    run_signals_stopped(&sigs);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (got == (ssize_t)sizeof exec_errno) {
        /* The program never ran (the child said why). */
        cli_remove_run_dir(dir);
        if (json && json_out.direct)
            cli_output_abort(&json_out);
        return code;
    }

    struct collected c;
    /* The program (or a cleanup of TMPDIR) may have removed the run directory, or put another in
     * its place: no summary could reach the run, said in one line rather than as "no CUDA memory
     * activity" (an attack trial). */
    struct stat dir_now;
    int dir_gone = lstat(dir, &dir_now) != 0 || dir_now.st_ino != dir_st.st_ino || dir_now.st_dev != dir_st.st_dev;
    run_collect(dir, id, &outer, &c);
    struct cushim_snapshot synth;
    const struct cushim_snapshot *top = c.top;
    if (!top) {
        synth_top(&synth, pid, prog, status);
        top = &synth;
    }
    /* JSON first: the text below goes to stderr, which a pipe reader may have closed. */
    /* A summary asked for and lost fails a run that otherwise succeeded (CI must notice);
     * a failed program's own status says more. A write that failed is said after the text
     * summary, as its last line, where it is seen. */
    int json_error = 0;
    if (json && !json_out.direct && cli_output_open(&json_out, json) != 0) {
        cli_error("cannot write --json %s: %s", cli_shown(json), cli_output_strerror(errno));
        if (code == 0)
            code = EXIT_USAGE;
    } else if (json && (json_error = write_json(&json_out, top, &c, cfg.disable, status)) != 0 && code == 0) {
        code = EXIT_USAGE;
    }
    /* A summary lost to a corrupted segment fails a run that otherwise succeeded, as a lost
     * --json does. */
    if ((c.unreadable || dir_gone) && code == 0)
        code = EXIT_USAGE;
    int policy_asked = cfg.offload != CUSHIM_OFFLOAD_OFF || cfg.spill;
    for (unsigned d = 0; d < CUSHIM_MAX_DEVICES; d++)
        policy_asked |= cfg.device_limit[d] != 0;
    if (quiet && cfg.disable && policy_asked) /* --quiet drops the summary, not this (a fresh-user trial) */
        fprintf(stderr, "cushim: counting is disabled (CUSHIM_DISABLE): no device limit, offload or spill\n");
    if (dir_gone)
        cli_error("the run directory %s was removed while `%s` ran (by the program, or a cleanup of TMPDIR): "
                  "the summaries of its processes could not reach the run", cli_shown(dir), prog[0]);
    if (!quiet) {
        int status_said = 0;
        if (cfg.disable) {
            fprintf(stderr, "cushim: counting is disabled (CUSHIM_DISABLE): no summary, and no device limit, "
                            "offload or spill\n");
        } else if (!c.top && c.ndesc == 0 && !c.running && dir_gone) {
            /* said above */
        } else if (!c.top && c.ndesc == 0 && !c.running && c.unreadable) {
            cli_error("no summary of `%s` could be read: %d of this run's %s unreadable (said above)",
                      top->command, c.unreadable, c.unreadable == 1 ? "summaries is" : "summaries are");
        } else if (!c.top && c.ndesc == 0 && !c.running && fsize_below_segment()) {
            /* The shims could make neither a segment nor the run's copy (each says its own
             * summary on stderr then). */
            cli_error("no summary of `%s` reached the run: the file size limit (ulimit -f) is below "
                      "a segment's %zu bytes; a process that used CUDA said its own above",
                      top->command, sizeof(struct cushim_segment));
        } else if (!c.top && c.ndesc == 0 && !c.running) {
            /* No CUDA memory: the program's own messages say why, unless no driver can be found
             * (then CUDA's own message, "driver older than the runtime", misleads; a program that
             * handles the failure may even exit 0). */
            char hint[PATH_MAX + 160] = "";
            if (!driver_on_library_path()) {
                char sim[PATH_MAX];
                if (sim_driver_dir(sim, sizeof sim) == 0)
                    snprintf(hint, sizeof hint, "; no CUDA driver, libcuda.so.1, is on the library path "
                             "(without a GPU, the simulated one: LD_LIBRARY_PATH=%s)", sim);
                else
                    snprintf(hint, sizeof hint, "; no CUDA driver, libcuda.so.1, is on the library path "
                             "(without a GPU, a build tree's simulated one: LD_LIBRARY_PATH=BUILD/tests/sim, README)");
            }
            /* The program's own status (code may be 2 for a --json that could not be written). */
            status_said = WIFEXITED(status) && WEXITSTATUS(status) != 0;
            if (status_said)
                cli_error("no CUDA memory activity in `%s` or its descendants before it exited with "
                          "status %d%s", top->command, WEXITSTATUS(status), hint);
            else
                cli_error("no CUDA memory activity in `%s` or its descendants%s", top->command,
                          hint[0] ? hint : " (none allocated, or CUDA did not start)");
        } else {
            if (c.top || c.ndesc == 0)
                print_process(top, "cushim: ");
            for (int k = 0; k < c.ndesc; k++)
                print_process(&c.desc[k], c.top && c.desc[k].pid == c.top->pid ? "cushim: before an exec, "
                                                                                : "cushim: descendant ");
        }
        if (c.unreadable && (c.top || c.ndesc))
            cli_error("%d summar%s of this run could not be read (said above): not in this summary",
                      c.unreadable, c.unreadable == 1 ? "y" : "ies");
        /* The program's name as given, escaped (cli_error): any bytes. */
        if (c.running)
            cli_error("%d process%s of this run that used CUDA %s still running when `%s` ended: not in "
                      "this summary (`cushim ps` shows %s)", c.running, c.running == 1 ? "" : "es",
                      c.running == 1 ? "was" : "were", prog[0], c.running == 1 ? "it" : "them");
        if (WIFSIGNALED(status))
            cli_error("`%s` was killed by signal %d (%s)", prog[0], WTERMSIG(status), strsignal(WTERMSIG(status)));
        else if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && !status_said) /* as the killed: said last */
            cli_error("`%s` exited with status %d", prog[0], WEXITSTATUS(status));
    }
    if (json_error)
        cli_error("error writing --json %s: %s", cli_shown(json_out.path), cli_output_strerror(json_error));
    run_collected_free(&c);
    return code;
}
