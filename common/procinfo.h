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
 * to its segment again; also 0 when /proc is missing or another pid namespace's (a pid namespace
 * that mounted none of its own sees the host's: /proc/<pid> is not our `pid` there). The
 * command line and user ids below are unknown (-1) in that case too; cushim_proc_alive then
 * asks kill(pid, 0). */
uint64_t cushim_proc_start_time(pid_t pid);
/* The calling process's own, from /proc/self (right also in a pid namespace that sees the host's
 * /proc); 0 when unreadable. */
uint64_t cushim_self_start_time(void);

/* The command line of `pid`, arguments joined by single spaces, truncated to len-1 bytes,
 * always NUL-terminated. Returns 0, or -1 (buf = ""). */
int cushim_proc_cmdline(pid_t pid, char *buf, size_t len);
/* The calling process's own, as cushim_proc_cmdline, also when its main thread has ended
 * (pthread_exit from main: /proc/self/cmdline is then empty; the calling thread's is not). */
int cushim_self_cmdline(char *buf, size_t len);

/* The pidfs inode of process `pid` of this pid namespace: since Linux 6.9 (pidfs), a pidfd's
 * inode number is unique to its process for the machine's lifetime (64-bit), the same across
 * exec and in every pid namespace, never reused as pids are. 0 when there is no such process or
 * the kernel has no pidfs. Four system calls. */
uint64_t cushim_proc_pidfs_ino(pid_t pid);

/* The parent of process `pid` of this pid namespace (field 4 of /proc/<pid>/stat); 0 when there
 * is no such process or /proc cannot be read (or is another pid namespace's). */
pid_t cushim_proc_parent(pid_t pid);

/* Whether process `pid` of this pid namespace exists (not a zombie): by /proc/<pid>/stat; where
 * /proc cannot be read (hidden in a sandbox), by kill(pid, 0). 1 or 0. */
int cushim_proc_alive(pid_t pid);

/* Whether process `pid` of this pid namespace is the one that read `start_time` as its own
 * /proc/<pid>/stat field 22 (in its own time namespace, whose boottime offset may differ from
 * this one's: both offsets are taken out, /proc/<pid>/timens_offsets). 1 yes (also when the
 * offsets, or /proc itself, cannot be read and the pid exists: taken as alive); 0 no: no such
 * process, or the pid is another one's. */
int cushim_proc_is(pid_t pid, uint64_t start_time);

/* The user ids of process `pid` of this pid namespace, as this namespace sees them: real,
 * effective, saved and filesystem (the Uid: line of /proc/<pid>/status, proc(5)). 0, or -1 (no
 * such process, or /proc cannot be read). */
int cushim_proc_uids(pid_t pid, uid_t uids[4]);

/* The inode of the initial (host) pid namespace, fixed by the kernel (include/linux/proc_ns.h:
 * PROC_PID_INIT_INO = 0xEFFFFFFC): every other pid namespace descends from it, so a reader there
 * sees every process. */
#define CUSHIM_PIDNS_INIT_INO 0xEFFFFFFCull

/* Inode of /proc/self/ns/pid (pid namespace), 0 if unknown. */
uint64_t cushim_pidns_inode(void);

/* Processes of other pid namespaces as this one's /proc shows them (a container's, seen from the
 * host): one row per process whose namespace could be read. Filled by cushim_pidns_scan. */
struct cushim_pidns_row {
    uint64_t ns;    /* inode of its pid namespace; 0: an inner namespace this user may not read */
    pid_t nspid;    /* its pid there (the last NSpid field of /proc/<pid>/status) */
    pid_t pid;      /* its pid here */
};
struct cushim_pidns_map {
    struct cushim_pidns_row *rows; /* malloc'd; free with cushim_pidns_free */
    size_t count;
};

/* Reads every process of /proc in another pid namespace than this one: that namespace and its
 * pid there. *m is zeroed first (a map it held is not freed). 0 (free m with cushim_pidns_free),
 * or -1 (no /proc, or out of memory: a partial map would call a live process gone): m is then
 * empty (rows NULL, count 0) and needs no free, though freeing it is harmless. */
int cushim_pidns_scan(struct cushim_pidns_map *m);
/* Frees m's rows and zeroes it (empty: freeing it again is harmless). */
void cushim_pidns_free(struct cushim_pidns_map *m);

/* Whether the process that was `nspid` of pid namespace `ns`, started at `start_time` (its
 * /proc/<pid>/stat field 22 as it read it, in its time namespace), is alive, by the map (a
 * process of a namespace it may not read counts only when its pid there and start time match,
 * exactly, and the start time is not 0):
 * 1 yes; 0 no (that namespace has processes here, and none is that one: it ended, or its pid,
 * or the namespace's inode, went to another process since; or, read from the initial pid
 * namespace, which sees every process, that namespace has no process left); -1 cannot tell (no
 * process of that namespace is visible from here: a namespace above this one, or a sibling
 * container's; or a process `nspid` of an inner namespace this user may not read, started then, exists). The
 * start times are compared with both time namespaces' boottime offsets taken out
 * (/proc/<pid>/timens_offsets); a process whose offset cannot be read counts as alive.
 * *here (if not NULL): its pid in this namespace when alive (1), else 0. */
int cushim_pidns_alive(const struct cushim_pidns_map *m, uint64_t ns, pid_t nspid, uint64_t start_time,
                       pid_t *here);

/* The processes of inner pid namespaces this user may not look at (a row with ns 0) that are
 * `nspid` there and started at `start_time` (as cushim_pidns_alive compares them; 0 matches none): the ones a
 * segment of an unreadable namespace may be. Their pids here into pids (at most max); returns how
 * many there are. */
int cushim_pidns_candidates(const struct cushim_pidns_map *m, pid_t nspid, uint64_t start_time, pid_t *pids,
                            int max);

#endif
