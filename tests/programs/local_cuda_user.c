/* libcudauser.so: a library linked to libcuda that looks driver functions up with
 * dlsym(RTLD_DEFAULT, ...), as a Python extension module does; dlsym_prog loads it with
 * RTLD_LOCAL, so libcuda is in its own scope only (dlsym(3): RTLD_DEFAULT searches the caller's
 * scope). */
#include <dlfcn.h>
#include <stdio.h>

int cuInit(unsigned flags); /* from libcuda, linked: DT_NEEDED */
int cudauser_probe(void);

/* Prints default_NAME=found|NULL for a driver function the shim does not wrap and one it does. */
int cudauser_probe(void)
{
    static const char *const names[] = {"cuInit", "cuDeviceGetCount", "cuMemAlloc_v2"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("local_default_%s=%s\n", names[i], dlsym(RTLD_DEFAULT, names[i]) ? "found" : "NULL");
    return cuInit(0);
}
