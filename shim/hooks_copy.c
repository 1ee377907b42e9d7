/* Offloaded ranges seen through other calls (offload.h): explicit-kind copies (cuMemcpyHtoD_v2,
 * DtoH, DtoD, sync and async, legacy and per-thread) and peer copies (cuMemcpyPeer, "from device
 * memory in one context to device memory in another context") touching an offloaded range are
 * made with cuMemcpy / cuMemcpyAsync instead, since cuda.h defines the explicit kinds only for
 * memory of that kind while cuMemcpy infers the direction from unified addresses (DESIGN.md);
 * cuMemGetAddressRange_v2 answers from the shim's table; cuIpcGetMemHandle on an offloaded range
 * returns CUDA_ERROR_INVALID_VALUE (host memory has no IPC handle) without calling the driver.
 * Pitched copies (2D, 3D, 3D peer) naming an offloaded range as device memory name it as unified
 * memory.
 * Everything else passes through: with no offloaded range alive each check is one load. */
#include "shim/capture.h"
#include "shim/offload.h"
#include "shim/shim.h"

#define ADDR(p) ((uint64_t)(uintptr_t)(p))

/* Whether addr is in memory mapped from a cuMemCreate handle (the driver retains one for it). */
static bool vmm_mapped(CUdeviceptr addr)
{
    __typeof__(&cuMemRetainAllocationHandle) retain = REAL(cuMemRetainAllocationHandle);
    __typeof__(&cuMemRelease) release = REAL(cuMemRelease);
    CUmemGenericAllocationHandle h;
    if (!retain || !release || retain(&h, (void *)(uintptr_t)addr) != CUDA_SUCCESS)
        return false;
    release(h);
    return true;
}

/* Whether [p, p + n) is device memory the explicit copies take: one allocation, or mappings of
 * cuMemCreate handles back to back (cuMemGetAddressRange_v2 answers for one mapping; a copy may
 * span several, as PyTorch's expandable segments do). */
static bool device_span(CUdeviceptr p, size_t n)
{
    __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
    CUdeviceptr at = p, end = p + n;
    if (!range || end < p)
        return false;
    for (unsigned hop = 0; hop < 65536; hop++) { /* 65536 mappings: over a TiB of 20 MiB segments */
        CUdeviceptr base = 0;
        size_t size = 0;
        if (range(&base, &size, at) != CUDA_SUCCESS || (hop && base != at))
            return false;
        if (base + size >= end)
            return true;
        /* `at` was found mapped at the previous hop (as its next mapping's start). */
        if ((!hop && !vmm_mapped(at)) || !vmm_mapped(base + size))
            return false;
        at = base + size;
    }
    return false;
}

/* Whether a copy touching offloaded memory may go ahead as a unified one: CUDA_SUCCESS, or the
 * CUresult the explicit call would refuse it with. d_, s_: offload_span of each side (-1: it runs
 * past its offloaded range). A side the explicit call names as device memory that is not
 * offloaded (dst_dev, src_dev) must be device memory, as the driver requires of it (cuda.h
 * cuMemcpyDtoD: "dstDevice - Destination device pointer"): asked of the driver (device_span);
 * the unified copy would take any address. */
static __attribute__((noinline, cold)) CUresult reroute_refusal(int d_, int s_, uint64_t dst, bool dst_dev,
                                                                uint64_t src, bool src_dev, size_t n)
{
    if (d_ < 0 || s_ < 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t sides[2] = {dst_dev && !d_ ? dst : 0, src_dev && !s_ ? src : 0};
    for (int i = 0; i < 2 && n; i++)
        if (sides[i] && !device_span((CUdeviceptr)sides[i], n))
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A refused copy gets the driver's own refusal first where it has one (no current context, a
 * stream it does not know, a synchronous copy during a capture that prohibits it, which the call
 * also invalidates), as the explicit call would have: `probe`, the unified call with nothing to
 * copy, asks the same (made once; not on a capturing stream, where it would add a node); else
 * the shim's own refusal `no`. */
static inline CUresult refused(CUresult no, CUresult probe)
{
    return probe != CUDA_SUCCESS ? probe : no;
}

#define COPY_SYNC(sym, unified, dst_t, src_t, dst_dev, src_dev)                               \
    SHIM_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t ByteCount)                  \
    {                                                                                         \
        REAL_OR_FAIL(sym);                                                                    \
        int d_ = offload_span(ADDR(dst), ByteCount), s_ = offload_span(ADDR(src), ByteCount); \
        if (unlikely(d_ | s_)) {                                                              \
            __typeof__(&unified) u = REAL(unified);                                           \
            CUresult no = reroute_refusal(d_, s_, ADDR(dst), dst_dev, ADDR(src), src_dev, ByteCount); \
            if (no != CUDA_SUCCESS)                                                           \
                return refused(no, u ? u((CUdeviceptr)ADDR(dst), (CUdeviceptr)ADDR(src), 0) : no); \
            if (u)                                                                            \
                return u((CUdeviceptr)ADDR(dst), (CUdeviceptr)ADDR(src), ByteCount);          \
        }                                                                                     \
        return real_(dst, src, ByteCount);                                                    \
    }

#define COPY_ASYNC(sym, unified, dst_t, src_t, dst_dev, src_dev, pt)                          \
    SHIM_EXPORT CUresult CUDAAPI sym(dst_t dst, src_t src, size_t ByteCount, CUstream hStream) \
    {                                                                                         \
        REAL_OR_FAIL(sym);                                                                    \
        int d_ = offload_span(ADDR(dst), ByteCount), s_ = offload_span(ADDR(src), ByteCount); \
        if (unlikely(d_ | s_)) {                                                              \
            __typeof__(&unified) u = REAL(unified);                                           \
            CUresult no = reroute_refusal(d_, s_, ADDR(dst), dst_dev, ADDR(src), src_dev, ByteCount); \
            if (no != CUDA_SUCCESS)                                                           \
                return refused(no, u && !capture_stream_is_capturing(hStream, pt)             \
                                       ? u((CUdeviceptr)ADDR(dst), (CUdeviceptr)ADDR(src), 0, hStream) \
                                       : no);                                                 \
            if (u)                                                                            \
                return u((CUdeviceptr)ADDR(dst), (CUdeviceptr)ADDR(src), ByteCount, hStream); \
        }                                                                                     \
        return real_(dst, src, ByteCount, hStream);                                           \
    }

COPY_SYNC(cuMemcpyHtoD_v2, cuMemcpy, CUdeviceptr, const void *, true, false)
COPY_SYNC(cuMemcpyHtoD_v2_ptds, cuMemcpy_ptds, CUdeviceptr, const void *, true, false)
COPY_SYNC(cuMemcpyDtoH_v2, cuMemcpy, void *, CUdeviceptr, false, true)
COPY_SYNC(cuMemcpyDtoH_v2_ptds, cuMemcpy_ptds, void *, CUdeviceptr, false, true)
COPY_SYNC(cuMemcpyDtoD_v2, cuMemcpy, CUdeviceptr, CUdeviceptr, true, true)
COPY_SYNC(cuMemcpyDtoD_v2_ptds, cuMemcpy_ptds, CUdeviceptr, CUdeviceptr, true, true)
COPY_ASYNC(cuMemcpyHtoDAsync_v2, cuMemcpyAsync, CUdeviceptr, const void *, true, false, false)
COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyAsync_ptsz, CUdeviceptr, const void *, true, false, true)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, cuMemcpyAsync, void *, CUdeviceptr, false, true, false)
COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyAsync_ptsz, void *, CUdeviceptr, false, true, true)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, cuMemcpyAsync, CUdeviceptr, CUdeviceptr, true, true, false)
COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr, true, true, true)

/* The contexts of a peer copy, as the driver checks them (cuda.h cuMemcpyPeer:
 * CUDA_ERROR_INVALID_CONTEXT): each must be a context (cuCtxGetApiVersion answers for a live
 * one; NULL would mean the current one there, and names none here). */
static __attribute__((noinline, cold)) CUresult peer_contexts(CUcontext dst, CUcontext src)
{
    __typeof__(&cuCtxGetApiVersion) version = REAL(cuCtxGetApiVersion);
    CUcontext both[2] = {dst, src};
    for (int i = 0; i < 2; i++) {
        unsigned v;
        if (!both[i])
            return CUDA_ERROR_INVALID_CONTEXT;
        CUresult r = version ? version(both[i], &v) : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* Peer copies: the contexts name where each side's device memory lives (checked as the driver
 * checks them); cuMemcpy needs none ("infers the type of the transfer ... from the pointer
 * values", which unified addressing places in their device or in host memory), but runs in the
 * calling thread's current context, which cudart's cudaMemcpyPeer always sets; a driver-API
 * caller with no current context gets cuMemcpy's CUDA_ERROR_INVALID_CONTEXT for a copy that
 * touches offloaded memory. */
#define COPY_PEER(sym, unified, params, args, uargs, probe)                                   \
    SHIM_EXPORT CUresult CUDAAPI sym params                                                   \
    {                                                                                         \
        REAL_OR_FAIL(sym);                                                                    \
        int d_ = offload_span(dstDevice, ByteCount), s_ = offload_span(srcDevice, ByteCount); \
        if (unlikely(d_ | s_)) {                                                              \
            __typeof__(&unified) u = REAL(unified);                                           \
            CUresult no = peer_contexts(dstContext, srcContext);                              \
            if (no != CUDA_SUCCESS)                                                           \
                return no;                                                                    \
            no = reroute_refusal(d_, s_, dstDevice, true, srcDevice, true, ByteCount);        \
            if (no != CUDA_SUCCESS)                                                           \
                return refused(no, u ? probe : no);                                           \
            if (u)                                                                            \
                return u uargs;                                                               \
        }                                                                                     \
        return real_ args;                                                                    \
    }
#define PEER_PARAMS CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount
COPY_PEER(cuMemcpyPeer, cuMemcpy, (PEER_PARAMS),
          (dstDevice, dstContext, srcDevice, srcContext, ByteCount), (dstDevice, srcDevice, ByteCount),
          u(dstDevice, srcDevice, 0))
COPY_PEER(cuMemcpyPeer_ptds, cuMemcpy_ptds, (PEER_PARAMS),
          (dstDevice, dstContext, srcDevice, srcContext, ByteCount), (dstDevice, srcDevice, ByteCount),
          u(dstDevice, srcDevice, 0))
COPY_PEER(cuMemcpyPeerAsync, cuMemcpyAsync, (PEER_PARAMS, CUstream hStream),
          (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream),
          (dstDevice, srcDevice, ByteCount, hStream),
          capture_stream_is_capturing(hStream, false) ? no : u(dstDevice, srcDevice, 0, hStream))
COPY_PEER(cuMemcpyPeerAsync_ptsz, cuMemcpyAsync_ptsz, (PEER_PARAMS, CUstream hStream),
          (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream),
          (dstDevice, srcDevice, ByteCount, hStream),
          capture_stream_is_capturing(hStream, true) ? no : u(dstDevice, srcDevice, 0, hStream))

/* Pitched copies (cuda.h, cuMemcpy2D / cuMemcpy3D): a side that names an offloaded range as
 * CU_MEMORYTYPE_DEVICE is passed as CU_MEMORYTYPE_UNIFIED, "the (unified virtual address space)
 * base address", with the same address and pitch: the copy is the same, and defined for host
 * memory. The caller's descriptor is copied, never changed. A device or unified side that reaches
 * past the offloaded range's requested size is refused (CUDA_ERROR_INVALID_VALUE), as the driver
 * refuses one past a device allocation, instead of copying past the pinned block; the driver's own
 * refusal first (refused; a review: no current context gave the shim's INVALID_VALUE). */

/* offload_span for one side of a pitched copy, from its base address. cuda.h CUDA_MEMCPY2D: the
 * copy starts srcY rows of srcPitch bytes and srcXInBytes bytes into the side and covers Height
 * rows of WidthInBytes bytes, srcPitch apart; CUDA_MEMCPY3D adds srcZ and Depth slices of
 * srcHeight rows each. An extent that overflows 64 bits runs past any range. */
static int pitched_span(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch,
                        uint64_t slice_rows, uint64_t width, uint64_t rows, uint64_t depth)
{
    if (likely(atomic_load_explicit(&offload_live, memory_order_relaxed) == 0))
        return 0;
    uint64_t b, size;
    if (!offload_find(base, &b, &size))
        return 0;
    if (!width || !rows || !depth)
        return 1;
    /* One past the last byte: ((z + depth - 1) * slice_rows + y + rows - 1) * pitch + x + width. */
    uint64_t last_row, end;
    if (__builtin_mul_overflow(z + depth - 1, slice_rows, &last_row) ||
        __builtin_add_overflow(last_row, y + rows - 1, &last_row) || z + depth - 1 < z ||
        y + rows - 1 < y || __builtin_mul_overflow(last_row, pitch, &end) ||
        __builtin_add_overflow(end, x, &end) || __builtin_add_overflow(end, width, &end))
        return -1;
    return end <= size - (base - b) ? 1 : -1;
}

#define SPAN_2D(d, side)                                                                      \
    pitched_span((d).side##Device, (d).side##XInBytes, (d).side##Y, 0, (d).side##Pitch, 0,   \
                 (d).WidthInBytes, (d).Height, 1)
#define SPAN_3D(d, side)                                                                      \
    pitched_span((d).side##Device, (d).side##XInBytes, (d).side##Y, (d).side##Z,             \
                 (d).side##Pitch, (d).side##Height, (d).WidthInBytes, (d).Height, (d).Depth)

/* The side's span when it names memory by address (device or unified), else 0. */
#define SIDE_SPAN(d, side, span)                                                              \
    ((d).side##MemoryType == CU_MEMORYTYPE_DEVICE || (d).side##MemoryType == CU_MEMORYTYPE_UNIFIED \
         ? span(d, side) : 0)

/* A side's address for a probe (refused): its host pointer or its device/unified address. */
#define SIDE_ADDR(d, side)                                                                    \
    ((d).side##MemoryType == CU_MEMORYTYPE_HOST ? (CUdeviceptr)(uintptr_t)(d).side##Host : (d).side##Device)
/* Probes for the pitched copies' refusal: the unified copy of nothing between the same sides on
 * the same stream (as the 1D copies'); a peer copy's contexts, as its driver checks them, then
 * for an asynchronous one its stream. */
#define PROBE_SYNC(u) (REAL(u) ? REAL(u)(SIDE_ADDR(d, dst), SIDE_ADDR(d, src), 0) : CUDA_SUCCESS)
#define PROBE_ASYNC(u, pt)                                                                    \
    (REAL(u) && !capture_stream_is_capturing(hStream, pt)                                     \
         ? REAL(u)(SIDE_ADDR(d, dst), SIDE_ADDR(d, src), 0, hStream) : CUDA_SUCCESS)
#define PROBE_PEER peer_contexts(d.dstContext, d.srcContext)
#define PROBE_PEER_ASYNC(u, pt) (PROBE_PEER != CUDA_SUCCESS ? PROBE_PEER : PROBE_ASYNC(u, pt))

#define COPY_PITCHED(sym, desc_t, span, params, args, probe)                                   \
    SHIM_EXPORT CUresult CUDAAPI sym params                                                    \
    {                                                                                          \
        REAL_OR_FAIL(sym);                                                                     \
        desc_t d;                                                                              \
        if (unlikely(atomic_load_explicit(&offload_live, memory_order_relaxed) != 0) && pCopy) { \
            d = *pCopy;                                                                        \
            int s_ = SIDE_SPAN(d, src, span), d_ = SIDE_SPAN(d, dst, span);                    \
            if (s_ < 0 || d_ < 0)                                                              \
                return refused(CUDA_ERROR_INVALID_VALUE, probe);                               \
            if (s_ && d.srcMemoryType == CU_MEMORYTYPE_DEVICE)                                 \
                d.srcMemoryType = CU_MEMORYTYPE_UNIFIED;                                       \
            if (d_ && d.dstMemoryType == CU_MEMORYTYPE_DEVICE)                                 \
                d.dstMemoryType = CU_MEMORYTYPE_UNIFIED;                                       \
            pCopy = &d;                                                                        \
        }                                                                                      \
        return real_ args;                                                                     \
    }
COPY_PITCHED(cuMemcpy2D_v2, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy))
COPY_PITCHED(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy_ptds))
COPY_PITCHED(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy))
COPY_PITCHED(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy_ptds))
COPY_PITCHED(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream), PROBE_ASYNC(cuMemcpyAsync, false))
COPY_PITCHED(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, SPAN_2D, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream), PROBE_ASYNC(cuMemcpyAsync_ptsz, true))
COPY_PITCHED(cuMemcpy3D_v2, CUDA_MEMCPY3D, SPAN_3D, (const CUDA_MEMCPY3D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy))
COPY_PITCHED(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, SPAN_3D, (const CUDA_MEMCPY3D *pCopy), (pCopy), PROBE_SYNC(cuMemcpy_ptds))
COPY_PITCHED(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, SPAN_3D, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream), PROBE_ASYNC(cuMemcpyAsync, false))
COPY_PITCHED(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, SPAN_3D, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream), PROBE_ASYNC(cuMemcpyAsync_ptsz, true))
/* CUDA_MEMCPY3D_PEER: the same sides plus srcContext/dstContext, passed unchanged. */
COPY_PITCHED(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, SPAN_3D, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), PROBE_PEER)
COPY_PITCHED(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, SPAN_3D, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy), PROBE_PEER)
COPY_PITCHED(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, SPAN_3D, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream), PROBE_PEER_ASYNC(cuMemcpyAsync, false))
COPY_PITCHED(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, SPAN_3D, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream), PROBE_PEER_ASYNC(cuMemcpyAsync_ptsz, true))

SHIM_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                                     CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuMemGetAddressRange_v2);
    uint64_t base, size;
    if (unlikely(atomic_load_explicit(&offload_live, memory_order_relaxed) != 0) &&
        offload_find(dptr, &base, &size)) {
        /* cuda.h: "Both parameters pbase and psize are optional" (NULL is ignored). */
        if (pbase)
            *pbase = base;
        if (psize)
            *psize = size;
        return CUDA_SUCCESS;
    }
    return real_(pbase, psize, dptr);
}

SHIM_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuIpcGetMemHandle);
    if (offload_touches(dptr)) {
        LOG_ONCE(CUSHIM_LOG_WARN, "cuIpcGetMemHandle on offloaded memory: CUDA_ERROR_INVALID_VALUE "
                 "(it is pinned host memory; raise CUSHIM_OFFLOAD_MIN or turn offload off for "
                 "buffers shared between processes)");
        return CUDA_ERROR_INVALID_VALUE;
    }
    return real_(pHandle, dptr);
}
