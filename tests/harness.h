/* Test harness: run a command with extra environment, capture its output and status, read the
 * summary JSON and "key=value" output. Paths of the built artifacts come from meson
 * (tests/meson.build). Assertion failures go through Criterion. */
#ifndef CUSHIM_TEST_HARNESS_H
#define CUSHIM_TEST_HARNESS_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

struct run_result {
    int status;   /* exit code, or 128 + signal */
    char *out;    /* stdout, NUL-terminated */
    char *err;    /* stderr, NUL-terminated */
};

/* Runs argv (NULL-terminated) with the current environment plus `env` ("NAME=VALUE" to set,
 * "NAME" to unset; NULL-terminated, may be NULL). Waits for it. */
void run_cmd(struct run_result *r, const char *const *argv, const char *const *env);
/* Whether `name` (no slash) is an executable file in a directory of PATH: a probe for an optional
 * program checks it first, as run_cmd fails the test when it cannot start one (the test is then
 * to say "not run: ...", not fail). */
int on_path(const char *name);
/* The whole file at path, NUL-terminated (malloc'd; the caller frees it); fails the test when it
 * cannot be read. */
char *slurp(const char *path);
void run_free(struct run_result *r);

/* Starts argv in the background (stdout/stderr to files in test_dir()); returns its pid. */
pid_t spawn_bg(const char *const *argv, const char *const *env);
/* spawn_bg with its stdout and stderr both to out_path (created or truncated), for slurp. */
pid_t spawn_bg_to(const char *const *argv, const char *const *env, const char *out_path);
/* Waits for a background process; returns exit code or 128 + signal. */
int wait_bg(pid_t pid);
/* Waits (up to 30 s) until directory `dir` holds `n` entries not starting with '.'; fails the
 * test otherwise. Returns the pids named by those entries in pids[] (n of them). */
void wait_ready(const char *dir, int n, pid_t *pids);
/* A fresh empty directory under test_dir(), mode 1777 (other users may write). */
const char *fresh_dir(const char *name);
/* Creates an empty file. */
void touch(const char *path);

/* Sets path's access and modification times `seconds` in the past (a file made long ago: gc's
 * rules go by its age); asserts it could. Does not follow a symbolic link. */
void backdate(const char *path, long seconds);

/* The usual environment for a program on the simulated device: LD_LIBRARY_PATH=sim dir, a
 * private segment dir, exact bookkeeping (granularity 1, no context overhead) unless overridden
 * by `extra` (which wins). Returns a static NULL-terminated array. */
const char *const *sim_env(const char *const *extra);

/* Private temporary directory for this test (created once per process). */
const char *test_dir(void);

/* Artifact paths. */
const char *cushim_bin(void);
const char *shim_lib(void);
const char *sim_libdir(void); /* the simulated libcuda.so.1 and libcudart.so.13 */
/* "LD_PRELOAD=<the shim>", for a program run with plain LD_PRELOAD rather than `cushim run`. */
const char *preload_env(void);
const char *program(const char *name); /* tests/programs/<name> in the build tree */
/* A TCP port of 127.0.0.1 free now: the kernel's choice for a socket bound to port 0, closed
 * again (never connected: no TIME_WAIT holds it). A port made from our pid could be another
 * listener's (the wrong server answering) or in use by an outgoing connection. Asserts (Criterion)
 * that the socket calls succeed. */
int free_port(void);
/* The environment that puts tests/programs/libfailmmap.so in front of the shim under test, whose
 * mmap calls it then refuses (after FAIL_MMAP_AFTER of them, which the caller adds): "LD_PRELOAD=..."
 * in pre, "FAIL_MMAP_LIB=..." in lib. */
struct failmmap_env {
    char pre[700], lib[700];
};
void failmmap_env(struct failmmap_env *f);
/* The command label of a Prometheus sample of `PATH ARGS` as cushim writes it: the command line's
 * first 64 bytes (docs/PROMETHEUS.md; a checkout at a long path makes a test program's longer).
 * In a buffer of its own, rewritten at each call. */
const char *command_label(const char *path, const char *args);

/* Value of key in "key=value" lines; fails the test if absent. */
uint64_t kv_u64(const char *text, const char *key);
/* Signed value of key; fails the test if absent. */
int64_t kv_i64(const char *text, const char *key);
/* Same, but returns `def` when absent. */
uint64_t kv_u64_or(const char *text, const char *key, uint64_t def);
/* String value (static buffer), NULL if absent. */
const char *kv_str(const char *text, const char *key);

/* Loads a JSON file; fails the test on error. */
json_t *json_load(const char *path);
/* Dotted path "devices.0.device.current_bytes" (array indices as numbers); fails the test if
 * absent or not an integer. */
uint64_t jpath_u64(json_t *root, const char *path);
json_t *jpath(json_t *root, const char *path);
/* The summary's `devices` object of CUDA ordinal `ordinal`; fails the test if absent. */
json_t *device_of(json_t *j, int ordinal);

/* Runs `cushim run --json FILE -- argv...` on the simulated device with `env`; returns the JSON
 * (caller json_decref) and fills r. */
json_t *run_under_cushim(struct run_result *r, const char *const *argv, const char *const *env);
/* Runs `cushim run -- argv...` (at most 28 arguments) with `env` into r (run_free it); returns
 * its exit status. */
int run_status(const char *const *argv, const char *const *env, struct run_result *r);

#endif
