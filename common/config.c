#include "common/config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "common/text.h"
#include "common/units.h"

int cushim_parse_device_limits(const char *s, uint64_t limits[CUSHIM_MAX_DEVICES])
{
    return cushim_parse_device_limits_at(s, limits, NULL, NULL);
}

int cushim_parse_device_limits_at(const char *s, uint64_t limits[CUSHIM_MAX_DEVICES], size_t *bad_at,
                                  size_t *bad_len)
{
    size_t at_, len_;
    if (!bad_at)
        bad_at = &at_;
    if (!bad_len)
        bad_len = &len_;
    *bad_at = *bad_len = 0;
    uint64_t out[CUSHIM_MAX_DEVICES] = {0};
    uint64_t all;
    int rc = cushim_parse_size(s, &all);
    if (rc == 0) {
        for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++)
            limits[i] = all;
        return 0;
    }
    if (rc == -2)
        return -2;
    char buf[4096]; /* room for all 64 ordinals with long sizes ("63:1099511627776,") */
    int seen[CUSHIM_MAX_DEVICES] = {0};
    /* strtok_r would skip empty items: an empty item anywhere is an error. */
    if (!s || strlen(s) >= sizeof buf || !*s)
        return -1;
    if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,")) {
        *bad_len = (size_t)-1; /* an empty entry */
        return -1;
    }
    strcpy(buf, s);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        /* The entry at fault, for the message (a fresh-user trial: "0:1G,x:1G" was not told where). */
        *bad_at = (size_t)(item - buf);
        *bad_len = strlen(item);
        char *colon = strchr(item, ':');
        uint64_t ordinal, size;
        if (!colon)
            return -1;
        *colon = '\0';
        /* Ordinals 0..63, each at most once. */
        if (cushim_parse_u64(item, UINT64_MAX, &ordinal) != 0)
            return -1;
        if (ordinal >= CUSHIM_MAX_DEVICES)
            return -4;
        if (seen[ordinal]++)
            return -3;
        if ((rc = cushim_parse_size(colon + 1, &size)) != 0)
            return rc;
        out[ordinal] = size;
    }
    *bad_at = *bad_len = 0;
    memcpy(limits, out, sizeof out);
    return 0;
}

int cushim_option_internal(enum cushim_option id)
{
    return id == CUSHIM_OPT_RUN_DIR || id == CUSHIM_OPT_RUN_ID || id == CUSHIM_OPT_RUN_TOP ||
           id == CUSHIM_OPT_RUN_CHECKED || id == CUSHIM_OPT_RUN_SUMMARY;
}

/* Whether the first n bytes of s name a variable of the table. */
static int known_name(const char *s, size_t n)
{
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++)
        if (strlen(cushim_option_table[i].variable) == n &&
            strncmp(cushim_option_table[i].variable, s, n) == 0)
            return 1;
    return 0;
}

/* The user-facing variable nearest to the n bytes at s (cushim_text_nearest), for "did you mean";
 * NULL if none. Only for a name already found unknown. */
static const char *nearest_variable(const char *s, size_t n)
{
    const char *names[CUSHIM_OPT_COUNT];
    int count = 0;
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++)
        if (!cushim_option_internal((enum cushim_option)i))
            names[count++] = cushim_option_table[i].variable;
    size_t d;
    int k = cushim_text_nearest(s, n, names, count, strlen("CUSHIM_"), &d);
    return k >= 0 ? names[k] : NULL;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t cushim_config_fingerprint(const char *(*lookup)(const char *name), char *const *environ_list)
{
    uint64_t h = 0xcbf29ce484222325ull, unknown = 0;
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        if (cushim_option_internal((enum cushim_option)i))
            continue;
        const char *name = cushim_option_table[i].variable;
        const char *v = lookup ? lookup(name) : NULL;
        h = fnv(h, name, strlen(name) + 1);
        h = v ? fnv(h, v, strlen(v) + 1) : fnv(h, "\x01", 1);
    }
    for (char *const *e = environ_list; e && *e; e++) {
        if (strncmp(*e, "CUSHIM_", 7) != 0)
            continue;
        size_t n = strcspn(*e, "=");
        int known = known_name(*e, n);
        if (!known)
            unknown ^= fnv(0xcbf29ce484222325ull, *e, n);
    }
    return h ^ unknown;
}

void cushim_config_shown(const char *value, char *shown, size_t len)
{
    size_t n = strlen(value);
    char head[121], safe[121 * 4 + 1];
    snprintf(head, sizeof head, "%.*s", n > 120 ? 60 : 120, value);
    /* Control characters and bytes that are not UTF-8 are escaped: the line stays one line. */
    cushim_text_escaped(head, safe, sizeof safe);
    if (n > 120)
        snprintf(shown, len, "\"%s...\" (%zu bytes)", safe, n);
    else
        snprintf(shown, len, "\"%s\"", safe);
}

/* A size below 1 MiB, exactly: "8 bytes", "64 KiB" (a rounded "1.00 MiB" would contradict "below
 * 1 MiB"). */
static void exact_small(uint64_t v, char *out, size_t len)
{
    if (v % 1024 == 0)
        snprintf(out, len, "%llu KiB", (unsigned long long)(v / 1024));
    else
        snprintf(out, len, "%llu byte%s", (unsigned long long)v, v == 1 ? "" : "s");
}

/* The first size in value ("8", or a list's "0:1G,1:8") written without a unit and below 1 MiB
 * (not 0), as "(a size without a unit is bytes: 8GiB is 8 GiB...)" with `unit` ("GiB") into hint;
 * "" when every such size had its unit (512KiB was meant as said). A value that is here parsed:
 * no spaces (cushim_parse_size, cushim_parse_device_limits). */
static void unit_hint(const char *value, const char *unit, char *hint, size_t len)
{
    hint[0] = '\0';
    for (const char *p = value; *p;) {
        size_t n = strcspn(p, ","), colon = strcspn(p, ":");
        const char *digits = colon < n ? p + colon + 1 : p;
        int k = (int)(p + n - digits);
        char number[32];
        uint64_t v = 0;
        snprintf(number, sizeof number, "%.*s", k < 32 ? k : 0, digits);
        /* Only a size that is small (0 is none, 2000000 meant bytes: found by an attack trial). */
        if (k > 0 && k < 32 && cushim_parse_u64(number, UINT64_MAX, &v) == 0 && v && v < (1u << 20)) {
            if (v < 1024)
                snprintf(hint, len, " (a size without a unit is bytes: %.*s%s is %.*s %s, %.*sB says bytes)", k,
                         digits, unit, k, digits, unit, k, digits);
            else /* not "500000GiB is 500000 GiB" (an attack trial) */
                snprintf(hint, len, " (a size without a unit is bytes: %.*sB says bytes; units are K, M, G and T)",
                         k, digits);
            return;
        }
        p += n + (p[n] == ',');
    }
}

/* Says a value that is taken but most likely a slip: "cushim: VARIABLE=SHOWN WHY", a warning. */
static void say_taken(void (*report)(const struct cushim_config_error *), enum cushim_option id, const char *shown,
                      const char *why)
{
    char line[1200];
    snprintf(line, sizeof line, "cushim: %s=%s %s", cushim_option_table[id].variable, shown, why);
    struct cushim_config_error e = {id, shown, why, line, 1};
    report(&e);
}

/* A device limit below 1 MiB is taken but said: `--device-limit 8` is 8 bytes (a size without a
 * unit is bytes), which refuses every request; nobody budgets a GPU in bytes. */
static void small_limit(void (*report)(const struct cushim_config_error *), const char *value,
                        const uint64_t limits[CUSHIM_MAX_DEVICES])
{
    int count = 0, all = 1;
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++) {
        count += limits[i] && limits[i] < (1u << 20);
        all &= limits[i] == limits[0];
    }
    if (!report || !count)
        return;
    char shown[640], size[32], whom[160] = "", why[480];
    cushim_config_shown(value, shown, sizeof shown);
    if (all) {
        exact_small(limits[0], size, sizeof size);
        snprintf(whom, sizeof whom, "every device %s", size);
    } else {
        /* The first three such devices with their sizes, then how many more. */
        int said = 0;
        for (unsigned i = 0; i < CUSHIM_MAX_DEVICES && said < 3; i++) {
            if (!limits[i] || limits[i] >= (1u << 20))
                continue;
            exact_small(limits[i], size, sizeof size);
            size_t at = strlen(whom);
            snprintf(whom + at, sizeof whom - at, "%sdevice %u %s", said ? ", " : "", i, size);
            said++;
        }
        if (count > said) {
            size_t at = strlen(whom);
            snprintf(whom + at, sizeof whom - at, " and %d more device%s", count - said, count - said == 1 ? "" : "s");
        }
    }
    char hint[160];
    unit_hint(value, "GiB", hint, sizeof hint);
    snprintf(why, sizeof why, "gives %s, below 1 MiB%s; taken as given: larger requests are refused", whom, hint);
    say_taken(report, CUSHIM_OPT_DEVICE_LIMIT, shown, why);
}

/* An offload size (CUSHIM_OFFLOAD_MIN, CUSHIM_OFFLOAD_CACHE) written without a unit and below
 * 1 MiB is taken but said: `--offload-min 64` offloads every request of 64 bytes or more (found by
 * a fresh-user trial: the default is 64MiB). */
static void small_size(void (*report)(const struct cushim_config_error *), enum cushim_option id,
                       const char *value, uint64_t size)
{
    char hint[160];
    unit_hint(value, "MiB", hint, sizeof hint);
    if (!report || !size || size >= (1u << 20) || !hint[0])
        return;
    char shown[640], exact[32], why[256];
    cushim_config_shown(value, shown, sizeof shown);
    exact_small(size, exact, sizeof exact);
    snprintf(why, sizeof why, "is %s%s; taken as given", exact, hint);
    say_taken(report, id, shown, why);
}

static void bad_value(void (*report)(const struct cushim_config_error *), enum cushim_option id,
                      const char *value, const char *expected)
{
    const struct cushim_option_info *o = &cushim_option_table[id];
    char shown[640], line[1152];
    if (!report)
        return;
    cushim_config_shown(value, shown, sizeof shown);
    snprintf(line, sizeof line, "cushim: %s=%s is not %s; using the default %s%s%s", o->variable, shown,
             expected, *o->def ? "\"" : "(none)", o->def, *o->def ? "\"" : "");
    struct cushim_config_error e = {id, shown, expected, line};
    report(&e);
}

/* Strings with a shape: the segment directory (shim and CLI must agree on it, so an absolute
 * path, never empty) and the values `cushim run` sets (checked strictly, a bad one is the
 * default: no run). */
static int check_string(enum cushim_option id, const char *v, const char **expected)
{
    size_t n = strlen(v);
    if (id == CUSHIM_OPT_SEGMENT_DIR) {
        *expected = "an absolute directory path";
        return v[0] == '/' ? 0 : -1;
    }
    if (!*v)
        return 0;
    switch (id) {
    case CUSHIM_OPT_REPORT:
    case CUSHIM_OPT_LOG_FILE:
        /* "stderr " or " " would name a file nobody meant: white space at either end is a typo. */
        *expected = id == CUSHIM_OPT_REPORT ? "stderr, stdout or a file path (no white space at its start or end)"
                                            : "a file path (no white space at its start or end)";
        return isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]) ? -1 : 0;
    case CUSHIM_OPT_RUN_DIR:
        *expected = "an absolute path";
        return v[0] == '/' ? 0 : -1;
    case CUSHIM_OPT_RUN_ID:
    case CUSHIM_OPT_RUN_CHECKED:
        *expected = "1 to 16 hexadecimal digits";
        if (n > 16)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (!strchr("0123456789abcdefABCDEF", v[i]))
                return -1;
        return 0;
    case CUSHIM_OPT_RUN_TOP: {
        uint64_t pid;
        *expected = "a process id (1 to 2147483647)";
        return cushim_parse_u64(v, 2147483647, &pid) == 0 && pid > 0 ? 0 : -1;
    }
    default:
        return 0;
    }
}

/* " (did you mean compile?)" for a mistyped value of an enum option ('|'-separated `choices`): the
 * nearest choice in any case (cushim_text_nearest), or "" when none is near, or when v is a
 * switch's word (on, yes, 1: off is one edit from on, and not meant; no, 0, false: off where off is
 * a choice). Static storage. */
static const char *enum_hint(const char *choices, const char *v)
{
    static char hint[64];
    char names[8][32];
    const char *list[8];
    int count = 0, on;
    hint[0] = '\0';
    if (strlen(v) >= 32) /* no guess at a long value */
        return hint;
    if (cushim_parse_bool(v, &on) == 0) { /* no, 0, false: off, where off is a choice */
        if (!on && cushim_parse_enum(choices, "off") >= 0)
            snprintf(hint, sizeof hint, " (did you mean off?)");
        return hint;
    }
    for (; count < 8 && *cushim_enum_name(choices, count, names[count], sizeof names[0]); count++)
        list[count] = names[count];
    size_t d;
    int k = cushim_text_nearest_folded(v, list, count, 0, &d);
    if (k >= 0)
        snprintf(hint, sizeof hint, " (did you mean %s?)", list[k]);
    return hint;
}

/* Parses one value into its field; returns 0, or -1 with a description of what was expected. */
static int parse_into(struct cushim_config *c, enum cushim_option id, const char *v,
                      const char **expected)
{
    const struct cushim_option_info *o = &cushim_option_table[id];
    int *ival = NULL;
    uint64_t *sval = NULL;
    char *str = NULL;
    size_t strcap = 0;

    switch (id) {
    case CUSHIM_OPT_LOG: ival = &c->log; break;
    case CUSHIM_OPT_LOG_FILE: str = c->log_file; strcap = sizeof c->log_file; break;
    case CUSHIM_OPT_REPORT: str = c->report; strcap = sizeof c->report; break;
    case CUSHIM_OPT_REPORT_FORMAT: ival = &c->report_format; break;
    case CUSHIM_OPT_DISABLE: ival = &c->disable; break;
    case CUSHIM_OPT_SEGMENT_DIR: str = c->segment_dir; strcap = sizeof c->segment_dir; break;
    case CUSHIM_OPT_OFFLOAD: ival = &c->offload; break;
    case CUSHIM_OPT_OFFLOAD_MIN: sval = &c->offload_min; break;
    case CUSHIM_OPT_OFFLOAD_CACHE: sval = &c->offload_cache; break;
    case CUSHIM_OPT_PHASE: ival = &c->phase; break;
    case CUSHIM_OPT_COMPILE_END: ival = &c->compile_end; break;
    case CUSHIM_OPT_DEVICE_LIMIT: break;
    case CUSHIM_OPT_SPILL: ival = &c->spill; break;
    case CUSHIM_OPT_RUN_DIR: str = c->run_dir; strcap = sizeof c->run_dir; break;
    case CUSHIM_OPT_RUN_ID: str = c->run_id; strcap = sizeof c->run_id; break;
    case CUSHIM_OPT_RUN_TOP: str = c->run_top; strcap = sizeof c->run_top; break;
    case CUSHIM_OPT_RUN_CHECKED: str = c->run_checked; strcap = sizeof c->run_checked; break;
    case CUSHIM_OPT_RUN_SUMMARY: ival = &c->run_summary; break;
    /* Read by `cushim run` itself, which checks the path with its own message and stops
     * (tools/libpath.c): no second line here saying a default is used (a bad-input trial). */
    case CUSHIM_OPT_LIBRARY: return 0;
    case CUSHIM_OPT_COUNT: return -1;
    }

    switch (o->type) {
    case CUSHIM_OT_BOOL:
        *expected = "a boolean (1/0/true/false/yes/no/on/off)";
        return cushim_parse_bool(v, ival);
    case CUSHIM_OT_SIZE: {
        int rc = cushim_parse_size(v, sval);
        *expected = rc == -2 ? "a size below 16 EiB (2^64 bytes)" : "a size (a whole number of bytes, or with a unit K, M, G or T, binary, any case, as K, KB, KiB or Ki: e.g. 512M, 64MiB, 1Gi, 4096)";
        return rc < 0 ? -1 : 0;
    }
    case CUSHIM_OT_ENUM: {
        static char expect[160];
        int k = cushim_parse_enum(o->choices, v);
        snprintf(expect, sizeof expect, "one of %s%s", o->choices, k < 0 ? enum_hint(o->choices, v) : "");
        *expected = expect;
        if (k < 0)
            return -1;
        *ival = k;
        return 0;
    }
    case CUSHIM_OT_STRING: {
        static char expect[64];
        /* What the value is checked to be first, then its length: a pid of 20 digits is not a
         * process id, rather than too long a string (a bad-input trial). */
        if (check_string(id, v, expected) != 0)
            return -1;
        snprintf(expect, sizeof expect, "a string of at most %zu bytes", strcap - 1);
        *expected = expect;
        if (strlen(v) >= strcap)
            return -1;
        /* The streams, in any case like the other named values (STDERR is not a file name); "-"
         * is stdout, as for the CLI's --json and --output. */
        if (id == CUSHIM_OPT_REPORT && (!strcasecmp(v, "stderr") || !strcasecmp(v, "stdout") || !strcmp(v, "-")))
            v = !strcasecmp(v, "stderr") ? "stderr" : "stdout";
        strcpy(str, v);
        return 0;
    }
    case CUSHIM_OT_DEVSIZES:
    {
        static char expect[1024];
        size_t at = 0, n = 0;
        int rc = *v ? cushim_parse_device_limits_at(v, c->device_limit, &at, &n) : 0;
        const char *what = rc == -2   ? "a size below 16 EiB (2^64 bytes) nor ORDINAL:SIZE,... with sizes below it"
                           : rc == -3 ? "ORDINAL:SIZE,... naming each ordinal once"
                           : rc == -4 ? "ORDINAL:SIZE,... with ordinals 0..63 (cushim counts 64 devices)"
                                      : "a size (a whole number of bytes, or with a unit K, M, G or T, binary) nor "
                                        "ORDINAL:SIZE,... with ordinals 0..63, no spaces (e.g. 20GiB for every "
                                        "device, or 0:20GiB,1:10GiB)";
        /* The entry at fault, named (escaped, cut as values are), when the value is a list. */
        char entry[256], shown[640];
        const char *list = "ORDINAL:SIZE,... with ordinals 0..63, no spaces (e.g. 0:20GiB,1:10GiB)";
        if (n == (size_t)-1) {
            snprintf(expect, sizeof expect, "%s: an entry is empty (a comma at an end, or two together)", list);
            what = expect;
        } else if (n > 0 && n < sizeof entry && (n < strlen(v) || strchr(v, ':'))) {
            /* A list, or one entry with its colon: which part is wrong (a fresh-user trial: "1:",
             * "0:-1G" got the generic line). One entry without a colon is a size gone wrong. */
            if (rc == -1) /* a list: not "a size nor" */
                what = list;
            snprintf(entry, sizeof entry, "%.*s", (int)n, v + at);
            cushim_config_shown(entry, shown, sizeof shown);
            char *colon = strchr(entry, ':'), part[640] = "";
            uint64_t ordinal;
            if (rc == -1 && colon) {
                *colon = '\0';
                if (cushim_parse_u64(entry, UINT64_MAX, &ordinal) != 0) {
                    cushim_config_shown(entry, part, sizeof part);
                    snprintf(part + strlen(part), sizeof part - strlen(part), " is not an ordinal (0..63)");
                } else if (!colon[1]) {
                    snprintf(part, sizeof part, "has no size");
                } else {
                    cushim_config_shown(colon + 1, part, sizeof part);
                    snprintf(part + strlen(part), sizeof part - strlen(part),
                             " is not a size (a whole number of bytes, or with a unit K, M, G or T, binary)");
                }
            }
            /* "the entry "0:-1G": "-1G" is not a size", else "the entry "1:" has no size" */
            snprintf(expect, sizeof expect, "%s: the entry %s%s%s", what, shown, part[0] == '"' ? ": " : " ",
                     rc == -3   ? "names an ordinal named before"
                     : rc == -4 ? "names an ordinal above 63"
                     : rc == -2 ? "has a size of 16 EiB or more"
                     : part[0]  ? part
                                : "is not ORDINAL:SIZE");
            what = expect;
        } else if (rc == -3) {
            what = "ORDINAL:SIZE,... naming each ordinal once (e.g. 0:20GiB,1:10GiB)";
        }
        *expected = what;
        return rc < 0 ? -1 : 0;
    }
    }
    return -1;
}

int cushim_option_value_ok(enum cushim_option id, const char *value)
{
    static struct cushim_config scratch; /* large: not on the stack */
    const char *expected;
    return (unsigned)id < CUSHIM_OPT_COUNT && value && parse_into(&scratch, id, value, &expected) == 0;
}

int cushim_option_values_same(enum cushim_option id, const char *a, const char *b)
{
    static struct cushim_config x, y; /* large: not on the stack */
    const char *expected;
    if ((unsigned)id >= CUSHIM_OPT_COUNT || !a || !b)
        return 0;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    return parse_into(&x, id, a, &expected) == 0 && parse_into(&y, id, b, &expected) == 0 &&
           memcmp(&x, &y, sizeof x) == 0;
}

void cushim_config_load(struct cushim_config *c, const char *(*lookup)(const char *name),
                        char *const *environ_list,
                        void (*report)(const struct cushim_config_error *e))
{
    const char *expected = "";
    const char *taken[CUSHIM_OPT_COUNT] = {0}; /* the values taken, for the warnings below */
    memset(c, 0, sizeof *c);
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        const struct cushim_option_info *o = &cushim_option_table[i];
        int rc = parse_into(c, (enum cushim_option)i, o->def, &expected);
        (void)rc; /* defaults always parse: tests/test_units.c, config/defaults_parse_and_bad_values_keep_them, checks it */
        const char *v = lookup ? lookup(o->variable) : NULL;
        /* An empty value is no value (`CUSHIM_LOG= prog` means "the default"), as for unset. */
        if (v && *v && parse_into(c, (enum cushim_option)i, v, &expected) != 0) {
            bad_value(report, (enum cushim_option)i, v, expected);
            parse_into(c, (enum cushim_option)i, o->def, &expected);
        } else if (v && *v) {
            taken[i] = v;
        }
    }
    /* Sizes taken that are most likely a slip (a small one without a unit), said only where they
     * take effect: not when counting is disabled, nor an offload size with nothing offloaded (found
     * by attack trials: "taken as given" and then "no budget", or "it has no effect"). */
    int offloading = c->offload != CUSHIM_OFFLOAD_OFF;
    if (taken[CUSHIM_OPT_DEVICE_LIMIT] && !c->disable)
        small_limit(report, taken[CUSHIM_OPT_DEVICE_LIMIT], c->device_limit);
    if (taken[CUSHIM_OPT_OFFLOAD_MIN] && !c->disable && offloading)
        small_size(report, CUSHIM_OPT_OFFLOAD_MIN, taken[CUSHIM_OPT_OFFLOAD_MIN], c->offload_min);
    if (taken[CUSHIM_OPT_OFFLOAD_CACHE] && !c->disable && (offloading || c->spill))
        small_size(report, CUSHIM_OPT_OFFLOAD_CACHE, taken[CUSHIM_OPT_OFFLOAD_CACHE], c->offload_cache);
    for (char *const *e = environ_list; e && *e; e++) {
        if (strncmp(*e, "CUSHIM_", 7) != 0)
            continue;
        size_t n = strcspn(*e, "=");
        int known = known_name(*e, n);
        if (!known && report) {
            /* The name is the environment's: any bytes, escaped so the line stays one line. */
            char name[201], safe[201 * 4 + 1], line[1024];
            snprintf(name, sizeof name, "%.*s", (int)(n > 200 ? 200 : n), *e);
            const char *near = nearest_variable(*e, n);
            if (near)
                snprintf(line, sizeof line, "cushim: %s is not a cushim variable (did you mean %s?); ignored",
                         cushim_text_escaped(name, safe, sizeof safe), near);
            else
                snprintf(line, sizeof line, "cushim: %s is not a cushim variable (see `cushim run --help`); ignored",
                         cushim_text_escaped(name, safe, sizeof safe));
            struct cushim_config_error err = {CUSHIM_OPT_COUNT, "", "", line};
            report(&err);
        }
    }
}
