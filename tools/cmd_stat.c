/* cushim stat [PID...] [--json | --prometheus] [--output FILE] [--interval S] [--iterations N]: a
 * snapshot of live processes (the caller's; everyone's for root), or one every S seconds. Exit 1
 * when none is found (but for --prometheus, or a repeating stat, without PIDs: the metric families
 * with no samples, or an empty snapshot, are an answer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/report.h"
#include "tools/collect.h"
#include "tools/output.h"
#include "tools/prometheus.h"
#include "tools/watch.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: cushim stat [PID...] [--json | --prometheus] [--output FILE]\n"
               "                   [-d|--interval SECONDS] [-n|--iterations N]\n"
               "                   [--command-label full|name|none]\n\n"
               "Prints the live counters of processes under cushim: the given PIDs, else all of\n"
               "yours (everyone's as root).\n"
               "  --json          JSON array, one summary object per process (docs/SUMMARY-JSON.md)\n"
               "  --prometheus    Prometheus text format\n"
               "  --command-label full|name|none\n"
               "                  with --prometheus, what the command label holds: the command\n"
               "                  line's first 64 bytes (full, the default), the program's file\n"
               "                  name (name), or no command label (none)\n"
               "  --output FILE   write to FILE instead of standard output, atomically (temporary\n"
               "                  file, then rename), in any format; e.g. --prometheus for\n"
               "                  node_exporter's textfile collector; - is standard output\n"
               "  -d, --interval SECONDS\n"
               "                  a snapshot every SECONDS (0.1..3600) until SIGINT (Ctrl-C),\n"
               "                  SIGTERM or SIGHUP, N snapshots, or, with PIDs, until all of\n"
               "                  them have ended: a timeline. Text: each snapshot headed by a\n"
               "                  line with its time, a blank line between them; --json: one\n"
               "                  array per line (JSON Lines), each object with its read_ns;\n"
               "                  --output FILE: each snapshot replaces the file (the textfile\n"
               "                  collector's file kept fresh without cron; a FIFO or other\n"
               "                  stream is written to, open from first to last: for a\n"
               "                  timeline in a file, redirect standard output instead);\n"
               "                  --prometheus needs --output FILE\n"
               "  -n, --iterations N\n"
               "                  stop after N snapshots (the interval defaults to 1 second)\n");
}

struct stat_args {
    int json, prom, npids;
    enum prom_command command; /* --command-label (with --prometheus) */
    const char *command_given; /* its value as given, NULL: not given */
    const char *output;
    double interval; /* > 0: repeat (--interval or --iterations) */
    long iterations; /* -1: until a stop */
    pid_t *pids;
};

/* Keeps in l the processes that the pids name; `say`: says each pid that names none. Each pid
 * names the processes seg_names says, as for reset-peak and phase: by their pid here first; else
 * the one of another pid namespace with that pid there; two are ambiguous. Returns how many pids
 * named none, or -1 when out of memory (said). */
static int select_named(struct proc_list *l, const pid_t *pids, int npids, int say)
{
    int missing = 0;
    unsigned char *keep = calloc((size_t)l->count + 1, 1);
    const struct cushim_snapshot **inner = calloc((size_t)l->count + 1, sizeof *inner);
    if (!keep || !inner) {
        cli_error("out of memory");
        free(keep);
        free(inner);
        return -1;
    }
    for (int i = 0; i < npids; i++) {
        int found = 0, ninner = 0;
        for (int k = 0; k < l->count; k++) {
            int how = seg_names(&l->procs[k], pids[i]);
            if (how == 2)
                found = keep[k] = 1;
            else if (how == 1)
                inner[ninner++] = &l->procs[k];
        }
        if (!found && ninner == 1)
            found = keep[inner[0] - l->procs] = 1;
        if (!found && ninner > 1) {
            if (say)
                seg_say_ambiguous(pids[i], inner, ninner);
            missing++;
            continue;
        }
        missing += !found;
        if (found || !say)
            continue;
        const struct proc_gone *gone = NULL;
        for (int k = 0; k < l->ngone && !gone; k++)
            if (l->gone[k].pid == pids[i])
                gone = &l->gone[k];
        int unreadable = 0;
        for (int k = 0; k < l->nunreadable; k++)
            unreadable |= l->unreadable[k] == pids[i];
        /* The same words as reset-peak and phase (segments.c). */
        if (unreadable)
            cli_error("process %d: its segment cannot be read (said above)", (int)pids[i]);
        else if (gone) {
            char words[4400];
            seg_gone_words(pids[i], gone->path, gone->left, gone->run, words, sizeof words);
            cli_error("%s", words);
        }
        else
            seg_say_missing(pids[i], 0);
    }
    int n = 0;
    for (int k = 0; k < l->count; k++)
        if (keep[k])
            l->procs[n++] = l->procs[k];
    l->count = n;
    free(keep);
    free(inner);
    return missing;
}

/* One snapshot of l to f in the chosen format; a repeating stat heads a text one with its time
 * and writes JSON on one line. */
static void write_snapshot(FILE *f, const struct stat_args *a, const struct proc_list *l)
{
    if (a->prom) {
        prometheus_write(f, l, a->command);
    } else if (a->json) {
        struct jsonw w;
        if (a->interval > 0)
            jsonw_init_compact(&w, f);
        else
            jsonw_init(&w, f);
        jsonw_array_begin(&w, NULL);
        for (int i = 0; i < l->count; i++)
            cushim_json_process(&w, NULL, &l->procs[i], 1);
        jsonw_array_end(&w);
    } else {
        if (a->interval > 0) {
            /* To the millisecond: snapshots may be a tenth of a second apart. */
            char when[32];
            struct timespec now;
            struct tm tm;
            clock_gettime(CLOCK_REALTIME, &now);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now.tv_sec, &tm));
            fprintf(f, "cushim stat: %d process%s at %s.%03ld\n", l->count, l->count == 1 ? "" : "es", when,
                    now.tv_nsec / 1000000);
        }
        for (int i = 0; i < l->count; i++)
            cushim_text_process(f, &l->procs[i], "");
    }
}

static int parse(int argc, char **argv, struct stat_args *a)
{
    int options = 1; /* until "--": after it, every argument is a PID */
    struct cli_given interval_given = {0}, iterations_given = {0};
    for (int i = 1; i < argc; i++) {
        const char *v, *opt; /* the option as typed, for its messages */
        int got;
        if (options && strcmp(argv[i], "--") == 0) {
            options = 0;
        } else if (!options) {
            if ((a->pids[a->npids++] = cli_parse_pid(argv[i])) < 0)
                return -1;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
        } else if (strcmp(argv[i], "--prometheus") == 0) {
            a->prom = 1;
        } else if ((got = cli_option_value(argc, argv, &i, "--output", "a FILE", &v)) != 0) {
            if (got < 0)
                return -1;
            cli_say_replaced("--output", &a->output, v);
        } else if ((got = cli_option_value(argc, argv, &i, "--command-label", "full, name or none", &v)) != 0) {
            if (got < 0 || prometheus_parse_command_label("--command-label", v, &a->command) < 0)
                return -1;
            cli_say_replaced("--command-label", &a->command_given, v);
        } else if ((got = cli_option_value(argc, argv, &i, (opt = "--interval"), "SECONDS", &v)) != 0 ||
                   (got = cli_option_value(argc, argv, &i, (opt = "-d"), "SECONDS", &v)) != 0) {
            double was = a->interval;
            if (got < 0 || watch_parse_interval(opt, v, &a->interval) < 0)
                return -1;
            cli_say_given(&interval_given, "--interval", opt, v, a->interval == was);
        } else if ((got = cli_option_value(argc, argv, &i, (opt = "--iterations"), "N", &v)) != 0 ||
                   (got = cli_option_value(argc, argv, &i, (opt = "-n"), "N", &v)) != 0) {
            long was = a->iterations;
            if (got < 0 || watch_parse_iterations(opt, v, &a->iterations) < 0)
                return -1;
            cli_say_given(&iterations_given, "--iterations", opt, v, a->iterations == was);
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (argv[i][0] == '-') {
            cli_bad_word("stat", argv[i], "cushim stat [PID...] [--json|--prometheus] [-d|--interval SECONDS] [-n|--iterations N] [--output FILE] [--command-label full|name|none]");
            return -1;
        } else if ((a->pids[a->npids++] = cli_parse_pid(argv[i])) < 0) {
            return -1;
        }
    }
    /* A pid named twice is one process, shown and said once (a bad-input trial: `stat 1 1 1`
     * said the same line three times). */
    int kept = 0;
    for (int i = 0; i < a->npids; i++) {
        int seen = 0;
        for (int k = 0; k < kept && !seen; k++)
            seen = a->pids[k] == a->pids[i];
        if (!seen)
            a->pids[kept++] = a->pids[i];
    }
    a->npids = kept;
    if (a->json && a->prom) {
        cli_error("--json and --prometheus exclude each other");
        return -1;
    }
    if (a->command_given && !a->prom) {
        cli_error("--command-label goes with --prometheus (it is the metrics' command label)");
        return -1;
    }
    if (a->iterations > 0 && a->interval <= 0)
        a->interval = 1.0;
    /* Expositions one after another are no exposition a scraper reads: each replaces a file. */
    if (a->prom && a->interval > 0 && (!a->output || strcmp(a->output, "-") == 0)) {
        cli_error("--prometheus with --interval or --iterations needs --output FILE (each snapshot "
                  "replaces it; expositions one after another on standard output are no exposition)");
        return -1;
    }
    return 0;
}

/* Where the snapshots go: standard output, or --output; a stream output (a FIFO, a terminal,
 * "-", /dev/stdout: written in place, tools/output.h) stays open from the first snapshot to the
 * last, so that its reader sees one stream (a FIFO reopened per snapshot gave its reader an end
 * of file after the first). */
struct target {
    struct cli_output kept;
    int keeping;
};

/* The one line for an --output that cannot be written (err: the errno). */
static void output_failed(const char *output, int err)
{
    cli_error("cannot write --output %s: %s", cli_shown(output), cli_output_strerror(err));
}

/* Writes one snapshot where it goes: --output (a regular file replaced, atomically; a stream
 * written to), else standard output. A text snapshot after the first written to a stream is
 * preceded by a blank line. The snapshot is composed in memory first, then written at once. 0, or
 * EXIT_USAGE after a message. `empty_keeps`: with nothing to show a regular --output file is left
 * as it was. */
static int emit(const struct stat_args *a, const struct proc_list *l, long n, int empty_keeps,
                struct target *t)
{
    struct cli_output out;
    int stream = !a->output || t->keeping;
    /* Nothing to write to a file --output names: it is left as it was, not even opened, so that
     * a dangling link's target is not made (a bad path was said by cmd_stat's cli_output_try). */
    if (!stream && empty_keeps)
        return 0;
    if (!stream) {
        if (cli_output_open(&out, a->output) != 0) {
            output_failed(a->output, errno);
            return EXIT_USAGE;
        }
        if (out.direct && a->interval > 0) {
            t->kept = out;
            t->keeping = stream = 1;
        }
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {
        cli_error("out of memory");
        if (!stream)
            cli_output_abort(&out);
        return EXIT_USAGE;
    }
    if (stream && n && !a->json && !a->prom)
        fputc('\n', m);
    write_snapshot(m, a, l);
    if (fclose(m) != 0) {
        free(text);
        cli_error("out of memory");
        if (!stream)
            cli_output_abort(&out);
        return EXIT_USAGE;
    }
    int rc = 0;
    if (stream) {
        FILE *f = t->keeping ? t->kept.f : stdout;
        int w = fflush(f) == 0 ? watch_write(fileno(f), text, len) : -1;
        if (w < 0) {
            int e = errno;
            if (f == stdout)
                clearerr(stdout); /* said once, here (not again by cushim.c's check) */
            if (a->output)
                output_failed(a->output, e);
            else
                cli_error("cannot write to standard output: %s", strerror(e));
            rc = EXIT_USAGE;
        }
    } else {
        fwrite(text, 1, len, out.f);
        if (cli_output_commit(&out) != 0 && !watch_stopped()) {
            output_failed(a->output, errno);
            rc = EXIT_USAGE;
        }
    }
    free(text);
    return rc;
}

int cmd_stat(int argc, char **argv)
{
    struct stat_args a = {.iterations = -1};
    if (!(a.pids = calloc((size_t)argc, sizeof *a.pids))) {
        cli_error("out of memory");
        return EXIT_USAGE;
    }
    int p = parse(argc, argv, &a);
    if (p != 0) {
        free(a.pids);
        return p > 0 ? 0 : EXIT_USAGE;
    }
    /* Repeating, or writing a file through a temporary one: a stop ends it where it chooses
     * (never a temporary file left). */
    if (a.interval > 0 || a.output)
        watch_catch_stop_signals();
    /* --output is tried first: a bad one is the one line said, before any process is looked
     * for. */
    if (a.output && cli_output_try(a.output) != 0) {
        output_failed(a.output, errno);
        free(a.pids);
        return EXIT_USAGE;
    }
    struct target t = {.keeping = 0};
    int rc = 0;
    /* The PIDs seen at a snapshot, which a repeating stat followed: how many, and one (a PID
     * absent at first may come later). */
    unsigned char *seen = a.npids ? calloc((size_t)a.npids, 1) : NULL;
    int watched = 0;
    pid_t watched_pid = 0;
    for (long n = 0; a.iterations < 0 || n < a.iterations; n++) {
        if (n && watch_sleep(a.interval))
            break;
        struct proc_list l;
        /* What cannot be read is said at the first snapshot only; never by the textfile
         * collector's writer (--prometheus --output without PIDs, run from cron), whose
         * exposition counts it (cushim_invalid_segments): a file another user put in the
         * directory must not make every run speak (a multi-user trial). Asked for a PID, it says
         * why that one cannot be read. */
        proc_list_collect(&l, a.pids, a.npids, n == 0 && !(a.prom && a.output && !a.npids));
        if (l.dir_unreadable) { /* said on stderr; no answer (an --output file is left as it was) */
            proc_list_free(&l);
            rc = EXIT_USAGE;
            break;
        }
        int missing = a.npids ? select_named(&l, a.pids, a.npids, n == 0) : 0;
        if (missing < 0) {
            proc_list_free(&l);
            rc = EXIT_USAGE;
            break;
        }
        for (int i = 0; seen && i < a.npids; i++)
            for (int k = 0; k < l.count && !seen[i]; k++)
                if (seg_names(&l.procs[k], a.pids[i])) {
                    seen[i] = 1;
                    watched++;
                    watched_pid = a.pids[i];
                }
        if (n == 0) {
            /* Exit 1 when nothing is shown or a named pid is not a live process under cushim (the
             * others are still shown). Prometheus text with no process is an answer too (the
             * families, no samples): a scrape file refreshed from cron stays quiet while nothing
             * runs; so is an empty snapshot of a repeating stat, which waits for processes. */
            int answered = l.count || (!a.npids && (a.prom || a.interval > 0));
            rc = answered && !missing ? 0 : EXIT_NOTHING;
            if (!l.count && !a.npids && !a.prom && !a.json && a.interval <= 0)
                cli_error("no live process under cushim (yours; everyone's as root) in %s", seg_dir());
        }
        /* With PIDs, a repeating stat ends when none of them is left (the last snapshot stays in
         * an --output file), and writes nothing when none is there at first (said, exit 1). */
        if (a.npids && !l.count && (n || a.interval > 0)) {
            /* Said when they went during the watch (an attack trial: it stopped without a word);
             * a PID not there at first, said then, is not counted (a review). */
            if (!seen) { /* out of memory: all of them */
                watched = a.npids;
                watched_pid = a.pids[0];
            }
            if (n && watched == 1)
                cli_error("process %d exited (no live segment left): stat stops", (int)watched_pid);
            else if (n)
                cli_error("the %d processes watched exited (no live segment left): stat stops", watched);
            proc_list_free(&l);
            break;
        }
        int w = emit(&a, &l, n, !l.count && !a.prom && !a.json && a.interval <= 0, &t);
        int l_count = l.count;
        proc_list_free(&l);
        if (w) {
            rc = w;
            break;
        }
        if (a.interval <= 0 || watch_stopped() || (a.npids && !l_count))
            break;
    }
    if (t.keeping && cli_output_commit(&t.kept) != 0 && !watch_stopped() && rc != EXIT_USAGE) {
        output_failed(a.output, errno);
        rc = EXIT_USAGE;
    }
    free(seen);
    free(a.pids);
    return rc;
}
