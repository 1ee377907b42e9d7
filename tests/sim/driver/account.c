/* Per-device memory accounting: simcuda_live_bytes per kind and the used bytes that
 * cuMemGetInfo_v2 and simcuda_used_bytes report (context overhead + device-resident allocations
 * rounded to SIMCUDA_GRANULARITY + pool and graph reserves). */
#include <pthread.h>

#include "sim.h"

static struct {
    pthread_mutex_t lock;
    uint64_t used;
    uint64_t live[SIMCUDA_KIND_COUNT];
} devices[SIM_MAX_DEVICES] = {[0 ... SIM_MAX_DEVICES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};

bool sim_device_valid(CUdevice dev)
{
    return dev >= 0 && dev < sim_cfg.device_count;
}

/* Saturates at UINT64_MAX where the round-up would wrap (sizes within unit of 2^64): more than any
 * capacity, so the capacity checks refuse it instead of charging a wrapped 0. */
uint64_t sim_round_to(uint64_t bytes, uint64_t unit)
{
    uint64_t up;
    if (__builtin_add_overflow(bytes, unit - 1, &up))
        return UINT64_MAX;
    return up / unit * unit;
}

uint64_t sim_round(uint64_t bytes)
{
    return sim_round_to(bytes, sim_cfg.granularity);
}

CUresult sim_account(int dev, simcuda_kind kind, int64_t bytes, int64_t charge)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&devices[dev].lock);
    if (charge > 0 && devices[dev].used + (uint64_t)charge > sim_cfg.capacity[dev]) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        devices[dev].used += (uint64_t)charge;
        if (kind < SIMCUDA_KIND_COUNT)
            devices[dev].live[kind] += (uint64_t)bytes;
    }
    pthread_mutex_unlock(&devices[dev].lock);
    return rc;
}

uint64_t sim_device_used(int dev)
{
    pthread_mutex_lock(&devices[dev].lock);
    uint64_t used = devices[dev].used;
    pthread_mutex_unlock(&devices[dev].lock);
    return used;
}

uint64_t simcuda_live_bytes(int ordinal, simcuda_kind kind)
{
    sim_setup();
    if (!sim_device_valid(ordinal) || (unsigned)kind >= SIMCUDA_KIND_COUNT)
        return 0;
    pthread_mutex_lock(&devices[ordinal].lock);
    uint64_t live = devices[ordinal].live[kind];
    pthread_mutex_unlock(&devices[ordinal].lock);
    return live;
}

uint64_t simcuda_used_bytes(int ordinal)
{
    sim_setup();
    return sim_device_valid(ordinal) ? sim_device_used(ordinal) : 0;
}
