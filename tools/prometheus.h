/* The Prometheus text exposition format (version 0.0.4) of a set of processes: metric names
 * start with cushim_, base units (_bytes), counters end in _total; labels pid, command (first 64
 * bytes), pidns (the pid namespace's inode, for a process of another namespace), device (ordinal),
 * uuid, and kind, phase or graph (its id) where the metric has one. Generated from the lists in
 * common/stats.h. */
#ifndef CUSHIM_PROMETHEUS_H
#define CUSHIM_PROMETHEUS_H

#include <stdio.h>

#include "tools/collect.h"

/* What the command label of every sample holds (`--command-label` of serve and stat
 * --prometheus): the command line's first 64 bytes (FULL, the default); the program's file name
 * alone, the last part of the command line's first word (NAME: for a host that keeps argument
 * lists private, /proc mounted hidepid=, since the metrics are every local user's to read on
 * loopback); no command label at all (NONE). */
enum prom_command { PROM_COMMAND_FULL, PROM_COMMAND_NAME, PROM_COMMAND_NONE };

/* Parses --command-label's value v (opt: the option as typed, for the message): 0 and *out, or
 * -1 after a one-line message naming the value and the three it may be. */
int prometheus_parse_command_label(const char *opt, const char *v, enum prom_command *out);

/* Writes the exposition of every process in `l` (borrowed, not changed) to `f` (not closed; the
 * caller checks ferror/fclose for a write error), its command labels as `command` says. Not
 * thread-safe (one exposition at a time: a static setting); no other errors. */
void prometheus_write(FILE *f, const struct proc_list *l, enum prom_command command);

#endif
