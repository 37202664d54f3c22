/* The control messages between daemons (see ctl/remote.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "ctl/remote.h"
#include "ctl/board.h"
#include "ctl/psync.h"
#include "log.h"

/* A CREATE_PES waiting for the SPAWN_REP of another node. */
typedef struct ivmd_remote_spawn {
    UT_hash_handle            hh;
    uint64_t                  id;
    ivmd_conn_t              *conn; /* whom to answer, NULL once gone */
    uint32_t                  seq;
    uint16_t                  type;
    uint32_t                  job;
    int                       node;
    int                       nslots;
    ivm_msg_create_pes_rep_t  rep;  /* the reply being built */
} ivmd_remote_spawn_t;

void ivmd_remote_init(ivmd_remote_t *rm, ivmd_t *d, ivmd_registry_t *reg, ivmd_link_t *link,
                      ivmd_conn_table_t *conns, const ivm_cpu_device_t *devs,
                      const int *ndevs, const char *node, const ivmd_remote_ops_t *ops)
{
    rm->d     = d;
    rm->reg   = reg;
    rm->link  = link;
    rm->conns = conns;
    rm->devs  = devs;
    rm->ndevs = ndevs;
    rm->node  = node;
    rm->ops   = ops;
}

int ivmd_remote_self(const ivmd_remote_t *rm)
{
    return rm->link->have_cluster ? (int)rm->link->self_idx : 0;
}

ivmd_peer_t *ivmd_remote_peer(ivmd_remote_t *rm, int node)
{
    if (node < 0 || (uint32_t)node >= rm->link->npeers || rm->link->peers[node].self) {
        return NULL;
    }
    return &rm->link->peers[node];
}

int ivmd_remote_root_node(const ivmd_remote_t *rm, uint32_t job_id)
{
    return rm->link->have_cluster ? (int)(job_id >> IVMD_JOB_NODE_SHIFT) : 0;
}

int ivmd_remote_is_proxy(const ivmd_job_t *job)
{
    return ((const ivmd_job_data_t *)job->data)->proxy;
}

ivmError_t ivmd_remote_post(ivmd_remote_t *rm, ivmd_peer_t *p, uint16_t type, const void *a,
                            uint32_t alen, const void *b, uint32_t blen)
{
    if (p == NULL || !p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_send_parts(rm->d, p->conn, type, 0, a, alen, b, blen);
    return IVM_SUCCESS;
}

int ivmd_remote_busy(const ivmd_remote_t *rm)
{
    return rm->spawns != NULL;
}

static void ivmd_remote_spawn_free(ivmd_remote_t *rm, ivmd_remote_spawn_t *s)
{
    HASH_DEL(rm->spawns, s);
    free(s);
}

void ivmd_remote_close_all(ivmd_remote_t *rm)
{
    ivmd_remote_spawn_t *s, *tmp;

    HASH_ITER(hh, rm->spawns, s, tmp) {
        ivmd_remote_spawn_free(rm, s);
    }
}

/* ------------------------------------------------------------ node info */

void ivmd_remote_send_nodeinfo(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t ngpus,
                               const uint8_t *gpu_share)
{
    ivm_peer_nodeinfo_t info;
    int i;

    memset(&info, 0, sizeof(info));
    info.ndevs = (uint32_t)(*rm->ndevs);
    info.ngpus = ngpus;
    for (i = 0; i < (*rm->ndevs) && i < 64; ++i) {
        info.ncores[i] = (uint16_t)rm->devs[i].ncores;
        info.share[i]  = (uint8_t)rm->devs[i].percent;
        info.numa[i]   = (int8_t)(rm->devs[i].numa > 127 ? -1 : rm->devs[i].numa);
    }
    for (i = 0; (uint32_t)i < ngpus && i < 64; ++i) {
        info.gpu_share[i] = gpu_share[i];
    }
    ivmd_remote_post(rm, p, IVM_PEER_NODEINFO, &info, sizeof(info), NULL, 0);
}

void ivmd_remote_on_nodeinfo(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_nodeinfo_t *m = payload;
    ivmd_peer_t *p = pc->peer;
    int i;

    (void)rm;
    (void)hdr;
    p->ndevs = m->ndevs > 64 ? 64 : (int)m->ndevs;
    p->ngpus = m->ngpus > 64 ? 64 : (int)m->ngpus;
    for (i = 0; i < p->ndevs; ++i) {
        p->ncores[i] = m->ncores[i];
        p->share[i]  = m->share[i];
        p->numa[i]   = m->numa[i];
    }
    for (i = 0; i < p->ngpus; ++i) {
        p->gpu_share[i] = m->gpu_share[i];
    }
}

/* ------------------------------------------------------------ addressed signals */

static ivmError_t ivmd_remote_wrap(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t job, int pe,
                                   const ivm_msg_hdr_t *hdr, const void *payload);

/* Send to every peer that is up but node `skip` (-1: none). */
static void ivmd_remote_post_all(ivmd_remote_t *rm, int skip, uint16_t type, const void *a,
                                 uint32_t alen)
{
    uint32_t i;

    for (i = 0; i < rm->link->npeers; ++i) {
        if ((int)i != skip && !rm->link->peers[i].self) {
            (void)ivmd_remote_post(rm, &rm->link->peers[i], type, a, alen, NULL, 0);
        }
    }
}

/* PLACED {node, ids[0..n)} in messages of at most IVM_PEER_PLACED_MAX ids,
 * to p, or (p NULL) to every peer but node. */
static void ivmd_remote_send_placed(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t job, int node,
                                    const int32_t *ids, int n)
{
    ivm_peer_placed_t m = {.job = job, .node = (uint32_t)node};
    uint32_t i;

    if (!rm->places && p == NULL) {
        return; /* (a bounce still teaches its node) */
    }
    while (n > 0) {
        m.n = n < IVM_PEER_PLACED_MAX ? n : IVM_PEER_PLACED_MAX;
        for (i = 0; i < rm->link->npeers; ++i) {
            ivmd_peer_t *q = &rm->link->peers[i];
            if (!q->self && (p != NULL ? q == p : (int)i != node)) {
                (void)ivmd_remote_post(rm, q, IVM_PEER_PLACED, &m, sizeof(m), ids,
                                       (uint32_t)m.n * sizeof(int32_t));
            }
        }
        ids += m.n;
        n -= m.n;
    }
}

/* A PE's node as the cluster numbers it (the root registry's -1: this one). */
static int ivmd_remote_pe_node(const ivmd_remote_t *rm, const ivmd_pe_t *pe)
{
    return pe->node < 0 ? ivmd_remote_self(rm) : pe->node;
}

void ivmd_remote_placed(ivmd_remote_t *rm, ivmd_job_t *job, ivmd_pe_t **pes, int n)
{
    int32_t ids[IVM_CREATE_PES_MAX];
    int i, k = 0;

    for (i = 0; i < n && k < IVM_CREATE_PES_MAX; ++i) {
        ids[k++] = pes[i]->id;
    }
    if (k > 0) {
        ivmd_remote_send_placed(rm, NULL, job->id, ivmd_remote_pe_node(rm, pes[0]), ids, k);
    }
}

/* Root daemon: whether node holds the job's table of places: a SPAWN there
 * started a PE (so its proxy job exists, made by the first SPAWN, which the
 * table followed on the same link). The node keeps the proxy, and the places,
 * until the job ends or its link to the root is lost (ivmd_remote_peer_lost
 * takes the mark back); from the table on, PLACED and PE_ENDED keep it up to
 * date. Until then every SPAWN there is followed by the table (a second one
 * is harmless). Sent after every SPAWN, as before, a job that makes a PE per
 * portion sent every ended PE of the other nodes to a node at each of its
 * spawns: messages growing with the square of the job's PEs. */
static int ivmd_remote_has_table(const ivmd_job_data_t *jd, int node)
{
    return jd != NULL && node >= 0 && (uint32_t)node < jd->ntold && jd->told[node];
}

/* Mark (has 1) or unmark (0) node as holding the job's table. Without memory
 * for the mark the node just gets the table again. */
static void ivmd_remote_set_table(ivmd_job_data_t *jd, int node, int has)
{
    if (jd == NULL || node < 0) {
        return;
    }
    if ((uint32_t)node >= jd->ntold) {
        uint32_t n = (uint32_t)node + 1;
        uint8_t *t;

        if (!has || (t = realloc(jd->told, n)) == NULL) {
            return;
        }
        memset(t + jd->ntold, 0, n - jd->ntold);
        jd->told  = t;
        jd->ntold = n;
    }
    jd->told[node] = (uint8_t)(has != 0);
}

/* Root daemon: the job's PEs of every other node than p's, for p (after a
 * SPAWN, until p holds the table): PLACED for those alive, PE_ENDED (not
 * final) for those ended. */
static void ivmd_remote_send_table(ivmd_remote_t *rm, ivmd_job_t *job, ivmd_peer_t *p)
{
    int32_t ids[IVM_PEER_PLACED_MAX];
    int pnode = (int)(p - rm->link->peers), i, n;
    uint32_t k;

    if (!rm->places || ivmd_remote_has_table(job->data, pnode)) {
        return;
    }
    for (k = 0; k < rm->link->npeers; ++k) {
        if ((int)k == pnode) {
            continue;
        }
        for (i = 0, n = 0; i < job->next_pe_id; ++i) {
            ivmd_pe_t *pe = job->pes[i];
            if (pe == NULL || ivmd_remote_pe_node(rm, pe) != (int)k) {
                continue;
            }
            ++rm->told;
            if (pe->state == IVMD_PE_EXITED || pe->state == IVMD_PE_FAILED) {
                ivm_peer_pe_ended_t m = {
                    .job = job->id, .pe = pe->id, .node = k,
                    .state = pe->state == IVMD_PE_FAILED ? IVM_PE_STATE_FAILED
                                                         : IVM_PE_STATE_EXITED};
                (void)ivmd_remote_post(rm, p, IVM_PEER_PE_ENDED, &m, sizeof(m), NULL, 0);
                continue;
            }
            ids[n++] = pe->id;
            if (n == IVM_PEER_PLACED_MAX) {
                ivmd_remote_send_placed(rm, p, job->id, (int)k, ids, n);
                n = 0;
            }
        }
        ivmd_remote_send_placed(rm, p, job->id, (int)k, ids, n);
    }
}

void ivmd_remote_signal(ivmd_remote_t *rm, ivmd_job_t *job, int from, int to, int node)
{
    ivm_peer_signal_t m = {.job = job->id, .from = from, .to = to};

    /* A lost node: its PE `to` failed, and a signal to a failed PE is lost
     * without an error, as at the root. */
    (void)ivmd_remote_post(rm, ivmd_remote_peer(rm, node), IVM_PEER_SIGNAL, &m, sizeof(m), NULL,
                           0);
}

int ivmd_remote_bounce(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                       const void *payload, int id)
{
    ivmd_pe_t *pe = ivmd_pe_find(c->job, id);
    int node, pnode = (int)(c->peer - rm->link->peers);

    if (pe == NULL || (node = ivmd_remote_pe_node(rm, pe)) == pnode) {
        return IVM_ERROR_NOT_FOUND; /* its own node knows its PEs */
    }
    if (pe->state == IVMD_PE_EXITED || pe->state == IVMD_PE_FAILED) {
        ivm_peer_pe_ended_t m = {
            .job = c->job->id, .pe = id, .node = (uint32_t)node,
            .state = pe->state == IVMD_PE_FAILED ? IVM_PE_STATE_FAILED : IVM_PE_STATE_EXITED};
        (void)ivmd_remote_post(rm, c->peer, IVM_PEER_PE_ENDED, &m, sizeof(m), NULL, 0);
    } else {
        int32_t one = id;
        ivmd_remote_send_placed(rm, c->peer, c->job->id, node, &one, 1);
    }
    ++rm->relayed;
    ivm_debug("job %u: %s of pe %d about pe %d (%s on node %d) sent back to %s", c->job->id,
              ivm_proto_type_name(hdr->type), c->pe->id, id,
              pe->state == IVMD_PE_EXITED || pe->state == IVMD_PE_FAILED ? "ended" : "running",
              node, c->peer->node);
    if (ivmd_remote_wrap(rm, c->peer, c->job->id, c->pe->id, hdr, payload) != IVM_SUCCESS) {
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVMD_DEFERRED;
}

void ivmd_remote_teach(ivmd_remote_t *rm, ivmd_conn_t *c, int id)
{
    ivmd_pe_t *pe = ivmd_pe_find(c->job, id);
    int32_t one = id;

    if (pe != NULL && pe->state != IVMD_PE_EXITED && pe->state != IVMD_PE_FAILED) {
        ivmd_remote_send_placed(rm, c->peer, c->job->id, ivmd_remote_pe_node(rm, pe), &one, 1);
    }
}

ivmd_job_t *ivmd_remote_signal_here(ivmd_remote_t *rm, uint32_t job_id, int from, int to,
                                    int from_node)
{
    ivmd_job_t *job = ivmd_job_find(rm->reg, job_id);
    const ivmd_pe_t *pe;
    int node, state;

    if (job == NULL || job->ending) {
        return NULL; /* the job ended here */
    }
    pe    = ivmd_pe_find(job, to);
    state = ivmd_psync_where(job, from, &node);
    if (state == IVMD_PLACE_UNKNOWN && ivmd_remote_is_proxy(job) &&
        ivmd_psync_place(job, from, from_node) == IVM_SUCCESS) {
        state = ivmd_psync_where(job, from, &node);
    }
    return pe != NULL && pe->node < 0 && state != IVMD_PLACE_UNKNOWN && node == from_node
               ? job
               : NULL;
}

void ivmd_remote_signal_post(ivmd_remote_t *rm, ivmd_job_t *job, int from, int to)
{
    (void)ivmd_psync_signal_to(rm->reg, job, from, to);
}

void ivmd_remote_post_signal(ivmd_remote_t *rm, uint32_t job_id, int from, int to,
                             int from_node)
{
    ivmd_job_t *job = ivmd_remote_signal_here(rm, job_id, from, to, from_node);

    if (job == NULL) {
        job = ivmd_job_find(rm->reg, job_id);
        if (job != NULL && !job->ending) {
            ivm_warn_limited("node %d sent a signal of job %u from pe %d to pe %d, which "
                             "this daemon does not pair: dropped", from_node, job_id, from, to);
        }
        return;
    }
    ivmd_remote_signal_post(rm, job, from, to);
}

void ivmd_remote_on_signal(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload)
{
    const ivm_peer_signal_t *m = payload;

    (void)hdr;
    ivmd_remote_post_signal(rm, m->job, m->from, m->to, (int)(pc->peer - rm->link->peers));
}

void ivmd_remote_on_placed(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload)
{
    const ivm_peer_placed_t *m = payload;
    const int32_t *ids = (const int32_t *)(m + 1);
    ivmd_job_t *job;
    int i;

    if (m->n < 1 || m->n > IVM_PEER_PLACED_MAX ||
        hdr->length != sizeof(*m) + sizeof(int32_t) * (size_t)m->n ||
        m->node >= rm->link->npeers) {
        ivm_warn("peer %s sent a malformed PLACED (%d ids in %u bytes, node %u): connection "
                 "dropped", pc->peer->node, m->n, hdr->length, m->node);
        ivmd_conn_close(rm->d, pc, "malformed PLACED");
        return;
    }
    job = ivmd_job_find(rm->reg, m->job);
    if (job == NULL || !ivmd_remote_is_proxy(job) ||
        ((ivmd_job_data_t *)job->data)->root_peer != pc->peer ||
        (int)m->node == ivmd_remote_self(rm)) {
        return; /* not a job of ours (yet: the table follows its first SPAWN) */
    }
    for (i = 0; i < m->n; ++i) {
        (void)ivmd_psync_place(job, ids[i], (int)m->node);
    }
}

/* Apply a PE_ENDED that came from node `from` to a proxy job. */
static void ivmd_remote_ended_apply(ivmd_remote_t *rm, ivmd_job_t *job,
                                    const ivm_peer_pe_ended_t *m, int from)
{
    ivmd_job_data_t *jd = job->data;
    int root  = jd->root_peer != NULL ? (int)(jd->root_peer - rm->link->peers) : -1;
    int final = (m->flags & IVM_PE_ENDED_FINAL) && (from == (int)m->node || from == root);

    if ((int)m->node != ivmd_remote_self(rm)) {
        ivmd_psync_place_ended(rm->reg, job, m->pe, (int)m->node,
                               m->state == IVM_PE_STATE_FAILED, final);
    }
}

void ivmd_remote_on_pe_ended(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_pe_ended_t *m = payload;
    int from = (int)(pc->peer - rm->link->peers);
    ivmd_job_t *job;

    (void)hdr;
    if (m->node >= rm->link->npeers ||
        (m->state != IVM_PE_STATE_EXITED && m->state != IVM_PE_STATE_FAILED)) {
        ivm_warn("peer %s sent a malformed PE_ENDED (node %u, state %u): connection dropped",
                 pc->peer->node, m->node, m->state);
        ivmd_conn_close(rm->d, pc, "malformed PE_ENDED");
        return;
    }
    job = ivmd_job_find(rm->reg, m->job);
    if (job == NULL) {
        /* The job may come here soon (its SPAWN on the root's link): kept. */
        rm->early[rm->nearly % IVMD_REMOTE_EARLY] = (ivmd_remote_early_t){.m = *m, .from = from};
        ++rm->nearly;
        return;
    }
    if (ivmd_remote_is_proxy(job) && job->data != NULL) {
        ivmd_remote_ended_apply(rm, job, m, from); /* the root has PE_STATE */
    }
}

/* A new proxy job: the ends that came before it. */
static void ivmd_remote_early_apply(ivmd_remote_t *rm, ivmd_job_t *job)
{
    uint32_t i, n = rm->nearly < IVMD_REMOTE_EARLY ? rm->nearly : IVMD_REMOTE_EARLY;

    for (i = 0; i < n; ++i) {
        ivmd_remote_early_t *e = &rm->early[i];
        if (e->from >= 0 && e->m.job == job->id) {
            ivmd_remote_ended_apply(rm, job, &e->m, e->from);
            e->from = -1; /* applied */
        }
    }
}

/* ------------------------------------------------------------ forwarding */

int ivmd_remote_forwards(uint16_t type)
{
    switch (type) {
    case IVM_MSG_WAIT:
    case IVM_MSG_SIGNAL:
    case IVM_MSG_NUM_PES:
    case IVM_MSG_SET_MAX_ID:
    case IVM_MSG_CREATE_PES:
    case IVM_MSG_KILL_PES:
    case IVM_MSG_NODE_DEVS:
    case IVM_MSG_BARRIER:
        return 1;
    default:
        return 0;
    }
}

/* The addressed-signal requests a node daemon forwards only for a PE it does
 * not know (and the root sends back, see ivmd_remote_bounce). */
static int ivmd_remote_psync_type(uint16_t type)
{
    switch (type) {
    case IVM_MSG_SIGNAL_TO:
    case IVM_MSG_WAIT_FROM:
    case IVM_MSG_PUT_SIGNAL:
        return 1;
    default:
        return 0;
    }
}

/* FWD (or, root to node, a request sent back) of PE pe's request to p. */
static ivmError_t ivmd_remote_wrap(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t job, int pe,
                                   const ivm_msg_hdr_t *hdr, const void *payload)
{
    ivm_peer_fwd_t fwd = {.job = job, .pe = pe};
    char *buf = malloc(sizeof(*hdr) + hdr->length);
    ivmError_t status;

    if (buf == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    memcpy(buf, hdr, sizeof(*hdr));
    memcpy(buf + sizeof(*hdr), payload, hdr->length);
    status = ivmd_remote_post(rm, p, IVM_PEER_FWD, &fwd, sizeof(fwd), buf,
                              (uint32_t)(sizeof(*hdr) + hdr->length));
    free(buf);
    return status;
}

void ivmd_remote_forward(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload)
{
    ivmd_job_data_t *jd = c->job->data;
    ivm_msg_status_t fail = {.status = IVM_ERROR_DAEMON_LOST};
    char body[sizeof(ivm_msg_create_pes_rep_t)];
    ivmError_t status;

    status = ivmd_remote_wrap(rm, jd->root_peer, c->job->id, c->pe->id, hdr, payload);
    if (status == IVM_SUCCESS) {
        return;
    }
    memset(body, 0, sizeof(body));
    fail.status = status;
    memcpy(body, &fail, sizeof(fail));
    ivmd_conn_reply(rm->d, c, hdr->type, hdr->seq, body, rm->ops->reply_size(hdr->type),
                    "the job's root daemon is unreachable", NULL, 0);
}

/* The root daemon's virtual connection of a remote PE. */
static ivmd_conn_t *ivmd_remote_vconn(ivmd_remote_t *rm, ivmd_job_t *job, ivmd_pe_t *pe,
                                      ivmd_peer_t *p)
{
    ivmd_conn_t *c;

    if (pe->conn != NULL) {
        return pe->conn;
    }
    c = ivmd_conn_create(rm->conns, -1, IVMD_CONN_REMOTE, 0);
    if (c == NULL) {
        return NULL;
    }
    c->peer  = p;
    c->job   = job;
    c->pe    = pe;
    pe->conn = c;
    ++((ivmd_job_data_t *)job->data)->nconns;
    return c;
}

/* A job rooted here and one of its PEs hosted by peer p. */
static ivmd_pe_t *ivmd_remote_pe(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t job_id, int pe_id,
                                 ivmd_job_t **job_p)
{
    ivmd_job_t *job = ivmd_job_find(rm->reg, job_id);
    ivmd_pe_t *pe;

    if (job == NULL || ivmd_remote_is_proxy(job)) {
        return NULL;
    }
    pe = ivmd_pe_find(job, pe_id);
    if (pe == NULL || pe->node != (int)(p - rm->link->peers)) {
        return NULL;
    }
    *job_p = job;
    return pe;
}

/* A forwarded message's inner header and body are whole and valid. */
static int ivmd_remote_fwd_ok(const ivm_msg_hdr_t *hdr, const ivm_msg_hdr_t *inner, int req,
                              const char **why)
{
    if (hdr->length < sizeof(ivm_peer_fwd_t) + sizeof(*inner) ||
        inner->length != hdr->length - sizeof(ivm_peer_fwd_t) - sizeof(*inner) ||
        ivm_proto_check_hdr(inner, why) != IVM_SUCCESS) {
        return 0;
    }
    if (!req) {
        return ivm_proto_check_rep(inner, why) == IVM_SUCCESS;
    }
    /* PUT_SIGNAL is served by the PE's own daemon, which forwards only its
     * signal, once the master has the bytes, to a PE it does not know. */
    return ivm_proto_check_req(inner, inner + 1, why) == IVM_SUCCESS &&
           (ivmd_remote_forwards(inner->type) || ivmd_remote_psync_type(inner->type));
}

/* FWD for a PE that is not (or no longer) there: NOT_ENTERED back. */
static void ivmd_remote_fwd_refuse(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_peer_fwd_t *fwd,
                                   const ivm_msg_hdr_t *inner)
{
    char msg[sizeof(ivm_msg_hdr_t) + sizeof(ivm_msg_create_pes_rep_t)];
    ivm_msg_hdr_t rh;
    ivm_msg_status_t st = {.status = IVM_ERROR_NOT_ENTERED};
    uint32_t len = rm->ops->reply_size(inner->type);

    ivm_proto_hdr_init(&rh, (uint16_t)(inner->type | IVM_MSG_REPLY), len, inner->seq);
    memset(msg, 0, sizeof(msg));
    memcpy(msg, &rh, sizeof(rh));
    memcpy(msg + sizeof(rh), &st, sizeof(st));
    ivmd_conn_send_parts(rm->d, pc, IVM_PEER_FWD_REP, 0, fwd, sizeof(*fwd), msg,
                         (uint32_t)(sizeof(rh) + len));
}

/* Node daemon: the root sends back an addressed-signal request of one of
 * our PEs that we had forwarded for want of a place (it sent the place
 * first): served here now. Anything else from anyone is unexpected. */
static void ivmd_remote_on_bounce(ivmd_remote_t *rm, ivmd_conn_t *pc, ivmd_job_t *job,
                                  const ivm_peer_fwd_t *fwd, const ivm_msg_hdr_t *inner)
{
    ivmd_job_data_t *jd = job->data;
    ivmd_pe_t *pe = ivmd_pe_find(job, fwd->pe);

    if (pc->peer != jd->root_peer || !ivmd_remote_psync_type(inner->type)) {
        ivm_warn("peer %s sent job %u's %s for pe %d here: connection dropped", pc->peer->node,
                 job->id, ivm_proto_type_name(inner->type), fwd->pe);
        ivmd_conn_close(rm->d, pc, "unexpected FWD");
        return;
    }
    if (pe == NULL || pe->conn == NULL || pe->state != IVMD_PE_RUNNING || job->ending) {
        return; /* the PE is gone: nobody to answer */
    }
    rm->ops->bounced(rm->d, pe->conn, inner, inner + 1);
}

void ivmd_remote_on_fwd(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                        const void *payload)
{
    const ivm_peer_fwd_t *fwd = payload;
    const ivm_msg_hdr_t *inner = (const ivm_msg_hdr_t *)(fwd + 1);
    const char *why = NULL;
    ivmd_job_t *job;
    ivmd_pe_t *pe;
    ivmd_conn_t *vc;

    if (!ivmd_remote_fwd_ok(hdr, inner, 1, &why)) {
        ivm_warn("peer %s forwarded a malformed request (%s): connection dropped",
                 pc->peer->node, why ? why : "not a forwardable type");
        ivmd_conn_close(rm->d, pc, "malformed FWD");
        return;
    }
    job = ivmd_job_find(rm->reg, fwd->job);
    if (job != NULL && ivmd_remote_is_proxy(job)) {
        ivmd_remote_on_bounce(rm, pc, job, fwd, inner);
        return;
    }
    pe = ivmd_remote_pe(rm, pc->peer, fwd->job, fwd->pe, &job);
    if (pe == NULL || job->ending ||
        (pe->state != IVMD_PE_RUNNING && pe->state != IVMD_PE_SPAWNED)) {
        ivmd_remote_fwd_refuse(rm, pc, fwd, inner);
        return;
    }
    if (pe->state == IVMD_PE_SPAWNED) {
        ivmd_pe_enter(pe, NULL);
    }
    vc = ivmd_remote_vconn(rm, job, pe, pc->peer);
    if (vc != NULL) {
        rm->ops->dispatch(rm->d, vc, inner, inner + 1);
    }
}

void ivmd_remote_vconn_reply(ivmd_t *d, ivmd_conn_t *c, const void *msg, uint32_t len)
{
    ivmd_remote_t *rm = ivmd_conn_owner(c);

    ivm_peer_fwd_t fwd;

    if (c->job == NULL || c->pe == NULL) {
        return;
    }
    fwd.job = c->job->id;
    fwd.pe  = c->pe->id;
    ivmd_remote_post(rm, c->peer, IVM_PEER_FWD_REP, &fwd, sizeof(fwd), msg, len);
}

void ivmd_remote_on_fwd_rep(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                            const void *payload)
{
    const ivm_peer_fwd_t *fwd = payload;
    const ivm_msg_hdr_t *inner = (const ivm_msg_hdr_t *)(fwd + 1);
    const char *why = NULL;
    ivmd_job_t *job = ivmd_job_find(rm->reg, fwd->job);
    ivmd_pe_t *pe = job != NULL ? ivmd_pe_find(job, fwd->pe) : NULL;

    if (!ivmd_remote_fwd_ok(hdr, inner, 0, &why)) {
        ivm_warn("peer %s sent a malformed forwarded reply: connection dropped",
                 pc->peer->node);
        ivmd_conn_close(rm->d, pc, "malformed FWD_REP");
        return;
    }
    if (pe == NULL || pe->conn == NULL) {
        return; /* the PE is gone */
    }
    ivmd_conn_send_parts(rm->d, pe->conn, inner->type, inner->seq, inner + 1, inner->length,
                         NULL, 0);
}

/* ------------------------------------------------------------ PE states */

static void ivmd_remote_send_state(ivmd_remote_t *rm, ivmd_job_t *job, int pe_id, uint32_t state)
{
    ivmd_job_data_t *jd = job->data;
    ivm_peer_pe_state_t m = {.job = job->id, .pe = pe_id, .state = state};

    ivmd_remote_post(rm, jd->root_peer, IVM_PEER_PE_STATE, &m, sizeof(m), NULL, 0);
}

void ivmd_remote_pe_ended(ivmd_remote_t *rm, ivmd_pe_t *pe, int failed)
{
    ivm_peer_pe_ended_t m = {.job = pe->job->id, .pe = pe->id,
                             .node = (uint32_t)ivmd_remote_self(rm),
                             .state = failed ? IVM_PE_STATE_FAILED : IVM_PE_STATE_EXITED,
                             .flags = IVM_PE_ENDED_FINAL};
    int proxy;

    if (pe->job->data == NULL || pe->job->ending || pe->node >= 0) {
        return; /* a PE of another node: its daemon tells */
    }
    proxy = ivmd_remote_is_proxy(pe->job);
    if (proxy) {
        ivmd_remote_send_state(rm, pe->job, pe->id, m.state);
    }
    /* After the PE's SIGNALs on each link: they are consumed first. */
    ivmd_remote_post_all(rm, proxy ? ivmd_remote_root_node(rm, pe->job->id) : -1,
                         IVM_PEER_PE_ENDED, &m, sizeof(m));
}

void ivmd_remote_pe_entered(ivmd_remote_t *rm, ivmd_pe_t *pe)
{
    if (ivmd_remote_is_proxy(pe->job)) {
        ivmd_remote_send_state(rm, pe->job, pe->id, IVM_PE_STATE_ENTERED);
    }
}

void ivmd_remote_pe_reaped(ivmd_remote_t *rm, ivmd_pe_t *pe)
{
    if (ivmd_remote_is_proxy(pe->job)) {
        ivmd_remote_send_state(rm, pe->job, pe->id, IVM_PE_STATE_GONE);
    }
}

/* Close a remote PE's virtual connection and end it. */
static void ivmd_remote_end(ivmd_remote_t *rm, ivmd_pe_t *pe, int failed, int gone)
{
    ivmd_conn_t *vc = pe->conn;

    ivmd_pe_end(rm->reg, pe, failed);
    if (vc != NULL) {
        ivmd_conn_close(rm->d, vc, "remote PE ended");
    }
    if (gone) {
        pe->reaped = 1;
    }
}

void ivmd_remote_kill(ivmd_remote_t *rm, ivmd_pe_t *pe)
{
    ivm_peer_pe_state_t m = {.job = pe->job->id, .pe = pe->id, .state = IVM_PE_STATE_FAILED};
    ivmd_conn_t *vc = pe->conn;

    if (ivmd_remote_post(rm, ivmd_remote_peer(rm, pe->node), IVM_PEER_PE_STATE, &m, sizeof(m),
                         NULL, 0) != IVM_SUCCESS) {
        pe->reaped = 1;
    }
    ivmd_pe_end(rm->reg, pe, 1);
    if (vc != NULL) {
        ivmd_conn_close(rm->d, vc, "killed");
    }
}

/* Node daemon: the root daemon kills one of the proxy's PEs. */
static void ivmd_remote_proxy_kill(ivmd_remote_t *rm, ivmd_job_t *job, const ivm_peer_pe_state_t *m)
{
    ivmd_pe_t *pe = ivmd_pe_find(job, m->pe);

    if (pe != NULL && m->state == IVM_PE_STATE_FAILED &&
        ((pe->pid > 0 && !pe->reaped) ||
         (pe->forked && pe->pid == 0 &&
          (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING)))) {
        rm->ops->spawn_kill(rm->d, pe);
        ivmd_pe_end(rm->reg, pe, 1);
    }
}

void ivmd_remote_on_pe_state(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_pe_state_t *m = payload;
    ivmd_job_t *job = ivmd_job_find(rm->reg, m->job);
    ivmd_pe_t *pe;

    (void)hdr;
    if (job != NULL && ivmd_remote_is_proxy(job)) {
        ivmd_remote_proxy_kill(rm, job, m);
        return;
    }
    pe = ivmd_remote_pe(rm, pc->peer, m->job, m->pe, &job);
    if (pe == NULL) {
        return;
    }
    switch (m->state) {
    case IVM_PE_STATE_ENTERED:
        if (pe->state == IVMD_PE_SPAWNED) {
            ivmd_pe_enter(pe, NULL);
        }
        break;
    case IVM_PE_STATE_EXITED:
    case IVM_PE_STATE_FAILED:
        ivmd_remote_end(rm, pe, m->state == IVM_PE_STATE_FAILED, 0);
        break;
    case IVM_PE_STATE_GONE:
        ivmd_remote_end(rm, pe, 1, 1);
        rm->ops->job_collect(rm->d, job);
        break;
    default:
        break;
    }
}

void ivmd_remote_job_ending(ivmd_remote_t *rm, ivmd_job_t *job)
{
    ivm_peer_job_t m = {.job = job->id};
    uint64_t told = 0;
    int i;

    if (ivmd_remote_is_proxy(job)) {
        return;
    }
    for (i = 1; i < job->next_pe_id; ++i) {
        ivmd_pe_t *pe = job->pes[i];
        if (pe == NULL || pe->node < 0) {
            continue;
        }
        if (pe->node < 64 && !(told & (1ull << pe->node))) {
            told |= 1ull << pe->node;
            if (ivmd_remote_post(rm, ivmd_remote_peer(rm, pe->node), IVM_PEER_JOB_END, &m,
                                 sizeof(m), NULL, 0) != IVM_SUCCESS) {
                told &= ~(1ull << pe->node);
            }
        }
        ivmd_remote_end(rm, pe, 1, !(pe->node < 64 && (told & (1ull << pe->node))));
    }
}

void ivmd_remote_on_job_end(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                            const void *payload)
{
    const ivm_peer_job_t *m = payload;
    ivmd_job_t *job = ivmd_job_find(rm->reg, m->job);

    (void)pc;
    (void)hdr;
    if (job != NULL && ivmd_remote_is_proxy(job)) {
        rm->ops->job_terminate(rm->d, job, "its root PE ended");
        rm->ops->job_collect(rm->d, job);
    }
}

/* ------------------------------------------------------------ spawning */

/* The SPAWN message's tail: the PE ids, then the job's spawn blob. */
static char *ivmd_remote_spawn_tail(const ivmd_job_data_t *jd, ivmd_pe_t **pes, int n,
                                    int node, uint32_t *len_p)
{
    size_t ids_len = sizeof(int32_t) * (size_t)n;
    char *tail = malloc(ids_len + jd->blob_len);
    int i;

    if (tail == NULL) {
        return NULL;
    }
    for (i = 0; i < n; ++i) {
        int32_t id = pes[i]->id;
        pes[i]->node = node;
        memcpy(tail + sizeof(int32_t) * (size_t)i, &id, sizeof(id));
    }
    memcpy(tail + ids_len, jd->spawn_blob, jd->blob_len);
    *len_p = (uint32_t)(ids_len + jd->blob_len);
    return tail;
}

int ivmd_remote_spawn(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, int node,
                      int devtype, ivmd_pe_t **pes, int n, ivm_msg_create_pes_rep_t *rep,
                      char *detail, size_t detail_len)
{
    ivmd_job_data_t *jd = c->job->data;
    ivmd_peer_t *p = ivmd_remote_peer(rm, node);
    ivm_peer_spawn_t sp;
    ivmd_remote_spawn_t *s;
    uint32_t tail_len = 0;
    char *tail;

    if (p == NULL || !p->up) {
        snprintf(detail, detail_len, "node %s is unreachable", p ? p->node : "?");
        return IVM_ERROR_DAEMON_LOST;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    tail = ivmd_remote_spawn_tail(jd, pes, n, node, &tail_len);
    if (tail == NULL) {
        free(s);
        return IVM_ERROR_NO_MEMORY;
    }
    *s = (ivmd_remote_spawn_t){.id = ++rm->next_id, .conn = c, .seq = hdr->seq,
                               .type = hdr->type, .job = c->job->id, .node = node,
                               .nslots = n};
    memcpy(&s->rep, rep, sizeof(*rep));
    HASH_ADD(hh, rm->spawns, id, sizeof(s->id), s);
    memset(&sp, 0, sizeof(sp));
    sp.op       = s->id;
    sp.job      = c->job->id;
    sp.devtype  = devtype;
    sp.n        = n;
    sp.flags    = (jd->tag_output ? IVM_SPAWN_TAG_OUTPUT : 0) | (jd->bind << IVM_BIND_SHIFT);
    sp.argc     = jd->argc;
    sp.envc     = jd->envc;
    sp.blob_len = jd->blob_len;
    sp.pe_pool  = jd->pe_pool;
    ivmd_remote_post(rm, p, IVM_PEER_SPAWN, &sp, sizeof(sp), tail, tail_len);
    free(tail);
    /* Before the ids leave this daemon (the CREATE_PES reply): node gets
     * the job's table (until it holds it), every other peer the new PEs'
     * place. */
    ivmd_remote_send_table(rm, c->job, p);
    ivmd_remote_placed(rm, c->job, pes, n);
    return IVMD_DEFERRED;
}

/* Node daemon: the proxy job of a first SPAWN, made from its blob. */
static ivmError_t ivmd_remote_proxy_create(ivmd_remote_t *rm, ivmd_conn_t *pc,
                                           const ivm_peer_spawn_t *sp, ivmd_job_t **job_p,
                                           ivm_peer_spawn_rep_t *rep)
{
    const int32_t *ids = (const int32_t *)(sp + 1);
    ivmd_job_data_t *jd;
    ivmd_job_t *job;

    if (ivmd_job_create_proxy(rm->reg, sp->job, rm->devs, (*rm->ndevs), &job) != IVM_SUCCESS) {
        return IVM_ERROR_NO_MEMORY;
    }
    jd = calloc(1, sizeof(*jd));
    if (jd == NULL || rm->ops->job_data_unpack(jd, (const char *)(ids + sp->n), sp->blob_len,
                                           sp->argc, sp->envc) != IVM_SUCCESS) {
        rm->ops->job_data_free(jd);
        job->data = NULL;
        ivmd_job_destroy(rm->reg, job);
        snprintf(rep->detail, sizeof(rep->detail), "malformed spawn information");
        return IVM_ERROR_PROTOCOL;
    }
    jd->out_fd = jd->err_fd = -1;
    jd->proxy      = 1;
    jd->root_peer  = pc->peer;
    jd->tag_output = (sp->flags & IVM_SPAWN_TAG_OUTPUT) != 0;
    jd->bind       = IVM_BIND_GET(sp->flags);
    jd->pe_pool    = sp->pe_pool <= IVM_PE_POOL_MAX ? sp->pe_pool : IVM_PE_POOL_MAX;
    job->data      = jd;
    *job_p         = job;
    /* The root PE is on the root's node for the job's whole life (the job
     * ends with it): placed now, as the job's table that follows on the
     * link may come after a new PE's first wait from it. Without memory
     * the table places it. */
    (void)ivmd_psync_place(job, IVMD_ROOT_PE, (int)(pc->peer - rm->link->peers));
    ivmd_remote_early_apply(rm, job);
    return IVM_SUCCESS;
}

/* Node daemon: start (or take from the pool) the SPAWN's PEs; rep counts
 * those started. */
static void ivmd_remote_spawn_pes(ivmd_remote_t *rm, ivmd_job_t *job, const ivm_peer_spawn_t *sp,
                                  ivm_peer_spawn_rep_t *rep)
{
    const int32_t *ids = (const int32_t *)(sp + 1);
    int i;

    for (i = 0; i < sp->n; ++i) {
        ivmd_pe_t *pe = ivmd_pe_add_at(job, ids[i], sp->devtype);
        if (pe == NULL) {
            rep->status = IVM_ERROR_INVALID_VALUE;
            snprintf(rep->detail, sizeof(rep->detail), "PE id %d is not new", ids[i]);
            return;
        }
        if (!rm->ops->pool_take(rm->d, job, pe, (int)sp->n - 1 - i)) {
            rep->status = rm->ops->spawn_pe(rm->d, job, pe, rep->detail, sizeof(rep->detail));
        }
        if (rep->status != IVM_SUCCESS) {
            --job->alive;
            job->pes[pe->id] = NULL;
            free(pe);
            return;
        }
        ivmd_board_pe_added(job, pe);
        ++rep->started;
    }
}

static int ivmd_remote_spawn_ok(const ivmd_remote_t *rm, const ivm_msg_hdr_t *hdr,
                                const ivm_peer_spawn_t *sp)
{
    if (sp->n < 1 || sp->n > IVM_CREATE_PES_MAX ||
        hdr->length != sizeof(*sp) + sizeof(int32_t) * (size_t)sp->n + sp->blob_len) {
        return 0;
    }
    if (IVM_DEV_IS_GPU(sp->devtype)) {
        return (uint32_t)IVM_DEV_INDEX(sp->devtype) < rm->ops->gpu_count(rm->d);
    }
    return sp->devtype >= 0 && sp->devtype < (*rm->ndevs);
}

void ivmd_remote_on_spawn(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                          const void *payload)
{
    const ivm_peer_spawn_t *sp = payload;
    ivm_peer_spawn_rep_t rep;
    ivmd_job_t *job;

    memset(&rep, 0, sizeof(rep));
    rep.op = sp->op;
    if (!ivmd_remote_spawn_ok(rm, hdr, sp)) {
        rep.status = IVM_ERROR_INVALID_VALUE;
        snprintf(rep.detail, sizeof(rep.detail), "%s cannot start PEs on device 0x%x",
                 rm->node, (unsigned)sp->devtype);
        goto out;
    }
    job = ivmd_job_find(rm->reg, sp->job);
    if (job == NULL) {
        rep.status = ivmd_remote_proxy_create(rm, pc, sp, &job, &rep);
        if (rep.status != IVM_SUCCESS) {
            goto out;
        }
    } else if (!ivmd_remote_is_proxy(job) || job->ending) {
        rep.status = IVM_ERROR_INVALID_VALUE;
        goto out;
    }
    ivmd_remote_spawn_pes(rm, job, sp, &rep);
out:
    ivmd_conn_send_parts(rm->d, pc, IVM_PEER_SPAWN_REP, 0, &rep, sizeof(rep), NULL, 0);
}

void ivmd_remote_on_spawn_rep(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                              const void *payload)
{
    const ivm_peer_spawn_rep_t *m = payload;
    ivmd_remote_spawn_t *s;
    ivmd_job_t *job;
    int i;

    (void)pc;
    (void)hdr;
    HASH_FIND(hh, rm->spawns, &m->op, sizeof(m->op), s);
    if (s == NULL) {
        return;
    }
    job = ivmd_job_find(rm->reg, s->job);
    for (i = m->started > 0 ? (int)m->started : 0; i < s->nslots; ++i) {
        ivmd_pe_t *pe = job != NULL ? ivmd_pe_find(job, s->rep.pes[i]) : NULL;
        s->rep.pes[i] = IVM_PE_NULL;
        if (pe != NULL) {
            /* It never ran: the peers told of its place may end it. */
            ivm_peer_pe_ended_t e = {.job = job->id, .pe = pe->id, .node = (uint32_t)s->node,
                                     .state = IVM_PE_STATE_FAILED,
                                     .flags = IVM_PE_ENDED_FINAL};
            ivmd_remote_post_all(rm, s->node, IVM_PEER_PE_ENDED, &e, sizeof(e));
            ivmd_remote_end(rm, pe, 1, 1);
        }
    }
    if (job != NULL && (m->status == IVM_SUCCESS || m->started > 0)) {
        ivmd_remote_set_table(job->data, s->node, 1); /* its proxy job has it */
    }
    s->rep.status = m->status;
    if (s->conn != NULL) {
        char detail[IVM_MSG_DETAIL_MAX];
        snprintf(detail, sizeof(detail), "%.*s", (int)sizeof(m->detail) - 1, m->detail);
        ivmd_conn_reply(rm->d, s->conn, s->type, s->seq, &s->rep, sizeof(s->rep),
                        m->status != IVM_SUCCESS ? detail : NULL, NULL, 0);
    }
    ivmd_remote_spawn_free(rm, s);
    if (job != NULL) {
        rm->ops->job_collect(rm->d, job);
    }
}

/* ------------------------------------------------------------ output */

void ivmd_remote_output(ivmd_remote_t *rm, ivmd_job_t *job, int pe_id, int stream, const char *bytes,
                        size_t len)
{
    ivmd_job_data_t *jd = job->data;
    ivm_peer_output_t m = {.job = job->id, .pe = pe_id, .stream = (uint32_t)stream};

    while (len > 0) {
        m.len = (uint32_t)(len < IVM_PEER_OUTPUT_MAX ? len : IVM_PEER_OUTPUT_MAX);
        ivmd_remote_post(rm, jd->root_peer, IVM_PEER_OUTPUT, &m, sizeof(m), bytes, m.len);
        bytes += m.len;
        len -= m.len;
    }
}

void ivmd_remote_on_output(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload)
{
    const ivm_peer_output_t *m = payload;
    ivmd_job_t *job;
    ivmd_pe_t *pe;

    if (hdr->length != sizeof(*m) + m->len || (m->stream != 1 && m->stream != 2)) {
        ivmd_conn_close(rm->d, pc, "malformed OUTPUT");
        return;
    }
    pe = ivmd_remote_pe(rm, pc->peer, m->job, m->pe, &job);
    if (pe != NULL) {
        ivmd_job_data_t *jd = job->data;
        rm->ops->output_write(rm->d, job, m->pe, m->stream == 1 ? jd->out_fd : jd->err_fd,
                              (const char *)(m + 1), m->len);
    }
}

/* ------------------------------------------------------------ faults */

void ivmd_remote_conn_gone(ivmd_remote_t *rm, ivmd_conn_t *c)
{
    ivmd_remote_spawn_t *s, *tmp;

    HASH_ITER(hh, rm->spawns, s, tmp) {
        if (s->conn == c) {
            s->conn = NULL;
        }
    }
}

/* The spawns waiting on a lost node fail. */
static void ivmd_remote_spawns_lost(ivmd_remote_t *rm, int node)
{
    ivmd_remote_spawn_t *s, *tmp;

    HASH_ITER(hh, rm->spawns, s, tmp) {
        if (s->node != node) {
            continue;
        }
        if (s->conn != NULL) {
            ivm_msg_create_pes_rep_t rep;
            memset(&rep, 0, sizeof(rep));
            rep.status = IVM_ERROR_DAEMON_LOST;
            ivmd_conn_reply(rm->d, s->conn, s->type, s->seq, &rep, rm->ops->reply_size(s->type),
                            "a node of the cluster is unreachable", NULL, 0);
        }
        ivmd_remote_spawn_free(rm, s);
    }
}

void ivmd_remote_peer_lost(ivmd_remote_t *rm, ivmd_peer_t *p)
{
    int node = (int)(p - rm->link->peers);
    ivmd_job_t *job, *next;
    int i;

    ivmd_remote_spawns_lost(rm, node);
    for (job = rm->reg->jobs; job != NULL; job = next) {
        next = job->next;
        if (job->data == NULL) {
            continue;
        }
        ivmd_remote_set_table(job->data, node, 0);
        if (ivmd_remote_is_proxy(job)) {
            if (((ivmd_job_data_t *)job->data)->root_peer == p) {
                rm->ops->job_terminate(rm->d, job, "its root daemon was lost");
                rm->ops->job_collect(rm->d, job);
            } else {
                ivmd_psync_node_lost(rm->reg, job, node); /* their waiters: PE_FAILED */
            }
            continue;
        }
        for (i = 1; i < job->next_pe_id; ++i) {
            ivmd_pe_t *pe = job->pes[i];
            if (pe != NULL && pe->node == node) {
                ivmd_remote_end(rm, pe, 1, 1);
            }
        }
        rm->ops->job_collect(rm->d, job);
    }
}
