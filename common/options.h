/* The one table of cushim's configuration (DESIGN.md "Configuration").
 *
 * Environment variables, all prefixed CUSHIM_. `cushim run --help`, `cushim run --OPTION`
 * (the variable's name without the prefix, lower case, '_' -> '-'), the README's reference
 * (checked by tests/test_units.c and tests/test_settings.c) and the shim's parser are generated from this table.
 *
 * X(ENUM, variable, type, default, help)
 *   type: BOOL (1/0/true/false/yes/no/on/off), SIZE (bytes: 512M, 64MiB, 1g, 1Gi, 4096),
 *         ENUM:"a|b|c" (given as the choices string), STRING, DEVSIZES (SIZE, or "0:20GiB,1:10GiB")
 */
#ifndef CUSHIM_OPTIONS_H
#define CUSHIM_OPTIONS_H

#define CUSHIM_OPTIONS(X)                                                                           \
    X(LOG, "CUSHIM_LOG", ENUM, "off|error|warn|info|debug", "warn",                                 \
      "how much the shim logs (one line per event, never on the hot path unless something fails)")  \
    X(LOG_FILE, "CUSHIM_LOG_FILE", STRING, "", "",                                                  \
      "append log lines to this file instead of stderr (%p = pid)")                                 \
    X(REPORT, "CUSHIM_REPORT", STRING, "", "",                                                      \
      "each process's own summary at its exit: 'stderr', 'stdout' ('-'), or a file PATH (%p = pid); empty = none (cushim run says the run's summary itself)") \
    X(REPORT_FORMAT, "CUSHIM_REPORT_FORMAT", ENUM, "text|json", "text",                             \
      "format of CUSHIM_REPORT")                                                                    \
    X(DISABLE, "CUSHIM_DISABLE", BOOL, "", "off",                                                   \
      "pure pass-through: intercept nothing, count nothing, create no segment")                     \
    X(SEGMENT_DIR, "CUSHIM_SEGMENT_DIR", STRING, "", "/dev/shm",                                    \
      "absolute path of the directory (tmpfs) holding the per-process live-stats segments")          \
    X(OFFLOAD, "CUSHIM_OFFLOAD", ENUM, "off|compile|always", "off",                                 \
      "serve device requests from pinned device-mapped host memory: never, in the compile phase, always") \
    X(OFFLOAD_MIN, "CUSHIM_OFFLOAD_MIN", SIZE, "", "64MiB",                                         \
      "only device requests at least this large are offloaded (0: every one)")                                     \
    X(OFFLOAD_CACHE, "CUSHIM_OFFLOAD_CACHE", SIZE, "", "0",                                         \
      "keep up to this many bytes of freed pinned blocks for reuse by later offloads")              \
    X(PHASE, "CUSHIM_PHASE", ENUM, "run|compile", "run", "phase the process starts in")             \
    X(COMPILE_END, "CUSHIM_COMPILE_END", ENUM, "manual|graph-launch", "manual",                     \
      "end the compile phase automatically at the first CUDA graph launch (graph-launch)")          \
    X(DEVICE_LIMIT, "CUSHIM_DEVICE_LIMIT", DEVSIZES, "", "",                                        \
      "per-process device memory limit: a size for every device, or '0:20GiB,1:10GiB'; empty or 0 = no limit") \
    X(SPILL, "CUSHIM_SPILL", BOOL, "", "off",                                                       \
      "serve a cudaMalloc/cudaMallocAsync request that fails for lack of memory from pinned host memory") \
    X(LIBRARY, "CUSHIM_LIBRARY", STRING, "", "",                                                    \
      "the libcushim.so `cushim run` preloads; empty = the one beside the cushim program (its build tree or install prefix)") \
    X(RUN_DIR, "CUSHIM_RUN_DIR", STRING, "", "",                                                    \
      "(set by `cushim run`) directory that collects each process's summary")                       \
    X(RUN_ID, "CUSHIM_RUN_ID", STRING, "", "",                                                      \
      "(set by `cushim run`) identifier of the run, recorded in each segment")                      \
    X(RUN_TOP, "CUSHIM_RUN_TOP", STRING, "", "",                                                    \
      "(set by `cushim run`) pid of the process it launched: the top level of the summary")          \
    X(RUN_CHECKED, "CUSHIM_RUN_CHECKED", STRING, "", "",                                            \
      "(set by `cushim run`) fingerprint of the CUSHIM_ values it checked; a process whose values differ reports its own bad values") \
    X(RUN_SUMMARY, "CUSHIM_RUN_SUMMARY", BOOL, "", "off",                                           \
      "(set by `cushim run`) the run prints each process's text summary on stderr: a text CUSHIM_REPORT=stderr of a process whose summary reached the run is not printed again")

enum cushim_option {
#define CUSHIM_X_ENUM(e, var, type, choices, def, help) CUSHIM_OPT_##e,
    CUSHIM_OPTIONS(CUSHIM_X_ENUM)
#undef CUSHIM_X_ENUM
    CUSHIM_OPT_COUNT
};

enum cushim_option_type { CUSHIM_OT_BOOL, CUSHIM_OT_SIZE, CUSHIM_OT_ENUM, CUSHIM_OT_STRING, CUSHIM_OT_DEVSIZES };

/* One row of the table, for generic code (help, parser, CLI flags). Static storage. */
struct cushim_option_info {
    const char *variable;    /* "CUSHIM_LOG" */
    enum cushim_option_type type;
    const char *choices;     /* ENUM: "a|b|c"; else "" */
    const char *def;         /* default, as a string */
    const char *help;
};

extern const struct cushim_option_info cushim_option_table[CUSHIM_OPT_COUNT];

#endif
