/*
 * heat-mpi: the MPI version of examples/heat.c, the baseline its test
 * compares against (same grid, same arithmetic, so the same bits).
 *
 * Rank r of N owns the block of rows heat.c gives worker r; each step it
 * sweeps its rows and swaps edge rows with its neighbours (MPI_Sendrecv);
 * rank 0 gathers the blocks (MPI_Gatherv) and prints the grid's hash.
 *
 * Run:  mpirun -np 3 ./heat-mpi [nx (96)] [ny (60)] [steps (100)]
 * Prints "heat: grid hash 0x... sum ..." (rank 0), exit 0.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define ALPHA    0.2
#define T_TOP    100.0
#define T_BOTTOM 0.0

static int nx = 96, ny = 60, steps = 100;

/* Row i (0 .. ny+1, global numbering) of buffer b; a rank holds rows
   [r0-1, r1], stored from local index 0. */
static double *row(double *g, int rows, int b, int i_local)
{
    return g + ((size_t)b * (size_t)rows + (size_t)i_local) * (size_t)nx;
}

static void block_of(int w, int n, int *r0, int *r1)
{
    *r0 = 1 + (int)((long)ny * w / n);
    *r1 = 1 + (int)((long)ny * (w + 1) / n);
}

static int parse_args(int argc, char **argv)
{
    int *fields[] = { &nx, &ny, &steps };

    if (argc > 4)
        return -1;
    for (int i = 1; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (argv[i][0] == '\0' || *end != '\0' || v < 1 || v > INT_MAX / 4)
            return -1;
        *fields[i - 1] = (int)v;
    }
    return nx >= 3 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int rank, size, r0, r1, rows;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse_args(argc, argv) != 0 || size > ny) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N %s [nx>=3] [ny>=N] [steps]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    block_of(rank, size, &r0, &r1);
    rows = r1 - r0 + 2;
    double *g = calloc(2 * (size_t)rows * (size_t)nx, sizeof(double));
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < nx; j++) {
            if (r0 == 1)
                row(g, rows, b, 0)[j] = T_TOP;
            if (r1 == ny + 1)
                row(g, rows, b, rows - 1)[j] = T_BOTTOM;
        }
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    for (int t = 0; t < steps; t++) {
        int src = t % 2, dst = 1 - src;
        for (int i = 1; i < rows - 1; i++) {
            const double *u = row(g, rows, src, i - 1), *m = row(g, rows, src, i);
            const double *d = row(g, rows, src, i + 1);
            double *out = row(g, rows, dst, i);
            for (int j = 1; j < nx - 1; j++)
                out[j] = m[j] + ALPHA * (u[j] + d[j] + m[j - 1] + m[j + 1] - 4.0 * m[j]);
        }
        MPI_Sendrecv(row(g, rows, dst, 1), nx, MPI_DOUBLE, up, 0,
                     row(g, rows, dst, rows - 1), nx, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(row(g, rows, dst, rows - 2), nx, MPI_DOUBLE, down, 1,
                     row(g, rows, dst, 0), nx, MPI_DOUBLE, up, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    /* Gather the interior blocks of the final buffer on rank 0. */
    int fin = steps % 2, *counts = NULL, *displs = NULL;
    double *all = NULL;
    if (rank == 0) {
        counts = malloc((size_t)size * sizeof(int));
        displs = malloc((size_t)size * sizeof(int));
        all = malloc((size_t)(ny + 2) * (size_t)nx * sizeof(double));
        for (int w = 0; w < size; w++) {
            int a, b;
            block_of(w, size, &a, &b);
            counts[w] = (b - a) * nx;
            displs[w] = a * nx;
        }
        for (int j = 0; j < nx; j++) {
            all[j] = T_TOP;
            all[(size_t)(ny + 1) * (size_t)nx + (size_t)j] = T_BOTTOM;
        }
    }
    MPI_Gatherv(row(g, rows, fin, 1), (r1 - r0) * nx, MPI_DOUBLE, all, counts, displs,
                MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        size_t n = (size_t)(ny + 2) * (size_t)nx;
        const unsigned char *p = (const unsigned char *)all;
        uint64_t h = 1469598103934665603ull;
        double sum = 0.0;
        for (size_t k = 0; k < n * sizeof(double); k++)
            h = (h ^ p[k]) * 1099511628211ull;
        for (size_t k = 0; k < n; k++)
            sum += all[k];
        printf("heat: grid hash 0x%016llx sum %.6f\n", (unsigned long long)h, sum);
        free(all);
        free(displs);
        free(counts);
    }
    free(g);
    MPI_Finalize();
    return 0;
}
