/* Integration: CPU devices that are a share of their cores' time ("0:25"),
 * enforced with cgroup CPU bandwidth limits (ivmd/devcg.c, common/cgroup.c):
 * a busy PE gets no more than its share; bad and unenforceable shares are
 * refused; groups go with the job, the killed PE and the killed daemon;
 * shares change at run time (ivm-ctl) and show in ivm-info; ivmrun passes
 * shares to its daemons (--cpu-devices, --nodes with --node-cpu-devices);
 * ivm-devrun places MPI ranks the same way. The tests that need to make
 * cgroups skip, saying so, without write access to the cpu controller. */
#include <criterion/criterion.h>

#include <sched.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "harness.h"

/* Skip (after stopping the fixture's daemon, if any) without cgroup access. */
static void need_cgroups(void)
{
    char why[320];

    if (!ivmt_cgroup_writable(why, sizeof(why))) {
        if (ivmt_d.pid > 0) {
            ivmt_daemon_finish(&ivmt_d);
        }
        cr_skip_test("needs write access to the cpu cgroup controller (root or a delegated "
                     "cgroup): %s", why);
    }
}

/* Start the fixture's daemon with --cpu-devices spec, if cgroups can be made. */
static void start_with(const char *spec)
{
    const char *args[] = {"--cpu-devices", spec, NULL};
    char why[320];

    /* The suite's .init started the plain fixture daemon before this test's
       .init: stop it (and its directory) first. */
    ivmt_daemon_abandon(&ivmt_d);
    if (ivmt_cgroup_writable(why, sizeof(why))) {
        ivmt_daemon_start(&ivmt_d, args);
    }
}

static void no_daemon(void)
{
}

static int have_cores_0_1(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set) &&
           CPU_ISSET(1, &set);
}

static void start_two_on_core0(void)
{
    start_with("0:25,0:75");
}

static void start_three(void)
{
    if (have_cores_0_1()) {
        start_with("0,1:50,1:25");
    }
}

static void start_forty(void)
{
    start_with("0:40");
}

static void start_thirty(void)
{
    start_with("0:30");
}

TestSuite(share, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 60);

/* A PE busy for 1 s on a 25% device of the daemon's table gets at most 30%
 * of a core (with IVM_PE_POOL > 0: a parked process handed out). */
Test(share, busy_pe_gets_its_share, .init = start_two_on_core0)
{
    static const char *const args[] = {"-", "0", "25", "0.30", "shared", "2", NULL};

    need_cgroups();
    ivmt_scenario(IVMT_PE_SHARE, "busy", args, NULL, 40);
}

/* The same on a device of the job's own table (IVM_CPU_DEVICES). */
Test(share, busy_pe_on_the_jobs_own_share)
{
    static const char *const args[] = {"-", "0", "25", "0.30", "own", "1", NULL};
    static const char *const env[] = {"IVM_CPU_DEVICES=0:25", NULL};

    need_cgroups();
    ivmt_scenario(IVMT_PE_SHARE, "busy", args, env, 40);
}

/* ivm-ctl set-share changes a device's limit at run time (and refuses a
 * share that makes a core's sum exceed 100); ivm-info shows the shares. */
Test(share, runtime_change_and_ivm_info, .init = start_three)
{
    static const char *const args[] = {IVMT_IVM_CTL, IVMT_IVM_INFO, NULL};

    if (!have_cores_0_1()) {
        cr_skip_test("needs cores 0 and 1");
    }
    need_cgroups();
    ivmt_scenario(IVMT_PE_SHARE, "change", args, NULL, 40);
}

/* PEs ended by ivmKillPEs and by SIGKILL: their job's groups go with the
 * job (the teardown checks it). */
Test(share, killed_pes_groups_go, .init = start_forty)
{
    static const char *const args[] = {"0", NULL};

    need_cgroups();
    ivmt_scenario(IVMT_PE_SHARE, "killed", args, NULL, 40);
}

/* ivm-info of an idle daemon lists each CPU device with its share. */
Test(share, ivm_info_lists_shares, .init = start_thirty)
{
    const char *argv[] = {IVMT_IVM_INFO, ivmt_d.sock, NULL};
    ivmt_result_t r;

    need_cgroups();
    ivmt_run(argv, NULL, 10, &r);
    cr_assert(r.exited && r.code == 0, "ivm-info: %s", r.err);
    cr_assert(strstr(r.out, "cpu_devices=1\n") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "cpu_device.0=cores=0 ncores=1 share=30 pes=0 groups=0 "
                            "quota_us=1200 period_us=4000 numa=") != NULL, "%s", r.out);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* Run ivmd --cpu-devices spec (no fixture): it must exit with code and say why. */
static void expect_daemon_refused(const char *spec, int code, const char *why)
{
    char dir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16];
    const char *argv[] = {IVMT_IVMD, "--socket", sock, "--cpu-devices", spec, NULL};
    ivmt_result_t r;

    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(sock, sizeof(sock), "%s/s", dir);
    ivmt_run(argv, NULL, 10, &r);
    ivmt_remove_dir(dir);
    cr_assert(r.exited && r.code == code, "ivmd --cpu-devices '%s' exited %d, want %d: %s",
              spec, r.code, code, r.err);
    cr_assert(strstr(r.err, why) != NULL, "ivmd --cpu-devices '%s' said '%s', not '%s'", spec,
              r.err, why);
    cr_assert(strstr(r.err, spec) != NULL, "ivmd's message '%s' lacks the spec", r.err);
    ivmt_result_free(&r);
}

/* A root PE whose IVM_CPU_DEVICES is spec: ivmEnter fails with status and
 * a message holding why. */
static void expect_enter_refused(const char *spec, const char *status, const char *why)
{
    char env_spec[128];
    const char *env[] = {env_spec, NULL};
    const char *args[] = {status, NULL};
    ivmt_result_t r;

    snprintf(env_spec, sizeof(env_spec), "IVM_CPU_DEVICES=%s", spec);
    ivmt_run_pe(&ivmt_d, IVMT_PE_SHARE, "enter_refused", args, env, 20, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "enter_refused");
    cr_assert(strstr(r.out, why) != NULL, "IVM_CPU_DEVICES='%s': ivmEnter said '%s', not '%s'",
              spec, r.out, why);
    ivmt_result_free(&r);
}

/* Bad share specs, as the daemon's option and as a job's IVM_CPU_DEVICES. */
Test(share, bad_specs_are_refused_with_their_reason)
{
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"0:0", "entry '0:0': share '0' is not a percentage of 1..100"},
        {"0:101", "share '101' is not a percentage of 1..100"},
        {"0:60,0:50", "entry '0:50': core 0 is shared by devices whose shares add up to 110% "
                      "(at most 100%)"},
        {"0,0:1", "core 0 is shared by devices whose shares add up to 101%"},
        {"0:5x", "entry '0:5x': unexpected 'x'"},
        {"0:", "share '' is not a percentage of 1..100"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        expect_daemon_refused(bad[i].spec, 2, bad[i].why);
        expect_enter_refused(bad[i].spec, "IVM_ERROR_INVALID_VALUE", bad[i].why);
    }
    ivmt_daemon_finish(&ivmt_d);
}

/* Whether uid 65534 can run PATH: every directory above it searchable by
 * that user (a clone in a 0700 directory is not). */
static int runnable_by_nobody(const char *path)
{
    pid_t pid = fork();
    int status = 0;

    if (pid == 0) {
        _exit(setgid(65534) == 0 && setgroups(0, NULL) == 0 && setuid(65534) == 0 &&
                      access(path, X_OK) == 0 ? 0 : 1);
    }
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* Shares a daemon cannot enforce (no write access to cgroups: another user):
 * a daemon with them refuses to start, and a root PE bringing them gets
 * IVM_ERROR_PERMISSION from ivmEnter, both saying why. */
Test(share, unenforceable_shares_are_refused, .init = no_daemon)
{
    char dir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16], dir_env[IVMT_PATH_MAX + 32];
    const char *daemon[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                            "--clear-groups", IVMT_IVMD, "--socket", sock, "--cpu-devices",
                            "0:50", NULL};
    const char *root[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                          "--clear-groups", IVMT_PE_SHARE, "enter_refused",
                          "IVM_ERROR_PERMISSION", NULL};
    const char *env[] = {dir_env, "IVM_CPU_DEVICES=0:50", "XDG_RUNTIME_DIR", NULL};
    const char *entries[] = {dir_env, NULL};
    ivmt_result_t r;
    pid_t pids[16];
    int n;

    if (getuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
        cr_skip_test("needs root and /usr/bin/setpriv to act as a user without cgroup access");
    }
    if (!runnable_by_nobody(IVMT_IVMD) || !runnable_by_nobody(IVMT_PE_SHARE)) {
        cr_skip_test("the build tree is not reachable by uid 65534 (a directory above it "
                     "without o+x, as mktemp -d makes): cannot run the daemon as that user");
    }
    ivmt_make_tmpdir(dir, sizeof(dir));
    cr_assert_eq(chown(dir, 65534, 65534), 0);
    snprintf(sock, sizeof(sock), "%s/ivmd.sock", dir);
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", dir);
    ivmt_run(daemon, NULL, 10, &r);
    cr_assert(r.exited && r.code == 1, "ivmd as uid 65534 with shares exited %d: %s", r.code,
              r.err);
    cr_assert(strstr(r.err, "'0:50' has shares of cores") != NULL &&
                  strstr(r.err, "Permission denied") != NULL, "ivmd said: %s", r.err);
    ivmt_result_free(&r);

    /* Singleton mode: the root PE starts a private daemon as uid 65534. */
    ivmt_run(root, env, 30, &r);
    for (double deadline = ivmt_now() + 5.0;; ivmt_sleep_ms(20)) {
        n = ivmt_find_procs(0, 0, entries, dir, pids, 16);
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
    }
    for (int i = 0; i < n; ++i) {
        kill(pids[i], SIGKILL);
    }
    ivmt_remove_dir(dir);
    ivmt_expect_pe_ok(NULL, &r, "enter_refused");
    cr_assert(strstr(r.out, "IVM_CPU_DEVICES '0:50' has shares of cores, which node0 cannot "
                            "enforce") != NULL && strstr(r.out, "Permission denied") != NULL,
              "ivmEnter said: %s", r.out);
    cr_assert_eq(n, 0, "%d process(es) of the singleton run left", n);
    ivmt_result_free(&r);
}

/* A SIGKILLed daemon leaves its cgroups (with a PE in one); the next daemon
 * sweeps them, moving the PE out first. */
Test(share, killed_daemons_groups_are_swept, .init = start_forty)
{
    static const char *const args[] = {"0", NULL};
    char dir[IVM_CGROUP_PATH_MAX], sock_env[IVMT_PATH_MAX + 64];
    const char *entries[] = {sock_env, NULL};
    const char *const daemon_args[] = {"--cpu-devices", "0:40", NULL};
    ivmt_daemon_t second;
    ivmt_proc_t p;
    ivmt_result_t r;
    char *out, *left, mine[IVMT_PATH_MAX];
    pid_t pe, pids[16];
    int status, n;

    need_cgroups();
    ivmt_start_pe(&ivmt_d, IVMT_PE_SHARE, "hold", args, NULL, &p);
    cr_assert(ivmt_wait_output(&p, "HELD ", 20), "the PE never reported");
    out = ivmt_proc_output(&p);
    cr_assert_eq(sscanf(strstr(out, "HELD "), "HELD %d %255s", &pe, mine), 2, "%s", out);
    free(out);
    cr_assert_eq(ivmt_cgroup_daemon_dir(ivmt_d.pid, dir, sizeof(dir)), 0);
    cr_assert(strstr(mine, dir) != NULL, "the PE is in %s, not in %s", mine, dir);

    kill(ivmt_d.pid, SIGKILL);
    waitpid(ivmt_d.pid, &status, 0);
    ivmt_d.pid = 0;
    left = ivmt_cgroup_stale();
    cr_assert(strstr(left, dir) != NULL, "no stale %s after SIGKILL: %s", dir, left);
    free(left);

    ivmt_daemon_start(&second, daemon_args); /* sweeps at start */
    left = ivmt_cgroup_stale();
    cr_assert(strstr(left, dir) == NULL, "the new daemon left the stale %s", dir);
    free(left);
    {
        char now[256] = "";
        char path[64];
        FILE *f;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pe);
        f = fopen(path, "r");
        cr_assert_not_null(f, "the held PE %d is gone", (int)pe);
        while (fgets(now, sizeof(now), f) != NULL && strstr(now, "/ivm/ivmd-") == NULL) {
        }
        fclose(f);
        cr_assert(strstr(now, "/ivm/ivmd-") == NULL, "PE %d is still in %s", (int)pe, now);
    }
    snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s", ivmt_d.sock);
    n = ivmt_find_procs(0, 0, entries, NULL, pids, 16);
    for (int i = 0; i < n; ++i) {
        kill(pids[i], SIGKILL);
    }
    kill(p.pid, SIGKILL);
    ivmt_finish(&p, 5, &r);
    ivmt_result_free(&r);
    ivmt_daemon_abandon(&ivmt_d);
    ivmt_daemon_finish(&second);
}

/* ivmrun --cpu-devices with a share: the daemon ivmrun starts gets the spec,
 * the job too (its own table). */
Test(share, ivmrun_cpu_devices_share, .init = no_daemon)
{
    const char *args[] = {"--cpu-devices", "0:25", IVMT_PE_SHARE, "busy", "-", "0", "25",
                          "0.30", "own", "1", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;

    need_cgroups();
    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    ivmt_launch_finish_clean(&c, 40, &r);
    ivmt_expect_pe_ok(NULL, &r, "busy");
    ivmt_result_free(&r);
}

/* ivmrun --nodes 2 --node-cpu-devices '0:80;0:40': node1's daemon gets its
 * share through ivmrun; its PE runs in node1's group of its table. */
Test(share, ivmrun_nodes_with_shares, .init = no_daemon)
{
    const char *args[] = {"--nodes", "2", "--node-cpu-devices", "0:80;0:40", "--timeout",
                          "40", IVMT_PE_SHARE, "busy", "node1", "0", "40", "0.47", "shared",
                          "1", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;

    need_cgroups();
    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    ivmt_launch_finish_clean(&c, 45, &r);
    ivmt_expect_pe_ok(NULL, &r, "busy");
    ivmt_result_free(&r);
}

/* The cgroup module on real cgroups: create with a limit, read it back,
 * change it, attach a process, destroy with the process still in it, and a
 * sweep of a stale owner's directory. */
Test(share, cgroup_module, .init = no_daemon)
{
    ivm_cgroup_root_t root;
    char err[320], own[128], rel[192], stale[64];
    uint64_t quota, period;
    int removed = -1, status;
    pid_t child;

    need_cgroups();
    cr_assert_eq(ivm_cgroup_root_find(&root, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_cgroup_owner_dir("ivmt", 0, own, sizeof(own)), IVM_SUCCESS);
    snprintf(rel, sizeof(rel), "%s/dev1/job2", own);
    cr_assert_eq(ivm_cgroup_create(&root, rel, 25, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_cgroup_get_limit(&root, rel, &quota, &period, err, sizeof(err)),
                 IVM_SUCCESS, "%s", err);
    cr_assert(quota == 1000 && period == 4000, "%llu/%llu", (unsigned long long)quota,
              (unsigned long long)period);
    cr_assert_eq(ivm_cgroup_set_limit(&root, rel, 150, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_cgroup_get_limit(&root, rel, &quota, &period, err, sizeof(err)),
                 IVM_SUCCESS, "%s", err);
    cr_assert(quota == 6000 && period == 4000, "%llu/%llu", (unsigned long long)quota,
              (unsigned long long)period);
    cr_assert_eq(ivm_cgroup_set_limit(&root, rel, 0, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_cgroup_get_limit(&root, rel, &quota, &period, err, sizeof(err)),
                 IVM_SUCCESS, "%s", err);
    cr_assert_eq(quota, 0, "no limit");
    cr_assert_eq(ivm_cgroup_attach(&root, rel, 999999999, err, sizeof(err)),
                 IVM_ERROR_NOT_FOUND, "a pid that does not exist");
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        for (;;) {
            pause();
        }
    }
    cr_assert_eq(ivm_cgroup_attach(&root, rel, child, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_cgroup_destroy(&root, own, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(kill(child, 0), 0, "the process moved out lives on");
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    cr_assert_eq(ivm_cgroup_destroy(&root, own, err, sizeof(err)), IVM_SUCCESS,
                 "destroying what is gone is no error");
    snprintf(stale, sizeof(stale), "%s/ivmt-999999999-5/dev0", IVM_CGROUP_TOP);
    cr_assert_eq(ivm_cgroup_create(&root, stale, 10, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_cgroup_create(&root, own, 0, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_cgroup_sweep(&root, "ivmt", &removed, err, sizeof(err)), IVM_SUCCESS,
                 "%s", err);
    cr_assert_geq(removed, 1, "the stale directory");
    {
        char path[IVM_CGROUP_PATH_MAX];
        ivm_cgroup_path(&root, "ivm/ivmt-999999999-5", NULL, path, sizeof(path));
        cr_assert_neq(access(path, F_OK), 0, "%s is left", path);
        ivm_cgroup_path(&root, own, NULL, path, sizeof(path));
        cr_assert_eq(access(path, F_OK), 0, "the sweep removed a live owner's %s", path);
    }
    cr_assert_eq(ivm_cgroup_destroy(&root, own, err, sizeof(err)), IVM_SUCCESS, "%s", err);
    ivm_cgroup_top_remove(&root);
    cr_assert_eq(ivm_cgroup_create(&root, "/abs", 10, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
}

#ifdef IVMT_DEVRUN
/* The rank's script: its cgroup, the group's limit (v1 or v2 files), its
 * threads and cores; it exits 5. */
#define DEVRUN_RANK_SCRIPT                                                           \
    "d=${IVM_DEVRUN#*|}; echo DIR $d; grep -E \"(^|,|:)cpu(,|:)|^0::\" /proc/self/cgroup; " \
    "echo LIMIT $(cat $d/dev0/cpu.cfs_quota_us $d/dev0/cpu.cfs_period_us 2>/dev/null || "  \
    "cat $d/dev0/cpu.max); echo OMP $OMP_NUM_THREADS; grep Cpus_allowed_list "             \
    "/proc/self/status; exit 5"

/* ivm-devrun --cpu-devices 0:25 -- CMD, CMD running one rank (rank 0) through
 * ivm-devrun --rank: the rank is in device 0's group with a 25% limit, pinned
 * to core 0 with OMP_NUM_THREADS=1; the status is the rank's; no group is
 * left. */
Test(share, devrun_places_a_rank, .init = no_daemon)
{
    const char *argv[] = {IVMT_DEVRUN, "--cpu-devices", "0:25", "--", "/bin/sh", "-c",
                          "OMPI_COMM_WORLD_RANK=0 exec " IVMT_DEVRUN " --rank -- /bin/sh -c '"
                          DEVRUN_RANK_SCRIPT "'", NULL};
    char dir[IVM_CGROUP_PATH_MAX] = "";
    ivmt_result_t r;
    struct stat st;
    char *left;

    need_cgroups();
    ivmt_run(argv, NULL, 20, &r);
    cr_assert(r.exited && r.code == 5, "ivm-devrun exited %d (want the rank's 5): %s\n%s",
              r.code, r.out, r.err);
    cr_assert(strstr(r.out, "/ivm/devrun-") != NULL && strstr(r.out, "/dev0\n") != NULL,
              "the rank is not in device 0's group:\n%s", r.out);
    cr_assert(strstr(r.out, "LIMIT 1000 4000\n") != NULL, "not a 25%% limit:\n%s", r.out);
    cr_assert(strstr(r.out, "OMP 1\n") != NULL, "%s", r.out);
    cr_assert(strstr(r.out, "Cpus_allowed_list:\t0\n") != NULL, "%s", r.out);
    cr_assert_eq(sscanf(strstr(r.out, "DIR "), "DIR %511s", dir), 1, "%s", r.out);
    cr_assert_neq(stat(dir, &st), 0, "ivm-devrun left %s", dir);
    left = ivmt_cgroup_stale();
    cr_assert(strstr(left, "devrun-") == NULL, "stale groups: %s", left);
    free(left);
    ivmt_result_free(&r);
}

/* Bad use says why: no rank variable, no IVM_DEVRUN, a bad spec. */
Test(share, devrun_errors, .init = no_daemon)
{
    const char *rank[] = {IVMT_DEVRUN, "--rank", "--", "/bin/true", NULL};
    const char *spec[] = {IVMT_DEVRUN, "--cpu-devices", "0:60,0:50", "--", "/bin/true", NULL};
    const char *with_rank[] = {"OMPI_COMM_WORLD_RANK=0", NULL};
    ivmt_result_t r;

    ivmt_run(rank, NULL, 10, &r);
    cr_assert(r.exited && r.code == 1 && strstr(r.err, "no rank in the environment"), "%s",
              r.err);
    ivmt_result_free(&r);
    ivmt_run(rank, with_rank, 10, &r);
    cr_assert(r.exited && r.code == 1 && strstr(r.err, "IVM_DEVRUN is not set"), "%s", r.err);
    ivmt_result_free(&r);
    ivmt_run(spec, NULL, 10, &r);
    cr_assert(r.exited && r.code == 2 &&
                  strstr(r.err, "core 0 is shared by devices whose shares add up to 110%"),
              "%s", r.err);
    ivmt_result_free(&r);
}

/* A SIGKILLed ivm-devrun leaves its groups (a rank in one); the next one
 * sweeps them. */
Test(share, devrun_killed_is_swept, .init = no_daemon)
{
    const char *held[] = {IVMT_DEVRUN, "--cpu-devices", "0:30", "--", "/bin/sh", "-c",
                          "OMPI_COMM_WORLD_RANK=0 exec " IVMT_DEVRUN " --rank -- /bin/sh -c "
                          "'echo DIR ${IVM_DEVRUN#*|}; echo RANK $$; exec sleep 30'", NULL};
    const char *next[] = {IVMT_DEVRUN, "--cpu-devices", "0", "--", "/bin/true", NULL};
    char dir[IVM_CGROUP_PATH_MAX] = "", *out;
    ivmt_result_t r;
    ivmt_proc_t p;
    struct stat st;
    int rank = 0;

    need_cgroups();
    ivmt_start(held, NULL, &p);
    cr_assert(ivmt_wait_output(&p, "RANK ", 10), "the rank never started");
    out = ivmt_proc_output(&p);
    cr_assert_eq(sscanf(strstr(out, "DIR "), "DIR %511s", dir), 1, "%s", out);
    cr_assert_eq(sscanf(strstr(out, "RANK "), "RANK %d", &rank), 1, "%s", out);
    free(out);
    kill(p.pid, SIGKILL);
    ivmt_finish(&p, 5, &r);
    ivmt_result_free(&r);
    cr_assert_eq(stat(dir, &st), 0, "%s is gone before the sweep", dir);
    ivmt_run(next, NULL, 10, &r);
    kill(rank, SIGKILL);
    cr_assert(r.exited && r.code == 0, "%s", r.err);
    cr_assert_neq(stat(dir, &st), 0, "the next ivm-devrun left the stale %s", dir);
    ivmt_result_free(&r);
}
#endif
