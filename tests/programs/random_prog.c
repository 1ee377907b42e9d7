/* random_prog SEED THREADS OPS: threads making random allocations and frees of every
 * runtime-level kind (device, pitch, async on their own stream, pinned host, managed), some freed
 * by other threads. At the end it prints what it still holds per kind ("held.KIND=bytes",
 * "live.KIND=count") and the simulated device's own counters: tests/test_random.c compares
 * cushim's summary with both. */
#include <pthread.h>

#include "common.h"

enum { DEV, PITCH, ASYNC, HOST, MANAGED, NKIND };
static const char *names[] = {"device", "pitch", "async", "pinned_host", "managed"};

struct block {
    void *p;
    size_t bytes;
    int kind;
};

#define MAXLIVE 4096
static struct block shared[MAXLIVE]; /* blocks any thread may free */
static int nshared;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long held[NKIND], live[NKIND];
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static int ops;

static void release(struct block *b, cudaStream_t s)
{
    switch (b->kind) {
    case DEV: case PITCH: case MANAGED: CHECK(cudaFree(b->p)); break;
    case ASYNC: CHECK(cudaFreeAsync(b->p, s)); break;
    case HOST: CHECK(cudaFreeHost(b->p)); break;
    }
    pthread_mutex_lock(&held_lock);
    held[b->kind] -= b->bytes;
    live[b->kind]--;
    pthread_mutex_unlock(&held_lock);
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cudaStream_t s;
    struct block mine[256];
    int n = 0;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < ops; i++) {
        unsigned r = rand_r(&seed);
        if (n > 0 && (r % 5 == 0 || n == 256)) { /* free one of mine */
            int k = (int)(rand_r(&seed) % (unsigned)n);
            release(&mine[k], s);
            mine[k] = mine[--n];
            continue;
        }
        if (r % 7 == 0) { /* free or share across threads */
            pthread_mutex_lock(&shared_lock);
            if (nshared > 0 && (r & 8)) {
                struct block b = shared[--nshared];
                pthread_mutex_unlock(&shared_lock);
                if (b.kind == ASYNC)
                    CHECK(cudaDeviceSynchronize()); /* another stream's block: order it */
                release(&b, s);
                continue;
            }
            if (n > 0 && nshared < MAXLIVE) {
                shared[nshared++] = mine[--n];
                if (shared[nshared - 1].kind == ASYNC)
                    CHECK(cudaStreamSynchronize(s));
            }
            pthread_mutex_unlock(&shared_lock);
            continue;
        }
        struct block b = {NULL, 1 + (size_t)(rand_r(&seed) % (3u << 20)), (int)(rand_r(&seed) % NKIND)};
        size_t pitch;
        switch (b.kind) {
        case DEV: CHECK(cudaMalloc(&b.p, b.bytes)); break;
        case PITCH:
            CHECK(cudaMallocPitch(&b.p, &pitch, b.bytes % 4000 + 1, 3));
            b.bytes = pitch * 3;
            break;
        case ASYNC: CHECK(cudaMallocAsync(&b.p, b.bytes, s)); break;
        case HOST: CHECK(cudaMallocHost(&b.p, b.bytes)); break;
        case MANAGED: CHECK(cudaMallocManaged(&b.p, b.bytes, cudaMemAttachGlobal)); break;
        }
        pthread_mutex_lock(&held_lock);
        held[b.kind] += b.bytes;
        live[b.kind]++;
        pthread_mutex_unlock(&held_lock);
        mine[n++] = b;
    }
    CHECK(cudaStreamSynchronize(s));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SEED THREADS OPS (random allocations and frees of every kind, "
                "then the bytes each kind holds)\n", argv[0]);
        return 2;
    }
    unsigned seed = (unsigned)atoi(argv[1]);
    int threads = atoi(argv[2]);
    ops = atoi(argv[3]);
    if (threads < 1 || threads > 64 || ops < 1 || strspn(argv[2], "0123456789") != strlen(argv[2]) ||
        strspn(argv[3], "0123456789") != strlen(argv[3])) {
        fprintf(stderr, "%s: THREADS must be 1..64 and OPS at least 1 (got \"%s\", \"%s\")\n", argv[0], argv[2], argv[3]);
        return 2;
    }
    pthread_t t[64];
    CHECK(cudaFree(NULL));
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(seed * 1000 + (unsigned)i));
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    CHECK(cudaDeviceSynchronize());
    for (int k = 0; k < NKIND; k++)
        printf("held.%s=%llu\nlive.%s=%llu\n", names[k], held[k], names[k], live[k]);
    print_sim(1);
    return 0;
}
