/* The shim's log: one line per event to CUSHIM_LOG_FILE or stderr, with write(2) (no stdio,
 * so it is safe in the exit path and after fork). Levels from CUSHIM_LOG; default warn.
 * Thread-safe. Never called on the hot path except when something failed. */
#ifndef CUSHIM_LOG_H
#define CUSHIM_LOG_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

/* Copies `in` to `out` (len bytes, NUL-terminated) with each %p replaced by the pid. Returns
 * false, with out empty, when the result does not fit: never a shorter name, which would be
 * another file's. SHIM_EXPANDED_MAX holds any path the walk of common/path.h accepts. */
#define SHIM_EXPANDED_MAX (2 * CUSHIM_PATH_MAX)
/* What is said of a name shim_expand_pid refused. */
#define SHIM_EXPANDED_TOO_LONG "the name is too long once %p is the pid"

/* Whether `path` names the file the log is being written to (CUSHIM_LOG_FILE, open): a report
 * there is appended after the log's lines instead of emptying it. */
bool shim_log_is_file(const char *path);
bool shim_expand_pid(const char *in, char *out, size_t len);

/* Opens a file the user named for the shim to write (CUSHIM_REPORT, CUSHIM_LOG_FILE) the way a
 * file in a shared directory such as /tmp must be: a symbolic link someone else could have planted
 * is not followed (one of the user's own, or in a directory only its owner writes, such as
 * /dev/stderr, is), a missing
 * file is created mode 0600, an existing one must be a regular file of the process's user (then
 * emptied, or appended to: `append`), a character device (/dev/null) or a FIFO that has a reader
 * (never waiting for one). The program's own stdout or stderr (by device and inode) is written
 * through a duplicate of that descriptor. Returns the descriptor (O_CLOEXEC, >= 3; the caller
 * owns it and closes it), or -1 with *why saying why in a few words: a string literal or
 * strerror(3)'s, not to be freed, to be used before the thread's next strerror. On success *why is
 * NULL, or left as it was when the path was the program's stdout or stderr at the first look. */
int shim_open_output(const char *path, int append, const char **why);

/* Around the shim's own writes to files (the log, the report, the run's copy of the segment):
 * SIGPIPE (a FIFO or pipe whose reader went away) and SIGXFSZ (a file past the process's
 * RLIMIT_FSIZE, setrlimit(2)) are blocked on the calling thread, and one raised by those writes
 * is taken away instead of killing the program; the write fails with EPIPE or EFBIG. Not for the
 * hot path (a few system calls). */
struct shim_write_guard {
    sigset_t mask;
    int pipe_was_pending, fsize_was_pending;
    int epipe, efbig; /* a write in between failed so (shim_write_guard_failed) */
};
void shim_write_guard_begin(struct shim_write_guard *g);
/* A write in between failed with errno err: EPIPE and EFBIG are noted (any number of writes). */
void shim_write_guard_failed(struct shim_write_guard *g, int err);
/* Only a signal that came meanwhile for a failure noted is the shim's (EPIPE: SIGPIPE, EFBIG:
 * SIGXFSZ) and taken away; any other is delivered as the mask is restored. */
void shim_write_guard_end(struct shim_write_guard *g);

/* Opens CUSHIM_LOG_FILE of c (kept: c must outlive the process's logging), %p expanded to the
 * pid; stderr if it is not set or cannot be opened (said in one line). */
void shim_log_open(const struct cushim_config *c);
/* Notes which of stdout and stderr are closed (shim_std_closed): first thing when the shim loads,
 * before any line is said. Not thread-safe (the load runs once). */
void shim_std_note(void);
/* Whether standard output `fd` (1 or 2) was closed when the shim loaded (shim_std_note): NULL when
 * not (or for any other fd), else why it is not written ("stderr was closed when the program
 * started"; a static string), for the caller's one-line error. A file
 * the program opened since may have its number, and is never written as its stdout or stderr,
 * by name (CUSHIM_REPORT=stderr) or as a path to it (/dev/stderr, /proc/self/fd/2; an exit-paths
 * trial: the report was appended to the program's data file). Log lines meant for stderr are
 * then dropped. A file the program opened on that number before the shim loaded (a library's
 * constructor) is taken for the stream. */
const char *shim_std_closed(int fd);
/* In a forked child (pthread_atfork): a CUSHIM_LOG_FILE naming %p is opened again, for the
 * child's pid, before the child's first line (not at the fork: a child that only execs makes no
 * file). */
void shim_log_after_fork_child(void);
/* Writes `line` and a newline as it is (no prefix, no level check) where the log goes, under the
 * SIGPIPE guard: the lines about bad CUSHIM_* values, which carry their own "cushim: " prefix. */
void shim_log_line(const char *line);
/* Whether a line of `level` (CUSHIM_LOG_ERROR..CUSHIM_LOG_DEBUG) would be written: level at or
 * below CUSHIM_LOG (warn until shim_log_open). Thread-safe; one load. */
int shim_log_enabled(int level);
/* One line "cushim[PID] LEVEL: MESSAGE\n" where the log goes, when shim_log_enabled(level); level
 * must be CUSHIM_LOG_ERROR..CUSHIM_LOG_DEBUG (it indexes the level names). The message is
 * formatted into 2048 bytes (a longer one is cut, ending "...") and escaped
 * (cushim_text_escaped: control characters and bytes that are not UTF-8), cut again to fit the
 * 2560-byte line: the line is always one line. One write(2) under the SIGPIPE guard; errors go
 * unreported (a log file that fails moves the log to stderr, said once). Thread-safe. */
void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_ERROR(...) shim_log(CUSHIM_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) shim_log(CUSHIM_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) shim_log(CUSHIM_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) do { if (shim_log_enabled(CUSHIM_LOG_DEBUG)) shim_log(CUSHIM_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Logs `fmt` once per call site (the first time it happens). */
#define LOG_ONCE(level, ...)                                                                       \
    do {                                                                                           \
        static _Atomic int logged_;                                                                \
        if (!atomic_exchange_explicit(&logged_, 1, memory_order_relaxed))                          \
            shim_log(level, __VA_ARGS__);                                                          \
    } while (0)

#endif
