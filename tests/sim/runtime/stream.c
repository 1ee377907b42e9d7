/* Streams and events: cudaStreamCreate, cudaStreamCreateWithFlags, cudaStreamDestroy,
 * cudaStreamSynchronize(_ptsz), cudaStreamQuery(_ptsz), cudaEventCreate,
 * cudaEventCreateWithFlags, cudaEventRecord(_ptsz), cudaEventSynchronize, cudaEventQuery,
 * cudaEventDestroy. cudaStreamNonBlocking and the cudaEvent* flags equal the driver's values. */
#include "rt.h"

static cudaError_t stream_create(cudaStream_t *pStream, unsigned int flags)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuStreamCreate, 2000), pStream, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return stream_create(pStream, flags);
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
    return stream_create(pStream, cudaStreamDefault);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuStreamDestroy, 4000), stream);
    return simrt_ret(e);
}

static cudaError_t synchronize(cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuStreamSynchronize, 2000, 7000, pt), stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    return synchronize(stream, false);
}

cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return synchronize(stream, true);
}

static cudaError_t query(cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuStreamQuery, 2000, 7000, pt), stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
    return query(stream, false);
}

cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream)
{
    return query(stream, true);
}

static cudaError_t event_create(cudaEvent_t *event, unsigned int flags)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuEventCreate, 2000), event, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    return event_create(event, flags);
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event)
{
    return event_create(event, cudaEventDefault);
}

static cudaError_t record(cudaEvent_t event, cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuEventRecord, 2000, 7000, pt), event, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return record(event, stream, false);
}

cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return record(event, stream, true);
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuEventSynchronize, 2000), event);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuEventQuery, 2000), event);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuEventDestroy, 4000), event);
    return simrt_ret(e);
}
