/* Initialization and device queries. Devices come from SIMCUDA_DEVICE_COUNT,
 * SIMCUDA_DEVICE_MEMORY and SIMCUDA_DEVICE_NAME; byte i of device d's UUID is 0x10*d + i. */
#include <stdio.h>

#include "sim.h"

/* cuda.h, cuInit: "Currently, the Flags parameter must be 0." */
CUresult CUDAAPI cuInit(unsigned int Flags)
{
    SIM_ENTER_PREINIT(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_cfg.device_count == 0)
        return CUDA_ERROR_NO_DEVICE;
    sim_set_initialized();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    SIM_ENTER_PREINIT(cuDriverGetVersion);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_ENTER(cuDeviceGet);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SIM_ENTER(cuDeviceGetCount);
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_cfg.device_count;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetName);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", sim_cfg.name);
    return CUDA_SUCCESS;
}

static CUresult uuid(CUuuid *out, CUdevice dev)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 16; i++)
        out->bytes[i] = (char)(0x10 * sim_cfg.physical[dev] + i);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid_out, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetUuid);
    return uuid(uuid_out, dev);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid_out, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetUuid_v2);
    return uuid(uuid_out, dev);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_ENTER(cuDeviceTotalMem_v2);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = sim_cfg.capacity[dev];
    return CUDA_SUCCESS;
}

/* A Hopper-like device (compute capability 9.0) with unified addressing, mapped pinned memory,
 * managed memory, memory pools and the virtual memory management API; every other attribute
 * reads 0. */
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetAttribute);
    if (!pi || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *pi = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *pi = sim_cfg.physical[dev];
        break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        *pi = 1;
        break;
    default:
        *pi = 0;
    }
    return CUDA_SUCCESS;
}
