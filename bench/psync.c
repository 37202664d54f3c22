/*
 * bench-psync: latency of addressed signals and barriers (issue 16).
 *   ping:    the root and one PE on --node (default: the root's node) bounce an
 *            addressed signal (ivmSignalTo / ivmWaitFrom); one sample is half
 *            an exchange, in us.
 *   barrier: the root and P-1 PEs, spread round robin over the nodes, run
 *            ivmBarrier over all of them; one sample is one barrier as the
 *            root sees it, in us.
 * Prints one line: op, PEs, samples, median, p90, min, max (us).
 * IVM_SIGNAL_BOARD=0 sends same-node signals through the daemon as well.
 *
 * Run:  ivmrun [--nodes N] bench-psync ping|barrier [-n ITERS (2000)] [-p PES (8)]
 *       [--node NAME]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#include "bench_util.h"

#define PES_MAX 64

typedef struct opts {
    const char *op;
    const char *node;
    int iters, pes;
} opts_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void report(const opts_t *o, double *us, int n)
{
    qsort(us, (size_t)n, sizeof(*us), cmp_double);
    printf("op=%s pes=%d samples=%d median_us=%.2f p90_us=%.2f min_us=%.2f max_us=%.2f\n",
           o->op, strcmp(o->op, "ping") == 0 ? 2 : o->pes, n, us[n / 2], us[n * 9 / 10], us[0],
           us[n - 1]);
}

/* The team's ids: PE i > 0 on node (i - 1) % nodes, or all on `node`. */
static void team_create(const opts_t *o, int n, ivm_pe *ids)
{
    char name[IVM_HOST_MAX + 1];
    int nodes, i;

    BENCH_CHECK(ivmGetNumNodes(&nodes));
    ids[0] = 0;
    for (i = 1; i < n; ++i) {
        ivm_device d;
        if (o->node != NULL) {
            snprintf(name, sizeof(name), "%s", o->node);
        } else {
            BENCH_CHECK(ivmGetNodeName(strcmp(o->op, "ping") == 0 ? 0 : (i - 1) % nodes, name,
                                       sizeof(name)));
        }
        BENCH_CHECK(ivmCreateDev(name, IVM_CPU, &d));
        BENCH_CHECK(ivmCreatePEs(d, 1, &ids[i]));
        BENCH_CHECK(ivmDestroyDev(d));
    }
}

static int run_child(const opts_t *o, int me)
{
    int *team, i;

    BENCH_CHECK(ivmWaitFrom(0));
    BENCH_CHECK(ivmMap("team", &team, 0));
    BENCH_CHECK(ivmSyncGet(team, sizeof(int) * (PES_MAX + 1)));
    for (i = 0; i < o->iters + 10; ++i) {
        if (strcmp(o->op, "ping") == 0) {
            BENCH_CHECK(ivmWaitFrom(0));
            BENCH_CHECK(ivmSignalTo(0));
        } else {
            BENCH_CHECK(ivmBarrier(team + 1, team[0]));
        }
    }
    (void)me;
    BENCH_CHECK(ivmExit());
    return 0;
}

static int run_root(const opts_t *o)
{
    int n = strcmp(o->op, "ping") == 0 ? 2 : o->pes, i;
    double *us = malloc(sizeof(double) * (size_t)o->iters), t0;
    int *team;

    if (us == NULL) {
        return 1;
    }
    BENCH_CHECK(ivmMalloc("team", &team, sizeof(int) * (PES_MAX + 1)));
    team[0] = n;
    team_create(o, n, team + 1);
    for (i = 1; i < n; ++i) {
        BENCH_CHECK(ivmSignalTo(team[1 + i]));
    }
    for (i = -10; i < o->iters; ++i) { /* 10 rounds of warm-up */
        t0 = bench_now_ns();
        if (n == 2 && strcmp(o->op, "ping") == 0) {
            BENCH_CHECK(ivmSignalTo(team[2]));
            BENCH_CHECK(ivmWaitFrom(team[2]));
        } else {
            BENCH_CHECK(ivmBarrier(team + 1, n));
        }
        if (i >= 0) {
            us[i] = (bench_now_ns() - t0) / 1e3 / (strcmp(o->op, "ping") == 0 ? 2.0 : 1.0);
        }
    }
    report(o, us, o->iters);
    free(us);
    BENCH_CHECK(ivmExit());
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o = {.op = NULL, .node = NULL, .iters = 2000, .pes = 8};
    int i, me;

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            o.iters = bench_parse_int(argv[++i], 1);
        } else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            o.pes = bench_parse_int(argv[++i], 2);
        } else if (strcmp(argv[i], "--node") == 0 && i + 1 < argc) {
            o.node = argv[++i];
        } else if (o.op == NULL && (!strcmp(argv[i], "ping") || !strcmp(argv[i], "barrier"))) {
            o.op = argv[i];
        } else {
            o.op = NULL;
            break;
        }
    }
    if (o.op == NULL || o.iters < 1 || o.pes < 2 || o.pes > PES_MAX) {
        fprintf(stderr, "usage: %s ping|barrier [-n ITERS] [-p PES (2..%d)] [--node NAME]\n",
                argv[0], PES_MAX);
        return 2;
    }
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&me));
    return me == 0 ? run_root(&o) : run_child(&o, me);
}
