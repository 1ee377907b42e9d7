/* Output files of the CLI (`run --json`, `stat --output`).
 *
 * A regular file (or a new one) is written through a temporary file in the same directory and
 * renamed over the target once complete: a reader never sees a partial file, and a failed write
 * leaves the target as it was. "-" is standard output. A symbolic link is written through: the
 * regular file it names is replaced, never the link; a link another user could have planted (in
 * a directory others may write: common/path.h cushim_trusted_link) is refused (ELOOP). An existing target that is not a regular
 * file (a FIFO, which must have a reader already, a terminal, /dev/stdout, a device), or a link
 * to nothing yet, is written in place and never replaced or removed. Not thread-safe; one struct
 * per output. */
#ifndef CUSHIM_TOOLS_OUTPUT_H
#define CUSHIM_TOOLS_OUTPUT_H

#include <stdio.h>

struct cli_output {
    FILE *f;          /* write here between open and commit/abort */
    int direct;       /* 1: written in place (stdout, not a regular file) */
    const char *path; /* the target, as given (borrowed) */
    char file[4200];  /* the file replaced: path, or the regular file a symbolic link names */
    char tmp[4200];   /* the temporary file, when not direct */
};

/* Opens `path` for writing (see above). 0, or -1 with errno set (nothing created). */
int cli_output_open(struct cli_output *o, const char *path);

/* Flushes and closes; renames the temporary file over the target. 0, or -1 with errno set: then
 * the temporary file is removed and the target is untouched. */
int cli_output_commit(struct cli_output *o);

/* Closes and removes the temporary file; the target is untouched. */
void cli_output_abort(struct cli_output *o);

/* Tries `path` as cli_output_open would, leaving nothing behind, where that is free of side
 * effects: a file it replaces through a temporary one (nothing there, a regular file, a link to
 * one) or a path that cannot name one (its directory missing, not a directory; a directory itself:
 * EISDIR). A FIFO, a device,
 * a dangling link (whose target an open would create) and "-" are not tried: 0. 0, or -1 with
 * errno set as by cli_output_open. */
int cli_output_try(const char *path);

/* strerror(e), in the words of an output: ENXIO is a FIFO with no reader; ELOOP a link refused
 * (another user could have planted it) when the last cli_output_open refused one, else a loop;
 * EACCES, EPERM or EROFS from the last cli_output_open's temporary file name its directory (the
 * target itself may be writable). A static string. */
const char *cli_output_strerror(int e);

#endif
