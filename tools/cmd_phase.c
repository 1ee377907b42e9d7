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

int cmd_phase(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: cushim phase PID compile|run\n\nSwitches process PID to the compile or "
               "run phase (offload policy); it takes\neffect at the process's next allocation.\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--") == 0) { /* the end of (no) options */
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (argc > 1 && argv[1][0] == '-' && strcmp(argv[1], "-")) { /* an option: phase takes none */
        cli_bad_word("phase", argv[1], "cushim phase PID compile|run");
        return EXIT_USAGE;
    }
    if (argc != 3) {
        if (argc < 3)
            cli_error("phase needs %s (usage: cushim phase PID compile|run)",
                      argc == 1 ? "a PID and a phase" : "a phase after the PID: compile or run");
        else
            cli_bad_word("phase", argv[3], "cushim phase PID compile|run");
        return EXIT_USAGE;
    }
    if (cushim_parse_enum("run|compile", argv[1]) >= 0) {
        cli_error("phase takes the PID first, then the phase (usage: cushim phase PID compile|run)");
        return EXIT_USAGE;
    }
    pid_t pid = cli_parse_pid(argv[1]);
    int phase = cushim_parse_enum("run|compile", argv[2]);
    if (pid < 0)
        return EXIT_USAGE;
    if (phase < 0) {
        static const char *const phases[] = {"compile", "run"};
        char lower[16] = "";
        size_t d, n = strlen(argv[2]);
        for (size_t c = 0; c < n && c + 1 < sizeof lower; c++)
            lower[c] = argv[2][c] >= 'A' && argv[2][c] <= 'Z' ? (char)(argv[2][c] - 'A' + 'a') : argv[2][c];
        int near = n < sizeof lower ? cushim_text_nearest(lower, n, phases, 2, 0, &d) : -1;
        cli_error("\"%s\" is not a phase (%s%s%sexpected compile or run)", argv[2], near >= 0 ? "did you mean " : "",
                  near >= 0 ? phases[near] : "", near >= 0 ? "? " : "");
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
