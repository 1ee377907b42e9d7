/* cushim gc: removes segments whose process is gone (dead pid, or pid reused: start time
 * differs), and run directories (${TMPDIR:-/tmp}/cushim-run.PID-START-PIDNS.*) whose `cushim run`
 * is gone, in this pid namespace only. Only the caller's (everyone's as root). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"
#include "common/config.h"
#include "common/procinfo.h"
#include "common/text.h"
#include "tools/cli.h"

struct gc_arg {
    int removed;
    int failed;
};

static int sweep(struct seg_entry *e, void *argp)
{
    struct gc_arg *a = argp;
    /* Only the caller's (a reader with CAP_DAC_READ_SEARCH sees everyone's: not its to remove). */
    if (geteuid() != 0 && e->uid != geteuid())
        return 0;
    int rm = e->ok ? 0 : seg_invalid_removable(e);
    int gone = e->ok ? e->stale && !seg_collecting_run(&e->snap) && seg_still_stale(e) : rm;
    if (!gone)
        return 0;
    /* The file judged is still the one there (seg_still_stale looks again for a segment): not
     * one put in its place meanwhile, a process's new segment say (a review). */
    struct stat now;
    if (!e->ok && (lstat(e->path, &now) != 0 || now.st_ino != e->ino || now.st_dev != e->dev))
        return 0;
    if (unlink(e->path) == 0) {
        /* Escaped, as in every message: a segment directory's name may hold an escape sequence
         * or a newline. */
        char shown[sizeof e->path * 4];
        cushim_text_escaped(e->path, shown, sizeof shown);
        if (e->ok && seg_other_namespace(&e->snap))
            printf("removed %s (pid %d of pid namespace %llu, dead)\n", shown, (int)e->pid,
                   (unsigned long long)e->snap.pidns_inode);
        else if (rm == SEG_RM_NOT_OURS)
            printf("removed %s (not a segment: its owner is not the uid its name gives)\n", shown);
        else
            printf("removed %s (pid %d %s)\n", shown, (int)e->pid,
                   e->ok ? (cushim_proc_alive(e->pid) ? "reused" : "dead") : "dead, invalid segment");
        a->removed++;
    } else if (errno != ENOENT) { /* ENOENT: another gc removed it meanwhile */
        cli_error("cannot remove %s: %s", e->path, strerror(errno));
        a->failed++;
    }
    return 0;
}

/* The directory of a `cushim run` that is gone: named cushim-run.PID-START-PIDNS.XXXXXX[.done], a
 * directory (not a link) of the caller's (any as root), and PID is dead or started at another
 * time: judged here when made in the caller's pid namespace, else by the processes of its own
 * namespace as seen from here (cushim_pidns_alive: a container's run, from the host, once it is
 * gone; a multi-user trial found those directories left for good). *ns_out: its namespace when
 * another's, else 0. */
/* The other pid namespaces' processes, read once per sweep, when a run directory of one of them
 * is first met (state 0: not read yet, 1 read, -1 could not be). */
struct ns_look {
    struct cushim_pidns_map map;
    int state;
};

static int run_dir_gone(int dirfd, const char *name, pid_t *pid, uint64_t *ns_out, struct ns_look *look)
{
    int p, done;
    uint64_t start, ns;
    struct stat st;
    *ns_out = 0;
    if (cushim_run_dir_owner(name, &p, &start, &ns, &done) != 0)
        return 0;
    /* mkdtemp makes a run's directory mode 0700: another mode is no run's (a look-alike another
     * user made is left alone, and fails no gc). */
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        (st.st_mode & 07777) != 0700 || (geteuid() != 0 && st.st_uid != geteuid()))
        return 0;
    /* One this gc could not empty (root in a user namespace, or without CAP_DAC_OVERRIDE, before
     * another user's) is not its to judge: left without a word, not failed at every cron run. */
    if (faccessat(dirfd, name, R_OK | W_OK | X_OK, AT_EACCESS) != 0)
        return 0;
    *pid = p;
    /* A name from before the namespace was in it (pidns 0) is taken as ours. */
    if (ns == 0 || ns == cushim_pidns_inode())
        return !cushim_proc_is(p, start);
    if (look->state == 0)
        look->state = cushim_pidns_scan(&look->map) == 0 ? 1 : -1;
    if (look->state < 0)
        return 0;
    int alive = cushim_pidns_alive(&look->map, ns, p, start, NULL);
    *ns_out = ns;
    return alive == 0; /* -1, cannot tell (a namespace not in sight): left */
}

/* Removes the directories of killed runs in ${TMPDIR:-/tmp}. Returns 0, or -1 when that folder
 * cannot be read (said: a cron gc whose TMPDIR is not the runs' must not pass for done). */
static int sweep_run_dirs(struct gc_arg *a)
{
    const char *tmp = getenv("TMPDIR");
    const char *top = tmp && *tmp ? tmp : "/tmp";
    DIR *d = opendir(top);
    if (!d) {
        char shown[500];
        cushim_config_shown(top, shown, sizeof shown);
        cli_error("cannot read %s%s to remove the directories of killed runs: %s", tmp && *tmp ? "TMPDIR=" : "",
                  shown, strerror(errno));
        return -1;
    }
    struct dirent *de;
    struct ns_look look = {{NULL, 0}, 0};
    while ((de = readdir(d)) != NULL) {
        pid_t pid;
        uint64_t ns;
        if (strncmp(de->d_name, "cushim-run.", 11) != 0 || !run_dir_gone(dirfd(d), de->d_name, &pid, &ns, &look))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", top, de->d_name);
        if (cli_remove_run_dir(path) == 0) {
            char shown[sizeof path * 4]; /* escaped: TMPDIR's name may hold control characters */
            cushim_text_escaped(path, shown, sizeof shown);
            if (ns)
                printf("removed %s (run directory of cushim pid %d of pid namespace %llu, gone)\n", shown,
                       (int)pid, (unsigned long long)ns);
            else
                /* As for a segment: its pid alive is another process now (a bad-input trial read
                 * "cushim pid 1, gone" beside a live pid 1). */
                printf("removed %s (run directory of cushim pid %d %s)\n", shown, (int)pid,
                       cushim_proc_alive(pid) ? "reused" : "dead");
            a->removed++;
        } else if (errno == ENOENT || errno == ENOTDIR) {
            /* removed meanwhile (a run that had just ended cleaning up after itself), or holding
             * what no run writes (cli_remove_run_dir): not a run's, left as it is */
        } else {
            cli_error("cannot remove %s/%s: %s", top, de->d_name, strerror(errno));
            a->failed++;
        }
    }
    closedir(d);
    cushim_pidns_free(&look.map);
    return 0;
}

int cmd_gc(int argc, char **argv)
{
    struct gc_arg a = {0, 0};
    if (argc > 1) {
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
            /* Every state of a gone process's segment that cushim ps names (a review: exited
             * ones and copies, which ps says gc removes, were not named here). */
            printf("usage: cushim gc\n\nRemoves segments left by processes that died without "
                   "exiting normally\n(SIGKILL, crash: stale in cushim ps), that ended with their "
                   "exit report but\nleft their segment (exited), copies of a gone process's "
                   "segment (copy), or\nwhose pid now belongs to another process, those of "
                   "processes that are gone\nwhich this cushim cannot read (another version's; not "
                   "one whose header names\nanother pid namespace), and the run directories "
                   "(${TMPDIR:-/tmp}/cushim-run.*)\nof `cushim run`s killed before they could clean "
                   "up (one not mode 0700, or\nholding anything but the files a run writes, is no "
                   "run's and is left). A\nsegment of a gone process whose `cushim run` goes on is "
                   "that run's: it reports\nthe process and removes the segment when it ends (a "
                   "copy: gc, after that).\nExit 0 when done, 1 when something could not be removed "
                   "(said), 2 when TMPDIR\ncannot be read (after the segments are swept).\n");
            return 0;
        }
        if (argv[1][0] == '-') /* --hlep, --help=1: said as every command says them */
            cli_bad_word("gc", argv[1], "cushim gc [--help]");
        else
            cli_error("gc takes no arguments (got %s)", cli_shown(argv[1]));
        return EXIT_USAGE;
    }
    int scanned = seg_scan(NULL, 0, sweep, &a);
    /* The segments are swept all the same; an unusable TMPDIR is then an environment value the
     * command cannot use, as a segment directory is (exit 2). */
    if (sweep_run_dirs(&a) != 0)
        return EXIT_USAGE;
    if (scanned < 0 || a.failed)
        return EXIT_NOTHING;
    /* On a terminal, silence would leave a person wondering; from cron (README: "In production")
     * any output is mailed, so elsewhere an idle gc says nothing. */
    if (a.removed == 0 && isatty(STDOUT_FILENO))
        printf("nothing to remove\n");
    return 0;
}
