/*
 * HIMENO, MPI baseline: the same Jacobi kernel with a static equal split of
 * the interior Z planes over the ranks (one rank per device), halo planes
 * exchanged with MPI_Sendrecv before every iteration but the first, gosa
 * summed with MPI_Allreduce, the result gathered on rank 0 for the checksum.
 * Timed from a barrier after set-up to the end of the gather, like the IVM
 * version's OM-LB loop (first iteration to the final store).
 *
 * Each rank's OpenMP threads: OMP_NUM_THREADS when set, else the cores the
 * rank is bound to (mpirun --bind-to core / --cpu-set / a rankfile). With
 * --gpu-ranks K, ranks 0..K-1 run the CUDA kernel (MPI+CUDA; the halo planes
 * go through host memory).
 * IVM_OMLB_SLOW=D:F slows rank D by F, as it slows device D of the IVM version.
 *
 * Run:  mpirun -np 2 himeno-mpi --size 33 --iters 20 --verify
 */

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "app.h"
#include "app_mpi.h"
#include "himeno.h"

#define HIMENO_MPI_CAL 20   /* steps that measure a rank's speed, before the timer */

static const char himeno_mpi_usage[] =
    "  himeno-mpi: --size N is the grid N x N x (2N-1) (33: 33x33x65); --iters I Jacobi\n"
    "  iterations; --gpu-ranks K: ranks 0..K-1 run the CUDA kernel; --weights\n"
    "  W0,W1,..: rank r's relative speed (planes split to fit them); --portions,\n"
    "  --threshold, --max-per-dev and --local are not used.\n"
    "  IVM_OMLB_SLOW=D:F slows rank D by F (test knob).";

static int himeno_mpi_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS");
    cpu_set_t set;

    if (env != NULL && atoi(env) > 0)
        return atoi(env);
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

/* The ranks' static split (app_mpi_split; the equal one unless --weights):
   rank r owns units [first[r], first[r+1]), at least one each when there
   are enough units. NULL without memory. */
static int *himeno_mpi_split(const app_args_t *a, const app_mpi_t *m, int units)
{
    int *first = malloc(sizeof(int) * (size_t)(m->nranks + 1));

    if (first == NULL)
        return NULL;
    if (units >= m->nranks)
        app_mpi_split(m, a, units, NULL, first);
    else
        app_split(units, NULL, m->nranks, NULL, first);
    return first;
}

/* This rank's speed (m->busy), measured before the timed loop: HIMENO_MPI_CAL
   steps on its slab with nothing exchanged between them, then the slab
   loaded again. In the loop a rank that waits for a slower neighbour spins
   in MPI on its device's share of the core and starts its next step with
   less of it left, which its kernel's times there would count against the
   device. */
static int himeno_mpi_calibrate(app_mpi_t *m, const himeno_kernel_ops_t *ops,
                                himeno_kernel_t *k, int lo, int hi, const float *planes)
{
    double gosa;

    MPI_Barrier(MPI_COMM_WORLD);
    for (int c = 0; c < HIMENO_MPI_CAL; c++) {
        double ts = app_now_s();
        if (ops->step(k, &gosa) != 0)
            return -1;
        app_mpi_kernel_done(m, ts);
    }
    return ops->load(k, lo, hi, planes);
}

static int himeno_mpi_run(const app_args_t *a, const himeno_grid_t *g, app_mpi_t *m)
{
    const int rank = m->rank, nranks = m->nranks;
    const size_t P = himeno_plane(g);
    const int units = himeno_units(g);
    int *split = himeno_mpi_split(a, m, units);
    if (split == NULL)
        app_mpi_die("himeno-mpi: no memory\n");
    const int lo = split[rank];
    const int hi = split[rank + 1];
    const int n = hi - lo, up = rank + 1 < nranks ? rank + 1 : MPI_PROC_NULL,
              down = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    double gosa = 0.0, t0, seconds;
    float *planes = NULL, *first = NULL, *last = NULL, *below = NULL, *above = NULL;
    float *grid = NULL;
    int *counts = NULL, *displs = NULL, ret = -1, ok = 1;
    himeno_kernel_t *k = NULL;
    const himeno_kernel_ops_t *ops = &himeno_cpu_ops;
    app_kernel_t kernel = APP_KERNEL_CPU;
    int ready = 0, all_ready;

    /* Set-up; every rank learns whether all got through before any
       collective (a rank that gave up would leave the others waiting). */
    if (units < nranks) {
        if (rank == 0)
            fprintf(stderr, "himeno-mpi: %d interior planes for %d ranks (one each at least)\n",
                    units, nranks);
        goto agree;
    }
    m->slow = app_slow_factor("IVM_OMLB_SLOW", rank);
    if (m->slow < 0 || app_kernel_pick_rank(a, rank, &kernel) != 0)
        goto agree;
#ifdef APP_HAVE_CUDA
    if (kernel == APP_KERNEL_CUDA) {
        if (app_cuda_use_rank(rank) != 0)
            goto agree;
        ops = &himeno_cuda_ops;
    }
#endif
    planes = malloc((size_t)(n + 2) * P * 4 * sizeof(float));
    if (planes == NULL || ops->create(g, n, himeno_mpi_threads(), &k) != 0) {
        fprintf(stderr, "himeno-mpi: rank %d: no memory for its slab\n", rank);
        goto agree;
    }
    first = planes + (size_t)(n + 2) * P;
    last = first + P;
    below = last + P;
    above = below + P;
    himeno_init(g, lo, n + 2, planes);
    ready = ops->load(k, lo, hi, planes) == 0;
agree:
    MPI_Allreduce(&ready, &all_ready, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ready)
        goto out;

    if (himeno_mpi_calibrate(m, ops, k, lo, hi, planes) != 0)
        app_mpi_die(NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = app_now_s();
    for (int it = 0; it < a->iters; it++) {
        double local = 0.0, ts;
        if (it > 0) {
            ops->edges_get(k, first, last);
            MPI_Sendrecv(first, (int)P, MPI_FLOAT, down, 0, above, (int)P, MPI_FLOAT, up, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(last, (int)P, MPI_FLOAT, up, 1, below, (int)P, MPI_FLOAT, down, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ops->halo_set(k, down != MPI_PROC_NULL ? below : NULL,
                          up != MPI_PROC_NULL ? above : NULL);
        }
        ts = app_now_s();
        ops->step(k, &local);
        app_slow_apply(m->slow, app_now_s() - ts);
        MPI_Allreduce(&local, &gosa, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }

    /* The unit planes to rank 0, which holds the boundary planes itself. */
    ops->store(k, planes + P);
    if (rank == 0) {
        grid = malloc(P * (size_t)g->nz * sizeof(float));
        counts = malloc(sizeof(int) * (size_t)nranks);
        displs = malloc(sizeof(int) * (size_t)nranks);
        ok = grid != NULL && counts != NULL && displs != NULL &&
             P * (size_t)g->nz <= (size_t)2147483647;
        if (ok) {
            for (int r = 0; r < nranks; r++) {
                int rlo = split[r];
                counts[r] = (split[r + 1] - rlo) * (int)P;
                displs[r] = (rlo + 1) * (int)P;
            }
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        if (rank == 0)
            fprintf(stderr, "himeno-mpi: no memory (or too many points) to gather the grid\n");
        goto out;
    }
    MPI_Gatherv(planes + P, n * (int)P, MPI_FLOAT, grid, counts, displs, MPI_FLOAT, 0,
                MPI_COMM_WORLD);
    seconds = app_now_s() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    app_mpi_busy_gather(m);

    if (rank == 0) {
        app_result_t r;
        double checksum;

        himeno_init(g, 0, 1, grid);
        himeno_init(g, g->nz - 1, 1, grid + (size_t)(g->nz - 1) * P);
        checksum = himeno_checksum(g, grid);
        app_mpi_result_init(m, &r, "himeno", a->size, seconds);
        app_checksum_real(&r, checksum);
        for (int q = 0; q < nranks; q++)
            app_mpi_share(m, &r, q, (double)counts[q] / (double)P);
        printf("himeno-mpi: grid %dx%dx%d, %d iterations, %d ranks, gosa %.9e\n", g->nx,
               g->ny, g->nz, a->iters, nranks, gosa);
        if (a->verify) {
            double ref_gosa, ref_sum;
            r.verified = himeno_reference(g, a->iters, &ref_gosa, &ref_sum) == 0 &&
                         himeno_close(gosa, ref_gosa) && himeno_close(checksum, ref_sum);
            printf("himeno-mpi: gosa %.9e (reference %.9e), checksum %.9e (reference %.9e), "
                   "tolerance %g relative: %s\n", gosa, ref_gosa, checksum, ref_sum,
                   HIMENO_TOL, r.verified ? "match" : "MISMATCH");
        }
        app_result_print(stdout, &r);
        fflush(stdout);
        ret = a->verify && !r.verified ? -1 : 0;
    } else {
        ret = 0;
    }

out:
    ops->destroy(k);
    free(planes);
    free(grid);
    free(counts);
    free(displs);
    free(split);
    return ret;
}

int main(int argc, char **argv)
{
    app_args_t a = { .app = "himeno-mpi", .size = 33, .seed = 1, .portions = 1, .iters = 20,
                     .threshold = 2.0, .max_per_dev = 1 };
    himeno_grid_t g;
    app_mpi_t m;
    int ret, all;

    if (app_mpi_init(&argc, &argv, &a, himeno_mpi_usage, &m) != 0 ||
        himeno_grid_from_size(a.size, &g) != 0)
        return app_mpi_bad_args(&m, NULL);
    ret = himeno_mpi_run(&a, &g, &m);
    MPI_Allreduce(&ret, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return app_mpi_finish(&m, all == 0 ? 0 : 1);
}
