/* Self-tests of the integration harness: the checks the other tests rely on
 * (leftover processes, fd counts, /dev/shm listings, captured output, time
 * limits) must see what they are meant to see; and a test that ends without
 * its teardown (cr_skip_test) leaves no daemon or directory. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

TestSuite(harness, .timeout = 30);

Test(harness, run_captures_status_and_streams)
{
    const char *ok[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    const char *env[] = {"IVMT_PROBE=1", NULL};
    const char *show[] = {"/bin/sh", "-c", "echo \"$IVMT_PROBE${IVM_LEAK-unset}\"", NULL};
    const char *sig[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
    const char *slow[] = {"/bin/sleep", "10", NULL};
    ivmt_result_t r;

    ivmt_run(ok, NULL, 10, &r);
    cr_assert(r.exited && r.code == 3 && !r.timed_out);
    cr_assert_str_eq(r.out, "out\n");
    cr_assert_str_eq(r.err, "err\n");
    ivmt_result_free(&r);

    setenv("IVM_LEAK", "x", 1); /* IVM_* of the test's environment is not passed on */
    ivmt_run(show, env, 10, &r);
    unsetenv("IVM_LEAK");
    cr_assert_str_eq(r.out, "1unset\n");
    ivmt_result_free(&r);

    ivmt_run(sig, NULL, 10, &r);
    cr_assert(!r.exited && r.signo == SIGKILL);
    ivmt_result_free(&r);

    ivmt_run(slow, NULL, 0.3, &r);
    cr_assert(r.timed_out, "a time limit of 0.3 s stops sleep 10");
    cr_assert_lt(r.seconds, 5.0);
    ivmt_result_free(&r);
}

Test(harness, finds_processes_by_parent_environment_and_command)
{
    char entry[64], marker[64];
    const char *env[] = {entry, NULL};
    const char *argv[] = {"/bin/sleep", marker, NULL};
    const char *entries[] = {entry, NULL};
    const char *other[] = {"IVM_SOCKET=/nowhere", NULL};
    ivmt_proc_t p;
    ivmt_result_t r;
    pid_t pids[8];
    int n;

    snprintf(entry, sizeof(entry), "IVM_SOCKET=/tmp/ivmt-probe-%d", (int)getpid());
    snprintf(marker, sizeof(marker), "20.%d", (int)getpid());
    ivmt_start(argv, env, &p);
    ivmt_sleep_ms(100);
    n = ivmt_find_procs(0, 0, entries, NULL, pids, 8);
    cr_assert_eq(n, 1, "found by its environment");
    cr_assert_eq(pids[0], p.pid);
    n = ivmt_find_procs(getpid(), 0, NULL, NULL, pids, 8);
    cr_assert_eq(n, 1, "found as our child");
    n = ivmt_find_procs(0, 0, NULL, marker, pids, 8);
    cr_assert_eq(n, 1, "found by its command line");
    cr_assert_eq(ivmt_find_procs(0, 0, other, NULL, pids, 8), 0);
    cr_assert_eq(ivmt_find_procs(0, p.pid, entries, NULL, pids, 8), 0, "excluded");
    cr_assert_eq(ivmt_wait_pids_gone(&p.pid, 1, 0.2), 1, "still running");
    /* ivmt_wait_pids_gone killed it; reap it */
    ivmt_finish(&p, 5, &r);
    cr_assert_eq(r.signo, SIGKILL);
    ivmt_result_free(&r);
    cr_assert_eq(ivmt_find_procs(0, 0, entries, NULL, pids, 8), 0);
    cr_assert_eq(ivmt_wait_pids_gone(&p.pid, 1, 1.0), 0);
}

Test(harness, counts_fds)
{
    int before = ivmt_count_fds(getpid()), fds[2];

    cr_assert_gt(before, 0);
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(ivmt_count_fds(getpid()), before + 2);
    close(fds[0]);
    close(fds[1]);
    cr_assert_eq(ivmt_count_fds(getpid()), before);
    cr_assert_eq(ivmt_count_fds(999999999), -1);
}

Test(harness, shm_listing_diff)
{
    char name[64], path[80];
    char *before = ivmt_shm_listing(), *now, *added;
    FILE *f;

    snprintf(name, sizeof(name), "ivmt-probe-%d", (int)getpid());
    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    f = fopen(path, "w");
    if (f == NULL) {
        cr_skip_test("/dev/shm not writable");
    }
    fclose(f);
    now = ivmt_shm_listing();
    added = ivmt_listing_added(before, now);
    unlink(path);
    cr_assert(strstr(added, name) != NULL, "new entry seen: '%s'", added);
    free(added);
    added = ivmt_listing_added(now, before);
    cr_assert_str_eq(added, "", "removed entries are not 'added'");
    free(added);
    free(before);
    free(now);
}

Test(harness, parse_pids)
{
    pid_t p[4];

    cr_assert_eq(ivmt_parse_pids("x\nPIDS 12 34 56\nmore", "PIDS", p, 4), 3);
    cr_assert(p[0] == 12 && p[1] == 34 && p[2] == 56);
    cr_assert_eq(ivmt_parse_pids("NOPIDS 1\n", "PIDS", p, 4), 0, "only at a line start");
    cr_assert_eq(ivmt_parse_pids("PIDS 1 2 3 4 5\n", "PIDS", p, 2), 2);
}

/* A test that calls cr_skip_test after its .init started a daemon gets no
 * .fini from Criterion, only its exit handlers: the harness's must stop the
 * daemon and remove its directory. A child process plays the skipped test
 * (starts a daemon, makes a directory, exits). */
Test(harness, exit_without_teardown_leaves_no_daemon_or_directory)
{
    struct {
        char  dir[IVMT_PATH_MAX], other[IVMT_PATH_MAX];
        pid_t daemon;
    } made;
    struct stat st;
    int fds[2], status;
    pid_t child;

    memset(&made, 0, sizeof(made));
    cr_assert_eq(pipe(fds), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        ivmt_daemon_t d;
        close(fds[0]);
        ivmt_daemon_start(&d, NULL);
        snprintf(made.dir, sizeof(made.dir), "%s", d.dir);
        ivmt_make_tmpdir(made.other, sizeof(made.other));
        made.daemon = d.pid;
        if (write(fds[1], &made, sizeof(made)) != (ssize_t)sizeof(made)) {
            _exit(3);
        }
        exit(0);
    }
    close(fds[1]);
    cr_assert_eq(read(fds[0], &made, sizeof(made)), (ssize_t)sizeof(made));
    close(fds[0]);
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: 0x%x", status);
    cr_assert(made.daemon > 0 && made.dir[0] != '\0' && made.other[0] != '\0');
    cr_assert(kill(made.daemon, 0) != 0 && errno == ESRCH, "its daemon %d still runs",
              (int)made.daemon);
    cr_assert(stat(made.dir, &st) != 0 && errno == ENOENT, "%s is still there", made.dir);
    cr_assert(stat(made.other, &st) != 0 && errno == ENOENT, "%s is still there", made.other);
}
