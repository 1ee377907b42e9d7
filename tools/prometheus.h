/* The Prometheus text exposition format (version 0.0.4) of a set of processes: metric names
 * start with cushim_, base units (_bytes), counters end in _total; labels pid, command (first 64
 * bytes), device (ordinal), uuid, and kind or phase where the metric has one. Generated from the
 * lists in common/stats.h. */
#ifndef CUSHIM_PROMETHEUS_H
#define CUSHIM_PROMETHEUS_H

#include <stdio.h>

#include "tools/collect.h"

void prometheus_write(FILE *f, const struct proc_list *l);

#endif
