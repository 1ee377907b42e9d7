/* The range registry: every addressable allocation, sorted by base address (ranges are
 * disjoint), behind one mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_range *ranges;
static size_t count, capacity;
static uint64_t next_id;

/* Index of the first range whose base is > addr. */
static size_t upper(uintptr_t addr)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Overflow-safe: compares offsets from the lower base, never an end that could wrap. */
static bool overlaps(size_t i, uintptr_t base, size_t size, unsigned kinds)
{
    if (i >= count || !(kinds & (1u << ranges[i].kind)))
        return false;
    uintptr_t other = ranges[i].base;
    return base <= other ? other - base < size : base - other < ranges[i].size;
}

static void remove_at(size_t i, struct sim_range *out)
{
    if (out)
        *out = ranges[i];
    memmove(&ranges[i], &ranges[i + 1], (count - i - 1) * sizeof *ranges);
    count--;
}

CUresult sim_reg_add(struct sim_range *r, unsigned exclusive)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    size_t i = upper(r->base);
    if ((i > 0 && overlaps(i - 1, r->base, r->size, exclusive)) || overlaps(i, r->base, r->size, exclusive)) {
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else if (count == capacity) {
        size_t grown = capacity ? 2 * capacity : 64;
        struct sim_range *bigger = realloc(ranges, grown * sizeof *ranges);
        if (bigger) {
            ranges = bigger;
            capacity = grown;
        } else {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (rc == CUDA_SUCCESS) {
        r->id = ++next_id;
        memmove(&ranges[i + 1], &ranges[i], (count - i) * sizeof *ranges);
        ranges[i] = *r;
        count++;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

bool sim_reg_take(uintptr_t base, unsigned kinds, struct sim_range *out)
{
    pthread_mutex_lock(&lock);
    size_t i = upper(base);
    bool hit = i > 0 && ranges[i - 1].base == base && (kinds & (1u << ranges[i - 1].kind));
    if (hit)
        remove_at(i - 1, out);
    pthread_mutex_unlock(&lock);
    return hit;
}

bool sim_reg_find(uintptr_t addr, size_t len, unsigned kinds, struct sim_range *out)
{
    pthread_mutex_lock(&lock);
    size_t i = upper(addr);
    const struct sim_range *r = i > 0 ? &ranges[i - 1] : NULL;
    bool hit = r && (kinds & (1u << r->kind)) && addr - r->base < r->size && len <= r->size - (addr - r->base);
    if (hit && out)
        *out = *r;
    pthread_mutex_unlock(&lock);
    return hit;
}

size_t sim_reg_take_ctx(CUcontext ctx, unsigned kinds, struct sim_range **out)
{
    size_t n = 0, kept = 0;
    pthread_mutex_lock(&lock);
    *out = malloc((count ? count : 1) * sizeof **out);
    for (size_t i = 0; i < count; i++) {
        if (*out && ranges[i].ctx == ctx && (kinds & (1u << ranges[i].kind)))
            (*out)[n++] = ranges[i];
        else
            ranges[kept++] = ranges[i];
    }
    count = kept;
    pthread_mutex_unlock(&lock);
    return n;
}
