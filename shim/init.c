/* Start-up and shut-down of the shim.
 *
 * Load: read the configuration (one line per bad CUSHIM_ value) and finish the segment of this
 * process's image before an exec, if it left one (one open() otherwise): a program that never
 * touches CUDA is not changed and leaves nothing behind. First counting CUDA call: create
 * the segment and register the exit handler. Exit: summary, copy for `cushim run`, remove the
 * segment. fork: the child forgets the parent's segment and tables (its own segment is created at
 * its first CUDA call; DESIGN.md notes CUDA is unusable in a child before exec anyway). */
#include <dlfcn.h>
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
#include "shim/pools.h"
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

/* Lines about bad CUSHIM_* values, kept until the log is open: they go where the log goes
 * (CUSHIM_LOG_FILE, else stderr), which is only known once every value is read. */
#define CONFIG_LINES 16
static char config_lines[CONFIG_LINES][1200];
static unsigned config_line_count;

static void report_config_error(const struct cushim_config_error *e)
{
    if (config_line_count < CONFIG_LINES)
        snprintf(config_lines[config_line_count], sizeof config_lines[0], "%s", e->line);
    config_line_count++;
}

static void write_config_lines(void)
{
    unsigned n = config_line_count < CONFIG_LINES ? config_line_count : CONFIG_LINES;
    for (unsigned i = 0; i < n; i++)
        shim_log_line(config_lines[i]);
    if (config_line_count > CONFIG_LINES) {
        char more[96];
        snprintf(more, sizeof more, "cushim: %u more bad CUSHIM_* values not shown",
                 config_line_count - CONFIG_LINES);
        shim_log_line(more);
    }
    config_line_count = 0;
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
    atomic_store(&shim_incomplete, 0); /* the child's figures start afresh */
    arena_after_fork_child();
    shim_log_after_fork_child();
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
    budget_after_fork_child();
    async_pool_after_fork_child();
    pool_tombstones_after_fork_child();
    shim_context_after_fork_child();
    /* Per-thread context caches point into the parent's segment: invalidate them. */
    atomic_fetch_add_explicit(&shim_ctx_generation, 1, memory_order_relaxed);
    if (parent)
        munmap(parent, sizeof *parent);
    if (atomic_load(&shim.run) != SHIM_OFF)
        atomic_store(&shim.run, SHIM_IDLE);
}

/* Exported only so that copies of the shim find each other (another_copy_first); its value is
 * never read. A name no program defines (a program's weak stubs of the cushim_* API would be
 * found first by the same lookup). */
SHIM_EXPORT const char cushim_copy_marker_v1 = 1;
bool shim_aside;

/* Whether another copy of the shim is in the process before this one (LD_PRELOAD naming two
 * builds, or one twice under two names; a program dlopen()ing one while another is preloaded):
 * the first definition of the marker in the global scope, in load order, is the copy that counts;
 * a later one passes every call through, or the process would be counted, and reported, twice.
 * *first: that copy's file name, *self: this one's. A copy not in the global scope (dlopen with
 * RTLD_LOCAL, alone) finds none and counts. */
static bool another_copy_first(const char **first, const char **self)
{
    shim_dlsym_fn lookup = shim_real_dlsym();
    const void *found = lookup ? lookup(RTLD_DEFAULT, "cushim_copy_marker_v1") : NULL;
    Dl_info theirs, mine;
    if (!found || !dladdr(found, &theirs) || !dladdr((const void *)&another_copy_first, &mine))
        return false;
    *first = theirs.dli_fname ? theirs.dli_fname : "?";
    *self = mine.dli_fname ? mine.dli_fname : "?";
    /* This copy's own address is a function of its own: the marker's, taken here, would be the
     * first copy's (an exported symbol is reached through the GOT, which interposition fills). */
    return theirs.dli_fbase != mine.dli_fbase;
}

/* The configuration and everything decided from it, once: from the constructor, or from the first
 * CUDA call if that comes first (glibc runs the constructors of the program's own libraries before
 * those of preloaded ones: a static initializer there that calls CUDA started the shim with no
 * configuration: segment in "/", no run, no budget). */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void shim_load_body(void);

void shim_ensure_loaded(void)
{
    pthread_once(&load_once, shim_load_body);
}

__attribute__((constructor)) static void shim_load(void)
{
    shim_ensure_loaded();
}

static void shim_load_body(void)
{
    shim_std_note(); /* before any line is said */
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
    write_config_lines();
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
    const char *first = NULL, *self = NULL;
    if (another_copy_first(&first, &self)) {
        LOG_WARN("another copy of cushim, %s, was loaded first and counts: this one, %s, passes every call through",
                 first, self);
        shim_aside = true;
        atomic_store(&shim.run, SHIM_OFF);
    } else if (shim.cfg.disable)
        atomic_store(&shim.run, SHIM_OFF);
    else
        shim_exit_previous_image();
    pthread_atfork(NULL, NULL, after_fork_child);
}

bool shim_start_slow(bool from_api)
{
    shim_ensure_loaded();
    int expected = SHIM_IDLE;
    if (atomic_compare_exchange_strong(&shim.run, &expected, SHIM_STARTING)) {
        /* Other threads wait for STARTING to end: this thread must end it. No cancellation in
         * segment_create's system calls (open, opendir are cancellation points), and a CUDA call
         * this thread makes meanwhile (a signal handler, a malloc built on CUDA) passes through
         * instead of waiting for itself. */
        int cancel_state, depth = shim_depth;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        shim_depth = 1;
        unsigned flags = shim.top ? CUSHIM_SEG_F_TOP : 0;
        shim.seg = segment_create(&shim.cfg, flags, shim.run_id, shim.seg_path,
                                  sizeof shim.seg_path);
        shim.owner = getpid();
        shim_depth = depth;
        pthread_setcancelstate(cancel_state, NULL);
        if (!shim.seg) {
            LOG_ERROR("no memory for counters: passing every call through");
            atomic_store(&shim.run, SHIM_OFF);
            return false;
        }
        if (!from_api && !atomic_exchange(&exit_registered, 1))
            atexit(shim_exit_report);
        atomic_store_explicit(&shim.run, from_api ? SHIM_QUIET : SHIM_ACTIVE, memory_order_release);
        /* What was noted left out before the segment existed (a note from now on goes in both). */
        atomic_fetch_or(&shim.seg->h.incomplete, atomic_load(&shim_incomplete));
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
