/* Signals of `cushim run`: the program gets the dispositions and mask `cushim run` was started
 * with (an ignored SIGHUP under nohup stays ignored, as does a SIGCHLD ignored by the caller),
 * and signals sent to `cushim run` itself are forwarded to it, including those that arrive
 * while it is being started (they are held until its pid is known).
 *
 * Use: run_signals_prepare before fork; in the child run_signals_child before exec; in the parent
 * run_signals_started with the child's pid, and run_signals_stopped once it has been waited for.
 * Not thread-safe (one run per process). */
#ifndef CUSHIM_RUN_SIGNALS_H
#define CUSHIM_RUN_SIGNALS_H

#include <signal.h>
#include <sys/types.h>

/* Forwarded to the program when sent to `cushim run` (kill, not a terminal's ^C, which reaches
 * the program's process group directly). */
#define RUN_FORWARDED_SIGNALS SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM

struct run_signals {
    struct sigaction old[8];  /* dispositions at start: RUN_FORWARDED_SIGNALS, then SIGCHLD */
    unsigned char changed[8]; /* which of them this run changed (restored in the child) */
    sigset_t old_mask;        /* the signal mask at start (the program's too) */
};

/* Blocks the forwarded signals, installs the forwarding handler for each one that is not
 * ignored, and makes SIGCHLD default if it was ignored (waitpid needs the child's status). */
void run_signals_prepare(struct run_signals *s);
/* In the child, before exec: every disposition and the mask as they were at start. */
void run_signals_child(const struct run_signals *s);
/* In the parent after fork: forwarding goes to pid from now on (held signals included). */
void run_signals_started(const struct run_signals *s, pid_t pid);
/* The program has ended (waited for without being reaped, so its pid is not another's yet):
 * nothing more is forwarded, and the forwarded signals get the dispositions cushim started with. */
void run_signals_stopped(const struct run_signals *s);

#endif
