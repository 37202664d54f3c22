/*
 * HIMENO, IVM version: Jacobi iterations over Z-slabs balanced by OM-LB
 * (apps/common/omlb.h).
 *
 * The root PE allocates the pressure grid "himeno.p" (its master copy holds
 * the initial state and, at the end, the result), then runs the OM-LB root
 * loop over the devices of every node. Each child PE owns the units
 * (interior Z planes) [lo, hi) of its share in a slab of its own kernel
 * (host memory, or device memory for the CUDA kernel):
 *   load   - ivmSyncGet of planes lo .. hi+1 of "himeno.p", into the kernel;
 *   step_edges - the first and the last unit of one Jacobi iteration (the
 *            driver has put the neighbours' edge planes in as halos), and
 *            their new planes out, which the driver sends to the
 *            neighbours' in-boxes (one plane each way: the halo exchange)
 *            while
 *   step   - computes the other units and completes the iteration;
 *   edges  - (unused with step_edges) the first and last unit planes;
 *   store  - the unit planes back into "himeno.p" (ivmSyncPut).
 *
 * Run:  ivmrun --nodes 2 himeno --size 33 --iters 20 --verify
 * Options: app.h's (--size N: grid N x N x (2N-1); --iters; --max-per-dev K:
 * PEs per device at most, default 1, see omlb.h; --local; --verify;
 * --serial); --portions and --threshold are not used (the units are the
 * interior planes). Test knob: IVM_OMLB_SLOW (omlb.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#include "app.h"
#include "himeno.h"
#include "omlb.h"

#define HIMENO_P_OBJ    "himeno.p"

static const char himeno_usage[] =
    "  himeno: --size N is the grid N x N x (2N-1) (33: 33x33x65); --iters I Jacobi\n"
    "  iterations; --max-per-dev K caps OM-LB's PEs per device (default 1: see\n"
    "  omlb.h); --portions and --threshold are not used. IVM_OMLB_SLOW=D:F slows\n"
    "  device D by F (test knob).";

/* A child's state: the mapped grid and its kernel. The reference is the
   PE's own copy (host memory for a CPU PE, the GPU mirror for a GPU PE): the
   kernel copies between it and its slab (the CUDA kernel with
   cudaMemcpyDefault), and the syncs push and pull that copy. */
typedef struct himeno_child {
    himeno_grid_t              g;
    float                     *p;     /* "himeno.p" */
    const himeno_kernel_ops_t *ops;
    himeno_kernel_t           *k;
    int                        k_units; /* the kernel's capacity */
    double                     gosa_edges; /* step_edges' part of the iteration's gosa */
} himeno_child_t;

static int himeno_child_load(void *ctx, const omlb_part_t *part)
{
    himeno_child_t *c = ctx;
    size_t P = himeno_plane(&c->g);
    int n = part->hi - part->lo;
    float *planes = c->p + (size_t)part->lo * P;

    if (c->k == NULL || n > c->k_units) {
        c->ops->destroy(c->k);
        c->k = NULL;
        if (c->ops->create(&c->g, n, part->threads, &c->k) != 0)
            return -1;
        c->k_units = n;
    }
    APP_TRY(ivmSyncGet(planes, (size_t)(n + 2) * P * sizeof(float)));
    c->ops->threads_set(c->k, part->threads);
    return c->ops->load(c->k, part->lo, part->hi, planes);
}

/* The first and last unit of the iteration, their new planes out. */
static int himeno_child_step_edges(void *ctx, const omlb_part_t *part, void *first, void *last)
{
    himeno_child_t *c = ctx;

    c->ops->threads_set(c->k, part->threads);
    return c->ops->step_edges(c->k, first, last, &c->gosa_edges);
}

/* The rest of the iteration (the driver called step_edges before). */
static int himeno_child_step(void *ctx, const omlb_part_t *part, double *value_p,
                             double *compute_s_p)
{
    himeno_child_t *c = ctx;
    double rest;

    c->ops->threads_set(c->k, part->threads);
    double t0 = app_now_s();
    if (c->ops->step_rest(c->k, &rest) != 0)
        return -1;
    *compute_s_p = app_now_s() - t0;
    *value_p = c->gosa_edges + rest;
    return 0;
}

static int himeno_child_edges(void *ctx, const omlb_part_t *part, void *first, void *last)
{
    himeno_child_t *c = ctx;

    (void)part;
    return c->ops->edges_get(c->k, first, last);
}

static int himeno_child_halos(void *ctx, const omlb_part_t *part, const void *below,
                              const void *above)
{
    himeno_child_t *c = ctx;

    (void)part;
    return c->ops->halo_set(c->k, below, above);
}

static int himeno_child_store(void *ctx, const omlb_part_t *part)
{
    himeno_child_t *c = ctx;
    size_t P = himeno_plane(&c->g);
    float *planes = c->p + (size_t)(part->lo + 1) * P;

    if (c->ops->store(c->k, planes) != 0)
        return -1;
    APP_TRY(ivmSyncPut(planes, (size_t)(part->hi - part->lo) * P * sizeof(float)));
    return 0;
}

static const omlb_ops_t himeno_omlb_ops = {
    .load = himeno_child_load,
    .step = himeno_child_step,
    .edges = himeno_child_edges,
    .step_edges = himeno_child_step_edges,
    .halos = himeno_child_halos,
    .store = himeno_child_store,
};

static int himeno_child(const himeno_grid_t *g)
{
    himeno_child_t c = { .g = *g, .ops = &himeno_cpu_ops };
    app_kernel_t kernel;
    int ret;

    int devtype;

    APP_TRY(ivmGetMyDevType(&devtype));
    APP_TRY(ivmMap(HIMENO_P_OBJ, &c.p, 0));
    if (app_kernel_pick_ref(devtype, c.p, &kernel) != 0)
        return -1;
#ifdef APP_HAVE_CUDA
    if (kernel == APP_KERNEL_CUDA)
        c.ops = &himeno_cuda_ops;
#endif
    ret = omlb_child_run(&himeno_omlb_ops, &c, himeno_plane(g) * sizeof(float));
    c.ops->destroy(c.k);
    APP_TRY(ivmUnmap(c.p));
    return ret;
}

/* Check gosa and the checksum against the serial reference; 1 if both match. */
static int himeno_verify(const himeno_grid_t *g, int iters, double gosa, double checksum)
{
    double ref_gosa, ref_sum;

    if (himeno_reference(g, iters, &ref_gosa, &ref_sum) != 0)
        return 0;
    int ok = himeno_close(gosa, ref_gosa) && himeno_close(checksum, ref_sum);
    printf("himeno: gosa %.9e (reference %.9e), checksum %.9e (reference %.9e), "
           "tolerance %g relative: %s\n", gosa, ref_gosa, checksum, ref_sum, HIMENO_TOL,
           ok ? "match" : "MISMATCH");
    return ok;
}

static int himeno_root(const app_args_t *a, const himeno_grid_t *g)
{
    size_t P = himeno_plane(g), n = P * (size_t)g->nz;
    omlb_config_t cfg;
    omlb_result_t res = { 0 };
    app_result_t r;
    float *p;
    double checksum;
    int ret = -1;

    APP_TRY(ivmMalloc(HIMENO_P_OBJ, &p, n * sizeof(float)));
    himeno_init(g, 0, g->nz, p);

    omlb_config_init(&cfg);
    cfg.units = himeno_units(g);
    cfg.iterations = a->iters;
    cfg.cap = a->max_per_dev;
    if (omlb_devices_probe(&cfg, a->local) < 0)
        goto out;
    printf("himeno: grid %dx%dx%d, %d iterations, %d device(s), at most %d PEs per "
           "device\n", g->nx, g->ny, g->nz, a->iters, cfg.ndevs, cfg.cap);
    if (omlb_root_run(&cfg, &res) != 0)
        goto out_devs;

    checksum = himeno_checksum(g, p);
    app_result_init(&r, "himeno", "ivm", a->size);
    r.pes = res.pes_spawned;
    r.seconds = res.seconds;
    app_checksum_real(&r, checksum);
    for (int d = 0; d < cfg.ndevs; d++)
        app_result_add_share(&r, cfg.names[d], res.dev_share[d]);
    printf("himeno: gosa %.9e, %d rebalance(s), PEs per device at the end:", res.value,
           res.rebalances);
    for (int d = 0; d < cfg.ndevs; d++)
        printf(" %s=%d", cfg.names[d], res.dev_pes[d]);
    printf("\n");
    r.verified = a->verify ? himeno_verify(g, a->iters, res.value, checksum) : 0;
    app_result_print(stdout, &r);
    ret = a->verify && !r.verified ? -1 : 0;

out_devs:
    omlb_devices_release(&cfg);
out:
    ivmFree(p);
    return ret;
}

static int himeno_serial(const app_args_t *a, const himeno_grid_t *g)
{
    double gosa, checksum, t0 = app_now_s();
    app_result_t r;

    if (himeno_reference(g, a->iters, &gosa, &checksum) != 0)
        return -1;
    app_result_init(&r, "himeno", "serial", a->size);
    r.seconds = app_now_s() - t0;
    r.verified = 1;
    app_checksum_real(&r, checksum);
    printf("himeno: gosa %.9e\n", gosa);
    return app_serial_finish(a, &r, 0);
}

int main(int argc, char **argv)
{
    app_args_t a = { .app = "himeno", .size = 33, .seed = 1, .portions = 1, .iters = 20,
                     .threshold = 0.0, .max_per_dev = 1 };
    himeno_grid_t g;
    int id, ret;

    if (app_args_parse(argc, argv, &a, himeno_usage) != 0 ||
        himeno_grid_from_size(a.size, &g) != 0)
        return 2;
    if (a.serial)
        return himeno_serial(&a, &g) == 0 ? 0 : 1;

    ivmError_t rc = ivmEnter();
    if (rc != IVM_SUCCESS) {
        app_ivm_error(rc, "ivmEnter()", __FILE__, __LINE__);
        return 1;
    }
    if (ivmGetMyId(&id) != IVM_SUCCESS)
        id = -1;
    ret = id == 0 ? himeno_root(&a, &g) : id > 0 ? himeno_child(&g) : -1;
    ivmExit();
    return ret == 0 ? 0 : 1;
}
