/* CUDA arrays: cuArrayCreate_v2, cuArray3DCreate_v2, cuArrayDestroy, cuArrayGetDescriptor_v2,
 * cuArray3DGetDescriptor_v2, cuMipmappedArrayCreate, cuMipmappedArrayDestroy. Arrays have no
 * address; they count SIMCUDA_ARRAY texel bytes, Width x max(Height,1) x max(Depth,1) x
 * NumChannels x element size (a mipmapped array: the sum over its levels, each dimension
 * max(1, dim >> level), but a layered array's layer count), on the device of the current context
 * and against its capacity; sparse and deferred-mapping arrays count nothing. Block-compressed
 * (BCn) formats count their 4 x 4 blocks (a partial block at an edge a whole one) x 8 bytes (BC1,
 * BC4) or 16 (the others): cuda.h names these formats but not their layout; the sizes are the BCn
 * formats' own (Direct3D block compression), our reading of what such an array holds. YUV formats
 * are not modelled (CUDA_ERROR_NOT_SUPPORTED). */
#include <pthread.h>
#include <stdlib.h>

#include "ctx.h"

#define ARRAY_MAGIC 0x41525259u
#define MIPMAP_MAGIC 0x4d49504du

struct CUarray_st {
    uint32_t magic;
    CUcontext ctx;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    uint64_t bytes;
    struct CUarray_st *next;
};

struct CUmipmappedArray_st {
    struct CUarray_st array; /* magic MIPMAP_MAGIC */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUarray_st *arrays; /* every live array and mipmapped array */

static unsigned channel_size(CUarray_format format)
{
    switch (format) {
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
        return 0;
    }
}

/* Bytes of a 4 x 4 block of a block-compressed format, 0 for any other format. */
static unsigned block_size(CUarray_format f)
{
    switch ((int)f) {
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
    default:
        return 0;
    }
}

static size_t at_least_1(size_t n)
{
    return n ? n : 1;
}

/* bytes += a x b x c x d, false where that overflows 64 bits. */
static bool add_product(uint64_t *bytes, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    uint64_t p;
    return !__builtin_mul_overflow(a, b, &p) && !__builtin_mul_overflow(p, c, &p) &&
           !__builtin_mul_overflow(p, d, &p) && !__builtin_add_overflow(*bytes, p, bytes);
}

/* The texel (or block) bytes of `levels` levels into *bytes; false where they overflow 64 bits.
 * cuda.h CUDA_ARRAY3D_DESCRIPTOR: with CUDA_ARRAY3D_LAYERED (or CUBEMAP) "Depth specifies the
 * number of layers", which every mip level keeps. */
static bool array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, bool layered, unsigned size,
                        unsigned block, uint64_t *bytes)
{
    bool ok = true;
    *bytes = 0;
    for (unsigned l = 0; ok && l < levels; l++) {
        uint64_t layers = layered ? at_least_1(d->Depth) : at_least_1(d->Depth >> l);
        if (block)
            ok = add_product(bytes, (at_least_1(d->Width >> l) + 3) / 4, (at_least_1(d->Height >> l) + 3) / 4,
                             layers, block);
        else
            ok = add_product(bytes, at_least_1(d->Width >> l), at_least_1(d->Height >> l), layers,
                             (uint64_t)d->NumChannels * size);
    }
    return ok;
}

/* CUDA_ARRAY3D_DESCRIPTOR: NumChannels "may be 1, 2, or 4". Extents whose bytes overflow 64 bits
 * are past any device's maximum extents (cuda.h gives them as CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE*
 * attributes, which the simulated device leaves 0, so they are not checked one by one):
 * CUDA_ERROR_INVALID_VALUE. Bytes that fit but exceed the device's capacity:
 * CUDA_ERROR_OUT_OF_MEMORY, refused before sim_account (its signed delta would turn a size past
 * 2^63 negative). */
static CUresult create(struct CUarray_st *a, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint32_t magic)
{
    unsigned size = channel_size(d->Format);
    if (d->Format == CU_AD_FORMAT_UNORM_INT_101010_2 && d->NumChannels == 4)
        size = 1; /* cuda.h: "4 channel unorm R10G10B10A2 RGB format", 4 bytes a texel */
    if (d->Width == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    /* cuda.h cuMipmappedArrayCreate: numMipmapLevels "is clamped to the range [1, 1 +
     * floor(log2(max(width, height, depth)))]". */
    size_t most_dim = d->Width > d->Height ? d->Width : d->Height;
    bool layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    if (d->Depth > most_dim && !layered) /* a layered array's Depth is its layer count */
        most_dim = d->Depth;
    unsigned most = 1;
    while (most_dim >>= 1)
        most++;
    levels = levels < 1 ? 1 : levels > most ? most : levels;
    unsigned block = block_size(d->Format);
    if (size == 0 && block == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes = 0;
    /* A sparse or deferred-mapping array has no memory until cuMemMapArrayAsync maps some into it
     * (cuda.h CUDA_ARRAY3D_SPARSE, CUDA_ARRAY3D_DEFERRED_MAPPING): nothing is charged for it. */
    if (!(d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) &&
        !array_bytes(d, levels, layered, size, block, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_round(bytes) > sim_cfg.capacity[ctx->dev])
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = sim_account(ctx->dev, SIMCUDA_ARRAY, (int64_t)bytes, (int64_t)sim_round(bytes));
    if (rc != CUDA_SUCCESS)
        return rc;
    *a = (struct CUarray_st){.magic = magic, .ctx = ctx, .desc = *d, .bytes = bytes};
    pthread_mutex_lock(&lock);
    a->next = arrays;
    arrays = a;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult create_array(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!pHandle || !d)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = malloc(sizeof *a);
    CUresult rc = a ? create(a, d, 1, ARRAY_MAGIC) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        *pHandle = a;
    else
        free(a);
    return rc;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    SIM_ENTER(cuArrayCreate_v2);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY_DESCRIPTOR *p = pAllocateArray;
    CUDA_ARRAY3D_DESCRIPTOR d = {.Width = p->Width, .Height = p->Height, .Format = p->Format,
                                 .NumChannels = p->NumChannels};
    return create_array(pHandle, &d);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    SIM_ENTER(cuArray3DCreate_v2);
    return create_array(pHandle, pAllocateArray);
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels)
{
    SIM_ENTER(cuMipmappedArrayCreate);
    if (!pHandle || !pMipmappedArrayDesc)
        return CUDA_ERROR_INVALID_VALUE;
    CUmipmappedArray m = malloc(sizeof *m);
    CUresult rc = m ? create(&m->array, pMipmappedArrayDesc, numMipmapLevels, MIPMAP_MAGIC) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        *pHandle = m;
    else
        free(m);
    return rc;
}

/* Caller holds the lock. */
static void release(struct CUarray_st **link)
{
    struct CUarray_st *a = *link;
    *link = a->next;
    sim_account(a->ctx->dev, SIMCUDA_ARRAY, -(int64_t)a->bytes, -(int64_t)sim_round(a->bytes));
    a->magic = 0;
    free(a);
}

static CUresult destroy(struct CUarray_st *a, uint32_t magic)
{
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    for (struct CUarray_st **p = &arrays; *p; p = &(*p)->next)
        if (*p == a && a->magic == magic) {
            release(p);
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    SIM_ENTER(cuArrayDestroy);
    return destroy(hArray, ARRAY_MAGIC);
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    SIM_ENTER(cuMipmappedArrayDestroy);
    return destroy(hMipmappedArray ? &hMipmappedArray->array : NULL, MIPMAP_MAGIC);
}

void sim_array_release_ctx(CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    for (struct CUarray_st **p = &arrays; *p;)
        if ((*p)->ctx == ctx)
            release(p);
        else
            p = &(*p)->next;
    pthread_mutex_unlock(&lock);
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    SIM_ENTER(cuArrayGetDescriptor_v2);
    if (!pArrayDescriptor || !hArray || hArray->magic != ARRAY_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = &hArray->desc;
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){d->Width, d->Height, d->Format, d->NumChannels};
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    SIM_ENTER(cuArray3DGetDescriptor_v2);
    if (!pArrayDescriptor || !hArray || hArray->magic != ARRAY_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = hArray->desc;
    return CUDA_SUCCESS;
}
