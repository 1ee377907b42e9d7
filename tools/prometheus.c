#include "tools/prometheus.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "common/text.h"

static const struct {
    const char *name, *type, *help;
} kind_metrics[CUSHIM_STAT_COUNT] = {
#define X_KM(f, p, t, h) {p, #t, h},
    CUSHIM_KIND_STATS(X_KM)
#undef X_KM
};

static const struct {
    const char *name, *labels, *type, *help;
} dev_metrics[CUSHIM_DEV_STAT_COUNT] = {
#define X_DM(f, g, n, p, l, t, h) {p, l, #t, h},
    CUSHIM_DEVICE_STATS(X_DM)
#undef X_DM
};

static const char *kind_names[CUSHIM_KIND_COUNT] = {
#define X_KN(e, name, total, desc) #name,
    CUSHIM_KINDS(X_KN)
#undef X_KN
};

/* A label value (exposition format: UTF-8, with backslash, double quote and newline escaped):
 * the first `max` bytes of s, a byte that is not valid UTF-8 and any other control character
 * written as U+FFFD (a command line may hold any bytes; one invalid label loses the scrape). */
static void escaped(FILE *f, const char *s, size_t max)
{
    for (size_t i = 0; s[i] && i < max;) {
        const unsigned char *p = (const unsigned char *)s + i;
        int n = cushim_utf8_len(p);
        if (n > 0 && i + (size_t)n > max)
            break;
        if (*p == '\\' || *p == '"')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f)) || (n == 2 && p[0] == 0xc2 && p[1] < 0xa0))
            fputs("\xef\xbf\xbd", f);
        else
            fwrite(p, 1, (size_t)n, f);
        i += n ? (size_t)n : 1;
    }
}

/* The exposition being written: what its command labels hold (prometheus_write's argument). */
static enum prom_command command_label;

/* A process's labels: the pid as seen here (a container's process by its host pid, or by its
 * own when not visible here); one of another pid namespace also carries that namespace (pidns),
 * so two containers' pid 1 are two series; the command, as command_label says. */
static void process_labels(FILE *f, const struct cushim_snapshot *p)
{
    fprintf(f, "pid=\"%d\"", (int)(p->other_pidns && p->host_pid ? p->host_pid : p->pid));
    if (p->other_pidns)
        fprintf(f, ",pidns=\"%llu\"", (unsigned long long)p->pidns_inode);
    if (command_label == PROM_COMMAND_NONE)
        return;
    const char *c = p->command;
    size_t max = 64;
    if (command_label == PROM_COMMAND_NAME) {
        /* The program's file name: the last part of the command's first word. */
        size_t word = strcspn(p->command, " ");
        for (size_t i = 0; i + 1 < word; i++)
            if (p->command[i] == '/')
                c = p->command + i + 1;
        max = word - (size_t)(c - p->command);
        max = max < 64 ? max : 64;
    }
    fprintf(f, ",command=\"");
    escaped(f, c, max);
    fputc('"', f);
}

int prometheus_parse_command_label(const char *opt, const char *v, enum prom_command *out)
{
    static const char *const names[] = {"full", "name", "none"};
    for (int i = 0; i < 3; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = (enum prom_command)i;
            return 0;
        }
    cli_error("%s %s is not one of full (the command line's first 64 bytes), name (the program's file "
              "name) or none (no command label)", opt, cli_shown(v));
    return -1;
}

static void labels(FILE *f, const struct cushim_snapshot *p, const struct cushim_device_snapshot *d)
{
    char uuid[48];
    process_labels(f, p);
    fprintf(f, ",device=\"%d\",uuid=\"%s\"", d->ordinal,
            d->identified ? cushim_format_uuid(d->uuid, uuid, sizeof uuid) : "");
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP cushim_%s %s\n# TYPE cushim_%s %s\n", name, help, name, type);
}

/* Labels of one executable graph: the process's, its device's, and graph="id". */
static void graph_labels(FILE *f, const struct cushim_snapshot *p, const struct cushim_graph_snapshot *g)
{
    static const struct cushim_device_snapshot none;
    const struct cushim_device_snapshot *d = &none;
    for (uint32_t k = 0; k < p->device_count; k++)
        if (p->devices[k].ordinal == g->device)
            d = &p->devices[k];
    struct cushim_device_snapshot copy = *d;
    copy.ordinal = g->device;
    labels(f, p, &copy);
    fprintf(f, ",graph=\"%llu\"", (unsigned long long)g->id);
}

/* One row per executable graph; a gauge (alive_only) has rows for live graphs only, so that
 * its sum over graphs is the device's figure (graph_alloc_node_bytes); the launch counter keeps
 * a destroyed graph's row (the JSON summary lists both, with their state). */
static void graph_metric(FILE *f, const struct proc_list *l, const char *name, const char *type,
                         const char *help, size_t offset, bool alive_only)
{
    header(f, name, type, help);
    for (int i = 0; i < l->count; i++)
        for (uint32_t k = 0; k < l->procs[i].graph_count; k++) {
            const struct cushim_graph_snapshot *g = &l->procs[i].graphs[k];
            if (alive_only && !g->alive)
                continue;
            fprintf(f, "cushim_%s{", name);
            graph_labels(f, &l->procs[i], g);
            fprintf(f, "} %llu\n", (unsigned long long)*(const uint64_t *)((const char *)g + offset));
        }
}

void prometheus_write(FILE *f, const struct proc_list *l, enum prom_command command)
{
    command_label = command;
    /* Not a process's: segments that were skipped, so that an alert can see them. */
    header(f, "invalid_segments", "gauge",
           "segment files that could not be read (this user's, everyone's as root; under cushim stat PID..., those of the PIDs); cushim ps lists them");
    fprintf(f, "cushim_invalid_segments %d\n", l->bad);
    /* Processes that ended without their exit report (SIGKILL, the OOM killer): an alert on a
     * kill, which otherwise only drops the process's series (an operator trial). Not a segment
     * left with its exit report, nor a copy (cushim ps: exited, copy). */
    header(f, "stale_segments", "gauge",
           "segments of processes that ended without their exit report (killed: SIGKILL, the OOM killer; or _exit), copies not counted; cushim gc removes them");
    fprintf(f, "cushim_stale_segments %d\n", l->stale);
    /* Per process, an info metric (the Prometheus idiom for facts that are labels): who runs it,
     * joined to the other series on pid (`* on(pid) group_left(uid) cushim_process_info`), so that
     * a shared machine's usage sums by user without a uid label on every series. */
    header(f, "process_info", "gauge", "1 per process; label uid: the owner of its segment file (its effective uid at start)");
    for (int i = 0; i < l->count; i++) {
        fputs("cushim_process_info{", f);
        process_labels(f, &l->procs[i]);
        fprintf(f, ",uid=\"%u\"} 1\n", (unsigned)l->procs[i].file_uid);
    }
    /* Per process: the phase, 1 for the one it is in and 0 for the other (stable series). */
    header(f, "phase", "gauge", "the process's phase (offload policy): 1 for the one it is in");
    for (int i = 0; i < l->count; i++)
        for (unsigned ph = 0; ph < CUSHIM_PHASE_COUNT; ph++) {
            fputs("cushim_phase{", f);
            process_labels(f, &l->procs[i]);
            fprintf(f, ",phase=\"%s\"} %d\n", cushim_phase_name(ph), l->procs[i].phase == ph);
        }
    header(f, "device_memory_total_bytes", "gauge", "the device's memory (cuDeviceTotalMem)");
    for (int i = 0; i < l->count; i++)
        for (uint32_t k = 0; k < l->procs[i].device_count; k++) {
            const struct cushim_device_snapshot *d = &l->procs[i].devices[k];
            fputs("cushim_device_memory_total_bytes{", f);
            labels(f, &l->procs[i], d);
            fprintf(f, "} %llu\n", (unsigned long long)d->total_bytes);
        }
    header(f, "untracked_bytes", "gauge",
           "device memory in use that no intercepted call made: (total - free) - device total - graph pool reserve, last sample");
    for (int i = 0; i < l->count; i++)
        for (uint32_t k = 0; k < l->procs[i].device_count; k++) {
            const struct cushim_device_snapshot *d = &l->procs[i].devices[k];
            if (!d->untracked_sampled_ns)
                continue; /* never sampled yet: no value rather than a false 0 */
            fputs("cushim_untracked_bytes{", f);
            labels(f, &l->procs[i], d);
            fprintf(f, "} %llu\n", (unsigned long long)d->untracked_bytes);
        }
    for (unsigned s = 0; s < CUSHIM_STAT_COUNT; s++) {
        header(f, kind_metrics[s].name, kind_metrics[s].type, kind_metrics[s].help);
        for (int i = 0; i < l->count; i++)
            for (uint32_t k = 0; k < l->procs[i].device_count; k++)
                for (unsigned kind = 0; kind < CUSHIM_KIND_COUNT; kind++) {
                    if (s == CUSHIM_STAT_spill_count && kind != CUSHIM_KIND_OFFLOADED)
                        continue;
                    const struct cushim_device_snapshot *d = &l->procs[i].devices[k];
                    fprintf(f, "cushim_%s{", kind_metrics[s].name);
                    labels(f, &l->procs[i], d);
                    fprintf(f, ",kind=\"%s\"} %llu\n", kind_names[kind],
                            (unsigned long long)d->kinds[kind][s]);
                }
    }
    for (unsigned s = 0; s < CUSHIM_DEV_STAT_COUNT; s++) {
        if (!*dev_metrics[s].name)
            continue;
        /* Metrics sharing a name (one per phase) get one header, at their first row. */
        if (s == 0 || strcmp(dev_metrics[s].name, dev_metrics[s - 1].name) != 0)
            header(f, dev_metrics[s].name, dev_metrics[s].type, dev_metrics[s].help);
        bool async_pool = s >= CUSHIM_DEV_async_pool_used_current && s <= CUSHIM_DEV_async_pool_reserved_high;
        bool graph_pool = s >= CUSHIM_DEV_graph_pool_used_current && s <= CUSHIM_DEV_graph_pool_reserved_high;
        for (int i = 0; i < l->count; i++)
            for (uint32_t k = 0; k < l->procs[i].device_count; k++) {
                const struct cushim_device_snapshot *d = &l->procs[i].devices[k];
                /* Pools never read yet: no value rather than a false 0. */
                if ((async_pool && !d->dev[CUSHIM_DEV_async_pool_sampled_ns]) ||
                    (graph_pool && !d->dev[CUSHIM_DEV_graph_pool_sampled_ns]))
                    continue;
                fprintf(f, "cushim_%s{", dev_metrics[s].name);
                labels(f, &l->procs[i], d);
                if (*dev_metrics[s].labels)
                    fprintf(f, ",%s", dev_metrics[s].labels);
                fprintf(f, "} %llu\n", (unsigned long long)d->dev[s]);
            }
    }
    graph_metric(f, l, "graph_exec_launches_total", "counter", "launches of one executable graph",
                 offsetof(struct cushim_graph_snapshot, launches), false);
    graph_metric(f, l, "graph_exec_alloc_node_bytes", "gauge",
                 "bytes of one live executable graph's memory-allocation nodes",
                 offsetof(struct cushim_graph_snapshot, alloc_node_bytes), true);
    graph_metric(f, l, "graph_exec_capture_bytes", "gauge",
                 "bytes allocated while the capture that made one live executable graph was live (a record "
                 "of the capture, not memory held now: not to be summed)",
                 offsetof(struct cushim_graph_snapshot, capture_bytes), true);
}
