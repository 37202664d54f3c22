/*
 * OM-LB driver: the root's monitoring loop and the children's iteration
 * loop with their halo exchange. See omlb.h for the scheme and its record
 * lines.
 */
#define _POSIX_C_SOURCE 200809L

#include "omlb.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OMLB_PLAN_OBJ   "omlb.plan"
#define OMLB_REP_OBJ    "omlb.rep"
#define OMLB_INBOX_FMT  "omlb.in.%d"  /* a PE's in-box, by PE id */
#define OMLB_NAP_MIN_S  10e-6  /* waits poll every 10 us ... */
#define OMLB_NAP_MAX_S  500e-6 /* ... growing to 500 us as the wait goes on */
#define OMLB_WAIT_S     120.0  /* longest wait for a plan, a halo or the PEs */
#define OMLB_LIVE_S     0.1    /* the root counts the live PEs this often */
#define OMLB_WINDOW     3      /* measured iterations of every PE in a window, at least */
#define OMLB_WINDOW_S   0.05   /* seconds in a window, at least */
#define OMLB_LEAD_S     0.1    /* `until` runs this far ahead of the slowest PE */
#define OMLB_LEAD_MIN   4      /* ... and this many iterations at least */
#define OMLB_PUSH_S     0.025  /* a CPU PE pushes its report this often */
#define OMLB_TRIAL_GAIN 0.10   /* a trial PE stays if its device got 10% faster */
#define OMLB_SPIN_S     0.2    /* a halo wait spins this long, then naps */
#define OMLB_STREAK     2      /* windows in a row a move must pay off, after the first */
#define OMLB_TOL_MAX    0.4    /* the most a move must promise after moves that did not pay */
#define OMLB_SHARES_S   0.5    /* the root reads the devices' shares this often */

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

/* The root's orders ("omlb.plan"); valid only when hash matches. The PEs of
   `epoch` run iterations start .. until-1 on their shares; at `until` with
   `stop` they store, and with `done` that is the end. */
typedef struct omlb_plan {
    uint64_t    seq;     /* increases with every plan */
    int32_t     epoch;   /* increases when the shares change */
    int32_t     start;   /* first iteration of the epoch (shares loaded there) */
    int32_t     until;   /* iterations below it may run */
    int32_t     stop;    /* 1: at `until`, store the share and wait */
    int32_t     done;    /* 1: `until` is the last iteration: store and end */
    int32_t     nparts;  /* shares in parts[], in unit order */
    omlb_slot_t parts[OMLB_MAX_PES];
    uint64_t    hash;    /* FNV-1a of the bytes above */
} omlb_plan_t;
_Static_assert(offsetof(omlb_plan_t, parts) == 32, "omlb_plan_t layout");

/* A PE's figures ("omlb.rep", one slot per PE); valid when hash matches. */
typedef struct omlb_report {
    int32_t  epoch;    /* the epoch of the figures below */
    int32_t  iter;     /* the next iteration it will run */
    int32_t  stored;   /* the iteration it stored its share at (-1: not in this epoch) */
    int32_t  status;   /* 0 = fine, -1 = the PE failed */
    int32_t  cores;    /* its device's cores (IVM_DEVICE_CORES) */
    int32_t  runs;     /* iterations run in this epoch */
    int32_t  measured; /* of which measured (all but the first after a load) */
    int32_t  pad;
    double   compute;  /* the measured ones' compute seconds (slowdown knob included) */
    double   cpu;      /* their compute's CPU seconds (the PE's main thread) */
    double   busy;     /* wall seconds of those iterations, but the naps of halo waits */
    double   busy_cpu; /* CPU seconds of the main thread in them */
    double   value;    /* the value of its last iteration */
    int32_t  gpu;      /* 1: a GPU PE of the CUDA kernel (CPU time tells nothing) */
    int32_t  reserved;
    uint64_t hash;     /* FNV-1a of the bytes above */
} omlb_report_t;
_Static_assert(sizeof(omlb_report_t) == 88, "omlb_report_t layout");

/* A PE's in-box holds four slots, [iteration parity][side] (side 0: from
   the PE below, 1: from the PE above), each this header and the edge. The
   writer puts the whole slot at once; the hash tells the reader that every
   byte of it arrived (a put's bytes may land in any order). */
typedef struct omlb_edge_hdr {
    _Atomic int64_t stamp;  /* iteration + 1 of the edge (0: none yet) */
    uint64_t        hash;   /* omlb_edge_hash of the stamp and the edge */
} omlb_edge_hdr_t;
_Static_assert(sizeof(omlb_edge_hdr_t) == 16, "omlb_edge_hdr_t layout");

/* Print the failed call with its status and message; goto fail. */
#define OMLB_CHECK(call)                                                              \
    do {                                                                              \
        ivmError_t omlb_rc_ = (call);                                                 \
        if (omlb_rc_ != IVM_SUCCESS) {                                                \
            fprintf(stderr, "omlb: %s failed: %s (%s)\n", #call,                      \
                    ivmGetErrorString(omlb_rc_), ivmGetLastErrorMessage());           \
            goto fail;                                                                \
        }                                                                             \
    } while (0)

/* Sleep a tenth of the time waited so far (10 us .. 500 us): a wait costs
   the waiter a tenth at most, and never a core. Returns the seconds asked
   for (a PE out of its CPU quota sleeps longer: that part is not its
   choice). */
static double omlb_nap(double waited_s)
{
    double s = waited_s / 10.0;

    s = s < OMLB_NAP_MIN_S ? OMLB_NAP_MIN_S : s > OMLB_NAP_MAX_S ? OMLB_NAP_MAX_S : s;
    app_sleep_s(s);
    return s;
}

static uint64_t omlb_plan_hash(const omlb_plan_t *pl)
{
    return app_fnv1a(pl, offsetof(omlb_plan_t, hash));
}

static uint64_t omlb_report_hash(const omlb_report_t *rp)
{
    return app_fnv1a(rp, offsetof(omlb_report_t, hash));
}

/* ---------------------------------------------------------------- devices */

void omlb_config_init(omlb_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->cap = 1;
    cfg->balance_tol = 0.05;
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
    cfg->nodes[cfg->ndevs] = app_node_index(host);
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

/* ------------------------------------------------------------------ rules */

void omlb_rule_split(int ndevs, int units, const int *dev_pes, const double *cost, int *alloc)
{
    int dealt = 0;

    /* Every PE one unit; then each unit to the device that would finish it
       first (optimal for equal units on devices of different speeds). */
    for (int d = 0; d < ndevs; d++) {
        alloc[d] = dev_pes[d];
        dealt += dev_pes[d];
    }
    for (; dealt < units; dealt++) {
        int best = 0;
        for (int d = 1; d < ndevs; d++)
            if (cost[d] * (alloc[d] + 1) < cost[best] * (alloc[best] + 1))
                best = d;
        alloc[best]++;
    }
}

/* The slowest device's time of a split. */
static double omlb_split_time(int ndevs, const int *alloc, const double *cost)
{
    double t = 0.0;

    for (int d = 0; d < ndevs; d++)
        t = fmax(t, cost[d] * alloc[d]);
    return t;
}

int omlb_rule_worth(int ndevs, int units, const int *dev_pes, const int *dev_units,
                    const double *cost, double tol, int remaining, double move_s)
{
    int best[OMLB_MAX_DEVS];

    omlb_rule_split(ndevs, units, dev_pes, cost, best);
    double now = omlb_split_time(ndevs, dev_units, cost);
    double then = omlb_split_time(ndevs, best, cost);
    return now > then * (1.0 + tol) && (now - then) * remaining > move_s;
}

/* ------------------------------------------------------------------- root */

typedef struct omlb_root {
    const omlb_config_t *cfg;
    omlb_plan_t         *plan;  /* the master copy */
    omlb_report_t       *rep;   /* the master copy */
    int                  npes;  /* PEs created (report slots used) */
    ivm_pe               pe[OMLB_MAX_PES];     /* by report slot */
    int                  pe_dev[OMLB_MAX_PES]; /* device of each */
    int                  retired[OMLB_MAX_PES];/* left out of the plans from now on */
    int                  dev_pes[OMLB_MAX_DEVS];
    int                  dev_units[OMLB_MAX_DEVS];
    int                  dev_cores[OMLB_MAX_DEVS]; /* from the reports, 0: unknown */
    int                  share[OMLB_MAX_DEVS];     /* CPU share in percent, 0: unknown */
    int                  share_cores[OMLB_MAX_DEVS]; /* the cores it is a share of */
    double               shares_at;                /* when they were read */
    double               slow[OMLB_MAX_DEVS];
    double               dev_done[OMLB_MAX_DEVS];  /* units x iterations done */
    double               est[OMLB_MAX_DEVS];       /* cost per unit, the windows' median (0: none) */
    double               hist[OMLB_MAX_DEVS][3];   /* the last windows' costs, newest first */
    int                  nhist[OMLB_MAX_DEVS];     /* how many of them there are */
    int                  prior;   /* the first split came from the devices' shares */
    int                  start_equal; /* IVM_OMLB_START=equal */
    int                  trial[OMLB_MAX_DEVS];     /* 0 none, 1 running, 2 kept, 3 dropped */
    double               trial_base[OMLB_MAX_DEVS];/* cost per unit before the trial */
    int                  trial_slot[OMLB_MAX_DEVS];
    omlb_report_t        got[OMLB_MAX_PES];        /* the latest reports */
    omlb_report_t        base[OMLB_MAX_PES];       /* the reports at the window's start */
    double               win_start;                /* when the window started */
    double               move_s;  /* what moving the shares costs, measured */
    double               started; /* when the first plan went out (0: the start is over) */
    double               t_iter;  /* seconds per iteration of the slowest PE, smoothed */
    double               last_live;
    int                  rebalances;
    int                  streak;  /* windows in a row that found a move worth it */
    double               tol;     /* the gain a move must promise (adapts, below) */
    double               win_tmax;/* the last window's slowest PE, s per iteration */
    int                  judge;   /* a move waits to be judged by the next window */
    double               judge_before, judge_gain; /* the time before, its promise */
    double               judge_sum;  /* the windows' times since the move */
    int                  rec_next;   /* the first iteration no record line covers yet */
} omlb_root_t;

/* Deal each device's units evenly to its PEs and write the shares, in unit
   order (device order, then creation order), into the plan. */
static void omlb_root_parts(omlb_root_t *r)
{
    int n = 0, lo = 0;

    for (int d = 0; d < r->cfg->ndevs; d++) {
        int k = 0;
        for (int s = 0; s < r->npes; s++) {
            if (r->pe_dev[s] != d || r->retired[s])
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

/* Publish the plan as it stands (new seq, hash) to every node. */
static int omlb_root_publish(omlb_root_t *r)
{
    omlb_plan_t *pl = r->plan;

    pl->hash = 0;
    atomic_thread_fence(memory_order_seq_cst);
    pl->seq++;
    pl->hash = omlb_plan_hash(pl);
    atomic_thread_fence(memory_order_seq_cst);
    OMLB_CHECK(ivmSyncPutGroup(pl, sizeof(*pl)));
    return 0;
fail:
    return -1;
}

static int omlb_root_spawn(omlb_root_t *r, int d)
{
    ivm_pe pe;

    if (r->npes == OMLB_MAX_PES) {
        fprintf(stderr, "omlb: more than %d PEs\n", OMLB_MAX_PES);
        return -1;
    }
    OMLB_CHECK(ivmCreatePEs(r->cfg->devs[d], 1, &pe));
    if (pe == IVM_PE_NULL) {
        fprintf(stderr, "omlb: no PE could be created on %s (PE id limit)\n",
                r->cfg->names[d]);
        return -1;
    }
    r->pe[r->npes] = pe;
    r->pe_dev[r->npes] = d;
    r->retired[r->npes] = 0;
    r->npes++;
    r->dev_pes[d]++;
    return 0;
fail:
    return -1;
}

/* Read the valid reports of the plan's PEs into r->got (a torn one keeps
   the last). -1 when a PE reported a failure. */
static int omlb_root_read(omlb_root_t *r)
{
    for (int k = 0; k < r->plan->nparts; k++) {
        int s = r->plan->parts[k].rep;
        omlb_report_t rp;
        atomic_thread_fence(memory_order_acquire);
        memcpy(&rp, &r->rep[s], sizeof(rp));
        if (rp.hash != omlb_report_hash(&rp))
            continue;
        if (rp.status != 0) {
            fprintf(stderr, "omlb: PE %d on %s failed\n", r->pe[s],
                    r->cfg->names[r->pe_dev[s]]);
            return -1;
        }
        r->got[s] = rp;
        if (rp.cores > 0)
            r->dev_cores[r->pe_dev[s]] = rp.cores;
    }
    return 0;
}

/* Every PE alive? Checked every OMLB_LIVE_S: a PE that died leaves its
   neighbours waiting, so the run fails instead. */
static int omlb_root_alive(omlb_root_t *r)
{
    double t = app_now_s();
    int alive, want = 0;

    if (t - r->last_live < OMLB_LIVE_S)
        return 0;
    r->last_live = t;
    OMLB_CHECK(ivmGetNumPEs(&alive));
    for (int s = 0; s < r->npes; s++)
        want += !r->retired[s];
    /* At the end, a PE that stored its share is free to go. */
    for (int k = 0; r->plan->done && k < r->plan->nparts; k++) {
        const omlb_report_t *g = &r->got[r->plan->parts[k].rep];
        want -= g->epoch == r->plan->epoch && g->stored == r->plan->until;
    }
    if (alive - 1 < want) {
        fprintf(stderr, "omlb: %d of %d PEs alive (a PE died)\n", alive - 1, want);
        return -1;
    }
    return 0;
fail:
    return -1;
}

/* Read every CPU device's share of its cores (ivm-ctl set-share may change
   it while the job runs), every OMLB_SHARES_S or with `now`. */
static void omlb_root_shares(omlb_root_t *r, int now)
{
    double t = app_now_s();

    if (!now && t - r->shares_at < OMLB_SHARES_S)
        return;
    r->shares_at = t;
    for (int d = 0; d < r->cfg->ndevs; d++)
        r->share[d] = app_dev_share(r->cfg->nodes[d], r->cfg->devtypes[d], &r->share_cores[d]);
}

/* The first split: each device's declared capacity (cores x share) when
   every device is a CPU device that declares one, so that a run on devices
   of known different speeds does not start at the slowest one's pace
   (IVM_OMLB_START=equal, r->start_equal: the equal split; =shares, the
   default: this); else equal. The windows then measure what each device
   really gives and move from there. */
static void omlb_root_first_split(omlb_root_t *r)
{
    double cost[OMLB_MAX_DEVS];

    if (r->start_equal)
        return;
    for (int d = 0; d < r->cfg->ndevs; d++) {
        if (r->share[d] <= 0 || r->share_cores[d] <= 0)
            return;
        cost[d] = 100.0 / ((double)r->share[d] * r->share_cores[d]);
    }
    omlb_rule_split(r->cfg->ndevs, r->cfg->units, r->dev_pes, cost, r->dev_units);
    r->prior = 1;
}

/* The least and the greatest next iteration of the plan's PEs (epoch
   figures only), and whether all have stored at `until`. */
static void omlb_root_progress(const omlb_root_t *r, int *min_p, int *max_p, int *stored_p)
{
    const omlb_plan_t *pl = r->plan;
    int lo = pl->until, hi = pl->start, stored = 1;

    for (int k = 0; k < pl->nparts; k++) {
        const omlb_report_t *g = &r->got[pl->parts[k].rep];
        int it = g->epoch == pl->epoch ? g->iter : pl->start;
        lo = it < lo ? it : lo;
        hi = it > hi ? it : hi;
        stored &= g->epoch == pl->epoch && g->stored == pl->until;
    }
    *min_p = lo;
    *max_p = hi;
    *stored_p = stored;
}

/* Wait until every PE of the plan stored its share at `until`. */
static int omlb_root_wait_stored(omlb_root_t *r)
{
    double start = app_now_s();

    for (;;) {
        int lo, hi, stored;
        if (omlb_root_read(r) != 0)
            return -1;
        omlb_root_progress(r, &lo, &hi, &stored);
        if (stored)
            return 0;
        double t = app_now_s();
        if (t - start > OMLB_WAIT_S) {
            fprintf(stderr, "omlb: the PEs did not store their shares at iteration %d within "
                    "%.0f s\n", r->plan->until, OMLB_WAIT_S);
            return -1;
        }
        if (omlb_root_alive(r) != 0)
            return -1;
        omlb_nap(t - start);
    }
}

/* Print a window's record line. */
static void omlb_root_record(omlb_root_t *r, int first, int last, double tmax, double tstd)
{
    FILE *f = r->cfg->record;

    if (f == NULL)
        return;
    fprintf(f, "OMLB iter=%d last=%d pes=", first, last);
    for (int d = 0; d < r->cfg->ndevs; d++)
        fprintf(f, "%s%d", d ? "," : "", r->dev_pes[d]);
    fprintf(f, " units=");
    for (int d = 0; d < r->cfg->ndevs; d++)
        fprintf(f, "%s%d", d ? "," : "", r->dev_units[d]);
    fprintf(f, " tmax=%.6f tstd=%.6f\n", tmax, tstd);
    fflush(f);
    r->rec_next = last + 1;
}

/* A PE's seconds per iteration of its share over a window (b: the reports
   at its start, NULL: the epoch's; runs: the measured iterations in it).
   Its compute's CPU time over the part of a core it got while it wanted
   one (the iterations' wall time but the naps it chose in halo waits), so
   that a device with a CPU quota, or sharing its core with another job,
   shows the speed it can sustain: the compute's wall time hides it when a
   short step fits in the quota a wait left. A GPU PE of the CUDA kernel:
   the compute's wall time. `most` is the part of a core the device's
   share allows (1: a whole core): a PE never sustains more, and what it
   seemed to get above it over a few iterations of a short quota period
   (up to 0.24 of a core on a 20 % device) made its device look faster than
   it is. */
static double omlb_pe_cost(const omlb_report_t *g, const omlb_report_t *b, int runs,
                           double most)
{
    double compute = g->compute - (b ? b->compute : 0.0);
    double cpu = g->cpu - (b ? b->cpu : 0.0);
    double busy = g->busy - (b ? b->busy : 0.0);
    double busy_cpu = g->busy_cpu - (b ? b->busy_cpu : 0.0);

    if (g->gpu || !(cpu > 0.0) || !(busy > 0.0) || !(busy_cpu > 0.0))
        return compute / runs;
    double got = busy_cpu / busy; /* the part of a core it got */
    return cpu / fmin(got, most) / runs;
}

/* The window since r->base, if it is complete (every PE ran OMLB_WINDOW
   iterations of this epoch in it, and OMLB_WINDOW_S seconds passed; with
   force, one iteration will do): each
   device's cost per unit into cost[] (seconds per iteration and unit of its
   slowest PE, over its PEs), the record line printed. 1 if complete, 0 if
   not yet. */
static int omlb_root_window(omlb_root_t *r, double *cost, int force)
{
    const omlb_plan_t *pl = r->plan;
    double dev_t[OMLB_MAX_DEVS] = { 0 }, tmax = 0.0, tsum = 0.0, tsq = 0.0;
    int first = pl->until, last = pl->start;

    if (app_now_s() - r->win_start < OMLB_WINDOW_S && !force)
        return 0;
    for (int k = 0; k < pl->nparts; k++) {
        const omlb_slot_t *p = &pl->parts[k];
        const omlb_report_t *g = &r->got[p->rep], *b = &r->base[p->rep];
        int runs = g->measured - (b->epoch == pl->epoch ? b->measured : 0);
        if (g->epoch != pl->epoch || runs < (force ? 1 : OMLB_WINDOW))
            return 0;
    }
    for (int k = 0; k < pl->nparts; k++) {
        const omlb_slot_t *p = &pl->parts[k];
        const omlb_report_t *g = &r->got[p->rep], *b = &r->base[p->rep];
        int same = b->epoch == pl->epoch;
        int runs = g->runs - (same ? b->runs : 0);
        int measured = g->measured - (same ? b->measured : 0);
        double t = (g->compute - (same ? b->compute : 0.0)) / measured;
        /* The device's PEs do its units side by side: its time for u
           units is u / PEs x the slowest PE's time per unit. */
        double most = r->share[p->dev] > 0 ? fmin(r->share[p->dev] / 100.0, 1.0) : 1.0;
        dev_t[p->dev] = fmax(dev_t[p->dev], omlb_pe_cost(g, same ? b : NULL, measured, most) /
                                                (p->hi - p->lo) / (double)p->dev_pes);
        tmax = fmax(tmax, t);
        tsum += t;
        tsq += t * t;
        first = (same ? b->iter : pl->start) < first ? (same ? b->iter : pl->start) : first;
        last = g->iter - 1 > last ? g->iter - 1 : last;
        r->dev_done[p->dev] += (double)runs * (p->hi - p->lo);
        r->base[p->rep] = *g;
    }
    for (int d = 0; d < r->cfg->ndevs; d++)
        cost[d] = fmax(dev_t[d], 1e-12);
    double mean = tsum / pl->nparts;
    omlb_root_record(r, first, last, tmax, sqrt(fmax(0.0, tsq / pl->nparts - mean * mean)));
    r->t_iter = r->t_iter > 0.0 ? 0.5 * r->t_iter + 0.5 * tmax : tmax;
    r->win_tmax = tmax;
    r->win_start = app_now_s();
    return 1;
}

/* The units done since the last window (for the share), at the end. */
static void omlb_root_tally(omlb_root_t *r)
{
    const omlb_plan_t *pl = r->plan;

    for (int k = 0; k < pl->nparts; k++) {
        const omlb_slot_t *p = &pl->parts[k];
        const omlb_report_t *g = &r->got[p->rep], *b = &r->base[p->rep];
        if (g->epoch != pl->epoch)
            continue;
        int runs = g->runs - (b->epoch == pl->epoch ? b->runs : 0);
        r->dev_done[p->dev] += (double)runs * (p->hi - p->lo);
        r->base[p->rep] = *g;
    }
}

/* A device that may gain from one more PE (omlb.h): a GPU, or a CPU device
   of two cores or more, below the cap. */
static int omlb_root_trial_wanted(const omlb_root_t *r, int d)
{
    const omlb_config_t *cfg = r->cfg;

    return r->trial[d] == 0 && r->dev_pes[d] < cfg->cap && r->est[d] > 0.0 &&
           (IVM_DEV_IS_GPU(cfg->devtypes[d]) || r->dev_cores[d] >= 2);
}

/* The two windows after a move judge it: their slowest PE's mean time per
   iteration against the smoothed time before the move. A move that kept
   less than half of what it promised (devices that only look different:
   noise, a core shared with the daemons) doubles the gain the next move
   must promise, up to OMLB_TOL_MAX; one that kept it brings it down by a
   quarter towards the configured tolerance. So equal devices stop trading
   units back and forth, and really different ones are still followed. */
static void omlb_root_judge(omlb_root_t *r)
{
    if (r->judge == 0 || !(r->judge_before > 0.0))
        return;
    r->judge_sum += r->win_tmax;
    if (++r->judge < 3)
        return;
    double kept = (r->judge_before - 0.5 * r->judge_sum) / r->judge_before;
    if (kept < 0.5 * r->judge_gain)
        r->tol = fmin(2.0 * r->tol, OMLB_TOL_MAX);
    else
        r->tol = fmax(0.75 * r->tol, r->cfg->balance_tol);
    r->judge = 0;
}

/* Take a window's cost of device d into its estimate: the median of the
   last three windows (one window's cost doubled by a daemon's burst, a page
   fault storm or the root's own work moves nothing), the mean of two, or the
   one. `reset`: the device changed (a trial PE came or went), c alone. */
static void omlb_root_est(omlb_root_t *r, int d, double c, int reset)
{
    double *h = r->hist[d];

    if (reset)
        r->nhist[d] = 0;
    h[2] = h[1];
    h[1] = h[0];
    h[0] = c;
    r->nhist[d] = r->nhist[d] < 3 ? r->nhist[d] + 1 : 3;
    if (r->nhist[d] == 1)
        r->est[d] = h[0];
    else if (r->nhist[d] == 2)
        r->est[d] = 0.5 * (h[0] + h[1]);
    else
        r->est[d] = fmax(fmin(h[0], h[1]), fmin(fmax(h[0], h[1]), h[2]));
}

/* After a window: take the costs in, settle trials, start one, and tell
   whether the shares move (*move_p) to the split in r->dev_units. */
static int omlb_root_adjust(omlb_root_t *r, const double *cost, int remaining, int *move_p)
{
    const omlb_config_t *cfg = r->cfg;
    int alloc[OMLB_MAX_DEVS], changed = 0;

    for (int d = 0; d < cfg->ndevs; d++)
        omlb_root_est(r, d, cost[d], 0);
    for (int d = 0; d < cfg->ndevs; d++) {
        if (r->trial[d] != 1)
            continue;
        /* The device's time per unit with the trial PE against before. */
        int keep = cost[d] < r->trial_base[d] * (1.0 - OMLB_TRIAL_GAIN);
        r->trial[d] = keep ? 2 : 3;
        if (!keep) {
            r->retired[r->trial_slot[d]] = 1;
            r->dev_pes[d]--;
            omlb_root_est(r, d, r->trial_base[d], 1);
            changed = 1;
        } else {
            omlb_root_est(r, d, cost[d], 1);
        }
    }
    omlb_root_judge(r);
    int worth = omlb_rule_worth(cfg->ndevs, cfg->units, r->dev_pes, r->dev_units, r->est,
                                r->tol, remaining, r->move_s);
    /* The first move from an equal split as soon as it pays (the split may
       be far off); the others only when two windows in a row agree, so that
       one noisy window moves nothing; the first from the devices' shares
       also only once every device has three windows (the first ones, beside
       the PEs' start on every node, made a device of a whole core look 15-20 %
       slower than the rest of the run showed). */
    r->streak = worth ? r->streak + 1 : 0;
    int known = 1;
    for (int d = 0; d < cfg->ndevs; d++)
        known &= r->nhist[d] >= 3;
    worth = worth && ((r->rebalances == 0 && !r->prior) ||
                      (r->streak >= OMLB_STREAK && (known || r->rebalances > 0)));
    if (!changed && !worth && remaining > 4 * OMLB_WINDOW) {
        for (int d = 0; d < cfg->ndevs && !changed; d++) {
            if (!omlb_root_trial_wanted(r, d))
                continue;
            r->trial[d] = 1;
            r->trial_base[d] = r->est[d];
            r->trial_slot[d] = r->npes;
            if (omlb_root_spawn(r, d) != 0)
                return -1;
            changed = 1;
        }
    }
    *move_p = changed || worth;
    if (!*move_p)
        return 0;
    omlb_rule_split(cfg->ndevs, cfg->units, r->dev_pes, r->est, alloc);
    if (worth && !changed) {
        double now = omlb_split_time(cfg->ndevs, r->dev_units, r->est);
        r->judge        = 1;
        r->judge_sum    = 0.0;
        r->judge_before = r->t_iter;
        r->judge_gain   = now > 0.0 ? (now - omlb_split_time(cfg->ndevs, alloc, r->est)) / now
                                    : 0.0;
    }
    memcpy(r->dev_units, alloc, sizeof(int) * (size_t)cfg->ndevs);
    return 0;
}

/* Stop the PEs at `until`, let them store, and start the next epoch there
   with the new shares (and PEs). */
static int omlb_root_move(omlb_root_t *r)
{
    omlb_plan_t *pl = r->plan;
    double t0 = app_now_s();

    pl->stop = 1;
    if (omlb_root_publish(r) != 0 || omlb_root_wait_stored(r) != 0)
        return -1;
    omlb_root_tally(r);
    pl->epoch++;
    pl->start = pl->until;
    pl->stop = 0;
    omlb_root_parts(r);
    for (int s = 0; s < r->npes; s++)
        memset(&r->base[s], 0, sizeof(r->base[s]));
    r->move_s = 2.0 * (app_now_s() - t0); /* the stores, and as much to load */
    r->win_start = app_now_s();
    r->rebalances++;
    r->streak = 0;
    return 0;
}

/* `until` for a new lead over the slowest PE at iteration `lo`. */
static int omlb_root_lead(const omlb_root_t *r, int lo)
{
    int lead = r->t_iter > 0.0 ? (int)ceil(OMLB_LEAD_S / r->t_iter) : OMLB_LEAD_MIN;
    int left = r->cfg->iterations - lo;

    /* An eighth of what is left at most, so that a move can still happen. */
    lead = lead < left / 8 ? lead : left / 8;
    int until = lo + (lead > OMLB_LEAD_MIN ? lead : OMLB_LEAD_MIN);

    return until < r->cfg->iterations ? until : r->cfg->iterations;
}

/* The iterations: watch, move `until` ahead, move the shares when it pays;
   at the end, the last stores. */
static int omlb_root_loop(omlb_root_t *r)
{
    const omlb_config_t *cfg = r->cfg;
    omlb_plan_t *pl = r->plan;
    double cost[OMLB_MAX_DEVS], t_wait = app_now_s();
    int seen_lo = -1, seen_hi = -1, seen_epoch = -1;

    for (;;) {
        int lo, hi, stored, move = 0;
        if (omlb_root_read(r) != 0 || omlb_root_alive(r) != 0)
            return -1;
        omlb_root_shares(r, 0);
        omlb_root_progress(r, &lo, &hi, &stored);
        if (r->started > 0.0 && lo > pl->start) {
            r->move_s = fmax(r->move_s, app_now_s() - r->started);
            r->started = 0.0;
        }
        if (pl->done && stored)
            return 0;
        if (lo != seen_lo || hi != seen_hi || pl->epoch != seen_epoch) {
            seen_lo = lo;
            seen_hi = hi;
            seen_epoch = pl->epoch;
            t_wait = app_now_s();
        } else if (app_now_s() - t_wait > OMLB_WAIT_S) {
            fprintf(stderr, "omlb: no progress past iteration %d in %.0f s\n", lo, OMLB_WAIT_S);
            return -1;
        }
        if (omlb_root_window(r, cost, 0) && !pl->done) {
            if (omlb_root_adjust(r, cost, cfg->iterations - pl->until, &move) != 0)
                return -1;
            if (move && omlb_root_move(r) != 0)
                return -1;
        }
        /* Keep `until` ahead of the PEs: they never wait for the root. */
        if (!pl->done && (move || hi + OMLB_LEAD_MIN / 2 >= pl->until)) {
            pl->until = omlb_root_lead(r, hi > pl->start ? hi : pl->start);
            pl->done = pl->until == cfg->iterations;
            pl->stop = pl->done;
            if (omlb_root_publish(r) != 0)
                return -1;
        }
        double nap = r->t_iter > 0.0 ? r->t_iter : 1e-3;
        app_sleep_s(nap < 1e-4 ? 1e-4 : nap > 0.01 ? 0.01 : nap);
    }
}

int omlb_root_run(const omlb_config_t *cfg, omlb_result_t *res)
{
    omlb_root_t *r = calloc(1, sizeof(*r));
    double t0, value = 0.0, all = 0.0, cost_end[OMLB_MAX_DEVS];
    int ret = -1;

    if (r == NULL) {
        fprintf(stderr, "omlb: no memory\n");
        return -1;
    }
    r->cfg = cfg;
    r->tol = cfg->balance_tol;
    if (cfg->ndevs < 1 || cfg->ndevs > OMLB_MAX_DEVS || cfg->iterations < 1 ||
        cfg->units < cfg->ndevs || cfg->cap < 1 || !(cfg->balance_tol >= 0.0)) {
        fprintf(stderr, "omlb: bad settings: %d devices (1..%d), %d iterations (>= 1), "
                "%d units (>= devices), cap %d (>= 1), tol %g (>= 0)\n", cfg->ndevs,
                OMLB_MAX_DEVS, cfg->iterations, cfg->units, cfg->cap, cfg->balance_tol);
        goto out;
    }
    const char *start = getenv("IVM_OMLB_START");
    if (start != NULL && strcmp(start, "equal") != 0 && strcmp(start, "shares") != 0) {
        fprintf(stderr, "omlb: IVM_OMLB_START='%s': 'shares' or 'equal'\n", start);
        goto out;
    }
    r->start_equal = start != NULL && strcmp(start, "equal") == 0;
    for (int d = 0; d < cfg->ndevs; d++) {
        r->slow[d] = app_slow_factor("IVM_OMLB_SLOW", d);
        if (r->slow[d] < 0)
            goto out;
        if (cfg->record != NULL)
            fprintf(cfg->record, "omlb: device %d %s%s\n", d, cfg->names[d],
                    r->slow[d] > 1.0 ? " (slowed by IVM_OMLB_SLOW)" : "");
        r->dev_units[d] = (int)((long long)cfg->units * (d + 1) / cfg->ndevs -
                                (long long)cfg->units * d / cfg->ndevs);
    }

    OMLB_CHECK(ivmMalloc(OMLB_PLAN_OBJ, &r->plan, sizeof(omlb_plan_t)));
    OMLB_CHECK(ivmMalloc(OMLB_REP_OBJ, &r->rep, sizeof(omlb_report_t) * OMLB_MAX_PES));
    for (int d = 0; d < cfg->ndevs; d++)
        if (omlb_root_spawn(r, d) != 0)
            goto fail;
    omlb_root_shares(r, 1);
    omlb_root_first_split(r);
    omlb_root_parts(r);
    r->plan->until = omlb_root_lead(r, 0);
    r->plan->done = r->plan->stop = r->plan->until == cfg->iterations;
    t0 = app_now_s();
    r->win_start = t0;
    if (omlb_root_publish(r) != 0)
        goto fail;
    /* Until a move is measured, a move costs what the start did: from the
       first plan to every PE's first iteration (its start, its load and
       an iteration), so that devices that only look different at the start
       are not worth a move. */
    r->move_s = 0.0;
    r->started = t0;
    if (omlb_root_loop(r) != 0)
        goto fail;
    res->seconds = app_now_s() - t0;
    /* The last iterations' record. When a move came so late that a PE
       measured none of them (the first iteration after a load is not
       measured), the line still covers them, with the final shares and no
       times. */
    if (!omlb_root_window(r, cost_end, 1) && r->rec_next < cfg->iterations)
        omlb_root_record(r, r->rec_next, cfg->iterations - 1, 0.0, 0.0);
    omlb_root_tally(r);
    for (int k = 0; k < r->plan->nparts; k++)
        value += r->got[r->plan->parts[k].rep].value;
    for (int s = 0; s < r->npes; s++) {
        ivmError_t rc = ivmWait(r->pe[s]);
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "omlb: PE %d ended badly: %s\n", r->pe[s], ivmGetErrorString(rc));
            goto fail;
        }
    }
    res->value = value;
    res->pes_spawned = r->npes;
    res->rebalances = r->rebalances;
    for (int d = 0; d < cfg->ndevs; d++)
        all += r->dev_done[d];
    for (int d = 0; d < cfg->ndevs; d++) {
        res->dev_pes[d] = r->dev_pes[d];
        res->dev_share[d] = all > 0 ? r->dev_done[d] / all : 0.0;
    }
    ret = 0;
fail:
    if (r->rep != NULL)
        ivmFree(r->rep);
    if (r->plan != NULL)
        ivmFree(r->plan);
out:
    free(r);
    return ret;
}

/* ------------------------------------------------------------------ child */

struct omlb_child;

/* A child's sender thread: it puts the slots of one iteration's edges
   while the child computes the rest of the iteration. */
typedef struct omlb_sender {
    pthread_t          thread;
    pthread_mutex_t    lock;
    pthread_cond_t     cond;
    int                started;
    int                todo;    /* sides to put (bit 0: below, bit 1: above); 0: idle */
    int                iter;    /* the iteration of their edges */
    int                failed;  /* a put failed (printed) */
    int                quit;
    struct omlb_child *c;
} omlb_sender_t;

/* A child's state. */
typedef struct omlb_child omlb_child_t;
static int omlb_halos_settle(omlb_child_t *c);

struct omlb_child {
    const omlb_ops_t *ops;
    void             *ctx;
    size_t            halo_bytes;
    app_kernel_t      kernel;
    int               id;
    int               cores;
    omlb_plan_t      *plan_host;  /* the node copy of the plan */
    omlb_report_t    *rep;        /* reference of "omlb.rep" */
    omlb_report_t     mine;       /* this PE's figures */
    int               slot;       /* its report slot */
    double            pushed_at;  /* when the report went out last */
    char             *inbox;      /* reference of its own in-box */
    char             *inbox_host; /* its host view (the master) */
    char             *staging[2]; /* the slot for each side, built here, then put */
    double            napped;     /* seconds of naps chosen in halo waits */
    omlb_sender_t     sender;
    int               nb_pe[2];   /* PE below (0) and above (1), -1: none */
    char             *nb_ref[2];  /* their in-boxes */
    omlb_plan_t       pl;         /* the plan being followed */
    omlb_part_t       part;
};

/* Bytes of one in-box slot: the header and the edge, padded to 8 bytes. */
static size_t omlb_slot_bytes(size_t halo_bytes)
{
    return sizeof(omlb_edge_hdr_t) + (halo_bytes + 7) / 8 * 8;
}

/* The slot of iteration iter's edge from `side` in an in-box. */
static char *omlb_slot(const omlb_child_t *c, char *inbox, int iter, int side)
{
    return inbox + ((size_t)(iter & 1) * 2 + (size_t)side) * omlb_slot_bytes(c->halo_bytes);
}

/* One multiply-xorshift step of a hash lane. */
static uint64_t omlb_mix(uint64_t h, uint64_t w, uint64_t k, int r)
{
    h = (h ^ w) * k;
    return h ^ (h >> r);
}

/* A 64-bit hash of the stamp and the edge of a slot, in four independent
   lanes of 8 bytes (a slot whose bytes are half old, half new does not match
   but by a 2^-64 chance; four lanes run side by side in the CPU: 4 us for a
   66 KB plane here, against 14 us for one lane). */
static uint64_t omlb_edge_hash(const char *slot, size_t halo_bytes)
{
    const char *p = slot + sizeof(omlb_edge_hdr_t);
    size_t n = (halo_bytes + 7) / 8, i = 0;
    uint64_t a, b = 0x9e3779b97f4a7c15ull, c = 0xbf58476d1ce4e5b9ull, d = 0x94d049bb133111ebull;
    uint64_t w[4];

    memcpy(&w[0], slot + offsetof(omlb_edge_hdr_t, stamp), 8);
    a = omlb_mix(0x2545f4914f6cdd1dull, w[0], 0xff51afd7ed558ccdull, 33);
    for (; i + 4 <= n; i += 4) {
        memcpy(w, p + 8 * i, sizeof(w));
        a = omlb_mix(a, w[0], 0xc4ceb9fe1a85ec53ull, 31);
        b = omlb_mix(b, w[1], 0xff51afd7ed558ccdull, 29);
        c = omlb_mix(c, w[2], 0x9e3779b97f4a7c15ull, 32);
        d = omlb_mix(d, w[3], 0xd6e8feb86659fd93ull, 27);
    }
    for (; i < n; i++) {
        memcpy(&w[0], p + 8 * i, 8);
        a = omlb_mix(a, w[0], 0xc4ceb9fe1a85ec53ull, 31);
    }
    return omlb_mix(a ^ (b * 3) ^ (c * 5) ^ (d * 7), 0, 0xbf58476d1ce4e5b9ull, 32);
}

/* Write the report into the PE's own copy of its slot (a GPU PE's is its
   device copy: a push first copies the device copy to the node copy) and
   push it when `push` or when it went out long enough ago. */
static int omlb_child_report(omlb_child_t *c, int push)
{
    double t = app_now_s();

    c->mine.hash = omlb_report_hash(&c->mine);
    if (!push && t - c->pushed_at < OMLB_PUSH_S && c->kernel == APP_KERNEL_CPU) {
        /* A CPU PE's copy: on the root's node the master itself, which
           the root reads; elsewhere the next push carries it. */
        memcpy(&c->rep[c->slot], &c->mine, sizeof(c->mine));
        return 0;
    }
    atomic_thread_fence(memory_order_release);
    c->pushed_at = t;
    return app_ref_put(c->kernel, &c->rep[c->slot], &c->mine, sizeof(c->mine));
}

/* Wait for a valid plan newer than seq (any newer plan: until moved, stop,
   a new epoch); a copy into c->pl. */
static int omlb_child_plan(omlb_child_t *c, uint64_t seq)
{
    double start = app_now_s();
    omlb_plan_t pl;

    for (;;) {
        atomic_thread_fence(memory_order_acquire);
        memcpy(&pl, c->plan_host, sizeof(pl));
        if (pl.seq > seq && pl.hash == omlb_plan_hash(&pl)) {
            c->pl = pl;
            return 0;
        }
        double waited = app_now_s() - start;
        if (waited > OMLB_WAIT_S) {
            fprintf(stderr, "omlb: PE %d: no plan from the root PE for %.0f s\n", c->id,
                    OMLB_WAIT_S);
            return -1;
        }
        omlb_nap(waited);
    }
}

/* Map the in-box of PE pe on `side` (unmapping the last one's), waiting
   for it to exist. */
static int omlb_child_map_neighbour(omlb_child_t *c, int side, int pe)
{
    char name[32];

    if (c->nb_pe[side] == pe)
        return 0;
    if (c->nb_ref[side] != NULL)
        APP_TRY(ivmUnmap(c->nb_ref[side]));
    c->nb_ref[side] = NULL;
    c->nb_pe[side] = pe;
    if (pe < 0)
        return 0;
    snprintf(name, sizeof(name), OMLB_INBOX_FMT, pe);
    /* A PE started with this plan may not have made its in-box yet. */
    double start = app_now_s();
    for (;;) {
        ivmError_t rc = ivmMap(name, &c->nb_ref[side], 0);
        if (rc == IVM_SUCCESS)
            return 0;
        double waited = app_now_s() - start;
        if (rc != IVM_ERROR_NOT_FOUND || waited > OMLB_WAIT_S) {
            app_ivm_error(rc, "ivmMap(in-box of a neighbour)", __FILE__, __LINE__);
            return -1;
        }
        omlb_nap(waited);
    }
}

/* A new epoch: the PE's share and neighbours; 1 if it has one, 0 if it is
   not in the plan. */
static int omlb_child_join(omlb_child_t *c)
{
    const omlb_plan_t *pl = &c->pl;
    int k;

    for (k = 0; k < pl->nparts && pl->parts[k].pe != c->id; k++)
        ;
    if (k == pl->nparts)
        return 0;
    const omlb_slot_t *me = &pl->parts[k];
    if (me->rep < 0 || me->rep >= OMLB_MAX_PES || me->hi <= me->lo) {
        fprintf(stderr, "omlb: PE %d: bad share in plan %llu\n", c->id,
                (unsigned long long)pl->seq);
        return -1;
    }
    if (omlb_halos_settle(c) != 0)
        return -1;
    c->slot = me->rep;
    c->part = (omlb_part_t){ .lo = me->lo, .hi = me->hi, .pos = k, .npos = pl->nparts,
                             .dev = me->dev, .dev_pes = me->dev_pes, .iter = pl->start,
                             .threads = me->dev_pes > 0 && c->cores / me->dev_pes > 0
                                            ? c->cores / me->dev_pes : 1 };
    if (omlb_child_map_neighbour(c, 0, k > 0 ? pl->parts[k - 1].pe : -1) != 0 ||
        omlb_child_map_neighbour(c, 1, k + 1 < pl->nparts ? pl->parts[k + 1].pe : -1) != 0)
        return -1;
    c->mine = (omlb_report_t){ .epoch = pl->epoch, .iter = pl->start, .stored = -1,
                               .cores = c->cores, .gpu = c->kernel == APP_KERNEL_CUDA };
    if (c->ops->load(c->ctx, &c->part) != 0)
        return -1;
    c->part.fresh = 1;
    return 1;
}

/* Wait until both in-box slots of iteration iter - 1 are whole (stamp and
   hash); with `take`, hand them to the app. */
static int omlb_child_halos(omlb_child_t *c, int iter, int take)
{
    const void *in[2] = { NULL, NULL };
    double start = app_now_s();

    for (int side = 0; side < 2; side++) {
        if (c->nb_pe[side] < 0)
            continue;
        char *slot = omlb_slot(c, c->inbox_host, iter - 1, side);
        omlb_edge_hdr_t *hdr = (omlb_edge_hdr_t *)slot;
        while (atomic_load_explicit(&hdr->stamp, memory_order_acquire) != iter ||
               omlb_edge_hash(slot, c->halo_bytes) !=
                   atomic_load_explicit((_Atomic uint64_t *)&hdr->hash, memory_order_acquire)) {
            double waited = app_now_s() - start;
            if (waited > OMLB_WAIT_S) {
                fprintf(stderr, "omlb: PE %d: no halo of iteration %d from PE %d for %.0f s\n",
                        c->id, iter - 1, c->nb_pe[side], OMLB_WAIT_S);
                return -1;
            }
            /* Spin first, as an MPI rank polls: a PE that sleeps through
               its waits saves its device's CPU quota for its next step,
               which then runs unthrottled (a short step fits in the quota
               a wait left) and looks faster than the device can go. The
               yield lets the daemons that carry the halo run. */
            if (waited < OMLB_SPIN_S)
                sched_yield();
            else
                c->napped += omlb_nap(waited);
        }
        if (!take)
            continue;
        char *ref = omlb_slot(c, c->inbox, iter - 1, side);
        APP_TRY(ivmSyncGet(ref, omlb_slot_bytes(c->halo_bytes))); /* a GPU PE's copy; else free */
        in[side] = ref + sizeof(omlb_edge_hdr_t);
    }
    return take ? c->ops->halos(c->ctx, &c->part, in[0], in[1]) : 0;
}

/* Stamp and hash the slot built for `side`. */
static void omlb_child_seal(omlb_child_t *c, int side, int iter)
{
    omlb_edge_hdr_t *hdr = (omlb_edge_hdr_t *)c->staging[side];

    atomic_store_explicit(&hdr->stamp, iter + 1, memory_order_relaxed);
    hdr->hash = omlb_edge_hash(c->staging[side], c->halo_bytes);
}

/* Put the slots of `sides` (bits) for iteration iter into the neighbours'
   in-boxes (the first unit to the PE below, on its side 1; the last to the
   PE above, on its side 0), each in one piece. Posted (ivmSyncPutNbi): the
   PE's daemon carries them while the iteration goes on, and the next
   ivmQuiet (omlb_halos_settle) collects the answers, which by then wait in
   the socket and wake nobody. */
static int omlb_child_put(omlb_child_t *c, int sides, int iter, int posted)
{
    for (int side = 0; side < 2; side++) {
        if (!(sides & (1 << side)))
            continue;
        void *ref = omlb_slot(c, c->nb_ref[side], iter, 1 - side);
        size_t len = omlb_slot_bytes(c->halo_bytes);
        if ((posted ? app_ref_put_nbi(c->kernel, ref, c->staging[side], len)
                    : app_ref_put(c->kernel, ref, c->staging[side], len)) != 0)
            return -1;
    }
    return 0;
}

/* The sides that have a neighbour, as bits. */
static int omlb_child_sides(const omlb_child_t *c)
{
    return (c->nb_ref[0] != NULL) | (c->nb_ref[1] != NULL) << 1;
}

/* Without the app's step_edges: the edges after the step, put at once. */
static int omlb_child_send(omlb_child_t *c, int iter)
{
    int sides = omlb_child_sides(c);

    for (int side = 0; side < 2; side++) {
        if (!(sides & (1 << side)))
            continue;
        char *edge = c->staging[side] + sizeof(omlb_edge_hdr_t);
        if (c->ops->edges(c->ctx, &c->part, side == 0 ? edge : NULL,
                          side == 1 ? edge : NULL) != 0)
            return -1;
        omlb_child_seal(c, side, iter);
    }
    return omlb_child_put(c, sides, iter, 0);
}

static void *omlb_sender_main(void *arg)
{
    omlb_sender_t *s = arg;

    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->todo == 0 && !s->quit)
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->todo == 0)
            break;
        int todo = s->todo, iter = s->iter;
        pthread_mutex_unlock(&s->lock);
        int rc = omlb_child_put(s->c, todo, iter, 0);
        pthread_mutex_lock(&s->lock);
        s->failed |= rc != 0;
        s->todo = 0;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int omlb_sender_start(omlb_child_t *c)
{
    omlb_sender_t *s = &c->sender;

    s->c = c;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    if (pthread_create(&s->thread, NULL, omlb_sender_main, s) != 0) {
        fprintf(stderr, "omlb: PE %d: cannot start the halo sender thread\n", c->id);
        return -1;
    }
    s->started = 1;
    return 0;
}

/* Wait until the halo puts in flight have landed, posted ones (ivmQuiet) or
   the sender thread's, so that the slots may be rebuilt and the in-boxes
   remapped. -1 if one of them failed. */
static int omlb_halos_settle(omlb_child_t *c)
{
    omlb_sender_t *s = &c->sender;
    int failed;

    if (!s->started) {
        APP_TRY(ivmQuiet());
        return 0;
    }
    pthread_mutex_lock(&s->lock);
    while (s->todo != 0)
        pthread_cond_wait(&s->cond, &s->lock);
    failed = s->failed;
    pthread_mutex_unlock(&s->lock);
    return failed ? -1 : 0;
}

/* Send the halo slots of `sides` without waiting for them: posted by a CPU
   PE, handed to the sender thread by a GPU PE (its puts copy from the
   device). omlb_halos_settle waits for them. */
static int omlb_halos_send(omlb_child_t *c, int sides, int iter)
{
    omlb_sender_t *s = &c->sender;

    if (!s->started)
        return omlb_child_put(c, sides, iter, 1);
    pthread_mutex_lock(&s->lock);
    s->todo = sides;
    s->iter = iter;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static void omlb_sender_stop(omlb_child_t *c)
{
    omlb_sender_t *s = &c->sender;

    if (!s->started)
        return;
    pthread_mutex_lock(&s->lock);
    s->quit = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    s->started = 0;
}

/* The app's step in two parts: the edges first, sent without waiting
   (omlb_halos_send), then the rest while they travel. The slowdown knob
   applies to each part. */
static int omlb_child_step_split(omlb_child_t *c, int iter, double slow, double *value_p,
                                 double *compute_p)
{
    int sides = omlb_child_sides(c);
    char *edge[2] = { NULL, NULL };

    if (omlb_halos_settle(c) != 0)
        return -1;
    for (int side = 0; side < 2; side++)
        if (sides & (1 << side))
            edge[side] = c->staging[side] + sizeof(omlb_edge_hdr_t);
    double t0 = app_now_s();
    if (c->ops->step_edges(c->ctx, &c->part, edge[0], edge[1]) != 0)
        return -1;
    double t_edges = app_now_s() - t0;
    app_slow_apply(slow, t_edges);
    if (sides != 0) {
        for (int side = 0; side < 2; side++)
            if (sides & (1 << side))
                omlb_child_seal(c, side, iter);
        if (omlb_halos_send(c, sides, iter) != 0)
            return -1;
    }
    if (c->ops->step(c->ctx, &c->part, value_p, compute_p) != 0)
        return -1;
    app_slow_apply(slow, *compute_p);
    *compute_p += t_edges;
    return 0;
}

/* CPU seconds of the calling thread. */
static double omlb_thread_cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One iteration of the share. */
static int omlb_child_iterate(omlb_child_t *c, double slow)
{
    int iter = c->part.iter, fresh = c->part.fresh;
    double value = 0.0, compute = 0.0, w0 = app_now_s(), c0 = omlb_thread_cpu(), c1;
    double napped = c->napped;

    if (!c->part.fresh && omlb_child_halos(c, iter, 1) != 0)
        return -1;
    c1 = omlb_thread_cpu();
    if (c->ops->step_edges != NULL) {
        if (omlb_child_step_split(c, iter, slow, &value, &compute) != 0)
            return -1;
    } else {
        if (c->ops->step(c->ctx, &c->part, &value, &compute) != 0)
            return -1;
        app_slow_apply(slow, compute);
        if (omlb_child_send(c, iter) != 0)
            return -1;
    }
    double c2 = omlb_thread_cpu();
    c->part.fresh = 0;
    c->part.iter = iter + 1;
    c->mine.iter = iter + 1;
    c->mine.runs++;
    if (!fresh) { /* the first after a load: cold caches, new buffers */
        c->mine.measured++;
        c->mine.compute += (slow > 1.0 ? slow : 1.0) * compute;
        c->mine.cpu += c2 - c1; /* the knob sleeps: no CPU */
        c->mine.busy += app_now_s() - w0 - (c->napped - napped);
        c->mine.busy_cpu += c2 - c0;
    }
    c->mine.value = value;
    /* The last iteration before `until` pushes: the root waits for it. */
    return omlb_child_report(c, c->part.iter == c->pl.until);
}

/* Follow the plans until the last store. */
static int omlb_child_loop(omlb_child_t *c)
{
    int joined = -1, epoch = -1;

    if (omlb_child_plan(c, 0) != 0)
        return -1;
    for (;;) {
        const omlb_plan_t *pl = &c->pl;
        if (pl->epoch != epoch) {
            joined = omlb_child_join(c);
            if (joined < 0)
                return -1;
            epoch = pl->epoch;
            if (!joined) {
                if (c->mine.epoch >= 0 && c->mine.runs > 0)
                    return 0; /* retired: it stored before */
            } else if (omlb_child_report(c, 1) != 0) {
                return -1;
            }
        }
        if (joined == 1 && c->part.iter < pl->until) {
            double slow = 1.0;
            for (int k = 0; k < pl->nparts; k++)
                if (pl->parts[k].pe == c->id)
                    slow = pl->parts[k].slow;
            if (omlb_child_iterate(c, slow) != 0)
                return -1;
            /* A newer plan (until moved, stop) is picked up between two
               iterations without waiting. */
            atomic_thread_fence(memory_order_acquire);
            if (c->plan_host->seq > pl->seq) {
                omlb_plan_t fresh;
                memcpy(&fresh, c->plan_host, sizeof(fresh));
                if (fresh.hash == omlb_plan_hash(&fresh))
                    c->pl = fresh;
            }
            continue;
        }
        if (joined == 1 && pl->stop && c->mine.stored != pl->until) {
            /* The neighbours' edges of the last iteration tell that they
               ran it, so they loaded this epoch's shares: only then may
               the store overwrite units they loaded as halos. */
            if (omlb_halos_settle(c) != 0 || omlb_child_halos(c, pl->until, 0) != 0 ||
                c->ops->store(c->ctx, &c->part) != 0)
                return -1;
            c->mine.stored = pl->until;
            if (omlb_child_report(c, 1) != 0)
                return -1;
            if (pl->done)
                return 0;
        }
        if (omlb_child_plan(c, pl->seq) != 0)
            return -1;
    }
}

int omlb_child_run(const omlb_ops_t *ops, void *ctx, size_t halo_bytes)
{
    omlb_child_t c = { .ops = ops, .ctx = ctx, .halo_bytes = halo_bytes, .cores = 1,
                       .nb_pe = { -1, -1 }, .mine = { .epoch = -1, .stored = -1 } };
    omlb_plan_t *plan = NULL;
    const char *env = getenv("IVM_DEVICE_CORES");
    char name[32];
    int devtype, ret = -1;

    if (env != NULL && atoi(env) > 0)
        c.cores = atoi(env);
    OMLB_CHECK(ivmGetMyId(&c.id));
    OMLB_CHECK(ivmGetMyDevType(&devtype));
    OMLB_CHECK(ivmMap(OMLB_PLAN_OBJ, &plan, 0));
    OMLB_CHECK(ivmMap(OMLB_REP_OBJ, &c.rep, 0));
    snprintf(name, sizeof(name), OMLB_INBOX_FMT, c.id);
    c.staging[0] = calloc(1, omlb_slot_bytes(halo_bytes));
    c.staging[1] = calloc(1, omlb_slot_bytes(halo_bytes));
    if (c.staging[0] == NULL || c.staging[1] == NULL) {
        fprintf(stderr, "omlb: no memory for a halo of %zu bytes\n", halo_bytes);
        goto fail;
    }
    OMLB_CHECK(ivmMalloc(name, &c.inbox, 4 * omlb_slot_bytes(halo_bytes)));
    /* The root's plans and the in-box's slots are read on the host view (a
       GPU PE's reference is its device copy). */
    if (app_kernel_pick_ref(devtype, plan, &c.kernel) != 0 ||
        (c.plan_host = app_host_view(plan)) == NULL ||
        (c.inbox_host = app_host_view(c.inbox)) == NULL)
        goto fail;
    /* A GPU PE's halo puts copy from its device first (app_ref_put): a
       thread sends them while the iteration goes on; a CPU PE posts them. */
    if (ops->step_edges != NULL && c.kernel == APP_KERNEL_CUDA &&
        omlb_sender_start(&c) != 0)
        goto fail;
    ret = omlb_child_loop(&c);
fail:
    if (omlb_halos_settle(&c) != 0)
        ret = -1;
    omlb_sender_stop(&c);
    for (int side = 0; side < 2; side++)
        if (c.nb_ref[side] != NULL)
            ivmUnmap(c.nb_ref[side]);
    if (c.inbox != NULL)
        ivmFree(c.inbox);
    free(c.staging[0]);
    free(c.staging[1]);
    if (c.rep != NULL)
        ivmUnmap(c.rep);
    if (plan != NULL)
        ivmUnmap(plan);
    return ret;
}
