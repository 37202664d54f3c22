/*
 * bench-mpi-bcast: the MPI baseline of bench-group (issue 17).
 *
 * Every rank holds a buffer of BYTES bytes; rank 0 times REPS calls (after
 * one warm-up call) of MPI_Bcast from rank 0, each between two barriers so
 * that a call is timed from its start until every rank has the bytes (the
 * closing barrier, as ivmSyncPutGroup returns once every mirror has them).
 *
 * Run (the flags of bench/run-group.sh: point-to-point over TCP loopback):
 *   mpirun --allow-run-as-root --oversubscribe -np N --mca btl tcp,self \
 *          bench-mpi-bcast [--size BYTES (16 MiB)] [--reps R (10)]
 * Output: RESULT group op=bcast bytes=B ranks=N median_us=X min_us=Y max_us=Z
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    size_t size = 16u << 20;
    int reps = 10, opt, rank, nranks, bad = 0;
    char *end;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt_long(argc, argv, "s:r:", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': size = (size_t)strtoull(optarg, &end, 10); bad |= *end != '\0'; break;
        case 'r': reps = bench_parse_int(optarg, 1); break;
        default: bad = 1; break;
        }
    }
    if (bad || size == 0 || size > INT_MAX || reps < 1 || optind < argc) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N %s [--size BYTES (16777216, < 2 GiB)] "
                            "[--reps R (10)]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    char *buf = malloc(size);
    double *t = calloc((size_t)reps, sizeof(*t));
    if (buf == NULL || t == NULL) {
        fprintf(stderr, "bench-mpi-bcast: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, rank == 0 ? 0x5A : 0, size);
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now_ns();
        MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t1 = bench_now_ns();
        if (r >= 0)
            t[r] = t1 - t0;
    }
    if (((unsigned char *)buf)[size - 1] != 0x5A) {
        fprintf(stderr, "bench-mpi-bcast: rank %d did not get the root's bytes\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
        bench_stats_t s = bench_stats(t, reps);
        printf("RESULT group op=bcast bytes=%zu ranks=%d median_us=%.1f min_us=%.1f "
               "max_us=%.1f\n", size, nranks, s.median * 1e-3, s.min * 1e-3, s.max * 1e-3);
        fflush(stdout);
    }
    free(t);
    free(buf);
    MPI_Finalize();
    return 0;
}
