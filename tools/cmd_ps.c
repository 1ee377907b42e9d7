/* cushim ps [--json]: one line per process under cushim: pid, user, devices, device current/peak
 * (summed over its devices), phase, command; segments of dead processes are marked stale (exited:
 * with their exit report), copies copy. --json:
 * the same as a JSON array (docs/SUMMARY-JSON.md, "cushim ps --json"). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/report.h"
#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"
#include "tools/collect.h"

struct ps_arg {
    int rows;   /* valid segments listed (live, copy, stale or exited) */
    int invalid;
    int color;
    int hidden; /* processes of another pid namespace not visible here ("1*") */
    int reset;  /* rows whose peak a reset lowered ("1.5 GiB^") */
    int stale;  /* rows of processes gone without their exit report */
    int stale_run; /* those whose `cushim run` is still going: it removes them, not gc */
    int exited;     /* rows of processes gone with their exit report, their segment left */
    int exited_run; /* those whose `cushim run` is still going */
    int gone_copies;     /* rows of copies of a gone process's segment (shown as `copy`) */
    int gone_copies_run; /* those whose `cushim run` is still going: gc removes them after it */
    /* The live files, found by a first pass, and which are copies (seg_find_copies: another
     * file of a process that it does not map, or a second name of one), shown as `copy`. */
    struct seg_file *live;
    char *copy;
    int nlive;
    struct jsonw *json; /* --json: the array's writer, else NULL */
    /* The text rows, sorted by the pid shown before they are printed: the scan goes by the pid of
     * each file's name, which for a container's process is its pid there, not the one shown (an
     * operator trial: 11981 listed before 6833). */
    struct ps_line *lines;
    int nlines;
};

struct ps_line {
    long pid;   /* the pid shown */
    int seq;    /* the scan's order, among equal pids */
    char *text; /* the row, its newline included (malloc'd) */
};

static int by_shown_pid(const void *x, const void *y)
{
    const struct ps_line *a = x, *b = y;
    return a->pid != b->pid ? (a->pid < b->pid ? -1 : 1) : (a->seq > b->seq) - (a->seq < b->seq);
}

/* Keeps a text row, formatted as printf's fmt, for the sorted listing; printed at once when it
 * cannot be kept (formatted or stored for lack of memory): out of order, never lost. */
static void keep_line(struct ps_arg *a, long pid, const char *fmt, ...)
{
    va_list ap;
    char *text = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        return;
    }
    struct ps_line *grown = realloc(a->lines, (size_t)(a->nlines + 1) * sizeof *grown);
    if (!grown) {
        fputs(text, stdout);
        free(text);
        return;
    }
    a->lines = grown;
    grown[a->nlines] = (struct ps_line){pid, a->nlines, text};
    a->nlines++;
}

/* One process as an object of ps --json's array. */
static void json_row(struct jsonw *w, const struct seg_entry *e, const char *user, const char *state)
{
    jsonw_object_begin(w, NULL);
    if (e->ok)
        cushim_json_identity(w, &e->snap);
    else
        jsonw_i64(w, "pid", e->pid); /* the file name's: the segment cannot be read */
    jsonw_u64(w, "uid", e->uid);
    jsonw_string(w, "user", user);
    jsonw_string(w, "state", state);
    jsonw_string(w, "path", e->path);
    if (!e->ok) {
        jsonw_string(w, "error", e->err);
        jsonw_object_end(w);
        return;
    }
    /* Per device, in the summary's names (a subset of its device objects); the text's columns
     * are their sums. */
    jsonw_array_begin(w, "devices");
    for (uint32_t i = 0; i < e->snap.device_count; i++) {
        const struct cushim_device_snapshot *d = &e->snap.devices[i];
        jsonw_object_begin(w, NULL);
        jsonw_i64(w, "ordinal", d->ordinal);
        jsonw_object_begin(w, "device_total");
        jsonw_u64(w, "current_bytes", d->dev[CUSHIM_DEV_total_current]);
        jsonw_u64(w, "peak_bytes", d->dev[CUSHIM_DEV_total_peak]);
        jsonw_u64(w, "lifetime_peak_bytes", d->dev[CUSHIM_DEV_lifetime_peak]);
        jsonw_object_end(w);
        jsonw_object_end(w);
    }
    jsonw_array_end(w);
    jsonw_string(w, "phase", cushim_phase_name(e->snap.phase));
    jsonw_string(w, "phase_requested", cushim_phase_requested(&e->snap));
    jsonw_string(w, "command", e->snap.command);
    jsonw_object_end(w);
}

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

/* Who removes the segments of n rows of gone processes, nrun of them collected by their
 * `cushim run` (seg_collecting_run), as stat says it (seg_gone_words). */
static const char *remover(int n, int nrun)
{
    return !nrun       ? "`cushim gc` removes its segment"
           : nrun == n ? "its `cushim run`, still going, reports it and removes its segment when it ends"
                       : "`cushim gc` removes its segment, or its `cushim run` when that ends, if still going";
}

static int row(struct seg_entry *e, void *argp)
{
    struct ps_arg *a = argp;
    char cur[32], peak[32], devs[128] = "", cmd[CUSHIM_COMMAND_MAX];
    bool named;
    char user_cut[USER_COLUMN + 8];
    const char *user = user_label(e->uid, &named); /* a uid without a name: its number, as top */
    const char *shown_user = user_column(e->uid, user_cut, sizeof user_cut); /* the text's column */
    if (!e->ok) {
        if (a->json)
            json_row(a->json, e, named ? user : NULL, "invalid");
        else
        {
            /* Escaped, as in every message: a segment directory's name may hold an escape
             * sequence or a newline. */
            char path[sizeof e->path * 4], err[sizeof e->err * 4];
            keep_line(a, e->pid, "%7d %-*s %-7s %s: %s\n", (int)e->pid, USER_COLUMN, shown_user, "invalid",
                      cushim_text_escaped(e->path, path, sizeof path), cushim_text_escaped(e->err, err, sizeof err));
        }
        a->invalid++;
        return 0;
    }
    uint64_t c = proc_sum(&e->snap, CUSHIM_DEV_total_current), p = proc_sum(&e->snap, CUSHIM_DEV_total_peak);
    cushim_device_list(&e->snap, devs, sizeof devs, 8);
    /* A copy of a gone process's segment (a backup, a restore) says nothing of how it ended; a
     * segment with its exit report was left by a process that ended normally (or exec'd). */
    enum seg_left left = seg_left_of(&e->snap, e->ino);
    int gone_copy = e->stale && left == SEG_LEFT_COPY, exited = e->stale && left == SEG_LEFT_EXITED;
    int stale = e->stale && left == SEG_LEFT_STALE;
    const char *state = gone_copy || (!e->stale && is_copy(a, e)) ? "copy"
                        : exited                                  ? "exited"
                        : stale                                   ? "stale"
                                                                  : "live";
    int run = e->stale && seg_collecting_run(&e->snap) > 0;
    a->stale += stale;
    a->stale_run += stale && run;
    a->exited += exited;
    a->exited_run += exited && run;
    a->gone_copies += gone_copy;
    a->gone_copies_run += gone_copy && run;
    if (a->json) {
        json_row(a->json, e, named ? user : NULL, state);
        a->rows++;
        return 0;
    }
    char phase[32];
    const char *on = a->color && stale ? "\033[33m" : "", *off = a->color && stale ? "\033[0m" : "";
    char pid[16];
    a->hidden += e->snap.other_pidns && !e->snap.host_pid;
    /* A peak a reset lowered is marked ("^1.00 MiB"): the process needed more before (a fresh-user
     * trial: a card sized from ps after a server's reset would be too small). */
    int lowered = proc_peak_lowered(&e->snap);
    a->reset += lowered;
    keep_line(a, e->snap.other_pidns && e->snap.host_pid ? (long)e->snap.host_pid : (long)e->snap.pid,
              "%s%7s %-*s %-7s %-8s %12s %12s %-11s %s%s\n", on, cushim_pid_label(&e->snap, pid, sizeof pid),
              USER_COLUMN, shown_user, state, devs, cushim_format_bytes(c, cur, sizeof cur),
              peak_label(p, lowered, peak, sizeof peak), cushim_phase_label(&e->snap, phase, sizeof phase),
              cushim_text_printable(e->snap.command, cmd, sizeof cmd), off);
    a->rows++;
    return 0;
}

int cmd_ps(int argc, char **argv)
{
    int json = 0, bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            bad = i;
    }
    if (bad) {
        if (strcmp(argv[bad], "-h") == 0 || strcmp(argv[bad], "--help") == 0) {
            printf("usage: cushim ps [--json]\n\nLists processes under cushim (yours; everyone's as root):\n"
                   "pid (as seen here, also for a container's process), user, state (live;\n"
                   "copy: another file or name of a process's segment, not the one it uses or\n"
                   "used; stale: the process ended without its exit report; exited: it ended\n"
                   "with it, but its segment is left), devices used, device bytes current and\n"
                   "peak (summed over its devices; ^: a peak reset lowered the peak), phase\n"
                   "(run>compile while a `cushim phase` request waits for the process's next\n"
                   "allocation), command. A file named like a segment that cannot be read as one\n"
                   "(another cushim version's, say) is listed as invalid, with why.\n\n"
                   "  --json   the same as a JSON array, one object per segment file, with pid,\n"
                   "           user, state, path and devices, device_total and phase in the\n"
                   "           summary's names (docs/SUMMARY-JSON.md)\n");
            return 0;
        }
        cli_bad_word("ps", argv[bad], "cushim ps [--json]");
        return EXIT_USAGE;
    }
    struct jsonw w;
    struct ps_arg a = {.color = !json && cli_color(stdout), .json = json ? &w : NULL};
    seg_scan(NULL, 0, gather_live, &a);
    if (a.nlive > 0 && (a.copy = malloc((size_t)a.nlive)) != NULL)
        seg_find_copies(a.live, a.nlive, a.copy);
    if (json) {
        jsonw_init(&w, stdout);
        jsonw_array_begin(&w, NULL);
    } else {
        printf("%7s %-*s %-7s %-8s %12s %12s %-11s %s\n", "PID", USER_COLUMN, "USER", "STATE", "DEVICES",
               "DEVICE-TOTAL", "TOTAL-PEAK", "PHASE", "COMMAND");
    }
    seg_scan(NULL, 0, row, &a);
    if (a.nlines > 1)
        qsort(a.lines, (size_t)a.nlines, sizeof *a.lines, by_shown_pid);
    for (int i = 0; i < a.nlines; i++) {
        fputs(a.lines[i].text, stdout);
        free(a.lines[i].text);
    }
    free(a.lines);
    if (json)
        jsonw_array_end(&w);
    if (!json && a.hidden)
        printf("* the pid in its own pid namespace (a container's), whose processes are not visible here\n");
    if (!json && a.reset)
        printf("^ peak lowered by a peak reset; lifetime peak: `cushim stat PID`, `ps --json`\n");
    /* What to do about them (a fresh-user trial); gc leaves one whose `cushim run` goes on, which
     * reports and removes it at its end (seg_gone_words, as stat says it). */
    if (!json && a.stale)
        printf("stale: the process ended without its exit report (killed, or _exit); %s\n",
               remover(a.stale, a.stale_run));
    if (!json && a.exited)
        printf("exited: the process ended with its exit report but left its segment (it could not remove "
               "it, or kept it for its `cushim run`); %s\n", remover(a.exited, a.exited_run));
    /* gc leaves one whose `cushim run` goes on, and that run leaves copies (run_collect.c). */
    if (!json && a.gone_copies)
        printf("copy: a copy of the segment of a process that is gone, not the file it wrote, so it says "
               "nothing of how the process ended; %s\n",
               !a.gone_copies_run ? "`cushim gc` removes it"
               : a.gone_copies_run == a.gone_copies ? "`cushim gc` removes it once its `cushim run` has ended"
                                                    : "`cushim gc` removes it (once its `cushim run` has ended, if still going)");
    /* Without it the listing reads as the whole machine (an operator trial: nvidia-smi shows
     * every process). */
    int others = seg_scan_others();
    if (!json && others)
        printf("+ %d segment file%s of other users, not listed (root sees every user's)\n", others,
               others == 1 ? "" : "s");
    for (int i = 0; i < a.nlive; i++)
        free(a.live[i].path);
    free(a.live);
    free(a.copy);
    /* The listing first, where both go to one file; a failure said with its own errno (found by an
     * attack trial: `ps >/dev/full` said "Input/output error", the flush's ENOSPC lost). */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("cannot write to standard output: %s", strerror(errno ? errno : EIO));
        clearerr(stdout); /* said once, here (not again by cushim.c's check) */
        return EXIT_USAGE;
    }
    if (!a.rows && !json) /* JSON: an empty array, and the exit status */
        cli_error("no process under cushim (yours; everyone's as root) in %s%s", seg_dir(),
                  a.invalid ? ": only files that could not be read (listed above)" : "");
    return a.rows ? 0 : EXIT_NOTHING;
}
