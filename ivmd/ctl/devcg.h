/*
 * CPU devices that are a share of their cores' time ("1:25"), enforced with a
 * cgroup CPU bandwidth limit per device (common/cgroup.h). The rest of the
 * daemon sees only this interface: bring-up and teardown, where a process of
 * a job's device goes (spawn, pool), the end of a job, and the two messages
 * SET_SHARE and CPU_INFO. State: ivmd_devcg_t, hung off ivmd_t.
 *
 * Layout, under the daemon's own cgroup in the hierarchy with the cpu
 * controller (the parent):
 *   ivm/ivmd-<pid>-<starttime>/   the daemon's directory, no limit
 *     dev<K>/                     device K of the daemon's table: its limit
 *       job<J>/                   job J's processes on it, no limit of their own
 *     job<J>-dev<K>/              device K of job J's own table (IVM_CPU_DEVICES)
 * A device of the daemon's table is one device however many jobs use it: the
 * PEs of every job on it share its limit (the jobs' groups weigh the same, so
 * two busy jobs on a 50% device get about 25% of the core each, one alone
 * 50%). A job's own table names devices of that job alone: their limits are
 * the job's own. The limit is share x cores of the device (0-3:50 is two
 * cores' time), with the period of ivm_cgroup_period.
 *
 * Groups exist only for devices with a share (< 100), and only for a job that
 * started a process there: made at its first process (a PE or a parked
 * warm-pool process), removed when the job is collected (all its processes
 * reaped). A removal the kernel refuses is retried at every reap and forced
 * at daemon exit, which removes the daemon's directory too. Bring-up sweeps
 * the directories of daemons that are gone (SIGKILL). Devices without a share
 * never touch cgroups; the daemon's root PE, which it does not start, is in
 * no group.
 */
#ifndef IVMD_CTL_DEVCG_H
#define IVMD_CTL_DEVCG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "ctl/job.h"
#include "ctl/ctl.h"
#include "proto.h"

#define IVMD_DEVCG_OWN_MAX 64  /* "ivm/ivmd-<pid>-<starttime>" */

struct ivmd_devcg_group;

typedef struct ivmd_devcg {
    const char             *node;   /* this node's name, in messages */
    ivm_cpu_device_t       *devs;   /* the daemon's CPU device table (SET_SHARE sets shares) */
    int                     ndevs;
    const ivmd_registry_t  *reg;
    ivm_cgroup_root_t       root;
    int                     found;  /* root holds the hierarchy and the parent */
    int                     ready;  /* the daemon's directory exists */
    char                    own[IVMD_DEVCG_OWN_MAX]; /* relative to the parent */
    struct ivmd_devcg_group *groups;
    uint32_t                ended;  /* groups whose removal is pending */
    uint32_t                dev_jobs[IVM_DEVSPEC_MAX_DEVICES]; /* job groups in dev<K> */
} ivmd_devcg_t;

/* Where a process of a job's device goes. */
typedef struct ivmd_devcg_place {
    char rel[IVM_CGROUP_PATH_MAX];   /* the group, relative to the parent; "" = none */
    char procs[IVM_CGROUP_PATH_MAX]; /* its cgroup.procs file (ivm_cgroup_join) */
} ivmd_devcg_place_t;

/* The daemon's CPU device table (ndevs devices), the registry. */
void ivmd_devcg_init(ivmd_devcg_t *cg, const char *node, ivm_cpu_device_t *devs, int ndevs,
                     const ivmd_registry_t *reg);

/* Bring-up: sweep stale daemons' directories (failures are only logged);
 * if the daemon's table has shares, set up its directory, and fail
 * with the reason (IVM_ERROR_UNSUPPORTED, IVM_ERROR_PERMISSION, ...) in rep
 * when the shares cannot be enforced. */
ivmError_t ivmd_devcg_open(ivmd_devcg_t *cg, ivmd_reply_t *rep);

/* Teardown: remove every group and the daemon's directory, processes still
 * in them moved to the parent. */
void ivmd_devcg_close(ivmd_devcg_t *cg);

/* Make sure shares can be enforced (the daemon's directory is set up at the
 * first call), else the reason in rep. */
ivmError_t ivmd_devcg_require(ivmd_devcg_t *cg, ivmd_reply_t *rep);

/* The group of a process of job on its CPU device dev, made if it is the
 * first: pl->rel is "" when dev is whole cores and has no group. */
ivmError_t ivmd_devcg_place(ivmd_devcg_t *cg, ivmd_job_t *job, int dev, ivmd_devcg_place_t *pl,
                            ivmd_reply_t *rep);

/* Move process pid into the group of pl (nothing if pl->rel is ""). A
 * process that is gone already is no error. */
ivmError_t ivmd_devcg_attach(ivmd_devcg_t *cg, const ivmd_devcg_place_t *pl, pid_t pid,
                             ivmd_reply_t *rep);

/* The job is collected (its processes are reaped): remove its groups. */
void ivmd_devcg_job_end(ivmd_devcg_t *cg, ivmd_job_t *job);

/* Retry the removals the kernel refused (called after reaping). */
void ivmd_devcg_retry(ivmd_devcg_t *cg);

/* SET_SHARE and CPU_INFO: a status (detail filled on failure). */
ivmError_t ivmd_devcg_set_share(ivmd_devcg_t *cg, const ivm_msg_set_share_req_t *req,
                                ivmd_reply_t *rep);
ivmError_t ivmd_devcg_info(ivmd_devcg_t *cg, const ivm_msg_cpu_info_req_t *req,
                           ivm_msg_cpu_info_rep_t *out, ivmd_reply_t *rep);

#endif /* IVMD_CTL_DEVCG_H */
