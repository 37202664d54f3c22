/* One handler per request type, dispatched through a table indexed by the
 * validated type. A handler fills the reply and returns its status, or
 * IVMD_DEFERRED when the reply comes later (WAIT). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "data/ucx.h"
#include "handlers.h"
#include "ivmd.h"
#include "list.h"
#include "nodes.h"
#include "log.h"
#include "status.h"
#include "topo.h"

/* A PE waits this long for its endpoint's answer before it counts the node as
 * lost (twice the silence after which a peer link counts as lost). */
#define IVMD_EP_TIMEOUT_MS 10000u

typedef ivmError_t (*ivmd_msg_fn_t)(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                    const void *req, ivmd_pe_reply_t *rep);

static void ivmd_detail(ivmd_pe_reply_t *rep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ivmd_detail(ivmd_pe_reply_t *rep, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rep->r.detail, sizeof(rep->r.detail), fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- wiring */

/* GPU coherence as the control plane sees it (ctl/ctl.h): ctx is the daemon. */
static uint32_t ivmd_gpu_op_count(const void *ctx)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_count(&d->gpu);
}

static int ivmd_gpu_op_alive(const void *ctx)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_alive(&d->gpu);
}

static const char *ivmd_gpu_op_backend_name(const void *ctx)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_backend_name(&d->gpu);
}

static int ivmd_gpu_op_share(const void *ctx, int dev)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_share(&d->gpu, dev);
}

static int ivmd_gpu_op_env(const void *ctx, int dev, char (*env)[160], int max)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_env(&d->gpu, dev, env, max);
}

static int ivmd_gpu_op_env_overrides(const void *ctx, int dev, const char *var)
{
    const ivmd_t *d = ctx;

    return ivmd_gpu_env_overrides(&d->gpu, dev, var);
}

static int ivmd_gpu_op_reaped(void *ctx, pid_t pid, int wstatus)
{
    ivmd_t *d = ctx;

    return ivmd_gpu_reaped(&d->gpu, pid, wstatus);
}

static const ivmd_ctl_gpu_ops_t ivmd_ctl_gpu_ops = {
    .count         = ivmd_gpu_op_count,
    .alive         = ivmd_gpu_op_alive,
    .backend_name  = ivmd_gpu_op_backend_name,
    .share         = ivmd_gpu_op_share,
    .env           = ivmd_gpu_op_env,
    .env_overrides = ivmd_gpu_op_env_overrides,
    .reaped        = ivmd_gpu_op_reaped,
};

/* A job ends: its device copies go (GPU coherence's job-end listener). */
static void ivmd_gpu_on_job_end(void *ctx, ivmd_job_t *job)
{
    ivmd_t *d = ctx;

    ivmd_gpu_job_end(&d->gpu, job);
}

/* The control plane's up-calls (ctl/ctl.h). */
static void ivmd_ctl_job_collect(ivmd_t *d, ivmd_job_t *job)
{
    ivmd_teardown_collect(&d->teardown, job);
}

static int ivmd_ctl_other_reaped(ivmd_t *d, pid_t pid, int wstatus)
{
    return ivmd_pool_reaped(&d->pool, pid, wstatus);
}

void ivmd_handlers_init(ivmd_t *d)
{
    d->ctl = (ivmd_ctl_env_t){
        .d = d, .remote = &d->remote, .loop = &d->loop, .reg = &d->reg, .node = d->cfg.node,
        .socket_path = d->socket_path, .devnull = &d->devnull,
        .own_affinity = &d->own_affinity, .gpu = &ivmd_ctl_gpu_ops, .gpu_ctx = d,
        .job_collect = ivmd_ctl_job_collect, .other_reaped = ivmd_ctl_other_reaped,
    };
    ivmd_output_init(&d->output, &d->remote, &d->loop, &d->reg, d->cfg.node);
    ivmd_devcg_init(&d->devcg, d->cfg.node, d->devs, d->ndevs, &d->reg);
    ivmd_spawn_init(&d->spawn, &d->ctl, &d->output, &d->devcg);
    ivmd_pool_init(&d->pool, &d->ctl, &d->spawn, &d->output);
    ivmd_teardown_init(&d->teardown, &d->ctl, &d->pool, &d->devcg, &d->timer_fd);
    ivmd_teardown_on_job_end(&d->teardown, ivmd_gpu_on_job_end, d);
}

void ivmd_job_grace_expired(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_teardown_grace_expired(&d->teardown);
}

void ivmd_handle_gpus_lost(ivmd_t *d)
{
    ivmd_pool_gpus_lost(&d->pool);
}

/* ---------------------------------------------------------------- jobs */

static void ivmd_on_wait_done(void *ctx, void *owner, uint32_t seq, uint16_t type,
                              ivmError_t status, const char *why)
{
    ivmd_t *d = ctx;
    ivm_msg_status_t rep = {.status = status};

    ivmd_conn_reply(d, owner, type, seq, &rep, sizeof(rep), status != IVM_SUCCESS ? why : NULL,
                    NULL, 0);
}

static void ivmd_on_obj_release(void *ctx, ivmd_obj_t *obj)
{
    ivmd_t *d = ctx;

    if (obj->fd >= 0) {
        ivmd_data_copy_gone(&d->data, obj);
        close(obj->fd);
        obj->fd = -1;
    }
}

/* pe's own signals on the board (ivmd_board_counts): the queued WAITs take
 * what is there, oldest first; then the board learns whether any still wait. */
static void ivmd_board_serve(ivmd_t *d, ivmd_pe_t *pe)
{
    while (pe->waiters != NULL && ivmd_board_sig_take(pe->job, pe)) {
        ivmd_pe_signal(&d->reg, pe);
    }
    ivmd_board_sig_waiters(pe->job, pe);
}

static void ivmd_on_pe_ended(void *ctx, ivmd_pe_t *pe, int failed)
{
    ivmd_t *d = ctx;

    if (ivmd_board_counts(pe->job, pe)) {
        ivmd_board_serve(d, pe); /* signals posted before the end come first */
    }
    ivmd_board_pe_ended(pe->job, pe, failed);
    ivmd_gpu_pe_ended(&d->gpu, pe);
    ivmd_remote_pe_ended(&d->remote, pe, failed);
}

const ivmd_job_ops_t ivmd_job_ops = {
    .wait_done   = ivmd_on_wait_done,
    .obj_release = ivmd_on_obj_release,
    .pe_ended    = ivmd_on_pe_ended,
};

void ivmd_handle_disconnect(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_job_t *job = c->job;
    ivmd_pe_t *pe   = c->pe;

    ivmd_waiter_cancel(&d->reg, c);
    if (c->parked != NULL) {
        ivmd_pool_disconnect(&d->pool, c);
    }
    if (job == NULL) {
        return;
    }
    c->job = NULL;
    c->pe  = NULL;
    --((ivmd_job_data_t *)job->data)->nconns;
    if (pe != NULL && (pe->state == IVMD_PE_RUNNING || pe->state == IVMD_PE_SPAWNED)) {
        if (pe->id == 0) {
            ivmd_teardown_terminate(&d->teardown, job, "the root PE died");
        } else {
            ivm_warn("job %u: pe %d disconnected without ivmExit: it failed", job->id,
                     pe->id);
            ivmd_spawn_kill(pe);
            ivmd_pe_end(&d->reg, pe, 1);
        }
    }
    ivmd_teardown_collect(&d->teardown, job);
}

/* ---------------------------------------------------------------- ENTER */

/* The CPU device table of a new job: its root's IVM_CPU_DEVICES (into devs),
 * or the daemon's; *table_p, *ndevs_p. */
static ivmError_t ivmd_enter_root_devs(ivmd_t *d, const ivm_msg_enter_req_t *req,
                                       ivm_cpu_device_t *devs,
                                       const ivm_cpu_device_t **table_p, int *ndevs_p,
                                       ivmd_pe_reply_t *rep)
{
    ivmd_reply_t why;
    ivmError_t status;

    *table_p = d->devs;
    *ndevs_p = d->ndevs;
    if (req->cpu_devices[0] == '\0') {
        return IVM_SUCCESS;
    }
    ivmd_reply_init(&why);
    status = ivm_topo_devspec_parse(req->cpu_devices, (int)sysconf(_SC_NPROCESSORS_CONF), devs,
                                    IVM_DEVSPEC_MAX_DEVICES, ndevs_p, why.detail,
                                    sizeof(why.detail));
    if (status != IVM_SUCCESS) {
        ivmd_detail(rep, "IVM_CPU_DEVICES: %s", why.detail);
        return status;
    }
    if (ivm_devspec_has_shares(devs, *ndevs_p)) {
        status = ivmd_devcg_require(&d->devcg, &why);
        if (status != IVM_SUCCESS) {
            ivmd_detail(rep, "IVM_CPU_DEVICES '%s' has shares of cores, which %s cannot "
                        "enforce: %s", req->cpu_devices, d->cfg.node, why.detail);
            return status;
        }
    }
    *table_p = devs;
    return IVM_SUCCESS;
}

/* The job data of a new job from its root's ENTER (the streams not yet). */
static ivmError_t ivmd_enter_root_data(const ivmd_conn_t *c, const ivm_msg_enter_req_t *req,
                                       ivmd_job_data_t **jd_p, ivmd_pe_reply_t *rep)
{
    ivmd_job_data_t *jd;
    ivmError_t status;

    if (c->nfds != 2) {
        ivmd_detail(rep, "ENTER of a root PE must pass its stdout and stderr");
        return IVM_ERROR_PROTOCOL;
    }
    jd = calloc(1, sizeof(*jd));
    if (jd == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    jd->out_fd = jd->err_fd = -1;
    status = ivmd_job_data_unpack(jd, (const char *)(req + 1), req->blob_len, req->argc,
                                  req->envc);
    if (status != IVM_SUCCESS) {
        ivmd_detail(rep, "ENTER: malformed executable, argument or environment strings");
        goto err_free;
    }
    jd->tag_output = (req->flags & IVM_ENTER_TAG_OUTPUT) != 0;
    jd->bind       = IVM_BIND_GET(req->flags);
    jd->root_pid   = c->peer_pid;
    jd->nconns     = 1;
    jd->pe_pool    = req->pe_pool;
    *jd_p          = jd;
    return IVM_SUCCESS;

err_free:
    ivmd_job_data_free(jd);
    return status;
}

/* The ENTER reply of pe of job. */
static void ivmd_enter_reply(ivmd_t *d, const ivmd_job_t *job, const ivmd_pe_t *pe,
                             ivmd_pe_reply_t *rep)
{
    rep->body.enter.job_id  = job->id;
    rep->body.enter.pe_id   = pe->id;
    rep->body.enter.devtype = pe->devtype;
    rep->body.enter.ncores  = IVM_DEV_IS_GPU(pe->devtype)
                                  ? 0 : (uint32_t)job->devs[pe->devtype].ncores;
    ivm_proto_strset(rep->body.enter.node, sizeof(rep->body.enter.node), d->cfg.node);
}

static ivmError_t ivmd_handle_enter_root(ivmd_t *d, ivmd_conn_t *c,
                                         const ivm_msg_enter_req_t *req, ivmd_pe_reply_t *rep)
{
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    const ivm_cpu_device_t *table;
    ivmd_job_data_t *jd = NULL;
    ivmd_job_t *job;
    ivmError_t status;
    int ndevs;

    if (req->pe_pool > IVM_PE_POOL_MAX) {
        ivmd_detail(rep, "IVM_PE_POOL %u is above %d", req->pe_pool, IVM_PE_POOL_MAX);
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivmd_enter_root_devs(d, req, devs, &table, &ndevs, rep);
    if (status == IVM_SUCCESS) {
        status = ivmd_enter_root_data(c, req, &jd, rep);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivmd_job_create(&d->reg, table, ndevs, &job);
    if (status != IVM_SUCCESS) {
        goto err_free;
    }
    jd->out_fd   = c->fds[0];
    jd->err_fd   = c->fds[1];
    c->nfds      = 0; /* the job owns them now */
    jd->own_devs = table != d->devs;
    job->data    = jd;
    c->job       = job;
    c->pe        = job->pes[0];
    ivmd_pe_enter(c->pe, c);
    ivm_info("job %u: root PE pid %d (%s), %d CPU device%s", job->id, (int)c->peer_pid,
             jd->exe, ndevs, ndevs == 1 ? "" : "s");
    ivmd_enter_reply(d, job, c->pe, rep);
    return IVM_SUCCESS;

err_free:
    ivmd_job_data_free(jd);
    return status;
}

/* The PE an ENTER names, if it may enter now with this token. */
static ivmError_t ivmd_enter_find(ivmd_t *d, const ivmd_conn_t *c,
                                  const ivm_msg_enter_req_t *req, ivmd_pe_t **pe_p,
                                  ivmd_pe_reply_t *rep)
{
    ivmd_job_t *job = ivmd_job_find(&d->reg, req->job_id);
    ivmd_pe_t *pe   = (job != NULL) ? ivmd_pe_find(job, req->pe_id) : NULL;

    if (pe == NULL || pe->id == 0 || (pe->pid == 0 && !pe->forked) ||
        pe->token == 0 || !ivm_crypto_equal(&pe->token, &req->token, sizeof(req->token)) ||
        (pe->forked && pe->pid != 0 && pe->pid != c->peer_pid)) {
        ivmd_detail(rep, "no PE %d awaits ivmEnter in job %u with this token", req->pe_id,
                    req->job_id);
        ivm_warn_limited("pid %d: ENTER as job %u pe %d refused (unknown PE or bad token)",
                         (int)c->peer_pid, req->job_id, req->pe_id);
        return IVM_ERROR_PERMISSION;
    }
    if (pe->state != IVMD_PE_SPAWNED || job->ending) {
        if (pe->forked && pe->pid == 0 && pe->state == IVMD_PE_FAILED) {
            /* Killed (or its job ended) before its parent forked it. */
            kill(c->peer_pid, SIGKILL);
        }
        ivmd_detail(rep, "pe %d of job %u cannot enter (already entered or ended)",
                    pe->id, job->id);
        return IVM_ERROR_PERMISSION;
    }
    *pe_p = pe;
    return IVM_SUCCESS;
}

/* BOARD, and a parked process's ENTER with IVM_ENTER_BOARD: job's signal
 * board on this node (made if it was not) as the reply's fd. */
static ivmError_t ivmd_board_reply(ivmd_t *d, ivmd_job_t *job, ivmd_pe_reply_t *rep)
{
    ivmError_t status = ivmd_board_open(job, &rep->fd);

    if (status != IVM_SUCCESS) {
        rep->fd = -1;
        ivmd_detail(rep, "no signal board for job %u on %s", job->id, d->cfg.node);
    }
    return status;
}

static ivmError_t ivmd_handle_enter(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                    const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_enter_req_t *req = payload;
    ivmd_job_data_t *jd;
    ivmError_t status;
    ivmd_pe_t *pe;

    if (c->pe != NULL) {
        ivmd_detail(rep, "this connection already entered as pe %d", c->pe->id);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (c->parked != NULL && !(req->flags & IVM_ENTER_POOL)) {
        ivmd_detail(rep, "this connection is parked in the warm pool");
        return IVM_ERROR_INVALID_VALUE;
    }
    if (req->flags & IVM_ENTER_ROOT) {
        return ivmd_handle_enter_root(d, c, req, rep);
    }
    if ((req->flags & IVM_ENTER_POOL) && (req->flags & IVM_ENTER_BOARD)) {
        ivmd_job_t *job = ivmd_pool_caller_job(&d->pool, c, req, &rep->r);
        return job != NULL ? ivmd_board_reply(d, job, rep) : rep->r.status;
    }
    if (req->flags & IVM_ENTER_POOL) {
        return ivmd_pool_enter(&d->pool, c, hdr, req, &rep->r);
    }
    status = ivmd_enter_find(d, c, req, &pe, rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (pe->forked && pe->pid == 0) {
        /* Forked by a parked process (ctl/pool.c): not our child, watched. */
        pe->pid = c->peer_pid;
        ivmd_spawn_watch(&d->spawn, pe);
    }
    jd = pe->job->data;
    if (d->cfg.max_conns_per_job > 0 && jd->nconns >= (uint32_t)d->cfg.max_conns_per_job) {
        ivmd_detail(rep, "job %u has %u connections to node %s, the limit "
                    "(--max-conns-per-job)", pe->job->id, (unsigned)jd->nconns, d->cfg.node);
        return IVM_ERROR_LIMIT;
    }
    ivmd_spawn_bind(&d->spawn, pe->job, pe, c->peer_pid);
    ivmd_pe_enter(pe, c);
    c->job = pe->job;
    c->pe  = pe;
    ++jd->nconns;
    ivmd_remote_pe_entered(&d->remote, pe);
    ivmd_enter_reply(d, pe->job, pe, rep);
    ivm_debug("job %u: pe %d entered (pid %d)", pe->job->id, pe->id, (int)c->peer_pid);
    return IVM_SUCCESS;
}

/* ---------------------------------------------------------------- PEs */

static ivmError_t ivmd_handle_exit(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    ivmd_pe_t *pe   = c->pe;
    ivmd_job_t *job = c->job;

    ivm_debug("job %u: pe %d called ivmExit", job->id, pe->id);
    if (pe->id == 0) {
        ivmd_teardown_terminate(&d->teardown, job, "the root PE called ivmExit");
    } else {
        ivmd_pe_end(&d->reg, pe, 0);
    }
    return IVM_SUCCESS;
}

/* The node a request of c's PE names: -1 for this one (our name), else its
 * index in the cluster table; "" is the caller's own node (a PE of another
 * node, whose request its daemon forwarded here, means its node, not ours). */
static ivmError_t ivmd_check_host(ivmd_t *d, const ivmd_conn_t *c, const char *host, int *node_p,
                                  ivmd_pe_reply_t *rep)
{
    uint32_t i;

    *node_p = -1;
    if (host[0] == '\0') {
        *node_p = c->pe != NULL ? c->pe->node : -1;
        return IVM_SUCCESS;
    }
    if (strcmp(host, d->cfg.node) == 0) {
        return IVM_SUCCESS;
    }
    for (i = 0; i < d->link.npeers; ++i) {
        if (!d->link.peers[i].self && strcmp(d->link.peers[i].node, host) == 0) {
            if (!d->link.peers[i].up) {
                ivmd_detail(rep, "node %s is unreachable", host);
                return IVM_ERROR_DAEMON_LOST;
            }
            *node_p = (int)i;
            return IVM_SUCCESS;
        }
    }
    ivmd_detail(rep, "unknown host '%s' (this cluster has %u node%s)", host,
                d->link.npeers ? d->link.npeers : 1, d->link.npeers > 1 ? "s" : "");
    return IVM_ERROR_NOT_FOUND;
}

/* Resolve and check a device of node `node` (-1: this one). */
static ivmError_t ivmd_check_dev(ivmd_t *d, ivmd_conn_t *c, int node, int devtype,
                                 int *resolved_p, uint32_t *ncores_p, ivmd_pe_reply_t *rep)
{
    ivmError_t status;

    if (node >= 0) {
        const ivmd_peer_t *p = &d->link.peers[node];
        if (devtype >= 0 && !IVM_DEV_IS_GPU(devtype) && devtype < p->ndevs) {
            *resolved_p = devtype;
            *ncores_p   = p->ncores[devtype];
            return IVM_SUCCESS;
        }
        if (IVM_DEV_IS_GPU(devtype) && IVM_DEV_INDEX(devtype) < p->ngpus) {
            *resolved_p = devtype;
            *ncores_p   = 0;
            return IVM_SUCCESS;
        }
        ivmd_detail(rep, "%s has no %s device %d (it has %d)", p->node,
                    IVM_DEV_IS_GPU(devtype) ? "GPU" : "CPU", IVM_DEV_INDEX(devtype),
                    IVM_DEV_IS_GPU(devtype) ? p->ngpus : p->ndevs);
        return IVM_ERROR_NOT_FOUND;
    }
    if (IVM_DEV_IS_GPU(devtype) ||
        (devtype == IVM_THIS_DEV && IVM_DEV_IS_GPU(c->pe->devtype))) {
        int gpu = IVM_DEV_INDEX(devtype == IVM_THIS_DEV ? c->pe->devtype : devtype);
        if ((uint32_t)gpu >= ivmd_gpu_count(&d->gpu)) {
            ivmd_detail(rep, "%s has no GPU %d (it has %u)", d->cfg.node, gpu,
                        ivmd_gpu_count(&d->gpu));
            return IVM_ERROR_NOT_FOUND;
        }
        if (!ivmd_gpu_alive(&d->gpu)) {
            ivmd_detail(rep, "the GPU daemon (ivm-gpud) of %s is gone", d->cfg.node);
            return IVM_ERROR_DAEMON_LOST;
        }
        *resolved_p = IVM_GPU_N(gpu);
        *ncores_p   = 0;
        return IVM_SUCCESS;
    }
    status = ivmd_job_resolve_dev(c->job, c->pe, devtype, resolved_p);
    if (status != IVM_SUCCESS) {
        if (IVM_DEV_IS_GPU(devtype)) {
            ivmd_detail(rep, "%s has no GPU %d (no GPU daemon serves this node)",
                        d->cfg.node, IVM_DEV_INDEX(devtype));
        } else if (devtype < 0 && devtype != IVM_THIS_DEV) {
            ivmd_detail(rep, "%d is not a device type", devtype);
        } else {
            ivmd_detail(rep, "%s has no CPU device %d (it has %d)", d->cfg.node, devtype,
                        c->job->ndevs);
        }
        return status;
    }
    *ncores_p = IVM_DEV_IS_GPU(*resolved_p) ? 0 : (uint32_t)c->job->devs[*resolved_p].ncores;
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_create_dev(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                         const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_create_dev_req_t *req = payload;
    ivmError_t status;
    uint32_t ncores = 0;
    int devtype, node;

    if (!ivm_proto_strok(req->host, sizeof(req->host))) {
        ivmd_detail(rep, "host name not terminated");
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivmd_check_host(d, c, req->host, &node, rep);
    if (status == IVM_SUCCESS) {
        status = ivmd_check_dev(d, c, node, req->devtype, &devtype, &ncores, rep);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    rep->body.create_dev.devtype = devtype;
    rep->body.create_dev.ncores  = ncores;
    ivm_proto_strset(rep->body.create_dev.host, sizeof(rep->body.create_dev.host),
                     node < 0 ? d->cfg.node : d->link.peers[node].node);
    return IVM_SUCCESS;
}

/* n more PEs of job on node (-1: this one): the daemon's limits, then the
 * node's max_slots. */
static ivmError_t ivmd_create_admit(ivmd_t *d, const ivmd_job_t *job, int node, int n,
                                    ivmd_pe_reply_t *rep)
{
    ivmError_t status = ivmd_limits_pes_admit(d, job, n, rep->r.detail, sizeof(rep->r.detail));

    if (status != IVM_SUCCESS) {
        return status;
    }
    return ivmd_nodes_admit(d, job, node, n, rep->r.detail, sizeof(rep->r.detail));
}

/* A local burst failed at one PE: the PEs it started before go too (killed
 * and ended, their ids used), so a failed ivmCreatePEs leaves no process
 * behind and every slot IVM_PE_NULL. */
static void ivmd_create_undo(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t **started, int n,
                             ivm_msg_create_pes_rep_t *out, int nslots)
{
    int i;

    for (i = 0; i < n; ++i) {
        if (started[i]->state == IVMD_PE_SPAWNED || started[i]->state == IVMD_PE_RUNNING) {
            ivmd_spawn_kill(started[i]);
            ivmd_pe_end(&d->reg, started[i], 1);
        }
    }
    for (i = 0; i < nslots; ++i) {
        out->pes[i] = IVM_PE_NULL;
    }
    if (n > 0) {
        ivm_warn("job %u: %d PE%s of the failed burst killed", job->id, n, n == 1 ? "" : "s");
    }
}

/* One CREATE_PES: every PE reserved and started (from the warm pool where
 * it has a process, else forked and exec'd; none waits for another) or, on
 * another node, listed in remote[] for one SPAWN; the reply is one message
 * for the whole burst. */
static ivmError_t ivmd_create_burst(ivmd_t *d, ivmd_conn_t *c, int node, int devtype, int n,
                                    ivm_msg_create_pes_rep_t *out, ivmd_pe_t **started,
                                    int *nstarted_p, ivmd_pe_reply_t *rep)
{
    ivmError_t status;
    ivmd_pe_t *pe;
    int i;

    for (i = 0; i < n; ++i) {
        status = ivmd_pe_reserve(&d->reg, c->job, devtype, &pe);
        if (status != IVM_SUCCESS) {
            ivmd_detail(rep, "job %u is ending", c->job->id);
            return status;
        }
        if (pe == NULL) {
            break; /* beyond the max PE id: this and later slots stay NULL */
        }
        if (node >= 0) {
            pe->node = node;
        } else if (!ivmd_pool_take(&d->pool, c->job, pe, n - 1 - i)) {
            status = ivmd_spawn_pe(&d->spawn, c->job, pe, &rep->r);
            if (status != IVM_SUCCESS) {
                ivmd_pe_unreserve(&d->reg, c->job, pe);
                return status;
            }
        }
        if (node < 0) {
            ivmd_board_pe_added(c->job, pe);
        }
        started[(*nstarted_p)++] = pe;
        out->pes[i] = pe->id;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_create_pes(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                         const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_create_pes_req_t *req = payload;
    ivm_msg_create_pes_rep_t *out = &rep->body.create_pes;
    ivmd_pe_t *started[IVM_CREATE_PES_MAX];
    ivmError_t status;
    uint32_t ncores;
    int devtype, node, nstarted = 0, i;

    if (req->n < 0 || req->n > IVM_CREATE_PES_MAX ||
        !ivm_proto_strok(req->host, sizeof(req->host))) {
        ivmd_detail(rep, "PE count %d outside 0..%d", req->n, IVM_CREATE_PES_MAX);
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivmd_check_host(d, c, req->host, &node, rep);
    if (status == IVM_SUCCESS) {
        status = ivmd_check_dev(d, c, node, req->devtype, &devtype, &ncores, rep);
    }
    if (status == IVM_SUCCESS) {
        status = ivmd_create_admit(d, c->job, node, req->n, rep);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    out->n = req->n;
    for (i = 0; i < req->n; ++i) {
        out->pes[i] = IVM_PE_NULL;
    }
    rep->len = (uint32_t)(offsetof(ivm_msg_create_pes_rep_t, pes) +
                          (size_t)req->n * sizeof(out->pes[0]));
    status = ivmd_create_burst(d, c, node, devtype, req->n, out, started, &nstarted, rep);
    if (status != IVM_SUCCESS && node < 0) {
        ivmd_create_undo(d, c->job, started, nstarted, out, req->n);
        return status;
    }
    if (node < 0) {
        /* Before the ids leave this daemon: every peer learns their place. */
        ivmd_remote_placed(&d->remote, c->job, started, nstarted);
    }
    if (node >= 0 && (status != IVM_SUCCESS || nstarted > 0)) {
        if (status == IVM_SUCCESS) {
            out->status = IVM_SUCCESS;
            status = ivmd_remote_spawn(&d->remote, c, hdr, node, devtype, started, nstarted,
                                       out, rep->r.detail, sizeof(rep->r.detail));
        }
        if (status != IVMD_DEFERRED) {
            for (i = 0; i < nstarted; ++i) {
                started[i]->reaped = 1;
                ivmd_pe_end(&d->reg, started[i], 1);
            }
            for (i = 0; i < req->n; ++i) {
                out->pes[i] = IVM_PE_NULL;
            }
        }
    }
    return status;
}

static ivmError_t ivmd_handle_kill_pes(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_kill_pes_req_t *req = payload;
    const int32_t *ids = (const int32_t *)(req + 1);
    ivmd_job_t *job = c->job;
    int i, kill_root = 0;

    for (i = 0; i < req->n; ++i) {
        if (ids[i] == IVM_PE_NULL) {
            continue;
        }
        if (ivmd_pe_find(job, ids[i]) == NULL) {
            ivmd_detail(rep, "job %u has no pe %d", job->id, ids[i]);
            return IVM_ERROR_NOT_FOUND;
        }
        if (ids[i] == c->pe->id) {
            ivmd_detail(rep, "a PE cannot kill itself with ivmKillPEs (use ivmExit)");
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    for (i = 0; i < req->n; ++i) {
        ivmd_pe_t *pe = (ids[i] == IVM_PE_NULL) ? NULL : ivmd_pe_find(job, ids[i]);
        if (pe == NULL || (pe->state != IVMD_PE_SPAWNED && pe->state != IVMD_PE_RUNNING)) {
            continue;
        }
        if (pe->id == 0) {
            kill_root = 1;
            continue;
        }
        ivmd_spawn_kill(pe);
        ivm_info("job %u: pe %d killed by pe %d", job->id, pe->id, c->pe->id);
        if (pe->node >= 0) {
            ivmd_remote_kill(&d->remote, pe);
        }
        ivmd_pe_end(&d->reg, pe, 1);
    }
    if (kill_root) {
        ivmd_job_data_t *jd = job->data;
        if (jd->root_pid > 0) {
            kill(jd->root_pid, SIGKILL);
        }
        ivmd_teardown_terminate(&d->teardown, job, "the root PE was killed by ivmKillPEs");
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_set_max_id(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                         const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_pe_req_t *req = payload;

    if (ivmd_job_set_max_id(c->job, req->pe) != IVM_SUCCESS) {
        ivmd_detail(rep, "max PE id %d is negative", req->pe);
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

/* The detail of a wait or signal on PE pe that was answered at once. */
static ivmError_t ivmd_wait_detail(ivmd_pe_reply_t *rep, const ivmd_job_t *job, int pe,
                                   ivmError_t status)
{
    if (status == IVM_ERROR_NOT_FOUND) {
        ivmd_detail(rep, "job %u has no pe %d", job->id, pe);
    } else if (status == IVM_ERROR_PE_FAILED) {
        ivmd_detail(rep, "pe %d died without ivmExit", pe);
    }
    return status;
}

static ivmError_t ivmd_handle_wait(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_pe_req_t *req = payload;
    ivmd_pe_t *pe = ivmd_pe_find(c->job, req->pe);
    int counts = pe != NULL && ivmd_board_counts(c->job, pe), queued;
    ivmError_t status;

    if (counts && ivmd_board_sig_take(c->job, pe)) {
        return IVM_SUCCESS;
    }
    status = ivmd_pe_wait(&d->reg, c->job, req->pe, c, hdr->seq, &queued);
    if (queued && counts) {
        /* Its signals are posted on the board: say that a WAIT is queued,
         * then look again (a post that came meanwhile saw no WAIT here). */
        ivmd_board_serve(d, pe);
    }
    return queued ? IVMD_DEFERRED : ivmd_wait_detail(rep, c->job, req->pe, status);
}

static ivmError_t ivmd_handle_signal(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                     const void *payload, ivmd_pe_reply_t *rep)
{
    ++d->svc.signals;
    if (ivmd_board_counts(c->job, c->pe)) {
        ivmd_board_sig_post(c->job, c->pe);
        ivmd_board_serve(d, c->pe);
        return IVM_SUCCESS;
    }
    ivmd_pe_signal(&d->reg, c->pe);
    return IVM_SUCCESS;
}

/* c's PE posted a signal on the board and saw WAITs queued here. */
static ivmError_t ivmd_handle_signal_poke(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                          const void *payload, ivmd_pe_reply_t *rep)
{
    if (ivmd_board_counts(c->job, c->pe)) {
        ivmd_board_serve(d, c->pe);
    }
    return IVM_SUCCESS;
}

/* PE `id` is not known here: a node daemon forwards the request (hdr,
 * payload) to the job's root, which sends it back with id's place
 * (IVMD_DEFERRED); else IVM_ERROR_NOT_FOUND. */
static ivmError_t ivmd_psync_unknown(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                     const void *payload, int id, ivmd_pe_reply_t *rep)
{
    if (ivmd_remote_is_proxy(c->job) && !d->svc.bounced) {
        ivmd_remote_forward(&d->remote, c, hdr, payload);
        return IVMD_DEFERRED;
    }
    return ivmd_wait_detail(rep, c->job, id, IVM_ERROR_NOT_FOUND);
}

/* Post c's PE's addressed signal to PE `to` (SIGNAL_TO, or a PUT_SIGNAL once
 * the master has the bytes) where their pair is kept: this
 * daemon's registry when `to` is here, else `to`'s daemon (SIGNAL, one
 * hop). At the root, a request a node daemon forwarded (a virtual
 * connection) because it did not know `to` is served here if `to` is here,
 * else sent back to that node with `to`'s place. */
static ivmError_t ivmd_signal_post(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, int to, ivmd_pe_reply_t *rep)
{
    int node, state = ivmd_psync_where(c->job, to, &node);

    if (state == IVMD_PLACE_UNKNOWN) {
        return ivmd_psync_unknown(d, c, hdr, payload, to, rep);
    }
    if (node >= 0 && c->kind == IVMD_CONN_REMOTE) {
        return ivmd_remote_bounce(&d->remote, c, hdr, payload, to);
    }
    if (node >= 0) {
        /* A PE that ended never waits again: its signals go nowhere. */
        if (state == IVMD_PLACE_RUNNING) {
            ivmd_remote_signal(&d->remote, c->job, c->pe->id, to, node);
        }
        return IVM_SUCCESS;
    }
    if (c->kind == IVMD_CONN_REMOTE) {
        ivmd_remote_teach(&d->remote, c, to); /* its next signals come as SIGNAL */
    }
    return ivmd_wait_detail(rep, c->job, to,
                            ivmd_psync_signal_to(&d->reg, c->job, c->pe->id, to));
}

static ivmError_t ivmd_handle_signal_to(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                        const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_pe_req_t *req = payload;

    return ivmd_signal_post(d, c, hdr, payload, req->pe, rep);
}

/* The pair (from, c's PE) is kept here, c's PE's daemon: a root daemon
 * sends a request of another node's PE back there (with `from`'s place). */
static ivmError_t ivmd_handle_wait_from(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                        const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_pe_req_t *req = payload;
    ivmError_t status;
    int queued, node;

    if (ivmd_psync_where(c->job, req->pe, &node) == IVMD_PLACE_UNKNOWN) {
        return ivmd_psync_unknown(d, c, hdr, payload, req->pe, rep);
    }
    if (c->kind == IVMD_CONN_REMOTE) {
        return ivmd_remote_bounce(&d->remote, c, hdr, payload, req->pe);
    }
    status = ivmd_psync_wait_from(&d->reg, c->job, c->pe, req->pe, c, hdr->seq, hdr->type,
                                  &queued);
    return queued ? IVMD_DEFERRED : ivmd_wait_detail(rep, c->job, req->pe, status);
}

static ivmError_t ivmd_handle_barrier(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                      const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_barrier_req_t *req = payload;
    const ivmd_pe_t *bad;
    ivmError_t status;
    int queued, bad_id;

    status = ivmd_psync_barrier(&d->reg, c->job, c->pe, (const int32_t *)(req + 1), req->n, c,
                                hdr->seq, hdr->type, &queued, &bad_id);
    if (queued) {
        return IVMD_DEFERRED;
    }
    bad = ivmd_pe_find(c->job, bad_id);
    if (status == IVM_ERROR_NOT_FOUND) {
        ivmd_detail(rep, "job %u has no pe %d", c->job->id, bad_id);
    } else if (status == IVM_ERROR_PE_FAILED) {
        ivmd_detail(rep, "pe %d of the barrier %s", bad_id,
                    bad != NULL && bad->state == IVMD_PE_EXITED ? "has called ivmExit"
                                                                 : "died without ivmExit");
    } else if (status == IVM_ERROR_INVALID_VALUE) {
        ivmd_detail(rep, "pe %d is not in its barrier's list", c->pe->id);
    }
    return status;
}

static ivmError_t ivmd_handle_node_devs(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                        const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_node_req_t *req = payload;

    return ivmd_nodes_describe(d, c->job, c->pe, req->node, &rep->body.node_devs,
                               rep->r.detail, sizeof(rep->r.detail));
}

static ivmError_t ivmd_handle_board(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                    const void *payload, ivmd_pe_reply_t *rep)
{
    return ivmd_board_reply(d, c->job, rep);
}

/* ENDPOINT: where the PE reaches node req->node's daemon for its own puts
 * (common/proto.h, EP_HELLO), and its job's endpoint key to seal them. */
static ivmError_t ivmd_handle_endpoint(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_endpoint_req_t *req = payload;
    ivm_msg_endpoint_rep_t *e = &rep->body.endpoint;
    const ivmd_link_t *l = &d->link;
    const ivmd_peer_t *p;

    if (!l->have_cluster || req->node == l->self_idx) {
        ivmd_detail(rep, "no endpoint to %s: %s", l->have_cluster ? "this node" : "another node",
                    l->have_cluster ? "its objects are here" : "the daemon is in no cluster");
        return IVM_ERROR_UNSUPPORTED;
    }
    if (req->node >= l->npeers) {
        ivmd_detail(rep, "no node %u in the cluster (%u nodes)", (unsigned)req->node,
                    (unsigned)l->npeers);
        return IVM_ERROR_NOT_FOUND;
    }
    p = &l->peers[req->node];
    if (!p->up) {
        ivmd_detail(rep, "the node holding the object's master (%s) is unreachable", p->node);
        return IVM_ERROR_DAEMON_LOST;
    }
    if (ivmd_link_ep_key(l, c->job->id, e->key) != IVM_SUCCESS) {
        ivmd_detail(rep, "no endpoint key");
        return IVM_ERROR_INTERNAL;
    }
    e->flags      = l->cfg.encrypt ? IVM_PEER_ENCRYPT : 0;
    e->self       = l->self_idx;
    e->timeout_ms = IVMD_EP_TIMEOUT_MS;
    e->port       = p->port;
    ivm_proto_strset(e->addr, sizeof(e->addr), p->addr);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_num_pes(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                      const void *payload, ivmd_pe_reply_t *rep)
{
    rep->body.value.value = c->job->alive;
    return IVM_SUCCESS;
}

/* ---------------------------------------------------------------- objects */

static ivmError_t ivmd_check_name(const char *name, ivmd_pe_reply_t *rep)
{
    if (!ivm_proto_strok(name, IVM_NAME_MAX + 1)) {
        ivmd_detail(rep, "object name longer than %d bytes", IVM_NAME_MAX);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (name[0] == '\0') {
        ivmd_detail(rep, "empty object name");
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_malloc(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                     const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_malloc_req_t *req = payload;
    ivmd_obj_t *obj;
    ivmError_t status;
    int fd;

    status = ivmd_check_name(req->name, rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (req->size == 0 || req->size > (uint64_t)INT64_MAX) {
        ivmd_detail(rep, "object size %llu is invalid", (unsigned long long)req->size);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (ivmd_obj_find_name(c->job, req->name) != NULL) {
        ivmd_detail(rep, "an object named '%s' already exists in job %u", req->name,
                    c->job->id);
        return IVM_ERROR_EXISTS;
    }
    status = ivmd_limits_obj_mem(d, c->job, req->name, req->size, 0,
                                 ivmd_numa_of_pe(c->job, c->pe), &fd, rep->r.detail,
                                 sizeof(rep->r.detail));
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivmd_obj_create(&d->reg, c->job, c->pe, req->name, req->size, fd, &obj);
    if (status != IVM_SUCCESS) {
        close(fd);
        return status;
    }
    ivmd_data_copy_made(&d->data, c->job->id, obj);
    if (ivmd_remote_is_proxy(c->job)) {
        /* The name is the job's: the root daemon must accept it first. */
        status = ivmd_data_register(&d->data, c, hdr, obj);
        if (status != IVMD_DEFERRED) {
            ivmd_obj_free_name(&d->reg, c->job, obj);
            ivmd_detail(rep, "the job's root daemon is unreachable");
        }
        return status;
    }
    if (IVM_DEV_IS_GPU(c->pe->devtype)) {
        /* The master is the node copy; the PE gets a device copy of it. */
        ivmd_gpu_map(&d->gpu, c, hdr->type, hdr->seq, obj, 0, obj->size);
        return IVMD_DEFERRED;
    }
    status = ivmd_obj_map(&d->reg, c->pe, obj);
    if (status != IVM_SUCCESS) {
        ivmd_obj_free_name(&d->reg, c->job, obj);
        return status;
    }
    rep->body.map.flags    = IVM_MAP_MASTER | d->data.map_flags;
    rep->body.map.obj_id   = obj->id;
    rep->body.map.obj_size = obj->size;
    rep->body.map.offset   = 0;
    rep->body.map.size     = obj->size;
    rep->fd                = obj->fd;
    ivm_debug("job %u: pe %d allocated '%s' (%llu bytes)", c->job->id, c->pe->id,
              req->name, (unsigned long long)req->size);
    return IVM_SUCCESS;
}

void ivmd_reply_map(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                    ivmd_obj_t *obj, uint64_t off, uint64_t size)
{
    ivm_msg_map_rep_t rep;

    if (c == NULL) {
        return;
    }
    if (c->pe != NULL && IVM_DEV_IS_GPU(c->pe->devtype)) {
        ivmd_gpu_map(&d->gpu, c, type, seq, obj, off, size);
        return;
    }
    memset(&rep, 0, sizeof(rep));
    if (c->pe == NULL || ivmd_obj_map(&d->reg, c->pe, obj) != IVM_SUCCESS) {
        rep.status = IVM_ERROR_NO_MEMORY;
        ivmd_conn_reply(d, c, type, seq, &rep, sizeof(rep), "out of memory", NULL, 0);
        return;
    }
    rep.flags    = (obj->master_node < 0 ? IVM_MAP_MASTER : 0) | d->data.map_flags;
    if (obj->master_node >= 0) {
        /* A mirror: the PE may put small ranges into the master itself. */
        rep.flags      |= IVM_MAP_DIRECT;
        rep.master_node = obj->master_node;
        rep.master_id   = obj->master_id;
    }
    rep.obj_id   = obj->id;
    rep.obj_size = obj->size;
    rep.offset   = off;
    rep.size     = size;
    if (ivmd_conn_reply(d, c, type, seq, &rep, sizeof(rep), NULL, &obj->fd, 1) !=
        IVM_SUCCESS) {
        /* The error reply went out: the mapping was never handed over. */
        ivmd_obj_unmap(&d->reg, c->pe, obj->id);
    }
}

static ivmError_t ivmd_handle_map(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                  const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_map_req_t *req = payload;
    uint64_t size = req->size;
    ivmd_obj_t *obj;
    ivmError_t status;
    ivmError_t r;

    status = ivmd_check_name(req->name, rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    obj = ivmd_obj_find_name(c->job, req->name);
    if (obj == NULL) {
        if (ivmd_remote_is_proxy(c->job)) {
            r = ivmd_data_lookup(&d->data, c, hdr, req);
            if (r != IVMD_DEFERRED) {
                ivmd_detail(rep, "the job's root daemon is unreachable");
            }
            return r;
        }
        ivmd_detail(rep, "no object named '%s' in job %u", req->name, c->job->id);
        return IVM_ERROR_NOT_FOUND;
    }
    if (req->offset >= obj->size) {
        ivmd_detail(rep, "offset %llu is outside object '%s' of %llu bytes",
                    (unsigned long long)req->offset, req->name,
                    (unsigned long long)obj->size);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (size == 0) {
        size = obj->size - req->offset;
    }
    if (size > obj->size - req->offset) {
        ivmd_detail(rep, "range [%llu, %llu+%llu) is outside object '%s' of %llu bytes",
                    (unsigned long long)req->offset, (unsigned long long)req->offset,
                    (unsigned long long)req->size, req->name,
                    (unsigned long long)obj->size);
        return IVM_ERROR_INVALID_VALUE;
    }
    r = ivmd_data_map(&d->data, c, hdr, req, obj);
    if (r == IVMD_LOCAL) {
        ivmd_reply_map(d, c, hdr->type, hdr->seq, obj, req->offset, size);
        return IVMD_DEFERRED;
    }
    if (r == IVM_ERROR_DAEMON_LOST) {
        ivmd_detail(rep, "the node holding the master of '%s' is unreachable", req->name);
    }
    return r;
}

/* The object of a SYNC (or PUT_SIGNAL's put), NULL unless it exists, the
 * operation is one and the range lies inside the object. */
static ivmd_obj_t *ivmd_sync_obj(const ivmd_conn_t *c, const ivm_msg_sync_req_t *req)
{
    ivmd_obj_t *obj = ivmd_obj_find_id(c->job, req->obj_id);

    if (obj == NULL || req->op < IVM_SYNC_PUT || req->op > IVM_SYNC_GET_GROUP ||
        req->offset > obj->size || req->size > obj->size - req->offset) {
        return NULL;
    }
    return obj;
}

static ivmError_t ivmd_handle_sync(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_sync_req_t *req = payload;
    ivmd_obj_t *obj = ivmd_sync_obj(c, req);
    ivmError_t r;

    if (obj == NULL) {
        ivmd_detail(rep, "no such object or range for a sync");
        return IVM_ERROR_INVALID_VALUE;
    }
    if (req->gpu_ref != 0 ||
        ((req->op == IVM_SYNC_PUT_GROUP || req->op == IVM_SYNC_GET_GROUP) &&
         ivmd_gpu_has_copies(&d->gpu, c->job->id, obj->id, req->offset, req->size))) {
        return ivmd_gpu_sync(&d->gpu, c, hdr, obj, req, rep->r.detail, sizeof(rep->r.detail));
    }
    r = ivmd_data_sync(&d->data, c, hdr, obj, req);
    if (r == IVM_ERROR_DAEMON_LOST) {
        ivmd_detail(rep, "the node holding the object's master is unreachable");
    }
    return r;
}

static ivmError_t ivmd_handle_unmap(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                    const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_obj_req_t *req = payload;

    if (ivmd_gpu_unref(&d->gpu, c->pe, req->gpu_ref, req->obj_id) != IVM_SUCCESS) {
        ivmd_detail(rep, "pe %d has no GPU mapping %llu of object %llu", c->pe->id,
                    (unsigned long long)req->gpu_ref, (unsigned long long)req->obj_id);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (ivmd_obj_unmap(&d->reg, c->pe, req->obj_id) != IVM_SUCCESS) {
        ivmd_detail(rep, "pe %d has no mapping of object %llu", c->pe->id,
                    (unsigned long long)req->obj_id);
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_free(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_obj_req_t *req = payload;
    ivmd_obj_t *obj = ivmd_obj_find_id(c->job, req->obj_id);
    ivmError_t status;

    /* A GPU mapping's reference goes only if the free is allowed. */
    if (req->gpu_ref != 0 && obj != NULL && obj->name != NULL && obj->owner_pe != c->pe->id) {
        ivmd_detail(rep, "only the PE that allocated an object may free it");
        return IVM_ERROR_PERMISSION;
    }
    if (req->gpu_ref != 0 && (obj == NULL || obj->name == NULL)) {
        ivmd_detail(rep, "object %llu is not a live object of job %u",
                    (unsigned long long)req->obj_id, c->job->id);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (ivmd_gpu_unref(&d->gpu, c->pe, req->gpu_ref, req->obj_id) != IVM_SUCCESS) {
        ivmd_detail(rep, "pe %d has no GPU mapping %llu of object %llu", c->pe->id,
                    (unsigned long long)req->gpu_ref, (unsigned long long)req->obj_id);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (obj != NULL && obj->name != NULL && obj->owner_pe == c->pe->id &&
        ivmd_remote_is_proxy(c->job) && obj->master_node < 0) {
        ivmd_data_unregister(&d->data, c->job, obj);
    }
    status = ivmd_obj_free(&d->reg, c->pe, req->obj_id);

    if (status == IVM_ERROR_PERMISSION) {
        ivmd_detail(rep, "only the PE that allocated an object may free it");
    } else if (status != IVM_SUCCESS) {
        ivmd_detail(rep, "object %llu is not a live object of job %u",
                    (unsigned long long)req->obj_id, c->job->id);
    }
    return status;
}

/* ---------------------------------------------------------------- daemon */

static ivmError_t ivmd_handle_info(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    ivm_msg_info_rep_t *info = &rep->body.info;
    ivmd_job_t *job;

    info->pid     = (uint32_t)getpid();
    info->jobs    = d->reg.njobs;
    info->objects = d->reg.nobjs;
    info->conns   = d->conns.nclients;
    info->shm_bytes = d->reg.obj_bytes;
    info->pes     = 0;
    for (job = d->reg.jobs; job != NULL; job = job->next) {
        info->pes += (uint32_t)job->alive;
    }
    ivm_proto_strset(info->node, sizeof(info->node), d->cfg.node);
    info->peers    = d->link.npeers > 0 ? d->link.npeers - 1 : 0;
    info->peers_up = ivmd_peer_count_up(d);
    info->tx_bytes = d->data.tx_bytes;
    info->rx_bytes = d->data.rx_bytes;
    info->parked   = ivmd_pool_count(&d->pool);
    info->pooled   = d->pool.pooled;
    info->poll_us  = (uint32_t)d->cfg.poll_us;
    info->psync_relayed = d->remote.relayed;
    info->places_told   = d->remote.told;
    info->signals_carried = d->svc.signals;
    info->polled   = d->loop.polled;
    info->buf_bytes  = d->data.buf_bytes;
    info->rdma_bytes = d->data.rdma_bytes;
    info->ep_puts    = d->data.ep_puts;
    info->ep_gets    = d->data.ep_gets;
    ivm_proto_strset(info->transport, sizeof(info->transport),
                     ivmd_data_transport(&d->data)->name);
    ivm_proto_strset(info->ucx_tls, sizeof(info->ucx_tls), ivmd_ucx_tls(&d->data));
    _Static_assert(sizeof(info->touch_ns) == sizeof(d->data.touch_ns), "the probe's figures");
    memcpy(info->touch_ns, d->data.touch_ns, sizeof(info->touch_ns));
    info->map_flags   = d->data.map_flags;
    info->huge_pages  = (uint32_t)d->data.huge;
    info->huge_bytes  = d->data.huge_bytes;
    info->huge_failed = d->data.huge_failed;
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_obj_info(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_obj_info_req_t *req = payload;
    ivm_msg_obj_info_rep_t *out = &rep->body.obj_info;
    ivmd_job_t *job = ivmd_job_find(&d->reg, req->job);
    ivmd_obj_t *obj;
    uint32_t i;

    if (!ivm_proto_strok(req->name, sizeof(req->name))) {
        ivmd_detail(rep, "object name not terminated");
        return IVM_ERROR_INVALID_VALUE;
    }
    obj = job != NULL ? ivmd_obj_find_name(job, req->name) : NULL;
    if (obj == NULL) {
        ivmd_detail(rep, "no object named '%s' in job %u on %s", req->name, req->job,
                    d->cfg.node);
        return IVM_ERROR_NOT_FOUND;
    }
    out->flags    = obj->master_node < 0 ? IVM_OBJ_INFO_MASTER : 0;
    out->size     = obj->size;
    out->tx_bytes = obj->tx_bytes;
    out->rx_bytes = obj->rx_bytes;
    out->mirrors  = obj->nholders;
    out->held     = obj->master_node < 0 ? obj->size : 0;
    for (i = 0; obj->master_node >= 0 && i < obj->nregions; ++i) {
        out->held += obj->regions[i].len;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_handle_gpu_info(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    return ivmd_gpu_info(&d->gpu, c, hdr, payload, &rep->body.gpu_info, rep->r.detail,
                         sizeof(rep->r.detail));
}

static ivmError_t ivmd_handle_list(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                   const void *payload, ivmd_pe_reply_t *rep)
{
    return ivmd_list(d, payload, &rep->body.list, &rep->r);
}

static ivmError_t ivmd_handle_cpu_info(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    return ivmd_devcg_info(&d->devcg, payload, &rep->body.cpu_info, &rep->r);
}

static ivmError_t ivmd_handle_set_share(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                        const void *payload, ivmd_pe_reply_t *rep)
{
    ivm_info("SET_SHARE from pid %d", (int)c->peer_pid);
    return ivmd_devcg_set_share(&d->devcg, payload, &rep->r);
}

static ivmError_t ivmd_handle_cluster(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                      const void *payload, ivmd_pe_reply_t *rep)
{
    return ivmd_peer_set_cluster(d, payload, rep->r.detail, sizeof(rep->r.detail));
}

static ivmError_t ivmd_handle_shutdown(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload, ivmd_pe_reply_t *rep)
{
    ivm_info("shutdown requested by pid %d", (int)c->peer_pid);
    d->stopping = 1;
    return IVM_SUCCESS;
}

typedef struct ivmd_msg_entry {
    ivmd_msg_fn_t fn;
    uint32_t      rep_size;
    int           needs_pe; /* only for entered connections */
} ivmd_msg_entry_t;

static ivmError_t ivmd_handle_put_signal(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                         const void *payload, ivmd_pe_reply_t *rep);

#define IVMD_ENTRY(type, fn, rep, needs_pe) [IVM_MSG_##type] = {fn, sizeof(rep), needs_pe}

static const ivmd_msg_entry_t ivmd_msg_table[IVM_MSG_LAST] = {
    IVMD_ENTRY(ENTER, ivmd_handle_enter, ivm_msg_enter_rep_t, 0),
    IVMD_ENTRY(EXIT, ivmd_handle_exit, ivm_msg_status_t, 1),
    IVMD_ENTRY(CREATE_DEV, ivmd_handle_create_dev, ivm_msg_create_dev_rep_t, 1),
    IVMD_ENTRY(CREATE_PES, ivmd_handle_create_pes, ivm_msg_create_pes_rep_t, 1),
    IVMD_ENTRY(KILL_PES, ivmd_handle_kill_pes, ivm_msg_status_t, 1),
    IVMD_ENTRY(SET_MAX_ID, ivmd_handle_set_max_id, ivm_msg_status_t, 1),
    IVMD_ENTRY(WAIT, ivmd_handle_wait, ivm_msg_status_t, 1),
    IVMD_ENTRY(SIGNAL, ivmd_handle_signal, ivm_msg_status_t, 1),
    IVMD_ENTRY(NUM_PES, ivmd_handle_num_pes, ivm_msg_value_rep_t, 1),
    IVMD_ENTRY(MALLOC, ivmd_handle_malloc, ivm_msg_map_rep_t, 1),
    IVMD_ENTRY(MAP, ivmd_handle_map, ivm_msg_map_rep_t, 1),
    IVMD_ENTRY(UNMAP, ivmd_handle_unmap, ivm_msg_status_t, 1),
    IVMD_ENTRY(FREE, ivmd_handle_free, ivm_msg_status_t, 1),
    IVMD_ENTRY(INFO, ivmd_handle_info, ivm_msg_info_rep_t, 0),
    IVMD_ENTRY(SHUTDOWN, ivmd_handle_shutdown, ivm_msg_status_t, 0),
    IVMD_ENTRY(CLUSTER, ivmd_handle_cluster, ivm_msg_status_t, 0),
    IVMD_ENTRY(SYNC, ivmd_handle_sync, ivm_msg_status_t, 1),
    IVMD_ENTRY(OBJ_INFO, ivmd_handle_obj_info, ivm_msg_obj_info_rep_t, 0),
    IVMD_ENTRY(GPU_INFO, ivmd_handle_gpu_info, ivm_msg_gpu_info_rep_t, 0),
    IVMD_ENTRY(CPU_INFO, ivmd_handle_cpu_info, ivm_msg_cpu_info_rep_t, 0),
    IVMD_ENTRY(LIST, ivmd_handle_list, ivm_msg_list_rep_t, 0),
    IVMD_ENTRY(SET_SHARE, ivmd_handle_set_share, ivm_msg_status_t, 0),
    IVMD_ENTRY(NODE_DEVS, ivmd_handle_node_devs, ivm_msg_node_devs_rep_t, 1),
    IVMD_ENTRY(SIGNAL_TO, ivmd_handle_signal_to, ivm_msg_status_t, 1),
    IVMD_ENTRY(WAIT_FROM, ivmd_handle_wait_from, ivm_msg_status_t, 1),
    IVMD_ENTRY(BARRIER, ivmd_handle_barrier, ivm_msg_status_t, 1),
    IVMD_ENTRY(PUT_SIGNAL, ivmd_handle_put_signal, ivm_msg_status_t, 1),
    IVMD_ENTRY(BOARD, ivmd_handle_board, ivm_msg_status_t, 1),
    IVMD_ENTRY(SIGNAL_POKE, ivmd_handle_signal_poke, ivm_msg_status_t, 1),
    IVMD_ENTRY(ENDPOINT, ivmd_handle_endpoint, ivm_msg_endpoint_rep_t, 1),
};

uint32_t ivmd_reply_size(uint16_t type)
{
    return (type < IVM_MSG_LAST) ? ivmd_msg_table[type].rep_size : sizeof(ivm_msg_status_t);
}

/* A reply that handed over an object's memory went out as an error without
 * it (ivmd_conn_reply): undo the mapping, and a new object's registration
 * (its name is free again). */
static void ivmd_reply_rollback(ivmd_t *d, ivmd_conn_t *c, uint16_t type,
                                const ivmd_pe_reply_t *rep)
{
    ivmd_obj_t *obj;

    if ((type != IVM_MSG_MALLOC && type != IVM_MSG_MAP) || c->pe == NULL ||
        (obj = ivmd_obj_find_id(c->job, rep->body.map.obj_id)) == NULL) {
        return;
    }
    if (type == IVM_MSG_MALLOC && obj->name != NULL) {
        ivmd_obj_free_name(&d->reg, c->job, obj);
    }
    ivmd_obj_unmap(&d->reg, c->pe, obj->id);
}

/* Whether c may send this request now: IVM_SUCCESS, or the error with its
 * detail in rep. */
static ivmError_t ivmd_handle_admit(const ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                    const ivmd_msg_entry_t *e, ivmd_pe_reply_t *rep)
{
    if (!e->needs_pe) {
        return IVM_SUCCESS;
    }
    if (c->pe == NULL) {
        ivmd_detail(rep, "%s before ivmEnter", ivm_proto_type_name(hdr->type));
        return IVM_ERROR_NOT_ENTERED;
    }
    if (c->pe->state != IVMD_PE_RUNNING && hdr->type != IVM_MSG_EXIT) {
        ivmd_detail(rep, "pe %d already ended", c->pe->id);
        return IVM_ERROR_NOT_ENTERED;
    }
    return IVM_SUCCESS;
}

/* Send the reply of a request served with status (not deferred); a
 * malformed request closes the connection instead. */
static void ivmd_handle_answer(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                               const ivmd_msg_entry_t *e, ivmd_pe_reply_t *rep)
{
    ivmError_t status = rep->r.status;
    int pass_fd = status == IVM_SUCCESS && rep->fd >= 0;

    if (status == IVM_ERROR_PROTOCOL) {
        ivm_warn_limited("pid %d: malformed %s request: %s; connection dropped",
                         (int)c->peer_pid, ivm_proto_type_name(hdr->type), rep->r.detail);
        ivmd_conn_close(d, c, "malformed request");
        return;
    }
    rep->body.status.status = status;
    if (status != IVM_SUCCESS) {
        rep->len = e->rep_size; /* a detail follows the whole struct */
    }
    if (ivmd_conn_reply(d, c, hdr->type, hdr->seq, &rep->body, rep->len,
                        status != IVM_SUCCESS ? rep->r.detail : NULL,
                        pass_fd ? &rep->fd : NULL, pass_fd ? 1 : 0) != IVM_SUCCESS &&
        pass_fd) {
        ivmd_reply_rollback(d, c, hdr->type, rep);
    }
}

/* ------------------------------------------------------------ put-signal */

/* A PUT_SIGNAL whose put is in flight: the data plane ends it through
 * ivmd_put_signal_done with the entry's id. Its connection may close first:
 * the entry goes with it, and the late completion finds nothing. */
/* rep, empty, for a reply of kind e (its body zeroed, no fd, no detail). */
static void ivmd_pe_reply_start(ivmd_pe_reply_t *rep, const ivmd_msg_entry_t *e)
{
    memset(&rep->body, 0, e->rep_size);
    rep->len = e->rep_size;
    rep->fd  = -1;
    ivmd_reply_init(&rep->r);
}

typedef struct ivmd_putsig {
    struct ivmd_putsig      *next;
    uint64_t                 id;
    int                      carried; /* the signal went with the put's DATA */
    ivmd_conn_t             *conn;
    ivm_msg_hdr_t            hdr;
    ivm_msg_put_signal_req_t req;
} ivmd_putsig_t;

/* Unlink the entry of that id (or of that connection: id 0) and return it. */
static ivmd_putsig_t *ivmd_putsig_take(ivmd_handlers_t *svc, uint64_t id, const ivmd_conn_t *c)
{
    ivmd_putsig_t **link, *ps;

    for (link = &svc->putsigs; (ps = *link) != NULL; link = &ps->next) {
        if (id != 0 ? ps->id == id : ps->conn == c) {
            *link = ps->next;
            return ps;
        }
    }
    return NULL;
}

void ivmd_handlers_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_putsig_t *ps;

    while ((ps = ivmd_putsig_take(&d->svc, 0, c)) != NULL) {
        free(ps);
    }
}

static void ivmd_put_signal_done(void *arg, uint64_t tag, int status)
{
    ivmd_t *d = arg;
    ivmd_putsig_t *ps = ivmd_putsig_take(&d->svc, tag, NULL);
    const ivmd_msg_entry_t *e = &ivmd_msg_table[IVM_MSG_PUT_SIGNAL];
    ivmd_pe_reply_t rep;

    if (ps == NULL) {
        return; /* the PE's connection is gone */
    }
    ivmd_pe_reply_start(&rep, e);
    if (status == IVM_SUCCESS && ps->carried) {
        /* The master's daemon posted it with the bytes. */
    } else if (status == IVM_SUCCESS && ps->conn->pe != NULL &&
               ps->conn->pe->state == IVMD_PE_RUNNING) {
        status = ivmd_signal_post(d, ps->conn, &ps->hdr, &ps->req, ps->req.pe, &rep);
    } else if (status == IVM_SUCCESS) {
        status = IVM_ERROR_NOT_ENTERED;
        ivmd_detail(&rep, "pe ended while its ivmSyncPutSignal was in flight");
    } else {
        ivmd_detail(&rep, "the put failed (the node holding the object's master is "
                          "unreachable): no signal was posted");
    }
    if (status != IVMD_DEFERRED) {
        rep.r.status = status;
        ivmd_handle_answer(d, ps->conn, &ps->hdr, e, &rep);
    }
    free(ps);
}

/* The range must lie in an object of c's job; GPU ranges take the two-call
 * path (libivm never sends them here). */
static ivmd_obj_t *ivmd_put_signal_obj(ivmd_conn_t *c, const ivm_msg_put_signal_req_t *req)
{
    if (req->sync.op != IVM_SYNC_PUT || req->sync.gpu_ref != 0) {
        return NULL;
    }
    return ivmd_sync_obj(c, &req->sync);
}

static ivmError_t ivmd_handle_put_signal(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                         const void *payload, ivmd_pe_reply_t *rep)
{
    const ivm_msg_put_signal_req_t *req = payload;
    ivmd_obj_t *obj;
    ivmd_putsig_t *ps;
    int r, node;

    if (c->kind == IVMD_CONN_REMOTE) {
        /* Forwarded by the PE's daemon once the master had the bytes. */
        return ivmd_signal_post(d, c, hdr, req, req->pe, rep);
    }
    if ((obj = ivmd_put_signal_obj(c, req)) == NULL) {
        ivmd_detail(rep, "no such object or range for ivmSyncPutSignal");
        return IVM_ERROR_INVALID_VALUE;
    }
    if ((ps = calloc(1, sizeof(*ps))) == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *ps = (ivmd_putsig_t){.next = d->svc.putsigs, .id = ++d->svc.next_putsig, .conn = c,
                          .hdr = *hdr, .req = *req};
    d->svc.putsigs = ps;
    if (ivmd_psync_where(c->job, req->pe, &node) == IVMD_PLACE_RUNNING && node >= 0 &&
        node == obj->master_node && req->sync.size > 0) {
        /* The receiver's daemon holds the master: the signal follows the
         * bytes on their link and is posted once they are in. */
        ps->carried = 1;
        r = ivmd_data_put_signal(&d->data, c, hdr, c->job->id, obj, req->sync.offset,
                                 req->sync.size, c->pe->id, req->pe, ivmd_put_signal_done, d,
                                 ps->id);
    } else {
        r = ivmd_data_sync_op(&d->data, c, hdr, c->job->id, obj, IVM_SYNC_PUT,
                              req->sync.offset, req->sync.size, ivmd_put_signal_done, d, ps->id);
    }
    if (r == IVMD_DEFERRED) {
        return IVMD_DEFERRED; /* (the entry may be gone already: answered) */
    }
    free(ivmd_putsig_take(&d->svc, ps->id, NULL));
    if (r == IVM_ERROR_DAEMON_LOST) {
        ivmd_detail(rep, "the node holding the object's master is unreachable");
    }
    return r != IVM_SUCCESS ? r : ivmd_signal_post(d, c, hdr, req, req->pe, rep);
}

void ivmd_handle_bounced(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload)
{
    const ivmd_msg_entry_t *e = &ivmd_msg_table[IVM_MSG_PUT_SIGNAL];
    ivmd_pe_reply_t *rep = &d->svc.rep;
    ivmError_t status;

    d->svc.bounced = 1;
    if (hdr->type != IVM_MSG_PUT_SIGNAL) {
        ivmd_handle_msg(d, c, hdr, payload);
        d->svc.bounced = 0;
        return;
    }
    ivmd_pe_reply_start(rep, e);
    status = ivmd_signal_post(d, c, hdr, payload,
                              ((const ivm_msg_put_signal_req_t *)payload)->pe, rep);
    d->svc.bounced = 0;
    if (status != IVMD_DEFERRED) {
        rep->r.status = status;
        ivmd_handle_answer(d, c, hdr, e, rep);
    }
}

void ivmd_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const void *payload)
{
    const ivmd_msg_entry_t *e = &ivmd_msg_table[hdr->type];
    ivmd_pe_reply_t *rep = &d->svc.rep;
    ivmError_t status;

    ivmd_pe_reply_start(rep, e);
    status = ivmd_handle_admit(c, hdr, e, rep);
    if (status == IVM_SUCCESS && c->kind == IVMD_CONN_PE && c->job != NULL &&
        ivmd_remote_is_proxy(c->job) && ivmd_remote_forwards(hdr->type)) {
        /* The job's registry is at its root daemon: the request goes there. */
        ivmd_remote_forward(&d->remote, c, hdr, payload);
        return;
    }
    if (status == IVM_SUCCESS) {
        status = e->fn(d, c, hdr, payload, rep);
    }
    if (status == IVMD_DEFERRED) {
        return;
    }
    rep->r.status = status;
    ivmd_handle_answer(d, c, hdr, e, rep);
}
