/* Symbol visibility in the shim (built with -fvisibility=hidden, shim/meson.build).
 * SHIM_EXPORT: the driver entry points and the cushim_* API the library exports.
 * SHIM_HIDDEN: on an extern declaration of the shim's own data. -fvisibility=hidden applies to
 * definitions only, so without it the compiler reaches such data through the GOT (one more load
 * at every use, on the hot paths too). */
#ifndef CUSHIM_VISIBILITY_H
#define CUSHIM_VISIBILITY_H

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_HIDDEN __attribute__((visibility("hidden")))
/* SHIM_EARLY: code that may run before a sanitizer's runtime is ready (dlsym, which AddressSanitizer
 * calls while it initializes, before its shadow memory exists): left uninstrumented, so that the
 * shim can be built and tested with -Db_sanitize=address. */
#if defined(__SANITIZE_THREAD__)
#define SHIM_EARLY_THREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHIM_EARLY_THREAD 1
#endif
#endif
#if defined(SHIM_EARLY_THREAD) && defined(__clang__)
#define SHIM_EARLY __attribute__((no_sanitize_address, disable_sanitizer_instrumentation))
#elif defined(SHIM_EARLY_THREAD)
#define SHIM_EARLY __attribute__((no_sanitize_address, no_sanitize_thread))
#else
#define SHIM_EARLY __attribute__((no_sanitize_address))
#endif

#endif
