/* Creating and removing this process's segment (DESIGN.md "Shared-memory segment"). Runs once,
 * at the first CUDA activity, never on the hot path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/path.h"
#include "common/procinfo.h"
#include "common/snapshot.h"
#include "shim/segment_file.h"

#ifndef CUSHIM_VERSION
#define CUSHIM_VERSION "unknown"
#endif

/* The segment's file as made (st_dev, st_ino; both 0: none), kept here rather than read back
 * from the header, which the user's other processes may write: segment_unlink removes only it. */
static dev_t own_dev;
static ino_t own_ino;

static void fill_header(struct cushim_segment *s, unsigned flags, uint64_t run_id,
                        const struct cushim_config *c, const struct stat *file)
{
    struct cushim_segment_header *h = &s->h;
    own_dev = file ? file->st_dev : 0;
    own_ino = file ? file->st_ino : 0;
    if (file) { /* the file it is: a copy put in its place is told apart by its readers */
        h->file_ino = (uint64_t)file->st_ino;
        h->file_dev = (uint64_t)file->st_dev;
    }
    h->layout_version = CUSHIM_LAYOUT_VERSION;
    h->header_size = sizeof *h;
    h->device_record_size = sizeof(struct cushim_device_record);
    h->device_capacity = CUSHIM_MAX_DEVICES;
    h->kind_count = CUSHIM_KIND_COUNT;
    h->kind_stat_count = CUSHIM_STAT_COUNT;
    h->device_stat_count = CUSHIM_DEV_STAT_COUNT;
    h->control_offset = (uint32_t)offsetof(struct cushim_segment, control);
    h->graph_capacity = CUSHIM_MAX_GRAPHS;
    h->graph_record_size = sizeof(struct cushim_graph_record);
    h->live_offset = (uint32_t)offsetof(struct cushim_segment, live_at_exit);
    h->live_capacity = CUSHIM_LIVE_MAX;
    h->total_size = sizeof *s;
    h->pid = (int32_t)getpid();
    h->uid = (uint32_t)geteuid(); /* the owner of the file it makes (its filesystem uid) */
    h->start_time = cushim_self_start_time();
    h->pidfs_ino = cushim_proc_pidfs_ino(getpid());
    h->pidns_inode = cushim_pidns_inode();
    h->created_ns = shim_clock_ns(CLOCK_REALTIME);
    h->run_id = run_id;
    if (run_id) {
        int run_pid, done;
        uint64_t start, ns;
        if (cushim_run_dir_owner(c->run_dir, &run_pid, &start, &ns, &done) == 0 && !done &&
            (ns == 0 || ns == h->pidns_inode)) {
            h->run_pid = run_pid;
            h->run_start_time = start;
        }
    }
    h->flags = flags | (c->offload == CUSHIM_OFFLOAD_COMPILE  ? CUSHIM_SEG_F_OFFLOAD_COMPILE
                        : c->offload == CUSHIM_OFFLOAD_ALWAYS ? CUSHIM_SEG_F_OFFLOAD_ALWAYS
                                                              : 0) |
               (c->spill ? CUSHIM_SEG_F_SPILL : 0);
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
        s->devices[i].ordinal = (int32_t)i;
    atomic_store_explicit(&h->phase, (uint32_t)c->phase, memory_order_relaxed);
    cushim_self_cmdline(h->command, sizeof h->command);
    snprintf(h->version, sizeof h->version, "%s", CUSHIM_VERSION);
    /* The magic goes last, as one 8-byte store with release: a reader that loads it with acquire
     * (segment.h cushim_segment_magic_ok) sees a complete header, on a weakly ordered CPU too. */
    uint64_t magic;
    memcpy(&magic, CUSHIM_SEGMENT_MAGIC, sizeof magic);
    __atomic_store_n((uint64_t *)(void *)h->magic, magic, __ATOMIC_RELEASE);
}

/* Whether the segment at path was written in this process's pid namespace (or by a writer that
 * could not tell its own). A directory shared by containers holds segments of processes with the
 * same pid in other namespaces: live, and never ours to replace; so is a file whose header is
 * not written yet (another namespace's process creating it right now), or cut short. */
/* The header of the segment at path, when it has one (whole, with its magic). */
static bool read_header(const char *path, struct cushim_segment_header *h)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    ssize_t got = fd >= 0 ? pread(fd, h, sizeof *h, 0) : -1;
    if (fd >= 0)
        close(fd);
    return got == (ssize_t)sizeof *h && memcmp(h->magic, CUSHIM_SEGMENT_MAGIC, sizeof h->magic) == 0;
}

static bool same_pid_namespace(const char *path)
{
    struct cushim_segment_header h;
    uint64_t mine = cushim_pidns_inode();
    if (!read_header(path, &h))
        return false;
    return h.pidns_inode == 0 || mine == 0 || h.pidns_inode == mine;
}

/* A random name beside `taken` (cushim-UID-PID.XXXXXX, which readers also accept) into out. */
static int suffixed_name(const char *taken, char *out, size_t len)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[6] = {0};
    char suffix[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    for (int k = 0; k < 6; k++)
        suffix[k] = alnum[r[k] % (sizeof alnum - 1)];
    suffix[6] = '\0';
    snprintf(out, len, "%s.%s", taken, suffix);
    return 0;
}

bool segment_is_suffixed(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '.' && strlen(entry + n) == 7;
}

void segment_own_suffixed(const char *plain, char *out, size_t len)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the namespace's inode and the pid */
    uint64_t parts[2] = {cushim_pidns_inode(), (uint64_t)getpid()};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < 64; b += 8)
            h = (h ^ ((parts[i] >> b) & 0xff)) * 1099511628211ull;
    char suffix[7];
    for (int k = 0; k < 6; k++, h /= sizeof alnum - 1)
        suffix[k] = alnum[h % (sizeof alnum - 1)];
    suffix[6] = '\0';
    snprintf(out, len, "%s.%s", plain, suffix);
}

/* Whether the segment at path is a `cushim run` process's (its header names a run). */
static bool run_owned(const char *path)
{
    struct cushim_segment_header h;
    return read_header(path, &h) && h.run_id != 0;
}

/* An existing file with our name is ours to replace if it holds our own pid: the segment of a
 * dead process whose pid we now have (or of an image before an exec that load time left to its
 * run). A file owned by another user is never touched. A segment of some `cushim run`'s process
 * is moved aside (a suffixed name) rather than removed: its run collects it (tools/run_collect.c),
 * as the summary of a process that ended without its exit report. */
static int replace_stale(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || !same_pid_namespace(path)) {
        errno = EEXIST;
        return -1;
    }
    char aside[CUSHIM_PATH_MAX + 72];
    if (run_owned(path) && suffixed_name(path, aside, sizeof aside) == 0 && rename(path, aside) == 0)
        return 0;
    return unlink(path);
}

/* Our own earlier segments under a suffixed name for this pid (the image before an exec, or a
 * dead process whose pid we now have): the name is ours to reuse, as replace_stale does for the
 * plain name; those of a `cushim run`'s process are left to their run (or `cushim gc`). `name` is
 * the plain name, cushim-UID-PID. */
static void remove_own_suffixed(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        struct stat st;
        char path[CUSHIM_PATH_MAX + 64];
        if (!segment_is_suffixed(de->d_name, name))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && same_pid_namespace(path) &&
            !run_owned(path))
            unlink(path);
    }
    if (d)
        closedir(d);
}

/* Puts a file at `path`, never replacing one (O_EXCL): with tmpfd >= 0, that unnamed file,
 * complete already (linked through /proc/self/fd); else a new empty one. Returns its fd (tmpfd,
 * or the new one), or -1 with errno (EEXIST: the name is taken). */
static int place(const char *path, int tmpfd)
{
    if (tmpfd < 0)
        return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", tmpfd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 ? tmpfd : -1;
}

/* Puts the segment's file under our name, cushim-UID-PID, or a suffixed one (see below);
 * path receives the name. Returns the fd or -1 (errno). */
static int place_named(const struct cushim_config *c, char *path, size_t pathlen, int tmpfd)
{
    int fd = -1;
    snprintf(path, pathlen, "%s/%s%u-%d", c->segment_dir, CUSHIM_SEGMENT_PREFIX,
             (unsigned)geteuid(), (int)getpid());
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        fd = place(path, tmpfd);
        if (fd < 0 && (errno != EEXIST || replace_stale(path) != 0))
            break;
    }
    /* The name is taken by a file that is not ours (another user of a shared directory made it,
     * or a process with our pid in another pid namespace, a container sharing the directory): a
     * suffixed name instead, cushim-UID-PID.XXXXXX, which readers also accept: first the one a
     * later image of this process will look for (segment_own_suffixed), else a random one. */
    if (fd < 0 && errno == EEXIST) {
        char taken[CUSHIM_PATH_MAX + 64];
        snprintf(taken, sizeof taken, "%s", path);
        remove_own_suffixed(c->segment_dir, taken + strlen(c->segment_dir) + 1);
        segment_own_suffixed(taken, path, pathlen);
        fd = place(path, tmpfd);
        for (int attempt = 0; attempt < 8 && fd < 0 && errno == EEXIST; attempt++) {
            if (suffixed_name(taken, path, pathlen) != 0)
                break;
            fd = place(path, tmpfd);
        }
        struct stat st;
        bool other_user = lstat(taken, &st) == 0 && st.st_uid != geteuid();
        if (fd >= 0 && other_user)
            LOG_WARN("%s is taken by a file that is not ours: the live-stats segment is %s", taken, path);
        else if (fd >= 0) /* a container sharing the directory: expected, not worth a warning */
            LOG_INFO("%s is taken by a process of another pid namespace: the live-stats segment is %s",
                     taken, path);
        else
            snprintf(path, pathlen, "%s", taken);
    }
    return fd;
}

/* The file's size, and its space taken now: a segment on a full file system (a container's
 * small /dev/shm) would otherwise fault (SIGBUS, killing the program) at the first touch of a
 * page never written. 0, or -1 with errno (ENOSPC). */
static int reserve(int fd, size_t size)
{
    /* A size past the process's file size limit (setrlimit(2), RLIMIT_FSIZE: a batch scheduler's
     * or a container's) would raise SIGXFSZ, which kills the program: refused first. */
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY && size > fsize.rlim_cur) {
        errno = EFBIG;
        return -1;
    }
    if (ftruncate(fd, (off_t)size) != 0)
        return -1;
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

/* The uid the kernel shows for an owner that this user namespace does not map (proc(5),
 * /proc/sys/kernel/overflowuid; 65534 by default). */
static unsigned overflow_uid(void)
{
    char buf[16] = "";
    int fd = open("/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    unsigned uid = 65534;
    if (n > 0 && sscanf(buf, "%u", &uid) != 1)
        uid = 65534;
    return uid;
}

/* A segment directory that another user owns (not root, and not an owner this namespace cannot
 * map: a tmpfs shared into a rootless container) lets that user remove this process's segment
 * and so hide it from every reader (a fresh-user trial: a link to such a directory was taken
 * silently). Used all the same, as configured; said once. */
static void warn_foreign_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid == geteuid() || st.st_uid == 0 ||
        st.st_uid == overflow_uid())
        return;
    LOG_WARN("the segment directory %s is uid %u's: that user can remove this process's segment, "
             "hiding it from `cushim ps`, `top`, `stat` and the metrics (use a directory of this "
             "user's or root's)", dir, (unsigned)st.st_uid);
}

struct cushim_segment *segment_create(const struct cushim_config *c, unsigned flags,
                                      uint64_t run_id, char *path, size_t pathlen)
{
    size_t size = sizeof(struct cushim_segment);
    struct cushim_segment *s = MAP_FAILED;
    warn_foreign_dir(c->segment_dir);
    /* The segment is made complete in an unnamed file (O_TMPFILE), then given its name: a process
     * killed while making it leaves nothing behind, and a reader never sees it half made. Where
     * the directory's file system cannot (or /proc is missing), the file is named first and its
     * header written last (readers wait for its magic). */
    snprintf(path, pathlen, "%s/%s%u-%d", c->segment_dir, CUSHIM_SEGMENT_PREFIX, (unsigned)geteuid(),
             (int)getpid()); /* for the message, if no name is taken */
    int tmpfd = open(c->segment_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (tmpfd >= 0) {
        if (fchmod(tmpfd, 0600) == 0 && reserve(tmpfd, size) == 0)
            s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, tmpfd, 0);
        struct stat file;
        if (s != MAP_FAILED) {
            fill_header(s, flags, run_id, c, fstat(tmpfd, &file) == 0 ? &file : NULL);
            int fd = place_named(c, path, pathlen, tmpfd);
            close(tmpfd);
            if (fd >= 0)
                return s;
            if (errno == EEXIST) {
                munmap(s, size);
                s = MAP_FAILED;
                goto private_memory;
            }
            munmap(s, size); /* no link through /proc: the other way below */
            s = MAP_FAILED;
        } else {
            int saved = errno;
            close(tmpfd);
            if (saved == ENOSPC) {
                errno = saved;
                goto private_memory;
            }
        }
    }
    struct stat named;
    bool have_named = false;
    int fd = place_named(c, path, pathlen, -1);
    if (fd >= 0) {
        if (fchmod(fd, 0600) == 0 && reserve(fd, size) == 0)
            s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int saved = errno;
        have_named = s != MAP_FAILED && fstat(fd, &named) == 0;
        close(fd);
        if (s == MAP_FAILED) {
            unlink(path);
            errno = saved;
        }
    }
private_memory:
    if (s == MAP_FAILED) {
        int e = errno;
        LOG_WARN("cannot create the live-stats segment %s (%s%s): counting in private memory; "
                 "`cushim stat` will not see this process", path, strerror(e),
                 e == EFBIG ? ": the file size limit, ulimit -f, is below its size" : "");
        path[0] = '\0';
        flags |= CUSHIM_SEG_F_ANONYMOUS;
        s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED)
            return NULL;
        have_named = false;
    }
    fill_header(s, flags, run_id, c, have_named ? &named : NULL);
    return s;
}

void segment_unlink(const char *path)
{
    struct stat st;
    if (!path || !path[0])
        return;
    /* Another file at the name (ours was removed, and another pid namespace's process with our
     * pid made its segment there, or anyone put one) is not ours to remove. */
    if ((own_ino || own_dev) && lstat(path, &st) == 0 && (st.st_dev != own_dev || st.st_ino != own_ino)) {
        LOG_INFO("the segment %s was replaced by another file: that file is left", path);
        return;
    }
    if (unlink(path) == 0 || errno == ENOENT)
        return;
    /* A process that made its segment as one user and ends as another (it dropped privileges:
     * a sticky /dev/shm lets only the file's owner remove it): left, finished, for `cushim gc`. */
    LOG_INFO("cannot remove the segment %s at exit (%s; this process is uid %u now): it is left, "
             "finished, for `cushim gc`", path, strerror(errno), (unsigned)geteuid());
}

/* *s as one consistent picture per device record, into *out: threads still counting while the
 * process ends (exit() from one thread while others allocate) would leave a copy taken as it is
 * torn (a device figure and the device total one allocation apart). Each record is copied under
 * its seqlock (cushim_record_settle), up to patience_ns for all of them; one that never held
 * still is marked torn (seq_begin ahead of seq_end), as a reader of the live segment would see it. */
static void segment_settled_copy(const struct cushim_segment *s, struct cushim_segment *out, uint64_t patience_ns)
{
    memcpy(out, s, sizeof *out);
    uint64_t left = patience_ns;
    for (unsigned d = 0; d < CUSHIM_MAX_DEVICES; d++) {
        const struct cushim_device_record *r = &s->devices[d];
        if (atomic_load_explicit((_Atomic uint32_t *)&r->state, memory_order_acquire) != 0 &&
            cushim_record_settle(r, &out->devices[d], 1000, &left) != 0)
            atomic_store_explicit(&out->devices[d].seq_begin,
                                  atomic_load_explicit(&out->devices[d].seq_end, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
    }
}

int segment_copy_to(const struct cushim_segment *live, const char *dir, uint64_t patience_ns)
{
    /* One process end at a time (exit.c): the copy is made once per process. */
    static struct cushim_segment settled;
    const struct cushim_segment *s = &settled;
    char name[64], tmp[72];
    int rc = cushim_run_dir_check(dir);
    if (rc != 0)
        return rc;
    segment_settled_copy(live, &settled, patience_ns);
    /* When its counters were read: the copy's modification time, which the run gives as the
     * summary's read_ns (set below: the time a write stamps is the kernel's coarse clock, up to a
     * tick behind the samples taken just before). */
    struct timespec read_at[2] = {{0, UTIME_OMIT}, {0, 0}};
    clock_gettime(CLOCK_REALTIME, &read_at[1]);
    snprintf(name, sizeof name, "%d-%llx.seg", (int)s->h.pid, (unsigned long long)s->h.created_ns);
    snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    /* ENOENT from here on: the run closed its directory (renamed it away) and removed it. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? SEGMENT_COPY_GONE : -1;
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        fchmod(fd, 0600); /* readable by the run whatever the umask */
    if (fd < 0) {
        int e = errno;
        close(dfd);
        errno = e;
        return e == ENOENT ? SEGMENT_COPY_GONE : -1;
    }
    const char *p = (const char *)s;
    size_t left = sizeof *s;
    struct shim_write_guard g; /* a copy past RLIMIT_FSIZE fails, never kills */
    shim_write_guard_begin(&g);
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            shim_write_guard_failed(&g, e);
            shim_write_guard_end(&g);
            close(fd);
            unlinkat(dfd, tmp, 0);
            close(dfd);
            errno = e;
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    shim_write_guard_end(&g);
    futimens(fd, read_at);
    if (close(fd) != 0 || renameat(dfd, tmp, dfd, name) != 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        return e == ENOENT ? SEGMENT_COPY_GONE : -1;
    }
    /* Still under its name, and its `cushim run` alive: the run has not closed it, and reads this
     * copy once it has. (A run killed by SIGKILL never reads it: then the process says its own
     * summary, as when the run has closed.) */
    struct stat here, named;
    int run_pid, done;
    uint64_t start, ns;
    if (fstat(dfd, &here) == 0 && stat(dir, &named) == 0 && here.st_dev == named.st_dev &&
        here.st_ino == named.st_ino &&
        (cushim_run_dir_owner(dir, &run_pid, &start, &ns, &done) != 0 ||
         (ns != 0 && ns != cushim_pidns_inode()) || cushim_proc_is(run_pid, start))) {
        close(dfd);
        return 0;
    }
    /* Closed meanwhile: ours to take back, unless the run took it first. */
    rc = unlinkat(dfd, name, 0) == 0 ? SEGMENT_COPY_GONE : 0;
    close(dfd);
    return rc;
}
