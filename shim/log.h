/* The shim's log: one line per event to CUSHIM_LOG_FILE or stderr, with write(2) (no stdio,
 * so it is safe in the exit path and after fork). Levels from CUSHIM_LOG; default warn.
 * Thread-safe. Never called on the hot path except when something failed. */
#ifndef CUSHIM_LOG_H
#define CUSHIM_LOG_H

#include <stddef.h>

#include "common/config.h"

/* Copies `in` to `out` (len bytes, NUL-terminated) with each %p replaced by the pid. */
void shim_expand_pid(const char *in, char *out, size_t len);

void shim_log_open(const struct cushim_config *c);
int shim_log_enabled(int level);
void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_ERROR(...) shim_log(CUSHIM_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) shim_log(CUSHIM_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) shim_log(CUSHIM_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) do { if (shim_log_enabled(CUSHIM_LOG_DEBUG)) shim_log(CUSHIM_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Logs `fmt` once per call site (the first time it happens). */
#define LOG_ONCE(level, ...)                                                                       \
    do {                                                                                           \
        static _Atomic int logged_;                                                                \
        if (!__atomic_exchange_n(&logged_, 1, __ATOMIC_RELAXED))                                   \
            shim_log(level, __VA_ARGS__);                                                          \
    } while (0)

#endif
