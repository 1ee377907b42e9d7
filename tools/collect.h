/* Gathering snapshots of live processes for stat, top and serve. */
#ifndef CUSHIM_COLLECT_H
#define CUSHIM_COLLECT_H

#include "tools/cli.h"

/* A segment whose process is gone: its pid and path (owned by the list). */
struct proc_gone {
    pid_t pid;
    char *path;
};

struct proc_list {
    struct cushim_snapshot *procs;
    int count;
    int bad;      /* segments that could not be read (reported on stderr when `report`) */
    int stale;    /* segments of processes that are gone (skipped) */
    int copies;   /* live segments skipped as copies of a listed one (another name or file of it
                   * that the process does not map; said on stderr when `report`) */
    struct proc_gone *gone; /* those, when collecting given pids (else NULL); ngone of them */
    int ngone;
    pid_t *unreadable;      /* pids of the bad segments, when collecting given pids (else NULL) */
    int nunreadable;
    int dir_unreadable;     /* the segment directory could not be read (said on stderr) */
};

/* Snapshots of the caller's live processes (everyone's when root), or only `pids`. Invalid
 * segments are reported in one line each when `report` and skipped; stale ones are skipped.
 * Sorted by device bytes (sum over devices), largest first. Free with proc_list_free. */
int proc_list_collect(struct proc_list *l, const pid_t *pids, int npids, int report);
void proc_list_free(struct proc_list *l);

/* Sum over the process's devices of a device stat (CUSHIM_DEV_*). */
uint64_t proc_sum(const struct cushim_snapshot *s, int dev_stat);

#endif
