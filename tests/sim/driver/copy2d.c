/* Pitched copies: cuMemcpy2D_v2, cuMemcpy2DUnaligned_v2, cuMemcpy2DAsync_v2, cuMemcpy3D_v2,
 * cuMemcpy3DAsync_v2, cuMemcpy3DPeer, cuMemcpy3DPeerAsync, each with its _ptds/_ptsz twin.
 *
 * cuda.h (cuMemcpy2D, cuMemcpy3D): each side names its memory type. CU_MEMORYTYPE_HOST: srcHost
 * and srcPitch; CU_MEMORYTYPE_DEVICE: srcDevice and srcPitch, "the (device) base address"; here it
 * must lie where the "D" side of the explicit 1D copies may (copy.c: device memory, or page-locked
 * host memory, which the real driver took named so);
 * CU_MEMORYTYPE_UNIFIED: srcDevice is "the (unified virtual address space) base address", any
 * address. The start is "srcDevice+srcY*srcPitch+srcXInBytes" (3D: plus srcZ*srcHeight rows);
 * "srcPitch must be greater than or equal to WidthInBytes + srcXInBytes" and (3D) "srcHeight must
 * be greater than or equal to Height + srcY", likewise for dst; "The srcLOD and dstLOD members ...
 * must be set to 0"; reserved0/reserved1 "Must be NULL". CUDA arrays (CU_MEMORYTYPE_ARRAY) hold
 * no simulated data: CUDA_ERROR_NOT_SUPPORTED. CUDA_MEMCPY3D_PEER adds "srcContext: Source context
 * (ignored with srcMemoryType is CU_MEMORYTYPE_ARRAY)", likewise dst: here a live context
 * (ctx.h, sim_ctx_check) for every other memory type. Synchronous copies are potentially unsafe during
 * capture; an asynchronous one on a capturing stream is not simulated (CUDA_ERROR_NOT_SUPPORTED:
 * the simulated graphs have 1D memcpy nodes only).
 */
#include <string.h>

#include "capture.h"
#include "ctx.h"
#include "mem.h"
#include "stream.h"

/* One side of a copy: its memory type, base address, pitch and slice height (rows). */
struct side {
    CUmemorytype type;
    uintptr_t base;
    size_t x, y, z, pitch, height;
};

struct extent {
    size_t width, rows, depth;
};

/* The byte offset of row `row` of slice `slice`, column `col`: (slice x height + row) x pitch +
 * col; false where it overflows size_t. */
static bool offset(const struct side *s, size_t slice, size_t row, size_t col, size_t *out)
{
    size_t rows;
    return !__builtin_mul_overflow(slice, s->height, &rows) && !__builtin_add_overflow(rows, row, &rows) &&
           !__builtin_mul_overflow(rows, s->pitch, out) && !__builtin_add_overflow(*out, col, out);
}

/* Offsets of the first byte the copy touches and one past the last; false where a position,
 * extent or pitch makes them overflow, or the last would lie past the end of the address space. */
static bool span(const struct side *s, const struct extent *e, size_t *first, size_t *end)
{
    size_t last_z, last_y, end_x;
    return !__builtin_add_overflow(s->z, e->depth - 1, &last_z) && !__builtin_add_overflow(s->y, e->rows - 1, &last_y) &&
           !__builtin_add_overflow(s->x, e->width, &end_x) && offset(s, s->z, s->y, s->x, first) &&
           offset(s, last_z, last_y, end_x, end) && sim_range_fits(s->base, *end);
}

/* "srcPitch must be greater than or equal to WidthInBytes + srcXInBytes" (and srcHeight of Height +
 * srcY): sums that overflow size_t fail those too. cuMemcpy2D "returns an error if any pitch is
 * greater than the maximum allowed (CU_DEVICE_ATTRIBUTE_MAX_PITCH)"; the simulated device
 * reports no maximum, so a pitch is refused where the rows it spans overflow, or wrap past the
 * end of the address space, on a side of any memory type: CUDA_ERROR_INVALID_VALUE, as for a
 * DEVICE side outside device memory. */
static CUresult side_check(const struct side *s, const struct extent *e)
{
    switch (s->type) {
    case CU_MEMORYTYPE_HOST:
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        break;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (e->width == 0 || e->rows == 0 || e->depth == 0)
        return CUDA_SUCCESS;
    size_t row_end, slice_end, first, end;
    if (__builtin_add_overflow(e->width, s->x, &row_end) || s->pitch < row_end ||
        (e->depth > 1 && (__builtin_add_overflow(e->rows, s->y, &slice_end) || s->height < slice_end)))
        return CUDA_ERROR_INVALID_VALUE;
    if (!span(s, e, &first, &end))
        return CUDA_ERROR_INVALID_VALUE;
    if (s->type != CU_MEMORYTYPE_DEVICE)
        return CUDA_SUCCESS;
    /* Device memory from the first byte to the last the copy touches. */
    return sim_mem_check((CUdeviceptr)(s->base + first), end - first, true);
}

static void move_rows(const struct side *d, const struct side *s, const struct extent *e)
{
    for (size_t z = 0; z < e->depth; z++)
        for (size_t y = 0; y < e->rows; y++)
            memmove((void *)(d->base + ((d->z + z) * d->height + d->y + y) * d->pitch + d->x),
                    (const void *)(s->base + ((s->z + z) * s->height + s->y + y) * s->pitch + s->x), e->width);
}

static CUresult do_copy(const struct side *d, const struct side *s, const struct extent *e, bool async,
                        CUstream h, bool per_thread_api)
{
    struct CUstream_st *st;
    CUresult rc = async ? CUDA_SUCCESS : sim_capture_unsafe();
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(async ? h : NULL, per_thread_api, &st);
    if (rc == CUDA_SUCCESS && !async)
        rc = sim_capture_forbid(st);
    if (rc == CUDA_SUCCESS && async && sim_capture_ongoing(st))
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS)
        rc = side_check(s, e);
    if (rc == CUDA_SUCCESS)
        rc = side_check(d, e);
    if (rc != CUDA_SUCCESS)
        return rc;
    move_rows(d, s, e);
    if (async)
        sim_stream_enqueue(st);
    return CUDA_SUCCESS;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, bool async, CUstream h, bool per_thread_api)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct side s = {p->srcMemoryType, p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost : p->srcDevice,
                     p->srcXInBytes, p->srcY, 0, p->srcPitch, 0};
    struct side d = {p->dstMemoryType, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost : p->dstDevice,
                     p->dstXInBytes, p->dstY, 0, p->dstPitch, 0};
    struct extent e = {p->WidthInBytes, p->Height, 1};
    return do_copy(&d, &s, &e, async, h, per_thread_api);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, bool async, CUstream h, bool per_thread_api)
{
    if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    struct side s = {p->srcMemoryType, p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost : p->srcDevice,
                     p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight};
    struct side d = {p->dstMemoryType, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost : p->dstDevice,
                     p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight};
    struct extent e = {p->WidthInBytes, p->Height, p->Depth};
    return do_copy(&d, &s, &e, async, h, per_thread_api);
}

static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *p, bool async, CUstream h, bool per_thread_api)
{
    if (!p || p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = p->srcMemoryType == CU_MEMORYTYPE_ARRAY ? CUDA_SUCCESS : sim_ctx_check(p->srcContext);
    if (rc == CUDA_SUCCESS && p->dstMemoryType != CU_MEMORYTYPE_ARRAY)
        rc = sim_ctx_check(p->dstContext);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct side s = {p->srcMemoryType, p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost : p->srcDevice,
                     p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight};
    struct side d = {p->dstMemoryType, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost : p->dstDevice,
                     p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight};
    struct extent e = {p->WidthInBytes, p->Height, p->Depth};
    return do_copy(&d, &s, &e, async, h, per_thread_api);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    SIM_ENTER(cuMemcpy2D_v2);
    return copy_2d(pCopy, false, NULL, false);
}

CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    SIM_ENTER(cuMemcpy2D_v2_ptds);
    return copy_2d(pCopy, false, NULL, true);
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    SIM_ENTER(cuMemcpy2DUnaligned_v2);
    return copy_2d(pCopy, false, NULL, false);
}

CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    SIM_ENTER(cuMemcpy2DUnaligned_v2_ptds);
    return copy_2d(pCopy, false, NULL, true);
}

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy2DAsync_v2);
    return copy_2d(pCopy, true, hStream, false);
}

CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy2DAsync_v2_ptsz);
    return copy_2d(pCopy, true, hStream, true);
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    SIM_ENTER(cuMemcpy3D_v2);
    return copy_3d(pCopy, false, NULL, false);
}

CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    SIM_ENTER(cuMemcpy3D_v2_ptds);
    return copy_3d(pCopy, false, NULL, true);
}

CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy3DAsync_v2);
    return copy_3d(pCopy, true, hStream, false);
}

CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy3DAsync_v2_ptsz);
    return copy_3d(pCopy, true, hStream, true);
}

CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    SIM_ENTER(cuMemcpy3DPeer);
    return copy_3d_peer(pCopy, false, NULL, false);
}

CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
    SIM_ENTER(cuMemcpy3DPeer_ptds);
    return copy_3d_peer(pCopy, false, NULL, true);
}

CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy3DPeerAsync);
    return copy_3d_peer(pCopy, true, hStream, false);
}

CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    SIM_ENTER(cuMemcpy3DPeerAsync_ptsz);
    return copy_3d_peer(pCopy, true, hStream, true);
}
