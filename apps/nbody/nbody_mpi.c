/*
 * nbody-mpi: the MPI baseline of NBODY. The same kernel and input; rank r of
 * R statically does portions [P*r/R, P*(r+1)/R) of every time step (the same
 * particle ranges as the IVM portions), then all ranks exchange the new
 * positions (MPI_Allgatherv). Rank 0 prints the result line.
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
#include "nbody.h"

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nbody", .size = 4096, .seed = 1, .portions = 16, .iters = 2,
                     .threshold = 2.0, .max_per_dev = 1 };
    int rank, nranks, ret = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (app_args_parse(argc, argv, &a, NULL) != 0 || a.size > (1 << 24) ||
        a.portions > a.size || nranks > a.portions) {
        if (rank == 0)
            fprintf(stderr, "nbody-mpi: bad arguments (need ranks <= portions <= size)\n");
        MPI_Finalize();
        return 2;
    }
    int n = (int)a.size, P = a.portions;
    nbody_vec_t *pos = malloc(2 * (size_t)n * sizeof(*pos));
    nbody_vec_t *vel = malloc((size_t)n * sizeof(*vel));
    int *counts = malloc((size_t)nranks * sizeof(int)), *displs = malloc((size_t)nranks * sizeof(int));
    if (pos == NULL || vel == NULL || counts == NULL || displs == NULL) {
        fprintf(stderr, "nbody-mpi: no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int r = 0; r < nranks; r++) {
        int lo = nbody_portion_lo(n, P, P * r / nranks);
        int hi = nbody_portion_lo(n, P, P * (r + 1) / nranks);
        displs[r] = lo * (int)sizeof(nbody_vec_t);
        counts[r] = (hi - lo) * (int)sizeof(nbody_vec_t);
    }
    int lo = displs[rank] / (int)sizeof(nbody_vec_t);
    int hi = lo + counts[rank] / (int)sizeof(nbody_vec_t);
    nbody_init(a.seed, n, pos, vel);
    app_kernel_t kernel;
#ifdef APP_HAVE_CUDA
    nbody_vec_t *dpos = NULL, *dvel = NULL;
    size_t vsz = sizeof(nbody_vec_t);
#endif
    if (app_kernel_pick_rank(&a, rank, &kernel) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
#ifdef APP_HAVE_CUDA
    if (kernel == APP_KERNEL_CUDA &&
        (app_cuda_alloc((void **)&dpos, 2 * (size_t)n * vsz) != 0 ||
         app_cuda_alloc((void **)&dvel, (size_t)n * vsz) != 0 ||
         app_cuda_upload(dpos, pos, (size_t)n * vsz) != 0 ||
         app_cuda_upload(dvel, vel, (size_t)n * vsz) != 0))
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif

    double slow = app_slow_factor("IVM_DSLB_SLOW", rank);
    if (slow < 1.0)
        MPI_Abort(MPI_COMM_WORLD, 2);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = app_now_s();
    for (int t = 0; t < a.iters; t++) {
        size_t in = (size_t)(t % 2) * n, out = (size_t)(1 - t % 2) * n;
        nbody_vec_t *pout = pos + out;
        double ts = app_now_s();
        if (kernel == APP_KERNEL_CPU) {
            nbody_step_cpu(pos + in, pout + lo, vel + lo, n, lo, hi);
        } else {
#ifdef APP_HAVE_CUDA
            if (nbody_step_cuda(dpos + in, dpos + out + lo, dvel + lo, n, lo, hi) != 0 ||
                app_cuda_download(pout + lo, dpos + out + lo, (size_t)(hi - lo) * vsz) != 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
#endif
        }
        app_slow_apply(slow, app_now_s() - ts);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, pout, counts, displs, MPI_BYTE,
                       MPI_COMM_WORLD);
#ifdef APP_HAVE_CUDA
        if (kernel == APP_KERNEL_CUDA && app_cuda_upload(dpos + out, pout, (size_t)n * vsz) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    }
    double seconds = app_now_s() - t0;

    if (rank == 0) {
        app_result_t r;
        nbody_vec_t *final = pos + (size_t)(a.iters % 2) * n;
        app_result_init(&r, "nbody", "mpi", a.size);
        r.pes = nranks;
        r.seconds = seconds;
        for (int k = 0; k < nranks; k++) {
            char name[APP_NAME_MAX];
            snprintf(name, sizeof(name), "rank%d", k);
            app_result_add_share(&r, name, counts[k] / (double)sizeof(nbody_vec_t));
        }
        app_checksum_real(&r, app_weighted_sum_f((const float *)final, (size_t)n * 4));
        ret = 0;
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
    } else {
        ret = 0;
    }
#ifdef APP_HAVE_CUDA
    app_cuda_free(dvel);
    app_cuda_free(dpos);
#endif
    free(displs);
    free(counts);
    free(vel);
    free(pos);
    MPI_Finalize();
    return ret;
}
