/* ctl/teardown: the end of a job (ctl/teardown.h). */
#include <signal.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "ctl/teardown.h"
#include "ctl/jobdata.h"
#include "ctl/pool.h"
#include "ctl/remote.h"
#include "ctl/spawn.h"
#include "log.h"

void ivmd_teardown_init(ivmd_teardown_t *t, const ivmd_ctl_env_t *env, struct ivmd_pool *pool,
                        ivmd_devcg_t *devcg, const int *timer_fd)
{
    t->env        = env;
    t->pool       = pool;
    t->devcg      = devcg;
    t->timer_fd   = timer_fd;
    t->nlisteners = 0;
}

ivmError_t ivmd_teardown_on_job_end(ivmd_teardown_t *t, ivmd_job_end_fn_t fn, void *ctx)
{
    if (t->nlisteners >= IVMD_JOB_END_LISTENERS_MAX) {
        return IVM_ERROR_LIMIT;
    }
    t->listeners[t->nlisteners].fn  = fn;
    t->listeners[t->nlisteners].ctx = ctx;
    ++t->nlisteners;
    return IVM_SUCCESS;
}

void ivmd_teardown_collect(ivmd_teardown_t *t, ivmd_job_t *job)
{
    ivmd_job_data_t *jd = job->data;
    int i;

    if (!job->ending || jd->nconns > 0 || ivmd_pool_busy(job)) {
        return;
    }
    for (i = 0; i < job->next_pe_id; ++i) {
        if (job->pes[i] != NULL && !job->pes[i]->reaped) {
            return;
        }
    }
    ivm_info("job %u: all PEs gone, released", job->id);
    ivmd_devcg_job_end(t->devcg, job);
    ivmd_job_data_free(jd);
    ivmd_job_destroy(t->env->reg, job);
}

void ivmd_teardown_grace_expired(ivmd_teardown_t *t)
{
    uint64_t ticks;
    ivmd_job_t *job;
    int i;

    if (read(*t->timer_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
        return;
    }
    for (job = t->env->reg->jobs; job != NULL; job = job->next) {
        if (!job->ending) {
            continue;
        }
        for (i = 1; i < job->next_pe_id; ++i) {
            ivmd_pe_t *pe = job->pes[i];
            if (pe != NULL && pe->pid > 0 && !pe->reaped) {
                ivm_warn("job %u: pe %d still runs %d s after its job ended: killed",
                         job->id, pe->id, IVMD_EXIT_GRACE_S);
                ivmd_spawn_signal(pe, SIGKILL);
            }
        }
    }
}

/* End the job's PEs other than the root: the live ones killed (*killed_p
 * counts the signals), those that called ivmExit given the grace period. */
static void ivmd_teardown_end_pes(ivmd_teardown_t *t, ivmd_job_t *job, int *killed_p)
{
    int i, lingering = 0;

    for (i = 1; i < job->next_pe_id; ++i) {
        ivmd_pe_t *pe = job->pes[i];
        if (pe == NULL) {
            continue;
        }
        if (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING) {
            *killed_p += ivmd_spawn_kill(pe);
            ivmd_pe_end(t->env->reg, pe, 1);
        } else if (pe->pid > 0 && !pe->reaped) {
            ++lingering; /* called ivmExit: let it finish its exit (flush output) */
        }
    }
    if (lingering > 0) {
        struct itimerspec grace = {.it_value = {.tv_sec = IVMD_EXIT_GRACE_S}};
        timerfd_settime(*t->timer_fd, 0, &grace, NULL);
    }
}

void ivmd_teardown_terminate(ivmd_teardown_t *t, ivmd_job_t *job, const char *why)
{
    ivmd_job_data_t *jd = job->data;
    int i, killed = 0;

    if (job->ending) {
        return;
    }
    ivmd_remote_job_ending(t->env->remote, job);
    for (i = 0; i < t->nlisteners; ++i) {
        t->listeners[i].fn(t->listeners[i].ctx, job);
    }
    ivmd_job_end(t->env->reg, job);
    ivmd_pool_job_end(t->pool, job);
    ivmd_teardown_end_pes(t, job, &killed);
    if (!jd->proxy) {
        ivmd_pe_end(t->env->reg, job->pes[0], 0);
    }
    if (jd->out_fd >= 0) {
        close(jd->out_fd);
        jd->out_fd = -1;
    }
    if (jd->err_fd >= 0) {
        close(jd->err_fd);
        jd->err_fd = -1;
    }
    ivm_info("job %u ended (%s); %d PE%s terminated", job->id, why, killed,
             killed == 1 ? "" : "s");
}
