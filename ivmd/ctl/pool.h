/*
 * ctl/pool: the warm PE pool: per job and device (its CPU devices, the
 * node's GPUs while the GPU daemon lives), pe_pool processes of the job's
 * executable parked in ivmEnter, handed a PE identity by CREATE_PES. State:
 * ivmd_pool_t, hung off the daemon's context; the parked processes
 * themselves hang off their job's data (ctl/jobdata.h).
 */
#ifndef IVMD_CTL_POOL_H
#define IVMD_CTL_POOL_H

#include <stdint.h>
#include <sys/types.h>

#include "ctl/ctl.h"
#include "ctl/jobdata.h"
#include "proto.h"
#include "status.h"
#include "transport/conn.h"

struct ivmd_spawn;
struct ivmd_output;

typedef struct ivmd_pool {
    const ivmd_ctl_env_t *env;
    struct ivmd_spawn    *spawn;
    struct ivmd_output   *output;
    uint32_t              pooled; /* PEs handed out by warm pools (INFO) */
} ivmd_pool_t;

void ivmd_pool_init(ivmd_pool_t *pl, const ivmd_ctl_env_t *env, struct ivmd_spawn *spawn,
                    struct ivmd_output *output);

/* Whether some job's pool is short: 0 (no), IVMD_POOL_SHORT (fewer parked
 * processes than wanted: the loop fills it once idle for IVMD_POOL_IDLE_US)
 * or IVMD_POOL_EMPTY (none left: the next CREATE_PES would be cold, so the
 * loop fills it as soon as no event is pending). */
int ivmd_pool_wanted(const ivmd_pool_t *pl);
#define IVMD_POOL_SHORT   1
#define IVMD_POOL_EMPTY   2
#define IVMD_POOL_IDLE_US 200
/* Start one parked process where a pool is shortest (called from the loop
 * when nothing else is to be done, so never on a caller's path). */
void ivmd_pool_fill(ivmd_pool_t *pl);
/* ENTER with IVM_ENTER_POOL: validate and park the connection (IVMD_DEFERRED)
 * or refuse (an ivmError_t, its detail in rep). */
ivmError_t ivmd_pool_enter(ivmd_pool_t *pl, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                           const ivm_msg_enter_req_t *req, ivmd_reply_t *rep);
/* The job of the parked process a pool ENTER on c names (its slot, token
 * and pid checked as for parking; c not parked), or NULL with the refusal
 * in rep. For ENTER with IVM_ENTER_BOARD, which parks nothing. */
ivmd_job_t *ivmd_pool_caller_job(ivmd_pool_t *pl, ivmd_conn_t *c, const ivm_msg_enter_req_t *req,
                                 ivmd_reply_t *rep);
/* Hand a parked process of pe's device the identity of pe (reserved, not yet
 * started): 1 if one was handed out (pe is then RUNNING), 0 if none is ready.
 * more: the PEs of the same request still to come after pe. */
int ivmd_pool_take(ivmd_pool_t *pl, ivmd_job_t *job, ivmd_pe_t *pe, int more);
/* A parked process's connection closed: kill it (it is replaced). */
void ivmd_pool_disconnect(ivmd_pool_t *pl, ivmd_conn_t *c);
/* SIGCHLD: 1 if pid was a parked process (forgotten, replaced later). */
int ivmd_pool_reaped(ivmd_pool_t *pl, pid_t pid, int wstatus);
/* The job ends: kill its parked processes (reaped as usual). */
void ivmd_pool_job_end(ivmd_pool_t *pl, ivmd_job_t *job);
/* The GPU daemon is gone: kill every parked GPU process (reaped as usual);
 * GPU pools are not refilled while it is gone. */
void ivmd_pool_gpus_lost(ivmd_pool_t *pl);
/* Parked processes of the job not reaped yet (the job waits for them). */
int ivmd_pool_busy(const ivmd_job_t *job);
uint32_t ivmd_pool_count(const ivmd_pool_t *pl);

#endif /* IVMD_CTL_POOL_H */
