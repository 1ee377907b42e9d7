#include "common/path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h" /* CUSHIM_PATH_MAX */

void cushim_parent_dir(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else
        slash[slash == buf] = '\0';
}

int cushim_run_dir_check(const char *dir)
{
    struct stat st;
    const char *base = strrchr(dir, '/');
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? CUSHIM_RUN_DIR_GONE : -1;
    if (!S_ISDIR(st.st_mode) || (st.st_mode & 077) != 0 || strncmp(base ? base + 1 : dir, "cushim-run.", 11) != 0)
        return CUSHIM_RUN_DIR_NOT;
    return st.st_uid == geteuid() ? 0 : CUSHIM_RUN_DIR_OTHER_USER;
}

int cushim_run_dir_owner(const char *dir, int *pid, uint64_t *start, uint64_t *pidns, int *done)
{
    const char *base = strrchr(dir, '/');
    unsigned long long st, ns = 0;
    char rest[16];
    int p;
    base = base ? base + 1 : dir;
    if (sscanf(base, "cushim-run.%d-%llu-%llu.%15s", &p, &st, &ns, rest) != 4) {
        ns = 0;
        if (sscanf(base, "cushim-run.%d-%llu.%15s", &p, &st, rest) != 3)
            return -1;
    }
    /* XXXXXX, or XXXXXX.done */
    size_t rn = strlen(rest);
    if (p <= 0 || !(rn == 6 || (rn == 11 && strcmp(rest + 6, ".done") == 0)))
        return -1;
    *pid = p;
    *start = st;
    *pidns = ns;
    *done = rn == 11;
    return 0;
}

int cushim_trusted_link(const char *path, const struct stat *l)
{
    struct stat d;
    char dir[2 * CUSHIM_PATH_MAX + 260]; /* any link the walk below meets */
    cushim_parent_dir(path, dir, sizeof dir);
    if (stat(dir, &d) != 0 || (d.st_uid != geteuid() && d.st_uid != 0))
        return 0; /* another user's directory: its owner could have put the link there */
    if ((d.st_mode & (S_IWGRP | S_IWOTH)) == 0)
        return 1; /* nobody else can put a link there */
    /* The user's own link in a sticky directory: nobody else can replace it either. */
    return l->st_uid == geteuid() && (d.st_mode & S_ISVTX);
}

int cushim_path_links_trusted(const char *path)
{
    /* The walk the kernel makes: `done` is the part resolved so far (no link in it), `rest` what
     * is left; each link met is judged where it stands, then its target takes its place. */
    char done[2 * CUSHIM_PATH_MAX], rest[2 * CUSHIM_PATH_MAX], next[2 * CUSHIM_PATH_MAX];
    int links = 0;
    if (strlen(path) >= sizeof rest) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* done is absolute and free of links ("" for /): a relative path starts at the (physical)
     * working directory, so that ".." is lexical on it. */
    if (path[0] == '/')
        done[0] = '\0';
    else if (!getcwd(done, sizeof done))
        return -1;
    if (strcmp(done, "/") == 0)
        done[0] = '\0';
    snprintf(rest, sizeof rest, "%s", path);
    while (rest[0]) {
        char *p = rest;
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        char comp[256];
        if (n >= sizeof comp) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        memmove(rest, p + n, strlen(p + n) + 1);
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            char *slash = strrchr(done, '/');
            if (slash)
                *slash = '\0'; /* done holds no link: ".." is lexical here ("/.." is "/") */
            continue;
        }
        char cand[2 * CUSHIM_PATH_MAX + 260];
        snprintf(cand, sizeof cand, "%s/%s", done, comp);
        struct stat l;
        if (lstat(cand, &l) != 0)
            return 1; /* the rest does not exist yet: no link further on */
        if (!S_ISLNK(l.st_mode)) {
            if (strlen(cand) >= sizeof done) {
                errno = ENAMETOOLONG;
                return -1;
            }
            snprintf(done, sizeof done, "%s", cand);
            continue;
        }
        if (!cushim_trusted_link(cand, &l))
            return 0;
        char target[CUSHIM_PATH_MAX];
        ssize_t t = readlink(cand, target, sizeof target - 1);
        if (t <= 0 || ++links > 40) {
            if (t == 0 || links > 40)
                errno = ELOOP;
            return -1;
        }
        target[t] = '\0';
        if ((size_t)snprintf(next, sizeof next, "%s%s", target, rest) >= sizeof next) {
            errno = ENAMETOOLONG;
            return -1;
        }
        snprintf(rest, sizeof rest, "%s", next);
        if (target[0] == '/')
            done[0] = '\0';
    }
    return 1;
}

const char *cushim_output_refusal(const struct stat *st)
{
    if (S_ISREG(st->st_mode) && st->st_uid != geteuid())
        return "a file of another user";
    if (!S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode) && !S_ISFIFO(st->st_mode))
        return "not a regular file";
    return NULL;
}

int cushim_std_stream(const struct stat *st, int self)
{
    struct stat s;
    for (int fd = 2; fd >= 1; fd--)
        if (fd != self && fstat(fd, &s) == 0 && s.st_dev == st->st_dev && s.st_ino == st->st_ino)
            return fd;
    return 0;
}
