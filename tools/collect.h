/* Gathering snapshots of live processes for stat, top and serve. Not thread-safe: seg_scan and
 * seg_find_copies use static state (serve calls these from libmicrohttpd's one polling thread
 * only, tools/cmd_serve.c). */
#ifndef CUSHIM_COLLECT_H
#define CUSHIM_COLLECT_H

#include <stdbool.h>

#include "tools/cli.h"

/* A segment whose process is gone: its pid and path (owned by the list), what it is (seg_left_of),
 * and the `cushim run` that collects it (seg_collecting_run; 0: none). */
struct proc_gone {
    pid_t pid;
    char *path;
    enum seg_left left;
    pid_t run;
};

/* What proc_list_collect found. The list owns procs, gone (and each gone[i].path) and
 * unreadable, all malloc'd: release them with proc_list_free. */
struct proc_list {
    struct cushim_snapshot *procs; /* count live processes, largest device total first (NULL: none) */
    int count;
    int bad;      /* segments that could not be read (reported on stderr when `report`) */
    int stale;    /* segments of processes that ended without their exit report, copies not
                   * counted (skipped, as are all segments of gone processes) */
    int copies;   /* live segments skipped as copies of a listed one (another name or file of it
                   * that the process does not map; said on stderr when `report`) */
    struct proc_gone *gone; /* those, when collecting given pids (else NULL); ngone of them */
    int ngone;
    pid_t *unreadable;      /* pids of the bad segments, when collecting given pids (else NULL) */
    int nunreadable;
    int dir_unreadable;     /* the segment directory could not be read (said on stderr) */
};

/* Snapshots of the caller's live processes (everyone's when root), or only `pids` (npids > 0;
 * as seg_scan takes them). Invalid segments are reported in one line each when `report` and
 * skipped; stale ones are skipped; copies of a listed segment are dropped (seg_find_copies).
 * Sorted by device bytes (CUSHIM_DEV_total_current summed over devices), largest first, then by
 * pid. *l is zeroed first (a list it held is not freed: proc_list_free it before). Returns
 * l->count. Errors are not returned: a directory that cannot be read sets l->dir_unreadable
 * (said on stderr by seg_scan); out of memory ends the scan (collect.c add) and leaves the
 * list partial, with nothing said. Free with proc_list_free, whatever the result. */
int proc_list_collect(struct proc_list *l, const pid_t *pids, int npids, int report);
/* Frees what l owns and zeroes it (then empty: freeing it again is harmless). */
void proc_list_free(struct proc_list *l);

/* One live segment file, as seg_find_copies needs it: the process it names (pid and pidns as in
 * its header, start time, its pid here or 0 when not visible) and the file (device, inode). */
struct seg_file {
    pid_t pid, here;
    uint64_t start_time, pidns;
    dev_t dev;
    ino_t ino;
    int copy;   /* seg_entry.copy: known to be a copy (its header names another file) */
    char *path; /* the caller's; not read here */
};

/* The seg_file of a live seg_entry (path: e->path, not copied). */
struct seg_file seg_file_of(struct seg_entry *e);

/* Of n live segment files, the copies: verdict[i] = 1 for a file known to be a copy (seg_file.copy:
 * its header names another file, alone or not); when several others name one process (a copy its
 * user made, or a second name of one file), 1 for a file the process does not map while it maps one
 * of them (seg_mapped_by), 2 for a second name of a file kept (a hard link), 3 for all but one of
 * them when which one the process maps cannot be told here (its maps not readable: the plain name
 * is kept, else the first listed), 4 for all but one of them (chosen so) when it maps none of
 * them, else 0. What stat, top and the exporter skip and ps shows as
 * `copy`: a process is listed once. */
void seg_find_copies(const struct seg_file *f, int n, char *verdict);

/* Sum over the process's devices of a device stat (CUSHIM_DEV_*). */
uint64_t proc_sum(const struct cushim_snapshot *s, int dev_stat);

/* Whether a peak reset left a device's peak below its lifetime peak (the process needed more
 * before the reset than its peak shows): ps and top mark such a peak, "^1.00 MiB" (peak_label). */
int device_peak_lowered(const struct cushim_device_snapshot *d);
int proc_peak_lowered(const struct cushim_snapshot *s);

/* `bytes` formatted (cushim_format_bytes) into buf, after a '^' when `lowered`. Returns buf. */
const char *peak_label(uint64_t bytes, int lowered, char *buf, size_t len);

/* The user who owns a segment, as ps's USER and top's USER column show it: the name of `uid`,
 * else its number (as ps(1)); *named (if not NULL) says which. Names are looked up once per uid (a
 * top frame a second must not ask NSS, LDAP say, for every row): 32 kept. Static storage, valid
 * until 32 other uids have been asked. Not thread-safe. */
const char *user_label(uint32_t uid, bool *named);

/* USER_COLUMN columns: the width of ps's and top's USER column. */
#define USER_COLUMN 10

/* user_label(uid) as the USER column shows it, into buf (len bytes, at least USER_COLUMN + 1): a
 * label longer than USER_COLUMN bytes is cut to USER_COLUMN - 1 and ends in '+' (as top(1)), so
 * that a row keeps its columns and a cut name is never taken for a whole one (a fresh-user trial:
 * ps printed long names whole, shifting the row, and top cut them silently). A UTF-8 character is
 * never split. Returns buf. Not thread-safe (user_label). */
const char *user_column(uint32_t uid, char *buf, size_t len);

#endif
