/* cuGetErrorString / cuGetErrorName over the table generated from cuda.h's CUresult enum.
 * cuda.h: "If the error code is not recognized, CUDA_ERROR_INVALID_VALUE will be returned and
 * *pStr will be set to the NULL address." */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int by_value(const void *key, const void *elem)
{
    int v = *(const int *)key, e = ((const struct sim_error_row *)elem)->value;
    return (v > e) - (v < e);
}

static const struct sim_error_row *find(CUresult error)
{
    int v = (int)error;
    return bsearch(&v, sim_error_rows, sim_error_row_count, sizeof *sim_error_rows, by_value);
}

bool sim_error_by_name(const char *name, CUresult *code)
{
    for (unsigned i = 0; i < sim_error_row_count; i++)
        if (strcmp(sim_error_rows[i].name, name) == 0) {
            *code = (CUresult)sim_error_rows[i].value;
            return true;
        }
    return false;
}

static CUresult describe(CUresult error, const char **pStr, bool name)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_error_row *row = find(error);
    *pStr = row ? (name ? row->name : row->text) : NULL;
    return row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    SIM_ENTER_PREINIT(cuGetErrorString);
    return describe(error, pStr, false);
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    SIM_ENTER_PREINIT(cuGetErrorName);
    return describe(error, pStr, true);
}
