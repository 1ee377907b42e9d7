/* libdeepcudauser.so: a library linked to the shared runtime (DT_NEEDED libcudart.so.13), as a
 * framework's CUDA backend plugin is; door_prog loads it with RTLD_DEEPBIND and allocates through
 * it. */
#include <stddef.h>

int cudaMalloc(void **p, size_t size); /* from libcudart, linked */
int cudaFree(void *p);
int deep_user_alloc(void **p, size_t size);
int deep_user_free(void *p);

int deep_user_alloc(void **p, size_t size)
{
    return cudaMalloc(p, size);
}

int deep_user_free(void *p)
{
    return cudaFree(p);
}
