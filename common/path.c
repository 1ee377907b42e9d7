#include "common/path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
        strncmp(base ? base + 1 : dir, "cushim-run.", 11) != 0)
        return CUSHIM_RUN_DIR_NOT;
    return 0;
}
