/*
 * Jobs across nodes, the service's wiring: the peer messages dispatched
 * through one table to the module that serves them (ctl/remote for the
 * control messages, data/ for objects and transfers), and the events of a
 * peer or a connection handed to both.
 */
#include "ctl/remote.h"
#include "data/data.h"
#include "handlers.h"
#include "ivmd.h"
#include "log.h"

typedef void (*ivmd_ctl_msg_fn_t)(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                  const void *payload);
typedef ivmError_t (*ivmd_data_msg_fn_t)(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                         const void *payload);
typedef ivmError_t (*ivmd_ep_msg_fn_t)(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                                       const void *payload);

/* Who serves a peer message: the control plane, on the link it came by, or
 * the data plane, from a node or (ep) on a PE's endpoint (and what a
 * malformed one is called). */
typedef struct ivmd_peer_msg {
    ivmd_ctl_msg_fn_t  ctl;
    ivmd_data_msg_fn_t data;
    ivmd_ep_msg_fn_t   ep;
    const char        *malformed;
} ivmd_peer_msg_t;

#define IVMD_PEER_MSG(type) [IVM_PEER_##type - IVM_PEER_FIRST]

/* The cluster's peer messages (the link's own, HELLO to PONG and BYE, stay
 * in transport/link.c). */
static const ivmd_peer_msg_t ivmd_cluster_msgs[IVM_PEER_LAST - IVM_PEER_FIRST] = {
    IVMD_PEER_MSG(NODEINFO)   = {.ctl = ivmd_remote_on_nodeinfo},
    IVMD_PEER_MSG(FWD)        = {.ctl = ivmd_remote_on_fwd},
    IVMD_PEER_MSG(FWD_REP)    = {.ctl = ivmd_remote_on_fwd_rep},
    IVMD_PEER_MSG(PE_STATE)   = {.ctl = ivmd_remote_on_pe_state},
    IVMD_PEER_MSG(SPAWN)      = {.ctl = ivmd_remote_on_spawn},
    IVMD_PEER_MSG(SPAWN_REP)  = {.ctl = ivmd_remote_on_spawn_rep},
    IVMD_PEER_MSG(JOB_END)    = {.ctl = ivmd_remote_on_job_end},
    IVMD_PEER_MSG(OUTPUT)     = {.ctl = ivmd_remote_on_output},
    IVMD_PEER_MSG(SIGNAL)     = {.ctl = ivmd_remote_on_signal},
    IVMD_PEER_MSG(PLACED)     = {.ctl = ivmd_remote_on_placed},
    IVMD_PEER_MSG(PE_ENDED)   = {.ctl = ivmd_remote_on_pe_ended},
    IVMD_PEER_MSG(OBJ_REG)    = {.data = ivmd_data_on_obj, .malformed = "malformed object message"},
    IVMD_PEER_MSG(OBJ_LOOKUP) = {.data = ivmd_data_on_obj, .malformed = "malformed object message"},
    IVMD_PEER_MSG(OBJ_REP)    = {.data = ivmd_data_on_obj_rep},
    IVMD_PEER_MSG(READ)       = {.data = ivmd_data_on_read},
    IVMD_PEER_MSG(DATA)       = {.data = ivmd_data_on_data, .malformed = "malformed DATA"},
    IVMD_PEER_MSG(ACK)        = {.data = ivmd_data_on_ack},
    IVMD_PEER_MSG(GROUP)      = {.data = ivmd_data_on_group},
    IVMD_PEER_MSG(ROUTE)      = {.data = ivmd_data_on_route, .malformed = "malformed ROUTE"},
    IVMD_PEER_MSG(UCX_ADDR)   = {.data = ivmd_data_on_transport},
    IVMD_PEER_MSG(UCX_RKEY)   = {.data = ivmd_data_on_transport},
    IVMD_PEER_MSG(EP_PUT)     = {.ep = ivmd_data_on_ep_put, .malformed = "malformed EP_PUT"},
    IVMD_PEER_MSG(EP_GET)     = {.ep = ivmd_data_on_ep_get, .malformed = "malformed EP_GET"},
};

void ivmd_cluster_handle_msg(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivmd_peer_msg_t *m = NULL;

    if (hdr->type >= IVM_PEER_FIRST && hdr->type < IVM_PEER_LAST) {
        m = &ivmd_cluster_msgs[hdr->type - IVM_PEER_FIRST];
    }
    if (pc->pstate == IVMD_PEER_ENDPOINT) {
        /* A PE's endpoint carries its puts, nothing of the links'. */
        if (m == NULL || m->ep == NULL) {
            ivmd_conn_close(d, pc, "unexpected message on a PE's endpoint");
        } else if (m->ep(&d->data, pc, hdr, payload) != IVM_SUCCESS) {
            ivm_warn_limited("a PE's endpoint (job %u, pe %d) sent a %s: closed",
                             (unsigned)pc->ep_job, (int)pc->ep_pe, m->malformed);
            ivmd_conn_close(d, pc, m->malformed);
        }
    } else if (m != NULL && m->ctl != NULL) {
        m->ctl(&d->remote, pc, hdr, payload);
    } else if (m != NULL && m->data != NULL && pc->peer != NULL) {
        if (m->data(&d->data, (int)(pc->peer - d->link.peers), hdr, payload) != IVM_SUCCESS) {
            ivmd_conn_close(d, pc, m->malformed != NULL ? m->malformed : "malformed peer message");
        }
    } else {
        ivmd_conn_close(d, pc, "unexpected peer message");
    }
}

/* What the PE protocol's handlers answer for the data plane. */
static const ivmd_data_ops_t ivmd_cluster_data_ops = {
    .reply_size = ivmd_reply_size,
    .reply_map  = ivmd_reply_map,
};

/* What the control plane does for the GPU module. */
static const ivmd_gpu_up_t ivmd_cluster_gpu_up = {
    .spawn_attr_init = ivmd_spawn_attr_init,
    .gpus_lost       = ivmd_handle_gpus_lost,
};

/* What the service does for the remote module. */
static uint32_t ivmd_cluster_gpu_count(const ivmd_t *d)
{
    return ivmd_gpu_count(&d->gpu);
}

/* The control plane's functions take their modules' state; the remote
 * module is given the daemon (opaque to it) and calls these. */
static void ivmd_cluster_job_terminate(ivmd_t *d, ivmd_job_t *job, const char *why)
{
    ivmd_teardown_terminate(&d->teardown, job, why);
}

static void ivmd_cluster_job_collect(ivmd_t *d, ivmd_job_t *job)
{
    ivmd_teardown_collect(&d->teardown, job);
}

static ivmError_t ivmd_cluster_spawn_pe(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t *pe,
                                        char *detail, size_t detail_len)
{
    ivmd_reply_t rep;
    ivmError_t status;

    ivmd_reply_init(&rep);
    status = ivmd_spawn_pe(&d->spawn, job, pe, &rep);
    snprintf(detail, detail_len, "%s", rep.detail);
    return status;
}

static int ivmd_cluster_spawn_kill(ivmd_t *d, ivmd_pe_t *pe)
{
    (void)d;
    return ivmd_spawn_kill(pe);
}

static int ivmd_cluster_pool_take(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t *pe, int more)
{
    return ivmd_pool_take(&d->pool, job, pe, more);
}

static void ivmd_cluster_output_write(ivmd_t *d, ivmd_job_t *job, int pe_id, int fd,
                                      const char *bytes, size_t len)
{
    ivmd_output_write_job(&d->output, job, pe_id, fd, bytes, len);
}

static const ivmd_remote_ops_t ivmd_cluster_remote_ops = {
    .dispatch        = ivmd_handle_msg,
    .reply_size      = ivmd_reply_size,
    .job_data_unpack = ivmd_job_data_unpack,
    .job_data_free   = ivmd_job_data_free,
    .job_terminate   = ivmd_cluster_job_terminate,
    .job_collect     = ivmd_cluster_job_collect,
    .spawn_pe        = ivmd_cluster_spawn_pe,
    .spawn_kill      = ivmd_cluster_spawn_kill,
    .pool_take       = ivmd_cluster_pool_take,
    .output_write    = ivmd_cluster_output_write,
    .gpu_count       = ivmd_cluster_gpu_count,
    .bounced         = ivmd_handle_bounced,
};

void ivmd_cluster_init(ivmd_t *d)
{
    ivmd_gpu_cfg_t gcfg = {
        .emu_gpus = d->cfg.emu_gpus, .gpus = d->cfg.gpus, .gpu_shares = d->cfg.gpu_shares,
        .gpud = d->cfg.gpud, .gpu_admit_timeout = d->cfg.gpu_admit_timeout,
        .node = d->cfg.node, .log_level = d->cfg.log_level, .ready_fd = d->cfg.ready_fd,
    };

    ivmd_remote_init(&d->remote, d, &d->reg, &d->link, &d->conns, d->devs, &d->ndevs,
                     d->cfg.node, &ivmd_cluster_remote_ops);
    d->remote.places = d->cfg.psync_places;
    ivmd_data_init(&d->data, d, &d->reg, &d->link, &d->quota, &d->remote,
                   &ivmd_cluster_data_ops);
    ivmd_gpu_init(&d->gpu, d, &gcfg, &d->devnull, &d->stopping, &d->reg, &d->conns, &d->data,
                  &ivmd_cluster_gpu_up);
}

void ivmd_gpu_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_gpu_forget_conn(&d->gpu, c);
}

int ivmd_cluster_busy(const ivmd_t *d)
{
    return ivmd_data_busy(&d->data) || ivmd_remote_busy(&d->remote);
}

void ivmd_cluster_close_all(ivmd_t *d)
{
    ivmd_data_close_all(&d->data);
    ivmd_remote_close_all(&d->remote);
}

void ivmd_cluster_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_data_conn_gone(&d->data, c);
    ivmd_remote_conn_gone(&d->remote, c);
}

void ivmd_cluster_peer_up(ivmd_t *d, ivmd_peer_t *p)
{
    uint32_t ngpus = ivmd_gpu_alive(&d->gpu) ? ivmd_gpu_count(&d->gpu) : 0, k;
    uint8_t share[64];

    for (k = 0; k < ngpus && k < 64; ++k) {
        share[k] = (uint8_t)ivmd_gpu_share(&d->gpu, (int)k);
    }
    ivmd_remote_send_nodeinfo(&d->remote, p, ngpus, share);
    ivmd_data_peer_up(&d->data, (int)(p - d->link.peers));
}

/* A lost peer fails the operations waiting on it first, then the control
 * plane ends what it hosted and the proxy jobs it was root of. */
void ivmd_cluster_peer_lost(ivmd_t *d, ivmd_peer_t *p)
{
    ivmd_data_peer_lost(&d->data, (int)(p - d->link.peers));
    ivmd_remote_peer_lost(&d->remote, p);
}
