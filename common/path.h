/* Paths the shim and the CLI judge the same way. Thread-safe; a few system calls. */
#ifndef CUSHIM_PATH_H
#define CUSHIM_PATH_H

#include <stddef.h>

/* The directory part of `path` into buf (len bytes): "/a/b" -> "/a", "/x" -> "/", "x" -> ".". */
void cushim_parent_dir(const char *path, char *buf, size_t len);

/* Whether `dir` is a run directory made by `cushim run` that this user may write summaries to:
 * named cushim-run.*, a directory (not a link), owned by the effective user, mode 0700 (nobody
 * else can put or swap a file there). 0: yes; CUSHIM_RUN_DIR_GONE: it does not exist (the run
 * has ended); CUSHIM_RUN_DIR_NOT: something else; -1: lstat failed otherwise (errno set). */
#define CUSHIM_RUN_DIR_GONE (-2)
#define CUSHIM_RUN_DIR_NOT (-3)
int cushim_run_dir_check(const char *dir);

#endif
