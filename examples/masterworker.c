/*
 * masterworker: a master hands out tasks to workers, the IVM version of
 * examples/mpi/masterworker-mpi.c.
 *
 * The task: row r of a Mandelbrot image (WIDTH x rows points, at most
 * MAX_ITER iterations), its result the row's iteration counts. The root PE
 * (0) starts W workers, worker w on node w % nodes, and keeps each one busy:
 *
 *     master                               worker
 *     slot[w] = task; ivmSyncPut(slot[w])
 *     ivmSignalTo(worker)          --->    ivmWaitFrom(0); ivmSyncGet(slot[w])
 *                                          compute the row into "mw.image"
 *     ivmWaitFrom(worker)          <---    ivmSyncPutSignal(row, 0)
 *     (the row is in the master)
 *
 * A task id of -1 ends a worker. IVM has no MPI_ANY_SOURCE: ivmWaitFrom names
 * its sender, so the master serves the workers in turn and keeps two tasks
 * queued per worker (two slots) so that a worker never waits for the master
 * to notice it; for work of very uneven cost use DS-LB (examples/dslb.c),
 * one PE per portion, instead of a master.
 *
 * Workers of one node share its copies of the objects; each one Gets only its
 * own slots and Puts only the rows it computed, so none overwrites bytes
 * another one wrote and has not put.
 *
 * Run:  ivmrun ./masterworker [rows (120)] [workers (3)]
 *       ivmrun --nodes 3 ./masterworker 400 6
 * Prints "masterworker: image hash 0x... iterations ..." and
 * "masterworker: OK" (the image matches a serial computation), exit 0.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#define WIDTH    256
#define MAX_ITER 2000
#define DEPTH    2          /* tasks queued per worker */
#define MAX_W    256

#define CHECK(call)                                                            \
    do {                                                                       \
        ivmError_t check_rc_ = (call);                                         \
        if (check_rc_ != IVM_SUCCESS) {                                        \
            fprintf(stderr, "masterworker: %s:%d: %s failed: %s (%s)\n",       \
                    __FILE__, __LINE__, #call, ivmGetErrorString(check_rc_),   \
                    ivmGetLastErrorMessage());                                 \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* Iteration counts of row r of nrows. The same code as the MPI version's. */
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

static uint64_t image_hash(const int32_t *img, int nrows, long long *iters)
{
    const unsigned char *p = (const unsigned char *)img;
    size_t n = (size_t)nrows * WIDTH;
    uint64_t h = 1469598103934665603ull;

    for (size_t k = 0; k < n * sizeof(*img); k++)
        h = (h ^ p[k]) * 1099511628211ull;
    *iters = 0;
    for (size_t k = 0; k < n; k++)
        *iters += img[k];
    return h;
}

/* Slot s of worker w: the task id it is to do (-1: stop). Element 0 of the
   object is the worker count; the PE list follows. */
typedef struct {
    int32_t nworkers;
    int32_t pes[MAX_W];
    int32_t slot[MAX_W][DEPTH];
} mw_ctl_t;

static void start_workers(mw_ctl_t *ctl, int nw, int nrows)
{
    int nnodes;

    CHECK(ivmGetNumNodes(&nnodes));
    ctl->nworkers = nw;
    for (int w = 0; w < nw; w++) {
        char host[IVM_HOST_MAX + 1];
        ivm_device dev;
        ivm_pe pe;
        CHECK(ivmGetNodeName(w % nnodes, host, sizeof(host)));
        CHECK(ivmCreateDev(host, IVM_CPU_N(0), &dev));
        CHECK(ivmCreatePEs(dev, 1, &pe));
        CHECK(ivmDestroyDev(dev));
        if (pe == IVM_PE_NULL) {
            fprintf(stderr, "masterworker: worker %d was not started\n", w);
            exit(1);
        }
        ctl->pes[w] = pe;
    }
    CHECK(ivmSyncPut(ctl, offsetof(mw_ctl_t, slot)));
    printf("masterworker: %d rows of %d points, %d workers on %d node(s)\n",
           nrows, WIDTH, nw, nnodes < nw ? nnodes : nw);
}

/* Give worker w task `task` in slot s and tell it. */
static void hand(mw_ctl_t *ctl, int w, int s, int task)
{
    ctl->slot[w][s] = task;
    CHECK(ivmSyncPut(&ctl->slot[w][s], sizeof(ctl->slot[w][s])));
    CHECK(ivmSignalTo(ctl->pes[w]));
}

static int run_master(int nrows, int nw)
{
    mw_ctl_t *ctl;
    int32_t *img, *ref;
    int next = 0, outstanding = 0;

    CHECK(ivmMalloc("mw.ctl", &ctl, sizeof(*ctl)));
    CHECK(ivmMalloc("mw.image", &img, (size_t)nrows * WIDTH * sizeof(*img)));
    start_workers(ctl, nw, nrows);
    /* Fill every worker's queue, then serve them in turn: a worker does its
       slots in order, so its results come back in the order of the slots,
       and each one frees its slot for the next task (-1 once none is left,
       which ends the worker after its last real task). */
    for (int s = 0; s < DEPTH; s++)
        for (int w = 0; w < nw; w++) {
            hand(ctl, w, s, next < nrows ? next++ : -1);
            outstanding += ctl->slot[w][s] >= 0;
        }
    for (int round = 0; outstanding > 0; round++) {
        int s = round % DEPTH;
        for (int w = 0; w < nw; w++) {
            if (ctl->slot[w][s] < 0)
                continue;
            CHECK(ivmWaitFrom(ctl->pes[w]));
            outstanding--;
            hand(ctl, w, s, next < nrows ? next++ : -1);
            outstanding += ctl->slot[w][s] >= 0;
        }
    }

    long long iters, ref_iters;
    uint64_t h = image_hash(img, nrows, &iters);
    printf("masterworker: image hash 0x%016llx iterations %lld\n", (unsigned long long)h,
           iters);
    ref = malloc((size_t)nrows * WIDTH * sizeof(*ref));
    if (ref == NULL)
        return 1;
    for (int r = 0; r < nrows; r++)
        mandel_row(r, nrows, ref + (size_t)r * WIDTH);
    uint64_t want = image_hash(ref, nrows, &ref_iters);
    free(ref);
    CHECK(ivmFree(img));
    CHECK(ivmFree(ctl));
    if (want != h) {
        fprintf(stderr, "masterworker: image differs from the serial one\n");
        return 1;
    }
    printf("masterworker: OK\n");
    return 0;
}

static int run_worker(int nrows, int me)
{
    mw_ctl_t *ctl;
    int32_t *img;
    int w = -1;

    /* The first signal: our first slot (and the PE list) are there. */
    CHECK(ivmWaitFrom(0));
    CHECK(ivmMap("mw.ctl", &ctl, 0));
    CHECK(ivmSyncGet(ctl, offsetof(mw_ctl_t, slot)));
    for (int k = 0; k < ctl->nworkers && k < MAX_W; k++)
        if (ctl->pes[k] == me)
            w = k;
    if (w < 0) {
        fprintf(stderr, "masterworker: PE %d is not in the master's list\n", me);
        return 1;
    }
    CHECK(ivmMap("mw.image", &img, 0));
    for (int n = 0;; n++) {
        int s = n % DEPTH;
        if (n > 0)
            CHECK(ivmWaitFrom(0));
        CHECK(ivmSyncGet(&ctl->slot[w][s], sizeof(ctl->slot[w][s])));
        int task = ctl->slot[w][s];
        if (task < 0 || task >= nrows)
            break;
        int32_t *out = img + (size_t)task * WIDTH;
        mandel_row(task, nrows, out);
        CHECK(ivmSyncPutSignal(out, WIDTH * sizeof(*out), 0));
    }
    CHECK(ivmUnmap(img));
    CHECK(ivmUnmap(ctl));
    return 0;
}

static int parse_int(const char *s, int max, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < 1 || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int nrows = 120, nw = 3, id, ret;

    if (argc > 3 || (argc > 1 && parse_int(argv[1], INT_MAX / WIDTH, &nrows) != 0) ||
        (argc > 2 && parse_int(argv[2], MAX_W, &nw) != 0)) {
        fprintf(stderr, "usage: %s [rows (120)] [workers<=%d (3)]\n", argv[0], MAX_W);
        return 2;
    }
    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_master(nrows, nw) : run_worker(nrows, id);
    CHECK(ivmExit());
    return ret;
}
