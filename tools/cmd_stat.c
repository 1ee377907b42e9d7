/* cushim stat [PID...] [--json | --prometheus] [--output FILE]: a snapshot of live processes
 * (the caller's; everyone's for root). Exit 1 when none is found (but for --prometheus without
 * PIDs: the metric families with no samples are an answer). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/report.h"
#include "tools/collect.h"
#include "tools/output.h"
#include "tools/prometheus.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: cushim stat [PID...] [--json | --prometheus] [--output FILE]\n\n"
               "Prints the live counters of processes under cushim: the given PIDs, else all of\n"
               "yours (everyone's as root).\n"
               "  --json          JSON array, one summary object per process (docs/SUMMARY-JSON.md)\n"
               "  --prometheus    Prometheus text format\n"
               "  --output FILE   write to FILE instead of standard output, atomically (temporary\n"
               "                  file, then rename), in any format; e.g. --prometheus for\n"
               "                  node_exporter's textfile collector\n");
}

int cmd_stat(int argc, char **argv)
{
    int json = 0, prom = 0, npids = 0;
    const char *output = NULL;
    pid_t *pids = calloc((size_t)argc, sizeof *pids);
    if (!pids) {
        cli_error("out of memory");
        return EXIT_USAGE;
    }
    int options = 1; /* until "--": after it, every argument is a PID */
    for (int i = 1; i < argc; i++) {
        if (options && strcmp(argv[i], "--") == 0) {
            options = 0;
        } else if (!options) {
            if ((pids[npids++] = cli_parse_pid(argv[i])) < 0) {
                free(pids);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--prometheus") == 0) {
            prom = 1;
        } else if (strncmp(argv[i], "--output", 8) == 0 && (argv[i][8] == '\0' || argv[i][8] == '=')) {
            if (cli_option_value(argc, argv, &i, "--output", "a FILE", &output) < 0) {
                free(pids);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            free(pids);
            return 0;
        } else if (argv[i][0] == '-') {
            cli_error("unknown option \"%s\" for stat (see cushim stat --help)", argv[i]);
            free(pids);
            return EXIT_USAGE;
        } else if ((pids[npids++] = cli_parse_pid(argv[i])) < 0) {
            free(pids);
            return EXIT_USAGE;
        }
    }
    if (json && prom) {
        cli_error("--json and --prometheus exclude each other");
        free(pids);
        return EXIT_USAGE;
    }
    struct proc_list l;
    proc_list_collect(&l, pids, npids, 1);
    if (l.dir_unreadable) { /* said on stderr; no answer (an --output file is left as it was) */
        free(pids);
        proc_list_free(&l);
        return EXIT_USAGE;
    }
    int missing = 0;
    /* Each pid names the processes seg_names says, as for reset-peak and phase: by their pid here
     * first; else the one of another pid namespace with that pid there; two are ambiguous. */
    unsigned char *keep = calloc((size_t)l.count + 1, 1);
    const struct cushim_snapshot **inner = calloc((size_t)l.count + 1, sizeof *inner);
    if (!keep || !inner) {
        cli_error("out of memory");
        free(keep);
        free(inner);
        free(pids);
        proc_list_free(&l);
        return EXIT_USAGE;
    }
    for (int i = 0; i < npids; i++) {
        int found = 0, ninner = 0;
        for (int k = 0; k < l.count; k++) {
            int how = seg_names(&l.procs[k], pids[i]);
            if (how == 2)
                found = keep[k] = 1;
            else if (how == 1)
                inner[ninner++] = &l.procs[k];
        }
        if (!found && ninner == 1)
            found = keep[inner[0] - l.procs] = 1;
        if (!found && ninner > 1) {
            seg_say_ambiguous(pids[i], inner, ninner);
            missing++;
            continue;
        }
        const char *gone = NULL;
        for (int k = 0; k < l.ngone && !gone; k++)
            if (l.gone[k].pid == pids[i])
                gone = l.gone[k].path;
        int unreadable = 0;
        for (int k = 0; k < l.nunreadable; k++)
            unreadable |= l.unreadable[k] == pids[i];
        /* The same words as reset-peak and phase (segments.c). */
        missing += !found;
        if (!found && unreadable)
            cli_error("process %d: its segment cannot be read (said above)", (int)pids[i]);
        else if (!found && gone)
            cli_error("process %d is gone (stale segment %s; `cushim gc` removes it)", (int)pids[i], gone);
        else if (!found)
            seg_say_missing(pids[i]);
    }
    if (npids) {
        int n = 0;
        for (int k = 0; k < l.count; k++)
            if (keep[k])
                l.procs[n++] = l.procs[k];
        l.count = n;
    }
    free(keep);
    free(inner);
    free(pids);

    struct cli_output out;
    FILE *f = stdout;
    if (output) {
        if (cli_output_open(&out, output) != 0) {
            cli_error("cannot write --output \"%s\": %s", output, cli_output_strerror(errno));
            proc_list_free(&l);
            return EXIT_USAGE;
        }
        f = out.f;
    }
    if (prom) {
        prometheus_write(f, &l);
    } else if (json) {
        struct jsonw w;
        jsonw_init(&w, f);
        jsonw_array_begin(&w, NULL);
        for (int i = 0; i < l.count; i++)
            cushim_json_process(&w, NULL, &l.procs[i], 1);
        jsonw_array_end(&w);
    } else {
        for (int i = 0; i < l.count; i++)
            cushim_text_process(f, &l.procs[i], "");
    }
    /* Exit 1 when nothing is shown or a named pid is not a live process under cushim (the
     * others are still shown). */
    /* Prometheus text with no process is an answer too (the families, no samples): a scrape
     * file refreshed from cron stays quiet while nothing runs. */
    int rc = (l.count || (prom && !npids)) && !missing ? 0 : EXIT_NOTHING;
    if (output && !l.count && !prom && !json) {
        cli_output_abort(&out); /* nothing to write: the file is left as it was */
    } else if (output && cli_output_commit(&out) != 0) {
        cli_error("cannot write --output \"%s\": %s", output, cli_output_strerror(errno));
        rc = EXIT_USAGE;
    }
    if (!l.count && !prom && !json && !npids)
        cli_error("no live process under cushim");
    proc_list_free(&l);
    return rc;
}
