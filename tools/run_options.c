/* cushim run's options: the configuration table's flags (--offload-min for CUSHIM_OFFLOAD_MIN),
 * which of them were given, its usage text and the hints for mistyped options and for values
 * given with a space. State: which flags were given and whether one had a bad value, for the one
 * run of the process (not thread-safe: the CLI is single-threaded). */
#include "tools/run_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tools/cli.h"

/* Options given as run flags (index: enum cushim_option), and whether one had a bad value. */
static unsigned char set_by_flag[CUSHIM_OPT_COUNT];
static int bad_flag;

void run_flag_name(const char *variable, char *buf, size_t len)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, len, "--");
    for (const char *p = variable + strlen("CUSHIM_"); *p && o + 1 < len; p++)
        buf[o++] = *p == '_' ? '-' : (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    buf[o] = '\0';
}

static int internal_option(int i)
{
    return cushim_option_internal((enum cushim_option)i);
}

int run_flag_given(enum cushim_option id)
{
    return (unsigned)id < CUSHIM_OPT_COUNT && set_by_flag[id];
}

int run_flag_bad(void)
{
    return bad_flag;
}

void run_say_empty_flags(void)
{
    for (int k = 0; k < CUSHIM_OPT_COUNT; k++) {
        const char *v = getenv(cushim_option_table[k].variable);
        if (!set_by_flag[k] || internal_option(k) || !v || *v)
            continue;
        char flag[64];
        run_flag_name(cushim_option_table[k].variable, flag, sizeof flag);
        const char *def = cushim_option_table[k].def;
        fprintf(stderr, "cushim: %s is empty: the default applies (%s%s%s)\n", flag, *def ? "\"" : "none",
                def, *def ? "\"" : "");
    }
}

/* Whether the program word argv[i] was meant as part of an option's value: 1 when argv[i - 1] is
 * a switch (--spill) and argv[i] a boolean ("--spill on"); 2 when argv[i - 2] is an option that
 * took argv[i - 1] as its value and the two words together make one ("--device-limit 1 MiB"); 3
 * when argv[i - 1] is such an option with its value after '=' that argv[i] completes
 * ("--device-limit=1 MiB"); else 0 (a program, or a mistyped one). */
int run_split_value(char **argv, int i)
{
    char flag[64], joined[256];
    for (int k = 0; k < CUSHIM_OPT_COUNT; k++) {
        const struct cushim_option_info *o = &cushim_option_table[k];
        if (internal_option(k))
            continue;
        run_flag_name(o->variable, flag, sizeof flag);
        if (i >= 2 && o->type == CUSHIM_OT_BOOL && strcmp(argv[i - 1], flag) == 0)
            return cushim_option_value_ok(k, argv[i]) ? 1 : 0;
        size_t n = strlen(flag);
        /* "--spill= yes", "--report= stderr": an empty value, and the next word was meant as it
         * (an attack trial: `yes` ran), whatever the option's kind. */
        if (i >= 2 && strncmp(argv[i - 1], flag, n) == 0 && argv[i - 1][n] == '=' && argv[i - 1][n + 1] == '\0')
            return o->type == CUSHIM_OT_STRING || cushim_option_value_ok(k, argv[i]) ? 3 : 0;
        if (i >= 2 && o->type != CUSHIM_OT_BOOL && o->type != CUSHIM_OT_STRING && strncmp(argv[i - 1], flag, n) == 0 &&
            argv[i - 1][n] == '=') {
            if ((size_t)snprintf(joined, sizeof joined, "%s%s", argv[i - 1] + n + 1, argv[i]) >= sizeof joined)
                return 0;
            return cushim_option_value_ok(k, joined) ? 3 : 0;
        }
        /* A string takes any word: nothing says two were meant as one. */
        if (i < 3 || strcmp(argv[i - 2], flag) != 0 || o->type == CUSHIM_OT_BOOL || o->type == CUSHIM_OT_STRING)
            continue;
        if ((size_t)snprintf(joined, sizeof joined, "%s%s", argv[i - 1], argv[i]) >= sizeof joined)
            return 0;
        return cushim_option_value_ok(k, joined) ? 2 : 0;
    }
    return 0;
}

void run_usage(FILE *f)
{
    char flag[64];
    fprintf(f,
            "usage: cushim run [OPTIONS] [--] PROGRAM [ARGS...]\n\n"
            "Runs PROGRAM with libcushim.so preloaded and prints, when it exits, each device's\n"
            "memory per kind (current, peak, allocations, frees, failures) for PROGRAM and every\n"
            "descendant process that used CUDA. Exit status: PROGRAM's (128+N if killed by signal N;\n"
            "127 when it cannot be found, 126 when it cannot be run, as a shell says); 2 without\n"
            "running it for a usage error, or when PROGRAM succeeded but the --json file could not\n"
            "be written, a process's summary could not be read, or the run's directory in TMPDIR\n"
            "was removed while it ran (its summaries lost).\n\n"
            "  --json FILE       also write the summary as JSON (docs/SUMMARY-JSON.md); - for\n"
            "                    standard output, after the program's own output there (for\n"
            "                    jq, a FILE, or the program's output sent elsewhere)\n"
            "  --quiet           do not print the summary\n"
            "  -h, --help        this help\n\n"
            "Configuration (option = environment variable; an option given replaces the variable's\n"
            "value; the variable works with plain LD_PRELOAD):\n");
    for (int i = 0; i < CUSHIM_OPT_COUNT; i++) {
        const struct cushim_option_info *o = &cushim_option_table[i];
        if (internal_option(i))
            continue;
        run_flag_name(o->variable, flag, sizeof flag);
        if (o->type == CUSHIM_OT_BOOL) /* a switch: --spill, or --spill=off */
            strncat(flag, "[=on|off]", sizeof flag - strlen(flag) - 1);
        fprintf(f, "  %-18s %-22s default %s\n", flag, o->variable, *o->def ? o->def : "(empty)");
        if (*o->choices)
            fprintf(f, "  %-18s   values: %s\n", "", o->choices);
        fprintf(f, "  %-18s   %s\n", "", o->help);
    }
}

/* A flag given again with another value: the last one is used, as most tools do (a wrapper's
 * default, then the user's own), and said, so that a slip is seen (found by fresh-user trials:
 * `--json a --json b` wrote b alone, silently). */
/* setenv of flag k's variable to v, said when it replaces another flag's value. */
static void set_flag(int k, const char *flag, const char *v)
{
    /* One value written two ways (--spill=1 --spill, 1G then 1GiB) is not said (reviews) */
    const char *old = getenv(cushim_option_table[k].variable);
    if (set_by_flag[k] && !cushim_option_values_same((enum cushim_option)k, old, v))
        cli_say_replaced(flag, &old, v);
    setenv(cushim_option_table[k].variable, v, 1);
    set_by_flag[k] = 1;
}

/* The run option nearest to the mistyped `word` (its name, before any '='; cushim_text_nearest's
 * rule) into buf; 0 if none is near. */
int run_nearest_flag(const char *word, char *buf, size_t len, size_t *distance)
{
    static const char *const own[] = {"--json", "--quiet", "--help"};
    char flags[CUSHIM_OPT_COUNT][64];
    const char *names[CUSHIM_OPT_COUNT + 3];
    int count = 0;
    for (int k = 0; k < CUSHIM_OPT_COUNT; k++)
        if (!internal_option(k)) {
            run_flag_name(cushim_option_table[k].variable, flags[count], sizeof flags[0]);
            names[count] = flags[count];
            count++;
        }
    for (int k = 0; k < 3; k++)
        names[count++] = own[k];
    int letter = cli_short_option(word, names, count);
    if (letter >= 0) { /* "-q": --quiet */
        snprintf(buf, len, "%s", names[letter]);
        *distance = 1;
        return 1;
    }
    char probe[128]; /* -quiet, --SPILL: as meant */
    int best = cli_option_probe(word, probe, sizeof probe)
                   ? cushim_text_nearest(probe, strcspn(probe, "="), names, count, strlen("--"), distance)
                   : -1;
    if (best >= 0 && *distance == 0 && strncmp(word, names[best], strlen(names[best])) != 0)
        *distance = 1; /* not the option itself (with a value): a different spelling of it */
    snprintf(buf, len, "%s", best >= 0 ? names[best] : "");
    return best >= 0;
}

int run_config_flag(int argc, char **argv, int i)
{
    char flag[64];
    for (int k = 0; k < CUSHIM_OPT_COUNT; k++) {
        if (internal_option(k))
            continue;
        run_flag_name(cushim_option_table[k].variable, flag, sizeof flag);
        size_t n = strlen(flag);
        if (strncmp(argv[i], flag, n) != 0)
            continue;
        if (argv[i][n] == '=') {
            set_flag(k, flag, argv[i] + n + 1);
            return 1;
        }
        if (argv[i][n] == '\0' && cushim_option_table[k].type == CUSHIM_OT_BOOL) {
            /* A boolean option alone is a switch: --spill is --spill=on (as a message shows it). */
            set_flag(k, flag, "on");
            return 1;
        }
        if (argv[i][n] == '\0') {
            if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0) {
                cli_error("%s needs a value (see cushim run --help)", flag);
                return -1;
            }
            if (cli_value_is_option(flag, argv[i + 1]))
                return -1;
            set_flag(k, flag, argv[i + 1]);
            return 2;
        }
    }
    return 0;
}

/* A bad value reported by the configuration loader: one set by a run flag is named by that flag
 * ("--offload-min \"foo\" is not a size ...") and stops the run (exit 2): a typed flag is not
 * silently replaced by its default. Variables from the environment only warn, as in every
 * process the shim is loaded into. */
static int env_said;

void run_env_said(int said)
{
    env_said = said;
}

void run_print_config_error(const struct cushim_config_error *e)
{
    if (!(e->option < CUSHIM_OPT_COUNT && set_by_flag[e->option])) {
        if (!env_said)
            fprintf(stderr, "%s\n", e->line);
        return;
    }
    char flag[64];
    run_flag_name(cushim_option_table[e->option].variable, flag, sizeof flag);
    if (e->warning) { /* taken: said, the run goes on */
        fprintf(stderr, "cushim: %s %s %s\n", flag, e->shown, e->expected);
        return;
    }
    size_t n = strlen(e->expected);
    if (n > 2 && strcmp(e->expected + n - 2, "?)") == 0) /* its hint's parenthesis takes the pointer */
        fprintf(stderr, "cushim: %s %s is not %.*s see cushim run --help)\n", flag, e->shown, (int)n - 1, e->expected);
    else
        fprintf(stderr, "cushim: %s %s is not %s (see cushim run --help)\n", flag, e->shown, e->expected);
    bad_flag = 1;
}