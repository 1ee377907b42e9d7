/* Paths the shim and the CLI judge the same way. Thread-safe; a few system calls. */
#ifndef CUSHIM_PATH_H
#define CUSHIM_PATH_H

#include <stddef.h>
#include <stdint.h>

/* The directory part of `path` into buf (len bytes): "/a/b" -> "/a", "/x" -> "/", "x" -> ".",
 * "a/b/" -> "a/b" (everything before the last '/', no normalisation). The path is first copied
 * cut to len-1 bytes and the last '/' of that copy is taken: a path that does not fit gives a
 * wrong directory, silently (callers size buf above any path they pass). len must be >= 2. */
void cushim_parent_dir(const char *path, char *buf, size_t len);

/* Whether `dir` is a run directory made by `cushim run` that this user may write summaries to:
 * named cushim-run.*, a directory (not a link), owned by the effective user, mode 0700 (nobody
 * else can put or swap a file there). 0: yes; CUSHIM_RUN_DIR_GONE: it does not exist (the run
 * has ended); CUSHIM_RUN_DIR_OTHER_USER: such a directory, but another user's (the process changed
 * user after the run started it: setuid, gosu, runuser); CUSHIM_RUN_DIR_NOT: something else; -1:
 * lstat failed otherwise (errno set). */
#define CUSHIM_RUN_DIR_GONE (-2)
#define CUSHIM_RUN_DIR_NOT (-3)
#define CUSHIM_RUN_DIR_OTHER_USER (-4)
int cushim_run_dir_check(const char *dir);

/* The `cushim run` a run directory belongs to, from its name (the last component of `dir`):
 * cushim-run.PID-START-PIDNS.XXXXXX, or XXXXXX.done once the run closed it (tools/cmd_run.c);
 * the older cushim-run.PID-START.XXXXXX gives *pidns 0 (unknown). START is the run's
 * /proc/<pid>/stat field 22, PIDNS the inode of its pid namespace. 0, or -1 if the name is not
 * one. Thread-safe. */
int cushim_run_dir_owner(const char *dir, int *pid, uint64_t *start, uint64_t *pidns, int *done);

struct stat;
/* Whether the symbolic link at `path` (lstat'ed into *l) may be followed to write a report or a
 * log: only when nobody else could have planted it. 1 when its directory (stat, following links)
 * is the user's or root's and either no group or other may write it (/dev/stderr, a link in the
 * user's home) or it is sticky and the link is the user's own (/tmp); 0 otherwise, also when
 * the directory cannot be stat'ed or is another user's (no errno promised). The rule of the
 * kernel's protected_symlinks, made stricter for directories without the sticky bit: there
 * even the user's own link is refused. */
int cushim_trusted_link(const char *path, const struct stat *l);

/* Whether every symbolic link met on the way to `path` (in its directories, and the links it
 * leads through) passes cushim_trusted_link: 1 yes (or none); 0 one another user could have
 * planted; -1 with errno: ELOOP (a loop, more than 40 links), ENAMETOOLONG (a path or a name too
 * long), or getcwd's or readlink's error (a relative path from a working directory that was
 * removed: ENOENT). A file or directory that does not exist ends the walk (nothing further on can
 * be a link). Thread-safe; a few lstat/readlink calls. */
int cushim_path_links_trusted(const char *path);

/* Why an existing output target (*st, after following a trusted link) is not written: "a file
 * of another user", "not a regular file" (a directory, a socket, ...), or NULL when it may be
 * (a regular file of the user's, a character device, a FIFO). A string literal: static, never
 * freed. */
const char *cushim_output_refusal(const struct stat *st);

/* 1 or 2 when st is the file behind this process's stdout or stderr (what the shims write a
 * report or log to through the descriptor, whatever it is: a pipe, a tty, a socket), else 0.
 * `self`: a descriptor of the caller's that may have taken number 1 or 2, never matched (-1:
 * none). */
int cushim_std_stream(const struct stat *st, int self);

#endif
