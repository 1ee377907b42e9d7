/* Layout of the per-process shared-memory segment (DESIGN.md "Shared-memory segment").
 *
 * One file per process in CUSHIM_SEGMENT_DIR (default /dev/shm), named cushim-<uid>-<pid> with
 * <uid> its effective uid, which owns the file (or cushim-<uid>-<pid>.<6 random [a-z0-9]> when
 * another user's file took that name),
 * created 0600 with O_EXCL at the process's first CUDA activity and removed at normal exit. The
 * counters live in it: the shim updates them with atomics, readers (the CLI) map it read-only and
 * copy it under the per-device sequence lock (seqlock.h); the owner's CLI may also write the peaks
 * (compare-and-swap, `cushim reset-peak`) and the control area (`cushim phase`).
 *
 * Everything after `magic` is untrusted to a reader: cushim_snapshot_read (snapshot.c) validates it. All integers are
 * native-endian (a segment is only read on the machine that wrote it). Fields are fixed-size and
 * naturally aligned; the layout is generated from stats.h, and any change bumps
 * CUSHIM_LAYOUT_VERSION.
 */
#ifndef CUSHIM_SEGMENT_H
#define CUSHIM_SEGMENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/stats.h"

#define CUSHIM_SEGMENT_MAGIC "CUSHIMSG"   /* 8 bytes, no terminator stored */
#define CUSHIM_LAYOUT_VERSION 8u /* 2: async_pool device stats; 3: graph_pool.sampled_ns;
                                  * 4: device_total.limit_bytes, peak_reset;
                                  * 5: device_total.limit_refused_count;
                                  * 6: device_total.lifetime_peak_bytes;
                                  * 7: device_total.limit_held_bytes;
                                  * 8: live at exit */
#define CUSHIM_MAX_DEVICES 64u            /* ordinals 0..63 */
#define CUSHIM_COMMAND_MAX 256u           /* command line, NUL-terminated, truncated */
#define CUSHIM_VERSION_MAX 16u
#define CUSHIM_MAX_GRAPHS 256u            /* executable graphs kept in the per-graph table */
#define CUSHIM_LIVE_MAX 16u               /* allocations live at exit listed, the largest */

/* Counters of one kind on one device (stats.h CUSHIM_KIND_STATS). Bytes or counts. */
struct cushim_kind_counters {
    _Atomic uint64_t v[CUSHIM_STAT_COUNT];
};

/* One device's record. `seq_begin`/`seq_end` form a multi-writer sequence lock (seqlock.h):
 * writers bump seq_begin, update, bump seq_end; a copy is consistent when seq_end before equals
 * seq_begin after. */
struct cushim_device_record {
    _Atomic uint64_t seq_begin;
    _Atomic uint64_t seq_end;
    _Atomic uint32_t state;               /* 0 unused, 1 counters live (uuid may be pending), 2 identified */
    int32_t ordinal;                      /* CUdevice ordinal in the writing process */
    uint8_t uuid[16];                     /* cuDeviceGetUuid_v2, valid when state == 2 */
    _Atomic uint64_t total_bytes;         /* cuDeviceTotalMem_v2, bytes */
    _Atomic uint64_t untracked_bytes;     /* (total - free) - device total - graph pool reserve, bytes, last sample */
    _Atomic uint64_t untracked_sampled_ns; /* CLOCK_REALTIME of that sample, 0 = never */
    struct cushim_kind_counters kinds[CUSHIM_KIND_COUNT];
    _Atomic uint64_t dev[CUSHIM_DEV_STAT_COUNT];
    uint8_t pad[64];                      /* keeps records on separate cache lines */
} __attribute__((aligned(64)));

/* One executable graph (issue 5). Written by the shim when instantiated (state 1 -> 2, all other
 * fields written before state 2 is published) and destroyed (state 3); launches only grow. A
 * destroyed record is reused, oldest first, when every slot is taken. */
struct cushim_graph_record {
    _Atomic uint32_t state;               /* 0 free, 1 being written, 2 alive, 3 destroyed */
    int32_t device;                       /* ordinal it was instantiated on */
    uint64_t id;                          /* 1, 2, ... in instantiation order */
    uint64_t exec;                        /* CUgraphExec handle in the writing process */
    uint64_t instantiated_ns;             /* CLOCK_REALTIME */
    uint64_t destroyed_ns;                /* CLOCK_REALTIME, 0 while alive */
    _Atomic uint64_t launches;
    uint64_t alloc_node_bytes;            /* bytes of its memory-allocation nodes */
    uint64_t capture_bytes;               /* bytes allocated while its capture was live */
};

/* Requests the owner's CLI writes and the shim consumes (issue: offload phases). */
struct cushim_control {
    _Atomic uint32_t phase_request;       /* 0 none, else 1 + enum cushim_phase */
    _Atomic uint32_t reserved0;
    _Atomic uint64_t peak_resets;         /* count of `cushim reset-peak` done on this segment */
    uint8_t pad[48];
};

/* One allocation the process still held when it wrote its exit report (shim/live_at_exit.c): one it
 * made and had not freed, as compute-sanitizer --leak-check lists them. */
struct cushim_live_record {
    uint64_t key;                         /* its address (device, host or mapped pointer), or its
                                           * handle when CUSHIM_LIVE_F_HANDLE (a CUarray,
                                           * CUmipmappedArray or CUmemGenericAllocationHandle) */
    uint64_t bytes;                       /* bytes requested */
    int32_t device;                       /* ordinal it is counted on */
    uint16_t kind;                        /* enum cushim_kind (stats.h), never CAPTURE */
    uint16_t flags;                       /* CUSHIM_LIVE_F_* */
    uint64_t mapped;                      /* CUSHIM_LIVE_F_VMM: the lowest address the handle is
                                           * mapped at in the process, 0 when not mapped; else 0 */
};
#define CUSHIM_LIVE_F_HANDLE 1u           /* key is a handle, not an address */
#define CUSHIM_LIVE_F_CAPTURE 2u          /* allocated while a stream of the process was capturing */
#define CUSHIM_LIVE_F_VMM 4u              /* with HANDLE: a VMM handle (cuMemCreate, an import) */

/* What the process held at its exit report, written once then (state 0 -> 1 -> 2, the fields
 * before state 2 is published with release). State 0: not written, the process has not reached
 * its exit report, ended without one (killed, exec), or exited from inside a CUDA call. */
struct cushim_live_at_exit {
    _Atomic uint32_t state;               /* 0 not written, 1 being written, 2 written */
    uint32_t listed;                      /* records used in rec[], largest first */
    uint64_t count;                       /* allocations held (listed or not) */
    uint64_t bytes;                       /* their bytes */
    struct cushim_live_record rec[CUSHIM_LIVE_MAX];
};

struct cushim_segment_header {
    char magic[8];                        /* CUSHIM_SEGMENT_MAGIC */
    uint32_t layout_version;              /* CUSHIM_LAYOUT_VERSION */
    uint32_t header_size;                 /* sizeof(struct cushim_segment_header) */
    uint32_t device_record_size;          /* sizeof(struct cushim_device_record) */
    uint32_t device_capacity;             /* records that follow the header (CUSHIM_MAX_DEVICES) */
    uint32_t kind_count;                  /* CUSHIM_KIND_COUNT */
    uint32_t kind_stat_count;             /* CUSHIM_STAT_COUNT */
    uint32_t device_stat_count;           /* CUSHIM_DEV_STAT_COUNT */
    uint32_t control_offset;              /* byte offset of struct cushim_control */
    uint32_t graph_capacity;              /* CUSHIM_MAX_GRAPHS */
    uint32_t graph_record_size;           /* sizeof(struct cushim_graph_record) */
    uint64_t total_size;                  /* bytes of the whole segment */
    int32_t pid;
    uint32_t uid;                         /* effective uid at creation: the file's owner */
    uint64_t start_time;                  /* /proc/<pid>/stat field 22, clock ticks after boot */
    uint64_t pidns_inode;                 /* inode of /proc/self/ns/pid, 0 if unknown */
    uint64_t created_ns;                  /* CLOCK_REALTIME at creation */
    uint64_t run_id;                      /* nonzero under `cushim run`: the run that launched us */
    _Atomic uint32_t device_count;        /* 1 + highest ordinal with a live record */
    _Atomic uint32_t phase;               /* enum cushim_phase, current */
    _Atomic uint32_t exited;              /* 1 once the process finished its exit report */
    uint32_t flags;                       /* CUSHIM_SEG_F_* */
    _Atomic uint32_t graph_count;         /* 1 + highest graph slot ever used */
    /* CUSHIM_INCOMPLETE_*: what the figures leave out, set (never cleared) when the shim runs out
     * of memory for its tables; 0 also for a writer before this field (padding then). */
    _Atomic uint32_t incomplete;
    char command[CUSHIM_COMMAND_MAX];     /* NUL-terminated */
    char version[CUSHIM_VERSION_MAX];     /* cushim version that wrote it, NUL-terminated */
    /* The `cushim run` that launched us (from its directory's name, path.h cushim_run_dir_owner):
     * while it lives, it collects our segment if we die; 0 when not under one or unknown (a
     * writer before these fields, which were padding, wrote 0). */
    int32_t run_pid;
    uint32_t reserved2;
    uint64_t run_start_time;              /* its /proc/<pid>/stat field 22 */
    /* This process's pidfs inode (procinfo.h cushim_proc_pidfs_ino): unique to the process for
     * the machine's lifetime, kept across exec; 0 where the kernel has no pidfs (before 6.9) or a
     * writer before this field (padding then). */
    uint64_t pidfs_ino;
    /* The segment file's st_ino and st_dev as its writer made it (0: a writer before these
     * fields, or no file): a file at the segment's name with another inode is a copy, which the
     * process never writes (its readers in the writer's pid namespace say so). */
    uint64_t file_ino;
    uint64_t file_dev;
    uint32_t live_offset;                 /* byte offset of struct cushim_live_at_exit */
    uint32_t live_capacity;               /* CUSHIM_LIVE_MAX */
    uint8_t pad[16];
} __attribute__((aligned(64)));

/* Bits of the header's `incomplete`. */
#define CUSHIM_INCOMPLETE_TABLE 1u    /* an allocation, mapping or handle not kept: not counted, or its free unseen */
#define CUSHIM_INCOMPLETE_POOLS 2u    /* a host or managed pool not recorded: its requests pass uncounted */
#define CUSHIM_INCOMPLETE_CAPTURES 4u /* a capture not recorded: its allocations count as memory */

#define CUSHIM_SEG_F_TOP 1u               /* the image `cushim run` launched (not a descendant) */
#define CUSHIM_SEG_F_ANONYMOUS 2u         /* not backed by a file (segment creation failed) */
/* The process's offload policy (CUSHIM_OFFLOAD: neither bit = off) and CUSHIM_SPILL=on, as it
 * started; a writer before these bits (cushim before 2026-12-02) leaves them 0 whatever its
 * policy. */
#define CUSHIM_SEG_F_OFFLOAD_COMPILE 4u
#define CUSHIM_SEG_F_OFFLOAD_ALWAYS 8u
#define CUSHIM_SEG_F_SPILL 16u

/* The whole segment: header, device records, graph records, control area, live at exit. */
struct cushim_segment {
    struct cushim_segment_header h;
    struct cushim_device_record devices[CUSHIM_MAX_DEVICES];
    struct cushim_graph_record graphs[CUSHIM_MAX_GRAPHS];
    struct cushim_control control;
    struct cushim_live_at_exit live_at_exit;
};

/* Segment files are named CUSHIM_SEGMENT_PREFIX "<euid>-<pid>" in the segment directory
 * (CUSHIM_SEGMENT_DIR, default /dev/shm): shim/segment_file.c writes them, tools/segments.c
 * parses the name. */
#define CUSHIM_SEGMENT_PREFIX "cushim-"

/* Whether the segment at mem starts with the magic, read as its writer stores it (fill_header in
 * shim/segment_file.c: last, one 8-byte store with release) with acquire, so that the header read
 * after a yes is the complete one on a weakly ordered CPU (aarch64) as well. A buffer not 8-byte
 * aligned (a copy, never a live segment) is compared byte by byte. */
static inline int cushim_segment_magic_ok(const void *mem)
{
    uint64_t want, got;
    __builtin_memcpy(&want, CUSHIM_SEGMENT_MAGIC, sizeof want);
    if (((uintptr_t)mem & 7u) == 0) {
        got = __atomic_load_n((const uint64_t *)mem, __ATOMIC_ACQUIRE);
    } else {
        __builtin_memcpy(&got, mem, sizeof got);
        atomic_thread_fence(memory_order_acquire);
    }
    return got == want;
}

#endif
