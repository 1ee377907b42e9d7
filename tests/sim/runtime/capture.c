/* Stream capture: cudaStreamBeginCapture(_ptsz) (cuStreamBeginCapture looked up at 10010 =
 * cuStreamBeginCapture_v2, with the mode), cudaStreamEndCapture(_ptsz),
 * cudaStreamIsCapturing(_ptsz), cudaThreadExchangeStreamCaptureMode. The capture mode and status
 * enums equal the driver's. */
#include "rt.h"

static cudaError_t begin(cudaStream_t stream, enum cudaStreamCaptureMode mode, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuStreamBeginCapture, 10010, 10010, pt), stream, (CUstreamCaptureMode)mode);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin(stream, mode, false);
}

cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return begin(stream, mode, true);
}

static cudaError_t end(cudaStream_t stream, cudaGraph_t *pGraph, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuStreamEndCapture, 10000, 10000, pt), stream, pGraph);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end(stream, pGraph, false);
}

cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    return end(stream, pGraph, true);
}

static cudaError_t is_capturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuStreamIsCapturing, 10000, 10000, pt), stream, (CUstreamCaptureStatus *)pCaptureStatus);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(stream, pCaptureStatus, false);
}

cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(stream, pCaptureStatus, true);
}

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuThreadExchangeStreamCaptureMode, 10010), (CUstreamCaptureMode *)mode);
    return simrt_ret(e);
}
