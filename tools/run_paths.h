/* The files and directories a run writes to, checked before its program starts
 * (tools/run_paths.c). Not thread-safe (the CLI is single-threaded). */
#ifndef CUSHIM_TOOLS_RUN_PATHS_H
#define CUSHIM_TOOLS_RUN_PATHS_H

#include "common/config.h"

/* The segment directory (CUSHIM_SEGMENT_DIR) must be a directory the user can create files in;
 * the report (CUSHIM_REPORT) and log file (CUSHIM_LOG_FILE) files the user can write, or create in
 * such a directory (a FIFO with a reader: it is opened here and held for the run). Relative report
 * and log paths are made absolute in the environment (the program may change its directory before
 * it writes them). Each problem is said in one line naming the flag or variable (run_flag_given).
 * 0, or -1 after saying why. */
int run_check_paths(const struct cushim_config *cfg);

/* Whether --json `json` and the report `report` are one regular file, existing or to be made: by
 * name once links and relative parts are resolved, or by inode (a hard link). 0 for what is no
 * file of its own: the report's stdout, stderr, - and %p names, --json's -, a device or a FIFO. */
int run_same_output_file(const char *json, const char *report);

/* Relative path v taken from the working directory, into abs (len bytes): "cwd/v", leading "./"
 * left out (./nodir/x: cwd/nodir/x, as messages name it); an absolute v as it is. Returns the
 * length the whole path needs (>= len: cut), or (size_t)-1 with errno set when the working
 * directory cannot be read. */
size_t run_absolute_path(const char *v, char *abs, size_t len);

#endif
