/* cushim top [--interval SECONDS] [--iterations N] [--batch] [--sort COLUMN]: a live view of every
 * process under cushim, sorted by device bytes (or another column), with per-device totals across processes (grouped by UUID, so
 * processes with different CUDA_VISIBLE_DEVICES agree). On a terminal it is redrawn in place with
 * ncurses (q quits); in batch mode (--batch, or standard output not a terminal) each frame is
 * printed as plain text after the last, like `top -b`, and needs no ncurses. */
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"
#include "tools/collect.h"
#include "tools/watch.h"

#ifdef CUSHIM_HAVE_NCURSES
#include <curses.h>
#include <locale.h>
#include <term.h>
#include <wchar.h>
#endif

enum { ATTR_BOLD = 1, ATTR_REVERSE = 2 };

/* Where a frame goes, one line at a time: the screen (cut to its width) or standard output. */
struct sink {
    void (*emit)(struct sink *k, int y, int attrs, const char *text);
    int rows; /* lines available; INT_MAX in batch mode */
    int next; /* batch mode: the next line to print (skipped lines print empty) */
};

static void line(struct sink *k, int y, int attrs, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void line(struct sink *k, int y, int attrs, const char *fmt, ...)
{
    char raw[1024], buf[1024];
    va_list ap;
    if (y >= k->rows)
        return;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    cushim_text_printable(raw, buf, sizeof buf); /* a command line may hold any bytes */
    k->emit(k, y, attrs, buf);
}

struct dev_total {
    uint8_t uuid[16];
    int identified;
    int ordinal;
    uint64_t total, current, peak;
    int procs;
    int lowered; /* a process's peak on it was lowered by a reset */
};

/* The LIMIT column of a process, with the separator after it: the sum of its devices' budgets
 * (as DEVICE-TOTAL sums their bytes), right-aligned as the other figures; "-" when none of its
 * devices has one; after it, in two columns of their own (so the figures stay aligned: found by
 * an attack trial), "+" when only some have one (the others are limited by the card alone) and
 * "!" when a budget refused a request. */
static uint32_t limited_devices(const struct cushim_snapshot *p)
{
    uint32_t limited = 0;
    for (uint32_t n = 0; n < p->device_count; n++)
        limited += p->devices[n].dev[CUSHIM_DEV_limit] != 0;
    return limited;
}

/* Whether only some of p's devices have a limit: LIMIT's "+". */
static int limit_partial(const struct cushim_snapshot *p)
{
    uint32_t limited = limited_devices(p);
    return limited && limited < p->device_count;
}

static void limit_label(const struct cushim_snapshot *p, char *out, size_t len)
{
    const char *refused = proc_sum(p, CUSHIM_DEV_limit_refused) ? "!" : "";
    uint32_t limited = limited_devices(p);
    char b[32], marks[4];
    snprintf(marks, sizeof marks, "%s%s", limit_partial(p) ? "+" : "", refused);
    snprintf(out, len, "%9s%-2s ", limited ? cushim_format_bytes(proc_sum(p, CUSHIM_DEV_limit), b, sizeof b) : "-",
             marks);
}

/* The process table's order (--sort; < and > on the screen move it a column left or right): a
 * column, largest first (PID: smallest first), ties by pid. */
enum sort_key { SORT_DEVICE_TOTAL, SORT_TOTAL_PEAK, SORT_PINNED, SORT_OFFLOADED, SORT_GRAPH_POOL, SORT_PID, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = {"device-total", "total-peak", "pinned", "offloaded", "graph-pool",
                                                   "pid"};
static const char *const sort_columns[SORT_COUNT] = {"DEVICE-TOTAL", "TOTAL-PEAK", "PINNED", "OFFLOADED", "GRAPH-POOL",
                                                     "PID"};

/* Host memory of one kind (CUSHIM_KIND_*) a process holds now, over its devices. */
static uint64_t kind_sum(const struct cushim_snapshot *p, int kind)
{
    uint64_t sum = 0;
    for (uint32_t n = 0; n < p->device_count; n++)
        sum = cushim_sat_add(sum, p->devices[n].kinds[kind][CUSHIM_STAT_current_bytes]);
    return sum;
}

/* The PINNED column: page-locked host memory, however it was pinned (cuMemHostAlloc or host
 * pools, pinned_host; cuMemHostRegister, registered_host): what the process keeps out of the
 * host's pageable memory. */
static uint64_t pinned_sum(const struct cushim_snapshot *p)
{
    return cushim_sat_add(kind_sum(p, CUSHIM_KIND_PINNED_HOST), kind_sum(p, CUSHIM_KIND_REGISTERED_HOST));
}

/* The GRAPH-POOL column: the reserve of the graph memory pools of a process's devices
 * (graph_pool.reserved_current_bytes, as last read: cuDeviceGetGraphMemAttribute's
 * CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), device memory the driver holds for CUDA graphs'
 * allocation nodes, not in DEVICE-TOTAL. */
static uint64_t graph_pool_sum(const struct cushim_snapshot *p)
{
    return proc_sum(p, CUSHIM_DEV_graph_pool_reserved_current);
}

static enum sort_key sort_by;

static uint64_t sort_value(const struct cushim_snapshot *p)
{
    switch (sort_by) {
    case SORT_TOTAL_PEAK: return proc_sum(p, CUSHIM_DEV_total_peak);
    case SORT_PINNED: return pinned_sum(p);
    case SORT_OFFLOADED: return kind_sum(p, CUSHIM_KIND_OFFLOADED);
    case SORT_GRAPH_POOL: return graph_pool_sum(p);
    case SORT_PID: return 0;
    default: return proc_sum(p, CUSHIM_DEV_total_current);
    }
}

static int by_sort_key(const void *x, const void *y)
{
    const struct cushim_snapshot *a = x, *b = y;
    uint64_t va = sort_value(a), vb = sort_value(b);
    if (va != vb)
        return va > vb ? -1 : 1;
    return (a->pid > b->pid) - (a->pid < b->pid); /* as proc_list_collect's order */
}

/* l in the order of `key` (proc_list_collect's is DEVICE-TOTAL's). */
static void sort_list(struct proc_list *l, enum sort_key key)
{
    sort_by = key;
    if (key != SORT_DEVICE_TOTAL && l->count > 1)
        qsort(l->procs, (size_t)l->count, sizeof *l->procs, by_sort_key);
}

/* Whether a process has graph memory to show: a graph pool reserve, or allocation nodes in live
 * executable graphs (whose memory the driver attaches at their first launch). */
static int has_graph_memory(const struct cushim_snapshot *p)
{
    return graph_pool_sum(p) != 0 || proc_sum(p, CUSHIM_DEV_graph_alloc_node_bytes) != 0;
}

/* One frame below a title line (y = 0, written by the caller). */
static void frame(struct sink *k, const struct proc_list *l)
{
    char a[32], b[32], c[32], u[48];
    struct dev_total tot[64];
    int ntot = 0;
    for (int i = 0; i < l->count; i++)
        for (uint32_t n = 0; n < l->procs[i].device_count; n++) {
            const struct cushim_device_snapshot *d = &l->procs[i].devices[n];
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
            tot[j].current = cushim_sat_add(tot[j].current, d->dev[CUSHIM_DEV_total_current]);
            tot[j].peak = cushim_sat_add(tot[j].peak, d->dev[CUSHIM_DEV_total_peak]);
            tot[j].lowered |= device_peak_lowered(d);
            tot[j].procs++;
        }
    int y = 2;
    /* 80 columns hold both tables as they usually are (byte figures are at most 8 characters,
     * "999 MiB", "1.50 GiB"; a command line is cut at the right edge); the columns that appear
     * when needed (USER, LIMIT, GRAPH-POOL) widen the process table past it. */
    line(k, y++, ATTR_REVERSE, "%-40s %5s %9s %12s %9s", "UUID", "PROCS", "MEMORY", "DEVICE-TOTAL", "SUM-PEAKS");
    for (int j = 0; j < ntot; j++)
        line(k, y++, 0, "%-40s %5d %9s %12s %9s",
                 tot[j].identified ? cushim_format_uuid(tot[j].uuid, u, sizeof u) : "(unknown uuid)",
                 tot[j].procs, cushim_format_bytes(tot[j].total, a, sizeof a),
                 cushim_format_bytes(tot[j].current, b, sizeof b),
                 peak_label(tot[j].peak, tot[j].lowered, c, sizeof c));
    y++;
    /* A LIMIT column (the process's device budget, CUSHIM_DEVICE_LIMIT) only when a listed
     * process has one, so the usual table still fits 80 columns. */
    int limits = 0;
    for (int i = 0; i < l->count && !limits; i++)
        limits = proc_sum(&l->procs[i], CUSHIM_DEV_limit) != 0;
    /* So is a GRAPH-POOL column (the graph memory pools' reserve) when a listed process has
     * graph memory. */
    int graphs = 0;
    for (int i = 0; i < l->count && !graphs; i++)
        graphs = has_graph_memory(&l->procs[i]);
    /* And a USER column when the listed processes are of more than one user (root's view of a
     * shared machine; a multi-user trial). */
    int users = 0;
    for (int i = 1; i < l->count && !users; i++)
        users = l->procs[i].file_uid != l->procs[0].file_uid;
    line(k, y++, ATTR_REVERSE, "%7s %s%-8s %-11s %12s %10s %s%9s %9s %s %s", "PID", users ? "USER       " : "", "DEVICES",
         "PHASE", "DEVICE-TOTAL", "TOTAL-PEAK", limits ? "    LIMIT   " : "", "PINNED", "OFFLOADED",
         graphs ? "GRAPH-POOL " : "", "COMMAND");
    /* The notes below the table keep their lines when the processes fill the screen. */
    int notes = (l->bad != 0) + (l->copies != 0), reset = 0, refused = 0, partial = 0;
    for (int i = 0; i < l->count && !refused; i++)
        refused = proc_sum(&l->procs[i], CUSHIM_DEV_limit_refused) != 0;
    for (int i = 0; i < l->count && !partial; i++)
        partial = limit_partial(&l->procs[i]);
    notes += refused + partial;
    for (int j = 0; j < ntot && !reset; j++)
        reset = tot[j].lowered;
    notes += reset;
    for (int i = 0; i < l->count; i++)
        if (l->procs[i].other_pidns && !l->procs[i].host_pid) {
            notes++;
            break;
        }
    int hidden = 0;
    for (int i = 0; i < l->count && y < k->rows - notes; i++) {
        const struct cushim_snapshot *p = &l->procs[i];
        char devs[64], pinned[32], off[32], phase[32], gpool[32] = "";
        uint64_t pin = pinned_sum(p), offl = kind_sum(p, CUSHIM_KIND_OFFLOADED);
        cushim_device_list(p, devs, sizeof devs, 8);
        char pid[16], limit[48] = "", user[48] = "";
        if (users) {
            char cut[USER_COLUMN + 8];
            snprintf(user, sizeof user, "%-*s ", USER_COLUMN, user_column(p->file_uid, cut, sizeof cut));
        }
        if (limits)
            limit_label(p, limit, sizeof limit);
        if (graphs) {
            char g[32];
            snprintf(gpool, sizeof gpool, "%10s ", cushim_format_bytes(graph_pool_sum(p), g, sizeof g));
        }
        /* A peak a reset lowered is marked ("^1.00 MiB"), as in ps. */
        line(k, y++, 0, "%7s %s%-8s %-11s %12s %10s %s%9s %9s %s %s", cushim_pid_label(p, pid, sizeof pid), user, devs,
             cushim_phase_label(p, phase, sizeof phase),
             cushim_format_bytes(proc_sum(p, CUSHIM_DEV_total_current), a, sizeof a),
             peak_label(proc_sum(p, CUSHIM_DEV_total_peak), proc_peak_lowered(p), b, sizeof b),
             limit,
             cushim_format_bytes(pin, pinned, sizeof pinned), cushim_format_bytes(offl, off, sizeof off), gpool,
             p->command);
        hidden += p->other_pidns && !p->host_pid;
    }
    if (hidden)
        line(k, y++, 0, "* the pid in its own pid namespace (a container's), whose processes are not visible here");
    if (partial)
        line(k, y++, 0, "+ only some of the process's devices have a limit: LIMIT sums theirs; the others have "
                        "the card's memory");
    if (refused)
        line(k, y++, 0, "! the limit refused requests (out of memory for the program, or spilled): "
                        "`cushim stat PID` counts them");
    if (reset)
        line(k, y++, 0, "^ peak lowered by a peak reset; lifetime peak: `cushim stat PID`, `ps --json`");
    if (l->bad)
        line(k, y++, 0, "%d segment%s could not be read: `cushim ps` lists %s, with why", l->bad,
             l->bad == 1 ? "" : "s", l->bad == 1 ? "it" : "them");
    if (l->copies)
        line(k, y, 0, "%d cop%s of a process's segment skipped: `cushim stat` names %s", l->copies,
             l->copies == 1 ? "y" : "ies", l->copies == 1 ? "it" : "them");
}

/* ---- batch mode: plain text, frame after frame ---- */
static void emit_stdout(struct sink *k, int y, int attrs, const char *text)
{
    (void)attrs;
    for (; k->next < y; k->next++)
        putchar('\n');
    puts(text);
    k->next = y + 1;
}

static int run_batch(double interval, long iterations, enum sort_key key)
{
    /* SIGINT, SIGTERM, SIGHUP end it between frames with exit 0, as a repeating `stat` (a frame
     * begun is finished). */
    watch_catch_stop_signals();
    for (long n = 0; iterations < 0 || n < iterations; n++) {
        struct sink k = {emit_stdout, INT_MAX, 0};
        if (n) {
            if (watch_sleep(interval))
                break;
            putchar('\n');
        }
        struct proc_list l;
        proc_list_collect(&l, NULL, 0, 0);
        sort_list(&l, key);
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        line(&k, 0, ATTR_BOLD, "cushim top: %d process%s at %s%s%s", l.count, l.count == 1 ? "" : "es", when,
             key != SORT_DEVICE_TOTAL ? ", sorted by " : "", key != SORT_DEVICE_TOTAL ? sort_columns[key] : "");
        frame(&k, &l);
        proc_list_free(&l);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            cli_error("cannot write to standard output: %s", strerror(errno));
            clearerr(stdout); /* said once, here (not again by cushim.c's check) */
            return EXIT_USAGE;
        }
    }
    return 0;
}

#ifdef CUSHIM_HAVE_NCURSES
/* How many bytes of `text` fit in `cols` terminal columns, whole characters only (a command line
 * in UTF-8: one character may be several bytes and two columns). Bytes that are no character of
 * the locale count one column each, as curses shows them escaped. */
static int fitting_bytes(const char *text, int cols)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t len = strlen(text), at = 0;
    int used = 0;
    while (at < len) {
        wchar_t wc;
        size_t n = mbrtowc(&wc, text + at, len - at, &st);
        int w = 1;
        if (n == (size_t)-1 || n == (size_t)-2 || n == 0) {
            n = 1;
            memset(&st, 0, sizeof st);
        } else if ((w = wcwidth(wc)) < 0) {
            w = 1;
        }
        if (used + w > cols)
            break;
        used += w;
        at += n;
    }
    return (int)at;
}

static void emit_screen(struct sink *k, int y, int attrs, const char *text)
{
    (void)k;
    int a = (attrs & ATTR_BOLD ? A_BOLD : 0) | (attrs & ATTR_REVERSE ? A_REVERSE : 0);
    if (a)
        attron(a);
    mvaddnstr(y, 0, text, fitting_bytes(text, COLS > 0 ? COLS : 0));
    if (a)
        attroff(a);
}

static int run_screen(double interval, long iterations, enum sort_key key)
{
    const char *term = getenv("TERM");
    /* A frame is drawn in place: a terminal that cannot move the cursor (terminfo "cup": TERM=dumb,
     * an emacs shell) would get every frame's blanks and lines run together. Asked of the terminfo
     * entry alone, before curses writes anything. */
    int setup_err = 0;
    if (setupterm(NULL, fileno(stdout), &setup_err) == OK) {
        const char *cup = tigetstr("cup");
        bool moves = cup != NULL && cup != (char *)-1;
        del_curterm(cur_term);
        if (!moves) {
            cli_error("the terminal type \"%s\" cannot move the cursor (terminfo has no \"cup\"): "
                      "use --batch, or set TERM, e.g. TERM=xterm", term ? term : "");
            return EXIT_USAGE;
        }
    }
    /* The terminal's character set (LANG, LC_ALL, LC_CTYPE): curses shows a UTF-8 command line as
     * its characters, not as escaped bytes. */
    setlocale(LC_CTYPE, "");
    /* SIGINT (Ctrl-C), SIGTERM and SIGHUP end the view with exit 0, the terminal restored, as q
     * does: caught before curses starts, which then leaves them to us (its own handler exited 1:
     * an attack trial). */
    watch_catch_stop_signals();
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (!screen) {
        cli_error("cannot use the terminal type \"%s\" (set TERM, e.g. TERM=xterm, or use --batch)",
                  term ? term : "");
        return EXIT_USAGE;
    }
    set_term(screen);
    cbreak();
    noecho();
    curs_set(0);
    timeout((int)(interval * 1000));
    bool graphs_shown = false; /* the last frame had a GRAPH-POOL column */
    for (long n = 0; iterations < 0 || n < iterations; n++) {
        struct proc_list l;
        proc_list_collect(&l, NULL, 0, 0);
        sort_list(&l, key);
        graphs_shown = false;
        for (int i = 0; i < l.count && !graphs_shown; i++)
            graphs_shown = has_graph_memory(&l.procs[i]);
        struct sink k = {emit_screen, LINES, 0};
        erase();
        line(&k, 0, ATTR_BOLD, "cushim top: %d process%s, every %.1fs, by %s (< > sort, q quits)",
             l.count, l.count == 1 ? "" : "es", interval, sort_columns[key]);
        frame(&k, &l);
        refresh();
        proc_list_free(&l);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int ch = getch();
        if (ch == 'q' || ch == 'Q' || watch_stopped())
            break;
        if (ch == '<' || ch == '>') {
            /* Another order, drawn at once (this frame's time is not waited out). */
            key = (enum sort_key)((key + (ch == '>' ? 1 : SORT_COUNT - 1)) % SORT_COUNT);
            if (key == SORT_GRAPH_POOL && !graphs_shown) /* no such column on the screen: past it */
                key = (enum sort_key)((key + (ch == '>' ? 1 : SORT_COUNT - 1)) % SORT_COUNT);
            if (iterations > 0)
                n--; /* the frame asked for by a key is not one of the N */
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (ch == ERR && waited < interval / 2)
            /* No key and no wait: standard input is at its end (</dev/null, a closed pipe), or the
             * wait was cut short (a stop and continue, Ctrl-Z then fg): the rest of the interval
             * is slept, and keys are still read at the next frame. */
            watch_sleep(interval - waited);
        if (watch_stopped())
            break;
    }
    endwin();
    delscreen(screen);
    return 0;
}
#endif

static int top_main(int argc, char **argv);

int cmd_top(int argc, char **argv)
{
    /* top's bundled short options: -bn1 is -b -n 1, -bd2 is -b -d 2, -n5 is -n 5, -bs pid is -b -s pid. */
    char **args = calloc((size_t)argc * 3 + 1, sizeof *args), flag[4][3] = {"-b", "-d", "-n", "-s"};
    if (!args) {
        cli_error("out of memory");
        return EXIT_USAGE;
    }
    int nargs = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i > 0 && a[0] == '-' && a[1] && a[1] != '-' && a[2] && strchr("bdns", a[1]) &&
            (a[1] != 'b' || strspn(a + 1, "b") + 1 == strlen(a) || strchr("dns", a[2]))) {
            for (const char *c = a + 1; *c; c++) {
                const char *f = strchr("bdns", *c);
                if (!f)
                    break;
                args[nargs++] = flag[f - "bdns"];
                if (*c != 'b') {
                    if (c[1]) /* -n5, or -n=5 as cli_option_value takes it */
                        args[nargs++] = (char *)(c + 1 + (c[1] == '=' && c[2]));
                    break;
                }
            }
            continue;
        }
        args[nargs++] = (char *)a;
    }
    /* The words point into flag (on this frame) and argv: top_main returns before either goes. */
    int rc = top_main(nargs, args);
    free(args); /* a soak under valgrind: 104 bytes definitely lost at every top's end */
    return rc;
}

/* cushim top, its bundled short options spelt out (cmd_top). */
static int top_main(int argc, char **argv)
{
    double interval = 1.0;
    long iterations = -1;
    int batch = 0;
    enum sort_key key = SORT_DEVICE_TOTAL;
    struct cli_given interval_given = {0}, iterations_given = {0}, sort_given = {0};
    for (int i = 1; i < argc; i++) {
        const char *v, *opt; /* the option as typed, for its messages */
        int got;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: cushim top [-d|--interval SECONDS] [-n|--iterations N] [-b|--batch]\n"
                   "                  [-s|--sort COLUMN]\n\n"
                   "Live view of processes under cushim, sorted by device bytes (or --sort), with\n"
                   "per-device totals across processes. q quits. A LIMIT column appears when a\n"
                   "process has a device limit (CUSHIM_DEVICE_LIMIT): the sum over its devices,\n"
                   "\"+\" when only some of them have one, \"!\" when a limit refused a request.\n"
                   "A GRAPH-POOL column appears when a process has CUDA graph memory: its graph\n"
                   "memory pools' reserve (device memory for graphs' allocation nodes, not in\n"
                   "DEVICE-TOTAL), as last read (`cushim stat PID` says when). A USER column\n"
                   "appears when the processes listed are of more than one user (root's view).\n\n"
                   "Devices: MEMORY is the device's memory; DEVICE-TOTAL the device memory the\n"
                   "listed processes hold (cudaMalloc, stream-ordered, VMM and array memory: the\n"
                   "summary's device_total); SUM-PEAKS the sum of their device-total peaks.\n"
                   "Processes: DEVICE-TOTAL and TOTAL-PEAK over their devices; PINNED the host\n"
                   "memory they pinned (cudaMallocHost and cudaHostRegister: pinned_host +\n"
                   "registered_host); OFFLOADED their device requests served from host memory.\n"
                   "A peak marked ^ (SUM-PEAKS, TOTAL-PEAK) was lowered by a peak reset\n"
                   "(`cushim reset-peak`).\n\n"
                   "  -d, --interval SECONDS  time between frames (0.1..3600, default 1)\n"
                   "  -n, --iterations N      stop after N frames (default: until q or a signal)\n"
                   "  -b, --batch             print frame after frame as plain text (the default\n"
                   "                          when standard output is not a terminal), for logs\n"
                   "                          and scripts (top's -d, -n and -b mean the same,\n"
                   "                          bundled too: -bn1)\n"
                   "  -s, --sort COLUMN       order processes by device-total (the default),\n"
                   "                          total-peak, pinned, offloaded, graph-pool (largest\n"
                   "                          first) or pid; on the screen, < and > move to the\n"
                   "                          column left or right\n");
            return 0;
        } else if (strcmp(argv[i], "-b") == 0 || strcmp(argv[i], "--batch") == 0) {
            batch = 1;
        } else if ((got = cli_option_value(argc, argv, &i, (opt = "--interval"), "SECONDS", &v)) != 0 ||
                   (got = cli_option_value(argc, argv, &i, (opt = "-d"), "SECONDS", &v)) != 0) {
            double was = interval;
            if (got < 0 || watch_parse_interval(opt, v, &interval) < 0)
                return EXIT_USAGE;
            cli_say_given(&interval_given, "--interval", opt, v, interval == was);
        } else if ((got = cli_option_value(argc, argv, &i, (opt = "--sort"), "a COLUMN", &v)) != 0 ||
                   (got = cli_option_value(argc, argv, &i, (opt = "-s"), "a COLUMN", &v)) != 0) {
            if (got < 0)
                return EXIT_USAGE;
            /* In either case, '_' for '-': the column's heading (TOTAL-PEAK) and the JSON's spelling
             * (device_total) name it too. Folded here: the hints below read the same name. */
            char lower[32];
            snprintf(lower, sizeof lower, "%s", v);
            for (char *c = lower; *c; c++)
                *c = *c == '_' ? '-' : *c >= 'A' && *c <= 'Z' ? (char)(*c - 'A' + 'a') : *c;
            int k = 0;
            while (k < SORT_COUNT && (strlen(v) >= sizeof lower || strcmp(lower, sort_names[k]) != 0))
                k++;
            if (k == SORT_COUNT) {
                size_t d;
                char hint[64] = "";
                /* First the one column a word of whose name it is (peak: total-peak; total is a
                 * word of two: none, found by an attack trial), else the nearest name. */
                int near = -1;
                for (int c = 0; c < SORT_COUNT; c++) {
                    const char *at = strstr(sort_names[c], lower);
                    size_t n = strlen(lower);
                    if (n >= 3 && at && (at == sort_names[c] || at[-1] == '-') && (at[n] == '\0' || at[n] == '-'))
                        near = near == -1 ? c : -2;
                }
                if (near == -1)
                    near = cushim_text_nearest(lower, strlen(lower), sort_names, SORT_COUNT, 0, &d);
                if (near == -2)
                    near = -1;
                if (near >= 0)
                    snprintf(hint, sizeof hint, "did you mean %s? ", sort_names[near]);
                cli_error("%s %s is not a column top sorts by (%sexpected device-total, total-peak, pinned, "
                          "offloaded, graph-pool or pid)", opt, cli_shown(v), hint);
                return EXIT_USAGE;
            }
            cli_say_given(&sort_given, "--sort", opt, v, key == (enum sort_key)k);
            key = (enum sort_key)k;
        } else if ((got = cli_option_value(argc, argv, &i, (opt = "--iterations"), "N", &v)) != 0 ||
                   (got = cli_option_value(argc, argv, &i, (opt = "-n"), "N", &v)) != 0) {
            long was = iterations;
            if (got < 0 || watch_parse_iterations(opt, v, &iterations) < 0)
                return EXIT_USAGE;
            cli_say_given(&iterations_given, "--iterations", opt, v, iterations == was);
        } else {
            cli_bad_word("top", argv[i], "cushim top [-b|--batch] [-d|--interval SECONDS] [-n|--iterations N] [-s|--sort COLUMN]");
            return EXIT_USAGE;
        }
    }
    if (batch || !isatty(fileno(stdout)))
        return run_batch(interval, iterations, key);
#ifdef CUSHIM_HAVE_NCURSES
    return run_screen(interval, iterations, key);
#else
    cli_error("the live screen was not built (ncurses was not found at build time); "
              "use `cushim top --batch` or `cushim stat`");
    return EXIT_USAGE;
#endif
}
