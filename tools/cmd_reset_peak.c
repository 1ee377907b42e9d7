/* cushim reset-peak PID [--device N]: every peak of the process (or of device N) becomes its
 * current value, by compare-and-swap on the live segment (common/peaks.c). The program does not
 * need to make any CUDA call for it to show. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/peaks.h"
#include "common/units.h"
#include "tools/cli.h"

struct reset_arg {
    long device; /* -1: every device */
    int reset;   /* devices reset */
};

static void reset(struct cushim_segment *s, void *argp)
{
    struct reset_arg *a = argp;
    uint32_t count = atomic_load(&s->h.device_count);
    for (uint32_t i = 0; i < count && i < CUSHIM_MAX_DEVICES; i++) {
        if ((a->device >= 0 && (long)i != a->device) || atomic_load(&s->devices[i].state) == 0)
            continue;
        cushim_reset_record_peaks(&s->devices[i], atomic_load(&s->h.phase));
        a->reset++;
    }
    atomic_fetch_add(&s->control.peak_resets, 1);
}

int cmd_reset_peak(int argc, char **argv)
{
    pid_t pid = 0;
    long device = -1;
    const char *device_given = NULL;
    int options = 1; /* until "--": after it, the PID (as stat and phase take it) */
    for (int i = 1; i < argc; i++) {
        if (options && strcmp(argv[i], "--") == 0) {
            options = 0;
            continue;
        }
        if (options && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
            printf("usage: cushim reset-peak PID [--device N]\n\nSets the peaks of process PID "
                   "(of device N only, with --device) to their\ncurrent values, like "
                   "torch.cuda.reset_peak_memory_stats.\nExit 0 when done, 1 when PID is no live "
                   "process under cushim (or, with\n--device, has not used device N), 2 on a usage "
                   "error.\n");
            return 0;
        }
        const char *v;
        int got = options ? cli_option_value(argc, argv, &i, "--device", "a device ordinal", &v) : 0;
        if (got < 0)
            return EXIT_USAGE;
        if (got) {
            /* Digits only (strtol alone would take " +0" and "-0"), as every number of the CLI;
             * leading zeros say nothing, as in CUSHIM_DEVICE_LIMIT's ordinals (an attack trial:
             * 000 was device 0 and 0000 refused). */
            uint64_t ordinal;
            if (cushim_parse_u64(v, CUSHIM_MAX_DEVICES - 1, &ordinal) != 0) {
                /* cuda:1, GPU1: the ordinal alone is offered; not for a UUID's or a list's last
                 * digits (GPU-...-0a10, cuda:0,1: a review) */
                size_t letters = strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
                size_t lead = letters + (letters > 0 && v[letters] == ':');
                char hint[64] = "";
                if (letters > 0 && cushim_parse_u64(v + lead, CUSHIM_MAX_DEVICES - 1, &ordinal) == 0)
                    snprintf(hint, sizeof hint, "; the ordinal alone: --device %llu", (unsigned long long)ordinal);
                cli_error("--device needs a device ordinal 0..%u (got %s%s)", CUSHIM_MAX_DEVICES - 1, cli_shown(v), hint);
                return EXIT_USAGE;
            }
            if (device_given && device != (long)ordinal) /* 1 and 01 are one device (a review) */
                cli_error("--device given twice: %s replaces %s", cli_shown(v), cli_shown(device_given));
            device_given = v;
            device = (long)ordinal;
        } else if (options && argv[i][0] == '-' && !(pid && argv[i][1] >= '0' && argv[i][1] <= '9')) {
            /* --dev, -d: the option meant is offered (-5 after the PID is an extra word) */
            cli_bad_word("reset-peak", argv[i], "cushim reset-peak PID [--device N]");
            return EXIT_USAGE;
        } else if (pid == 0) {
            if ((pid = cli_parse_pid(argv[i])) < 0)
                return EXIT_USAGE;
        } else {
            cli_error("unexpected argument %s for reset-peak (usage: cushim reset-peak PID [--device N])",
                      cli_shown(argv[i]));
            return EXIT_USAGE;
        }
    }
    if (pid <= 0) {
        cli_error("reset-peak needs a PID (usage: cushim reset-peak PID [--device N])");
        return EXIT_USAGE;
    }
    char who[128];
    struct cushim_segment *s = seg_map_rw(pid, who, sizeof who);
    if (!s)
        return EXIT_NOTHING;
    struct reset_arg a = {device, 0};
    int truncated = seg_write_guarded(s, reset, &a);
    seg_unmap(s);
    if (truncated) {
        cli_error("the segment of process %d was cut short while its peaks were reset (by its "
                  "owner): not all of them were", (int)pid);
        return EXIT_NOTHING;
    }
    int n = a.reset;
    if (n == 0 && device >= 0) {
        cli_error("process %d has no activity on device %ld", (int)pid, device);
        return EXIT_NOTHING;
    }
    if (n == 0) {
        cli_error("process %d has no device activity yet: no peak to reset", (int)pid);
        return EXIT_NOTHING;
    }
    if (device >= 0)
        printf("%s: peaks of device %ld set to their current values\n", who, device);
    else
        printf("%s: peaks of %d device%s set to their current values\n", who, n, n == 1 ? "" : "s");
    return 0;
}
