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
    int named; /* pids were given */
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
    a->l->procs[a->l->count++] = e->snap;
    return 0;
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
    struct collect_arg a = {l, report, npids > 0};
    memset(l, 0, sizeof *l);
    l->dir_unreadable = seg_scan(pids, npids, add, &a) < 0;
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
