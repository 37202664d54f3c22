/*
 * dmm: DMM with DS-LB (section 5.4.2). C = A x B is cut into M x M tiles
 * (M * M = --tiles, default at least 16 x 16), the work units; the driver
 * cuts the tiles, in row order, into --portions runs (--layout, dslb.h),
 * one PE each (apps/common/dslb.h).
 *
 * Objects: "dmm.A" (row-major), "dmm.Bt" (B transposed), "dmm.C" (tile-major,
 * see dmm.h: a run of tiles is one range of it). A child maps with
 * ivmMapSubset only the strip of A of its run's tile rows and the strip of
 * Bt of its run's tile columns (all of Bt for a run over more than one tile
 * row): the first map of a strip on a node fills that node's mirror, later
 * maps there move no data (A and B never change, so no ivmSyncGet). It
 * computes its tiles and pushes them, one range of C.
 *
 * Run:  ivmrun --nodes 2 dmm [--size N] [--portions P] [--tiles M*M] [--iters I]
 *                            [--verify]
 *       dmm --serial ...   (one process, the CPU kernel over all tiles)
 * With --iters I the product is computed I times (every iteration redoes
 * every tile: the later ones show the reuse of strips already on a node).
 */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "dmm.h"
#include "dslb.h"

#define DMM_USAGE "  dmm: --size = matrix order n, --tiles = tiles of C, M*M (a square, " \
                  "default the least of at least 16 x 16 that holds the portions), " \
                  "--portions = runs of tiles, --iters = times the product is computed"

#ifdef DMM_OBJ_PROBE
/* Test build only (tests/apps/dmm_probe.c): bytes of object `name` this
   node's daemon has received so far. */
uint64_t dmm_probe_rx(const char *name);
#endif

typedef struct {
    float *a, *bt, *c;         /* root: the three objects */
} dmm_ctx_t;

static int dmm_check(const app_args_t *a, const float *c, app_result_t *r)
{
    int n = (int)a->size, M = dmm_grid(a);
    size_t nn = (size_t)n * (size_t)n;
    float *rowmajor = malloc(nn * sizeof(float)), *ref = NULL;
    int ret = -1;

    if (rowmajor == NULL)
        goto out;
    dmm_untile(c, rowmajor, n, M);
    app_checksum_real(r, app_weighted_sum_f(rowmajor, nn));
    if (a->verify) {
        ref = malloc(nn * sizeof(float));
        if (ref == NULL || dmm_reference(a->seed, n, ref) != 0)
            goto out;
        r->verified = app_verify_f("dmm", "C", rowmajor, ref, nn, DMM_RTOL, DMM_ATOL) == 0;
    }
    ret = 0;
out:
    if (ret != 0)
        fprintf(stderr, "dmm: no memory to check the %d x %d result\n", n, n);
    free(ref);
    free(rowmajor);
    return ret;
}

static int dmm_root_setup(void *vctx, const app_args_t *a)
{
    dmm_ctx_t *ctx = vctx;
    size_t bytes = (size_t)a->size * (size_t)a->size * sizeof(float);

    APP_TRY(ivmMalloc("dmm.A", &ctx->a, bytes));
    APP_TRY(ivmMalloc("dmm.Bt", &ctx->bt, bytes));
    APP_TRY(ivmMalloc("dmm.C", &ctx->c, bytes));
    dmm_init(a->seed, (int)a->size, ctx->a, ctx->bt);
    return 0;
}

static int dmm_root_finish(void *vctx, const app_args_t *a, app_result_t *r)
{
    dmm_ctx_t *ctx = vctx;
    int ret = dmm_check(a, ctx->c, r);

    ivmFree(ctx->c);
    ivmFree(ctx->bt);
    ivmFree(ctx->a);
    return ret;
}

/* Map `rows` rows of n floats from row `r0` of object `name`. */
static int dmm_map_strip(const char *name, float **p, int n, int r0, int rows, int pe)
{
#ifdef DMM_OBJ_PROBE
    uint64_t rx0 = dmm_probe_rx(name);
#endif
    APP_TRY(ivmMapSubset(name, p, (size_t)r0 * n * sizeof(float),
                         (size_t)rows * n * sizeof(float)));
#ifdef DMM_OBJ_PROBE
    printf("dmm-probe: node=%s pe=%d obj=%s strip=%d bytes=%zu rx=%llu\n",
           getenv("IVM_NODE") ? getenv("IVM_NODE") : "?", pe, name, r0,
           (size_t)rows * n * sizeof(float), (unsigned long long)(dmm_probe_rx(name) - rx0));
    fflush(stdout);
#else
    (void)pe;
#endif
    return 0;
}

/* The run's strips and its range of C are mapped, computed tile by tile
   and pushed; the mappings are left to the PE's ivmExit (dslb.h): three
   unmaps are three round trips on the device's chain. */
static int dmm_child_portion(void *vctx, const dslb_portion_t *w)
{
    const app_args_t *a = w->args;
    int n = (int)a->size, M = dmm_grid(a);
    long long k0 = w->lo, k1 = w->hi;
    float *as = NULL, *bs = NULL, *ct = NULL;

    (void)vctx;
    if (k1 == k0)
        return 0;
    int i0 = (int)(k0 / M), i1 = (int)((k1 - 1) / M);
    int j0 = i0 == i1 ? (int)(k0 % M) : 0, j1 = i0 == i1 ? (int)((k1 - 1) % M) : M - 1;
    int r0 = dmm_lo(n, M, i0), rows = dmm_lo(n, M, i1 + 1) - r0;
    int c0 = dmm_lo(n, M, j0), cols = dmm_lo(n, M, j1 + 1) - c0;
    size_t t0 = dmm_tile_at(n, M, k0), len = dmm_tile_at(n, M, k1) - t0;

    if (dmm_map_strip("dmm.A", &as, n, r0, rows, w->pe) != 0 ||
        dmm_map_strip("dmm.Bt", &bs, n, c0, cols, w->pe) != 0)
        return -1;
    APP_TRY(ivmMapSubset("dmm.C", &ct, t0 * sizeof(float), len * sizeof(float)));
    for (long long k = k0; k < k1; k++) {
        int i = (int)(k / M), j = (int)(k % M);
        int ri = dmm_lo(n, M, i), cj = dmm_lo(n, M, j);
        const float *ak = as + (size_t)(ri - r0) * n, *bk = bs + (size_t)(cj - c0) * n;
        float *ck = ct + (dmm_tile_at(n, M, k) - t0);
        int rows_k = dmm_lo(n, M, i + 1) - ri, cols_k = dmm_lo(n, M, j + 1) - cj;

        if (w->kernel == APP_KERNEL_CUDA) {
#ifdef APP_HAVE_CUDA
            if (dmm_tile_cuda(ak, bk, ck, n, rows_k, cols_k) != 0)
                return -1;
#endif
        } else {
            dmm_tile_cpu(ak, bk, ck, n, rows_k, cols_k);
        }
    }
    /* The successor starts while the tiles travel. */
    if (dslb_portion_computed(w) != 0)
        return -1;
    APP_TRY(ivmSyncPut(ct, len * sizeof(float)));
    return 0;
}

/* Staging, once per node but the root's: A and Bt mapped whole, which
   fills the node's copies before the timed iterations (dmm-mpi's ranks
   build theirs before their timer). */
static int dmm_child_stage(void *vctx, const app_args_t *a, int pe)
{
    int n = (int)a->size;
    float *as = NULL, *bs = NULL;

    (void)vctx;
    if (dmm_map_strip("dmm.A", &as, n, 0, n, pe) != 0 ||
        dmm_map_strip("dmm.Bt", &bs, n, 0, n, pe) != 0)
        return -1;
    return 0;
}

/* The driver cuts the portions: a unit is a tile. */
static long long dmm_units(void *vctx, const app_args_t *a)
{
    int M = dmm_grid(a);

    (void)vctx;
    return (long long)M * M;
}

/* Tiles [lo, hi): their elements of C (each costs a dot product of n). */
static double dmm_unit_work(void *vctx, const app_args_t *a, long long lo, long long hi)
{
    int n = (int)a->size, M = dmm_grid(a);

    (void)vctx;
    return (double)(dmm_tile_at(n, M, hi) - dmm_tile_at(n, M, lo));
}

/* Every process: the app's limits. */
static int dmm_args_check(void *vctx, const app_args_t *a)
{
    int M = dmm_grid(a);

    (void)vctx;
    if (a->size > 32768 || M < 0 || (long long)M * M < a->portions) {
        fprintf(stderr, "dmm: need size <= 32768, --tiles a square M*M with M <= size and "
                "portions <= tiles (got size %lld, tiles %d, portions %d)\n", a->size,
                a->tiles, a->portions);
        return 2;
    }
    return 0;
}

/* --serial: the CPU kernel over every tile in this one process. */
static int dmm_serial(void *vctx, const app_args_t *a, app_result_t *r)
{
    int n = (int)a->size, M = dmm_grid(a);
    size_t nn = (size_t)n * (size_t)n;
    float *A = malloc(nn * sizeof(float)), *Bt = malloc(nn * sizeof(float));
    float *C = malloc(nn * sizeof(float));
    int ret = -1;

    (void)vctx;
    if (A == NULL || Bt == NULL || C == NULL) {
        fprintf(stderr, "dmm: no memory for n = %d\n", n);
        goto out;
    }
    dmm_init(a->seed, n, A, Bt);
    double t0 = app_now_s();
    for (int t = 0; t < a->iters; t++) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < M; j++) {
                int r0 = dmm_lo(n, M, i), c0 = dmm_lo(n, M, j);
                dmm_tile_cpu(A + (size_t)r0 * n, Bt + (size_t)c0 * n,
                             C + dmm_tile_off(n, M, i, j), n, dmm_lo(n, M, i + 1) - r0,
                             dmm_lo(n, M, j + 1) - c0);
            }
        }
    }
    r->seconds = app_now_s() - t0;
    ret = dmm_check(a, C, r) != 0;
out:
    free(C);
    free(Bt);
    free(A);
    return ret;
}

int main(int argc, char **argv)
{
    app_args_t a = { .app = "dmm", .size = 512, .seed = 1, .portions = 16, .iters = 1,
                     .threshold = 0.0, .max_per_dev = 1 };
    static const dslb_app_ops_t ops = {
        .root_setup = dmm_root_setup,
        .root_finish = dmm_root_finish,
        .child_portion = dmm_child_portion,
        .child_stage = dmm_child_stage,
        .units = dmm_units,
        .unit_work = dmm_unit_work,
        .args_check = dmm_args_check,
        .serial = dmm_serial,
    };
    dmm_ctx_t ctx = { 0 };

    return dslb_main(argc, argv, &a, DMM_USAGE, &ops, &ctx);
}
