/* cushim gc: removes segments whose process is gone (dead pid, or pid reused: start time
 * differs). Only the caller's segments (everyone's as root). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/procinfo.h"
#include "tools/cli.h"

static int sweep(struct seg_entry *e, void *argp)
{
    int *removed = argp;
    /* An unreadable file named like a segment is removed only if its pid is dead. */
    int gone = e->ok ? e->stale : cushim_proc_start_time(e->pid) == 0;
    if (!gone)
        return 0;
    if (unlink(e->path) == 0) {
        printf("removed %s (pid %d %s)\n", e->path, (int)e->pid,
               e->ok ? (cushim_proc_start_time(e->pid) ? "reused" : "dead") : "dead, invalid segment");
        (*removed)++;
    } else {
        cli_error("cannot remove %s: %s", e->path, strerror(errno));
    }
    return 0;
}

int cmd_gc(int argc, char **argv)
{
    int removed = 0;
    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            printf("usage: cushim gc\n\nRemoves segments left by processes that died without "
                   "exiting normally\n(SIGKILL, crash), or whose pid now belongs to another process.\n");
            return 0;
        }
        cli_error("gc takes no arguments (got \"%s\")", argv[1]);
        return EXIT_USAGE;
    }
    seg_scan(NULL, 0, sweep, &removed);
    return 0;
}
