/* Segment files as the CLI finds them in the segment directory (the reader itself is
 * test_segment_reader.c): one that cannot be read, one without a header yet, another version's,
 * a socket or FIFO under a segment's name, the stale segment of a killed process, and `cushim gc`
 * removing what is stale (segments, run directories of runs that are gone) and saying so on a
 * terminal only. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procinfo.h"
#include "common/snapshot.h"
#include "harness.h"
#include "live.h"

#define MiB (1024ull * 1024)

/* stat, reset-peak and phase on pid p: exit 1 and exactly `want` on stderr. */
/* `cushim ps` of segdir lists one gone process, pid (rt_prog hold: 1 MiB held, 4 MiB peak, phase
 * run), in `state` (padded to the column's 7 characters), with `legend` under the table; `ps
 * --json` gives the same state and, when path is not NULL, that path. */
static void expect_ps_gone(const char *segdir, pid_t pid, const char *state, const char *legend, const char *path)
{
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 0, "%s", r.err);
    struct passwd *me = getpwuid(getuid());
    char want[3000];
    snprintf(want, sizeof want,
             "    PID USER       STATE   DEVICES  DEVICE-TOTAL   TOTAL-PEAK PHASE       COMMAND\n"
             "%7d %-10s %s 0            1.00 MiB     4.00 MiB run         %s hold\n%s",
             (int)pid, me ? me->pw_name : "?", state, program("rt_prog"), legend);
    cr_expect_str_eq(r.out, want);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "ps", "--json", NULL), 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    cr_assert(j, "%s\n%s", je.text, r.out);
    char trimmed[16];
    snprintf(trimmed, sizeof trimmed, "%.*s", (int)strcspn(state, " "), state);
    cr_expect_str_eq(json_string_value(jpath(j, "0.state")), trimmed);
    if (path)
        cr_expect_str_eq(json_string_value(jpath(j, "0.path")), path);
    json_decref(j);
    run_free(&r);
}

static void expect_same_words(const char *segdir, const char *p, const char *want)
{
    static const char *const cmds[][2] = {{"stat", NULL}, {"reset-peak", NULL}, {"phase", "run"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        struct run_result r;
        cr_expect_eq(cli(segdir, &r, cmds[i][0], p, cmds[i][1]), 1, "%s", cmds[i][0]);
        cr_expect_str_eq(r.err, want, "%s", cmds[i][0]);
        run_free(&r);
    }
}

Test(segments, a_segment_of_yours_that_cannot_be_read_is_said)
{
    const char *segdir = fresh_dir("seg-unreadable");
    char link[700];
    snprintf(link, sizeof link, "%s/cushim-%u-12345", segdir, (unsigned)getuid());
    cr_assert_eq(symlink("/etc/passwd", link), 0);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    char row[900];
    snprintf(row, sizeof row, "invalid %s: a symbolic link, not followed\n", link);
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "stat", "12345", NULL), 1);
    snprintf(row, sizeof row, "cushim: skipping %s: a symbolic link, not followed\n"
             "cushim: process 12345: its segment cannot be read (said above)\n", link);
    cr_expect_str_eq(r.err, row);
    run_free(&r);
    /* top and the exporter say there was one, too. */
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0);
    cr_expect(strstr(r.out, "\n1 segment could not be read: `cushim ps` lists it, with why\n") != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "stat", "--prometheus", NULL), 0);
    cr_expect(strstr(r.out, "\ncushim_invalid_segments 1\n") != NULL, "%s", r.out);
    run_free(&r);
}

/* ps lists in pid order, whatever the directory's own order (found by a fresh-user trial: 12869
 * before 12868). Eight links named for pids made in a shuffled order. */
Test(segments, ps_lists_in_pid_order)
{
    const char *segdir = fresh_dir("seg-order");
    static const int pids[] = {900, 30, 5000, 7, 123456, 31, 8, 64};
    char link[700];
    for (unsigned i = 0; i < 8; i++) {
        snprintf(link, sizeof link, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), pids[i]);
        cr_assert_eq(symlink("/etc/passwd", link), 0);
    }
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    static const int sorted[] = {7, 8, 30, 31, 64, 900, 5000, 123456};
    const char *at = r.out;
    for (unsigned i = 0; i < 8; i++) {
        char row[64];
        snprintf(row, sizeof row, "%7d ", sorted[i]);
        const char *next = strstr(at, row);
        cr_expect(next != NULL, "pid %d not after the one before:\n%s", sorted[i], r.out);
        if (next)
            at = next + 1;
    }
    run_free(&r);
}

/* A process's segment before its header is written (the first moments of a process, or one
 * stopped then): stat and reset-peak both say the process is starting, not that there is no
 * segment or that it is truncated. */
Test(segments, a_segment_without_a_header_yet_is_a_starting_process)
{
    const char *segdir = fresh_dir("seg-starting");
    char path[700], p[16], want[1000];
    snprintf(p, sizeof p, "%d", (int)getpid());
    snprintf(path, sizeof path, "%s/cushim-%u-%s", segdir, (unsigned)getuid(), p);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fclose(f);
    snprintf(want, sizeof want, "cushim: process %s is starting: its segment %s has no header yet (try again in a moment)\n",
             p, path);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "stat", p, NULL), 1);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "reset-peak", p, NULL), 1);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* One whose process is gone (a pid above any pid_max): not starting. */
    snprintf(path, sizeof path, "%s/cushim-%u-2147483646", segdir, (unsigned)getuid());
    f = fopen(path, "w");
    cr_assert(f);
    fclose(f);
    snprintf(want, sizeof want, "cushim: no process 2147483646: its segment %s has no header (`cushim gc` removes it once it is 10 minutes old)\n",
             path);
    cr_expect_eq(cli(segdir, &r, "stat", "2147483646", NULL), 1);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "reset-peak", "2147483646", NULL), 1);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    /* Stamped in the future (a clock stepped back): never "being created", so listed as what it
     * is rather than hidden for as long. */
    struct timespec later[2] = {{time(NULL) + 86400, 0}, {time(NULL) + 86400, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, path, later, 0), 0);
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    snprintf(want, sizeof want, "invalid %s: truncated: 0 of", path);
    cr_expect(strstr(r.out, want) != NULL, "%s", r.out);
    run_free(&r);
}

/* Another cushim version's segment left by a process that is gone: listed as invalid with what
 * to do (`cushim gc`), which removes it. */
/* The pid of a process that has ended and been reaped (a name for segments of a dead process). */
static pid_t dead_pid(void)
{
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    cr_assert_gt(dead, 0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    return dead;
}

/* gc judges a file that does not name its pid namespace from the initial one only (tools/
 * segments.c seg_invalid_removable): a test of its removal runs there. */
static void need_initial_pidns(void)
{
    if (cushim_pidns_inode() != CUSHIM_PIDNS_INIT_INO) {
        printf("not run: gc removes invalid files only from the initial pid namespace; this is another\n");
        cr_skip_test("not run: not in the initial pid namespace");
    }
}

Test(segments, an_older_version_segment_of_a_dead_process_says_gc_removes_it)
{
    need_initial_pidns();
    const char *segdir = fresh_dir("seg-old-version");
    pid_t dead = dead_pid();
    char path[700];
    snprintf(path, sizeof path, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)dead);
    static struct cushim_segment old;
    memcpy(old.h.magic, CUSHIM_SEGMENT_MAGIC, sizeof old.h.magic);
    old.h.layout_version = CUSHIM_LAYOUT_VERSION - 1;
    FILE *f = fopen(path, "w");
    cr_assert(f);
    cr_assert_eq(fwrite(&old, sizeof old, 1, f), 1);
    fclose(f);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    char row[900];
    snprintf(row, sizeof row, "invalid %s: layout version %u, this cushim reads %u (another cushim "
             "version's segment); its process is gone: `cushim gc` removes it\n", path,
             CUSHIM_LAYOUT_VERSION - 1, CUSHIM_LAYOUT_VERSION);
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    /* The same as JSON: the file, its state and why, and exit 1 (no process). */
    cr_expect_eq(cli(segdir, &r, "ps", "--json", NULL), 1);
    cr_expect_str_eq(r.err, "");
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert(j, "ps --json: %s\n%s", e.text, r.out);
    cr_expect_eq(json_array_size(j), 1);
    cr_expect_eq(jpath_u64(j, "0.pid"), (uint64_t)dead);
    cr_expect_eq(jpath_u64(j, "0.uid"), (uint64_t)getuid());
    cr_expect_str_eq(json_string_value(jpath(j, "0.state")), "invalid");
    cr_expect_str_eq(json_string_value(jpath(j, "0.path")), path);
    snprintf(row, sizeof row, "layout version %u, this cushim reads %u (another cushim version's segment); "
             "its process is gone: `cushim gc` removes it", CUSHIM_LAYOUT_VERSION - 1, CUSHIM_LAYOUT_VERSION);
    cr_expect_str_eq(json_string_value(jpath(j, "0.error")), row);
    cr_expect_null(jpath(j, "0.devices"));
    json_decref(j);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0, "%s", r.err);
    snprintf(row, sizeof row, "removed %s (pid %d dead, invalid segment)\n", path, (int)dead);
    cr_expect_str_eq(r.out, row);
    run_free(&r);
    cr_expect_neq(access(path, F_OK), 0, "gone");
}

/* Found by an attack trial: a file larger than a segment (a sparse 1 TiB one) and a symbolic link,
 * named for a dead pid, stayed for good (ps listed them, "gc removes it" was promised for the
 * first while it had no header); gc removes both, never what the link names. */
Test(segments, gc_removes_a_dead_pids_oversized_file_and_link)
{
    need_initial_pidns();
    const char *segdir = fresh_dir("seg-gc-odd");
    pid_t dead[2] = {2147483601, 2147483602}; /* above any pid_max: never live, never reused */
    char big[700], link[700], target[700];
    snprintf(big, sizeof big, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)dead[0]);
    snprintf(link, sizeof link, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)dead[1]);
    snprintf(target, sizeof target, "%s/kept-target", test_dir());
    touch(target);
    cr_assert_eq(truncate(target, 5), 0);
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, 1ll << 40), 0);
    close(fd);
    cr_assert_eq(symlink(target, link), 0);
    /* Past the 10 minutes in which a file without a header may be a segment being made (a
     * container's process stopped meanwhile: gc leaves it that long); a link never is one. */
    backdate(big, 3600);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0, "%s", r.err);
    char want[2000]; /* in pid order */
    snprintf(want, sizeof want, "removed %s (pid %d dead, invalid segment)\nremoved %s (pid %d dead, invalid segment)\n",
             big, (int)dead[0], link, (int)dead[1]);
    cr_expect_str_eq(r.out, want);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    struct stat st;
    cr_expect_neq(lstat(big, &st), 0);
    cr_expect_neq(lstat(link, &st), 0);
    cr_expect_eq(stat(target, &st), 0, "the link's target stays");
    cr_expect_eq(st.st_size, 5);
}

/* A segment directory whose name holds control characters (an escape sequence, a newline): ps's
 * invalid rows and gc's "removed" lines show its path escaped, as every message does, so that
 * neither drives the terminal nor breaks a row in two. (Found by an odd-programs attack trial:
 * both printed the path raw, while stat's "skipping" lines escaped it.) */
Test(segments, an_odd_segment_directory_is_shown_escaped_in_ps_and_gc)
{
    need_initial_pidns();
    const char *segdir = fresh_dir("seg\x1b[2J\n\"x");
    char path[700], row[1200], esc[700];
    snprintf(path, sizeof path, "%s/cushim-%u-2147483603", segdir, (unsigned)getuid());
    snprintf(esc, sizeof esc, "%s/seg\\x1b[2J\\n\"x/cushim-%u-2147483603", test_dir(), (unsigned)getuid());
    touch(path);
    backdate(path, 3600);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    cr_expect(strchr(r.out, '\x1b') == NULL, "a raw escape sequence: %s", r.out);
    snprintf(row, sizeof row, "invalid %s: truncated: 0 of", esc);
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0, "%s", r.err);
    snprintf(row, sizeof row, "removed %s (pid 2147483603 dead, invalid segment)\n", esc);
    cr_expect_str_eq(r.out, row);
    run_free(&r);
    cr_expect_neq(access(path, F_OK), 0, "gone");
}

Test(segments, a_socket_or_fifo_named_like_a_segment_is_not_a_regular_file)
{
    /* Neither is opened for reading as a segment; both are said to be what they are. */
    const char *segdir = fresh_dir("seg-odd-types");
    char fifo[700], sock[700];
    snprintf(fifo, sizeof fifo, "%s/cushim-%u-2", segdir, (unsigned)getuid());
    snprintf(sock, sizeof sock, "%s/cushim-%u-1", segdir, (unsigned)getuid());
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* Bound by its name from inside segdir: a full path under a long TMPDIR (the harness takes
     * one of up to 180 bytes) does not fit sun_path's 108. */
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "cushim-%u-1", (unsigned)getuid());
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert(s >= 0);
    int cwd = open(".", O_RDONLY | O_DIRECTORY);
    cr_assert(cwd >= 0 && chdir(segdir) == 0, "chdir %s", segdir);
    int bound = bind(s, (struct sockaddr *)&a, sizeof a);
    cr_assert(fchdir(cwd) == 0);
    close(cwd);
    cr_assert_eq(bound, 0, "bind %s: %s", sock, strerror(errno));
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1);
    /* In the directory's order: each line looked for on its own. */
    char want1[1000], want2[1000], user[32];
    snprintf(user, sizeof user, "%s", getuid() == 0 ? "root" : "");
    snprintf(want1, sizeof want1, "\n      1 %-10s invalid %s: not a regular file\n", user, sock);
    snprintf(want2, sizeof want2, "\n      2 %-10s invalid %s: not a regular file\n", user, fifo);
    cr_expect(strncmp(r.out, "    PID USER", 12) == 0, "%s", r.out);
    if (getuid() == 0) {
        cr_expect(strstr(r.out, want1) != NULL, "%s", r.out);
        cr_expect(strstr(r.out, want2) != NULL, "%s", r.out);
    } else {
        cr_expect(strstr(r.out, ": not a regular file\n") != NULL && !strstr(r.out, "No such device"), "%s", r.out);
    }
    run_free(&r);
    close(s);
}

/* A segment copied back over its removed original (a restore, an editor's save) is no segment of
 * the process: found by an attack trial, it was listed live with frozen figures, and reset-peak
 * and phase said they were done on it while the process never saw them. */
Test(segments, a_copy_in_place_of_a_live_segment_is_not_it)
{
    const char *segdir;
    char hold[600], path[700];
    pid_t pid = start_held("hold", "copy", &segdir, hold, sizeof hold);
    char pid_arg[16];
    snprintf(pid_arg, sizeof pid_arg, "%d", (int)pid);
    snprintf(path, sizeof path, "%s", seg_path(segdir, pid));
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "reset-peak", pid_arg, NULL), 0, "%s", r.err);
    run_free(&r);
    static struct cushim_segment copy;
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL);
    cr_assert_eq(fread(&copy, sizeof copy, 1, f), 1);
    fclose(f);
    cr_assert_eq(unlink(path), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, &copy, sizeof copy), (ssize_t)sizeof copy);
    close(fd);
    char why[900], row[1700], err[1700];
    snprintf(why, sizeof why, "a copy of process %d's segment (the process maps another)", (int)pid);
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 0);
    struct passwd *me = getpwuid(getuid());
    snprintf(row, sizeof row, "\n%7d %-10s copy    0 ", (int)pid, me ? me->pw_name : "?");
    cr_expect(strstr(r.out, row) != NULL && !strstr(r.out, " live "), "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "stat", pid_arg, NULL), 1);
    snprintf(err, sizeof err, "cushim: skipping %s: %s\ncushim: process %d: its segment cannot be read (said "
             "above)\n", path, why, (int)pid);
    cr_expect_str_eq(r.err, err);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
    snprintf(err, sizeof err, "cushim: segment %s: %s\n", path, why);
    cr_expect_eq(cli(segdir, &r, "reset-peak", pid_arg, NULL), 1);
    cr_expect_str_eq(r.err, err);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "phase", pid_arg, "compile"), 1);
    cr_expect_str_eq(r.err, err);
    run_free(&r);
    /* Nothing was written into the copy either. */
    static struct cushim_segment after;
    f = fopen(path, "rb");
    cr_assert(f != NULL);
    cr_assert_eq(fread(&after, sizeof after, 1, f), 1);
    fclose(f);
    cr_expect_eq(after.control.phase_request, 0);
    cr_expect_eq(after.control.peak_resets, copy.control.peak_resets);
    cr_expect_eq(memcmp(&after, &copy, sizeof copy), 0, "the copy is as it was made");
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* A copy of a segment its process wrote (a user's backup) outlives the process, which ended with
 * its exit report and removed its own: ps lists the copy as a copy, with a note of its own, not as
 * a process that ended without its exit report (a review: "killed, or _exit"). */
Test(segments, a_stale_copy_does_not_say_the_process_lost_its_report)
{
    const char *segdir;
    char hold[600], backup[720], cp[1600];
    pid_t pid = start_held("hold", "stale-copy", &segdir, hold, sizeof hold);
    snprintf(backup, sizeof backup, "%s.bak001", seg_path(segdir, pid));
    snprintf(cp, sizeof cp, "cp '%s' '%s'", seg_path(segdir, pid), backup);
    cr_assert_eq(system(cp), 0);
    touch(hold);
    cr_assert_eq(wait_bg(pid), 0);
    struct stat st;
    cr_assert_neq(stat(seg_path(segdir, pid), &st), 0, "the process removed its own segment");
    expect_ps_gone(segdir, pid, "copy   ",
                   "copy: a copy of the segment of a process that is gone, not the file it wrote, so it says "
                   "nothing of how the process ended; `cushim gc` removes it\n",
                   backup);
    /* stat, reset-peak and phase call it a copy too, not a stale segment. */
    char p[16], words[1200];
    snprintf(p, sizeof p, "%d", (int)pid);
    snprintf(words, sizeof words, "cushim: process %d is gone (a copy of its segment, %s; `cushim gc` removes it)\n",
             (int)pid, backup);
    expect_same_words(segdir, p, words);
}

/* A process that ended with its exit report but left its segment (it could not remove it) is
 * listed as `exited`, not as one that ended without it (a review: "killed, or _exit"). Made here
 * from a killed process's segment, its exit report marked done in place. */
Test(segments, a_segment_left_with_its_exit_report_is_not_called_killed)
{
    const char *segdir;
    char hold[600];
    pid_t pid = start_held("hold", "exited-left", &segdir, hold, sizeof hold);
    kill(pid, SIGKILL);
    cr_assert_eq(wait_bg(pid), 128 + SIGKILL);
    int fd = open(seg_path(segdir, pid), O_RDWR);
    cr_assert(fd >= 0);
    uint32_t one = 1;
    cr_assert_eq(pwrite(fd, &one, sizeof one, offsetof(struct cushim_segment_header, exited)), (ssize_t)sizeof one);
    close(fd);
    expect_ps_gone(segdir, pid, "exited ",
                   "exited: the process ended with its exit report but left its segment (it could not remove "
                   "it, or kept it for its `cushim run`); `cushim gc` removes its segment\n",
                   NULL);
    /* stat, reset-peak and phase say the same, not "stale segment". */
    char p[16], words[1200];
    snprintf(p, sizeof p, "%d", (int)pid);
    snprintf(words, sizeof words, "cushim: process %d is gone (its segment %s, left with its exit report; "
             "`cushim gc` removes it)\n", (int)pid, seg_path(segdir, pid));
    expect_same_words(segdir, p, words);
}

/* The file its writer made, seen with another device number (through an overlay and its upper
 * directory, found by an attack trial), is no copy: only the inode number is compared. */
Test(segments, a_segment_seen_with_another_device_number_is_not_a_copy)
{
    const char *segdir;
    char hold[600], pid_arg[16];
    pid_t pid = start_held("hold", "devno", &segdir, hold, sizeof hold);
    snprintf(pid_arg, sizeof pid_arg, "%d", (int)pid);
    int fd = open(seg_path(segdir, pid), O_RDWR);
    cr_assert(fd >= 0);
    uint64_t other_dev = 0x12345;
    cr_assert_eq(pwrite(fd, &other_dev, sizeof other_dev, offsetof(struct cushim_segment_header, file_dev)),
                 (ssize_t)sizeof other_dev);
    close(fd);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 0);
    char row[160], said[160];
    struct passwd *me = getpwuid(getuid());
    snprintf(row, sizeof row, "\n%7d %-10s live    0 ", (int)pid, me ? me->pw_name : "?");
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "reset-peak", pid_arg, NULL), 0, "%s", r.err);
    snprintf(said, sizeof said, "pid %d: peaks of 1 device set to their current values\n", (int)pid);
    cr_expect_str_eq(r.out, said);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* An invalid segment (another layout) whose header names another pid namespace is not judged by
 * its name's pid here (found by an attack trial: a live container process's was removed). */
Test(segments, gc_leaves_another_namespaces_invalid_segment)
{
    const char *segdir = fresh_dir("seg-gc-ns");
    pid_t dead = 2147483600; /* above any pid_max: never a live process, never reused */
    char path[700];
    snprintf(path, sizeof path, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), (int)dead);
    static struct cushim_segment other;
    memcpy(other.h.magic, CUSHIM_SEGMENT_MAGIC, sizeof other.h.magic);
    other.h.layout_version = 99;
    other.h.pidns_inode = cushim_pidns_inode() + 1;
    FILE *f = fopen(path, "w");
    cr_assert(f);
    cr_assert_eq(fwrite(&other, sizeof other, 1, f), 1);
    fclose(f);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0, "%s", r.err);
    cr_expect_str_eq(r.out, "");
    cr_expect_str_eq(r.err, "", "left silently");
    run_free(&r);
    cr_expect_eq(access(path, F_OK), 0, "left for its own namespace's gc");
    /* This namespace's (or one that names none): removed, as before. */
    other.h.pidns_inode = cushim_pidns_inode();
    f = fopen(path, "w");
    cr_assert(f);
    cr_assert_eq(fwrite(&other, sizeof other, 1, f), 1);
    fclose(f);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0, "%s", r.err);
    char want[900];
    snprintf(want, sizeof want, "removed %s (pid %d dead, invalid segment)\n", path, (int)dead);
    cr_expect_str_eq(r.out, want);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

Test(segments, sigkill_leaves_a_stale_segment_that_gc_removes)
{
    const char *segdir;
    char hold[600];
    pid_t pid = start_held("hold", "t2", &segdir, hold, sizeof hold);
    kill(pid, SIGKILL);
    /* Not reaped yet (a zombie): already gone for cushim, its segment stale. */
    wait_zombie(pid, "the killed process is a zombie");

    struct run_result r;
    char line[64];
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 0);
    snprintf(line, sizeof line, "%7d ", (int)pid);
    char *row = strstr(r.out, line);
    cr_assert(row, "ps lists the dead process:\n%s", r.out);
    cr_expect(strncmp(row + 8 + 11, "stale", 5) == 0, "marked stale while a zombie:\n%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "ps", "--json", NULL), 0);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert(j, "ps --json: %s\n%s", e.text, r.out);
    cr_expect_eq(json_array_size(j), 1);
    cr_expect_eq(jpath_u64(j, "0.pid"), (uint64_t)pid);
    cr_expect_str_eq(json_string_value(jpath(j, "0.state")), "stale");
    cr_expect_str_eq(json_string_value(jpath(j, "0.path")), seg_path(segdir, pid));
    cr_expect_eq(jpath_u64(j, "0.devices.0.ordinal"), 0);
    cr_expect_eq(json_array_size(jpath(j, "0.devices")), 1);
    cr_expect_eq(jpath_u64(j, "0.devices.0.device_total.current_bytes"), MiB + 4096);
    cr_expect_eq(jpath_u64(j, "0.devices.0.device_total.peak_bytes"), 4 * MiB + 4096);
    cr_expect_str_eq(json_string_value(jpath(j, "0.phase")), "run");
    cr_expect(json_is_null(jpath(j, "0.phase_requested")));
    char command[700];
    snprintf(command, sizeof command, "%s hold", program("rt_prog"));
    cr_expect_str_eq(json_string_value(jpath(j, "0.command")), command);
    json_decref(j);
    run_free(&r);
    cr_expect_eq(wait_bg(pid), 128 + SIGKILL);

    cr_expect_eq(cli(segdir, &r, "stat", NULL, NULL), 1, "no live process left");
    run_free(&r);
    /* Asked by pid: stat, reset-peak and phase say the same words, naming the same file of
     * several (copies under suffixed names: a fresh-user trial found two commands naming two). */
    char cp[2400];
    /* 21 copies: more than the 16 names looked at (a review: the first 16 in the directory's
     * order were, and could leave the plain name out). */
    snprintf(cp, sizeof cp, "cp '%s' '%s.aaaaaa' && for i in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 "
             "18 19; do cp '%s' '%s.zz00'$i || exit 1; done", seg_path(segdir, pid), seg_path(segdir, pid),
             seg_path(segdir, pid), seg_path(segdir, pid));
    cr_assert_eq(system(cp), 0);
    char p[16], want[1200];
    snprintf(p, sizeof p, "%d", (int)pid);
    snprintf(want, sizeof want, "cushim: process %d is gone (stale segment %s; `cushim gc` removes it)\n",
             (int)pid, seg_path(segdir, pid));
    expect_same_words(segdir, p, want);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0);
    cr_expect(strstr(r.out, "removed ") != NULL, "%s", r.out);
    run_free(&r);
    struct stat st;
    cr_expect_neq(stat(seg_path(segdir, pid), &st), 0);
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1, "nothing left:\n%s", r.out);
    run_free(&r);
    snprintf(want, sizeof want, "cushim: no cushim process %d%s (no such process, no segment in %s)\n", (int)pid,
             geteuid() == 0 ? "" : " of yours", segdir);
    expect_same_words(segdir, p, want);
    /* A live process without the shim (this test): said, as nvidia-smi's pids often are. */
    snprintf(p, sizeof p, "%d", (int)getpid());
    snprintf(want, sizeof want, "cushim: no cushim process %d%s (process %d is alive, but has no segment in %s: "
             "it was started without the shim, or has made no CUDA call yet)\n", (int)getpid(),
             geteuid() == 0 ? "" : " of yours", (int)getpid(), segdir);
    expect_same_words(segdir, p, want);
}

/* seg, as a file of this user's at path, its header naming that file (file_ino, file_dev) as
 * its writer would. */
static void write_own_segment(const char *path, struct cushim_segment *seg)
{
    for (int pass = 0; pass < 2; pass++) {
        FILE *f = fopen(path, "wb");
        cr_assert(f, "%s", path);
        cr_assert_eq(fwrite(seg, 1, sizeof *seg, f), sizeof *seg);
        cr_assert_eq(fclose(f), 0);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        seg->h.file_ino = (uint64_t)st.st_ino;
        seg->h.file_dev = (uint64_t)st.st_dev;
    }
}

/* Two files of one live process that maps neither (made by its user; a process that exec'd into
 * a program that made none), each naming itself: it is listed, summed and exported once, the plain
 * name kept (an attack trial: root's top summed the process twice, and the exporter gave two
 * series with one label set, which Prometheus rejects). */
Test(segments, a_process_mapping_none_of_its_files_is_listed_once)
{
    const char *segdir;
    char hold[700];
    pid_t held = start_held("hold", "t-maps-none", &segdir, hold, sizeof hold);
    static struct cushim_segment seg;
    FILE *f = fopen(seg_path(segdir, held), "rb");
    cr_assert(f);
    cr_assert_eq(fread(&seg, 1, sizeof seg, f), sizeof seg);
    fclose(f);
    const char *argv[] = {"sleep", "30", NULL};
    pid_t sleeper = spawn_bg(argv, NULL);
    for (int i = 0; i < 200 && cushim_proc_start_time(sleeper) == 0; i++)
        usleep(10000);
    seg.h.pid = sleeper;
    seg.h.start_time = cushim_proc_start_time(sleeper);
    seg.h.pidfs_ino = 0;
    char plain[700], suffixed[720];
    snprintf(plain, sizeof plain, "%s", seg_path(segdir, sleeper));
    snprintf(suffixed, sizeof suffixed, "%s.aaaaaa", plain);
    write_own_segment(suffixed, &seg);
    write_own_segment(plain, &seg);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "stat", "--prometheus", NULL), 0, "%s", r.err);
    char series[200], said[1600];
    snprintf(series, sizeof series, "cushim_device_total_bytes{pid=\"%d\",", (int)sleeper);
    int n = 0;
    for (const char *q = r.out; (q = strstr(q, series)) != NULL; q++)
        n++;
    cr_expect_eq(n, 1, "%s", r.out);
    snprintf(said, sizeof said, "cushim: skipping %s: one of several segments of process %d, which maps none of "
             "them: another is listed\n", suffixed, (int)sleeper);
    cr_expect_str_eq(r.err, said);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "cushim top: 2 processes at ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "     2  16.0 GiB     2.01 MiB  8.01 MiB\n") != NULL, "summed once:\n%s", r.out);
    run_free(&r);
    kill(sleeper, SIGKILL);
    wait_bg(sleeper);
    touch(hold);
    cr_expect_eq(wait_bg(held), 0);
}

/* A process killed while its `cushim run` goes on: its stale segment is the run's to report and
 * remove when it ends, and gc leaves it; stat, reset-peak and phase say so, not "`cushim gc`
 * removes it" (a fresh-user trial: gc then removed nothing). */
Test(segments, a_stale_segment_that_a_live_run_collects_is_said_so)
{
    const char *segdir = fresh_dir("seg-run-collects"), *ready = fresh_dir("ready-run-collects");
    char body[2000], rd[700], seg[700], go[700];
    snprintf(go, sizeof go, "%s/go-run-collects", test_dir());
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(body, sizeof body, "%s hold & while [ -z \"$(ls %s)\" ]; do sleep 0.02; done; kill -9 $!; wait; "
             "while [ ! -e %s ]; do sleep 0.02; done", program("rt_prog"), ready, go);
    const char *argv[] = {cushim_bin(), "run", "--", "sh", "-c", body, NULL};
    const char *extra[] = {rd, seg, "HOLD_FILE=/nonexistent", NULL};
    pid_t run = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);
    for (int i = 0; i < 500 && kill(pid, 0) == 0; i++) /* killed and reaped by the shell */
        usleep(10000);
    cr_assert_neq(kill(pid, 0), 0, "pid %d still there", (int)pid);
    char p[16], want[1200];
    snprintf(p, sizeof p, "%d", (int)pid);
    snprintf(want, sizeof want, "cushim: process %d is gone (stale segment %s; its `cushim run`, pid %d, reports it "
             "and removes it when it ends)\n", (int)pid, seg_path(segdir, pid), (int)run);
    expect_same_words(segdir, p, want);
    struct run_result r;
    /* ps's note on stale rows says the same, not "`cushim gc` removes its segment" (a review). */
    cli(segdir, &r, "ps", NULL, NULL);
    cr_expect(strstr(r.out, " stale ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\nstale: the process ended without its exit report (killed, or _exit); its `cushim run`, still "
                            "going, reports it and removes its segment when it ends\n") != NULL, "%s", r.out);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "gc", NULL, NULL), 0);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
    struct stat st;
    cr_expect_eq(stat(seg_path(segdir, pid), &st), 0, "left to the run");
    touch(go);
    cr_expect_eq(wait_bg(run), 0);
    cr_expect_neq(stat(seg_path(segdir, pid), &st), 0, "removed by the run");
}

/* The run directory of a `cushim run` killed before it could clean up: named with the run's pid
 * and start time, removed by gc once that process is gone; anything else is left alone. */
Test(segments, gc_removes_run_directories_of_runs_that_are_gone)
{
    const char *segdir = fresh_dir("seg-gc-runs"), *tmp = fresh_dir("tmp-gc-runs");
    char dead[700], reused[700], alive[700], other[700], link[700], file[800], elsewhere[700];
    unsigned long long ns = (unsigned long long)cushim_pidns_inode();
    snprintf(dead, sizeof dead, "%s/cushim-run.2147483646-77-%llu.abcdef", tmp, ns);
    snprintf(reused, sizeof reused, "%s/cushim-run.%d-1-%llu.abcdef", tmp, (int)getpid(), ns);
    snprintf(alive, sizeof alive, "%s/cushim-run.%d-%llu-%llu.abcdef", tmp, (int)getpid(),
             (unsigned long long)cushim_proc_start_time(getpid()), ns);
    snprintf(other, sizeof other, "%s/cushim-run.abcdef", tmp); /* no pid: not ours to judge */
    snprintf(link, sizeof link, "%s/cushim-run.2147483645-1-%llu.ghijkl", tmp, ns);
    /* Another pid namespace's run (a /tmp shared with a container): its pids are not ours; that
     * namespace (an inode no pid namespace has) has no process left, which the initial pid
     * namespace, seeing every process, can tell: gone (elsewhere, left). */
    snprintf(elsewhere, sizeof elsewhere, "%s/cushim-run.2147483646-77-%llu.mnopqr", tmp, ns + 1);
    cr_assert_eq(mkdir(dead, 0700), 0);
    cr_assert_eq(mkdir(reused, 0700), 0);
    cr_assert_eq(mkdir(alive, 0700), 0);
    cr_assert_eq(mkdir(other, 0700), 0);
    cr_assert_eq(mkdir(elsewhere, 0700), 0);
    cr_assert_eq(symlink(alive, link), 0);
    snprintf(file, sizeof file, "%s/1234.seg", dead);
    touch(file);
    /* Look-alikes of a dead run's directory (found by an attack trial: another user's decoy made
     * every root gc fail on "Directory not empty", after removing its files): mode 0755, which no
     * run's (mkdtemp's 0700) has; 0700 holding a subdirectory, which no run writes. Both left
     * whole, and gc succeeds. */
    char decoy[700], nested[700], decoy_file[800], nested_file[800], nested_sub[800];
    snprintf(decoy, sizeof decoy, "%s/cushim-run.2147483646-77-%llu.decoy1", tmp, ns);
    snprintf(nested, sizeof nested, "%s/cushim-run.2147483646-77-%llu.decoy2", tmp, ns);
    cr_assert_eq(mkdir(decoy, 0700), 0);
    cr_assert_eq(chmod(decoy, 0755), 0);
    cr_assert_eq(mkdir(nested, 0700), 0);
    snprintf(decoy_file, sizeof decoy_file, "%s/1234.seg", decoy);
    snprintf(nested_file, sizeof nested_file, "%s/1234.seg", nested);
    snprintf(nested_sub, sizeof nested_sub, "%s/sub", nested);
    touch(decoy_file);
    touch(nested_file);
    cr_assert_eq(mkdir(nested_sub, 0700), 0);
    /* 0700 holding a file of a name no run writes (a fresh-user trial: another user's notes.txt
     * was removed by root's gc). */
    char notes_dir[700], notes[800];
    snprintf(notes_dir, sizeof notes_dir, "%s/cushim-run.2147483646-77-%llu.decoy3", tmp, ns);
    cr_assert_eq(mkdir(notes_dir, 0700), 0);
    snprintf(notes, sizeof notes, "%s/notes.txt", notes_dir);
    touch(notes);

    char seg[700], tmpenv[760];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
    const char *env[] = {seg, tmpenv, NULL};
    const char *argv[] = {cushim_bin(), "gc", NULL};
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    char want1[800], want2[800];
    snprintf(want1, sizeof want1, "removed %s (run directory of cushim pid 2147483646 dead)\n", dead);
    snprintf(want2, sizeof want2, "removed %s (run directory of cushim pid %d reused)\n", reused, (int)getpid());
    cr_expect(strstr(r.out, want1) != NULL, "%s", r.out);
    cr_expect(strstr(r.out, want2) != NULL, "%s", r.out);
    int initial = cushim_pidns_inode() == CUSHIM_PIDNS_INIT_INO;
    char want3[900] = "";
    if (initial)
        snprintf(want3, sizeof want3, "removed %s (run directory of cushim pid 2147483646 of pid namespace %llu, gone)\n",
                 elsewhere, ns + 1);
    cr_expect(strstr(r.out, want3) != NULL, "%s", r.out);
    cr_expect_eq(strlen(r.out), strlen(want1) + strlen(want2) + strlen(want3), "nothing else removed:\n%s", r.out);
    cr_expect_str_eq(r.err, "", "look-alikes are left silently");
    run_free(&r);
    struct stat st;
    cr_expect_neq(lstat(dead, &st), 0);
    cr_expect_neq(lstat(reused, &st), 0);
    cr_expect_eq(lstat(alive, &st), 0, "a live run's directory stays");
    cr_expect_eq(lstat(other, &st), 0);
    cr_expect_eq(lstat(elsewhere, &st) == 0, !initial, "another pid namespace's run, gone from the initial one");
    cr_expect_eq(lstat(link, &st), 0, "a link is not followed or removed");
    cr_expect_eq(stat(alive, &st), 0);
    cr_expect_eq(lstat(decoy_file, &st), 0, "a 0755 look-alike is no run's directory");
    cr_expect_eq(lstat(nested_file, &st), 0, "a directory with a subdirectory is no run's");
    cr_expect_eq(lstat(nested_sub, &st), 0);
    cr_expect_eq(lstat(notes, &st), 0, "a directory with a file no run writes is no run's");
    /* A TMPDIR it cannot read: said, exit 2, after the segments were swept all the same (an
     * attack trial: exit 0, nothing said, killed runs' directories piling up under cron). */
    need_initial_pidns();
    char stale[700];
    snprintf(stale, sizeof stale, "%s/cushim-%u-2147483646", segdir, (unsigned)getuid());
    FILE *f = fopen(stale, "w"); /* no header, long made: removable once 10 minutes old */
    cr_assert(f);
    fclose(f);
    backdate(stale, 3600);
    char missing[720], shown[800];
    snprintf(missing, sizeof missing, "%s/missing", tmp);
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", missing);
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 2, "%s", r.err);
    /* Shown whole up to 120 bytes, else by its first 60 and its length (under a long TMPDIR). */
    if (strlen(missing) <= 120)
        snprintf(shown, sizeof shown, "\"%s\"", missing);
    else
        snprintf(shown, sizeof shown, "\"%.60s...\" (%zu bytes)", missing, strlen(missing));
    char said[900];
    snprintf(said, sizeof said, "cushim: cannot read TMPDIR=%s to remove the directories of killed runs: "
             "No such file or directory\n", shown);
    cr_expect_str_eq(r.err, said);
    cr_expect_neq(lstat(stale, &st), 0, "the segments were swept: %s", r.out);
    run_free(&r);
}

/* An idle gc says so on a terminal (silence left a person wondering) and nothing elsewhere (from
 * cron, any output is mailed: README "In production"). */
Test(segments, an_idle_gc_speaks_on_a_terminal_only)
{
    const char *segdir = fresh_dir("seg-idle-gc");
    char cmd[2048], seg[700];
    snprintf(cmd, sizeof cmd, "%s gc", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    run_cmd(&r, sc, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "nothing to remove\r\n");
    run_free(&r);
    const char *piped[] = {cushim_bin(), "gc", NULL};
    run_cmd(&r, piped, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
}

/* A fresh directory `name` holding n files of 5 bytes ("junk\n") named as this user's segments of
 * pids first.. (none is one: each is listed invalid). */
static const char *junk_segments(const char *name, int first, int n)
{
    const char *segdir = fresh_dir(name);
    for (int i = 0; i < n; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/cushim-%u-%d", segdir, (unsigned)getuid(), first + i);
        FILE *f = fopen(path, "w");
        cr_assert(f != NULL);
        fputs("junk\n", f);
        fclose(f);
    }
    return segdir;
}

/* How many times needle occurs in text. */
static int occurrences(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* Another user's junk in a shared segment directory (an operator trial: 400 six-byte files made
 * 400 lines of every `cushim stat`): three are said, the rest in one line; `ps` lists them all. */
Test(segments, many_invalid_segments_are_said_in_a_few_lines)
{
    const char *segdir = junk_segments("seg-junk", 3000001, 10);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "stat", NULL, NULL), 1);
    cr_expect_eq(occurrences(r.err, "cushim: skipping "), 4, "%s", r.err);
    cr_expect(strstr(r.err, ": truncated: 5 of ") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "\ncushim: skipping 7 more invalid segments (`cushim ps` lists each with its reason)\n") != NULL,
              "%s", r.err);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "ps", NULL, NULL), 1, "only files that could not be read");
    cr_expect_eq(occurrences(r.out, " invalid "), 10, "%s", r.out);
    run_free(&r);
}

/* ps's text rows are formatted with asprintf to be sorted by the pid shown: one that cannot be
 * formatted (out of memory) is printed at once, never lost (it was dropped without a word, the
 * exit status still saying rows were listed: a review). */
Test(segments, a_ps_row_that_cannot_be_kept_is_printed_all_the_same)
{
    const char *segdir = junk_segments("seg-asprintf", 3000101, 2);
    char seg[700], pre[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", program("libfailasprintf.so"));
    const char *argv[] = {cushim_bin(), "ps", NULL};
    const char *env[] = {seg, pre, NULL};
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 1, "only files that could not be read: %s", r.err);
    cr_expect(strstr(r.out, "\n3000101 ") != NULL && strstr(r.out, "\n3000102 ") != NULL, "%s", r.out);
    cr_expect_eq(occurrences(r.out, " invalid "), 2, "%s", r.out);
    run_free(&r);
}
