/* Why `cushim run` could not start its program, when execvp's errno alone would mislead: an
 * ENOENT for a file that exists is its interpreter's (execve(2): "the interpreter named in a
 * script's #! line, or the ELF interpreter (dynamic loader) of an executable, does not exist").
 * Runs in the forked child after a failed execvp; not thread-safe (reads files, no locks). */
#ifndef CUSHIM_RUN_EXEC_H
#define CUSHIM_RUN_EXEC_H

#include <stddef.h>

/* For `prog` as execvp took it (a name with a '/' as a path, else searched along PATH, or
 * confstr(_CS_PATH) when PATH is unset, as execvp does), writes into why (n bytes, truncated, NUL
 * terminated) the interpreter that is missing: "its interpreter \"/x\" (its #! line) does not
 * exist" (or, for a #! line ending in a carriage return, that it does) or "its dynamic loader \"/x\" (ELF
 * interpreter) does not exist"; for an interpreter that exists and is itself a script (or an ELF
 * file) whose own is missing, 6 files deep at most as the kernel follows them, "down its #! chain, the
 * interpreter \"/x\" of \"/script\" (its #! line) does not exist"; and returns 1; returns 0
 * (why untouched) when the file cannot be found or read, or names no interpreter (a plain ENOENT
 * then). */
int run_exec_missing_interpreter(const char *prog, char *why, size_t n);

/* For `prog` without a '/' that execvp did not find along PATH (ENOENT): writes into why (n bytes)
 * "not found on PATH", with "(./prog is in this directory: a program here is run as ./prog)"
 * when the current directory has an executable file of that name (with how to run it when that
 * file is not executable) (as a shell says "command not found"; found
 * by a fresh-user trial: "No such file or directory" for a program that was there). Returns 1,
 * or 0 (why untouched) for a name with a '/'. */
int run_exec_not_on_path(const char *prog, char *why, size_t n);

/* For a program word prog[0] that execvp did not find and that is a shell's assignment, NAME=VALUE
 * (an attack trial: `cushim run VAR=x prog` said only "not found on PATH"): writes into why (n
 * bytes) that cushim run sets no variables, and how to (env(1) after "--", or the variable before
 * cushim), naming the program that follows the assignments; returns 1, else 0 (why untouched). */
int run_exec_assignment(char *const *prog, char *why, size_t n);

/* For `prog` without a '/' that execvp refused with EACCES: when a directory along PATH has that
 * name (execvp's EACCES for it, "Permission denied", read as a program not allowed to run: an
 * attack trial), writes "not found on PATH (DIR/prog there is a directory)" into why (n bytes)
 * and returns 1; else 0 (why untouched). */
int run_exec_dir_on_path(const char *prog, char *why, size_t n);

/* For `prog` as execvp takes it: 1 when the file execvp would run is a binary one (an ELF header,
 * or a NUL byte in its first line within its first 80 bytes, as bash tells a binary file), its
 * path then in out (PATH_MAX bytes); else 0. Such a file is run with execv, not execvp: execvp
 * runs a file that execve refuses with ENOEXEC (an ELF for another machine) with /bin/sh, which
 * would run whatever command lines its bytes hold, where a shell says "Exec format error". */
int run_exec_binary(const char *prog, char *out);

#endif
