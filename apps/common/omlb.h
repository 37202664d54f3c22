/*
 * OM-LB: online monitoring load balancing (Listing 5-2b of the dissertation),
 * one driver for the apps that iterate over a fixed amount of work.
 *
 * The work is `units` units in a row (HIMENO: Z planes). The root PE starts
 * one PE per device; each PE owns a contiguous share [lo, hi) of the units,
 * in device order. Every iteration each PE runs the app's step on its share
 * and reports the step's computation time (and one number the root sums,
 * e.g. gosa).
 * After every window of iterations (at least 3 iterations and 3 ms of the
 * slowest PEs, not counting the first iteration after a change) the root
 *   - takes each device's time per unit, cost[d] = (slowest PE of d) /
 *     (units of d), at its least over the window (other processes' noise
 *     only adds time), averaged with the earlier windows (half weight on
 *     the newest);
 *   - spawns: when the devices differ (max cost / min cost >= threshold), it
 *     adds one PE on every device d with cost[d] / min cost < threshold (the
 *     fast ones, the dissertation's rule time[j]/min(time) < threshold), at
 *     most `cap` PEs per device, once the rule has chosen that device in two
 *     windows in a row;
 *   - rebalances: when PEs were added, or when the slowest device takes
 *     more than (1 + balance_tol) times the fastest and the iterations left
 *     would save more time than the move costs (measured: twice the last
 *     FLUSH round; before any, the first round with its loads), the units
 *     are dealt to the devices in proportion to their speed 1/cost[d] and
 *     evenly among the PEs of a device. A rebalance is a FLUSH round (every
 *     PE stores its share into the app's shared objects) followed by a RUN
 *     whose PEs load their new shares first.
 * The root prints one record line per iteration (for Figure 5-6):
 *   OMLB iter=<i> pes=<n0>,<n1>,.. units=<u0>,<u1>,.. tmax=<s> tstd=<s>
 * (PEs and units per device, the slowest PE's time and the standard
 * deviation of the PEs' times of that iteration).
 *
 * Control goes through two IVM objects: "omlb.plan" (the root's orders,
 * broadcast to every node with ivmSyncPutGroup, guarded by a hash so that a
 * half-copied plan is never acted on) and "omlb.rep" (one report slot per
 * PE, pushed with ivmSyncPut). The PEs keep running for the whole job
 * (spawned PEs stay); a DONE plan ends them after a last FLUSH.
 *
 * Test knob: IVM_OMLB_SLOW="D:F[,D:F...]" (read by the root) makes the PEs of
 * device D (index in the root's device table, printed at start) F times slower:
 * after each step they sleep (F-1) times the step's computation time and
 * report F times it (app.h's app_slow_factor and app_slow_apply). The MPI
 * baselines apply the same knob to rank D, so both versions see the same
 * slowed device.
 */
#ifndef IVM_APPS_OMLB_H
#define IVM_APPS_OMLB_H

#include <stdint.h>
#include <stdio.h>

#include <ivm.h>

#include "app.h"

#define OMLB_MAX_PES  64 /* PEs of one run at most */
#define OMLB_MAX_DEVS 32 /* devices at most */
#define OMLB_NAME_MAX APP_NAME_MAX /* device name "node<k>.cpu<j>" (app_dev_name) */

/* What a PE's callbacks see of its share. */
typedef struct omlb_part {
    int lo, hi;      /* units [lo, hi) */
    int pos, npos;   /* position of this share among the npos shares (unit order) */
    int dev;         /* device index in the root's table */
    int dev_pes;     /* PEs on that device now */
    int threads;     /* threads this PE should use: device cores / dev_pes, >= 1 */
    int iter;        /* iteration being run */
    int fresh;       /* load() has just run: the halos are current */
} omlb_part_t;

/* The app's side, run in the child PEs. Each returns 0, or -1 after printing why. */
typedef struct omlb_ops {
    /* Load the state of the share from the app's shared objects (first RUN
       of a PE, and every RUN after a FLUSH). */
    int (*load)(void *ctx, const omlb_part_t *part);
    /* One iteration on the share (halo exchange included); *value_p is
       summed by the root over the PEs; *compute_s_p is the seconds of the
       computation alone, which the root balances (a halo exchange costs a PE
       the same whatever its share, so moving units cannot even it out). */
    int (*step)(void *ctx, const omlb_part_t *part, double *value_p, double *compute_s_p);
    /* Write the share's state back to the app's shared objects. */
    int (*store)(void *ctx, const omlb_part_t *part);
} omlb_ops_t;

/* The root's settings. */
typedef struct omlb_config {
    int         units;       /* work units, >= number of devices */
    int         iterations;  /* >= 1 */
    double      threshold;   /* spawn rule threshold (default 2) */
    int         cap;         /* PEs per device at most (default 4) */
    double      balance_tol; /* rebalance when tmax/tmin > 1 + tol (default 0.20) */
    int         ndevs;
    ivm_device  devs[OMLB_MAX_DEVS];
    char        names[OMLB_MAX_DEVS][OMLB_NAME_MAX];
    int         devtypes[OMLB_MAX_DEVS];
    FILE       *record;      /* the OMLB lines (NULL: none) */
} omlb_config_t;

/* What the root learned. */
typedef struct omlb_result {
    double seconds;                     /* first RUN to the final FLUSH */
    double value;                       /* sum of the PEs' values, last iteration */
    int    pes_spawned;                 /* child PEs created over the run */
    int    dev_pes[OMLB_MAX_DEVS];      /* PEs per device at the end */
    double dev_share[OMLB_MAX_DEVS];    /* units done per device / all units done */
    int    rebalances;
} omlb_result_t;

/* Defaults for cfg (threshold 2, cap 4, tol 0.20, no devices, record stdout). */
void omlb_config_init(omlb_config_t *cfg);

/* Fill cfg's device table with every CPU and GPU device of the nodes node0,
   node1, ... (up to the first unknown one), or of this node only when there
   is no node0 or `local` is set. Returns the number of devices, -1 on error
   (printed). */
int omlb_devices_probe(omlb_config_t *cfg, int local);

/* Release the device handles of cfg. */
void omlb_devices_release(omlb_config_t *cfg);

/* Root: create the control objects, run the iterations with the PEs, end
   them. The app has created its shared objects before. 0 or -1 (printed). */
int omlb_root_run(const omlb_config_t *cfg, omlb_result_t *res);

/* Child: map the control objects and serve the root's plans until DONE.
   0 or -1 (printed). */
int omlb_child_run(const omlb_ops_t *ops, void *ctx);

/* The root's rules, apart for the unit tests (cost[d]: device d's seconds
   per unit, > 0). */

/* The spawn rule: when max cost / min cost >= threshold, add[d] = 1 for each
   device with cost[d] / min cost < threshold and fewer than cap PEs, at most
   `room` of them in device order; else add[] all 0. Returns how many. */
int omlb_rule_spawn(int ndevs, const double *cost, double threshold, const int *dev_pes,
                    int cap, int room, int *add);

/* The split: units to devices in proportion to 1/cost, every PE at least
   one unit (units >= the PEs), largest remainders first; alloc sums to units. */
void omlb_rule_split(int ndevs, int units, const int *dev_pes, const double *cost, int *alloc);

/* Whether moving the shares pays: the slowest device's time (cost x its
   units) is more than (1 + tol) times the fastest's, and the iterations left
   would save more than move_s seconds going from it to the balanced time. */
int omlb_rule_worth(int ndevs, int units, const int *dev_units, const double *cost,
                    double tol, int remaining, double move_s);

#endif /* IVM_APPS_OMLB_H */
