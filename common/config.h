/* Parsed configuration: one value per row of options.h.
 *
 * cushim_config_load() reads the environment once (the shim's constructor, `cushim run`).
 * A bad value keeps the default and reports one line: the variable, the value and the default
 * used. Unknown CUSHIM_* variables are reported too. No allocation; strings are copied into
 * fixed buffers (longer values are an error). Not thread-safe while loading; read-only after.
 */
#ifndef CUSHIM_CONFIG_H
#define CUSHIM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/options.h"
#include "common/segment.h"

#define CUSHIM_PATH_MAX 1024

enum cushim_log_level { CUSHIM_LOG_OFF, CUSHIM_LOG_ERROR, CUSHIM_LOG_WARN, CUSHIM_LOG_INFO, CUSHIM_LOG_DEBUG };
enum cushim_offload_mode { CUSHIM_OFFLOAD_OFF, CUSHIM_OFFLOAD_COMPILE, CUSHIM_OFFLOAD_ALWAYS };
enum cushim_compile_end { CUSHIM_COMPILE_END_MANUAL, CUSHIM_COMPILE_END_GRAPH_LAUNCH };
enum cushim_report_format { CUSHIM_REPORT_TEXT, CUSHIM_REPORT_JSON };

/* The values of every option (options.h), defaults where unset, empty or bad; filled whole by
 * cushim_config_load (no pointer: a plain copy, nothing to free). Strings are NUL-terminated
 * and as given (%p not expanded: the writers expand it, log.h shim_expand_pid); "" means unset.
 * BOOL fields are 0 or 1. */
struct cushim_config {
    int log;                                   /* enum cushim_log_level */
    char log_file[CUSHIM_PATH_MAX];            /* CUSHIM_LOG_FILE: a path (no white space at its
                                                  ends); "" stderr */
    char report[CUSHIM_PATH_MAX];              /* CUSHIM_REPORT: "stderr" or "stdout" (given in any case;
                                                  "-" is stdout), or a path; "" no summary */
    int report_format;                         /* enum cushim_report_format */
    int disable;                               /* CUSHIM_DISABLE: pure pass-through */
    char segment_dir[CUSHIM_PATH_MAX];
    int offload;                               /* enum cushim_offload_mode */
    uint64_t offload_min;                      /* bytes */
    uint64_t offload_cache;                    /* bytes */
    int phase;                                 /* enum cushim_phase */
    int compile_end;                           /* enum cushim_compile_end */
    uint64_t device_limit[CUSHIM_MAX_DEVICES]; /* bytes per ordinal, 0 = no limit */
    int spill;                                 /* CUSHIM_SPILL: a cudaMalloc/cudaMallocAsync failing
                                                  for lack of memory served from pinned host memory */
    /* Set by `cushim run` for its processes (CUSHIM_RUN_*), checked strictly (a bad value is ""). */
    char run_dir[CUSHIM_PATH_MAX];             /* its run directory, an absolute path */
    char run_id[64];                           /* the run's id: 1 to 16 hex digits */
    char run_top[16];                          /* pid of the process it launched (decimal, 1..2^31-1) */
    char run_checked[24];                      /* cushim_config_fingerprint it checked (hex) */
    int run_summary;                           /* CUSHIM_RUN_SUMMARY: the run prints text summaries */
};

/* How a value is shown in a message: quoted, escaped (one line: control characters and bytes
 * that are not UTF-8), the first 60 bytes and its length when longer than 120 bytes ("\"xxx...\"
 * (4005 bytes)"). Writes at most len bytes (500 hold any value); thread-safe. */
void cushim_config_shown(const char *value, char *shown, size_t len);

/* One problem cushim_config_load found. Strings are valid during the report call only. */
struct cushim_config_error {
    int option;            /* enum cushim_option with a bad value; CUSHIM_OPT_COUNT: an unknown name */
    const char *shown;     /* the bad value as the line shows it: "foo", or "xxxx..." (300 bytes) */
    const char *expected;  /* what was expected, e.g. "a size (a whole number of bytes, or with a unit K, M, G or T, binary, any case, as K, KB, KiB or Ki: e.g. 512M, 64MiB, 1Gi, 4096)" */
    const char *line;      /* the whole one-line message (no newline), naming the variable and
                              the default used: what the shim and the CLI print */
    int warning;           /* 1: the value is taken, but is most likely a mistake; `expected` then
                              says why (a device limit below 1 MiB: a size without a unit is bytes) */
};

/* Environment lookup, normally getenv; `environ_list` (NULL-terminated "NAME=value" strings,
 * normally environ) is scanned for unknown CUSHIM_ names (the line offers the nearest variable,
 * within two edits of a long name, one of a short one). `report` receives each problem; it may
 * be NULL. An empty value is the default, as for an unset variable. */
void cushim_config_load(struct cushim_config *c, const char *(*lookup)(const char *name),
                        char *const *environ_list,
                        void (*report)(const struct cushim_config_error *e));

/* Fingerprint of the user's CUSHIM_ settings: every variable of the table except the
 * CUSHIM_RUN_* ones (name and value, or its absence, in table order) and every unknown CUSHIM_
 * name in `environ_list` (order-independent). `cushim run` exports it as CUSHIM_RUN_CHECKED after
 * reporting bad values, so that a process under the run reports only values it did not see
 * (a child that sets its own). FNV-1a, 64 bits. Pure. */
uint64_t cushim_config_fingerprint(const char *(*lookup)(const char *name), char *const *environ_list);

/* Whether `value` is a good value of option `id` (what cushim_config_load would take). Parses into
 * a static scratch configuration: one thread at a time (the CLI). */
int cushim_option_value_ok(enum cushim_option id, const char *value);

/* Whether `a` and `b` are one value of option `id` written two ways (1G and 1GiB, info and INFO,
 * 1 and on): both parse, to the same setting. Static scratch configurations: one thread at a time
 * (the CLI). */
int cushim_option_values_same(enum cushim_option id, const char *a, const char *b);

/* True for the variables `cushim run` sets itself (CUSHIM_RUN_*): not user options. */
int cushim_option_internal(enum cushim_option id);

/* Parses a CUSHIM_DEVICE_LIMIT value into limits[CUSHIM_MAX_DEVICES]: a size for every device,
 * or "ORDINAL:SIZE[,ORDINAL:SIZE...]" with ordinals 0..63 each at most once; a size of 0 means no
 * limit. Returns 0, or with limits untouched: -2 when the only fault is a size of 2^64 bytes or
 * more, -3 for an ordinal given twice, -4 for an ordinal above 63, -1 for anything else. */
int cushim_parse_device_limits(const char *s, uint64_t limits[CUSHIM_MAX_DEVICES]);

/* The same, saying where a list went wrong: on an error in one entry, *bad_at and *bad_len are
 * the byte offset and length in s of that entry; *bad_len is (size_t)-1 for an empty entry (a
 * comma at an end, or two together), 0 when the fault is not one entry's (s is no list, or too
 * long). Either pointer may be NULL. Thread-safe (no state). */
int cushim_parse_device_limits_at(const char *s, uint64_t limits[CUSHIM_MAX_DEVICES], size_t *bad_at,
                                  size_t *bad_len);

#endif
