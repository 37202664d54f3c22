/*
 * dslb: the DS-LB driver (see dslb.h for the scheme).
 */
#include "dslb.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DSLB_CTL         "dslb.ctl"
#define DSLB_REC         "dslb.rec"
#define DSLB_DEV         "dslb.dev"
#define DSLB_DPC         "dslb.dpc"
#define DSLB_NAP_MIN_S   100e-6        /* root: first nap while a PE is not started */
#define DSLB_NAP_MAX_S   2e-3          /* ... doubling up to 2 ms */
#define DSLB_GONE_S      1.0           /* a PE gone this long without its flag failed */
#define DSLB_TIMEOUT_S   600.0         /* bound on one iteration */
#define DSLB_CTL_MAGIC   0x44534c42u   /* "DSLB" */
#define DSLB_SLOW_ENV    "IVM_DSLB_SLOW" /* test knob, see dslb.h */
#define DSLB_SMOOTH      0.4           /* weight of the newest sample in the averages */
#define DSLB_TIE         0.01          /* a finish this close to another's is a tie */
#define DSLB_POOL        "1"           /* warm pool asked for, per device (IVM_PE_POOL) */

/* One device of the run ("dslb.ctl"). */
typedef struct {
    char host[IVM_HOST_MAX + 1];   /* node name; "" with --local (any node) */
    int32_t devtype;
    int32_t budget;                /* portions its node computes at once at most (the
                                      node's slots); 0: any */
    double slow;                   /* IVM_DSLB_SLOW factor (test knob), 1 = none */
    double speed;                  /* declared: cores x share (a CPU device's
                                      ivmGetDevices), 0: unknown */
} dslb_dev_t;

enum { DSLB_LAYOUT_EQUAL, DSLB_LAYOUT_WEIGHTED };

/* "dslb.ctl": written by the root before the first PE starts, read-only
   after but for the iteration's part (iter .. bound[]), which the root
   rewrites (and pushes to every node) before it starts an iteration's
   chains. */
typedef struct {
    uint32_t magic;
    int32_t portions;              /* per iteration */
    int32_t iters;
    int32_t ndev;
    int32_t dpc;                   /* --dpc: "dslb.dpc" exists */
    int32_t layout;                /* DSLB_LAYOUT_*: how the portions are cut */
    double work;                   /* the work of an iteration, all portions */
    dslb_dev_t dev[APP_MAX_DEVS];
    int32_t iter;                  /* the iteration running */
    int32_t base;                  /* its first PE id: portion p is PE base + p */
    int32_t nport;                 /* its portions, 1 .. portions */
    int32_t reserved;
    int64_t bound[];               /* portion p is units [bound[p], bound[p + 1]),
                                      nport + 1 entries used of portions + 1 */
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
    double t0, t1;                 /* its start and end, app_now_s of its node */
    _Atomic int32_t done_iter;     /* iteration + 1 once the portion is done */
    int32_t reserved;
} dslb_rec_t;

/* "dslb.dev": the figures of one device, two cache lines. Only the PEs of
   the device write its line, whole, into their node copy (a GPU PE through
   its reference) and push it; a PE reads the lines of its own node's devices
   in its node copy and pulls the others' from the master. (Between two
   iterations the root may rescale a line whose device declared a new speed,
   and push it to every node.) With several PEs
   of a device at once (--max-per-dev) an update may be lost: the figures
   are estimates. Times are wall-clock (CLOCK_REALTIME), seconds. */
typedef struct {
    double rate;                   /* seconds per work unit of the PEs' runs (dslb_rate_add) */
    double rate_work;              /* the work the rate averages over (decayed) */
    double gap;                    /* smoothed seconds from a decision to the successor's start */
    double busy_until;             /* expected end of the running portion (0: unknown) */
    double decided_at;             /* when the chain's last decision was taken */
    int32_t claimed;               /* highest PE id the device runs or ran */
    int32_t iter;                  /* iteration of that PE */
    int32_t active;                /* 1 while a chain of the device runs in `iter` */
    int32_t handoff;               /* 1: a successor is starting (its gap is measured) */
    int32_t samples;               /* rate samples so far */
    int32_t reserved[17];
} dslb_stat_t;

_Static_assert(sizeof(dslb_stat_t) == 128, "two cache lines per device");

/* The work of units [lo, hi) of an app that has units. */
static double dslb_unit_work(const dslb_app_ops_t *ops, void *ctx, const app_args_t *args,
                             long long lo, long long hi)
{
    return ops->unit_work != NULL ? ops->unit_work(ctx, args, lo, hi) : (double)(hi - lo);
}

static double dslb_work(const dslb_app_ops_t *ops, void *ctx, const app_args_t *args,
                        const dslb_ctl_t *ctl, int portion)
{
    return dslb_unit_work(ops, ctx, args, ctl->bound[portion], ctl->bound[portion + 1]);
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

/* The lowest index of a device on d's node: the node's key in the table. */
static int dslb_node_of(const dslb_ctl_t *ctl, int d)
{
    int k = 0;

    while (k < d && strcmp(ctl->dev[k].host, ctl->dev[d].host) != 0)
        k++;
    return k;
}

/* How many portions node k computes at once, into *budget_p: its slots, and
   below its max_slots (the root counted on its node). 0: any; -1: no room
   at all. Returns 0, or -1 after printing why. */
static int dslb_node_budget(int k, int root_node, int *budget_p)
{
    int slots = 0, max_slots = 0, cap;

    APP_TRY(ivmGetNodeSlots(k, &slots, &max_slots));
    cap = max_slots - (k == root_node);
    if (max_slots == 0)
        *budget_p = slots;
    else if (cap <= 0)
        *budget_p = -1;
    else
        *budget_p = slots == 0 || cap < slots ? cap : slots;
    return 0;
}

/* Each device's budget, from its node's slots (ivmGetNodeSlots); the devices
   of a node without room for a PE are left out of the table. */
static int dslb_budgets(dslb_ctl_t *ctl, const app_args_t *args)
{
    int me = 0, n = 0;

    APP_TRY(ivmGetMyNode(&me));
    for (int d = 0; d < ctl->ndev; d++) {
        int k = app_node_index(ctl->dev[d].host);
        if (k == -3)
            return -1;
        if (k == IVM_THIS_NODE)
            k = me;
        int budget = 0; /* a node not in the cluster table: no limit */
        if (k >= 0 && dslb_node_budget(k, me, &budget) != 0)
            return -1;
        if (budget < 0) {
            printf("dslb: %s left out: its node's max_slots leaves no room\n",
                   ctl->dev[d].host[0] != '\0' ? ctl->dev[d].host : "the root's node");
            continue;
        }
        ctl->dev[n] = ctl->dev[d];
        ctl->dev[n++].budget = budget;
    }
    ctl->ndev = n;
    if (n == 0)
        fprintf(stderr, "%s: no device has room for a PE (max_slots)\n", args->app);
    return n > 0 ? 0 : -1;
}

/* What device d declares (cores x share of a CPU device, ivmGetDevices),
   0: nothing. */
static double dslb_declared(const dslb_ctl_t *ctl, int d)
{
    int ncores = 0;
    int share = app_dev_share(app_node_index(ctl->dev[d].host), ctl->dev[d].devtype, &ncores);

    return share > 0 && ncores > 0 ? ncores * share / 100.0 : 0.0;
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
    if (dslb_budgets(ctl, args) != 0)
        return -1;
    for (int d = 0; d < ctl->ndev; d++) {
        ctl->dev[d].slow = app_slow_factor(DSLB_SLOW_ENV, d);
        if (ctl->dev[d].slow < 1.0)
            return -1;
        ctl->dev[d].speed = dslb_declared(ctl, d);
    }
    return 0;
}

/* ----------------------------------------------------------- the rule */

/* Earliest finish time over the lanes but `skip` (-1: none): work[k] goes to
   the lane that would finish it first (a tie to the lower lane). end[l]
   gets when lane l is done, counts[l] its portions. 0, or -1 when no lane
   may take work. */
static int dslb_eft_run(int nlanes, const double *free_at, const double *rate,
                        const double *gap, const double *work, int nwork, int skip,
                        double *end, int *counts)
{
    for (int l = 0; l < nlanes; l++) {
        end[l] = free_at[l];
        counts[l] = 0;
    }
    for (int k = 0; k < nwork; k++) {
        int best = -1;
        double best_end = 0.0;
        for (int l = 0; l < nlanes; l++) {
            double e = end[l] + gap[l] + rate[l] * work[k];
            if (l != skip && (best < 0 || e < best_end)) {
                best = l;
                best_end = e;
            }
        }
        if (best < 0)
            return -1;
        end[best] = best_end;
        counts[best]++;
    }
    return 0;
}

int dslb_eft(int nlanes, const double *free_at, const double *rate, const double *gap,
             const double *work, int nwork, int me, int *counts)
{
    double end[APP_MAX_DEVS];

    dslb_eft_run(nlanes, free_at, rate, gap, work, nwork, -1, end, counts);
    return me >= 0 && me < nlanes ? counts[me] : 0;
}

/* When the lanes (but `skip`, -1: none) are done with work[0..nwork),
   dealt by earliest finish time; -1 when no lane may take work. */
static double dslb_eft_makespan(int nlanes, const double *free_at, const double *rate,
                                const double *gap, const double *work, int nwork, int skip)
{
    double end[APP_MAX_DEVS], last = -1.0;
    int counts[APP_MAX_DEVS];

    if (dslb_eft_run(nlanes, free_at, rate, gap, work, nwork, skip, end, counts) != 0)
        return -1.0;
    for (int l = 0; l < nlanes; l++)
        if (l != skip && end[l] > last)
            last = end[l];
    return last;
}

int dslb_go(int nlanes, const double *free_at, const double *rate, const double *gap,
            const double *work, int nwork, int me)
{
    double mine[APP_MAX_DEVS] = {0}, with, without;

    if (nwork <= 0 || me < 0 || me >= nlanes)
        return 0;
    for (int l = 0; l < nlanes; l++)
        mine[l] = free_at[l];
    mine[me] += gap[me] + rate[me] * work[0];
    with = dslb_eft_makespan(nlanes, mine, rate, gap, work + 1, nwork - 1, -1);
    without = dslb_eft_makespan(nlanes, free_at, rate, gap, work, nwork, me);
    if (without < 0.0)
        return 1; /* nobody else runs: the portions are mine */
    /* Lanes that end before `now` count from `now` in both: free_at[me]. */
    return with <= without + DSLB_TIE * (without - free_at[me]);
}

/* The smoothed average: the first sample as it is, then DSLB_SMOOTH of the
   newest. */
static double dslb_smooth(double avg, int samples, double x)
{
    return samples <= 0 ? x : (1.0 - DSLB_SMOOTH) * avg + DSLB_SMOOTH * x;
}

/* A device's rate with one more PE's run (dslb.h): portions weigh by their
   work and fade by the work done after them. */
double dslb_rate_add(double rate, double *rate_work, double seconds, double work,
                     double horizon)
{
    double keep;

    if (work <= 0.0)
        work = 1.0;
    if (rate <= 0.0 || *rate_work <= 0.0) {
        *rate_work = work;
        return seconds / work;
    }
    keep = horizon > 0.0 ? exp(-work / horizon) : 0.0;
    rate = (keep * rate * *rate_work + seconds) / (keep * *rate_work + work);
    *rate_work = keep * *rate_work + work;
    return rate;
}

/* Seconds per work unit of the fastest device with samples (0: none has). */
static double dslb_best_rate(const dslb_stat_t *st, int ndev)
{
    double best = 0.0;

    for (int d = 0; d < ndev; d++)
        if (st[d].samples > 0 && (best == 0.0 || st[d].rate < best))
            best = st[d].rate;
    return best;
}

/* The most PE ids a run uses: a staging PE per device at most, then P per
   iteration at most. */
static int dslb_max_ids(const app_args_t *args)
{
    return APP_MAX_DEVS + args->portions * args->iters;
}

/* The last PE id of the running iteration. */
static int dslb_last_id(const dslb_ctl_t *ctl)
{
    return ctl->base + ctl->nport - 1;
}

/* The root, before an iteration's PEs (or the staging PEs, iteration -1,
   no bounds) start: the iteration's part of "dslb.ctl" (iter, base, nport,
   the bounds) pushed to every node's copy, and the job's max PE id raised
   to the iteration's last id. */
static int dslb_root_publish(dslb_ctl_t *ctl)
{
    size_t nbounds = ctl->iter >= 0 ? (size_t)ctl->nport + 1 : 0;

    APP_TRY(ivmSyncPutGroup(&ctl->iter, offsetof(dslb_ctl_t, bound) - offsetof(dslb_ctl_t, iter) +
                                            nbounds * sizeof(ctl->bound[0])));
    APP_TRY(ivmSetMaxPesId(dslb_last_id(ctl)));
    return 0;
}

/* The earliest-finish deal of the portions after PE id `claimed` (up to
   the iteration's last, dslb_last_id) at time `now`. Lanes are the devices
   whose chain runs in the iteration ctl->iter (busy until their expected
   end), plus `me` (free now;
   -1: none) and, with all_free, every device (the root at an iteration's
   start, or restarting a chain). A device without samples counts at the
   speed of the fastest one that has (at `me_rate` when none has). Fills
   counts[d]; returns the device that gets the first portion (-1: none). */
static int dslb_deal(const dslb_app_ops_t *ops, void *ctx, const app_args_t *args,
                     const dslb_ctl_t *ctl, const dslb_stat_t *st, int claimed, int me,
                     double me_rate, int all_free, double now, int *counts)
{
    int nwork = dslb_last_id(ctl) - claimed, lane_dev[APP_MAX_DEVS], n = 0;
    int ndev = ctl->ndev, iter = ctl->iter;
    double free_at[APP_MAX_DEVS], rate[APP_MAX_DEVS], gap[APP_MAX_DEVS], *work;
    double best = dslb_best_rate(st, ndev), first = 0.0;
    int lane_counts[APP_MAX_DEVS], first_dev = -1;

    for (int d = 0; d < ndev; d++)
        counts[d] = 0;
    if (nwork <= 0)
        return -1;
    work = malloc((size_t)nwork * sizeof(double));
    if (work == NULL) { /* no deal: the caller's device continues */
        if (me >= 0)
            counts[me] = 1;
        return me;
    }
    for (int k = 0; k < nwork; k++)
        work[k] = dslb_work(ops, ctx, args, ctl, claimed + 1 + k - ctl->base);
    for (int d = 0; d < ndev; d++) {
        int running = st[d].iter == iter && st[d].active;
        if (d != me && !all_free && !running)
            continue;
        lane_dev[n] = d;
        rate[n] = st[d].samples > 0 ? st[d].rate : best > 0.0 ? best : me_rate;
        gap[n] = st[d].gap;
        free_at[n] = now;
        if (d != me && !all_free && st[d].busy_until > now)
            free_at[n] = st[d].busy_until;
        if (d == me)
            rate[n] *= 1.0 - DSLB_TIE; /* a near tie goes to me: an unclaimed
                                          portion costs a root restart */
        n++;
    }
    if (n == 0) {
        free(work);
        return -1;
    }
    dslb_eft(n, free_at, rate, gap, work, nwork, -1, lane_counts);
    for (int l = 0; l < n; l++) {
        counts[lane_dev[l]] = lane_counts[l];
        double f = free_at[l] + gap[l] + rate[l] * work[0];
        if (lane_counts[l] > 0 && (first_dev < 0 || f < first)) {
            first_dev = lane_dev[l];
            first = f;
        }
        /* A chain deciding: its successor claims the next portion, whichever
           the deal would give it, so it goes on only if that one shortens
           the iteration (with portions of unequal sizes they differ). */
        if (lane_dev[l] == me && !all_free)
            counts[me] = dslb_go(n, free_at, rate, gap, work, nwork, l)
                             ? (lane_counts[l] > 0 ? lane_counts[l] : 1) : 0;
    }
    free(work);
    return first_dev;
}

static int dslb_count_done(dslb_rec_t *rec, int nport, int iter)
{
    int done = 0;

    for (int p = 0; p < nport; p++)
        done += atomic_load_explicit(&rec[p].done_iter, memory_order_acquire) == iter + 1;
    return done;
}

/* Start one PE on device d of the table; *pe_p = its id or IVM_PE_NULL.
   With dpc (the root's master of "dslb.dpc"), the request time is noted.
   Returns 0, 1 when d's node is at its max_slots (no PE), -1 on error. */
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
    if (rc == IVM_ERROR_LIMIT) {
        *pe_p = IVM_PE_NULL;
        return 1;
    }
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

/* The highest PE id of the running iteration a device line shows (the
   iteration's first id - 1 when none: no portion claimed). */
static int dslb_claimed(const dslb_ctl_t *ctl, const dslb_stat_t *st)
{
    int claimed = ctl->base - 1, ndev = ctl->ndev, iter = ctl->iter;

    for (int d = 0; d < ndev; d++)
        if (st[d].iter == iter && st[d].claimed > claimed)
            claimed = st[d].claimed;
    return claimed;
}

static int dslb_first_undone(dslb_rec_t *rec, int nport, int iter)
{
    int p = 0;

    while (p < nport && atomic_load_explicit(&rec[p].done_iter, memory_order_acquire) == iter + 1)
        p++;
    return p;
}

/* No chain runs and portions are left (every chain ended): start one PE on
   the device that would finish a portion first. When that spawn gets no id
   (every id of the iteration was handed out), a PE died. */
static int dslb_root_restart(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                             const dslb_ctl_t *ctl, dslb_rec_t *rec, dslb_stat_t *st,
                             dslb_dpc_t *dpc)
{
    int counts[APP_MAX_DEVS], iter = ctl->iter;
    int d = dslb_deal(ops, ctx, args, ctl, st, dslb_claimed(ctl, st), -1, 0.0, 1, app_wall_s(),
                      counts);
    ivm_pe pe;

    if (d < 0)
        d = 0;
    int got = dslb_spawn(ctl, d, dpc, &pe);
    if (got < 0)
        return -1;
    if (got > 0) { /* its node is full of PEs that are ending: again later */
        app_sleep_s(DSLB_NAP_MAX_S);
        return 0;
    }
    if (pe == IVM_PE_NULL) {
        fprintf(stderr, "%s: dslb: iteration %d: every PE id of the iteration was handed out "
                "but only %d of %d portions are done (a PE died?)\n", args->app, iter,
                dslb_count_done(rec, ctl->nport, iter), ctl->nport);
        return -1;
    }
    return 0;
}

/* Wait until every portion of ctl's iteration is done, asleep in ivmWait on the PE of
   the first portion not done. A PE not started yet (NOT_FOUND): nap, and
   when no child is alive, restart a chain. */
static int dslb_root_wait(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                          const dslb_ctl_t *ctl, dslb_rec_t *rec, dslb_stat_t *st,
                          dslb_dpc_t *dpc, int *restarts_p)
{
    int P = ctl->nport, iter = ctl->iter, gone_pe = IVM_PE_NULL;
    double start = app_now_s(), nap = DSLB_NAP_MIN_S, gone_since = 0.0;

    for (;;) {
        int p = dslb_first_undone(rec, P, iter), pe = ctl->base + p, npes;
        if (p == P)
            return 0;
        double t = app_now_s();
        if (t - start > DSLB_TIMEOUT_S) {
            fprintf(stderr, "%s: dslb: iteration %d: only %d of %d portions done after "
                    "%.0f s\n", args->app, iter, dslb_count_done(rec, P, iter), P,
                    DSLB_TIMEOUT_S);
            return -1;
        }
        ivmError_t rc = ivmWait(pe);
        if (rc == IVM_SUCCESS) {
            /* It ended (children never signal); its flag was pushed before. */
            if (gone_pe != pe) {
                gone_pe = pe;
                gone_since = t;
            } else if (t - gone_since > DSLB_GONE_S) {
                fprintf(stderr, "%s: dslb: iteration %d: PE %d ended without the record of "
                        "its portion\n", args->app, iter, pe);
                return -1;
            } else {
                app_sleep_s(DSLB_NAP_MIN_S);
            }
            nap = DSLB_NAP_MIN_S;
            continue;
        }
        if (rc == IVM_ERROR_PE_FAILED) {
            fprintf(stderr, "%s: dslb: iteration %d: PE %d (portion %d) died: %s\n",
                    args->app, iter, pe, p, ivmGetLastErrorMessage());
            return -1;
        }
        if (rc != IVM_ERROR_NOT_FOUND) {
            app_ivm_error(rc, "ivmWait(pe)", __FILE__, __LINE__);
            return -1;
        }
        /* Not started yet. Count first, records second: a child gone before
           the count has pushed its flag before it. */
        APP_TRY(ivmGetNumPEs(&npes));
        if (npes <= 1 && dslb_first_undone(rec, P, iter) < P) {
            if (dslb_root_restart(args, ops, ctx, ctl, rec, st, dpc) != 0)
                return -1;
            ++*restarts_p;
            nap = DSLB_NAP_MIN_S;
            continue;
        }
        app_sleep_s(nap);
        nap = nap * 2.0 < DSLB_NAP_MAX_S ? nap * 2.0 : DSLB_NAP_MAX_S;
    }
}

/* The relative size of tail portion k of m, in rounds of `per` (a portion
   per chain): DSLB_TAPER for the first round down to 1 for the last. */
static double dslb_taper(int k, int m, int per)
{
    int rounds = (m + per - 1) / per;

    return rounds > 1 ? DSLB_TAPER - (DSLB_TAPER - 1.0) * (k / per) / (rounds - 1) : 1.0;
}

void dslb_cut(int P, double total, int nfirst, const double *speed, double batch, int even,
              double *cut)
{
    int nf = nfirst < P ? nfirst : P, m = P - nf;
    double sum = 0.0, top = 0.0, acc = 0.0, taper = 0.0;

    for (int j = 0; j < nf; j++) {
        double v = speed[j] > 0.0 ? speed[j] : 0.0;
        sum += v;
        top = v > top ? v : top;
    }
    if (!(sum > 0.0))
        nf = 0, m = P; /* no speeds: every portion is the tail's */
    cut[0] = 0.0;
    for (int j = 0; j < nf; j++) {
        double v = speed[j] > 0.0 ? speed[j] : 0.0;
        /* Its part of its share: the fastest chain's `batch`, a slower
           one's more (a tail portion would take it longer), unless even. */
        double part = m <= 0 ? 1.0 : even ? batch : 1.0 - (1.0 - batch) * v / top;
        acc += total * part * v / sum;
        cut[j + 1] = acc;
    }
    /* The tail: sizes falling linearly from DSLB_TAPER to 1, round by round
       of a portion per chain (one by one without chains). */
    double first = acc;
    int per = nf > 0 ? nf : 1;
    for (int k = 0; k < m; k++)
        taper += dslb_taper(k, m, per);
    for (int k = 0; k < m; k++) {
        acc += (total - first) * dslb_taper(k, m, per) / taper;
        cut[nf + k + 1] = acc;
    }
    cut[P] = total;
}

/* The unit in [lo, hi] where the work from unit 0 comes nearest `target`
   (the work of units [0, k) grows with k). */
static long long dslb_unit_at(const dslb_app_ops_t *ops, void *ctx, const app_args_t *args,
                              long long lo, long long hi, double target)
{
    long long a = lo, b = hi;

    while (a < b) { /* the first k with work(0, k) >= target */
        long long k = a + (b - a) / 2;
        if (dslb_unit_work(ops, ctx, args, 0, k) < target)
            a = k + 1;
        else
            b = k;
    }
    if (a > lo && target - dslb_unit_work(ops, ctx, args, 0, a - 1) <
                      dslb_unit_work(ops, ctx, args, 0, a) - target)
        a--;
    return a;
}

/* Each device's speed for the cut: measured (its line's rate; a device
   not measured yet at the fastest measured one's), or before any measure
   what the devices declare when every one does, else equal. */
static void dslb_speeds(const dslb_ctl_t *ctl, const dslb_stat_t *st, double *speed)
{
    double best = dslb_best_rate(st, ctl->ndev);
    int declared = 1;

    for (int d = 0; d < ctl->ndev; d++)
        declared = declared && ctl->dev[d].speed > 0.0;
    for (int d = 0; d < ctl->ndev; d++) {
        if (st[d].samples > 0 && st[d].rate > 0.0)
            speed[d] = 1.0 / st[d].rate;
        else if (best > 0.0)
            speed[d] = 1.0 / best;
        else
            speed[d] = declared ? ctl->dev[d].speed : 1.0;
    }
}

void dslb_shape(int P, int nfirst, const double *speed, const double *gap, int measured,
                double total, double err, int *nport, double *batch)
{
    double tail = err < 0.0 ? 1.0 - DSLB_FIRST_BATCH : DSLB_TAIL_ERR * err;
    double sum = 0.0, sq = 0.0, top = 0.0, unit = 0.0;

    if (tail < DSLB_TAIL_MIN)
        tail = DSLB_TAIL_MIN;
    if (tail > 1.0 - DSLB_FIRST_BATCH)
        tail = 1.0 - DSLB_FIRST_BATCH;
    *batch = measured ? 1.0 - tail : DSLB_FIRST_GUESS;
    *nport = P;
    if (P <= nfirst)
        return; /* no tail portion anyway */
    for (int j = 0; j < nfirst; j++) {
        double v = speed[j] > 0.0 ? speed[j] : 0.0;
        sum += v;
        sq += v * v;
        top = v > top ? v : top;
        if (gap[j] > 0.0 && gap[j] * v > unit)
            unit = gap[j] * v; /* the work a chain could do in its gap */
    }
    if (!(sum > 0.0) || !(unit > 0.0))
        return; /* no speeds, or no gap measured yet: every portion */
    /* The tail (chain j leaves tail x speed_j / fastest of its share, as
       dslb_cut cuts it) in portions of DSLB_TAIL_GAPS gaps' work; none when
       it does not hold one: a PE would cost more than the error it
       absorbs. */
    double m = tail * total * sq / (top * sum) / (DSLB_TAIL_GAPS * unit);
    *nport = m < (double)(P - nfirst) ? nfirst + (int)m : P;
}

/* The root's record of the weighted cuts: how far the chains' first
   portions strayed from the time their cut predicted. */
typedef struct {
    double err;                    /* the spread of their times (halving), < 0: none yet */
    int nfirst;                    /* first portions of the last cut */
    double *pred;                  /* their predicted seconds (0: not measured) */
    int *dev;                      /* their chains' devices */
} dslb_plan_t;

/* After an iteration: how far apart its first portions ended against their
   prediction, the spread of their times over their predicted times (largest
   minus least over the mean: what the tail has to even out; a bias that
   every device's rate shares does not count), into the plan's figure. */
static void dslb_plan_measure(dslb_plan_t *plan, const dslb_rec_t *rec, int nport)
{
    double lo = 0.0, hi = 0.0, sum = 0.0;
    int n = 0;

    for (int j = 0; j < plan->nfirst && j < nport; j++) {
        /* (A chain its node had no room for leaves its portion to another
           device: not the prediction's.) */
        if (!(plan->pred[j] > 0.0) || !(rec[j].seconds > 0.0) || rec[j].dev != plan->dev[j])
            continue;
        double r = rec[j].seconds / plan->pred[j];
        lo = n == 0 || r < lo ? r : lo;
        hi = n == 0 || r > hi ? r : hi;
        sum += r;
        n++;
    }
    if (n < 2)
        return;
    /* A larger spread counts at once, a smaller one halves the last. */
    double spread = (hi - lo) / (sum / n);
    plan->err = spread > 0.5 * plan->err ? spread : 0.5 * plan->err;
}

/* --layout weighted: cut iteration ctl->iter for the chains about to start
   (devices chain[0..nchain), in start order, so that the first portion of
   each is its share of the devices' speed) into as many portions as its
   shape asks (dslb_shape: from the devices' gaps and the plan's error),
   ctl->nport; the predicted time of each first portion into the plan. */
static int dslb_root_cut(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                         dslb_ctl_t *ctl, const dslb_stat_t *st, const int *chain, int nchain,
                         dslb_plan_t *plan)
{
    int P = args->portions, per_dev[APP_MAX_DEVS] = {0}, measured = 1, n;
    double dev_speed[APP_MAX_DEVS], *speed, *gap, *cut, batch;
    long long units = ops->units(ctx, args);
    double total = dslb_unit_work(ops, ctx, args, 0, units);

    speed = malloc((size_t)(nchain > 0 ? nchain : 1) * sizeof(double));
    gap = malloc((size_t)(nchain > 0 ? nchain : 1) * sizeof(double));
    cut = malloc((size_t)(P + 1) * sizeof(double));
    if (speed == NULL || gap == NULL || cut == NULL) {
        free(speed);
        free(gap);
        free(cut);
        fprintf(stderr, "%s: dslb: no memory for the cut of %d portions\n", args->app, P);
        return -1;
    }
    dslb_speeds(ctl, st, dev_speed);
    for (int j = 0; j < nchain; j++)
        per_dev[chain[j]]++;
    for (int j = 0; j < nchain; j++) { /* a device's chains share its speed */
        speed[j] = dev_speed[chain[j]] / per_dev[chain[j]];
        gap[j] = st[chain[j]].gap;
        measured = measured && st[chain[j]].samples > 0;
    }
    dslb_shape(P, nchain, speed, gap, measured, total, plan->err, &n, &batch);
    dslb_cut(n, total, nchain, speed, batch, !measured, cut);
    ctl->nport = n;
    ctl->bound[0] = 0;
    for (int p = 1; p < n; p++)
        ctl->bound[p] = dslb_unit_at(ops, ctx, args, ctl->bound[p - 1], units, cut[p]);
    ctl->bound[n] = units;
    plan->nfirst = nchain < n ? nchain : n;
    for (int j = 0; j < plan->nfirst; j++) {
        plan->pred[j] = measured ? dslb_work(ops, ctx, args, ctl, j) / speed[j] : 0.0;
        plan->dev[j] = chain[j];
    }
    free(speed);
    free(gap);
    free(cut);
    return 0;
}

/* The chains of iteration `iter`: with --threshold, --layout weighted (each
   device's first portion is cut to its speed) or in the first iteration
   (to measure every device) max_per_dev PEs on every device; else on each
   device the deal gives portions, as many as it gets (max_per_dev at
   most). A node's devices share its budget (slots): round by round, the
   first devices of a node start chains until it is spent. A node at its
   max_slots (PEs of the last iteration still ending) starts none: the root's
   restart covers its portions. The iteration's part of "dslb.ctl" (its
   first PE id `base`, its portions, their bounds) reaches every node and
   the max PE id is raised to its last id before the chains start; checks
   that the first id is `base`. */
static int dslb_root_start(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                           dslb_ctl_t *ctl, dslb_stat_t *st, dslb_dpc_t *dpc, int iter,
                           int base, dslb_plan_t *plan)
{
    int counts[APP_MAX_DEVS], used[APP_MAX_DEVS] = {0}, nchain = 0;
    int weighted = ctl->layout == DSLB_LAYOUT_WEIGHTED, ret = -1, *chain;
    ivm_pe first = IVM_PE_NULL;

    ctl->iter = iter;
    ctl->base = base;
    ctl->nport = args->portions;
    if (args->threshold > 0.0 || iter == 0 || weighted) {
        for (int d = 0; d < ctl->ndev; d++)
            counts[d] = args->max_per_dev;
    } else {
        dslb_deal(ops, ctx, args, ctl, st, base - 1, -1, 0.0, 1, app_wall_s(), counts);
    }
    chain = malloc((size_t)ctl->ndev * (size_t)args->max_per_dev * sizeof(int));
    if (chain == NULL) {
        fprintf(stderr, "%s: dslb: no memory for the chains\n", args->app);
        return -1;
    }
    /* The chains, in start order: their PEs get ids base, base + 1, ... */
    for (int k = 0; k < args->max_per_dev; k++) {
        for (int d = 0; d < ctl->ndev; d++) {
            int node = dslb_node_of(ctl, d);
            if (counts[d] <= k || (ctl->dev[d].budget > 0 && used[node] >= ctl->dev[d].budget))
                continue;
            used[node]++;
            chain[nchain++] = d;
        }
    }
    if (weighted && dslb_root_cut(args, ops, ctx, ctl, st, chain, nchain, plan) != 0)
        goto out;
    if (dslb_root_publish(ctl) != 0)
        goto out;
    for (int j = 0; j < nchain; j++) {
        ivm_pe pe;
        int got = dslb_spawn(ctl, chain[j], dpc, &pe);
        if (got < 0)
            goto out;
        if (first == IVM_PE_NULL)
            first = pe;
    }
    if (first != IVM_PE_NULL && first != base) {
        fprintf(stderr, "%s: dslb: iteration %d: first PE id %d, expected %d (ids not "
                "assigned in order?)\n", args->app, iter, first, base);
        goto out;
    }
    ret = 0;
out:
    free(chain);
    return ret;
}

/* The most portions of iteration's records that ran at once on one node,
   into most[node key] (dslb_node_of), kept across iterations. */
static void dslb_overlap(const dslb_ctl_t *ctl, const dslb_rec_t *rec, int P, int *most)
{
    for (int i = 0; i < P; i++) {
        int node = dslb_node_of(ctl, rec[i].dev), n = 0;
        for (int j = 0; j < P; j++)
            n += dslb_node_of(ctl, rec[j].dev) == node && rec[j].t0 <= rec[i].t0 &&
                 rec[i].t0 < rec[j].t1;
        if (n > most[node])
            most[node] = n;
    }
}

/* "dslb: node0 ran at most N portions at once (slots S)" per node. */
static void dslb_overlap_report(const dslb_ctl_t *ctl, const int *most)
{
    for (int d = 0; d < ctl->ndev; d++) {
        if (dslb_node_of(ctl, d) != d)
            continue;
        char limit[32] = "not limited";
        if (ctl->dev[d].budget > 0)
            snprintf(limit, sizeof(limit), "at most %d", ctl->dev[d].budget);
        printf("dslb: %s ran at most %d portion%s at once (%s)\n",
               ctl->dev[d].host[0] != '\0' ? ctl->dev[d].host : "the root's node", most[d],
               most[d] == 1 ? "" : "s", limit);
    }
}

/* Before iteration `iter`: a device whose declared speed changed (ivm-ctl
   set-share while the job runs) gets its line's figures scaled to the new
   speed, so that the cut and the deal do not wait for new measures. The
   iteration the change came in measured both speeds at once, so the figures
   scaled are those from before it (`before`: the lines at that iteration's
   start). Between iterations no PE of the device runs, so the root may write
   its line; it pushes it to every node's copy. `before` gets the lines as
   the iteration starts. */
static int dslb_root_follow_shares(dslb_ctl_t *ctl, dslb_stat_t *st, dslb_stat_t *before,
                                   int iter)
{
    for (int d = 0; d < ctl->ndev; d++) {
        double now = dslb_declared(ctl, d), was = ctl->dev[d].speed;
        if (now > 0.0 && was > 0.0 && (now > 1.01 * was || now < 0.99 * was)) {
            const dslb_stat_t *from = before[d].samples > 0 ? &before[d] : &st[d];
            double q = now / was;
            if (from->samples > 0) {
                st[d].rate = from->rate / q;
                st[d].gap = from->gap / q;
                APP_TRY(ivmSyncPutGroup(&st[d], sizeof(st[d])));
            }
            printf("dslb: iteration %d: device %d declares %.3g cores (was %.3g): its "
                   "measures scaled\n", iter, d, now, was);
        }
        if (now > 0.0)
            ctl->dev[d].speed = now;
    }
    memcpy(before, st, (size_t)ctl->ndev * sizeof(*st));
    return 0;
}

/* IVM_DSLB_TRACE=1: each portion of the iteration on stderr (device, units,
   work, its start and end after the iteration's start, seconds). */
static void dslb_trace(const dslb_ctl_t *ctl, const dslb_rec_t *rec, int P, int iter,
                       double start)
{
    for (int p = 0; p < P; p++)
        fprintf(stderr, "dslb: iteration %d portion %d: PE %d device %d units %lld..%lld "
                "work %.4g ran %.3f..%.3f s\n", iter, p, rec[p].pe, rec[p].dev,
                (long long)ctl->bound[p], (long long)ctl->bound[p + 1],
                rec[p].work, rec[p].t0 - start, rec[p].t1 - start);
}

/* Before the first iteration, with the app's child_stage (and unless
   IVM_DSLB_STAGE=0): one PE on the first device of every node but the
   root's (ids 1, 2, ...: "dslb.ctl"
   says iteration -1), each mapping what the node's portions will read,
   waited for. Returns the PEs started (the first iteration's PE ids come
   after them), -1 on failure. */
static int dslb_root_stage(const app_args_t *args, const dslb_app_ops_t *ops, dslb_ctl_t *ctl)
{
    int dev[APP_MAX_DEVS], n = 0, me = -1;
    ivm_pe pe[APP_MAX_DEVS];
    double t0 = app_now_s();

    const char *knob = getenv("IVM_DSLB_STAGE");
    if (ops->child_stage == NULL || (knob != NULL && strcmp(knob, "0") == 0))
        return 0;
    APP_TRY(ivmGetMyNode(&me));
    for (int d = 0; d < ctl->ndev; d++) {
        int k = dslb_node_of(ctl, d) == d ? app_node_index(ctl->dev[d].host) : IVM_THIS_NODE;
        if (k == -3)
            return -1;
        if (k != IVM_THIS_NODE && k != me) /* the root's node holds the masters */
            dev[n++] = d;
    }
    if (n == 0)
        return 0;
    ctl->iter = -1;
    ctl->base = 1;
    ctl->nport = n;
    if (dslb_root_publish(ctl) != 0)
        return -1;
    for (int k = 0; k < n; k++) {
        if (dslb_spawn(ctl, dev[k], NULL, &pe[k]) != 0 || pe[k] != k + 1) {
            fprintf(stderr, "%s: dslb: no staging PE on %s (PE %d, expected %d)\n", args->app,
                    ctl->dev[dev[k]].host, pe[k], k + 1);
            return -1;
        }
    }
    for (int k = 0; k < n; k++) {
        ivmError_t rc;
        while ((rc = ivmWait(pe[k])) == IVM_ERROR_NOT_FOUND) /* not started yet */
            app_sleep_s(DSLB_NAP_MAX_S);
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "%s: dslb: the staging PE %d on %s failed: %s\n", args->app,
                    pe[k], ctl->dev[dev[k]].host, ivmGetLastErrorMessage());
            return -1;
        }
    }
    printf("dslb: inputs staged on %d node%s in %.3f s\n", n, n == 1 ? "" : "s",
           app_now_s() - t0);
    return n;
}

static int dslb_root(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx)
{
    const char *trace_env = getenv("IVM_DSLB_TRACE");
    int trace = trace_env != NULL && strcmp(trace_env, "1") == 0;
    int P = args->portions, iters = args->iters, restarts = 0, max_id = 0, ret = -1;
    int most[APP_MAX_DEVS] = {0}, base = 1, fewest = P, most_port = 0;
    dslb_plan_t plan = { .err = -1.0 };
    dslb_stat_t before[APP_MAX_DEVS] = {{0}};
    dslb_ctl_t *ctl = NULL;
    dslb_rec_t *rec = NULL;
    dslb_stat_t *st = NULL;
    dslb_dpc_t *dpc = NULL;
    app_result_t res;
    double seconds = 0.0;

    app_result_init(&res, args->app, "ivm", args->size);
    if (ops->root_setup(ctx, args) != 0)
        return -1;
    long long units = ops->units(ctx, args);
    size_t ctl_size = sizeof(*ctl) + (size_t)(P + 1) * sizeof(int64_t);

    APP_TRY(ivmMalloc(DSLB_CTL, &ctl, ctl_size));
    APP_TRY_GOTO(ivmMalloc(DSLB_REC, &rec, (size_t)P * sizeof(*rec)), out_free);
    APP_TRY_GOTO(ivmMalloc(DSLB_DEV, &st, APP_MAX_DEVS * sizeof(*st)), out_free);
    ctl->magic = DSLB_CTL_MAGIC;
    ctl->portions = P;
    ctl->iters = iters;
    ctl->layout = args->layout_equal ? DSLB_LAYOUT_EQUAL : DSLB_LAYOUT_WEIGHTED;
    for (int p = 0; p <= P; p++) /* the equal cut (--layout weighted redoes it) */
        ctl->bound[p] = units * p / P;
    ctl->work = 0.0;
    for (int p = 0; p < P; p++)
        ctl->work += dslb_work(ops, ctx, args, ctl, p);
    if (args->dpc) {
        APP_TRY_GOTO(ivmMalloc(DSLB_DPC, &dpc, (size_t)dslb_max_ids(args) * sizeof(*dpc)),
                     out_free);
        memset(dpc, 0, (size_t)dslb_max_ids(args) * sizeof(*dpc));
        ctl->dpc = 1;
    }
    if (dslb_probe(ctl, args) != 0)
        goto out_free;
    plan.pred = calloc((size_t)ctl->ndev * (size_t)args->max_per_dev, sizeof(double));
    plan.dev = calloc((size_t)ctl->ndev * (size_t)args->max_per_dev, sizeof(int));
    if (plan.pred == NULL || plan.dev == NULL) {
        fprintf(stderr, "%s: dslb: no memory for the plan\n", args->app);
        goto out_free;
    }
    int staged = dslb_root_stage(args, ops, ctl);
    if (staged < 0)
        goto out_free;
    base = staged + 1;
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

        if (dslb_root_follow_shares(ctl, st, before, iter) != 0 ||
            dslb_root_start(args, ops, ctx, ctl, st, dpc, iter, base, &plan) != 0 ||
            dslb_root_wait(args, ops, ctx, ctl, rec, st, dpc, &restarts) != 0)
            goto out_free;
        if (ops->root_iter_end != NULL && ops->root_iter_end(ctx, args, iter) != 0)
            goto out_free;
        seconds += app_now_s() - t0;

        for (int p = 0; p < ctl->nport; p++) {
            char name[APP_NAME_MAX];
            int d = rec[p].dev;
            if (d < 0 || d >= ctl->ndev || rec[p].pe != base + p) {
                fprintf(stderr, "%s: dslb: iteration %d portion %d: record of PE %d on "
                        "device %d (expected PE %d)\n", args->app, iter, p, rec[p].pe, d,
                        base + p);
                goto out_free;
            }
            if (rec[p].pe > max_id)
                max_id = rec[p].pe;
            app_dev_name(ctl->dev[d].host, ctl->dev[d].devtype, name, sizeof(name));
            app_result_add_share(&res, name, rec[p].work);
        }
        dslb_overlap(ctl, rec, ctl->nport, most);
        if (ctl->layout == DSLB_LAYOUT_WEIGHTED)
            dslb_plan_measure(&plan, rec, ctl->nport);
        if (trace) {
            dslb_trace(ctl, rec, ctl->nport, iter, t0);
            fprintf(stderr, "dslb: iteration %d: %d portions, %.3f s; first portions' error "
                    "now %.3f\n", iter, ctl->nport, app_now_s() - t0, plan.err);
        }
        fewest = ctl->nport < fewest ? ctl->nport : fewest;
        most_port = ctl->nport > most_port ? ctl->nport : most_port;
        base += ctl->nport;
    }

    /* The limit is the last iteration's last id: one more spawn must be
       refused. */
    {
        ivm_pe extra;
        if (dslb_spawn(ctl, 0, NULL, &extra) != 0) {
            fprintf(stderr, "%s: dslb: the spawn beyond the max PE id was not refused as "
                    "such\n", args->app);
            goto out_free;
        }
        if (extra != IVM_PE_NULL) {
            fprintf(stderr, "%s: dslb: PE %d started beyond the max PE id %d\n",
                    args->app, extra, base - 1);
            ivmKillPEs(&extra, 1);
            goto out_free;
        }
    }
    printf("dslb: %d-%d portions (at most %d) x %d iterations on %d devices: PE ids 1..%d "
           "used, max PE id %d, root restarts %d\n", fewest, most_port, P, iters, ctl->ndev,
           max_id, base - 1, restarts);
    dslb_overlap_report(ctl, most);
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
    free(plan.pred);
    free(plan.dev);
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

/* Write device line `line` (a copy in `val`) through reference `ref` and
   push it; the push the PE posted at its start (dslb_line_start) is
   complete first, so that the line's pushes reach the master in order. */
static int dslb_line_put(const dslb_portion_t *w, dslb_stat_t *ref, const dslb_stat_t *val)
{
    APP_TRY(ivmQuiet());
    return app_ref_put(w->kernel, ref, val, sizeof(*val));
}

/* A PE's start on its device's line: the gap since its predecessor's
   decision (when one handed off to it), the portion it claimed and when it
   should end. `host` is the line in the node copy, `ref` the PE's own. */
static int dslb_line_start(const dslb_portion_t *w, dslb_stat_t *ref, const dslb_stat_t *host,
                           double t_started, double work)
{
    dslb_stat_t line = *host;

    if (line.handoff && line.decided_at > 0.0 && t_started > line.decided_at)
        line.gap = dslb_smooth(line.gap, line.gap > 0.0, t_started - line.decided_at);
    line.handoff = 0;
    if (line.iter != w->iter || line.claimed < w->pe)
        line.claimed = w->pe;
    line.iter = w->iter;
    line.active = 1;
    line.busy_until = line.samples > 0 ? t_started + line.rate * work : 0.0;
    /* Posted, and the PE starts its portion: on a mirror node the push is a
       round trip to the master's node that nothing here waits for (this
       node's PEs read the node copy; the line's next push, this PE's
       decision, waits for it; the next PE of the chain starts after that). */
    return app_ref_put_nbi(w->kernel, ref, &line, sizeof(line));
}

/* After the portion: the device's new rate (wall-clock from the PE's
   start, t_started, to now over the portion's work: its start-up, its
   input's pulls and the computation, with whatever throttled or slowed
   them), the lines of the other nodes' devices pulled, the rule
   (--threshold, or the deal), and the line pushed with the decision. 1:
   start a successor, 0: the chain ends, -1: failed. */
static int dslb_decide(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                       const dslb_ctl_t *ctl, dslb_stat_t *st_ref, dslb_stat_t *st,
                       const dslb_portion_t *w, int me, double t_started, double work)
{
    const char *node = getenv("IVM_NODE");
    double now = app_wall_s();
    dslb_stat_t line = st[me];
    int go, counts[APP_MAX_DEVS];

    line.rate = dslb_rate_add(line.rate, &line.rate_work, now - t_started, work,
                              ctl->work / ctl->ndev);
    line.samples++;
    /* The other nodes' devices: pulled line by line (a pull of the whole
       array could undo a concurrent update of this node's). */
    for (int d = 0; d < ctl->ndev; d++) {
        if (ctl->dev[d].host[0] != '\0' && (node == NULL || strcmp(node, ctl->dev[d].host) != 0))
            APP_TRY(ivmSyncGet(&st_ref[d], sizeof(dslb_stat_t)));
    }
    st[me].rate = line.rate; /* for the rules below only; pushed with the line */
    st[me].samples = line.samples;
    if (args->threshold > 0.0) {
        double best = dslb_best_rate(st, ctl->ndev);
        go = best <= 0.0 || line.rate / best < args->threshold;
    } else {
        int claimed = dslb_claimed(ctl, st);
        dslb_deal(ops, ctx, args, ctl, st, claimed, me, line.rate, 0, now, counts);
        go = counts[me] > 0;
    }
    line.decided_at = now;
    line.handoff = go;
    line.active = go;
    line.busy_until = 0.0;
    if (go) {
        int next = dslb_claimed(ctl, st) + 1 - ctl->base; /* the successor's */
        if (next >= 0 && next < ctl->nport)
            line.busy_until = now + line.gap + line.rate * dslb_work(ops, ctx, args, ctl, next);
    }
    if (dslb_line_put(w, &st_ref[me], &line) != 0)
        return -1;
    return go;
}

/* A child's state, from its start to its exit (dslb_portion_t.child). */
struct dslb_child {
    const app_args_t *args;
    const dslb_app_ops_t *ops;
    void *ctx;
    dslb_ctl_t *ctl;               /* host view of "dslb.ctl" */
    dslb_stat_t *st_ref, *st;      /* "dslb.dev": reference and host view */
    dslb_dpc_t *dpc_ref;           /* "dslb.dpc" (--dpc), else NULL */
    int me;                        /* the PE's device in the table */
    int decided;                   /* dslb_portion_computed ran */
    double t_started;              /* wall-clock, just after ivmEnter */
    double work;                   /* work units of the portion */
    double t0;                     /* monotonic, the portion's start */
    double dt;                     /* seconds of the portion, to its computed mark */
};

/* Start the successor on this PE's own device; with --dpc note when it was
   asked for (the successor notes when it started). */
static int dslb_successor(const dslb_portion_t *w, const struct dslb_child *c)
{
    ivm_device self;
    ivm_pe next;
    ivmError_t rc;

    APP_TRY(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
    double t_request = app_wall_s();
    rc = ivmCreatePEs(self, 1, &next);
    ivmDestroyDev(self);
    if (rc == IVM_ERROR_LIMIT) /* the node is at its max_slots: the chain ends */
        next = IVM_PE_NULL;
    else
        APP_TRY(rc);
    if (c->dpc_ref != NULL && next != IVM_PE_NULL &&
        app_ref_put(w->kernel, &c->dpc_ref[next - 1].t_request, &t_request,
                    sizeof(t_request)) != 0)
        return -1;
    return 0;
}

int dslb_portion_computed(const dslb_portion_t *w)
{
    struct dslb_child *c = w->child;
    int go;

    if (c == NULL || c->decided)
        return 0;
    c->decided = 1;
    /* The test knob slows the PE's whole run so far, the span its rate is
       measured over: a slowed device looks slower by its factor whatever
       share of the run its computation is. */
    app_slow_apply(c->ctl->dev[c->me].slow, app_wall_s() - c->t_started);
    c->dt = app_now_s() - c->t0;
    /* Whether this device takes another portion: its successor, started
       after the line says so (the successor measures the gap from it). */
    go = dslb_decide(c->args, c->ops, c->ctx, c->ctl, c->st_ref, c->st, w, c->me,
                     c->t_started, c->work);
    if (go < 0)
        return -1;
    return go ? dslb_successor(w, c) : 0;
}

/* The portion's record: its body first, its flag last (each push completes
   before the call returns). */
static int dslb_record(const dslb_portion_t *w, const struct dslb_child *c, dslb_rec_t *rec_ref,
                       dslb_rec_t *rec)
{
    if (IVM_DEV_IS_GPU(w->devtype)) {
        dslb_rec_t body = { .pe = w->pe, .dev = c->me, .seconds = c->dt, .work = c->work,
                            .t0 = c->t0, .t1 = c->t0 + c->dt };
        int32_t flag = w->iter + 1;
        if (app_ref_put(w->kernel, rec_ref, &body, offsetof(dslb_rec_t, done_iter)) != 0 ||
            app_ref_put(w->kernel, &rec_ref->done_iter, &flag, sizeof(flag)) != 0)
            return -1;
        return 0;
    }
    rec->pe = w->pe;
    rec->dev = c->me;
    rec->seconds = c->dt;
    rec->work = c->work;
    rec->t0 = c->t0;
    rec->t1 = c->t0 + c->dt;
    APP_TRY(ivmSyncPut(rec, offsetof(dslb_rec_t, done_iter)));
    atomic_store_explicit(&rec->done_iter, w->iter + 1, memory_order_release);
    APP_TRY(ivmSyncPut(&rec->done_iter, sizeof(rec->done_iter)));
    return 0;
}

/* The child's view of the driver's objects: the device table (reference
   ctl_ref, host view ctl) checked, its device found, its record and the
   device lines mapped, its --dpc start noted. */
static int dslb_child_open(struct dslb_child *c, dslb_portion_t *w, dslb_ctl_t *ctl_ref,
                           dslb_ctl_t *ctl, dslb_rec_t **rec_ref)
{
    const app_args_t *args = c->args;
    int devtype;

    APP_TRY(ivmGetMyDevType(&devtype));
    if (app_kernel_pick_ref(devtype, ctl_ref, &w->kernel) != 0)
        return -1;
    w->devtype = devtype;
    c->ctl = ctl;
    if (c->ctl->magic != DSLB_CTL_MAGIC || c->ctl->portions != args->portions ||
        c->ctl->iters != args->iters) {
        fprintf(stderr, "%s: dslb: PE %d: the device table does not match this run\n",
                args->app, w->pe);
        return -1;
    }
    /* The iteration's ids, pushed with its cut before any of its PEs
       started: this PE's portion is its id's place among them. */
    if (w->pe < c->ctl->base || w->pe > dslb_last_id(c->ctl) || c->ctl->nport < 1 ||
        c->ctl->nport > args->portions || c->ctl->iter < 0 || c->ctl->iter >= args->iters) {
        fprintf(stderr, "%s: dslb: PE %d outside iteration %d's PE ids %d..%d\n", args->app,
                w->pe, c->ctl->iter, c->ctl->base, dslb_last_id(c->ctl));
        return -1;
    }
    w->iter = c->ctl->iter;
    w->portion = w->pe - c->ctl->base;
    c->me = dslb_my_dev(c->ctl, devtype);
    if (c->me < 0) {
        fprintf(stderr, "%s: dslb: PE %d: its device (node %s, type %d) is not in the "
                "table\n", args->app, w->pe, getenv("IVM_NODE") ? getenv("IVM_NODE") : "?",
                devtype);
        return -1;
    }
    APP_TRY(ivmMapSubset(DSLB_REC, rec_ref, (size_t)w->portion * sizeof(dslb_rec_t),
                         sizeof(dslb_rec_t)));
    APP_TRY(ivmMap(DSLB_DEV, &c->st_ref, 0));
    c->st = app_host_view(c->st_ref);
    if (c->st == NULL)
        return -1;
    if (c->ctl->dpc) {
        APP_TRY(ivmMap(DSLB_DPC, &c->dpc_ref, 0));
        if (app_ref_put(w->kernel, &c->dpc_ref[w->pe - 1].t_started, &c->t_started,
                        sizeof(c->t_started)) != 0)
            return -1;
    }
    return 0;
}

/* A child's data flow. A CPU PE's references are its node copy. A GPU PE's
   references are its device copy (emu: host memory of the emulated GPU,
   shared by the PEs of that GPU; cuda: device memory): the driver reads the
   control table, the statistics and the records on the host view
   (ivmHostPtr, the node copy) and writes through the reference, then pushes
   (device copy -> node copy -> master); a write to the host view would be
   overwritten by the push's device-to-node copy. */
static int dslb_child_run(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx,
                          int id, double t_started, dslb_ctl_t *ctl_ref, dslb_ctl_t *ctl)
{
    struct dslb_child c = { .args = args, .ops = ops, .ctx = ctx, .t_started = t_started };
    dslb_portion_t w = { .pe = id, .args = args, .child = &c }; /* iter, portion: open */
    dslb_rec_t *rec_ref = NULL, *rec;

    if (dslb_child_open(&c, &w, ctl_ref, ctl, &rec_ref) != 0)
        return -1;
    rec = app_host_view(rec_ref);
    if (rec == NULL)
        return -1;
    w.lo = c.ctl->bound[w.portion];
    w.hi = c.ctl->bound[w.portion + 1];
    c.work = dslb_work(ops, ctx, args, c.ctl, w.portion);
    if (dslb_line_start(&w, &c.st_ref[c.me], &c.st[c.me], t_started, c.work) != 0)
        return -1;
    c.t0 = app_now_s();
    if (ops->child_portion(ctx, &w) != 0)
        return -1;
    /* An app that did not mark its computation done decides now. */
    if (dslb_portion_computed(&w) != 0)
        return -1;
    return dslb_record(&w, &c, rec_ref, rec);
}

static int dslb_child(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx, int id,
                      double t_started)
{
    dslb_ctl_t *ctl = NULL;

    if (id < 1 || id > dslb_max_ids(args)) {
        fprintf(stderr, "%s: dslb: PE id %d outside the %d x %d portions and the staging "
                "PEs\n", args->app, id, args->portions, args->iters);
        return -1;
    }
    APP_TRY(ivmMap(DSLB_CTL, &ctl, 0));
    dslb_ctl_t *view = app_host_view(ctl); /* ctl is the PE's reference */
    if (view == NULL)
        return -1;
    if (view->magic == DSLB_CTL_MAGIC && view->iter == -1 && ops->child_stage != NULL &&
        id >= view->base && id < view->base + view->nport)
        return ops->child_stage(ctx, args, id); /* a staging PE (dslb_root_stage) */
    /* The driver's maps are left to ivmExit, which releases every mapping of
       the PE: the PE ends now, and a round trip per unmap is a chain's time. */
    return dslb_child_run(args, ops, ctx, id, t_started, ctl, view);
}

/* Set by dslb_run when this process was a child PE that ended with ivmExit. */
static int dslb_child_done;

int dslb_run(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx)
{
    int id, ret;
    ivmError_t rc;

    /* A chain starts a PE per portion: the root asks for a warm pool of one
       process per device (IVM_PE_POOL, unless set), which forks each PE
       instead of an exec, dynamic linking and start-up. */
    if (getenv("IVM_PE_ID") == NULL)
        setenv("IVM_PE_POOL", DSLB_POOL, 0);
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
    dslb_child_done = id != 0;
    return ret == 0 ? 0 : 1;
}

/* A child PE's process ends here, once its portion is pushed and ivmExit has
   returned: stdio flushed, then _exit. The C runtime's and the libraries'
   exit handlers (libgomp, the CUDA runtime, ld.so's destructors of every
   library) took about 1.4 ms of the device's core per PE on the test VM,
   and a DS-LB run starts a PE per portion: NBODY, DMM and NW ran 2-3 %
   faster without them (docs/BENCHMARKS.md). Under AddressSanitizer the
   normal exit stays, so that the leak checker, which runs at exit, still
   checks every PE. */
static void dslb_child_end(int status)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)status;
#else
    fflush(NULL);
    _exit(status);
#endif
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

    if (ops->units == NULL) {
        fprintf(stderr, "%s: dslb: the app gives no units (dslb_app_ops_t.units)\n", args->app);
        return 1;
    }
    if (app_args_parse(argc, argv, args, usage_extra) != 0)
        return 2;
    if (ops->args_check != NULL)
        ret = ops->args_check(ctx, args);
    if (ret == 0)
        ret = args->serial ? dslb_serial(args, ops, ctx) : dslb_run(args, ops, ctx);
    if (ops->release != NULL)
        ops->release(ctx);
    if (dslb_child_done)
        dslb_child_end(ret);
    return ret;
}
