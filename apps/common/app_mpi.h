/*
 * app_mpi: what the MPI baselines share (built only where CMake finds C MPI,
 * library ivm_app_mpi): the start (MPI_Init, rank and size, app_args_parse
 * and the bad-argument exit), the kernel of a rank (--gpu-ranks), its CUDA
 * buffers, the slowdown knob and the start of the timed loop, the result
 * line's ranks and the end (buffers freed, MPI_Finalize).
 *
 * A failure after the start that the ranks cannot agree on ends the job:
 * the helpers print why and call MPI_Abort.
 */
#ifndef IVM_APP_MPI_H
#define IVM_APP_MPI_H

#include "app.h"

#define APP_MPI_MAX_BUFS 8      /* CUDA buffers of one rank */

/* One rank of a baseline. */
typedef struct app_mpi {
    int rank;
    int nranks;
    app_kernel_t kernel;        /* app_mpi_kernel_pick */
    double slow;                /* the slowdown knob's factor for this rank */
    double t0;                  /* start of the timed loop (app_mpi_timer_start) */
    double busy;                /* seconds in this rank's kernel (app_mpi_kernel_done) */
    double *busy_all;           /* rank 0: every rank's busy seconds (app_mpi_busy_gather) */
    int nbufs;
    void *bufs[APP_MPI_MAX_BUFS];   /* CUDA buffers, freed by app_mpi_finish */
} app_mpi_t;

/* MPI_Init, the rank and size into *m, then app_args_parse(argc, argv, a,
   usage_extra). 0, or -1 when the arguments are bad (app_mpi_bad_args). */
int app_mpi_init(int *argc, char ***argv, app_args_t *a, const char *usage_extra,
                 app_mpi_t *m);
/* Bad arguments: rank 0 prints `msg` (a whole line; NULL: nothing) on
   stderr, then MPI_Finalize. Returns the exit status, 2. */
int app_mpi_bad_args(const app_mpi_t *m, const char *msg);
/* Print `msg` (a whole line; NULL: nothing) on stderr and MPI_Abort(1). */
void app_mpi_die(const char *msg);

/* m->kernel: the kernel of this rank (app_kernel_pick_rank); MPI_Abort(1)
   on failure. */
void app_mpi_kernel_pick(app_mpi_t *m, const app_args_t *a);
/* With the CUDA kernel: a device buffer of `bytes` (freed by
   app_mpi_finish) holding the first `copy` bytes of `host` (0: nothing
   copied); MPI_Abort(1) on failure. NULL with the CPU kernel. */
void *app_mpi_device_buf(app_mpi_t *m, size_t bytes, const void *host, size_t copy);

/* This run's static split (app_split): equal, or with --weights (one per
   rank, else MPI_Abort(2) after a message) the best weighted one. P
   portions of work units work[p] (NULL: 1 each); first has nranks + 1
   entries. */
void app_mpi_split(const app_mpi_t *m, const app_args_t *a, int P, const double *work,
                   int *first);

/* Read the slowdown knob `env` for this rank into m->slow (MPI_Abort(2)
   when it is malformed), wait for every rank (MPI_Barrier) and start the
   timed loop (m->t0). */
void app_mpi_timer_start(app_mpi_t *m, const char *env);

/* The end of one kernel call started at `ts` (app_now_s): the slowdown
   knob applied (app_slow_apply), then the call's seconds, the knob's
   included, added to m->busy. */
void app_mpi_kernel_done(app_mpi_t *m, double ts);
/* Every rank's m->busy to rank 0's m->busy_all (MPI_Gather: every rank
   calls it, after its timed loop); MPI_Abort(1) without memory. */
void app_mpi_busy_gather(app_mpi_t *m);

/* Start rank 0's result line: app, version mpi, size, pes = ranks, seconds. */
void app_mpi_result_init(const app_mpi_t *m, app_result_t *r, const char *app,
                         long long size, double seconds);
/* Add `work` to the share of "rank<rank>", and, after app_mpi_busy_gather,
   the rank's measured speed: `work` over its busy seconds (the result
   line's speed=, the speed each device showed under this run's split). */
void app_mpi_share(const app_mpi_t *m, app_result_t *r, int rank, double work);

/* Free the CUDA buffers and m->busy_all, MPI_Finalize; returns `ret`. */
int app_mpi_finish(app_mpi_t *m, int ret);

#endif /* IVM_APP_MPI_H */
