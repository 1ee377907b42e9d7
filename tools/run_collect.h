/* The end of a `cushim run`: every summary of its processes, from its run directory (each
 * process's shim copies its final segment there at exit, shim/segment_file.c) and from the live
 * segments of its processes that died without an exit report. Not thread-safe. */
#ifndef CUSHIM_RUN_COLLECT_H
#define CUSHIM_RUN_COLLECT_H

#include <stdint.h>

#include "common/snapshot.h"
#include "tools/run_nested.h"

/* A live process of the run seen as it closed: this image (pid, segment created_ns). */
struct run_alive {
    int32_t pid;
    uint64_t created_ns;
};

/* What run_collect gathered. Every pointer is malloc'd and owned by the struct (NULL when
 * empty, or when out of memory dropped an entry: add_summary and add_nested skip it silently);
 * release with run_collected_free. */
struct collected {
    struct cushim_snapshot *top;   /* the launched program's last image, if it used CUDA (else NULL) */
    struct cushim_snapshot *desc;  /* descendants (and images of the program before an exec),
                                      sorted by creation time */
    int ndesc;
    int running;                   /* processes of the run using CUDA still alive at its end */
    int unreadable;                /* summaries of the run that could not be read (corrupt or
                                      foreign: each said in one line): not in top or desc */
    uint64_t run_id;               /* the run's own id: only its launched program is the top level */
    uint64_t *nested;              /* ids of runs started inside this one (their run-ID files) */
    char **nested_dir;             /* their run directories, nnested of them (each malloc'd; NULL
                                      when its run-ID file could not be read or was empty) */
    int nnested;
    struct run_alive *alive;       /* live processes seen before the directory was closed */
    int nalive;
};

/* Collects run `run_id`'s summaries into *c (zeroed first; malloc'd, run_collected_free).
 * In this order, so that each process is counted once: the live segments of the run's
 * processes are read (a dead one's is its summary, and is removed; a live one is noted), the
 * directory `dir` is closed (renamed to DIR.done: a process that finishes from then on reports
 * for itself), its summaries are read, handed to the enclosing run `outer` (if outer->id) and
 * the directory removed; a noted process whose summary was read is not still running. */
void run_collect(const char *dir, uint64_t run_id, const struct outer_run *outer, struct collected *c);

/* Frees everything c owns (each nested_dir[i], then the arrays) and zeroes *c: a second call
 * is harmless. */
void run_collected_free(struct collected *c);

#endif
