/* Device memory is host memory (README.md): small allocations from aligned_alloc (256-byte
 * aligned, like cuMemAlloc's "suitably aligned for any kind of variable"), large ones (>= 64 KiB)
 * from mmap with MAP_NORESERVE, so capacity is bookkeeping and pages are touched only when used. */
#include <stdlib.h>
#include <sys/mman.h>

#include "mem.h"

#define ALIGN 256
#define LARGE (64u << 10)

void *sim_backing_alloc(size_t size)
{
    if (size < LARGE)
        return aligned_alloc(ALIGN, sim_round_to(size, ALIGN));
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sim_backing_free(void *p, size_t size)
{
    if (size < LARGE)
        free(p);
    else
        munmap(p, size);
}
