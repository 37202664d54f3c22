/*
 * Small helpers shared by the micro-benchmarks: clock, sleep, argument
 * parsing, median/p90, and a check macro for IVM calls.
 * Include after defining _POSIX_C_SOURCE 200809L.
 */
#ifndef IVM_BENCH_UTIL_H
#define IVM_BENCH_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ivm.h>

/* Exit the PE with the status text and detailed message of a failed IVM call. */
#define BENCH_CHECK(call)                                                      \
    do {                                                                       \
        ivmError_t bench_rc_ = (call);                                         \
        if (bench_rc_ != IVM_SUCCESS) {                                        \
            const char *bench_msg_ = ivmGetLastErrorMessage();                 \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, \
                    #call, ivmGetErrorString(bench_rc_), bench_msg_);          \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    double median;
    double p90;
    double min;
    double max;
} bench_stats_t;

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline double bench_now_ms(void)
{
    return bench_now_ns() * 1e-6;
}

static inline void bench_sleep_ns(long ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };
    nanosleep(&ts, NULL);
}

/* A decimal integer >= min, or -1 if s is not one. */
static inline int bench_parse_int(const char *s, int min)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < min || v > INT_MAX)
        return -1;
    return (int)v;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and nearest-rank p90 of v[0..n) (n >= 1); sorts v in place. */
static inline bench_stats_t bench_stats(double *v, int n)
{
    bench_stats_t s;
    int r90 = (9 * n + 9) / 10;         /* ceil(0.9 n), 1-based rank */

    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    s.p90 = v[(r90 < 1 ? 1 : r90) - 1];
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

/* The bandwidth table shared by the node-to-node benchmarks and their
 * baselines: per size, put and get MB/s (10^6 B/s) of the median and the
 * fastest repetition; bw[s][1] is put, bw[s][0] get, times in ns. */
static inline void bench_print_bw_table(const size_t *sizes, int nsizes,
                                        const bench_stats_t (*bw)[2])
{
    printf("%-10s %12s %12s %12s %12s\n", "bytes", "put_MBps", "put_best", "get_MBps",
           "get_best");
    for (int s = 0; s < nsizes; s++) {
        double b = (double)sizes[s] * 1e3;
        printf("%-10zu %12.1f %12.1f %12.1f %12.1f\n", sizes[s], b / bw[s][1].median,
               b / bw[s][1].min, b / bw[s][0].median, b / bw[s][0].min);
    }
}

#endif /* IVM_BENCH_UTIL_H */
