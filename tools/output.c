#include "tools/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/path.h"

/* fd moved above 0, 1 and 2 (close-on-exec): with a standard stream closed, the file would
 * otherwise take its number, and cushim's messages, or a program's output, would land in it. */
static int above_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int e = errno;
    close(fd);
    errno = e;
    return moved;
}

/* The descriptor a name for one of cushim's own open files stands for (/dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N), or -1. Opening such a name would open the file anew
 * (at offset 0, or truncated), and replacing it would replace the file a redirection named: both
 * lose what is already there (a log appended to with >>). The descriptor itself is written. */
static int own_fd_name(const char *path)
{
    if (!strcmp(path, "/dev/stdout"))
        return 1;
    if (!strcmp(path, "/dev/stderr"))
        return 2;
    const char *n = !strncmp(path, "/dev/fd/", 8) ? path + 8 : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
    if (!n || !*n || strspn(n, "0123456789") != strlen(n) || strlen(n) > 6)
        return -1;
    return atoi(n);
}

/* The last cli_output_open refused a link another user could have planted (its ELOOP is that,
 * not a loop). The CLI is one thread. */
static int refused_link;
/* The last cli_output_open could not create its temporary file: the errno, and the words for it
 * (the target itself may be writable; its directory is not). */
static int tmp_errno;
static char tmp_why[4400];

int cli_output_open(struct cli_output *o, const char *path)
{
    refused_link = 0;
    tmp_errno = 0;
    struct stat st;
    memset(o, 0, sizeof *o);
    o->path = path;
    if (!*path) {
        errno = ENOENT; /* as open("") says; refused before any program runs */
        return -1;
    }
    if (strcmp(path, "-") == 0) {
        /* Standard output, whatever the working directory (even one that was removed). */
        o->direct = 1;
        o->f = stdout;
        return 0;
    }
    int own = own_fd_name(path);
    if (own >= 0) {
        /* Written in place through a copy of the descriptor (close-on-exec): where it is a file
         * opened for appending, after what is there. */
        int fd = fcntl(own, F_DUPFD_CLOEXEC, 3);
        o->direct = 1;
        if (fd >= 0 && !(o->f = fdopen(fd, "w")))
            close(fd);
        return o->f ? 0 : -1;
    }
    struct stat lst;
    int is_link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    int trusted = cushim_path_links_trusted(path);
    if (trusted != 1) {
        /* Another user's link where others can write (/tmp), the path's last part or one on the
         * way: they could aim it at any file of ours. Not followed (the shims' rule for reports
         * and logs). Else the walk's own error (a name too long, a loop). */
        refused_link = trusted == 0;
        if (trusted == 0)
            errno = ELOOP;
        return -1;
    }
    int exists = stat(path, &st) == 0;
    if ((exists && !S_ISREG(st.st_mode)) || (is_link && !exists)) {
        o->direct = 1;
        /* Through the link, if one: never the link replaced (/dev/stdout with fd 1 closed is an
         * error, not a new file). A FIFO without a reader is an error too, not a hang. */
        int fifo = exists && S_ISFIFO(st.st_mode);
        int fd = above_stdio(open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (fifo ? O_NONBLOCK : 0), 0666));
        if (fd >= 0 && fifo)
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        if (fd >= 0 && !(o->f = fdopen(fd, "w")))
            close(fd);
        return o->f ? 0 : -1;
    }
    /* A link to a regular file: that file is the one replaced. */
    if (is_link ? !realpath(path, o->file)
                : (size_t)snprintf(o->file, sizeof o->file, "%s", path) >= sizeof o->file) {
        if (!is_link)
            errno = ENAMETOOLONG;
        return -1;
    }
    path = o->file;
    /* NAME.tmp.XXXXXX beside it; where that name would be too long for the file system (a name
     * near 255 bytes), .cushim.tmp.XXXXXX in the same directory. */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int fits = strlen(base) + sizeof ".tmp.XXXXXX" - 1 <= 255;
    if ((size_t)(fits ? snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", path)
                      : snprintf(o->tmp, sizeof o->tmp, "%.*s.cushim.tmp.XXXXXX", (int)(base - path), path)) >=
        sizeof o->tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Close-on-exec: a program `cushim run` starts must not inherit it. */
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd >= 0 && fd <= 2 && (fd = above_stdio(fd)) < 0) {
        int e = errno;
        unlink(o->tmp);
        errno = e;
    }
    if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS || stat(path, &st) == 0)) {
        int e = errno;
        /* The directory, not the file, refused it: said so (the file alone may be writable; a
         * file of /proc exists, where nothing can be created: ENOENT). */
        char dir[4200];
        snprintf(dir, sizeof dir, "%.*s", base > path ? (int)(base - path - 1) : 1, base > path ? path : ".");
        snprintf(tmp_why, sizeof tmp_why, "%s (a temporary file in %s, renamed over it when complete, "
                 "could not be created there)", strerror(e), dir[0] ? dir : "/");
        tmp_errno = e;
        errno = e;
    }
    if (fd < 0)
        return -1;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        /* Replacing a file (not a link, whose target's attributes are not the file's to take):
         * it keeps its group and its permission bits, which a reader such as node_exporter's
         * textfile collector running as its own user needs; never another owner, nor write
         * permission for group or others (the file may hold every user's command lines): 0660
         * becomes 0640. */
        if (fchown(fd, (uid_t)-1, st.st_gid) != 0) {
            /* not in that group (and not root): the mode still applies */
        }
        fchmod(fd, (st.st_mode & 0777 & ~(mode_t)(S_IWGRP | S_IWOTH)) | S_IRUSR | S_IWUSR);
    } else {
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    if (!(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int cli_output_commit(struct cli_output *o)
{
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int e = bad ? (errno ? errno : EIO) : 0;
    if (bad && o->f == stdout)
        clearerr(stdout); /* said by the caller, with this errno: not once more at exit */
    if (o->f != stdout && fclose(o->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    o->f = NULL;
    if (!bad && !o->direct && rename(o->tmp, o->file) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad && !o->direct)
        unlink(o->tmp);
    errno = e;
    return bad ? -1 : 0;
}

void cli_output_abort(struct cli_output *o)
{
    if (o->f && o->f != stdout)
        fclose(o->f);
    o->f = NULL;
    if (!o->direct)
        unlink(o->tmp);
}

int cli_output_try(const char *path)
{
    struct stat st;
    /* A directory (or "dir/"): what opening it would say, without the scan first. */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    if (strcmp(path, "-") == 0 ||
        (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
         !(S_ISLNK(st.st_mode) && stat(path, &st) == 0 && S_ISREG(st.st_mode))))
        return 0;
    struct cli_output probe;
    if (cli_output_open(&probe, path) != 0)
        return -1;
    cli_output_abort(&probe);
    return 0;
}

const char *cli_output_strerror(int e)
{
    if (tmp_errno && e == tmp_errno)
        return tmp_why;
    if (e == ENXIO)
        return "a FIFO with no reader (start its reader first)";
    if (e == ELOOP && refused_link)
        return "a symbolic link someone else could have put there, not followed";
    if (e == ELOOP)
        return "Too many levels of symbolic links (a loop)";
    return strerror(e);
}
