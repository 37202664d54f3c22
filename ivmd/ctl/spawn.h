/*
 * ctl/spawn: PE processes of a job's executable, with its argv, cwd and
 * environment, the PE identity in the environment, pinned to the device's
 * cores (a share device's processes in its cgroup, ctl/devcg.h); their
 * binding under --bind-to, their reaping, and the pidfds of PEs forked by a
 * parked process (not our children). State: ivmd_spawn_t, hung off the
 * daemon's context.
 */
#ifndef IVMD_CTL_SPAWN_H
#define IVMD_CTL_SPAWN_H

#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl/ctl.h"
#include "ctl/devcg.h"
#include "ctl/job.h"
#include "status.h"

struct ivmd_output;

typedef struct ivmd_spawn {
    const ivmd_ctl_env_t *env;
    struct ivmd_output   *output;
    ivmd_devcg_t         *devcg;
} ivmd_spawn_t;

void ivmd_spawn_init(ivmd_spawn_t *s, const ivmd_ctl_env_t *env, struct ivmd_output *output,
                     ivmd_devcg_t *devcg);

/* A fresh secret for a PE's ENTER (never 0). */
uint64_t ivmd_spawn_new_token(void);
/* Attributes of a child of the daemon (a PE, ivm-gpud): no blocked signal,
 * default dispositions for the signals the daemon handles, its own process
 * group. posix_spawnattr_destroy it after the spawn. */
void ivmd_spawn_attr_init(posix_spawnattr_t *attr);
/* Start pe's process (pe->id < -1: a parked process of the warm pool). */
ivmError_t ivmd_spawn_pe(ivmd_spawn_t *s, ivmd_job_t *job, ivmd_pe_t *pe, ivmd_reply_t *rep);
/* Bind a CPU PE's threads as its job's --bind-to says; nothing for the
 * default, binding to the device's cores, which the PE has from its start. */
void ivmd_spawn_bind(const ivmd_spawn_t *s, const ivmd_job_t *job, const ivmd_pe_t *pe,
                     pid_t pid);
/* SIGCHLD: reap children and end their PEs. */
void ivmd_spawn_reap(ivmd_spawn_t *s);
/* A PE forked by a parked process is not our child: watch its pid (a pidfd
 * in the loop) and end it as a reaped child when it is gone. pe->pid set. */
ivmError_t ivmd_spawn_watch(ivmd_spawn_t *s, ivmd_pe_t *pe);
/* Send sig to pe's process: through its pidfd when it is forked (its pid
 * may be reused before we learn it ended), else by pid. */
int ivmd_spawn_signal(const ivmd_pe_t *pe, int sig);
/* SIGKILL pe's process if it has one not reaped yet (1 if a signal went). A
 * forked PE whose pid is not known yet counts as reaped: its process is
 * killed when it shows. */
int ivmd_spawn_kill(ivmd_pe_t *pe);
/* Stop watching (the PE is forgotten). */
void ivmd_spawn_unwatch(ivmd_spawn_t *s, ivmd_pe_t *pe);

#endif /* IVMD_CTL_SPAWN_H */
