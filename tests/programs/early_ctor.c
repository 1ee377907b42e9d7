/* libearly.so: a library of the program (DT_NEEDED) whose constructor uses CUDA, as a C++ static
 * initializer may (a global object holding device memory). glibc runs it before the constructors
 * of preloaded libraries, so the shim sees a CUDA call before its own constructor has run. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

CUdeviceptr early_block;
int early_rc = -1, early_phase = -2;

__attribute__((constructor)) static void early_alloc(void)
{
    CUcontext ctx;
    /* cushim.h first (the preloaded shim's, found by name): the phase it starts in */
    int (*get_phase)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "cushim_get_phase");
    early_phase = get_phase ? get_phase() : -3;
    early_rc = (int)cuInit(0);
    if (!early_rc)
        early_rc = (int)cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!early_rc)
        early_rc = (int)cuCtxSetCurrent(ctx);
    if (!early_rc)
        early_rc = (int)cuMemAlloc(&early_block, 1 << 20);
}
