/* Start-up and shut-down of the shim.
 *
 * Load: read the configuration (one line per bad CUSHIM_ value) and finish the segment of this
 * process's image before an exec, if it left one (one open() otherwise): a program that never
 * touches CUDA is not changed and leaves nothing behind. First counting CUDA call: create
 * the segment and register the exit handler. Exit: summary, copy for `cushim run`, remove the
 * segment. fork: the child forgets the parent's segment and tables (its own segment is created at
 * its first CUDA call; DESIGN.md notes CUDA is unusable in a child before exec anyway). */
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/path.h"
#include "common/procinfo.h"
#include "shim/arena.h"
#include "shim/budget.h"
#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/offload.h"
#include "shim/segment_file.h"
#include "shim/shim.h"
#include "shim/track.h"

extern char **environ;

struct shim_state shim;
SHIM_TLS int shim_depth;

static _Atomic int exit_registered;

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

static void report_config_error(const struct cushim_config_error *e)
{
    char buf[1200];
    int n = snprintf(buf, sizeof buf, "%s\n", e->line);
    if (n > 0) {
        ssize_t w = write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
}

_Atomic uint64_t shim_gate = SHIM_GATE_OFF;

/* The shim has just become active: the plain path opens unless a policy is configured. */
static void gate_open(void)
{
    if (!shim_policy)
        atomic_fetch_and_explicit(&shim_gate, ~SHIM_GATE_OFF, memory_order_release);
}

static void after_fork_child(void)
{
    atomic_fetch_or(&shim_gate, SHIM_GATE_OFF); /* until the child's own start */
    struct cushim_segment *parent = shim.seg;
    shim.seg = NULL;
    shim.seg_path[0] = '\0';
    shim.owner = 0;
    shim.top = 0; /* a forked child is a descendant, not the launched image */
    arena_after_fork_child();
    table_after_fork_child(&shim.ptrs);
    table_after_fork_child(&shim.arrays);
    table_after_fork_child(&shim.vmm_handles);
    table_after_fork_child(&shim.vmm_maps);
    table_after_fork_child(&shim.pools);
    table_after_fork_child(&shim.captures);
    table_after_fork_child(&shim.execs);
    table_after_fork_child(&shim.graph_nodes);
    table_after_fork_child(&shim.graph_caps);
    capture_after_fork_child(); /* no capture of the parent's is live here */
    graph_after_fork_child();
    offload_after_fork_child();
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
        atomic_store(&budget_used[i], 0);
    shim_context_after_fork_child();
    /* Per-thread context caches point into the parent's segment: invalidate them. */
    atomic_fetch_add_explicit(&shim_ctx_generation, 1, memory_order_relaxed);
    if (parent)
        munmap(parent, sizeof *parent);
    if (atomic_load(&shim.run) != SHIM_OFF)
        atomic_store(&shim.run, SHIM_IDLE);
}

/* Whether another copy of the shim was loaded before this one (LD_PRELOAD naming two builds, or
 * one twice under two paths): the first object whose file is named libcushim* in load order
 * (dl_iterate_phdr walks the link map in that order) is the one that counts; a later copy passes
 * everything through, or the process would be counted, and reported, twice. */
struct first_copy {
    uintptr_t self; /* an address in this copy */
    int verdict;    /* 0 none seen yet, 1 this copy is first, 2 another is */
};

static int first_copy_fn(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct first_copy *c = arg;
    const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    name = name ? name + 1 : info->dlpi_name;
    if (!name || strncmp(name, "libcushim", 9) != 0)
        return 0;
    c->verdict = 2;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && c->self >= start && c->self - start < ph->p_memsz)
            c->verdict = 1;
    }
    return 1;
}

static bool another_copy_first(void)
{
    struct first_copy c = {(uintptr_t)&another_copy_first, 0};
    dl_iterate_phdr(first_copy_fn, &c);
    return c.verdict == 2;
}

__attribute__((constructor)) static void shim_load(void)
{
    /* Bad values are reported once: under `cushim run`, by the launcher, unless this process's
     * CUSHIM_ values differ from those it checked (a child that set its own). CUSHIM_LOG=off
     * silences them. */
    cushim_config_load(&shim.cfg, env_lookup, environ, NULL);
    char mine[24];
    snprintf(mine, sizeof mine, "%llx",
             (unsigned long long)cushim_config_fingerprint(env_lookup, environ));
    bool checked = shim.cfg.run_dir[0] && strcmp(shim.cfg.run_checked, mine) == 0;
    if (!checked && shim.cfg.log != CUSHIM_LOG_OFF)
        cushim_config_load(&shim.cfg, env_lookup, environ, report_config_error);
    shim_log_open(&shim.cfg);
    /* The process `cushim run` launched is the top level, whichever image of it uses CUDA (a
     * launcher may exec the real program); its children have other pids. */
    shim.top = shim.cfg.run_top[0] && strtol(shim.cfg.run_top, NULL, 10) == (long)getpid();
    /* The pid is the run's pid namespace's (its directory's name says which): a process of a
     * namespace inside it (a sandbox, a container) with that same number is not the program. */
    int run_pid, done;
    uint64_t run_start, run_ns;
    if (shim.top && cushim_run_dir_owner(shim.cfg.run_dir, &run_pid, &run_start, &run_ns, &done) == 0 &&
        run_ns != 0 && run_ns != cushim_pidns_inode())
        shim.top = 0;
    shim.run_id = strtoull(shim.cfg.run_id, NULL, 16);
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
        budget_any |= shim.cfg.device_limit[i] != 0;
    shim_policy = budget_any || shim.cfg.spill || shim.cfg.offload != CUSHIM_OFFLOAD_OFF;
    if (another_copy_first()) {
        LOG_WARN("another copy of cushim was loaded first (LD_PRELOAD names two): this one passes every call through");
        atomic_store(&shim.run, SHIM_OFF);
    } else if (shim.cfg.disable)
        atomic_store(&shim.run, SHIM_OFF);
    else
        shim_exit_previous_image();
    pthread_atfork(NULL, NULL, after_fork_child);
}

bool shim_start_slow(bool from_api)
{
    int expected = SHIM_IDLE;
    if (atomic_compare_exchange_strong(&shim.run, &expected, SHIM_STARTING)) {
        unsigned flags = shim.top ? CUSHIM_SEG_F_TOP : 0;
        shim.seg = segment_create(&shim.cfg, flags, shim.run_id, shim.seg_path,
                                  sizeof shim.seg_path);
        shim.owner = getpid();
        if (!shim.seg) {
            LOG_ERROR("no memory for counters: passing every call through");
            atomic_store(&shim.run, SHIM_OFF);
            return false;
        }
        if (!from_api && !atomic_exchange(&exit_registered, 1))
            atexit(shim_exit_report);
        atomic_store_explicit(&shim.run, from_api ? SHIM_QUIET : SHIM_ACTIVE, memory_order_release);
        if (!from_api)
            gate_open();
        LOG_INFO("started: segment %s", shim.seg_path[0] ? shim.seg_path : "(private)");
        return true;
    }
    if (expected == SHIM_QUIET) {
        if (from_api)
            return true;
        /* First CUDA call after an API start: now the exit handler. */
        if (!atomic_exchange(&exit_registered, 1))
            atexit(shim_exit_report);
        if (atomic_compare_exchange_strong(&shim.run, &expected, SHIM_ACTIVE))
            gate_open();
        return true;
    }
    /* Another thread is starting: it only makes system calls, so wait for it. */
    while ((expected = atomic_load_explicit(&shim.run, memory_order_acquire)) == SHIM_STARTING)
        sched_yield();
    return expected == SHIM_ACTIVE || expected == SHIM_QUIET;
}

/* The last resort: a process whose exit handler was never registered (it only used the API)
 * still writes its summary and removes its segment, after every other exit handler. */
__attribute__((destructor)) static void shim_unload(void)
{
    shim_exit_finish(false);
}
