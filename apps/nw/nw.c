/*
 * nw: NW with DS-LB (section 5.4.2). The sequence pairs are cut into
 * --portions portions, one PE each (apps/common/dslb.h), which the driver
 * cuts (--layout).
 *
 * Objects: "nw.seq" (every pair's sequences, read-only after set-up: a
 * child maps it whole, its node's copy is filled once and reused), "nw.score"
 * (one int32 per pair: a child maps its portion's entries and pushes them).
 * Every PE derives the pairs' offsets and lengths from the seed (nw_layout).
 *
 * Run:  ivmrun --nodes 2 nw [--size PAIRS] [--portions P] [--iters I] [--verify]
 *       nw --serial ...   (one process, the CPU kernel over all pairs)
 * With --iters I the scores are computed I times.
 */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "dslb.h"
#include "nw.h"

#define NW_USAGE "  nw: --size = sequence pairs (lengths 256..768), --portions = portions " \
                 "of pairs, --iters = times the scores are computed"

typedef struct {
    char *seq;                 /* root: "nw.seq" */
    int32_t *score;            /* root: "nw.score" */
    size_t *off;               /* every PE: the layout */
    int *la, *lb;
    double *cells;             /* every PE: cells of pairs [0, k), k = 0 .. size */
    size_t total;
} nw_ctx_t;

static int nw_check(const app_args_t *a, const int32_t *score, app_result_t *r)
{
    int n = (int)a->size;
    int32_t *ref;

    app_checksum_hex(r, app_fnv1a(score, (size_t)n * sizeof(int32_t)));
    if (!a->verify)
        return 0;
    ref = malloc((size_t)n * sizeof(*ref));
    if (ref == NULL || nw_reference(a->seed, n, ref) != 0) {
        fprintf(stderr, "nw: no memory for the reference\n");
        free(ref);
        return -1;
    }
    r->verified = app_verify_exact("nw", "score", score, ref, (size_t)n, sizeof(int32_t)) == 0;
    free(ref);
    return 0;
}

static int nw_root_setup(void *vctx, const app_args_t *a)
{
    nw_ctx_t *ctx = vctx;

    APP_TRY(ivmMalloc("nw.seq", &ctx->seq, ctx->total));
    APP_TRY(ivmMalloc("nw.score", &ctx->score, (size_t)a->size * sizeof(int32_t)));
    nw_init(a->seed, (int)a->size, ctx->seq);
    return 0;
}

static int nw_root_finish(void *vctx, const app_args_t *a, app_result_t *r)
{
    nw_ctx_t *ctx = vctx;
    int ret = nw_check(a, ctx->score, r);

    ivmFree(ctx->score);
    ivmFree(ctx->seq);
    return ret;
}

/* Mappings are left to the PE's ivmExit (dslb.h): an unmap is a round trip
   on the device's chain. */
static int nw_child_portion(void *vctx, const dslb_portion_t *w)
{
    nw_ctx_t *ctx = vctx;
    int lo = (int)w->lo, hi = (int)w->hi;
    size_t bytes = (size_t)(hi - lo) * sizeof(int32_t);
    char *seq = NULL;
    int32_t *score = NULL;

    if (hi == lo)
        return 0;
    APP_TRY(ivmMap("nw.seq", &seq, 0));
    APP_TRY(ivmMapSubset("nw.score", &score, (size_t)lo * sizeof(int32_t), bytes));
    if (w->kernel == APP_KERNEL_CUDA) {
#ifdef APP_HAVE_CUDA
        if (nw_pairs_cuda(seq, ctx->off, ctx->la, ctx->lb, score, lo, hi) != 0)
            return -1;
#endif
    } else {
        nw_pairs_cpu(seq, ctx->off, ctx->la, ctx->lb, score, lo, hi);
    }
    /* The successor starts while the scores travel. */
    if (dslb_portion_computed(w) != 0)
        return -1;
    APP_TRY(ivmSyncPut(score, bytes));
    return 0;
}

/* The driver cuts the portions: a unit is a pair, its work its cells. */
static long long nw_units(void *vctx, const app_args_t *a)
{
    (void)vctx;
    return a->size;
}

static double nw_unit_work(void *vctx, const app_args_t *a, long long lo, long long hi)
{
    nw_ctx_t *ctx = vctx;

    (void)a;
    return ctx->cells[hi] - ctx->cells[lo];
}

/* Every process: the app's limits and the pairs' layout (from the seed). */
static int nw_args_check(void *vctx, const app_args_t *a)
{
    nw_ctx_t *ctx = vctx;

    if (a->size > (1 << 22) || a->portions > a->size) {
        fprintf(stderr, "nw: need portions <= size <= %d\n", 1 << 22);
        return 2;
    }
    ctx->off = malloc((size_t)a->size * sizeof(*ctx->off));
    ctx->la = malloc((size_t)a->size * sizeof(int));
    ctx->lb = malloc((size_t)a->size * sizeof(int));
    ctx->cells = malloc(((size_t)a->size + 1) * sizeof(double));
    if (ctx->off == NULL || ctx->la == NULL || ctx->lb == NULL || ctx->cells == NULL) {
        fprintf(stderr, "nw: no memory for %lld pairs\n", a->size);
        return 1;
    }
    ctx->total = nw_layout(a->seed, (int)a->size, ctx->off, ctx->la, ctx->lb);
    ctx->cells[0] = 0.0;
    for (long long k = 0; k < a->size; k++)
        ctx->cells[k + 1] = ctx->cells[k] + (double)ctx->la[k] * (double)ctx->lb[k];
    return 0;
}

static void nw_release(void *vctx)
{
    nw_ctx_t *ctx = vctx;

    free(ctx->cells);
    free(ctx->lb);
    free(ctx->la);
    free(ctx->off);
}

/* --serial: the CPU kernel over all pairs in this one process. */
static int nw_serial(void *vctx, const app_args_t *a, app_result_t *r)
{
    nw_ctx_t *ctx = vctx;
    int n = (int)a->size;
    char *seq = malloc(ctx->total);
    int32_t *score = malloc((size_t)n * sizeof(*score));
    int ret = -1;

    if (seq == NULL || score == NULL) {
        fprintf(stderr, "nw: no memory for %d pairs\n", n);
        goto out;
    }
    nw_init(a->seed, n, seq);
    double t0 = app_now_s();
    for (int t = 0; t < a->iters; t++)
        nw_pairs_cpu(seq, ctx->off, ctx->la, ctx->lb, score, 0, n);
    r->seconds = app_now_s() - t0;
    ret = nw_check(a, score, r) != 0;
out:
    free(score);
    free(seq);
    return ret;
}

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nw", .size = 256, .seed = 1, .portions = 16, .iters = 1,
                     .threshold = 0.0, .max_per_dev = 1 };
    static const dslb_app_ops_t ops = {
        .root_setup = nw_root_setup,
        .root_finish = nw_root_finish,
        .child_portion = nw_child_portion,
        .units = nw_units,
        .unit_work = nw_unit_work,
        .args_check = nw_args_check,
        .serial = nw_serial,
        .release = nw_release,
    };
    nw_ctx_t ctx = { 0 };

    return dslb_main(argc, argv, &a, NW_USAGE, &ops, &ctx);
}
