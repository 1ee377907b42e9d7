#include "tools/collect.h"

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

struct collect_arg {
    struct proc_list *l;
    int report;
    int named;   /* pids were given */
    ino_t *inos; /* each listed process's segment file, by index in l->procs */
    dev_t *devs;
    char **paths;
};

static int add(struct seg_entry *e, void *argp)
{
    struct collect_arg *a = argp;
    if (!e->ok) {
        a->l->bad++;
        if (a->report)
            cli_error("skipping %s: %s", e->path, e->err);
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
        a->l->stale++;
        if (a->named) {
            struct proc_gone *g = realloc(a->l->gone, (size_t)(a->l->ngone + 1) * sizeof *g);
            if (!g)
                return 1;
            a->l->gone = g;
            char *path = strdup(e->path);
            if (!path)
                return 1;
            g[a->l->ngone++] = (struct proc_gone){e->snap.pid, path};
        }
        return 0;
    }
    struct cushim_snapshot *grown = realloc(a->l->procs, (size_t)(a->l->count + 1) * sizeof *grown);
    if (!grown)
        return 1;
    a->l->procs = grown;
    ino_t *inos = realloc(a->inos, (size_t)(a->l->count + 1) * sizeof *inos);
    if (inos)
        a->inos = inos;
    dev_t *devs = inos ? realloc(a->devs, (size_t)(a->l->count + 1) * sizeof *devs) : NULL;
    if (devs)
        a->devs = devs;
    char **paths = devs ? realloc(a->paths, (size_t)(a->l->count + 1) * sizeof *paths) : NULL;
    if (!paths)
        return 1;
    a->paths = paths;
    inos[a->l->count] = e->ino;
    devs[a->l->count] = e->dev;
    paths[a->l->count] = strdup(e->path);
    a->l->procs[a->l->count++] = e->snap;
    return 0;
}

/* One process: its pid, namespace and start time. */
static int same_process(const struct cushim_snapshot *x, const struct cushim_snapshot *y)
{
    return x->pid == y->pid && x->pidns_inode == y->pidns_inode && x->start_time == y->start_time &&
           x->other_pidns == y->other_pidns;
}

static const struct cushim_snapshot *sort_base;

static int by_process(const void *x, const void *y)
{
    const struct cushim_snapshot *a = &sort_base[*(const int *)x], *b = &sort_base[*(const int *)y];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->start_time != b->start_time)
        return a->start_time < b->start_time ? -1 : 1;
    return a->pidns_inode < b->pidns_inode ? -1 : a->pidns_inode > b->pidns_inode;
}

/* Two live segments of one process (a copy its user made of it, or another name of the same
 * file): a second name of a file already listed, and the files the process does not map, are
 * dropped (counted as copies, and said when reporting), so that it is listed, summed and exported
 * once. Whether a file is mapped that cannot be told (its maps unreadable here, a process not
 * visible here) keeps every file. */
static void drop_copies(struct collect_arg *a)
{
    struct proc_list *l = a->l;
    int n = l->count, *idx = n > 1 ? malloc((size_t)n * sizeof *idx) : NULL;
    char *drop = idx ? calloc((size_t)n, 1) : NULL;
    if (!drop) {
        free(idx);
        return;
    }
    for (int i = 0; i < n; i++)
        idx[i] = i;
    sort_base = l->procs;
    qsort(idx, (size_t)n, sizeof *idx, by_process);
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_process(&l->procs[idx[i]], &l->procs[idx[j]]); j++)
            ;
        const struct cushim_snapshot *s = &l->procs[idx[i]];
        pid_t here = s->other_pidns ? s->host_pid : s->pid;
        if (j - i < 2)
            continue;
        int mapped = 0, unknown = here <= 0; /* a process not visible here: its maps neither */
        for (int k = i; k < j && here > 0; k++) {
            int m = seg_mapped_by(here, a->devs[idx[k]], a->inos[idx[k]]);
            mapped |= m == 1;
            unknown |= m < 0;
            drop[idx[k]] = m == 0;
        }
        for (int k = i; k < j && (!mapped || unknown); k++)
            drop[idx[k]] = 0;
        /* A hard link: the same file under another name. */
        for (int k = i + 1; k < j; k++)
            for (int q = i; q < k && !drop[idx[k]]; q++)
                if (!drop[idx[q]] && a->inos[idx[q]] == a->inos[idx[k]] && a->devs[idx[q]] == a->devs[idx[k]])
                    drop[idx[k]] = 2;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (drop[i]) {
            const struct cushim_snapshot *s = &l->procs[i];
            l->copies++;
            if (a->report)
                cli_error("skipping %s: %s process %d's segment%s", a->paths[i] ? a->paths[i] : "?",
                          drop[i] == 2 ? "another name of" : "a copy of",
                          (int)(s->other_pidns && s->host_pid ? s->host_pid : s->pid),
                          drop[i] == 2 ? "" : " (the process maps another)");
            continue;
        }
        l->procs[kept++] = l->procs[i];
    }
    l->count = kept;
    free(drop);
    free(idx);
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
    struct collect_arg a = {l, report, npids > 0, NULL, NULL, NULL};
    memset(l, 0, sizeof *l);
    l->dir_unreadable = seg_scan(pids, npids, add, &a) < 0;
    int added = l->count;
    drop_copies(&a);
    for (int i = 0; a.paths && i < added; i++)
        free(a.paths[i]);
    free(a.paths);
    free(a.inos);
    free(a.devs);
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
