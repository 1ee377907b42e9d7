#include "shim/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "common/text.h"

static int log_level = CUSHIM_LOG_WARN;
static _Atomic int log_fd = 2;
static _Atomic uint64_t log_dev, log_ino;   /* the identity of the file log_fd was opened on */
static const struct cushim_config *log_cfg; /* what shim_log_open was given */
/* In a forked child whose CUSHIM_LOG_FILE names its %p: 1 the child's own file is still to be
 * opened, 2 a thread (reopen_tid) is opening it (the others wait, a bounded time: once per
 * child), 0 done. */
static _Atomic int child_reopen;
static _Atomic pid_t reopen_tid;

/* Expands %p in a path to the pid (log.h, shim_expand_pid). */
static bool expand_pid(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = in; *p; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid());
            p++;
        } else if (o + 1 < len) {
            out[o++] = *p;
        } else {
            o = len;
        }
        if (o >= len) {
            out[0] = '\0';
            return false;
        }
    }
    out[o] = '\0';
    return true;
}

/* A copy of the program's descriptor std (not inherited across exec, as the shim's own). */
static int std_copy(int std, const char **why)
{
    int same = fcntl(std, F_DUPFD_CLOEXEC, 3);
    if (same < 0)
        *why = strerror(errno);
    return same;
}

/* Standard outputs that were closed when the shim loaded (bit 1 << fd, fd 1 or 2). */
static int std_closed;

const char *shim_std_closed(int fd)
{
    if (!(fd == 1 || fd == 2) || !(std_closed >> fd & 1))
        return NULL;
    return fd == 2 ? "stderr was closed when the program started" : "stdout was closed when the program started";
}

int shim_open_output(const char *path, int append, const char **why)
{
    struct stat l;
    int nofollow = O_NOFOLLOW;
    /* Every link on the way (the file's, its directories', and those they lead through) must be
     * one nobody else could have planted. */
    int trusted = cushim_path_links_trusted(path);
    if (trusted != 1) {
        *why = trusted == 0 ? "a symbolic link, not followed" : strerror(errno);
        return -1;
    }
    if (lstat(path, &l) == 0 && S_ISLNK(l.st_mode))
        nofollow = 0;
    /* The program's own stdout or stderr (CUSHIM_REPORT=/dev/stderr; a pipe, a tty, a socket, a
     * file it was redirected to): written through its descriptor, so the text goes after what
     * the program wrote, never over it. */
    struct stat target = {0};
    int std = stat(path, &target) == 0 ? cushim_std_stream(&target, -1) : 0;
    /* /dev/stderr, /proc/self/fd/2 when stderr was closed at load: that number is a file of the
     * program's now, not its stderr (a review). */
    if (std && (*why = shim_std_closed(std)) != NULL)
        return -1;
    if (std)
        return std_copy(std, why);
    /* O_NOFOLLOW: a link put in place after the look above is not followed either. */
    int fd = open(path, O_WRONLY | O_CREAT | nofollow | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0600);
    if (fd < 0) {
        /* ENXIO is a FIFO's only when it is one (/dev/tty without a controlling terminal too). */
        *why = errno == ELOOP                                    ? "a symbolic link, not followed"
               : errno == ENXIO && S_ISFIFO(target.st_mode) ? "a FIFO with no reader"
                                                                 : strerror(errno);
        return -1;
    }
    struct stat st;
    *why = fstat(fd, &st) != 0 ? strerror(errno) : cushim_output_refusal(&st);
    if (!*why && (std = cushim_std_stream(&st, fd)) != 0) {
        /* It became the program's stdout or stderr since the look above. */
        close(fd);
        if ((*why = shim_std_closed(std)) != NULL)
            return -1;
        return std_copy(std, why);
    }
    if (!*why && S_ISREG(st.st_mode) && !append && ftruncate(fd, 0) != 0)
        *why = strerror(errno);
    if (*why) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (fd <= 2) {
        /* The program started with that standard descriptor closed, and open() gave it to the
         * shim: moved to 3 or above, so that the program reopening it (a daemon's /dev/null)
         * neither closes the shim's output nor has its own reads or writes land in it (an
         * environment trial: with stdin closed the log took descriptor 0). */
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (high >= 0) {
            close(fd);
            fd = high;
        }
    }
    return fd;
}

void shim_write_guard_begin(struct shim_write_guard *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigaddset(&set, SIGXFSZ);
    sigpending(&pending);
    g->pipe_was_pending = sigismember(&pending, SIGPIPE);
    g->fsize_was_pending = sigismember(&pending, SIGXFSZ);
    g->epipe = g->efbig = 0;
    pthread_sigmask(SIG_BLOCK, &set, &g->mask);
}

void shim_write_guard_failed(struct shim_write_guard *g, int err)
{
    g->epipe |= err == EPIPE;
    g->efbig |= err == EFBIG;
}

/* Takes away a pending `sig` (one of this thread's own writes raised it). */
static void take_away(int sig)
{
    sigset_t one, pending;
    sigpending(&pending);
    if (!sigismember(&pending, sig))
        return;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct timespec now = {0, 0};
    sigtimedwait(&one, NULL, &now);
}

void shim_write_guard_end(struct shim_write_guard *g)
{
    /* Ours (a write to a pipe nobody reads any more, or past the file size limit): taken away,
     * not delivered. */
    if (g->epipe && !g->pipe_was_pending)
        take_away(SIGPIPE);
    if (g->efbig && !g->fsize_was_pending)
        take_away(SIGXFSZ);
    pthread_sigmask(SIG_SETMASK, &g->mask, NULL);
}

/* Records the identity of the log file open on fd. */
static void remember(int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0) {
        atomic_store(&log_dev, (uint64_t)st.st_dev);
        atomic_store(&log_ino, (uint64_t)st.st_ino);
    }
}

/* Whether fd is still the log file the shim opened: a program may close every descriptor it did
 * not open (a daemon does) and get the number again for a file of its own, which the shim must
 * never write into nor close. */
static bool still_ours(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (uint64_t)st.st_dev == atomic_load(&log_dev) &&
           (uint64_t)st.st_ino == atomic_load(&log_ino);
}

void shim_std_note(void)
{
    for (int fd = 1; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
            std_closed |= 1 << fd;
}

void shim_log_open(const struct cushim_config *c)
{
    log_cfg = c;
    log_level = c->log;
    if (c->log_file[0]) {
        char path[SHIM_EXPANDED_MAX];
        const char *why = SHIM_EXPANDED_TOO_LONG;
        int fd = expand_pid(c->log_file, path, sizeof path) ? shim_open_output(path, 1, &why) : -1;
        if (fd >= 0) {
            remember(fd);
            atomic_store(&log_fd, fd);
        } else {
            shim_log(CUSHIM_LOG_ERROR, "cannot open CUSHIM_LOG_FILE=\"%s\": %s; logging to stderr",
                     path[0] ? path : c->log_file, why);
        }
    }
}

void shim_log_after_fork_child(void)
{
    if (log_cfg && strstr(log_cfg->log_file, "%p"))
        atomic_store(&child_reopen, 1);
}

/* A forked child's first line: its own %p file takes the place of the parent's (dup3 onto the
 * same number, so no thread ever sees a closed descriptor), or of nothing when the program has
 * reused that number. Other threads wait meanwhile. */
static void child_reopen_log(void)
{
    int expected = 1;
    if (!atomic_compare_exchange_strong(&child_reopen, &expected, 2)) {
        /* Not the opening thread itself (a line it logs meanwhile, from a signal handler), and
         * never for ever: past the wait the line goes to the log as it is now. */
        if (atomic_load(&reopen_tid) == gettid())
            return;
        for (int i = 0; i < 100000 && atomic_load_explicit(&child_reopen, memory_order_acquire) != 0; i++)
            sched_yield();
        return;
    }
    atomic_store(&reopen_tid, gettid());
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel); /* open() is a cancellation point */
    char path[SHIM_EXPANDED_MAX];
    const char *why = SHIM_EXPANDED_TOO_LONG;
    bool named = expand_pid(log_cfg->log_file, path, sizeof path);
    int old = atomic_load(&log_fd);
    bool mine = old != 2 && still_ours(old);
    int fd = named ? shim_open_output(path, 1, &why) : -1;
    if (fd >= 0) {
        /* Looked at again just before: the program may have closed it and reused the number. */
        mine = mine && still_ours(old);
        remember(fd);
        if (mine && dup3(fd, old, O_CLOEXEC) == old) {
            close(fd);
            fd = old;
        } else if (mine) {
            close(old);
        }
    } else if (mine) {
        close(old);
    }
    atomic_store(&log_fd, fd >= 0 ? fd : 2);
    atomic_store(&reopen_tid, 0);
    atomic_store_explicit(&child_reopen, 0, memory_order_release);
    pthread_setcancelstate(cancel, NULL);
    if (fd < 0)
        shim_log(CUSHIM_LOG_ERROR, "cannot open CUSHIM_LOG_FILE=\"%s\": %s; logging to stderr",
                 named ? path : log_cfg->log_file, why);
}

int shim_log_enabled(int level)
{
    return level <= log_level && level != CUSHIM_LOG_OFF;
}

/* Writes len bytes of line to the log (stderr if the log file stops taking lines), under the
 * SIGPIPE guard. */
static void log_write(const char *line, size_t len)
{
    /* write(2) is a cancellation point, and a line may be logged with a lock of the shim held
     * (phase.c's change_lock): a thread cancelled there would leave it held for ever. */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    if (atomic_load_explicit(&child_reopen, memory_order_acquire))
        child_reopen_log();
    /* A log that is a pipe nobody reads any more, or a file at the size limit, must not kill the
     * program (SIGPIPE, SIGXFSZ). */
    struct shim_write_guard g;
    shim_write_guard_begin(&g);
    int fd = atomic_load(&log_fd);
    bool no_stderr = shim_std_closed(2) != NULL; /* its number may be a file of the program's now */
    if (fd != 2 && !still_ours(fd)) {
        /* The program closed the log file and its number is now a file of the program's: never
         * written into; the log goes to stderr from now on. */
        atomic_compare_exchange_strong(&log_fd, &fd, 2);
        fd = 2;
    }
    if (fd == 2 && no_stderr) {
        /* nowhere to say it */
    } else if (write(fd, line, len) < 0) {
        int err = errno;
        shim_write_guard_failed(&g, err);
        if (fd != 2 && atomic_compare_exchange_strong(&log_fd, &fd, 2)) {
            /* The log file stopped taking lines (disk full, ...): say so once, then use stderr. */
            char note[160];
            int k = snprintf(note, sizeof note, "cushim[%d] error: cannot write to CUSHIM_LOG_FILE: %s; "
                             "logging to stderr\n", (int)getpid(), strerror(err));
            if (!no_stderr &&
                (write(2, note, k > 0 && (size_t)k < sizeof note ? (size_t)k : 0) < 0 || write(2, line, len) < 0))
                shim_write_guard_failed(&g, errno);
        }
    }
    shim_write_guard_end(&g);
    pthread_setcancelstate(cancel, NULL);
}

void shim_log_line(const char *text)
{
    char line[1280];
    int n = snprintf(line, sizeof line - 1, "%s", text);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    line[len++] = '\n';
    log_write(line, len);
}

void shim_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"", "error", "warn", "info", "debug"};
    char line[2560];
    if (!shim_log_enabled(level))
        return;
    char raw[2048];
    int n = snprintf(line, sizeof line, "cushim[%d] %s: ", (int)getpid(), names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (m >= (int)sizeof raw)
        memcpy(raw + sizeof raw - 4, "...", 4); /* a cut is never silent */
    /* Values from the environment and paths may hold any bytes: the line stays one line. */
    cushim_text_escaped(raw, line + n, sizeof line - (size_t)n - 1);
    size_t len = strlen(line);
    line[len++] = '\n';
    log_write(line, len);
}

bool shim_log_is_file(const char *path)
{
    struct stat st;
    int fd = atomic_load(&log_fd);
    return fd != 2 && stat(path, &st) == 0 && still_ours(fd) && (uint64_t)st.st_dev == atomic_load(&log_dev) &&
           (uint64_t)st.st_ino == atomic_load(&log_ino);
}

bool shim_expand_pid(const char *in, char *out, size_t len)
{
    return expand_pid(in, out, len);
}
