/* pin_cost [GIB]: the CPU side of pinning host memory, as a proxy for cuMemHostAlloc's cost on a
 * machine without a GPU: mmap + mlock (fault in and lock every page) and munlock + munmap of GIB
 * GiB, in ms per GiB. On a GPU, scripts/gpu-check measures cudaHostAlloc itself. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    size_t gib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    size_t bytes = gib << 30;
    double t0 = now_ms();
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mlock(p, bytes) != 0) {
        perror("pin_cost: mmap/mlock (needs CAP_IPC_LOCK or a large RLIMIT_MEMLOCK)");
        return 1;
    }
    double t1 = now_ms();
    munlock(p, bytes);
    munmap(p, bytes);
    double t2 = now_ms();
    printf("pin_ms_per_gib=%.1f unpin_ms_per_gib=%.1f\n", (t1 - t0) / (double)gib, (t2 - t1) / (double)gib);
    return 0;
}
