/* The shim's own memory for its tables: power-of-two blocks carved from mmap'ed chunks, with a
 * free list per size class. Never calls malloc (the program's allocator may be instrumented or
 * not yet usable), never calls CUDA.
 *
 * Thread-safety: all functions may be called from any thread (a spin lock guards the lists; no
 * caller holds a lock across a driver call). Memory is zeroed on return. Errors: NULL when mmap
 * fails.
 */
#ifndef CUSHIM_ARENA_H
#define CUSHIM_ARENA_H

#include <stddef.h>

/* A zeroed block of at least `bytes` bytes (rounded up to a power of two >= 64), 64-aligned. */
void *arena_alloc(size_t bytes);

/* Returns a block from arena_alloc(bytes) (same `bytes`) to its free list. NULL is ignored. */
void arena_free(void *p, size_t bytes);

/* A block of `new_bytes` holding the first `used` bytes of p (a block from arena_alloc(bytes), or
 * NULL with bytes 0), which is freed: a growing array. NULL when out of memory, p then untouched. */
void *arena_grow(void *p, size_t used, size_t bytes, size_t new_bytes);

/* Bytes obtained from the kernel so far (for the shim's own statistics). */
size_t arena_mapped_bytes(void);

/* In a child after fork(): forget the lists (the parent's lock may have been held). */
void arena_after_fork_child(void);

#endif
