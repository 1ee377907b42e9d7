/* A consistent, plain copy of one process's segment: what the CLI, the exit summary, JSON and
 * Prometheus print. Produced only by cushim_snapshot_read(), which trusts nothing in the bytes.
 * Plain values, no pointers: a snapshot is copied by assignment and owns nothing. Byte counts
 * are bytes; *_ns are nanoseconds; start times are clock ticks (sysconf(_SC_CLK_TCK)).
 * The functions below are thread-safe: they write only the caller's buffers and return static
 * strings (never freed) or those buffers.
 */
#ifndef CUSHIM_SNAPSHOT_H
#define CUSHIM_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "common/segment.h"

/* One device record as copied (segment.h struct cushim_device_record). */
struct cushim_device_snapshot {
    int32_t ordinal;                      /* CUdevice ordinal in the writing process */
    int identified;                       /* uuid valid */
    uint8_t uuid[16];                     /* cuDeviceGetUuid_v2 (or cuDeviceGetUuid) bytes */
    uint64_t total_bytes;                 /* the device's memory (cuDeviceTotalMem_v2), bytes */
    uint64_t untracked_bytes;             /* bytes in use the shim did not count, last sample
                                             (shim.h shim_sample_untracked) */
    uint64_t untracked_sampled_ns;        /* CLOCK_REALTIME of that sample; 0 = never sampled */
    uint64_t kinds[CUSHIM_KIND_COUNT][CUSHIM_STAT_COUNT]; /* stats.h: bytes, or counts for *_count */
    uint64_t dev[CUSHIM_DEV_STAT_COUNT];  /* stats.h CUSHIM_DEV_*; lifetime_peak at least total_peak */
};

/* One executable graph (segment.h struct cushim_graph_record). */
struct cushim_graph_snapshot {
    uint64_t id;                          /* 1, 2, ... in instantiation order */
    int32_t device;                       /* ordinal it was instantiated on (-1: unknown) */
    int alive;                            /* 0: destroyed */
    uint64_t instantiated_ns, destroyed_ns; /* CLOCK_REALTIME; destroyed_ns 0 while alive */
    uint64_t launches, alloc_node_bytes, capture_bytes; /* a count; bytes; bytes */
};

/* One allocation live at exit (segment.h struct cushim_live_record). */
struct cushim_live_snapshot {
    uint64_t key;                         /* address, or handle with CUSHIM_LIVE_F_HANDLE */
    uint64_t bytes;                       /* bytes requested */
    int32_t device;                       /* ordinal it is counted on */
    uint32_t kind;                        /* enum cushim_kind, never CAPTURE */
    uint32_t flags;                       /* CUSHIM_LIVE_F_* */
    uint64_t mapped;                      /* CUSHIM_LIVE_F_VMM: lowest mapped address, 0 none */
};

/* The address a live-at-exit record's memory is used at: its key for a pointer, the lowest
 * mapping of a VMM handle; 0 for an array or a VMM handle not mapped. */
static inline uint64_t cushim_live_address(const struct cushim_live_snapshot *l)
{
    return !(l->flags & CUSHIM_LIVE_F_HANDLE) ? l->key : l->mapped;
}

/* One process's segment (segment.h struct cushim_segment_header, then records). */
struct cushim_snapshot {
    int32_t pid;                          /* in the writer's own pid namespace */
    uint32_t uid;                         /* effective uid at creation, in the writer's own user
                                             namespace (0 for a rootless container's root) */
    uint32_t file_uid;                    /* the segment file's owner as the reader sees it (the
                                             host's uid of that user), set by tools/collect.c; 0
                                             where no reader set it */
    uint64_t start_time;                  /* /proc/<pid>/stat field 22 as the writer read it:
                                             clock ticks after boot */
    uint64_t pidns_inode;                 /* the writer's /proc/self/ns/pid inode, 0 unknown */
    uint64_t created_ns;                  /* CLOCK_REALTIME at the segment's creation */
    /* When the counters were read (CLOCK_REALTIME ns): by cushim_snapshot_read, after the device
     * records; `cushim run` sets a final copy's to when its process wrote it. 0: never read. */
    uint64_t read_ns;
    uint64_t run_id;                      /* the `cushim run` that launched it, 0 none */
    int32_t run_pid;                      /* segment.h: the `cushim run` that launched it, 0 none */
    /* Filled by the CLI's scan (tools/segments.c), 0 elsewhere: whether the process is in
     * another pid namespace than the reader (a container's, read on the host), and then its pid
     * in the reader's namespace (0 when not visible from there). */
    int32_t other_pidns;
    int32_t host_pid;
    uint64_t run_start_time;              /* run_pid's /proc/<pid>/stat field 22: clock ticks after boot */
    uint64_t pidfs_ino;                   /* segment.h: 0 unknown */
    uint64_t file_ino, file_dev;          /* segment.h: the file its writer made; 0 unknown */
    uint32_t phase;                       /* enum cushim_phase */
    uint32_t phase_requested;             /* `cushim phase` not yet applied: 1 + enum cushim_phase, 0 none */
    uint32_t flags;                       /* CUSHIM_SEG_F_* */
    uint32_t incomplete;                  /* CUSHIM_INCOMPLETE_* (segment.h) */
    /* 1 once the process finished its exit report (segment.h header exited): a live segment
     * with it set is stale (tools/segments.c is_stale). */
    uint32_t exited;
    /* The process has ended, with or without its exit report (exited): set by a reader that knows
     * (cushim run's summary of its processes), 0 from cushim_snapshot_read. Its figures are
     * those at its end: the text says no "not sampled yet" or age for them. */
    uint32_t over;
    /* Device records copied without a quiet moment in CUSHIM_COPY_PATIENCE_NS: a writer was
     * stopped in the middle of an update (the process killed, or replaced by exec, while counting
     * an allocation; or preempted that long). Their counters may be off by the allocations in
     * flight then (current above peak, say). 0 for a consistent copy. */
    uint32_t torn;
    /* What the process held at its exit report (segment.h struct cushim_live_at_exit): live_known 0 when
     * the segment does not say (no exit report written, or not yet); then live_count allocations
     * of live_bytes in all, the live_listed largest in live[] (at the end), largest first. */
    uint32_t live_known;
    uint32_t live_listed;
    uint64_t live_count;
    uint64_t live_bytes;
    char command[CUSHIM_COMMAND_MAX];
    char version[CUSHIM_VERSION_MAX];
    uint32_t device_count;                /* entries used in devices[] (live records only) */
    struct cushim_device_snapshot devices[CUSHIM_MAX_DEVICES];
    uint32_t graph_count;                 /* entries used in graphs[], in id order */
    struct cushim_graph_snapshot graphs[CUSHIM_MAX_GRAPHS];
    struct cushim_live_snapshot live[CUSHIM_LIVE_MAX]; /* live_listed used (live_known above) */
};

/* How long a copy of a live record may keep trying while writers stay active: pass it as
 * `patience_ns` to cushim_record_copy / cushim_snapshot_read when the writers are alive. */
#define CUSHIM_COPY_PATIENCE_NS 200000000ull

/* Validates `len` bytes at `mem` (a live mapping or a file's contents: untrusted) and copies them
 * into *out, each device record under its seqlock (cushim_record_copy with spin_limit, and
 * patience_ns for all the records together; one that never holds still is taken as it is and
 * counted in out->torn: a segment
 * whose writer was killed in the middle of an update never settles, so a reader that knows the
 * writers are gone passes patience_ns 0). Returns 0, or -1 with a one-line reason in err (e.g.
 * "truncated: 100 of 50432 bytes", "bad magic", "layout version 7, this cushim reads 1").
 * Never reads outside [mem, mem+len). Thread-safe; no allocation; no system call unless a
 * record stays busy past spin_limit attempts and patience_ns > 0. */
int cushim_snapshot_read(const void *mem, size_t len, struct cushim_snapshot *out,
                         unsigned spin_limit, uint64_t patience_ns, char *err, size_t errlen);

/* Copies one device record (trusted memory: the caller validated the segment, or it is the
 * process's own) under its seqlock: spin_limit+1 attempts, then, while writers keep it busy (one
 * preempted inside its update holds readers off until it runs again), rounds of attempts with a
 * 20 us sleep between them, for up to patience_ns. Returns 0, or -1 if the record never held
 * still that long (*d then holds the last attempt's copy, taken as it was). Thread-safe: reads
 * the record's atomics only, writes *d only (common/seqlock.h reader side). */
int cushim_record_copy(const struct cushim_device_record *r, struct cushim_device_snapshot *d,
                       unsigned spin_limit, uint64_t patience_ns);

/* The record's raw bytes into *out, as cushim_record_copy copies it (same attempts, same waits),
 * the patience a budget shared by several records: *patience_left (ns) is lowered by what this
 * copy spent waiting. Returns 0 (out's seq_begin then equals its seq_end), or -1 if the record
 * never held still (out then holds the last attempt, taken as it was). For the writer's own
 * segment (trusted memory). Thread-safe as cushim_record_copy; *patience_left is the caller's
 * (not shared between threads). */
int cushim_record_settle(const struct cushim_device_record *r, struct cushim_device_record *out,
                         unsigned spin_limit, uint64_t *patience_left);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi's form, lower-case hex) into buf,
 * returned. 41 bytes hold it; a shorter len cuts it (snprintf), still NUL-terminated. */
char *cushim_format_uuid(const uint8_t uuid[16], char *buf, size_t len);

/* Name of a phase ("run", "compile"), "unknown" when out of range. A static string. */
const char *cushim_phase_name(uint32_t phase);

/* The offload policy a segment's flags say (segment.h CUSHIM_SEG_F_OFFLOAD_*): "off", "compile" or
 * "always" (CUSHIM_OFFLOAD's values). A static string. */
const char *cushim_offload_label(uint32_t flags);

/* The phase a `cushim phase` request asks for that the process has not switched to yet (it
 * switches at its next allocation): "run" or "compile"; NULL when none waits. A static string. */
const char *cushim_phase_requested(const struct cushim_snapshot *s);

/* The phase as ps, top and the text summary show it: "run", or "run>compile" while a requested
 * change waits for the process's next allocation. Written to buf (24 bytes hold any), returned;
 * a shorter len cuts it (snprintf), still NUL-terminated when len > 0. */
const char *cushim_phase_label(const struct cushim_snapshot *s, char *buf, size_t len);

/* The devices a process used, as ps and top show them in a column `width` characters wide
 * (< len): ordinals with runs of three or more joined ("0-3,6"; "0,1"), or "N GPUs" when that is
 * wider (or did not fit in len); "-" for none. Written to buf (len > 0), returned. */
const char *cushim_device_list(const struct cushim_snapshot *s, char *buf, size_t len, size_t width);

/* The pid as ps, top and Prometheus show it: the process's pid in the reader's namespace; for a
 * process of another pid namespace not visible from the reader's, its own pid there with "*"
 * ("1*"). Written to buf (16 bytes hold any), returned; a shorter len cuts it (snprintf). */
const char *cushim_pid_label(const struct cushim_snapshot *s, char *buf, size_t len);

#endif
