/* `cushim top` on a terminal (a pseudo-terminal from script(1)): processes and per-device totals
 * redrawn in place, the LIMIT column of a budget, notes kept on a short screen, UTF-8 command
 * lines, a terminal that cannot move the cursor refused, and its interval kept with stdin at its
 * end. Its repeating and sorted views are in test_watch.c. */
#include <criterion/criterion.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "live.h"

#define MiB (1024ull * 1024)

/* cushim top redraws in place on a terminal (a pseudo-terminal from script(1) here), and prints
 * plain frames one after another when its output is not a terminal. */
Test(top, top_draws_processes_and_device_totals)
{
    const char *segdir;
    char hold[700];
    pid_t pid = start_held("hold", "t-top", &segdir, hold, sizeof hold);
    char cmd[2048], seg[700];
    snprintf(cmd, sizeof cmd, "%s top --interval 0.1 --iterations 3", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, "TERM=xterm", "COLUMNS=160", "LINES=40", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    run_cmd(&r, sc, env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    char pidcol[32];
    snprintf(pidcol, sizeof pidcol, "%d", (int)pid); /* curses may move the cursor instead of padding */
    cr_expect(strstr(r.out, "cushim top: 1 process") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f") != NULL, "device totals");
    cr_expect(strstr(r.out, pidcol) != NULL, "process row for %d", (int)pid);
    cr_expect(strstr(r.out, "1.00 MiB") != NULL, "device bytes shown");
    cr_expect(strstr(r.out, "\033[") != NULL || strstr(r.out, "\x1b[") != NULL,
              "drawn with terminal control sequences");
    run_free(&r);
    /* top's own bundled spelling: one frame, as text. */
    const char *bundled[] = {cushim_bin(), "top", "-bn1", NULL};
    run_cmd(&r, bundled, env);
    cr_expect_eq(r.status, 0, "-bn1: %s", r.err);
    cr_expect(strstr(r.out, "cushim top: 1 process at ") != NULL && strstr(r.out, "\033[") == NULL, "%s", r.out);
    run_free(&r);
    /* -n=1, as every option with a value takes "=" (cli.h). */
    const char *equals[] = {cushim_bin(), "top", "-b", "-n=1", NULL};
    run_cmd(&r, equals, env);
    cr_expect_eq(r.status, 0, "-n=1: %s", r.err);
    cr_expect(strstr(r.out, "cushim top: 1 process at ") != NULL, "%s", r.out);
    run_free(&r);
    const char *bundled_bad[] = {cushim_bin(), "top", "-bx", NULL};
    run_cmd(&r, bundled_bad, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: unknown option \"-bx\" for top (see cushim top --help)\n");
    run_free(&r);
    /* Without a terminal (a pipe here): batch mode, frame after frame as plain text. */
    const char *plain[] = {cushim_bin(), "top", "--interval", "0.1", "--iterations", "2", NULL};
    run_cmd(&r, plain, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    cr_expect(strstr(r.out, "\033[") == NULL, "no terminal control sequences");
    int frames = 0;
    for (const char *q = r.out; (q = strstr(q, "cushim top: 1 process at ")) != NULL; q++)
        frames++;
    cr_expect_eq(frames, 2, "%s", r.out);
    char row[160];
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   4.00 MiB       0 B       0 B  ", (int)pid);
    cr_expect(strstr(r.out, row) != NULL, "process row:\n%s", r.out);
    cr_expect(strstr(r.out, "\nGPU-00010203-0405-0607-0809-0a0b0c0d0e0f     1  16.0 GiB     1.00 MiB  4.00 MiB\n") != NULL,
              "device totals:\n%s", r.out);
    /* Both tables fit 80 columns up to the command. */
    cr_expect(strstr(r.out, "\nUUID                                     PROCS    MEMORY DEVICE-TOTAL SUM-PEAKS\n") != NULL,
              "%s", r.out);
    cr_expect(strstr(r.out, "\n    PID DEVICES  PHASE       DEVICE-TOTAL TOTAL-PEAK    PINNED OFFLOADED  COMMAND\n") != NULL,
              "%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* PINNED is all the host memory the process pinned: cudaMallocHost's and cudaHostRegister's (found
 * by a naming audit: registered memory, page-locked as well, was left out). */
Test(top, pinned_counts_allocated_and_registered_host_memory)
{
    const char *segdir;
    char hold[700];
    pid_t pid = start_held("hold_pinned", "t-pinned", &segdir, hold, sizeof hold);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    char row[160];
    /* 1 MiB + 64 KiB = 1.0625 MiB */
    snprintf(row, sizeof row, "\n%7d 0        run             4.00 KiB   4.00 KiB  1.06 MiB       0 B  ", (int)pid);
    cr_expect(strstr(r.out, row) != NULL, "%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* Starts rt_prog SCENARIO with env and waits until `total` programs are ready in `ready`. */
static pid_t start_one_more(const char *scenario, const char *const *env, const char *ready, int total)
{
    const char *argv[] = {program("rt_prog"), scenario, NULL};
    pid_t pid = spawn_bg(argv, env);
    pid_t pids[8];
    cr_assert(total <= 8);
    wait_ready(ready, total, pids);
    return pid;
}

/* With a device budget, top shows a LIMIT column: the budget of a process that has one, "-" for
 * one that has none, "+" after one on only some of its devices and "!" after a budget that
 * refused a request (in columns of their own: the figures stay aligned), each with a note under
 * the table. */
Test(top, top_shows_the_device_limit_when_a_process_has_one)
{
    struct live_dirs d;
    live_dirs_make(&d, "t-limit");
    const char *segdir = d.seg, *ready = d.ready, *hold = d.hold;
    const char *argv[] = {program("rt_prog"), "hold", NULL};
    pid_t limited = spawn_bg(argv, live_env_with(segdir, ready, hold, "CUSHIM_DEVICE_LIMIT=3GiB"));
    pid_t plain = spawn_bg(argv, live_env(segdir, ready, hold));
    pid_t pids[2];
    wait_ready(ready, 2, pids);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "\n    PID DEVICES  PHASE       DEVICE-TOTAL TOTAL-PEAK     LIMIT      PINNED OFFLOADED  COMMAND\n") != NULL,
              "%s", r.out);
    char row[160];
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   4.00 MiB  3.00 GiB         0 B       0 B  ", (int)limited);
    cr_expect(strstr(r.out, row) != NULL, "limited row:\n%s", r.out);
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   4.00 MiB         -         0 B       0 B  ", (int)plain);
    cr_expect(strstr(r.out, row) != NULL, "plain row:\n%s", r.out);
    cr_expect(strstr(r.out, "refused") == NULL, "no refusal, no note:\n%s", r.out);
    run_free(&r);
    /* A budget that refused a request (1 MiB held of 2 MiB, 3 MiB asked): marked, and noted. */
    pid_t refused = start_one_more("hold_refused", live_env_with(segdir, ready, hold, "CUSHIM_DEVICE_LIMIT=2MiB"),
                                   ready, 3);
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   1.00 MiB  2.00 MiB!        0 B       0 B  ",
             (int)refused);
    cr_expect(strstr(r.out, row) != NULL, "refusing row:\n%s", r.out);
    cr_expect(strstr(r.out, "\n! the limit refused requests (out of memory for the program, or spilled): "
                            "`cushim stat PID` counts them\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\n+ ") == NULL, "no partial limit, no note:\n%s", r.out);
    run_free(&r);
    /* A budget on one of two devices ("+"), which refused a request there ("!"): both marks, the
     * figure still aligned (a review: "+" was never tested). */
    pid_t both = start_one_more("hold_two_devices", live_env_with2(segdir, ready, hold, "CUSHIM_DEVICE_LIMIT=1:4MiB",
                                                                   "SIMCUDA_DEVICE_COUNT=2"), ready, 4);
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    snprintf(row, sizeof row, "\n%7d 0,1      run             3.00 MiB   3.00 MiB  4.00 MiB+!       0 B       0 B  ",
             (int)both);
    cr_expect(strstr(r.out, row) != NULL, "two-device row:\n%s", r.out);
    /* Both marks explained under the table, "+" first, as they stand. */
    cr_expect(strstr(r.out, "\n+ only some of the process's devices have a limit: LIMIT sums theirs; the others have "
                            "the card's memory\n! the limit refused requests (out of memory for the program, or "
                            "spilled): `cushim stat PID` counts them\n") != NULL, "%s", r.out);
    run_free(&r);
    live_release(hold, (pid_t[]){limited, plain, refused, both}, 4);
}

/* The device table groups processes by the device's UUID, not by their ordinals: with
 * CUDA_VISIBLE_DEVICES, ordinal 0 of two processes may be two devices, and one device two ordinals. */
Test(top, device_totals_follow_the_uuid_across_cuda_visible_devices)
{
    struct live_dirs d;
    live_dirs_make(&d, "t-visible");
    const char *segdir = d.seg, *ready = d.ready, *hold = d.hold;
    const char *argv[] = {program("rt_prog"), "hold", NULL};
    pid_t second = spawn_bg(argv, live_env_with2(segdir, ready, hold, "SIMCUDA_DEVICE_COUNT=2", "CUDA_VISIBLE_DEVICES=1"));
    pid_t first = spawn_bg(argv, live_env_with(segdir, ready, hold, "SIMCUDA_DEVICE_COUNT=2"));
    pid_t swapped = spawn_bg(argv, live_env_with2(segdir, ready, hold, "SIMCUDA_DEVICE_COUNT=2",
                                                  "CUDA_VISIBLE_DEVICES=1,0"));
    pid_t pids[3];
    wait_ready(ready, 3, pids);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    /* Each holds 1 MiB + 4 KiB on its ordinal 0 (peak 4 MiB + 4 KiB). */
    cr_expect(strstr(r.out, "\nGPU-10111213-1415-1617-1819-1a1b1c1d1e1f     2  16.0 GiB     2.01 MiB  8.01 MiB\n"
                            "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f     1  16.0 GiB     1.00 MiB  4.00 MiB\n") != NULL,
              "%s", r.out);
    run_free(&r);
    live_release(hold, (pid_t[]){second, first, swapped}, 3);
}

/* With CUDA graph memory, top shows a GRAPH-POOL column: the graph memory pool's reserve of each
 * process (8 MiB: the graph's allocation node, launched and freed; the pool keeps it), which is
 * not in DEVICE-TOTAL; 0 B for one without graphs. Beside a LIMIT column, both stay aligned. */
Test(top, top_shows_the_graph_pool_when_a_process_has_graph_memory)
{
    struct live_dirs d;
    live_dirs_make(&d, "t-graph");
    const char *segdir = d.seg, *ready = d.ready, *hold = d.hold;
    const char *argv[] = {program("rt_prog"), "hold", NULL};
    pid_t plain = spawn_bg(argv, live_env(segdir, ready, hold));
    pid_t pids[2];
    wait_ready(ready, 1, pids);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "GRAPH-POOL") == NULL, "no graph memory, no column:\n%s", r.out);
    run_free(&r);
    pid_t graph = start_one_more("hold_graph_reset", live_env(segdir, ready, hold), ready, 2);
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "\n    PID DEVICES  PHASE       DEVICE-TOTAL TOTAL-PEAK    PINNED OFFLOADED GRAPH-POOL  COMMAND\n") != NULL,
              "%s", r.out);
    char row[200];
    snprintf(row, sizeof row, "\n%7d 0        run                  0 B        0 B       0 B       0 B   8.00 MiB  ", (int)graph);
    cr_expect(strstr(r.out, row) != NULL, "graph row:\n%s", r.out);
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   4.00 MiB       0 B       0 B        0 B  ", (int)plain);
    cr_expect(strstr(r.out, row) != NULL, "plain row:\n%s", r.out);
    cr_expect_lt(row_at(r.out, plain), row_at(r.out, graph), "by DEVICE-TOTAL:\n%s", r.out);
    run_free(&r);
    /* --sort graph-pool: the process with the larger graph pool first. */
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", "--sort=graph-pool"), 0, "%s", r.err);
    cr_expect(strstr(r.out, ", sorted by GRAPH-POOL\n") != NULL, "%s", r.out);
    cr_expect_lt(row_at(r.out, graph), row_at(r.out, plain), "by GRAPH-POOL:\n%s", r.out);
    run_free(&r);
    pid_t limited = start_one_more("hold", live_env_with(segdir, ready, hold, "CUSHIM_DEVICE_LIMIT=3GiB"), ready, 3);
    cr_expect_eq(cli(segdir, &r, "top", "-bn1", NULL), 0, "%s", r.err);
    cr_expect(strstr(r.out, "\n    PID DEVICES  PHASE       DEVICE-TOTAL TOTAL-PEAK     LIMIT      PINNED OFFLOADED "
                            "GRAPH-POOL  COMMAND\n") != NULL, "%s", r.out);
    snprintf(row, sizeof row, "\n%7d 0        run                  0 B        0 B         -         0 B       0 B   8.00 MiB  ",
             (int)graph);
    cr_expect(strstr(r.out, row) != NULL, "graph row beside a limit:\n%s", r.out);
    snprintf(row, sizeof row, "\n%7d 0        run             1.00 MiB   4.00 MiB  3.00 GiB         0 B       0 B        0 B  ",
             (int)limited);
    cr_expect(strstr(r.out, row) != NULL, "limited row:\n%s", r.out);
    run_free(&r);
    live_release(hold, (pid_t[]){plain, graph, limited}, 3);
}

/* On a screen too short for every process, the notes under the table (here: a segment that
 * cannot be read) keep their line; the processes that do not fit are left out instead. */
Test(top, top_keeps_its_notes_on_a_short_screen)
{
    const char *segdir = fresh_dir("seg-short"), *ready = fresh_dir("ready-short");
    char hold[700], link[800], cmd[2048], seg[700];
    snprintf(hold, sizeof hold, "%s/go-short", test_dir());
    const char *argv[] = {program("rt_prog"), "hold", NULL};
    pid_t p1 = spawn_bg(argv, live_env(segdir, ready, hold));
    pid_t p2 = spawn_bg(argv, live_env(segdir, ready, hold));
    pid_t rp[2];
    wait_ready(ready, 2, rp);
    snprintf(link, sizeof link, "%s/cushim-%u-12345", segdir, (unsigned)getuid());
    cr_assert_eq(symlink("/etc/passwd", link), 0);
    snprintf(cmd, sizeof cmd, "%s top --interval 0.1 --iterations 1", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    /* Title, blank, device header, one device, blank, process header: 6 lines; 8 leave 2. */
    const char *env[] = {seg, "TERM=xterm", "COLUMNS=160", "LINES=8", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    run_cmd(&r, sc, env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "1 segment could not be read") != NULL, "the note is drawn:\n%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(p1), 0);
    cr_expect_eq(wait_bg(p2), 0);
}

/* A command line in UTF-8 is drawn as its characters on a UTF-8 terminal: before, curses (with
 * no locale set) showed each byte escaped, "jos~C~)_..." (found by a review helper). */
Test(top, top_draws_a_utf8_command_line_as_it_is)
{
    locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!utf8)
        cr_skip_test("not run: this system has no C.UTF-8 locale");
    freelocale(utf8);
    const char *segdir = fresh_dir("seg-utf8"), *ready = fresh_dir("ready-utf8");
    char hold[700], name[800], cmd[2048], seg[700];
    snprintf(hold, sizeof hold, "%s/go-utf8", test_dir());
    snprintf(name, sizeof name, "%s/jos\xc3\xa9_\xe6\xa8\xa1\xe5\x9e\x8b", test_dir()); /* josé_模型 */
    unlink(name);
    cr_assert_eq(symlink(program("rt_prog"), name), 0);
    const char *argv[] = {name, "hold", NULL};
    pid_t p = spawn_bg(argv, live_env(segdir, ready, hold));
    pid_t rp;
    wait_ready(ready, 1, &rp);
    snprintf(cmd, sizeof cmd, "%s top --interval 0.1 --iterations 1", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    /* Wide enough for the whole path: the test directory's, under a TMPDIR of up to 180 bytes. */
    const char *env[] = {seg, "TERM=xterm", "LANG=C.UTF-8", "LC_ALL", "COLUMNS=400", "LINES=12", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    run_cmd(&r, sc, env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    char want[900];
    snprintf(want, sizeof want, "%s hold", name);
    cr_expect(strstr(r.out, want) != NULL, "the command as it is:\n%s", r.out);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(p), 0);
    unlink(name);
}

/* TERM=dumb (no cursor addressing): before, about 1,900 blanks and the frame run together, exit 0;
 * now one line pointing to --batch, exit 2, nothing drawn. */
Test(top, top_refuses_a_terminal_that_cannot_move_the_cursor)
{
    const char *segdir = fresh_dir("seg-dumb");
    char cmd[2048], seg[700];
    snprintf(cmd, sizeof cmd, "%s top --interval 0.1 --iterations 1 2>&1; echo status=$?", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, "TERM=dumb", "COLUMNS=80", "LINES=24", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    run_cmd(&r, sc, env);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, "cushim: the terminal type \"dumb\" cannot move the cursor (terminfo has no "
                            "\"cup\"): use --batch, or set TERM, e.g. TERM=xterm\r\nstatus=2\r\n");
    run_free(&r);
}

/* On a terminal whose standard input is at its end (</dev/null), top still draws a frame every
 * interval (before, each key read answered at once: frames without a pause, a core spinning).
 * A lower bound only: a slow machine cannot fail it. */
Test(top, top_waits_its_interval_when_stdin_is_at_its_end)
{
    const char *segdir = fresh_dir("seg-eof");
    char cmd[2048], seg[700];
    snprintf(cmd, sizeof cmd, "%s top --interval 0.3 --iterations 4 </dev/null", cushim_bin());
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, "TERM=xterm", "COLUMNS=160", "LINES=40", NULL};
    const char *sc[] = {"script", "-qec", cmd, "/dev/null", NULL};
    struct run_result r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_cmd(&r, sc, env);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "cushim top: 0 processes") != NULL, "%s", r.out);
    cr_expect_geq(took, 0.9, "4 frames 0.3 s apart took %.3f s", took);
    run_free(&r);
}

/* A stop signal ends `top -b` with exit 0 after a whole frame, as it ends a repeating `stat`
 * (found by a fresh-user trial: 143). Frames go to a file; the second frame's start is waited for. */
/* On the screen too: Ctrl-C (SIGINT through the terminal) ends the view with exit 0 and the
 * terminal restored, as q does (an attack trial: curses' own handler exited 1). The ^C is sent
 * once the first frame is on the screen (script -f writes the typescript as it goes). */
Test(top, ctrl_c_ends_the_screen_with_exit_0)
{
    const char *segdir = fresh_dir("seg-top-ctrl-c");
    char typescript[700], rc[700], cmd[6000];
    snprintf(typescript, sizeof typescript, "%s/top-ctrl-c.typescript", test_dir());
    snprintf(rc, sizeof rc, "%s/top-ctrl-c.rc", test_dir());
    unlink(typescript);
    unlink(rc);
    snprintf(cmd, sizeof cmd,
             "(while ! grep -q 'q quits' %s 2>/dev/null; do sleep 0.05; done; printf '\\003'; sleep 30) | "
             "{ CUSHIM_SEGMENT_DIR=%s TERM=xterm script -qfec 'exec %s top --interval 60' %s; echo rc=$? > %s.tmp; mv %s.tmp %s; }",
             typescript, segdir, cushim_bin(), typescript, rc, rc, rc);
    /* top is exec'd on the pseudo-terminal, alone in its foreground process group: a shell there (script runs
     * $SHELL -c) would get the same SIGINT, and dash dies of it; script -e passes top's exit status on. */
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t sh = spawn_bg(argv, NULL);
    for (int i = 0; i < 3000 && access(rc, F_OK) != 0; i++)
        usleep(10000);
    char *said = slurp(rc); /* renamed into place once the echo's line was written whole */
    cr_expect_str_eq(said, "rc=0\n");
    free(said);
    kill(sh, SIGTERM);
    wait_bg(sh);
    char *text = slurp(typescript);
    cr_expect(text && strstr(text, "\033[?1049l") != NULL, "the terminal restored (rmcup)");
    free(text);
}

Test(top, a_stop_signal_ends_batch_mode_with_exit_0)
{
    const char *segdir = fresh_dir("seg-top-stop");
    char out[700], cmd[2000];
    snprintf(out, sizeof out, "%s/top-stop.txt", test_dir());
    unlink(out);
    snprintf(cmd, sizeof cmd, "CUSHIM_SEGMENT_DIR=%s exec %s top -b -d 0.1 > %s", segdir, cushim_bin(), out);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t top = spawn_bg(argv, NULL);
    int frames = 0;
    for (int i = 0; i < 3000 && frames < 2; i++) {
        usleep(10000);
        FILE *f = fopen(out, "r");
        char line[512];
        frames = 0;
        while (f && fgets(line, sizeof line, f))
            frames += strncmp(line, "cushim top: ", 12) == 0;
        if (f)
            fclose(f);
    }
    cr_assert_geq(frames, 2, "two frames written");
    kill(top, SIGTERM);
    cr_expect_eq(wait_bg(top), 0, "a stop signal is the end of batch mode");
    char *text = slurp(out);
    size_t n = strlen(text);
    cr_expect(n > 0 && text[n - 1] == '\n', "the last frame is whole: %s", text);
    free(text);
    unlink(out);
}

/* top spells its bundled short options out into an array of its own (-bn1 is -b -n 1): freed at
 * its end, as a soak under valgrind found it lost (56 to 104 bytes at every top's end, whatever
 * the options). Run under valgrind where it is installed. */
Test(top, top_frees_its_spelt_out_options)
{
    struct run_result r;
    const char *probe[] = {"valgrind", "--version", NULL};
    int have = on_path("valgrind");
    if (have) {
        run_cmd(&r, probe, NULL);
        have = r.status == 0;
        run_free(&r);
    }
    if (!have) {
        printf("not run: no valgrind here\n");
        cr_skip_test("not run: no valgrind here");
    }
    const char *segdir;
    char hold[700], seg[700];
    start_held("hold", "t-top-leak", &segdir, hold, sizeof hold);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *env[] = {seg, NULL};
    const char *spellings[][4] = {{"-bn1", NULL}, {"-b", "-n", "1", NULL}, {"-bx", NULL}, {"--help", NULL}};
    /* As top ends without valgrind: a frame each, -bx a usage error (2), the help. */
    const int want[] = {0, 0, 2, 0};
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        const char *argv[10] = {"valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite",
                                "--error-exitcode=99", cushim_bin(), "top"};
        for (int k = 0; spellings[i][k]; k++)
            argv[7 + k] = spellings[i][k];
        run_cmd(&r, argv, env);
        cr_expect_eq(r.status, want[i], "top %s: exit %d (99: valgrind found a leak): %s", spellings[i][0], r.status,
                     r.err);
        cr_expect(strstr(r.err, "definitely lost") == NULL, "top %s: %s", spellings[i][0], r.err);
        run_free(&r);
    }
    touch(hold);
}
