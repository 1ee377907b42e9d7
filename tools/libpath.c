/* Where libcushim.so is, for LD_PRELOAD (always an absolute path). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
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

/* The ELF class, byte order and machine of this build: what ld.so will preload next to it. */
#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#else
#define OWN_MACHINE EM_NONE /* not checked */
#endif
#define OWN_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define OWN_DATA (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)

/* Whether the image b (n bytes, read whole) is a complete 64-bit shared object of this machine:
 * its program headers and every loaded segment lie inside the file (a truncated copy does not). */
static const char *elf_refusal(const unsigned char *b, size_t n)
{
    if (n < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0)
        return "not an ELF shared object";
    if (b[EI_CLASS] != OWN_CLASS || b[EI_DATA] != OWN_DATA || OWN_CLASS != ELFCLASS64)
        return "an ELF file of another word size or byte order than this cushim";
    Elf64_Ehdr eh;
    memcpy(&eh, b, sizeof eh);
    if (eh.e_type != ET_DYN)
        return "an ELF file that is no shared object";
    if (OWN_MACHINE != EM_NONE && eh.e_machine != OWN_MACHINE)
        return "an ELF shared object for another machine";
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > n ||
        (n - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum)
        return "an ELF shared object cut short: its program headers are missing";
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, b + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && (ph.p_offset > n || n - ph.p_offset < ph.p_filesz))
            return "an ELF shared object cut short: a segment lies past its end";
    }
    return NULL;
}

/* Whether path is libcushim.so: a complete ELF shared object of this machine that holds the
 * shim's marker (shim/api.c). Read whole (at most 256 MiB), never mapped: a file that shrinks
 * meanwhile cannot fault; opened without blocking (a FIFO is no library). 0, or -1 with *why. */
static int is_cushim(const char *path, const char **why)
{
    /* Built here so that this program does not hold the marker itself. */
    char marker[32];
    snprintf(marker, sizeof marker, "cushim-%s-library ", "preload");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *why = strerror(errno);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *why = !S_ISREG(st.st_mode) ? "not a regular file" : st.st_size > (256 << 20) ? "too large to be libcushim.so"
                                                                                 : NULL;
    size_t size = *why ? 0 : (size_t)st.st_size, got = 0;
    unsigned char *b = *why ? NULL : malloc(size + 1);
    while (b && got < size) {
        ssize_t r = read(fd, b + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!*why && !b)
        *why = strerror(ENOMEM);
    if (!*why)
        *why = elf_refusal(b, got);
    if (!*why && !memmem(b, got, marker, strlen(marker)))
        *why = "an ELF shared object without cushim's marker";
    free(b);
    return *why ? -1 : 0;
}

int cli_beside_exe(const char *relative, char *buf, size_t len)
{
    char exe[PATH_MAX], candidate[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    snprintf(candidate, sizeof candidate, "%s/%s", dirname(exe), relative);
    char *real = realpath(candidate, NULL);
    int ok = real && strlen(real) < len;
    if (ok)
        strcpy(buf, real);
    free(real);
    return ok ? 0 : -1;
}

int cli_library_path(const char *shown_as, char *buf, size_t len)
{
    const char *env = getenv("CUSHIM_LIBRARY");
    char candidate[PATH_MAX + 32];
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
        char shown[500]; /* quoted, escaped, cut as every value in a message is */
        cushim_config_shown(env, shown, sizeof shown);
        if (why && !real) {
            char cwd[PATH_MAX];
            if (env[0] != '/' && getcwd(cwd, sizeof cwd))
                cli_error("%s%s: %s (relative to %s); expected the path of the shim library, "
                          "libcushim.so", shown_as, shown, why, cwd);
            else
                cli_error("%s%s: %s; expected the path of the shim library, libcushim.so",
                          shown_as, shown, why);
            return -1;
        }
        if (why) {
            cli_error("%s%s is not libcushim.so (%s); expected the path of the shim library, "
                      "e.g. build/shim/libcushim.so", shown_as, shown, why);
            free(real);
            return -1;
        }
        strcpy(buf, real);
        free(real);
        return 0;
    }
    /* Build tree: <build>/tools/cushim next to <build>/shim/libcushim.so. Installed:
     * <prefix>/bin/cushim beside <prefix>/<libdir>/libcushim.so, wherever the prefix was moved to
     * (a DESTDIR staging tree, a relocated install). */
    if ((cli_beside_exe("../shim/libcushim.so", buf, len) == 0 && usable(buf)) ||
        (cli_beside_exe(CUSHIM_BINDIR_TO_LIBDIR "/libcushim.so", buf, len) == 0 && usable(buf)))
        return 0;
    snprintf(candidate, sizeof candidate, "%s/libcushim.so", CUSHIM_INSTALL_LIBDIR);
    if (usable(candidate) && strlen(candidate) < len) {
        strcpy(buf, candidate);
        return 0;
    }
    /* The places looked in, as paths: the directory of this program's own install first. */
    char exe[PATH_MAX], beside[PATH_MAX + 64] = "beside this program";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        snprintf(beside, sizeof beside, "%s/%s", dirname(exe), CUSHIM_BINDIR_TO_LIBDIR);
    }
    cli_error("cannot find libcushim.so (looked in %s, the build tree's shim/ and %s); set "
              "CUSHIM_LIBRARY to its path", beside, CUSHIM_INSTALL_LIBDIR);
    return -1;
}
