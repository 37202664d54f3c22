/*
 * bench-sync-remote: ivmSyncPut / ivmSyncGet between a node copy (mirror) on
 * node1 and the master copy on node0, measured in the PE on node1.
 *
 * The root PE (node0) allocates an object (the master copy) and starts one
 * CPU PE on node1. That PE maps the whole object (its node's daemon fills the
 * node copy from the master) and measures:
 *   - latency: ivmSyncPut and ivmSyncGet of 8 bytes, each call timed alone,
 *     LAT_CALLS calls after WARMUP calls; median and p90 in us;
 *   - bandwidth: ivmSyncPut and ivmSyncGet of 4 KiB, 64 KiB, 256 KiB, 1 MiB,
 *     4 MiB, 16 MiB and 64 MiB (sizes up to the object size) from offset 0,
 *     each call timed alone, REPS calls after one warm-up call (10 x REPS for
 *     sizes below 1 MiB);
 *     MB/s = bytes / median time (MB = 10^6 bytes);
 *   - posted puts: NBI_PUTS puts of 8 B, 4 KiB and 64 KiB into as many
 *     slots, one batch timed as a whole, blocking (ivmSyncPut each) against
 *     posted (ivmSyncPutNbi each, then ivmQuiet), alternating, REPS batches
 *     each; us per put, median;
 *   - two reference round trips without data, timed like the latency:
 *     ivmCreateDev(IVM_THIS_HOST) (this node's daemon only) and ivmGetNumPEs
 *     (forwarded by node1's daemon to the root daemon on node0).
 * Both sync calls are blocking: a Put returns when the data is in the master copy,
 * a Get when it is in this node's copy, so every call is at least one round
 * trip PE -> node1 daemon -> node0 daemon and back.
 * At the end the PE puts a pattern over the whole object and the root checks
 * it in the master copy.
 *
 * Run:  ivmrun --nodes 2 bench-sync-remote [-s MAX_MIB (64)] [-l LAT_CALLS (2000)]
 *                                          [-w WARMUP (200)] [-r REPS (10)]
 *                                          [-o put|get|both (both)]
 * (-o runs only the Put or only the Get measurements, e.g. under a profiler;
 * the figures of the other call then print as 0.)
 * Output: a table and RESULT lines (see docs/BENCHMARKS.md).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ivm.h>

#include "bench_util.h"

#define OBJ_NAME "bench-sync-remote"
#define REMOTE_NODE "node1"
#define MIB (1024u * 1024u)

static const size_t bw_sizes[] = { 4096, 64 * 1024, 256 * 1024, MIB, 4 * MIB, 16 * MIB, 64 * MIB };
#define N_SIZES (sizeof(bw_sizes) / sizeof(bw_sizes[0]))

static const size_t nbi_sizes[] = { 8, 4096, 64 * 1024 };
#define N_NBI_SIZES (sizeof(nbi_sizes) / sizeof(nbi_sizes[0]))
#define NBI_PUTS    64 /* puts of a batch, into as many slots: the most posted at once */

typedef struct {
    int max_mib, lat_calls, warmup, reps;
    int do_put, do_get;                 /* -o put|get|both */
} opts_t;

/* MB/s (10^6 B/s) of `bytes` moved in `ns`; 0 when not measured. */
static double mbps(size_t bytes, double ns)
{
    return ns > 0 ? (double)bytes * 1e3 / ns : 0.0;
}

static unsigned char check_byte(size_t i)
{
    return (unsigned char)(0xA5 ^ (i % 253));
}

/* Time `n` single calls of Put (put != 0) or Get of [q, q+size); fills t[] in ns. */
static void time_calls(unsigned char *q, size_t size, int put, int n, double *t)
{
    for (int i = 0; i < n; i++) {
        if (put)
            q[0] = (unsigned char)i;
        double t0 = bench_now_ns();
        ivmError_t rc = put ? ivmSyncPut(q, size) : ivmSyncGet(q, size);
        double t1 = bench_now_ns();
        BENCH_CHECK(rc);
        if (t != NULL)
            t[i] = t1 - t0;
    }
}

/* One batch of NBI_PUTS puts of `size` bytes into consecutive slots of q,
 * blocking or posted (then ivmQuiet); returns ns for the batch. */
static double time_batch(unsigned char *q, size_t size, int posted)
{
    double t0 = bench_now_ns();

    for (int k = 0; k < NBI_PUTS; k++) {
        unsigned char *slot = q + (size_t)k * size;
        slot[0] = (unsigned char)k;
        BENCH_CHECK(posted ? ivmSyncPutNbi(slot, size) : ivmSyncPut(slot, size));
    }
    if (posted)
        BENCH_CHECK(ivmQuiet());
    return bench_now_ns() - t0;
}

/* Reference round trips without data, `n` calls timed alone into t[] (ns):
 * local != 0: ivmCreateDev(IVM_THIS_HOST) + ivmDestroyDev, one request to this
 * node's daemon only; else ivmGetNumPEs, which this node's daemon forwards to
 * the job's root daemon on node0 (the same hops as a sync, without data). */
static void time_ref(int local, int n, double *t)
{
    ivm_device dev;
    int np;

    for (int i = 0; i < n; i++) {
        double t0 = bench_now_ns();
        if (local) {
            BENCH_CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
            BENCH_CHECK(ivmDestroyDev(dev));
        } else {
            BENCH_CHECK(ivmGetNumPEs(&np));
        }
        double t1 = bench_now_ns();
        if (t != NULL)
            t[i] = t1 - t0;
    }
}

static int run_child(const opts_t *o)
{
    unsigned char *q;
    size_t obj_size = (size_t)o->max_mib * MIB;
    int n = o->lat_calls > 10 * o->reps ? o->lat_calls : 10 * o->reps;
    double *t = calloc((size_t)n, sizeof(double));
    bench_stats_t lat[2], ref[2], bw[N_SIZES][2], nbi[N_NBI_SIZES][2];
    int nsizes = 0, nnbi = 0;

    if (t == NULL) {
        fprintf(stderr, "bench-sync-remote: out of memory\n");
        return 1;
    }
    double m0 = bench_now_ms();
    BENCH_CHECK(ivmMap(OBJ_NAME, &q, 0));
    double map_ms = bench_now_ms() - m0;
    if (q[obj_size - 1] != 0x5A) {
        fprintf(stderr, "bench-sync-remote: the node copy does not hold the master's "
                        "last byte after ivmMap (0x%02x)\n", q[obj_size - 1]);
        return 1;
    }
    memset(q, 0x3C, obj_size);          /* every page of the node copy touched */

    memset(lat, 0, sizeof(lat));
    memset(bw, 0, sizeof(bw));
    /* 8-byte latency */
    for (int put = 1; put >= 0; put--) {
        if (!(put ? o->do_put : o->do_get))
            continue;
        time_calls(q, 8, put, o->warmup, NULL);
        time_calls(q, 8, put, o->lat_calls, t);
        lat[put] = bench_stats(t, o->lat_calls);
    }

    /* reference round trips without data */
    for (int local = 1; local >= 0; local--) {
        time_ref(local, o->warmup, NULL);
        time_ref(local, o->lat_calls, t);
        ref[local] = bench_stats(t, o->lat_calls);
    }

    /* bandwidth */
    for (size_t s = 0; s < N_SIZES && bw_sizes[s] <= obj_size; s++, nsizes++) {
        int reps = bw_sizes[s] < MIB ? 10 * o->reps : o->reps;
        for (int put = 1; put >= 0; put--) {
            if (!(put ? o->do_put : o->do_get))
                continue;
            time_calls(q, bw_sizes[s], put, 1, NULL);
            time_calls(q, bw_sizes[s], put, reps, t);
            bw[s][put] = bench_stats(t, reps);
        }
    }

    /* posted puts against blocking ones, batches alternating */
    memset(nbi, 0, sizeof(nbi));
    double *tb = calloc(2 * (size_t)o->reps, sizeof(double));
    if (tb == NULL) {
        fprintf(stderr, "bench-sync-remote: out of memory\n");
        return 1;
    }
    for (size_t s = 0; s < N_NBI_SIZES && o->do_put && nbi_sizes[s] * NBI_PUTS <= obj_size;
         s++, nnbi++) {
        time_batch(q, nbi_sizes[s], 0);
        time_batch(q, nbi_sizes[s], 1);
        for (int r = 0; r < o->reps; r++) {
            tb[r] = time_batch(q, nbi_sizes[s], 0) / NBI_PUTS;
            tb[o->reps + r] = time_batch(q, nbi_sizes[s], 1) / NBI_PUTS;
        }
        nbi[s][0] = bench_stats(tb, o->reps);
        nbi[s][1] = bench_stats(tb + o->reps, o->reps);
    }
    free(tb);

    /* correctness: the whole object, put from here, seen in the master */
    for (size_t i = 0; i < obj_size; i++)
        q[i] = check_byte(i);
    BENCH_CHECK(ivmSyncPut(q, obj_size));

    printf("bench-sync-remote: PE on %s, master copy on node0, object %d MiB\n",
           REMOTE_NODE, o->max_mib);
    printf("first ivmMap of the whole object (fills the node copy): %.1f ms\n", map_ms);
    printf("latency, 8 B, %d calls (+%d warm-up), us per call\n", o->lat_calls, o->warmup);
    printf("%-12s %10s %10s %10s\n", "call", "median_us", "p90_us", "min_us");
    for (int put = 1; put >= 0; put--)
        printf("%-12s %10.1f %10.1f %10.1f\n", put ? "ivmSyncPut" : "ivmSyncGet",
               lat[put].median * 1e-3, lat[put].p90 * 1e-3, lat[put].min * 1e-3);
    printf("%-12s %10.1f %10.1f %10.1f   (reference: PE <-> node1 daemon, "
           "ivmCreateDev(IVM_THIS_HOST))\n", "local rtt", ref[1].median * 1e-3,
           ref[1].p90 * 1e-3, ref[1].min * 1e-3);
    printf("%-12s %10.1f %10.1f %10.1f   (reference: PE -> node1 -> node0 daemon "
           "and back, ivmGetNumPEs)\n", "forward rtt", ref[0].median * 1e-3,
           ref[0].p90 * 1e-3, ref[0].min * 1e-3);
    printf("bandwidth, MB/s = 10^6 B / median time (best = fastest call), %d reps "
           "(%d below 1 MiB)\n", o->reps, 10 * o->reps);
    bench_print_bw_table(bw_sizes, nsizes, (const bench_stats_t(*)[2])bw);
    if (nnbi > 0) {
        printf("posted puts: batches of %d puts into as many slots, %d batches each, "
               "us per put (median of the batches)\n", NBI_PUTS, o->reps);
        printf("%-10s %12s %12s %8s\n", "bytes", "ivmSyncPut", "posted", "ratio");
        for (int s = 0; s < nnbi; s++)
            printf("%-10zu %12.1f %12.1f %8.2f\n", nbi_sizes[s], nbi[s][0].median * 1e-3,
                   nbi[s][1].median * 1e-3,
                   nbi[s][1].median > 0 ? nbi[s][0].median / nbi[s][1].median : 0.0);
    }
    printf("RESULT sync_remote_lat put_median_us=%.2f put_p90_us=%.2f get_median_us=%.2f "
           "get_p90_us=%.2f calls=%d\n", lat[1].median * 1e-3, lat[1].p90 * 1e-3,
           lat[0].median * 1e-3, lat[0].p90 * 1e-3, o->lat_calls);
    for (int s = 0; s < nsizes; s++)
        printf("RESULT sync_remote_bw bytes=%zu put_MBps=%.1f get_MBps=%.1f "
               "put_median_us=%.1f get_median_us=%.1f\n", bw_sizes[s],
               mbps(bw_sizes[s], bw[s][1].median), mbps(bw_sizes[s], bw[s][0].median),
               bw[s][1].median * 1e-3, bw[s][0].median * 1e-3);
    for (int s = 0; s < nnbi; s++)
        printf("RESULT sync_remote_nbi bytes=%zu puts=%d blocking_us=%.2f posted_us=%.2f\n",
               nbi_sizes[s], NBI_PUTS, nbi[s][0].median * 1e-3, nbi[s][1].median * 1e-3);
    printf("RESULT sync_remote_ref local_rtt_median_us=%.2f forward_rtt_median_us=%.2f\n",
           ref[1].median * 1e-3, ref[0].median * 1e-3);
    printf("RESULT sync_remote_map map_bytes=%zu first_map_ms=%.2f\n", obj_size, map_ms);
    fflush(stdout);
    free(t);
    BENCH_CHECK(ivmSignal());           /* the master holds the pattern now */
    BENCH_CHECK(ivmUnmap(q));
    return 0;
}

static int run_root(const opts_t *o)
{
    unsigned char *p;
    size_t obj_size = (size_t)o->max_mib * MIB;
    ivm_device dev;
    ivm_pe kid;
    ivmError_t rc;

    BENCH_CHECK(ivmMalloc(OBJ_NAME, &p, obj_size));
    memset(p, 0, obj_size);             /* the master's pages exist before timing */
    p[obj_size - 1] = 0x5A;
    rc = ivmCreateDev(REMOTE_NODE, IVM_CPU_N(0), &dev);
    if (rc == IVM_ERROR_NOT_FOUND) {
        fprintf(stderr, "bench-sync-remote: no node '%s'; run it with ivmrun --nodes 2\n",
                REMOTE_NODE);
        return 2;
    }
    BENCH_CHECK(rc);
    BENCH_CHECK(ivmCreatePEs(dev, 1, &kid));
    if (kid == IVM_PE_NULL) {
        fprintf(stderr, "bench-sync-remote: ivmCreatePEs created no PE\n");
        return 1;
    }
    rc = ivmWait(kid);                  /* the child's signal, or its end */
    BENCH_CHECK(rc);
    size_t bad = obj_size;
    unsigned char got = 0;
    for (size_t i = 0; i < obj_size; i++) {
        if (p[i] != check_byte(i)) {
            bad = i;
            got = p[i];
            break;
        }
    }
    BENCH_CHECK(ivmWait(kid));          /* its exit */
    BENCH_CHECK(ivmDestroyDev(dev));
    BENCH_CHECK(ivmFree(p));
    if (bad != obj_size) {
        fprintf(stderr, "bench-sync-remote: master byte %zu is 0x%02x after the child's "
                        "ivmSyncPut of the whole object, expected 0x%02x\n", bad, got,
                check_byte(bad));
        return 1;
    }
    printf("bench-sync-remote: check passed (the master holds the PE's last Put)\n");
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o = { .max_mib = 64, .lat_calls = 2000, .warmup = 200, .reps = 10,
                 .do_put = 1, .do_get = 1 };
    int opt, id, ret;

    while ((opt = getopt(argc, argv, "s:l:w:r:o:")) != -1) {
        switch (opt) {
        case 's': o.max_mib = bench_parse_int(optarg, 1); break;
        case 'l': o.lat_calls = bench_parse_int(optarg, 1); break;
        case 'w': o.warmup = bench_parse_int(optarg, 0); break;
        case 'r': o.reps = bench_parse_int(optarg, 1); break;
        case 'o':
            o.do_put = strcmp(optarg, "get") != 0;
            o.do_get = strcmp(optarg, "put") != 0;
            if (strcmp(optarg, "put") && strcmp(optarg, "get") && strcmp(optarg, "both"))
                o.max_mib = -1;
            break;
        default: o.max_mib = -1; break;
        }
    }
    if (o.max_mib < 0 || o.max_mib > 4096 || o.lat_calls < 0 || o.warmup < 0 ||
        o.reps < 0 || optind < argc) {
        fprintf(stderr, "usage: %s [-s MAX_MIB (64)] [-l LAT_CALLS (2000)] "
                        "[-w WARMUP (200)] [-r REPS (10)] [-o put|get|both]\n", argv[0]);
        return 2;
    }

    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_root(&o) : run_child(&o);
    BENCH_CHECK(ivmExit());
    return ret;
}
