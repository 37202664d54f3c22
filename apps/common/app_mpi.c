/*
 * app_mpi: the MPI baselines' start, timed loop and end (see app_mpi.h).
 */
#include "app_mpi.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int app_mpi_init(int *argc, char ***argv, app_args_t *a, const char *usage_extra,
                 app_mpi_t *m)
{
    memset(m, 0, sizeof(*m));
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->nranks);
    return app_args_parse(*argc, *argv, a, usage_extra);
}

int app_mpi_bad_args(const app_mpi_t *m, const char *msg)
{
    if (m->rank == 0 && msg != NULL)
        fputs(msg, stderr);
    MPI_Finalize();
    return 2;
}

void app_mpi_die(const char *msg)
{
    if (msg != NULL)
        fputs(msg, stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void app_mpi_kernel_pick(app_mpi_t *m, const app_args_t *a)
{
    if (app_kernel_pick_rank(a, m->rank, &m->kernel) != 0)
        app_mpi_die(NULL);
}

void *app_mpi_device_buf(app_mpi_t *m, size_t bytes, const void *host, size_t copy)
{
    void *dev = NULL;

    if (m->kernel != APP_KERNEL_CUDA)
        return NULL;
    if (m->nbufs == APP_MPI_MAX_BUFS)
        app_mpi_die("app_mpi: too many CUDA buffers\n");
#ifdef APP_HAVE_CUDA
    if (app_cuda_alloc(&dev, bytes) != 0)
        app_mpi_die(NULL);
    m->bufs[m->nbufs++] = dev;
    if (copy > 0 && app_cuda_upload(dev, host, copy) != 0)
        app_mpi_die(NULL);
#else
    (void)bytes;
    (void)host;
    (void)copy;
    app_mpi_die("app_mpi: CUDA kernel picked in a build without CUDA\n");
#endif
    return dev;
}

void app_mpi_split(const app_mpi_t *m, const app_args_t *a, int P, const double *work,
                   int *first)
{
    if (a->nweights != 0 && a->nweights != m->nranks) {
        if (m->rank == 0)
            fprintf(stderr, "%s: --weights gives %d weights for %d ranks (one per rank)\n",
                    a->app, a->nweights, m->nranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    app_split(P, work, m->nranks, a->nweights ? a->weights : NULL, first);
}

void app_mpi_timer_start(app_mpi_t *m, const char *env)
{
    m->slow = app_slow_factor(env, m->rank);
    if (m->slow < 1.0)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD);
    m->t0 = app_now_s();
}

void app_mpi_kernel_done(app_mpi_t *m, double ts)
{
    app_slow_apply(m->slow, app_now_s() - ts);
    m->busy += app_now_s() - ts;
}

void app_mpi_busy_gather(app_mpi_t *m)
{
    if (m->rank == 0) {
        m->busy_all = calloc((size_t)m->nranks, sizeof(double));
        if (m->busy_all == NULL)
            app_mpi_die("app_mpi: no memory\n");
    }
    MPI_Gather(&m->busy, 1, MPI_DOUBLE, m->busy_all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

void app_mpi_result_init(const app_mpi_t *m, app_result_t *r, const char *app,
                         long long size, double seconds)
{
    app_result_init(r, app, "mpi", size);
    r->pes = m->nranks;
    r->seconds = seconds;
}

void app_mpi_share(const app_mpi_t *m, app_result_t *r, int rank, double work)
{
    char name[APP_NAME_MAX];
    int i;

    snprintf(name, sizeof(name), "rank%d", rank);
    i = app_result_add_share(r, name, work);
    if (i >= 0 && m->busy_all != NULL && m->busy_all[rank] > 0.0)
        r->share_rate[i] = r->share_work[i] / m->busy_all[rank];
}

int app_mpi_finish(app_mpi_t *m, int ret)
{
#ifdef APP_HAVE_CUDA
    while (m->nbufs > 0)
        app_cuda_free(m->bufs[--m->nbufs]);
#endif
    free(m->busy_all);
    m->busy_all = NULL;
    MPI_Finalize();
    return ret;
}
