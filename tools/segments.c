/* Finding and reading segments. Every byte of a segment is untrusted (another user's file when
 * root reads, a crafted or truncated file): files are opened without following links, checked to
 * be regular files, mapped read-only at their real size, and copied by cushim_snapshot_read. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/procinfo.h"
#include "tools/cli.h"

static _Thread_local sigjmp_buf *bus_jump;

static void on_sigbus(int sig)
{
    (void)sig;
    if (bus_jump)
        siglongjmp(*bus_jump, 1);
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

/* A segment truncated while mapped faults (SIGBUS) on access: caught around each access. */
static void catch_sigbus(void)
{
    static int installed;
    if (!installed) {
        struct sigaction sa = {0};
        sa.sa_handler = on_sigbus;
        sigaction(SIGBUS, &sa, NULL);
        installed = 1;
    }
}

int cli_config_reported;

static void report_segment_dir(const struct cushim_config_error *e)
{
    if (!cli_config_reported && e->option == CUSHIM_OPT_SEGMENT_DIR)
        fprintf(stderr, "%s\n", e->line);
}

const char *seg_dir(void)
{
    static struct cushim_config cfg;
    static int loaded;
    if (!loaded) {
        cushim_config_load(&cfg, (const char *(*)(const char *))getenv, NULL, report_segment_dir);
        loaded = 1;
    }
    return cfg.segment_dir[0] ? cfg.segment_dir : "/dev/shm";
}

static void refuse_segment_dir(const struct cushim_config_error *e)
{
    if (e->option == CUSHIM_OPT_SEGMENT_DIR)
        cli_error("CUSHIM_SEGMENT_DIR=%s is not %s", e->shown, e->expected);
}

int cli_segment_dir_check(void)
{
    struct cushim_config cfg;
    const char *v = getenv("CUSHIM_SEGMENT_DIR");
    cushim_config_load(&cfg, (const char *(*)(const char *))getenv, NULL, refuse_segment_dir);
    if (v && *v && strcmp(cfg.segment_dir, v) != 0)
        return -1;
    DIR *d = opendir(seg_dir());
    if (!d) {
        cli_error("cannot open the segment directory \"%s\"%s: %s", seg_dir(),
                  v && *v ? " (CUSHIM_SEGMENT_DIR)" : "", strerror(errno));
        return -1;
    }
    closedir(d);
    /* Listed but not entered (no search permission): no segment in it could be read, and an
     * answer of "no process" (a Prometheus file rewritten with no samples) would be false. */
    if (access(seg_dir(), X_OK) != 0) {
        cli_error("cannot enter the segment directory \"%s\"%s: %s", seg_dir(),
                  v && *v ? " (CUSHIM_SEGMENT_DIR)" : "", strerror(errno));
        return -1;
    }
    return 0;
}

/* Maps an open file at its size and snapshots it, surviving a concurrent truncation; a busy
 * record is waited for up to patience_ns (cushim_snapshot_read). */
static int snapshot_fd(int fd, struct cushim_snapshot *out, char *err, size_t errlen, uint64_t patience_ns)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        return -1;
    }
    if (st.st_size == 0)
        return cushim_snapshot_read(NULL, 0, out, 0, 0, err, errlen);
    size_t len = (size_t)st.st_size;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "cannot map: %s", strerror(errno));
        return -1;
    }
    catch_sigbus();
    sigjmp_buf jb;
    int rc;
    if (sigsetjmp(jb, 1) == 0) {
        bus_jump = &jb;
        rc = cushim_snapshot_read(m, len, out, 1000, patience_ns, err, errlen);
    } else {
        snprintf(err, errlen, "truncated while being read");
        rc = -1;
    }
    bus_jump = NULL;
    munmap(m, len);
    return rc;
}

/* How long one scan (or one lookup) may wait, over all its segments, for records a live writer
 * keeps busy. Every reader waits only for live processes, and this caps what a user's own
 * crafted segments of a live process of theirs can cost another reader (root's exporter). */
#define SCAN_PATIENCE_NS 500000000ull
static uint64_t patience_left;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A torn copy of a live process's segment read again, waiting for its writers (out of the
 * scan's patience); the new copy replaces *out when it could be made. */
static void settle_live(int fd, struct cushim_snapshot *out)
{
    static struct cushim_snapshot again;
    char err[160];
    if (!out->torn || patience_left == 0)
        return;
    uint64_t t0 = now_ns();
    uint64_t wait = patience_left < CUSHIM_COPY_PATIENCE_NS ? patience_left : CUSHIM_COPY_PATIENCE_NS;
    if (snapshot_fd(fd, &again, err, sizeof err, wait) == 0)
        memcpy(out, &again, sizeof again);
    uint64_t spent = now_ns() - t0;
    patience_left = spent < patience_left ? patience_left - spent : 0;
}

int seg_read_file(const char *path, struct cushim_snapshot *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    int rc = snapshot_fd(fd, out, err, errlen, 0); /* a summary: its writers are done */
    close(fd);
    return rc;
}

/* Digits only, at most 10 of them, up to max; returns the end or NULL. */
static const char *number(const char *s, unsigned long long max, unsigned long long *out)
{
    const char *p = s;
    unsigned long long v = 0;
    while (*p >= '0' && *p <= '9' && p - s < 10)
        v = v * 10 + (unsigned)(*p++ - '0');
    if (p == s || v > max)
        return NULL;
    *out = v;
    return p;
}

/* "cushim-<uid>-<pid>" (decimal digits only) -> uid, pid. */
static int parse_name(const char *name, uid_t *uid, pid_t *pid)
{
    unsigned long long u, p;
    const char *s = name;
    if (strncmp(s, CUSHIM_SEGMENT_PREFIX, strlen(CUSHIM_SEGMENT_PREFIX)) != 0)
        return -1;
    s += strlen(CUSHIM_SEGMENT_PREFIX);
    if (!(s = number(s, 0xffffffffull, &u)) || *s++ != '-' || !(s = number(s, 0x7fffffff, &p)) || p == 0)
        return -1;
    /* cushim-UID-PID, or cushim-UID-PID.XXXXXX when the plain name was taken (segment_file.c). */
    if (*s == '.') {
        size_t n = strspn(s + 1, "abcdefghijklmnopqrstuvwxyz0123456789");
        if (n != 6 || s[7] != '\0')
            return -1;
    } else if (*s) {
        return -1;
    }
    *uid = (uid_t)u;
    *pid = (pid_t)p;
    return 0;
}

/* A segment its process is creating right now: no magic yet (the shim writes it last, after
 * the rest of the header: shim/segment_file.c), in a file modified in the last 10 s. An older one
 * without magic is reported as bad (and `cushim gc` may remove it once its process is gone). */
static int being_created(int fd, const struct stat *st)
{
    char magic[8] = {0};
    static const char none[8];
    ssize_t got = pread(fd, magic, sizeof magic, 0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    /* Not for a file stamped in the future (a clock stepped back, a touch -d): it would never age. */
    return got >= 0 && memcmp(magic, none, sizeof none) == 0 && st->st_mtim.tv_sec <= now.tv_sec &&
           now.tv_sec - st->st_mtim.tv_sec < 10;
}

static int scan_others; /* seg_scan_others */

int seg_scan_others(void)
{
    return scan_others;
}

/* Whether this process reads every user's segments: root, or an exporter given only
 * CAP_DAC_READ_SEARCH (capabilities(7): "bypass file read permission checks"), e.g. `cushim
 * serve` run as its own user with AmbientCapabilities=CAP_DAC_READ_SEARCH. */
static int reads_everyones(void)
{
    if (geteuid() == 0)
        return 1;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return 0;
    return (d[CAP_TO_INDEX(CAP_DAC_READ_SEARCH)].effective & CAP_TO_MASK(CAP_DAC_READ_SEARCH)) != 0;
}

/* The processes of other pid namespaces, read once per scan and only when a segment needs it. */
static struct cushim_pidns_map ns_map;
static int ns_map_read;

/* Whether ns_map holds this scan's look at the other pid namespaces' processes, reading it the
 * first time it is asked for (seg_scan and seg_still_stale drop it for a fresh look). */
static int ns_map_ready(void)
{
    if (!ns_map_read)
        ns_map_read = cushim_pidns_scan(&ns_map) == 0;
    return ns_map_read;
}

int seg_other_namespace(const struct cushim_snapshot *s)
{
    static uint64_t mine;
    if (!mine)
        mine = cushim_pidns_inode(); /* this program's: it does not change */
    return s->pidns_inode && mine && s->pidns_inode != mine;
}

/* Whether s's process is gone; *here: its pid in this namespace (0 when not visible). A
 * finished segment (exited: an image before an exec, left for its run) is not live either. */
static int is_stale(const struct cushim_snapshot *s, pid_t *here)
{
    *here = s->pid;
    if (s->exited)
        return 1;
    if (seg_other_namespace(s)) {
        /* A container's process (the directory is shared): its pid is that namespace's. Gone
         * only when the namespace is in sight and holds no such process; when it cannot be
         * told (a namespace above ours, a sibling's), the segment is taken as live and never
         * removed. */
        *here = 0;
        return ns_map_ready() && cushim_pidns_alive(&ns_map, s->pidns_inode, s->pid, s->start_time, here) == 0;
    }
    /* Gone, or its pid is another process's now: by its pidfs inode where both the writer's kernel
     * and ours have one (exact, even for a pid reused within a clock tick); else by its start
     * time, both time namespaces' boottime offsets taken out (a process of ours in its own time
     * namespace is still live). */
    if (!cushim_proc_alive(s->pid))
        return 1; /* no such process (or only its zombie) */
    uint64_t ino = s->pidfs_ino ? cushim_proc_pidfs_ino(s->pid) : 0;
    if (ino)
        return ino != s->pidfs_ino;
    return !cushim_proc_is(s->pid, s->start_time);
}

/* Whether a live segment's file is its process's: made by one of the process's user ids (real,
 * effective, saved, filesystem: a server may drop privileges after its segment was made), or by
 * root. Another user can make a file of the right name and header for any process (the pid and
 * start time are in /proc for all to read), so without this a forged segment would show a
 * process's memory as anything, or take root's `reset-peak` and `phase`. `here`: the process's
 * pid here (0: not visible, so not checked); the file owner and /proc are both this user
 * namespace's view. On a mismatch, the reason in why. */
static int owner_runs_it(const struct stat *st, pid_t here, char *why, size_t len)
{
    uid_t uids[4];
    /* Root's files, and the reader's own (which no other user can make: all a reader without
     * root sees; also where no /proc can be read, as in a sandbox), are taken as they are. */
    if (here <= 0 || st->st_uid == 0 || st->st_uid == geteuid())
        return 1;
    if (cushim_proc_uids(here, uids) != 0) {
        /* Ended since it was found live, or hidden: not believed on a guess (the next look
         * finds it gone). */
        snprintf(why, len, "made by uid %u, and the user of process %d cannot be read: not believed",
                 (unsigned)st->st_uid, (int)here);
        return 0;
    }
    for (int i = 0; i < 4; i++)
        if (uids[i] == st->st_uid)
            return 1;
    snprintf(why, len, "made by uid %u, but process %d runs as uid %u: not its segment (another user's file)",
             (unsigned)st->st_uid, (int)here, (unsigned)uids[0]);
    return 0;
}

/* Whether live segment s (file st) is believed: owner_runs_it of its process (here: its pid here,
 * is_stale's); for one of a pid namespace whose processes this user may not tell apart (here 0:
 * an exporter with CAP_DAC_READ_SEARCH cannot read another user's /proc/PID/ns/pid), the
 * processes that may be it (its pid there and its start time, cushim_pidns_candidates), one of
 * which must be run by the file's owner; none visible (a sibling namespace's): believed. */
static int believed(const struct stat *st, const struct cushim_snapshot *s, pid_t here, char *why, size_t len)
{
    if (here)
        return owner_runs_it(st, here, why, len);
    static pid_t pids[4096];
    int max = (int)(sizeof pids / sizeof pids[0]);
    int n = ns_map_read && seg_other_namespace(s) ? cushim_pidns_candidates(&ns_map, s->pid, s->start_time, pids, max) : 0;
    if (n == 0)
        return 1;
    char one[200] = "";
    for (int i = 0; i < n && i < max; i++)
        if (owner_runs_it(st, pids[i], one, sizeof one))
            return 1;
    snprintf(why, len, "made by uid %u, but no process of that uid is pid %d of a pid namespace here with its "
             "start time: not its segment (another user's file)", (unsigned)st->st_uid, (int)s->pid);
    return 0;
}

/* Whether live segment s, read from file st, is a copy its process does not write (found by an
 * attack trial: a segment copied back over its removed original read as live, frozen, and took
 * reset-peak and phase requests its process never saw): another file than the one its writer
 * made: its inode number. Not its device number, which one file shows differently through an
 * overlay and through the overlay's upper directory (found by an attack trial: a false copy).
 * Judged in the writer's pid namespace only (a container's file seen from the host through
 * another mount may show other numbers); not for a writer that did not record its file. */
int seg_file_is_copy(const struct cushim_snapshot *s, ino_t ino)
{
    return s->file_ino && !seg_other_namespace(s) && s->file_ino != (uint64_t)ino;
}

static int a_copy(const struct stat *st, const struct cushim_snapshot *s, char *why, size_t len)
{
    if (!seg_file_is_copy(s, st->st_ino))
        return 0;
    snprintf(why, len, "a copy of process %d's segment (the process maps another)", (int)s->pid);
    return 1;
}

int seg_still_stale(const struct seg_entry *e)
{
    static struct cushim_snapshot now;
    struct stat st;
    char err[160];
    if (!e->ok || lstat(e->path, &st) != 0 || st.st_ino != e->ino)
        return 0;
    int fd = open(e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int same = fd >= 0 && snapshot_fd(fd, &now, err, sizeof err, 0) == 0 && now.created_ns == e->snap.created_ns &&
               now.pid == e->snap.pid && now.start_time == e->snap.start_time;
    if (fd >= 0)
        close(fd);
    if (!same)
        return 0;
    cushim_pidns_free(&ns_map); /* a fresh look: a process may have started since the scan */
    ns_map_read = 0;
    pid_t here;
    return is_stale(&now, &here);
}

int seg_names(const struct cushim_snapshot *s, pid_t p)
{
    if (!s->other_pidns)
        return s->pid == p ? 2 : 0;
    if (s->host_pid == p)
        return 2;
    return s->pid == p ? 1 : 0;
}

/* Whether e may be one of the processes named by pids (seg_names; an unreadable segment by the
 * pid in its name). */
static int wanted(const struct seg_entry *e, const pid_t *pids, int npids)
{
    for (int i = 0; i < npids; i++)
        if (e->ok ? seg_names(&e->snap, pids[i]) != 0 : pids[i] == e->pid)
            return 1;
    return 0;
}

void seg_say_ambiguous(pid_t pid, const struct cushim_snapshot *const *c, int n)
{
    char list[600] = "";
    int visible = 0;
    for (int i = 0; i < n; i++) {
        size_t o = strlen(list);
        char here[32] = "not visible here";
        if (c[i]->host_pid)
            snprintf(here, sizeof here, "pid here %d", (int)c[i]->host_pid);
        visible |= c[i]->host_pid != 0;
        snprintf(list + o, sizeof list - o, "%spid namespace %llu (%s)", o ? ", " : "",
                 (unsigned long long)c[i]->pidns_inode, here);
    }
    cli_error("pid %d names %d processes of other pid namespaces (%s): %s", (int)pid, n, list,
              visible ? "name one by its pid here"
                      : "none is visible from this pid namespace; run the command where one is (the host, "
                        "or that process's container)");
}

int seg_invalid_removable(const struct seg_entry *e)
{
    /* Any size (a file grown past a segment's, a sparse one), and a symbolic link itself (unlink
     * never follows it): a name of the segment directory for a process that is gone. Not one
     * whose header, with our magic (another cushim version's layout, say), names another pid
     * namespace: its pid is that namespace's, whose processes are not judged here (found by an
     * attack trial: a live container process's segment removed). The header's front keeps its
     * place across layout versions (segment.h: fields are added in its padding). */
    struct stat st;
    if (lstat(e->path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
        return 0;
    struct cushim_segment_header h;
    int fd = S_ISREG(st.st_mode) ? open(e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
    /* A regular file this gc cannot read is judged on nothing (root in a user namespace, or
     * without CAP_DAC_OVERRIDE: a review saw another user's live segment removed as junk). */
    if (S_ISREG(st.st_mode) && fd < 0)
        return 0;
    int ours = fd >= 0 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
               memcmp(h.magic, CUSHIM_SEGMENT_MAGIC, sizeof h.magic) == 0;
    uint64_t here = cushim_pidns_inode();
    if (fd >= 0)
        close(fd);
    /* A file without our magic whose owner is not the uid its name gives, 10 minutes old (a
     * segment has its header within moments of its creation): no shim made it, whatever its pid (a
     * multi-user trial: such look-alikes kept root's cron speaking). Never one with our magic: a
     * process in a user namespace names its segment after its uid there (cushim-0-PID for a
     * rootless container's root), which the host sees owned by another (a trial: a live one was
     * removed). */
    const char *base = strrchr(e->path, '/');
    uid_t named;
    pid_t pid;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uid_t uids[4];
    if (!ours && parse_name(base ? base + 1 : e->path, &named, &pid) == 0 && st.st_uid != named &&
        st.st_mtim.tv_sec <= now.tv_sec - 600 &&
        /* Nor one its live namesake here could be making (its uids include the owner: a process
         * of a user namespace stopped while it made its file; a review). */
        !(cushim_proc_uids(pid, uids) == 0 &&
          (uids[0] == st.st_uid || uids[1] == st.st_uid || uids[2] == st.st_uid || uids[3] == st.st_uid)))
        return SEG_RM_NOT_OURS;
    if (cushim_proc_alive(e->pid))
        return 0;
    /* A dead process's segment that its `cushim run`, still going, collects at its end (as for a
     * readable one: seg_collecting_run): one this reader cannot believe (a rootless container's
     * in this pid namespace, named for uid 0) is still that run's (a review: its report lost it). */
    if (ours && (h.pidns_inode == 0 || h.pidns_inode == here) && h.run_pid > 0 &&
        cushim_proc_is(h.run_pid, h.run_start_time))
        return 0;
    if (ours && h.pidns_inode && h.pidns_inode != here)
        return 0;
    /* A file that does not say its pid namespace (no header, or a writer before that field) is
     * judged by a reader in the initial one only, which sees every process: inside a container
     * sharing the directory with the host, the pid may be a live host process's (an attack
     * trial: a container's gc removed files named after live host pids). */
    if (ours && h.pidns_inode == here)
        return SEG_RM_DEAD;
    /* From the initial one, a regular file without a header must also be 10 minutes old: the
     * pid in its name may be a container's whose process stopped while it made its file (named
     * first, header last, where O_TMPFILE is missing; a review). */
    if (here != CUSHIM_PIDNS_INIT_INO || (!ours && S_ISREG(st.st_mode) && st.st_mtim.tv_sec > now.tv_sec - 600))
        return 0;
    return SEG_RM_DEAD;
}

pid_t seg_collecting_run(const struct cushim_snapshot *s)
{
    if (s->run_pid <= 0)
        return 0;
    if (!seg_other_namespace(s))
        return cushim_proc_is(s->run_pid, s->run_start_time) ? s->run_pid : 0;
    /* A container's process: its run is of its namespace (a trial: the host's gc removed a killed
     * container process's segment while its run went on, and the run lost it). */
    pid_t here = 0;
    return ns_map_ready() && cushim_pidns_alive(&ns_map, s->pidns_inode, s->run_pid, s->run_start_time, &here) == 1
               ? here
               : 0;
}

enum seg_left seg_left_of(const struct cushim_snapshot *s, ino_t ino)
{
    return seg_file_is_copy(s, ino) ? SEG_LEFT_COPY : s->exited ? SEG_LEFT_EXITED : SEG_LEFT_STALE;
}

void seg_gone_words(pid_t pid, const char *path, enum seg_left left, pid_t run, char *out, size_t len)
{
    char what[1400];
    snprintf(what, sizeof what, left == SEG_LEFT_COPY     ? "a copy of its segment, %s"
                                : left == SEG_LEFT_EXITED ? "its segment %s, left with its exit report"
                                                          : "stale segment %s", path);
    /* A run leaves copies (run_collect.c): gc removes them once it has ended. */
    if (run > 0 && left == SEG_LEFT_COPY)
        snprintf(out, len, "process %d is gone (%s; `cushim gc` removes it once its `cushim run`, pid %d, has "
                 "ended)", (int)pid, what, (int)run);
    else if (run > 0)
        snprintf(out, len, "process %d is gone (%s; its `cushim run`, pid %d, reports it and removes it when it "
                 "ends)", (int)pid, what, (int)run);
    else
        snprintf(out, len, "process %d is gone (%s; `cushim gc` removes it)", (int)pid, what);
}

/* An invalid entry's reason says what to do about it when `cushim gc` would remove it. */
static void say_removable(struct seg_entry *e)
{
    size_t n = strlen(e->err);
    int rm = seg_invalid_removable(e);
    if (rm == SEG_RM_NOT_OURS)
        snprintf(e->err + n, sizeof e->err - n, "; its owner is not the uid its name gives, so no cushim made it: "
                 "`cushim gc` removes it");
    else if (rm)
        snprintf(e->err + n, sizeof e->err - n, "; its process is gone: `cushim gc` removes it");
}

/* qsort order of segment names: by pid, then by the whole name. */
static int by_pid(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    uid_t ux, uy;
    pid_t px = 0, py = 0;
    parse_name(x, &ux, &px);
    parse_name(y, &uy, &py);
    return px != py ? (px < py ? -1 : 1) : strcmp(x, y);
}

int seg_scan(const pid_t *pids, int npids, int (*fn)(struct seg_entry *, void *), void *arg)
{
    cushim_pidns_free(&ns_map); /* processes come and go between scans (top, serve) */
    ns_map_read = 0;
    patience_left = SCAN_PATIENCE_NS;
    DIR *d = opendir(seg_dir());
    struct dirent *de;
    int visited = 0;
    uid_t me = geteuid();
    int everyone = reads_everyones();
    static struct seg_entry e;
    scan_others = 0;
    if (!d || access(seg_dir(), X_OK) != 0) {
        /* Listed but not entered (no search permission): every file would vanish silently. */
        cli_error("cannot %s the segment directory \"%s\": %s", d ? "enter" : "open", seg_dir(), strerror(errno));
        if (d)
            closedir(d);
        return -1;
    }
    /* In pid order (a name's uid then, the name last), as ps lists processes: the directory's
     * own order is its hash's. */
    size_t count = 0, cap = 0;
    char **names = NULL;
    while ((de = readdir(d)) != NULL) {
        uid_t uid;
        pid_t pid;
        if (parse_name(de->d_name, &uid, &pid) != 0)
            continue;
        if (count == cap) {
            char **more = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!more)
                break;
            names = more;
        }
        if (!(names[count] = strdup(de->d_name)))
            break;
        count++;
    }
    if (count) /* names is NULL when there is none */
        qsort(names, count, sizeof *names, by_pid);
    for (size_t k = 0; k < count; k++) {
        const char *name = names[k];
        uid_t uid;
        pid_t pid;
        parse_name(name, &uid, &pid);
        memset(&e, 0, sizeof e);
        snprintf(e.path, sizeof e.path, "%s/%s", seg_dir(), name);
        e.pid = pid;
        int fd = open(e.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            int err = errno;
            if (fd >= 0)
                close(fd);
            /* The caller's own file (any as root) that cannot be read is said (a link someone put
             * there, a file made unreadable); another user's is not ours to see. */
            if (lstat(e.path, &st) != 0)
                continue;
            if (!everyone && st.st_uid != me) {
                scan_others++;
                continue;
            }
            e.uid = st.st_uid;
            e.ino = st.st_ino;
            e.dev = st.st_dev;
            /* A socket cannot be opened (ENXIO): said as what it is, as a FIFO is (snapshot_fd). */
            snprintf(e.err, sizeof e.err, "%s", S_ISLNK(st.st_mode) ? "a symbolic link, not followed"
                                                : !S_ISREG(st.st_mode) ? "not a regular file"
                                                                       : strerror(err));
            if (npids > 0 && !wanted(&e, pids, npids))
                continue;
            visited++;
            if (fn(&e, arg))
                break;
            continue;
        }
        e.uid = st.st_uid;
        e.ino = st.st_ino;
        e.dev = st.st_dev;
        if (!everyone && st.st_uid != me) {
            close(fd);
            scan_others++;
            continue;
        }
        if (being_created(fd, &st)) {
            close(fd); /* a process starting right now: not a bad segment, just not one yet */
            continue;
        }
        if (snapshot_fd(fd, &e.snap, e.err, sizeof e.err, 0) == 0) {
            /* A container with its own user namespace writes its own uids (0 inside is some
             * other uid here): for another pid namespace's segment, the name and the header
             * agree with each other, the file's owner is the host's view. */
            uid_t owner = seg_other_namespace(&e.snap) ? (uid_t)e.snap.uid : st.st_uid;
            if (e.snap.pid != pid || e.snap.uid != (uint32_t)owner || uid != owner) {
                /* What disagrees: a name and header that agree with each other but not with the
                 * file's owner say the owner (a copy made by another user). */
                if (e.snap.pid == pid && e.snap.uid == uid)
                    snprintf(e.err, sizeof e.err, "header and name say uid %u, the file is owned by uid %u",
                             (unsigned)uid, (unsigned)owner);
                else
                    snprintf(e.err, sizeof e.err, "header names pid %d uid %u, file is %s owned by uid %u",
                             (int)e.snap.pid, e.snap.uid, name, (unsigned)owner);
            } else {
                pid_t here;
                e.stale = is_stale(&e.snap, &here);
                e.ok = e.stale || believed(&st, &e.snap, here, e.err, sizeof e.err);
                /* A stale one's too: a copy says nothing of how its process ended. */
                e.copy = e.ok && (e.stale ? seg_file_is_copy(&e.snap, st.st_ino)
                                          : a_copy(&st, &e.snap, e.err, sizeof e.err));
                if (e.ok && !e.stale)
                    settle_live(fd, &e.snap); /* a writer may be in the middle of an update */
                e.snap.other_pidns = seg_other_namespace(&e.snap);
                e.snap.host_pid = here;
            }
        }
        close(fd);
        if (npids > 0 && !wanted(&e, pids, npids))
            continue;
        if (!e.ok)
            say_removable(&e);
        visited++;
        if (fn(&e, arg))
            break;
    }
    for (size_t k = 0; k < count; k++)
        free(names[k]);
    free(names);
    closedir(d);
    return visited;
}

/* What is said of a segment whose process has not written its header yet (being_created). */
#define STARTING "process %d is starting: its segment %s has no header yet (try again in a moment)"
/* ... and of one whose process is gone before writing it. */
#define NEVER_STARTED "no process %d: its segment %s has no header (`cushim gc` removes it once it is 10 minutes old)"

/* Maps the segment at `path` read-write if it is a live segment of process `pid` the caller
 * may write; else NULL with the reason in why. */
static struct cushim_segment *map_one(const char *path, pid_t pid, char *why, size_t len)
{
    char err[160];
    struct stat st;
    struct cushim_snapshot *snap = calloc(1, sizeof *snap);
    struct cushim_segment *s = NULL;
    pid_t here;
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int open_errno = errno;
    if (fd < 0 && open_errno == EACCES && lstat(path, &st) == 0 && st.st_uid != geteuid())
        /* Read it may (CAP_DAC_READ_SEARCH found it), change it not. */
        snprintf(why, len, "no cushim process %d of yours: its segment %s is uid %ld's (only that user or root "
                 "may change it)", (int)pid, path, (long)st.st_uid);
    else if (!snap || fd < 0)
        snprintf(why, len, "cannot open %s: %s", path,
                 !snap ? strerror(ENOMEM) : open_errno == ELOOP ? "a symbolic link, not followed" : strerror(open_errno));
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (geteuid() != 0 && st.st_uid != geteuid()))
        snprintf(why, len, "%s is not a segment of yours (not a regular file you own)", path);
    else if (being_created(fd, &st))
        snprintf(why, len, cushim_proc_alive(pid) ? STARTING : NEVER_STARTED, (int)pid, path);
    else if (snapshot_fd(fd, snap, err, sizeof err, 0) != 0)
        snprintf(why, len, "segment %s: %s", path, err);
    else if (snap->pid != pid)
        snprintf(why, len, "segment %s names pid %d, not %d: not a segment of process %d", path,
                 (int)snap->pid, (int)pid, (int)pid);
    else if (is_stale(snap, &here))
        seg_gone_words(pid, path, seg_left_of(snap, st.st_ino), seg_collecting_run(snap), why, len);
    else if (!believed(&st, snap, here, err, sizeof err) || a_copy(&st, snap, err, sizeof err))
        snprintf(why, len, "segment %s: %s", path, err);
    else {
        void *m = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            snprintf(why, len, "cannot map %s: %s", path, strerror(errno));
        else
            s = m;
    }
    if (fd >= 0)
        close(fd);
    free(snap);
    return s;
}

/* Whether process `child` of this pid namespace descends from `ancestor` (its parents, at most
 * 64 up). */
static int descends_from(pid_t child, pid_t ancestor)
{
    for (int i = 0; i < 64 && child > 1; i++)
        if ((child = cushim_proc_parent(child)) == ancestor)
            return 1;
    return 0;
}

/* The live processes with a segment that descend from `pid`, for a message: how many, and the
 * first few pids here, in pid order. */
struct under {
    pid_t pid;
    int n;
    pid_t pids[4];
};

static int gather_under(struct seg_entry *e, void *arg)
{
    struct under *u = arg;
    pid_t here = seg_other_namespace(&e->snap) ? e->snap.host_pid : e->pid;
    if (e->ok && !e->stale && !e->copy && here > 0 && descends_from(here, u->pid)) {
        if (u->n < 4)
            u->pids[u->n] = here;
        u->n++;
    }
    return 0;
}

/* Whether live process `pid` runs `cushim run` (its first word's file name, then "run"). */
static int is_cushim_run(pid_t pid)
{
    char cmd[256];
    if (cushim_proc_cmdline(pid, cmd, sizeof cmd) != 0)
        return 0;
    char *space = strchr(cmd, ' ');
    if (!space)
        return 0;
    *space = '\0';
    const char *base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    return strcmp(base, "cushim") == 0 && strncmp(space + 1, "run", 3) == 0 &&
           (space[4] == '\0' || space[4] == ' ');
}

/* A live pid with no segment that is a `cushim run`, or whose descendants have segments (a
 * launcher: sh -c, torchrun, a run around a run): says which pids to give, and returns 1; else
 * 0. Pointing stat at the run or the launcher is a common slip. */
static int say_processes_under(pid_t pid)
{
    struct under u = {pid, 0, {0}};
    int run = is_cushim_run(pid);
    /* This namespace's init, when it is this command's ancestor, has every process under it: no
     * launcher (a fresh-user trial: `cushim phase 1 run` was pointed at some pid). Other
     * ancestors keep the hint: a job script's `cushim phase $$ run` after `train &`, or a shell's
     * (a review). A container's pid 1 seen from `docker exec` (no ancestor of it) is its
     * launcher, and keeps it too. */
    if (!run && pid == 1 && descends_from(getpid(), pid))
        return 0;
    seg_scan(NULL, 0, gather_under, &u);
    const char *what = run ? "it is a `cushim run`" : "it has no segment of its own";
    if (!u.n) {
        if (!run)
            return 0;
        cli_error("no cushim process %d: it is a `cushim run`, and no process under it has made a CUDA call "
                  "yet", (int)pid);
        return 1;
    }
    if (u.n == 1) {
        cli_error("no cushim process %d: %s; the process under it that uses CUDA is pid %d (give that pid)",
                  (int)pid, what, (int)u.pids[0]);
        return 1;
    }
    char list[96] = "";
    for (int i = 0; i < u.n && i < 4; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%d", i ? ", " : "", (int)u.pids[i]);
    }
    cli_error("no cushim process %d: %s; the processes under it that use CUDA are pids %s%s (give one of "
              "them)", (int)pid, what, list, u.n > 4 ? " and others" : "");
    return 1;
}

/* Where a live process keeps its segment when it is not in this segment directory (another
 * CUSHIM_SEGMENT_DIR): a shared mapping of /proc/<pid>/maps (readable for the process's own user
 * and root) in a directory holding a file named for the process (cushim-<uid>-<pid>[.xxxxxx])
 * with the mapping's inode. The maps name may be the unnamed file it was made as ("#ino
 * (deleted)": made with O_TMPFILE, then linked), so the directory is searched. 1 with the file's
 * path in out, else 0. */
static int segment_elsewhere(pid_t pid, char *out, size_t len)
{
    char path[64], line[1600];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char perms[8];
        unsigned long long ino;
        char *file = strchr(line, '/');
        if (!file || sscanf(line, "%*s %7s %*s %*s %llu", perms, &ino) != 2 || !strchr(perms, 's') || !ino)
            continue;
        char dir[1300];
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(file, '/') - file), file);
        if (!dir[0] || strcmp(dir, seg_dir()) == 0)
            continue;
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && !found && (de = readdir(d)) != NULL) {
            uid_t u;
            pid_t p;
            struct stat st;
            char name[1300];
            int n = snprintf(name, sizeof name, "%s/%s", dir, de->d_name);
            if (n > 0 && (size_t)n < sizeof name && parse_name(de->d_name, &u, &p) == 0 && p == pid &&
                lstat(name, &st) == 0 &&
                S_ISREG(st.st_mode) && (unsigned long long)st.st_ino == ino) {
                snprintf(out, len, "%s", name);
                found = 1;
            }
        }
        if (d)
            closedir(d);
    }
    if (f)
        fclose(f);
    return found;
}

void seg_say_missing(pid_t pid, int to_change)
{
    /* A segment named for pid that another user owns: the process is there, not this user's. */
    DIR *d = opendir(seg_dir());
    struct dirent *de;
    long owner = -1;
    char path[1300], starting[1300] = "";
    while (d && !starting[0] && (de = readdir(d)) != NULL) {
        uid_t u;
        pid_t p;
        struct stat st;
        if (parse_name(de->d_name, &u, &p) != 0 || p != pid)
            continue;
        snprintf(path, sizeof path, "%s/%s", seg_dir(), de->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        int fd = st.st_uid == geteuid() || reads_everyones() ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
        if (fd >= 0 && fstat(fd, &st) == 0 && being_created(fd, &st))
            snprintf(starting, sizeof starting, "%s", path);
        else if (st.st_uid != geteuid() && owner < 0)
            owner = (long)st.st_uid;
        if (fd >= 0)
            close(fd);
    }
    if (d)
        closedir(d);
    if (starting[0])
        cli_error(cushim_proc_alive(pid) ? STARTING : NEVER_STARTED, (int)pid, starting);
    else if (owner >= 0 && !cushim_proc_alive(pid))
        /* Named by the writer's own pid: a container's live process may have it there. */
        cli_error("no cushim process %d: none is alive here (gone, or another pid namespace's), and its segment in "
                  "%s is uid %ld's (`cushim gc` run by that user or root removes a stale one)", (int)pid, seg_dir(),
                  owner);
    else if (owner >= 0)
        cli_error(to_change ? "no cushim process %d of yours: its segment in %s is uid %ld's (only that user or "
                              "root may change it)"
                            : "no cushim process %d of yours: its segment in %s is uid %ld's (root, or "
                              "CAP_DAC_READ_SEARCH to read it, sees every user's)", (int)pid, seg_dir(), owner);
    else if (say_processes_under(pid))
        ;
    else if (cushim_proc_alive(pid) && segment_elsewhere(pid, path, sizeof path))
        cli_error("no cushim process %d in %s: its segment is %s (another segment directory: give the same "
                  "CUSHIM_SEGMENT_DIR)", (int)pid, seg_dir(), path);
    else if (cushim_proc_alive(pid))
        /* A process without the shim (nvidia-smi's pid, a server not started under `cushim run`)
         * is the usual reason: said, rather than left to look like a typo. */
        cli_error("no cushim process %d%s (process %d is alive, but has no segment in %s: it was "
                  "started without the shim, or has made no CUDA call yet)", (int)pid,
                  reads_everyones() ? "" : " of yours", (int)pid, seg_dir());
    else
        cli_error("no cushim process %d%s (no such process, no segment in %s)", (int)pid,
                  reads_everyones() ? "" : " of yours", seg_dir());
}

#define MAX_DIRECT 32

/* The live processes a pid argument may name (seg_names): `direct` ones by their pid here,
 * `inner` ones (another pid namespace's) by their own pid there. */
struct pid_candidates {
    pid_t pid;
    int ndirect, ninner;
    char direct[MAX_DIRECT][1300], inner[1300]; /* the first direct ones */
    ino_t direct_ino[MAX_DIRECT];
    dev_t direct_dev[MAX_DIRECT];
    pid_t direct_own, inner_own;
    pid_t inner_host;            /* the first inner one's pid here (0: not seen here) */
    unsigned long long inner_ns; /* and its pid namespace's inode */
    struct cushim_snapshot inner_snap[8]; /* the first inner ones, for a message */
};

static int gather_candidate(struct seg_entry *e, void *arg)
{
    struct pid_candidates *c = arg;
    if (!e->ok || e->stale || e->copy)
        return 0;
    int how = seg_names(&e->snap, c->pid);
    if (how == 2) {
        if (c->ndirect < MAX_DIRECT) {
            snprintf(c->direct[c->ndirect], sizeof c->direct[0], "%s", e->path);
            c->direct_ino[c->ndirect] = e->ino;
            c->direct_dev[c->ndirect] = e->dev;
        }
        c->direct_own = e->snap.pid;
        c->ndirect++;
    } else if (how == 1) {
        if (c->ninner == 0) {
            snprintf(c->inner, sizeof c->inner, "%s", e->path);
            c->inner_own = e->snap.pid;
            c->inner_host = e->snap.host_pid;
            c->inner_ns = (unsigned long long)e->snap.pidns_inode;
        }
        if (c->ninner < 8)
            memcpy(&c->inner_snap[c->ninner], &e->snap, offsetof(struct cushim_snapshot, devices));
        c->ninner++;
    }
    return 0;
}

int seg_mapped_by(pid_t pid, dev_t dev, ino_t ino)
{
    char path[64], line[4400];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned maj, min;
        unsigned long long i;
        /* The same device, or both anonymous ones (major 0: tmpfs, btrfs, overlayfs), whose
         * numbers stat() and maps may give differently (a btrfs subvolume's own against its
         * file system's). */
        found = sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &i) == 3 && i == (unsigned long long)ino &&
                ((maj == major(dev) && min == minor(dev)) || (maj == 0 && major(dev) == 0));
    }
    fclose(f);
    return found;
}

/* Of several live segments naming pid here (a copy the user made of their own: same pid, same
 * start time), the one the process has mapped; -1 (said) when not exactly one is. */
static int the_mapped_one(const struct pid_candidates *c)
{
    int n = c->ndirect < MAX_DIRECT ? c->ndirect : MAX_DIRECT, pick = -1, others = 0, unknown = 0;
    for (int i = 0; i < n; i++) {
        int m = seg_mapped_by(c->pid, c->direct_dev[i], c->direct_ino[i]);
        unknown |= m < 0;
        if (m == 1 && pick < 0)
            pick = i;
        else if (m == 1 && (c->direct_ino[i] != c->direct_ino[pick] || c->direct_dev[i] != c->direct_dev[pick]))
            others++; /* two files mapped: a hard link of the one is the same file */
    }
    if (pick >= 0 && !others && !unknown && c->ndirect <= MAX_DIRECT)
        return pick;
    cli_error("pid %d names %d live segments (%s, %s%s): %s", (int)c->pid, c->ndirect, c->direct[0], c->direct[1],
              c->ndirect > 2 ? ", ..." : "",
              unknown                     ? "cannot tell which the process maps (its /proc/PID/maps is not readable here)"
              : c->ndirect > MAX_DIRECT   ? "too many to look through; remove the copies"
              : others                    ? "the process maps more than one of them"
                                          : "the process maps none of them; remove the copies");
    return -1;
}

struct cushim_segment *seg_map_rw(pid_t pid, char *who, size_t who_len)
{
    snprintf(who, who_len, "pid %d", (int)pid);
    /* The process with this pid here; else the one process of another pid namespace (a
     * container's, read on the host) with this pid there. Two of those are not guessed between. */
    static struct pid_candidates c;
    char why[1500] = "";
    memset(&c, 0, sizeof c);
    c.pid = pid;
    seg_scan(&pid, 1, gather_candidate, &c);
    struct cushim_segment *s = NULL;
    if (c.ndirect > 1) {
        int i = the_mapped_one(&c);
        if (i < 0)
            return NULL;
        s = map_one(c.direct[i], c.direct_own, why, sizeof why);
        if (!s)
            cli_error("%s", why);
        return s;
    }
    if (c.ndirect == 0 && c.ninner == 1 && c.inner_host)
        snprintf(who, who_len, "pid %d (pid %d of pid namespace %llu)", (int)c.inner_host, (int)pid, c.inner_ns);
    else if (c.ndirect == 0 && c.ninner == 1)
        snprintf(who, who_len, "pid %d of pid namespace %llu", (int)pid, c.inner_ns);
    if (c.ndirect == 1 || (c.ndirect == 0 && c.ninner == 1)) {
        s = c.ndirect ? map_one(c.direct[0], c.direct_own, why, sizeof why) : map_one(c.inner, c.inner_own, why, sizeof why);
        if (!s)
            cli_error("%s", why);
        return s;
    }
    if (c.ndirect == 0 && c.ninner > 1) {
        const struct cushim_snapshot *list[8];
        for (int i = 0; i < c.ninner && i < 8; i++)
            list[i] = &c.inner_snap[i];
        seg_say_ambiguous(pid, list, c.ninner < 8 ? c.ninner : 8);
        return NULL;
    }
    /* No live one: why not, from every file named for `pid` (yours; everyone's as root): the
     * plain name may be taken by someone else's file, the segment then has a suffixed name. */
    /* In name order, as `stat` lists them (seg_scan): both name the same file of several (the
     * plain name before a suffixed copy; a fresh-user trial: two commands named two files). */
    char path[8192], names[16][256];
    int nnames = 0;
    DIR *d = opendir(seg_dir());
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        uid_t u;
        pid_t p;
        if (parse_name(de->d_name, &u, &p) != 0 || p != pid || (geteuid() != 0 && u != geteuid()))
            continue;
        /* The 16 first in name order, whatever the directory's (a review: the plain name could be
         * left out past the 16th): kept sorted, the last dropped when full. */
        int k = nnames < 16 ? nnames++ : 16;
        if (k == 16 && strcmp(de->d_name, names[15]) >= 0)
            continue;
        if (k == 16)
            k = 15;
        while (k > 0 && strcmp(de->d_name, names[k - 1]) < 0) {
            memcpy(names[k], names[k - 1], sizeof names[0]);
            k--;
        }
        snprintf(names[k], sizeof names[0], "%s", de->d_name);
    }
    if (d)
        closedir(d);
    for (int k = 0; k < nnames && !s; k++) {
        snprintf(path, sizeof path, "%s/%s", seg_dir(), names[k]);
        /* A file of the right name that is not ours says less than a stale segment of ours. */
        char reason[1500];
        s = map_one(path, pid, reason, sizeof reason);
        if (!s && (!why[0] || strstr(why, "not a segment of yours")))
            snprintf(why, sizeof why, "%s", reason);
    }
    if (!s && why[0])
        cli_error("%s", why);
    else if (!s)
        seg_say_missing(pid, 1);
    return s;
}

int seg_write_guarded(struct cushim_segment *s, void (*fn)(struct cushim_segment *, void *), void *arg)
{
    catch_sigbus();
    /* A write brackets a record with its seqlock's counters (common/peaks.c): the CLI ended
     * between them (Ctrl-C, SIGTERM, a stop by Ctrl-Z) would leave the record torn for every
     * reader, for good (or while stopped). Every signal that can be held is held for the write;
     * the faults stay deliverable (SIGBUS is caught above: a blocked fault would kill). The mask
     * saved by sigsetjmp is restored by siglongjmp. SIGKILL cannot be held. */
    sigset_t hold, was;
    sigfillset(&hold);
    sigdelset(&hold, SIGBUS);
    sigdelset(&hold, SIGSEGV);
    sigdelset(&hold, SIGILL);
    sigdelset(&hold, SIGFPE);
    sigdelset(&hold, SIGTRAP);
    sigdelset(&hold, SIGSYS);
    sigdelset(&hold, SIGABRT);
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) != 0) {
        bus_jump = NULL;
        return -1;
    }
    sigprocmask(SIG_BLOCK, &hold, &was);
    bus_jump = &jb;
    fn(s, arg);
    bus_jump = NULL;
    sigprocmask(SIG_SETMASK, &was, NULL);
    return 0;
}

void seg_unmap(struct cushim_segment *s)
{
    if (s)
        munmap(s, sizeof *s);
}
