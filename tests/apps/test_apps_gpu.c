/* Apps on GPU PEs (emulated GPUs: host memory, the CPU kernel):
 *   - NBODY, DMM, NW (DS-LB) and HIMENO (OM-LB) on two simulated nodes with
 *     one emulated GPU each (ivmrun --nodes 2 --emu-gpus 1:256M) verify
 *     against the serial reference, list node0.gpu0 and node1.gpu0 in their
 *     share with work done there, and print the checksum of the CPU-only run
 *     (the same run without GPUs);
 *   - DMM's strips reach a GPU copy made before node1 held them (mirror
 *     fills refresh cached device copies);
 *   - the GPU copies are deduplicated: on one node with one emulated GPU,
 *     NBODY's GPU PEs (two at a time, portion after portion) map its objects
 *     many times but the GPU makes one allocation per object (ivm-info
 *     --gpu 0), and the job's end frees them.
 * Every run is collected with the harness's no-leftover checks. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps_result.h"
#include "harness.h"

TestSuite(apps_gpu, .timeout = 150);

#define GPU_EMU "1:256M"

/* ivmrun --nodes 2 --timeout 60 [--emu-gpus 1:256M] [--node-cpu-devices D]
   PROG ARGS...; asserts exit 0. */
static void run_two_nodes(int gpus, const char *prog, const char *const *args,
                          ivmt_result_t *r)
{
    const char *argv[40] = {"--nodes", "2", "--timeout", "60"};
    int argc = 4;
    ivmt_launch_t c;
    char *why;

    if (gpus) {
        argv[argc++] = "--emu-gpus";
        argv[argc++] = GPU_EMU;
    }
    /* One core per node: devices sharing cores oversubscribe them. */
    argv[argc++] = "--node-cpu-devices";
    argv[argc++] = sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? "0;1" : "0;0";
    argv[argc++] = prog;
    while (*args != NULL && argc < 39)
        argv[argc++] = *args++;
    argv[argc] = NULL;
    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 90, r);
    why = ivmt_describe(NULL, r);
    cr_assert(!r->timed_out && r->exited && r->code == 0, "%s run failed: %s",
              gpus ? "GPU" : "CPU-only", why);
    free(why);
}

/* The value of key=... on the one RESULT line (malloc'd); asserts it is there. */
static char *result_field(const char *out, const char *key)
{
    const char *line = strstr(out, "RESULT app=");
    char *v;

    cr_assert_not_null(line, "no RESULT line:\n%s", out);
    cr_assert_null(strstr(line + 1, "RESULT app="), "more than one RESULT line:\n%s", out);
    v = apps_result_field(out, key);
    cr_assert_not_null(v, "no %s= on the RESULT line:\n%s", key, out);
    return v;
}


/* The app verifies on 2 nodes with a GPU each, does work on both GPUs and
   both CPUs, and prints the CPU-only run's checksum. */
static void check_gpu_run(const char *prog, const char *app, const char *const *args)
{
    const char *argv[32];
    int argc = 0;
    ivmt_result_t g, c;

    while (args[argc] != NULL && argc < 30) {
        argv[argc] = args[argc];
        argc++;
    }
    argv[argc++] = "--verify";
    argv[argc] = NULL;

    run_two_nodes(1, prog, argv, &g);
    char *name = result_field(g.out, "app"), *version = result_field(g.out, "version");
    char *verified = result_field(g.out, "verified"), *share = result_field(g.out, "share");
    char *sum_gpu = result_field(g.out, "checksum");
    cr_assert_str_eq(name, app, "%s", g.out);
    cr_assert_str_eq(version, "ivm", "%s", g.out);
    cr_assert_str_eq(verified, "yes", "not verified on GPU PEs:\n%s\n%s", g.out, g.err);
    const char *devs[] = {"node0.cpu0", "node0.gpu0", "node1.cpu0", "node1.gpu0"};
    double total = 0.0;
    for (int d = 0; d < 4; d++) {
        double s = apps_share_of(share, devs[d]);
        cr_assert_gt(s, 0.0, "no work on %s (share %s):\n%s", devs[d], share, g.out);
        total += s;
    }
    cr_assert(total > 0.998 && total < 1.002, "shares sum to %f: %s", total, share);

    run_two_nodes(0, prog, argv, &c);
    char *sum_cpu = result_field(c.out, "checksum"), *share_cpu = result_field(c.out, "share");
    cr_assert_lt(apps_share_of(share_cpu, "node0.gpu0"), 0.0, "GPU listed without GPUs: %s",
                 share_cpu);
    cr_assert_str_eq(sum_gpu, sum_cpu, "checksum with GPU PEs %s, CPU-only %s:\n%s\n%s",
                     sum_gpu, sum_cpu, g.out, c.out);
    free(name);
    free(version);
    free(verified);
    free(share);
    free(sum_gpu);
    free(sum_cpu);
    free(share_cpu);
    ivmt_result_free(&g);
    ivmt_result_free(&c);
}

/* DS-LB hands portions to whichever device asks first: with tiny portions a
   fast chain on one device can take every PE id of an iteration before the
   root's spawns on the other devices get one. --threshold 1 stops every
   chain after its portion, so the root's first round gives each of the four
   devices one portion of every iteration, and its restarts the rest. */
Test(apps_gpu, nbody_on_emulated_gpus_matches_cpu_only)
{
    const char *args[] = {"--size", "384", "--portions", "8", "--iters", "3", "--threshold",
                          "1", NULL};
    check_gpu_run(IVMT_NBODY, "nbody", args);
}

Test(apps_gpu, dmm_on_emulated_gpus_matches_cpu_only)
{
    const char *args[] = {"--size", "80", "--portions", "9", "--iters", "2", "--threshold",
                          "1", NULL};
    check_gpu_run(IVMT_DMM, "dmm", args);
}

Test(apps_gpu, nw_on_emulated_gpus_matches_cpu_only)
{
    const char *args[] = {"--size", "40", "--portions", "8", "--threshold", "1", NULL};
    check_gpu_run(IVMT_NW, "nw", args);
}

Test(apps_gpu, himeno_on_emulated_gpus_matches_cpu_only)
{
    const char *args[] = {"--size", "17", "--iters", "12", NULL};
    check_gpu_run(IVMT_HIMENO, "himeno", args);
}

/* A GPU of a mirror node reuses one device copy of A and of Bt for every
   strip (each object is below one 64 KiB granule): the copy was made when
   node1 held only the first strip, and each later strip arrives by a
   mirror fill, which must reach the cached copy too (ivm-gpud FILLED), or
   the tiles come out zero. Devices 0-2 slowed 50x (IVM_DSLB_SLOW) and
   --threshold 1 send every root restart to node1.gpu0, so it computes most
   of the 9 equal portions (--layout equal: the weighted cut would give the
   four devices' first portions most of the tiles, by their declared
   speeds, before any measure) from strips it maps one after the other. */
Test(apps_gpu, dmm_strips_filled_after_a_gpu_copy_reach_it)
{
    const char *args[] = {"/usr/bin/env", "IVM_DSLB_SLOW=0:50,1:50,2:50", IVMT_DMM, "--size",
                          "80", "--portions", "9", "--layout", "equal", "--iters", "2",
                          "--threshold", "1", "--verify", NULL};
    ivmt_result_t r;

    run_two_nodes(1, args[0], args + 1, &r);
    char *verified = result_field(r.out, "verified"), *share = result_field(r.out, "share");
    cr_assert_str_eq(verified, "yes", "DMM on node1's GPU:\n%s\n%s", r.out, r.err);
    cr_assert_gt(apps_share_of(share, "node1.gpu0"), 0.5, "node1.gpu0 did not do most tiles: %s",
                 share);
    free(verified);
    free(share);
    ivmt_result_free(&r);
}

/* `key=<n>` of ivm-info's output; asserts it is there. */
static unsigned long long info_value(const char *out, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "%s=", key);
    for (p = strstr(out, pat); p != NULL && p != out && p[-1] != '\n'; p = strstr(p + 1, pat))
        ;
    cr_assert_not_null(p, "no %s in ivm-info's output:\n%s", key, out);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* NBODY's GPU PEs map "nbody.pos", "nbody.vel" (a subset per portion) and
   the driver's "dslb.ctl", "dslb.rec" (a subset), "dslb.dev": five mappings
   per portion. Each object is far below the emulated GPU's 64 KiB
   granularity, so one device copy holds it whole and every later map, of
   the two PEs at once on the GPU and of the PEs after them, reuses it:
   five allocations in all, however many portions the GPU ran. --threshold 1
   (see above): the root starts two PEs on the GPU in every step. */
Test(apps_gpu, gpu_copies_are_deduplicated, .fini = ivmt_fixture_stop)
{
    const char *dargs[] = {"--emu-gpus", GPU_EMU, NULL};
    const char *argv[] = {IVMT_NBODY, "--size", "384", "--portions", "8", "--iters", "3",
                          "--max-per-dev", "2", "--threshold", "1", "--local", "--verify",
                          NULL};
    const char *info[] = {IVMT_IVM_INFO, "--gpu", "0", NULL, NULL};
    char sock_env[IVMT_PATH_MAX + 48];
    const char *env[] = {sock_env, "IVM_AUTOSTART=0", NULL};
    ivmt_result_t r, i;

    ivmt_daemon_start(&ivmt_d, dargs);
    snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s", ivmt_d.sock);
    info[3] = ivmt_d.sock;
    ivmt_run(argv, env, 60, &r);
    char *why = ivmt_describe(&ivmt_d, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0, "%s", why);
    char *share = result_field(r.out, "share"), *verified = result_field(r.out, "verified");
    cr_assert_str_eq(verified, "yes", "%s", why);
    /* 8 equal portions of 48 particles x 3 steps: the GPU's portions. */
    double s = apps_share_of(share, "gpu0");
    int gpu_portions = (int)(s * 24.0 + 0.5);
    cr_assert_geq(gpu_portions, 6, "the GPU ran %d portions (2 PEs started there every "
                  "step): %s", gpu_portions, why);

    /* The job's end (which frees its copies) may trail the root's exit. */
    for (int k = 0;; k++) {
        ivmt_run(info, NULL, 10, &i);
        cr_assert(i.exited && i.code == 0, "ivm-info --gpu 0: %s%s", i.out, i.err);
        if (info_value(i.out, "copies") == 0 || k == 50)
            break;
        ivmt_result_free(&i);
        usleep(100000);
    }
    unsigned long long allocs = info_value(i.out, "allocations");
    cr_assert_eq(allocs, 5, "%d GPU portions (%d maps) made %llu allocations, expected one "
                 "per object (5):\n%s", gpu_portions, 5 * gpu_portions, allocs, i.out);
    cr_assert_eq(info_value(i.out, "evictions"), 0, "%s", i.out);
    /* The job's end freed every copy. */
    cr_assert_eq(info_value(i.out, "copies"), 0, "%s", i.out);
    cr_assert_eq(info_value(i.out, "used_bytes"), 0, "%s", i.out);
    free(share);
    free(verified);
    free(why);
    ivmt_result_free(&i);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}
