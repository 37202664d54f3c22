/*
 * heat: a 2-D heat stencil (Jacobi sweeps of the heat equation) with halo
 * exchange between PEs, the IVM version of examples/mpi/heat-mpi.c.
 *
 * The grid has NY interior rows of NX points between two fixed boundary rows
 * (top 100.0, bottom 0.0; the side columns are fixed too). The root PE (0)
 * holds the grid, two buffers of (NY+2) x NX doubles ("heat" object, master
 * on its node), and starts W worker PEs, worker w on node w % nodes. Worker w
 * owns a block of rows. Each step it computes its rows of the new buffer from
 * the old one, then:
 *
 *     ivmSyncPutSignal(first row, up);     my edge rows are in the master,
 *     ivmSyncPutSignal(last row, down);    each neighbour is told
 *     ivmWaitFrom(up);   ivmSyncGet(row above, ...);
 *     ivmWaitFrom(down); ivmSyncGet(row below, ...);
 *
 * the MPI_Sendrecv pair of the MPI version. Two buffers (the step's parity)
 * keep a neighbour that is one step ahead from writing a row still being
 * read: it cannot get two steps ahead, since it needs our next signal.
 * Workers of one node share its copy of the grid: each one Gets only the
 * neighbour's edge rows, which that neighbour has put, and Puts only its own
 * rows, so no Get overwrites bytes another PE wrote and has not put.
 *
 * At the end every worker puts its block and signals the root, which hashes
 * the grid, prints it and checks it against a serial sweep of its own.
 *
 * Run:  ivmrun ./heat [nx (96)] [ny (60)] [steps (100)] [workers (3)]
 *       ivmrun --nodes 3 ./heat 600 600 1000 4
 * Prints the time of the workers' steps as the root sees it (from its word
 * to go to their last signal), "heat: grid hash 0x... sum ..." and
 * "heat: OK", exit 0; exit 1 on error.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ivm.h>

#define ALPHA    0.2     /* diffusion number of the explicit scheme (< 0.25) */
#define T_TOP    100.0
#define T_BOTTOM 0.0
#define MAX_W    256

#define CHECK(call)                                                            \
    do {                                                                       \
        ivmError_t check_rc_ = (call);                                         \
        if (check_rc_ != IVM_SUCCESS) {                                        \
            fprintf(stderr, "heat: %s:%d: %s failed: %s (%s)\n", __FILE__,     \
                    __LINE__, #call, ivmGetErrorString(check_rc_),             \
                    ivmGetLastErrorMessage());                                 \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    int nx, ny, steps, workers;
} heat_cfg_t;

/* Row i of buffer b of the grid g. */
static double *row(double *g, const heat_cfg_t *c, int b, int i)
{
    return g + ((size_t)b * (size_t)(c->ny + 2) + (size_t)i) * (size_t)c->nx;
}

/* Interior rows [*r0, *r1) of worker w: the rows split as evenly as they go. */
static void block_of(const heat_cfg_t *c, int w, int *r0, int *r1)
{
    *r0 = 1 + (int)((long)c->ny * w / c->workers);
    *r1 = 1 + (int)((long)c->ny * (w + 1) / c->workers);
}

/* One sweep of rows [r0, r1) from buffer src into buffer dst. The same
   expression as the MPI version's, so both give the same bits. */
static void sweep(double *g, const heat_cfg_t *c, int src, int r0, int r1)
{
    for (int i = r0; i < r1; i++) {
        const double *up = row(g, c, src, i - 1), *mid = row(g, c, src, i);
        const double *dn = row(g, c, src, i + 1);
        double *out = row(g, c, 1 - src, i);
        for (int j = 1; j < c->nx - 1; j++)
            out[j] = mid[j] + ALPHA * (up[j] + dn[j] + mid[j - 1] + mid[j + 1] - 4.0 * mid[j]);
    }
}

/* Both buffers: boundary rows and columns fixed, interior 0. */
static void grid_init(double *g, const heat_cfg_t *c)
{
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < c->ny + 2; i++)
            memset(row(g, c, b, i), 0, (size_t)c->nx * sizeof(double));
        for (int j = 0; j < c->nx; j++) {
            row(g, c, b, 0)[j] = T_TOP;
            row(g, c, b, c->ny + 1)[j] = T_BOTTOM;
        }
    }
}

/* FNV-1a over the final buffer's bytes, and the sum of its points. */
static uint64_t grid_hash(double *g, const heat_cfg_t *c, double *sum)
{
    const unsigned char *p = (const unsigned char *)row(g, c, c->steps % 2, 0);
    size_t n = (size_t)(c->ny + 2) * (size_t)c->nx;
    uint64_t h = 1469598103934665603ull;

    for (size_t k = 0; k < n * sizeof(double); k++)
        h = (h ^ p[k]) * 1099511628211ull;
    *sum = 0.0;
    for (size_t k = 0; k < n; k++)
        *sum += ((const double *)p)[k];
    return h;
}

static size_t grid_bytes(const heat_cfg_t *c)
{
    return 2 * (size_t)(c->ny + 2) * (size_t)c->nx * sizeof(double);
}

/* Start the workers, worker w on CPU device 0 of node w % nodes. */
static void start_workers(const heat_cfg_t *c, ivm_pe *pes)
{
    int nnodes;

    CHECK(ivmGetNumNodes(&nnodes));
    for (int w = 0; w < c->workers; w++) {
        char host[IVM_HOST_MAX + 1];
        ivm_device dev;
        CHECK(ivmGetNodeName(w % nnodes, host, sizeof(host)));
        CHECK(ivmCreateDev(host, IVM_CPU_N(0), &dev));
        CHECK(ivmCreatePEs(dev, 1, &pes[w]));
        CHECK(ivmDestroyDev(dev));
        if (pes[w] == IVM_PE_NULL) {
            fprintf(stderr, "heat: worker %d was not started\n", w);
            exit(1);
        }
    }
    printf("heat: %d x %d points, %d steps, %d workers on %d node(s)\n", c->nx, c->ny,
           c->steps, c->workers, nnodes < c->workers ? nnodes : c->workers);
}

/* Wall-clock time in ms (the root's timer of the workers' steps). */
static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int run_root(const heat_cfg_t *c)
{
    double *g, sum, ref_sum;
    ivm_pe *pes;
    uint64_t h, ref;

    CHECK(ivmMalloc("heat", &g, grid_bytes(c)));
    CHECK(ivmMalloc("heat.pes", &pes, (size_t)c->workers * sizeof(*pes)));
    grid_init(g, c);
    start_workers(c, pes);
    /* The list is in the master (our copy): each worker Gets it once told. */
    CHECK(ivmSyncPut(pes, (size_t)c->workers * sizeof(*pes)));
    double t0 = now_ms();
    for (int w = 0; w < c->workers; w++)
        CHECK(ivmSignalTo(pes[w]));
    for (int w = 0; w < c->workers; w++)
        CHECK(ivmWaitFrom(pes[w]));
    double ms = now_ms() - t0;
    printf("heat: the steps took %.1f ms (%.1f us per step)\n", ms, ms * 1e3 / c->steps);
    h = grid_hash(g, c, &sum);
    printf("heat: grid hash 0x%016llx sum %.6f\n", (unsigned long long)h, sum);

    /* The serial reference, in a private grid. */
    double *s = malloc(grid_bytes(c));
    if (s == NULL)
        return 1;
    grid_init(s, c);
    for (int t = 0; t < c->steps; t++)
        sweep(s, c, t % 2, 1, c->ny + 1);
    ref = grid_hash(s, c, &ref_sum);
    free(s);
    CHECK(ivmFree(pes));
    CHECK(ivmFree(g));
    if (ref != h) {
        fprintf(stderr, "heat: grid differs from the serial sweep (hash 0x%016llx, "
                "sum %.6f)\n", (unsigned long long)ref, ref_sum);
        return 1;
    }
    printf("heat: OK\n");
    return 0;
}

/* The halo exchange after a sweep into buffer dst: our edge rows out, the
   neighbours' edge rows in. up/down are IVM_PE_NULL at the boundary. */
static void exchange(double *g, const heat_cfg_t *c, int dst, int r0, int r1, ivm_pe up,
                     ivm_pe down)
{
    size_t rb = (size_t)c->nx * sizeof(double);

    if (up != IVM_PE_NULL)
        CHECK(ivmSyncPutSignal(row(g, c, dst, r0), rb, up));
    if (down != IVM_PE_NULL)
        CHECK(ivmSyncPutSignal(row(g, c, dst, r1 - 1), rb, down));
    if (up != IVM_PE_NULL) {
        CHECK(ivmWaitFrom(up));
        CHECK(ivmSyncGet(row(g, c, dst, r0 - 1), rb));
    }
    if (down != IVM_PE_NULL) {
        CHECK(ivmWaitFrom(down));
        CHECK(ivmSyncGet(row(g, c, dst, r1), rb));
    }
}

static int run_worker(const heat_cfg_t *c, int me)
{
    int w = -1, r0, r1;
    ivm_pe *pes;
    double *g;

    CHECK(ivmWaitFrom(0));
    CHECK(ivmMap("heat.pes", &pes, 0));
    CHECK(ivmSyncGet(pes, (size_t)c->workers * sizeof(*pes)));
    for (int k = 0; k < c->workers; k++)
        if (pes[k] == me)
            w = k;
    if (w < 0) {
        fprintf(stderr, "heat: PE %d is not in the root's worker list\n", me);
        return 1;
    }
    ivm_pe up = w > 0 ? pes[w - 1] : IVM_PE_NULL;
    ivm_pe down = w < c->workers - 1 ? pes[w + 1] : IVM_PE_NULL;
    CHECK(ivmMap("heat", &g, 0));
    block_of(c, w, &r0, &r1);
    for (int t = 0; t < c->steps; t++) {
        sweep(g, c, t % 2, r0, r1);
        exchange(g, c, 1 - t % 2, r0, r1, up, down);
    }
    /* Our block of the final buffer to the root. */
    CHECK(ivmSyncPutSignal(row(g, c, c->steps % 2, r0),
                           (size_t)(r1 - r0) * (size_t)c->nx * sizeof(double), 0));
    CHECK(ivmUnmap(g));
    CHECK(ivmUnmap(pes));
    return 0;
}

static int parse_args(int argc, char **argv, heat_cfg_t *c)
{
    int *fields[] = { &c->nx, &c->ny, &c->steps, &c->workers };

    *c = (heat_cfg_t){ .nx = 96, .ny = 60, .steps = 100, .workers = 3 };
    if (argc > 5)
        return -1;
    for (int i = 1; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (argv[i][0] == '\0' || *end != '\0' || v < 1 || v > INT_MAX / 4)
            return -1;
        *fields[i - 1] = (int)v;
    }
    return c->nx >= 3 && c->workers <= c->ny && c->workers <= MAX_W ? 0 : -1;
}

int main(int argc, char **argv)
{
    heat_cfg_t c;
    int id, ret;

    if (parse_args(argc, argv, &c) != 0) {
        fprintf(stderr, "usage: %s [nx>=3 (96)] [ny (60)] [steps (100)] "
                "[workers<=min(ny,%d) (3)]\n", argv[0], MAX_W);
        return 2;
    }
    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_root(&c) : run_worker(&c, id);
    CHECK(ivmExit());
    return ret;
}
