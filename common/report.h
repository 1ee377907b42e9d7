/* Rendering of snapshots: the human summary and the JSON schema of docs/SUMMARY-JSON.md.
 * Both are generated from stats.h's lists. Not thread-safe per stream; no allocation. */
#ifndef CUSHIM_REPORT_H
#define CUSHIM_REPORT_H

#include <stdio.h>

#include "common/jsonw.h"
#include "common/snapshot.h"

/* Writes one process as a JSON object (member `key`, or a top-level/array value when NULL).
 * When `close` is 0 the object is left open so the caller can add members (`descendants`). */
void cushim_json_process(struct jsonw *w, const char *key, const struct cushim_snapshot *s,
                         int close);

/* Writes the members that name a process in the summary's JSON: "pid" (in its own pid
 * namespace), "pid_namespace" and, for a process of another pid namespace than the reader's,
 * "host_pid" (its pid here, null when not visible). Inside an open object. */
void cushim_json_identity(struct jsonw *w, const struct cushim_snapshot *s);

/* Writes the human summary of one process: per device, per kind with any activity, current,
 * peak, allocations, frees, failures in binary units. `title` prefixes the first line. */
void cushim_text_process(FILE *f, const struct cushim_snapshot *s, const char *title);

#endif
