/* cushim phase PID compile|run: asks a live process to switch phase; the shim applies it at its
 * next allocation (through the segment's control area). */
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "common/units.h"
#include "tools/cli.h"

struct request {
    uint32_t phase;
    int already;    /* the process is in that phase already */
    uint32_t was;   /* the request this one replaced then */
    uint32_t flags; /* the segment's (its offload policy) */
};

static void request(struct cushim_segment *s, void *argp)
{
    struct request *a = argp;
    a->flags = s->h.flags;
    if (atomic_load(&s->h.phase) == a->phase) {
        /* Nothing to change; a request for the other phase still waiting is replaced by ours,
         * which the process applies as a no-op (and which still holds if it switched away in
         * between, taking that other request). */
        a->already = 1;
        a->was = atomic_exchange(&s->control.phase_request, a->phase + 1);
        return;
    }
    atomic_store(&s->control.phase_request, a->phase + 1);
}

/* "did you mean X? " for a phase word mistyped as an option or a value (--run, --phase=run,
 * compil; any case), or "" when none is near. Into hint (len bytes); returns hint. */
static const char *phase_hint(const char *word, char *hint, size_t len)
{
    static const char *const phases[] = {"compile", "run"};
    word += strspn(word, "-");
    if (strncmp(word, "phase=", 6) == 0)
        word += 6;
    size_t d; /* no guess at a long word */
    int near = strlen(word) < 16 ? cushim_text_nearest_folded(word, phases, 2, 0, &d) : -1;
    hint[0] = '\0';
    if (near >= 0)
        snprintf(hint, len, "did you mean %s? ", phases[near]);
    return hint;
}

int cmd_phase(int argc, char **argv)
{
    /* PID and phase, with -h/--help anywhere and "--" anywhere before the words after it (as
     * stat and reset-peak take them); phase takes no option (found by an attack trial: --help
     * after the PID was "takes no value", and the wrong word was blamed). */
    const char *words[2];
    int count = 0, options = 1;
    char hint[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = 0;
        } else if (options && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            printf("usage: cushim phase PID compile|run\n\nSwitches process PID to the compile or "
                   "run phase (offload policy); it takes\neffect at the process's next allocation. Exit 0 when done, 1 when PID is no "
                   "live\nprocess under cushim, 2 on a usage error.\n");
            return 0;
        } else if (options && a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
            if (*phase_hint(a, hint, sizeof hint)) /* --run, --phase=run: the phase meant */
                cli_error("unknown option %s for phase (%ssee cushim phase --help)", cli_shown(a), hint);
            else /* --hlep, --help=1: as every command says them */
                cli_bad_word("phase", a, "cushim phase PID compile|run");
            return EXIT_USAGE;
        } else if (count < 2) {
            words[count++] = a;
        } else {
            cli_error("unexpected argument %s for phase (usage: cushim phase PID compile|run)", cli_shown(a));
            return EXIT_USAGE;
        }
    }
    if (count == 1 && cushim_parse_enum("run|compile", words[0]) >= 0) { /* cushim phase run */
        cli_error("phase needs a PID before the phase (usage: cushim phase PID compile|run)");
        return EXIT_USAGE;
    }
    if (count == 1 && cli_parse_pid(words[0]) < 0)
        return EXIT_USAGE;
    if (count < 2) {
        cli_error("phase needs %s (usage: cushim phase PID compile|run)",
                  count == 0 ? "a PID and a phase" : "a phase after the PID: compile or run");
        return EXIT_USAGE;
    }
    if (cushim_parse_enum("run|compile", words[0]) >= 0) {
        cli_error("phase takes the PID first, then the phase (usage: cushim phase PID compile|run)");
        return EXIT_USAGE;
    }
    pid_t pid = cli_parse_pid(words[0]);
    int phase = cushim_parse_enum("run|compile", words[1]);
    if (pid < 0)
        return EXIT_USAGE;
    if (phase < 0) {
        cli_error("%s is not a phase (%sexpected compile or run)", cli_shown(words[1]),
                  phase_hint(words[1], hint, sizeof hint));
        return EXIT_USAGE;
    }
    char who[128];
    struct cushim_segment *s = seg_map_rw(pid, who, sizeof who);
    if (!s)
        return EXIT_NOTHING;
    struct request a = {(uint32_t)phase, 0, 0, 0};
    int truncated = seg_write_guarded(s, request, &a);
    seg_unmap(s);
    if (truncated) {
        cli_error("the segment of process %d was cut short (by its owner): no phase requested", (int)pid);
        return EXIT_NOTHING;
    }
    if (!a.already)
        printf("%s: %s phase requested; it takes effect at the process's next allocation\n",
               who, cushim_phase_name(phase));
    else if (a.was && a.was != (uint32_t)phase + 1 && a.was <= CUSHIM_PHASE_COUNT)
        printf("%s: already in the %s phase; the waiting %s request is withdrawn\n", who,
               cushim_phase_name(phase), cushim_phase_name(a.was - 1));
    else
        printf("%s: already in the %s phase\n", who, cushim_phase_name(phase));
    /* A phase moves memory only under CUSHIM_OFFLOAD=compile: said, so that nobody waits for
     * an offload that will not come. */
    if (!(a.flags & (CUSHIM_SEG_F_OFFLOAD_COMPILE | CUSHIM_SEG_F_OFFLOAD_ALWAYS)))
        printf("%s: its offload is off (CUSHIM_OFFLOAD): the phase only marks its phase peaks\n", who);
    else if (a.flags & CUSHIM_SEG_F_OFFLOAD_ALWAYS)
        printf("%s: its offload is always (CUSHIM_OFFLOAD): every phase offloads; the phase only marks "
               "its phase peaks\n", who);
    return 0;
}
