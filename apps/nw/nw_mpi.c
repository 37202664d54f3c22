/*
 * nw-mpi: the MPI baseline of NW. The same kernel and input; rank r of R
 * statically scores pairs [n*r/R, n*(r+1)/R) (with --weights, the split of
 * the pairs by their cells that best fits the ranks' speeds), and the scores
 * meet on rank 0 (MPI_Gatherv). --portions only sets the most ranks.
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
#include "app_mpi.h"
#include "nw.h"

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nw", .size = 256, .seed = 1, .portions = 16, .iters = 1,
                     .threshold = 2.0, .max_per_dev = 1 };
    app_mpi_t m;
    int ret = 0;

    if (app_mpi_init(&argc, &argv, &a, NULL, &m) != 0 || a.size > (1 << 22) ||
        a.portions > a.size || m.nranks > a.portions)
        return app_mpi_bad_args(&m, "nw-mpi: bad arguments (need ranks <= portions <= "
                                "size)\n");
    int n = (int)a.size, rank = m.rank, nranks = m.nranks;
    size_t *off = malloc((size_t)n * sizeof(*off));
    int *la = malloc((size_t)n * sizeof(int)), *lb = malloc((size_t)n * sizeof(int));
    int *counts = malloc((size_t)nranks * sizeof(int)), *displs = malloc((size_t)nranks * sizeof(int));
    int32_t *score = malloc((size_t)n * sizeof(int32_t));
    char *seq = NULL;
    if (off == NULL || la == NULL || lb == NULL || counts == NULL || displs == NULL ||
        score == NULL)
        app_mpi_die("nw-mpi: no memory\n");
    size_t total = nw_layout(a.seed, n, off, la, lb);
    seq = malloc(total);
    if (seq == NULL)
        app_mpi_die("nw-mpi: no memory\n");
    nw_init(a.seed, n, seq);
    /* Split pair by pair (each pair's work: the cells of its score matrix):
       the equal split of the pairs, or with --weights the best static split
       there is (not limited to whole portions). */
    double *work = malloc((size_t)n * sizeof(double));
    int *first = malloc((size_t)(nranks + 1) * sizeof(int));
    if (work == NULL || first == NULL)
        app_mpi_die("nw-mpi: no memory\n");
    for (int k = 0; k < n; k++)
        work[k] = (double)la[k] * (double)lb[k];
    app_mpi_split(&m, &a, n, work, first);
    for (int r = 0; r < nranks; r++) {
        displs[r] = first[r];
        counts[r] = first[r + 1] - first[r];
    }

    app_mpi_kernel_pick(&m, &a);
    char *dseq = app_mpi_device_buf(&m, total, seq, total);
    int32_t *dscore = app_mpi_device_buf(&m, (size_t)counts[rank] * sizeof(int32_t), NULL, 0);

    app_mpi_timer_start(&m, "IVM_DSLB_SLOW");
    for (int t = 0; t < a.iters; t++) {
        int lo = displs[rank], hi = displs[rank] + counts[rank];
        double ts = app_now_s();
        if (m.kernel == APP_KERNEL_CPU) {
            nw_pairs_cpu(seq, off, la, lb, score + lo, lo, hi);
        } else {
#ifdef APP_HAVE_CUDA
            if (nw_pairs_cuda(dseq, off, la, lb, dscore, lo, hi) != 0 ||
                app_cuda_download(score + lo, dscore, (size_t)(hi - lo) * sizeof(int32_t)) != 0)
                app_mpi_die(NULL);
#endif
        }
        app_mpi_kernel_done(&m, ts);
        if (rank == 0)
            MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT32_T, score, counts, displs, MPI_INT32_T, 0,
                        MPI_COMM_WORLD);
        else
            MPI_Gatherv(score + displs[rank], counts[rank], MPI_INT32_T, NULL, NULL, NULL,
                        MPI_INT32_T, 0, MPI_COMM_WORLD);
    }
    double seconds = app_now_s() - m.t0;
    app_mpi_busy_gather(&m);

    if (rank == 0) {
        app_result_t r;
        app_mpi_result_init(&m, &r, "nw", a.size, seconds);
        for (int q = 0; q < nranks; q++) {
            double cells = 0.0;
            for (int k = displs[q]; k < displs[q] + counts[q]; k++)
                cells += work[k];
            app_mpi_share(&m, &r, q, cells);
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
    (void)dseq;
    (void)dscore;
    free(first);
    free(work);
    free(seq);
    free(score);
    free(displs);
    free(counts);
    free(lb);
    free(la);
    free(off);
    return app_mpi_finish(&m, ret);
}
