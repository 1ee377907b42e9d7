/* Facts about a process read from /proc, shared by the shim (segment header) and the CLI
 * (staleness checks). All functions are thread-safe and report failure rather than guessing. */
#ifndef CUSHIM_PROCINFO_H
#define CUSHIM_PROCINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time of `pid` (field 22 of /proc/<pid>/stat: clock ticks after boot). 0 when there is
 * no running process `pid`: none, unreadable, or one that has ended and waits to be reaped
 * (state X, or Z with no thread left besides the main one: proc(5)), since it will never write
 * to its segment again. */
uint64_t cushim_proc_start_time(pid_t pid);

/* The command line of `pid`, arguments joined by single spaces, truncated to len-1 bytes,
 * always NUL-terminated. Returns 0, or -1 (buf = ""). */
int cushim_proc_cmdline(pid_t pid, char *buf, size_t len);

/* Inode of /proc/self/ns/pid (pid namespace), 0 if unknown. */
uint64_t cushim_pidns_inode(void);

#endif
