/* This process's segment file (segment_file.c). Not thread-safe: called once at start, once at
 * exit. */
#ifndef CUSHIM_SEGMENT_FILE_H
#define CUSHIM_SEGMENT_FILE_H

#include <stddef.h>

#include "common/path.h"
#include "shim/shim.h"

/* Creates <segment_dir>/cushim-<uid>-<pid> (0600, O_EXCL, replacing only a stale file of our own
 * pid; a suffixed name when the plain one is another's file), sized and mapped shared, header
 * filled. `flags`: CUSHIM_SEG_F_* for the header (the caller's CUSHIM_SEG_F_TOP); the offload
 * and spill bits are added from c. If that fails, returns private anonymous memory
 * with CUSHIM_SEG_F_ANONYMOUS set and path = "" (counting still works; logged at warn level).
 * NULL only if no memory at all. `path` receives the file's path. The mapping is
 * sizeof(struct cushim_segment) bytes; the process keeps it for its life (nobody unmaps it but a
 * forked child, which drops its parent's: init.c after_fork_child). */
struct cushim_segment *segment_create(const struct cushim_config *c, unsigned flags,
                                      uint64_t run_id, char *path, size_t pathlen);

/* The first suffixed name this process takes when its plain name is another's file:
 * `plain`.XXXXXX with XXXXXX from the pid and the pid namespace's inode, which an exec keeps, so
 * a later image of the process finds the segment of the one before it (shim/exit.c). Written
 * into out (len bytes). */
void segment_own_suffixed(const char *plain, char *out, size_t len);

/* Whether directory entry `entry` is plain name `name` (cushim-UID-PID) with a suffix,
 * `name`.XXXXXX: a segment of that pid under another name. */
bool segment_is_suffixed(const char *entry, const char *name);

/* Removes the segment's file (if path is not empty); the mapping stays valid. A file it cannot
 * remove (the process changed user since it made it) is said in one log line and left. */
void segment_unlink(const char *path);

/* Writes a copy of s to <dir>/<pid>-<created_ns in hex>.seg atomically (temporary file, then rename), for
 * `cushim run`'s summary; each device record copied under its seqlock, for up to patience_ns
 * while other threads still count (CUSHIM_COPY_PATIENCE_NS; 0 when none can). Not reentrant:
 * called at a process's end. `dir` must be what `cushim run` made: a directory named cushim-run.*,
 * owned by the effective user, with no group or other permissions, not a symbolic link.
 * Returns 0; SEGMENT_COPY_GONE when dir no longer exists, or goes away meanwhile (the run has
 * finished);
 * SEGMENT_COPY_OTHER_USER when it is such a directory but another user's (this process changed
 * user after the run started it); SEGMENT_COPY_NOT_RUN_DIR when it is not such a directory; -1 on
 * a write error (errno set). */
#define SEGMENT_COPY_GONE CUSHIM_RUN_DIR_GONE          /* common/path.h */
#define SEGMENT_COPY_NOT_RUN_DIR CUSHIM_RUN_DIR_NOT
#define SEGMENT_COPY_OTHER_USER CUSHIM_RUN_DIR_OTHER_USER
int segment_copy_to(const struct cushim_segment *s, const char *dir, uint64_t patience_ns);
/* The copy is dir/PID-CREATED.seg (CREATED: the segment's created_ns in hex), so an image before
 * an exec and a later process given the same pid keep their own. The run reads its directory
 * only after renaming it (closing it), and takes each copy before reading it (renames it to
 * .taken-NAME): a copy that lands as the run closes is taken back here unless the run took it,
 * and then SEGMENT_COPY_GONE says the process reports for itself. */

#endif
