#include "tools/run_nested.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "common/segment.h"
#include "tools/cli.h"

void outer_run_find(struct outer_run *o)
{
    const char *dir = getenv("CUSHIM_RUN_DIR"), *id = getenv("CUSHIM_RUN_ID");
    char *end;
    memset(o, 0, sizeof *o);
    if (!dir || !id || !*id || strlen(dir) >= sizeof o->dir || cushim_run_dir_check(dir) != 0)
        return;
    uint64_t v = strtoull(id, &end, 16);
    if (*end || strlen(id) > 16)
        return;
    snprintf(o->dir, sizeof o->dir, "%s", dir);
    o->id = v;
}

void outer_run_register(const struct outer_run *o, uint64_t inner_id, const char *inner_dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/run-%llx", o->dir, (unsigned long long)inner_id);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, inner_dir, strlen(inner_dir));
    (void)w; /* without it, only this run's processes still running are said (no killed run) */
    close(fd);
}

void outer_run_hand_over(const struct outer_run *o, const char *dir, uint64_t inner_id)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    /* The segment type is cache-line aligned (common/segment.h): malloc's alignment is not enough. */
    struct cushim_segment *seg = aligned_alloc(_Alignof(struct cushim_segment), sizeof *seg);
    while (d && seg && (de = readdir(d)) != NULL) {
        /* The summaries run_collect took (.taken-NAME). */
        size_t n = strlen(de->d_name);
        const char *name = de->d_name + 7;
        if (n < 12 || strncmp(de->d_name, ".taken-", 7) != 0 || strcmp(de->d_name + n - 4, ".seg") != 0)
            continue;
        char from[4400], tmp[4400], to[4400];
        snprintf(from, sizeof from, "%s/%s", dir, de->d_name);
        /* Named for this run too (a summary of the outer run may have the same name). */
        snprintf(tmp, sizeof tmp, "%s/.%llx-%s.tmp", o->dir, (unsigned long long)inner_id, name);
        snprintf(to, sizeof to, "%s/%llx-%s", o->dir, (unsigned long long)inner_id, name);
        int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t got = in >= 0 ? read(in, seg, sizeof *seg) : -1;
        if (in >= 0)
            close(in);
        if (got != (ssize_t)sizeof *seg)
            continue; /* not a whole summary: run_collect already said what was wrong with it */
        seg->h.run_id = o->id;
        seg->h.flags &= ~(uint32_t)CUSHIM_SEG_F_TOP;
        int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int ok = out >= 0 && fchmod(out, 0600) == 0 && write(out, seg, sizeof *seg) == (ssize_t)sizeof *seg;
        if (out >= 0 && close(out) != 0)
            ok = 0;
        if (!ok || rename(tmp, to) != 0) {
            int e = errno;
            unlink(tmp);
            if (e == ENOENT) {
                /* The enclosing run closed its directory: it has ended (its summary was said). */
                cli_error("the enclosing `cushim run` finished before this one: its summary does not "
                          "list this run's processes");
                break;
            }
            cli_error("cannot hand %s to the enclosing run (%s): %s", de->d_name, o->dir, strerror(e));
        }
    }
    free(seg);
    if (d)
        closedir(d);
}
