/*
 * masterworker-mpi: the MPI version of examples/masterworker.c, the baseline
 * its test compares against: the classic dynamic master/worker. Rank 0 sends
 * each worker a row (tag TASK), receives any worker's row (MPI_ANY_SOURCE)
 * and sends that worker the next one; a STOP message ends a worker.
 *
 * Run:  mpirun -np 4 ./masterworker-mpi [rows (120)]     (3 workers)
 * Prints "masterworker: image hash 0x... iterations ..." (rank 0), exit 0.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#define WIDTH    256
#define MAX_ITER 2000
#define TAG_TASK 1
#define TAG_STOP 2

static void mandel_row(int r, int nrows, int32_t *out)
{
    double ci = -1.25 + 2.5 * (double)r / (double)nrows;

    for (int j = 0; j < WIDTH; j++) {
        double cr = -2.0 + 2.75 * (double)j / (double)WIDTH, zr = 0.0, zi = 0.0;
        int k = 0;
        while (k < MAX_ITER && zr * zr + zi * zi <= 4.0) {
            double t = zr * zr - zi * zi + cr;
            zi = 2.0 * zr * zi + ci;
            zr = t;
            k++;
        }
        out[j] = k;
    }
}

/* A result message: the row's index, then its counts. */
static void master(int nrows, int nw)
{
    int32_t *img = calloc((size_t)nrows * WIDTH, sizeof(int32_t));
    int32_t msg[WIDTH + 1];
    int next = 0, busy = 0;

    for (int w = 1; w <= nw; w++) {
        if (next < nrows) {
            MPI_Send(&next, 1, MPI_INT, w, TAG_TASK, MPI_COMM_WORLD);
            next++;
            busy++;
        } else {
            MPI_Send(&next, 1, MPI_INT, w, TAG_STOP, MPI_COMM_WORLD);
        }
    }
    while (busy > 0) {
        MPI_Status st;
        MPI_Recv(msg, WIDTH + 1, MPI_INT32_T, MPI_ANY_SOURCE, TAG_TASK, MPI_COMM_WORLD, &st);
        for (int j = 0; j < WIDTH; j++)
            img[(size_t)msg[0] * WIDTH + (size_t)j] = msg[1 + j];
        busy--;
        int tag = next < nrows ? TAG_TASK : TAG_STOP;
        MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, tag, MPI_COMM_WORLD);
        if (tag == TAG_TASK) {
            next++;
            busy++;
        }
    }
    const unsigned char *p = (const unsigned char *)img;
    uint64_t h = 1469598103934665603ull;
    long long iters = 0;
    for (size_t k = 0; k < (size_t)nrows * WIDTH * sizeof(int32_t); k++)
        h = (h ^ p[k]) * 1099511628211ull;
    for (size_t k = 0; k < (size_t)nrows * WIDTH; k++)
        iters += img[k];
    printf("masterworker: image hash 0x%016llx iterations %lld\n", (unsigned long long)h,
           iters);
    free(img);
}

static void worker(int nrows)
{
    int32_t msg[WIDTH + 1];

    for (;;) {
        MPI_Status st;
        int task;
        MPI_Recv(&task, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP)
            return;
        msg[0] = task;
        mandel_row(task, nrows, msg + 1);
        MPI_Send(msg, WIDTH + 1, MPI_INT32_T, 0, TAG_TASK, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    int rank, size, nrows = 120;
    char *end;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        long v = strtol(argv[1], &end, 10);
        nrows = (*end == '\0' && v >= 1 && v <= INT_MAX / WIDTH) ? (int)v : -1;
    }
    if (argc > 2 || nrows < 1 || size < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np N>=2 %s [rows (120)]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        master(nrows, size - 1);
    else
        worker(nrows);
    MPI_Finalize();
    return 0;
}
