/*
 * nw-mpi: the MPI baseline of NW. The same kernel and input; rank r of R
 * statically scores the pairs of portions [P*r/R, P*(r+1)/R), and the scores
 * meet on rank 0 (MPI_Gatherv).
 *
 * With --gpu-ranks K, ranks 0..K-1 run the CUDA kernel on a GPU (rank % the
 * visible GPUs): the sequences are copied there once, the scores come back.
 *
 * Run:  mpirun -np R nw-mpi [--size PAIRS] [--portions P] [--iters I] [--verify]
 *                           [--gpu-ranks K]
 */
#include <mpi.h>
#include <stdlib.h>

#include "app.h"
#include "nw.h"

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nw", .size = 256, .seed = 1, .portions = 16, .iters = 1,
                     .threshold = 2.0, .max_per_dev = 1 };
    int rank, nranks, ret = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (app_args_parse(argc, argv, &a, NULL) != 0 || a.size > (1 << 22) ||
        a.portions > a.size || nranks > a.portions) {
        if (rank == 0)
            fprintf(stderr, "nw-mpi: bad arguments (need ranks <= portions <= size)\n");
        MPI_Finalize();
        return 2;
    }
    int n = (int)a.size, P = a.portions;
    size_t *off = malloc((size_t)n * sizeof(*off));
    int *la = malloc((size_t)n * sizeof(int)), *lb = malloc((size_t)n * sizeof(int));
    int *counts = malloc((size_t)nranks * sizeof(int)), *displs = malloc((size_t)nranks * sizeof(int));
    int32_t *score = malloc((size_t)n * sizeof(int32_t));
    char *seq = NULL;
    if (off == NULL || la == NULL || lb == NULL || counts == NULL || displs == NULL ||
        score == NULL) {
        fprintf(stderr, "nw-mpi: no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t total = nw_layout(a.seed, n, off, la, lb);
    seq = malloc(total);
    if (seq == NULL) {
        fprintf(stderr, "nw-mpi: no memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    nw_init(a.seed, n, seq);
    for (int r = 0; r < nranks; r++) {
        displs[r] = nw_portion_lo(n, P, P * r / nranks);
        counts[r] = nw_portion_lo(n, P, P * (r + 1) / nranks) - displs[r];
    }

    app_kernel_t kernel;
#ifdef APP_HAVE_CUDA
    char *dseq = NULL;
    int32_t *dscore = NULL;
#endif
    if (app_kernel_pick_rank(&a, rank, &kernel) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
#ifdef APP_HAVE_CUDA
    if (kernel == APP_KERNEL_CUDA &&
        (app_cuda_alloc((void **)&dseq, total) != 0 ||
         app_cuda_alloc((void **)&dscore, (size_t)counts[rank] * sizeof(int32_t)) != 0 ||
         app_cuda_upload(dseq, seq, total) != 0))
        MPI_Abort(MPI_COMM_WORLD, 1);
#endif

    double slow = app_slow_factor("IVM_DSLB_SLOW", rank);
    if (slow < 1.0)
        MPI_Abort(MPI_COMM_WORLD, 2);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = app_now_s();
    for (int t = 0; t < a.iters; t++) {
        int lo = displs[rank], hi = displs[rank] + counts[rank];
        double ts = app_now_s();
        if (kernel == APP_KERNEL_CPU) {
            nw_pairs_cpu(seq, off, la, lb, score + lo, lo, hi);
        } else {
#ifdef APP_HAVE_CUDA
            if (nw_pairs_cuda(dseq, off, la, lb, dscore, lo, hi) != 0 ||
                app_cuda_download(score + lo, dscore, (size_t)(hi - lo) * sizeof(int32_t)) != 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
#endif
        }
        app_slow_apply(slow, app_now_s() - ts);
        if (rank == 0)
            MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT32_T, score, counts, displs, MPI_INT32_T, 0,
                        MPI_COMM_WORLD);
        else
            MPI_Gatherv(score + displs[rank], counts[rank], MPI_INT32_T, NULL, NULL, NULL,
                        MPI_INT32_T, 0, MPI_COMM_WORLD);
    }
    double seconds = app_now_s() - t0;

    if (rank == 0) {
        app_result_t r;
        app_result_init(&r, "nw", "mpi", a.size);
        r.pes = nranks;
        r.seconds = seconds;
        for (int q = 0; q < nranks; q++) {
            char name[APP_NAME_MAX];
            double work = 0.0;
            for (int k = displs[q]; k < displs[q] + counts[q]; k++)
                work += (double)la[k] * (double)lb[k];
            snprintf(name, sizeof(name), "rank%d", q);
            app_result_add_share(&r, name, work);
        }
        app_checksum_hex(&r, app_fnv1a(score, (size_t)n * sizeof(int32_t)));
        if (a.verify) {
            int32_t *ref = malloc((size_t)n * sizeof(*ref));
            if (ref != NULL && nw_reference(a.seed, n, ref) == 0)
                r.verified = app_verify_exact("nw-mpi", "score", score, ref, (size_t)n,
                                              sizeof(int32_t)) == 0;
            free(ref);
            ret = !r.verified;
        }
        app_result_print(stdout, &r);
    }
#ifdef APP_HAVE_CUDA
    app_cuda_free(dscore);
    app_cuda_free(dseq);
#endif
    free(seq);
    free(score);
    free(displs);
    free(counts);
    free(lb);
    free(la);
    free(off);
    MPI_Finalize();
    return ret;
}
