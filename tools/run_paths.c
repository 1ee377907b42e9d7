/* The files and directories a run writes to (the segment directory, --report, --log-file, --json),
 * checked before the program starts: each said in one line naming the option or variable, as
 * given, and what was expected. Not thread-safe (the CLI is single-threaded). */
#include "tools/run_paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "tools/cli.h"
#include "tools/output.h"
#include "tools/run_options.h"

/* A FIFO named by --report or --log-file, opened for writing here and kept open for the whole
 * run: one without a reader is refused before the program starts (as --json is), and its reader
 * does not see an end of file between the processes that write to it. */
static int held_fifos[2] = {-1, -1};

static const char *hold_fifo(const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENXIO ? "a FIFO with no reader; start its reader first" : cli_output_strerror(errno);
    for (int i = 0; i < 2; i++)
        if (held_fifos[i] < 0) {
            held_fifos[i] = fd;
            return NULL;
        }
    close(fd);
    return NULL;
}

/* Whether a file can be created in dir: made and removed at once (errno set when not).
 * access(2) is not enough for root, whom it lets through wherever the mode allows nothing
 * (/proc, /sys, a read-only bind mount it does not check). */
static int create_probe(const char *dir)
{
    char p[4300];
    if ((size_t)snprintf(p, sizeof p, "%s/.cushim-probe.XXXXXX", dir) >= sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemp(p);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(p);
    return 0;
}

/* path as an absolute one with its links resolved (realpath(3) of the file; for a file not made
 * yet, of its directory, following a dangling link's target up to 8 times; else path made
 * absolute as given), into out. */
static void canonical_path(const char *path, char *out, size_t len)
{
    char abs[PATH_MAX * 2], dir[PATH_MAX * 2], real[PATH_MAX], target[PATH_MAX];
    char cwd[PATH_MAX] = ".";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    snprintf(abs, sizeof abs, "%s%s%s", path[0] == '/' ? "" : cwd, path[0] == '/' ? "" : "/", path);
    for (int hops = 0;; hops++) {
        if (realpath(abs, real)) {
            snprintf(out, len, "%s", real);
            return;
        }
        snprintf(dir, sizeof dir, "%s", abs);
        char *slash = strrchr(dir, '/');
        *slash = '\0';
        ssize_t n = hops < 8 ? readlink(abs, target, sizeof target - 1) : -1;
        if (n <= 0) {
            if (realpath(dir[0] ? dir : "/", real))
                snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", slash + 1);
            else
                snprintf(out, len, "%s", abs);
            return;
        }
        target[n] = '\0'; /* a dangling link: where a write through it makes the file */
        char next[sizeof abs];
        if ((size_t)snprintf(next, sizeof next, "%s%s%s", target[0] == '/' ? "" : dir, target[0] == '/' ? "" : "/",
                             target) >= sizeof next) {
            snprintf(out, len, "%s", abs);
            return;
        }
        memcpy(abs, next, sizeof abs);
    }
}

/* Whether --json `json` and the report `report` (CUSHIM_REPORT) are one regular file, existing or
 * to be made: by name once resolved, or by inode (a hard link). Not for what is no file of its own:
 * the report's stdout/stderr/- and %p names (one per process), --json's - (stdout), a device or a
 * FIFO (/dev/null takes both). */
int run_same_output_file(const char *json, const char *report)
{
    if (!strcmp(json, "-") || !strcmp(report, "-") || !strcmp(report, "stdout") || !strcmp(report, "stderr") ||
        strstr(report, "%p"))
        return 0;
    struct stat js, rs;
    int jex = stat(json, &js) == 0, rex = stat(report, &rs) == 0;
    if ((jex && !S_ISREG(js.st_mode)) || (rex && !S_ISREG(rs.st_mode)))
        return 0;
    if (jex && rex)
        return js.st_dev == rs.st_dev && js.st_ino == rs.st_ino;
    char a[PATH_MAX * 2], b[PATH_MAX * 2];
    canonical_path(json, a, sizeof a);
    canonical_path(report, b, sizeof b);
    return strcmp(a, b) == 0;
}

/* The paths of the run (options or the environment) must be usable before the program runs:
 * the segment directory an existing directory the user can create files in; --report and
 * --log-file files the user can write (or create, in such a directory). Relative report and log
 * paths are made absolute here, since the program may change its directory before it writes
 * them. 0, or -1 after saying why. */
size_t run_absolute_path(const char *v, char *abs, size_t len)
{
    if (v[0] == '/')
        return (size_t)snprintf(abs, len, "%s", v);
    char cwd[4096];
    errno = 0;
    if (!getcwd(cwd, sizeof cwd))
        return (size_t)-1;
    while (v[0] == '.' && v[1] == '/')
        v += 2 + strspn(v + 2, "/");
    return (size_t)snprintf(abs, len, "%s/%s", cwd, v);
}

int run_check_paths(const struct cushim_config *cfg)
{
    static const struct {
        enum cushim_option id;
        int is_dir;
    } paths[] = {{CUSHIM_OPT_SEGMENT_DIR, 1}, {CUSHIM_OPT_REPORT, 0}, {CUSHIM_OPT_LOG_FILE, 0}};
    int bad = 0;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *var = cushim_option_table[paths[i].id].variable;
        const char *v = getenv(var);
        const char *used = paths[i].id == CUSHIM_OPT_SEGMENT_DIR ? cfg->segment_dir
                           : paths[i].id == CUSHIM_OPT_REPORT    ? cfg->report
                                                                 : cfg->log_file;
        /* A value the configuration refused (reported above; its default is used) is not
         * checked again. */
        if (!v || !*v || strcmp(v, used) != 0)
            continue;
        if (paths[i].id == CUSHIM_OPT_REPORT && (!strcmp(v, "stderr") || !strcmp(v, "stdout") || !strcmp(v, "-")))
            continue;
        char name[64], abs[4200], dir[4200], shown[CUSHIM_PATH_MAX];
        snprintf(shown, sizeof shown, "%s", v); /* as typed, for the messages (an attack trial) */
        if (run_flag_given(paths[i].id)) {
            run_flag_name(var, name, sizeof name - 1);
            strcat(name, " ");
        } else
            snprintf(name, sizeof name, "%s=", var);
        if (v[0] != '/') {
            /* Report and log files are taken from the run's directory (a relative segment
             * directory was refused above). */
            size_t n = run_absolute_path(v, abs, sizeof abs);
            if (n == (size_t)-1) {
                cli_error("%s%s: cannot make it an absolute path: %s; nothing was run", name, cli_shown(v), strerror(errno));
                bad = 1;
                continue;
            }
            if (n >= CUSHIM_PATH_MAX) {
                /* What the shims would refuse (config.h): said now, not lost at exit. */
                char cwd[4096] = "";
                (void)!getcwd(cwd, sizeof cwd);
                cli_error("%s%s: %zu bytes once made absolute (from %s), at most %d; nothing was run", name, cli_shown(v), n,
                          cwd, CUSHIM_PATH_MAX - 1);
                bad = 1;
                continue;
            }
            setenv(var, abs, 1);
            v = getenv(var);
        }
        if (paths[i].is_dir)
            snprintf(dir, sizeof dir, "%s", v);
        else
            cushim_parent_dir(v, dir, sizeof dir);
        struct stat st;
        int rc = stat(dir, &st);
        const char *why = NULL;
        if (rc != 0 && errno == ENOENT) { /* found by a fresh-user trial: "not a directory (No such file...)" */
            cli_error("%s%s: %s does not exist; nothing was run", name, cli_shown(shown), dir);
            bad = 1;
            continue;
        }
        if (rc != 0 || !S_ISDIR(st.st_mode))
            why = rc != 0 ? strerror(errno) : "it is a file";
        if (why) {
            cli_error("%s%s: %s is not a directory (%s); nothing was run", name, cli_shown(shown), dir, why);
            bad = 1;
            continue;
        }
        /* A file per process (%p) is created later; one named file that exists is judged as the
         * shims will judge it (common/path.h: links others could have planted, other users'
         * files), then for the user's write permission. */
        struct stat lst, fst;
        if (!paths[i].is_dir) {
            /* The file's own name (a %p as the longest pid: 7 digits, Linux's PID_MAX_LIMIT
             * 4194304) must fit the file system's limit. */
            const char *base = strrchr(v, '/') ? strrchr(v, '/') + 1 : v;
            size_t len = 0;
            for (const char *c = base; *c; c++, len++)
                if (c[0] == '%' && c[1] == 'p')
                    c++, len += 6;
            long max = pathconf(dir, _PC_NAME_MAX);
            if (max <= 0)
                max = 255;
            if (len > (size_t)max) {
                cli_error("%s%s: its file name is %zu bytes%s, at most %ld there; nothing was run", name, cli_shown(shown),
                          len, strstr(base, "%p") ? " with a 7-digit pid" : "", max);
                bad = 1;
                continue;
            }
        }
        int named = !paths[i].is_dir && !strstr(v, "%p");
        int found = named && lstat(v, &lst) == 0;
        if (named && !found && errno != ENOENT) {
            cli_error("%s%s: cannot write it (%s); nothing was run", name, cli_shown(shown), strerror(errno));
            bad = 1;
            continue;
        }
        if (found) {
            int target_errno = 0; /* the link's target: what the shims will open */
            fst = lst;
            if (S_ISLNK(lst.st_mode) && stat(v, &fst) != 0)
                target_errno = errno;
            int trusted = cushim_path_links_trusted(v);
            if (trusted != 1)
                why = trusted == 0 ? "a symbolic link, not followed" : strerror(errno);
            else if (target_errno == ENOENT)
                continue; /* a trusted link to a file the shims will create through it */
            else if (target_errno)
                why = strerror(target_errno);
            else if (cushim_std_stream(&fst, -1))
                ; /* /dev/stderr (the program inherits ours): the shims write through the descriptor */
            else if (S_ISFIFO(fst.st_mode))
                why = hold_fifo(v);
            else if (S_ISDIR(fst.st_mode))
                why = "it is a directory";
            else if ((why = cushim_output_refusal(&fst)) == NULL && access(v, W_OK) != 0)
                why = strerror(errno);
            if (why) {
                cli_error("%s%s: cannot write it (%s); nothing was run", name, cli_shown(shown), why);
                bad = 1;
            }
            continue;
        }
        if (access(dir, W_OK | X_OK) != 0 || create_probe(dir) != 0) {
            cli_error("%s%s: cannot create files in %s (%s); nothing was run", name, cli_shown(shown), dir, strerror(errno));
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}