/* CUDA arrays (kind `array`): cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate and
 * their destroys. Requested bytes = texels x texel size (levels summed for mipmaps, the level
 * count clamped as cuda.h says) for the formats of cuda.h's CUarray_format whose texel size the
 * header gives: the per-channel ones (times NumChannels) and the packed R10G10B10A2; for the
 * block-compressed BCn formats, blocks of 4 x 4 texels x the block's bytes. Planar (YUV) formats
 * count 0 bytes, logged once (the driver gives an array's size only for deferred-mapping arrays). Sparse and deferred-mapping arrays have no memory of their own
 * (cuda.h: their memory is mapped later with cuMemMapArrayAsync, from cuMemCreate handles counted
 * as `vmm`): counted with 0 bytes. */
#include "shim/budget.h"
#include "shim/shim.h"
#include "shim/track.h"

/* array_bytes' answer for a format whose texel size the shim does not know. */
#define ARRAY_BYTES_UNKNOWN UINT64_MAX

/* Bytes of one channel of per-channel format f, 0 if f is not one (cuda.h CUarray_format: the
 * UNORM/SNORM_INTnXc formats are c channels of n bits). */
static unsigned element_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X4:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X4:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0; /* not a per-channel element format */
    }
}

/* Bytes of one 4 x 4 block of block-compressed format f, 0 if f is not one. cuda.h names the
 * formats ("block-compressed (BC1 compression) format", ...) but not their layout; the sizes are
 * the BCn formats' own (Direct3D block compression, also OpenGL's S3TC / RGTC / BPTC): BC1 and
 * BC4 store a block of 4 x 4 texels in 8 bytes, BC2, BC3, BC5, BC6H and BC7 in 16. */
static unsigned block_bytes(CUarray_format f)
{
    switch ((int)f) {
#if CUDA_VERSION >= 11050
    case CU_AD_FORMAT_BC1_UNORM:
    case CU_AD_FORMAT_BC1_UNORM_SRGB:
    case CU_AD_FORMAT_BC4_UNORM:
    case CU_AD_FORMAT_BC4_SNORM:
        return 8;
    case CU_AD_FORMAT_BC2_UNORM:
    case CU_AD_FORMAT_BC2_UNORM_SRGB:
    case CU_AD_FORMAT_BC3_UNORM:
    case CU_AD_FORMAT_BC3_UNORM_SRGB:
    case CU_AD_FORMAT_BC5_UNORM:
    case CU_AD_FORMAT_BC5_SNORM:
    case CU_AD_FORMAT_BC6H_UF16:
    case CU_AD_FORMAT_BC6H_SF16:
    case CU_AD_FORMAT_BC7_UNORM:
    case CU_AD_FORMAT_BC7_UNORM_SRGB:
        return 16;
#endif
    default:
        return 0;
    }
}

/* Bytes of one texel of descriptor d, 0 if unknown. */
static uint64_t texel_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    /* CU_AD_FORMAT_UNORM_INT_101010_2 = 0x50 (cuda.h since 12.8: "4 channel unorm R10G10B10A2",
     * 32 bits), by value: a shim built with older headers counts it too. */
    if ((int)d->Format == 0x50)
        return 4;
    return (uint64_t)element_bytes(d->Format) * d->NumChannels;
}

static uint64_t dim(size_t d, unsigned level)
{
    uint64_t v = level < 64 ? (uint64_t)(d ? d : 1) >> level : 0;
    return v ? v : 1;
}

/* cuda.h cuMipmappedArrayCreate: numMipmapLevels "is clamped to the range [1, 1 +
 * floor(log2(max(width, height, depth)))]"; a layered or cubemap array's Depth is its layer count
 * (cuda.h CUDA_ARRAY3D_DESCRIPTOR), not a dimension that levels halve. */
static unsigned mip_levels(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    uint64_t m = d->Width;
    if (d->Height > m)
        m = d->Height;
    if (d->Depth > m && !(d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)))
        m = d->Depth;
    unsigned most = 1;
    while (m >>= 1)
        most++;
    return levels < 1 ? 1 : levels > most ? most : levels;
}

/* a x b x c x e, or ARRAY_BYTES_HUGE where that passes it: extents no driver grants (a
 * numeric-extremes trial: a product that wrapped was counted as a few bytes, or as UINT64_MAX, the
 * unknown size). */
#define ARRAY_BYTES_HUGE (UINT64_MAX - 1)
static uint64_t product4(uint64_t a, uint64_t b, uint64_t c, uint64_t e)
{
    uint64_t p;
    if (__builtin_mul_overflow(a, b, &p) || __builtin_mul_overflow(p, c, &p) || __builtin_mul_overflow(p, e, &p) ||
        p > ARRAY_BYTES_HUGE)
        return ARRAY_BYTES_HUGE;
    return p;
}

/* Texel bytes of a 3D descriptor with `levels` mip levels; 0 for a sparse or deferred-mapping
 * array, ARRAY_BYTES_UNKNOWN if the format's texel size is not known; at most ARRAY_BYTES_HUGE. */
static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
        return 0;
    uint64_t e = texel_bytes(d), block = block_bytes(d->Format);
    uint64_t total = 0;
    if (!e && !block)
        return ARRAY_BYTES_UNKNOWN;
    levels = mip_levels(d, levels);
    for (unsigned l = 0; l < levels; l++) {
        /* Layered arrays keep every layer at each level: Depth is the layer count. */
        uint64_t depth = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) ? (d->Depth ? d->Depth : 1)
                                                                                   : dim(d->Depth, l);
        uint64_t w = dim(d->Width, l), h = d->Height ? dim(d->Height, l) : 1;
        uint64_t level = block ? /* a partial block at an edge is a whole one */
                             product4(w / 4 + (w % 4 != 0), h / 4 + (h % 4 != 0), depth, block)
                               : product4(w, h, depth, e);
        total = total + level < total || total + level > ARRAY_BYTES_HUGE ? ARRAY_BYTES_HUGE : total + level;
    }
    return total;
}

/* After a successful create: the bytes (the driver's figure for non-plain formats), checked
 * against the device budget (CUSHIM_DEVICE_LIMIT); over it, the array is destroyed and the
 * create fails with out-of-memory, as a full device would. */
static CUresult array_done(CUresult r, uint64_t handle, uint64_t bytes, bool mipmapped)
{
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    if (r == CUDA_SUCCESS && bytes == ARRAY_BYTES_UNKNOWN) {
        /* cu[Mipmapped]ArrayGetMemoryRequirements would say, but only for deferred-mapping
         * arrays (cuda.h: "If the CUDA array is not allocated with flag
         * CUDA_ARRAY3D_DEFERRED_MAPPING CUDA_ERROR_INVALID_VALUE will be returned"), which have
         * no memory of their own anyway. */
        bytes = 0;
        LOG_ONCE(CUSHIM_LOG_WARN, "a CUDA array of a planar (YUV) format: its size "
                 "is not known to cushim; counted as 0 bytes");
    }
    if (r == CUDA_SUCCESS && !budget_reserve(device, bytes)) {
        if (mipmapped) {
            __typeof__(&cuMipmappedArrayDestroy) destroy = REAL(cuMipmappedArrayDestroy);
            if (destroy)
                destroy((CUmipmappedArray)(uintptr_t)handle);
        } else {
            __typeof__(&cuArrayDestroy) destroy = REAL(cuArrayDestroy);
            if (destroy)
                destroy((CUarray)(uintptr_t)handle);
        }
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS)
        track_alloc_on(&shim.arrays, CUSHIM_KIND_ARRAY, handle, bytes, device, ctx,
                       budget_any ? SHIM_F_RESERVED : 0);
    else
        account_fail(device, CUSHIM_KIND_ARRAY);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    REAL_OR_FAIL(cuArrayCreate_v2);
    if (!shim_enter())
        return real_(pHandle, d);
    CUresult real_r = real_(pHandle, d), r = real_r;
    CUDA_ARRAY3D_DESCRIPTOR d3 = {0};
    if (d) {
        d3.Width = d->Width;
        d3.Height = d->Height;
        d3.Format = d->Format;
        d3.NumChannels = d->NumChannels;
    }
    r = array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                   r == CUDA_SUCCESS && d ? array_bytes(&d3, 1) : 0, false);
    if (r != CUDA_SUCCESS && real_r == CUDA_SUCCESS && pHandle)
        *pHandle = NULL; /* the shim's refusal (array_done): the array it destroyed is no handle */
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    REAL_OR_FAIL(cuArray3DCreate_v2);
    if (!shim_enter())
        return real_(pHandle, d);
    CUresult real_r = real_(pHandle, d), r = real_r;
    r = array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                   r == CUDA_SUCCESS && d ? array_bytes(d, 1) : 0, false);
    if (r != CUDA_SUCCESS && real_r == CUDA_SUCCESS && pHandle)
        *pHandle = NULL; /* the shim's refusal (array_done): the array it destroyed is no handle */
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    REAL_OR_FAIL(cuArrayDestroy);
    if (!shim_enter())
        return real_(hArray);
    FREE_TRACKED(&shim.arrays, (uint64_t)(uintptr_t)hArray, real_(hArray));
}

SHIM_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                                    const CUDA_ARRAY3D_DESCRIPTOR *d,
                                                    unsigned int numMipmapLevels)
{
    REAL_OR_FAIL(cuMipmappedArrayCreate);
    if (!shim_enter())
        return real_(pHandle, d, numMipmapLevels);
    CUresult real_r = real_(pHandle, d, numMipmapLevels), r = real_r;
    r = array_done(r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0,
                   r == CUDA_SUCCESS && d ? array_bytes(d, numMipmapLevels) : 0, true);
    if (r != CUDA_SUCCESS && real_r == CUDA_SUCCESS && pHandle)
        *pHandle = NULL; /* the shim's refusal (array_done): the array it destroyed is no handle */
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    REAL_OR_FAIL(cuMipmappedArrayDestroy);
    if (!shim_enter())
        return real_(hMipmappedArray);
    FREE_TRACKED(&shim.arrays, (uint64_t)(uintptr_t)hMipmappedArray, real_(hMipmappedArray));
}
