#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* Every test reads its stdin from /dev/null, and so do the programs it starts (script(1) passes
 * its stdin on to the terminal it makes): the runner's stdin is never theirs. Under `meson test
 * <&-` a closed stdin made descriptor 0 the first file a process opened (a simulated pool's
 * export refused it, the shim's log landed on it) and script copied nothing; a stdin with input
 * (a CI job fed to a shell) would reach the programs on those terminals as keystrokes. */
__attribute__((constructor)) static void stdin_from_dev_null(void)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd > 0) {
        dup2(fd, 0);
        close(fd);
    }
}

static char test_dir_path[256];
static pid_t test_dir_owner;

/* At the test process's exit: its directory and all in it (a suite run straight with `meson
 * test`, without scripts/test's TMPDIR, left one per test in /tmp). Not in a child it forked. By
 * rm -rf, which walks by directory descriptors: a directory swapped for a symbolic link while it
 * runs (the tests make directories everyone may write) is never followed. */
static void remove_test_dir(void)
{
    if (!test_dir_path[0] || getpid() != test_dir_owner)
        return;
    const char *argv[] = {"rm", "-rf", "--", test_dir_path, NULL};
    pid_t pid;
    int status;
    if (posix_spawnp(&pid, "rm", NULL, NULL, (char *const *)argv, environ) == 0)
        waitpid(pid, &status, 0);
}

const char *test_dir(void)
{
    char *dir = test_dir_path;
    if (!dir[0]) {
        /* Under the caller's TMPDIR (scripts/test gives one per run and removes it), else /tmp:
         * also when it holds a character a shell would split or expand (a space, a quote, $...),
         * as the tests' shell command lines (system(), sh -c) carry these paths unquoted. */
        const char *base = getenv("TMPDIR");
        if (!base || base[0] != '/' || strlen(base) > 180 ||
            base[strspn(base, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+,-")])
            base = "/tmp";
        snprintf(dir, sizeof test_dir_path, "%s/cushim-test.XXXXXX", base);
        cr_assert(mkdtemp(dir), "cannot make the tests' directory under %s (TMPDIR, else /tmp): %s", base,
                  strerror(errno));
        test_dir_owner = getpid();
        atexit(remove_test_dir);
        chmod(dir, 0755);
        /* Run directories (`cushim run`) go here too: `cushim gc` sweeps TMPDIR, which must
         * hold only this test's (the machine's /tmp may hold anyone's dead runs). */
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s/tmp", dir);
        cr_assert(mkdir(tmp, 0700) == 0 && setenv("TMPDIR", tmp, 1) == 0, "TMPDIR %s", tmp);
    }
    return dir;
}

/* Builds environ + overrides into a malloc'ed array. */
static char **make_env(const char *const *env)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (env && env[m])
        m++;
    char **out = calloc(n + m + 1, sizeof *out);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(environ[i], "=");
        int overridden = 0;
        for (size_t j = 0; j < m && !overridden; j++)
            overridden = strncmp(env[j], environ[i], len) == 0 &&
                         (env[j][len] == '=' || env[j][len] == '\0');
        if (!overridden)
            out[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        if (strchr(env[j], '='))
            out[k++] = (char *)env[j];
    out[k] = NULL;
    return out;
}

/* Starts argv with stdout to out_path and stderr to err_path (NULL: the same file). */
int on_path(const char *name)
{
    const char *path = getenv("PATH");
    char dir[4096], file[4200];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)(len ? len : 1), len ? path : ".");
        snprintf(file, sizeof file, "%s/%s", dir, name);
        struct stat st;
        if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && access(file, X_OK) == 0)
            return 1;
        path += len + (path[len] == ':');
    }
    return 0;
}

static pid_t spawn_to(const char *const *argv, const char *const *env, const char *out_path,
                      const char *err_path)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err_path)
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    else
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char **envp = make_env(env);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
    free(envp);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rc, 0, "cannot start %s: %s", argv[0], strerror(rc));
    return pid;
}

void run_cmd(struct run_result *r, const char *const *argv, const char *const *env)
{
    static int seq;
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/out.%d.%d", test_dir(), (int)getpid(), seq);
    snprintf(err_path, sizeof err_path, "%s/err.%d.%d", test_dir(), (int)getpid(), seq++);
    pid_t pid = spawn_to(argv, env, out_path, err_path);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r->out = slurp(out_path);
    r->err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
}

pid_t spawn_bg(const char *const *argv, const char *const *env)
{
    static int seq;
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%s/bg.%d.%d", test_dir(), (int)getpid(), seq++);
    return spawn_to(argv, env, out_path, NULL);
}

pid_t spawn_bg_to(const char *const *argv, const char *const *env, const char *out_path)
{
    return spawn_to(argv, env, out_path, NULL);
}

int wait_bg(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void wait_ready(const char *dir, int n, pid_t *pids)
{
    for (int tries = 0; tries < 3000; tries++) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int found = 0;
        while (d && (de = readdir(d)) != NULL)
            if (de->d_name[0] != '.' && found < n)
                pids[found++] = (pid_t)atoi(de->d_name);
        if (d)
            closedir(d);
        if (found >= n)
            return;
        usleep(10000);
    }
    cr_assert_fail("fewer than %d programs became ready in %s", n, dir);
}

const char *fresh_dir(const char *name)
{
    static char buf[8][512];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 512, "%s/%s", test_dir(), name);
    mkdir(b, 01777);
    chmod(b, 01777);
    return b;
}

void backdate(const char *path, long seconds)
{
    struct timespec t[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0, "backdating %s", path);
}

void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    cr_assert(fd >= 0, "cannot create %s", path);
    close(fd);
}

void run_free(struct run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

const char *const *sim_env(const char *const *extra)
{
    static char ld[1024], segdir[512];
    static const char *env[64];
    size_t n = 0;
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", SIM_LIBDIR);
    snprintf(segdir, sizeof segdir, "CUSHIM_SEGMENT_DIR=%s", test_dir());
    env[n++] = ld;
    env[n++] = segdir;
    env[n++] = "SIMCUDA_GRANULARITY=1";
    env[n++] = "SIMCUDA_CTX_OVERHEAD=0";
    /* Unset (no '='): the simulated driver follows it as the real one does; a test that wants
     * it sets it in extra. */
    env[n++] = "CUDA_VISIBLE_DEVICES";
    for (size_t i = 0; extra && extra[i] && n < 62; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    /* Later entries win: drop earlier duplicates. */
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(env[i], "=");
        for (size_t j = i + 1; j < n; j++)
            if (strncmp(env[i], env[j], len) == 0 && (env[j][len] == '=' || env[j][len] == '\0')) {
                memmove(&env[i], &env[i + 1], (n - i) * sizeof env[0]);
                n--;
                i--;
                break;
            }
    }
    return env;
}

const char *cushim_bin(void) { return CUSHIM_BIN; }
/* The shim under test: this build's, or CUSHIM_TEST_SHIM's (scripts/test runs the graph suite
 * with the shim built with CUDA 12.0's headers, through `cushim run` too: CUSHIM_LIBRARY). */
const char *shim_lib(void)
{
    const char *other = getenv("CUSHIM_TEST_SHIM");
    return other && *other ? other : SHIM_LIB;
}

const char *sim_libdir(void) { return SIM_LIBDIR; }

const char *preload_env(void)
{
    static char buf[1100];
    snprintf(buf, sizeof buf, "LD_PRELOAD=%s", shim_lib());
    return buf;
}

const char *program(const char *name)
{
    static char buf[8][1024];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 1024, "%s/%s", PROGRAMS_DIR, name);
    return b;
}

int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

void failmmap_env(struct failmmap_env *f)
{
    snprintf(f->pre, sizeof f->pre, "LD_PRELOAD=%s", program("libfailmmap.so"));
    snprintf(f->lib, sizeof f->lib, "FAIL_MMAP_LIB=%s", shim_lib());
}

static const char *find_key(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, n) == 0 && p[n] == '=')
            return p + n + 1;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

uint64_t kv_u64_or(const char *text, const char *key, uint64_t def)
{
    const char *v = find_key(text, key);
    return v ? strtoull(v, NULL, 10) : def;
}

uint64_t kv_u64(const char *text, const char *key)
{
    const char *v = find_key(text, key);
    cr_assert(v, "no %s= in output:\n%s", key, text);
    return strtoull(v, NULL, 10);
}

int64_t kv_i64(const char *text, const char *key)
{
    const char *v = find_key(text, key);
    cr_assert(v, "no %s= in output:\n%s", key, text);
    return strtoll(v, NULL, 10);
}

const char *kv_str(const char *text, const char *key)
{
    static char buf[512];
    const char *v = find_key(text, key);
    if (!v)
        return NULL;
    size_t n = strcspn(v, "\n");
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

json_t *json_load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert(j, "bad JSON in %s: %s (line %d)", path, e.text, e.line);
    return j;
}

json_t *jpath(json_t *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *j = root;
    for (char *save = NULL, *part = strtok_r(buf, ".", &save); part && j;
         part = strtok_r(NULL, ".", &save)) {
        if (json_is_array(j))
            j = json_array_get(j, strtoul(part, NULL, 10));
        else
            j = json_object_get(j, part);
    }
    return j;
}

uint64_t jpath_u64(json_t *root, const char *path)
{
    json_t *j = jpath(root, path);
    cr_assert(j && json_is_integer(j), "JSON has no integer at %s", path);
    return (uint64_t)json_integer_value(j);
}

json_t *run_under_cushim(struct run_result *r, const char *const *argv, const char *const *env)
{
    static int seq;
    char json[512];
    const char *full[64];
    size_t n = 0;
    snprintf(json, sizeof json, "%s/summary.%d.%d.json", test_dir(), (int)getpid(), seq++);
    full[n++] = cushim_bin();
    full[n++] = "run";
    full[n++] = "--json";
    full[n++] = json;
    full[n++] = "--";
    for (size_t i = 0; argv[i] && n < 63; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    run_cmd(r, full, env);
    json_t *j = json_load(json);
    unlink(json);
    return j;
}

int run_status(const char *const *argv, const char *const *env, struct run_result *r)
{
    const char *full[32] = {cushim_bin(), "run", "--"};
    size_t n = 3;
    for (size_t i = 0; argv[i]; i++) {
        cr_assert_lt(n, 31, "run_status: at most 28 arguments");
        full[n++] = argv[i];
    }
    full[n] = NULL;
    run_cmd(r, full, env);
    return r->status;
}

json_t *device_of(json_t *j, int ordinal)
{
    json_t *devs = jpath(j, "devices");
    for (size_t i = 0; i < json_array_size(devs); i++)
        if (json_integer_value(json_object_get(json_array_get(devs, i), "ordinal")) == ordinal)
            return json_array_get(devs, i);
    cr_assert_fail("no device %d in the summary", ordinal);
    return NULL;
}

const char *command_label(const char *path, const char *args)
{
    static char full[2048], label[65];
    snprintf(full, sizeof full, "%s %s", path, args);
    snprintf(label, sizeof label, "%.64s", full);
    return label;
}
