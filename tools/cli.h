/* Shared pieces of the `cushim` command (tools/). Exit codes: 0 ok, 1 nothing found,
 * 2 usage error (bad arguments); `cushim run` returns the program's status. */
#ifndef CUSHIM_CLI_H
#define CUSHIM_CLI_H

#include <stdio.h>
#include <sys/types.h>

#include "common/snapshot.h"

#define EXIT_NOTHING 1
#define EXIT_USAGE 2

/* Subcommands: argv[0] is the subcommand name. Each returns the process's exit code (above;
 * `cushim run`: the program's status). Call from the main thread, one at a time: they read the
 * environment and keep state in statics (segments.c; serve scans on libmicrohttpd's one polling
 * thread while the main thread waits). */
int cmd_run(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_reset_peak(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_phase(int argc, char **argv);

/* Prints "cushim: " + message + newline to stderr, the message's control characters and bytes
 * that are not UTF-8 escaped (cushim_text_escaped); a message longer than 8 KiB is cut, and ends
 * with "...". */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A value as a message shows it (an argument, a path, a program's name): quoted, escaped and,
 * past 120 bytes, cut to its first 60 with "..." and its length (cushim_config_shown): a 10 kB
 * argument is not echoed whole. In one of 4 static buffers used in turn (up to 4 in one message);
 * not thread-safe (the CLI is one thread). */
const char *cli_shown(const char *value);

/* A word a subcommand does not take, said one way for all: `unknown option "W" for CMD (see
 * cushim CMD --help)` for one that starts with '-' (with "did you mean --X?" when W's name, before
 * any '=', is near a long option USAGE names, or --help: cushim_text_nearest's rule), else
 * `unexpected argument "W" for CMD (usage: USAGE)`. */
void cli_bad_word(const char *cmd, const char *word, const char *usage);

/* A long option as the user probably meant it, for "did you mean": `word` in lower case, with a
 * second dash where it had one (-json, --JSON: --json), into probe (len bytes). Returns 1, or 0
 * (probe untouched) when word is no such option: no dash, a single letter (cli_short_option), or
 * a single letter and a '=' (-d=1 is the short option's value; -device-limit=1G is probed). */
int cli_option_probe(const char *word, char *probe, size_t len);

/* For a one-letter option `word` that no command takes ("-q", meant as --quiet): the index of the one
 * name of `names` ("--quiet", ...) that begins with "--" and that letter, or -1 when word is not
 * "-" and one letter, or no name or several begin so. */
int cli_short_option(const char *word, const char *const *names, int count);

/* Absolute path of libcushim.so for LD_PRELOAD: $CUSHIM_LIBRARY (which must be libcushim.so: an
 * ELF shared object with the shim's marker; a message names it as `shown_as`, "--library " or
 * "CUSHIM_LIBRARY="), else next to the build tree's tools/ (../shim/libcushim.so), else the
 * installed library directory. 0 or -1 (message printed). */
int cli_library_path(const char *shown_as, char *buf, size_t len);

/* The real path of `relative` taken from this program's own directory (/proc/self/exe), into buf
 * (len bytes): 0, or -1 when it does not exist or does not fit. */
int cli_beside_exe(const char *relative, char *buf, size_t len);

/* Removes run directory `path` (its files, then itself) without following a symbolic link in
 * its place. 0, or -1 with errno set: ENOTDIR, nothing removed, when it holds anything but
 * regular files of the names a run writes (*.seg, .*.tmp, run-*, .cushim-probe.*): no run's
 * directory. */
int cli_remove_run_dir(const char *path);

/* Parses a pid argument; -1 on error (message printed). */
pid_t cli_parse_pid(const char *s);

/* Says "FLAG given twice: "now" replaces "*last"" (escaped, one line, on stderr) when *last is set
 * and differs from now, then sets *last = now: an option given twice takes its last value, and
 * says so, in every command (as `cushim run` does). */
void cli_say_replaced(const char *flag, const char **last, const char *now);

/* An option's value as given last, and the name it was typed with ("-n" or "--iterations"). */
struct cli_given {
    const char *value, *typed;
};

/* cli_say_replaced for a value the caller has read, given as `typed` (a short or long name of
 * the option long_name): `same` (nonzero) when now means what g's value meant, written another
 * way (`-n 1` then `-n 01`, `-s pid` then `--sort PID`), which is not said. The option is named
 * as typed when both were typed alike (`-n given twice`), else by its long name (a fresh-user
 * trial: "--iterations given twice" of two -n). g then holds now. Called after the value is
 * read, so that a bad one is said alone. */
void cli_say_given(struct cli_given *g, const char *long_name, const char *typed, const char *now, int same);

/* An option with a value, as `--name VALUE` or `--name=VALUE` (a short `-x` also as `-xVALUE`,
 * as getopt takes it; `-x=V` is V): returns 0 when argv[*i] is not
 * `name`; 1 with *value set (and *i moved past a separate value); -1 when the value is missing
 * (the last argument, or followed by "--"), after printing "NAME needs VALUE_NAME", or when the
 * separate value is itself an option (cli_value_is_option). */
int cli_option_value(int argc, char **argv, int *i, const char *name, const char *value_name,
                     const char **value);
/* Whether the separate value given to option `name` is itself an option ("--json --quiet",
 * "--json -h": "--" or "-" and a letter; not "-", "--" or "-1"): then says so in one line (the
 * value can still be given as name=--VALUE) and returns 1; else 0. */
int cli_value_is_option(const char *name, const char *value);

/* ---- segments (segments.c) ---- */

/* Reads a segment or summary file (untrusted): maps it read-only, validates, copies. A file that
 * shrinks while mapped is caught (SIGBUS) and reported. 0, or -1 with a reason in err. */
int seg_read_file(const char *path, struct cushim_snapshot *out, char *err, size_t errlen);

/* Directory holding the live segments: $CUSHIM_SEGMENT_DIR parsed as the shim parses it (a bad
 * value is the default /dev/shm, reported once unless `cushim run` already reported it). The
 * environment is read at the first call only; the string is static (valid for the program's
 * life, never freed). Not thread-safe at the first call. */
const char *seg_dir(void);
/* For the commands that read segments (all but run): CUSHIM_SEGMENT_DIR, when set, must be an
 * absolute path, and the directory must open. 0, or -1 after a one-line message (the command
 * then exits 2: nothing is read from, or removed in, another directory). */
int cli_segment_dir_check(void);
/* Set once `cushim run` has reported bad CUSHIM_ values. */
extern int cli_config_reported;

struct seg_entry;
/* Whether `cushim gc` removes e, a file named like a segment but unreadable as one (another
 * cushim version's, or one whose creation was cut short), a regular file or a symbolic link:
 * SEG_RM_DEAD when its pid is dead (judged here: the file names this pid namespace, or this is
 * the initial one), SEG_RM_NOT_OURS when it has no segment header, its owner is not the uid its
 * name gives and it is 10 minutes old, which no shim makes (segment.h: a segment is named after
 * the uid that owns it; a look-alike another user put there), whatever its pid unless that live
 * process runs as the owner; else 0. A regular file it cannot read: 0. */
enum { SEG_RM_DEAD = 1, SEG_RM_NOT_OURS = 2 };
int seg_invalid_removable(const struct seg_entry *e);

/* One live segment found by seg_scan. */
struct seg_entry {
    char path[1300]; /* directory (< CUSHIM_PATH_MAX) + file name (< 256) */
    pid_t pid;                   /* from the file name: the process's pid in its own namespace */
    uid_t uid;                   /* owner of the file */
    ino_t ino;                   /* the file's inode: a segment put in its place since is another */
    dev_t dev;                   /* and its file system's device */
    int ok;                      /* snapshot valid */
    int stale;                   /* process gone, or pid reused (start time differs) */
    int copy;                    /* another file than the one its process made (live: err says) */
    char err[400];               /* why not ok */
    struct cushim_snapshot snap;
};

/* Calls fn for every cushim segment in seg_dir() that the caller may read (its own; every one
 * when root), optionally only those of `pids` (npids > 0: a process's pid in its own namespace,
 * or, for another namespace's, its pid here, snap.host_pid), in pid order. Returns the number
 * visited (-1 when the directory cannot be opened or entered, said on stderr); fn returns
 * nonzero to stop. Segments named like ours but unreadable or invalid are passed with ok = 0.
 * *e is one static entry, overwritten for the next segment: valid only during fn (copy what is
 * kept). Names that cannot be listed for lack of memory are skipped silently. Not thread-safe,
 * not reentrant (static entry and pid-namespace map, also used by seg_still_stale). */
int seg_scan(const pid_t *pids, int npids, int (*fn)(struct seg_entry *, void *), void *arg);
/* Files named like another user's segments that the last seg_scan left out, as the caller may
 * not read them (0 when it reads every user's: root, or CAP_DAC_READ_SEARCH). Not thread-safe. */
int seg_scan_others(void);

/* Whether segment s was written in another pid namespace than this program's (a container's
 * sharing the directory): its pid is that namespace's. */
int seg_other_namespace(const struct cushim_snapshot *s);

/* The pid (here) of the `cushim run`, still running, that collects the dead process's segment s
 * when it ends (it reports the process as killed, then removes the segment): what `cushim gc`
 * leaves to it; 0 when there is none, or none can be told (a container's run is looked for among
 * its namespace's processes as seen from here). Not thread-safe (seg_scan's pid-namespace map). */
pid_t seg_collecting_run(const struct cushim_snapshot *s);

/* What the segment of a gone process is, as `cushim ps` names it: stale (no exit report), exited
 * (left with its exit report), or a copy (seg_file_is_copy: says nothing of how it ended). */
enum seg_left { SEG_LEFT_STALE, SEG_LEFT_EXITED, SEG_LEFT_COPY };
enum seg_left seg_left_of(const struct cushim_snapshot *s, ino_t ino);

/* The one-line words (no "cushim: ", no newline) for process `pid` gone, whose segment `path` is
 * left as `left`: who removes it, `cushim gc` or (run > 0: seg_collecting_run's) its `cushim run`
 * when it ends (a copy: gc, after that run). Used by stat, reset-peak and phase alike. */
void seg_gone_words(pid_t pid, const char *path, enum seg_left left, pid_t run, char *out, size_t len);

/* Whether segment s, read from the file with inode `ino`, is a copy its process does not write:
 * another file than the one its writer made (the header's file_ino), judged in the writer's pid
 * namespace only. What `cushim ps` lists as a copy, for a live or a stale segment. */
int seg_file_is_copy(const struct cushim_snapshot *s, ino_t ino);

/* Whether a segment seg_scan judged stale still is, by a fresh look (what `cushim gc` asks
 * before it removes one): the same file (inode) holding the same segment (creation time, pid,
 * start time), and its process still gone by a fresh look at the processes (a container's may
 * have started since, or put a new segment under that name). 1 stale; 0 otherwise, also when it
 * cannot tell (e->ok 0, the file gone, replaced or unreadable; a process of another pid
 * namespace whose namespace is not in sight: segments.c is_stale): nothing is removed on a
 * guess. Not thread-safe (static state shared with seg_scan). */
int seg_still_stale(const struct seg_entry *e);

/* Whether process `pid` (of this pid namespace) has the file (dev, ino) mapped, by its
 * /proc/PID/maps (proc(5): the device and inode fields; the process's own user or root may read
 * it): 1 yes, 0 no, -1 cannot tell. What tells a process's segment from a copy of it. */
int seg_mapped_by(pid_t pid, dev_t dev, ino_t ino);

/* Says (one line, on stderr) why there is no live process `pid` of the caller's: none named so
 * in the segment directory, or only another user's. `to_change` (reset-peak, phase): another
 * user's is said as only that user's or root's to change (reading it, stat's case, root or
 * CAP_DAC_READ_SEARCH may). Not thread-safe (the CLI is single-threaded). */
void seg_say_missing(pid_t pid, int to_change);

/* How a pid argument `p` names the process of snapshot s (read by seg_scan): 2 by its pid here
 * (its own pid in this namespace, or, for a container's process read on the host, its host pid);
 * 1 by its own pid in its other namespace only; 0 not. A pid names the processes it names with
 * 2 if any, else the one it names with 1; more than one such is ambiguous (seg_say_ambiguous). */
int seg_names(const struct cushim_snapshot *s, pid_t p);
/* Says (one line) that pid names n processes of other pid namespaces (c: their snapshots). */
void seg_say_ambiguous(pid_t pid, const struct cushim_snapshot *const *c, int n);

/* Maps the live segment of `pid` read-write for an owner's request (reset-peak, phase): the
 * process with that pid here, else the one process of another pid namespace (a container's, read
 * on the host) with that pid there; two such are refused (message names them). Refuses segments
 * of other users (unless root) and stale ones. Returns the mapping or NULL (message printed);
 * release with seg_unmap. `who` (who_len bytes) receives how to name the process reached: "pid
 * N", or "pid H (pid N of pid namespace I)" for a container's process whose pid here is H. */
struct cushim_segment *seg_map_rw(pid_t pid, char *who, size_t who_len);
/* Calls fn(s, arg), which writes into mapping s, catching the fault of a segment truncated
 * meanwhile (its owner's doing): 0, or -1 when it was (the write is lost, nothing else). It
 * installs, once (or a segment read already did: segments.c catch_sigbus), a SIGBUS handler for
 * the whole process (sigaction, never removed): a SIGBUS outside a guarded call is re-raised
 * with the default action, which ends the program as before. Not thread-safe (the install is unsynchronised; the jump target is per thread). */
int seg_write_guarded(struct cushim_segment *s, void (*fn)(struct cushim_segment *, void *), void *arg);
/* Unmaps a mapping seg_map_rw returned (sizeof(struct cushim_segment) bytes); NULL is ignored. */
void seg_unmap(struct cushim_segment *s);

/* Whether `f` is a terminal that takes colour: a tty, NO_COLOR unset or empty, TERM not "dumb". */
int cli_color(FILE *f);

#endif
