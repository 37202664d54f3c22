/*
 * CPU bandwidth limits with cgroups: groups of processes that together get at
 * most a given amount of CPU time, for CPU devices that are a share of their
 * cores (ivmd) and for the bench helper ivm-devrun.
 *
 * The hierarchy is the one that has the `cpu` controller: a cgroup v1 mount
 * whose super options name `cpu`, else the cgroup2 mount whose
 * cgroup.controllers lists `cpu`. Groups live under the caller's own cgroup
 * in it (the *parent*, from /proc/self/cgroup), in one directory per owner
 * process: <parent>/ivm/<prefix>-<pid>-<starttime>/..., where starttime is the
 * owner's start time in clock ticks since boot (/proc/<pid>/stat field 22),
 * so that a later process can tell the directory of a killed owner from that
 * of a live one, even when the pid was reused (ivm_cgroup_sweep).
 *
 * A limit is CPU time in percent of one core: 25 is a quarter of one core,
 * 200 two cores' worth (spread over any of the group's cores); 0 means no
 * limit. It becomes a CFS quota per period (v1: cpu.cfs_quota_us and
 * cpu.cfs_period_us, cpu.cfs_burst_us 0; v2: cpu.max "QUOTA PERIOD",
 * cpu.max.burst 0), with a short period so that a small share runs in steps
 * of a few milliseconds rather than in long bursts (ivm_cgroup_period).
 *
 * Groups are named by paths relative to the parent ("ivm/ivmd-12-345/dev1").
 * Every function reports failure as an ivmError_t with a message in err that
 * names the path and the cause: IVM_ERROR_UNSUPPORTED (no hierarchy with the
 * cpu controller, or the controller not available where it is needed),
 * IVM_ERROR_PERMISSION (EACCES, EPERM, EROFS), IVM_ERROR_NOT_FOUND (no such
 * group or process), IVM_ERROR_INVALID_VALUE (a limit the kernel refuses,
 * e.g. above an ancestor's), IVM_ERROR_INTERNAL (anything else). They log
 * nothing: the caller decides what to say.
 */
#ifndef IVM_COMMON_CGROUP_H
#define IVM_COMMON_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ivm.h"

#define IVM_CGROUP_PATH_MAX 512
#define IVM_CGROUP_TOP      "ivm" /* the directory of every owner's groups */

typedef struct ivm_cgroup_root {
    int  version;                     /* 1: a cgroup v1 hierarchy, 2: the unified one */
    char parent[IVM_CGROUP_PATH_MAX]; /* the caller's cgroup there: a directory path */
} ivm_cgroup_root_t;

/* Find the hierarchy with the cpu controller and the caller's cgroup in it.
 * Nothing is created or written. */
ivmError_t ivm_cgroup_root_find(ivm_cgroup_root_t *root, char *err, size_t errlen);

/* The period and quota (microseconds) of a limit of cpu_pct percent of one
 * core: period = max(4000, ceil(1000 * 100 / cpu_pct)), at most 1 s, quota =
 * period * cpu_pct / 100 (the kernel wants quota >= 1000 us): 25% of one core
 * is 1 ms every 4 ms. cpu_pct 0: both 0 (no limit). */
void ivm_cgroup_period(uint32_t cpu_pct, uint64_t *period_us_p, uint64_t *quota_us_p);

/* "<parent>/<rel>" or, with file, "<parent>/<rel>/<file>" into buf (rel ""
 * names the parent). IVM_ERROR_INVALID_VALUE if it does not fit. */
ivmError_t ivm_cgroup_path(const ivm_cgroup_root_t *root, const char *rel, const char *file,
                           char *buf, size_t len);

/* "ivm/<prefix>-<pid>-<starttime>": the directory of owner pid (0: the
 * caller), relative to the parent. IVM_ERROR_NOT_FOUND if pid is gone. */
ivmError_t ivm_cgroup_owner_dir(const char *prefix, pid_t pid, char *buf, size_t len);

/* Create group rel with a limit of cpu_pct (0: none); its missing ancestors
 * are created without a limit (v2: `+cpu` is written to the subtree_control
 * of each directory that gets a child here, the parent's included, where it
 * is not there yet). A group that exists already keeps its processes and
 * gets the limit. On failure a group this call created is removed again. */
ivmError_t ivm_cgroup_create(const ivm_cgroup_root_t *root, const char *rel, uint32_t cpu_pct,
                             char *err, size_t errlen);

/* Change the limit of group rel (0: none). */
ivmError_t ivm_cgroup_set_limit(const ivm_cgroup_root_t *root, const char *rel,
                                uint32_t cpu_pct, char *err, size_t errlen);

/* The group's quota and period as the kernel has them (microseconds);
 * *quota_us_p is 0 when it has no limit. */
ivmError_t ivm_cgroup_get_limit(const ivm_cgroup_root_t *root, const char *rel,
                                uint64_t *quota_us_p, uint64_t *period_us_p, char *err,
                                size_t errlen);

/* Move process pid (0: the caller; all its threads) into group rel.
 * IVM_ERROR_NOT_FOUND if the process is gone. */
ivmError_t ivm_cgroup_attach(const ivm_cgroup_root_t *root, const char *rel, pid_t pid,
                             char *err, size_t errlen);

/* Move the calling process into the group whose cgroup.procs file is
 * procs_path (from ivm_cgroup_path(root, rel, "cgroup.procs", ...)). Only
 * async-signal-safe calls: usable between fork and exec. Returns 0 or an
 * errno value. */
int ivm_cgroup_join(const char *procs_path);

/* Remove group rel and every group below it. Processes still in them are
 * moved to the parent first; a removal the kernel refuses with EBUSY (a
 * process was exiting or just forked) is retried for up to about 100 ms.
 * Success if rel does not exist. */
ivmError_t ivm_cgroup_destroy(const ivm_cgroup_root_t *root, const char *rel, char *err,
                              size_t errlen);

/* Remove <parent>/ivm if it is empty (another owner's directory keeps it). */
void ivm_cgroup_top_remove(const ivm_cgroup_root_t *root);

/* Destroy every "ivm/<prefix>-<pid>-<starttime>" directory whose process is
 * gone (no such pid, or one with another start time); *removed_p (may be
 * NULL) counts them. Live owners' directories are left alone. Goes through
 * all of them; the first failure is returned. */
ivmError_t ivm_cgroup_sweep(const ivm_cgroup_root_t *root, const char *prefix, int *removed_p,
                            char *err, size_t errlen);

/* 1 if owner directory name ("<prefix>-<pid>-<starttime>") is stale: its
 * process is gone or has another start time; 0 if it is alive; -1 if name
 * is no such directory name of prefix. */
int ivm_cgroup_owner_stale(const char *prefix, const char *name);

#endif /* IVM_COMMON_CGROUP_H */
