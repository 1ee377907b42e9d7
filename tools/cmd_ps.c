/* cushim ps: one line per process under cushim: pid, user, devices, device current/peak (summed
 * over its devices), phase, command; segments of dead processes are marked stale. */
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"
#include "tools/collect.h"

struct ps_arg {
    int rows;   /* valid segments listed (live or stale) */
    int color;
    int hidden; /* processes of another pid namespace not visible here ("1*") */
};

static int row(struct seg_entry *e, void *argp)
{
    struct ps_arg *a = argp;
    char user[32], cur[32], peak[32], devs[128] = "", cmd[CUSHIM_COMMAND_MAX];
    struct passwd *pw = getpwuid(e->uid);
    snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "?");
    if (!e->ok) {
        printf("%7d %-10s %-7s %s: %s\n", (int)e->pid, user, "invalid", e->path, e->err);
        return 0;
    }
    uint64_t c = proc_sum(&e->snap, CUSHIM_DEV_total_current), p = proc_sum(&e->snap, CUSHIM_DEV_total_peak);
    cushim_device_list(&e->snap, devs, sizeof devs, 8);
    const char *state = e->stale ? "stale" : "live";
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
                   "pid (as seen here, also for a container's process), user, state (live, or\n"
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
    struct ps_arg a = {0, cli_color(stdout), 0};
    printf("%7s %-10s %-7s %-8s %12s %12s %-11s %s\n", "PID", "USER", "STATE", "DEVICES",
           "DEV-CURRENT", "DEV-PEAK", "PHASE", "COMMAND");
    seg_scan(NULL, 0, row, &a);
    if (a.hidden)
        printf("* the pid in its own pid namespace (a container's), whose processes are not visible here\n");
    if (!a.rows)
        cli_error("no process under cushim (yours; everyone's as root) in %s", seg_dir());
    return a.rows ? 0 : EXIT_NOTHING;
}
