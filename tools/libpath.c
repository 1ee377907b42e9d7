/* Where libcushim.so is, for LD_PRELOAD (always an absolute path). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* Whether path is libcushim.so: an ELF shared object holding the shim's marker (shim/api.c).
 * 0, or -1 with *why set. */
static int is_cushim(const char *path, const char **why)
{
    /* Built here so that this program does not hold the marker itself. */
    char marker[32];
    snprintf(marker, sizeof marker, "cushim-%s-library ", "preload");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *why = strerror(errno);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *m = S_ISREG(st.st_mode) && st.st_size >= 64
                  ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) {
        *why = S_ISREG(st.st_mode) ? "not an ELF shared object" : "not a regular file";
        return -1;
    }
    const unsigned char *b = m;
    /* ELF header: "\x7fELF", e_type (offset 16, little-endian here) ET_DYN = 3. */
    int elf = memcmp(b, "\x7f" "ELF", 4) == 0 && b[16] == 3 && b[17] == 0;
    int ours = elf && memmem(m, (size_t)st.st_size, marker, strlen(marker)) != NULL;
    munmap(m, (size_t)st.st_size);
    if (!ours)
        *why = elf ? "an ELF shared object without cushim's marker" : "not an ELF shared object";
    return ours ? 0 : -1;
}

int cli_library_path(const char *shown_as, char *buf, size_t len)
{
    const char *env = getenv("CUSHIM_LIBRARY");
    char exe[PATH_MAX], candidate[PATH_MAX + 32];
    if (env && *env) {
        const char *why = NULL;
        char *real = realpath(env, NULL);
        if (!real)
            why = strerror(errno);
        else if (!usable(real))
            why = strerror(errno);
        else if (strlen(real) >= len)
            why = "path too long";
        else
            is_cushim(real, &why);
        if (why) {
            cli_error("%s\"%s\" is not libcushim.so (%s); expected the path of the shim library, "
                      "e.g. build/shim/libcushim.so", shown_as, env, why);
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
