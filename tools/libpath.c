/* Where libcushim.so is, for LD_PRELOAD (always an absolute path). */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli.h"

#ifndef CUSHIM_INSTALL_LIBDIR
#define CUSHIM_INSTALL_LIBDIR "/usr/local/lib"
#endif
#ifndef CUSHIM_BINDIR_TO_LIBDIR
#define CUSHIM_BINDIR_TO_LIBDIR "../lib"
#endif

static int usable(const char *path)
{
    return path[0] == '/' && access(path, R_OK) == 0;
}

int cli_library_path(char *buf, size_t len)
{
    const char *env = getenv("CUSHIM_LIBRARY");
    char exe[PATH_MAX], candidate[PATH_MAX + 32];
    if (env && *env) {
        char *real = realpath(env, NULL);
        if (!real || !usable(real) || strlen(real) >= len) {
            cli_error("CUSHIM_LIBRARY=\"%s\" is not a readable library", env);
            free(real);
            return -1;
        }
        strcpy(buf, real);
        free(real);
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        /* Build tree: <build>/tools/cushim next to <build>/shim/libcushim.so. */
        const char *dir = dirname(exe); /* (modifies exe: called once) */
        snprintf(candidate, sizeof candidate, "%s/../shim/libcushim.so", dir);
        char *real = realpath(candidate, NULL);
        if (real && usable(real) && strlen(real) < len) {
            strcpy(buf, real);
            free(real);
            return 0;
        }
        free(real);
        /* Installed: <prefix>/bin/cushim beside <prefix>/<libdir>/libcushim.so, wherever the
         * prefix was moved to (a DESTDIR staging tree, a relocated install). */
        snprintf(candidate, sizeof candidate, "%s/%s/libcushim.so", dir, CUSHIM_BINDIR_TO_LIBDIR);
        real = realpath(candidate, NULL);
        if (real && usable(real) && strlen(real) < len) {
            strcpy(buf, real);
            free(real);
            return 0;
        }
        free(real);
    }
    snprintf(candidate, sizeof candidate, "%s/libcushim.so", CUSHIM_INSTALL_LIBDIR);
    if (usable(candidate) && strlen(candidate) < len) {
        strcpy(buf, candidate);
        return 0;
    }
    cli_error("cannot find libcushim.so (looked next to this program's build tree and in %s); "
              "set CUSHIM_LIBRARY to its path", CUSHIM_INSTALL_LIBDIR);
    return -1;
}
