/* Helpers shared by the test_sim*.c suites (defined in test_sim.c). */
#ifndef TEST_SIM_H
#define TEST_SIM_H

#include <criterion/criterion.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include "simcuda.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)

/* SIMCUDA_CTX_OVERHEAD=0, for start(). */
extern const char *const no_overhead[];

/* Sets "NAME=VALUE" pairs (NULL-terminated), initializes the driver and makes device 0's primary
 * context current. */
CUcontext start(const char *const *env);
/* simcuda_live_bytes of device 0. */
uint64_t live(simcuda_kind kind);
/* cuGetProcAddress_v2, asserting success. */
void *proc(const char *name, int version, cuuint64_t flags);
/* Output of `rt_check scenario` ($SIM_RT_CHECK, the shared runtime) with the current
 * environment, asserting it exits 0. */
char *run_rt_check(const char *scenario);
/* Expects `line` as a whole line of `out`. */
void expect_line(const char *out, const char *line);

#endif
