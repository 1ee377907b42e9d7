/* How cushim takes its settings: the command line (usage errors exit 2, `--name VALUE` and
 * `--name=VALUE`, an option never taken as a value, --help and `help help`), CUSHIM_ variables with
 * bad, empty, overlong or escaped values (said once, in one line, by `cushim run` or the shim, or
 * silenced by CUSHIM_LOG=off), the segment directory every command reads (refused when relative,
 * missing or unwritable), and --library / CUSHIM_LIBRARY checked before any program runs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/options.h"
#include "harness.h"

Test(settings, usage_errors_exit_2)
{
    struct run_result r;
    const char *a1[] = {cushim_bin(), "run", NULL};
    run_cmd(&r, a1, NULL);
    cr_expect_eq(r.status, 2);
    run_free(&r);
    const char *a2[] = {cushim_bin(), "run", "--no-such-flag", "--", "true", NULL};
    run_cmd(&r, a2, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: unknown option \"--no-such-flag\" for run (see cushim run --help)\n");
    run_free(&r);
    /* A near miss is offered the option (a fresh-user trial found variables were not; options
     * neither). */
    static const char *const typos[][2] = {{"--devce-limit=1GiB", "--device-limit"}, {"--quite", "--quiet"},
                                           {"--jsn", "--json"}, {"--spil", "--spill"}};
    for (int k = 0; k < 4; k++) {
        const char *typo[] = {cushim_bin(), "run", typos[k][0], "--", "true", NULL};
        run_cmd(&r, typo, NULL);
        cr_expect_eq(r.status, 2);
        char want[300];
        snprintf(want, sizeof want, "cushim: unknown option \"%s\" for run (did you mean %s? see cushim run --help)\n",
                 typos[k][0], typos[k][1]);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
    }
    /* One letter no command takes: the one long option it begins is offered, none when two do
     * (-d: --device-limit, --disable); a negative pid is not an option (found by an attack
     * trial: "-q" and "-j" got no hint, "stat -1" was an unknown option, "reset-peak -1" not a pid;
     * then "-d" and "--dev" were "not a process id" for reset-peak). */
    static const char *const letters[][3] = {
        {"run", "-q", "cushim: unknown option \"-q\" for run (did you mean --quiet? see cushim run --help)\n"},
        {"run", "-d", "cushim: unknown option \"-d\" for run (see cushim run --help)\n"},
        {"stat", "-j", "cushim: unknown option \"-j\" for stat (did you mean --json? see cushim stat --help)\n"},
        {"reset-peak", "-d", "cushim: unknown option \"-d\" for reset-peak (did you mean --device? see cushim "
                             "reset-peak --help)\n"},
        {"reset-peak", "--dev", "cushim: unknown option \"--dev\" for reset-peak (did you mean --device? see cushim "
                                "reset-peak --help)\n"},
        {"phase", "-x", "cushim: unknown option \"-x\" for phase (see cushim phase --help)\n"},
        {"stat", "-1", "cushim: \"-1\" is not a process id (a number from 1 to 2147483647)\n"},
        {"reset-peak", "-1", "cushim: \"-1\" is not a process id (a number from 1 to 2147483647)\n"}};
    for (size_t k = 0; k < sizeof letters / sizeof letters[0]; k++) {
        const char *argv[] = {cushim_bin(), letters[k][0], letters[k][1], "--", "true", NULL};
        run_cmd(&r, argv, NULL);
        cr_expect_eq(r.status, 2, "%s %s", letters[k][0], letters[k][1]);
        cr_expect_str_eq(r.err, letters[k][2]);
        run_free(&r);
    }
    const char *a3[] = {cushim_bin(), "frobnicate", NULL};
    run_cmd(&r, a3, NULL);
    cr_expect_eq(r.status, 2);
    run_free(&r);
    /* A value flag followed by "--" is missing its value; "--" is not taken as the value. */
    const char *a4[] = {cushim_bin(), "run", "--offload-min", "--", "true", NULL};
    run_cmd(&r, a4, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --offload-min needs a value (see cushim run --help)\n");
    run_free(&r);
    const char *a5[] = {cushim_bin(), "run", "--json", "--", "true", NULL};
    run_cmd(&r, a5, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --json needs a FILE\n");
    run_free(&r);
    /* Paths given as options must be usable before the program runs. */
    const char *a9[] = {cushim_bin(), "run", "--segment-dir", "/nonexistent-dir", "--report=/nonexistent-dir/r",
                        "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a9, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    /* (found by a fresh-user trial: "is not a directory (No such file or directory)") */
    cr_expect_str_eq(r.err, "cushim: --segment-dir \"/nonexistent-dir\": /nonexistent-dir does not exist; nothing "
                            "was run\n"
                            "cushim: --report \"/nonexistent-dir/r\": /nonexistent-dir does not exist; nothing was "
                            "run\n");
    const char *a10[] = {cushim_bin(), "run", "--log-file=/etc/passwd/x", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a10, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --log-file \"/etc/passwd/x\": /etc/passwd is not a directory (it is a file); "
                            "nothing was run\n");
    run_free(&r);
    /* A relative path is echoed as typed (an attack trial: its absolute form was), its directory
     * made absolute. */
    const char *a11[] = {"/bin/sh", "-c", "cd \"$1\" && exec \"$0\" run --report ./nodir/x -- /bin/echo ran",
                         cushim_bin(), test_dir(), NULL};
    run_cmd(&r, a11, NULL);
    cr_expect_eq(r.status, 2);
    char want_rel[900];
    snprintf(want_rel, sizeof want_rel, "cushim: --report \"./nodir/x\": %s/nodir does not exist; nothing was run\n",
             test_dir());
    cr_expect_str_eq(r.err, want_rel);
    run_free(&r);
    /* --json in the same words (an earlier trial: "No such file or directory"). */
    const char *a12[] = {"/bin/sh", "-c", "cd \"$1\" && exec \"$0\" run --json nodir/x -- /bin/echo ran",
                         cushim_bin(), test_dir(), NULL};
    run_cmd(&r, a12, NULL);
    cr_expect_eq(r.status, 2);
    snprintf(want_rel, sizeof want_rel, "cushim: --json \"nodir/x\": %s/nodir does not exist; nothing was run\n",
             test_dir());
    cr_expect_str_eq(r.err, want_rel);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
    /* Every command's value options take `--name VALUE` and `--name=VALUE`, and say the same
     * when the value is missing. */
    static const struct {
        const char *args[7], *err;
        int status;
    } forms[] = {
        {{"top", "--interval", NULL}, "cushim: --interval needs SECONDS\n", 2},
        {{"top", "--interval=0.1", "--iterations=1", "--batch", NULL}, "", 0},
        {{"stat", "--output", NULL}, "cushim: --output needs a FILE\n", 2},
        {{"serve", "--listen", NULL}, "cushim: --listen needs ADDR:PORT\n", 2},
        {{"reset-peak", "1", "--device", NULL}, "cushim: --device needs a device ordinal\n", 2},
        {{"reset-peak", "1", "--device=x", NULL}, "cushim: --device needs a device ordinal 0..63 (got \"x\")\n", 2},
        /* digits only: strtol took these as device 0 */
        {{"reset-peak", "1", "--device= +0", NULL}, "cushim: --device needs a device ordinal 0..63 (got \" +0\")\n", 2},
        {{"reset-peak", "1", "--device=-0", NULL}, "cushim: --device needs a device ordinal 0..63 (got \"-0\")\n", 2},
        /* top's own short forms */
        {{"top", "-d", "0.1", "-n", "1", NULL}, "", 0},
        /* each named as typed */
        {{"top", "-n", "0", NULL}, "cushim: -n \"0\" is not a whole number of times, 1 or more\n", 2},
        {{"top", "-n", "99999999999999999999", NULL}, "cushim: -n \"99999999999999999999\" is too many times (at "
                                                      "most 9223372036854775807)\n", 2},
        {{"top", "-d", "0x1", NULL}, "cushim: -d \"0x1\" is not a number of seconds in 0.1..3600 (digits and a point, such as 0.5)\n", 2},
        {{"top", "--iterations", "+1", NULL}, "cushim: --iterations \"+1\" is not a whole number of times, 1 or "
                                              "more\n", 2},
        {{"phase", NULL}, "cushim: phase needs a PID and a phase (usage: cushim phase PID compile|run)\n", 2},
        {{"phase", "1", NULL}, "cushim: phase needs a phase after the PID: compile or run (usage: cushim phase PID "
                               "compile|run)\n", 2},
        {{"phase", "1", "run", "x", NULL}, "cushim: unexpected argument \"x\" for phase (usage: cushim phase PID compile|run)\n", 2},
        /* Options that would do nothing are usage errors, as --report-format without --report
         * (found by a fresh-user trial: accepted without a word). */
        {{"run", "--offload-min=1KiB", "--", "/bin/true", NULL},
         "cushim: --offload-min is the smallest request --offload compile|always moves, and offload is off: "
         "give --offload too, or leave it out\n", 2},
        {{"run", "--offload-cache=1GiB", "--", "/bin/true", NULL},
         "cushim: --offload-cache keeps freed offloaded memory for reuse, and nothing is offloaded (offload and "
         "spill are off): give --offload or --spill too, or leave it out\n", 2},
        /* ... but an empty one is the default, as in the environment (a fresh-user trial: refused) */
        {{"run", "--quiet", "--offload-min=", "--offload-cache=", "--", "/bin/true", NULL},
         "cushim: --offload-min is empty: the default applies (\"64MiB\")\n"
         "cushim: --offload-cache is empty: the default applies (\"0\")\n", 0},
        /* said, not dropped silently (a fresh-user trial: an unset $LIMIT ran with no budget) */
        {{"run", "--quiet", "--device-limit", "", "--", "/bin/true", NULL},
         "cushim: --device-limit is empty: the default applies (none)\n", 0},
        /* An empty value is no value; --quiet takes none; phase's words in the wrong order (found
         * by a fresh-user trial: a file-system error, "unknown option", "not a process id"). */
        {{"stat", "--output=", NULL}, "cushim: --output needs a FILE\n", 2},
        {{"run", "--json=", "--", "/bin/true", NULL}, "cushim: --json needs a FILE\n", 2},
        {{"run", "--quiet=on", "--", "/bin/true", NULL}, "cushim: --quiet takes no value (got \"--quiet=on\")\n", 2},
        {{"phase", "run", "1234", NULL}, "cushim: phase takes the PID first, then the phase (usage: cushim phase PID "
                                         "compile|run)\n", 2},
        /* Words a command does not take, said one way by every command (found by a fresh-user
         * trial: three wordings). */
        {{"reset-peak", "1", "--devcie", "0", NULL}, "cushim: unknown option \"--devcie\" for reset-peak (did you mean "
                                                  "--device? see cushim reset-peak --help)\n", 2},
        {{"reset-peak", "1", "--xyz", "0", NULL}, "cushim: unknown option \"--xyz\" for reset-peak (see cushim reset-peak --help)\n", 2},
        {{"stat", "--otput=x", NULL}, "cushim: unknown option \"--otput=x\" for stat (did you mean --output? see cushim "
                                      "stat --help)\n", 2},
        /* The option itself with a value it does not take: said so, not "did you mean" it (an
         * attack trial); long options the usage line names in their long form too. */
        {{"ps", "--json=1", NULL}, "cushim: --json takes no value (got \"--json=1\")\n", 2},
        {{"run", "--help=1", "--", "/bin/true", NULL}, "cushim: --help takes no value (got \"--help=1\")\n", 2},
        {{"top", "--itertions", "1", NULL}, "cushim: unknown option \"--itertions\" for top (did you mean --iterations? "
                                            "see cushim top --help)\n", 2},
        {{"stat", "--intervl", "1", NULL}, "cushim: unknown option \"--intervl\" for stat (did you mean --interval? "
                                           "see cushim stat --help)\n", 2},
        {{"ps", "--hlep", NULL}, "cushim: unknown option \"--hlep\" for ps (did you mean --help? see cushim ps --help)\n", 2},
        /* which part of a device-limit entry is wrong (a fresh-user trial: the generic line) */
        {{"run", "--device-limit=1:", "--", "/bin/true", NULL}, "cushim: --device-limit \"1:\" is not ORDINAL:SIZE,... "
         "with ordinals 0..63, no spaces (e.g. 0:20GiB,1:10GiB): the entry \"1:\" has no size (see cushim run --help)\n", 2},
        {{"run", "--device-limit=0:1G,1:-1G", "--", "/bin/true", NULL}, "cushim: --device-limit \"0:1G,1:-1G\" is not "
         "ORDINAL:SIZE,... with ordinals 0..63, no spaces (e.g. 0:20GiB,1:10GiB): the entry \"1:-1G\": \"-1G\" is not a "
         "size (a whole number of bytes, or with a unit K, M, G or T, binary) (see cushim run --help)\n", 2},
        {{"run", "--device-limit=x:1G", "--", "/bin/true", NULL}, "cushim: --device-limit \"x:1G\" is not ORDINAL:SIZE,... "
         "with ordinals 0..63, no spaces (e.g. 0:20GiB,1:10GiB): the entry \"x:1G\": \"x\" is not an ordinal (0..63) (see "
         "cushim run --help)\n", 2},
        /* one dash, a long name and a value (an earlier trial: no hint) */
        {{"run", "-device-limit=1G", "--", "/bin/true", NULL}, "cushim: unknown option \"-device-limit=1G\" for run "
                                                              "(did you mean --device-limit? see cushim run --help)\n", 2},
        {{"stat", "-output=x", NULL}, "cushim: unknown option \"-output=x\" for stat (did you mean --output? see "
                                      "cushim stat --help)\n", 2},
        /* A mistyped value of a run option is offered the value meant (a fresh-user trial). */
        {{"run", "--offload", "compil", "--", "/bin/true", NULL}, "cushim: --offload \"compil\" is not one of "
                                                               "off|compile|always (did you mean compile? see cushim "
                                                               "run --help)\n", 2},
        {{"run", "--offload=on", "--", "/bin/true", NULL}, "cushim: --offload \"on\" is not one of off|compile|always "
                                                           "(see cushim run --help)\n", 2},
        {{"run", "--offload=No", "--", "/bin/true", NULL}, "cushim: --offload \"No\" is not one of off|compile|always "
                                                           "(did you mean off? see cushim run --help)\n", 2},
        {{"run", "--log", "Warning", "--", "/bin/true", NULL}, "cushim: --log \"Warning\" is not one of "
                                                               "off|error|warn|info|debug (did you mean warn? see "
                                                               "cushim run --help)\n", 2},
        {{"run", "--compile-end", "graph_launch", "--", "/bin/true", NULL},
         "cushim: --compile-end \"graph_launch\" is not one of manual|graph-launch (did you mean graph-launch? see "
         "cushim run --help)\n", 2},
        /* phase: --help anywhere, "--" anywhere before its words, the word that is wrong named,
         * a phase written as an option offered as the word (an attack trial). */
        {{"phase", "1", "--phase", "run", NULL}, "cushim: unknown option \"--phase\" for phase (see cushim phase "
                                                 "--help)\n", 2},
        {{"phase", "1", "--phase=run", NULL}, "cushim: unknown option \"--phase=run\" for phase (did you mean run? "
                                              "see cushim phase --help)\n", 2},
        {{"phase", "1", "--Compile", NULL}, "cushim: unknown option \"--Compile\" for phase (did you mean compile? "
                                            "see cushim phase --help)\n", 2},
        {{"phase", "1", "--help=1", NULL}, "cushim: --help takes no value (got \"--help=1\")\n", 2},
        {{"phase", "1", "-5", NULL}, "cushim: \"-5\" is not a phase (expected compile or run)\n", 2},
        {{"phase", "1", "run", "extra", NULL}, "cushim: unexpected argument \"extra\" for phase (usage: cushim phase "
                                               "PID compile|run)\n", 2},
        {{"phase", "1", "--", "--run", NULL}, "cushim: \"--run\" is not a phase (did you mean run? expected compile "
                                              "or run)\n", 2},
        /* The top-level options as the commands' (an attack trial: "unknown option", or ignored). */
        {{"--version=1", NULL}, "cushim: --version takes no value (got \"--version=1\")\n", 2},
        {{"--version", "--bogus", NULL}, "cushim: unexpected argument \"--bogus\" after --version (it takes none)\n", 2},
        /* A long option with one dash or in capitals is offered as meant (an attack trial). */
        {{"ps", "-json", NULL}, "cushim: unknown option \"-json\" for ps (did you mean --json? see cushim ps --help)\n", 2},
        {{"run", "--SPILL", "--", "/bin/true", NULL}, "cushim: unknown option \"--SPILL\" for run (did you mean "
                                                      "--spill? see cushim run --help)\n", 2},
        {{"run", "--Device-Limit=1G", "--", "/bin/true", NULL}, "cushim: unknown option \"--Device-Limit=1G\" for run "
                                                                "(did you mean --device-limit? see cushim run --help)\n", 2},
        {{"reset-peak", "1", "-device", "0", NULL}, "cushim: unknown option \"-device\" for reset-peak (did you mean "
                                                    "--device? see cushim reset-peak --help)\n", 2},
        {{"gc", "--hlep", NULL}, "cushim: unknown option \"--hlep\" for gc (did you mean --help? see cushim gc --help)\n", 2},
        {{"gc", "--", "x", NULL}, "cushim: gc takes no arguments (got \"x\")\n", 2},
        {{"ps", "--", "--json", NULL}, "cushim: unexpected argument \"--json\" for ps (see cushim ps --help)\n", 2},
        {{"top", "-bn1", "--", "1", NULL}, "cushim: unexpected argument \"1\" for top (see cushim top --help)\n", 2},
        {{"phase", "run", NULL}, "cushim: phase needs a PID before the phase (usage: cushim phase PID "
                                 "compile|run)\n", 2},
        {{"phase", "abc", NULL}, "cushim: \"abc\" is not a process id (a number from 1 to 2147483647)\n", 2},
        {{"top", "--sort", "total", NULL}, "cushim: --sort \"total\" is not a column top sorts by (expected "
                                           "device-total, total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"phase", "1", "compil", NULL}, "cushim: \"compil\" is not a phase (did you mean compile? expected compile "
                                         "or run)\n", 2},
        {{"phase", "1", "xyz", NULL}, "cushim: \"xyz\" is not a phase (expected compile or run)\n", 2},
        {{"top", "--sort", "dev", NULL}, "cushim: --sort \"dev\" is not a column top sorts by (did you mean device-total? expected "
                                         "device-total, total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"top", "-s", "Total_Pek", NULL}, "cushim: -s \"Total_Pek\" is not a column top sorts by (did you mean total-peak? "
                                           "expected device-total, total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"top", "--sort", "bytes", NULL}, "cushim: --sort \"bytes\" is not a column top sorts by (expected device-total, "
                                           "total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"reset-peak", "1", "-5", NULL}, "cushim: unexpected argument \"-5\" for reset-peak (usage: cushim reset-peak "
                                          "PID [--device N])\n", 2},
        {{"top", "--sort", "peak", NULL}, "cushim: --sort \"peak\" is not a column top sorts by (did you mean "
                                          "total-peak? expected device-total, total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"top", "--sort", "limit", NULL}, "cushim: --sort \"limit\" is not a column top sorts by (expected "
                                           "device-total, total-peak, pinned, offloaded, graph-pool or pid)\n", 2},
        {{"reset-peak", "1", "2", NULL}, "cushim: unexpected argument \"2\" for reset-peak (usage: cushim reset-peak PID [--device N])\n", 2},
        {{"ps", "--jsn", NULL}, "cushim: unknown option \"--jsn\" for ps (did you mean --json? see cushim ps --help)\n", 2},
        {{"ps", "extra", NULL}, "cushim: unexpected argument \"extra\" for ps (usage: cushim ps [--json])\n", 2},
        {{"run", "--devcie-limit=1", "--", "/bin/true", NULL}, "cushim: unknown option \"--devcie-limit=1\" for run (did you "
                                                                "mean --device-limit? see cushim run --help)\n", 2},
        {{"run", "--report-format=json", "--", "/bin/true", NULL},
         "cushim: --report-format is the format of --report (each process's own report); the run's summary is "
         "text on stderr, or JSON with --json FILE\n", 2},
        /* Arguments are echoed on one line, their control characters escaped. */
        {{"stat", "12\n3", NULL}, "cushim: \"12\\n3\" is not a process id (a number from 1 to 2147483647)\n", 2},
        {{"stat", "--x\033[2J\xff", NULL}, "cushim: unknown option \"--x\\x1b[2J\\xff\" for stat (see cushim stat --help)\n", 2},
        /* Cut as every value in a message is, once past 120 bytes (a bad-input trial: 5000 digits
         * echoed); one line for a pid named twice; help of one command (a bad-input trial). */
        {{"stat", "1234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890", NULL},
         "cushim: \"123456789012345678901234567890123456789012345678901234567890...\" (130 bytes) is not a process id (a number from 1 to 2147483647)\n", 2},
        {{"help", "run", "extra", NULL}, "cushim: cushim help takes one command, not \"extra\" too (see cushim --help)\n", 2},
        {{"help", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", NULL},
         "cushim: no help for \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...\" (130 bytes): not a command (see cushim --help)\n", 2},
    };
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const char *argv[9] = {cushim_bin()};
        for (int a = 0; forms[k].args[a]; a++)
            argv[a + 1] = forms[k].args[a];
        run_cmd(&r, argv, NULL);
        cr_expect_eq(r.status, forms[k].status, "%s %s", forms[k].args[0], forms[k].args[1]);
        cr_expect_str_eq(r.err, forms[k].err, "%s %s", forms[k].args[0], forms[k].args[1]);
        run_free(&r);
    }
    /* A pid named twice: one line. The segment directory said is the environment's (the tests
     * run with a private CUSHIM_SEGMENT_DIR as well as without). */
    const char *segdir = getenv("CUSHIM_SEGMENT_DIR");
    char said_twice[900];
    snprintf(said_twice, sizeof said_twice, "cushim: no cushim process 2147483647 (no such process, no segment in %s)\n",
             segdir && segdir[0] ? segdir : "/dev/shm");
    const char *a_twice[] = {cushim_bin(), "stat", "2147483647", "2147483647", NULL};
    run_cmd(&r, a_twice, NULL);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.err, said_twice);
    run_free(&r);
    /* A boolean option alone is a switch. */
    const char *a8[] = {cushim_bin(), "run", "--quiet", "--spill", "--disable=0", "--", "sh", "-c",
                        "echo $CUSHIM_SPILL $CUSHIM_DISABLE", NULL};
    run_cmd(&r, a8, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "on 0\n");
    run_free(&r);
    const char *a7[] = {cushim_bin(), "run", "--json", "", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a7, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "refused before the program runs");
    cr_expect_str_eq(r.err, "cushim: --json needs a FILE\n");
    run_free(&r);
    /* A bad value typed as a flag is named by the flag and stops the run (the same value in the
     * environment only warns: a_child_that_sets_its_own_bad_value_reports_it). */
    const char *a6[] = {cushim_bin(), "run", "--offload-min", "foo", "--log=loud", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, a6, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program does not run");
    cr_expect_str_eq(r.err, "cushim: --log \"loud\" is not one of off|error|warn|info|debug (see cushim run --help)\n"
                            "cushim: --offload-min \"foo\" is not a size (a whole number of bytes, or with a unit K, M, G or T, binary, any case, as K, KB, KiB or Ki: e.g. 512M, 64MiB, 1Gi, 4096) "
                            "(see cushim run --help)\n");
    run_free(&r);
    /* An ordinal twice, or past 63, is said as such (found by a fresh-user trial: the generic text
     * was repeated). */
    const char *twice[] = {cushim_bin(), "run", "--device-limit=0:1G,0:2G", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, twice, NULL);
    cr_expect_eq(r.status, 2);
    /* ... naming the entry at fault (a fresh-user trial: not told which) */
    cr_expect_str_eq(r.err, "cushim: --device-limit \"0:1G,0:2G\" is not ORDINAL:SIZE,... naming each ordinal once: "
                            "the entry \"0:2G\" names an ordinal named before (see cushim run --help)\n");
    run_free(&r);
    const char *past[] = {cushim_bin(), "run", "--device-limit=1:1G,64:1G", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, past, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --device-limit \"1:1G,64:1G\" is not ORDINAL:SIZE,... with ordinals 0..63 "
                            "(cushim counts 64 devices): the entry \"64:1G\" names an ordinal above 63 (see cushim "
                            "run --help)\n");
    run_free(&r);
}

/* The end of the line that says a device limit below 1 MiB (common/config.c small_limit). */
#define SMALL_LIMIT_WHY_OF(n) ", below 1 MiB (a size without a unit is bytes: " n "GiB is " n " GiB, " n "B says " \
                              "bytes); taken as given: larger requests are refused\n"
#define SMALL_LIMIT_WHY SMALL_LIMIT_WHY_OF("8")
/* ... of 1024 bytes or more (not "1048575GiB is 1048575 GiB": an attack trial) */
#define SMALL_LIMIT_WHY_LARGE(n) ", below 1 MiB (a size without a unit is bytes: " n "B says bytes; units are K, M, " \
                                 "G and T); taken as given: larger requests are refused\n"
/* The same where every size had its unit (64K: meant as said, found by a docs check). */
#define SMALL_LIMIT_WHY_UNIT ", below 1 MiB; taken as given: larger requests are refused\n"

/* A device limit below 1 MiB is taken, and said once: a size without a unit is bytes (found by a
 * fresh-user trial: `--device-limit 8` made every cudaMalloc fail, with only "limit 8 B" in the
 * summary to tell why). As an option of cushim run, and as the variable under plain LD_PRELOAD. */
Test(settings, a_device_limit_below_a_mebibyte_is_said)
{
    struct run_result r;
    const char *flag[] = {cushim_bin(), "run", "--quiet", "--device-limit", "8", "--", program("rt_prog"), "malloc", NULL};
    run_cmd(&r, flag, sim_env(NULL));
    cr_expect_eq(r.status, 10, "the program's first cudaMalloc fails: it says so and exits 10");
    const char *said = "cushim: --device-limit \"8\" gives every device 8 bytes" SMALL_LIMIT_WHY;
    cr_expect(strncmp(r.err, said, strlen(said)) == 0 && strstr(r.err + 1, said) == NULL, "%s", r.err);
    run_free(&r);
    const char *env[] = {preload_env(), "CUSHIM_DEVICE_LIMIT=0:1GiB,1:64K", "SIMCUDA_DEVICE_COUNT=2", NULL};
    const char *plain[] = {program("rt_prog"), "peaks", NULL};
    run_cmd(&r, plain, sim_env(env));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_DEVICE_LIMIT=\"0:1GiB,1:64K\" gives device 1 64 KiB" SMALL_LIMIT_WHY_UNIT);
    run_free(&r);
    /* Exact sizes (not a rounded "1.00 MiB, below 1 MiB"), the devices named with theirs, and a
     * long value shown cut with its length (found by an attack trial). */
    static const char *const forms[][3] = {
        {"1048575", "every device 1048575 bytes", SMALL_LIMIT_WHY_LARGE("1048575")},
        {"0:8,1:512K", "device 0 8 bytes, device 1 512 KiB", SMALL_LIMIT_WHY},
        {"0:512K,1:8", "device 0 512 KiB, device 1 8 bytes", SMALL_LIMIT_WHY},
        {"1023KiB", "every device 1023 KiB", SMALL_LIMIT_WHY_UNIT},
        {"0:1G,1:1023KiB", "device 1 1023 KiB", SMALL_LIMIT_WHY_UNIT},
        /* The hint only for a small size without a unit: not for 0 (none), nor 2000000 (an
         * attack trial). */
        {"0:512K,1:2000000", "device 0 512 KiB", SMALL_LIMIT_WHY_UNIT},
        {"0:0,1:512K", "device 1 512 KiB", SMALL_LIMIT_WHY_UNIT},
        {"0:8,1:8,2:8,3:8,4:8", "device 0 8 bytes, device 1 8 bytes, device 2 8 bytes and 2 more devices",
         SMALL_LIMIT_WHY}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char lim[128], want[600];
        snprintf(lim, sizeof lim, "CUSHIM_DEVICE_LIMIT=%s", forms[i][0]);
        snprintf(want, sizeof want, "cushim: CUSHIM_DEVICE_LIMIT=\"%s\" gives %s%s", forms[i][0], forms[i][1], forms[i][2]);
        const char *e[] = {preload_env(), lim, NULL};
        const char *t[] = {"/bin/true", NULL};
        run_cmd(&r, t, sim_env(e));
        cr_expect_str_eq(r.err, want);
        run_free(&r);
    }
    char many[1024] = "", lim[1100];
    for (int i = 0; i < 64; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d:1048575", i ? "," : "", i);
    snprintf(lim, sizeof lim, "CUSHIM_DEVICE_LIMIT=%s", many);
    const char *e[] = {preload_env(), lim, NULL};
    const char *t[] = {"/bin/true", NULL};
    run_cmd(&r, t, sim_env(e));
    cr_expect_str_eq(r.err, "cushim: CUSHIM_DEVICE_LIMIT=\"0:1048575,1:1048575,2:1048575,3:1048575,4:1048575,"
                            "5:1048575,...\" (693 bytes) gives every device 1048575 bytes" SMALL_LIMIT_WHY_LARGE("1048575"));
    run_free(&r);
    /* Disabled: no budget, nothing said to be taken (an attack trial: "taken as given" and then
     * "no budget"). */
    const char *off[] = {preload_env(), "CUSHIM_DISABLE=1", "CUSHIM_DEVICE_LIMIT=8", "CUSHIM_OFFLOAD_MIN=64", NULL};
    run_cmd(&r, t, sim_env(off));
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    /* 1 MiB and more: nothing said. */
    const char *env2[] = {preload_env(), "CUSHIM_DEVICE_LIMIT=1MiB", NULL};
    run_cmd(&r, plain, sim_env(env2));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

/* An offload size written without a unit and below 1 MiB is taken, and said (found by a fresh-user
 * trial: `--offload-min 64` offloaded every request, silently; the default is 64MiB); with its
 * unit, 0, or 1 MiB and more: nothing said. */
Test(settings, an_offload_size_without_a_unit_below_a_mebibyte_is_said)
{
    struct run_result r;
    const char *flag[] = {cushim_bin(), "run", "--quiet", "--offload=always", "--offload-min", "64", "--",
                          program("rt_prog"), "malloc", NULL};
    run_cmd(&r, flag, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: --offload-min \"64\" is 64 bytes (a size without a unit is bytes: 64MiB is 64 "
                            "MiB, 64B says bytes); taken as given\n");
    run_free(&r);
    static const char *const forms[][2] = {
        {"CUSHIM_OFFLOAD_CACHE=4096", "cushim: CUSHIM_OFFLOAD_CACHE=\"4096\" is 4 KiB (a size without a unit is "
                                      "bytes: 4096B says bytes; units are K, M, G and T); taken as given\n"},
        {"CUSHIM_OFFLOAD_MIN=1023", "cushim: CUSHIM_OFFLOAD_MIN=\"1023\" is 1023 bytes (a size without a unit is "
                                    "bytes: 1023MiB is 1023 MiB, 1023B says bytes); taken as given\n"},
        {"CUSHIM_OFFLOAD_MIN=64B", ""}, {"CUSHIM_OFFLOAD_MIN=4k", ""}, {"CUSHIM_OFFLOAD_MIN=0", ""},
        {"CUSHIM_OFFLOAD_CACHE=1048576", ""}};
    /* Nothing offloaded: not said (an attack trial: "taken as given", then "it has no effect"). */
    const char *off[] = {preload_env(), "CUSHIM_OFFLOAD_MIN=64", "CUSHIM_OFFLOAD_CACHE=64", NULL};
    const char *t0[] = {"/bin/true", NULL};
    run_cmd(&r, t0, sim_env(off));
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const char *e[] = {preload_env(), "CUSHIM_OFFLOAD=always", forms[i][0], NULL};
        const char *t[] = {"/bin/true", NULL};
        run_cmd(&r, t, sim_env(e));
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.err, forms[i][1], "%s", forms[i][0]);
        run_free(&r);
    }
}

/* A run inside a run that sees the values the outer one checked leaves their problems unsaid: each
 * is said once (found by an attack trial and earlier: the warnings and bad values came once per
 * level); an inner run's own flag is still said. */
Test(settings, a_run_inside_a_run_says_the_environments_problems_once)
{
    struct run_result r;
    const char *env[] = {"CUSHIM_DEVICE_LIMIT=64K", "CUSHIM_FOO=1", "CUSHIM_REPORT_FORMAT=json", "CUSHIM_LOG=loud", NULL};
    const char *nested[] = {cushim_bin(), "run", "--quiet", "--", cushim_bin(), "run", "--quiet", "--",
                            cushim_bin(), "run", "--quiet", "--", "/bin/true", NULL};
    run_cmd(&r, nested, sim_env(env));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err,
                     "cushim: CUSHIM_LOG=\"loud\" is not one of off|error|warn|info|debug; using the default \"warn\"\n"
                     "cushim: CUSHIM_DEVICE_LIMIT=\"64K\" gives every device 64 KiB" SMALL_LIMIT_WHY_UNIT
                     "cushim: CUSHIM_FOO is not a cushim variable (see `cushim run --help`); ignored\n"
                     "cushim: CUSHIM_REPORT_FORMAT is set, and CUSHIM_REPORT is not: it has no effect (the run's "
                     "summary is text on stderr, or JSON with --json FILE)\n");
    run_free(&r);
    const char *inner_flag[] = {cushim_bin(), "run", "--quiet", "--", cushim_bin(), "run", "--quiet",
                                "--device-limit", "8", "--", "/bin/true", NULL};
    const char *env2[] = {"CUSHIM_DEVICE_LIMIT=64K", NULL};
    run_cmd(&r, inner_flag, sim_env(env2));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err,
                     "cushim: CUSHIM_DEVICE_LIMIT=\"64K\" gives every device 64 KiB" SMALL_LIMIT_WHY_UNIT
                     "cushim: --device-limit \"8\" gives every device 8 bytes" SMALL_LIMIT_WHY);
    run_free(&r);
}

/* A value that is an option ("--json --quiet") is refused, not taken as a file named --quiet
 * (found by an attack helper); name=--VALUE still gives such a value. */
Test(settings, an_option_is_not_taken_as_a_value)
{
    struct run_result r;
    const char *a1[] = {cushim_bin(), "run", "--json", "--quiet", "--", "/bin/true", NULL};
    run_cmd(&r, a1, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --json needs a value, not the option \"--quiet\" (for a value that starts "
                            "with --, write --json=--quiet)\n");
    run_free(&r);
    const char *a2[] = {cushim_bin(), "run", "--report", "--json", "x.json", "--", "/bin/true", NULL};
    run_cmd(&r, a2, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --report needs a value, not the option \"--json\" (for a value that starts "
                            "with --, write --report=--json)\n");
    run_free(&r);
    const char *a3[] = {cushim_bin(), "stat", "--output", "--json", NULL};
    run_cmd(&r, a3, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --output needs a value, not the option \"--json\" (for a value that starts "
                            "with --, write --output=--json)\n");
    run_free(&r);
    /* A short option too (an earlier trial: `--log-file -h` wrote a file named -h); a number is
     * still the value's to judge. */
    const char *a4[] = {cushim_bin(), "run", "--log-file", "-h", "--", "/bin/true", NULL};
    run_cmd(&r, a4, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: --log-file needs a value, not the option \"-h\" (for a value that starts "
                            "with -, write --log-file=-h)\n");
    run_free(&r);
    const char *a5[] = {cushim_bin(), "stat", "--json", "-n", "-1", NULL};
    run_cmd(&r, a5, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: -n \"-1\" is not a whole number of times, 1 or more\n");
    run_free(&r);
}

Test(settings, help_lists_every_variable_with_its_default)
{
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--help", NULL};
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0);
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        const struct cushim_option_info *o = &cushim_option_table[i];
        if (strncmp(o->variable, "CUSHIM_RUN_", 11) == 0)
            continue;
        char line[256];
        snprintf(line, sizeof line, "%s", o->variable);
        cr_expect(strstr(r.out, line) != NULL, "--help lacks %s", o->variable);
        /* Its own line's default: "  --flag  VARIABLE  default VALUE" (before, any occurrence of
         * the value anywhere passed; found by a test audit helper). */
        snprintf(line, sizeof line, " %-22s default %s\n", o->variable, *o->def ? o->def : "(empty)");
        cr_expect(strstr(r.out, line) != NULL, "--help lacks \"%s\"", line);
    }
    run_free(&r);
}

/* `cushim help help` is the general usage (before: "no help for "help": not a command", exit 2). */
Test(settings, help_help_is_the_general_usage)
{
    const char *argv[] = {cushim_bin(), "help", "help", NULL};
    struct run_result r;
    run_cmd(&r, argv, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strncmp(r.out, "usage: cushim COMMAND [ARGS]", 28) == 0, "%s", r.out);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    /* A command's help however asked (found by a fresh-user trial and an attack trial: `cushim
     * --help run` was the general usage, `phase PID run --help` "takes no value"). */
    static const char *const asked[][5] = {{"--help", "run", NULL},       {"-h", "phase", NULL},
                                           {"phase", "1", "run", "--help", NULL}, {"phase", "1", "-h", NULL},
                                           {"reset-peak", "1", "--help", NULL}};
    static const char *const usage[] = {"usage: cushim run ", "usage: cushim phase PID compile|run\n",
                                        "usage: cushim phase PID compile|run\n", "usage: cushim phase PID compile|run\n",
                                        "usage: cushim reset-peak PID [--device N]\n"};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        const char *a[6] = {cushim_bin()};
        for (int k = 0; asked[i][k]; k++)
            a[k + 1] = asked[i][k];
        run_cmd(&r, a, NULL);
        cr_expect_eq(r.status, 0, "%s %s: %s", asked[i][0], asked[i][1], r.err);
        cr_expect(strncmp(r.out, usage[i], strlen(usage[i])) == 0, "%s %s: %s", asked[i][0], asked[i][1], r.out);
        run_free(&r);
    }
}

/* argv run with env exits with `status`, its stderr starting with `said`. */
static void expect_err_starts(const char *const *argv, const char *const *env, int status, const char *said)
{
    struct run_result r;
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, status, "%s: %s", argv[1], r.err);
    cr_expect(strncmp(r.err, said, strlen(said)) == 0, "%s: %s", argv[1], r.err);
    run_free(&r);
}

/* A flag given twice with another value: the last is used, and said (found by fresh-user trials:
 * silently); the same value twice says nothing. */
Test(settings, a_flag_given_twice_is_said)
{
    char a[700], b[700];
    snprintf(a, sizeof a, "--json=%s/twice-a.json", test_dir());
    snprintf(b, sizeof b, "%s/twice-b.json", test_dir());
    /* (--disable=0 then --disable=off, --log=info then INFO: one value two ways, not said; reviews) */
    const char *argv[] = {cushim_bin(), "run", "--quiet", a, "--json", b, "--device-limit", "1GiB", "--device-limit=2GiB",
                          "--spill", "--spill=0", "--log=warn", "--log=WARN", "--disable=0", "--disable=off", "--",
                          "/bin/echo", "ran", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "ran\n");
    char want[2000];
    snprintf(want, sizeof want, "cushim: --json given twice: \"%s\" replaces \"%s\"\n"
             "cushim: --device-limit given twice: \"2GiB\" replaces \"1GiB\"\n"
             "cushim: --spill given twice: \"0\" replaces \"on\"\n", b, a + strlen("--json="));
    cr_expect_str_eq(r.err, want);
    cr_expect_eq(access(b, F_OK), 0, "the last --json is written");
    cr_expect_neq(access(a + strlen("--json="), F_OK), 0, "the first is not");
    run_free(&r);
    /* The other commands too (found by a fresh-user trial and an attack trial: silently), also
     * between a short and a long name of one option; the same value twice says nothing. */
    const char *segdir = fresh_dir("seg-twice");
    char seg[700], out1[700], out2[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(out1, sizeof out1, "%s/twice-1.txt", test_dir());
    snprintf(out2, sizeof out2, "%s/twice-2.txt", test_dir());
    const char *env[] = {seg, NULL};
    /* One value written two ways is not said, as in `cushim run`: -n1 then 01, pinned then PINNED,
     * 0.2 then 0.20 (an earlier trial: compared as strings, "given twice"). */
    const char *top[] = {cushim_bin(), "top", "-b", "-n1", "--iterations=01", "-s", "pid", "--sort", "pinned",
                         "--sort=PINNED", "-d", "0.1", "--interval", "0.2", "-d0.20", NULL};
    /* Named by its long name, whichever was typed (an attack trial: "-d given twice", given once). */
    run_cmd(&r, top, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: --sort given twice: \"pinned\" replaces \"pid\"\n"
                            "cushim: --interval given twice: \"0.2\" replaces \"0.1\"\n");
    run_free(&r);
    /* Typed alike both times, the option is named as typed (a fresh-user trial: "--iterations
     * given twice" of two -n). */
    const char *top_n[] = {cushim_bin(), "top", "-b", "-n1", "-n", "2", "-s", "pid", "-s", "pinned", NULL};
    run_cmd(&r, top_n, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "cushim: -n given twice: \"2\" replaces \"1\"\ncushim: -s given twice: \"pinned\" replaces "
                            "\"pid\"\n");
    run_free(&r);
    const char *stat[] = {cushim_bin(), "stat", "--output", out1, "--output", out2, "--interval", "0.1", "-d", "0.2",
                          "-n1", NULL};
    snprintf(want, sizeof want, "cushim: --output given twice: \"%s\" replaces \"%s\"\n"
             "cushim: --interval given twice: \"0.2\" replaces \"0.1\"\n", out2, out1);
    expect_err_starts(stat, env, 0, want);
    const char *reset[] = {cushim_bin(), "reset-peak", "--device", "0", "--device=1", "--device", "01", "2147483647",
                           NULL};
    expect_err_starts(reset, env, 1, "cushim: --device given twice: \"1\" replaces \"0\"\ncushim: no cushim process "
                                     "2147483647");
    const char *serve[] = {cushim_bin(), "serve", "--listen", "127.0.0.1:1", "--listen", ":x", NULL};
    expect_err_starts(serve, env, 2, "cushim: --listen given twice: \":x\" replaces \"127.0.0.1:1\"\ncushim: "
                                     "--listen needs");
}

/* A mistyped top-level option is said as an option, not a command (found by a fresh-user trial:
 * `cushim --versio` was an "unknown command"); a mistyped command stays one. */
#define EXPECTED_COMMANDS "run, ps, stat, top, reset-peak, phase, gc, serve, help)\n"
/* What a mistyped word before any command gets: %s the word, %s the hint. */
#define TOP_OPTION "cushim: unknown option \"%s\" (%scushim takes --help or --version before a command: " EXPECTED_COMMANDS
#define TOP_COMMAND "cushim: unknown command \"%s\" (%sexpected one of " EXPECTED_COMMANDS
#define NO_HELP "cushim: no help for \"%s\": not a command (%ssee cushim --help)\n" /* cushim help WORD */

Test(settings, an_unknown_option_or_command_before_any_command)
{
    struct run_result r;
    const char *version[] = {cushim_bin(), "--version", NULL};
    run_cmd(&r, version, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "cushim " CUSHIM_VERSION "\n");
    run_free(&r);
    /* Found by fresh-user trials and a docs check: `cushim stats`, `cushim version`, -v, --hlp and
     * `help version` got no hint; -V is no one letter of ours. */
    static const struct {
        const char *format, *word, *hint;
    } words[] = {
        {TOP_OPTION, "--versio", "did you mean --version? "}, {TOP_OPTION, "-v", "did you mean --version? "},
        {TOP_OPTION, "--hlp", "did you mean --help? "},       {TOP_OPTION, "-V", ""},
        {TOP_OPTION, "--frobnicate", ""},                     {TOP_COMMAND, "stt", "did you mean stat? "},
        {TOP_OPTION, "-version", "did you mean --version? "}, {TOP_OPTION, "-help", "did you mean --help? "},
        {TOP_OPTION, "--VERSION", "did you mean --version? "},
        {TOP_COMMAND, "stats", "did you mean stat? "},        {TOP_COMMAND, "version", "did you mean --version? "},
        {TOP_COMMAND, "reset_peak", "did you mean reset-peak? "}, {TOP_COMMAND, "server", "did you mean serve? "},
        {TOP_COMMAND, "STAT", "did you mean stat? "},         {TOP_COMMAND, "st", "did you mean stat? "},
        {TOP_COMMAND, "res", "did you mean reset-peak? "},    {TOP_COMMAND, "frobnicate", ""},
        {TOP_COMMAND, "s", ""}, /* stat or serve (not ps, one edit off: an attack trial) */
        {NO_HELP, "version", "did you mean --version? "},     {NO_HELP, "stats", "did you mean stat? "}};
    /* And what it offers works: `cushim help --version` (an attack trial: "not a command"). */
    const char *help_version[] = {cushim_bin(), "help", "--version", NULL};
    run_cmd(&r, help_version, NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "cushim " CUSHIM_VERSION "\n");
    run_free(&r);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const char *help[] = {cushim_bin(), "help", words[i].word, NULL};
        const char *alone[] = {cushim_bin(), words[i].word, NULL};
        char want[300];
        snprintf(want, sizeof want, words[i].format, words[i].word, words[i].hint);
        run_cmd(&r, strcmp(words[i].format, NO_HELP) == 0 ? help : alone, NULL);
        cr_expect_eq(r.status, 2, "%s", words[i].word);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
    }
    /* An invisible character is shown: "stat" followed by U+200B is not "stat" (and is offered it). */
    const char *zw[] = {cushim_bin(), "stat\xe2\x80\x8b", NULL};
    run_cmd(&r, zw, NULL);
    cr_expect_str_eq(r.err, "cushim: unknown command \"stat\\xe2\\x80\\x8b\" (did you mean stat? expected one of "
                            EXPECTED_COMMANDS);
    run_free(&r);
}

Test(settings, bad_configuration_value_is_one_line_and_the_program_runs)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_LOG=loud", NULL};
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect(strstr(r.err, "cushim: CUSHIM_LOG=\"loud\" is not one of off|error|warn|info|debug; "
                            "using the default \"warn\"\n") == r.err, "%s", r.err);
    run_free(&r);

    /* With plain LD_PRELOAD, the shim itself reports it, once per process. */
    const char *extra2[] = {preload_env(), "CUSHIM_OFFLOAD_MIN=12XB", NULL};
    const char *argv2[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv2, sim_env(extra2));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_OFFLOAD_MIN=\"12XB\" is not a size (a whole number of "
                            "bytes, or with a unit K, M, G or T, binary, any case, as K, KB, KiB or Ki: e.g. "
                            "512M, 64MiB, 1Gi, 4096); using the default \"64MiB\"\n");
    run_free(&r);
}

Test(settings, a_child_that_sets_its_own_bad_value_reports_it)
{
    struct run_result r;
    /* cushim run checked the values it was given; a process under it that sets another value
     * is the only one that can report it. */
    const char *argv[] = {"sh", "-c", "CUSHIM_SPILL=garbage /bin/echo ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(NULL), &r), 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_SPILL=\"garbage\" is not a boolean "
                            "(1/0/true/false/yes/no/on/off); using the default \"off\"\n"
                            "cushim: no CUDA memory activity in `sh -c CUSHIM_SPILL=garbage /bin/echo ran` "
                            "or its descendants (none allocated, or CUDA did not start)\n");
    run_free(&r);
    /* The launcher's own bad value is said once, not again by each process under it. */
    const char *extra[] = {"CUSHIM_SPILL=garbage", NULL};
    const char *argv2[] = {"sh", "-c", "/bin/echo ran; /bin/echo again", NULL};
    cr_expect_eq(run_status(argv2, sim_env(extra), &r), 0);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_SPILL=\"garbage\" is not a boolean "
                            "(1/0/true/false/yes/no/on/off); using the default \"off\"\n"
                            "cushim: no CUDA memory activity in `sh -c /bin/echo ran; /bin/echo again` "
                            "or its descendants (none allocated, or CUDA did not start)\n");
    run_free(&r);
}

/* Values are echoed on one line whatever they hold: a newline in a value cannot forge a second
 * message, an escape sequence cannot drive the terminal. */
Test(settings, bad_values_are_echoed_escaped)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG=warn\ncushim: all good", "CUSHIM_DEVICE_LIMIT=1G\033[2J\xe9",
                           "CUSHIM_X\033[31mRED\nFAKE=1", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_LOG=\"warn\\ncushim: all good\" is not one of off|error|warn|info|debug "
                            "(did you mean warn?); using the default \"warn\"\n"
                            "cushim: CUSHIM_DEVICE_LIMIT=\"1G\\x1b[2J\\xe9\" is not a size (a whole number of "
                            "bytes, or with a unit K, M, G or T, binary) nor ORDINAL:SIZE,... with "
                            "ordinals 0..63, no spaces (e.g. 20GiB for every device, or 0:20GiB,1:10GiB); "
                            "using the default (none)\n"
                            "cushim: CUSHIM_X\\x1b[31mRED\\nFAKE is not a cushim variable (see `cushim run --help`); "
                            "ignored\n");
    run_free(&r);
}

Test(settings, bad_values_are_said_in_the_log_file)
{
    /* CUSHIM_LOG_FILE is where the shim's lines go, the ones about bad values too. */
    const char *dir = fresh_dir("bad-value-log");
    char lf[900], log[800];
    snprintf(log, sizeof log, "%s/shim.log", dir);
    snprintf(lf, sizeof lf, "CUSHIM_LOG_FILE=%s", log);
    const char *extra[] = {preload_env(), lf, "CUSHIM_OFFLOAD_MIN=12XB", NULL};
    const char *argv[] = {program("rt_prog"), "malloc", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    char *text = slurp(log);
    cr_expect_str_eq(text, "cushim: CUSHIM_OFFLOAD_MIN=\"12XB\" is not a size (a whole number of bytes, or with a unit K, M, G or T, binary, any case, as K, KB, KiB or Ki: e.g. 512M, 64MiB, 1Gi, 4096); "
                           "using the default \"64MiB\"\n");
    free(text);
    run_free(&r);
}

Test(settings, log_off_silences_bad_values_in_the_shim)
{
    struct run_result r;
    const char *extra[] = {preload_env(), "CUSHIM_LOG=off", "CUSHIM_SPILL=garbage", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

Test(settings, an_overlong_path_is_named_with_its_limit)
{
    struct run_result r;
    static char value[5100], var[5200];
    memset(value, 'a', 5000);
    value[0] = '/';
    snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", value);
    const char *extra[] = {var, NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    char want[400];
    snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%.60s...\" (5000 bytes) is not a string "
             "of at most 1023 bytes; using the default \"/dev/shm\"\n"
             "cushim: no CUDA memory activity in `/bin/echo ran` or its descendants (none allocated, or CUDA did not start)\n", value);
    cr_expect_str_eq(r.err, want, "one line, from cushim run only; got:\n%s", r.err);
    run_free(&r);
}

Test(settings, an_empty_or_relative_segment_dir_is_the_default)
{
    /* The shim and the CLI must agree on the directory: a relative value would put segments
     * where `cushim ps` does not look; an empty one is no value, like every empty CUSHIM_
     * variable (the default, silently). */
    struct run_result r;
    static const char *values[] = {"", "relative/dir"};
    for (int i = 0; i < 2; i++) {
        char var[64], want[300] = "";
        snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", values[i]);
        const char *extra[] = {preload_env(), var, "CUSHIM_REPORT=/dev/null", NULL};
        const char *argv[] = {"/bin/echo", "ran", NULL};
        run_cmd(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 0);
        cr_expect_str_eq(r.out, "ran\n");
        if (*values[i])
            snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\" is not an absolute directory "
                     "path; using the default \"/dev/shm\"\n", values[i]);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
        /* The CLI refuses to look anywhere else (gc would remove files there): a usage error. */
        const char *ps[] = {cushim_bin(), "ps", NULL};
        const char *env2[] = {var, NULL};
        run_cmd(&r, ps, env2);
        if (*values[i]) {
            cr_expect_eq(r.status, 2);
            cr_expect_str_eq(r.out, "");
            snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\" is not an absolute directory path\n",
                     values[i]);
        }
        /* (Empty: the default directory, where other tests' processes may be live, or none: no
         * word about the variable either way.) */
        if (*values[i])
            cr_expect_str_eq(r.err, want, "the CLI says why");
        else
            cr_expect_eq(strstr(r.err, "CUSHIM_SEGMENT_DIR"), NULL, "%s", r.err);
        run_free(&r);
    }
    /* Empty values of other kinds: the default, silently. */
    const char *empties[] = {preload_env(), "CUSHIM_LOG=", "CUSHIM_SPILL=", "CUSHIM_OFFLOAD=", "CUSHIM_OFFLOAD_MIN=",
                             "CUSHIM_PHASE=", "CUSHIM_REPORT_FORMAT=", "CUSHIM_DEVICE_LIMIT=", NULL};
    const char *argv[] = {"/bin/echo", "ran", NULL};
    run_cmd(&r, argv, sim_env(empties));
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
}

/* The CLI reads segments from one place: a CUSHIM_SEGMENT_DIR it cannot use stops every command
 * (exit 2) before it reads, or removes, anything anywhere else. */
Test(settings, a_bad_segment_dir_stops_every_reading_command)
{
    struct run_result r;
    static const struct {
        const char *value, *err;
    } bad[] = {
        {"rel", "cushim: CUSHIM_SEGMENT_DIR=\"rel\" is not an absolute directory path\n"},
        {"/nonexistent-dir", "cushim: cannot open the segment directory \"/nonexistent-dir\" (CUSHIM_SEGMENT_DIR): "
                             "No such file or directory\n"},
        {"/x\033]0;t\007", "cushim: cannot open the segment directory \"/x\\x1b]0;t\\x07\" (CUSHIM_SEGMENT_DIR): "
                          "No such file or directory\n"},
    };
    static const char *commands[][4] = {
        {"gc"}, {"ps"}, {"stat"}, {"top", "--batch", "--iterations=1"}, {"serve", "--listen", "127.0.0.1:0"},
        {"reset-peak", "1"}, {"phase", "1", "run"},
        {"stat", "--output", "-h"}, /* a value, not a help (an attack trial: the check was skipped) */
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char var[128];
        snprintf(var, sizeof var, "CUSHIM_SEGMENT_DIR=%s", bad[b].value);
        const char *env[] = {var, NULL};
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
            const char *argv[6] = {cushim_bin()};
            for (int a = 0; a < 4 && commands[c][a]; a++)
                argv[a + 1] = commands[c][a];
            run_cmd(&r, argv, env);
            cr_expect_eq(r.status, 2, "%s with %s", commands[c][0], bad[b].value);
            cr_expect_str_eq(r.out, "", "%s with %s", commands[c][0], bad[b].value);
            cr_expect_str_eq(r.err, bad[b].err, "%s with %s", commands[c][0], bad[b].value);
            run_free(&r);
        }
    }
    /* Help needs no directory, also after a switch (a review: --json was taken as --output is,
     * a value, and ps --json --help said the directory). */
    const char *env[] = {"CUSHIM_SEGMENT_DIR=rel", NULL};
    static const char *const helps[][4] = {{"gc", "--help"}, {"ps", "--json", "--help"}, {"stat", "--json", "-h"}};
    for (size_t h = 0; h < sizeof helps / sizeof helps[0]; h++) {
        const char *help[5] = {cushim_bin(), helps[h][0], helps[h][1], helps[h][2], NULL};
        run_cmd(&r, help, env);
        cr_expect_eq(r.status, 0, "%s %s: %s", helps[h][0], helps[h][1], r.err);
        cr_expect(strncmp(r.out, "usage: cushim ", 14) == 0, "%s", r.out);
        run_free(&r);
    }
}

/* A segment directory nothing can be created in, whose mode lets root through access(2): before,
 * the program ran uncounted by ps/stat/top; now the run stops before it (exit 2). */
Test(settings, a_segment_directory_root_cannot_create_in_stops_the_run)
{
    static const char *const dirs[] = {"CUSHIM_SEGMENT_DIR=/proc", "CUSHIM_SEGMENT_DIR=/sys"};
    for (int k = 0; k < 2; k++) {
        const char *extra[] = {dirs[k], NULL};
        const char *argv[] = {cushim_bin(), "run", "--", "/bin/echo", "ran", NULL};
        struct run_result r;
        run_cmd(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 2);
        cr_expect_str_eq(r.out, "");
        char want[200];
        snprintf(want, sizeof want, "cushim: CUSHIM_SEGMENT_DIR=\"%s\": cannot create files in %s (",
                 dirs[k] + 19, dirs[k] + 19);
        cr_expect(strncmp(r.err, want, strlen(want)) == 0 && strchr(r.err, '\n') == r.err + strlen(r.err) - 1,
                  "%s", r.err);
        run_free(&r);
    }
}

/* Offload settings in the environment with offload off have no effect: said, and the run goes
 * on (as options they are usage errors: usage_errors_exit_2). Found by a fresh-user trial; so was
 * CUSHIM_REPORT_FORMAT without CUSHIM_REPORT, which was passed over without a word. */
Test(settings, offload_settings_without_offload_are_said)
{
    struct run_result r;
    const char *env[] = {"CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_OFFLOAD_CACHE=1GiB", "CUSHIM_OFFLOAD", "CUSHIM_SPILL",
                         "CUSHIM_REPORT_FORMAT=json", "CUSHIM_REPORT", NULL};
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ran\n");
    cr_expect_str_eq(r.err, "cushim: CUSHIM_REPORT_FORMAT is set, and CUSHIM_REPORT is not: it has no effect "
                            "(the run's summary is text on stderr, or JSON with --json FILE)\n"
                            "cushim: CUSHIM_OFFLOAD_MIN is set, and offload is off (CUSHIM_OFFLOAD): it has no "
                            "effect\ncushim: CUSHIM_OFFLOAD_CACHE is set, and nothing is offloaded (CUSHIM_OFFLOAD "
                            "and CUSHIM_SPILL are off): it has no effect\n");
    run_free(&r);
}

/* A cushim moved away from its library names the directories it looked in, the one beside
 * itself first (found by a fresh-user trial: only the configured install directory was named). */
Test(settings, a_moved_cushim_names_where_it_looked_for_the_library)
{
    const char *dir = fresh_dir("moved-bin");
    char copy[700], cmd[1500];
    snprintf(copy, sizeof copy, "%s/cushim", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", cushim_bin(), copy);
    cr_assert_eq(system(cmd), 0);
    struct run_result r;
    const char *env[] = {"CUSHIM_LIBRARY", NULL};
    const char *argv[] = {copy, "run", "--", "true", NULL};
    run_cmd(&r, argv, env);
    cr_expect_eq(r.status, 2);
    char want[1600];
    snprintf(want, sizeof want, "cushim: cannot find libcushim.so (looked in %s/%s, the build tree's shim/ "
             "and %s); set CUSHIM_LIBRARY to its path\n", dir, CUSHIM_BINDIR_TO_LIBDIR, CUSHIM_INSTALL_LIBDIR);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    unlink(copy);
}

Test(settings, cushim_library_names_the_preloaded_library)
{
    struct run_result r;
    char lib[1200];
    snprintf(lib, sizeof lib, "CUSHIM_LIBRARY=%s", shim_lib());
    const char *extra[] = {lib, "LD_PRELOAD", NULL};
    const char *argv[] = {"sh", "-c", "echo $LD_PRELOAD", NULL};
    cr_expect_eq(run_status(argv, sim_env(extra), &r), 0);
    char want[1200];
    snprintf(want, sizeof want, "%s\n", shim_lib());
    cr_expect_str_eq(r.out, want);
    cr_expect(strstr(r.err, "not a cushim variable") == NULL, "a known variable:\n%s", r.err);
    run_free(&r);
    const char *bad[] = {cushim_bin(), "run", "--library", "/nonexistent/libcushim.so", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, bad, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "");
    cr_expect_str_eq(r.err, "cushim: --library \"/nonexistent/libcushim.so\": No such file or directory; "
                            "expected the path of the shim library, libcushim.so\n");
    run_free(&r);
    /* A relative path is taken from the current directory, and the message says which. */
    const char *rel[] = {cushim_bin(), "run", "--library", "no/such/libcushim.so", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, rel, NULL);
    char cwd[1024], want_rel[1400];
    cr_assert(getcwd(cwd, sizeof cwd));
    snprintf(want_rel, sizeof want_rel, "cushim: --library \"no/such/libcushim.so\": No such file or directory "
             "(relative to %s); expected the path of the shim library, libcushim.so\n", cwd);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, want_rel);
    run_free(&r);
    /* Another library, or a file that is none, would run the program uncounted: refused. */
    char other_lib[1200], want_other[1600];
    snprintf(other_lib, sizeof other_lib, "--library=%s/libcuda.so.1", sim_libdir());
    const char *other[] = {cushim_bin(), "run", other_lib, "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, other, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.out, "", "the program did not run");
    snprintf(want_other, sizeof want_other, "cushim: --library \"%s/libcuda.so.1\" is not libcushim.so (an ELF "
             "shared object without cushim's marker); expected the path of the shim library, e.g. "
             "build/shim/libcushim.so\n", sim_libdir());
    cr_expect_str_eq(r.err, want_other);
    run_free(&r);
    /* A FIFO is refused at once (never opened for a blocking read); copies of the library that
     * ld.so could not preload (cut short, another word size) are refused too. */
    const char *dir = fresh_dir("libraries");
    static const struct {
        const char *name, *why;
    } copies[] = {
        {"fifo", "not a regular file"},
        {"cut.so", "an ELF shared object cut short: a segment lies past its end"},
        {"class32.so", "an ELF file of another word size or byte order than this cushim"},
    };
    char *lib_bytes = NULL;
    size_t lib_len = 0;
    FILE *lf = fopen(shim_lib(), "rb");
    cr_assert(lf);
    FILE *mem = open_memstream(&lib_bytes, &lib_len);
    int ch;
    while ((ch = fgetc(lf)) != EOF)
        fputc(ch, mem);
    fclose(mem);
    fclose(lf);
    for (size_t k = 0; k < sizeof copies / sizeof copies[0]; k++) {
        char path[800], flag[820], want_copy[1400];
        snprintf(path, sizeof path, "%s/%s", dir, copies[k].name);
        if (k == 0) {
            cr_assert_eq(mkfifo(path, 0600), 0);
        } else {
            FILE *out = fopen(path, "wb");
            if (k == 1) {
                /* Cut just past the marker, inside the loaded segment that holds it. */
                const char *m = memmem(lib_bytes, lib_len, "cushim-preload-library ", 23);
                cr_assert(m);
                fwrite(lib_bytes, 1, (size_t)(m - lib_bytes) + 64, out);
            } else {
                lib_bytes[4] = 1; /* EI_CLASS = ELFCLASS32 */
                fwrite(lib_bytes, 1, lib_len, out);
            }
            fclose(out);
        }
        snprintf(flag, sizeof flag, "--library=%s", path);
        const char *try[] = {"timeout", "10", cushim_bin(), "run", flag, "--", "/bin/echo", "ran", NULL};
        run_cmd(&r, try, NULL);
        cr_expect_eq(r.status, 2, "%s", copies[k].name);
        cr_expect_str_eq(r.out, "", "%s: the program did not run", copies[k].name);
        snprintf(want_copy, sizeof want_copy, "cushim: --library \"%s\" is not libcushim.so (%s); expected the path "
                 "of the shim library, e.g. build/shim/libcushim.so\n", path, copies[k].why);
        cr_expect_str_eq(r.err, want_copy);
        run_free(&r);
    }
    free(lib_bytes);
    char env[64] = "CUSHIM_LIBRARY=/etc/hostname";
    const char *extra3[] = {env, NULL};
    const char *argv3[] = {cushim_bin(), "run", "--", "/bin/echo", "ran", NULL};
    run_cmd(&r, argv3, sim_env(extra3));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_LIBRARY=\"/etc/hostname\" is not libcushim.so (not an ELF shared object); "
                            "expected the path of the shim library, e.g. build/shim/libcushim.so\n");
    run_free(&r);
    /* Longer than a file name can be: one line, the value cut as every value in a message is (a
     * bad-input trial: a second line said the default was used, and the whole value was echoed). */
    char long_env[1300] = "CUSHIM_LIBRARY=/tmp/";
    memset(long_env + strlen(long_env), 'a', 1100);
    const char *extra4[] = {long_env, NULL};
    run_cmd(&r, argv3, sim_env(extra4));
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: CUSHIM_LIBRARY=\"/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" "
                            "(1105 bytes): File name too long; expected the path of the shim library, libcushim.so\n");
    run_free(&r);
}

/* ld.so splits LD_PRELOAD at spaces and colons: a shim under "My Projects" preloaded nothing, and
 * the run said it saw no CUDA activity and exited 0. Now it is refused before anything runs. */
Test(settings, a_library_path_ld_preload_cannot_hold_is_refused)
{
    static const char *const dirs[] = {"my proj", "a:b"};
    static const char *const what[] = {"space", "colon"};
    for (int k = 0; k < 2; k++) {
        char dir[700], copy[800], cmd[2000], flag[820], want[1400];
        snprintf(dir, sizeof dir, "%s/%s", fresh_dir("odd-lib"), dirs[k]);
        snprintf(copy, sizeof copy, "%s/libcushim.so", dir);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", dir, shim_lib(), copy);
        cr_assert_eq(system(cmd), 0);
        snprintf(flag, sizeof flag, "--library=%s", copy);
        const char *argv[] = {cushim_bin(), "run", flag, "--", "/bin/echo", "ran", NULL};
        struct run_result r;
        run_cmd(&r, argv, sim_env(NULL));
        cr_expect_eq(r.status, 2);
        cr_expect_str_eq(r.out, "", "the program did not run");
        snprintf(want, sizeof want, "cushim: the shim library's path \"%s\" has a %s, which LD_PRELOAD "
                 "cannot hold (the loader splits its list there); put cushim (or a copy of libcushim.so, "
                 "given with --library) under a path without spaces or colons; nothing was run\n",
                 copy, what[k]);
        cr_expect_str_eq(r.err, want);
        run_free(&r);
    }
}
