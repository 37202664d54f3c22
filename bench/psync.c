/*
 * bench-psync: latency of addressed signals and barriers (issue 16).
 *   ping:    the root and one PE on --node (default: the root's node) bounce an
 *            addressed signal (ivmSignalTo / ivmWaitFrom); one sample is half
 *            an exchange, in us.
 *   ownping: the same with the plain signals (ivmSignal / ivmWait, each on
 *            the signaller's own count).
 *   barrier: the root and P-1 PEs, spread round robin over the nodes, run
 *            ivmBarrier over all of them; one sample is one barrier as the
 *            root sees it, in us.
 *   halo:    the root and one PE on --node (default: node1, else the root's
 *            node) exchange a row of --bytes per step, the halo exchange of a
 *            1-D stencil split in two: each PE writes its row into the other's
 *            in-box (an object whose master is on the receiver's node, two
 *            rows by the step's parity), ivmSyncPutSignal, ivmWaitFrom, and
 *            ivmSyncGet of its own in-box; one sample is one step, in us.
 *            The MPI_Sendrecv baseline is bench-mpi-psync halo. --split:
 *            ivmSyncPut then ivmSignalTo instead, and the root prints the
 *            medians of the step's parts (put, signal, wait + get).
 * Prints one line: op, PEs, samples, median, p90, min, max (us).
 * IVM_SIGNAL_BOARD=0 sends same-node signals through the daemon as well.
 *
 * Run:  ivmrun [--nodes N] bench-psync ping|ownping|barrier|halo [-n ITERS (2000)] [-p PES (8)]
 *       [--node NAME] [--bytes B (8192)] [--split]
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
    int iters, pes, bytes;
    int split; /* halo: ivmSyncPut + ivmSignalTo, timed apart */
} opts_t;

static int is_pair(const opts_t *o)
{
    return strcmp(o->op, "barrier") != 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void report(const opts_t *o, double *us, int n)
{
    qsort(us, (size_t)n, sizeof(*us), cmp_double);
    printf("op=%s pes=%d samples=%d median_us=%.2f p90_us=%.2f min_us=%.2f max_us=%.2f\n",
           o->op, is_pair(o) ? 2 : o->pes, n, us[n / 2], us[n * 9 / 10], us[0],
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
            int node = strcmp(o->op, "halo") == 0 ? (nodes > 1) : (i - 1) % nodes;
            BENCH_CHECK(ivmGetNodeName(strcmp(o->op, "ping") == 0 ? 0 : node, name,
                                       sizeof(name)));
        }
        BENCH_CHECK(ivmCreateDev(name, IVM_CPU, &d));
        BENCH_CHECK(ivmCreatePEs(d, 1, &ids[i]));
        BENCH_CHECK(ivmDestroyDev(d));
    }
}

/* The halo exchange between me and other: my in-box "box<me>" (master on my
 * node) is set up by me, the other's mapped once it said it has it. */
typedef struct halo {
    char  *mine, *theirs, *row;
    double *part[3];         /* root, --split: put, signal, wait+get per step, us */
} halo_t;

static void halo_open(const opts_t *o, int me, int other, halo_t *h)
{
    char name[32];

    snprintf(name, sizeof(name), "box%d", me);
    BENCH_CHECK(ivmMalloc(name, &h->mine, 2 * (size_t)o->bytes));
    BENCH_CHECK(ivmSignalTo(other));
    BENCH_CHECK(ivmWaitFrom(other));
    snprintf(name, sizeof(name), "box%d", other);
    BENCH_CHECK(ivmMap(name, &h->theirs, 2 * (size_t)o->bytes));
    h->row = malloc((size_t)o->bytes);
    if (h->row == NULL) {
        fprintf(stderr, "bench-psync: out of memory\n");
        exit(1);
    }
    memset(h->row, me + 1, (size_t)o->bytes);
}

/* One step: the row by the step's parity, so that the other, at most one
 * step ahead (it needs our signal), never writes the half we read. */
static void halo_step(const opts_t *o, int other, halo_t *h, int i)
{
    size_t off = (size_t)(i & 1) * (size_t)o->bytes;
    double t[4];

    memcpy(h->theirs + off, h->row, (size_t)o->bytes);
    t[0] = bench_now_ns();
    if (o->split) {
        BENCH_CHECK(ivmSyncPut(h->theirs + off, (size_t)o->bytes));
        t[1] = bench_now_ns();
        BENCH_CHECK(ivmSignalTo(other));
    } else {
        BENCH_CHECK(ivmSyncPutSignal(h->theirs + off, (size_t)o->bytes, other));
        t[1] = bench_now_ns();
    }
    t[2] = bench_now_ns();
    BENCH_CHECK(ivmWaitFrom(other));
    BENCH_CHECK(ivmSyncGet(h->mine + off, (size_t)o->bytes));
    t[3] = bench_now_ns();
    h->row[0] = h->mine[off];
    if (h->part[0] != NULL && i >= 10) {
        h->part[0][i - 10] = (t[1] - t[0]) / 1e3;
        h->part[1][i - 10] = (t[2] - t[1]) / 1e3;
        h->part[2][i - 10] = (t[3] - t[2]) / 1e3;
    }
}

/* --split: the medians of the step's parts, as the root saw them. */
static void halo_parts(const opts_t *o, halo_t *h)
{
    int k;

    if (h->part[0] == NULL) {
        return;
    }
    for (k = 0; k < 3; ++k) {
        qsort(h->part[k], (size_t)o->iters, sizeof(double), cmp_double);
    }
    printf("halo parts (root, median us): put %.2f signal %.2f wait+get %.2f\n",
           h->part[0][o->iters / 2], h->part[1][o->iters / 2], h->part[2][o->iters / 2]);
    for (k = 0; k < 3; ++k) {
        free(h->part[k]);
    }
}

static int run_child(const opts_t *o, int me)
{
    int *team, i;

    BENCH_CHECK(ivmWaitFrom(0));
    BENCH_CHECK(ivmMap("team", &team, 0));
    BENCH_CHECK(ivmSyncGet(team, sizeof(int) * (PES_MAX + 1)));
    if (strcmp(o->op, "halo") == 0) {
        halo_t h = {0};
        halo_open(o, me, 0, &h);
        for (i = 0; i < o->iters + 10; ++i) {
            halo_step(o, 0, &h, i);
        }
        free(h.row);
        BENCH_CHECK(ivmExit());
        return 0;
    }
    for (i = 0; i < o->iters + 10; ++i) {
        if (strcmp(o->op, "ping") == 0) {
            BENCH_CHECK(ivmWaitFrom(0));
            BENCH_CHECK(ivmSignalTo(0));
        } else if (strcmp(o->op, "ownping") == 0) {
            BENCH_CHECK(ivmWait(0));
            BENCH_CHECK(ivmSignal());
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
    int n = is_pair(o) ? 2 : o->pes, i;
    double *us = malloc(sizeof(double) * (size_t)o->iters), t0;
    int *team;
    halo_t h = {0};

    if (us == NULL) {
        return 1;
    }
    BENCH_CHECK(ivmMalloc("team", &team, sizeof(int) * (PES_MAX + 1)));
    team[0] = n;
    team_create(o, n, team + 1);
    for (i = 1; i < n; ++i) {
        BENCH_CHECK(ivmSignalTo(team[1 + i]));
    }
    if (strcmp(o->op, "halo") == 0) {
        halo_open(o, 0, team[2], &h);
        for (i = 0; i < 3 && o->split; ++i) {
            h.part[i] = calloc((size_t)o->iters, sizeof(double));
            if (h.part[i] == NULL) {
                return 1;
            }
        }
    }
    for (i = -10; i < o->iters; ++i) { /* 10 rounds of warm-up */
        t0 = bench_now_ns();
        if (strcmp(o->op, "halo") == 0) {
            halo_step(o, team[2], &h, i + 10);
        } else if (n == 2 && strcmp(o->op, "ping") == 0) {
            BENCH_CHECK(ivmSignalTo(team[2]));
            BENCH_CHECK(ivmWaitFrom(team[2]));
        } else if (n == 2 && strcmp(o->op, "ownping") == 0) {
            BENCH_CHECK(ivmSignal());
            BENCH_CHECK(ivmWait(team[2]));
        } else {
            BENCH_CHECK(ivmBarrier(team + 1, n));
        }
        if (i >= 0) {
            us[i] = (bench_now_ns() - t0) / 1e3 / (is_pair(o) && strcmp(o->op, "halo") != 0 ? 2.0 : 1.0);
        }
    }
    report(o, us, o->iters);
    halo_parts(o, &h);
    free(us);
    free(h.row);
    BENCH_CHECK(ivmExit());
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o = {.op = NULL, .node = NULL, .iters = 2000, .pes = 8, .bytes = 8192};
    int i, me;

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            o.iters = bench_parse_int(argv[++i], 1);
        } else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            o.pes = bench_parse_int(argv[++i], 2);
        } else if (strcmp(argv[i], "--node") == 0 && i + 1 < argc) {
            o.node = argv[++i];
        } else if (strcmp(argv[i], "--split") == 0) {
            o.split = 1;
        } else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
            o.bytes = bench_parse_int(argv[++i], 1);
        } else if (o.op == NULL && (!strcmp(argv[i], "ping") || !strcmp(argv[i], "ownping") ||
                                    !strcmp(argv[i], "barrier") || !strcmp(argv[i], "halo"))) {
            o.op = argv[i];
        } else {
            o.op = NULL;
            break;
        }
    }
    if (o.op == NULL || o.iters < 1 || o.pes < 2 || o.pes > PES_MAX) {
        fprintf(stderr,
                "usage: %s ping|ownping|barrier|halo [-n ITERS] [-p PES (2..%d)] [--node NAME] "
                "[--bytes B] [--split]\n",
                argv[0], PES_MAX);
        return 2;
    }
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&me));
    return me == 0 ? run_root(&o) : run_child(&o, me);
}
