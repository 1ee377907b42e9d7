#include "tools/run_signals.h"

#include <errno.h>
#include <string.h>

static const int forwarded[] = {RUN_FORWARDED_SIGNALS};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])
#define CHLD NFORWARDED /* index of SIGCHLD in run_signals.old */

_Static_assert(NFORWARDED + 1 <= sizeof((struct run_signals *)0)->old / sizeof(struct sigaction),
               "run_signals.old holds every forwarded signal and SIGCHLD");

static volatile sig_atomic_t child_pid;

/* Forward signals that were sent to cushim itself; a terminal's ^C already reached the program
 * through the foreground process group (si_code SI_KERNEL), so it is not sent twice. One the
 * program sent (to its parent, `kill -USR1 $PPID`, or to its process group, which it is in) is
 * not sent back to it: without cushim it would not have reached it that way. */
static void forward(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    int saved = errno; /* kill's EPERM (a setuid program) must not reach the code it interrupted */
    if (child_pid > 0 && info && (info->si_code == SI_USER || info->si_code == SI_QUEUE) &&
        info->si_pid != child_pid)
        kill(child_pid, sig);
    errno = saved;
}

void run_signals_prepare(struct run_signals *s)
{
    sigset_t block;
    memset(s, 0, sizeof *s);
    sigemptyset(&block);
    for (size_t k = 0; k < NFORWARDED; k++)
        sigaddset(&block, forwarded[k]);
    sigprocmask(SIG_BLOCK, &block, &s->old_mask);

    struct sigaction sa = {0};
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < NFORWARDED; k++) {
        sigaction(forwarded[k], NULL, &s->old[k]);
        /* Ignored (nohup, a background job's SIGINT/SIGQUIT): the program inherits it ignored,
         * and a signal cushim would have forwarded is ignored by both, as without cushim. */
        if (s->old[k].sa_handler == SIG_IGN)
            continue;
        sigaction(forwarded[k], &sa, NULL);
        s->changed[k] = 1;
    }
    sigaction(SIGCHLD, NULL, &s->old[CHLD]);
    if (s->old[CHLD].sa_handler == SIG_IGN || (s->old[CHLD].sa_flags & SA_NOCLDWAIT)) {
        /* Ignored: the kernel would reap the program and waitpid would find no status. */
        struct sigaction dfl = {0};
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGCHLD, &dfl, NULL);
        s->changed[CHLD] = 1;
    }
}

void run_signals_child(const struct run_signals *s)
{
    for (size_t k = 0; k < NFORWARDED; k++)
        if (s->changed[k])
            sigaction(forwarded[k], &s->old[k], NULL);
    if (s->changed[CHLD])
        sigaction(SIGCHLD, &s->old[CHLD], NULL);
    sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
}

void run_signals_started(const struct run_signals *s, pid_t pid)
{
    child_pid = pid;
    sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
}

void run_signals_stopped(const struct run_signals *s)
{
    child_pid = 0;
    /* The program has ended: a signal to cushim now (^C while the summary is written) does
     * what it would do to any program, instead of being swallowed. */
    for (size_t k = 0; k < NFORWARDED; k++)
        if (s->changed[k])
            sigaction(forwarded[k], &s->old[k], NULL);
}
