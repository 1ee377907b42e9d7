#include "tools/collect.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

uint64_t proc_sum(const struct cushim_snapshot *s, int dev_stat)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < s->device_count; i++)
        v = cushim_sat_add(v, s->devices[i].dev[dev_stat]); /* a crafted segment must not wrap */
    return v;
}

int device_peak_lowered(const struct cushim_device_snapshot *d)
{
    return d->dev[CUSHIM_DEV_lifetime_peak] > d->dev[CUSHIM_DEV_total_peak];
}

int proc_peak_lowered(const struct cushim_snapshot *s)
{
    for (uint32_t i = 0; i < s->device_count; i++)
        if (device_peak_lowered(&s->devices[i]))
            return 1;
    return 0;
}

const char *peak_label(uint64_t bytes, int lowered, char *buf, size_t len)
{
    char v[32];
    snprintf(buf, len, "%s%s", lowered ? "^" : "", cushim_format_bytes(bytes, v, sizeof v));
    return buf;
}

/* Invalid segments said one by one; the rest in one line (another user's junk in a shared
 * directory, 400 files, made 400 lines of every cron `stat`: an operator trial). `cushim ps`
 * lists each with its reason. */
#define SAY_INVALID 3

struct collect_arg {
    struct proc_list *l;
    int report;
    int unsaid;             /* invalid segments past SAY_INVALID */
    int named;              /* pids were given */
    struct seg_file *files; /* each listed process's segment file, by index in l->procs */
};

static int add(struct seg_entry *e, void *argp)
{
    struct collect_arg *a = argp;
    if (!e->ok) {
        a->l->bad++;
        if (a->report && a->l->bad <= SAY_INVALID)
            cli_error("skipping %s: %s", e->path, e->err);
        else if (a->report)
            a->unsaid++;
        if (a->named) {
            pid_t *u = realloc(a->l->unreadable, (size_t)(a->l->nunreadable + 1) * sizeof *u);
            if (!u)
                return 1;
            a->l->unreadable = u;
            u[a->l->nunreadable++] = e->pid;
        }
        return 0;
    }
    if (e->stale) {
        a->l->stale += seg_left_of(&e->snap, e->ino) == SEG_LEFT_STALE; /* not exited, nor a copy */
        if (a->named) {
            struct proc_gone *g = realloc(a->l->gone, (size_t)(a->l->ngone + 1) * sizeof *g);
            if (!g)
                return 1;
            a->l->gone = g;
            char *path = strdup(e->path);
            if (!path)
                return 1;
            g[a->l->ngone++] = (struct proc_gone){e->snap.pid, path, seg_left_of(&e->snap, e->ino),
                                                  seg_collecting_run(&e->snap)};
        }
        return 0;
    }
    struct cushim_snapshot *grown = realloc(a->l->procs, (size_t)(a->l->count + 1) * sizeof *grown);
    if (!grown)
        return 1;
    a->l->procs = grown;
    struct seg_file *files = realloc(a->files, (size_t)(a->l->count + 1) * sizeof *files);
    if (!files)
        return 1;
    a->files = files;
    files[a->l->count] = seg_file_of(e);
    files[a->l->count].path = strdup(e->path);
    a->l->procs[a->l->count] = e->snap;
    a->l->procs[a->l->count++].file_uid = e->uid;
    return 0;
}

struct seg_file seg_file_of(struct seg_entry *e)
{
    return (struct seg_file){e->snap.pid, e->snap.other_pidns ? e->snap.host_pid : e->snap.pid,
                             e->snap.start_time, e->snap.pidns_inode, e->dev, e->ino, e->copy, e->path};
}

static const struct seg_file *sort_base;

static int by_process(const void *x, const void *y)
{
    const struct seg_file *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->start_time != b->start_time)
        return a->start_time < b->start_time ? -1 : 1;
    if (a->pidns != b->pidns)
        return a->pidns < b->pidns ? -1 : 1;
    return *(const int *)x - *(const int *)y; /* listing order within a process */
}

static int same_process(const struct seg_file *x, const struct seg_file *y)
{
    return x->pid == y->pid && x->start_time == y->start_time && x->pidns == y->pidns;
}

/* Of the files idx[i..j) of one process, keeps one, the plain name first (a copy's name has a
 * suffix), else the first listed; the others get verdict v. */
static void keep_one(const struct seg_file *f, const int *idx, int i, int j, char *verdict, char v)
{
    int keep = i;
    for (int k = i; k < j; k++) {
        const char *base = f[idx[k]].path ? strrchr(f[idx[k]].path, '/') : NULL;
        if (base && !strchr(base, '.')) {
            keep = k;
            break;
        }
    }
    for (int k = i; k < j; k++)
        verdict[idx[k]] = k == keep ? 0 : v;
}

void seg_find_copies(const struct seg_file *f, int n, char *verdict)
{
    memset(verdict, 0, (size_t)n);
    /* A file whose header names another file is a copy, alone or not (its writer's own was
     * removed or replaced); the others are judged among themselves below. */
    int live = 0;
    for (int i = 0; i < n; i++)
        live += !(verdict[i] = f[i].copy ? 1 : 0);
    int *idx = live > 1 ? malloc((size_t)live * sizeof *idx) : NULL;
    if (!idx)
        return;
    for (int i = 0, k = 0; k < live; i++)
        if (!verdict[i])
            idx[k++] = i;
    n = live; /* below, i and j index idx */
    sort_base = f;
    qsort(idx, (size_t)n, sizeof *idx, by_process);
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_process(&f[idx[i]], &f[idx[j]]); j++)
            ;
        if (j - i < 2)
            continue;
        pid_t here = f[idx[i]].here;
        int mapped = 0, unknown = here <= 0; /* a process not visible here: its maps neither */
        for (int k = i; k < j && here > 0; k++) {
            int m = seg_mapped_by(here, f[idx[k]].dev, f[idx[k]].ino);
            mapped |= m == 1;
            unknown |= m < 0;
            verdict[idx[k]] = m == 0;
        }
        if (unknown) {
            /* Which one the process maps cannot be told here (its maps are not readable: an
             * exporter with CAP_DAC_READ_SEARCH only): one of them is kept, so the process is
             * listed and exported once. */
            keep_one(f, idx, i, j, verdict, 3);
            continue;
        }
        if (!mapped) {
            /* It maps none of them (an image before an exec that made no segment of its own, or
             * files its user made): one is kept all the same, so the process is listed, summed
             * and exported once (an attack trial: two made-up files of one live process counted
             * it twice in root's top, and gave Prometheus duplicate series). */
            keep_one(f, idx, i, j, verdict, 4);
            continue;
        }
        /* A hard link: the same file under another name. */
        for (int k = i + 1; k < j; k++)
            for (int q = i; q < k && !verdict[idx[k]]; q++)
                if (!verdict[idx[q]] && f[idx[q]].ino == f[idx[k]].ino && f[idx[q]].dev == f[idx[k]].dev)
                    verdict[idx[k]] = 2;
    }
    free(idx);
}

/* Several live segments of one process: the copies (seg_find_copies) are dropped, counted, and
 * said when reporting, so that it is listed, summed and exported once. */
static void drop_copies(struct collect_arg *a)
{
    struct proc_list *l = a->l;
    int n = l->count;
    char *verdict = n > 0 ? malloc((size_t)n) : NULL;
    if (!verdict)
        return;
    seg_find_copies(a->files, n, verdict);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (verdict[i]) {
            l->copies++;
            if (a->report && (verdict[i] == 3 || verdict[i] == 4))
                cli_error("skipping %s: one of several segments of process %d, %s: another is listed",
                          a->files[i].path ? a->files[i].path : "?",
                          (int)(a->files[i].here > 0 ? a->files[i].here : a->files[i].pid),
                          verdict[i] == 3 ? "whose /proc/PID/maps cannot be read here to tell which it maps"
                                          : "which maps none of them");
            else if (a->report)
                cli_error("skipping %s: %s process %d's segment%s", a->files[i].path ? a->files[i].path : "?",
                          verdict[i] == 2 ? "another name of" : "a copy of",
                          (int)(a->files[i].here > 0 ? a->files[i].here : a->files[i].pid),
                          verdict[i] == 2 ? "" : " (the process maps another)");
            /* A process asked for by pid whose only file is a copy: said as unreadable, not as
             * missing (stat's "cannot be read (said above)"). */
            if (a->named && a->files[i].copy) {
                pid_t *u = realloc(l->unreadable, (size_t)(l->nunreadable + 1) * sizeof *u);
                if (u) {
                    l->unreadable = u;
                    u[l->nunreadable++] = a->files[i].pid;
                }
            }
            continue;
        }
        l->procs[kept++] = l->procs[i];
    }
    l->count = kept;
    free(verdict);
}

static int by_device_bytes(const void *x, const void *y)
{
    uint64_t a = proc_sum(x, CUSHIM_DEV_total_current), b = proc_sum(y, CUSHIM_DEV_total_current);
    if (a != b)
        return a > b ? -1 : 1;
    return ((const struct cushim_snapshot *)x)->pid - ((const struct cushim_snapshot *)y)->pid;
}

int proc_list_collect(struct proc_list *l, const pid_t *pids, int npids, int report)
{
    struct collect_arg a = {l, report, 0, npids > 0, NULL};
    memset(l, 0, sizeof *l);
    l->dir_unreadable = seg_scan(pids, npids, add, &a) < 0;
    if (a.unsaid)
        cli_error("skipping %d more invalid segment%s (`cushim ps` lists each with its reason)", a.unsaid,
                  a.unsaid == 1 ? "" : "s");
    int added = l->count;
    drop_copies(&a);
    for (int i = 0; i < added; i++)
        free(a.files[i].path);
    free(a.files);
    if (l->count > 1) /* qsort takes no NULL array, even of 0 elements (C17 7.22.5) */
        qsort(l->procs, (size_t)l->count, sizeof *l->procs, by_device_bytes);
    return l->count;
}

void proc_list_free(struct proc_list *l)
{
    free(l->procs);
    for (int i = 0; i < l->ngone; i++)
        free(l->gone[i].path);
    free(l->gone);
    free(l->unreadable);
    memset(l, 0, sizeof *l);
}

const char *user_label(uint32_t uid, bool *named)
{
    static struct {
        uint32_t uid;
        bool named;
        char name[33];
    } seen[32];
    static int nseen, next;
    int i = 0;
    while (i < nseen && seen[i].uid != uid)
        i++;
    if (i == nseen) {
        i = nseen < 32 ? nseen++ : next++ % 32;
        struct passwd *pw = getpwuid((uid_t)uid);
        seen[i].uid = uid;
        seen[i].named = pw != NULL;
        if (pw)
            snprintf(seen[i].name, sizeof seen[i].name, "%s", pw->pw_name);
        else
            snprintf(seen[i].name, sizeof seen[i].name, "%u", (unsigned)uid);
    }
    if (named)
        *named = seen[i].named;
    return seen[i].name;
}

const char *user_column(uint32_t uid, char *buf, size_t len)
{
    const char *name = user_label(uid, NULL);
    size_t n = strlen(name);
    if (n <= USER_COLUMN) {
        snprintf(buf, len, "%s", name);
        return buf;
    }
    n = USER_COLUMN - 1;
    while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80) /* not inside a UTF-8 character */
        n--;
    snprintf(buf, len, "%.*s+", (int)n, name);
    return buf;
}
