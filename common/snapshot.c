#include "common/snapshot.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/seqlock.h"

const char *cushim_phase_requested(const struct cushim_snapshot *s)
{
    return s->phase_requested && s->phase_requested - 1 != s->phase ? cushim_phase_name(s->phase_requested - 1)
                                                                    : NULL;
}

const char *cushim_phase_label(const struct cushim_snapshot *s, char *buf, size_t len)
{
    const char *requested = cushim_phase_requested(s);
    if (requested)
        snprintf(buf, len, "%s>%s", cushim_phase_name(s->phase), requested);
    else
        snprintf(buf, len, "%s", cushim_phase_name(s->phase));
    return buf;
}

const char *cushim_device_list(const struct cushim_snapshot *s, char *buf, size_t len, size_t width)
{
    size_t o = 0;
    uint32_t n = s->device_count;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && o < len;) {
        uint32_t j = i;
        while (j + 1 < n && s->devices[j + 1].ordinal == s->devices[j].ordinal + 1)
            j++;
        if (j > i + 1)
            o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", s->devices[i].ordinal,
                                  s->devices[j].ordinal);
        else
            o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", s->devices[i].ordinal),
                j = i;
        i = j + 1;
    }
    if (n == 0)
        snprintf(buf, len, "-");
    else if (o > width)
        snprintf(buf, len, "%u GPUs", n);
    return buf;
}

const char *cushim_pid_label(const struct cushim_snapshot *s, char *buf, size_t len)
{
    if (s->other_pidns && !s->host_pid)
        snprintf(buf, len, "%d*", (int)s->pid);
    else
        snprintf(buf, len, "%d", (int)(s->other_pidns ? s->host_pid : s->pid));
    return buf;
}

const char *cushim_offload_label(uint32_t flags)
{
    return flags & CUSHIM_SEG_F_OFFLOAD_ALWAYS    ? "always"
           : flags & CUSHIM_SEG_F_OFFLOAD_COMPILE ? "compile"
                                                  : "off";
}

const char *cushim_phase_name(uint32_t phase)
{
    static const char *names[] = {
#define CUSHIM_X_NAME(e, n) #n,
        CUSHIM_PHASES(CUSHIM_X_NAME)
#undef CUSHIM_X_NAME
    };
    return phase < CUSHIM_PHASE_COUNT ? names[phase] : "unknown";
}

char *cushim_format_uuid(const uint8_t u[16], char *buf, size_t len)
{
    snprintf(buf, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
    return buf;
}

#define FAIL(...)                                 \
    do {                                          \
        snprintf(err, errlen, __VA_ARGS__);       \
        return -1;                                \
    } while (0)

static int terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

/* One attempt: 1 when no writer was inside the record's bracket meanwhile. */
static int record_copy_once(struct cushim_device_record *r, void *out)
{
    struct cushim_device_snapshot *d = out;
    uint64_t token = cushim_seq_read_begin(&r->seq_end);
    d->ordinal = r->ordinal;
    d->identified = atomic_load_explicit(&r->state, memory_order_acquire) == 2;
    if (d->identified)
        memcpy(d->uuid, r->uuid, sizeof d->uuid);
    for (unsigned k = 0; k < CUSHIM_KIND_COUNT; k++)
        for (unsigned s = 0; s < CUSHIM_STAT_COUNT; s++)
            d->kinds[k][s] = atomic_load_explicit(&r->kinds[k].v[s], memory_order_relaxed);
    for (unsigned s = 0; s < CUSHIM_DEV_STAT_COUNT; s++)
        d->dev[s] = atomic_load_explicit(&r->dev[s], memory_order_relaxed);
    /* The segment keeps the highest peak a reset took away; the whole life's is the larger of it
     * and the peak since (common/peaks.c). */
    if (d->dev[CUSHIM_DEV_lifetime_peak] < d->dev[CUSHIM_DEV_total_peak])
        d->dev[CUSHIM_DEV_lifetime_peak] = d->dev[CUSHIM_DEV_total_peak];
    d->total_bytes = atomic_load_explicit(&r->total_bytes, memory_order_relaxed);
    d->untracked_bytes = atomic_load_explicit(&r->untracked_bytes, memory_order_relaxed);
    d->untracked_sampled_ns = atomic_load_explicit(&r->untracked_sampled_ns, memory_order_relaxed);
    return cushim_seq_read_valid(&r->seq_begin, token);
}

static uint64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One attempt at the record's raw words, as the atomics they are: 1 when no writer was inside
 * its bracket meanwhile. */
static int record_raw_once(struct cushim_device_record *r, void *out)
{
    uint64_t token = cushim_seq_read_begin(&r->seq_end);
    const uint64_t *from = (const uint64_t *)r;
    uint64_t *to = out;
    for (size_t i = 0; i < sizeof *r / sizeof *from; i++)
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    return cushim_seq_read_valid(&r->seq_begin, token);
}

/* Attempts of `once` into out, with cushim_record_copy's patience as a budget: *left (ns) is what
 * may still be spent, and is lowered by what this copy spent waiting. */
static int record_copy_budget(struct cushim_device_record *r, int (*once)(struct cushim_device_record *, void *),
                              void *out, unsigned spin_limit, uint64_t *left)
{
    for (unsigned attempt = 0; attempt <= spin_limit; attempt++)
        if (once(r, out))
            return 0;
    /* Still busy: a writer the scheduler preempted inside its bracket holds every reader off
     * until it runs again (many allocating threads on few cores). Give up the CPU between
     * rounds, while the budget lasts. */
    if (*left == 0)
        return -1;
    uint64_t start = monotonic_ns(), spent = 0;
    int rc = -1;
    do {
        struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
        for (unsigned attempt = 0; attempt < 64 && rc != 0; attempt++)
            if (once(r, out))
                rc = 0;
        spent = monotonic_ns() - start;
    } while (rc != 0 && spent < *left);
    *left = spent < *left ? *left - spent : 0;
    return rc;
}

int cushim_record_copy(const struct cushim_device_record *rc, struct cushim_device_snapshot *d,
                       unsigned spin_limit, uint64_t patience_ns)
{
    /* The counters are atomics in shared memory: read them as such. */
    uint64_t left = patience_ns;
    return record_copy_budget((struct cushim_device_record *)rc, record_copy_once, d, spin_limit, &left);
}

int cushim_record_settle(const struct cushim_device_record *r, struct cushim_device_record *out,
                         unsigned spin_limit, uint64_t *patience_left)
{
    return record_copy_budget((struct cushim_device_record *)r, record_raw_once, out, spin_limit, patience_left);
}

static int by_id(const void *a, const void *b)
{
    const struct cushim_graph_snapshot *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Graph records in use (alive or destroyed), sorted by id. */
static int copy_graphs(const struct cushim_segment *s, uint32_t count, struct cushim_snapshot *out,
                       char *err, size_t errlen)
{
    out->graph_count = 0;
    for (uint32_t i = 0; i < count; i++) {
        struct cushim_graph_record *g = (struct cushim_graph_record *)&s->graphs[i];
        struct cushim_graph_snapshot *o = &out->graphs[out->graph_count];
        /* A destroyed record's slot may be taken by a new graph while it is copied (state 3, 1
         * while filled, 2): the copy holds only if the state and id are the same after it (an
         * alive graph destroyed meanwhile is taken as it was, alive). A few tries, then left out
         * of this snapshot. */
        bool copied = false;
        for (int tries = 0; tries < 4 && !copied; tries++) {
            uint32_t state = atomic_load_explicit(&g->state, memory_order_acquire);
            if (state > 3)
                FAIL("graph record %u is corrupt", i);
            if (state < 2)
                break;
            /* The fields as the relaxed atomics their writer stores (graph.c graph_instantiated:
             * claim, release fence, fields, id with release, state). id first, with acquire: the
             * fields read after it are at least its graph's. */
            o->id = __atomic_load_n(&g->id, __ATOMIC_ACQUIRE);
            o->device = __atomic_load_n(&g->device, __ATOMIC_RELAXED);
            o->alive = state == 2;
            o->instantiated_ns = __atomic_load_n(&g->instantiated_ns, __ATOMIC_RELAXED);
            o->destroyed_ns = state == 2 ? 0 : __atomic_load_n(&g->destroyed_ns, __ATOMIC_RELAXED);
            o->launches = atomic_load_explicit(&g->launches, memory_order_relaxed);
            o->alloc_node_bytes = __atomic_load_n(&g->alloc_node_bytes, __ATOMIC_RELAXED);
            o->capture_bytes = __atomic_load_n(&g->capture_bytes, __ATOMIC_RELAXED);
            /* A field of a new graph's claim read above makes the claim visible here (the writer's
             * release fence, this acquire fence); the state read again with acquire, then the id:
             * a graph that took the slot and was destroyed meanwhile (state 3 again) shows its
             * own id. */
            atomic_thread_fence(memory_order_acquire);
            uint32_t after = atomic_load_explicit(&g->state, memory_order_acquire);
            copied = __atomic_load_n(&g->id, __ATOMIC_RELAXED) == o->id &&
                     (after == state || (state == 2 && after == 3));
        }
        out->graph_count += copied;
    }
    qsort(out->graphs, out->graph_count, sizeof out->graphs[0], by_id);
    /* Ids are given once each (1, 2, ... in instantiation order): two records with one id are
     * corruption, and would be two series with the same labels in an exposition (a scrape
     * Prometheus rejects whole). */
    for (uint32_t i = 1; i < out->graph_count; i++)
        if (out->graphs[i].id == out->graphs[i - 1].id)
            FAIL("two graph records have id %llu", (unsigned long long)out->graphs[i].id);
    return 0;
}

/* The live-at-exit list, once its writer published it (state 2, with release: shim/live_at_exit.c).
 * Every record is checked; the list is the largest first, and within its count and bytes. */
static int copy_live(const struct cushim_live_at_exit *hd, struct cushim_snapshot *out, char *err, size_t errlen)
{
    uint32_t state = atomic_load_explicit(&((struct cushim_live_at_exit *)hd)->state, memory_order_acquire);
    if (state > 2)
        FAIL("live-at-exit list is corrupt (state %u)", state);
    if (state != 2)
        return 0;
    /* Each field read once: a foreign writer may change them under us (checked, then used). */
    uint32_t listed = *(volatile const uint32_t *)&hd->listed;
    uint64_t count = *(volatile const uint64_t *)&hd->count, bytes = *(volatile const uint64_t *)&hd->bytes;
    if (listed > CUSHIM_LIVE_MAX || listed > count)
        FAIL("live-at-exit list is corrupt (%u listed of %llu)", listed, (unsigned long long)count);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < listed; i++) {
        const struct cushim_live_record *r = &hd->rec[i];
        struct cushim_live_snapshot *o = &out->live[i];
        *o = (struct cushim_live_snapshot){.key = r->key, .bytes = r->bytes, .device = r->device,
                                           .kind = r->kind, .flags = r->flags, .mapped = r->mapped};
        if ((o->mapped && !(o->flags & CUSHIM_LIVE_F_VMM)) || o->kind >= CUSHIM_KIND_COUNT || o->kind == CUSHIM_KIND_CAPTURE || o->device < 0 ||
            o->device >= (int32_t)CUSHIM_MAX_DEVICES || (i && o->bytes > out->live[i - 1].bytes) ||
            o->bytes > bytes - sum)
            FAIL("live-at-exit record %u is corrupt", i);
        sum += o->bytes;
    }
    out->live_known = 1;
    out->live_listed = listed;
    out->live_count = count;
    out->live_bytes = bytes;
    return 0;
}

int cushim_snapshot_read(const void *mem, size_t len, struct cushim_snapshot *out,
                         unsigned spin_limit, uint64_t patience_ns, char *err, size_t errlen)
{
    const struct cushim_segment *s = mem;

    if (!mem || len < sizeof s->h.magic)
        FAIL("truncated: %zu of %zu bytes", len, sizeof *s);
    const struct cushim_segment_header *h = &s->h;
    if (!cushim_segment_magic_ok(h->magic))
        FAIL("bad magic: not a cushim segment");
    if (len < sizeof *h)
        FAIL("truncated: %zu of %zu bytes", len, sizeof *s);
    /* Versions count up by one per layout change: one far past this one is corruption, not a
     * newer cushim. */
    if (h->layout_version == 0 || h->layout_version > CUSHIM_LAYOUT_VERSION + 1000)
        FAIL("layout version %u is not one any cushim writes (a corrupt segment)", h->layout_version);
    if (h->layout_version != CUSHIM_LAYOUT_VERSION)
        FAIL("layout version %u, this cushim reads %u (another cushim version's segment)",
             h->layout_version, CUSHIM_LAYOUT_VERSION);
    if (h->header_size != sizeof *h || h->device_record_size != sizeof s->devices[0] ||
        h->device_capacity != CUSHIM_MAX_DEVICES || h->kind_count != CUSHIM_KIND_COUNT ||
        h->kind_stat_count != CUSHIM_STAT_COUNT || h->device_stat_count != CUSHIM_DEV_STAT_COUNT ||
        h->control_offset != offsetof(struct cushim_segment, control) ||
        h->graph_capacity != CUSHIM_MAX_GRAPHS ||
        h->graph_record_size != sizeof(struct cushim_graph_record) ||
        h->live_offset != offsetof(struct cushim_segment, live_at_exit) || h->live_capacity != CUSHIM_LIVE_MAX ||
        h->total_size != sizeof *s)
        FAIL("layout sizes do not match version %u", CUSHIM_LAYOUT_VERSION);
    if (len < sizeof *s)
        FAIL("truncated: %zu of %zu bytes", len, sizeof *s);
    uint64_t patience_left = patience_ns; /* for all the records together */
    uint32_t count = atomic_load_explicit(&((struct cushim_segment_header *)h)->device_count,
                                          memory_order_acquire);
    if (count > CUSHIM_MAX_DEVICES)
        FAIL("device count %u past the end (at most %u)", count, CUSHIM_MAX_DEVICES);
    uint32_t gcount = atomic_load_explicit(&((struct cushim_segment_header *)h)->graph_count,
                                           memory_order_acquire);
    if (gcount > CUSHIM_MAX_GRAPHS)
        FAIL("graph count %u past the end (at most %u)", gcount, CUSHIM_MAX_GRAPHS);

    /* Only the header part: device entries are written as they are copied (a full clear would be
     * 45 KB per snapshot). */
    memset(out, 0, offsetof(struct cushim_snapshot, devices));
    out->pid = h->pid;
    out->uid = h->uid;
    out->start_time = h->start_time;
    out->pidns_inode = h->pidns_inode;
    out->created_ns = h->created_ns;
    out->run_id = h->run_id;
    out->run_pid = h->run_pid;
    out->run_start_time = h->run_start_time;
    out->pidfs_ino = h->pidfs_ino;
    out->file_ino = h->file_ino;
    out->file_dev = h->file_dev;
    out->phase = atomic_load_explicit(&((struct cushim_segment_header *)h)->phase, memory_order_relaxed);
    out->exited = atomic_load_explicit(&((struct cushim_segment_header *)h)->exited, memory_order_relaxed);
    out->flags = h->flags;
    out->incomplete = atomic_load_explicit(&((struct cushim_segment_header *)h)->incomplete, memory_order_relaxed);
    memcpy(out->command, h->command, sizeof out->command);
    memcpy(out->version, h->version, sizeof out->version);
    /* Checked in the copy: the segment's writer may take a NUL away once it has been seen. */
    if (!terminated(out->command, sizeof out->command) || !terminated(out->version, sizeof out->version))
        FAIL("unterminated string in header");
    if (out->phase >= CUSHIM_PHASE_COUNT)
        FAIL("phase %u out of range", out->phase);
    out->phase_requested = atomic_load_explicit(&((struct cushim_segment *)s)->control.phase_request,
                                                memory_order_relaxed);
    if (out->phase_requested > CUSHIM_PHASE_COUNT)
        out->phase_requested = 0; /* not a request this cushim knows: none */

    for (uint32_t i = 0; i < count; i++) {
        const struct cushim_device_record *r = &s->devices[i];
        uint32_t state = atomic_load_explicit(&((struct cushim_device_record *)r)->state,
                                              memory_order_acquire);
        if (state == 0)
            continue;
        if (state > 2 || r->ordinal != (int32_t)i)
            FAIL("device record %u is corrupt", i);
        struct cushim_device_snapshot *d = &out->devices[out->device_count];
        memset(d, 0, sizeof *d);
        if (record_copy_budget((struct cushim_device_record *)r, record_copy_once, d, spin_limit, &patience_left) != 0)
            out->torn++; /* taken as it is: its writer may never come back */
        if (d->ordinal != (int32_t)i) /* the copy's, as for the strings */
            FAIL("device record %u is corrupt", i);
        out->device_count++;
    }
    /* When the counters were read: after the device records, whose copy may wait for writers. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    out->read_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    if (copy_live(&s->live_at_exit, out, err, errlen) != 0)
        return -1;
    return copy_graphs(s, gcount, out, err, errlen);
}
