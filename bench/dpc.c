/*
 * bench-dpc: dynamic process creation (DPC) latency.
 *
 * IVM: the time from ivmCreatePEs of one PE on CPU device 0 until ivmWait
 * returns on that PE's first ivmSignal (the child: ivmEnter, ivmSignal,
 * ivmExit). Before the next run the root waits for the PE to exit, so runs
 * never overlap.
 *   local-cpu: the PE on the root's own node;
 *   node1-cpu: the PE on node "node1" (only when the job has that node, i.e.
 *   under ivmrun --nodes 2 or more): the request goes to the root's daemon,
 *   which has node1's daemon spawn the PE; the PE registers with node1's
 *   daemon and its signal travels back to the root's daemon.
 *   Target for node1-cpu: median <= 10 ms.
 * Baseline, in the same process: posix_spawn of this same binary, told by an
 * environment variable to exit at once, and waitpid.
 * Runs alternate between the variants; each reports median and p90. These
 * "cold" rows run in a job without a warm PE pool (IVM_PE_POOL=0).
 *
 * Warm rows (-p POOL > 0, default 2): then the root starts this binary again
 * as the root of a second job on the same daemon(s), with IVM_PE_POOL=POOL,
 * which measures the same two variants with PEs taken from the pool (the
 * root daemon's pool for local-cpu, node1's daemon's pool for node1-cpu).
 * Before each warm run it leaves the daemons idle for WARM_REFILL_MS, so the
 * pools refill (they fill only while the daemon is idle, see ivmd/pool.c),
 * checks with INFO that they did, then waits WARM_SETTLE_MS more, so that the
 * daemon's handling of that INFO connection is not inside the timed part.
 * Their ratio column is cold median / warm median of the same run.
 * Target for warm local-cpu: median <= 0.1 ms.
 *
 * GPU rows (only when the root's node has a GPU: ivmrun --emu-gpus, or real
 * ones with --gpus): local-gpu, a PE on GPU 0 of the root's node, which maps
 * a small object (its device copy, made once by ivm-gpud and cached) before
 * its ivmSignal, as a GPU PE's first step would: on the cuda backend that map
 * is where a cold PE creates its CUDA primary context, while a warm one made
 * it while parked. On the emu backend there is no context to make: the rows
 * then show the process-start saving only. The backend is printed with the
 * rows. Before a warm run the root also waits until its daemon's parked
 * count is back to full (a parked cuda process takes its context creation
 * time to park). Target for warm local-gpu: median <= 1 ms.
 *
 * Run:  ivmrun [--nodes 2] [--emu-gpus 1] bench-dpc [-n RUNS (200)] [-w WARMUP (5)]
 *       [-p POOL (2)]
 * Bursts (one ivmCreatePEs of N PEs): bench-dpc --burst N[,N...], dpc_burst.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ivm.h>

#include "bench_util.h"
#include "dpc_burst.h"
#include "proto.h"
#include "client.h"
#include "sock.h"

#define SPAWN_ENV "IVM_BENCH_DPC_SPAWNED"
#define EXIT_TIMEOUT_S 10.0
#define REMOTE_NODE "node1"
#define REMOTE_TARGET_MS 10.0
#define WARM_TARGET_MS 0.1
#define WARM_REFILL_MS 20
#define WARM_SETTLE_MS 1
#define WARM_GPU_TARGET_MS 1.0
#define GPU_OBJ "bench-dpc-gpu"
#define GPU_OBJ_SIZE 4096
#define REFILL_TIMEOUT_S 20.0

extern char **environ;

static char **spawn_env;     /* environ + SPAWN_ENV=1 */
static char self_path[4096];
static uint32_t parked_full; /* warm job: the root daemon's parked count when full */
static void *gpu_obj;        /* root: the object GPU PEs map (GPU rows only) */

/* One posix_spawn + waitpid of this binary; its duration in ms, < 0 on error. */
static double spawn_once(void)
{
    char *argv[] = { self_path, NULL };
    pid_t pid;
    int status, err;
    double t0 = bench_now_ms();

    err = posix_spawn(&pid, self_path, NULL, NULL, argv, spawn_env);
    if (err != 0) {
        fprintf(stderr, "bench-dpc: posix_spawn %s: %s\n", self_path, strerror(err));
        return -1.0;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("bench-dpc: waitpid");
            return -1.0;
        }
    }
    double t1 = bench_now_ms();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-dpc: spawned child failed (status 0x%x)\n", status);
        return -1.0;
    }
    return t1 - t0;
}

/* Warm job start: wait until the root daemon's pools are full (the count
 * stops growing for 200 ms) and remember that count. */
static void parked_settle(void)
{
    double t0 = bench_now_ms(), since = t0;

    parked_full = dpc_parked();
    while (bench_now_ms() - since < 200.0 && bench_now_ms() - t0 < REFILL_TIMEOUT_S * 1e3) {
        uint32_t n = dpc_parked();
        if (n > parked_full) {
            parked_full = n;
            since = bench_now_ms();
        }
        bench_sleep_ns(5000000L);
    }
}

/* Before a warm run: the root daemon's pools are full again. */
static void parked_refilled(void)
{
    double t0 = bench_now_ms();

    while (dpc_parked() < parked_full) {
        if (bench_now_ms() - t0 > REFILL_TIMEOUT_S * 1e3) {
            fprintf(stderr, "bench-dpc: the pool did not refill in %.0f s\n",
                    REFILL_TIMEOUT_S);
            exit(1);
        }
        bench_sleep_ns(200000L);
    }
}

/* One IVM DPC run: ms from ivmCreatePEs until the first signal is seen.
 * warm: first leave the daemons idle so that their pools refill. */
static double dpc_once(ivm_device dev, int warm)
{
    ivm_pe pe;
    double t0;

    if (warm) {
        bench_sleep_ns(WARM_REFILL_MS * 1000000L);
        parked_refilled();
        /* The daemon has closed that INFO connection before t0. */
        bench_sleep_ns(WARM_SETTLE_MS * 1000000L);
    }
    t0 = bench_now_ms();

    BENCH_CHECK(ivmCreatePEs(dev, 1, &pe));
    BENCH_CHECK(ivmWait(pe));
    double t1 = bench_now_ms();
    if (pe == IVM_PE_NULL) {
        fprintf(stderr, "bench-dpc: ivmCreatePEs created no PE\n");
        exit(1);
    }
    BENCH_CHECK(ivmWait(pe));           /* returns when the PE has exited */
    dpc_wait_alone(EXIT_TIMEOUT_S);
    return t1 - t0;
}

/* GPU 0 of the root's node, or NULL without one; with it the object the GPU
 * PEs map, and the backend's name from GPU_INFO into backend. */
static ivm_device open_gpu(char *backend, size_t backend_len)
{
    ivm_msg_gpu_info_req_t req = { .gpu = 0 };
    ivm_msg_gpu_info_rep_t g;
    ivm_device gdev = NULL;
    ivmError_t rc = ivmCreateDev(IVM_THIS_HOST, IVM_GPU_0, &gdev);

    if (rc == IVM_ERROR_NOT_FOUND)
        return NULL;
    BENCH_CHECK(rc);
    BENCH_CHECK(ivmMalloc(GPU_OBJ, &gpu_obj, GPU_OBJ_SIZE));
    memset(gpu_obj, 1, GPU_OBJ_SIZE);
    memset(&g, 0, sizeof(g));
    snprintf(backend, backend_len, "?");
    if (getenv("IVM_SOCKET") != NULL &&
        ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_GPU_INFO, &req, sizeof(req), &g,
                         sizeof(g), NULL) == IVM_SUCCESS)
        snprintf(backend, backend_len, "%.*s", (int)sizeof(g.backend), g.backend);
    return gdev;
}

static void close_gpu(ivm_device gdev)
{
    if (gdev == NULL)
        return;
    BENCH_CHECK(ivmDestroyDev(gdev));
    BENCH_CHECK(ivmFree(gpu_obj));
    gpu_obj = NULL;
}

/* A PE of the benchmark: a GPU PE maps the object first (context made here
 * when cold on cuda), then all signal. */
static int run_child(void)
{
    int devtype = 0;
    void *obj = NULL;

    BENCH_CHECK(ivmGetMyDevType(&devtype));
    if (IVM_DEV_IS_GPU(devtype))
        BENCH_CHECK(ivmMap(GPU_OBJ, &obj, 0));
    if (ivmSignal() != IVM_SUCCESS)
        return 1;
    if (obj != NULL)
        BENCH_CHECK(ivmUnmap(obj));
    return 0;
}

static int make_spawn_env(void)
{
    size_t n = 0;

    while (environ[n] != NULL)
        n++;
    spawn_env = calloc(n + 2, sizeof(*spawn_env));
    if (spawn_env == NULL)
        return -1;
    memcpy(spawn_env, environ, n * sizeof(*spawn_env));
    spawn_env[n] = SPAWN_ENV "=1";
    return 0;
}

/* The warm rows: this binary as the root of a second job with a pool. */
static int run_warm_job(int runs, int warmup, int pool, double cold_local,
                        double cold_remote, double cold_gpu)
{
    char a_runs[16], a_warm[16], a_pool[16], a_cl[32], a_cr[32], a_cg[32], env_pool[32];
    char *argv[] = { self_path, "-W", "-n", a_runs, "-w", a_warm, "-p", a_pool,
                     "-c", a_cl, "-r", a_cr, "-g", a_cg, NULL };
    char **env;
    size_t n = 0, k = 0;
    pid_t pid;
    int status, err;

    snprintf(a_runs, sizeof(a_runs), "%d", runs);
    snprintf(a_warm, sizeof(a_warm), "%d", warmup);
    snprintf(a_pool, sizeof(a_pool), "%d", pool);
    snprintf(a_cl, sizeof(a_cl), "%.6f", cold_local);
    snprintf(a_cr, sizeof(a_cr), "%.6f", cold_remote);
    snprintf(a_cg, sizeof(a_cg), "%.6f", cold_gpu);
    snprintf(env_pool, sizeof(env_pool), "IVM_PE_POOL=%d", pool);
    while (environ[n] != NULL)
        n++;
    env = calloc(n + 2, sizeof(*env));
    if (env == NULL)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "IVM_PE_POOL=", 12) != 0 &&
            strncmp(environ[i], "IVM_PE_ID=", 10) != 0 &&
            strncmp(environ[i], "IVM_JOB_ID=", 11) != 0 &&
            strncmp(environ[i], "IVM_PE_TOKEN=", 13) != 0)
            env[k++] = environ[i];
    env[k++] = env_pool;
    fflush(stdout);
    err = posix_spawn(&pid, self_path, NULL, NULL, argv, env);
    free(env);
    if (err != 0) {
        fprintf(stderr, "bench-dpc: posix_spawn of the warm job: %s\n", strerror(err));
        return 1;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("bench-dpc: waitpid");
            return 1;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* Root of the warm job: the warm rows. */
static int run_warm(int runs, int warmup, int pool, double cold_local, double cold_remote,
                    double cold_gpu)
{
    ivm_device dev, rdev = NULL, gdev;
    double *loc = calloc((size_t)runs, sizeof(double));
    double *rem = calloc((size_t)runs, sizeof(double));
    double *gpu = calloc((size_t)runs, sizeof(double));
    char backend[32];
    ivmError_t rc;

    if (loc == NULL || rem == NULL || gpu == NULL) {
        fprintf(stderr, "bench-dpc: out of memory\n");
        return 1;
    }
    BENCH_CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    rc = ivmCreateDev(REMOTE_NODE, IVM_CPU_N(0), &rdev);
    if (rc == IVM_ERROR_NOT_FOUND)
        rdev = NULL;
    else
        BENCH_CHECK(rc);
    gdev = open_gpu(backend, sizeof(backend));
    parked_settle();
    for (int i = 0; i < warmup; i++) {
        dpc_once(dev, 1);
        if (rdev != NULL)
            dpc_once(rdev, 1);
        if (gdev != NULL)
            dpc_once(gdev, 1);
    }
    for (int i = 0; i < runs; i++) {
        loc[i] = dpc_once(dev, 1);
        if (rdev != NULL)
            rem[i] = dpc_once(rdev, 1);
        if (gdev != NULL)
            gpu[i] = dpc_once(gdev, 1);
    }
    BENCH_CHECK(ivmDestroyDev(dev));
    if (rdev != NULL)
        BENCH_CHECK(ivmDestroyDev(rdev));
    close_gpu(gdev);

    bench_stats_t s_loc = bench_stats(loc, runs);
    bench_stats_t s_rem = rdev != NULL ? bench_stats(rem, runs) : (bench_stats_t){ 0 };
    double lratio = s_loc.median > 0 ? cold_local / s_loc.median : 0.0;
    double rratio = s_rem.median > 0 ? cold_remote / s_rem.median : 0.0;
    int pass = s_loc.median <= WARM_TARGET_MS;

    printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10s   %7.1f\n", "warm",
           "local-cpu", s_loc.median, s_loc.p90, "cold dpc", cold_local, "", lratio);
    if (rdev != NULL)
        printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10s   %7.1f\n", "warm",
               REMOTE_NODE "-cpu", s_rem.median, s_rem.p90, "cold dpc", cold_remote, "",
               rratio);
    bench_stats_t s_gpu = gdev != NULL ? bench_stats(gpu, runs) : (bench_stats_t){ 0 };
    double gratio = s_gpu.median > 0 ? cold_gpu / s_gpu.median : 0.0;
    int gpass = s_gpu.median <= WARM_GPU_TARGET_MS;
    if (gdev != NULL)
        printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10s   %7.1f   (%s backend)\n",
               "warm", "local-gpu", s_gpu.median, s_gpu.p90, "cold dpc", cold_gpu, "",
               gratio, backend);
    printf("target: warm local-cpu median <= %.3f ms (IVM_PE_POOL=%d): %s\n",
           WARM_TARGET_MS, pool, pass ? "met" : "NOT met");
    if (gdev != NULL)
        printf("target: warm local-gpu median <= %.3f ms (%s backend%s): %s\n",
               WARM_GPU_TARGET_MS, backend,
               strcmp(backend, "emu") == 0 ? ", emulated: no CUDA context cost" : "",
               gpass ? "met" : "NOT met");
    printf("RESULT dpc warm-local median_ms=%.3f p90_ms=%.3f cold_median_ms=%.3f "
           "speedup=%.1f target_ms=%.3f pass=%s pool=%d runs=%d\n", s_loc.median,
           s_loc.p90, cold_local, lratio, WARM_TARGET_MS, pass ? "yes" : "no", pool, runs);
    if (rdev != NULL)
        printf("RESULT dpc warm-remote median_ms=%.3f p90_ms=%.3f cold_median_ms=%.3f "
               "speedup=%.1f pool=%d runs=%d\n", s_rem.median, s_rem.p90, cold_remote,
               rratio, pool, runs);
    if (gdev != NULL)
        printf("RESULT dpc warm-gpu median_ms=%.3f p90_ms=%.3f cold_median_ms=%.3f "
               "speedup=%.1f target_ms=%.3f pass=%s backend=%s pool=%d runs=%d\n",
               s_gpu.median, s_gpu.p90, cold_gpu, gratio, WARM_GPU_TARGET_MS,
               gpass ? "yes" : "no", backend, pool, runs);
    free(gpu);
    free(rem);
    free(loc);
    return 0;
}

static int run_root(int runs, int warmup, int pool)
{
    ivm_device dev, rdev = NULL, gdev;
    double *dpc = calloc((size_t)runs, sizeof(double));
    double *spw = calloc((size_t)runs, sizeof(double));
    double *rem = calloc((size_t)runs, sizeof(double));
    double *gpu = calloc((size_t)runs, sizeof(double));
    char backend[32];
    ivmError_t rc;

    if (dpc == NULL || spw == NULL || rem == NULL || gpu == NULL || make_spawn_env() != 0) {
        fprintf(stderr, "bench-dpc: out of memory\n");
        return 1;
    }
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
    if (len < 0 || (size_t)len == sizeof(self_path) - 1) {
        perror("bench-dpc: readlink /proc/self/exe");
        return 1;
    }
    self_path[len] = '\0';
    BENCH_CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    rc = ivmCreateDev(REMOTE_NODE, IVM_CPU_N(0), &rdev);
    if (rc == IVM_ERROR_NOT_FOUND)
        rdev = NULL;                    /* single node: no remote row */
    else
        BENCH_CHECK(rc);
    gdev = open_gpu(backend, sizeof(backend)); /* no GPU: no GPU rows */

    for (int i = 0; i < warmup; i++) {
        dpc_once(dev, 0);
        if (spawn_once() < 0)
            return 1;
        if (rdev != NULL)
            dpc_once(rdev, 0);
        if (gdev != NULL)
            dpc_once(gdev, 0);
    }
    for (int i = 0; i < runs; i++) {
        dpc[i] = dpc_once(dev, 0);
        spw[i] = spawn_once();
        if (spw[i] < 0)
            return 1;
        if (rdev != NULL)
            rem[i] = dpc_once(rdev, 0);
        if (gdev != NULL)
            gpu[i] = dpc_once(gdev, 0);
    }
    BENCH_CHECK(ivmDestroyDev(dev));
    if (rdev != NULL)
        BENCH_CHECK(ivmDestroyDev(rdev));
    close_gpu(gdev);

    bench_stats_t s_dpc = bench_stats(dpc, runs);
    bench_stats_t s_spw = bench_stats(spw, runs);
    bench_stats_t s_rem = rdev != NULL ? bench_stats(rem, runs) : (bench_stats_t){ 0 };
    double ratio = s_spw.median > 0 ? s_dpc.median / s_spw.median : 0.0;
    double rratio = s_spw.median > 0 ? s_rem.median / s_spw.median : 0.0;
    int rpass = s_rem.median <= REMOTE_TARGET_MS;

    printf("bench-dpc: %d runs (+%d warm-up), times in ms\n", runs, warmup);
    printf("%-5s %-10s %10s %10s   %-11s %10s %10s   %7s\n", "", "device",
           "median_ms", "p90_ms", "", "median_ms", "p90_ms", "ratio");
    printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10.3f   %7.2f\n", "dpc",
           "local-cpu", s_dpc.median, s_dpc.p90, "posix_spawn", s_spw.median,
           s_spw.p90, ratio);
    if (rdev != NULL) {
        printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10.3f   %7.2f\n", "dpc",
               REMOTE_NODE "-cpu", s_rem.median, s_rem.p90, "posix_spawn", s_spw.median,
               s_spw.p90, rratio);
        printf("target: %s-cpu median <= %.0f ms: %s\n", REMOTE_NODE, REMOTE_TARGET_MS,
               rpass ? "met" : "NOT met");
    } else {
        printf("(no node '%s' in this job: no remote row; run under ivmrun --nodes 2)\n",
               REMOTE_NODE);
    }
    bench_stats_t s_gpu = gdev != NULL ? bench_stats(gpu, runs) : (bench_stats_t){ 0 };
    if (gdev != NULL)
        printf("%-5s %-10s %10.3f %10.3f   %-11s %10.3f %10.3f   %7.2f   (%s backend)\n",
               "dpc", "local-gpu", s_gpu.median, s_gpu.p90, "posix_spawn", s_spw.median,
               s_spw.p90, s_spw.median > 0 ? s_gpu.median / s_spw.median : 0.0, backend);
    else
        printf("(no GPU on this node: no GPU rows; run under ivmrun --emu-gpus 1)\n");
    printf("RESULT dpc local median_ms=%.3f p90_ms=%.3f spawn_median_ms=%.3f "
           "spawn_p90_ms=%.3f ratio=%.2f runs=%d\n", s_dpc.median, s_dpc.p90,
           s_spw.median, s_spw.p90, ratio, runs);
    if (rdev != NULL)
        printf("RESULT dpc remote median_ms=%.3f p90_ms=%.3f spawn_median_ms=%.3f "
               "ratio=%.2f target_ms=%.0f pass=%s runs=%d\n", s_rem.median, s_rem.p90,
               s_spw.median, rratio, REMOTE_TARGET_MS, rpass ? "yes" : "no", runs);
    if (gdev != NULL)
        printf("RESULT dpc local-gpu median_ms=%.3f p90_ms=%.3f backend=%s runs=%d\n",
               s_gpu.median, s_gpu.p90, backend, runs);
    int ret = pool > 0 ? run_warm_job(runs, warmup, pool, s_dpc.median, s_rem.median,
                                      s_gpu.median) : 0;
    free(gpu);
    free(rem);
    free(spawn_env);
    free(spw);
    free(dpc);
    return ret;
}

int main(int argc, char **argv)
{
    int runs = 200, warmup = 5, pool = 2, warm = 0, opt, id, ret;
    double cold_local = 0.0, cold_remote = 0.0, cold_gpu = 0.0;

    if (getenv(SPAWN_ENV) != NULL)
        return 0;                       /* the posix_spawn baseline's child */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--burst") == 0)
            return dpc_burst_main(argc, argv);

    while ((opt = getopt(argc, argv, "n:w:p:Wc:r:g:")) != -1) {
        switch (opt) {
        case 'n': runs = bench_parse_int(optarg, 1); break;
        case 'w': warmup = bench_parse_int(optarg, 0); break;
        case 'p': pool = bench_parse_int(optarg, 0); break;
        case 'W': warm = 1; break;      /* internal: root of the warm job */
        case 'c': cold_local = atof(optarg); break;
        case 'r': cold_remote = atof(optarg); break;
        case 'g': cold_gpu = atof(optarg); break;
        default: runs = -1; break;
        }
    }
    if (runs < 0 || warmup < 0 || pool < 0 || optind < argc) {
        fprintf(stderr, "usage: %s [-n RUNS (200)] [-w WARMUP (5)] [-p POOL (2)]\n",
                argv[0]);
        return 2;
    }
    /* The cold rows' job has no pool (its PEs inherit this setting too). */
    if (!warm && getenv("IVM_PE_ID") == NULL)
        setenv("IVM_PE_POOL", "0", 1);

    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    if (id == 0 && warm)
        ret = run_warm(runs, warmup, pool, cold_local, cold_remote, cold_gpu);
    else if (id == 0)
        ret = run_root(runs, warmup, pool);
    else
        ret = run_child();
    BENCH_CHECK(ivmExit());
    return ret;
}
