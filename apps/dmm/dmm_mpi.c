/*
 * dmm-mpi: the MPI baseline of DMM. The same kernel, input and tiles (--tiles,
 * dmm.h); rank r of R statically computes a run of tiles in row order, tile
 * by tile: its R-th of them, or with --weights the run that best fits the
 * ranks' speeds (app_mpi_split). Every rank builds A and Bt from the
 * seed; a run of tiles is one range of the tile-major C, and the ranges
 * meet on rank 0 by an MPI_Gatherv after every iteration.
 *
 * With --gpu-ranks K, ranks 0..K-1 run the CUDA kernel on a GPU (rank % the
 * visible GPUs): A and Bt are copied there once, C comes back after the tiles.
 *
 * Run:  mpirun -np R dmm-mpi [--size N] [--tiles M*M] [--iters I] [--verify]
 *                            [--weights W0,..] [--gpu-ranks K]
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "app_mpi.h"
#include "dmm.h"

int main(int argc, char **argv)
{
    app_args_t a = { .app = "dmm", .size = 512, .seed = 1, .portions = 16, .iters = 1,
                     .threshold = 2.0, .max_per_dev = 1 };
    app_mpi_t m;
    int ret = 0, M;

    if (app_mpi_init(&argc, &argv, &a, NULL, &m) != 0)
        M = -1;
    else
        M = a.size > 32768 ? -1 : dmm_grid(&a);
    if (M < 0 || m.nranks > M * M)
        return app_mpi_bad_args(&m, "dmm-mpi: bad arguments (size <= 32768, tiles a square "
                                "M*M, M <= size, ranks <= tiles)\n");
    int n = (int)a.size, P = M * M, rank = m.rank, nranks = m.nranks;
    size_t nn = (size_t)n * (size_t)n;
    float *A = malloc(nn * sizeof(float)), *Bt = malloc(nn * sizeof(float));
    float *C = calloc(nn, sizeof(float));
    if (A == NULL || Bt == NULL || C == NULL) {
        fprintf(stderr, "dmm-mpi: no memory for n = %d\n", n);
        app_mpi_die(NULL);
    }
    /* Tiles in row order, each its rows x cols of work. */
    double *work = malloc((size_t)P * sizeof(double));
    int *first = malloc((size_t)(nranks + 1) * sizeof(int));
    int *count = malloc((size_t)nranks * sizeof(int));
    int *displ = malloc((size_t)nranks * sizeof(int));
    if (work == NULL || first == NULL || count == NULL || displ == NULL)
        app_mpi_die("dmm-mpi: no memory\n");
    for (int k = 0; k < P; k++)
        work[k] = (double)(dmm_tile_at(n, M, k + 1) - dmm_tile_at(n, M, k));
    app_mpi_split(&m, &a, P, work, first);
    for (int q = 0; q < nranks; q++) { /* rank q's range of C (n <= 32768: fits an int) */
        displ[q] = (int)dmm_tile_at(n, M, first[q]);
        count[q] = (int)dmm_tile_at(n, M, first[q + 1]) - displ[q];
    }
    dmm_init(a.seed, n, A, Bt);
    app_mpi_kernel_pick(&m, &a);
    float *dA = app_mpi_device_buf(&m, nn * sizeof(float), A, nn * sizeof(float));
    float *dBt = app_mpi_device_buf(&m, nn * sizeof(float), Bt, nn * sizeof(float));
    float *dC = app_mpi_device_buf(&m, nn * sizeof(float), C, nn * sizeof(float));

    app_mpi_timer_start(&m, "IVM_DSLB_SLOW");
    for (int t = 0; t < a.iters; t++) {
        double ts = app_now_s();
        for (int k = first[rank]; k < first[rank + 1]; k++) {
            int i = k / M, j = k % M;
            int r0 = dmm_lo(n, M, i), c0 = dmm_lo(n, M, j);
            int rows = dmm_lo(n, M, i + 1) - r0, cols = dmm_lo(n, M, j + 1) - c0;
            size_t off = dmm_tile_off(n, M, i, j);
            if (m.kernel == APP_KERNEL_CPU) {
                dmm_tile_cpu(A + (size_t)r0 * n, Bt + (size_t)c0 * n, C + off, n, rows, cols);
            } else {
#ifdef APP_HAVE_CUDA
                if (dmm_tile_cuda(dA + (size_t)r0 * n, dBt + (size_t)c0 * n, dC + off, n, rows,
                                  cols) != 0)
                    app_mpi_die(NULL);
#endif
            }
        }
#ifdef APP_HAVE_CUDA
        if (m.kernel == APP_KERNEL_CUDA &&
            app_cuda_download(C + displ[rank], dC + displ[rank],
                              (size_t)count[rank] * sizeof(float)) != 0)
            app_mpi_die(NULL);
#endif
        app_mpi_kernel_done(&m, ts);
        MPI_Gatherv(rank == 0 ? MPI_IN_PLACE : C + displ[rank], count[rank], MPI_FLOAT, C, count,
                    displ, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
    double seconds = app_now_s() - m.t0;
    app_mpi_busy_gather(&m);

    if (rank == 0) {
        app_result_t r;
        float *rowmajor = malloc(nn * sizeof(float));
        app_mpi_result_init(&m, &r, "dmm", a.size, seconds);
        for (int q = 0; q < nranks; q++) {
            double done = 0.0;
            for (int k = first[q]; k < first[q + 1]; k++)
                done += work[k];
            app_mpi_share(&m, &r, q, done);
        }
        if (rowmajor == NULL)
            app_mpi_die("dmm-mpi: no memory\n");
        dmm_untile(C, rowmajor, n, M);
        app_checksum_real(&r, app_weighted_sum_f(rowmajor, nn));
        if (a.verify) {
            float *ref = malloc(nn * sizeof(float));
            if (ref != NULL && dmm_reference(a.seed, n, ref) == 0)
                r.verified = app_verify_f("dmm-mpi", "C", rowmajor, ref, nn, DMM_RTOL,
                                          DMM_ATOL) == 0;
            free(ref);
            ret = !r.verified;
        }
        app_result_print(stdout, &r);
        free(rowmajor);
    }
    (void)dA;
    (void)dBt;
    (void)dC;
    free(displ);
    free(count);
    free(first);
    free(work);
    free(C);
    free(Bt);
    free(A);
    return app_mpi_finish(&m, ret);
}
