/*
 * bench-group: ivmSyncPutGroup / ivmSyncGetGroup of one object held on every
 * node, timed at the master's node (issue 17; baseline: bench-mpi-bcast).
 *
 * The root PE (node0) allocates an object of BYTES bytes (the master copy)
 * and starts one CPU PE on each other node; each maps the whole object (its
 * node's daemon makes and fills a mirror) and signals. The root then times
 * REPS calls (after one warm-up call) of ivmSyncPutGroup (master -> every
 * mirror: a broadcast) or ivmSyncGetGroup (every mirror -> master: a gather)
 * of the whole object, each call alone. Before the last timed Put the root
 * writes a pattern; each PE checks it in its node copy once the root signals
 * the end (a check, not part of the timing).
 *
 * Run:  ivmrun --nodes N bench-group [--size BYTES (16 MiB)] [--reps R (10)]
 *                                    [--op put|get (put)]
 * Output: RESULT group op=put bytes=B nodes=N median_us=X min_us=Y max_us=Z
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#include "bench_util.h"

#define OBJ_NAME "bench-group"

typedef struct {
    size_t size;
    int    reps;
    int    put;
} opts_t;

static unsigned char pattern(size_t i, int rep)
{
    return (unsigned char)((i * 7 + (size_t)rep) % 251);
}

/* A PE on another node: map (its node gets a mirror), signal, wait for the
 * root's end signal, check the last Put's pattern in its node copy. */
static int run_child(const opts_t *o)
{
    unsigned char *q;
    size_t i;

    BENCH_CHECK(ivmMap(OBJ_NAME, &q, 0));
    BENCH_CHECK(ivmSignal());
    BENCH_CHECK(ivmWait(0));
    for (i = 0; o->put && i < o->size; i += 4093) {
        if (q[i] != pattern(i, o->reps)) {
            fprintf(stderr, "bench-group: byte %zu of a mirror is 0x%02x after the last "
                            "ivmSyncPutGroup, expected 0x%02x\n", i, q[i], pattern(i, o->reps));
            return 1;
        }
    }
    BENCH_CHECK(ivmUnmap(q));
    return 0;
}

/* One PE on each node 1 .. nodes-1, each holding a mirror when this returns. */
static int start_mirrors(int nodes, ivm_pe *kids)
{
    char name[IVM_HOST_MAX + 1];
    ivm_device dev;
    int n;

    for (n = 1; n < nodes; ++n) {
        BENCH_CHECK(ivmGetNodeName(n, name, sizeof(name)));
        BENCH_CHECK(ivmCreateDev(name, IVM_CPU_N(0), &dev));
        BENCH_CHECK(ivmCreatePEs(dev, 1, &kids[n]));
        BENCH_CHECK(ivmDestroyDev(dev));
        if (kids[n] == IVM_PE_NULL) {
            fprintf(stderr, "bench-group: no PE could be started on %s\n", name);
            return 1;
        }
    }
    for (n = 1; n < nodes; ++n) {
        BENCH_CHECK(ivmWait(kids[n])); /* it holds its mirror */
    }
    return 0;
}

static void time_group(unsigned char *p, const opts_t *o, double *t)
{
    int r;

    for (r = -1; r < o->reps; ++r) {
        if (o->put && r == o->reps - 1) {
            for (size_t i = 0; i < o->size; ++i) {
                p[i] = pattern(i, o->reps);
            }
        }
        double t0 = bench_now_ns();
        BENCH_CHECK(o->put ? ivmSyncPutGroup(p, o->size) : ivmSyncGetGroup(p, o->size));
        double t1 = bench_now_ns();
        if (r >= 0) {
            t[r] = t1 - t0;
        }
    }
}

static int run_root(const opts_t *o)
{
    ivm_pe *kids;
    unsigned char *p;
    double *t;
    int nodes, n, ret;

    BENCH_CHECK(ivmGetNumNodes(&nodes));
    if (nodes < 2) {
        fprintf(stderr, "bench-group: one node only; run it with ivmrun --nodes N (N >= 2)\n");
        return 2;
    }
    kids = calloc((size_t)nodes, sizeof(*kids));
    t = calloc((size_t)o->reps, sizeof(*t));
    if (kids == NULL || t == NULL) {
        fprintf(stderr, "bench-group: out of memory\n");
        return 1;
    }
    BENCH_CHECK(ivmMalloc(OBJ_NAME, &p, o->size));
    memset(p, 0x3C, o->size);
    ret = start_mirrors(nodes, kids);
    if (ret == 0) {
        time_group(p, o, t);
        bench_stats_t s = bench_stats(t, o->reps);
        printf("RESULT group op=%s bytes=%zu nodes=%d median_us=%.1f min_us=%.1f "
               "max_us=%.1f\n", o->put ? "put" : "get", o->size, nodes, s.median * 1e-3,
               s.min * 1e-3, s.max * 1e-3);
        fflush(stdout);
        for (n = 1; n < nodes; ++n) {
            BENCH_CHECK(ivmSignal());
        }
        for (n = 1; n < nodes; ++n) {
            BENCH_CHECK(ivmWait(kids[n])); /* its exit: it checked its copy */
        }
    }
    BENCH_CHECK(ivmFree(p));
    free(kids);
    free(t);
    return ret;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},
        {"op", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    opts_t o = {.size = 16u << 20, .reps = 10, .put = 1};
    int opt, id, ret, bad = 0;
    char *end;

    while ((opt = getopt_long(argc, argv, "s:r:o:", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': o.size = (size_t)strtoull(optarg, &end, 10); bad |= *end != '\0'; break;
        case 'r': o.reps = bench_parse_int(optarg, 1); break;
        case 'o':
            o.put = strcmp(optarg, "put") == 0;
            bad |= !o.put && strcmp(optarg, "get") != 0;
            break;
        default: bad = 1; break;
        }
    }
    if (bad || o.size == 0 || o.reps < 1 || optind < argc) {
        fprintf(stderr, "usage: ivmrun --nodes N %s [--size BYTES (16777216)] "
                        "[--reps R (10)] [--op put|get (put)]\n", argv[0]);
        return 2;
    }
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_root(&o) : run_child(&o);
    BENCH_CHECK(ivmExit());
    return ret;
}
