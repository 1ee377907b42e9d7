/* The cushim command's words for bad input, from an attack on the CLI: long values cut in
 * messages, odd --device spellings, a program that cannot be found or run (env syntax, a #!
 * chain whose interpreter is missing, a directory on PATH), a process without a name, a run
 * directory removed under a run, and what --help says of CUSHIM_DEVICE_LIMIT=0. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "live.h"

/* Runs cushim with args (NULL-terminated, at most 8) and `env`; expects status and stderr. */
static void expect_cli(const char *const *args, const char *const *env, int status, const char *err)
{
    struct run_result r;
    const char *argv[10] = {cushim_bin()};
    for (int a = 0; a < 8 && args[a]; a++)
        argv[a + 1] = args[a];
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, status, "%s %s: %s", args[0], args[1] ? args[1] : "", r.err);
    cr_expect_str_eq(r.err, err, "%s %s", args[0], args[1] ? args[1] : "");
    run_free(&r);
}

Test(cli, a_long_value_is_cut_in_messages)
{
    /* A 10 kB argument was echoed whole (an attack trial): its first 60 bytes and its length. */
    static char big[10001], dashed[10003], path[10020];
    memset(big, 'x', sizeof big - 1);
    snprintf(dashed, sizeof dashed, "--%s", big);
    snprintf(path, sizeof path, "/nonexistent/%s", big);
    char x60[61];
    memset(x60, 'x', 60);
    x60[60] = '\0';
    char want[7][600];
    snprintf(want[0], sizeof want[0], "cushim: unexpected argument \"%s...\" (10000 bytes) for ps (usage: cushim ps "
             "[--json])\n", x60);
    snprintf(want[1], sizeof want[1], "cushim: --output needs a value, not the option \"--%.58s...\" (10002 bytes) "
             "(for a value that starts with --, write --output=VALUE)\n", x60);
    snprintf(want[2], sizeof want[2], "cushim: cannot run \"%s...\" (10000 bytes): File name too long\n", x60);
    snprintf(want[3], sizeof want[3], "cushim: cannot write --json \"/nonexistent/%.47s...\" (10013 bytes): File name "
             "too long; nothing was run\n", x60);
    snprintf(want[4], sizeof want[4], "cushim: unknown option \"--%.58s...\" (10002 bytes) for stat (see cushim stat "
             "--help)\n", x60);
    snprintf(want[5], sizeof want[5], "cushim: --device needs a device ordinal 0..63 (got \"%s...\" (10000 bytes))\n",
             x60);
    snprintf(want[6], sizeof want[6], "cushim: unknown command \"%s...\" (10000 bytes) (expected one of run, ps, stat, "
             "top, reset-peak, phase, gc, serve, help)\n", x60);
    expect_cli((const char *[]){"ps", big, NULL}, NULL, 2, want[0]);
    expect_cli((const char *[]){"stat", "--output", dashed, NULL}, NULL, 2, want[1]);
    expect_cli((const char *[]){"run", "--", big, NULL}, sim_env(NULL), 126, want[2]);
    expect_cli((const char *[]){"run", "--json", path, "--", "true", NULL}, sim_env(NULL), 2, want[3]);
    expect_cli((const char *[]){"stat", dashed, NULL}, NULL, 2, want[4]);
    expect_cli((const char *[]){"reset-peak", "--device", big, "1", NULL}, NULL, 2, want[5]);
    expect_cli((const char *[]){big, NULL}, NULL, 2, want[6]);
}

Test(cli, a_device_ordinal_takes_leading_zeros_and_odd_spellings_are_said)
{
    /* An attack trial: `--device 000` was device 0, `--device 0000` refused; CUSHIM_DEVICE_LIMIT
     * takes 0000:1G. Leading zeros say nothing; cuda:1 is offered the ordinal alone. */
    const char *segdir;
    char hold[600], p[16], want[300];
    pid_t pid = start_held("hold", "t-device", &segdir, hold, sizeof hold);
    snprintf(p, sizeof p, "%d", (int)pid);
    struct run_result r;
    cr_expect_eq(cli(segdir, &r, "reset-peak", p, "--device=0000"), 0, "%s", r.err);
    snprintf(want, sizeof want, "pid %d: peaks of device 0 set to their current values\n", (int)pid);
    cr_expect_str_eq(r.out, want);
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "reset-peak", p, "--device=cuda:1"), 2);
    cr_expect_str_eq(r.err, "cushim: --device needs a device ordinal 0..63 (got \"cuda:1\"; the ordinal alone: "
                            "--device 1)\n");
    run_free(&r);
    cr_expect_eq(cli(segdir, &r, "reset-peak", p, "--device=0064"), 2);
    cr_expect_str_eq(r.err, "cushim: --device needs a device ordinal 0..63 (got \"0064\")\n");
    run_free(&r);
    live_release(hold, &pid, 1);
}

Test(cli, a_device_ordinal_is_offered_only_for_a_name_and_a_number)
{
    /* A review: any word ending in digits was offered them, a device's UUID (as cushim stat shows
     * it) and a list of devices too. Only NAME N, NAME:N: GPU1, cuda:1. */
    expect_cli((const char *[]){"reset-peak", "1", "--device=GPU-00010203-0405-0607-0809-0a0b0c0d0e10", NULL}, NULL,
               2, "cushim: --device needs a device ordinal 0..63 (got \"GPU-00010203-0405-0607-0809-0a0b0c0d0e10\")\n");
    expect_cli((const char *[]){"reset-peak", "1", "--device=cuda:0,1", NULL}, NULL, 2,
               "cushim: --device needs a device ordinal 0..63 (got \"cuda:0,1\")\n");
    expect_cli((const char *[]){"reset-peak", "1", "--device=cuda:1:2", NULL}, NULL, 2,
               "cushim: --device needs a device ordinal 0..63 (got \"cuda:1:2\")\n");
    expect_cli((const char *[]){"reset-peak", "1", "--device=GPU01", NULL}, NULL, 2,
               "cushim: --device needs a device ordinal 0..63 (got \"GPU01\"; the ordinal alone: --device 1)\n");
}

Test(cli, an_assignment_as_the_program_offers_env)
{
    /* `cushim run VAR=x prog` (a shell's syntax) said only "not found on PATH" (an attack trial). */
    expect_cli((const char *[]){"run", "VAR=x", "true", NULL}, sim_env(NULL), 127,
               "cushim: cannot run \"VAR=x\": not found on PATH (a variable assignment, which cushim run does not "
               "take: write cushim run -- env VAR=x true, or VAR=x cushim run -- true)\n");
    expect_cli((const char *[]){"run", "--", "A=1", "B=2", "true", NULL}, sim_env(NULL), 127,
               "cushim: cannot run \"A=1\": not found on PATH (a variable assignment, which cushim run does not "
               "take: write cushim run -- env A=1 ... true, or A=1 ... cushim run -- true)\n");
    /* A value past 60 bytes is not cut into a command to type (a review: "env
     * PYTHONPATH=/opt/.../ver python3"), and the program's arguments are marked. */
    expect_cli((const char *[]){"run", "PYTHONPATH=/opt/project/src/lib/python3.11/site-packages/very/long/path",
                                "python3", "train.py", NULL},
               sim_env(NULL), 127,
               "cushim: cannot run \"PYTHONPATH=/opt/project/src/lib/python3.11/site-packages/very/long/path\": not "
               "found on PATH (a variable assignment, which cushim run does not take: write cushim run -- env "
               "PYTHONPATH=... python3 ..., or PYTHONPATH=... cushim run -- python3 ...)\n");
    /* Not a variable's name: the plain words. */
    expect_cli((const char *[]){"run", "--", "1A=1", NULL}, sim_env(NULL), 127,
               "cushim: cannot run \"1A=1\": not found on PATH\n");
}

Test(cli, help_says_a_device_limit_of_0_is_none)
{
    /* Only the README said CUSHIM_DEVICE_LIMIT=0 means no limit (an attack trial). */
    struct run_result r;
    const char *top[] = {cushim_bin(), "--help", NULL};
    run_cmd(&r, top, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "\nSettings are CUSHIM_ variables (cushim run --help lists them): CUSHIM_DEVICE_LIMIT=20GiB "
                            "caps\neach process's device memory; CUSHIM_DEVICE_LIMIT=0 (or empty) means no limit.\n"),
              "%s", r.out);
    run_free(&r);
    const char *run[] = {cushim_bin(), "run", "--help", NULL};
    run_cmd(&r, run, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "per-process device memory limit: a size for every device, or '0:20GiB,1:10GiB'; empty "
                            "or 0 = no limit\n"), "%s", r.out);
    run_free(&r);
}

Test(cli, a_run_directory_removed_by_the_program_is_said)
{
    /* The program removed $CUSHIM_RUN_DIR: "no CUDA memory activity", exit 0 (an attack trial).
     * Said in one line, and no summary reached the run: exit 2 as for a summary lost. */
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--", "sh", "-c", "rm -rf \"$CUSHIM_RUN_DIR\"", NULL};
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 2, "%s", r.err);
    char head[800];
    snprintf(head, sizeof head, "cushim: the run directory \"%s/tmp/cushim-run.", test_dir());
    static const char tail[] = "\" was removed while `sh` ran (by the program, or a cleanup of TMPDIR): the summaries "
                               "of its processes could not reach the run\n";
    size_t n = strlen(r.err);
    cr_expect(strncmp(r.err, head, strlen(head)) == 0 && n > strlen(tail) && !strcmp(r.err + n - strlen(tail), tail) &&
              !strchr(r.err, '\n')[1], "%s", r.err);
    run_free(&r);
}

Test(cli, a_process_with_an_empty_argv0_is_named_by_its_comm)
{
    /* An empty argv[0] made an empty command in ps, top, stat and the summary (an attack trial):
     * the kernel's name in brackets, as ps(1) shows it, then the arguments. */
    if (!on_path("bash")) {
        cr_log_warn("not run: no bash (exec -a) on PATH");
        return;
    }
    struct run_result r;
    const char *argv[] = {"bash", "-c", "exec -a '' \"$0\" malloc >/dev/null", program("rt_prog"), NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    json_t *cmd = json_object_get(j, "command");
    cr_expect_str_eq(json_string_value(cmd) ? json_string_value(cmd) : "(none)", "[rt_prog] malloc");
    json_decref(j);
    run_free(&r);
}

/* `cushim stat -d 0.1 PID [other]` of a held rt_prog (segment name `tag`), which is then released:
 * stat exits with `status`, its output ending with the line that says the process exited. Returns
 * that output (the caller frees it). */
static char *stat_until_exit(const char *tag, const char *other, int status)
{
    const char *segdir;
    char hold[600], p[16], out[800], env_seg[800];
    pid_t pid = start_held("hold", tag, &segdir, hold, sizeof hold);
    snprintf(p, sizeof p, "%d", (int)pid);
    snprintf(out, sizeof out, "%s/%s.out", test_dir(), tag);
    snprintf(env_seg, sizeof env_seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *argv[] = {cushim_bin(), "stat", "-d", "0.1", p, other, NULL};
    pid_t stat = spawn_bg_to(argv, (const char *[]){env_seg, NULL}, out);
    usleep(300 * 1000); /* a first snapshot, at least */
    live_release(hold, &pid, 1);
    cr_expect_eq(wait_bg(stat), status);
    char *text = slurp(out), want[200];
    snprintf(want, sizeof want, "\ncushim: process %d exited (no live segment left): stat stops\n", (int)pid);
    size_t n = strlen(text);
    cr_expect(n > strlen(want) && !strcmp(text + n - strlen(want), want), "%s", text);
    return text;
}

Test(cli, a_repeating_stat_says_when_its_process_exits)
{
    /* `cushim stat -d` of a PID stopped without a word when the process exited (an attack trial). */
    free(stat_until_exit("t-stat-exit", NULL, 0));
}

Test(cli, a_repeating_stat_counts_only_the_processes_it_watched)
{
    /* A review: with a PID that was never there (said at first), the end read "the 2 processes
     * watched exited" of the one process watched. */
    char *text = stat_until_exit("t-stat-exit2", "2147483646", 1);
    cr_expect(strstr(text, "cushim: no cushim process 2147483646 ") != NULL, "%s", text);
    free(text);
}

Test(cli, gc_help_names_every_state_it_removes)
{
    /* A review: ps says `cushim gc` removes exited segments and copies; gc --help named only
     * those of processes killed. */
    struct run_result r;
    const char *argv[] = {cushim_bin(), "gc", "--help", NULL};
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "(SIGKILL, crash: stale in cushim ps)") && strstr(r.out, "(exited)") && strstr(r.out, "(copy)"),
              "%s", r.out);
    run_free(&r);
}

Test(cli, run_help_says_a_removed_run_directory_exits_2)
{
    /* A review: a run whose directory was removed exits 2 (bfd3cec); its --help and the README
     * named only a --json file not written and a summary unreadable. */
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--help", NULL};
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "be written, a process's summary could not be read, or the run's directory in TMPDIR\n"
                            "was removed while it ran (its summaries lost).\n") != NULL, "%s", r.out);
    run_free(&r);
}

Test(cli, a_directory_on_path_named_as_the_program_is_said)
{
    /* execvp's EACCES for a directory along PATH read "Permission denied" (an attack trial). */
    char dir[700], sub[760], path_env[900], want[1200];
    snprintf(dir, sizeof dir, "%s", fresh_dir("path-dir"));
    snprintf(sub, sizeof sub, "%s/trainer", dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    snprintf(path_env, sizeof path_env, "PATH=%s:/usr/bin:/bin", dir);
    snprintf(want, sizeof want, "cushim: cannot run \"trainer\": not found on PATH (%s there is a directory)\n", sub);
    expect_cli((const char *[]){"run", "--", "trainer", NULL}, sim_env((const char *[]){path_env, NULL}), 127, want);
    /* A long one is cut with its length, not at 200 bytes without a word (a review). */
    char deep[1000], deep_sub[1100], deep_env[1100], deep_want[1400];
    int len = snprintf(deep, sizeof deep, "%s/%0250d", dir, 0);
    cr_assert_eq(mkdir(deep, 0755), 0);
    snprintf(deep_sub, sizeof deep_sub, "%s/trainer", deep);
    cr_assert_eq(mkdir(deep_sub, 0755), 0);
    snprintf(deep_env, sizeof deep_env, "PATH=%s:/usr/bin:/bin", deep);
    snprintf(deep_want, sizeof deep_want, "cushim: cannot run \"trainer\": not found on PATH (%.60s... (%d bytes) "
             "there is a directory)\n", deep_sub, len + (int)strlen("/trainer"));
    expect_cli((const char *[]){"run", "--", "trainer", NULL}, sim_env((const char *[]){deep_env, NULL}), 127,
               deep_want);
}

Test(cli, serve_says_the_address_it_serves_not_the_words_typed)
{
    /* `--listen [::ffff:127.0.0.1]:09400` was echoed as typed (an attack trial): the URL served. */
    char seg[700], listen[64], out[800], want[100];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", fresh_dir("serve-shown"));
    int port = free_port();
    snprintf(listen, sizeof listen, "[::ffff:127.0.0.1]:0%d", port);
    snprintf(out, sizeof out, "%s/serve-shown.out", test_dir());
    const char *argv[] = {cushim_bin(), "serve", "--listen", listen, NULL};
    pid_t srv = spawn_bg_to(argv, (const char *[]){seg, NULL}, out);
    char *text = NULL;
    for (int i = 0; i < 3000; i++) {
        text = slurp(out);
        if (strchr(text, '\n'))
            break;
        free(text);
        text = NULL;
        usleep(10000);
    }
    kill(srv, SIGTERM);
    cr_expect_eq(wait_bg(srv), 0);
    snprintf(want, sizeof want, "cushim: serving http://127.0.0.1:%d/metrics\n", port);
    cr_expect(text && !strncmp(text, want, strlen(want)), "%s", text ? text : "(nothing said)");
    free(text);
}
