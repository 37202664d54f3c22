/*
 * bench-sync-local: cost of ivmSyncPut / ivmSyncGet of 8 bytes when the
 * caller's copy is the master copy (the root PE's own ivmMalloc object).
 * Such a call moves no data and makes no daemon round trip, so it should
 * cost about as much as the baseline: an 8-byte memcpy and a full fence.
 *
 * Each variant runs BATCHES batches of CALLS calls; a batch's time divided by
 * CALLS is one sample; median and p90 of the samples are reported in ns.
 * Target: median <= 1000 ns per call.
 *
 * Run:  ivmrun bench-sync-local [-b BATCHES (1000)] [-c CALLS (1000)]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ivm.h>

#include "bench_util.h"

#define OBJ_SIZE   4096
#define TARGET_NS  1000.0

/* Baseline buffers, with external linkage so the copies are not optimized out. */
uint64_t bench_sync_src[8], bench_sync_dst[8];

enum variant { V_PUT, V_GET, V_MEMCPY, V_COUNT };
static const char *const variant_names[V_COUNT] = {
    "ivmSyncPut", "ivmSyncGet", "memcpy+fence"
};

/* One batch of @p calls calls of variant @p v on @p obj: ns per call. */
static double run_batch(enum variant v, uint64_t *obj, int calls)
{
    int err = 0;                        /* OR of the calls' statuses */
    double t0 = bench_now_ns();

    switch (v) {
    case V_PUT:
        for (int c = 0; c < calls; c++) {
            obj[0] = (uint64_t)c;
            err |= ivmSyncPut(obj, sizeof(uint64_t));
        }
        break;
    case V_GET:
        for (int c = 0; c < calls; c++) {
            err |= ivmSyncGet(obj, sizeof(uint64_t));
            bench_sync_dst[1] += obj[0];
        }
        break;
    case V_MEMCPY:
        for (int c = 0; c < calls; c++) {
            bench_sync_src[0] = (uint64_t)c;
            memcpy(bench_sync_dst, bench_sync_src, sizeof(uint64_t));
            atomic_thread_fence(memory_order_seq_cst);
        }
        break;
    default:
        break;
    }
    double t1 = bench_now_ns();
    if (err != 0) {
        /* Repeat one call to report its status and message. */
        BENCH_CHECK(v == V_PUT ? ivmSyncPut(obj, sizeof(uint64_t))
                               : ivmSyncGet(obj, sizeof(uint64_t)));
        fprintf(stderr, "bench-sync-local: %s failed in a batch (status %d)\n",
                variant_names[v], (int)err);
        exit(1);
    }
    return (t1 - t0) / calls;
}

static int run_root(int batches, int calls)
{
    uint64_t *obj;
    double *samples = calloc((size_t)batches, sizeof(double));
    bench_stats_t st[V_COUNT];

    if (samples == NULL) {
        fprintf(stderr, "bench-sync-local: out of memory\n");
        return 1;
    }
    BENCH_CHECK(ivmMalloc("bench-sync-local", &obj, OBJ_SIZE));

    for (int v = 0; v < V_COUNT; v++) {
        run_batch((enum variant)v, obj, calls);             /* warm-up */
        for (int b = 0; b < batches; b++)
            samples[b] = run_batch((enum variant)v, obj, calls);
        st[v] = bench_stats(samples, batches);
    }

    printf("bench-sync-local: 8-byte calls on a master copy, %d batches x %d calls, "
           "ns per call\n", batches, calls);
    printf("%-14s %12s %12s %12s\n", "call", "median_ns", "p90_ns", "min_ns");
    for (int v = 0; v < V_COUNT; v++)
        printf("%-14s %12.1f %12.1f %12.1f\n", variant_names[v], st[v].median,
               st[v].p90, st[v].min);
    int pass = st[V_PUT].median <= TARGET_NS && st[V_GET].median <= TARGET_NS;
    printf("target: median <= %.0f ns per call: %s\n", TARGET_NS,
           pass ? "met" : "NOT met");
    printf("RESULT sync_local put_median_ns=%.1f put_p90_ns=%.1f get_median_ns=%.1f "
           "get_p90_ns=%.1f memcpy_median_ns=%.1f memcpy_p90_ns=%.1f target_ns=%.0f "
           "pass=%s\n", st[V_PUT].median, st[V_PUT].p90, st[V_GET].median,
           st[V_GET].p90, st[V_MEMCPY].median, st[V_MEMCPY].p90, TARGET_NS,
           pass ? "yes" : "no");

    BENCH_CHECK(ivmFree(obj));
    free(samples);
    return 0;
}

int main(int argc, char **argv)
{
    int batches = 1000, calls = 1000, opt, id, ret = 0;

    while ((opt = getopt(argc, argv, "b:c:")) != -1) {
        switch (opt) {
        case 'b': batches = bench_parse_int(optarg, 1); break;
        case 'c': calls = bench_parse_int(optarg, 1); break;
        default: batches = -1; break;
        }
    }
    if (batches < 0 || calls < 0 || optind < argc) {
        fprintf(stderr, "usage: %s [-b BATCHES (1000)] [-c CALLS (1000)]\n", argv[0]);
        return 2;
    }

    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    if (id == 0)
        ret = run_root(batches, calls);
    else
        fprintf(stderr, "bench-sync-local: starts no PEs; unexpected PE %d\n", id);
    BENCH_CHECK(ivmExit());
    return ret;
}
