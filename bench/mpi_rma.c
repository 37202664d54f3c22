/*
 * bench-mpi-rma: MPI one-sided baseline for bench-sync-remote.
 *
 * Two ranks; rank 0 (origin) measures against rank 1 (target), which only
 * waits in MPI_Barrier (so it drives MPI progress, as a target of the pt2pt
 * one-sided component must). Both expose a window of MAX_MIB MiB. Inside one
 * passive-target epoch (MPI_Win_lock shared on rank 1):
 *   - latency: MPI_Put (resp. MPI_Get) of 8 bytes + MPI_Win_flush(1), each
 *     pair timed alone, LAT_CALLS pairs after WARMUP; median and p90 in us;
 *   - bandwidth: the same with 4 KiB, 64 KiB, 1 MiB, 16 MiB, 64 MiB,
 *     REPS pairs after one warm-up (10 x REPS below 1 MiB), MB/s = 10^6 B /
 *     median time.
 * MPI_Win_flush returns when the operation is complete at the target (Put)
 * or at the origin (Get): the same blocking completion as ivmSyncPut/Get.
 *
 * Run (the flags of bench/run-remote.sh: one-sided over point-to-point over TCP):
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca osc pt2pt \
 *          --mca pml ob1 --mca btl self,tcp bench-mpi-rma [-s MAX_MIB (64)] \
 *          [-l LAT_CALLS (2000)] [-w WARMUP (200)] [-r REPS (10)]
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#define MIB (1024u * 1024u)

static const size_t bw_sizes[] = { 4096, 64 * 1024, MIB, 16 * MIB, 64 * MIB };
#define N_SIZES (sizeof(bw_sizes) / sizeof(bw_sizes[0]))

/* n Put (put != 0) or Get + flush pairs of len bytes to rank 1; t[i] in ns. */
static void rma(MPI_Win win, char *buf, size_t len, int put, int n, double *t)
{
    for (int i = 0; i < n; i++) {
        if (put)
            buf[0] = (char)i;
        double t0 = bench_now_ns();
        if (put)
            MPI_Put(buf, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win);
        else
            MPI_Get(buf, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win);
        MPI_Win_flush(1, win);
        double t1 = bench_now_ns();
        if (t != NULL)
            t[i] = t1 - t0;
    }
}

int main(int argc, char **argv)
{
    int max_mib = 64, lat_calls = 2000, warmup = 200, reps = 10, opt, rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "s:l:w:r:")) != -1) {
        switch (opt) {
        case 's': max_mib = bench_parse_int(optarg, 1); break;
        case 'l': lat_calls = bench_parse_int(optarg, 1); break;
        case 'w': warmup = bench_parse_int(optarg, 0); break;
        case 'r': reps = bench_parse_int(optarg, 1); break;
        default: max_mib = -1; break;
        }
    }
    if (max_mib < 0 || max_mib > 1024 || lat_calls < 0 || warmup < 0 || reps < 0 ||
        optind < argc || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s [-s MAX_MIB (64, <= 1024)] "
                            "[-l LAT_CALLS (2000)] [-w WARMUP (200)] [-r REPS (10)]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    size_t bufsize = (size_t)max_mib * MIB;
    char *buf = malloc(bufsize);
    if (buf == NULL) {
        fprintf(stderr, "bench-mpi-rma: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 0x3C, bufsize);
    MPI_Win win;
    MPI_Win_create(buf, (MPI_Aint)bufsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);

    if (rank == 0) {
        int n = lat_calls > 10 * reps ? lat_calls : 10 * reps;
        double *t = calloc((size_t)n, sizeof(double));
        bench_stats_t lat[2], bw[N_SIZES][2];
        int nsizes = 0;

        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int put = 1; put >= 0; put--) {
            rma(win, buf, 8, put, warmup, NULL);
            rma(win, buf, 8, put, lat_calls, t);
            lat[put] = bench_stats(t, lat_calls);
        }
        for (size_t s = 0; s < N_SIZES && bw_sizes[s] <= bufsize; s++, nsizes++) {
            int r = bw_sizes[s] < MIB ? 10 * reps : reps;
            for (int put = 1; put >= 0; put--) {
                rma(win, buf, bw_sizes[s], put, 1, NULL);
                rma(win, buf, bw_sizes[s], put, r, t);
                bw[s][put] = bench_stats(t, r);
            }
        }
        MPI_Win_unlock(1, win);

        printf("bench-mpi-rma: 2 ranks, origin 0, target 1, passive target "
               "(MPI_Win_lock shared), each op + MPI_Win_flush timed\n");
        printf("latency, 8 B, %d ops (+%d warm-up), us per op + flush\n", lat_calls, warmup);
        printf("%-12s %10s %10s %10s\n", "op", "median_us", "p90_us", "min_us");
        for (int put = 1; put >= 0; put--)
            printf("%-12s %10.1f %10.1f %10.1f\n", put ? "MPI_Put" : "MPI_Get",
                   lat[put].median * 1e-3, lat[put].p90 * 1e-3, lat[put].min * 1e-3);
        printf("bandwidth, MB/s = 10^6 B / median time (best = fastest), %d reps "
               "(%d below 1 MiB)\n", reps, 10 * reps);
        bench_print_bw_table(bw_sizes, nsizes, (const bench_stats_t(*)[2])bw);
        printf("RESULT mpi_lat put_median_us=%.2f put_p90_us=%.2f get_median_us=%.2f "
               "get_p90_us=%.2f calls=%d\n", lat[1].median * 1e-3, lat[1].p90 * 1e-3,
               lat[0].median * 1e-3, lat[0].p90 * 1e-3, lat_calls);
        for (int s = 0; s < nsizes; s++) {
            double b = (double)bw_sizes[s] * 1e3;
            printf("RESULT mpi_bw bytes=%zu put_MBps=%.1f get_MBps=%.1f put_median_us=%.1f "
                   "get_median_us=%.1f\n", bw_sizes[s], b / bw[s][1].median,
                   b / bw[s][0].median, bw[s][1].median * 1e-3, bw[s][0].median * 1e-3);
        }
        fflush(stdout);
        free(t);
    }
    MPI_Barrier(MPI_COMM_WORLD);        /* rank 1 drives progress in here */
    MPI_Win_free(&win);
    free(buf);
    MPI_Finalize();
    return 0;
}
