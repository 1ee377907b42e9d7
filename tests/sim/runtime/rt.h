/* Internals of the simulated CUDA runtime (libcudart.so.13 / libcudart_static.a).
 *
 * Like cudart 13.0 it reaches the driver only through dlopen("libcuda.so.1") and the
 * cuGetProcAddress_v2 lookups of cudart13-driver-lookups.txt, replayed in order at init; every
 * runtime call uses the pointer of one of those lookups, by (name, version, flags). Everything
 * but the cuda* entry points is hidden; internal names start with simrt_ (the static library is
 * linked into other programs). */
#ifndef SIMRT_H
#define SIMRT_H

#pragma GCC visibility push(default)
#include <cuda_runtime_api.h>
#pragma GCC visibility pop
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdbool.h>

#include "lookups.h"

/* The driver functions, indexed by lookup (NULL where the driver has none, e.g. SIMCUDA_HIDE). */
extern void *simrt_fn[SIMRT_LK_COUNT];

/* The pointer cudart got for `name` at version `ver` (flags 0), typed by cudaTypedefs.h. */
#define DRV(name, ver) ((PFN_##name##_v##ver)simrt_fn[SIMRT_LK_##name##_##ver])
/* The same, or for the _ptsz/_ptds runtime entry points (pt) the pointer looked up with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM at version `ptver` (same signature). */
#define DRV_PT(name, ver, ptver, pt) \
    ((PFN_##name##_v##ver)simrt_fn[(pt) ? SIMRT_LK_##name##_##ptver##_PT : SIMRT_LK_##name##_##ver])
/* Calls a driver pointer and maps its CUresult; a missing function is cudaErrorNotSupported. */
#define SIMRT_CALL(fn, ...) ((fn) ? simrt_error((fn)(__VA_ARGS__)) : cudaErrorNotSupported)

/* Loads the driver and replays the lookups (once), then cuInit(0). */
cudaError_t simrt_init(void);
/* simrt_init, then makes sure a usable context is current: the calling thread's current one, or
 * the primary context of the thread's device (cudaSetDevice), retained once per process. */
cudaError_t simrt_ctx(void);
/* The device cudaGetDevice reports. */
int simrt_device(void);
/* The primary context of `device`, retained once per process (as simrt_ctx retains it) but not
 * made current; an ordinal the driver does not have is cudaErrorInvalidDevice. */
cudaError_t simrt_primary(int device, CUcontext *ctx);
/* cudaSetDevice / cudaDeviceReset bookkeeping of the retained primary contexts. */
cudaError_t simrt_bind(int device);
void simrt_forget(int device);

/* CUresult -> cudaError_t: equal numbers where driver_types.h has the value, else
 * cudaErrorUnknown. */
cudaError_t simrt_error(CUresult rc);
/* Records a failure as the thread's last error (cudaGetLastError) and returns it. */
cudaError_t simrt_ret(cudaError_t e);

struct simrt_error_row {
    int value;
    const char *name;
    const char *text;
};
extern const struct simrt_error_row simrt_error_rows[];
extern const unsigned simrt_error_row_count;

#endif
