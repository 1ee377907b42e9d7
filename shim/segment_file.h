/* This process's segment file (segment_file.c). Not thread-safe: called once at start, once at
 * exit. */
#ifndef CUSHIM_SEGMENT_FILE_H
#define CUSHIM_SEGMENT_FILE_H

#include <stddef.h>

#include "shim/shim.h"

/* Creates <segment_dir>/cushim-<uid>-<pid> (0600, O_EXCL, replacing only a stale file of our own
 * pid), sized and mapped shared, header filled. If that fails, returns private anonymous memory
 * with CUSHIM_SEG_F_ANONYMOUS set and path = "" (counting still works; logged once). NULL only if
 * no memory at all. `path` receives the file's path. */
struct cushim_segment *segment_create(const struct cushim_config *c, unsigned flags,
                                      uint64_t run_id, char *path, size_t pathlen);

/* Removes the segment's file (if path is not empty); the mapping stays valid. */
void segment_unlink(const char *path);

/* Writes a copy of s to <dir>/<pid>.seg atomically (temporary file, then rename), for
 * `cushim run`'s summary. Returns 0 or -1 (errno set). */
int segment_copy_to(const struct cushim_segment *s, const char *dir);

#endif
