/*
 * dslb: the DS-LB driver (see dslb.h for the scheme).
 */
#include "dslb.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define DSLB_CTL         "dslb.ctl"
#define DSLB_REC         "dslb.rec"
#define DSLB_DEV         "dslb.dev"
#define DSLB_DPC         "dslb.dpc"
#define DSLB_POLL_S      100e-6        /* root's record polling period: 100 us */
#define DSLB_LIVENESS_S  0.02          /* root checks the PE count every 20 ms */
#define DSLB_TIMEOUT_S   600.0         /* bound on one iteration */
#define DSLB_CTL_MAGIC   0x44534c42u   /* "DSLB" */
#define DSLB_SLOW_ENV    "IVM_DSLB_SLOW" /* test knob, see dslb.h */

/* One device of the run ("dslb.ctl"). */
typedef struct {
    char host[IVM_HOST_MAX + 1];   /* node name; "" with --local (any node) */
    int32_t devtype;
    int32_t reserved;
    double slow;                   /* IVM_DSLB_SLOW factor (test knob), 1 = none */
} dslb_dev_t;

/* "dslb.ctl": written by the root before the first PE starts, read-only after. */
typedef struct {
    uint32_t magic;
    int32_t portions;              /* per iteration */
    int32_t iters;
    int32_t ndev;
    int32_t dpc;                   /* --dpc: "dslb.dpc" exists */
    int32_t reserved;
    dslb_dev_t dev[APP_MAX_DEVS];
} dslb_ctl_t;

/* "dslb.dpc" (--dpc): one per PE id (index id - 1), wall-clock seconds. The
   creator writes t_request (taken just before its ivmCreatePEs), the PE
   t_started (just after its ivmEnter returned); the latency of its creation
   is the difference: spawn or pool hand-out, exec and library start-up,
   ivmEnter. Each field is pushed alone, by its writer. */
typedef struct {
    double t_request;
    double t_started;
} dslb_dpc_t;

/* "dslb.rec": one per portion, rewritten every iteration. The body is pushed
   first, the flag (iteration + 1) after it. */
typedef struct {
    int32_t pe;                    /* PE that did the portion */
    int32_t dev;                   /* its index in the device table */
    double seconds;                /* wall-clock of the portion */
    double work;                   /* work units of the portion */
    _Atomic int32_t done_iter;     /* iteration + 1 once the portion is done */
    int32_t reserved;
} dslb_rec_t;

/* "dslb.dev": statistics of one device, updated by its PEs (atomics on their
   node's copy) and pushed as a whole; a cache line each. */
typedef struct {
    _Atomic int64_t portions;      /* portions done */
    _Atomic int64_t ns;            /* their wall-clock, nanoseconds */
    _Atomic int64_t micro_work;    /* their work units x 1e6 */
    int64_t reserved[5];
} dslb_stat_t;

_Static_assert(sizeof(dslb_stat_t) == 64, "one cache line per device");

static double dslb_work(const dslb_app_ops_t *ops, void *ctx, const app_args_t *args,
                        int portion)
{
    return ops->portion_work != NULL ? ops->portion_work(ctx, args, portion) : 1.0;
}

/* app_devices_probe's callback: one more row of the device table. */
static int dslb_dev_found(void *arg, const char *host, int devtype, ivm_device dev)
{
    dslb_ctl_t *ctl = arg;
    dslb_dev_t *d = &ctl->dev[ctl->ndev++];

    APP_TRY(ivmDestroyDev(dev));
    snprintf(d->host, sizeof(d->host), "%s", host);
    d->devtype = devtype;
    return 0;
}

/* The device table: every device of node0, node1, ... (until an unknown
   host), or with --local (or no node named node0) the root's node only. */
static int dslb_probe(dslb_ctl_t *ctl, const app_args_t *args)
{
    ctl->ndev = 0;
    if (app_devices_probe(args->local, APP_MAX_DEVS, dslb_dev_found, ctl) < 0)
        return -1;
    if (ctl->ndev == 0) {
        fprintf(stderr, "%s: no device found\n", args->app);
        return -1;
    }
    for (int d = 0; d < ctl->ndev; d++) {
        ctl->dev[d].slow = app_slow_factor(DSLB_SLOW_ENV, d);
        if (ctl->dev[d].slow < 1.0)
            return -1;
    }
    return 0;
}

/* Seconds per work unit of device d (0: no data yet). */
static double dslb_rate(dslb_stat_t *st)
{
    int64_t ns = atomic_load_explicit(&st->ns, memory_order_relaxed);
    int64_t mw = atomic_load_explicit(&st->micro_work, memory_order_relaxed);

    return mw > 0 ? (double)ns / (double)mw : 0.0;
}

/* Index of the fastest device with statistics (device 0 when none has). */
static int dslb_fastest(dslb_stat_t *st, int ndev)
{
    int best = 0;
    double best_rate = 0.0;

    for (int d = 0; d < ndev; d++) {
        double r = dslb_rate(&st[d]);
        if (r > 0.0 && (best_rate == 0.0 || r < best_rate)) {
            best = d;
            best_rate = r;
        }
    }
    return best;
}

static int dslb_count_done(dslb_rec_t *rec, int P, int iter)
{
    int done = 0;

    for (int p = 0; p < P; p++)
        done += atomic_load_explicit(&rec[p].done_iter, memory_order_acquire) == iter + 1;
    return done;
}

/* Start one PE on device d of the table; *pe_p = its id or IVM_PE_NULL.
   With dpc (the root's master of "dslb.dpc"), the request time is noted. */
static int dslb_spawn(const dslb_ctl_t *ctl, int d, dslb_dpc_t *dpc, ivm_pe *pe_p)
{
    const char *host = ctl->dev[d].host[0] != '\0' ? ctl->dev[d].host : IVM_THIS_HOST;
    ivm_device dev;
    ivmError_t rc;
    double t;

    APP_TRY(ivmCreateDev(host, ctl->dev[d].devtype, &dev));
    t = app_wall_s();
    rc = ivmCreatePEs(dev, 1, pe_p);
    ivmDestroyDev(dev);
    APP_TRY(rc);
    if (dpc != NULL && *pe_p != IVM_PE_NULL)
        dpc[*pe_p - 1].t_request = t;
    return 0;
}

static int dslb_dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --dpc: the creation latency of PEs 1..n (the root's master copy, where
   every PE pushed its field), as one DPC line. share is the sum over the
   computation's wall-clock: an upper bound, as if no creation overlapped
   another or any work. chain_share divides that by the chains running at
   once (devices x max-per-dev): the part of each chain's time spent waiting
   for its next PE. */
static void dslb_dpc_report(const app_args_t *args, const dslb_dpc_t *dpc, int n,
                            double seconds, int chains)
{
    double *lat = malloc((size_t)(n > 0 ? n : 1) * sizeof(double)), sum = 0.0;
    int m = 0;

    if (lat == NULL)
        return;
    for (int i = 0; i < n; i++) {
        if (dpc[i].t_request > 0.0 && dpc[i].t_started > 0.0) {
            lat[m] = dpc[i].t_started - dpc[i].t_request;
            sum += lat[m++];
        }
    }
    qsort(lat, (size_t)m, sizeof(double), dslb_dbl_cmp);
    printf("DPC app=%s pes=%d measured=%d median_ms=%.3f p90_ms=%.3f max_ms=%.3f "
           "min_ms=%.3f sum_ms=%.3f seconds=%.6f share=%.5f chains=%d chain_share=%.5f\n",
           args->app, n, m, m ? lat[m / 2] * 1e3 : 0.0, m ? lat[m * 9 / 10] * 1e3 : 0.0,
           m ? lat[m - 1] * 1e3 : 0.0, m ? lat[0] * 1e3 : 0.0, sum * 1e3, seconds,
           seconds > 0.0 ? sum / seconds : 0.0, chains,
           seconds > 0.0 && chains > 0 ? sum / seconds / chains : 0.0);
    fflush(stdout);
    free(lat);
}

/* Wait until every portion of `iter` is done. When no child is alive and
   portions are left (every chain stopped by the threshold), start one PE on
   the fastest device; when that gets no id (all ids of the iteration were
   handed out), a PE died. */
static int dslb_root_wait(const app_args_t *args, const dslb_ctl_t *ctl, dslb_rec_t *rec,
                          dslb_stat_t *st, dslb_dpc_t *dpc, int iter, int *restarts_p)
{
    int P = args->portions;
    double start = app_now_s(), last_check = start;

    for (;;) {
        if (dslb_count_done(rec, P, iter) == P)
            return 0;
        double t = app_now_s();
        if (t - start > DSLB_TIMEOUT_S) {
            fprintf(stderr, "%s: dslb: iteration %d: only %d of %d portions done after "
                    "%.0f s\n", args->app, iter, dslb_count_done(rec, P, iter), P,
                    DSLB_TIMEOUT_S);
            return -1;
        }
        if (t - last_check >= DSLB_LIVENESS_S) {
            int npes;
            last_check = t;
            APP_TRY(ivmGetNumPEs(&npes));
            /* Count first, records second: a child gone before the count has
               pushed its flag before it. */
            if (npes <= 1 && dslb_count_done(rec, P, iter) < P) {
                int d = dslb_fastest(st, ctl->ndev);
                ivm_pe pe;
                if (dslb_spawn(ctl, d, dpc, &pe) != 0)
                    return -1;
                if (pe == IVM_PE_NULL) {
                    fprintf(stderr, "%s: dslb: iteration %d: every PE id of the iteration "
                            "was handed out but only %d of %d portions are done (a PE "
                            "died?)\n", args->app, iter, dslb_count_done(rec, P, iter), P);
                    return -1;
                }
                ++*restarts_p;
            }
        }
        app_sleep_s(DSLB_POLL_S);
    }
}

static int dslb_root(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx)
{
    int P = args->portions, iters = args->iters, restarts = 0, max_id = 0, ret = -1;
    dslb_ctl_t *ctl = NULL;
    dslb_rec_t *rec = NULL;
    dslb_stat_t *st = NULL;
    dslb_dpc_t *dpc = NULL;
    app_result_t res;
    double seconds = 0.0;

    app_result_init(&res, args->app, "ivm", args->size);
    if (ops->root_setup(ctx, args) != 0)
        return -1;
    APP_TRY(ivmMalloc(DSLB_CTL, &ctl, sizeof(*ctl)));
    APP_TRY_GOTO(ivmMalloc(DSLB_REC, &rec, (size_t)P * sizeof(*rec)), out_free);
    APP_TRY_GOTO(ivmMalloc(DSLB_DEV, &st, APP_MAX_DEVS * sizeof(*st)), out_free);
    ctl->magic = DSLB_CTL_MAGIC;
    ctl->portions = P;
    ctl->iters = iters;
    if (args->dpc) {
        APP_TRY_GOTO(ivmMalloc(DSLB_DPC, &dpc, (size_t)P * iters * sizeof(*dpc)), out_free);
        memset(dpc, 0, (size_t)P * iters * sizeof(*dpc));
        ctl->dpc = 1;
    }
    if (dslb_probe(ctl, args) != 0)
        goto out_free;
    printf("dslb: devices");
    for (int d = 0; d < ctl->ndev; d++) {
        char name[APP_NAME_MAX];
        app_dev_name(ctl->dev[d].host, ctl->dev[d].devtype, name, sizeof(name));
        printf(" %d=%s", d, name);
        if (ctl->dev[d].slow > 1.0)
            printf("(slowed x%g by %s)", ctl->dev[d].slow, DSLB_SLOW_ENV);
    }
    printf("\n");

    for (int iter = 0; iter < iters; iter++) {
        double t0 = app_now_s();
        ivm_pe first = IVM_PE_NULL;

        APP_TRY_GOTO(ivmSetMaxPesId(P * (iter + 1)), out_free);
        for (int k = 0; k < args->max_per_dev; k++) {
            for (int d = 0; d < ctl->ndev; d++) {
                ivm_pe pe;
                if (dslb_spawn(ctl, d, dpc, &pe) != 0)
                    goto out_free;
                if (first == IVM_PE_NULL)
                    first = pe;
            }
        }
        if (first != P * iter + 1) {
            fprintf(stderr, "%s: dslb: iteration %d: first PE id %d, expected %d (ids not "
                    "assigned in order?)\n", args->app, iter, first, P * iter + 1);
            goto out_free;
        }
        if (dslb_root_wait(args, ctl, rec, st, dpc, iter, &restarts) != 0)
            goto out_free;
        if (ops->root_iter_end != NULL && ops->root_iter_end(ctx, args, iter) != 0)
            goto out_free;
        seconds += app_now_s() - t0;

        for (int p = 0; p < P; p++) {
            char name[APP_NAME_MAX];
            int d = rec[p].dev;
            if (d < 0 || d >= ctl->ndev || rec[p].pe != P * iter + 1 + p) {
                fprintf(stderr, "%s: dslb: iteration %d portion %d: record of PE %d on "
                        "device %d (expected PE %d)\n", args->app, iter, p, rec[p].pe, d,
                        P * iter + 1 + p);
                goto out_free;
            }
            if (rec[p].pe > max_id)
                max_id = rec[p].pe;
            app_dev_name(ctl->dev[d].host, ctl->dev[d].devtype, name, sizeof(name));
            app_result_add_share(&res, name, rec[p].work);
        }
    }

    /* The limit is P * iters: one more spawn must be refused. */
    {
        ivm_pe extra;
        if (dslb_spawn(ctl, 0, NULL, &extra) != 0)
            goto out_free;
        if (extra != IVM_PE_NULL) {
            fprintf(stderr, "%s: dslb: PE %d started beyond the max PE id %d\n",
                    args->app, extra, P * iters);
            ivmKillPEs(&extra, 1);
            goto out_free;
        }
    }
    printf("dslb: %d portions x %d iterations on %d devices: PE ids 1..%d used, max PE id "
           "%d, root restarts %d\n", P, iters, ctl->ndev, max_id, P * iters, restarts);
    res.pes = max_id;
    res.seconds = seconds;
    if (ops->root_finish(ctx, args, &res) != 0) {
        app_result_print(stdout, &res);
        goto out_free;
    }
    app_result_print(stdout, &res);
    if (dpc != NULL)
        dslb_dpc_report(args, dpc, max_id, seconds, ctl->ndev * args->max_per_dev);
    ret = args->verify && !res.verified ? -1 : 0;

out_free:
    if (dpc != NULL)
        ivmFree(dpc);
    if (st != NULL)
        ivmFree(st);
    if (rec != NULL)
        ivmFree(rec);
    ivmFree(ctl);
    return ret;
}

/* The calling PE's index in the device table (its node from IVM_NODE, set
   by ivmd); -1 if it is not listed. */
static int dslb_my_dev(const dslb_ctl_t *ctl, int devtype)
{
    const char *node = getenv("IVM_NODE");

    for (int d = 0; d < ctl->ndev; d++) {
        if (ctl->dev[d].devtype != devtype)
            continue;
        if (ctl->dev[d].host[0] == '\0' || (node != NULL && strcmp(node, ctl->dev[d].host) == 0))
            return d;
    }
    return -1;
}

/* A child's data flow. A CPU PE's references are its node copy. A GPU PE's
   references are its device copy (emu: host memory of the emulated GPU,
   shared by the PEs of that GPU; cuda: device memory): the driver reads the
   control table, the statistics and the records on the host view
   (ivmHostPtr, the node copy) and writes through the reference, then pushes
   (device copy -> node copy -> master); a write to the host view would be
   overwritten by the push's device-to-node copy. */
static int dslb_child_run(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                          int id, double t_started, dslb_ctl_t *ctl_ref, dslb_rec_t **rec_ref,
                          dslb_stat_t **st_ref, dslb_dpc_t **dpc_ref)
{
    int P = args->portions, devtype, me, gpu;
    dslb_portion_t w = { .iter = (id - 1) / P, .portion = (id - 1) % P, .pe = id,
                         .args = args };
    dslb_ctl_t *ctl;
    dslb_rec_t *rec;
    dslb_stat_t *st;

    APP_TRY(ivmGetMyDevType(&devtype));
    if (app_kernel_pick_ref(devtype, ctl_ref, &w.kernel) != 0)
        return -1;
    w.devtype = devtype;
    gpu = IVM_DEV_IS_GPU(devtype);
    ctl = app_host_view(ctl_ref);
    if (ctl == NULL || ctl->magic != DSLB_CTL_MAGIC || ctl->portions != P ||
        ctl->iters != args->iters) {
        fprintf(stderr, "%s: dslb: PE %d: the device table does not match this run\n",
                args->app, id);
        return -1;
    }
    me = dslb_my_dev(ctl, devtype);
    if (me < 0) {
        fprintf(stderr, "%s: dslb: PE %d: its device (node %s, type %d) is not in the "
                "table\n", args->app, id, getenv("IVM_NODE") ? getenv("IVM_NODE") : "?",
                devtype);
        return -1;
    }
    APP_TRY(ivmMapSubset(DSLB_REC, rec_ref, (size_t)w.portion * sizeof(dslb_rec_t),
                         sizeof(dslb_rec_t)));
    APP_TRY(ivmMap(DSLB_DEV, st_ref, 0));
    rec = app_host_view(*rec_ref);
    st = app_host_view(*st_ref);
    if (rec == NULL || st == NULL)
        return -1;
    if (ctl->dpc) {
        APP_TRY(ivmMap(DSLB_DPC, dpc_ref, 0));
        if (app_ref_put(w.kernel, &(*dpc_ref)[id - 1].t_started, &t_started,
                        sizeof(t_started)) != 0)
            return -1;
    }

    double t0 = app_now_s();
    if (ops->child_portion(ctx, &w) != 0)
        return -1;
    app_slow_apply(ctl->dev[me].slow, app_now_s() - t0);
    double dt = app_now_s() - t0;
    double work = dslb_work(ops, ctx, args, w.portion);

    /* My device's statistics, then pushed. A CPU PE adds with atomics on its
       node copy (the device's PEs share it). An emu GPU PE adds with atomics
       on its device copy, which the PEs of its GPU share (one deduplicated
       copy), and the push carries it to the node copy. A cuda GPU PE adds to
       the figures the host view holds (its GPU's PEs pushed them) and writes
       them through its device copy: PEs sharing that GPU may then lose an
       update of these heuristic figures. */
    if (!gpu || w.kernel == APP_KERNEL_CPU) {
        dslb_stat_t *mine_p = gpu ? &(*st_ref)[me] : &st[me];
        atomic_fetch_add(&mine_p->portions, 1);
        atomic_fetch_add(&mine_p->ns, (int64_t)(dt * 1e9));
        atomic_fetch_add(&mine_p->micro_work, (int64_t)(work * 1e6));
        APP_TRY(ivmSyncPut(mine_p, sizeof(*mine_p)));
    } else {
        int64_t upd[3] = { st[me].portions + 1, st[me].ns + (int64_t)(dt * 1e9),
                           st[me].micro_work + (int64_t)(work * 1e6) };
        if (app_ref_put(w.kernel, &(*st_ref)[me], upd, sizeof(upd)) != 0)
            return -1;
    }

    /* The other nodes' devices: pull their records one by one (a pull of the
       whole array could undo a concurrent update of this node's). The host
       view then holds every device's figures: this node's devices write
       their node copy (directly or by their pushes). */
    const char *node = getenv("IVM_NODE");
    for (int d = 0; d < ctl->ndev; d++) {
        if (ctl->dev[d].host[0] != '\0' && (node == NULL || strcmp(node, ctl->dev[d].host) != 0))
            APP_TRY(ivmSyncGet(&(*st_ref)[d], sizeof(dslb_stat_t)));
    }
    double mine = dslb_rate(&st[me]), best = dslb_rate(&st[dslb_fastest(st, ctl->ndev)]);

    /* Pass the baton on this device while it is within the threshold of the
       fastest. The id limit ends the chain. This comes before the flag: the
       root raises the limit only once every flag of the iteration is set, so
       a late spawn never takes an id of the next iteration. */
    if (best <= 0.0 || mine / best < args->threshold) {
        ivm_device self;
        ivm_pe next;
        APP_TRY(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
        double t_request = app_wall_s();
        ivmError_t rc = ivmCreatePEs(self, 1, &next);
        ivmDestroyDev(self);
        APP_TRY(rc);
        if (*dpc_ref != NULL && next != IVM_PE_NULL &&
            app_ref_put(w.kernel, &(*dpc_ref)[next - 1].t_request, &t_request,
                        sizeof(t_request)) != 0)
            return -1;
    }

    /* The record's body first, its flag last (each push completes before
       the call returns). */
    if (gpu) {
        dslb_rec_t body = { .pe = id, .dev = me, .seconds = dt, .work = work };
        int32_t flag = w.iter + 1;
        if (app_ref_put(w.kernel, *rec_ref, &body, offsetof(dslb_rec_t, done_iter)) != 0 ||
            app_ref_put(w.kernel, &(*rec_ref)->done_iter, &flag, sizeof(flag)) != 0)
            return -1;
        return 0;
    }
    rec->pe = id;
    rec->dev = me;
    rec->seconds = dt;
    rec->work = work;
    APP_TRY(ivmSyncPut(rec, offsetof(dslb_rec_t, done_iter)));
    atomic_store_explicit(&rec->done_iter, w.iter + 1, memory_order_release);
    APP_TRY(ivmSyncPut(&rec->done_iter, sizeof(rec->done_iter)));
    return 0;
}

static int dslb_child(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx, int id,
                      double t_started)
{
    dslb_ctl_t *ctl = NULL;
    dslb_rec_t *rec = NULL;
    dslb_stat_t *st = NULL;
    dslb_dpc_t *dpc = NULL;
    int ret;

    if (id < 1 || (id - 1) / args->portions >= args->iters) {
        fprintf(stderr, "%s: dslb: PE id %d outside the %d x %d portions\n", args->app, id,
                args->portions, args->iters);
        return -1;
    }
    APP_TRY(ivmMap(DSLB_CTL, &ctl, 0));
    ret = dslb_child_run(args, ops, ctx, id, t_started, ctl, &rec, &st, &dpc);
    if (dpc != NULL)
        ivmUnmap(dpc);
    if (st != NULL)
        ivmUnmap(st);
    if (rec != NULL)
        ivmUnmap(rec);
    ivmUnmap(ctl);
    return ret;
}

int dslb_run(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx)
{
    int id, ret;
    ivmError_t rc;

    rc = ivmEnter();
    double t_started = app_wall_s(); /* --dpc: this PE runs from here */
    if (rc != IVM_SUCCESS) {
        app_ivm_error(rc, "ivmEnter()", __FILE__, __LINE__);
        return 1;
    }
    rc = ivmGetMyId(&id);
    if (rc != IVM_SUCCESS) {
        app_ivm_error(rc, "ivmGetMyId(&id)", __FILE__, __LINE__);
        ivmExit();
        return 1;
    }
    ret = id == 0 ? dslb_root(args, ops, ctx) : dslb_child(args, ops, ctx, id, t_started);
    if (ret != 0 && id != 0) {
        /* A failed child ends without ivmExit: the root sees a dead PE. */
        return 1;
    }
    ivmExit();
    return ret == 0 ? 0 : 1;
}

/* --serial: ops->serial and the one result line. */
static int dslb_serial(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx)
{
    app_result_t r;
    int rc;

    app_result_init(&r, args->app, "serial", args->size);
    rc = ops->serial(ctx, args, &r);
    if (rc < 0)
        return 1;
    return app_serial_finish(args, &r, rc);
}

int dslb_main(int argc, char **argv, app_args_t *args, const char *usage_extra,
              const dslb_app_ops_t *ops, void *ctx)
{
    int ret = 0;

    if (app_args_parse(argc, argv, args, usage_extra) != 0)
        return 2;
    if (ops->args_check != NULL)
        ret = ops->args_check(ctx, args);
    if (ret == 0)
        ret = args->serial ? dslb_serial(args, ops, ctx) : dslb_run(args, ops, ctx);
    if (ops->release != NULL)
        ops->release(ctx);
    return ret;
}
