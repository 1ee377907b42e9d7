/* The Prometheus text exposition format (version 0.0.4) of a set of processes: metric names
 * start with cushim_, base units (_bytes), counters end in _total; labels pid, command (first 64
 * bytes), pidns (the pid namespace's inode, for a process of another namespace), device (ordinal),
 * uuid, and kind, phase or graph (its id) where the metric has one. Generated from the lists in
 * common/stats.h. */
#ifndef CUSHIM_PROMETHEUS_H
#define CUSHIM_PROMETHEUS_H

#include <stdio.h>

#include "tools/collect.h"

/* Writes the exposition of every process in `l` (borrowed, not changed) to `f` (not closed; the
 * caller checks ferror/fclose for a write error). Not thread-safe on one `f`; no other errors. */
void prometheus_write(FILE *f, const struct proc_list *l);

#endif
