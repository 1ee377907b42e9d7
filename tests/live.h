/* Helpers of the suites that watch programs under the shim live (test_live.c, test_segments.c,
 * test_top.c, test_containers.c, test_watch.c). Not thread-safe (Criterion runs each test in its own process). */
#ifndef CUSHIM_TESTS_LIVE_H
#define CUSHIM_TESTS_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* The environment of a held program (preloaded with the shim, on the simulated device):
 * segments in `segdir`, its ready file written into `ready`, held until `hold` exists; `setting`
 * (NULL for none) is one more VAR=VALUE. A static array, reused by the next call. */
const char *const *live_env_with(const char *segdir, const char *ready, const char *hold,
                                 const char *setting);
const char *const *live_env(const char *segdir, const char *ready, const char *hold);
/* The same with two settings (`another` is taken only after a `setting`). */
const char *const *live_env_with2(const char *segdir, const char *ready, const char *hold, const char *setting,
                                  const char *another);

/* Runs `cushim A B C` (B, C may be NULL) with CUSHIM_SEGMENT_DIR=segdir into r (run_free it).
 * Returns the exit status. */
int cli(const char *segdir, struct run_result *r, const char *a, const char *b, const char *c);

/* The places of a group of held programs (tests/programs/common.h): a fresh segment directory
 * and ready directory named after `tag`, and the hold file to touch to let them exit. */
struct live_dirs {
    const char *seg, *ready; /* fresh_dir's, valid for the test */
    char hold[700];
};
void live_dirs_make(struct live_dirs *d, const char *tag);
/* Touches `hold` and expects each of the n programs pids[] to exit 0. */
void live_release(const char *hold, const pid_t *pids, int n);

/* A program under the shim that is ready and holding (tests/programs/common.h): rt_prog SCENARIO
 * with its own segment directory (*segdir, named after `tag`) and hold file (hold[len]; touch it
 * to let it exit). Returns its pid. */
pid_t start_held(const char *scenario, const char *tag, const char **segdir, char *hold, size_t len);

/* The path of pid's segment in `segdir` (a static buffer, reused by the next call). */
const char *seg_path(const char *segdir, pid_t pid);

/* Waits (up to 30 s) until pid's main thread is a zombie (/proc/<pid>/stat state Z); fails the
 * test otherwise, naming `what`. */
void wait_zombie(pid_t pid, const char *what);
/* Waits (up to 30 s) until pid is gone or a zombie: a process killed is dead before what follows
 * looks at it; fails the test otherwise. */
void wait_dead(pid_t pid, const char *what);

/* One sample of a Prometheus exposition `out`, exact: "FAMILY{LABELS[,kind="KIND"]} VALUE\n"
 * (kind NULL: no kind label); a Criterion expectation. */
void expect_prom(const char *out, const char *labels, const char *family, const char *kind, uint64_t value);

/* Where pid's row begins in a `cushim top` frame `out` (an offset; -1 when there is none): rows
 * compare by it. */
long row_at(const char *out, pid_t pid);
#endif
