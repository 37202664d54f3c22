/*
 * OM-LB: online monitoring load balancing (Listing 5-2b of the dissertation),
 * one driver for the apps that iterate over a fixed amount of work laid out
 * in a row (a 1-D decomposition: HIMENO's Z planes).
 *
 * The work is `units` units in a row. The root PE starts one PE per device;
 * each PE owns a contiguous share [lo, hi) of the units, in device order,
 * and runs the iterations on it by itself: it exchanges its edge units with
 * its neighbours in the row (a halo exchange, below) and reports what each
 * iteration cost. The root only watches the reports, and between two
 * *epochs* moves the shares: every PE stores its share into the app's shared
 * objects, and the PEs of the next epoch load their new ones.
 *
 * Flow control: the plan ("omlb.plan", written by the root and broadcast to
 * every node with ivmSyncPutGroup, guarded by a hash so that a half-copied
 * plan is never acted on) says up to which iteration the PEs may run
 * (`until`); the root moves it ahead of the PEs as they report. To move the
 * shares it stops moving it: the PEs stop there, store, report, and the
 * root publishes the next epoch (new shares, new PEs) from that iteration.
 * The root is never on the PEs' path between two iterations.
 *
 * The halo exchange: every PE owns an in-box object, "omlb.in.<PE id>"
 * (allocated by the PE itself, so its master copy is on the PE's node): for
 * each side (from below, from above) and iteration parity, a slot with the
 * neighbour's edge unit, a stamp (the iteration it belongs to) and a hash
 * of both. After each iteration a PE puts its first unit into the in-box of
 * the PE below it and its last unit into the in-box of the PE above it, a
 * slot each, in one ivmSyncPut. Before the next iteration it waits, reading
 * its own master copy (no daemon round trip), until both slots carry the
 * previous iteration's stamp and a hash that matches their bytes (the bytes
 * of a put may land in any order; a slot half written does not match).
 * Neighbours on one node share the copy: their puts move no data. The
 * parity keeps a fast PE's edge of iteration i+1 off the slot its neighbour
 * may still read for iteration i.
 *
 * The balancing (root): every window (at least OMLB_WINDOW iterations of
 * every PE, the first after a load left out, and OMLB_WINDOW_S seconds) it
 * takes each device's cost per unit: its slowest PE's compute CPU time per
 * iteration over the part of a core the PE got while it iterated (its CPU
 * time over the iterations' wall-clock: PEs spin, yielding, in halo waits,
 * as MPI ranks poll), per unit. A device throttled by a CPU quota or sharing
 * its core with another job so shows the speed it can sustain, which the
 * compute's wall time (or its least time over a window) hides when a short
 * step fits in the quota a wait left; that part is capped at the device's
 * share of a core (ivmGetDevices, re-read every OMLB_SHARES_S), which a PE
 * cannot sustain more of. A device's cost is the median of its last three
 * windows. It moves the shares when the best integer split
 * (omlb_rule_split) would make the slowest device at least `balance_tol`
 * faster and the iterations left would save more than a move costs (the
 * last move, measured; before one, the start: the first plan to every PE's
 * first iteration); from an equal start at once, else only when two windows
 * in a row say so (the first move from the shares' split also waits for
 * three windows of every device). A device slowed part-way through the run
 * is followed a few windows later.
 *
 * The first split: when every device is a CPU device that declares its cores
 * and share (ivmGetDevices), in proportion to cores x share; else, or with
 * IVM_OMLB_START=equal, equal.
 *
 * PEs per device: a device gets one PE. With --max-per-dev K > 1, a device
 * that can run more than one PE usefully (a GPU, or a CPU device of two
 * cores or more; a PE's threads are the device's cores / its PEs) gets a
 * trial PE once the split has settled; the trial PE stays if the device's
 * time per unit of work fell by OMLB_TRIAL_GAIN, else it is retired at the
 * next move. One-core devices and shares of a core never get one: a second
 * process cannot make a core faster.
 *
 * Records (for Figure 5-6), one line per window the root watched:
 *   OMLB iter=<first> last=<last> pes=<n0>,<n1>,.. units=<u0>,<u1>,..
 *        tmax=<s> tstd=<s>
 * (its first and last iteration, PEs and units per device, the slowest
 * PE's and the standard deviation of the PEs' compute seconds per iteration
 * over the window).
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

#include <stddef.h>
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

/* The app's side, run in the child PEs. Each returns 0, or -1 after printing
   why. References (`edge`, `below`, `above`) are the PE's own copies of
   the in-boxes: host memory on a CPU PE, device memory on a GPU PE of the
   CUDA kernel. */
typedef struct omlb_ops {
    /* Load the share's state (units lo-1 .. hi, its halos included) from the
       app's shared objects: a PE's first iteration, and the first after
       every move. */
    int (*load)(void *ctx, const omlb_part_t *part);
    /* One iteration on the share, halos already in place; *value_p is summed
       by the root over the PEs (of the last iteration); *compute_s_p is the
       seconds of the computation, which the root balances. */
    int (*step)(void *ctx, const omlb_part_t *part, double *value_p, double *compute_s_p);
    /* Copy the share's first and last unit out (halo_bytes each; NULL: not
       wanted). */
    int (*edges)(void *ctx, const omlb_part_t *part, void *first, void *last);
    /* Optional: the iteration in two parts, so that the edges travel while
       the rest computes. step_edges computes the first and the last unit
       (their new values stay out of the other units' way), copies them out
       as `edges` would (host memory; NULL: not wanted); the next `step`
       computes the rest and completes the iteration. The driver never calls
       `edges` then: a CPU PE posts the edges' puts (ivmSyncPutNbi, its
       daemon carries them while `step` runs; ivmQuiet before the next
       iteration's), a GPU PE's thread sends them (they copy from the
       device first; libivm is thread-safe). */
    int (*step_edges)(void *ctx, const omlb_part_t *part, void *first, void *last);
    /* Take the neighbours' edges as the halos (NULL: no neighbour there). */
    int (*halos)(void *ctx, const omlb_part_t *part, const void *below, const void *above);
    /* Write the share's state back to the app's shared objects. */
    int (*store)(void *ctx, const omlb_part_t *part);
} omlb_ops_t;

/* The root's settings. */
typedef struct omlb_config {
    int         units;       /* work units, >= number of devices */
    int         iterations;  /* >= 1 */
    int         cap;         /* PEs per device at most (default 1; see the header) */
    double      balance_tol; /* move when the slowest device gets this much faster (0.05) */
    int         ndevs;
    ivm_device  devs[OMLB_MAX_DEVS];
    char        names[OMLB_MAX_DEVS][OMLB_NAME_MAX];
    int         devtypes[OMLB_MAX_DEVS];
    int         nodes[OMLB_MAX_DEVS]; /* node index of each (app_node_index) */
    FILE       *record;      /* the OMLB lines (NULL: none) */
} omlb_config_t;

/* What the root learned. */
typedef struct omlb_result {
    double seconds;                     /* first plan to the last store */
    double value;                       /* sum of the PEs' values, last iteration */
    int    pes_spawned;                 /* child PEs created over the run */
    int    dev_pes[OMLB_MAX_DEVS];      /* PEs per device at the end */
    double dev_share[OMLB_MAX_DEVS];    /* units done per device / all units done */
    int    rebalances;                  /* moves of the shares */
} omlb_result_t;

/* Defaults for cfg (cap 1, tol 0.05, no devices, record stdout). */
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

/* Child: map the control objects, make its in-box of 2 x 2 halo_bytes, run
   the plans until the last iteration is stored. 0 or -1 (printed). */
int omlb_child_run(const omlb_ops_t *ops, void *ctx, size_t halo_bytes);

/* The root's rules, apart for the unit tests (cost[d]: device d's seconds
   per unit with its dev_pes[d] PEs, > 0). */

/* The split: the integer split of `units` that makes the slowest device
   (cost[d] x alloc[d]) the fastest, every PE at least one unit; alloc sums
   to units (units >= the PEs). */
void omlb_rule_split(int ndevs, int units, const int *dev_pes, const double *cost, int *alloc);

/* Whether moving the shares pays: the best split's slowest device would be
   more than tol faster than today's (cost x dev_units), and the iterations
   left would save more than move_s seconds. */
int omlb_rule_worth(int ndevs, int units, const int *dev_pes, const int *dev_units,
                    const double *cost, double tol, int remaining, double move_s);

#endif /* IVM_APPS_OMLB_H */
