/* Repeating commands (`stat --interval`, `top`): their --interval and --iterations values, and
 * the wait between two snapshots that a stop signal ends. */
#ifndef CUSHIM_TOOLS_WATCH_H
#define CUSHIM_TOOLS_WATCH_H

/* --interval's value: seconds in 0.1..3600 in decimal digits and a point ("0.5", "2"). 0 with
 * *seconds set, or -1 after a one-line message naming `option` and the value. */
int watch_parse_interval(const char *option, const char *v, double *seconds);

/* --iterations' value: a whole number from 1 to LONG_MAX. 0 with *n set, or -1 after a
 * one-line message naming `option` and the value. */
int watch_parse_iterations(const char *option, const char *v, long *n);

/* From here on SIGINT, SIGTERM and SIGHUP stop the command instead of killing it: each sets the
 * flag watch_stopped() reads, and interrupts a blocking write (no SA_RESTART), so that a
 * command writing through a temporary file (tools/output.h) removes it. Not thread-safe: call
 * once, from the main thread. */
void watch_catch_stop_signals(void);

/* Whether a stop signal has arrived since watch_catch_stop_signals. Async-signal-safe. */
int watch_stopped(void);

/* Sleeps `seconds` (CLOCK_MONOTONIC: a change of the clock does not stretch it), returning early
 * when a stop signal arrives, also one that arrived just before the call. Returns watch_stopped(). */
int watch_sleep(double seconds);

#endif
