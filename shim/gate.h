/* The plain-path gate: one word that every intercepted allocation and free reads first
 * (offload.h shim_enter_plain_alloc / shim_enter_plain_free). Zero: nothing but counting to do.
 *
 *   bits 0-31   captures begun and not yet ended, process-wide (capture.c)
 *   bits 32-62  deferred offloaded frees waiting for their stream (offload.c)
 *   bit 63      the plain path is off: the shim is not active, or offload, a budget or spill is
 *               configured (init.c; set at load and in a forked child, cleared once active with
 *               no policy)
 *
 * Each field changes by atomic add/subtract of its unit; a count never goes below zero (every
 * decrement matches an increment made before it), so no field borrows from the next.
 * Thread-safe. */
#ifndef CUSHIM_GATE_H
#define CUSHIM_GATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/visibility.h"

extern SHIM_HIDDEN _Atomic uint64_t shim_gate;

#define SHIM_GATE_CAPTURE 1ull            /* unit of the capture count */
#define SHIM_GATE_PENDING (1ull << 32)    /* unit of the pending-free count */
#define SHIM_GATE_OFF (1ull << 63)
#define SHIM_GATE_CAPTURES 0xffffffffull
#define SHIM_GATE_PENDINGS (0x7fffffffull << 32)

/* Captures live (begun, not ended). */
static inline uint32_t gate_captures(void)
{
    return (uint32_t)(atomic_load_explicit(&shim_gate, memory_order_relaxed) & SHIM_GATE_CAPTURES);
}

/* Deferred frees pending. */
static inline uint32_t gate_pending(void)
{
    return (uint32_t)((atomic_load_explicit(&shim_gate, memory_order_relaxed) & SHIM_GATE_PENDINGS) >> 32);
}

#endif
