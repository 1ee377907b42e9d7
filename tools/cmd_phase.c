/* cushim phase PID compile|run: asks a live process to switch phase; the shim applies it at its
 * next allocation (through the segment's control area). */
#include <stdio.h>
#include <string.h>

#include "common/units.h"
#include "tools/cli.h"

int cmd_phase(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: cushim phase PID compile|run\n\nSwitches process PID to the compile or "
               "run phase (offload policy); it takes\neffect at the process's next allocation.\n");
        return 0;
    }
    if (argc != 3) {
        if (argc < 3)
            cli_error("phase needs %s (usage: cushim phase PID compile|run)",
                      argc == 1 ? "a PID and a phase" : "a phase after the PID: compile or run");
        else
            cli_error("unexpected argument \"%s\" (usage: cushim phase PID compile|run)", argv[3]);
        return EXIT_USAGE;
    }
    pid_t pid = cli_parse_pid(argv[1]);
    int phase = cushim_parse_enum("run|compile", argv[2]);
    if (pid < 0)
        return EXIT_USAGE;
    if (phase < 0) {
        cli_error("\"%s\" is not a phase (expected compile or run)", argv[2]);
        return EXIT_USAGE;
    }
    struct cushim_segment *s = seg_map_rw(pid);
    if (!s)
        return EXIT_NOTHING;
    if (atomic_load(&s->h.phase) == (uint32_t)phase) {
        /* Nothing to change; a request for the other phase still waiting is replaced by ours,
         * which the process applies as a no-op (and which still holds if it switched away in
         * between, taking that other request). */
        uint32_t was = atomic_exchange(&s->control.phase_request, (uint32_t)phase + 1);
        seg_unmap(s);
        if (was && was != (uint32_t)phase + 1 && was <= CUSHIM_PHASE_COUNT)
            printf("pid %d: already in the %s phase; the waiting %s request is withdrawn\n", (int)pid,
                   cushim_phase_name(phase), cushim_phase_name(was - 1));
        else
            printf("pid %d: already in the %s phase\n", (int)pid, cushim_phase_name(phase));
        return 0;
    }
    atomic_store(&s->control.phase_request, (uint32_t)phase + 1);
    seg_unmap(s);
    printf("pid %d: %s phase requested; it takes effect at the process's next allocation\n", (int)pid,
           cushim_phase_name(phase));
    return 0;
}
