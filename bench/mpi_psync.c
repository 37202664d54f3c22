/*
 * bench-mpi-psync: the MPI baselines of bench-psync (issue 16).
 *   ping:    ranks 0 and 1 bounce a 0 B MPI_Send/MPI_Recv; one sample is half
 *            an exchange, in us.
 *   barrier: MPI_Barrier over all ranks; one sample is one barrier as rank 0
 *            sees it, in us.
 *   halo:    ranks 0 and 1 exchange one row of --bytes each way per step with
 *            MPI_Sendrecv (the halo exchange of a 1-D stencil split in two);
 *            one sample is one step, in us.
 * Prints the same line as bench-psync: op, PEs, samples, median, p90, min,
 * max (us).
 *
 * Run:  mpirun -np P bench-mpi-psync ping|barrier|halo [-n ITERS (2000)]
 *       [--bytes B (8192)]
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    const char *op;
    int iters, bytes;
} opts_t;

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void report(const opts_t *o, int np, double *us, int n)
{
    qsort(us, (size_t)n, sizeof(*us), cmp_double);
    printf("op=%s pes=%d samples=%d median_us=%.2f p90_us=%.2f min_us=%.2f max_us=%.2f\n",
           o->op, strcmp(o->op, "barrier") == 0 ? np : 2, n, us[n / 2], us[n * 9 / 10], us[0],
           us[n - 1]);
}

/* One step of op for rank me; ranks past 1 only take part in barriers. */
static void step(const opts_t *o, int me, char *out, char *in)
{
    int peer = 1 - me;

    if (strcmp(o->op, "barrier") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (me > 1) {
        return;
    } else if (strcmp(o->op, "halo") == 0) {
        MPI_Sendrecv(out, o->bytes, MPI_BYTE, peer, 1, in, o->bytes, MPI_BYTE, peer, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (me == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    int i;

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            o->iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
            o->bytes = atoi(argv[++i]);
        } else if (o->op == NULL && (!strcmp(argv[i], "ping") || !strcmp(argv[i], "barrier") ||
                                     !strcmp(argv[i], "halo"))) {
            o->op = argv[i];
        } else {
            return -1;
        }
    }
    return o->op != NULL && o->iters >= 1 && o->bytes >= 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts_t o = {.op = NULL, .iters = 2000, .bytes = 8192};
    int me, np, i;
    double *us, t0;
    char *out, *in;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (parse_opts(argc, argv, &o) != 0 || np < 2) {
        if (me == 0) {
            fprintf(stderr, "usage: mpirun -np P (>= 2) %s ping|barrier|halo [-n ITERS] "
                            "[--bytes B]\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    us  = malloc(sizeof(double) * (size_t)o.iters);
    out = calloc(1, (size_t)o.bytes);
    in  = calloc(1, (size_t)o.bytes);
    if (us == NULL || out == NULL || in == NULL) {
        fprintf(stderr, "bench-mpi-psync: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (i = -10; i < o.iters; ++i) { /* 10 rounds of warm-up, as bench-psync */
        t0 = now_us();
        step(&o, me, out, in);
        if (i >= 0) {
            us[i] = (now_us() - t0) / (strcmp(o.op, "ping") == 0 ? 2.0 : 1.0);
        }
    }
    if (me == 0) {
        report(&o, np, us, o.iters);
    }
    free(us);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
