/*
 * nbody: NBODY with DS-LB (section 5.4.2). Every time step is cut into
 * --portions portions of particles, each done by one PE (apps/common/dslb.h).
 *
 * The driver cuts the particles into the portions (--layout, dslb.h).
 *
 * Objects: "nbody.pos" holds two position buffers of n particles (step t
 * reads buffer t % 2 and writes buffer (t + 1) % 2), "nbody.vel" the
 * velocities. A child pulls the whole input buffer and its velocity slice
 * (its node's copy may hold an older step), computes its particles and pushes
 * its slices of the output buffer and of the velocities.
 *
 * Run:  ivmrun --nodes 2 nbody [--size N] [--portions P] [--iters I] [--verify]
 *       nbody --serial ...   (one process, the CPU kernel over all particles)
 */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "dslb.h"
#include "nbody.h"

#define NBODY_USAGE "  nbody: --size = particles, --portions = portions per time step, " \
                    "--iters = time steps"

typedef struct {
    nbody_vec_t *pos;          /* root: "nbody.pos", 2 x n */
    nbody_vec_t *vel;          /* root: "nbody.vel", n */
} nbody_ctx_t;

static int nbody_check(const app_args_t *a, const nbody_vec_t *final, app_result_t *r)
{
    int n = (int)a->size;
    nbody_vec_t *ref;

    app_checksum_real(r, app_weighted_sum_f((const float *)final, (size_t)n * 4));
    if (!a->verify)
        return 0;
    ref = malloc((size_t)n * sizeof(*ref));
    if (ref == NULL || nbody_reference(a->seed, n, a->iters, ref) != 0) {
        fprintf(stderr, "nbody: no memory for the reference\n");
        free(ref);
        return -1;
    }
    r->verified = app_verify_f("nbody", "position", (const float *)final, (const float *)ref,
                               (size_t)n * 4, NBODY_RTOL, NBODY_ATOL) == 0;
    free(ref);
    return 0;
}

static int nbody_root_setup(void *vctx, const app_args_t *a)
{
    nbody_ctx_t *ctx = vctx;
    int n = (int)a->size;

    APP_TRY(ivmMalloc("nbody.pos", &ctx->pos, 2 * (size_t)n * sizeof(nbody_vec_t)));
    APP_TRY(ivmMalloc("nbody.vel", &ctx->vel, (size_t)n * sizeof(nbody_vec_t)));
    nbody_init(a->seed, n, ctx->pos, ctx->vel);
    return 0;
}

static int nbody_root_finish(void *vctx, const app_args_t *a, app_result_t *r)
{
    nbody_ctx_t *ctx = vctx;
    int ret = nbody_check(a, ctx->pos + (size_t)(a->iters % 2) * (size_t)a->size, r);

    ivmFree(ctx->vel);
    ivmFree(ctx->pos);
    return ret;
}

/* Mappings are left to the PE's ivmExit (dslb.h): an unmap is a round trip
   on the device's chain. */
static int nbody_child_portion(void *vctx, const dslb_portion_t *w)
{
    const app_args_t *a = w->args;
    int n = (int)a->size, in = w->iter % 2, out = 1 - in;
    int lo = (int)w->lo, hi = (int)w->hi;
    size_t vsz = sizeof(nbody_vec_t);
    nbody_vec_t *pos = NULL, *vel = NULL;

    (void)vctx;
    if (hi == lo)
        return 0;
    APP_TRY(ivmMap("nbody.pos", &pos, 0));
    APP_TRY(ivmMapSubset("nbody.vel", &vel, (size_t)lo * vsz, (size_t)(hi - lo) * vsz));
    nbody_vec_t *pin = pos + (size_t)in * n, *pout = pos + (size_t)out * n + lo;
    APP_TRY(ivmSyncGet(pin, (size_t)n * vsz));
    APP_TRY(ivmSyncGet(vel, (size_t)(hi - lo) * vsz));
    if (w->kernel == APP_KERNEL_CUDA) {
#ifdef APP_HAVE_CUDA
        if (nbody_step_cuda(pin, pout, vel, n, lo, hi) != 0)
            return -1;
#endif
    } else {
        nbody_step_cpu(pin, pout, vel, n, lo, hi);
    }
    /* The successor starts while the results travel. */
    if (dslb_portion_computed(w) != 0)
        return -1;
    APP_TRY(ivmSyncPut(pout, (size_t)(hi - lo) * vsz));
    APP_TRY(ivmSyncPut(vel, (size_t)(hi - lo) * vsz));
    return 0;
}

/* The driver cuts the portions: a unit is a particle, all of equal work. */
static long long nbody_units(void *vctx, const app_args_t *a)
{
    (void)vctx;
    return a->size;
}

/* Every process: the app's limits. */
static int nbody_args_check(void *vctx, const app_args_t *a)
{
    (void)vctx;
    if (a->size > (1 << 24) || a->portions > a->size) {
        fprintf(stderr, "nbody: need portions <= size <= %d\n", 1 << 24);
        return 2;
    }
    return 0;
}

/* --serial: the CPU kernel over all particles in this one process. */
static int nbody_serial(void *vctx, const app_args_t *a, app_result_t *r)
{
    int n = (int)a->size;
    nbody_vec_t *pos = malloc(2 * (size_t)n * sizeof(*pos));
    nbody_vec_t *vel = malloc((size_t)n * sizeof(*vel));
    int ret = -1;

    (void)vctx;
    if (pos == NULL || vel == NULL) {
        fprintf(stderr, "nbody: no memory for %d particles\n", n);
        goto out;
    }
    nbody_init(a->seed, n, pos, vel);
    double t0 = app_now_s();
    for (int t = 0; t < a->iters; t++)
        nbody_step_cpu(pos + (size_t)(t % 2) * n, pos + (size_t)(1 - t % 2) * n, vel, n, 0, n);
    r->seconds = app_now_s() - t0;
    ret = nbody_check(a, pos + (size_t)(a->iters % 2) * n, r) != 0;
out:
    free(vel);
    free(pos);
    return ret;
}

int main(int argc, char **argv)
{
    app_args_t a = { .app = "nbody", .size = 4096, .seed = 1, .portions = 16, .iters = 2,
                     .threshold = 0.0, .max_per_dev = 1 };
    static const dslb_app_ops_t ops = {
        .root_setup = nbody_root_setup,
        .root_finish = nbody_root_finish,
        .child_portion = nbody_child_portion,
        .units = nbody_units,
        .args_check = nbody_args_check,
        .serial = nbody_serial,
    };
    nbody_ctx_t ctx = { 0 };

    return dslb_main(argc, argv, &a, NBODY_USAGE, &ops, &ctx);
}
