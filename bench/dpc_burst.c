/*
 * bench-dpc --burst: PE bursts (issue 17).
 *
 * One row per burst size N: the time from one ivmCreatePEs of N PEs on CPU
 * device 0 of the root's node until ivmWait has returned on every one of
 * their first signals (each PE: ivmEnter, ivmSignal, ivmExit), and that time
 * divided by N. Before the next run the root waits until every PE of the
 * last one has exited. Sizes alternate inside each round, so drift in the
 * machine's load touches all of them alike.
 *
 * Cold rows run in a job without a pool (IVM_PE_POOL=0). With --pool P > 0
 * the root then starts this binary again as the root of a second job on the
 * same daemon with IVM_PE_POOL=P, which measures the same sizes with the
 * pool full before each run (it waits until the daemon's parked count is
 * back to full); its ratio column is cold median / warm median.
 *
 * Baseline in the same run: the round trip of 8 bytes between two processes
 * over a Unix socketpair (median of UDS_ROUNDS ping-pongs, per round trip),
 * the floor of any answer a daemon gives; the warm N = 1 row is compared
 * with it (target: <= 4x). Beside it, the floor of the warm path's shape:
 * a byte passed around a ring of three processes over socketpairs (creator
 * -> daemon -> parked process -> creator: three sleeping wake-ups), each
 * round after RELAY_GAP_US of idleness, as the warm rows' runs come after
 * the pool's refill; a ping-pong keeps its two processes' CPUs awake, a
 * creator's call does not.
 *
 * --linger MS: each PE stays MS ms after its first signal before ivmExit,
 * as a PE that goes on to work would. Without it a PE exits at once, and on
 * a machine with few cores the exits of a burst's first PEs (process
 * teardown, about 2 ms of CPU each on the test VM) run while its last PEs
 * still wait to start, inside the measured time.
 *
 * Run:  ivmrun bench-dpc --burst 1,16,64,256 [--pool 64] [-n RUNS (5)] [--linger MS]
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ivm.h>

#include "bench_util.h"
#include "client.h"
#include "dpc_burst.h"
#include "proto.h"

#define BURST_SIZES_MAX 8
#define BURST_MAX 1024
#define UDS_ROUNDS 20000
#define UDS_WARMUP 2000
#define RELAY_ROUNDS 300
#define RELAY_GAP_US 2000
#define REFILL_IDLE_MS 20
#define REFILL_TIMEOUT_S 30.0
#define GONE_TIMEOUT_S 30.0
#define COLD_TARGET_MS_PER_PE 1.0
#define WARM_SPEEDUP_TARGET 3.0
#define WARM_UDS_TARGET 4.0

extern char **environ;

typedef struct {
    int    sizes[BURST_SIZES_MAX];
    int    nsizes;
    int    runs;
    int    pool;
    int    linger_ms;               /* each PE waits this long before ivmExit */
    int    warm;                    /* internal: root of the pooled job */
    double cold[BURST_SIZES_MAX];   /* warm job: the cold medians, ms */
    double uds_us;                  /* warm job: the cold job's round trip */
    double relay_us;                /* warm job: the cold job's three-process ring */
} burst_opts_t;

#define RING_MAX 3

/* Child k of a ring: pass each message from `in` to `out` until EOF (the
 * ring's other ends, fds[0..n), closed first, so that EOF comes). */
static void ring_pass(const int *fds, int n, int in, int out, size_t bytes)
{
    char buf[8];

    for (int i = 0; i < n; i++)
        if (fds[i] != in && fds[i] != out)
            close(fds[i]);
    while (read(in, buf, bytes) == (ssize_t)bytes && write(out, buf, bytes) == (ssize_t)bytes)
        ;
    _exit(0);
}

/* Median time of a message of `bytes` (<= 8) around a ring of `procs`
 * processes (this one and procs - 1 children, socketpairs between
 * neighbours), in microseconds: `rounds` timed after `warmup`, each after
 * gap_us asleep (0: back to back, as a ping-pong with procs = 2). */
static double ring_us(int procs, int rounds, int warmup, long gap_us, size_t bytes)
{
    double *t = calloc((size_t)rounds, sizeof(double));
    int fds[2 * RING_MAX], status;
    pid_t kid[RING_MAX];
    char buf[8] = { 0 };

    if (t == NULL) {
        perror("bench-dpc: calloc");
        exit(1);
    }
    /* Pair i (fds[2i] -> fds[2i + 1]) carries from process i to i + 1. */
    for (int i = 0; i < procs; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds + 2 * i) != 0) {
            perror("bench-dpc: socketpair");
            exit(1);
        }
    }
    for (int k = 1; k < procs; k++) {
        kid[k] = fork();
        if (kid[k] < 0) {
            perror("bench-dpc: fork");
            exit(1);
        }
        if (kid[k] == 0)
            ring_pass(fds, 2 * procs, fds[2 * k - 1], fds[2 * k], bytes);
    }
    for (int i = 1; i < 2 * procs - 1; i++) /* the children's ends */
        close(fds[i]);
    for (int i = 0; i < warmup + rounds; i++) {
        if (gap_us > 0)
            bench_sleep_ns(gap_us * 1000L);
        double t0 = bench_now_ns();
        if (write(fds[0], buf, bytes) != (ssize_t)bytes ||
            read(fds[2 * procs - 1], buf, bytes) != (ssize_t)bytes) {
            perror("bench-dpc: ring of processes");
            exit(1);
        }
        if (i >= warmup)
            t[i - warmup] = bench_now_ns() - t0;
    }
    close(fds[0]);
    close(fds[2 * procs - 1]);
    for (int k = 1; k < procs; k++)
        waitpid(kid[k], &status, 0);
    double us = bench_stats(t, rounds).median * 1e-3;
    free(t);
    return us;
}

/* The root daemon's parked processes (INFO); 0 without an answer. */
uint32_t dpc_parked(void)
{
    ivm_msg_info_rep_t info;

    memset(&info, 0, sizeof(info));
    if (getenv("IVM_SOCKET") == NULL ||
        ivm_client_info(getenv("IVM_SOCKET"), 5000, &info, NULL) != IVM_SUCCESS)
        return 0;
    return info.parked;
}

/* Pooled job: the daemon idle until its pool of want is full again. */
static void burst_refilled(uint32_t want)
{
    double t0 = bench_now_ms();

    do {
        bench_sleep_ns(REFILL_IDLE_MS * 1000000L);
        if (bench_now_ms() - t0 > REFILL_TIMEOUT_S * 1e3) {
            fprintf(stderr, "bench-dpc: the pool did not refill to %u in %.0f s\n", want,
                    REFILL_TIMEOUT_S);
            exit(1);
        }
    } while (dpc_parked() < want);
    bench_sleep_ns(1000000L); /* the daemon has closed that INFO connection */
}

/* Until only the root PE is left (the last run's PEs are gone); exits the
 * program after timeout_s. */
void dpc_wait_alone(double timeout_s)
{
    double t0 = bench_now_ms();
    int n;

    for (;;) {
        BENCH_CHECK(ivmGetNumPEs(&n));
        if (n <= 1)
            return;
        if (bench_now_ms() - t0 > timeout_s * 1e3) {
            fprintf(stderr, "bench-dpc: %d PEs still alive after %.0f s\n", n, timeout_s);
            exit(1);
        }
        bench_sleep_ns(200000L);
    }
}

/* One burst of n PEs: ms from the call to the last first signal. */
static double burst_once(ivm_device dev, int n, ivm_pe *pes)
{
    double t0 = bench_now_ms(), t1;

    BENCH_CHECK(ivmCreatePEs(dev, n, pes));
    for (int i = 0; i < n; i++) {
        if (pes[i] == IVM_PE_NULL) {
            fprintf(stderr, "bench-dpc: ivmCreatePEs left slot %d empty\n", i);
            exit(1);
        }
        BENCH_CHECK(ivmWait(pes[i]));
    }
    t1 = bench_now_ms();
    for (int i = 0; i < n; i++)
        BENCH_CHECK(ivmWait(pes[i])); /* returns once it has exited */
    dpc_wait_alone(GONE_TIMEOUT_S);
    return t1 - t0;
}

/* The rows of this job: median [min-max] per size, into med[]. */
static void burst_measure(const burst_opts_t *o, double *med)
{
    double t[BURST_SIZES_MAX][64];
    ivm_pe *pes = calloc(BURST_MAX, sizeof(ivm_pe));
    ivm_device dev;
    uint32_t full = 0;

    if (pes == NULL) {
        fprintf(stderr, "bench-dpc: out of memory\n");
        exit(1);
    }
    BENCH_CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    if (o->warm)
        full = (uint32_t)o->pool;
    for (int r = -1; r < o->runs; r++) { /* round -1: warm-up, one of each */
        for (int s = 0; s < o->nsizes; s++) {
            if (o->warm)
                burst_refilled(full);
            double ms = burst_once(dev, o->sizes[s], pes);
            if (r >= 0)
                t[s][r] = ms;
        }
    }
    BENCH_CHECK(ivmDestroyDev(dev));
    for (int s = 0; s < o->nsizes; s++) {
        int n = o->sizes[s];
        bench_stats_t st = bench_stats(t[s], o->runs);
        double ratio = o->warm && st.median > 0 ? o->cold[s] / st.median : 0.0;

        med[s] = st.median;
        printf("%-5s %6d %10.3f %10.3f %10.3f %10.4f %7.2f\n", o->warm ? "pool" : "cold", n,
               st.median, st.min, st.max, st.median / n, ratio);
        printf("RESULT dpc burst mode=%s n=%d pool=%d median_ms=%.3f min_ms=%.3f "
               "max_ms=%.3f per_pe_ms=%.4f speedup=%.2f runs=%d\n", o->warm ? "pool" : "cold",
               n, o->warm ? o->pool : 0, st.median, st.min, st.max, st.median / n, ratio,
               o->runs);
    }
    free(pes);
}

/* The pooled rows: this binary as the root of a second job with a pool. */
static int burst_warm_job(const burst_opts_t *o, const double *cold, double uds_us,
                          double relay_us, char *self)
{
    char sizes[128] = "", colds[256] = "", a_runs[16], a_pool[16], a_uds[32], env_pool[32];
    char a_linger[16], a_relay[32];
    char *argv[] = { self, "--burst", sizes, "--pool", a_pool, "-n", a_runs, "--warm-of",
                     colds, "--uds-us", a_uds, "--relay-us", a_relay, "--linger", a_linger,
                     NULL };
    size_t n = 0, k = 0;
    char **env;
    pid_t pid;
    int status, err;

    for (int s = 0; s < o->nsizes; s++) {
        snprintf(sizes + strlen(sizes), sizeof(sizes) - strlen(sizes), "%s%d", s ? "," : "",
                 o->sizes[s]);
        snprintf(colds + strlen(colds), sizeof(colds) - strlen(colds), "%s%.6f", s ? "," : "",
                 cold[s]);
    }
    snprintf(a_runs, sizeof(a_runs), "%d", o->runs);
    snprintf(a_pool, sizeof(a_pool), "%d", o->pool);
    snprintf(a_uds, sizeof(a_uds), "%.6f", uds_us);
    snprintf(a_linger, sizeof(a_linger), "%d", o->linger_ms);
    snprintf(a_relay, sizeof(a_relay), "%.6f", relay_us);
    snprintf(env_pool, sizeof(env_pool), "IVM_PE_POOL=%d", o->pool);
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
    env[k] = env_pool;
    fflush(stdout);
    err = posix_spawn(&pid, self, NULL, NULL, argv, env);
    free(env);
    if (err != 0) {
        fprintf(stderr, "bench-dpc: posix_spawn of the pooled job: %s\n", strerror(err));
        return 1;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return 1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void burst_targets(const burst_opts_t *o, const double *med)
{
    for (int s = 0; s < o->nsizes; s++) {
        int n = o->sizes[s];
        if (!o->warm && n >= 256)
            printf("target: cold burst of %d <= %.1f ms per PE: %s\n", n,
                   COLD_TARGET_MS_PER_PE, med[s] / n <= COLD_TARGET_MS_PER_PE ? "met" : "NOT met");
        if (o->warm && n == o->pool)
            printf("target: burst of %d from a pool of %d >= %.0fx faster than cold: %s "
                   "(%.2fx)\n", n, o->pool, WARM_SPEEDUP_TARGET,
                   o->cold[s] >= WARM_SPEEDUP_TARGET * med[s] ? "met" : "NOT met",
                   med[s] > 0 ? o->cold[s] / med[s] : 0.0);
        if (o->warm && n == 1)
            printf("target: warm single PE <= %.0fx the UDS round trip (%.1f us): %s (%.1fx)\n"
                   "RESULT dpc warm-single median_us=%.1f uds_rtt_us=%.2f ratio=%.2f\n",
                   WARM_UDS_TARGET, o->uds_us,
                   med[s] * 1e3 <= WARM_UDS_TARGET * o->uds_us ? "met" : "NOT met",
                   med[s] * 1e3 / o->uds_us, med[s] * 1e3, o->uds_us, med[s] * 1e3 / o->uds_us);
        if (o->warm && n == 1 && o->relay_us > 0)
            printf("floor: three sleeping wake-ups (a ring of three processes after %d us "
                   "idle) %.1f us; warm single PE %.2fx of it\n"
                   "RESULT dpc warm-single-floor ring3_us=%.2f ratio=%.2f\n", RELAY_GAP_US,
                   o->relay_us, med[s] * 1e3 / o->relay_us, o->relay_us,
                   med[s] * 1e3 / o->relay_us);
    }
}

/* "a,b,c" into v[0..max); the count, or -1. */
static int burst_parse_list(const char *s, double *dv, int *iv, int max)
{
    char buf[256], *save = NULL, *tok;
    int n = 0;

    snprintf(buf, sizeof(buf), "%s", s);
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return -1;
        if (iv != NULL && (iv[n] = bench_parse_int(tok, 1)) < 0)
            return -1;
        if (dv != NULL)
            dv[n] = atof(tok);
        n++;
    }
    return n;
}

static int burst_parse(int argc, char **argv, burst_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->runs = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return -1;
        if (strcmp(a, "--burst") == 0)
            o->nsizes = burst_parse_list(v, NULL, o->sizes, BURST_SIZES_MAX);
        else if (strcmp(a, "--pool") == 0)
            o->pool = bench_parse_int(v, 0);
        else if (strcmp(a, "-n") == 0)
            o->runs = bench_parse_int(v, 1);
        else if (strcmp(a, "--warm-of") == 0)
            o->warm = burst_parse_list(v, o->cold, NULL, BURST_SIZES_MAX) > 0;
        else if (strcmp(a, "--uds-us") == 0)
            o->uds_us = atof(v);
        else if (strcmp(a, "--relay-us") == 0)
            o->relay_us = atof(v);
        else if (strcmp(a, "--linger") == 0)
            o->linger_ms = bench_parse_int(v, 0);
        else
            return -1;
        i++;
    }
    if (o->nsizes <= 0 || o->pool < 0 || o->pool > IVM_PE_POOL_MAX || o->runs < 1 ||
        o->runs > 64 || o->linger_ms < 0 || o->linger_ms > 10000)
        return -1;
    for (int s = 0; s < o->nsizes; s++)
        if (o->sizes[s] > BURST_MAX)
            return -1;
    return 0;
}

int dpc_burst_main(int argc, char **argv)
{
    burst_opts_t o;
    double med[BURST_SIZES_MAX], uds_us = 0.0, relay_us = 0.0;
    char self[4096];
    int id, ret = 0;

    if (burst_parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: %s --burst N[,N...] [--pool P (0..%d)] [-n RUNS (5, <= 64)] "
                "[--linger MS (0..10000)]\n", argv[0], IVM_PE_POOL_MAX);
        return 2;
    }
    if (!o.warm && getenv("IVM_PE_ID") == NULL)
        setenv("IVM_PE_POOL", "0", 1);
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    if (id != 0) {
        ret = ivmSignal() == IVM_SUCCESS ? 0 : 1;
        if (o.linger_ms > 0)
            bench_sleep_ns(1000000L * o.linger_ms);
        BENCH_CHECK(ivmExit());
        return ret;
    }
    if (!o.warm) {
        uds_us = ring_us(2, UDS_ROUNDS, UDS_WARMUP, 0, 8);
        printf("bench-dpc --burst: %d runs each, times in ms; UDS 8 B round trip %.2f us\n",
               o.runs, uds_us);
        printf("RESULT dpc uds-rtt median_us=%.2f rounds=%d\n", uds_us, UDS_ROUNDS);
        if (o.pool > 0) {
            relay_us = ring_us(3, RELAY_ROUNDS, 0, RELAY_GAP_US, 1);
            printf("ring of three processes, %d us idle before each round: %.2f us\n"
                   "RESULT dpc ring3 median_us=%.2f rounds=%d\n", RELAY_GAP_US, relay_us,
                   relay_us, RELAY_ROUNDS);
        }
        printf("%-5s %6s %10s %10s %10s %10s %7s\n", "mode", "N", "median_ms", "min_ms",
               "max_ms", "ms_per_pe", "ratio");
    }
    burst_measure(&o, med);
    burst_targets(&o, med);
    if (!o.warm && o.pool > 0) {
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0) {
            perror("bench-dpc: readlink /proc/self/exe");
            ret = 1;
        } else {
            self[len] = '\0';
            ret = burst_warm_job(&o, med, uds_us, relay_us, self);
        }
    }
    BENCH_CHECK(ivmExit());
    return ret;
}
