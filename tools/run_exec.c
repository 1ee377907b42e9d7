/* run_exec.h: which interpreter of an existing program execve could not find. */
#include "tools/run_exec.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file execvp tried for `prog` into out (PATH_MAX bytes): 1 if one exists. */
/* The first place along PATH (confstr's default without one) where prog is an executable file
 * (dir 0), as execvp(3) looks, or a directory (dir 1), into out (PATH_MAX bytes): 1 if found. */
static int path_find(const char *prog, char *out, int dir)
{
    char fallback[PATH_MAX] = "";
    const char *path = getenv("PATH");
    if (!path) {
        confstr(_CS_PATH, fallback, sizeof fallback);
        path = fallback;
    }
    struct stat st;
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        /* An empty entry is the current directory (execvp(3)). */
        int n = len ? snprintf(out, PATH_MAX, "%.*s/%s", (int)len, p, prog) : snprintf(out, PATH_MAX, "./%s", prog);
        if (n > 0 && n < PATH_MAX && stat(out, &st) == 0 &&
            (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && access(out, X_OK) == 0))
            return 1;
        if (!end)
            return 0;
        p = end;
    }
}

static int resolve(const char *prog, char *out)
{
    struct stat st;
    if (strchr(prog, '/')) {
        snprintf(out, PATH_MAX, "%s", prog);
        return stat(out, &st) == 0 && S_ISREG(st.st_mode);
    }
    return path_find(prog, out, 0);
}

/* PT_INTERP of an ELF file of class C (64 or 32 bits) into out (n bytes): 1 if it has one. */
#define ELF_INTERP(name, Ehdr, Phdr, class)                                                         \
    static int name(int fd, char *out, size_t n)                                                    \
    {                                                                                               \
        Ehdr eh;                                                                                    \
        if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || eh.e_ident[EI_CLASS] != (class) || \
            eh.e_phentsize != sizeof(Phdr))                                                         \
            return 0;                                                                               \
        for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {                                      \
            Phdr ph;                                                                                \
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=         \
                (ssize_t)sizeof ph)                                                                 \
                return 0;                                                                           \
            if (ph.p_type != PT_INTERP)                                                             \
                continue;                                                                           \
            size_t len = ph.p_filesz < n ? (size_t)ph.p_filesz : n - 1;                             \
            if (len == 0 || pread(fd, out, len, (off_t)ph.p_offset) != (ssize_t)len)                \
                return 0;                                                                           \
            out[len] = '\0';                                                                        \
            return out[0] != '\0';                                                                  \
        }                                                                                           \
        return 0;                                                                                   \
    }
ELF_INTERP(elf64_interp, Elf64_Ehdr, Elf64_Phdr, ELFCLASS64)
ELF_INTERP(elf32_interp, Elf32_Ehdr, Elf32_Phdr, ELFCLASS32)

/* The file execvp would run for `prog` (its path into path, PATH_MAX bytes), opened, its first
 * bytes read into head (at most n): the descriptor, which the caller closes, or -1. */
static int open_resolved(const char *prog, char *path, void *head, size_t n, ssize_t *got)
{
    if (!resolve(prog, path))
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        *got = read(fd, head, n);
    return fd;
}

/* The interpreter the file at fd names (its first got bytes in head): a script's #! one (*script
 * 1) or an ELF file's loader (*script 0), into interp (PATH_MAX bytes); "" when none. */
static void interpreter_of(int fd, char *head, ssize_t got, char *interp, int *script)
{
    interp[0] = '\0';
    *script = got >= 2 && head[0] == '#' && head[1] == '!';
    if (*script) {
        /* execve(2): "#!interpreter [optional-arg]", the interpreter a path up to a blank. */
        head[got] = '\0';
        char *s = head + 2;
        s += strspn(s, " \t");
        snprintf(interp, PATH_MAX, "%.*s", (int)strcspn(s, " \t\n"), s);
    } else if (got >= SELFMAG && memcmp(head, ELFMAG, SELFMAG) == 0) {
        if (!elf64_interp(fd, interp, PATH_MAX) && !elf32_interp(fd, interp, PATH_MAX))
            interp[0] = '\0'; /* a read cut short may have left part of one */
    }
}

int run_exec_missing_interpreter(const char *prog, char *why, size_t n)
{
    char path[PATH_MAX], head[256], interp[PATH_MAX] = "", by[PATH_MAX] = "";
    ssize_t got;
    int fd = open_resolved(prog, path, head, sizeof head - 1, &got), script = 0;
    if (fd < 0)
        return 0;
    /* Down a chain of interpreters (a script whose #! names a script, as the kernel follows up
     * to 5 more: exec_binprm's depth 0 to 5, the sixth file's interpreter still opened): the
     * first one that does not exist (an attack trial: "No such file or directory" for a chain
     * whose last interpreter was missing). */
    struct stat st;
    for (int depth = 0;; depth++) {
        interpreter_of(fd, head, got, interp, &script);
        close(fd);
        size_t len = strlen(interp);
        if (!len || (script && len == 1 && interp[0] == '\r'))
            return 0;
        if (stat(interp, &st) != 0)
            break;
        /* It exists: not the missing one, unless it is a script or an ELF whose own is. */
        if (depth == 5 || (fd = open(interp, O_RDONLY | O_CLOEXEC)) < 0)
            return 0;
        snprintf(by, sizeof by, "%s", interp);
        got = read(fd, head, sizeof head - 1);
    }
    size_t len = strlen(interp);
    char at[PATH_MAX + 32] = "", of[PATH_MAX + 16] = "";
    if (by[0]) { /* named by the last link of the chain, not by the program itself */
        snprintf(at, sizeof at, "down its #! chain, the ");
        snprintf(of, sizeof of, " of \"%s\"", by);
    } else
        snprintf(at, sizeof at, "its ");
    if (!script)
        snprintf(why, n, "%sdynamic loader \"%s\" (ELF interpreter)%s does not exist", at, interp, of);
    else if (interp[len - 1] == '\r')
        snprintf(why, n, "%sinterpreter \"%.*s\"%s followed by a carriage return (its #! line ends in "
                 "\\r\\n, Windows line endings: convert the file, e.g. dos2unix)", at, (int)len - 1, interp, of);
    else
        snprintf(why, n, "%sinterpreter \"%s\"%s (its #! line) does not exist", at, interp, of);
    return 1;
}

int run_exec_not_on_path(const char *prog, char *why, size_t n)
{
    if (strchr(prog, '/'))
        return 0;
    struct stat st;
    if (*prog && stat(prog, &st) == 0 && S_ISREG(st.st_mode) && access(prog, X_OK) == 0)
        snprintf(why, n, "not found on PATH (./%s is in this directory: a program here is run as ./%s)", prog, prog);
    else if (*prog && stat(prog, &st) == 0 && S_ISREG(st.st_mode)) { /* train.py: found by an attack trial */
        const char *dot = strrchr(prog, '.');
        const char *interp = dot && !strcmp(dot, ".py") ? "python3 " : dot && !strcmp(dot, ".sh") ? "sh " : NULL;
        char example[64] = "";
        if (interp)
            snprintf(example, sizeof example, " (%s%.40s)", interp, prog);
        snprintf(why, n, "not found on PATH (./%s is in this directory, not executable: run it with its "
                 "interpreter%s, or chmod +x it)", prog, example);
    } else
        snprintf(why, n, "not found on PATH");
    return 1;
}

/* Whether word is NAME=VALUE, NAME a shell variable's name (letters, digits, '_'; no digit first). */
static int assignment(const char *word)
{
    size_t name = strspn(word, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    return name > 0 && word[name] == '=' && !(word[0] >= '0' && word[0] <= '9');
}

int run_exec_assignment(char *const *prog, char *why, size_t n)
{
    if (!assignment(prog[0]))
        return 0;
    int k = 1;
    while (prog[k] && assignment(prog[k]))
        k++;
    /* Words past 60 bytes are not cut into a command that reads as the one to type (a review:
     * "env PYTHONPATH=/opt/.../ver python3"): NAME=... and PROGRAM stand for them; the
     * program's arguments are "...". */
    char var[80], next[80];
    size_t name = strcspn(prog[0], "=");
    if (strlen(prog[0]) <= 60)
        snprintf(var, sizeof var, "%s", prog[0]);
    else
        snprintf(var, sizeof var, "%.*s=...", (int)(name < 56 ? name : 56), prog[0]);
    snprintf(next, sizeof next, "%s%s", prog[k] && strlen(prog[k]) <= 60 ? prog[k] : "PROGRAM",
             prog[k] && prog[k + 1] ? " ..." : "");
    snprintf(why, n, "not found on PATH (a variable assignment, which cushim run does not take: write "
             "cushim run -- env %s%s %s, or %s%s cushim run -- %s)", var, k > 1 ? " ..." : "", next,
             var, k > 1 ? " ..." : "", next);
    return 1;
}

int run_exec_dir_on_path(const char *prog, char *why, size_t n)
{
    char dir[PATH_MAX];
    if (strchr(prog, '/') || !*prog || !path_find(prog, dir, 1))
        return 0;
    /* A long one cut as cli_shown cuts a value, said so (a review: cut at 200 bytes without a
     * word, a path that is not there). */
    size_t k = strlen(dir);
    if (k <= 120)
        snprintf(why, n, "not found on PATH (%s there is a directory)", dir);
    else
        snprintf(why, n, "not found on PATH (%.60s... (%zu bytes) there is a directory)", dir, k);
    return 1;
}

int run_exec_binary(const char *prog, char *out)
{
    unsigned char head[80];
    ssize_t got;
    int fd = open_resolved(prog, out, head, sizeof head, &got);
    if (fd < 0)
        return 0;
    close(fd);
    if (got >= SELFMAG && memcmp(head, ELFMAG, SELFMAG) == 0)
        return 1;
    for (ssize_t i = 0; i < got && head[i] != '\n'; i++)
        if (head[i] == '\0')
            return 1;
    return 0;
}
