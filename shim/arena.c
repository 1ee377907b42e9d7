#include "shim/arena.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_CHUNK (1u << 20)     /* small blocks are carved from 1 MiB chunks */
#define ARENA_CLASSES 48

struct free_block { struct free_block *next; };

static atomic_flag arena_lock = ATOMIC_FLAG_INIT;
static struct free_block *free_lists[ARENA_CLASSES];
static char *chunk_pos, *chunk_end;
static _Atomic size_t mapped;

static unsigned size_class(size_t bytes)
{
    unsigned c = 6; /* 64 bytes */
    while (((size_t)1 << c) < bytes)
        c++;
    return c;
}

static void arena_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&arena_lock, memory_order_acquire))
        ;
}

static void arena_release(void)
{
    atomic_flag_clear_explicit(&arena_lock, memory_order_release);
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    atomic_fetch_add_explicit(&mapped, bytes, memory_order_relaxed);
    return p;
}

void *arena_alloc(size_t bytes)
{
    unsigned c = size_class(bytes);
    size_t size = (size_t)1 << c;
    void *p = NULL;

    if (c >= ARENA_CLASSES)
        return NULL;
    arena_acquire();
    if (free_lists[c]) {
        p = free_lists[c];
        free_lists[c] = free_lists[c]->next;
    } else if (size < ARENA_CHUNK) {
        if ((size_t)(chunk_end - chunk_pos) < size) {
            char *chunk = map(ARENA_CHUNK);
            if (chunk) {
                /* The rest of the old chunk is dropped: at most one block's worth. */
                chunk_pos = chunk;
                chunk_end = chunk + ARENA_CHUNK;
            }
        }
        if ((size_t)(chunk_end - chunk_pos) >= size) {
            p = chunk_pos;
            chunk_pos += size;
        }
    }
    arena_release();
    if (!p && size >= ARENA_CHUNK)
        return map(size); /* fresh pages are already zero */
    if (p)
        memset(p, 0, size);
    return p;
}

void arena_free(void *p, size_t bytes)
{
    unsigned c = size_class(bytes);
    if (!p || c >= ARENA_CLASSES)
        return;
    arena_acquire();
    ((struct free_block *)p)->next = free_lists[c];
    free_lists[c] = p;
    arena_release();
}

void *arena_grow(void *p, size_t used, size_t bytes, size_t new_bytes)
{
    void *more = arena_alloc(new_bytes);
    if (!more)
        return NULL;
    if (used)
        memcpy(more, p, used);
    arena_free(p, bytes);
    return more;
}

size_t arena_mapped_bytes(void)
{
    return atomic_load_explicit(&mapped, memory_order_relaxed);
}

void arena_after_fork_child(void)
{
    atomic_flag_clear(&arena_lock);
    memset(free_lists, 0, sizeof free_lists);
    chunk_pos = chunk_end = NULL;
}
