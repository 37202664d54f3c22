/* Integration: GPU PEs through the real ivmd and ivm-gpud (docs/design-gpu.md).
 * Each test starts ivmd with emulated GPUs (--emu-gpus; ivm-gpud's emu
 * backend), runs a scenario of pe_gpu.c as the root PE, and then the harness's
 * teardown checks (no job state, process, fd or /dev/shm entry left; ivm-gpud
 * gone once ivmd exits).
 *
 * IVM_TEST_GPU_BACKEND=cuda runs the same scenarios on the node's real GPUs
 * (ivmd --gpus all); without a GPU they are skipped, saying so. Scenarios
 * that need a GPU of a few MiB (admission, eviction, time-out) run on emu
 * only. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sock.h"

TestSuite(gpu, .timeout = 90);

static int gpu_cuda(void)
{
    const char *b = getenv("IVM_TEST_GPU_BACKEND");

    return b != NULL && strcmp(b, "cuda") == 0;
}

/* Skip (saying why) when the cuda backend is asked for without a GPU. */
static int gpu_skip(int emu_only)
{
    if (!gpu_cuda()) {
        return 0;
    }
    if (emu_only) {
        cr_skip_test("IVM_TEST_GPU_BACKEND=cuda: this test needs an emulated GPU of a few "
                     "MiB (emu backend only)");
        return 1;
    }
    if (access("/dev/nvidiactl", F_OK) != 0) {
        cr_assert(!ivmt_cudastub(), "%s", "the CUDA stand-in run sees no /dev/nvidiactl");
        cr_skip_test("IVM_TEST_GPU_BACKEND=cuda but this machine has no NVIDIA GPU "
                     "(/dev/nvidiactl missing)");
        return 1;
    }
    return 0;
}

/* Start ivmt_d with GPUs: `emu` (N[:MEM]) emulated ones, or the real ones. */
static void gpu_daemon(const char *emu, const char *const *more)
{
    const char *args[16];
    int n = 0;

    if (gpu_cuda()) {
        ivmt_cudastub_devices(emu);
        args[n++] = "--gpus";
        args[n++] = "all";
    } else {
        args[n++] = "--emu-gpus";
        args[n++] = emu;
    }
    while (more != NULL && *more != NULL && n < 15) {
        args[n++] = *more++;
    }
    args[n] = NULL;
    ivmt_daemon_start(&ivmt_d, args);
}

static void gpu_env_scenario(const char *scenario, const char *const *args)
{
    const char *env[] = {gpu_cuda() ? "IVM_TEST_GPU_BACKEND=cuda" : "IVM_TEST_GPU_BACKEND",
                         NULL};

    ivmt_scenario(IVMT_PE_GPU, scenario, args, env, 60);
}

static void gpu_fini(void)
{
    ivmt_fixture_stop();
}

Test(gpu, dedup_k_pes_one_allocation, .fini = gpu_fini)
{
    const char *args[] = {"4", NULL};

    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    gpu_env_scenario("dedup", args);
}

/* The root's environment holds stale values of what ivmd sets for a GPU PE
 * (a root started from inside another job's GPU PE): the GPU PEs see the
 * daemon's, not the root's. */
Test(gpu, gpu_pe_environment_overrides_the_roots, .fini = gpu_fini)
{
    const char *args[] = {"2", NULL};
    const char *env[] = {gpu_cuda() ? "IVM_TEST_GPU_BACKEND=cuda" : "IVM_TEST_GPU_BACKEND",
                         "IVM_GPU_BACKEND=stale", "IVM_GPU=5", NULL};

    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    ivmt_scenario(IVMT_PE_GPU, "dedup", args, env, 60);
}

Test(gpu, sync_chain_one_node, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    gpu_env_scenario("chain", NULL);
}

/* The sync calls wait for the GPU PE's device work queued before them
 * (cuCtxSynchronize): on cuda an async copy just before a Put or a Get. */
Test(gpu, syncs_wait_for_the_pes_device_work, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    gpu_env_scenario("async", NULL);
}

Test(gpu, group_two_gpu_pes_and_a_cpu_pe, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    gpu_env_scenario("group", NULL);
}

Test(gpu, admission_waits_for_an_unmap, .fini = gpu_fini)
{
    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("1:4M", NULL);
    gpu_env_scenario("admit", NULL);
}

Test(gpu, pe_killed_while_its_map_waits, .fini = gpu_fini)
{
    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("1:4M", NULL);
    gpu_env_scenario("admit_dead", NULL);
}

Test(gpu, one_allocation_per_gpu, .fini = gpu_fini)
{
    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("2:64M", NULL);
    gpu_env_scenario("dedup2", NULL);
}

Test(gpu, eviction_least_recently_released_first, .fini = gpu_fini)
{
    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("1:4M", NULL);
    gpu_env_scenario("evict", NULL);
}

Test(gpu, admission_timeout, .fini = gpu_fini)
{
    const char *more[] = {"--gpu-admit-timeout", "1", NULL};

    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("1:4M", more);
    gpu_env_scenario("timeout", NULL);
}

Test(gpu, killed_gpu_pe_releases_its_references, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    gpu_env_scenario("crash", NULL);
}

Test(gpu, bogus_gpu_refs_get_clear_errors, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    {
        /* Its children speak the protocol themselves on a connection of their
         * own, as cold-spawned PEs: a parked process has entered already. */
        const char *env[] = {gpu_cuda() ? "IVM_TEST_GPU_BACKEND=cuda" : "IVM_TEST_GPU_BACKEND",
                             "IVM_PE_POOL=0", NULL};
        ivmt_scenario(IVMT_PE_GPU, "bogus", NULL, env, 60);
    }
}

Test(gpu, gpud_killed_gpu_calls_fail_cpu_pes_fine, .fini = gpu_fini)
{
    ivmt_result_t r;
    pid_t gpud[1];
    int n;

    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", NULL);
    ivmt_run_pe(&ivmt_d, IVMT_PE_GPU, "gpud_dead", NULL, NULL, 60, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "gpud_dead");
    n = ivmt_parse_pids(r.out, "gpud-pid", gpud, 1);
    cr_assert_eq(n, 1, "no gpud-pid line");
    cr_assert(kill(gpud[0], 0) != 0 && errno == ESRCH, "ivm-gpud %d still exists (ivmd "
              "must reap it)", (int)gpud[0]);
    ivmt_result_free(&r);
    /* ivmd closed its end of the control socket: one fd fewer than at start. */
    ivmt_d.fd_baseline -= 1;
    ivmt_daemon_finish(&ivmt_d);
}

Test(gpu, create_dev_on_a_missing_gpu, .fini = gpu_fini)
{
    const char *two[] = {"2", NULL};
    const char *none[] = {"0", NULL};

    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("2:16M", NULL);
    gpu_env_scenario("nodev", two);
    /* A daemon without GPUs starts no ivm-gpud and has no GPU device. */
    ivmt_daemon_start(&ivmt_d, NULL);
    gpu_env_scenario("nodev", none);
}

/* Singleton mode: IVM_EMU_GPUS reaches the private daemon, GPU PEs work,
 * and nothing (ivmd, ivm-gpud, socket) is left afterwards. */
Test(gpu, singleton_mode_with_emulated_gpus)
{
    char dir[IVMT_PATH_MAX], dir_env[IVMT_PATH_MAX + 32];
    const char *env[] = {dir_env, "XDG_RUNTIME_DIR", "IVM_EMU_GPUS=1:64M", NULL};
    const char *entries[] = {dir_env, NULL};
    const char *argv[] = {IVMT_PE_GPU, "chain", NULL};
    ivmt_result_t r;
    pid_t pids[16];
    int n = 0;

    if (gpu_skip(1)) {
        return;
    }
    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(dir_env, sizeof(dir_env), "IVM_SOCKET_DIR=%s", dir);
    ivmt_run(argv, env, 30, &r);
    for (double deadline = ivmt_now() + 5.0;; ivmt_sleep_ms(20)) {
        n = ivmt_find_procs(0, 0, entries, dir, pids, 16);
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
    }
    {
        char *procs = ivmt_describe_procs(pids, n);
        for (int i = 0; i < n; ++i) {
            kill(pids[i], SIGKILL);
        }
        ivmt_remove_dir(dir);
        ivmt_expect_pe_ok(NULL, &r, "chain");
        cr_assert_eq(n, 0, "singleton mode left %d process(es): %s", n, procs);
        free(procs);
    }
    ivmt_result_free(&r);
}

/* Emulated GPUs asked for but impossible: ivmd says why and exits 1. */
Test(gpu, bad_emu_gpus_stop_ivmd_with_a_reason)
{
    char dir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16];
    const char *nogpud[] = {IVMT_IVMD, "--socket", sock, "--emu-gpus", "1:1M", "--gpud",
                            "/nonexistent/ivm-gpud", NULL};
    const char *badspec[] = {IVMT_IVMD, "--socket", sock, "--emu-gpus", "abc", NULL};
    ivmt_result_t r;

    if (gpu_skip(1)) {
        return;
    }
    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(sock, sizeof(sock), "%s/s.sock", dir);
    ivmt_run(nogpud, NULL, 20, &r);
    cr_assert(r.exited && r.code == 1 &&
                  strstr(r.err, "cannot start /nonexistent/ivm-gpud for --emu-gpus"),
              "ivmd --gpud /nonexistent: exit %d: %s", r.code, r.err);
    ivmt_result_free(&r);
    ivmt_run(badspec, NULL, 20, &r);
    cr_assert(r.exited && r.code == 1 && strstr(r.err, "--emu-gpus 'abc'") &&
                  strstr(r.err, "emulated GPUs asked for are missing"),
              "ivmd --emu-gpus abc: exit %d: %s", r.code, r.err);
    ivmt_result_free(&r);
    ivmt_remove_dir(dir);
}

/* ivm-info shows the node's GPUs and one GPU's figures. */
Test(gpu, ivm_info_reports_gpus, .fini = gpu_fini)
{
    const char *all[] = {IVMT_IVM_INFO, NULL, NULL};
    const char *one[] = {IVMT_IVM_INFO, "--gpu", "1", NULL, NULL};
    const char *bad[] = {IVMT_IVM_INFO, "--gpu", "2", NULL, NULL};
    ivmt_result_t r;

    if (gpu_skip(1)) {
        return;
    }
    gpu_daemon("2:16M", NULL);
    all[1] = ivmt_d.sock;
    one[3] = ivmt_d.sock;
    bad[3] = ivmt_d.sock;
    ivmt_run(all, NULL, 10, &r);
    cr_assert(r.exited && r.code == 0 && strstr(r.out, "gpus=2\n") &&
                  strstr(r.out, "gpu_backend=emu\n") && strstr(r.out, "gpud_alive=1\n"),
              "ivm-info: %s%s", r.out, r.err);
    ivmt_result_free(&r);
    ivmt_run(one, NULL, 10, &r);
    cr_assert(r.exited && r.code == 0 && strstr(r.out, "gpu=1\n") &&
                  strstr(r.out, "capacity_bytes=16777216\n") &&
                  strstr(r.out, "allocations=0\n") && strstr(r.out, "copies=0\n"),
              "ivm-info --gpu 1: %s%s", r.out, r.err);
    ivmt_result_free(&r);
    ivmt_run(bad, NULL, 10, &r);
    cr_assert(r.exited && r.code == 1 && strstr(r.err, "no such object, PE, host or device"),
              "ivm-info --gpu 2 of two GPUs: exit %d: %s%s", r.code, r.out, r.err);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* ivmrun --nodes 2 with GPUs on both nodes, running a pe_gpu scenario. */
static void gpu_two_nodes(const char *scenario, const char *arg)
{
    const char *argv[] = {"--nodes", "2", "--timeout", "60",
                          gpu_cuda() ? "--gpus" : "--emu-gpus",
                          gpu_cuda() ? "all" : "1:64M",
                          IVMT_PE_GPU, scenario, arg, gpu_cuda() ? "cuda" : "emu", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;
    char *why;

    ivmt_cudastub_devices("1:64M");
    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 75, &r);
    why = ivmt_describe(NULL, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0 && strstr(r.out, "OK ") &&
                  !strstr(r.out, "FAIL"),
              "ivmrun --nodes 2 %s %s: %s", scenario, arg, why);
    free(why);
    ivmt_result_free(&r);
}

/* The chain with the GPU PE on node1 of two simulated nodes. */
Test(gpu, sync_chain_two_nodes, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_two_nodes("chain", "node1");
}

/* Posted puts over node1's endpoint into a master with a device copy on its
 * node: sent back, redone through the PE's daemon by ivmQuiet. */
Test(gpu, posted_puts_sent_back_by_the_endpoint_are_redone, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_two_nodes("nbi_refused", "-");
}

/* PutGroup and GetGroup reaching device copies on both nodes. */
Test(gpu, group_across_two_nodes, .fini = gpu_fini)
{
    if (gpu_skip(0)) {
        return;
    }
    gpu_two_nodes("group2", "-");
}

/* ---------------------------------------------------------- GPU shares */

/* Two share devices of one GPU (--gpu-shares 0:50,0:50): devices 0 and 1
 * exist, 2 does not; PEs on both see their IVM_GPU and IVM_GPU_SHARE; both
 * map one object: one allocation on the physical GPU; syncs correct. */
Test(gpu, two_shares_of_one_gpu, .fini = gpu_fini)
{
    const char *more[] = {"--gpu-shares", "0:50,0:50", NULL};
    const char *args[] = {"-", "50,50", NULL};

    if (gpu_skip(0)) {
        return;
    }
    gpu_daemon("1:64M", more);
    gpu_env_scenario("shares", args);
}

/* A share spec naming a GPU beyond the node's, shares over 100 %, bad
 * syntax, shares without a GPU: ivmd refuses to start and says why. */
Test(gpu, bad_gpu_shares_stop_ivmd_with_a_reason)
{
    char dir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16];
    static const struct {
        const char *emu, *shares, *why;
        int code;
    } bad[] = {
        {"1:16M", "0:60,0:50", "the shares of GPU 0 add up to 110% (at most 100%)", 2},
        {"1:16M", "0:abc", "'0:abc' has no percentage of 1..100", 2},
        {"1:16M", "0,1", "there is no GPU 1 (this node has 1)", 1},
        {NULL, "0", "--gpu-shares '0' but this node has no GPU (no --emu-gpus; --gpus none)", 1},
    };
    ivmt_result_t r;

    if (gpu_skip(1)) {
        return;
    }
    ivmt_make_tmpdir(dir, sizeof(dir));
    snprintf(sock, sizeof(sock), "%s/s.sock", dir);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *argv[] = {IVMT_IVMD, "--socket", sock, "--gpu-shares", bad[i].shares,
                              bad[i].emu ? "--emu-gpus" : "--gpus",
                              bad[i].emu ? bad[i].emu : "none", NULL};
        ivmt_run(argv, NULL, 20, &r);
        cr_assert(r.exited && r.code == bad[i].code && strstr(r.err, bad[i].why),
                  "ivmd --gpu-shares %s: exit %d (expected %d): %s", bad[i].shares, r.code,
                  bad[i].code, r.err);
        cr_assert(access(sock, F_OK) != 0, "ivmd --gpu-shares %s left its socket",
                  bad[i].shares);
        ivmt_result_free(&r);
    }
    ivmt_remove_dir(dir);
}

/* ivmrun --nodes 2 --gpu-shares: every node's daemon gets the shares (the
 * root on node0 checks both nodes' tables; the share PEs run on node1). */
Test(gpu, gpu_shares_reach_every_node, .fini = gpu_fini)
{
    const char *argv[] = {"--nodes", "2", "--timeout", "60",
                          gpu_cuda() ? "--gpus" : "--emu-gpus",
                          gpu_cuda() ? "all" : "1:64M", "--gpu-shares", "0:30,0:70",
                          IVMT_PE_GPU, "shares", "node1", "30,70",
                          gpu_cuda() ? "cuda" : "emu", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;
    char *why;

    if (gpu_skip(0)) {
        return;
    }
    ivmt_cudastub_devices("1:64M");
    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 75, &r);
    why = ivmt_describe(NULL, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0 && strstr(r.out, "OK ") &&
                  strstr(r.out, "share 1: IVM_GPU_SHARE=70") && !strstr(r.out, "FAIL"),
              "ivmrun --nodes 2 --gpu-shares 0:30,0:70: %s", why);
    free(why);
    ivmt_result_free(&r);
}
