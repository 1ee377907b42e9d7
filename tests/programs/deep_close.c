/* libdeepclose.so: dlclose for a caller, from a library the program loads with RTLD_DEEPBIND (its
 * own reference to dlclose binds to glibc's, past the shim's door). */
#include <dlfcn.h>

int deep_close(void *handle);

int deep_close(void *handle)
{
    return dlclose(handle);
}
