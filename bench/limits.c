/*
 * bench-limits: two of the machine's own limits, printed beside IVM's figures
 * by bench/run-scale.sh (the third, the TCP round trip and loopback
 * bandwidth, is bench-tcp-baseline's):
 *   - memcpy bandwidth: one memcpy of 64 MiB between two buffers whose pages
 *     are touched first, REPS times; MB/s of the median and the fastest copy
 *     (MB = 10^6 bytes). The ceiling of any copy between a node's copies.
 *   - Unix-socket round trip: an 8-byte ping-pong over a socketpair between
 *     this process and a forked child, LAT_CALLS round trips after WARMUP;
 *     median and p90. The floor of any call that asks a node's daemon (a PE
 *     talks to its ivmd over a Unix socket).
 * Calls no IVM function.
 *
 * Run:  bench-limits [-r REPS (20)] [-l LAT_CALLS (2000)] [-w WARMUP (200)]
 * Output: RESULT limits memcpy_MBps=X memcpy_best_MBps=Y uds_rtt_median_us=Z
 *         uds_rtt_p90_us=W
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define MEMCPY_BYTES (64u << 20)

/* Baseline buffers, external so that the copies are not optimized out. */
char *bench_limits_src, *bench_limits_dst;

static void limits_die(const char *what)
{
    perror(what);
    exit(1);
}

static bench_stats_t limits_memcpy(int reps)
{
    double *t = malloc(sizeof(double) * (size_t)reps);

    bench_limits_src = malloc(MEMCPY_BYTES);
    bench_limits_dst = malloc(MEMCPY_BYTES);
    if (t == NULL || bench_limits_src == NULL || bench_limits_dst == NULL) {
        limits_die("malloc");
    }
    memset(bench_limits_src, 1, MEMCPY_BYTES);
    memset(bench_limits_dst, 2, MEMCPY_BYTES); /* every page faulted in first */
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_ns();
        memcpy(bench_limits_dst, bench_limits_src, MEMCPY_BYTES);
        t[r] = bench_now_ns() - t0;
        bench_limits_src[(size_t)r * 4096 % MEMCPY_BYTES] = (char)r;
    }
    bench_stats_t s = bench_stats(t, reps);
    free(t);
    free(bench_limits_src);
    free(bench_limits_dst);
    return s;
}

/* Exactly n bytes, or exit. */
static void limits_xfer(int fd, void *buf, size_t n, int out)
{
    char *p = buf;

    while (n > 0) {
        ssize_t k = out ? write(fd, p, n) : read(fd, p, n);
        if (k <= 0) {
            limits_die(out ? "write" : "read");
        }
        p += k;
        n -= (size_t)k;
    }
}

static bench_stats_t limits_uds(int calls, int warmup)
{
    int sv[2];
    uint64_t word = 0;
    double *t = malloc(sizeof(double) * (size_t)calls);

    if (t == NULL || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        limits_die("socketpair");
    }
    pid_t pid = fork();
    if (pid < 0) {
        limits_die("fork");
    }
    if (pid == 0) { /* echo until the parent closes its end */
        close(sv[0]);
        while (read(sv[1], &word, sizeof(word)) == (ssize_t)sizeof(word) &&
               write(sv[1], &word, sizeof(word)) == (ssize_t)sizeof(word)) {
        }
        _exit(0);
    }
    close(sv[1]);
    for (int i = -warmup; i < calls; i++) {
        double t0 = bench_now_ns();
        limits_xfer(sv[0], &word, sizeof(word), 1);
        limits_xfer(sv[0], &word, sizeof(word), 0);
        if (i >= 0) {
            t[i] = bench_now_ns() - t0;
        }
        word++;
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    bench_stats_t s = bench_stats(t, calls);
    free(t);
    return s;
}

int main(int argc, char **argv)
{
    int reps = 20, calls = 2000, warmup = 200, opt;

    while ((opt = getopt(argc, argv, "r:l:w:h")) != -1) {
        int *v = opt == 'r' ? &reps : opt == 'l' ? &calls : opt == 'w' ? &warmup : NULL;
        if (v == NULL || (*v = bench_parse_int(optarg, opt == 'w' ? 0 : 1)) < 0) {
            fprintf(opt == 'h' ? stdout : stderr,
                    "usage: bench-limits [-r REPS (20)] [-l LAT_CALLS (2000)] "
                    "[-w WARMUP (200)]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    bench_stats_t m = limits_memcpy(reps);
    bench_stats_t u = limits_uds(calls, warmup);
    printf("memcpy of %u bytes: %.0f MB/s (best %.0f); Unix-socket 8 B round trip: "
           "%.2f us (p90 %.2f)\n", MEMCPY_BYTES, MEMCPY_BYTES * 1e3 / m.median,
           MEMCPY_BYTES * 1e3 / m.min, u.median / 1e3, u.p90 / 1e3);
    printf("RESULT limits memcpy_MBps=%.0f memcpy_best_MBps=%.0f uds_rtt_median_us=%.2f "
           "uds_rtt_p90_us=%.2f\n", MEMCPY_BYTES * 1e3 / m.median, MEMCPY_BYTES * 1e3 / m.min,
           u.median / 1e3, u.p90 / 1e3);
    return 0;
}
