#include "tools/watch.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

int watch_parse_interval(const char *option, const char *v, double *seconds)
{
    char *end;
    /* Decimal digits and a point only: strtod also takes " 1", "+1", "0x1", "1e0", "inf". */
    double s = strtod(v, &end);
    if (!*v || *end || v[strspn(v, "0123456789.")] || !(s >= 0.1 && s <= 3600)) {
        cli_error("%s %s is not a number of seconds in 0.1..3600 (digits and a point, such as 0.5)", option,
                  cli_shown(v));
        return -1;
    }
    *seconds = s;
    return 0;
}

int watch_parse_iterations(const char *option, const char *v, long *n)
{
    char *end;
    errno = 0;
    long k = strtol(v, &end, 10);
    if (*v && !v[strspn(v, "0123456789")] && errno == ERANGE) { /* a fresh-user trial: "not a whole number" */
        cli_error("%s %s is too many times (at most %ld)", option, cli_shown(v), LONG_MAX);
        return -1;
    }
    if (!*v || *end || v[strspn(v, "0123456789")] || k < 1 || errno == ERANGE) {
        /* (found by a fresh-user trial: "from 1 to 9223372036854775807" told nothing) */
        cli_error("%s %s is not a whole number of times, 1 or more", option, cli_shown(v));
        return -1;
    }
    *n = k;
    return 0;
}

static volatile sig_atomic_t stopped;

static void on_stop(int sig)
{
    (void)sig;
    stopped = 1;
}

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* The stop signals as a set, for the masks of watch_write and watch_sleep. */
static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaddset(set, stop_signals[i]);
}

void watch_catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a write blocked on a full pipe returns */
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
        struct sigaction old;
        /* One ignored when we started stays ignored (nohup's SIGHUP, a background job's SIGINT). */
        if (sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(stop_signals[i], &sa, NULL);
    }
}

int watch_stopped(void)
{
    return stopped;
}

int watch_write(int fd, const char *buf, size_t len)
{
    sigset_t block, old;
    stop_set(&block);
    /* The stop signals are taken only inside ppoll: each write below runs with them blocked,
     * after ppoll said fd takes at least PIPE_BUF bytes (a pipe's or FIFO's free buffer; a file
     * or terminal always), so it does not block, and a signal cannot come between the test of
     * the flag and a wait that would not see it. */
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = 0;
    size_t done = 0;
    while (done < len) {
        struct pollfd p = {fd, POLLOUT, 0};
        const struct timespec grace = {0, 200000000L};
        int r;
        if (stopped && !done) {
            rc = 1; /* nothing of it written: dropped whole */
            break;
        }
        r = ppoll(&p, 1, stopped ? &grace : NULL, &old);
        if (r < 0 && errno == EINTR)
            continue; /* a stop: the test above, or the grace below */
        if (r == 0) {
            rc = 1; /* stopped, and the reader took nothing more within the grace */
            break;
        }
        /* POLLERR, POLLHUP (no reader), POLLNVAL: the write says which error it is. */
        size_t chunk = len - done < PIPE_BUF ? len - done : PIPE_BUF;
        ssize_t k = write(fd, buf + done, chunk);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            continue; /* another writer took the room; wait again */
        if (k < 0) {
            rc = -1;
            break;
        }
        done += (size_t)k;
    }
    int e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return rc;
}

int watch_sleep(double seconds)
{
    if (!(seconds > 0))
        return stopped;
    sigset_t block, old;
    stop_set(&block);
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)seconds;
    until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    /* Blocked between the check and the wait, which unblocks them atomically (ppoll): a signal
     * that comes between the two is not slept through. */
    sigprocmask(SIG_BLOCK, &block, &old);
    while (!stopped) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
            break;
        struct timespec left = {until.tv_sec - now.tv_sec, until.tv_nsec - now.tv_nsec};
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        ppoll(NULL, 0, &left, &old); /* EINTR: a signal (ours is seen at the loop's test) */
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return stopped;
}
