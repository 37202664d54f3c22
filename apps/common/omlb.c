/*
 * OM-LB driver: the root's monitoring loop and the children's plan loop.
 * See omlb.h for the scheme and its record lines.
 */
#define _POSIX_C_SOURCE 200809L

#include "omlb.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define OMLB_PLAN_OBJ  "omlb.plan"
#define OMLB_REP_OBJ   "omlb.rep"
#define OMLB_POLL_MIN_S 20e-6  /* polling period of plans and reports: 20 us ... */
#define OMLB_POLL_MAX_S 500e-6 /* ... growing to 500 us as the wait goes on */
#define OMLB_WAIT_S    120.0   /* longest wait for one plan or one round of reports */
#define OMLB_GRACE_S   5.0     /* reports missing this long with a PE gone: failed */
#define OMLB_LIVE_S    0.1     /* the root counts the live PEs this often */
#define OMLB_WINDOW    3       /* iterations watched before the root acts, at least */
#define OMLB_WINDOW_S  0.003   /* seconds (slowest PEs) watched before it acts, at least */
#define OMLB_STREAK    2       /* windows in a row the spawn rule must choose a device */

enum { OMLB_RUN = 1, OMLB_FLUSH = 2, OMLB_DONE = 3 };

/* One PE's share in a plan. */
typedef struct omlb_slot {
    int32_t pe;      /* PE id */
    int32_t dev;     /* device index in the root's table */
    int32_t lo, hi;  /* units [lo, hi) */
    int32_t dev_pes; /* PEs on that device */
    int32_t rep;     /* index of the PE's report slot */
    double  slow;    /* IVM_OMLB_SLOW factor of the device (1 = none) */
} omlb_slot_t;
_Static_assert(sizeof(omlb_slot_t) == 32, "omlb_slot_t layout");

/* The root's orders ("omlb.plan"); valid only when hash matches. */
typedef struct omlb_plan {
    uint64_t    seq;    /* increases with every plan */
    int32_t     phase;  /* OMLB_RUN, OMLB_FLUSH or OMLB_DONE */
    int32_t     iter;   /* iteration to run (RUN) */
    int32_t     fresh;  /* RUN: every PE loads its share first */
    int32_t     nparts; /* shares in parts[], in unit order */
    omlb_slot_t parts[OMLB_MAX_PES];
    uint64_t    hash;   /* FNV-1a of the bytes above */
} omlb_plan_t;
_Static_assert(offsetof(omlb_plan_t, parts) == 24, "omlb_plan_t layout");
_Static_assert(offsetof(omlb_plan_t, hash) == 24 + 32 * OMLB_MAX_PES, "omlb_plan_t layout");

/* A PE's answer to one plan ("omlb.rep", one per PE); valid when hash matches. */
typedef struct omlb_report {
    uint64_t seq;      /* the plan answered */
    double   time_s;   /* RUN: the step's computation seconds, slowdown included */
    double   value;    /* RUN: the step's value */
    int32_t  status;   /* 0 = done, -1 = the PE failed */
    int32_t  reserved;
    uint64_t hash;     /* FNV-1a of the bytes above */
} omlb_report_t;
_Static_assert(sizeof(omlb_report_t) == 40, "omlb_report_t layout");

/* Print the failed call with its status and message; evaluates to -1. */
#define OMLB_CHECK(call)                                                              \
    do {                                                                              \
        ivmError_t omlb_rc_ = (call);                                                 \
        if (omlb_rc_ != IVM_SUCCESS) {                                                \
            fprintf(stderr, "omlb: %s failed: %s (%s)\n", #call,                      \
                    ivmGetErrorString(omlb_rc_), ivmGetLastErrorMessage());           \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

/* Sleep a tenth of the time waited so far (20 us .. 500 us): the waiters
   neither hold back a round by more than a tenth nor steal the cores of the
   PEs that compute. */
static void omlb_nap(double waited_s)
{
    double s = waited_s / 10.0;

    app_sleep_s(s < OMLB_POLL_MIN_S ? OMLB_POLL_MIN_S : s > OMLB_POLL_MAX_S ? OMLB_POLL_MAX_S : s);
}

/* ---------------------------------------------------------------- devices */

void omlb_config_init(omlb_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->threshold = 2.0;
    cfg->cap = 4;
    cfg->balance_tol = 0.20;
    cfg->record = stdout;
}

/* app_devices_probe's callback: keep the device and name it. OM-LB takes
   gpu0 .. gpu7 of a node. */
static int omlb_dev_found(void *arg, const char *host, int devtype, ivm_device dev)
{
    omlb_config_t *cfg = arg;

    if (IVM_DEV_IS_GPU(devtype) && IVM_DEV_INDEX(devtype) > 7) {
        ivmDestroyDev(dev);
        return 1;
    }
    cfg->devs[cfg->ndevs] = dev;
    cfg->devtypes[cfg->ndevs] = devtype;
    app_dev_name(host, devtype, cfg->names[cfg->ndevs], OMLB_NAME_MAX);
    cfg->ndevs++;
    return 0;
}

int omlb_devices_probe(omlb_config_t *cfg, int local)
{
    if (app_devices_probe(local, OMLB_MAX_DEVS, omlb_dev_found, cfg) < 0) {
        omlb_devices_release(cfg);
        return -1;
    }
    if (cfg->ndevs == 0) {
        fprintf(stderr, "omlb: no device found on any node\n");
        return -1;
    }
    return cfg->ndevs;
}

void omlb_devices_release(omlb_config_t *cfg)
{
    for (int d = 0; d < cfg->ndevs; d++)
        ivmDestroyDev(cfg->devs[d]);
    cfg->ndevs = 0;
}

/* ------------------------------------------------------------------- root */

typedef struct omlb_root {
    const omlb_config_t *cfg;
    omlb_plan_t         *plan;  /* the master copy */
    omlb_report_t       *rep;   /* the master copy */
    int                  npes;
    ivm_pe               pe[OMLB_MAX_PES];     /* by report slot */
    int                  pe_dev[OMLB_MAX_PES]; /* device of each */
    int                  dev_pes[OMLB_MAX_DEVS];
    int                  dev_units[OMLB_MAX_DEVS];
    double               slow[OMLB_MAX_DEVS];
    uint64_t             seq;
    double               move_s; /* what moving the shares costs, estimated */
    int                  streak[OMLB_MAX_DEVS]; /* windows in a row the rule chose d */
    omlb_report_t        got[OMLB_MAX_PES];    /* the last round's reports */
} omlb_root_t;

/* Deal each device's units evenly to its PEs and write the shares, in unit
   order (device order, then creation order), into the plan. */
static void omlb_root_parts(omlb_root_t *r)
{
    int n = 0, lo = 0;

    for (int d = 0; d < r->cfg->ndevs; d++) {
        int k = 0;
        for (int s = 0; s < r->npes; s++) {
            if (r->pe_dev[s] != d)
                continue;
            int u = r->dev_units[d] / r->dev_pes[d] + (k < r->dev_units[d] % r->dev_pes[d]);
            omlb_slot_t *p = &r->plan->parts[n++];
            p->pe = r->pe[s];
            p->dev = d;
            p->lo = lo;
            p->hi = lo + u;
            p->dev_pes = r->dev_pes[d];
            p->rep = s;
            p->slow = r->slow[d];
            lo += u;
            k++;
        }
    }
    r->plan->nparts = n;
}

static int omlb_root_publish(omlb_root_t *r, int phase, int iter, int fresh)
{
    omlb_plan_t *pl = r->plan;

    pl->hash = 0;
    atomic_thread_fence(memory_order_seq_cst);
    pl->seq = ++r->seq;
    pl->phase = phase;
    pl->iter = iter;
    pl->fresh = fresh;
    pl->hash = app_fnv1a(pl, offsetof(omlb_plan_t, hash));
    atomic_thread_fence(memory_order_seq_cst);
    OMLB_CHECK(ivmSyncPutGroup(pl, sizeof(*pl)));
    return 0;
fail:
    return -1;
}

/* Wait for every PE of the plan to answer it; its reports into r->got. */
static int omlb_root_collect(omlb_root_t *r)
{
    const omlb_plan_t *pl = r->plan;
    double start = app_now_s(), last_live = start, missing_since = -1.0;
    int have[OMLB_MAX_PES] = { 0 }, left = pl->nparts;

    while (left > 0) {
        for (int k = 0; k < pl->nparts; k++) {
            int s = pl->parts[k].rep;
            omlb_report_t rp;
            if (have[s])
                continue;
            atomic_thread_fence(memory_order_acquire);
            memcpy(&rp, &r->rep[s], sizeof(rp));
            if (rp.seq != r->seq || rp.hash != app_fnv1a(&rp, offsetof(omlb_report_t, hash)))
                continue;
            if (rp.status != 0) {
                fprintf(stderr, "omlb: PE %d on %s failed in plan %llu\n", r->pe[s],
                        r->cfg->names[r->pe_dev[s]], (unsigned long long)r->seq);
                return -1;
            }
            r->got[s] = rp;
            have[s] = 1;
            left--;
        }
        if (left == 0)
            break;
        double t = app_now_s();
        if (t - start > OMLB_WAIT_S) {
            fprintf(stderr, "omlb: %d of %d PEs did not answer plan %llu within %.0f s\n",
                    left, pl->nparts, (unsigned long long)r->seq, OMLB_WAIT_S);
            return -1;
        }
        if (t - last_live >= OMLB_LIVE_S) {
            int alive;
            last_live = t;
            OMLB_CHECK(ivmGetNumPEs(&alive));
            if (alive - 1 < r->npes) {
                if (missing_since < 0)
                    missing_since = t;
                else if (t - missing_since > OMLB_GRACE_S) {
                    fprintf(stderr, "omlb: %d of %d PEs alive and %d answers missing for "
                            "%.0f s (a PE died?)\n", alive - 1, r->npes, left, OMLB_GRACE_S);
                    return -1;
                }
            } else {
                missing_since = -1.0;
            }
        }
        omlb_nap(t - start);
    }
    return 0;
fail:
    return -1;
}

static int omlb_root_spawn(omlb_root_t *r, int d)
{
    ivm_pe pe;

    OMLB_CHECK(ivmCreatePEs(r->cfg->devs[d], 1, &pe));
    if (pe == IVM_PE_NULL) {
        fprintf(stderr, "omlb: no PE could be created on %s (PE id limit)\n",
                r->cfg->names[d]);
        return -1;
    }
    r->pe[r->npes] = pe;
    r->pe_dev[r->npes] = d;
    r->npes++;
    r->dev_pes[d]++;
    return 0;
fail:
    return -1;
}

/* Print the iteration's record line. */
static void omlb_root_record(omlb_root_t *r, int iter, double tmax, double tstd)
{
    FILE *f = r->cfg->record;

    if (f == NULL)
        return;
    fprintf(f, "OMLB iter=%d pes=", iter);
    for (int d = 0; d < r->cfg->ndevs; d++)
        fprintf(f, "%s%d", d ? "," : "", r->dev_pes[d]);
    fprintf(f, " units=");
    for (int d = 0; d < r->cfg->ndevs; d++)
        fprintf(f, "%s%d", d ? "," : "", r->dev_units[d]);
    fprintf(f, " tmax=%.6f tstd=%.6f\n", tmax, tstd);
    fflush(f);
}

int omlb_rule_spawn(int ndevs, const double *cost, double threshold, const int *dev_pes,
                    int cap, int room, int *add)
{
    double cmin = INFINITY, cmax = 0.0;
    int n = 0;

    for (int d = 0; d < ndevs; d++) {
        add[d] = 0;
        cmin = fmin(cmin, cost[d]);
        cmax = fmax(cmax, cost[d]);
    }
    if (!(cmin > 0.0) || cmax / cmin < threshold)
        return 0;
    for (int d = 0; d < ndevs && n < room; d++) {
        if (cost[d] / cmin < threshold && dev_pes[d] < cap) {
            add[d] = 1;
            n++;
        }
    }
    return n;
}

void omlb_rule_split(int ndevs, int units, const int *dev_pes, const double *cost, int *alloc)
{
    double speed_sum = 0.0, want[OMLB_MAX_DEVS];
    int rest = units, dealt = 0;

    /* Every PE at least one unit; the rest in proportion to speed, largest
       remainders first. */
    for (int d = 0; d < ndevs; d++) {
        speed_sum += 1.0 / cost[d];
        rest -= dev_pes[d];
    }
    for (int d = 0; d < ndevs; d++) {
        want[d] = rest * (1.0 / cost[d]) / speed_sum;
        alloc[d] = dev_pes[d] + (int)floor(want[d]);
        want[d] -= floor(want[d]);
        dealt += alloc[d] - dev_pes[d];
    }
    for (; dealt < rest; dealt++) {
        int best = 0;
        for (int d = 1; d < ndevs; d++)
            if (want[d] > want[best])
                best = d;
        alloc[best]++;
        want[best] = -1.0;
    }
}

int omlb_rule_worth(int ndevs, int units, const int *dev_units, const double *cost,
                    double tol, int remaining, double move_s)
{
    double tmin = INFINITY, tmax = 0.0, balanced = 0.0;

    for (int d = 0; d < ndevs; d++) {
        tmin = fmin(tmin, cost[d] * dev_units[d]);
        tmax = fmax(tmax, cost[d] * dev_units[d]);
        balanced += 1.0 / cost[d];
    }
    balanced = units / balanced;
    return tmax / tmin > 1.0 + tol && (tmax - balanced) * remaining > move_s;
}

/* After a window of iterations (cost_in: each device's least time per unit
   in the window, its slowest PE's time / its units; noise from other
   processes only adds time, so the least is the device's speed): the spawn
   rule and the proportional split, the latter only when it pays for itself
   over the `remaining` iterations. Sets *changed when the shares (or the
   PEs) differ from the last round's. */
static int omlb_root_adjust(omlb_root_t *r, const double *cost_in, int max_pes, int remaining,
                            int *changed)
{
    const omlb_config_t *cfg = r->cfg;
    double cost[OMLB_MAX_DEVS];
    int alloc[OMLB_MAX_DEVS], add[OMLB_MAX_DEVS], spawned;

    for (int d = 0; d < cfg->ndevs; d++)
        cost[d] = cost_in[d] > 1e-12 ? cost_in[d] : 1e-12;
    /* A device gets its PE when the rule chose it in two windows in a row:
       one window slowed by another job does not spawn. */
    omlb_rule_spawn(cfg->ndevs, cost, cfg->threshold, r->dev_pes, cfg->cap, max_pes - r->npes,
                    add);
    spawned = 0;
    for (int d = 0; d < cfg->ndevs; d++) {
        r->streak[d] = add[d] ? r->streak[d] + 1 : 0;
        if (r->streak[d] < OMLB_STREAK)
            continue;
        if (omlb_root_spawn(r, d) != 0)
            return -1;
        r->streak[d] = 0;
        spawned++;
    }
    *changed = spawned > 0;
    if (!spawned && !omlb_rule_worth(cfg->ndevs, cfg->units, r->dev_units, cost,
                                     cfg->balance_tol, remaining, r->move_s))
        return 0;
    omlb_rule_split(cfg->ndevs, cfg->units, r->dev_pes, cost, alloc);
    for (int d = 0; d < cfg->ndevs; d++) {
        if (alloc[d] != r->dev_units[d])
            *changed = 1;
        r->dev_units[d] = alloc[d];
    }
    return 0;
}

int omlb_root_run(const omlb_config_t *cfg, omlb_result_t *res)
{
    omlb_root_t r = { .cfg = cfg };
    double dev_done[OMLB_MAX_DEVS] = { 0 }, t0, value = 0.0;
    int max_pes, ret = -1, rebalances = 0;

    if (cfg->ndevs < 1 || cfg->ndevs > OMLB_MAX_DEVS || cfg->iterations < 1 ||
        cfg->units < cfg->ndevs || cfg->cap < 1 || !(cfg->threshold > 1.0) ||
        !(cfg->balance_tol >= 0.0)) {
        fprintf(stderr, "omlb: bad settings: %d devices (1..%d), %d iterations (>= 1), "
                "%d units (>= devices), cap %d (>= 1), threshold %g (> 1), tol %g (>= 0)\n",
                cfg->ndevs, OMLB_MAX_DEVS, cfg->iterations, cfg->units, cfg->cap,
                cfg->threshold, cfg->balance_tol);
        return -1;
    }
    max_pes = cfg->cap * cfg->ndevs;
    if (max_pes > OMLB_MAX_PES)
        max_pes = OMLB_MAX_PES;
    if (max_pes > cfg->units)
        max_pes = cfg->units;
    for (int d = 0; d < cfg->ndevs; d++) {
        r.slow[d] = app_slow_factor("IVM_OMLB_SLOW", d);
        if (r.slow[d] < 0)
            return -1;
        if (cfg->record != NULL)
            fprintf(cfg->record, "omlb: device %d %s%s\n", d, cfg->names[d],
                    r.slow[d] > 1.0 ? " (slowed by IVM_OMLB_SLOW)" : "");
        r.dev_units[d] = (int)((long long)cfg->units * (d + 1) / cfg->ndevs -
                               (long long)cfg->units * d / cfg->ndevs);
    }

    OMLB_CHECK(ivmMalloc(OMLB_PLAN_OBJ, &r.plan, sizeof(omlb_plan_t)));
    OMLB_CHECK(ivmMalloc(OMLB_REP_OBJ, &r.rep, sizeof(omlb_report_t) * OMLB_MAX_PES));
    for (int d = 0; d < cfg->ndevs; d++)
        if (omlb_root_spawn(&r, d) != 0)
            goto fail_objs;
    omlb_root_parts(&r);

    /* The times of a window of iterations are summed before the root acts
       (at least OMLB_WINDOW iterations and OMLB_WINDOW_S seconds of the
       slowest device), so that one noisy iteration neither spawns nor moves
       work; the first iteration after a change (cold caches) is left out. */
    double win_cost[OMLB_MAX_DEVS], est_cost[OMLB_MAX_DEVS], win_time = 0.0;
    int nwin = 0, warm = 1, nest = 0;

    for (int d = 0; d < cfg->ndevs; d++)
        win_cost[d] = INFINITY;

    t0 = app_now_s();
    for (int it = 0, fresh = 1; it < cfg->iterations; it++) {
        double dev_time[OMLB_MAX_DEVS] = { 0 }, tmax = 0.0, tsum = 0.0, tsq = 0.0;
        int changed;

        double round = app_now_s();
        if (omlb_root_publish(&r, OMLB_RUN, it, fresh) != 0 || omlb_root_collect(&r) != 0)
            goto fail_objs;
        if (it == 0)
            r.move_s = app_now_s() - round; /* the first loads, until a FLUSH is seen */
        fresh = 0;
        value = 0.0;
        for (int k = 0; k < r.plan->nparts; k++) {
            const omlb_slot_t *p = &r.plan->parts[k];
            double t = r.got[p->rep].time_s;
            value += r.got[p->rep].value;
            dev_time[p->dev] = fmax(dev_time[p->dev], t);
            dev_done[p->dev] += p->hi - p->lo;
            tmax = fmax(tmax, t);
            tsum += t;
            tsq += t * t;
        }
        double mean = tsum / r.plan->nparts;
        omlb_root_record(&r, it, tmax, sqrt(fmax(0.0, tsq / r.plan->nparts - mean * mean)));
        if (it == cfg->iterations - 1)
            break;
        for (int d = 0; d < cfg->ndevs && !warm; d++)
            win_cost[d] = fmin(win_cost[d], dev_time[d] / r.dev_units[d]);
        win_time += warm ? 0.0 : tmax;
        nwin += !warm;
        warm = 0;
        if (nwin < OMLB_WINDOW || win_time < OMLB_WINDOW_S)
            continue;
        /* A device's cost per unit does not depend on its share: average the
           windows (half the weight on the newest) so noise does not move
           the work back and forth. */
        for (int d = 0; d < cfg->ndevs; d++)
            est_cost[d] = nest ? 0.5 * est_cost[d] + 0.5 * win_cost[d] : win_cost[d];
        nest++;
        if (omlb_root_adjust(&r, est_cost, max_pes, cfg->iterations - 1 - it, &changed) != 0)
            goto fail_objs;
        for (int d = 0; d < cfg->ndevs; d++)
            win_cost[d] = INFINITY;
        win_time = 0.0;
        nwin = 0;
        if (!changed)
            continue;
        warm = 1;
        /* The PEs of the last round store their shares; then every PE
           (the new ones too) loads its new share. */
        round = app_now_s();
        if (omlb_root_publish(&r, OMLB_FLUSH, it, 0) != 0 || omlb_root_collect(&r) != 0)
            goto fail_objs;
        r.move_s = 2.0 * (app_now_s() - round); /* the stores, and as much to load */
        omlb_root_parts(&r);
        fresh = 1;
        rebalances++;
    }
    if (omlb_root_publish(&r, OMLB_DONE, cfg->iterations, 0) != 0 ||
        omlb_root_collect(&r) != 0)
        goto fail_objs;
    res->seconds = app_now_s() - t0;
    for (int s = 0; s < r.npes; s++) {
        ivmError_t rc = ivmWait(r.pe[s]);
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "omlb: PE %d ended badly: %s\n", r.pe[s], ivmGetErrorString(rc));
            goto fail_objs;
        }
    }
    res->value = value;
    res->pes_spawned = r.npes;
    res->rebalances = rebalances;
    double all = 0.0;
    for (int d = 0; d < cfg->ndevs; d++)
        all += dev_done[d];
    for (int d = 0; d < cfg->ndevs; d++) {
        res->dev_pes[d] = r.dev_pes[d];
        res->dev_share[d] = all > 0 ? dev_done[d] / all : 0.0;
    }
    ret = 0;

fail_objs:
    ivmFree(r.rep);
    ivmFree(r.plan);
    return ret;
fail:
    if (r.rep != NULL)
        ivmFree(r.rep);
    if (r.plan != NULL)
        ivmFree(r.plan);
    return -1;
}

/* ------------------------------------------------------------------ child */

/* Wait for a valid plan newer than last_seq; a copy into *out. */
static int omlb_child_wait(const omlb_plan_t *plan, uint64_t last_seq, omlb_plan_t *out)
{
    double start = app_now_s();

    for (;;) {
        atomic_thread_fence(memory_order_acquire);
        memcpy(out, plan, sizeof(*out));
        if (out->seq > last_seq && out->hash == app_fnv1a(out, offsetof(omlb_plan_t, hash)))
            return 0;
        double waited = app_now_s() - start;
        if (waited > OMLB_WAIT_S) {
            fprintf(stderr, "omlb: no plan from the root PE for %.0f s\n", OMLB_WAIT_S);
            return -1;
        }
        omlb_nap(waited);
    }
}

/* Write the report into the PE's own copy of its slot (node copy, or device
   copy on a GPU PE: a push first copies the device copy to the node copy)
   and push it to the master. */
static int omlb_child_report(app_kernel_t kernel, omlb_report_t *slot, uint64_t seq,
                             double t, double value, int status)
{
    omlb_report_t rp = { .seq = seq, .time_s = t, .value = value, .status = status };

    rp.hash = app_fnv1a(&rp, offsetof(omlb_report_t, hash));
    atomic_thread_fence(memory_order_release);
    return app_ref_put(kernel, slot, &rp, sizeof(rp));
}

int omlb_child_run(const omlb_ops_t *ops, void *ctx)
{
    omlb_plan_t *plan = NULL, *plan_host = NULL, pl;
    omlb_report_t *rep = NULL;
    omlb_part_t part = { 0 };
    app_kernel_t kernel = APP_KERNEL_CPU;
    uint64_t last = 0;
    int id, devtype, joined = 0, loaded = 0, cores = 1, ret = -1;
    const char *env = getenv("IVM_DEVICE_CORES");

    if (env != NULL && atoi(env) > 0)
        cores = atoi(env);
    OMLB_CHECK(ivmGetMyId(&id));
    OMLB_CHECK(ivmGetMyDevType(&devtype));
    OMLB_CHECK(ivmMap(OMLB_PLAN_OBJ, &plan, 0));
    OMLB_CHECK(ivmMap(OMLB_REP_OBJ, &rep, 0));
    /* The root's plans are read on the host view (a GPU PE's reference is
       its device copy; the root's group put refreshes both). */
    if (app_kernel_pick_ref(devtype, plan, &kernel) != 0 ||
        (plan_host = app_host_view(plan)) == NULL)
        goto out;

    for (;;) {
        int k, rc = 0;
        double value = 0.0, t = 0.0;

        if (omlb_child_wait(plan_host, last, &pl) != 0)
            goto out;
        last = pl.seq;
        for (k = 0; k < pl.nparts && pl.parts[k].pe != id; k++)
            ;
        if (k == pl.nparts) {
            if (!joined)
                continue; /* spawned for a later plan */
            fprintf(stderr, "omlb: PE %d left out of plan %llu\n", id,
                    (unsigned long long)pl.seq);
            goto out;
        }
        joined = 1;
        const omlb_slot_t *me = &pl.parts[k];
        if (me->rep < 0 || me->rep >= OMLB_MAX_PES)
            goto out;
        part.lo = me->lo;
        part.hi = me->hi;
        part.pos = k;
        part.npos = pl.nparts;
        part.dev = me->dev;
        part.dev_pes = me->dev_pes;
        part.threads = me->dev_pes > 0 && cores / me->dev_pes > 0 ? cores / me->dev_pes : 1;
        part.iter = pl.iter;
        part.fresh = 0;

        if (pl.phase == OMLB_RUN) {
            /* The time reported is the step's computation: loading a new
               share says nothing about the device's speed. */
            if (!loaded || pl.fresh) {
                rc = ops->load(ctx, &part);
                loaded = rc == 0;
                part.fresh = 1;
            }
            if (rc == 0) {
                double compute = 0.0;
                rc = ops->step(ctx, &part, &value, &compute);
                app_slow_apply(me->slow, compute);
                t = (me->slow > 1.0 ? me->slow : 1.0) * compute;
            }
        } else if (loaded) {
            rc = ops->store(ctx, &part);
            loaded = 0;
        }
        if (omlb_child_report(kernel, &rep[me->rep], pl.seq, t, value,
                              rc == 0 ? 0 : -1) != 0 || rc != 0)
            goto out;
        if (pl.phase == OMLB_DONE)
            break;
    }
    ret = 0;

out:
    ivmUnmap(rep);
    ivmUnmap(plan);
    return ret;
fail:
    if (rep != NULL)
        ivmUnmap(rep);
    if (plan != NULL)
        ivmUnmap(plan);
    return -1;
}
