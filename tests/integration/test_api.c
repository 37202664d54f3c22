/* Integration: ivmEnter/ivmExit, calls outside them, devices, singleton mode
 * and IVM_AUTOSTART=0, against the real ivmd. */
#include <criterion/criterion.h>

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(api, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 40);

Test(api, enter_twice_and_not_entered)
{
    ivmt_scenario(IVMT_PE_API, "enter", NULL, NULL, 20);
}

Test(api, create_dev)
{
    ivmt_scenario(IVMT_PE_API, "dev", NULL, NULL, 20);
}

Test(api, cpu_devices_pinning)
{
    static const char *const env[] = {"IVM_CPU_DEVICES=0,1", NULL};
    cpu_set_t set;

    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    if (!CPU_ISSET(0, &set) || !CPU_ISSET(1, &set)) {
        ivmt_daemon_finish(&ivmt_d);
        cr_skip_test("needs cores 0 and 1");
    }
    ivmt_scenario(IVMT_PE_API, "devices", NULL, env, 20);
}

static int have_cores_0_1(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set) &&
           CPU_ISSET(1, &set);
}

static void start_with_two_cpu_devices(void)
{
    static const char *const args[] = {"--cpu-devices", "0,1", NULL};

    if (have_cores_0_1()) {
        ivmt_daemon_start(&ivmt_d, args);
    }
}

/* ivmd --cpu-devices: the default device table of the daemon's jobs. */
Test(daemon_options, cpu_devices, .init = start_with_two_cpu_devices,
     .fini = ivmt_fixture_stop, .timeout = 40)
{
    if (!have_cores_0_1()) {
        cr_skip_test("needs cores 0 and 1");
    }
    ivmt_scenario(IVMT_PE_API, "devices", NULL, NULL, 20);
}

static void start_named(void)
{
    static const char *const args[] = {"--node", "alpha", NULL};

    ivmt_daemon_start(&ivmt_d, args);
}

/* ivmd --node: the name ivmCreateDev knows this node by, and INFO reports. */
Test(daemon_options, node_name, .init = start_named, .fini = ivmt_fixture_stop, .timeout = 40)
{
    static const char *const args[] = {"alpha", NULL};
    ivm_msg_info_rep_t info;
    const char *why = NULL;

    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    cr_assert_str_eq(info.node, "alpha");
    ivmt_scenario(IVMT_PE_API, "node_name", args, NULL, 20);
}

/* No daemon, IVM_AUTOSTART unset, a private IVM_SOCKET_DIR: the root PE
 * starts a private ivmd, creates a child, and no ivmd is left afterwards. */
Test(singleton, autostart, .timeout = 40)
{
    char dir[IVMT_PATH_MAX], dir_env[IVMT_PATH_MAX + 32], sock_env[IVMT_PATH_MAX + 32];
    char sock[IVMT_PATH_MAX + 16];
    const char *env[] = {dir_env, "XDG_RUNTIME_DIR", NULL};
    const char *entries[] = {dir_env, sock_env, NULL};
    const char *argv[] = {IVMT_PE_PROC, "spawn_one", NULL};
    char *shm_before = ivmt_shm_listing(), *shm_now, *added;
    ivmt_result_t r;
    pid_t pids[64];
    int n = 0;

    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", dir);
    snprintf(sock, sizeof(sock), "%s/ivmd.sock", dir);
    snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s", sock);
    ivmt_run(argv, env, 25, &r);
    for (double deadline = ivmt_now() + 5.0;; ivmt_sleep_ms(20)) {
        n = ivmt_find_procs(0, 0, entries, dir, pids, 64);
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
    }
    {
        char *procs = ivmt_describe_procs(pids, n);
        for (int i = 0; i < n; ++i) {
            kill(pids[i], SIGKILL);
        }
        int sock_left = access(sock, F_OK) == 0;
        shm_now = ivmt_shm_listing();
        added = ivmt_listing_added(shm_before, shm_now);
        ivmt_remove_dir(dir);
        ivmt_expect_pe_ok(NULL, &r, "spawn_one");
        cr_assert_eq(n, 0, "singleton mode left %d process(es) 5 s after the root PE ended: %s",
                     n, procs);
        cr_assert_not(sock_left, "the private daemon's socket %s is left behind", sock);
        cr_assert_str_eq(added, "", "new /dev/shm entries: %s", added);
        free(procs);
    }
    free(shm_before);
    free(shm_now);
    free(added);
    ivmt_result_free(&r);
}

/* IVM_AUTOSTART=0 and nobody listening: IVM_ERROR_NO_DAEMON, a hint on how
 * to start a daemon, and no daemon started. */
Test(singleton, autostart_off_no_daemon, .timeout = 30)
{
    char dir[IVMT_PATH_MAX], sock_env[IVMT_PATH_MAX + 32], dir_env[IVMT_PATH_MAX + 32];
    const char *env[] = {sock_env, dir_env, "IVM_AUTOSTART=0", NULL};
    const char *argv[] = {IVMT_PE_API, "no_daemon", NULL};
    ivmt_result_t r;
    pid_t pids[16];
    int n;

    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s/ivmd.sock", dir);
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", dir);
    ivmt_run(argv, env, 20, &r);
    ivmt_sleep_ms(200);
    n = ivmt_find_procs(0, 0, NULL, dir, pids, 16);
    for (int i = 0; i < n; ++i) {
        kill(pids[i], SIGKILL);
    }
    ivmt_remove_dir(dir);
    ivmt_expect_pe_ok(NULL, &r, "no_daemon");
    cr_assert_eq(n, 0, "a daemon was started although IVM_AUTOSTART=0");
    cr_assert(strstr(r.out, "ivmd") != NULL || strstr(r.err, "ivmd") != NULL ||
                  strstr(r.out, "ivmrun") != NULL || strstr(r.err, "ivmrun") != NULL,
              "IVM_ERROR_NO_DAEMON comes with no hint on how to start a daemon (neither "
              "ivmGetLastErrorMessage nor stderr mention ivmd or ivmrun):\n%s\n%s",
              r.out, r.err);
    ivmt_result_free(&r);
}

/* Two root PEs start at once with no daemon and the same socket directory:
 * both run (one autostarts the daemon, the other uses it or its own), and no
 * daemon is left afterwards. */
Test(singleton, two_roots_at_once, .timeout = 60)
{
    char dir[IVMT_PATH_MAX], dir_env[IVMT_PATH_MAX + 32];
    const char *env[] = {dir_env, "XDG_RUNTIME_DIR", NULL};
    const char *entries[] = {dir_env, NULL};
    const char *argv[] = {IVMT_PE_PROC, "spawn_one", NULL};
    ivmt_proc_t a, b;
    ivmt_result_t ra, rb;
    pid_t pids[64];
    int n;

    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", dir);
    ivmt_start(argv, env, &a);
    ivmt_start(argv, env, &b);
    ivmt_finish(&a, 30, &ra);
    ivmt_finish(&b, 30, &rb);
    for (double deadline = ivmt_now() + 5.0;; ivmt_sleep_ms(20)) {
        n = ivmt_find_procs(0, 0, entries, dir, pids, 64);
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
    }
    for (int i = 0; i < n; ++i) {
        kill(pids[i], SIGKILL);
    }
    ivmt_remove_dir(dir);
    ivmt_expect_pe_ok(NULL, &ra, "spawn_one");
    ivmt_expect_pe_ok(NULL, &rb, "spawn_one");
    cr_assert_eq(n, 0, "%d process(es) left after two singleton roots", n);
    ivmt_result_free(&ra);
    ivmt_result_free(&rb);
}

/* With IVM_AUTOSTART unset and a daemon already serving the socket
 * directory, the root PE uses that daemon instead of starting one. */
Test(api, root_uses_the_running_daemon)
{
    char dir_env[IVMT_PATH_MAX + 64], *slash;
    const char *env[] = {dir_env, "XDG_RUNTIME_DIR", NULL};
    const char *argv[] = {IVMT_PE_PROC, "sleep", NULL};
    ivm_msg_info_rep_t info;
    const char *why = NULL;
    ivmt_proc_t p;
    ivmt_result_t r;
    pid_t pids[8];
    int n;

    /* the fixture's daemon listens on <dir>/ivmd.sock: the default path there */
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", ivmt_d.sock);
    slash = strrchr(dir_env, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    ivmt_start(argv, env, &p);
    if (!ivmt_wait_output(&p, "PIDS ", 20)) {
        ivmt_finish(&p, 1, &r);
        cr_assert_fail("the root PE never got going: %s", ivmt_describe(&ivmt_d, &r));
    }
    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    cr_assert_eq(info.jobs, 1, "the job did not run on the daemon already serving the "
                 "socket directory");
    n = ivmt_find_procs(0, ivmt_d.pid, NULL, ivmt_d.dir, pids, 8);
    cr_assert_eq(n, 0, "another daemon was started: %s", ivmt_describe_procs(pids, n));
    kill(p.pid, SIGKILL);
    ivmt_finish(&p, 10, &r);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}
