/* Multithreaded stress for ThreadSanitizer runs of the shim (scripts/tsan): each scenario runs
 * 8 threads through one family of hooked calls at once. ROUNDS sets the rounds per thread
 * (default 300). Not run by the suites. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "common.h"

#define NT 8
#define MiB (1024u * 1024u)

static int rounds(void)
{
    const char *r = getenv("ROUNDS");
    return r ? atoi(r) : 300;
}

static int run_threads(void *(*fn)(void *))
{
    pthread_t t[NT];
    int bad = 0;
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < NT; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r)
            fprintf(stderr, "thread %d: %d\n", i, (int)(uintptr_t)r);
        bad |= r != NULL;
    }
    return bad ? 16 : 0;
}

static _Atomic int stop;

/* cudaMalloc/cudaFree pairs, a few kept alive at once. Under a budget (CUSHIM_DEVICE_LIMIT) a
 * refusal, cudaErrorMemoryAllocation, is an answer, not a failure. */
static void *malloc_free(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *keep[4] = {0};
    for (int i = 0; i < rounds(); i++) {
        int k = (int)(rand_r(&seed) % 4);
        if (keep[k]) {
            if (cudaFree(keep[k]) != cudaSuccess)
                return (void *)1;
            keep[k] = NULL;
        } else {
            cudaError_t e = cudaMalloc(&keep[k], 1 + rand_r(&seed) % MiB);
            if (e == cudaErrorMemoryAllocation && getenv("CUSHIM_DEVICE_LIMIT")) {
                keep[k] = NULL;
                (void)cudaGetLastError();
            } else if (e != cudaSuccess)
                return (void *)2;
        }
    }
    for (int k = 0; k < 4; k++)
        if (keep[k])
            cudaFree(keep[k]);
    return NULL;
}

static int scenario_malloc_free(void) { CHECK(cudaFree(NULL)); return run_threads(malloc_free); }

static cudaMemPool_t shared_pool;

/* cudaMallocAsync/cudaFreeAsync from the device's current pool, the shared pool and a pool of
 * the thread's own (created and destroyed every 50 rounds). */
static void *async_pools(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return (void *)1;
    struct cudaMemPoolProps props = device_pool_props(0);
    cudaMemPool_t own = NULL;
    for (int i = 0; i < rounds(); i++) {
        if (i % 50 == 0) {
            if (own) {
                if (cudaStreamSynchronize(s) != cudaSuccess || cudaMemPoolDestroy(own) != cudaSuccess)
                    return (void *)2;
            }
            if (cudaMemPoolCreate(&own, &props) != cudaSuccess)
                return (void *)3;
        }
        void *a = NULL, *b = NULL, *c = NULL;
        if (cudaMallocAsync(&a, 1 + rand_r(&seed) % MiB, s) != cudaSuccess)
            return (void *)4;
        if (cudaMallocFromPoolAsync(&b, 1 + rand_r(&seed) % MiB, shared_pool, s) != cudaSuccess)
            return (void *)5;
        if (cudaMallocFromPoolAsync(&c, 1 + rand_r(&seed) % MiB, own, s) != cudaSuccess)
            return (void *)6;
        if (cudaFreeAsync(a, s) != cudaSuccess || cudaFreeAsync(b, s) != cudaSuccess ||
            cudaFreeAsync(c, s) != cudaSuccess)
            return (void *)7;
        if (i % 17 == 0)
            cudaMemPoolTrimTo(own, 0);
    }
    cudaStreamSynchronize(s);
    if (own)
        cudaMemPoolDestroy(own);
    cudaStreamDestroy(s);
    return NULL;
}

static int scenario_async_pools(void)
{
    struct cudaMemPoolProps props = device_pool_props(0);
    CHECK(cudaFree(NULL));
    CHECK(cudaMemPoolCreate(&shared_pool, &props));
    int rc = run_threads(async_pools);
    CHECK(cudaMemPoolDestroy(shared_pool));
    return rc;
}

/* Threads 1..4 allocate from the device's current pool; threads 5..8 create pools, make them
 * the device's current pool, then set the default back and destroy them. */
static void *pool_swap(void *arg)
{
    int id = (int)(uintptr_t)arg;
    unsigned seed = (unsigned)id;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return (void *)1;
    cudaMemPool_t def;
    if (cudaDeviceGetDefaultMemPool(&def, 0) != cudaSuccess)
        return (void *)2;
    struct cudaMemPoolProps props = device_pool_props(0);
    for (int i = 0; i < rounds(); i++) {
        if (id <= 4) {
            void *a;
            cudaError_t e = cudaMallocAsync(&a, 1 + rand_r(&seed) % MiB, s);
            if (e == cudaSuccess)
                cudaFreeAsync(a, s);
            cudaGetLastError();
        } else {
            cudaMemPool_t p;
            if (cudaMemPoolCreate(&p, &props) != cudaSuccess)
                return (void *)3;
            cudaDeviceSetMemPool(0, p);
            void *a;
            if (cudaMallocFromPoolAsync(&a, 4096, p, s) == cudaSuccess)
                cudaFreeAsync(a, s);
            cudaStreamSynchronize(s);
            cudaDeviceSetMemPool(0, def);
            cudaMemPoolDestroy(p);
            cudaGetLastError();
        }
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return NULL;
}

static int scenario_pool_swap(void) { CHECK(cudaFree(NULL)); return run_threads(pool_swap); }

static struct vmm_api V;
static PFN_cuMemAddressFree_v10020 address_free;

static void *vmm(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    if (V.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0)
        return (void *)1;
    for (int i = 0; i < rounds(); i++) {
        size_t size = g * (1 + rand_r(&seed) % 4);
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;
        if (V.create(&h, size, &prop, 0) != CUDA_SUCCESS)
            return (void *)2;
        if (V.reserve(&va, size, 0, 0, 0) != CUDA_SUCCESS)
            return (void *)3;
        if (V.map(va, size, 0, h, 0) != CUDA_SUCCESS)
            return (void *)4;
        if (i % 2)
            V.release(h); /* released while mapped: freed at the unmap */
        if (V.unmap(va, size) != CUDA_SUCCESS)
            return (void *)5;
        if (!(i % 2))
            V.release(h);
        address_free(va, size);
    }
    return NULL;
}

static int scenario_vmm(void)
{
    CHECK(cudaFree(NULL));
    V = vmm_api();
    address_free = (PFN_cuMemAddressFree_v10020)entry("cuMemAddressFree", 10020);
    return run_threads(vmm);
}

/* Thread 1 captures a stream over and over (relaxed mode), with allocations in the capture;
 * the others allocate and free outside it. */
static void *capture_or_alloc(void *arg)
{
    int id = (int)(uintptr_t)arg;
    unsigned seed = (unsigned)id;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return (void *)1;
    for (int i = 0; i < rounds() / (id == 1 ? 4 : 1); i++) {
        if (id == 1) {
            cudaGraph_t g;
            cudaGraphExec_t x;
            void *a;
            if (cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) != cudaSuccess)
                return (void *)2;
            if (cudaMallocAsync(&a, 1 + rand_r(&seed) % MiB, s) != cudaSuccess)
                return (void *)3;
            if (cudaFreeAsync(a, s) != cudaSuccess)
                return (void *)4;
            if (cudaStreamEndCapture(s, &g) != cudaSuccess)
                return (void *)5;
            if (cudaGraphInstantiate(&x, g, 0) == cudaSuccess) {
                cudaGraphLaunch(x, s);
                cudaStreamSynchronize(s);
                cudaGraphExecDestroy(x);
            }
            cudaGraphDestroy(g);
        } else {
            void *a, *b;
            if (cudaMalloc(&a, 1 + rand_r(&seed) % MiB) != cudaSuccess)
                return (void *)6;
            if (cudaMallocAsync(&b, 1 + rand_r(&seed) % MiB, s) != cudaSuccess)
                return (void *)7;
            cudaFree(a);
            cudaFreeAsync(b, s);
        }
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return NULL;
}

static int scenario_capture(void) { CHECK(cudaFree(NULL)); return run_threads(capture_or_alloc); }

/* Every thread captures its own stream (relaxed mode) with a cudaMalloc in the capture (capture
 * bytes of the graph), then destroys the graph; odd rounds move it into a parent graph first
 * (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) and destroy the parent. */
static PFN_cuGraphAddNode_v12030 add_node;

static void *graphs(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return (void *)1;
    for (int i = 0; i < rounds() / 2; i++) {
        cudaGraph_t g, parent = NULL;
        void *a;
        if (cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) != cudaSuccess)
            return (void *)2;
        if (cudaMalloc(&a, 1 + rand_r(&seed) % MiB) != cudaSuccess)
            return (void *)3;
        cudaMemsetAsync(a, 0, 256, s);
        if (cudaStreamEndCapture(s, &g) != cudaSuccess)
            return (void *)4;
        if (i % 2 && cudaGraphCreate(&parent, 0) == cudaSuccess) {
            CUgraphNodeParams np;
            CUgraphNode n;
            memset(&np, 0, sizeof np);
            np.type = CU_GRAPH_NODE_TYPE_GRAPH;
            np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
            np.graph.graph = (CUgraph)g;
            if (add_node(&n, (CUgraph)parent, NULL, NULL, 0, &np) != CUDA_SUCCESS)
                return (void *)5;
            cudaGraphDestroy(parent);
        } else {
            cudaGraphDestroy(g);
        }
        cudaFree(a);
        cudaGetLastError();
    }
    cudaStreamDestroy(s);
    return NULL;
}

static int scenario_graphs(void)
{
    CHECK(cudaFree(NULL));
    add_node = (PFN_cuGraphAddNode_v12030)entry("cuGraphAddNode", 12030);
    return run_threads(graphs);
}

/* Threads 1..6 allocate; thread 7 resets the peak and reads the stats; thread 8 pushes and pops
 * phases. With HOLD_FILE, runs until it exists (for `cushim reset-peak PID` from outside). */
static void *reset_or_alloc(void *arg)
{
    int id = (int)(uintptr_t)arg;
    unsigned seed = (unsigned)id;
    int (*reset)(int) = (int (*)(int))cushim_fn("cushim_reset_peak");
    int (*push)(int) = (int (*)(int))cushim_fn("cushim_push_phase");
    int (*pop)(void) = (int (*)(void))cushim_fn("cushim_pop_phase");
    const char *hold_file = getenv("HOLD_FILE");
    for (int i = 0; hold_file ? !atomic_load(&stop) : i < rounds(); i++) {
        if (id <= 6) {
            void *a, *b;
            if (cudaMalloc(&a, 1 + rand_r(&seed) % MiB) != cudaSuccess)
                return (void *)1;
            if (cudaMallocHost(&b, 1 + rand_r(&seed) % 65536) != cudaSuccess)
                return (void *)2;
            cudaFree(a);
            cudaFreeHost(b);
        } else if (id == 7) {
            struct cushim_device_stats st;
            if (reset)
                reset(0);
            cushim_stats(0, &st, 0);
        } else if (push && pop) {
            push(i % 2 ? 1 : 2);
            pop();
        }
        if (hold_file && id == 1 && i % 64 == 0 && access(hold_file, F_OK) == 0)
            atomic_store(&stop, 1);
    }
    return NULL;
}

static int scenario_reset(void)
{
    CHECK(cudaFree(NULL));
    ready();
    return run_threads(reset_or_alloc);
}

/* Threads allocate while the main thread forks children that read the shim's stats and exit. */
static void *alloc_until_stop(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop)) {
        void *a;
        if (cudaMalloc(&a, 1 + rand_r(&seed) % MiB) != cudaSuccess)
            return (void *)1;
        cudaFree(a);
    }
    return NULL;
}

static int scenario_fork(void)
{
    pthread_t t[NT - 1];
    CHECK(cudaFree(NULL));
    for (int i = 0; i < NT - 1; i++)
        pthread_create(&t[i], NULL, alloc_until_stop, (void *)(uintptr_t)(i + 1));
    int bad = 0;
    for (int i = 0; i < 10; i++) {
        usleep(20000);
        pid_t p = fork();
        if (p == 0) {
            /* No CUDA in the child (the simulated driver's locks may be held by a thread
             * that is not there); the shim's own API and its state after the fork: the child
             * forgot its parent's segment and has no device activity of its own (cushim.h:
             * -1, and no device reset), whatever the parent's threads were doing. */
            struct cushim_device_stats st;
            int (*reset)(int) = (int (*)(int))cushim_fn("cushim_reset_peak");
            int rc = cushim_stats(0, &st, 0) == -1 && (!reset || reset(0) == 0) ? 0 : 1;
            _exit(rc);
        }
        int st;
        waitpid(p, &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < NT - 1; i++)
        pthread_join(t[i], NULL);
    return bad ? 17 : 0;
}

/* Under a budget (CUSHIM_DEVICE_LIMIT = BUDGET_BYTES): threads 1-6 hold up to 4 allocations each
 * of three kinds at once, 1 MiB cudaMalloc, 1 MiB cuMemCreate (mapped) and 1 MiB
 * cudaMallocFromPoolAsync from a pool thread 8 keeps replacing (destroying the old one, whose
 * allocations live on); thread 7 reads the device total without a pause. The device total must
 * never pass the budget (a budget-stress trial: a check made after cuMemCreate's call let it, in
 * 2-7% of runs); a request is granted or refused with out of memory (a pool destroyed just before
 * its request: the driver's invalid value). Each of threads 1-6 first fills its 4 slots and waits
 * for the others at a barrier: 24 requests of at least 1 MiB each against 16 MiB, so the budget is
 * reached whatever the scheduling (a loaded CI machine ran the threads one after another, each
 * holding at most 8 MiB, and none was refused). Prints over=N (readings past the budget) and
 * refused=N. */
static uint64_t budget_bytes;
static _Atomic long over_budget, budget_refusals;
static _Atomic(cudaMemPool_t) churn_pool;
static uint64_t (*device_current)(int);
static size_t vmm_granule; /* cuMemCreate's minimum granularity: the size of each VMM allocation */

static void check_budget(void)
{
    if (device_current && device_current(0) > budget_bytes)
        atomic_fetch_add(&over_budget, 1);
}

struct churn_slot { int kind; void *p; CUmemGenericAllocationHandle h; CUdeviceptr va; };

static int churn_release(struct churn_slot *c, cudaStream_t s)
{
    int bad = 0;
    if (c->kind == 1)
        bad = cudaFree(c->p) != cudaSuccess;
    else if (c->kind == 2 && (c->va & (vmm_granule << 1))) /* released while mapped: freed at the unmap */
        bad = V.release(c->h) != CUDA_SUCCESS || V.unmap(c->va, vmm_granule) != CUDA_SUCCESS ||
              address_free(c->va, vmm_granule) != CUDA_SUCCESS;
    else if (c->kind == 2)
        bad = V.unmap(c->va, vmm_granule) != CUDA_SUCCESS || V.release(c->h) != CUDA_SUCCESS ||
              address_free(c->va, vmm_granule) != CUDA_SUCCESS;
    else if (c->kind == 3)
        bad = cudaFreeAsync(c->p, s) != cudaSuccess;
    c->kind = 0;
    return bad;
}

static pthread_barrier_t churn_filled; /* threads 1-6, once each has tried its 4 slots */

/* One request of `kind` (1 cudaMalloc, 2 cuMemCreate mapped, 3 from churn_pool) into slot c, from
 * thread id: granted (the slot holds it), or refused with out of memory (counted), or the churn
 * pool destroyed just before (invalid value). Returns 0, or the thread's failure code. */
static int churn_take(struct churn_slot *c, int kind, cudaStream_t s, const CUmemAllocationProp *prop, int id)
{
    int rc;
    if (kind == 1) {
        rc = cudaMalloc(&c->p, MiB) == cudaSuccess ? 0 : 2;
    } else if (kind == 2) {
        rc = (int)V.create(&c->h, vmm_granule, prop, 0);
        if (rc == CUDA_SUCCESS && (V.reserve(&c->va, vmm_granule, 0, 0, 0) != CUDA_SUCCESS ||
                                   V.map(c->va, vmm_granule, 0, c->h, 0) != CUDA_SUCCESS))
            return 5;
    } else {
        cudaError_t e = cudaMallocFromPoolAsync(&c->p, MiB, atomic_load(&churn_pool), s);
        rc = e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? 2 : e == cudaErrorInvalidValue ? 1 : 99;
    }
    (void)cudaGetLastError();
    if (rc == 0) {
        c->kind = kind;
        check_budget();
    } else if (rc == 2) {
        atomic_fetch_add(&budget_refusals, 1);
    } else if (rc != 1 || kind != 3) {
        fprintf(stderr, "thread %d: kind %d answered %d\n", id, kind, rc);
        return 6; /* only a pool destroyed just before its request is invalid */
    }
    return 0;
}

static void *budget_churn(void *arg)
{
    int id = (int)(uintptr_t)arg;
    unsigned seed = (unsigned)id;
    if (id == 7) {
        while (!atomic_load(&stop))
            check_budget();
        return NULL;
    }
    if (id == 8) {
        struct cudaMemPoolProps props = device_pool_props(0);
        while (!atomic_load(&stop)) {
            cudaMemPool_t p, old;
            if (cudaMemPoolCreate(&p, &props) != cudaSuccess)
                return (void *)1;
            old = atomic_exchange(&churn_pool, p);
            if (cudaMemPoolDestroy(old) != cudaSuccess)
                return (void *)2;
        }
        return NULL;
    }
    cudaStream_t s;
    CUmemAllocationProp prop = vmm_prop(0);
    struct churn_slot held[4] = {{0}};
    int bad = cudaStreamCreate(&s) != cudaSuccess ? 3 : 0;
    for (int k = 0; k < 4 && !bad; k++) /* the fill: kinds 1, 2, 3, 1, none released */
        bad = churn_take(&held[k], 1 + k % 3, s, &prop, id);
    pthread_barrier_wait(&churn_filled); /* also when it failed: the others wait for it */
    if (bad)
        return (void *)(uintptr_t)bad;
    for (int i = 0; i < rounds(); i++) {
        struct churn_slot *c = &held[rand_r(&seed) % 4];
        if (c->kind) {
            if (churn_release(c, s))
                return (void *)4;
            continue;
        }
        if ((bad = churn_take(c, 1 + (int)(rand_r(&seed) % 3), s, &prop, id)))
            return (void *)(uintptr_t)bad;
    }
    for (int k = 0; k < 4; k++)
        if (held[k].kind && churn_release(&held[k], s))
            return (void *)7;
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    return NULL;
}

static int scenario_budget_churn(void)
{
    const char *b = getenv("BUDGET_BYTES");
    budget_bytes = b ? strtoull(b, NULL, 0) : 0;
    device_current = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    if (!budget_bytes || !device_current)
        return 20; /* needs the shim and BUDGET_BYTES */
    CHECK(cudaFree(NULL));
    V = vmm_api();
    address_free = (PFN_cuMemAddressFree_v10020)entry("cuMemAddressFree", 10020);
    CUmemAllocationProp vprop = vmm_prop(0);
    if (V.granularity(&vmm_granule, &vprop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !vmm_granule)
        return 21;
    struct cudaMemPoolProps props = device_pool_props(0);
    cudaMemPool_t p;
    /* A pool destroyed while an allocation of it lives on (cuda.h cuMemPoolDestroy: its resources
     * go with the last one): its 512 bytes stay in the device total and the budget. */
    void *kept;
    CHECK(cudaMemPoolCreate(&p, &props));
    CHECK(cudaMallocFromPoolAsync(&kept, 512, p, NULL));
    CHECK(cudaMemPoolDestroy(p));
    CHECK(cudaMemPoolCreate(&p, &props));
    atomic_store(&churn_pool, p);
    pthread_barrier_init(&churn_filled, NULL, 6);
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], NULL, budget_churn, (void *)(uintptr_t)(i + 1));
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r)
            fprintf(stderr, "thread %d: %d\n", i + 1, (int)(uintptr_t)r);
        bad |= r != NULL;
    }
    atomic_store(&stop, 1);
    for (int i = 6; i < NT; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    CHECK(cudaMemPoolDestroy(atomic_load(&churn_pool)));
    CHECK(cudaFreeAsync(kept, NULL));
    CHECK(cudaDeviceSynchronize());
    printf("over=%ld\nrefused=%ld\nend_current=%llu\n", atomic_load(&over_budget), atomic_load(&budget_refusals),
           (unsigned long long)device_current(0));
    return bad ? 16 : 0;
}

static const struct scenario scenarios[] = {
    {"malloc_free", scenario_malloc_free, 1}, {"async_pools", scenario_async_pools, 1},
    {"pool_swap", scenario_pool_swap, 1},     {"vmm", scenario_vmm, 1},
    {"capture", scenario_capture, 1},         {"reset", scenario_reset, 1},
    {"fork", scenario_fork, 1},             {"graphs", scenario_graphs, 1},
    {"budget_churn", scenario_budget_churn, 1},
};

int main(int argc, char **argv)
{
    return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
}
