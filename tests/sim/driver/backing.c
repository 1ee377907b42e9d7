/* Device memory is host memory (README.md): small allocations from aligned_alloc (256-byte
 * aligned, like cuMemAlloc's "suitably aligned for any kind of variable"), large ones (>= 64 KiB)
 * from mmap with MAP_NORESERVE, so capacity is bookkeeping and pages are touched only when used.
 *
 * Freed small blocks are kept on a last-in-first-out list per 256-byte size class and handed out
 * again: a simulated call then costs the same number of instructions whatever the heap looks like
 * (malloc's cost depends on what else the process allocated, a preloaded shim included, which
 * made scripts/bench's with/without-shim difference drift by hundreds of instructions). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "mem.h"

#define ALIGN 256
#define LARGE (64u << 10)
#define CLASSES (LARGE / ALIGN)
#define KEEP 64 /* blocks kept per size class */

struct block {
    struct block *next;
};
static struct {
    struct block *head;
    unsigned n;
} cache[CLASSES];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

void *sim_backing_alloc(size_t size)
{
    if (size < LARGE) {
        size_t rounded = sim_round_to(size ? size : 1, ALIGN);
        unsigned c = (unsigned)(rounded / ALIGN) - 1;
        pthread_mutex_lock(&cache_lock);
        struct block *b = cache[c].head;
        if (b) {
            cache[c].head = b->next;
            cache[c].n--;
        }
        pthread_mutex_unlock(&cache_lock);
        return b ? (void *)b : aligned_alloc(ALIGN, rounded);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sim_backing_free(void *p, size_t size)
{
    if (size >= LARGE) {
        munmap(p, size);
        return;
    }
    unsigned c = (unsigned)(sim_round_to(size ? size : 1, ALIGN) / ALIGN) - 1;
    pthread_mutex_lock(&cache_lock);
    if (cache[c].n < KEEP) {
        struct block *b = p;
        b->next = cache[c].head;
        cache[c].head = b;
        cache[c].n++;
        p = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    free(p);
}
