/* Multi-writer sequence lock over one device record (segment.h).
 *
 * Writers never wait: each update is bracketed by seq_begin++ (before) and seq_end++ (after).
 * A reader loads seq_end, copies, then loads seq_begin: if they are equal, no writer was inside
 * the bracket at the first load and none entered before the last, so the copy is consistent
 * (begin >= end at every instant, both only grow). Writers may starve a reader; readers retry
 * a bounded number of times (snapshot.c).
 *
 * Thread-safety: any number of writer threads (and the owner's CLI, for peak resets) and
 * readers in any process mapping the segment.
 */
#ifndef CUSHIM_SEQLOCK_H
#define CUSHIM_SEQLOCK_H

#include <stdatomic.h>
#include <stdint.h>

static inline void cushim_seq_write_begin(_Atomic uint64_t *begin)
{
    atomic_fetch_add_explicit(begin, 1, memory_order_relaxed);
    /* Order the bump before the counter stores that follow. */
    atomic_thread_fence(memory_order_release);
}

static inline void cushim_seq_write_end(_Atomic uint64_t *end)
{
    atomic_fetch_add_explicit(end, 1, memory_order_release);
}

/* Returns the token to pass to cushim_seq_read_valid. */
static inline uint64_t cushim_seq_read_begin(_Atomic uint64_t *end)
{
    return atomic_load_explicit(end, memory_order_acquire);
}

static inline int cushim_seq_read_valid(_Atomic uint64_t *begin, uint64_t token)
{
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(begin, memory_order_relaxed) == token;
}

#endif
