#include "tools/run_collect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "common/procinfo.h"
#include "tools/cli.h"

static int by_created(const void *a, const void *b)
{
    const struct cushim_snapshot *x = a, *y = b;
    return x->created_ns < y->created_ns ? -1 : x->created_ns > y->created_ns;
}

/* A run started inside this one, from its run-ID file in `dfd` (named `name`, holding that run's
 * directory), once. */
static void add_nested(struct collected *c, uint64_t id, int dfd, const char *name)
{
    for (int i = 0; i < c->nnested; i++)
        if (c->nested[i] == id)
            return;
    uint64_t *ids = realloc(c->nested, (size_t)(c->nnested + 1) * sizeof *ids);
    if (ids)
        c->nested = ids;
    char **dirs = realloc(c->nested_dir, (size_t)(c->nnested + 1) * sizeof *dirs);
    if (dirs)
        c->nested_dir = dirs;
    if (!ids || !dirs)
        return;
    char path[4096];
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    ssize_t got = fd >= 0 ? read(fd, path, sizeof path - 1) : -1;
    if (fd >= 0)
        close(fd);
    c->nested_dir[c->nnested] = got > 0 ? strndup(path, (size_t)got) : NULL;
    c->nested[c->nnested++] = id;
}

/* Adds one process's summary. The launched program's latest image is the top level; an image
 * of it before an exec (same pid, created earlier) is listed with the descendants. The program
 * of a run inside this one that was killed (its summaries are this run's to read) is a
 * descendant: its segment is marked as the top of that run, not of this one. */
static void add_summary(struct collected *c, const struct cushim_snapshot *s)
{
    const struct cushim_snapshot *to_desc = s;
    if ((s->flags & CUSHIM_SEG_F_TOP) && s->run_id == c->run_id) {
        if (!c->top && (c->top = malloc(sizeof *s)) != NULL) {
            *c->top = *s;
            c->top->over = 1; /* every summary collected is of a process that has ended */
            return;
        }
        if (c->top && s->created_ns > c->top->created_ns) {
            static struct cushim_snapshot earlier;
            earlier = *c->top;
            *c->top = *s;
            c->top->over = 1;
            to_desc = &earlier;
        }
    }
    struct cushim_snapshot *grown = realloc(c->desc, (size_t)(c->ndesc + 1) * sizeof *grown);
    if (!grown)
        return;
    c->desc = grown;
    c->desc[c->ndesc] = *to_desc;
    c->desc[c->ndesc++].over = 1;
}

/* Whether the summary of this very process image (pid and segment creation time) is in c. */
static int collected_already(const struct collected *c, const struct cushim_snapshot *s)
{
    if (c->top && c->top->pid == s->pid && c->top->created_ns == s->created_ns)
        return 1;
    for (int i = 0; i < c->ndesc; i++)
        if (c->desc[i].pid == s->pid && c->desc[i].created_ns == s->created_ns)
            return 1;
    return 0;
}

/* A summary a process wrote into the run directory (PID-CREATED.seg; not a temporary .NAME). */
static int is_summary_name(const char *name)
{
    size_t n = strlen(name);
    return n >= 5 && strcmp(name + n - 4, ".seg") == 0 && name[0] != '.';
}

/* Reads the summaries in the run's directory `dir`, closed (renamed) already. Each is taken
 * first (renamed to .taken-NAME): a process that wrote its summary just as the run closed takes
 * it back instead, unless the run took it (shim/segment_file.c segment_copy_to), so it is said
 * once, by one of them. */
static void read_closed_dir(const char *dir, struct collected *c)
{
    /* The names first, then each taken and read: entries renamed while the directory is being
     * listed may be skipped by the listing. */
    DIR *d = opendir(dir);
    struct dirent *de;
    char (*names)[256] = NULL;
    size_t n = 0, cap = 0;
    while (d && (de = readdir(d)) != NULL) {
        unsigned long long nested;
        char tail;
        if (sscanf(de->d_name, "run-%16llx%c", &nested, &tail) == 1) {
            add_nested(c, nested, dirfd(d), de->d_name); /* a run inside this one (outer_run_register) */
            continue;
        }
        if (!is_summary_name(de->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char (*grown)[256] = realloc(names, ncap * sizeof *grown);
            if (!grown)
                break;
            names = grown;
            cap = ncap;
        }
        snprintf(names[n++], sizeof names[0], "%s", de->d_name);
    }
    char taken[300], path[4400], err[160];
    static struct cushim_snapshot snap;
    for (size_t i = 0; d && i < n; i++) {
        snprintf(taken, sizeof taken, ".taken-%s", names[i]);
        if (renameat(dirfd(d), names[i], dirfd(d), taken) != 0 ||
            (size_t)snprintf(path, sizeof path, "%s/%s", dir, taken) >= sizeof path)
            continue; /* taken back by its process meanwhile */
        if (seg_read_file(path, &snap, err, sizeof err) != 0) {
            cli_error("summary %s/%s: %s", dir, names[i], err);
            c->unreadable++;
            continue;
        }
        /* Written by the process at its exit: its counters are of then, not of this read. */
        struct stat st;
        if (stat(path, &st) == 0)
            snap.read_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
        add_summary(c, &snap);
    }
    free(names);
    if (d)
        closedir(d);
}

/* Removes the run's closed directory. A process that wrote its summary into it after it was
 * read takes that back itself (and says its own report): its .seg is left to it, and the
 * directory is removed once it is gone (a few ms; else `cushim gc` removes it later). */
static void remove_closed_run_dir(const char *dir)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
            if (fd >= 0)
                close(fd);
            return;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || is_summary_name(de->d_name))
                continue;
            unlinkat(fd, de->d_name, 0);
        }
        closedir(d);
        if (rmdir(dir) == 0 || (errno != ENOTEMPTY && errno != EEXIST))
            return;
        usleep(2000);
    }
}

/* The runs started inside this one so far, before its live segments are read. */
static void read_nested(const char *dir, struct collected *c)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        unsigned long long nested;
        char tail;
        if (sscanf(de->d_name, "run-%16llx%c", &nested, &tail) == 1)
            add_nested(c, nested, dirfd(d), de->d_name);
    }
    if (d)
        closedir(d);
}

/* The directory of a run inside this one that was killed before it closed it (SIGKILL: nothing
 * said): its summaries are this run's to read, like its dead processes (add_live). */
static void read_killed_nested_runs(struct collected *c, const struct outer_run *outer, uint64_t run_id)
{
    for (int i = 0; i < c->nnested; i++) {
        const char *dir = c->nested_dir[i];
        int pid, done;
        uint64_t start, ns;
        if (!dir || cushim_run_dir_check(dir) != 0 || cushim_run_dir_owner(dir, &pid, &start, &ns, &done) != 0 ||
            done || (ns != 0 && ns != cushim_pidns_inode()) || cushim_proc_is(pid, start))
            continue;
        char closed[4200];
        snprintf(closed, sizeof closed, "%s.done", dir);
        if (rename(dir, closed) != 0)
            continue;
        read_closed_dir(closed, c);
        /* This run's own summaries go up to an enclosing run: so do those it took from a killed
         * run inside it (that run registered with this one, not with the enclosing one). */
        if (outer->id)
            outer_run_hand_over(outer, closed, run_id);
        remove_closed_run_dir(closed);
    }
}

struct live_arg {
    uint64_t run_id;
    const char *dir; /* the run directory, still open */
    struct collected *c;
};

/* Copies the segment of a process of the run that ended without its exit report into the run
 * directory as its summary (PID-CREATED.seg, the name its own copy would have had: one of the
 * two, never both), so that it is read, and handed to an enclosing run, with the others. */
static int move_to_run_dir(const struct seg_entry *e, const char *dir)
{
    static struct cushim_segment seg;
    char name[64], tmp[4400], to[4400];
    struct stat st;
    int in = open(e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    /* The same file as scanned (a process given the dead one's pid since may have moved it aside
     * and put its own live segment under the name). */
    ssize_t got = in >= 0 && fstat(in, &st) == 0 && st.st_ino == e->ino ? read(in, &seg, sizeof seg) : -1;
    if (in >= 0)
        close(in);
    if (got != (ssize_t)sizeof seg || seg.h.created_ns != e->snap.created_ns)
        return -1;
    snprintf(name, sizeof name, "%d-%llx.seg", (int)e->snap.pid, (unsigned long long)e->snap.created_ns);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.run.tmp", dir, name) >= sizeof tmp ||
        (size_t)snprintf(to, sizeof to, "%s/%s", dir, name) >= sizeof to)
        return -1;
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = out >= 0 && fchmod(out, 0600) == 0 && write(out, &seg, sizeof seg) == (ssize_t)sizeof seg;
    if (out >= 0 && close(out) != 0)
        ok = 0;
    /* link, not rename: the process's own summary under that name (it ended with its report
     * after all) is never replaced; then the caller reads that one. A file system without hard
     * links (vfat, some FUSE mounts; a review) renames without replacing instead. */
    if (ok && link(tmp, to) != 0 && errno != EEXIST) {
        struct stat taken;
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno == EINVAL || errno == ENOSYS) { /* no RENAME_NOREPLACE there either */
            if (lstat(to, &taken) != 0) {
                if (rename(tmp, to) == 0)
                    return 0;
                ok = 0;
            }
        } else if (errno != EEXIST) {
            ok = 0;
        }
    }
    unlink(tmp); /* linked, or the process's own summary is there (EEXIST) */
    return ok ? 0 : -1;
}

static int add_live(struct seg_entry *e, void *argp)
{
    struct live_arg *a = argp;
    struct collected *c = a->c;
    if (!e->ok)
        return 0;
    /* A copy of a segment (the user's backup, made while its process lived): not the file its
     * process made (the header names that one's inode, as for `cushim ps`'s copies), so not the
     * process; its original says it, or the process's exit report does. Read as the process, its
     * frozen counters replaced the exit report and the copy was deleted (a fresh-user trial). */
    if (e->copy || seg_file_is_copy(&e->snap, e->ino))
        return 0;
    int ours = e->snap.run_id == a->run_id, nested = 0;
    for (int i = 0; !ours && i < c->nnested; i++)
        nested |= e->snap.run_id == c->nested[i];
    if (!ours && !nested)
        return 0;
    /* A run inside this one that was killed (SIGKILL: it never said its processes) leaves its
     * dead to this one. */
    if (nested && e->stale && e->snap.run_pid > 0 && !cushim_proc_is(e->snap.run_pid, e->snap.run_start_time))
        ours = 1;
    /* Finished (exited) but its process still there: it is handing its summary over right now
     * (or it is an image before an exec that this run cannot get otherwise): alive here. */
    int finishing = e->stale && e->snap.exited && !e->snap.other_pidns &&
                    cushim_proc_is(e->snap.pid, e->snap.start_time);
    if (!e->stale || finishing) {
        /* Alive (a daemon, `&` without wait; a run inside this one reports its own, but its
         * processes are still running here too): unless its summary arrives before the close. */
        struct run_alive *grown = realloc(c->alive, (size_t)(c->nalive + 1) * sizeof *grown);
        if (grown) {
            c->alive = grown;
            c->alive[c->nalive++] = (struct run_alive){e->snap.pid, e->snap.created_ns};
        }
        return 0;
    }
    /* Ended without an exit report (a signal, the OOM killer, _exit): its counters as of its
     * end. A run inside this one reports its own dead. */
    if (!ours)
        return 0;
    if (move_to_run_dir(e, a->dir) != 0 && !collected_already(c, &e->snap))
        add_summary(c, &e->snap);
    /* Ours to clean up, the process being gone: the file scanned only (not a live segment put
     * under the name since). */
    struct stat st;
    if (lstat(e->path, &st) == 0 && st.st_ino == e->ino)
        unlink(e->path);
    return 0;
}

void run_collect(const char *dir, uint64_t run_id, const struct outer_run *outer, struct collected *c)
{
    memset(c, 0, sizeof *c);
    c->run_id = run_id;
    read_nested(dir, c);
    struct live_arg a = {run_id, dir, c};
    seg_scan(NULL, 0, add_live, &a);
    /* The directory is closed (renamed away) before it is read: a process that writes its
     * summary from now on finds the run gone and says its own report itself (CUSHIM_RUN_SUMMARY).
     * `cushim gc` knows the name too. */
    char done[4200];
    snprintf(done, sizeof done, "%s.done", dir);
    const char *last = rename(dir, done) == 0 ? done : dir;
    read_closed_dir(last, c);
    if (outer->id)
        outer_run_hand_over(outer, last, run_id);
    remove_closed_run_dir(last);
    read_killed_nested_runs(c, outer, run_id);
    for (int i = 0; i < c->nalive; i++) {
        struct cushim_snapshot s = {.pid = c->alive[i].pid, .created_ns = c->alive[i].created_ns};
        c->running += !collected_already(c, &s);
    }
    if (c->ndesc > 1) /* qsort takes no NULL array, even of 0 elements (C17 7.22.5) */
        qsort(c->desc, (size_t)c->ndesc, sizeof *c->desc, by_created);
}

void run_collected_free(struct collected *c)
{
    for (int i = 0; i < c->nnested; i++)
        free(c->nested_dir[i]);
    free(c->nested);
    free(c->nested_dir);
    free(c->top);
    free(c->desc);
    free(c->alive);
    memset(c, 0, sizeof *c);
}
