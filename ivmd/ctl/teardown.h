/*
 * ctl/teardown: the end of a job. The root PE gone (or the root daemon, or
 * the daemon shutting down), the job ends: the layers that keep state per
 * job hear it through the job-end listeners they registered (GPU coherence's
 * device copies), the other nodes through ctl/remote, the registry marks it
 * ending and releases its objects, its parked processes and PEs are killed
 * (those that called ivmExit get IVMD_EXIT_GRACE_S to finish), and it is
 * collected once its processes and connections are gone. State:
 * ivmd_teardown_t, hung off the daemon's context.
 */
#ifndef IVMD_CTL_TEARDOWN_H
#define IVMD_CTL_TEARDOWN_H

#include <stdint.h>

#include "ctl/ctl.h"
#include "ctl/devcg.h"
#include "ctl/job.h"
#include "status.h"

/* Seconds a PE that called ivmExit may take to end once its job is over. */
#define IVMD_EXIT_GRACE_S 2

/* Job-end listeners a module may register. */
#define IVMD_JOB_END_LISTENERS_MAX 4

/* A job ends (called once, before its PEs are ended and its objects go). */
typedef void (*ivmd_job_end_fn_t)(void *ctx, ivmd_job_t *job);

struct ivmd_pool;

typedef struct ivmd_teardown {
    const ivmd_ctl_env_t *env;
    struct ivmd_pool     *pool;
    ivmd_devcg_t         *devcg;
    const int            *timer_fd; /* the grace period's timerfd */
    struct {
        ivmd_job_end_fn_t fn;
        void             *ctx;
    } listeners[IVMD_JOB_END_LISTENERS_MAX];
    int nlisteners;
} ivmd_teardown_t;

void ivmd_teardown_init(ivmd_teardown_t *t, const ivmd_ctl_env_t *env, struct ivmd_pool *pool,
                        ivmd_devcg_t *devcg, const int *timer_fd);
/* fn(ctx, job) at every job's end, in registration order: IVM_ERROR_LIMIT
 * beyond IVMD_JOB_END_LISTENERS_MAX. */
ivmError_t ivmd_teardown_on_job_end(ivmd_teardown_t *t, ivmd_job_end_fn_t fn, void *ctx);
/* End the job: kill its PEs, release its objects, drop its streams. The job
 * stays until ivmd_teardown_collect finds its processes and connections gone. */
void ivmd_teardown_terminate(ivmd_teardown_t *t, ivmd_job_t *job, const char *why);
/* Destroy the job if it ended and has no process or connection left. */
void ivmd_teardown_collect(ivmd_teardown_t *t, ivmd_job_t *job);
/* The grace timer fired: kill what is left of ended jobs. */
void ivmd_teardown_grace_expired(ivmd_teardown_t *t);

#endif /* IVMD_CTL_TEARDOWN_H */
