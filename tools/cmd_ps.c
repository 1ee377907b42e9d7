/* cushim ps: one line per process under cushim: pid, user, devices, device current/peak (summed
 * over its devices), phase, command; segments of dead processes are marked stale. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"
#include "tools/collect.h"

struct ps_arg {
    int rows;   /* valid segments listed (live or stale) */
    int invalid;
    int color;
    int hidden; /* processes of another pid namespace not visible here ("1*") */
    /* The live files, found by a first pass, and which are copies (seg_find_copies: another
     * file of a process that it does not map, or a second name of one), shown as `copy`. */
    struct seg_file *live;
    char *copy;
    int nlive;
};

static int gather_live(struct seg_entry *e, void *argp)
{
    struct ps_arg *a = argp;
    if (!e->ok || e->stale)
        return 0;
    struct seg_file *grown = realloc(a->live, (size_t)(a->nlive + 1) * sizeof *grown);
    if (!grown)
        return 1;
    a->live = grown;
    grown[a->nlive] = seg_file_of(e);
    if (!(grown[a->nlive].path = strdup(e->path)))
        return 1;
    a->nlive++;
    return 0;
}

static int is_copy(const struct ps_arg *a, const struct seg_entry *e)
{
    for (int i = 0; a->copy && i < a->nlive; i++)
        if (a->copy[i] && strcmp(a->live[i].path, e->path) == 0)
            return 1;
    return 0;
}

static int row(struct seg_entry *e, void *argp)
{
    struct ps_arg *a = argp;
    char user[32], cur[32], peak[32], devs[128] = "", cmd[CUSHIM_COMMAND_MAX];
    struct passwd *pw = getpwuid(e->uid);
    snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "?");
    if (!e->ok) {
        printf("%7d %-10s %-7s %s: %s\n", (int)e->pid, user, "invalid", e->path, e->err);
        a->invalid++;
        return 0;
    }
    uint64_t c = proc_sum(&e->snap, CUSHIM_DEV_total_current), p = proc_sum(&e->snap, CUSHIM_DEV_total_peak);
    cushim_device_list(&e->snap, devs, sizeof devs, 8);
    const char *state = e->stale ? "stale" : is_copy(a, e) ? "copy" : "live";
    char phase[32];
    const char *on = a->color && e->stale ? "\033[33m" : "", *off = a->color && e->stale ? "\033[0m" : "";
    char pid[16];
    a->hidden += e->snap.other_pidns && !e->snap.host_pid;
    printf("%s%7s %-10s %-7s %-8s %12s %12s %-11s %s%s\n", on, cushim_pid_label(&e->snap, pid, sizeof pid), user, state,
           devs, cushim_format_bytes(c, cur, sizeof cur),
           cushim_format_bytes(p, peak, sizeof peak), cushim_phase_label(&e->snap, phase, sizeof phase),
           cushim_text_printable(e->snap.command, cmd, sizeof cmd), off);
    a->rows++;
    return 0;
}

int cmd_ps(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            printf("usage: cushim ps\n\nLists processes under cushim (yours; everyone's as root):\n"
                   "pid (as seen here, also for a container's process), user, state (live;\n"
                   "copy: another file or name of a live process's segment, not the one it uses;\n"
                   "stale: the process is gone), devices used, device bytes current and peak\n"
                   "(summed over its devices), phase (run>compile while a `cushim phase` request\n"
                   "waits for the process's next allocation), command. A file named like a\n"
                   "segment that cannot be read as one (another cushim version's, say) is listed\n"
                   "as invalid, with why.\n");
            return 0;
        }
        cli_error("ps takes no arguments (got \"%s\")", argv[1]);
        return EXIT_USAGE;
    }
    struct ps_arg a = {0, 0, cli_color(stdout), 0, NULL, NULL, 0};
    seg_scan(NULL, 0, gather_live, &a);
    if (a.nlive > 1 && (a.copy = malloc((size_t)a.nlive)) != NULL)
        seg_find_copies(a.live, a.nlive, a.copy);
    printf("%7s %-10s %-7s %-8s %12s %12s %-11s %s\n", "PID", "USER", "STATE", "DEVICES",
           "DEVICE-TOTAL", "TOTAL-PEAK", "PHASE", "COMMAND");
    seg_scan(NULL, 0, row, &a);
    if (a.hidden)
        printf("* the pid in its own pid namespace (a container's), whose processes are not visible here\n");
    for (int i = 0; i < a.nlive; i++)
        free(a.live[i].path);
    free(a.live);
    free(a.copy);
    if (!a.rows)
        cli_error("no process under cushim (yours; everyone's as root) in %s%s", seg_dir(),
                  a.invalid ? ": only files that could not be read (listed above)" : "");
    return a.rows ? 0 : EXIT_NOTHING;
}
