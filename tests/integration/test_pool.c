/* Integration: the warm PE pool (IVM_PE_POOL, ivmrun --pe-pool). PEs taken
 * from the pool keep the semantics of cold ones; parked processes are no PEs,
 * die with their job, are replaced when killed and never handed out then; a
 * DS-LB chain of 500 PEs runs with the pool; the node daemon of a remote
 * node keeps its own pool; GPUs of the node have pools too (emulated GPUs, or
 * the real ones with IVM_TEST_GPU_BACKEND=cuda: skipped, saying so, without
 * one). The fixture checks that nothing is left behind. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(pool, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 60);

static const char *const pool2[] = {"IVM_PE_POOL=2", NULL};

Test(pool, warm_pes_keep_ids_groups_waits_and_death_reports)
{
    ivmt_scenario(IVMT_PE_POOL, "semantics", NULL, pool2, 30);
}

Test(pool, parked_processes_killed_are_replaced_never_handed_out)
{
    ivmt_scenario(IVMT_PE_POOL, "kill_parked", NULL, pool2, 30);
}

/* Parked processes that can fork (one thread) fork each PE and stay parked;
   IVM_POOL_FORK=0 makes each parked process a PE itself, as a program with
   threads or a CUDA context has it. Both keep the semantics. */
static const char *const nofork[] = {"IVM_PE_POOL=2", "IVM_POOL_FORK=0", NULL};

/* A request that fits the idle pool gets the parked processes themselves
   (the last idle one forks the request's last PE); a pool of one forks. */
Test(pool, a_request_that_fits_the_idle_pool_takes_parked_processes)
{
    static const char *const env[] = {"IVM_PE_POOL=4", NULL};

    ivmt_scenario(IVMT_PE_POOL, "handout", NULL, env, 40);
}

Test(pool, a_pool_of_one_forks_each_pe)
{
    static const char *const env[] = {"IVM_PE_POOL=1", NULL};

    ivmt_scenario(IVMT_PE_POOL, "handout", NULL, env, 30);
}

Test(pool, warm_pes_without_fork_keep_the_semantics)
{
    ivmt_scenario(IVMT_PE_POOL, "semantics", NULL, nofork, 30);
}

Test(pool, parked_processes_without_fork_killed_are_replaced)
{
    ivmt_scenario(IVMT_PE_POOL, "kill_parked", NULL, nofork, 30);
}

/* A copy of the PE program at `to`, mode 0755. */
static void copy_pe_program(const char *to)
{
    static char buf[1 << 16];
    FILE *in = fopen(IVMT_PE_POOL, "rb"), *out = fopen(to, "wb");
    size_t n;

    cr_assert(in != NULL && out != NULL, "cannot copy %s to %s", IVMT_PE_POOL, to);
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
        cr_assert_eq(fwrite(buf, 1, n, out), n);
    }
    fclose(in);
    cr_assert_eq(fclose(out), 0);
    cr_assert_eq(chmod(to, 0755), 0);
}

/* The program file replaced (as a rebuild does) or deleted while processes
 * are parked: they are never handed out. The PE program runs from a copy the
 * scenario replaces (by renaming a second copy over it) and deletes, in the
 * daemon's test directory (removed with it, also when the test fails). */
Test(pool, parked_processes_of_a_replaced_or_deleted_program_are_not_handed_out)
{
    char copy[sizeof(ivmt_d.dir) + 32], fresh[sizeof(copy) + 8];
    const char *args[2] = {copy, NULL};
    ivmt_result_t r;

    snprintf(copy, sizeof(copy), "%s/ivmt_pe_pool", ivmt_d.dir);
    snprintf(fresh, sizeof(fresh), "%s.new", copy);
    copy_pe_program(copy);
    copy_pe_program(fresh);
    ivmt_run_pe(&ivmt_d, copy, "exe_replaced", args, pool2, 40, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "exe_replaced");
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* Bursts (issue 17): 64 PEs in one ivmCreatePEs (24 in the sanitizer build:
 * pe_pool.c, BURST_N), cold and from a pool of 4
 * (part forked by the parked processes, the rest spawned), each writing its
 * own id into its slot of the root's object. */
Test(pool, burst_of_64_in_one_call_cold)
{
    static const char *const env[] = {"IVM_PE_POOL=0", NULL};

    ivmt_scenario(IVMT_PE_POOL, "burst", NULL, env, 40);
}

Test(pool, burst_of_64_with_a_pool_of_4)
{
    static const char *const env[] = {"IVM_PE_POOL=4", NULL};

    ivmt_scenario(IVMT_PE_POOL, "burst", NULL, env, 40);
}

Test(pool, burst_of_64_without_fork_with_a_pool_of_4)
{
    static const char *const env[] = {"IVM_PE_POOL=4", "IVM_POOL_FORK=0", NULL};

    ivmt_scenario(IVMT_PE_POOL, "burst", NULL, env, 40);
}

/* The parked processes killed while a burst larger than the pool is being
 * forked by them: the waiting PEs are spawned cold, none hangs. */
Test(pool, burst_survives_its_parked_processes_killed)
{
    static const char *const env[] = {"IVM_PE_POOL=2", NULL};

    ivmt_scenario(IVMT_PE_POOL, "burst_kill_parked", NULL, env, 40);
}

/* A burst of a program that cannot be executed fails as a whole: the PEs
 * it took from the pool before the spawn failed are killed, nothing is left
 * (the fixture checks processes and /dev/shm). */
static void burst_noexec(const char *pool)
{
    const char *env[] = {pool, NULL};
    char copy[sizeof(ivmt_d.dir) + 32];
    const char *args[2] = {copy, NULL};
    ivmt_result_t r;

    snprintf(copy, sizeof(copy), "%s/ivmt_pe_pool", ivmt_d.dir);
    copy_pe_program(copy);
    ivmt_run_pe(&ivmt_d, copy, "burst_noexec", args, env, 40, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "burst_noexec");
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

Test(pool, burst_of_a_program_that_cannot_run_leaves_nothing_cold)
{
    burst_noexec("IVM_PE_POOL=0");
}

Test(pool, burst_of_a_program_that_cannot_run_leaves_nothing_with_a_pool)
{
    burst_noexec("IVM_PE_POOL=4");
}

Test(pool, program_that_does_not_park_turns_its_pool_off)
{
    ivmt_scenario(IVMT_PE_POOL, "no_park", NULL, pool2, 30);
}

/* Parked processes start with every symbol bound (their fork children then
 * resolve nothing on first call); the PEs see the job's environment; a job
 * that sets IVM_POOL_BIND_NOW=0 keeps lazy binding; a program that cannot
 * start bound (ends before ivmEnter) gets parked processes without it, and
 * its pool stays on. */
Test(pool, parked_processes_start_with_symbols_bound)
{
    static const char *const args[] = {"on", NULL};

    ivmt_scenario(IVMT_PE_POOL, "bind_now", args, pool2, 40);
}

Test(pool, parked_processes_bind_lazily_when_the_job_says_so)
{
    static const char *const args[] = {"off", NULL};
    static const char *const env[] = {"IVM_PE_POOL=2", "IVM_POOL_BIND_NOW=0", NULL};

    ivmt_scenario(IVMT_PE_POOL, "bind_now", args, env, 40);
}

Test(pool, a_program_that_cannot_start_bound_keeps_its_pool)
{
    static const char *const args[] = {"die", NULL};

    ivmt_scenario(IVMT_PE_POOL, "bind_now", args, pool2, 40);
}

Test(pool, bad_pool_setting_is_refused)
{
    ivmt_scenario(IVMT_PE_POOL, "bad_setting", NULL, NULL, 30);
}

Test(pool, warm_pe_output_is_tagged_with_its_pe_id)
{
    static const char *const env[] = {"IVM_PE_POOL=2", "IVM_TAG_OUTPUT=1", NULL};
    ivmt_result_t r;

    ivmt_run_pe(&ivmt_d, IVMT_PE_POOL, "tagged", NULL, env, 30, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "tagged");
    cr_assert(strstr(r.out, "[node0,1] hello from pe 1\n") != NULL &&
                  strstr(r.out, "[node0,2] hello from pe 2\n") != NULL,
              "warm PEs' lines are not tagged with their ids:\n%s", r.out);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

Test(pool, forged_pool_enter_is_refused)
{
    ivm_msg_enter_req_t req;

    memset(&req, 0, sizeof(req));
    req.flags  = IVM_ENTER_POOL;
    req.pid    = (uint32_t)getpid();
    req.job_id = 1;
    req.pe_id  = -2;
    req.token  = 12345;
    cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), NULL, 0),
                 IVM_ERROR_PERMISSION, "a pool ENTER with a made-up token was accepted");
    /* Asking for a job's signal board as a parked process is checked alike:
     * no board of another job for a made-up slot or token. */
    req.flags = IVM_ENTER_POOL | IVM_ENTER_BOARD;
    cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), NULL, 0),
                 IVM_ERROR_PERMISSION, "a board request with a made-up token was answered");
    req.pe_id = 3;
    cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), NULL, 0),
                 IVM_ERROR_INVALID_VALUE, "a board request naming a PE id was not refused");
    req.flags = IVM_ENTER_POOL;
    cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), NULL, 0),
                 IVM_ERROR_INVALID_VALUE, "a pool ENTER naming a PE id was not refused");
    {
        /* Made-up slots of the right shape: the most negative id, no job, a
         * job that does not exist (with and without tag-output). */
        const int32_t slots[] = {INT32_MIN, -2, -2};
        const uint32_t jobs[] = {1, 0, 999999};
        char detail[IVM_MSG_DETAIL_MAX + 1];
        for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) {
            req.pe_id  = slots[i];
            req.job_id = jobs[i];
            req.token  = 0;
            req.flags  = IVM_ENTER_POOL | (i % 2 ? IVM_ENTER_TAG_OUTPUT : 0);
            cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), detail,
                                        sizeof(detail)),
                         IVM_ERROR_PERMISSION, "a pool ENTER as slot %d of job %u was "
                         "accepted", slots[i], jobs[i]);
            cr_assert(strstr(detail, "no parked process") != NULL, "detail '%s'", detail);
        }
        /* Not a pool slot at all: a PE id, slot 0 and -1. */
        const int32_t bad[] = {5, 0, -1};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
            req.pe_id  = bad[i];
            req.job_id = 1;
            req.flags  = IVM_ENTER_POOL;
            cr_assert_eq(ivmt_unix_call(ivmt_d.sock, IVM_MSG_ENTER, &req, sizeof(req), detail,
                                        sizeof(detail)),
                         IVM_ERROR_INVALID_VALUE, "a pool ENTER as slot %d was not refused",
                         bad[i]);
            cr_assert(strstr(detail, "pool slot") != NULL, "detail '%s'", detail);
        }
    }
    ivmt_daemon_finish(&ivmt_d);
}

/* ivmrun --pe-pool outside 0..64: usage error, exit 2, with the reason. */
Test(pool, ivmrun_refuses_a_bad_pe_pool)
{
    const char *argv[] = {IVMT_IVMRUN, "--pe-pool", "65", "/bin/true", NULL};
    ivmt_result_t r;

    ivmt_run(argv, NULL, 20, &r);
    cr_assert(r.exited && r.code == 2 && strstr(r.err, "--pe-pool") != NULL,
              "ivmrun --pe-pool 65: exit %d, stderr: %s", r.code, r.err);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

#ifdef IVMT_HAVE_GPUD
/* Warm GPU PEs (pe_pool.c "gpu"): on an emulated GPU, or with
 * IVM_TEST_GPU_BACKEND=cuda on the real ones, where the warm PEs must find
 * their GPU's primary context current (made while parked). */
TestSuite(pool_gpu, .fini = ivmt_fixture_stop, .timeout = 60);

Test(pool_gpu, warm_gpu_pes_from_the_gpu_pool)
{
    const char *b = getenv("IVM_TEST_GPU_BACKEND");
    int cuda = b != NULL && strcmp(b, "cuda") == 0;
    static const char *const emu_args[] = {"--emu-gpus", "1:64M", NULL};
    static const char *const cuda_args[] = {"--gpus", "all", NULL};
    const char *env[] = {"IVM_PE_POOL=2", cuda ? "IVM_TEST_GPU_BACKEND=cuda" : NULL, NULL};

    if (cuda) {
        ivmt_cudastub_devices("1:64M");
    }
    if (cuda && access("/dev/nvidiactl", F_OK) != 0) {
        cr_assert(!ivmt_cudastub(), "%s", "the CUDA stand-in run sees no /dev/nvidiactl");
        cr_skip_test("IVM_TEST_GPU_BACKEND=cuda but this machine has no NVIDIA GPU "
                     "(/dev/nvidiactl missing)");
        return;
    }
    ivmt_daemon_start(&ivmt_d, cuda ? cuda_args : emu_args);
    ivmt_scenario(IVMT_PE_POOL, "gpu", NULL, env, 40);
}

/* Two shares of one emulated GPU (--gpu-shares 0:50,0:50): one pool per
 * share device, each handing out its parked process. */
Test(pool_gpu, one_pool_per_gpu_share)
{
    static const char *const args[] = {"--emu-gpus", "1:64M", "--gpu-shares", "0:50,0:50",
                                       NULL};
    const char *env[] = {"IVM_PE_POOL=1", NULL};

    ivmt_daemon_start(&ivmt_d, args);
    ivmt_scenario(IVMT_PE_POOL, "gpu_shares", NULL, env, 40);
}

/* ivm-gpud killed while GPU processes are parked (emu): they are killed, not
 * replaced; the CPU pool goes on; nothing is left. */
Test(pool_gpu, gpud_death_kills_the_parked_gpu_processes)
{
    static const char *const emu_args[] = {"--emu-gpus", "1:64M", NULL};
    pid_t gpud[1];
    ivmt_result_t r;

    ivmt_daemon_start(&ivmt_d, emu_args);
    ivmt_run_pe(&ivmt_d, IVMT_PE_POOL, "gpu_gpud_dead", NULL, pool2, 40, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "gpu_gpud_dead");
    cr_assert_eq(ivmt_parse_pids(r.out, "gpud-pid", gpud, 1), 1, "no gpud-pid line");
    cr_assert(kill(gpud[0], 0) != 0 && errno == ESRCH, "ivm-gpud %d still exists",
              (int)gpud[0]);
    ivmt_result_free(&r);
    /* ivmd closed its end of the control socket: one fd fewer than at start. */
    ivmt_d.fd_baseline -= 1;
    ivmt_daemon_finish(&ivmt_d);
}
#endif

#ifdef IVMT_DSLB
/* The chain's length: 500, and 150 in the sanitizer build, where each PE's
 * start and exit (the leak check) cost tens of milliseconds more: the same
 * paths, a third of the CI time. */
#ifdef __SANITIZE_ADDRESS__
#define DSLB_CHAIN "150"
#else
#define DSLB_CHAIN "500"
#endif

/* DS-LB (examples/dslb) with a chain of 500 PEs, pool on. */
Test(pool, dslb_chain_of_500_with_the_pool, .timeout = 90)
{
    static const char *const args[] = {"1", NULL};
    ivm_msg_info_rep_t info;
    const char *why = "";
    ivmt_result_t r;

    ivmt_run_pe(&ivmt_d, IVMT_DSLB, DSLB_CHAIN, args, pool2, 60, &r);
    char *desc = ivmt_describe(&ivmt_d, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0 && strstr(r.out, "dslb: OK") != NULL,
              "dslb " DSLB_CHAIN " with IVM_PE_POOL=2 failed: %s", desc);
    free(desc);
    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "INFO: %s", why);
    cr_assert_gt(info.pooled, 0, "no PE of the chain came from the pool");
    cr_log_info("dslb " DSLB_CHAIN ": %u of " DSLB_CHAIN " PEs from the pool", info.pooled);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* Bursts of 64 on both nodes of ivmrun --nodes 2, node1's daemon with a
 * pool of 4. */
Test(pool, burst_of_64_on_two_nodes)
{
    const char *argv[] = {"--nodes", "2", "--pe-pool", "4", "--timeout", "50",
                          IVMT_PE_POOL, "burst", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;

    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 60, &r);
    char *desc = ivmt_describe(NULL, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0 && strstr(r.out, "OK burst") != NULL,
              "burst on two nodes failed: %s", desc);
    free(desc);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* node1's daemon keeps a pool for SPAWN (ivmrun --nodes 2 --pe-pool 2). */
Test(pool, remote_node_keeps_its_own_pool)
{
    const char *argv[] = {"--nodes", "2", "--pe-pool", "2", "--timeout", "40",
                          IVMT_PE_POOL, "remote", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;

    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 50, &r);
    char *desc = ivmt_describe(NULL, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0 && strstr(r.out, "OK remote") != NULL,
              "remote pool run failed: %s", desc);
    free(desc);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}
#endif
