/* Repeating commands (`stat --interval`, `top`): their --interval and --iterations values, the
 * wait between two snapshots that a stop signal ends, and writes that a stop signal ends. The
 * CLI is one thread: none of these is for use from several threads (sigprocmask). */
#ifndef CUSHIM_TOOLS_WATCH_H
#define CUSHIM_TOOLS_WATCH_H

#include <stddef.h>

/* --interval's value: seconds in 0.1..3600 in decimal digits and a point ("0.5", "2"). 0 with
 * *seconds set, or -1 after a one-line message naming `option` and the value. */
int watch_parse_interval(const char *option, const char *v, double *seconds);

/* --iterations' value: a whole number from 1 to LONG_MAX. 0 with *n set, or -1 after a
 * one-line message naming `option` and the value. */
int watch_parse_iterations(const char *option, const char *v, long *n);

/* From here on SIGINT, SIGTERM and SIGHUP stop the command instead of killing it: each sets the
 * flag watch_stopped() reads (and interrupts a wait, no SA_RESTART), so that the command ends
 * where it chooses: a file written through a temporary one (tools/output.h) is renamed into place
 * or removed, never left half made. A signal ignored when the command started (nohup's SIGHUP)
 * stays ignored. Call once, from the main thread. */
void watch_catch_stop_signals(void);

/* Whether a stop signal has arrived since watch_catch_stop_signals. Async-signal-safe. */
int watch_stopped(void);

/* Sleeps `seconds` (none when <= 0; CLOCK_MONOTONIC: a change of the clock does not stretch it), returning early
 * when a stop signal arrives, also one that arrived just before the call. Returns watch_stopped()
 * (always 0 without watch_catch_stop_signals: a plain sleep through interruptions). */
int watch_sleep(double seconds);

/* Writes len bytes of buf to fd, waiting for it to take them, but never past a stop signal: a
 * reader that stopped reading (a full pipe) cannot hold the command after its stop, also when the
 * signal comes just before a write (the wait and the signal are one atomic step, ppoll). What has
 * begun is finished if the reader takes it within 200 ms of the stop (a JSON line is not cut for
 * a reader still reading). Returns 0 when all was written; 1 when a stop cut it short (some of it
 * may be written); -1 with errno set on a write error (EPIPE, ENOSPC, EBADF). */
int watch_write(int fd, const char *buf, size_t len);

#endif
