#include "common/report.h"

#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "common/units.h"

static const char *kind_names[CUSHIM_KIND_COUNT] = {
#define CUSHIM_X_NAME(e, name, total, desc) #name,
    CUSHIM_KINDS(CUSHIM_X_NAME)
#undef CUSHIM_X_NAME
};

static const char *stat_names[CUSHIM_STAT_COUNT] = {
#define CUSHIM_X_NAME(f, p, t, h) #f,
    CUSHIM_KIND_STATS(CUSHIM_X_NAME)
#undef CUSHIM_X_NAME
};

static const struct {
    const char *group;
    const char *name;
} dev_names[CUSHIM_DEV_STAT_COUNT] = {
#define CUSHIM_X_NAME(f, g, n, p, l, t, h) {#g, #n},
    CUSHIM_DEVICE_STATS(CUSHIM_X_NAME)
#undef CUSHIM_X_NAME
};

static void json_device(struct jsonw *w, const struct cushim_device_snapshot *d)
{
    char uuid[48];
    jsonw_object_begin(w, NULL);
    jsonw_i64(w, "ordinal", d->ordinal);
    jsonw_string(w, "uuid", d->identified ? cushim_format_uuid(d->uuid, uuid, sizeof uuid) : NULL);
    jsonw_u64(w, "total_bytes", d->total_bytes);
    jsonw_u64(w, "untracked_bytes", d->untracked_bytes);
    jsonw_u64(w, "untracked_sampled_ns", d->untracked_sampled_ns);
    for (unsigned k = 0; k < CUSHIM_KIND_COUNT; k++) {
        jsonw_object_begin(w, kind_names[k]);
        for (unsigned s = 0; s < CUSHIM_STAT_COUNT; s++) {
            if (s == CUSHIM_STAT_spill_count && k != CUSHIM_KIND_OFFLOADED)
                continue;
            jsonw_u64(w, stat_names[s], d->kinds[k][s]);
        }
        jsonw_object_end(w);
    }
    /* One object per group, in the order groups first appear; a field appended to the list later
     * (stats.h: new fields go at the end) still lands in its group's object. */
    for (unsigned s = 0; s < CUSHIM_DEV_STAT_COUNT; s++) {
        bool seen = false;
        for (unsigned e = 0; e < s && !seen; e++)
            seen = strcmp(dev_names[e].group, dev_names[s].group) == 0;
        if (seen)
            continue;
        jsonw_object_begin(w, dev_names[s].group);
        for (unsigned t = s; t < CUSHIM_DEV_STAT_COUNT; t++)
            if (strcmp(dev_names[t].group, dev_names[s].group) == 0)
                jsonw_u64(w, dev_names[t].name, d->dev[t]);
        jsonw_object_end(w);
    }
    jsonw_object_end(w);
}

/* "live_at_exit": what the process had not freed at its exit report (snapshot.h held_*), null
 * while it does not say (alive, or ended without the report). */
static void json_live(struct jsonw *w, const struct cushim_snapshot *s)
{
    if (!s->live_known) {
        jsonw_string(w, "live_at_exit", NULL);
        return;
    }
    jsonw_object_begin(w, "live_at_exit");
    jsonw_u64(w, "count", s->live_count);
    jsonw_u64(w, "bytes", s->live_bytes);
    jsonw_array_begin(w, "largest");
    for (uint32_t i = 0; i < s->live_listed; i++) {
        const struct cushim_live_snapshot *h = &s->live[i];
        char address[24], handle[24];
        uint64_t at = cushim_live_address(h);
        snprintf(address, sizeof address, "0x%llx", (unsigned long long)at);
        snprintf(handle, sizeof handle, "0x%llx", (unsigned long long)h->key);
        jsonw_object_begin(w, NULL);
        jsonw_i64(w, "device", h->device);
        jsonw_string(w, "kind", kind_names[h->kind]);
        jsonw_u64(w, "bytes", h->bytes);
        jsonw_string(w, "address", at ? address : NULL);
        jsonw_string(w, "handle", h->flags & CUSHIM_LIVE_F_HANDLE ? handle : NULL);
        jsonw_bool(w, "capture", (h->flags & CUSHIM_LIVE_F_CAPTURE) != 0);
        jsonw_object_end(w);
    }
    jsonw_array_end(w);
    jsonw_object_end(w);
}

void cushim_json_identity(struct jsonw *w, const struct cushim_snapshot *s)
{
    jsonw_i64(w, "pid", s->pid);
    jsonw_u64(w, "pid_namespace", s->pidns_inode);
    if (s->other_pidns) {
        /* Read from another pid namespace (a container's process, on the host). */
        if (s->host_pid)
            jsonw_i64(w, "host_pid", s->host_pid);
        else
            jsonw_string(w, "host_pid", NULL);
    }
}

void cushim_json_process(struct jsonw *w, const char *key, const struct cushim_snapshot *s,
                         int close)
{
    jsonw_object_begin(w, key);
    jsonw_string(w, "cushim_version", s->version);
    cushim_json_identity(w, s);
    /* The process's effective uid as it began counting, in its own user namespace (ps --json
     * gives the file's owner as the reader sees it); UINT32_MAX: not known (no segment). */
    if (s->uid != UINT32_MAX)
        jsonw_u64(w, "uid", s->uid);
    else
        jsonw_string(w, "uid", NULL);
    jsonw_string(w, "command", s->command);
    jsonw_string(w, "phase", cushim_phase_name(s->phase));
    jsonw_string(w, "phase_requested", cushim_phase_requested(s));
    jsonw_string(w, "offload", cushim_offload_label(s->flags));
    jsonw_bool(w, "spill", (s->flags & CUSHIM_SEG_F_SPILL) != 0);
    jsonw_bool(w, "exited", (int)s->exited);
    jsonw_bool(w, "counters_torn", s->torn > 0);
    jsonw_array_begin(w, "incomplete");
    if (s->incomplete & CUSHIM_INCOMPLETE_TABLE)
        jsonw_string(w, NULL, "table");
    if (s->incomplete & CUSHIM_INCOMPLETE_POOLS)
        jsonw_string(w, NULL, "pools");
    if (s->incomplete & CUSHIM_INCOMPLETE_CAPTURES)
        jsonw_string(w, NULL, "captures");
    jsonw_array_end(w);
    if (s->read_ns)
        jsonw_u64(w, "read_ns", s->read_ns);
    else
        jsonw_string(w, "read_ns", NULL); /* no counters were read (a program under `cushim run` that used no CUDA) */
    jsonw_array_begin(w, "devices");
    for (uint32_t i = 0; i < s->device_count; i++)
        json_device(w, &s->devices[i]);
    jsonw_array_end(w);
    jsonw_array_begin(w, "executable_graphs");
    for (uint32_t i = 0; i < s->graph_count; i++) {
        const struct cushim_graph_snapshot *g = &s->graphs[i];
        jsonw_object_begin(w, NULL);
        jsonw_u64(w, "id", g->id);
        jsonw_i64(w, "device", g->device);
        jsonw_bool(w, "alive", g->alive);
        jsonw_u64(w, "instantiated_ns", g->instantiated_ns);
        jsonw_u64(w, "destroyed_ns", g->destroyed_ns);
        jsonw_u64(w, "launches", g->launches);
        jsonw_u64(w, "alloc_node_bytes", g->alloc_node_bytes);
        jsonw_u64(w, "capture_bytes", g->capture_bytes);
        jsonw_object_end(w);
    }
    jsonw_array_end(w);
    json_live(w, s);
    if (close)
        jsonw_object_end(w);
}

static int kind_active(const struct cushim_device_snapshot *d, unsigned k)
{
    for (unsigned s = 0; s < CUSHIM_STAT_COUNT; s++)
        if (d->kinds[k][s])
            return 1;
    return 0;
}

static const char *fmt(uint64_t v, char *buf, size_t len)
{
    return cushim_format_bytes(v, buf, len);
}

/* Pools are sampled from the driver now and then (pools.h, graph.c), not counted call by call:
 * a live view says how old the sample is ("" for a process that has exited, whose figures were
 * sampled at its exit). */
static const char *read_age(const struct cushim_snapshot *s, uint64_t at, char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    buf[0] = '\0';
    if (s->exited || s->over)
        return buf; /* figures as of its end */
    if (!at)
        snprintf(buf, len, " (not sampled yet)");
    else if (now >= at)
        snprintf(buf, len, " (the driver's figures %.1f s ago)", (double)(now - at) / 1e9);
    return buf;
}

_Static_assert(CUSHIM_DEV_graph_pool_used_high == CUSHIM_DEV_graph_pool_used_current + 1 &&
                   CUSHIM_DEV_graph_pool_reserved_current == CUSHIM_DEV_graph_pool_used_current + 2 &&
                   CUSHIM_DEV_graph_pool_reserved_high == CUSHIM_DEV_graph_pool_used_current + 3 &&
                   CUSHIM_DEV_async_pool_used_high == CUSHIM_DEV_async_pool_used_current + 1 &&
                   CUSHIM_DEV_async_pool_reserved_current == CUSHIM_DEV_async_pool_used_current + 2 &&
                   CUSHIM_DEV_async_pool_reserved_high == CUSHIM_DEV_async_pool_used_current + 3,
               "pool stats: used current, used high, reserved current, reserved high (stats.h)");

/* One pool line: its four figures (stats.h order from `used`: used current, used high, reserved
 * current, reserved high) and how old they are. */
static void pool_line(FILE *f, const struct cushim_snapshot *s, const struct cushim_device_snapshot *d,
                      const char *label, unsigned used, unsigned sampled)
{
    char a[32], b[32], c[32], e[32], age[64];
    fprintf(f, "    %s: reserved %s (high %s), in use %s (high %s)%s\n", label,
            fmt(d->dev[used + 2], a, sizeof a), fmt(d->dev[used + 3], b, sizeof b),
            fmt(d->dev[used], c, sizeof c), fmt(d->dev[used + 1], e, sizeof e),
            read_age(s, d->dev[sampled], age, sizeof age));
}

/* What the process had not freed at its exit report, the largest listed (nothing while it does
 * not say). */
static void text_live(FILE *f, const struct cushim_snapshot *s)
{
    char a[32], b[32];
    if (!s->live_known) {
        /* Exited, yet no list: from inside a CUDA call, or replaced by exec (shim/exit.c). */
        if (s->exited)
            fprintf(f, "  live at exit: not listed (the process exited from inside a CUDA call, or exec'd)\n");
        return;
    }
    if (!s->live_count) {
        fprintf(f, "  live at exit: no allocation\n");
        return;
    }
    fprintf(f, "  live at exit: %llu allocation%s, %s (not freed when the exit report was written: leaks, or what a cache keeps to the end)\n",
            (unsigned long long)s->live_count, s->live_count == 1 ? "" : "s",
            fmt(s->live_bytes, a, sizeof a));
    fprintf(f, "    %6s  %-16s %12s  %s\n", "device", "kind", "bytes", "address");
    uint64_t shown = 0;
    for (uint32_t i = 0; i < s->live_listed; i++) {
        const struct cushim_live_snapshot *h = &s->live[i];
        /* The address the program uses; an array, or a VMM handle not mapped, by its handle. */
        char where[64];
        uint64_t at = cushim_live_address(h);
        if (!(h->flags & CUSHIM_LIVE_F_HANDLE))
            snprintf(where, sizeof where, "0x%llx", (unsigned long long)at);
        else if (at)
            snprintf(where, sizeof where, "0x%llx (handle 0x%llx)", (unsigned long long)at,
                     (unsigned long long)h->key);
        else
            snprintf(where, sizeof where, "handle 0x%llx", (unsigned long long)h->key);
        fprintf(f, "    %6d  %-16s %12s  %s%s\n", h->device, kind_names[h->kind], fmt(h->bytes, a, sizeof a),
                where, h->flags & CUSHIM_LIVE_F_CAPTURE ? "  (made during a stream capture)" : "");
        shown += h->bytes;
    }
    if (s->live_count > s->live_listed)
        fprintf(f, "    ... and %llu more, %s\n",
                (unsigned long long)(s->live_count - s->live_listed),
                fmt(s->live_bytes - shown, b, sizeof b));
}

void cushim_text_process(FILE *f, const struct cushim_snapshot *s, const char *title)
{
    char a[32], b[32], c[32], u[48], cmd[CUSHIM_COMMAND_MAX * 2];
    /* A command line may hold any bytes: never send control characters to a terminal. Escaped as
     * in the run's messages (`python3 -c 'a\nb'` shows its \n in both; found by a fresh-user trial:
     * the summary said "?"); ps and top columns show '?', as ps(1) does. */
    cushim_text_escaped(s->command, cmd, sizeof cmd);
    char phase[32];
    cushim_phase_label(s, phase, sizeof phase);
    char who[96];
    if (!s->other_pidns)
        snprintf(who, sizeof who, "pid %d", (int)s->pid);
    else if (s->host_pid)
        snprintf(who, sizeof who, "pid %d (pid %d of pid namespace %llu)", (int)s->host_pid, (int)s->pid,
                 (unsigned long long)s->pidns_inode);
    else
        snprintf(who, sizeof who, "pid %d of pid namespace %llu (not visible here)", (int)s->pid,
                 (unsigned long long)s->pidns_inode);
    const char *offload = cushim_offload_label(s->flags);
    char used[32];
    if (s->device_count)
        snprintf(used, sizeof used, "%u device%s", s->device_count, s->device_count == 1 ? "" : "s");
    else /* CUDA not used (the shim started by cushim.h's calls, a phase set) */
        snprintf(used, sizeof used, "no device used%s", s->exited || s->over ? "" : " yet");
    fprintf(f, "%s%s `%s`: %s, phase %s%s%s%s%s\n", title ? title : "", who, cmd, used, phase,
            !strchr(phase, '>')     ? ""
            : s->exited || s->over ? " (requested; no allocation came after it to take it)"
                                   : " (requested, at the next allocation)",
            strcmp(offload, "off") ? ", offload " : "", strcmp(offload, "off") ? offload : "",
            s->flags & CUSHIM_SEG_F_SPILL ? ", spill on" : "");
    if (s->incomplete) /* the JSON's "incomplete", in words */
        fprintf(f, "  figures incomplete (the shim ran out of memory for its tables):%s%s%s\n",
                s->incomplete & CUSHIM_INCOMPLETE_TABLE ? " allocations not kept" : "",
                s->incomplete & CUSHIM_INCOMPLETE_POOLS ? (s->incomplete & CUSHIM_INCOMPLETE_TABLE ? ", memory pools not recorded" : " memory pools not recorded") : "",
                s->incomplete & CUSHIM_INCOMPLETE_CAPTURES ? (s->incomplete & (CUSHIM_INCOMPLETE_TABLE | CUSHIM_INCOMPLETE_POOLS) ? ", captures not recorded" : " captures not recorded") : "");
    for (uint32_t i = 0; i < s->device_count; i++) {
        const struct cushim_device_snapshot *d = &s->devices[i];
        /* "memory", as top's MEMORY column: "total" beside device_total read as the process's
         * (a fresh-user trial). */
        fprintf(f, "  device %d  %s  memory %s  untracked %s", d->ordinal,
                d->identified ? cushim_format_uuid(d->uuid, u, sizeof u) : "(uuid unknown)",
                fmt(d->total_bytes, a, sizeof a),
                d->untracked_sampled_ns ? fmt(d->untracked_bytes, b, sizeof b)
                : s->exited || s->over  ? "never sampled"
                                        : "not sampled yet (at the program's next cudaMemGetInfo, or its exit)");
        if (d->dev[CUSHIM_DEV_limit])
            /* A budget above the device's memory is the device's memory (cudaMemGetInfo says so).
             * Held: what a request must fit beside (stats.h limit_held), more than device_total
             * by the pools' reserves. */
            fprintf(f, "  limit %s%s, held %s", fmt(d->dev[CUSHIM_DEV_limit], a, sizeof a),
                    d->total_bytes && d->dev[CUSHIM_DEV_limit] > d->total_bytes ? " (above the device's memory)" : "",
                    fmt(d->dev[CUSHIM_DEV_limit_held], b, sizeof b));
        /* With spill on, a refusal is not the program's failure where spill served it (the
         * offloaded row's "spilled"; a fresh-user trial read "refused" as failed). */
        if (d->dev[CUSHIM_DEV_limit_refused])
            fprintf(f, " (%llu request%s refused%s)", (unsigned long long)d->dev[CUSHIM_DEV_limit_refused],
                    d->dev[CUSHIM_DEV_limit_refused] == 1 ? "" : "s",
                    s->flags & CUSHIM_SEG_F_SPILL ? ", spilled where spill serves them" : "");
        fputc('\n', f);
        fprintf(f, "    %-16s %12s %12s %10s %10s %8s\n", "kind", "current", "peak", "allocs",
                "frees", "failed");
        for (unsigned k = 0; k < CUSHIM_KIND_COUNT; k++) {
            if (!kind_active(d, k))
                continue;
            const uint64_t *v = d->kinds[k];
            fprintf(f, "    %-16s %12s %12s %10llu %10llu %8llu", kind_names[k],
                    fmt(v[CUSHIM_STAT_current_bytes], a, sizeof a),
                    fmt(v[CUSHIM_STAT_peak_bytes], b, sizeof b),
                    (unsigned long long)v[CUSHIM_STAT_alloc_count],
                    (unsigned long long)v[CUSHIM_STAT_free_count],
                    (unsigned long long)v[CUSHIM_STAT_failed_count]);
            if (v[CUSHIM_STAT_spill_count])
                fprintf(f, "  (%llu spilled)", (unsigned long long)v[CUSHIM_STAT_spill_count]);
            fputc('\n', f);
        }
        fprintf(f, "    %-16s %12s %12s\n", "device_total",
                fmt(d->dev[CUSHIM_DEV_total_current], a, sizeof a),
                fmt(d->dev[CUSHIM_DEV_total_peak], b, sizeof b));
        /* Graph memory is the driver's pool, sampled, not in device_total (a framework trial read
         * device_total's peak alone to size a KV cache beside CUDA graphs): the sum beside it, its
         * peak an upper bound (the two highs need not have come at once; saturating). */
        if (d->dev[CUSHIM_DEV_graph_pool_reserved_high]) {
            uint64_t cur = d->dev[CUSHIM_DEV_total_current], gc = d->dev[CUSHIM_DEV_graph_pool_reserved_current];
            uint64_t pk = d->dev[CUSHIM_DEV_total_peak], gh = d->dev[CUSHIM_DEV_graph_pool_reserved_high];
            char p[40];
            snprintf(p, sizeof p, "<= %s", fmt(pk + gh < pk ? UINT64_MAX : pk + gh, b, sizeof b));
            fprintf(f, "    %-16s %12s %12s  (with the graph pool's reserve; its peak an upper bound)\n",
                    "+ graph pool", fmt(cur + gc < cur ? UINT64_MAX : cur + gc, a, sizeof a), p);
        }
        if (d->dev[CUSHIM_DEV_peak_reset_count])
            fprintf(f, "    the peaks above are since the last peak reset (%llu reset%s); device_total's "
                    "lifetime peak (never reset): %s\n",
                    (unsigned long long)d->dev[CUSHIM_DEV_peak_reset_count],
                    d->dev[CUSHIM_DEV_peak_reset_count] == 1 ? "" : "s",
                    fmt(d->dev[CUSHIM_DEV_lifetime_peak], a, sizeof a));
        /* Only where a compile phase held memory: a run that never compiled (spill, offload
         * always) has one phase, and its peaks are the lines above. */
        if (d->dev[CUSHIM_DEV_compile_peak] || d->dev[CUSHIM_DEV_compile_offloaded_peak])
            fprintf(f, "    phase peaks: compile device_total %s offloaded %s; run device_total %s offloaded %s\n",
                    fmt(d->dev[CUSHIM_DEV_compile_peak], a, sizeof a),
                    fmt(d->dev[CUSHIM_DEV_compile_offloaded_peak], b, sizeof b),
                    fmt(d->dev[CUSHIM_DEV_run_peak], c, sizeof c),
                    fmt(d->dev[CUSHIM_DEV_run_offloaded_peak], u, sizeof u));
        if (d->dev[CUSHIM_DEV_resident_offloaded_count])
            fprintf(f, "    offloaded in compile, still in host memory: %llu allocation%s, %s\n",
                    (unsigned long long)d->dev[CUSHIM_DEV_resident_offloaded_count],
                    d->dev[CUSHIM_DEV_resident_offloaded_count] == 1 ? "" : "s",
                    fmt(d->dev[CUSHIM_DEV_resident_offloaded_bytes], a, sizeof a));
        if (d->dev[CUSHIM_DEV_offload_cached_bytes] || d->dev[CUSHIM_DEV_offload_pending_free_bytes])
            fprintf(f, "    offload host memory beyond live allocations: cached for reuse %s, "
                    "pending free %s\n", fmt(d->dev[CUSHIM_DEV_offload_cached_bytes], a, sizeof a),
                    fmt(d->dev[CUSHIM_DEV_offload_pending_free_bytes], b, sizeof b));
        /* Also a device with allocation nodes only (of graphs instantiated on another: a
         * fresh-user trial found the text without them, the JSON with). */
        if (d->dev[CUSHIM_DEV_graphs_instantiated] || d->dev[CUSHIM_DEV_graphs_captured] ||
            d->dev[CUSHIM_DEV_graph_alloc_node_bytes]) {
            fprintf(f, "    graphs: %llu captured, %llu instantiated, %llu alive, launches %llu; "
                    "alloc nodes %s\n",
                    (unsigned long long)d->dev[CUSHIM_DEV_graphs_captured],
                    (unsigned long long)d->dev[CUSHIM_DEV_graphs_instantiated],
                    (unsigned long long)d->dev[CUSHIM_DEV_graph_execs_alive],
                    (unsigned long long)d->dev[CUSHIM_DEV_graph_launches],
                    fmt(d->dev[CUSHIM_DEV_graph_alloc_node_bytes], a, sizeof a));
            pool_line(f, s, d, "graph pool", CUSHIM_DEV_graph_pool_used_current, CUSHIM_DEV_graph_pool_sampled_ns);
        } else if (d->dev[CUSHIM_DEV_graph_pool_reserved_high]) {
            /* Graph memory of graphs instantiated on another device (allocation nodes draw on the
             * pool their poolProps name): the pool holds it all the same. */
            pool_line(f, s, d, "graph pool", CUSHIM_DEV_graph_pool_used_current, CUSHIM_DEV_graph_pool_sampled_ns);
        }
        if (d->dev[CUSHIM_DEV_async_pool_reserved_high])
            pool_line(f, s, d, "async pools", CUSHIM_DEV_async_pool_used_current, CUSHIM_DEV_async_pool_sampled_ns);
    }
    if (s->graph_count) {
        fprintf(f, "  %-6s %-6s %-9s %10s %14s %14s\n", "graph", "device", "state", "launches",
                "alloc nodes", "capture");
        /* The live graphs first, then destroyed ones, 20 rows in all (a fresh-user trial: a
         * server's live graphs were hidden behind 20 destroyed ones). */
        uint32_t shown = 0;
        for (int alive = 1; alive >= 0; alive--)
            for (uint32_t i = 0; i < s->graph_count && shown < 20; i++) {
                const struct cushim_graph_snapshot *g = &s->graphs[i];
                if (!g->alive != !alive)
                    continue;
                fprintf(f, "  %-6llu %-6d %-9s %10llu %14s %14s\n", (unsigned long long)g->id,
                        g->device, g->alive ? "alive" : "destroyed", (unsigned long long)g->launches,
                        fmt(g->alloc_node_bytes, a, sizeof a), fmt(g->capture_bytes, b, sizeof b));
                shown++;
            }
        if (s->graph_count > 20)
            fprintf(f, "  ... %u more graphs in the JSON summary\n", s->graph_count - 20);
    }
    text_live(f, s);
    if (s->torn)
        fprintf(f, "  (counters of %u device%s copied while an update was cut short, the process stopped "
                "in the middle of one: they may be off by the allocations in flight)\n", s->torn,
                s->torn == 1 ? "" : "s");
}
