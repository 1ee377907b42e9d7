/* early_prog: linked to libearly.so, whose constructor allocated 1 MiB before main (and before the
 * shim's own constructor). main then asks for 64 MiB, which CUSHIM_DEVICE_LIMIT=32MiB refuses. */
#include <cuda.h>
#include <stdio.h>

extern CUdeviceptr early_block;
extern int early_rc, early_phase;

int main(void)
{
    CUdeviceptr big;
    printf("early_phase=%d\n", early_phase);
    printf("early_rc=%d\n", early_rc);
    printf("rc_big=%d\n", (int)cuMemAlloc(&big, 64 << 20));
    printf("rc_free_early=%d\n", (int)cuMemFree(early_block));
    return 0;
}
