#include "common/procinfo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static ssize_t read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < len) {
        ssize_t r = read(fd, buf + n, len - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    return (ssize_t)n;
}

/* read_file into buf as text: at most len-1 bytes, NUL-terminated when anything was read. */
static ssize_t read_text(const char *path, char *buf, size_t len)
{
    ssize_t n = read_file(path, buf, len - 1);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/* Whether /proc is another pid namespace's view than ours: a pid namespace that mounted no /proc
 * of its own (unshare --pid --fork without --mount-proc) sees the host's, where /proc/<pid> is
 * the host's process of that number and /proc/self links to our pid there, not getpid(). Such a
 * /proc says nothing about a pid of ours: it is treated as no /proc (pids are told alive by
 * kill(pid, 0); start times, command lines and users are unknown). Cached per process. */
static int proc_foreign(void)
{
    static _Atomic pid_t for_pid;
    static _Atomic int answer;
    pid_t me = getpid();
    if (atomic_load_explicit(&for_pid, memory_order_acquire) == me)
        return atomic_load_explicit(&answer, memory_order_relaxed);
    char link[32];
    ssize_t n = readlink("/proc/self", link, sizeof link - 1);
    /* No /proc/self (ENOENT): no /proc, or one where we have no pid at all (a container's,
     * entered with nsenter -m): it says nothing about our pids either. A link refused otherwise
     * (a security policy) says nothing against this /proc: it is taken as ours, as before. */
    int foreign = n <= 0 && errno == ENOENT;
    if (n > 0) {
        link[n] = '\0';
        foreign = atoi(link) != (int)me;
    }
    atomic_store_explicit(&answer, foreign, memory_order_relaxed);
    atomic_store_explicit(&for_pid, me, memory_order_release);
    return foreign;
}

/* Whether process pid has a thread besides its main one (/proc/<pid>/task). */
static int other_threads(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *de;
    int others = 0;
    while (d && !others && (de = readdir(d)) != NULL)
        others = de->d_name[0] != '.' && atoi(de->d_name) != (int)pid;
    if (d)
        closedir(d);
    return others;
}

/* Field 22 of the stat file at `path` (process `pid`; 0: the caller itself, which is running
 * whatever its main thread's state). */
static uint64_t start_time_at(const char *path, pid_t pid)
{
    char buf[1024];
    if (read_text(path, buf, sizeof buf) <= 0)
        return 0;
    /* The command (field 2) is in parentheses and may contain anything: skip to the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    /* Field 3, the state: a dead (X) process has ended; a zombie (Z) too, unless only its main
     * thread has ended (pthread_exit in main) and other threads still run. */
    if (pid != 0 && p[0] == ' ' && (p[1] == 'X' || (p[1] == 'Z' && !other_threads(pid))))
        return 0;
    /* Fields 3.. follow; field 22 is the 20th after the ')'. */
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
    }
    if (!p)
        return 0;
    return strtoull(p + 1, NULL, 10);
}

/* The start time of /proc's own process `pid`, whoever's /proc it is (the rows of a pid
 * namespace scan are that /proc's numbering). */
static uint64_t proc_row_start_time(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    return start_time_at(path, pid);
}

uint64_t cushim_proc_start_time(pid_t pid)
{
    return proc_foreign() ? 0 : proc_row_start_time(pid);
}

uint64_t cushim_self_start_time(void)
{
    /* /proc/self, not /proc/<getpid()>: in a pid namespace that mounts no /proc of its own (unshare
     * --pid without --mount-proc), /proc/<our pid> is another process of the host's. */
    return start_time_at("/proc/self/stat", 0);
}

/* The command line in the /proc file `path`, as cushim_proc_cmdline; an empty argv[0] is the
 * kernel's name of the process from the file `comm`, in brackets, as ps(1) shows a process
 * without a command line (an attack trial: ps, top and stat showed an empty command). */
static int cmdline_at(const char *path, const char *comm, char *buf, size_t len)
{
    if (len == 0)
        return -1;
    buf[0] = '\0';
    ssize_t n = read_file(path, buf, len - 1);
    if (n <= 0)
        return -1;
    char name[32] = "";
    if (buf[0] == '\0') {
        ssize_t c = read_file(comm, name + 1, sizeof name - 3);
        c = c > 0 && name[c] == '\n' ? c - 1 : c;
        if (c > 0) {
            name[0] = '[';
            memcpy(name + 1 + c, "]", 2);
        }
    }
    if ((size_t)n == len - 1) {
        /* Cut: not in the middle of a UTF-8 character (its lead byte and the continuation
         * bytes that fit are dropped together). */
        ssize_t k = n;
        while (k > 0 && ((unsigned char)buf[k - 1] & 0xC0) == 0x80)
            k--;
        if (k > 0 && ((unsigned char)buf[k - 1] & 0xC0) == 0xC0) {
            unsigned char lead = (unsigned char)buf[k - 1];
            ssize_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            if (n - (k - 1) < need)
                n = k - 1;
        }
    }
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    size_t p = strlen(name);
    if (p && p < len) { /* "[comm]", then the arguments after their space (cut to fit) */
        size_t keep = (size_t)n < len - 1 - p ? (size_t)n : len - 1 - p;
        while (keep < (size_t)n && keep > 0 && ((unsigned char)buf[keep] & 0xC0) == 0x80)
            keep--; /* cut: not in the middle of a UTF-8 character either (a review) */
        memmove(buf + p, buf, keep);
        memcpy(buf, name, p);
        buf[p + keep] = '\0';
    }
    return 0;
}

int cushim_proc_cmdline(pid_t pid, char *buf, size_t len)
{
    char path[64];
    if (proc_foreign()) {
        if (len)
            buf[0] = '\0';
        return -1;
    }
    char comm[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    snprintf(comm, sizeof comm, "/proc/%d/comm", (int)pid);
    return cmdline_at(path, comm, buf, len);
}

int cushim_self_cmdline(char *buf, size_t len)
{
    /* proc(5): /proc/PID/cmdline is empty once the thread-group leader has ended (its memory
     * description gone, "a zombie"); the calling thread's own entry reads the same memory. */
    if (cmdline_at("/proc/thread-self/cmdline", "/proc/self/comm", buf, len) == 0 && buf[0])
        return 0;
    return cmdline_at("/proc/self/cmdline", "/proc/self/comm", buf, len);
}

uint64_t cushim_pidns_inode(void)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        return (uint64_t)st.st_ino;
#ifdef SYS_pidfd_open
    /* No /proc (hidden in a sandbox): ask pidfs for our pid namespace (PIDFD_GET_PID_NAMESPACE,
     * _IO(PIDFS_IOCTL_MAGIC 0xFF, 5), Linux 6.11+: include/uapi/linux/pidfd.h). */
    uint64_t ino = 0;
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    int ns = fd >= 0 ? ioctl(fd, 0xff05, 0) : -1;
    if (ns >= 0 && fstat(ns, &st) == 0)
        ino = (uint64_t)st.st_ino;
    if (ns >= 0)
        close(ns);
    if (fd >= 0)
        close(fd);
    return ino;
#else
    return 0;
#endif
}

/* The last NSpid field of /proc/<pid>/status: the process's pid in its own namespace; *depth:
 * how many fields (1: a process of this /proc's own namespace). */
static pid_t innermost_pid(const char *pid, int *depth)
{
    char path[300], buf[4096];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    if (read_text(path, buf, sizeof buf) <= 0)
        return 0;
    char *line = strstr(buf, "\nNSpid:");
    if (!line)
        return 0;
    long last = 0;
    *depth = 0;
    for (char *p = line + 7, *end; *p && *p != '\n'; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        last = v;
        ++*depth;
    }
    return (pid_t)last;
}

int cushim_proc_uids(pid_t pid, uid_t uids[4])
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (pid <= 0 || proc_foreign() || read_text(path, buf, sizeof buf) <= 0)
        return -1;
    char *p = strstr(buf, "\nUid:");
    if (!p)
        return -1;
    p += 5;
    for (int i = 0; i < 4; i++) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v > 0xffffffffu)
            return -1;
        uids[i] = (uid_t)v;
        p = end;
    }
    return 0;
}

int cushim_pidns_scan(struct cushim_pidns_map *m)
{
    memset(m, 0, sizeof *m);
    uint64_t mine = cushim_pidns_inode();
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300];
        struct stat st;
        int depth = 0;
        snprintf(path, sizeof path, "/proc/%s/ns/pid", de->d_name);
        int readable = stat(path, &st) == 0;
        if (!readable && errno != EACCES && errno != EPERM)
            continue; /* ended meanwhile */
        if (readable && st.st_ino == mine)
            continue; /* a process of this namespace: most of them, and no container's */
        pid_t nspid = innermost_pid(de->d_name, &depth);
        if (nspid <= 0 || (!readable && depth < 2))
            continue; /* a process of this namespace (status is world-readable): no container's */
        if (!readable)
            st.st_ino = 0; /* a process of some inner namespace we may not look at */
        if (m->count == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            struct cushim_pidns_row *grown = realloc(m->rows, ncap * sizeof *grown);
            if (!grown) { /* a partial map would call a live container process gone */
                closedir(d);
                cushim_pidns_free(m);
                return -1;
            }
            m->rows = grown;
            cap = ncap;
        }
        m->rows[m->count++] = (struct cushim_pidns_row){(uint64_t)st.st_ino, nspid, (pid_t)atoi(de->d_name)};
    }
    closedir(d);
    return 0;
}

void cushim_pidns_free(struct cushim_pidns_map *m)
{
    free(m->rows);
    memset(m, 0, sizeof *m);
}

/* The boottime offset of the time namespace of `who` ("self" or a pid), in ns (*ns): what its
 * /proc/<pid>/stat start times are shifted by (time_namespaces(7); the kernel adds the reader's
 * offset). 0 without time namespaces; -1 when it cannot be read. */
static int boottime_offset_ns(const char *who, int64_t *ns)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%s/timens_offsets", who);
    *ns = 0;
    if (read_text(path, buf, sizeof buf) < 0)
        return errno == ENOENT ? 0 : -1; /* Linux < 5.6: no time namespaces */
    char *line = strstr(buf, "boottime");
    long long sec = 0, nsec = 0;
    if (!line || sscanf(line, "boottime %lld %lld", &sec, &nsec) != 2)
        return -1;
    *ns = (int64_t)sec * 1000000000 + nsec;
    return 0;
}

/* Whether /proc/WHO/A and /proc/WHO/B are links to the same thing; 1 also when either cannot be
 * read (no time namespaces before Linux 5.6; another user's process without ptrace access). */
static int same_link(const char *who, const char *a, const char *b)
{
    char pa[64], pb[64], la[64], lb[64];
    snprintf(pa, sizeof pa, "/proc/%s/%s", who, a);
    snprintf(pb, sizeof pb, "/proc/%s/%s", who, b);
    ssize_t na = readlink(pa, la, sizeof la - 1), nb = readlink(pb, lb, sizeof lb - 1);
    if (na < 0 || nb < 0)
        return 1;
    return na == nb && memcmp(la, lb, (size_t)na) == 0;
}

/* Whether live process pid (here) is the one whose own view of its start was start_time: the
 * start times compared once both time namespaces' offsets are taken out, exactly when the
 * offsets differ by whole clock ticks (the usual whole seconds), else within the tick the
 * rounding may add. 1 also when an offset cannot be read: never judged gone on a guess. */
static int same_process(pid_t pid, uint64_t start_time)
{
    if (start_time == 0)
        return 1; /* the writer could not read its own (no /proc there): the pid is all there is */
    char who[32];
    int64_t theirs, mine;
    snprintf(who, sizeof who, "%d", (int)pid);
    uint64_t here = proc_row_start_time(pid);
    if (here == start_time)
        return 1; /* whatever the offsets say */
    /* timens_offsets are those of the namespace the process's children get (time_namespaces(7)):
     * one that entered a new time namespace itself and has not exec'd lives in another than
     * they say (a review: such a live process judged gone). Then it cannot be told: alive. */
    if (!same_link(who, "ns/time", "ns/time_for_children"))
        return 1;
    if (boottime_offset_ns(who, &theirs) != 0 || boottime_offset_ns("self", &mine) != 0 || here == 0)
        return 1;
    int64_t tick = 1000000000 / sysconf(_SC_CLK_TCK), diff = theirs - mine;
    int64_t d = (int64_t)start_time - (int64_t)here - diff / tick;
    return diff % tick == 0 ? d == 0 : d >= -1 && d <= 1;
}

/* same_process for a process of a pid namespace this user may not read (all a forged segment
 * needs is a pid there and a start time): nothing is taken on trust. A start time of 0 (a writer
 * without /proc), a process gone meanwhile, or offsets that cannot be read (then the start times
 * must be equal) do not match. */
static int same_process_strict(pid_t pid, uint64_t start_time)
{
    uint64_t here = proc_row_start_time(pid);
    if (start_time == 0 || here == 0)
        return 0;
    if (here == start_time)
        return 1;
    char who[32];
    int64_t theirs, mine;
    snprintf(who, sizeof who, "%d", (int)pid);
    if (boottime_offset_ns(who, &theirs) != 0 || boottime_offset_ns("self", &mine) != 0)
        return 0;
    return same_process(pid, start_time);
}

uint64_t cushim_proc_pidfs_ino(pid_t pid)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return 0;
    struct statfs fs;
    struct stat st;
    uint64_t ino = 0;
    /* PID_FS_MAGIC (include/uapi/linux/magic.h); before pidfs, every pidfd shares one anonymous
     * inode, which says nothing. */
    if (fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == 0x50494446ul && fstat(fd, &st) == 0)
        ino = (uint64_t)st.st_ino;
    close(fd);
    return ino;
#else
    (void)pid;
    return 0;
#endif
}

pid_t cushim_proc_parent(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (proc_foreign() || read_text(path, buf, sizeof buf) <= 0)
        return 0;
    /* After the command's closing parenthesis: " S PPID ..." (proc(5): state, then ppid). */
    const char *p = strrchr(buf, ')');
    int ppid = 0;
    if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid < 0)
        return 0;
    return (pid_t)ppid;
}

int cushim_proc_alive(pid_t pid)
{
    if (cushim_proc_start_time(pid) != 0)
        return 1;
    /* No /proc to look in (hidden in a sandbox's mount namespace), or another pid namespace's:
     * only whether the pid exists can be told (EPERM: it does, another user's). */
    if (access("/proc/self/stat", R_OK) != 0 || proc_foreign())
        return kill(pid, 0) == 0 || errno == EPERM;
    return 0; /* no such process, or only its zombie */
}

int cushim_proc_is(pid_t pid, uint64_t start_time)
{
    uint64_t here = cushim_proc_start_time(pid);
    if (here == 0 || start_time == 0) /* no /proc here, or none where it was read */
        return cushim_proc_alive(pid); /* taken as the same process while its pid lives */
    return here == start_time || same_process(pid, start_time);
}

int cushim_pidns_candidates(const struct cushim_pidns_map *m, pid_t nspid, uint64_t start_time, pid_t *pids,
                            int max)
{
    int n = 0;
    for (size_t i = 0; i < m->count; i++)
        if (m->rows[i].ns == 0 && m->rows[i].nspid == nspid && same_process_strict(m->rows[i].pid, start_time)) {
            if (n < max)
                pids[n] = m->rows[i].pid;
            n++;
        }
    return n;
}

int cushim_pidns_alive(const struct cushim_pidns_map *m, uint64_t ns, pid_t nspid, uint64_t start_time,
                       pid_t *here)
{
    int seen = 0, maybe = 0;
    if (here)
        *here = 0;
    for (size_t i = 0; i < m->count; i++) {
        if (m->rows[i].ns == 0 && m->rows[i].nspid == nspid && same_process_strict(m->rows[i].pid, start_time))
            maybe = 1; /* in a namespace we may not look at: it could be this one */
        if (m->rows[i].ns != ns)
            continue;
        if (m->rows[i].nspid == nspid) {
            if (!same_process(m->rows[i].pid, start_time))
                return 0;
            if (here)
                *here = m->rows[i].pid;
            return 1;
        }
        seen = 1;
    }
    /* No process of that namespace in sight: it has ended, when this is the initial pid
     * namespace (the host's), where every pid namespace's processes are visible; from anywhere
     * else it may be one we cannot see (a sibling container's, or one above). */
    if (!seen && !maybe && cushim_pidns_inode() == CUSHIM_PIDNS_INIT_INO)
        return 0;
    return seen && !maybe ? 0 : -1;
}
