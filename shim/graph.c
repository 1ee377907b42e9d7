/* CUDA graphs (graph.h; DESIGN.md "Stream capture and graphs"). */
#include "shim/graph.h"

#include <time.h>

#include "shim/arena.h"
#include "shim/offload.h"
#include "shim/track.h"

static _Atomic uint64_t next_id;

/* Launch cache: exec -> (per-graph slot, device, pool device) without a lock, direct-mapped by
 * the handle. Written at instantiation and destruction; a launch whose exec is not here
 * (collision) takes the table. info = (slot + 1) | (device + 1) << 32 | pool << 48, where pool is
 * the device whose graph pool its allocation nodes draw on, plus one, or POOL_MANY when they are on
 * several devices (the table's entry then lists them). */
#define LAUNCH_CACHE 1024
#define POOL_MANY 0xFFFFu
static struct {
    _Atomic uint64_t exec;
    _Atomic uint64_t info;
} launch_cache[LAUNCH_CACHE];
/* Writers of the cache (instantiations, rare) one at a time: two filling the same slot at once
 * could leave one graph's handle with the other's info. Launches read without it. */
static atomic_flag launch_cache_writing = ATOMIC_FLAG_INIT;

static inline unsigned launch_index(uint64_t exec)
{
    return (unsigned)((exec * 0x9E3779B97F4A7C15ull) >> 54) & (LAUNCH_CACHE - 1);
}
static _Atomic uint64_t last_sample_ns[CUSHIM_MAX_DEVICES];
static SHIM_TLS unsigned launches_here;
/* Executable graphs with allocation nodes not launched yet, by row: their first launch attaches
 * their memory (cuda.h cuGraphUpload: "Uploads ... to the device in preparation for launch",
 * else at the first launch), and reads the pool (a fresh-user trial: stale for minutes at a few
 * launches a second). While none waits, a launch pays one load for it (docs/BENCHMARKS.md). */
static atomic_bool first_pending[CUSHIM_MAX_GRAPHS];
static atomic_uint first_pending_count;

/* Devices whose pool read was due while a capture was live (graph_pool_sample_owed). */
static _Atomic uint64_t owed_reads;

static void exec_gone(const struct shim_entry *e, void *arg);
static inline uint64_t launch_info(uint64_t key);

/* walk_graph's visitor: an allocation node's parameters (child NULL), or a child graph (alloc
 * NULL). Called with no lock of the shim held. */
typedef void (*graph_visit)(CUgraph child, const CUDA_MEM_ALLOC_NODE_PARAMS *alloc, void *arg);

#define WALK_GRAPHS_MAX (1u << 16) /* graphs looked into per walk: a bound, should a driver loop */

/* Visits the memory-allocation nodes of g and of its child graphs at any depth (cuda.h sets no
 * limit on nesting; a child moved into its parent, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, may hold
 * allocation nodes), and each child graph. Iterative, its worklist in the arena: no stack depth. */
static void walk_graph(CUgraph g, graph_visit visit, void *arg)
{
    __typeof__(&cuGraphGetNodes) get_nodes = REAL(cuGraphGetNodes);
    __typeof__(&cuGraphNodeGetType) get_type = REAL(cuGraphNodeGetType);
    __typeof__(&cuGraphMemAllocNodeGetParams) get_alloc = REAL(cuGraphMemAllocNodeGetParams);
    __typeof__(&cuGraphChildGraphNodeGetGraph) get_child = REAL(cuGraphChildGraphNodeGetGraph);
    size_t cap = 16, len = 0;
    CUgraph *todo;
    if (!g || !get_nodes || !get_type || !(todo = arena_alloc(cap * sizeof *todo)))
        return;
    todo[len++] = g;
    for (unsigned looked = 0; len; looked++) {
        if (looked == WALK_GRAPHS_MAX) {
            LOG_ONCE(CUSHIM_LOG_WARN, "a graph holds more than %u child graphs: the rest are not "
                     "looked into", WALK_GRAPHS_MAX);
            break;
        }
        CUgraph cur = todo[--len];
        size_t n = 0;
        if (!cur || get_nodes(cur, NULL, &n) != CUDA_SUCCESS || !n)
            continue;
        CUgraphNode *nodes = arena_alloc(n * sizeof *nodes);
        size_t got = n;
        if (!nodes)
            continue;
        if (get_nodes(cur, nodes, &got) != CUDA_SUCCESS)
            got = 0;
        for (size_t i = 0; i < got && i < n; i++) {
            CUgraphNodeType type;
            if (!nodes[i] || get_type(nodes[i], &type) != CUDA_SUCCESS)
                continue;
            if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && get_alloc) {
                CUDA_MEM_ALLOC_NODE_PARAMS p;
                if (get_alloc(nodes[i], &p) == CUDA_SUCCESS)
                    visit(NULL, &p, arg);
            } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && get_child) {
                CUgraph child;
                if (get_child(nodes[i], &child) != CUDA_SUCCESS || !child)
                    continue;
                visit(child, NULL, arg);
                if (len == cap) {
                    CUgraph *more = arena_grow(todo, len * sizeof *todo, cap * sizeof *todo,
                                               2 * cap * sizeof *todo);
                    if (!more)
                        continue;
                    todo = more;
                    cap *= 2;
                }
                todo[len++] = child;
            }
        }
        arena_free(nodes, n * sizeof *nodes);
    }
    arena_free(todo, cap * sizeof *todo);
}

/* Bytes of the memory-allocation nodes of a graph, per device, and the capture bytes of the
 * child graphs moved into it. */
struct node_bytes {
    int fallback;     /* the device a node whose pool is not on a device counts on */
    uint64_t total;
    uint64_t mask;    /* devices with bytes */
    uint64_t capture; /* child graphs' capture bytes (graph_captured) */
    uint64_t bytes[CUSHIM_MAX_DEVICES];
};

/* Each allocation node on the device of its pool: cuda.h, CUDA_MEM_ALLOC_NODE_PARAMS.poolProps:
 * "location where the allocation should reside (specified in ::location)"; a location that is
 * not a device counts on the device the graph is instantiated on. A child graph made by a capture
 * (moved into this one: cuda.h, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) brings its capture bytes. */
static void count_node(CUgraph child, const CUDA_MEM_ALLOC_NODE_PARAMS *p, void *arg)
{
    struct node_bytes *nb = arg;
    struct shim_entry cap;
    if (child) {
        if (table_get(&shim.graph_caps, (uint64_t)(uintptr_t)child, &cap))
            nb->capture += cap.size;
        return;
    }
    if (!p->bytesize)
        return;
    int d = p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE && p->poolProps.location.id >= 0 &&
                    p->poolProps.location.id < (int)CUSHIM_MAX_DEVICES
                ? p->poolProps.location.id
                : nb->fallback;
    if ((unsigned)d >= CUSHIM_MAX_DEVICES)
        return;
    nb->bytes[d] += p->bytesize;
    nb->mask |= 1ull << d;
    nb->total += p->bytesize;
}

/* shim.graph_nodes key of an executable graph's bytes on `device` (handles are pointers, far below
 * 2^58; device < 64). */
static inline uint64_t node_key(uint64_t exec, int device)
{
    return exec << 6 | (uint64_t)device;
}

/* The device an executable graph's launches and uploads read the pool of: the one its allocation
 * nodes are on, the instantiation device when it has none, or POOL_MANY - 1 for several. */
static int pool_device(uint64_t mask, int device)
{
    if (!mask)
        return device;
    if (mask & (mask - 1))
        return (int)POOL_MANY - 1;
    return __builtin_ctzll(mask);
}

/* The launch cache's info word of an executable graph (its row, or -1; its device; its pool device). */
static inline uint64_t launch_info_of(int slot, int device, int pool)
{
    return (uint64_t)(uint32_t)(slot + 1) | (uint64_t)(uint16_t)(device + 1) << 32 |
           (uint64_t)(uint16_t)(pool + 1) << 48;
}

/* Writes exec key's launch cache info (its slot cleared first, so that no launch reads the key with
 * another graph's info); `if_held`: only if the slot holds key now (an update: a colliding exec
 * may have taken it since). */
static void launch_cache_write(uint64_t key, uint64_t info, bool if_held)
{
    unsigned li = launch_index(key);
    shim_spin_take(&launch_cache_writing);
    if (!if_held || atomic_load_explicit(&launch_cache[li].exec, memory_order_acquire) == key) {
        atomic_store_explicit(&launch_cache[li].exec, 0, memory_order_release);
        atomic_store_explicit(&launch_cache[li].info, info, memory_order_release);
        atomic_store_explicit(&launch_cache[li].exec, key, memory_order_release);
    }
    shim_spin_drop(&launch_cache_writing);
}

static uint64_t entry_mask(const struct shim_entry *e)
{
    return (uint64_t)e->refs | (uint64_t)e->maps << 32;
}

/* A free slot of the per-graph table, else the one destroyed longest ago; -1 if all are alive. */
static int claim_slot(struct cushim_segment *seg)
{
    /* Threads instantiating at once may pick the same oldest slot: the losers look again (each
     * lost pass is another thread's win), a bounded number of times. */
    for (int pass = 0; pass < 64; pass++) {
        for (unsigned i = 0; i < CUSHIM_MAX_GRAPHS; i++) {
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong(&seg->graphs[i].state, &expected, 1))
                return (int)i;
        }
        int oldest = -1;
        for (unsigned i = 0; i < CUSHIM_MAX_GRAPHS; i++)
            if (atomic_load(&seg->graphs[i].state) == 3 &&
                (oldest < 0 || __atomic_load_n(&seg->graphs[i].destroyed_ns, __ATOMIC_RELAXED) <
                                   __atomic_load_n(&seg->graphs[oldest].destroyed_ns, __ATOMIC_RELAXED)))
                oldest = (int)i;
        uint32_t expected = 3;
        if (oldest < 0)
            return -1; /* all alive (or being filled) */
        if (atomic_compare_exchange_strong(&seg->graphs[oldest].state, &expected, 1))
            return oldest;
    }
    return -1;
}

static bool add_size(struct shim_entry *e, void *arg)
{
    e->size += *(uint64_t *)arg;
    return true;
}

void graph_captured(CUgraph graph, int device, uint64_t bytes)
{
    /* Several captures can go into one graph (cuStreamBeginCaptureToGraph): their bytes add up. */
    uint64_t key = (uint64_t)(uintptr_t)graph;
    if (!table_update(&shim.graph_caps, key, add_size, &bytes, NULL)) {
        struct shim_entry e = {.key = key, .size = bytes, .device = device}, old;
        if (table_put(&shim.graph_caps, &e, &old) == 1 && old.size) /* another capture's, meanwhile */
            table_update(&shim.graph_caps, key, add_size, &old.size, NULL);
    }
    account_device_stat_add(device, CUSHIM_DEV_graphs_captured, 1);
}

/* walk_graph visitor of graph_take: a child graph's capture bytes, taken out. */
static void take_child(CUgraph child, const CUDA_MEM_ALLOC_NODE_PARAMS *p, void *arg)
{
    struct graph_taken *t = arg;
    struct shim_entry e;
    (void)p;
    if (!child || !table_take(&shim.graph_caps, (uint64_t)(uintptr_t)child, &e))
        return;
    if (t->n == t->cap) {
        unsigned cap = t->cap ? 2 * t->cap : 8;
        struct shim_entry *more = arena_grow(t->kids, t->n * sizeof *more, t->cap * sizeof *more,
                                             cap * sizeof *more);
        if (!more) { /* forgotten: its graph goes with the parent, or the parent stays and it is lost */
            LOG_ONCE(CUSHIM_LOG_WARN, "out of memory for the child graphs of a destroyed graph");
            return;
        }
        t->kids = more;
        t->cap = cap;
    }
    t->kids[t->n++] = e;
}

void graph_take(CUgraph graph, struct graph_taken *t)
{
    *t = (struct graph_taken){0};
    t->had = table_take(&shim.graph_caps, (uint64_t)(uintptr_t)graph, &t->e);
    /* Graphs moved into it are destroyed with it (cuda.h, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE:
     * "will be destroyed when the parent is destroyed"), without a cuGraphDestroy of their own;
     * a later graph given one's handle must not inherit its bytes. Looked for only while some
     * graph has capture bytes. */
    if (table_count(&shim.graph_caps))
        walk_graph(graph, take_child, t);
}

void graph_settle(struct graph_taken *t, bool destroyed)
{
    if (!destroyed) {
        if (t->had)
            table_put(&shim.graph_caps, &t->e, NULL);
        for (unsigned i = 0; i < t->n; i++)
            table_put(&shim.graph_caps, &t->kids[i], NULL);
    }
    arena_free(t->kids, t->cap * sizeof *t->kids);
    t->kids = NULL;
}

/* An executable graph's allocation-node bytes on one device are gone (below). */
static void nodes_gone(const struct shim_entry *e, void *arg);

/* exec key's allocation-node bytes on device d, counted, in place of any entry it had there (or a
 * destroyed exec's of the same handle, its destruction not seen). Returns table_put's result: -1
 * when the table could not take it (nothing counted, any old entry left in place). */
static int nodes_put(uint64_t key, int d, uint64_t bytes, uint64_t ctx)
{
    struct shim_entry ne = {.key = node_key(key, d), .size = bytes, .ctx = ctx, .device = d}, old;
    int rc = table_put(&shim.graph_nodes, &ne, &old);
    if (rc == 1)
        account_device_stat_add(d, CUSHIM_DEV_graph_alloc_node_bytes, -(int64_t)old.size);
    if (rc >= 0)
        account_device_stat_add(d, CUSHIM_DEV_graph_alloc_node_bytes, (int64_t)bytes);
    return rc;
}

void graph_instantiated(CUgraphExec exec, CUgraph graph, int device, CUcontext ctx)
{
    struct cushim_segment *seg = shim.seg;
    struct shim_entry cap;
    struct node_bytes nb = {.fallback = device};
    walk_graph(graph, count_node, &nb);
    uint64_t capture = nb.capture +
                       (table_get(&shim.graph_caps, (uint64_t)(uintptr_t)graph, &cap) ? cap.size : 0);
    uint64_t key = (uint64_t)(uintptr_t)exec;
    /* Ids follow instantiation order, rows or not (docs/SUMMARY-JSON.md). */
    uint64_t id = atomic_fetch_add(&next_id, 1) + 1;
    int slot = claim_slot(seg);
    if (slot >= 0) {
        struct cushim_graph_record *g = &seg->graphs[slot];
        /* The claim (state 1) is ordered before the fields' stores, as a seqlock writer's bump: a
         * reader copying the record's previous graph (state 3) that sees any of them sees state
         * move when it looks again (snapshot.c copy_graphs). The seq_cst compare-and-swap of
         * claim_slot does not order later stores on a weakly ordered CPU (aarch64). The fields
         * are written as relaxed atomics: other processes read them while they change. The id
         * goes last, with release: a reader that reads the new id reads the new fields. */
        atomic_thread_fence(memory_order_release);
        __atomic_store_n(&g->device, device, __ATOMIC_RELAXED);
        __atomic_store_n(&g->exec, key, __ATOMIC_RELAXED);
        __atomic_store_n(&g->instantiated_ns, shim_clock_ns(CLOCK_REALTIME), __ATOMIC_RELAXED);
        __atomic_store_n(&g->destroyed_ns, 0, __ATOMIC_RELAXED);
        atomic_store_explicit(&g->launches, 0, memory_order_relaxed);
        __atomic_store_n(&g->alloc_node_bytes, nb.total, __ATOMIC_RELAXED);
        __atomic_store_n(&g->capture_bytes, capture, __ATOMIC_RELAXED);
        __atomic_store_n(&g->id, id, __ATOMIC_RELEASE);
        if (nb.total && !atomic_exchange(&first_pending[slot], true))
            atomic_fetch_add(&first_pending_count, 1);
        atomic_store_explicit(&g->state, 2, memory_order_release);
        uint32_t n = atomic_load(&seg->h.graph_count);
        while (n < (uint32_t)slot + 1 && !atomic_compare_exchange_weak(&seg->h.graph_count, &n, (uint32_t)slot + 1))
            ;
    } else {
        LOG_ONCE(CUSHIM_LOG_WARN, "more than %u executable graphs alive: the per-graph table "
                 "lists the first ones (device totals stay exact)", CUSHIM_MAX_GRAPHS);
    }
    /* Allocation-node bytes count on the device of each node's pool, one entry per device. */
    for (uint64_t m = nb.mask; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        (void)nodes_put(key, d, nb.bytes[d], (uint64_t)(uintptr_t)ctx);
    }
    int pool = pool_device(nb.mask, device);
    struct shim_entry e = {.key = key, .size = nb.total, .aux = (uint64_t)(int64_t)slot,
                           .ctx = (uint64_t)(uintptr_t)ctx, .device = device,
                           .refs = (uint32_t)nb.mask, .maps = (uint32_t)(nb.mask >> 32)};
    struct shim_entry replaced;
    int put = table_put(&shim.execs, &e, &replaced);
    if (put == 1) /* a destroyed exec's handle reused without its destruction seen (a review) */
        exec_gone(&replaced, NULL);
    if (put < 0) {
        /* Out of memory for the table: its destroy would find nothing to undo, so nothing of it
         * stays counted (its nodes' bytes, its row, the live count); it still was instantiated. */
        for (uint64_t m = nb.mask; m; m &= m - 1) {
            struct shim_entry gone;
            if (table_take(&shim.graph_nodes, node_key(key, __builtin_ctzll(m)), &gone))
                nodes_gone(&gone, NULL);
        }
        if (slot >= 0) {
            if (atomic_exchange(&first_pending[slot], false))
                atomic_fetch_sub(&first_pending_count, 1);
            atomic_store_explicit(&seg->graphs[slot].state, 0, memory_order_release);
        }
        track_table_full();
        account_device_stat_add(device, CUSHIM_DEV_graphs_instantiated, 1);
        return;
    }
    launch_cache_write(e.key, launch_info_of(slot, device, pool), false);
    account_device_stat_add(device, CUSHIM_DEV_graphs_instantiated, 1);
    account_device_stat_add(device, CUSHIM_DEV_graph_execs_alive, 1);
}

/* An executable graph is gone (its entry already out of the table). */
static void exec_gone(const struct shim_entry *e, void *arg)
{
    (void)arg;
    uint64_t key = e->key;
    atomic_compare_exchange_strong(&launch_cache[launch_index(key)].exec, &key, 0);
    int slot = (int)(int64_t)e->aux;
    if (slot >= 0 && (unsigned)slot < CUSHIM_MAX_GRAPHS) {
        struct cushim_graph_record *g = &shim.seg->graphs[slot];
        __atomic_store_n(&g->destroyed_ns, shim_clock_ns(CLOCK_REALTIME), __ATOMIC_RELAXED);
        if (atomic_exchange(&first_pending[slot], false)) /* never launched */
            atomic_fetch_sub(&first_pending_count, 1);
        atomic_store_explicit(&g->state, 3, memory_order_release);
    }
    account_device_stat_add(e->device, CUSHIM_DEV_graph_execs_alive, -1);
}

/* An executable graph's allocation-node bytes on one device are gone (entry out of the table). */
static void nodes_gone(const struct shim_entry *e, void *arg)
{
    (void)arg;
    account_device_stat_add(e->device, CUSHIM_DEV_graph_alloc_node_bytes, -(int64_t)e->size);
}

void graph_exec_take(CUgraphExec exec, struct graph_exec_taken *t)
{
    t->found = table_take(&shim.execs, (uint64_t)(uintptr_t)exec, &t->e);
    t->n = 0;
    if (!t->found)
        return;
    /* Out of the launch cache now too: once destroyed, its handle value may be a new exec's. */
    uint64_t key = t->e.key;
    atomic_compare_exchange_strong(&launch_cache[launch_index(key)].exec, &key, 0);
    for (uint64_t m = entry_mask(&t->e); m; m &= m - 1)
        if (table_take(&shim.graph_nodes, node_key(t->e.key, __builtin_ctzll(m)), &t->nodes[t->n]))
            t->n++;
}

void graph_exec_settle(const struct graph_exec_taken *t, bool destroyed)
{
    if (!t->found)
        return;
    if (!destroyed) {
        table_put(&shim.execs, &t->e, NULL);
        for (unsigned i = 0; i < t->n; i++)
            table_put(&shim.graph_nodes, &t->nodes[i], NULL);
        return;
    }
    exec_gone(&t->e, NULL);
    for (unsigned i = 0; i < t->n; i++)
        nodes_gone(&t->nodes[i], NULL);
}

/* table_update of graph_exec_updated: the executable graph's new allocation-node bytes and the
 * devices they are on. */
static bool set_nodes(struct shim_entry *e, void *arg)
{
    const struct node_bytes *nb = arg;
    e->size = nb->total;
    e->refs = (uint32_t)nb->mask;
    e->maps = (uint32_t)(nb->mask >> 32);
    return true;
}

void graph_exec_updated(CUgraphExec exec, CUgraph graph)
{
    uint64_t key = (uint64_t)(uintptr_t)exec;
    struct shim_entry e, cap;
    if (!table_get(&shim.execs, key, &e))
        return; /* never seen instantiated (or its table was full): nothing of it is counted */
    struct node_bytes nb = {.fallback = e.device};
    walk_graph(graph, count_node, &nb);
    uint64_t capture = nb.capture +
                       (table_get(&shim.graph_caps, (uint64_t)(uintptr_t)graph, &cap) ? cap.size : 0);
    /* Per device: the new bytes in place of the old (an entry put over the old one gives it back). */
    for (uint64_t m = entry_mask(&e) | nb.mask; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        bool wanted = nb.mask >> d & 1;
        if (wanted && nodes_put(key, d, nb.bytes[d], e.ctx) >= 0)
            continue;
        /* Nothing of exec's on d from now on: the new graph allocates nothing there, or the table
         * could not take its bytes (then neither counted nor listed; a failed put leaves the old
         * entry in place, which the exec's destroy would no longer look for). */
        struct shim_entry old;
        if (table_take(&shim.graph_nodes, node_key(key, d), &old))
            nodes_gone(&old, NULL);
        if (wanted) {
            nb.mask &= ~(1ull << d);
            nb.total -= nb.bytes[d];
        }
    }
    table_update(&shim.execs, key, set_nodes, &nb, NULL);
    int slot = (int)(int64_t)e.aux;
    if (slot >= 0 && (unsigned)slot < CUSHIM_MAX_GRAPHS) {
        struct cushim_graph_record *g = &shim.seg->graphs[slot];
        __atomic_store_n(&g->alloc_node_bytes, nb.total, __ATOMIC_RELAXED);
        __atomic_store_n(&g->capture_bytes, capture, __ATOMIC_RELAXED);
        /* Its next launch (or upload) attaches the new nodes' memory: the pool is read then; with
         * no nodes left, nothing waits for it. */
        if (nb.total && !atomic_exchange(&first_pending[slot], true))
            atomic_fetch_add(&first_pending_count, 1);
        else if (!nb.total && atomic_exchange(&first_pending[slot], false))
            atomic_fetch_sub(&first_pending_count, 1);
    }
    /* The launch cache's pool device follows the new nodes. */
    launch_cache_write(key, launch_info_of(slot, e.device, pool_device(nb.mask, e.device)), true);
}

static bool in_context(const struct shim_entry *e, void *arg)
{
    return e->ctx == *(uint64_t *)arg;
}

void graph_context_gone(uint64_t ctx)
{
    table_drain_if(&shim.execs, in_context, exec_gone, &ctx);
    table_drain_if(&shim.graph_nodes, in_context, nodes_gone, &ctx);
}

/* Reads the pool of each device whose graph memory `mask` names (every 100 ms at most unless
 * force). */
static void sample_mask(uint64_t mask, bool force)
{
    for (; mask; mask &= mask - 1)
        graph_pool_sample(__builtin_ctzll(mask), force);
}

void graph_exec_pool_sample(CUgraphExec exec, bool force)
{
    struct shim_entry e;
    if (!table_get(&shim.execs, (uint64_t)(uintptr_t)exec, &e)) {
        graph_pool_sample(shim_current_device(NULL), force);
        return;
    }
    uint64_t mask = entry_mask(&e);
    if (mask)
        sample_mask(mask, force);
    else
        graph_pool_sample(e.device, force);
}

/* Whether exec's row waits for the pool to be read after its memory attached; taken (false) by
 * the read that does it. */
static bool first_take(int slot)
{
    if ((unsigned)slot >= CUSHIM_MAX_GRAPHS || !atomic_load_explicit(&first_pending[slot], memory_order_relaxed) ||
        !atomic_exchange(&first_pending[slot], false))
        return false;
    atomic_fetch_sub(&first_pending_count, 1);
    return true;
}

void graph_exec_uploaded(CUgraphExec exec, bool force)
{
    bool waited = first_take((int)(uint32_t)launch_info((uint64_t)(uintptr_t)exec) - 1);
    graph_exec_pool_sample(exec, force || waited);
}

/* Launch cache info of an executable graph the cache does not hold (a collision, or one the shim
 * never saw instantiated). */
static __attribute__((noinline, cold)) uint64_t launch_info_slow(uint64_t key)
{
    struct shim_entry e;
    if (table_get(&shim.execs, key, &e))
        return launch_info_of((int)(int64_t)e.aux, e.device, pool_device(entry_mask(&e), e.device));
    int device = shim_current_device(NULL);
    return (uint64_t)(uint16_t)(device + 1) << 32 | (uint64_t)(uint16_t)(device + 1) << 48;
}

static inline uint64_t launch_info(uint64_t key)
{
    unsigned li = launch_index(key);
    uint64_t info = atomic_load_explicit(&launch_cache[li].info, memory_order_acquire);
    if (likely(atomic_load_explicit(&launch_cache[li].exec, memory_order_acquire) == key &&
               atomic_load_explicit(&launch_cache[li].info, memory_order_acquire) == info && info))
        return info;
    return launch_info_slow(key);
}

/* A sampling launch: the pool of the device the graph's allocation nodes are on (of each, for
 * nodes on several devices); `first`: the graph's first launch, read whatever the last read's
 * age. */
static __attribute__((noinline)) void launch_sample(CUgraphExec exec, bool first)
{
    unsigned pool = (unsigned)(launch_info((uint64_t)(uintptr_t)exec) >> 48);
    if (likely(pool != POOL_MANY))
        graph_pool_sample((int)pool - 1, first);
    else
        graph_exec_pool_sample(exec, first);
}

/* A launch while CUSHIM_COMPILE_END=graph-launch is set or a graph waits for its first launch.
 * The row is looked up again: the hot path keeps nothing live across its calls for it. */
static __attribute__((noinline)) void launch_slow(CUgraphExec exec)
{
    int slot = (int)(uint32_t)launch_info((uint64_t)(uintptr_t)exec) - 1;
    /* CUSHIM_COMPILE_END=graph-launch: serving has begun. */
    if (shim.cfg.compile_end == CUSHIM_COMPILE_END_GRAPH_LAUNCH &&
        atomic_load_explicit(&shim.seg->h.phase, memory_order_relaxed) == CUSHIM_PHASE_COMPILE)
        phase_set(CUSHIM_PHASE_RUN);
    /* (While a capture is live, the read is owed until it ends: graph_pool_sample.) */
    if (first_take(slot))
        launch_sample(exec, true);
}

void graph_launched(CUgraphExec exec)
{
    uint64_t info = launch_info((uint64_t)(uintptr_t)exec);
    int slot = (int)(uint32_t)info - 1;
    int device = (int)(uint16_t)(info >> 32) - 1;
    if (likely((unsigned)slot < CUSHIM_MAX_GRAPHS))
        atomic_fetch_add_explicit(&shim.seg->graphs[slot].launches, 1, memory_order_relaxed);
    account_dev_inc(device, CUSHIM_DEV_graph_launches, 1);
    if (unlikely(shim.cfg.compile_end == CUSHIM_COMPILE_END_GRAPH_LAUNCH) ||
        unlikely(atomic_load_explicit(&first_pending_count, memory_order_relaxed) != 0))
        launch_slow(exec);
    /* Else the clock is read on every 16th launch of a thread, the pool at most every 100 ms. */
    if (unlikely((++launches_here & 15) == 1))
        launch_sample(exec, false);
}

bool graph_pool_sample(int device, bool force)
{
    static const struct {
        CUgraphMem_attribute attr;
        enum cushim_device_stat stat;
    } attrs[] = {
        {CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, CUSHIM_DEV_graph_pool_used_current},
        {CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, CUSHIM_DEV_graph_pool_used_high},
        {CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, CUSHIM_DEV_graph_pool_reserved_current},
        {CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, CUSHIM_DEV_graph_pool_reserved_high},
    };
    /* Not while a capture is live: the shim adds no call during one that it does not need
     * (docs/SUMMARY-JSON.md graph_pool); the figures then wait for the next launch or exit, and
     * a budget reads them before it next decides (budget.h). A read that was due (forced: a
     * graph's first launch, an upload, a trim) is owed: made when the last capture ends (a
     * review: a first launch beside a capture was never read). */
    if (capture_any_live()) {
        if (budget_any && (unsigned)device < CUSHIM_MAX_DEVICES)
            atomic_store(&budget_graph_stale[device], 1);
        if (force && (unsigned)device < CUSHIM_MAX_DEVICES) {
            atomic_fetch_or(&owed_reads, 1ull << device);
            /* The last capture may have ended, its owed reads taken, since the look above (a
             * stress trial named the window): then this thread makes them. */
            if (!capture_any_live())
                graph_pool_sample_owed();
        }
        return false;
    }
    __typeof__(&cuDeviceGetGraphMemAttribute) get = REAL(cuDeviceGetGraphMemAttribute);
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return false;
    if (!get)
        return true; /* a driver without graph memory: nothing to read */
    uint64_t now = shim_clock_ns(CLOCK_MONOTONIC_COARSE);
    uint64_t last = atomic_load_explicit(&last_sample_ns[device], memory_order_relaxed);
    if (!force && last && now - last < 100000000ull)
        return false;
    if (!atomic_compare_exchange_strong(&last_sample_ns[device], &last, now) && !force)
        return false; /* another thread is sampling */
    bool read = false, unsupported = true;
    /* Before the driver reads: the launches seen, and this reading's place among the device's. */
    uint64_t launches = budget_any ? budget_graph_launches() : 0;
    uint64_t ticket = budget_any ? budget_graph_ticket(device) : 0;
    for (unsigned i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        cuuint64_t v = 0;
        CUresult r = get(device, attrs[i].attr, &v);
        if (r == CUDA_SUCCESS) {
            account_device_stat_set(device, attrs[i].stat, v);
            if (attrs[i].attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)
                budget_graph_read(device, v, launches, ticket);
            read = true;
        }
        unsupported &= r == CUDA_ERROR_NOT_SUPPORTED;
    }
    if (read)
        account_device_stat_set(device, CUSHIM_DEV_graph_pool_sampled_ns, shim_clock_ns(CLOCK_REALTIME));
    return read || unsupported; /* a device without graph memory has no reserve to read */
}

void graph_pool_sample_owed(void)
{
    if (likely(atomic_load_explicit(&owed_reads, memory_order_relaxed) == 0) || capture_any_live())
        return;
    for (uint64_t m = atomic_exchange(&owed_reads, 0); m; m &= m - 1)
        graph_pool_sample(__builtin_ctzll(m), true);
}

void graph_pool_sample_all(void)
{
    struct cushim_segment *seg = shim.seg;
    uint32_t n = seg ? atomic_load(&seg->h.device_count) : 0;
    for (uint32_t d = 0; d < n && d < CUSHIM_MAX_DEVICES; d++)
        if (atomic_load(&seg->devices[d].state) != 0)
            graph_pool_sample((int)d, true);
}

void graph_after_fork_child(void)
{
    /* The parent's executable graphs are not the child's (shim.execs is emptied by the caller);
     * a writer of the parent's cut off by the fork leaves nothing held. */
    atomic_flag_clear_explicit(&launch_cache_writing, memory_order_relaxed);
    for (unsigned i = 0; i < CUSHIM_MAX_GRAPHS; i++)
        atomic_store_explicit(&first_pending[i], false, memory_order_relaxed);
    atomic_store_explicit(&first_pending_count, 0, memory_order_relaxed);
    atomic_store_explicit(&owed_reads, 0, memory_order_relaxed);
    for (unsigned i = 0; i < LAUNCH_CACHE; i++) {
        atomic_store_explicit(&launch_cache[i].exec, 0, memory_order_relaxed);
        atomic_store_explicit(&launch_cache[i].info, 0, memory_order_relaxed);
    }
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
        atomic_store_explicit(&last_sample_ns[i], 0, memory_order_relaxed);
    atomic_store(&next_id, 0); /* the child's own segment numbers its own graphs */
}
