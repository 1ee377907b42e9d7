/* The one list of what cushim counts.
 *
 * Every counter exists once here; the shared-memory segment layout (segment.h), the snapshot,
 * the text and JSON summary (report.c) and the Prometheus exposition (tools/prometheus.c) are all
 * generated from these X-macro lists, so they cannot drift apart. Add a field at the END of a list
 * and bump CUSHIM_LAYOUT_VERSION in segment.h; JSON names are stable (docs/SUMMARY-JSON.md):
 * later versions add fields, never rename.
 */
#ifndef CUSHIM_STATS_H
#define CUSHIM_STATS_H

/* Kinds of memory (DESIGN.md "Kinds of memory").
 * X(ENUM, json_name, in_device_total, description) */
#define CUSHIM_KINDS(X)                                                                          \
    X(DEVICE, device, 1, "cuMemAlloc_v2 / cuMemAllocPitch_v2 (cudaMalloc, cudaMallocPitch)")    \
    X(ASYNC, async, 1, "stream-ordered allocations from device memory pools (cudaMallocAsync)") \
    X(VMM, vmm, 1, "physical memory of cuMemCreate on a device (virtual memory management)")    \
    X(ARRAY, array, 1, "CUDA arrays and mipmapped arrays")                                      \
    X(MANAGED, managed, 0, "cuMemAllocManaged (unified memory), managed pools")                 \
    X(PINNED_HOST, pinned_host, 0, "pinned (page-locked) host memory (cuMemHostAlloc, cudaMallocHost, host pools, host-located cuMemCreate)")\
    X(REGISTERED_HOST, registered_host, 0, "host memory pinned by cuMemHostRegister")              \
    X(IMPORTED, imported, 0, "imported memory (CUDA IPC, shareable handles, pool imports): another process's, or an import of its own export")          \
    X(OFFLOADED, offloaded, 0, "device requests served from pinned device-mapped host memory")  \
    X(CAPTURE, capture, 0, "bytes allocated while a stream of the process was capturing (also in their own kind)")

enum cushim_kind {
#define CUSHIM_X_ENUM(e, name, total, desc) CUSHIM_KIND_##e,
    CUSHIM_KINDS(CUSHIM_X_ENUM)
#undef CUSHIM_X_ENUM
    CUSHIM_KIND_COUNT
};

/* Per-kind counters. X(field, prometheus_suffix, prometheus_type, help)
 * current/peak are bytes; the rest are event counts. */
#define CUSHIM_KIND_STATS(X)                                                               \
    X(current_bytes, "bytes", gauge, "bytes in use now (requested sizes)")                 \
    X(peak_bytes, "peak_bytes", gauge, "high-water mark of current_bytes since the last peak reset") \
    X(alloc_count, "allocations_total", counter, "successful allocations")                 \
    X(free_count, "frees_total", counter, "frees (explicit, or by context teardown)")      \
    X(failed_count, "failed_allocations_total", counter, "allocations refused (by the driver, or over CUSHIM_DEVICE_LIMIT)") \
    X(spill_count, "spills_total", counter, "offloaded allocations moved to host by an out-of-memory failure rather than by policy")

enum cushim_kind_stat {
#define CUSHIM_X_ENUM(f, p, t, h) CUSHIM_STAT_##f,
    CUSHIM_KIND_STATS(CUSHIM_X_ENUM)
#undef CUSHIM_X_ENUM
    CUSHIM_STAT_COUNT
};

/* Phases of a run (offload policy, DESIGN.md "Offload"). X(ENUM, name) */
#define CUSHIM_PHASES(X) X(RUN, run) X(COMPILE, compile)

enum cushim_phase {
#define CUSHIM_X_ENUM(e, n) CUSHIM_PHASE_##e,
    CUSHIM_PHASES(CUSHIM_X_ENUM)
#undef CUSHIM_X_ENUM
    CUSHIM_PHASE_COUNT
};

/* Per-device scalar counters beside the per-kind ones.
 * X(field, json_group, json_name, prometheus_name, prometheus_labels, prometheus_type, help)
 * The JSON object of a device holds {"json_group": {"json_name": value, ...}}; Prometheus metrics
 * are cushim_<prometheus_name>{pid[,pidns],command,device,uuid[,prometheus_labels]} (none for an empty
 * prometheus_name). */
#define CUSHIM_DEVICE_STATS(X)                                                                     \
    X(total_current, device_total, current_bytes, "device_total_bytes", "", gauge,               \
      "device bytes in use: device + async + vmm + array")                                         \
    X(total_peak, device_total, peak_bytes, "device_total_peak_bytes", "", gauge,                 \
      "high-water mark of the device total (the peak of the sum)")                                 \
    X(run_peak, phase_peaks, run_device_peak_bytes, "phase_device_peak_bytes", "phase=\"run\"",   \
      gauge, "device-total peak reached in each phase")                                   \
    X(compile_peak, phase_peaks, compile_device_peak_bytes, "phase_device_peak_bytes",           \
      "phase=\"compile\"", gauge, "device-total peak reached in each phase")         \
    X(run_offloaded_peak, phase_peaks, run_offloaded_peak_bytes, "phase_offloaded_peak_bytes",    \
      "phase=\"run\"", gauge, "offloaded peak reached in each phase")                    \
    X(compile_offloaded_peak, phase_peaks, compile_offloaded_peak_bytes,                          \
      "phase_offloaded_peak_bytes", "phase=\"compile\"", gauge,                                   \
      "offloaded peak reached in each phase")                                         \
    X(resident_offloaded_count, offload_resident, count, "offload_resident_allocations", "",      \
      gauge, "offloaded allocations made in the compile phase still alive in the run phase")       \
    X(resident_offloaded_bytes, offload_resident, bytes, "offload_resident_bytes", "", gauge,     \
      "bytes of those allocations")                                                                \
    X(offload_cached_bytes, offload_host, cached_bytes, "offload_cached_bytes", "", gauge,         \
      "freed pinned blocks kept for reuse by later offloads (CUSHIM_OFFLOAD_CACHE)")              \
    X(offload_pending_free_bytes, offload_host, pending_free_bytes, "offload_pending_free_bytes",  \
      "", gauge, "offloaded memory freed by cudaFreeAsync, released once its stream's earlier work is done") \
    X(graphs_captured, graphs, captured, "graphs_captured_total", "", counter,                    \
      "stream captures ended into a graph")                                                        \
    X(graphs_instantiated, graphs, instantiated, "graphs_instantiated_total", "", counter,        \
      "executable graphs instantiated")                                                            \
    X(graph_execs_alive, graphs, execs_alive, "graph_execs_alive", "", gauge,                     \
      "executable graphs not yet destroyed")                                                       \
    X(graph_launches, graphs, launches, "graph_launches_total", "", counter, "graph launches")     \
    X(graph_alloc_node_bytes, graphs, alloc_node_bytes, "graph_alloc_node_bytes", "", gauge,      \
      "bytes of allocation nodes in live executable graphs")                                       \
    X(graph_pool_used_current, graph_pool, used_current_bytes, "graph_pool_used_bytes", "",       \
      gauge, "graph memory pool: used, current (cuDeviceGetGraphMemAttribute)")                    \
    X(graph_pool_used_high, graph_pool, used_high_bytes, "graph_pool_used_high_bytes", "", gauge, \
      "graph memory pool: used, high-water mark")                                                  \
    X(graph_pool_reserved_current, graph_pool, reserved_current_bytes,                            \
      "graph_pool_reserved_bytes", "", gauge, "graph memory pool: reserved, current")              \
    X(graph_pool_reserved_high, graph_pool, reserved_high_bytes,                                  \
      "graph_pool_reserved_high_bytes", "", gauge, "graph memory pool: reserved, high-water mark")  \
    X(async_pool_used_current, async_pool, used_current_bytes, "async_pool_used_bytes", "", gauge, \
      "stream-ordered pools of the device: memory in use (CU_MEMPOOL_ATTR_USED_MEM_CURRENT, summed)") \
    X(async_pool_used_high, async_pool, used_high_bytes, "async_pool_used_high_bytes", "", gauge, \
      "stream-ordered pools of the device: each pool's in-use high-water mark, summed")            \
    X(async_pool_reserved_current, async_pool, reserved_current_bytes, "async_pool_reserved_bytes", \
      "", gauge, "stream-ordered pools of the device: memory reserved (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, summed)") \
    X(async_pool_reserved_high, async_pool, reserved_high_bytes, "async_pool_reserved_high_bytes", \
      "", gauge, "stream-ordered pools of the device: each pool's reserved high-water mark, summed") \
    X(async_pool_sampled_ns, async_pool, sampled_ns, "", "", gauge,                               \
      "when the pools were last read (CLOCK_REALTIME ns; 0 = never); not a Prometheus metric")     \
    X(graph_pool_sampled_ns, graph_pool, sampled_ns, "", "", gauge,                               \
      "when the graph pool was last read (CLOCK_REALTIME ns; 0 = never); not a Prometheus metric") \
    X(limit, device_total, limit_bytes, "device_limit_bytes", "", gauge,                          \
      "the process's limit for the device total (CUSHIM_DEVICE_LIMIT; 0 = none)")                 \
    X(peak_reset_count, peak_reset, count, "peak_resets_total", "", counter,                      \
      "peak resets (cushim_reset_peak or `cushim reset-peak`): the peaks are since the last one")  \
    X(peak_reset_ns, peak_reset, last_ns, "", "", gauge,                                          \
      "when the peaks were last reset (CLOCK_REALTIME ns; 0 = never); not a Prometheus metric")    \
    X(limit_refused, device_total, limit_refused_count, "device_limit_refusals_total", "",       \
      counter, "requests the limit (CUSHIM_DEVICE_LIMIT) refused: out of memory for the program " \
      "(also in their kind's failed_count), or served from host memory with CUSHIM_SPILL")        \
    X(lifetime_peak, device_total, lifetime_peak_bytes, "device_total_lifetime_peak_bytes", "",   \
      gauge, "high-water mark of the device total over the process's whole life: a peak reset "   \
      "does not lower it")                                                                        \
    X(limit_held, device_total, limit_held_bytes, "device_limit_held_bytes", "", gauge,           \
      "what the limit (CUSHIM_DEVICE_LIMIT) counts as held, which a request must fit beside: "    \
      "the device total, requests and frees in their call, the graph pool's reserve and the "    \
      "stream-ordered pools' idle reserve (as last read); 0 without a limit")

enum cushim_device_stat {
#define CUSHIM_X_ENUM(f, g, n, p, l, t, h) CUSHIM_DEV_##f,
    CUSHIM_DEVICE_STATS(CUSHIM_X_ENUM)
#undef CUSHIM_X_ENUM
    CUSHIM_DEV_STAT_COUNT
};

#endif
