/* A `cushim run` inside another one (a launcher script that itself uses `cushim run`): the
 * inner run registers with the outer one and, at its end, hands it its processes' summaries, so
 * the outer run's summary lists every process. Not thread-safe (one run per process). */
#ifndef CUSHIM_RUN_NESTED_H
#define CUSHIM_RUN_NESTED_H

#include <stdint.h>

/* The `cushim run` this one runs under, if any: its run directory (checked as the shim checks
 * it: a cushim-run.* directory of ours, mode 0700) and id. id 0: none. */
struct outer_run {
    char dir[4096];
    uint64_t id;
};

/* Fills o from CUSHIM_RUN_DIR and CUSHIM_RUN_ID as this process inherited them. */
void outer_run_find(struct outer_run *o);

/* Tells the outer run that a run with id `inner_id` and run directory `inner_dir` runs inside it
 * (a file run-ID in its directory, ID in hex, mode 0600, holding that path), so that it counts
 * that run's live processes as still running at its end, and, if that run is killed before it
 * reports, collects that run's summaries itself. o->id must be nonzero (the caller checks,
 * tools/cmd_run.c). Errors are not reported: a file that cannot be created (already there:
 * O_EXCL; the outer directory gone) is skipped, and a failed or short write leaves no usable
 * path (the outer run then counts this run's live processes but cannot collect it if killed). */
void outer_run_register(const struct outer_run *o, uint64_t inner_id, const char *inner_dir);

/* Copies this run's summaries (dir/.taken-PID-CREATED.seg, as run_collect left them) into the
 * outer run's directory as its own: its id, and no process of ours is its launched program. The
 * outer run then lists them among its descendants. Best effort: a copy that fails is said (one
 * line on stderr) and skipped. */
void outer_run_hand_over(const struct outer_run *o, const char *dir, uint64_t inner_id);

#endif
