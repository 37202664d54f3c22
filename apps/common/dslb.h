/*
 * dslb: the Dynamic Spawning Load Balancing driver (Listing 5-2a, made
 * correct and made to pay off on devices of different speeds) shared by
 * NBODY, DMM and NW. An app supplies its data set-up, one portion's work and
 * its final check; the driver runs the PEs.
 *
 * Each iteration t is cut into at most P (--portions) portions, one PE
 * each: n_t of them, from the iteration's first PE id b_t (b_0 = 1, b_t+1 =
 * b_t + n_t), which the root writes into "dslb.ctl" with the cut and pushes
 * to every node before it raises the job's PE id limit to b_t + n_t - 1
 * and starts a chain on each device it wants busy. A child does portion
 * id - b_t: PE ids are assigned in increasing order and never reused, so
 * the ids b_t .. b_t + n_t - 1 are the portions of iteration t, each
 * claimed exactly once by whichever device asks first. Once
 * its portion is computed a child decides whether its device takes another
 * portion (it starts its successor on its own device) or its chain ends; the
 * id limit ends every chain (the spawn slot comes back IVM_PE_NULL), so
 * spawning stops exactly at the max PE id. It then pushes its results (while
 * the successor starts), its portion record and last the record's flag, and
 * exits. If every chain ended with portions
 * left, the root starts one PE on the device that would finish one first.
 *
 * The decision (default, "auto"): each device keeps a line of measured
 * figures in "dslb.dev": its time per work unit (a PE's whole run, from its
 * start to its decision, over the portion's work units: throttling, noisy
 * neighbours and syncs all count, as they count in the run), over about
 * its last share of an iteration's work (dslb_rate_add); the gap between a chain's decision and its successor's
 * start (spawn, exec, ivmEnter); the end it expects for its running portion;
 * the highest PE id it claimed. A deciding PE reads every device's line and
 * deals the portions not yet claimed, in id order, to the device that would
 * finish each first (earliest finish time list scheduling, with each
 * device's running portion, gap and speed); its device continues if it gets
 * at least one. So every device works while its work shortens the
 * iteration, and a slow device leaves the last portions to faster ones. The
 * root uses the same rule at the start of an iteration (after the first,
 * which every device starts, to measure) to choose the devices it starts.
 *
 * Portion sizes ("--layout"). With
 * "weighted" (the default) the root cuts each iteration anew before it
 * starts the iteration's chains: the first portion of each chain it starts
 * (the PE ids it is about to get, in its start order) is a part of the
 * chain's share of the work by the devices' speeds (measured: the devices'
 * lines; before any measure, what the devices declare, cores x share, when
 * every device declares one, else equal; a device that declares a new
 * share while the job runs has its line scaled to it by the root before the
 * next iteration): a batch of it for the fastest chain (DSLB_FIRST_BATCH
 * at least), more for slower ones (dslb_cut), so that every chain's first
 * portion ends about together before the iteration's end. The rest comes in
 * the remaining portions, from DSLB_TAPER times the last one's size down to
 * it, which the deal hands out as the chains decide. Most of the work then
 * costs one PE per device and the end of the iteration is still cut fine:
 * few PEs where balancing cannot help, fine portions where it can. How
 * many portions, and how large the first ones, the root picks from what it
 * measured (dslb_shape): the tail is twice the spread of the last first
 * portions' times against their prediction (3 % to 1 - DSLB_FIRST_BATCH of
 * the fastest chain's share), in as many portions as it holds portions of
 * DSLB_TAIL_GAPS times the work a chain could do in the gap between two of
 * its PEs (P in all at most; none when even one would cost more than the
 * error it absorbs: then the first portions are the whole iteration). Where
 * the devices keep their speed, an iteration is then a PE per chain, and
 * the tail grows back as soon as the first portions stray. Before any
 * measure (the first iteration: speeds declared, or equal) every chain's
 * first portion is DSLB_FIRST_GUESS of its share and all P portions are
 * cut.
 * The cut is in "dslb.ctl" (the bounds, pushed to every node's copy with
 * ivmSyncPutGroup before the chains start). "equal": P equal cuts.
 *
 * --threshold T (the dissertation's rule instead): a device continues while
 * its time per work unit over the fastest device's is below T; the root
 * starts --max-per-dev PEs on every device in every iteration.
 *
 * Shared objects of the driver (names reserved): "dslb.ctl" (the device
 * table), "dslb.rec" (one record per portion: PE, device, seconds, work,
 * flag = iteration + 1), "dslb.dev" (one line of figures per device, written
 * only by the PEs of its node), "dslb.dpc" (--dpc). The root reads the
 * records for the share of work per device, and waits for the PEs of an
 * iteration with ivmWait (asleep in the daemon, not polling).
 *
 * Test knob: IVM_DSLB_SLOW="D:F[,D:F...]" (read by the root) makes device D
 * (index in the device table, printed at start as "dslb: devices 0=... 1=...")
 * F times slower: once its portion is computed its PE sleeps (F - 1) times
 * its run so far (from its start: the span its rate is measured over), so
 * its run and its reported time are about F times as long. The MPI baselines apply the same
 * knob to rank D, so heterogeneous devices can be emulated on one machine
 * (CPU devices that are a share of a core, --cpu-devices 0,1:50, are the
 * real thing).
 */
#ifndef IVM_APP_DSLB_H
#define IVM_APP_DSLB_H

#include "app.h"

#define DSLB_FIRST_BATCH 0.9   /* --layout weighted: the chains' first portions' least part */
#define DSLB_FIRST_GUESS 0.7   /* ... every chain's part before any measure */
#define DSLB_TAPER       2.0   /* ... the rest: first over last portion's size */
#define DSLB_TAIL_ERR    2.0   /* the tail: this times the first portions' error, */
#define DSLB_TAIL_MIN    0.03  /* ... at least this part of the fastest share */
#define DSLB_TAIL_GAPS   4.0   /* a tail portion: at least this many gaps' work */

struct dslb_child;

/* What a child's portion callback gets. */
typedef struct dslb_portion {
    int iter;                  /* iteration, 0-based */
    int portion;               /* portion of the iteration, 0 .. n_t - 1 */
    int pe;                    /* the PE's id */
    long long lo, hi;          /* its work units [lo, hi) (apps with `units`) */
    int devtype;               /* the PE's device type */
    app_kernel_t kernel;       /* the kernel it runs (app_kernel_pick) */
    const app_args_t *args;
    struct dslb_child *child;  /* the driver's state, for dslb_portion_computed */
} dslb_portion_t;

/* An app's part. Every callback returns 0, or -1 after printing why. */
typedef struct dslb_app_ops {
    /* Root, before any PE starts: allocate (ivmMalloc) and fill the data. */
    int (*root_setup)(void *ctx, const app_args_t *args);
    /* Root, after every portion of iteration `iter` is done (NULL: none). */
    int (*root_iter_end)(void *ctx, const app_args_t *args, int iter);
    /* Root, after the last iteration: checksum, verification (r->verified,
       r->checksum), release of the data objects. */
    int (*root_finish)(void *ctx, const app_args_t *args, app_result_t *r);
    /* Child: map what the portion needs, compute it with w->kernel, call
       dslb_portion_computed(w), push its results to the master (ivmSyncPut).
       Timed by the driver up to dslb_portion_computed (to the return when
       it is not called). Mappings may be left to the driver: the PE ends
       after its portion and ivmExit releases them without a round trip
       each. */
    int (*child_portion)(void *ctx, const dslb_portion_t *w);
    /* The app's work is a row of units (particles, sequence pairs, tiles):
       their count (required) and the work of units [lo, hi) (NULL: hi - lo);
       the driver cuts the portions (--layout) and a child's portion is units
       [w->lo, w->hi). */
    long long (*units)(void *ctx, const app_args_t *args);
    double (*unit_work)(void *ctx, const app_args_t *args, long long lo, long long hi);
    /* Child, before the first iteration (NULL: none): once on every node but
       the root's, map what the node's portions will read (their inputs),
       so that the node's copies are filled before the timed iterations, as
       an MPI rank builds or receives its input before its timer starts.
       The PE (id `pe`) then ends (its maps go with it; the node keeps its
       copies). IVM_DSLB_STAGE=0 (read by the root) skips the staging. */
    int (*child_stage)(void *ctx, const app_args_t *args, int pe);
    /* Every process, after app_args_parse (NULL: none): check the app's own
       limits and set up what every PE needs. 0, or the exit status after
       printing why (2: bad arguments). */
    int (*args_check)(void *ctx, const app_args_t *args);
    /* --serial: the CPU kernel over all the work in this one process, timed
       (r->seconds), then the checksum and verification of the result (as
       root_finish). 0, or 1 when the check failed (a result line is still
       printed); -1 with no result (printed why). */
    int (*serial)(void *ctx, const app_args_t *args, app_result_t *r);
    /* Every process, at the end (NULL: none): free what args_check set up. */
    void (*release)(void *ctx);
} dslb_app_ops_t;

/* The decision rule, apart for the unit tests. Earliest finish time list
   scheduling: the nwork portions (work units work[0..nwork), in claim
   order) go one by one to the lane that would finish it first: lane l is
   free at free_at[l] and takes gap[l] + rate[l] * work per portion; a tie
   goes to the lower lane. counts[l] (nlanes entries) gets each lane's
   portions. Returns counts[me]. */
int dslb_eft(int nlanes, const double *free_at, const double *rate, const double *gap,
             const double *work, int nwork, int me, int *counts);

/* The decision of a chain's PE (lane me, free now at free_at[me]): whether
   its device takes the next portion, work[0], the one its successor claims,
   and the rest are dealt by earliest finish time: 1 when the lanes are then
   done no later (within DSLB_TIE of the time left) than with work[0..nwork)
   dealt to the other lanes alone. Other lanes are busy until free_at[l]. */
int dslb_go(int nlanes, const double *free_at, const double *rate, const double *gap,
            const double *work, int nwork, int me);

/* A device's rate (seconds per work unit) with a PE's run of `seconds`
   over `work` units added, apart for the unit tests: seconds over work of
   the device's portions, each weighing by its work and fading by
   exp(-work / horizon) at each later one (*rate_work: the work the rate
   averages over, updated; rate 0 or *rate_work 0: no sample yet). So the
   rate is about that of the last `horizon` units of work, whatever the
   portions' sizes: an average per portion let the small last portions of
   an iteration, whose start-up weighs more, outvote its large first one
   (a fast device looked slower than it was, and a slow device's next first
   portion came out too large). */
double dslb_rate_add(double rate, double *rate_work, double seconds, double work,
                     double horizon);

/* The weighted cut (--layout weighted), apart for the unit tests: P
   portions of total work `total` into cut[0..P] (cumulative work, cut[0] =
   0, cut[P] = total). The first nfirst portions (one per chain started at
   the iteration's start, in start order) are a part of each chain's share
   of the work by speed[0..nfirst) (> 0): `batch` for the fastest,
   1 - (1 - batch) x speed / fastest for the others (a slower chain would
   take longer over a tail portion, so it gets fewer), or with `even`
   (speeds not measured, only declared: a slow chain's may be far off)
   `batch` for all; the other portions the rest, in rounds of nfirst
   portions tapered from DSLB_TAPER times the last round's size down to it.
   With P <= nfirst the first P chains get all the work by their speeds. */
void dslb_cut(int P, double total, int nfirst, const double *speed, double batch, int even,
              double *cut);

/* The shape of a weighted cut, apart for the unit tests: for nfirst chains
   of speed[j] (work per second) whose PEs follow each other gap[j] seconds
   apart (0: not measured), `measured` (0: the speeds are only declared or
   guessed), an iteration of work `total` and err, the spread of the last
   first portions' times against their prediction (< 0: none measured):
   *batch (dslb_cut's: 1 - DSLB_TAIL_ERR x err, between DSLB_FIRST_BATCH
   and 1 - DSLB_TAIL_MIN; DSLB_FIRST_GUESS, cut even, when not measured)
   and *nport, the portions to cut,
   at most P: the chains' first portions and as many tail portions as the
   tail (dslb_cut's) holds portions of DSLB_TAIL_GAPS x the largest
   gap[j] x speed[j]: none when it holds none (a PE would cost more than
   the error it absorbs). P when a speed or every gap is missing, or
   P <= nfirst. */
void dslb_shape(int P, int nfirst, const double *speed, const double *gap, int measured,
                double total, double err, int *nport, double *batch);

/* Child, once the portion is computed and before its results are pushed:
   the driver takes its decision now (the device's rate covers the start-up
   and the computation) and, when the device goes on, starts the successor,
   whose start-up (fork, ivmEnter, maps) then overlaps this PE's push instead
   of following it: the device's core would otherwise wait on the push's
   round trips. Called once; a later call, or none, is harmless (the driver
   decides after child_portion returns). 0, or -1 after printing why. */
int dslb_portion_computed(const dslb_portion_t *w);

/* Run the calling process as a PE of a DS-LB app: ivmEnter, the root or a
   child's part, ivmExit. The root prints the result line (version=ivm) and
   one "dslb:" summary line (PE ids used, the limit, root restarts) on stdout.
   Returns the process exit status: 0, or 1 on any failure (verification
   included). */
int dslb_run(const app_args_t *args, const dslb_app_ops_t *ops, void *ctx);

/* An app's main(): app_args_parse(argc, argv, args, usage_extra) (exit 2),
   ops->args_check, then with --serial ops->serial and its result line
   (version=serial), else dslb_run; ops->release. Returns the exit status;
   a child PE that ended with ivmExit does not return: its process ends
   there (stdio flushed, _exit: its exit handlers cost a PE per portion about
   1.4 ms; under AddressSanitizer it returns, for the leak checker). */
int dslb_main(int argc, char **argv, app_args_t *args, const char *usage_extra,
              const dslb_app_ops_t *ops, void *ctx);

#endif /* IVM_APP_DSLB_H */
