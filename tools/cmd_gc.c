/* cushim gc: removes segments whose process is gone (dead pid, or pid reused: start time
 * differs). Only the caller's segments (everyone's as root). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/procinfo.h"
#include "tools/cli.h"

struct gc_arg {
    int removed;
    int failed;
};

/* A file named like a segment but unreadable as one is removed only if its pid is dead and it
 * could be a segment whose creation was cut short: a regular file no larger than a segment. */
static int could_be_ours(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           (size_t)st.st_size <= sizeof(struct cushim_segment);
}

static int sweep(struct seg_entry *e, void *argp)
{
    struct gc_arg *a = argp;
    int gone = e->ok ? e->stale : cushim_proc_start_time(e->pid) == 0 && could_be_ours(e->path);
    if (!gone)
        return 0;
    if (unlink(e->path) == 0) {
        printf("removed %s (pid %d %s)\n", e->path, (int)e->pid,
               e->ok ? (cushim_proc_start_time(e->pid) ? "reused" : "dead") : "dead, invalid segment");
        a->removed++;
    } else {
        cli_error("cannot remove %s: %s", e->path, strerror(errno));
        a->failed++;
    }
    return 0;
}

int cmd_gc(int argc, char **argv)
{
    struct gc_arg a = {0, 0};
    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            printf("usage: cushim gc\n\nRemoves segments left by processes that died without "
                   "exiting normally\n(SIGKILL, crash), or whose pid now belongs to another process.\n");
            return 0;
        }
        cli_error("gc takes no arguments (got \"%s\")", argv[1]);
        return EXIT_USAGE;
    }
    if (seg_scan(NULL, 0, sweep, &a) < 0 || a.failed)
        return EXIT_NOTHING;
    return 0;
}
