/* cushim top [--interval SECONDS] [--iterations N]: a live view of every process under cushim,
 * redrawn in place with ncurses, sorted by device bytes, with per-device totals across processes
 * (grouped by UUID, so processes with different CUDA_VISIBLE_DEVICES agree). q quits. */
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

#ifdef CUSHIM_HAVE_NCURSES
#include <curses.h>

#include "common/units.h"
#include "tools/collect.h"

/* One screen line, formatted by us and cut to the screen width (ncurses' printw is not given
 * lines longer than the screen). */
static void line(int y, int attrs, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(int y, int attrs, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    if (y >= LINES)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++) /* a command line may hold control characters */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    if (attrs)
        attron(attrs);
    mvaddnstr(y, 0, buf, COLS > 0 ? COLS : 0);
    if (attrs)
        attroff(attrs);
}

struct dev_total {
    uint8_t uuid[16];
    int identified;
    int ordinal;
    uint64_t total, current, peak;
    int procs;
};

static void draw(const struct proc_list *l, double interval)
{
    char a[32], b[32], c[32], u[48];
    struct dev_total tot[64];
    int ntot = 0;
    erase();
    line(0, A_BOLD, "cushim top: %d process%s, every %.1fs (q quits)", l->count,
         l->count == 1 ? "" : "es", interval);
    for (int i = 0; i < l->count; i++)
        for (uint32_t k = 0; k < l->procs[i].device_count; k++) {
            const struct cushim_device_snapshot *d = &l->procs[i].devices[k];
            int j = 0;
            while (j < ntot && !(tot[j].identified && d->identified &&
                                 memcmp(tot[j].uuid, d->uuid, 16) == 0) &&
                   !(!tot[j].identified && !d->identified && tot[j].ordinal == d->ordinal))
                j++;
            if (j == ntot) {
                if (ntot == 64)
                    continue;
                memset(&tot[ntot], 0, sizeof tot[0]);
                memcpy(tot[ntot].uuid, d->uuid, 16);
                tot[ntot].identified = d->identified;
                tot[ntot].ordinal = d->ordinal;
                tot[ntot].total = d->total_bytes;
                ntot++;
            }
            tot[j].current += d->dev[CUSHIM_DEV_total_current];
            tot[j].peak += d->dev[CUSHIM_DEV_total_peak];
            tot[j].procs++;
        }
    int y = 2;
    line(y++, A_REVERSE, "%-42s %5s %12s %12s %12s", "DEVICE", "PROCS", "TOTAL", "CURRENT", "SUM-PEAKS");
    for (int j = 0; j < ntot; j++)
        line(y++, 0, "%-42s %5d %12s %12s %12s",
                 tot[j].identified ? cushim_format_uuid(tot[j].uuid, u, sizeof u) : "(unknown uuid)",
                 tot[j].procs, cushim_format_bytes(tot[j].total, a, sizeof a),
                 cushim_format_bytes(tot[j].current, b, sizeof b),
                 cushim_format_bytes(tot[j].peak, c, sizeof c));
    y++;
    line(y++, A_REVERSE, "%7s %-8s %-7s %12s %12s %12s %12s  %s", "PID", "DEVICES", "PHASE", "DEVICE",
         "PEAK", "PINNED", "OFFLOADED", "COMMAND");
    for (int i = 0; i < l->count && y < LINES; i++) {
        const struct cushim_snapshot *p = &l->procs[i];
        char devs[64] = "", pinned[32], off[32];
        uint64_t pin = 0, offl = 0;
        size_t o = 0;
        for (uint32_t k = 0; k < p->device_count && o < sizeof devs; k++) {
            o += (size_t)snprintf(devs + o, sizeof devs - o, "%s%d", k ? "," : "", p->devices[k].ordinal);
            pin += p->devices[k].kinds[CUSHIM_KIND_PINNED_HOST][CUSHIM_STAT_current_bytes];
            offl += p->devices[k].kinds[CUSHIM_KIND_OFFLOADED][CUSHIM_STAT_current_bytes];
        }
        line(y++, 0, "%7d %-8s %-7s %12s %12s %12s %12s  %s", p->pid, devs[0] ? devs : "-",
             cushim_phase_name(p->phase),
             cushim_format_bytes(proc_sum(p, CUSHIM_DEV_total_current), a, sizeof a),
             cushim_format_bytes(proc_sum(p, CUSHIM_DEV_total_peak), b, sizeof b),
             cushim_format_bytes(pin, pinned, sizeof pinned), cushim_format_bytes(offl, off, sizeof off),
             p->command);
    }
    refresh();
}

int cmd_top(int argc, char **argv)
{
    double interval = 1.0;
    long iterations = -1;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: cushim top [--interval SECONDS] [--iterations N]\n\nLive view of "
                   "processes under cushim, sorted by device bytes, with per-device\ntotals across "
                   "processes. q quits.\n");
            return 0;
        } else if (strcmp(argv[i], "--interval") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            interval = strtod(v, &end);
            if (!*v || *end || !(interval >= 0.1 && interval <= 3600)) {
                cli_error("--interval \"%s\" is not a number of seconds in 0.1..3600", v);
                return EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--iterations") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            errno = 0;
            iterations = strtol(v, &end, 10);
            if (!*v || *end || iterations < 1 || errno == ERANGE) {
                cli_error("--iterations \"%s\" is not a whole number from 1 to %ld", v, LONG_MAX);
                return EXIT_USAGE;
            }
        } else {
            cli_error("unknown argument \"%s\" for top (expected --interval SECONDS or "
                      "--iterations N)", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!isatty(fileno(stdout))) {
        cli_error("top needs a terminal; use `cushim stat` for a snapshot");
        return EXIT_USAGE;
    }
    const char *term = getenv("TERM");
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (!screen) {
        cli_error("cannot use the terminal type \"%s\" (set TERM, e.g. TERM=xterm)", term ? term : "");
        return EXIT_USAGE;
    }
    set_term(screen);
    cbreak();
    noecho();
    curs_set(0);
    timeout((int)(interval * 1000));
    for (long n = 0; iterations < 0 || n < iterations; n++) {
        struct proc_list l;
        proc_list_collect(&l, NULL, 0, 0);
        draw(&l, interval);
        proc_list_free(&l);
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            break;
    }
    endwin();
    delscreen(screen);
    return 0;
}
#else
int cmd_top(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_error("top was not built (ncurses was not found at build time); use `cushim stat`");
    return EXIT_USAGE;
}
#endif
