/* The longjmp doors: longjmp, _longjmp, siglongjmp and __longjmp_chk (what _FORTIFY_SOURCE builds
 * call). A signal handler that jumps out of a counted CUDA call (a watchdog's timeout around a
 * cudaFree that waits, a handler that recovers with siglongjmp) leaves that call's wrapper before
 * it reaches shim_leave: its thread's depth (shim.h shim_depth) stayed 1, and every later CUDA
 * call of the thread passed through uncounted as if nested, the exit then taken for one inside a
 * CUDA call (an exit-paths trial: a report of 3000 bytes for 10 MiB). Each door sets the calling
 * thread's depth to 0 and jumps with libc's function (called: GCC makes no tail call of a
 * noreturn function, and the door's frame is left with the others): a jump leaves every frame
 * below its target, the wrapper's among them. A jump that stays inside a wrapper's driver call
 * (a driver that recovers with longjmp internally, through its PLT; a signal handler's own
 * sigsetjmp/siglongjmp probe of memory, run during a counted call) leaves the rest of that call
 * unguarded: a nested CUDA call there would be counted as well, and a handler that then calls
 * CUDA could wait on a table lock its own thread holds. Neither is known in practice; the door
 * cannot tell where the jump lands (glibc mangles the saved stack pointer).
 * What such a jump leaves otherwise is the program's (POSIX: after a jump out of a function that
 * is not async-signal-safe, calling one is undefined): the driver's locks, and the shim's own
 * spin locks of its table sections, where a handler that jumps out of one leaves it held.
 * Built with door_dlsym.c (its static library). It includes no <setjmp.h>: under _FORTIFY_SOURCE that header renames longjmp to __longjmp_chk. */
#include <stddef.h>
#include <stdlib.h>

#include <dlfcn.h>

#include "shim/shim.h"

typedef void (*jump_fn)(void *env, int val) __attribute__((noreturn));

static _Atomic(jump_fn) next_jump[4];
static const char *const jump_names[4] = {"longjmp", "_longjmp", "siglongjmp", "__longjmp_chk"};

/* libc's function `which` (the next after the shim), looked up and kept; NULL if there is none. */
static jump_fn look_up(unsigned which)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    jump_fn f = (jump_fn)(sym ? sym(RTLD_NEXT, jump_names[which]) : NULL);
    if (f)
        atomic_store_explicit(&next_jump[which], f, memory_order_release);
    return f;
}

/* All four, by the constructor, so that a jump from a signal handler never calls dlsym (not
 * async-signal-safe). */
__attribute__((constructor)) static void jump_load(void)
{
    for (unsigned i = 0; i < 4; i++)
        (void)look_up(i);
}

/* A jump made before the constructor (from another library's): looked up then. */
static __attribute__((noinline)) jump_fn next_of(unsigned which)
{
    jump_fn f = look_up(which);
    if (!f)
        abort(); /* no libc longjmp: nothing to jump with, and a longjmp may not return */
    return f;
}

#define JUMP_DOOR(name, which)                                                               \
    SHIM_EXPORT __attribute__((noreturn)) void name(void *env, int val);                     \
    SHIM_EXPORT __attribute__((noreturn)) void name(void *env, int val)                      \
    {                                                                                        \
        shim_depth = 0;                                                                      \
        jump_fn f = atomic_load_explicit(&next_jump[which], memory_order_acquire);           \
        if (__builtin_expect(f == NULL, 0))                                                  \
            f = next_of(which);                                                              \
        f(env, val);                                                                         \
    }
JUMP_DOOR(longjmp, 0)
JUMP_DOOR(_longjmp, 1)
JUMP_DOOR(siglongjmp, 2)
JUMP_DOOR(__longjmp_chk, 3)
