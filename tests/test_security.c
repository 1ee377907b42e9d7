/* Issue 3: a segment of another user is neither readable nor writable. CI runs as root, so the
 * test drops privileges with setpriv to two unprivileged uids. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define OWNER "65534"
#define OTHER "65533"

static void as_user(struct run_result *r, const char *uid, const char *const *argv,
                    const char *const *env)
{
    const char *full[32] = {"setpriv", "--reuid=" OWNER, "--regid=" OWNER, "--clear-groups", "--"};
    static char reuid[32], regid[32];
    snprintf(reuid, sizeof reuid, "--reuid=%s", uid);
    snprintf(regid, sizeof regid, "--regid=%s", uid);
    full[1] = reuid;
    full[2] = regid;
    size_t n = 5;
    for (size_t i = 0; argv[i]; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    run_cmd(r, full, env);
}

Test(security, another_users_segment_is_private)
{
    if (geteuid() != 0) {
        printf("not run: needs root to run programs as two other users (setpriv)\n");
        cr_skip_test("not run: needs root to switch users");
    }
    const char *segdir = fresh_dir("shared"), *ready = fresh_dir("ready-sec");
    char hold[700], seg[600], rd[600], hd[800];
    snprintf(hold, sizeof hold, "%s/go", ready);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    const char *extra[] = {preload_env(), seg, rd, hd, NULL};
    const char *argv[] = {"setpriv", "--reuid=" OWNER, "--regid=" OWNER, "--clear-groups", "--",
                          program("rt_prog"), "hold", NULL};
    pid_t setpriv = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);

    char path[700];
    snprintf(path, sizeof path, "%s/cushim-%s-%d", segdir, OWNER, (int)pid);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "segment %s", path);
    cr_expect_eq(st.st_uid, 65534);
    cr_expect_eq(st.st_mode & 0777, 0600);

    char p[32];
    snprintf(p, sizeof p, "%d", (int)pid);
    const char *env[] = {seg, NULL};
    struct run_result r;
    /* The other user sees nothing and can change nothing. */
    const char *stat_all[] = {cushim_bin(), "stat", NULL};
    as_user(&r, OTHER, stat_all, env);
    cr_expect_eq(r.status, 1, "other user: %s%s", r.out, r.err);
    run_free(&r);
    const char *stat_pid[] = {cushim_bin(), "stat", p, "--json", NULL};
    as_user(&r, OTHER, stat_pid, env);
    cr_expect_eq(r.status, 1);
    cr_expect_str_eq(r.out, "[]\n");
    run_free(&r);
    const char *reset[] = {cushim_bin(), "reset-peak", p, NULL};
    as_user(&r, OTHER, reset, env);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "no cushim process") != NULL, "%s", r.err);
    run_free(&r);
    const char *cat[] = {"cat", path, NULL};
    as_user(&r, OTHER, cat, env);
    cr_expect_neq(r.status, 0, "the file itself is unreadable to another user");
    run_free(&r);
    const char *ps[] = {cushim_bin(), "ps", NULL};
    as_user(&r, OTHER, ps, env);
    cr_expect(strstr(r.out, p) == NULL, "ps shows another user's process:\n%s", r.out);
    run_free(&r);

    /* The owner and root see it. */
    as_user(&r, OWNER, stat_pid, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\"current_bytes\": 1052672") != NULL, "%s", r.out);
    run_free(&r);
    run_cmd(&r, stat_pid, env);
    cr_expect_eq(r.status, 0, "root: %s", r.err);
    run_free(&r);

    touch(hold);
    cr_expect_eq(wait_bg(setpriv), 0);
}
