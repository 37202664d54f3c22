/*
 * nbody-mpi: the MPI baseline of NBODY. The same kernel and input; rank r of
 * R statically does particles [n*r/R, n*(r+1)/R) of every time step (with
 * --weights, the split of the particles that best fits the ranks' speeds),
 * then all ranks exchange the new positions (MPI_Allgatherv). Rank 0 prints
 * the result line. --portions only sets the most ranks (one per portion).
 *
 * With --gpu-ranks K, ranks 0..K-1 run the CUDA kernel on a GPU (rank % the
 * visible GPUs): positions and velocities stay on the GPU, each step's new
 * positions of the other ranks are copied in after the exchange.
 *
 * Run:  mpirun -np R nbody-mpi [--size N] [--portions P] [--iters I] [--verify]
 *                              [--gpu-ranks K]
 */
#include <mpi.h>
#include <stdlib.h>

#include "app.h"
#include "app_mpi.h"
#include "nbody.h"

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nbody", .size = 4096, .seed = 1, .portions = 16, .iters = 2,
                     .threshold = 2.0, .max_per_dev = 1 };
    app_mpi_t m;
    int ret = 0;

    if (app_mpi_init(&argc, &argv, &a, NULL, &m) != 0 || a.size > (1 << 24) ||
        a.portions > a.size || m.nranks > a.portions)
        return app_mpi_bad_args(&m, "nbody-mpi: bad arguments (need ranks <= portions <= "
                                "size)\n");
    int n = (int)a.size, rank = m.rank, nranks = m.nranks;
    nbody_vec_t *pos = malloc(2 * (size_t)n * sizeof(*pos));
    nbody_vec_t *vel = malloc((size_t)n * sizeof(*vel));
    int *counts = malloc((size_t)nranks * sizeof(int)), *displs = malloc((size_t)nranks * sizeof(int));
    int *first = malloc((size_t)(nranks + 1) * sizeof(int));
    if (pos == NULL || vel == NULL || counts == NULL || displs == NULL || first == NULL)
        app_mpi_die("nbody-mpi: no memory\n");
    /* Split particle by particle: the equal split, or with --weights the best
       static split there is (not limited to whole portions). */
    app_mpi_split(&m, &a, n, NULL, first);
    for (int r = 0; r < nranks; r++) {
        displs[r] = first[r] * (int)sizeof(nbody_vec_t);
        counts[r] = (first[r + 1] - first[r]) * (int)sizeof(nbody_vec_t);
    }
    int lo = displs[rank] / (int)sizeof(nbody_vec_t);
    int hi = lo + counts[rank] / (int)sizeof(nbody_vec_t);
    size_t vsz = sizeof(nbody_vec_t);
    nbody_init(a.seed, n, pos, vel);
    app_mpi_kernel_pick(&m, &a);
    nbody_vec_t *dpos = app_mpi_device_buf(&m, 2 * (size_t)n * vsz, pos, (size_t)n * vsz);
    nbody_vec_t *dvel = app_mpi_device_buf(&m, (size_t)n * vsz, vel, (size_t)n * vsz);

    app_mpi_timer_start(&m, "IVM_DSLB_SLOW");
    for (int t = 0; t < a.iters; t++) {
        size_t in = (size_t)(t % 2) * n, out = (size_t)(1 - t % 2) * n;
        nbody_vec_t *pout = pos + out;
        double ts = app_now_s();
        if (m.kernel == APP_KERNEL_CPU) {
            nbody_step_cpu(pos + in, pout + lo, vel + lo, n, lo, hi);
        } else {
#ifdef APP_HAVE_CUDA
            if (nbody_step_cuda(dpos + in, dpos + out + lo, dvel + lo, n, lo, hi) != 0 ||
                app_cuda_download(pout + lo, dpos + out + lo, (size_t)(hi - lo) * vsz) != 0)
                app_mpi_die(NULL);
#endif
        }
        app_mpi_kernel_done(&m, ts);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, pout, counts, displs, MPI_BYTE,
                       MPI_COMM_WORLD);
#ifdef APP_HAVE_CUDA
        if (m.kernel == APP_KERNEL_CUDA && app_cuda_upload(dpos + out, pout, (size_t)n * vsz) != 0)
            app_mpi_die(NULL);
#endif
    }
    double seconds = app_now_s() - m.t0;
    app_mpi_busy_gather(&m);

    if (rank == 0) {
        app_result_t r;
        nbody_vec_t *final = pos + (size_t)(a.iters % 2) * n;
        app_mpi_result_init(&m, &r, "nbody", a.size, seconds);
        for (int k = 0; k < nranks; k++)
            app_mpi_share(&m, &r, k, counts[k] / (double)sizeof(nbody_vec_t));
        app_checksum_real(&r, app_weighted_sum_f((const float *)final, (size_t)n * 4));
        if (a.verify) {
            nbody_vec_t *ref = malloc((size_t)n * sizeof(*ref));
            if (ref != NULL && nbody_reference(a.seed, n, a.iters, ref) == 0)
                r.verified = app_verify_f("nbody-mpi", "position", (const float *)final,
                                          (const float *)ref, (size_t)n * 4, NBODY_RTOL,
                                          NBODY_ATOL) == 0;
            free(ref);
            ret = !r.verified;
        }
        app_result_print(stdout, &r);
    }
    (void)dpos;
    (void)dvel;
    free(first);
    free(displs);
    free(counts);
    free(vel);
    free(pos);
    return app_mpi_finish(&m, ret);
}
