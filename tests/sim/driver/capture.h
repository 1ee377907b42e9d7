/* Stream capture (capture.c): which calls are allowed while captures are ongoing, and how
 * stream work becomes graph nodes. */
#ifndef SIM_CAPTURE_H
#define SIM_CAPTURE_H

#include "sim.h"

struct CUstream_st;
struct sim_node_spec;

/* Every "potentially unsafe" call starts with this (cuda.h, cuThreadExchangeStreamCaptureMode).
 * When the calling thread is prohibited from such calls, the captures that prohibit it are
 * invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED is returned. */
CUresult sim_capture_unsafe(void);
/* If `s` is capturing, adds `spec` as a node after the stream's current dependencies (or fails
 * with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) and returns true with *rc set; returns false when
 * the work must run now. */
bool sim_capture_add(struct CUstream_st *s, struct sim_node_spec *spec, CUresult *rc);
bool sim_capture_ongoing(struct CUstream_st *s);
/* For calls that cannot be captured (stream synchronize/query, callbacks): on a capturing stream,
 * invalidates the capture and returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
CUresult sim_capture_forbid(struct CUstream_st *s);
/* The stream is being destroyed: drop its capture. */
void sim_capture_abandon(struct CUstream_st *s);

#endif
