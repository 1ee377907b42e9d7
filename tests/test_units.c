/* Units, options table and configuration parsing (common/). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/jsonw.h"
#include "common/procinfo.h"
#include "common/snapshot.h"
#include "common/text.h"
#include "common/units.h"
#include "harness.h"

Test(units, sizes)
{
    uint64_t v;
    cr_expect_eq(cushim_parse_size("4096", &v), 0);
    cr_expect_eq(v, 4096);
    cr_expect_eq(cushim_parse_size("512M", &v), 0);
    cr_expect_eq(v, 512ull << 20);
    cr_expect_eq(cushim_parse_size("64MiB", &v), 0);
    cr_expect_eq(v, 64ull << 20);
    cr_expect_eq(cushim_parse_size("1g", &v), 0);
    cr_expect_eq(v, 1ull << 30);
    cr_expect_eq(cushim_parse_size("3Gi", &v), 0, "Kubernetes' spelling");
    cr_expect_eq(v, 3ull << 30);
    cr_expect_eq(cushim_parse_size("2TB", &v), 0);
    cr_expect_eq(v, 2ull << 40);
    cr_expect_eq(cushim_parse_size("0", &v), 0);
    cr_expect_eq(v, 0);
    const char *bad[] = {"", "M", "12XB", "1.5G", " 1G", "1G ", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(cushim_parse_size(bad[i], &v), -1, "\"%s\" accepted", bad[i]);
    /* Sizes, but 2^64 bytes or more: told apart, so the message can say "too large". */
    const char *huge[] = {"18446744073709551616", "99999999999999999999", "17179869184T", "16777216T"};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
        cr_expect_eq(cushim_parse_size(huge[i], &v), -2, "\"%s\"", huge[i]);
    cr_expect_eq(cushim_parse_size("16777215T", &v), 0);
    cr_expect_eq(v, 16777215ull << 40);
    cr_expect_eq(cushim_parse_size("99999999999999999999999999999999999G", &v), -2, "35 digits");
    cr_expect_eq(cushim_parse_size("99999999999999999999999999999999999X", &v), -1, "not a unit");
    cr_expect_eq(cushim_parse_size("000000000000000000000000000000000064MiB", &v), 0, "leading zeros");
    cr_expect_eq(v, 64ull << 20);
    cr_expect_eq(cushim_parse_size("00", &v), 0);
    cr_expect_eq(v, 0);
    uint64_t limits[CUSHIM_MAX_DEVICES];
    cr_expect_eq(cushim_parse_device_limits("99999999T", limits), -2);
    cr_expect_eq(cushim_parse_device_limits("0:1G,1:99999999T", limits), -2);
    cr_expect_eq(cushim_parse_device_limits("0:1G,1:1X", limits), -1);
}

Test(units, booleans_and_enums)
{
    int b;
    const char *yes[] = {"1", "true", "YES", "on"}, *no[] = {"0", "False", "no", "OFF"};
    for (int i = 0; i < 4; i++) {
        cr_expect(cushim_parse_bool(yes[i], &b) == 0 && b == 1, "%s", yes[i]);
        cr_expect(cushim_parse_bool(no[i], &b) == 0 && b == 0, "%s", no[i]);
    }
    cr_expect_eq(cushim_parse_bool("2", &b), -1);
    cr_expect_eq(cushim_parse_enum("off|error|warn", "warn"), 2);
    cr_expect_eq(cushim_parse_enum("off|error|warn", "Error"), 1);
    cr_expect_eq(cushim_parse_enum("off|error|warn", "war"), -1);
    cr_expect_eq(cushim_parse_enum("off|error|warn", ""), -1);
    char buf[16];
    cr_expect_str_eq(cushim_enum_name("run|compile", 1, buf, sizeof buf), "compile");
}

Test(units, format_bytes)
{
    char b[32];
    cr_expect_str_eq(cushim_format_bytes(0, b, sizeof b), "0 B");
    cr_expect_str_eq(cushim_format_bytes(1023, b, sizeof b), "1023 B");
    cr_expect_str_eq(cushim_format_bytes(1024, b, sizeof b), "1.00 KiB");
    cr_expect_str_eq(cushim_format_bytes(1536ull << 20, b, sizeof b), "1.50 GiB");
    cr_expect_str_eq(cushim_format_bytes(300ull << 20, b, sizeof b), "300 MiB");
    cr_expect_str_eq(cushim_format_bytes((1ull << 20) - 1, b, sizeof b), "1.00 MiB");
    cr_expect_str_eq(cushim_format_bytes((1ull << 30) - (1ull << 19), b, sizeof b), "1.00 GiB", "1023.5 MiB");
    cr_expect_str_eq(cushim_format_bytes((1ull << 30) - (1ull << 19) - 1, b, sizeof b), "1023 MiB");
    cr_expect_str_eq(cushim_format_bytes(16ull << 30, b, sizeof b), "16.0 GiB");
}

Test(units, saturating_sums_and_device_lists)
{
    cr_expect_eq(cushim_sat_add(1, 2), 3);
    cr_expect_eq(cushim_sat_add(UINT64_MAX - 1, 1), UINT64_MAX);
    cr_expect_eq(cushim_sat_add(UINT64_MAX, UINT64_MAX), UINT64_MAX, "no wrap");
    static struct cushim_snapshot s;
    char buf[32];
    cr_expect_str_eq(cushim_device_list(&s, buf, sizeof buf, 8), "-");
    static const int32_t runs[] = {0, 1, 2, 3, 6};
    s.device_count = 5;
    for (int i = 0; i < 5; i++)
        s.devices[i].ordinal = runs[i];
    cr_expect_str_eq(cushim_device_list(&s, buf, sizeof buf, 8), "0-3,6");
    s.device_count = 2;
    cr_expect_str_eq(cushim_device_list(&s, buf, sizeof buf, 8), "0,1");
    s.device_count = 8;
    for (int i = 0; i < 8; i++)
        s.devices[i].ordinal = i;
    cr_expect_str_eq(cushim_device_list(&s, buf, sizeof buf, 8), "0-7", "an 8-GPU worker fits the column");
    for (int i = 0; i < 8; i++)
        s.devices[i].ordinal = 2 * i;
    cr_expect_str_eq(cushim_device_list(&s, buf, sizeof buf, 8), "8 GPUs", "wider than the column");
}

Test(units, pidfs_inodes_tell_processes_apart)
{
    uint64_t me = cushim_proc_pidfs_ino(getpid());
    if (me == 0) {
        printf("not run: this kernel has no pidfs (Linux 6.9+): start times tell processes apart there\n");
        cr_skip_test("not run: no pidfs");
    }
    cr_expect_eq(cushim_proc_pidfs_ino(getpid()), me, "the same process, the same inode");
    cr_expect_neq(cushim_proc_pidfs_ino(getppid()), me, "another process, another inode");
    cr_expect_eq(cushim_proc_pidfs_ino(0x7ffffff0), 0, "no such process");
}

Test(units, a_cut_command_line_keeps_whole_characters)
{
    /* 250 ASCII bytes and two 3-byte characters: cut at 255 bytes, the second is dropped whole. */
    char argv0[300];
    memset(argv0, 'a', 250);
    strcpy(argv0 + 250, "\xe2\x82\xac\xe2\x82\xac");
    pid_t child = fork();
    if (child == 0) {
        execl("/bin/sleep", argv0, "60", (char *)NULL);
        _exit(127);
    }
    char buf[256] = "";
    for (int i = 0; i < 3000 && (cushim_proc_cmdline(child, buf, sizeof buf) != 0 || buf[0] != 'a'); i++)
        usleep(10000);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    cr_expect_eq(strlen(buf), 253, "%zu bytes", strlen(buf));
    cr_expect_str_eq(buf + 250, "\xe2\x82\xac");
}

Test(units, a_command_named_by_its_comm_is_cut_at_whole_characters)
{
    /* An empty argv[0] is "[comm]" before the arguments, which are cut to make room: not in the
     * middle of a character either (a review: a lone lead byte ended it). */
    char arg[600] = "ab";
    for (int i = 0; i < 250; i++)
        strcat(arg, "\xc3\xa9");
    pid_t child = fork();
    if (child == 0) {
        setpgid(0, 0); /* the shell's sleep is killed with it */
        execl("/bin/sh", "", "-c", "sleep 60; :", arg, (char *)NULL);
        _exit(127);
    }
    setpgid(child, child);
    char buf[256] = "";
    for (int i = 0; i < 3000 && (cushim_proc_cmdline(child, buf, sizeof buf) != 0 || buf[0] != '['); i++)
        usleep(10000);
    kill(-child, SIGKILL);
    waitpid(child, NULL, 0);
    /* "[sh] -c sleep 60; : ab" (22 bytes), then whole characters up to 255 bytes: 254. */
    cr_expect_eq(strncmp(buf, "[sh] -c sleep 60; : ab\xc3\xa9", 24), 0, "%s", buf);
    cr_expect_eq(strlen(buf), 254, "%zu bytes", strlen(buf));
    cr_expect_str_eq(buf + 252, "\xc3\xa9");
}

Test(units, device_limits)
{
    uint64_t l[CUSHIM_MAX_DEVICES];
    cr_expect_eq(cushim_parse_device_limits("20GiB", l), 0);
    cr_expect_eq(l[0], 20ull << 30);
    cr_expect_eq(l[63], 20ull << 30);
    cr_expect_eq(cushim_parse_device_limits("0:20GiB,1:10GiB", l), 0);
    cr_expect_eq(l[0], 20ull << 30);
    cr_expect_eq(l[1], 10ull << 30);
    cr_expect_eq(l[2], 0);
    cr_expect_eq(cushim_parse_device_limits("0:20GiB,64:1G", l), -4, "an ordinal above 63");
    cr_expect_eq(cushim_parse_device_limits("0=1G", l), -1);
    cr_expect_eq(cushim_parse_device_limits("", l), -1);
    cr_expect_eq(cushim_parse_device_limits("0:1G,0:2G", l), -3, "an ordinal twice");
    cr_expect_eq(cushim_parse_device_limits("0:1G,", l), -1, "a trailing comma");
    cr_expect_eq(cushim_parse_device_limits("0:1G,,1:1G", l), -1);
    cr_expect_eq(cushim_parse_device_limits(",0:1G", l), -1, "a leading comma");
    /* Where a list went wrong: the entry's offset and length, (size_t)-1 for an empty one. */
    static const struct {
        const char *s;
        int rc;
        size_t at, len;
    } where[] = {
        {"0:1G,x:1G", -1, 5, 4}, {"0:1G,0:2G", -3, 5, 4}, {"1:1G,64:1G,2:1G", -4, 5, 5},
        {"0:1G,1:99999999T", -2, 5, 11}, {"1:", -1, 0, 2}, {"0:1G,", -1, 0, (size_t)-1},
        {"0:1G,,1:1G", -1, 0, (size_t)-1}, {"foo", -1, 0, 3}, {"20GiB", 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        size_t at = 99, len = 99;
        cr_expect_eq(cushim_parse_device_limits_at(where[k].s, l, &at, &len), where[k].rc, "%s", where[k].s);
        cr_expect_eq(at, where[k].at, "%s", where[k].s);
        cr_expect_eq(len, where[k].len, "%s", where[k].s);
    }
    /* Every one of the 64 ordinals, each with a long size: over 1000 bytes in all. */
    char all[2048] = "";
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%u:%llu", i ? "," : "", i,
                 1099511627776ull + (unsigned long long)i);
    cr_assert_gt(strlen(all), 1000);
    cr_expect_eq(cushim_parse_device_limits(all, l), 0);
    cr_expect_eq(l[0], 1099511627776ull);
    cr_expect_eq(l[63], 1099511627776ull + 63);
}

static const char *fake_env[8][2];
static const char *fake_lookup(const char *name)
{
    for (int i = 0; i < 8 && fake_env[i][0]; i++)
        if (strcmp(fake_env[i][0], name) == 0)
            return fake_env[i][1];
    return NULL;
}
static char errors[2048];
static char fields[1024]; /* option shown expected, one problem a line */
static void collect(const struct cushim_config_error *e)
{
    char row[400];
    snprintf(row, sizeof row, "%d %s %s\n", e->option, e->shown, e->expected);
    strncat(fields, row, sizeof fields - strlen(fields) - 1);
    strncat(errors, e->line, sizeof errors - strlen(errors) - 2);
    strcat(errors, "\n");
}

Test(config, defaults_parse_and_bad_values_keep_them)
{
    struct cushim_config c;
    memset(fake_env, 0, sizeof fake_env);
    errors[0] = '\0';
    fields[0] = '\0';
    cushim_config_load(&c, fake_lookup, NULL, collect);
    cr_expect_str_eq(errors, "", "defaults must parse: %s", errors);
    cr_expect_eq(c.log, CUSHIM_LOG_WARN);
    cr_expect_eq(c.offload_min, 64ull << 20);
    cr_expect_str_eq(c.segment_dir, "/dev/shm");

    fake_env[0][0] = "CUSHIM_SPILL", fake_env[0][1] = "maybe";
    fake_env[1][0] = "CUSHIM_OFFLOAD", fake_env[1][1] = "compile";
    fake_env[2][0] = "CUSHIM_DEVICE_LIMIT", fake_env[2][1] = "0:1GiB,x";
    /* A misspelled name is offered the nearest variable: two edits off a long name, one off a
     * short one, none beyond (found by a fresh-user trial: CUSHIM_DEVICE_LIMT got no hint). */
    char *environ_list[] = {"CUSHIM_OFLOAD=always", "PATH=/bin", "CUSHIM_DEVICE_LIMT=1MiB", "CUSHIM_DEVIC_LIMT=1",
                            "CUSHIM_LOGG=info", "CUSHIM_FOO=1", "CUSHIM_DEVCE_LMT=1", NULL};
    cushim_config_load(&c, fake_lookup, environ_list, collect);
    cr_expect_eq(c.spill, 0);
    cr_expect_eq(c.offload, CUSHIM_OFFLOAD_COMPILE);
    cr_expect_eq(c.device_limit[0], 0);
    cr_expect_str_eq(errors,
        "cushim: CUSHIM_DEVICE_LIMIT=\"0:1GiB,x\" is not ORDINAL:SIZE,... with ordinals 0..63, no spaces (e.g. "
        "0:20GiB,1:10GiB): the entry \"x\" is not ORDINAL:SIZE; using the default (none)\n"
        "cushim: CUSHIM_SPILL=\"maybe\" is not a boolean (1/0/true/false/yes/no/on/off); using the default \"off\"\n"
        "cushim: CUSHIM_OFLOAD is not a cushim variable (did you mean CUSHIM_OFFLOAD?); ignored\n"
        "cushim: CUSHIM_DEVICE_LIMT is not a cushim variable (did you mean CUSHIM_DEVICE_LIMIT?); ignored\n"
        "cushim: CUSHIM_DEVIC_LIMT is not a cushim variable (did you mean CUSHIM_DEVICE_LIMIT?); ignored\n"
        "cushim: CUSHIM_LOGG is not a cushim variable (did you mean CUSHIM_LOG?); ignored\n"
        "cushim: CUSHIM_FOO is not a cushim variable (see `cushim run --help`); ignored\n"
        "cushim: CUSHIM_DEVCE_LMT is not a cushim variable (see `cushim run --help`); ignored\n");
    /* The same problems, structured (what `cushim run` uses to name its own options). */
    char want[1024];
    snprintf(want, sizeof want,
             "%d \"0:1GiB,x\" ORDINAL:SIZE,... with ordinals 0..63, no spaces (e.g. 0:20GiB,1:10GiB): the entry \"x\" "
             "is not ORDINAL:SIZE\n%d \"maybe\" a boolean (1/0/true/false/yes/no/on/off)\n%d  \n%d  \n%d  \n%d  \n%d  \n%d  \n",
             CUSHIM_OPT_DEVICE_LIMIT, CUSHIM_OPT_SPILL, CUSHIM_OPT_COUNT, CUSHIM_OPT_COUNT, CUSHIM_OPT_COUNT,
             CUSHIM_OPT_COUNT, CUSHIM_OPT_COUNT, CUSHIM_OPT_COUNT);
    cr_expect_str_eq(fields, want);
}

Test(config, report_and_log_paths_with_white_space_at_an_end_are_typos)
{
    struct cushim_config c;
    memset(fake_env, 0, sizeof fake_env);
    errors[0] = '\0';
    fields[0] = '\0';
    fake_env[0][0] = "CUSHIM_REPORT", fake_env[0][1] = "stderr ";
    fake_env[1][0] = "CUSHIM_LOG_FILE", fake_env[1][1] = " ";
    cushim_config_load(&c, fake_lookup, NULL, collect);
    cr_expect_str_eq(c.report, "");
    cr_expect_str_eq(c.log_file, "");
    cr_expect_str_eq(errors,
        "cushim: CUSHIM_LOG_FILE=\" \" is not a file path (no white space at its start or end); using the "
        "default (none)\n"
        "cushim: CUSHIM_REPORT=\"stderr \" is not stderr, stdout or a file path (no white space at its start "
        "or end); using the default (none)\n");
    /* The streams in any case, as named values are (not a file called STDERR). */
    memset(fake_env, 0, sizeof fake_env);
    errors[0] = '\0';
    fake_env[0][0] = "CUSHIM_REPORT", fake_env[0][1] = "STDERR";
    cushim_config_load(&c, fake_lookup, NULL, collect);
    cr_expect_str_eq(c.report, "stderr");
    cr_expect_str_eq(errors, "");
    fake_env[0][1] = "-"; /* stdout, as the CLI's --json - (not a file called "-") */
    cushim_config_load(&c, fake_lookup, NULL, collect);
    cr_expect_str_eq(c.report, "stdout");
    cr_expect_str_eq(errors, "");
    fake_env[0][1] = "my report.txt";
    cushim_config_load(&c, fake_lookup, NULL, collect);
    cr_expect_str_eq(c.report, "my report.txt", "white space inside a path is fine");
}

/* Every variable of the table is documented in the README's reference with its default. */
Test(config, readme_documents_every_variable)
{
    char *text = slurp(SOURCE_ROOT "/README.md");
    cr_assert(text, "README.md");
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        const struct cushim_option_info *o = &cushim_option_table[i];
        char row[256];
        if (*o->def)
            snprintf(row, sizeof row, "| `%s` | `%s` |", o->variable, o->def);
        else
            snprintf(row, sizeof row, "| `%s` | (empty) |", o->variable);
        cr_expect(strstr(text, row) != NULL, "README lacks the row starting %s", row);
    }
    free(text);
}

/* The JSON writer keeps output valid whatever bytes a command line holds. */
Test(units, json_strings_are_escaped_and_valid_utf8)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct jsonw w;
    jsonw_init(&w, f);
    jsonw_object_begin(&w, NULL);
    jsonw_string(&w, "s", "q\"b\\n\nt\tx\xff\xc3\xa9\x01");
    jsonw_string(&w, "null", NULL);
    jsonw_u64(&w, "big", UINT64_MAX);
    jsonw_array_begin(&w, "empty");
    jsonw_array_end(&w);
    jsonw_object_end(&w);
    fclose(f);
    cr_expect_str_eq(buf, "{\n  \"s\": \"q\\\"b\\\\n\\nt\\tx\\ufffd\xc3\xa9\\u0001\",\n  \"null\": null,\n"
                          "  \"big\": 18446744073709551615,\n  \"empty\": []\n}\n");
    free(buf);
}

/* Untrusted bytes (command lines, values, arguments) shown in a text view or echoed in a message. */
Test(units, untrusted_text_is_made_printable_or_escaped)
{
    char buf[64];
    /* Kept: ASCII and valid UTF-8; '?': C0, ESC, DEL, C1 (U+0085), bytes that are not UTF-8. */
    cr_expect_str_eq(cushim_text_printable("ok caf\xc3\xa9 \x1b[2J\xff\xc2\x85\x7f", buf, sizeof buf),
                     "ok caf\xc3\xa9 ?[2J???");
    /* Overlong form, UTF-16 surrogate, above U+10FFFF, truncated sequence: one '?' per byte. */
    cr_expect_str_eq(cushim_text_printable("\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82", buf, sizeof buf),
                     "??|???|????|??");
    cr_expect_str_eq(cushim_text_printable("\xf0\x9f\x98\x80", buf, sizeof buf), "\xf0\x9f\x98\x80", "U+1F600");
    /* Bidirectional controls (U+202E, U+2066, U+200F, U+061C): one '?' each; U+2010 and U+2065,
     * beside them, are kept. */
    cr_expect_str_eq(cushim_text_printable("1\xe2\x80\xae" "2\xe2\x81\xa6" "3\xe2\x80\x8f" "4\xd8\x9c" "5\xe2\x80\x90\xe2\x81\xa5",
                                           buf, sizeof buf),
                     "1?2?3?4?5\xe2\x80\x90\xe2\x81\xa5");
    cr_expect_str_eq(cushim_text_escaped("pid\xe2\x80\xae", buf, sizeof buf), "pid\\xe2\\x80\\xae");
    cr_expect_str_eq(cushim_text_printable("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c\xe2\x80\xa7", buf, sizeof buf), "a?b?c\xe2\x80\xa7",
                     "U+2028 and U+2029 are line breaks to some; U+2027 beside them is kept");
    /* Cut at a character boundary, and marked. */
    cr_expect_str_eq(cushim_text_printable("\xc3\xa9\xc3\xa9", buf, 5), "\xc3\xa9\xc3\xa9", "fits exactly");
    cr_expect_str_eq(cushim_text_printable("\xc3\xa9\xc3\xa9\xc3\xa9", buf, 6), "\xc3\xa9...");
    cr_expect_str_eq(cushim_text_printable("abc", buf, 1), "", "no room for a marker");
    cr_expect_str_eq(cushim_text_escaped("a\nb\tc\rd\x1b\xff\xc3\xa9\xc2\x85\"\\", buf, sizeof buf),
                     "a\\nb\\tc\\rd\\x1b\\xff\xc3\xa9\\xc2\\x85\"\\");
    cr_expect_str_eq(cushim_text_escaped("\x01\x02\x03", buf, 12), "\\x01\\x02...", "an escape is never cut");
    /* Invisible characters (U+200B, U+00A0, U+00AD, U+2060, U+FEFF) are escaped in a message, where
     * "stat\u200b" would read as "stat" (found by an attack trial); a command line keeps them;
     * U+200A and U+2065 beside them are kept. */
    char big[256];
    cr_expect_str_eq(cushim_text_escaped("stat\xe2\x80\x8b|\xc2\xa0|\xc2\xad|\xe2\x81\xa0|\xef\xbb\xbf|\xe2\x80\x8a\xe2\x81\xa5",
                                         big, sizeof big),
                     "stat\\xe2\\x80\\x8b|\\xc2\\xa0|\\xc2\\xad|\\xe2\\x81\\xa0|\\xef\\xbb\\xbf|\xe2\x80\x8a\xe2\x81\xa5");
    cr_expect_str_eq(cushim_text_printable("a\xe2\x80\x8bb\xc2\xa0", buf, sizeof buf), "a\xe2\x80\x8bb\xc2\xa0");
    cr_expect_eq(cushim_utf8_len((const unsigned char *)"\xe2\x82\xac"), 3);
    cr_expect_eq(cushim_utf8_len((const unsigned char *)"\xe0\x9f\xbf"), 0, "overlong");
    cr_expect_eq(cushim_utf8_len((const unsigned char *)"\xf4\x8f\xbf\xbf"), 4, "U+10FFFF");
}

/* "Did you mean": edit distance with a swap of neighbours as one edit, capped at max + 1. */
Test(units, edit_distance_for_did_you_mean)
{
    const char *q = "--quite";
    cr_expect_eq(cushim_text_distance(q, strlen(q), "--quiet", 2), 1, "a swap is one edit");
    cr_expect_eq(cushim_text_distance("--qiet", 6, "--quiet", 2), 1);
    cr_expect_eq(cushim_text_distance("--quiet", 7, "--quiet", 2), 0);
    cr_expect_eq(cushim_text_distance("--quiet=1", 7, "--quiet", 2), 0, "only the n bytes count");
    cr_expect_eq(cushim_text_distance("CUSHIM_DEVCE_LMT", 16, "CUSHIM_DEVICE_LIMIT", 2), 3, "three: capped at 3");
    cr_expect_eq(cushim_text_distance("CUSHIM_FOO", 10, "CUSHIM_LOG", 5), 2);
    cr_expect_eq(cushim_text_distance("", 0, "ab", 5), 2);
    cr_expect_eq(cushim_text_distance("ab", 2, "", 5), 2);
    cr_expect_eq(cushim_text_distance("x", 1, "xxxxxxx", 2), 3, "lengths alone exceed max");
    char longer[80];
    memset(longer, 'a', sizeof longer);
    cr_expect_eq(cushim_text_distance(longer, sizeof longer, "a", 100), 101, "over 64 bytes: never near");
    /* The nearest: two edits off a name of 6 or more bytes after the prefix, one off a shorter. */
    const char *vars[] = {"CUSHIM_LOG", "CUSHIM_OFFLOAD", "CUSHIM_OFFLOAD_MIN"};
    size_t d = 99;
    cr_expect_eq(cushim_text_nearest("CUSHIM_LOGG", 11, vars, 3, 7, &d), 0);
    cr_expect_eq(d, 1);
    cr_expect_eq(cushim_text_nearest("CUSHIM_FOO", 10, vars, 3, 7, &d), -1, "two edits off a short name");
    cr_expect_eq(cushim_text_nearest("CUSHIM_OFLOD", 12, vars, 3, 7, &d), 1);
    cr_expect_eq(d, 2);
    cr_expect_eq(cushim_text_nearest("CUSHIM_OFFLOAD_MIN=1", 18, vars, 3, 7, &d), 2);
    cr_expect_eq(d, 0, "the name itself");
    const char *flags[] = {"--quiet", "--json"};
    cr_expect_eq(cushim_text_nearest("--quite", 7, flags, 2, 2, &d), 0, "a swap, one edit off a short name");
    cr_expect_eq(cushim_text_nearest("--qiet", 6, flags, 2, 2, &d), 0);
    cr_expect_eq(cushim_text_nearest("--qite", 6, flags, 2, 2, &d), -1, "a letter out and a swap: two edits");
    cr_expect_eq(cushim_text_nearest("--qte", 5, flags, 2, 2, &d), -1);
    cr_expect_eq(cushim_text_nearest("--quiet", 7, flags, 0, 2, &d), -1, "no names");
    /* The start of exactly one name, two bytes or more past the prefix: offered. */
    static const char *const sorts[] = {"device-total", "total-peak", "pinned", "pid"};
    cr_expect_eq(cushim_text_nearest("dev", 3, sorts, 4, 0, &d), 0);
    cr_expect_eq(d, 9, "the bytes missing");
    static const char *const two[] = {"device-total", "device-peak"};
    cr_expect_eq(cushim_text_nearest("devi", 4, two, 2, 0, &d), -1, "two names start so");
    cr_expect_eq(cushim_text_nearest("pi", 2, sorts, 4, 0, &d), -1, "two start so: not pid, one edit off");
    static const char *const commands[] = {"run", "ps", "stat", "serve", "phase"};
    cr_expect_eq(cushim_text_nearest("s", 1, commands, 5, 0, &d), -1, "stat or serve: not ps");
    cr_expect_eq(cushim_text_nearest("p", 1, commands, 5, 0, &d), -1, "ps or phase");
    cr_expect_eq(cushim_text_nearest("ps", 2, commands, 5, 0, &d), 1, "the name itself, though phase starts so too");
    static const char *const reports[] = {"--report", "--report-format", "--log", "--log-file"};
    cr_expect_eq(cushim_text_nearest("--repor", 7, reports, 4, 2, &d), 0, "one edit off one of two that start so");
    cr_expect_eq(d, 1);
    cr_expect_eq(cushim_text_nearest("--lo", 4, reports, 4, 2, &d), -1, "two bytes past the prefix: too little");
    cr_expect_eq(cushim_text_nearest("rn", 2, commands, 5, 0, &d), 0, "no start: the near name");
    cr_expect_eq(cushim_text_nearest("pin", 3, sorts, 4, 0, &d), 2, "the start before pid, one edit off");
    cr_expect_eq(d, 3);
    cr_expect_eq(cushim_text_nearest("pid", 3, sorts, 4, 0, &d), 3, "the name itself before a start");
    cr_expect_eq(d, 0);
    cr_expect_eq(cushim_text_nearest("d", 1, sorts, 4, 0, &d), -1, "one byte is too short to guess");
    cr_expect_eq(cushim_text_nearest("--q", 3, flags, 2, 2, &d), -1, "one byte past the prefix");
    cr_expect_eq(cushim_text_nearest("--qu", 4, flags, 2, 2, &d), 0);
    /* Else the longest name the word starts with, three bytes or more past the prefix. */
    cr_expect_eq(cushim_text_nearest("CUSHIM_OFFLOAD_MINIMUM", 22, vars, 3, 7, &d), 2);
    cr_expect_eq(d, 4);
    cr_expect_eq(cushim_text_nearest("CUSHIM_LOG_LEVEL", 16, vars, 3, 7, &d), 0);
    static const char *const levels[] = {"off", "error", "warn"};
    cr_expect_eq(cushim_text_nearest("warning", 7, levels, 3, 0, &d), 2);
    cr_expect_eq(cushim_text_nearest("offline", 7, levels, 3, 0, &d), 0);
    cr_expect_eq(cushim_text_nearest("warning", 7, levels, 2, 0, &d), -1, "not warn's start, nor near");
}

/* docs/SUMMARY-JSON.md names every field of the summary: each kind, each per-kind counter and each
 * device group and field of common/stats.h (as `name`). */
Test(config, summary_json_doc_names_every_field)
{
    char *text = slurp(SOURCE_ROOT "/docs/SUMMARY-JSON.md");
    cr_assert(text, "docs/SUMMARY-JSON.md");
    static const char *names[] = {
#define X_KIND(e, name, total, desc) #name,
        CUSHIM_KINDS(X_KIND)
#undef X_KIND
#define X_STAT(field, p, t, h) #field,
        CUSHIM_KIND_STATS(X_STAT)
#undef X_STAT
#define X_DEV(field, group, name, p, l, t, h) #group, #name,
        CUSHIM_DEVICE_STATS(X_DEV)
#undef X_DEV
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char quoted[96];
        snprintf(quoted, sizeof quoted, "\"%s\"", names[i]);
        cr_expect(strstr(text, quoted) != NULL, "docs/SUMMARY-JSON.md's example lacks %s", quoted);
    }
    free(text);
}
