/* The exit path: sample untracked memory, write the summary (CUSHIM_REPORT) and the copy for
 * `cushim run`, remove the segment. Runs from atexit, registered at the first CUDA activity, so
 * after the program's own exit handlers registered later and before libraries' destructors. */
#include <dirent.h>
#include <errno.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/path.h"
#include "common/procinfo.h"
#include "common/report.h"
#include "shim/graph.h"
#include "shim/pools.h"
#include "shim/offload.h"
#include "shim/segment_file.h"
#include "shim/account.h"
#include "shim/shim.h"
#include "shim/track.h"

void shim_sample_untracked(int device, uint64_t free_bytes, uint64_t total_bytes)
{
    struct cushim_device_record *r = account_record(device);
    if (!r || total_bytes < free_bytes)
        return;
    uint64_t used = total_bytes - free_bytes;
    uint64_t tracked = atomic_load_explicit(&r->dev[CUSHIM_DEV_total_current], memory_order_relaxed) +
                       atomic_load_explicit(&r->dev[CUSHIM_DEV_graph_pool_reserved_current],
                                            memory_order_relaxed);
    atomic_store_explicit(&r->untracked_bytes, used > tracked ? used - tracked : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&r->untracked_sampled_ns, shim_clock_ns(CLOCK_REALTIME), memory_order_relaxed);
}

/* cuMemGetInfo_v2 on `device`: through the current context if it is on that device, else the
 * device's primary context if active (pushed and popped; nothing is created). */
static void sample_device(int device)
{
    __typeof__(&cuMemGetInfo_v2) getinfo = REAL(cuMemGetInfo_v2);
    __typeof__(&cuCtxPushCurrent_v2) push = REAL(cuCtxPushCurrent_v2);
    __typeof__(&cuCtxPopCurrent_v2) pop = REAL(cuCtxPopCurrent_v2);
    size_t free_b = 0, total_b = 0;
    CUcontext cur = NULL, popped;
    if (!getinfo)
        return;
    if (shim_current_device(&cur) == device) {
        if (getinfo(&free_b, &total_b) == CUDA_SUCCESS)
            shim_sample_untracked(device, free_b, total_b);
        return;
    }
    CUcontext primary = shim_primary_context(device);
    if (!primary || !push || !pop || push(primary) != CUDA_SUCCESS)
        return;
    if (getinfo(&free_b, &total_b) == CUDA_SUCCESS)
        shim_sample_untracked(device, free_b, total_b);
    pop(&popped);
}

/* A report that could not be written, said once: under `cushim run`, whose option sets it, by that
 * option's name too (found by a fresh-user trial: `--report /dev/full` was said as CUSHIM_REPORT
 * alone). */
static void report_failed(const char *path, const char *why)
{
    if (shim.run_id)
        LOG_ERROR("cannot write --report \"%s\" (CUSHIM_REPORT): %s", path, why);
    else
        LOG_ERROR("cannot write CUSHIM_REPORT=\"%s\": %s", path, why);
}

/* The report of snap to `report` (CUSHIM_REPORT's forms) in `format` (CUSHIM_REPORT_*). */
static void write_report(const struct cushim_snapshot *snap, const char *report, int format)
{
    char path[SHIM_EXPANDED_MAX];
    FILE *f;
    int to_stderr = strcmp(report, "stderr") == 0;
    int to_stdout = strcmp(report, "stdout") == 0;
    if (to_stderr || to_stdout) {
        const char *closed = shim_std_closed(to_stderr ? 2 : 1);
        if (closed) {
            report_failed(report, closed);
            return;
        }
        f = to_stderr ? stderr : stdout;
        snprintf(path, sizeof path, "%s", report);
    } else {
        const char *why = SHIM_EXPANDED_TOO_LONG;
        int fd = shim_expand_pid(report, path, sizeof path)
                     ? shim_open_output(path, shim_log_is_file(path), &why) /* never empties the log */
                     : -1;
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            if (fd >= 0) {
                why = strerror(errno);
                close(fd);
            }
            report_failed(path[0] ? path : report, why);
            return;
        }
    }
    /* What the program still has buffered on stdout/stderr goes first, outside the window below:
     * a SIGPIPE of its own is its own. */
    if (to_stdout || to_stderr)
        fflush(f);
    struct shim_write_guard g;
    shim_write_guard_begin(&g);
    /* Composed in memory, then written at once: stderr is unbuffered, and line by line the
     * reports of processes ending together (a run's workers) interleave mid-line. */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    FILE *out = m ? m : f;
    if (format == CUSHIM_REPORT_JSON) {
        struct jsonw w;
        jsonw_init(&w, out);
        cushim_json_process(&w, NULL, snap, 1);
    } else {
        cushim_text_process(out, snap, "cushim: ");
    }
    if (m) {
        if (fclose(m) == 0 && text)
            fwrite(text, 1, len, f);
        free(text);
    }
    int bad = fflush(f) != 0 || ferror(f);
    int e = bad ? errno : 0;
    if (!to_stderr && !to_stdout && fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        shim_write_guard_failed(&g, e);
    shim_write_guard_end(&g);
    if (bad)
        report_failed(path, strerror(e ? e : EIO));
}

/* A finished segment's summary: the copy for `cushim run` (CUSHIM_RUN_DIR) and the report
 * (CUSHIM_REPORT), unless the run says the same text on stderr itself; read with patience_ns
 * for writers still running (cushim_snapshot_read). Returns true when the segment must stay for
 * the run to read (the copy could not be written). A process that finishes
 * after its run has closed says its text summary on stderr itself when the run was to say it
 * (CUSHIM_RUN_SUMMARY): it is never lost without a word. own: seg is this process's own live
 * segment (its exit), not one of its image before an exec. */
static bool hand_over_and_report(const struct cushim_segment *seg, uint64_t patience_ns, bool own)
{
    int rc = -1;
    bool anonymous = seg->h.flags & CUSHIM_SEG_F_ANONYMOUS; /* no file the run could read */
    /* The run of this segment only (an image before an exec may have had another). This
     * process's own segment is its run's whatever its header says now: one overwritten by another
     * process (a bad-input trial) is handed over all the same, for the run to say it unreadable
     * rather than "no CUDA memory activity". */
    bool ours = shim.cfg.run_dir[0] && (own || seg->h.run_id == shim.run_id);
    if (ours) {
        /* Where the summary goes when the copy cannot be written: the run reads the live segment,
         * or, with none, this process says it on stderr, unless the run is quiet. */
        const char *instead = !anonymous ? "is read by the run from the live segment instead"
                              : shim.cfg.run_summary ? "is said here instead (no live segment either)"
                                                     : "is lost (no live segment either, and the run is quiet)";
        rc = segment_copy_to(seg, shim.cfg.run_dir, patience_ns);
        if (rc == SEGMENT_COPY_GONE)
            LOG_INFO("`cushim run` has finished (%s is gone): this process's summary is not in "
                     "its report", shim.cfg.run_dir);
        else if (rc == SEGMENT_COPY_NOT_RUN_DIR)
            LOG_ERROR("CUSHIM_RUN_DIR=\"%s\" is not a directory made by `cushim run` (cushim-run.*, "
                      "yours, mode 0700): summary not written there", shim.cfg.run_dir);
        else if (rc == SEGMENT_COPY_OTHER_USER)
            LOG_INFO("`cushim run`'s directory %s is another user's (this process changed user to "
                     "uid %u after the run started it): its summary %s", shim.cfg.run_dir,
                     (unsigned)geteuid(), instead);
        else if (rc != 0)
            LOG_ERROR("cannot write the summary for `cushim run` into %s: %s; the summary %s",
                      shim.cfg.run_dir, strerror(errno), instead);
    }
    /* A run that could not be handed the copy (its directory full, or another user's after a
     * change of user: setuid, gosu, runuser) reads the live segment as that of a process that
     * ended: it stays. */
    bool lost = ours && rc != 0 &&
                rc != SEGMENT_COPY_GONE && rc != SEGMENT_COPY_NOT_RUN_DIR;
    bool keep_segment = lost && !anonymous;
    /* The report as text on stderr (named `stderr`, or as a path to the same file: /dev/stderr,
     * /proc/self/fd/2): what `cushim run` says itself (CUSHIM_RUN_SUMMARY), once. */
    bool text_to_stderr = false;
    if (shim.cfg.report[0] && shim.cfg.report_format == CUSHIM_REPORT_TEXT) {
        struct stat st;
        text_to_stderr = strcmp(shim.cfg.report, "stderr") == 0 ||
                         (stat(shim.cfg.report, &st) == 0 && cushim_std_stream(&st, -1) == 2);
    }
    bool said_by_run = rc == 0 && shim.cfg.run_summary && text_to_stderr;
    bool say_for_run = (rc == SEGMENT_COPY_GONE || (lost && anonymous)) && shim.cfg.run_summary &&
                       !text_to_stderr;
    if ((shim.cfg.report[0] && !said_by_run) || say_for_run) {
        static struct cushim_snapshot snap;
        char err[160];
        if (cushim_snapshot_read(seg, sizeof *seg, &snap, 1000, patience_ns, err, sizeof err) != 0) {
            LOG_ERROR("cannot read back the counters: %s", err);
            return keep_segment;
        }
        if (shim.cfg.report[0] && !said_by_run)
            write_report(&snap, shim.cfg.report, shim.cfg.report_format);
        if (say_for_run)
            write_report(&snap, "stderr", CUSHIM_REPORT_TEXT);
    }
    return keep_segment;
}

static _Atomic int exit_done;

void shim_exit_report(void)
{
    shim_exit_finish(true);
}

void shim_exit_finish(bool driver_alive)
{
    /* No segment is created from here on: a CUDA call from a later exit handler (the runtime's
     * own teardown, e.g. in a forked child that never used CUDA) would leave a file behind. */
    int idle = SHIM_IDLE;
    atomic_compare_exchange_strong(&shim.run, &idle, SHIM_OFF);
    struct cushim_segment *seg = shim.seg;
    int r = atomic_load(&shim.run);
    if (!seg || shim.owner != getpid() || (r != SHIM_ACTIVE && r != SHIM_QUIET) ||
        atomic_exchange(&exit_done, 1))
        return;
    /* An exit from inside one of our wrappers: a signal handler's exit() (or the driver's own)
     * during a CUDA call of this thread. The thread may hold one of the shim's spin locks, and a
     * driver call of its own is unfinished: no driver call and no lock of the shim from here (the
     * samples of untracked memory and of the pools are left out), and no wait for writers (this
     * thread may be one, mid-record). Later exit handlers' CUDA calls pass through uncounted. */
    int depth = shim_depth;
    if (depth != 0)
        LOG_INFO("exit inside a CUDA call (a signal handler's exit()?): untracked memory and the "
                 "pools are not sampled for the summary");
    shim_depth = 1; /* our own driver calls below are not the program's */
    /* An unload the dlclose door did not see (a library bound to glibc's dlclose: RTLD_DEEPBIND)
     * leaves no slot in unmapped code for the calls below. */
    if (depth == 0)
        shim_real_check_unloads();
    if (driver_alive && depth == 0) {
        offload_drain();
        graph_pool_sample_all();
        async_pool_sample_all();
        uint32_t n = atomic_load(&seg->h.device_count);
        for (uint32_t d = 0; d < n && d < CUSHIM_MAX_DEVICES; d++)
            if (atomic_load(&seg->devices[d].state) != 0)
                sample_device((int)d);
    }
    /* Not from inside a CUDA call: this thread may hold a table's lock there. */
    if (depth == 0)
        shim_live_at_exit_write(seg);
    atomic_store(&seg->h.exited, 1);
    /* Other threads of ours may still be counting: worth waiting for. */
    bool keep = hand_over_and_report(seg, depth == 0 ? CUSHIM_COPY_PATIENCE_NS : 0, true);
    /* The mapping stays: other threads and later exit handlers may still count into it. */
    if (!keep)
        segment_unlink(shim.seg_path);
    shim_depth = depth;
}

/* Finishes the segment at `path` if it is this process's before an exec. Returns whether it was;
 * *exists (may be NULL): whether something is there under that name. */
static bool finish_previous_image(const char *path, bool *exists)
{
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (exists)
        *exists = fd >= 0 || errno != ENOENT;
    if (fd < 0)
        return false;
    struct stat st;
    struct cushim_segment *seg = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (size_t)st.st_size == sizeof *seg)
        seg = mmap(NULL, sizeof *seg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (seg == MAP_FAILED)
        return false;
    bool mine_before = false;
    /* This very process (pid, pid namespace and pidfs inode, or start time where the kernel has
     * no pidfs: exec keeps them all), before an exec, with its summary not written yet. Another
     * process's segment is left alone: one that had our pid (a pid reused, within the clock tick
     * of the start time too) is told apart by its pidfs inode. */
    uint64_t mine = cushim_proc_pidfs_ino(getpid());
    if (memcmp(seg->h.magic, CUSHIM_SEGMENT_MAGIC, sizeof seg->h.magic) == 0 &&
        seg->h.layout_version == CUSHIM_LAYOUT_VERSION && seg->h.pid == (int32_t)getpid() &&
        seg->h.pidns_inode == cushim_pidns_inode() &&
        (seg->h.pidfs_ino && mine ? seg->h.pidfs_ino == mine
                                  : seg->h.start_time == cushim_self_start_time()) &&
        !atomic_exchange(&seg->h.exited, 1)) {
        mine_before = true;
        /* Its CUDA memory went with the old address space: finished, as at an exit. One of
         * another `cushim run` than ours (the exec changed the environment) is left, finished,
         * for that run to collect. */
        if (seg->h.run_id == 0 || seg->h.run_id == shim.run_id) {
            /* Its threads went with the exec: a record they left mid-update never settles. */
            if (!hand_over_and_report(seg, 0, false))
                unlink(path);
        }
    }
    munmap(seg, sizeof *seg);
    return mine_before;
}

void shim_exit_previous_image(void)
{
    char path[CUSHIM_PATH_MAX + 64];
    int n = snprintf(path, sizeof path, "%s/%s%u-%d", shim.cfg.segment_dir, CUSHIM_SEGMENT_PREFIX,
                     (unsigned)geteuid(), (int)getpid());
    if (n <= 0 || (size_t)n >= sizeof path)
        return;
    bool plain;
    if (finish_previous_image(path, &plain))
        return;
    /* The name was taken by a file that is not this process's (another user's, another pid
     * namespace's, which may be gone since): an earlier image had a suffixed name
     * (segment_file.c), the one it takes first, else a random one. */
    char own[CUSHIM_PATH_MAX + 72];
    segment_own_suffixed(path, own, sizeof own);
    if (finish_previous_image(own, NULL) || !plain)
        return; /* the usual case (!plain): no CUDA in an earlier image of this process */
    const char *name = path + strlen(shim.cfg.segment_dir) + 1;
    DIR *d = opendir(shim.cfg.segment_dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!segment_is_suffixed(de->d_name, name))
            continue;
        char suffixed[CUSHIM_PATH_MAX + 64];
        snprintf(suffixed, sizeof suffixed, "%s/%s", shim.cfg.segment_dir, de->d_name);
        if (finish_previous_image(suffixed, NULL))
            break;
    }
    if (d)
        closedir(d);
}
