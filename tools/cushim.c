/* cushim: the command-line companion of libcushim.so. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/config.h"
#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"

#ifndef CUSHIM_VERSION
#define CUSHIM_VERSION "unknown"
#endif

void cli_error(const char *fmt, ...)
{
    /* Messages echo arguments and values as given: their control characters and bytes that are
     * not UTF-8 are escaped, so the message stays one line and cannot drive the terminal. */
    char raw[8192], line[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof raw)
        memcpy(raw + sizeof raw - 4, "...", 4); /* a cut is never silent */
    fprintf(stderr, "cushim: %s\n", cushim_text_escaped(raw, line, sizeof line));
}

const char *cli_shown(const char *value)
{
    static char bufs[4][500];
    static unsigned next;
    char *b = bufs[next++ % 4];
    cushim_config_shown(value ? value : "", b, sizeof bufs[0]);
    return b;
}

void cli_say_replaced(const char *flag, const char **last, const char *now)
{
    struct cli_given g = {*last, flag};
    cli_say_given(&g, flag, flag, now, *last && strcmp(*last, now) == 0);
    *last = now;
}

void cli_say_given(struct cli_given *g, const char *long_name, const char *typed, const char *now, int same)
{
    if (g->value && !same)
        cli_error("%s given twice: %s replaces %s", strcmp(g->typed, typed) == 0 ? typed : long_name,
                  cli_shown(now), cli_shown(g->value));
    g->value = now;
    g->typed = typed;
}

int cli_option_probe(const char *word, char *probe, size_t len)
{
    size_t n = strlen(word);
    /* -d=1 is a short option's value; -device-limit=1G a long one with one dash (an earlier
     * trial: no hint for it). */
    if (word[0] != '-' || n < 3 || n + 2 > len || (word[1] != '-' && strchr(word, '=') && strcspn(word, "=") <= 2))
        return 0;
    int dashes = word[1] == '-' ? 0 : 1;
    memcpy(probe, "--", (size_t)dashes);
    for (size_t i = 0; i <= n; i++)
        probe[dashes + i] = word[i] >= 'A' && word[i] <= 'Z' ? (char)(word[i] - 'A' + 'a') : word[i];
    return 1;
}

int cli_short_option(const char *word, const char *const *names, int count)
{
    if (word[0] != '-' || !((word[1] >= 'a' && word[1] <= 'z') || (word[1] >= 'A' && word[1] <= 'Z')) || word[2])
        return -1;
    int found = -1;
    for (int i = 0; i < count; i++)
        if (names[i][0] == '-' && names[i][1] == '-' && names[i][2] == word[1]) {
            if (found >= 0)
                return -1;
            found = i;
        }
    return found;
}

void cli_bad_word(const char *cmd, const char *word, const char *usage)
{
    /* A long option near one the usage line names, or --help: offered. */
    char flags[16][64];
    const char *names[17];
    int count = 0;
    for (const char *p = usage; (p = strstr(p, "--")) != NULL && count < 16;) {
        size_t len = 2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");
        snprintf(flags[count], sizeof flags[0], "%.*s", (int)(len < sizeof flags[0] ? len : sizeof flags[0] - 1), p);
        p += len;
        if (len > 2) {
            names[count] = flags[count];
            count++;
        }
    }
    names[count++] = "--help";
    size_t best_d = 3;
    char probe[128];
    int best = cli_option_probe(word, probe, sizeof probe)
                   ? cushim_text_nearest(probe, strcspn(probe, "="), names, count, strlen("--"), &best_d)
                   : -1;
    const char *near = best >= 0 ? names[best] : "";
    int letter = cli_short_option(word, names, count);
    if (letter >= 0)
        cli_error("unknown option %s for %s (did you mean %s? see cushim %s --help)", cli_shown(word), cmd,
                  names[letter], cmd);
    else if (word[0] == '-' && word[1] >= '0' && word[1] <= '9' && strstr(usage, "PID"))
        cli_error("%s is not a process id (a number from 1 to 2147483647)", cli_shown(word));
    else if (near[0] && best_d == 0 && strncmp(word, near, strlen(near)) == 0) /* itself, with a value: --json=1 */
        cli_error("%s takes no value (got %s)", near, cli_shown(word));
    else if (near[0])
        cli_error("unknown option %s for %s (did you mean %s? see cushim %s --help)", cli_shown(word), cmd, near,
                  cmd);
    else if (word[0] == '-' && word[1])
        cli_error("unknown option %s for %s (see cushim %s --help)", cli_shown(word), cmd, cmd);
    else
        cli_error("unexpected argument %s for %s (usage: %s)", cli_shown(word), cmd, usage);
}

int cli_color(FILE *f)
{
    const char *no = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    return isatty(fileno(f)) && !(no && *no) && !(term && strcmp(term, "dumb") == 0);
}

/* Whether a run (tools/run_*.c) or a process of it (shim/segment_file.c) writes a file of that
 * name in the run's directory: summaries (PID-CREATED.seg, a nested run's ID-PID-CREATED.seg,
 * .taken-NAME.seg), their temporary files (.NAME.tmp), nested runs' run-ID files, a path probe. */
static int run_file_name(const char *name)
{
    size_t n = strlen(name);
    return (n > 4 && strcmp(name + n - 4, ".seg") == 0) ||
           (name[0] == '.' && n > 5 && strcmp(name + n - 4, ".tmp") == 0) || strncmp(name, "run-", 4) == 0 ||
           strncmp(name, ".cushim-probe.", 14) == 0;
}

int cli_remove_run_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* A run writes only regular files there, of its own names: anything else (a subdirectory, a
     * link, a FIFO, someone's notes.txt) means it is not a run's directory, and nothing in it is
     * removed (ENOTDIR; a fresh-user trial: root's gc removed another user's look-alike). */
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW);
        if (r == 0 ? !S_ISREG(st.st_mode) || !run_file_name(de->d_name) : errno != ENOENT) { /* ENOENT: removed meanwhile */
            closedir(d);
            errno = ENOTDIR;
            return -1;
        }
    }
    rewinddir(d);
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            unlinkat(fd, de->d_name, 0);
    closedir(d);
    /* Something put there meanwhile (its owner racing the look above): no run's either. */
    if (rmdir(path) != 0) {
        if (errno == ENOTEMPTY || errno == EEXIST)
            errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int cli_option_value(int argc, char **argv, int *i, const char *name, const char *value_name,
                     const char **value)
{
    size_t n = strlen(name);
    int short_opt = n == 2 && name[0] == '-' && name[1] != '-';
    if (strncmp(argv[*i], name, n) != 0 || (argv[*i][n] != '\0' && argv[*i][n] != '=' && !short_opt))
        return 0;
    const char *v = "";
    if (argv[*i][n] == '=' || (short_opt && argv[*i][n] != '\0')) {
        /* --name=VALUE; a short option's value may also follow it directly (-n1, as getopt). */
        v = argv[*i] + n + (argv[*i][n] == '=');
    } else if (*i + 1 < argc && strcmp(argv[*i + 1], "--") != 0) {
        if (cli_value_is_option(name, argv[*i + 1]))
            return -1;
        v = argv[++*i];
    }
    if (!*v) { /* none, or empty ("--output=", "--output ''"): not a file named "" */
        cli_error("%s needs %s", name, value_name);
        return -1;
    }
    *value = v;
    return 1;
}

int cli_value_is_option(const char *name, const char *value)
{
    /* "--x", or "-" and a letter ("-h": `--json -h` wrote a file named -h; an earlier trial); not
     * "-" (standard output), "--", nor "-1" (a number, said by the value's own check). */
    int dashes = strncmp(value, "--", 2) == 0 ? 2 : value[0] == '-' ? 1 : 0;
    if (!dashes || value[dashes] == '\0' ||
        (dashes == 1 && !((value[1] >= 'a' && value[1] <= 'z') || (value[1] >= 'A' && value[1] <= 'Z'))))
        return 0;
    cli_error("%s needs a value, not the option %s (for a value that starts with %s, write %s=%s)",
              name, cli_shown(value), dashes == 2 ? "--" : "-", name, strlen(value) > 120 ? "VALUE" : value);
    return 1;
}

pid_t cli_parse_pid(const char *s)
{
    uint64_t v = 0;
    if (!s || strlen(s) > 10 || cushim_parse_u64(s, 0x7fffffff, &v) != 0 || v < 1) {
        char shown[500]; /* quoted, escaped, cut as every value in a message is */
        cushim_config_shown(s ? s : "", shown, sizeof shown);
        cli_error("%s is not a process id (a number from 1 to 2147483647)", shown);
        return -1;
    }
    return (pid_t)v;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "run a program under cushim and print its memory summary at exit"},
    {"ps", cmd_ps, "list processes under cushim (live, and stale: gone without their exit report)"},
    {"stat", cmd_stat, "snapshot of processes' counters (text, --json, --prometheus)"},
    {"top", cmd_top, "live view of every process, sorted by device bytes"},
    {"reset-peak", cmd_reset_peak, "set a live process's peaks to their current values"},
    {"phase", cmd_phase, "switch a live process between the compile and run phases"},
    {"gc", cmd_gc, "remove what killed processes and runs left behind (segments, run directories)"},
    {"serve", cmd_serve, "serve Prometheus /metrics over HTTP"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cushim COMMAND [ARGS]   (cushim COMMAND --help, or cushim help COMMAND, for "
               "details)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  --version   print the version\n");
    /* The limit is what users come for; 0 as "no limit" was documented only in the README (an
     * attack trial). */
    fprintf(f, "\nSettings are CUSHIM_ variables (cushim run --help lists them): CUSHIM_DEVICE_LIMIT=20GiB caps\n"
               "each process's device memory; CUSHIM_DEVICE_LIMIT=0 (or empty) means no limit.\n");
}

/* The command that ran, when it changes a process (reset-peak, phase): set by dispatch. */
static const char *acting;

/* Every command's output goes to standard output: one that could not be written (a full disk,
 * /dev/full, a closed pipe) is an error, exit 2, whatever the command thought; a command that
 * changed a process says that it did (found by an attack trial: a script read exit 2 as not done). */
static int finish(int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno ? errno : EIO;
        if (acting && rc == 0)
            cli_error("cannot write to standard output: %s (the %s itself was done)", strerror(e), acting);
        else
            cli_error("cannot write to standard output: %s", strerror(e));
        return EXIT_USAGE;
    }
    return rc;
}

static int dispatch(int argc, char **argv);

/* "did you mean X? " for a mistyped command `word` (any case: `cushim STAT`), or "" when no
 * command is near (common/text.h cushim_text_nearest); `version` is --version where `top_level`.
 * Into hint (len bytes); returns hint. */
static const char *command_hint(const char *word, int top_level, char *hint, size_t len)
{
    const char *names[sizeof commands / sizeof commands[0] + 1];
    int count = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[count++] = commands[i].name;
    names[count++] = "help";
    size_t d;
    int k = cushim_text_nearest_folded(word, names, count, 0, &d);
    const char *near = top_level && !strcasecmp(word, "version") ? "--version" : k >= 0 ? names[k] : NULL;
    hint[0] = '\0';
    if (near)
        snprintf(hint, len, "did you mean %s? ", near);
    return hint;
}

int main(int argc, char **argv)
{
    return finish(dispatch(argc, argv));
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if ((strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) && argc > 2 &&
        strcmp(argv[2], "--help") && strcmp(argv[2], "-h") && strcmp(argv[2], "help")) {
        /* `cushim help CMD` = `cushim --help CMD` = `cushim CMD --help`; help --version is the
         * version (`help version` offers it) */
        if (strcmp(argv[2], "--version") == 0 && argc == 3) {
            printf("cushim %s\n", CUSHIM_VERSION);
            return 0;
        }
        if (argc > 3) {
            char shown[500];
            cushim_config_shown(argv[3], shown, sizeof shown);
            cli_error("cushim help takes one command, not %s too (see cushim --help)", shown);
            return EXIT_USAGE;
        }
        char *help_argv[] = {argv[2], "--help", NULL};
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(argv[2], commands[i].name) == 0)
                return commands[i].fn(2, help_argv);
        char hint[64], shown[500];
        cushim_config_shown(argv[2], shown, sizeof shown); /* cut as every value in a message is */
        cli_error("no help for %s: not a command (%ssee cushim --help)", shown,
                  command_hint(argv[2], 1, hint, sizeof hint));
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        if (argc > 2) {
            cli_error("unexpected argument %s after --version (it takes none)", cli_shown(argv[2]));
            return EXIT_USAGE;
        }
        printf("cushim %s\n", CUSHIM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        /* A help asked anywhere before "--", but not the value of an option (stat --output -h:
         * found by an attack trial to skip the segment directory's check). */
        static const char *const valued[] = {"--output", "--interval", "-d", "--iterations", "-n",
                                             "--sort", "-s", "--device", "--listen", "--command-label"};
        int help = 0;
        for (int k = 2; k < argc && strcmp(argv[k], "--") != 0; k++) {
            help |= !strcmp(argv[k], "--help") || !strcmp(argv[k], "-h");
            for (size_t o = 0; o < sizeof valued / sizeof valued[0]; o++)
                if (strcmp(argv[k], valued[o]) == 0) {
                    k++;
                    break;
                }
        }
        if (commands[i].fn != cmd_run && !help && cli_segment_dir_check() != 0)
            return EXIT_USAGE;
        if ((commands[i].fn == cmd_reset_peak || commands[i].fn == cmd_phase) && !help)
            acting = commands[i].name;
        /* Commands without words of their own take a "--" that ends their (no) words, as stat and
         * phase do; a word after it is one they do not take (found by an attack trial). */
        int wordless = commands[i].fn == cmd_ps || commands[i].fn == cmd_top || commands[i].fn == cmd_gc ||
                       commands[i].fn == cmd_serve;
        for (int k = 2; wordless && k < argc; k++)
            if (strcmp(argv[k], "--") == 0) {
                if (k + 1 < argc) {
                    if (commands[i].fn == cmd_gc)
                        cli_error("gc takes no arguments (got %s)", cli_shown(argv[k + 1]));
                    else
                        cli_error("unexpected argument %s for %s (see cushim %s --help)", cli_shown(argv[k + 1]), argv[1],
                                  argv[1]);
                    return EXIT_USAGE;
                }
                argc = k;
            }
        return commands[i].fn(argc - 1, argv + 1);
    }
    if (argv[1][0] == '-') {
        /* -v, --versoin, --hlp, -version: the one meant is offered; --version=1 takes no value */
        static const char *const own[] = {"--help", "--version"};
        size_t d = 3;
        char probe[64];
        int k = cli_short_option(argv[1], own, 2);
        if (k < 0 && cli_option_probe(argv[1], probe, sizeof probe))
            k = cushim_text_nearest(probe, strcspn(probe, "="), own, 2, strlen("--"), &d);
        if (k >= 0 && d == 0 && strncmp(argv[1], own[k], strlen(own[k])) == 0) {
            cli_error("%s takes no value (got %s)", own[k], cli_shown(argv[1]));
            return EXIT_USAGE;
        }
        char hint[64] = "";
        if (k >= 0)
            snprintf(hint, sizeof hint, "did you mean %s? ", own[k]);
        cli_error("unknown option %s (%scushim takes --help or --version before a command: run, ps, "
                  "stat, top, reset-peak, phase, gc, serve, help)", cli_shown(argv[1]), hint);
        return EXIT_USAGE;
    }
    char hint[64];
    cli_error("unknown command %s (%sexpected one of run, ps, stat, top, reset-peak, phase, "
              "gc, serve, help)", cli_shown(argv[1]), command_hint(argv[1], 1, hint, sizeof hint));
    return EXIT_USAGE;
}
