/* Errors: the CUresult -> cudaError_t mapping, the per-thread last error, cudaGetLastError,
 * cudaPeekAtLastError, cudaGetErrorString, cudaGetErrorName (table generated from
 * driver_types.h). cuda_runtime_api.h, cudaGetLastError: "Returns the last error that has been
 * produced by any of the runtime calls in the same instance of the CUDA Runtime library in the
 * host thread and resets it to cudaSuccess." cudaErrorNotReady "is not actually an error" and is
 * not recorded. */
#include <stdlib.h>

#include "rt.h"

static __thread cudaError_t last_error;

static int by_value(const void *key, const void *elem)
{
    int v = *(const int *)key, e = ((const struct simrt_error_row *)elem)->value;
    return (v > e) - (v < e);
}

static const struct simrt_error_row *find(int value)
{
    return bsearch(&value, simrt_error_rows, simrt_error_row_count, sizeof *simrt_error_rows, by_value);
}

cudaError_t simrt_error(CUresult rc)
{
    return rc == CUDA_SUCCESS ? cudaSuccess : find((int)rc) ? (cudaError_t)rc : cudaErrorUnknown;
}

cudaError_t simrt_ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    return last_error;
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    const struct simrt_error_row *row = find((int)error);
    return row ? row->text : "unrecognized error code";
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
    const struct simrt_error_row *row = find((int)error);
    return row ? row->name : "unrecognized error code";
}
