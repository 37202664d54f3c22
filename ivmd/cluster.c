/*
 * Jobs across nodes. The root daemon of a job (the root PE's node) holds its
 * registry; a node daemon holds a proxy job with its own PEs and copies.
 *  - PE requests that need the registry (WAIT, SIGNAL, NUM_PES, SET_MAX_ID,
 *    CREATE_PES, KILL_PES) travel as FWD to the root daemon, which runs the
 *    same handlers on a virtual connection whose replies go back as FWD_REP.
 *  - CREATE_PES on another node: the root daemon takes the ids and sends SPAWN.
 *  - Objects: a master lives where it was allocated and is registered at the
 *    root daemon by name; a map elsewhere makes a node mirror (a memfd of the
 *    object's size holding the mapped regions), filled by READ/DATA from the
 *    master, which records the mirror for the group calls.
 *  - Transfers are operations (ivmd_op_t) answered when their last DATA or
 *    ACK arrives; a lost peer fails the operations that wait on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ivmd.h"
#include "log.h"
#include "status.h"

typedef enum ivmd_op_kind {
    IVMD_OP_SPAWN,     /* CREATE_PES waiting for SPAWN_REP */
    IVMD_OP_MALLOC,    /* MALLOC waiting for OBJ_REP of its registration */
    IVMD_OP_LOOKUP,    /* MAP waiting for OBJ_REP */
    IVMD_OP_FILL,      /* MAP waiting for the mirror's missing regions */
    IVMD_OP_FILL_WAIT, /* MAP waiting for another MAP's fill of the same object */
    IVMD_OP_SYNC,      /* SYNC waiting for DATA or ACK */
    IVMD_OP_GROUP      /* scatter/gather at the master */
} ivmd_op_kind_t;

struct ivmd_op {
    ivmd_op_t      *next;
    uint64_t        id;
    ivmd_op_kind_t  kind;
    ivmd_conn_t    *conn;      /* whom to answer (PE or virtual), NULL if gone */
    uint32_t        seq;
    uint16_t        type;      /* PE message type answered */
    uint32_t        job;
    int             pending;   /* DATA/ACK still awaited */
    int             status;
    uint64_t        peers;     /* bit i: waits on node i (nodes < 64) */
    ivmd_peer_t    *reply_peer;/* GROUP for a mirror: ACK this peer ... */
    uint64_t        reply_op;  /* ... with this operation id */
    int             then_group;/* SYNC PUT_GROUP: scatter after the put */
    uint64_t        obj;       /* object id here */
    uint64_t        off, len;
    ivm_msg_map_req_t map;     /* LOOKUP/FILL: the request */
    ivm_msg_create_pes_rep_t *pes; /* SPAWN: the reply being built */
    int             first_slot, nslots;
    uint64_t        gsync;     /* SYNC/GROUP for a GPU sync: resume it, answer nobody */
};

static uint64_t ivmd_op_next = 1;

static ivmd_op_t *ivmd_op_new(ivmd_t *d, ivmd_op_kind_t kind, ivmd_conn_t *c,
                              const ivm_msg_hdr_t *hdr)
{
    ivmd_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return NULL;
    }
    op->id   = ivmd_op_next++;
    op->kind = kind;
    op->conn = c;
    if (hdr != NULL) {
        op->seq  = hdr->seq;
        op->type = hdr->type;
    }
    op->job  = (c != NULL && c->job != NULL) ? c->job->id : 0;
    op->next = d->ops;
    d->ops   = op;
    return op;
}

static ivmd_op_t *ivmd_op_find(ivmd_t *d, uint64_t id)
{
    ivmd_op_t *op;

    for (op = d->ops; op != NULL; op = op->next) {
        if (op->id == id) {
            return op;
        }
    }
    return NULL;
}

static void ivmd_op_free(ivmd_t *d, ivmd_op_t *op)
{
    ivmd_op_t **link;

    for (link = &d->ops; *link != NULL; link = &(*link)->next) {
        if (*link == op) {
            *link = op->next;
            break;
        }
    }
    free(op->pes);
    free(op);
}

static void ivmd_cluster_senders_drop(ivmd_peer_t *p);

void ivmd_cluster_close_all(ivmd_t *d)
{
    uint32_t i;

    while (d->ops != NULL) {
        ivmd_op_free(d, d->ops);
    }
    for (i = 0; i < d->link.npeers; ++i) {
        ivmd_cluster_senders_drop(&d->link.peers[i]);
    }
}

void ivmd_cluster_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_op_t *op;

    for (op = d->ops; op != NULL; op = op->next) {
        if (op->conn == c) {
            op->conn = NULL;
        }
    }
}

/* Answer a PE request with a plain status. */
static void ivmd_op_answer(ivmd_t *d, ivmd_op_t *op, int status, const char *detail)
{
    /* The reply has its type's full size (a MAP reply is no bare status). */
    static union {
        ivm_msg_status_t         status;
        ivm_msg_create_pes_rep_t largest;
        ivm_msg_map_rep_t        map;
    } rep;

    if (op->gsync != 0) {
        uint64_t gsync = op->gsync;
        op->gsync = 0;
        ivmd_gpu_sync_resume(d, gsync, status);
        return;
    }
    if (op->conn != NULL) {
        uint32_t len = ivmd_reply_size(op->type);
        memset(&rep, 0, len);
        rep.status.status = status;
        ivmd_conn_reply(d, op->conn, op->type, op->seq, &rep, len,
                        status != IVM_SUCCESS ? detail : NULL, NULL, 0);
    }
}

int ivmd_cluster_self(const ivmd_t *d)
{
    return d->link.have_cluster ? (int)d->link.self_idx : 0;
}

ivmd_peer_t *ivmd_cluster_peer(ivmd_t *d, int node)
{
    if (node < 0 || (uint32_t)node >= d->link.npeers || d->link.peers[node].self) {
        return NULL;
    }
    return &d->link.peers[node];
}

int ivmd_cluster_root_node(const ivmd_t *d, uint32_t job_id)
{
    return d->link.have_cluster ? (int)(job_id >> IVMD_JOB_NODE_SHIFT) : 0;
}

/* Send fixed part + tail to a peer; IVM_ERROR_DAEMON_LOST if it is not up. */
static ivmError_t ivmd_peer_post(ivmd_t *d, ivmd_peer_t *p, uint16_t type, const void *a,
                                 uint32_t alen, const void *b, uint32_t blen)
{
    if (p == NULL || !p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_send_parts(d, p->conn, type, 0, a, alen, b, blen);
    return IVM_SUCCESS;
}

static void ivmd_op_wait_on(ivmd_op_t *op, int node)
{
    if (node >= 0 && node < 64) {
        op->peers |= 1ull << node;
    }
}

/* ------------------------------------------------------------ node info */

void ivmd_cluster_peer_up(ivmd_t *d, ivmd_peer_t *p)
{
    ivm_peer_nodeinfo_t info;
    int i;

    memset(&info, 0, sizeof(info));
    info.ndevs = (uint32_t)d->ndevs;
    info.ngpus = ivmd_gpu_alive(d) ? ivmd_gpu_count(d) : 0;
    for (i = 0; i < d->ndevs && i < 64; ++i) {
        info.ncores[i] = (uint16_t)d->devs[i].ncores;
    }
    ivmd_peer_post(d, p, IVM_PEER_NODEINFO, &info, sizeof(info), NULL, 0);
}

/* ------------------------------------------------------------ forwarding */

int ivmd_cluster_is_proxy(const ivmd_job_t *job)
{
    return ((const ivmd_job_data_t *)job->data)->proxy;
}

int ivmd_cluster_forwards(uint16_t type)
{
    switch (type) {
    case IVM_MSG_WAIT:
    case IVM_MSG_SIGNAL:
    case IVM_MSG_NUM_PES:
    case IVM_MSG_SET_MAX_ID:
    case IVM_MSG_CREATE_PES:
    case IVM_MSG_KILL_PES:
        return 1;
    default:
        return 0;
    }
}

void ivmd_cluster_forward(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                          const void *payload)
{
    ivmd_job_data_t *jd = c->job->data;
    ivm_peer_fwd_t fwd = {.job = c->job->id, .pe = c->pe->id};
    ivm_msg_status_t fail = {.status = IVM_ERROR_DAEMON_LOST};
    char *buf = malloc(sizeof(*hdr) + hdr->length);
    ivmError_t status = IVM_ERROR_NO_MEMORY;

    if (buf != NULL) {
        memcpy(buf, hdr, sizeof(*hdr));
        memcpy(buf + sizeof(*hdr), payload, hdr->length);
        status = ivmd_peer_post(d, jd->root_peer, IVM_PEER_FWD, &fwd, sizeof(fwd), buf,
                                (uint32_t)(sizeof(*hdr) + hdr->length));
        free(buf);
    }
    if (status != IVM_SUCCESS) {
        char body[sizeof(ivm_msg_create_pes_rep_t)];
        memset(body, 0, sizeof(body));
        fail.status = status;
        memcpy(body, &fail, sizeof(fail));
        ivmd_conn_reply(d, c, hdr->type, hdr->seq, body, ivmd_reply_size(hdr->type),
                        "the job's root daemon is unreachable", NULL, 0);
    }
}

/* The root daemon's virtual connection of a remote PE. */
static ivmd_conn_t *ivmd_cluster_vconn(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t *pe,
                                       ivmd_peer_t *p)
{
    ivmd_conn_t *c;

    if (pe->conn != NULL) {
        return pe->conn;
    }
    c = ivmd_conn_open(d, -1, IVMD_CONN_REMOTE, 0);
    if (c == NULL) {
        return NULL;
    }
    c->peer = p;
    c->job  = job;
    c->pe   = pe;
    pe->conn = c;
    ++((ivmd_job_data_t *)job->data)->nconns;
    return c;
}

/* A job rooted here and one of its PEs hosted by peer p. */
static ivmd_pe_t *ivmd_cluster_remote_pe(ivmd_t *d, ivmd_peer_t *p, uint32_t job_id,
                                         int pe_id, ivmd_job_t **job_p)
{
    ivmd_job_t *job = ivmd_job_find(&d->reg, job_id);
    ivmd_pe_t *pe;

    if (job == NULL || ivmd_cluster_is_proxy(job)) {
        return NULL;
    }
    pe = ivmd_pe_find(job, pe_id);
    if (pe == NULL || pe->node != (int)(p - d->link.peers)) {
        return NULL;
    }
    *job_p = job;
    return pe;
}

static void ivmd_cluster_on_fwd(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                const void *payload)
{
    const ivm_peer_fwd_t *fwd = payload;
    const ivm_msg_hdr_t *inner = (const ivm_msg_hdr_t *)(fwd + 1);
    const char *why = NULL;
    ivmd_job_t *job;
    ivmd_pe_t *pe;
    ivmd_conn_t *vc;

    if (hdr->length < sizeof(*fwd) + sizeof(*inner) ||
        inner->length != hdr->length - sizeof(*fwd) - sizeof(*inner) ||
        ivm_proto_check_hdr(inner, &why) != IVM_SUCCESS ||
        ivm_proto_check_req(inner, inner + 1, &why) != IVM_SUCCESS ||
        !ivmd_cluster_forwards(inner->type)) {
        ivm_warn("peer %s forwarded a malformed request (%s): connection dropped",
                 pc->peer->node, why ? why : "not a forwardable type");
        ivmd_conn_close(d, pc, "malformed FWD");
        return;
    }
    pe = ivmd_cluster_remote_pe(d, pc->peer, fwd->job, fwd->pe, &job);
    if (pe == NULL || job->ending ||
        (pe->state != IVMD_PE_RUNNING && pe->state != IVMD_PE_SPAWNED)) {
        char msg[sizeof(ivm_msg_hdr_t) + sizeof(ivm_msg_create_pes_rep_t)];
        ivm_msg_hdr_t rh;
        ivm_msg_status_t st = {.status = IVM_ERROR_NOT_ENTERED};
        uint32_t len = ivmd_reply_size(inner->type);

        ivm_proto_hdr_init(&rh, (uint16_t)(inner->type | IVM_MSG_REPLY), len, inner->seq);
        memset(msg, 0, sizeof(msg));
        memcpy(msg, &rh, sizeof(rh));
        memcpy(msg + sizeof(rh), &st, sizeof(st));
        ivmd_conn_send_parts(d, pc, IVM_PEER_FWD_REP, 0, fwd, sizeof(*fwd), msg,
                             (uint32_t)(sizeof(rh) + len));
        return;
    }
    if (pe->state == IVMD_PE_SPAWNED) {
        ivmd_pe_enter(pe, NULL);
    }
    vc = ivmd_cluster_vconn(d, job, pe, pc->peer);
    if (vc == NULL) {
        return;
    }
    ivmd_handle_msg(d, vc, inner, inner + 1);
}

/* Reply on a virtual connection: wrap it for the PE's node. */
void ivmd_cluster_vconn_reply(ivmd_t *d, ivmd_conn_t *c, const void *msg, uint32_t len)
{
    ivm_peer_fwd_t fwd;

    if (c->job == NULL || c->pe == NULL) {
        return;
    }
    fwd.job = c->job->id;
    fwd.pe  = c->pe->id;
    ivmd_peer_post(d, c->peer, IVM_PEER_FWD_REP, &fwd, sizeof(fwd), msg, len);
}

static void ivmd_cluster_on_fwd_rep(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                    const void *payload)
{
    const ivm_peer_fwd_t *fwd = payload;
    const ivm_msg_hdr_t *inner = (const ivm_msg_hdr_t *)(fwd + 1);
    const char *why = NULL;
    ivmd_job_t *job = ivmd_job_find(&d->reg, fwd->job);
    ivmd_pe_t *pe = job != NULL ? ivmd_pe_find(job, fwd->pe) : NULL;

    if (hdr->length < sizeof(*fwd) + sizeof(*inner) ||
        inner->length != hdr->length - sizeof(*fwd) - sizeof(*inner) ||
        ivm_proto_check_hdr(inner, &why) != IVM_SUCCESS ||
        ivm_proto_check_rep(inner, &why) != IVM_SUCCESS) {
        ivm_warn("peer %s sent a malformed forwarded reply: connection dropped",
                 pc->peer->node);
        ivmd_conn_close(d, pc, "malformed FWD_REP");
        return;
    }
    if (pe == NULL || pe->conn == NULL) {
        return; /* the PE is gone */
    }
    ivmd_conn_send_parts(d, pe->conn, inner->type, inner->seq, inner + 1, inner->length,
                         NULL, 0);
}

/* ------------------------------------------------------------ PE states */

static void ivmd_cluster_send_state(ivmd_t *d, ivmd_job_t *job, int pe_id, uint32_t state)
{
    ivmd_job_data_t *jd = job->data;
    ivm_peer_pe_state_t m = {.job = job->id, .pe = pe_id, .state = state};

    ivmd_peer_post(d, jd->root_peer, IVM_PEER_PE_STATE, &m, sizeof(m), NULL, 0);
}

/* Registry callback: a proxy's PE ended; tell the root daemon. */
void ivmd_cluster_pe_ended(ivmd_t *d, ivmd_pe_t *pe, int failed)
{
    if (pe->job->data != NULL && ivmd_cluster_is_proxy(pe->job) && !pe->job->ending) {
        ivmd_cluster_send_state(d, pe->job, pe->id,
                                failed ? IVM_PE_STATE_FAILED : IVM_PE_STATE_EXITED);
    }
}

void ivmd_cluster_pe_entered(ivmd_t *d, ivmd_pe_t *pe)
{
    if (ivmd_cluster_is_proxy(pe->job)) {
        ivmd_cluster_send_state(d, pe->job, pe->id, IVM_PE_STATE_ENTERED);
    }
}

void ivmd_cluster_pe_reaped(ivmd_t *d, ivmd_pe_t *pe)
{
    if (ivmd_cluster_is_proxy(pe->job)) {
        ivmd_cluster_send_state(d, pe->job, pe->id, IVM_PE_STATE_GONE);
    }
}

/* Close a remote PE's virtual connection and end it. */
static void ivmd_cluster_remote_end(ivmd_t *d, ivmd_pe_t *pe, int failed, int gone)
{
    ivmd_conn_t *vc = pe->conn;

    ivmd_pe_end(&d->reg, pe, failed);
    if (vc != NULL) {
        ivmd_conn_close(d, vc, "remote PE ended");
    }
    if (gone) {
        pe->reaped = 1;
    }
}

static void ivmd_cluster_on_pe_state(ivmd_t *d, ivmd_conn_t *pc, const void *payload)
{
    const ivm_peer_pe_state_t *m = payload;
    ivmd_job_t *job;
    ivmd_pe_t *pe;

    job = ivmd_job_find(&d->reg, m->job);
    if (job != NULL && ivmd_cluster_is_proxy(job)) {
        /* root -> node: kill that PE */
        pe = ivmd_pe_find(job, m->pe);
        if (pe != NULL && m->state == IVM_PE_STATE_FAILED &&
            ((pe->pid > 0 && !pe->reaped) ||
             (pe->forked && pe->pid == 0 && pe->state == IVMD_PE_SPAWNED))) {
            ivmd_spawn_kill(d, pe);
            ivmd_pe_end(&d->reg, pe, 1);
        }
        return;
    }
    pe = ivmd_cluster_remote_pe(d, pc->peer, m->job, m->pe, &job);
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
        ivmd_cluster_remote_end(d, pe, m->state == IVM_PE_STATE_FAILED, 0);
        break;
    case IVM_PE_STATE_GONE:
        ivmd_cluster_remote_end(d, pe, 1, 1);
        ivmd_job_collect(d, job);
        break;
    default:
        break;
    }
}

/* The root daemon ends a job: remote PEs end, their nodes are told. */
void ivmd_cluster_job_ending(ivmd_t *d, ivmd_job_t *job)
{
    ivm_peer_job_t m = {.job = job->id};
    uint64_t told = 0;
    int i;

    if (ivmd_cluster_is_proxy(job)) {
        return;
    }
    for (i = 1; i < job->next_pe_id; ++i) {
        ivmd_pe_t *pe = job->pes[i];
        if (pe == NULL || pe->node < 0) {
            continue;
        }
        if (pe->node < 64 && !(told & (1ull << pe->node))) {
            told |= 1ull << pe->node;
            if (ivmd_peer_post(d, ivmd_cluster_peer(d, pe->node), IVM_PEER_JOB_END, &m,
                               sizeof(m), NULL, 0) != IVM_SUCCESS) {
                told &= ~(1ull << pe->node);
            }
        }
        ivmd_cluster_remote_end(d, pe, 1, !(pe->node < 64 && (told & (1ull << pe->node))));
    }
}

static void ivmd_cluster_on_job_end(ivmd_t *d, const void *payload)
{
    const ivm_peer_job_t *m = payload;
    ivmd_job_t *job = ivmd_job_find(&d->reg, m->job);

    if (job != NULL && ivmd_cluster_is_proxy(job)) {
        ivmd_job_terminate(d, job, "its root PE ended");
        ivmd_job_collect(d, job);
    }
}

/* ------------------------------------------------------------ spawning */

/* Root daemon: start PEs slots [first, first+n) of rep on node `node`. */
int ivmd_cluster_spawn(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, int node,
                       int devtype, ivmd_pe_t **pes, int n, ivm_msg_create_pes_rep_t *rep,
                       char *detail, size_t detail_len)
{
    ivmd_job_data_t *jd = c->job->data;
    ivmd_peer_t *p = ivmd_cluster_peer(d, node);
    ivm_peer_spawn_t sp;
    ivmd_op_t *op;
    char *tail;
    size_t blob_len = jd->blob_len, ids_len = sizeof(int32_t) * (size_t)n;
    int i;

    if (p == NULL || !p->up) {
        snprintf(detail, detail_len, "node %s is unreachable", p ? p->node : "?");
        return IVM_ERROR_DAEMON_LOST;
    }
    op = ivmd_op_new(d, IVMD_OP_SPAWN, c, hdr);
    tail = malloc(ids_len + blob_len);
    if (op == NULL || tail == NULL) {
        free(tail);
        if (op != NULL) {
            ivmd_op_free(d, op);
        }
        return IVM_ERROR_NO_MEMORY;
    }
    op->pes = malloc(sizeof(*rep));
    if (op->pes == NULL) {
        free(tail);
        ivmd_op_free(d, op);
        return IVM_ERROR_NO_MEMORY;
    }
    memcpy(op->pes, rep, sizeof(*rep));
    op->first_slot = 0;
    op->nslots     = n;
    ivmd_op_wait_on(op, node);
    for (i = 0; i < n; ++i) {
        int32_t id = pes[i]->id;
        pes[i]->node = node;
        memcpy(tail + sizeof(int32_t) * (size_t)i, &id, sizeof(id));
    }
    memcpy(tail + ids_len, jd->spawn_blob, blob_len);
    memset(&sp, 0, sizeof(sp));
    sp.op       = op->id;
    sp.job      = c->job->id;
    sp.devtype  = devtype;
    sp.n        = n;
    sp.flags    = (jd->tag_output ? IVM_SPAWN_TAG_OUTPUT : 0) | (jd->bind << IVM_BIND_SHIFT);
    sp.argc     = jd->argc;
    sp.envc     = jd->envc;
    sp.blob_len = (uint32_t)blob_len;
    sp.pe_pool  = jd->pe_pool;
    ivmd_peer_post(d, p, IVM_PEER_SPAWN, &sp, sizeof(sp), tail,
                   (uint32_t)(ids_len + blob_len));
    free(tail);
    return IVMD_DEFERRED;
}

static void ivmd_cluster_on_spawn(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                  const void *payload)
{
    const ivm_peer_spawn_t *sp = payload;
    const int32_t *ids = (const int32_t *)(sp + 1);
    ivm_peer_spawn_rep_t rep;
    ivmd_job_data_t *jd;
    ivmd_job_t *job;
    int i;

    memset(&rep, 0, sizeof(rep));
    rep.op = sp->op;
    if (sp->n < 1 || sp->n > IVM_CREATE_PES_MAX ||
        hdr->length != sizeof(*sp) + sizeof(int32_t) * (size_t)sp->n + sp->blob_len ||
        (IVM_DEV_IS_GPU(sp->devtype) ? (uint32_t)IVM_DEV_INDEX(sp->devtype) >= ivmd_gpu_count(d)
                                     : (sp->devtype < 0 || sp->devtype >= d->ndevs))) {
        rep.status = IVM_ERROR_INVALID_VALUE;
        snprintf(rep.detail, sizeof(rep.detail), "%s cannot start PEs on device 0x%x",
                 d->cfg.node, (unsigned)sp->devtype);
        goto out;
    }
    job = ivmd_job_find(&d->reg, sp->job);
    if (job == NULL) {
        if (ivmd_job_create_proxy(&d->reg, sp->job, d->devs, d->ndevs, &job) != IVM_SUCCESS) {
            rep.status = IVM_ERROR_NO_MEMORY;
            goto out;
        }
        jd = calloc(1, sizeof(*jd));
        if (jd == NULL || ivmd_job_data_unpack(jd, (const char *)(ids + sp->n), sp->blob_len,
                                               sp->argc, sp->envc) != IVM_SUCCESS) {
            ivmd_job_data_free(jd);
            job->data = NULL;
            ivmd_job_destroy(&d->reg, job);
            rep.status = IVM_ERROR_PROTOCOL;
            snprintf(rep.detail, sizeof(rep.detail), "malformed spawn information");
            goto out;
        }
        jd->out_fd = jd->err_fd = -1;
        jd->proxy      = 1;
        jd->root_peer  = pc->peer;
        jd->tag_output = (sp->flags & IVM_SPAWN_TAG_OUTPUT) != 0;
        jd->bind       = IVM_BIND_GET(sp->flags);
        jd->pe_pool    = sp->pe_pool <= IVM_PE_POOL_MAX ? sp->pe_pool : IVM_PE_POOL_MAX;
        job->data      = jd;
    } else if (!ivmd_cluster_is_proxy(job) || job->ending) {
        rep.status = IVM_ERROR_INVALID_VALUE;
        goto out;
    }
    for (i = 0; i < sp->n; ++i) {
        ivmd_pe_t *pe = ivmd_pe_add_at(job, ids[i], sp->devtype);
        if (pe == NULL) {
            rep.status = IVM_ERROR_INVALID_VALUE;
            snprintf(rep.detail, sizeof(rep.detail), "PE id %d is not new", ids[i]);
            break;
        }
        if (ivmd_pool_take(d, job, pe)) {
            ++rep.started;
            continue;
        }
        rep.status = ivmd_spawn_pe(d, job, pe, rep.detail, sizeof(rep.detail));
        if (rep.status != IVM_SUCCESS) {
            --job->alive;
            job->pes[pe->id] = NULL;
            free(pe);
            break;
        }
        ++rep.started;
    }
out:
    ivmd_conn_send_parts(d, pc, IVM_PEER_SPAWN_REP, 0, &rep, sizeof(rep), NULL, 0);
}

static void ivmd_cluster_on_spawn_rep(ivmd_t *d, ivmd_conn_t *pc, const void *payload)
{
    const ivm_peer_spawn_rep_t *m = payload;
    ivmd_op_t *op = ivmd_op_find(d, m->op);
    ivmd_job_t *job;
    int i;

    if (op == NULL || op->kind != IVMD_OP_SPAWN) {
        return;
    }
    job = ivmd_job_find(&d->reg, op->job);
    for (i = 0; i < op->nslots; ++i) {
        int id = op->pes->pes[op->first_slot + i];
        ivmd_pe_t *pe = job != NULL ? ivmd_pe_find(job, id) : NULL;
        if (i >= m->started) {
            op->pes->pes[op->first_slot + i] = IVM_PE_NULL;
            if (pe != NULL) {
                ivmd_cluster_remote_end(d, pe, 1, 1);
            }
        }
    }
    op->pes->status = m->status;
    if (op->conn != NULL) {
        char detail[IVM_MSG_DETAIL_MAX];
        snprintf(detail, sizeof(detail), "%.*s", (int)sizeof(m->detail) - 1, m->detail);
        ivmd_conn_reply(d, op->conn, op->type, op->seq, op->pes, sizeof(*op->pes),
                        m->status != IVM_SUCCESS ? detail : NULL, NULL, 0);
    }
    ivmd_op_free(d, op);
    if (job != NULL) {
        ivmd_job_collect(d, job);
    }
}

/* ------------------------------------------------------------ output */

void ivmd_cluster_output(ivmd_t *d, ivmd_job_t *job, int pe_id, int stream,
                         const char *bytes, size_t len)
{
    ivmd_job_data_t *jd = job->data;
    ivm_peer_output_t m = {.job = job->id, .pe = pe_id, .stream = (uint32_t)stream};

    while (len > 0) {
        m.len = (uint32_t)(len < IVM_PEER_OUTPUT_MAX ? len : IVM_PEER_OUTPUT_MAX);
        ivmd_peer_post(d, jd->root_peer, IVM_PEER_OUTPUT, &m, sizeof(m), bytes, m.len);
        bytes += m.len;
        len -= m.len;
    }
}

static void ivmd_cluster_on_output(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                   const void *payload)
{
    const ivm_peer_output_t *m = payload;
    ivmd_job_t *job;
    ivmd_pe_t *pe;

    if (hdr->length != sizeof(*m) + m->len || (m->stream != 1 && m->stream != 2)) {
        ivmd_conn_close(d, pc, "malformed OUTPUT");
        return;
    }
    pe = ivmd_cluster_remote_pe(d, pc->peer, m->job, m->pe, &job);
    if (pe != NULL) {
        ivmd_job_data_t *jd = job->data;
        ivmd_output_write_job(d, job, m->pe, m->stream == 1 ? jd->out_fd : jd->err_fd,
                              (const char *)(m + 1), m->len);
    }
}

/* ------------------------------------------------------------ objects */

/* Node daemon: a master made here is registered at the root daemon. */
int ivmd_cluster_register(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                          ivmd_obj_t *obj)
{
    ivmd_job_data_t *jd = c->job->data;
    ivm_peer_obj_t m;
    ivmd_op_t *op = ivmd_op_new(d, IVMD_OP_MALLOC, c, hdr);

    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->obj = obj->id;
    ivmd_op_wait_on(op, (int)(jd->root_peer - d->link.peers));
    memset(&m, 0, sizeof(m));
    m.op        = op->id;
    m.job       = c->job->id;
    m.status    = c->pe->id; /* owner PE */
    m.master_id = obj->id;
    m.size      = obj->size;
    ivm_proto_strset(m.name, sizeof(m.name), obj->name);
    if (ivmd_peer_post(d, jd->root_peer, IVM_PEER_OBJ_REG, &m, sizeof(m), NULL, 0) != 0) {
        ivmd_op_free(d, op);
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVMD_DEFERRED;
}

/* Node daemon: a master made here was freed; the root daemon drops the name. */
void ivmd_cluster_unregister(ivmd_t *d, ivmd_job_t *job, ivmd_obj_t *obj)
{
    ivmd_job_data_t *jd = job->data;
    ivm_peer_obj_t m;

    memset(&m, 0, sizeof(m));
    m.job       = job->id;
    m.master_id = obj->id;
    ivm_proto_strset(m.name, sizeof(m.name), obj->name);
    ivmd_peer_post(d, jd->root_peer, IVM_PEER_OBJ_REG, &m, sizeof(m), NULL, 0);
}

/* Root daemon: kill a PE of another node. */
void ivmd_cluster_kill(ivmd_t *d, ivmd_pe_t *pe)
{
    ivm_peer_pe_state_t m = {.job = pe->job->id, .pe = pe->id, .state = IVM_PE_STATE_FAILED};
    ivmd_conn_t *vc = pe->conn;

    if (ivmd_peer_post(d, ivmd_cluster_peer(d, pe->node), IVM_PEER_PE_STATE, &m, sizeof(m),
                       NULL, 0) != IVM_SUCCESS) {
        pe->reaped = 1;
    }
    ivmd_pe_end(&d->reg, pe, 1);
    if (vc != NULL) {
        ivmd_conn_close(d, vc, "killed");
    }
}

/* Node daemon: the master's daemon is unknown here; ask the root daemon. */
int ivmd_cluster_lookup(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                        const ivm_msg_map_req_t *req)
{
    ivmd_job_data_t *jd = c->job->data;
    ivm_peer_obj_t m;
    ivmd_op_t *op = ivmd_op_new(d, IVMD_OP_LOOKUP, c, hdr);

    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->map = *req;
    ivmd_op_wait_on(op, (int)(jd->root_peer - d->link.peers));
    memset(&m, 0, sizeof(m));
    m.op  = op->id;
    m.job = c->job->id;
    memcpy(m.name, req->name, sizeof(m.name));
    if (ivmd_peer_post(d, jd->root_peer, IVM_PEER_OBJ_LOOKUP, &m, sizeof(m), NULL, 0) != 0) {
        ivmd_op_free(d, op);
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVMD_DEFERRED;
}

static void ivmd_cluster_on_obj(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                const void *payload)
{
    const ivm_peer_obj_t *m = payload;
    ivm_peer_obj_t rep;
    ivmd_job_t *job = ivmd_job_find(&d->reg, m->job);
    ivmd_obj_t *obj;

    if (!ivm_proto_strok(m->name, sizeof(m->name))) {
        ivmd_conn_close(d, pc, "malformed object message");
        return;
    }
    memset(&rep, 0, sizeof(rep));
    rep.op  = m->op;
    rep.job = m->job;
    if (job == NULL || ivmd_cluster_is_proxy(job) || job->ending) {
        rep.status = IVM_ERROR_NOT_FOUND;
    } else if (hdr->type == IVM_PEER_OBJ_REG) {
        if (m->size == 0) {
            /* unregister: the master was freed on its node */
            obj = ivmd_obj_find_name(job, m->name);
            if (obj != NULL && obj->master_node == (int)(pc->peer - d->link.peers) &&
                obj->master_id == m->master_id) {
                ivmd_obj_free_name(&d->reg, job, obj);
            }
            return;
        }
        if (ivmd_obj_find_name(job, m->name) != NULL) {
            rep.status = IVM_ERROR_EXISTS;
        } else if (ivmd_obj_create(&d->reg, job, NULL, m->name, m->size, -1, &obj) ==
                   IVM_SUCCESS) {
            obj->owner_pe    = m->status;
            obj->master_node = (int)(pc->peer - d->link.peers);
            obj->master_id   = m->master_id;
        } else {
            rep.status = IVM_ERROR_NO_MEMORY;
        }
    } else {
        obj = ivmd_obj_find_name(job, m->name);
        if (obj == NULL) {
            rep.status = IVM_ERROR_NOT_FOUND;
        } else {
            rep.size        = obj->size;
            rep.master_node = obj->master_node < 0 ? (uint32_t)ivmd_cluster_self(d)
                                                   : (uint32_t)obj->master_node;
            rep.master_id   = obj->master_node < 0 ? obj->id : obj->master_id;
        }
    }
    ivmd_conn_send_parts(d, pc, IVM_PEER_OBJ_REP, 0, &rep, sizeof(rep), NULL, 0);
}

static void ivmd_cluster_on_obj_rep(ivmd_t *d, ivmd_conn_t *pc, const void *payload)
{
    const ivm_peer_obj_t *m = payload;
    ivmd_op_t *op = ivmd_op_find(d, m->op);
    ivmd_job_t *job;
    ivmd_obj_t *obj;
    int status;

    if (op == NULL || (op->kind != IVMD_OP_MALLOC && op->kind != IVMD_OP_LOOKUP)) {
        return;
    }
    job = ivmd_job_find(&d->reg, op->job);
    if (op->kind == IVMD_OP_MALLOC) {
        obj = job != NULL ? ivmd_obj_find_id(job, op->obj) : NULL;
        if (m->status != IVM_SUCCESS || obj == NULL || op->conn == NULL) {
            if (obj != NULL) {
                ivmd_obj_free_name(&d->reg, job, obj);
            }
            ivmd_op_answer(d, op, m->status != IVM_SUCCESS ? m->status : IVM_ERROR_NOT_FOUND,
                           m->status == IVM_ERROR_EXISTS
                               ? "an object of that name already exists in the job"
                               : "the object could not be registered");
        } else {
            ivmd_reply_map(d, op->conn, op->type, op->seq, obj, 0, obj->size);
        }
        ivmd_op_free(d, op);
        return;
    }
    /* LOOKUP */
    if (m->status != IVM_SUCCESS || job == NULL || op->conn == NULL) {
        char detail[IVM_MSG_DETAIL_MAX];
        snprintf(detail, sizeof(detail), "no object named '%.200s' in job %u", op->map.name,
                 op->job);
        ivmd_op_answer(d, op, m->status != IVM_SUCCESS ? m->status : IVM_ERROR_NOT_FOUND,
                       detail);
        ivmd_op_free(d, op);
        return;
    }
    obj = ivmd_obj_find_name(job, op->map.name);
    if (obj == NULL) {
        if (ivmd_obj_create(&d->reg, job, NULL, op->map.name, m->size, -1, &obj) !=
            IVM_SUCCESS) {
            ivmd_op_answer(d, op, IVM_ERROR_NO_MEMORY, "out of memory");
            ivmd_op_free(d, op);
            return;
        }
        obj->master_node = (int)m->master_node;
        obj->master_id   = m->master_id;
    }
    status = ivmd_cluster_map(d, op->conn, NULL, &op->map, obj, op);
    if (status != IVMD_DEFERRED) {
        ivmd_op_free(d, op);
    }
}

/* ------------------------------------------------------------ transfers */

/* A transfer to a peer, sent as DATA chunks in order after every transfer
 * queued to that peer before it. Flow control: chunks go out while the link
 * holds less than IVMD_CONN_OUT_HIGH bytes; the rest waits in the peer's
 * list of senders until the link drains (ivmd_cluster_on_drain). A waiting
 * sender reads through its own descriptor of the copy, so an object freed
 * meanwhile still sends what the receiver waits for. */
typedef struct ivmd_sender {
    struct ivmd_sender *next;
    int                 fd;
    int                 sent;   /* a chunk went (a 0-byte transfer sends one) */
    uint32_t            job, flags;
    uint64_t            op_id, obj, dst, off, len, done;
} ivmd_sender_t;

/* The next chunk of s on p's link. obj: the copy, for its statistics (NULL:
 * looked up). */
static ivmError_t ivmd_cluster_send_chunk(ivmd_t *d, ivmd_peer_t *p, ivmd_sender_t *s,
                                          ivmd_obj_t *obj)
{
    uint64_t n = s->len - s->done < IVM_PEER_CHUNK ? s->len - s->done : IVM_PEER_CHUNK;
    ivmd_outbuf_t *b;
    ivm_peer_xfer_t x;
    char *payload;

    b = ivmd_conn_out_alloc(d, p->conn, IVM_PEER_DATA, 0, (uint32_t)(sizeof(x) + n));
    if (b == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    payload = IVMD_OUTBUF_PAYLOAD(b);
    /* The bytes go from the object's memory straight into the message. */
    if (n > 0 && pread(s->fd, payload + sizeof(x), n, (off_t)(s->off + s->done)) != (ssize_t)n) {
        free(b);
        return IVM_ERROR_INTERNAL;
    }
    memset(&x, 0, sizeof(x));
    x.op    = s->op_id;
    x.job   = s->job;
    x.flags = s->flags | (s->done + n == s->len ? IVM_XFER_LAST : 0);
    x.obj   = s->dst;
    x.off   = s->off + s->done;
    x.len   = n;
    memcpy(payload, &x, sizeof(x));
    p->conn->last_tx_ns = ivmd_now_ns();
    ivmd_conn_out_push(d, p->conn, b, NULL, 0);
    if (obj == NULL) {
        ivmd_job_t *job = ivmd_job_find(&d->reg, s->job);
        obj = job != NULL ? ivmd_obj_find_id(job, s->obj) : NULL;
    }
    if (obj != NULL) {
        obj->tx_bytes += n;
    }
    d->tx_bytes += n;
    s->done += n;
    s->sent = 1;
    return IVM_SUCCESS;
}

static int ivmd_cluster_link_full(const ivmd_peer_t *p)
{
    return !p->up || p->conn == NULL || ivmd_conn_queued(p->conn) >= IVMD_CONN_OUT_HIGH;
}

static void ivmd_sender_free(ivmd_sender_t *s)
{
    close(s->fd);
    free(s);
}

/* Peer lost or daemon ending: drop its waiting transfers (their operations
 * fail with the peer). */
static void ivmd_cluster_senders_drop(ivmd_peer_t *p)
{
    ivmd_sender_t *s;

    while ((s = p->senders) != NULL) {
        p->senders = s->next;
        ivmd_sender_free(s);
    }
    p->senders_tail = NULL;
}

/* The link to a peer drained: send the waiting transfers' next chunks, at
 * most IVMD_CONN_OUT_HIGH bytes in one turn of the loop (a fast link must
 * not keep the daemon from its other connections and its heartbeats).
 * Returns 1 if chunks wait that the link could take now. A chunk that
 * cannot be read ends the link: the operations on both sides then fail as
 * with a lost peer, none waits forever. */
static int ivmd_cluster_on_drain(ivmd_t *d, ivmd_conn_t *c, void *arg)
{
    ivmd_peer_t *p = c->peer;
    ivmd_sender_t *s;
    uint64_t budget = IVMD_CONN_OUT_HIGH;

    while (p != NULL && p->conn == c && (s = p->senders) != NULL && !ivmd_cluster_link_full(p)) {
        uint64_t before = s->done;
        ivmError_t status;

        if (budget == 0) {
            return 1;
        }
        status = ivmd_cluster_send_chunk(d, p, s, NULL);
        if (status != IVM_SUCCESS) {
            if (status == IVM_ERROR_INTERNAL) {
                ivm_warn_limited("cannot read an object's copy for node %s: %m", p->node);
                ivmd_conn_doom(c, "cannot read an object's copy");
            }
            return 0;
        }
        budget -= s->done - before < budget ? s->done - before : budget;
        if (s->done == s->len) {
            p->senders = s->next;
            if (p->senders == NULL) {
                p->senders_tail = NULL;
            }
            ivmd_sender_free(s);
        }
    }
    return 0;
}

/* Send [off, off+len) of obj (local fd) as DATA chunks to peer p, for its
 * object `dst`, as part of operation op_id: at once as far as the link takes
 * them, the rest as it drains. */
static ivmError_t ivmd_cluster_send_data(ivmd_t *d, ivmd_peer_t *p, uint32_t job,
                                         uint64_t op_id, uint32_t flags, ivmd_obj_t *obj,
                                         uint64_t dst, uint64_t off, uint64_t len)
{
    ivmd_sender_t s = {.fd = obj->fd, .job = job, .flags = flags, .op_id = op_id,
                       .obj = obj->id, .dst = dst, .off = off, .len = len};
    ivmd_sender_t *w;
    ivmError_t status;

    if (p == NULL || !p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_on_drain(p->conn, ivmd_cluster_on_drain, NULL, IVMD_CONN_OUT_LOW);
    while (p->senders == NULL && !ivmd_cluster_link_full(p) && (!s.sent || s.done < s.len) &&
           s.done < IVMD_CONN_OUT_HIGH) {
        status = ivmd_cluster_send_chunk(d, p, &s, obj);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    if (s.sent && s.done == s.len) {
        return IVM_SUCCESS;
    }
    if (!p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    w = malloc(sizeof(*w));
    if (w == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *w    = s;
    w->fd = fcntl(obj->fd, F_DUPFD_CLOEXEC, 0);
    if (w->fd < 0) {
        free(w);
        return errno == EMFILE || errno == ENFILE ? IVM_ERROR_LIMIT : IVM_ERROR_NO_MEMORY;
    }
    if (p->senders_tail != NULL) {
        p->senders_tail->next = w;
    } else {
        p->senders = w;
    }
    p->senders_tail = w;
    ivmd_conn_want_drain(d, p->conn);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_cluster_read(ivmd_t *d, ivmd_op_t *op, int node, uint64_t obj_there,
                                    uint64_t dst, uint64_t off, uint64_t len, uint32_t flags)
{
    ivm_peer_xfer_t x;

    memset(&x, 0, sizeof(x));
    x.op    = op->id;
    x.job   = op->job;
    x.flags = flags;
    x.obj   = obj_there;
    x.dst   = dst;
    x.off   = off;
    x.len   = len;
    if (ivmd_peer_post(d, ivmd_cluster_peer(d, node), IVM_PEER_READ, &x, sizeof(x), NULL,
                       0) != IVM_SUCCESS) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_op_wait_on(op, node);
    ++op->pending;
    return IVM_SUCCESS;
}

static void ivmd_cluster_op_done(ivmd_t *d, ivmd_op_t *op);

/* Make sure a mirror has its memory, its pages on NUMA node numa (-1: any;
 * the limits of its job and node apply; on failure it has none, and detail
 * says why). */
static ivmError_t ivmd_cluster_mirror_mem(ivmd_t *d, ivmd_job_t *job, ivmd_obj_t *obj,
                                          int numa, char *detail, size_t detail_len)
{
    ivmError_t status;
    int fd;

    if (obj->fd >= 0) {
        return IVM_SUCCESS;
    }
    status = ivmd_limits_obj_mem(d, job, obj->name != NULL ? obj->name : "(mirror)",
                                 obj->size, 1, numa, &fd, detail, detail_len);
    if (status != IVM_SUCCESS) {
        ivm_warn_limited("no mirror of %llu bytes for job %u: %s",
                         (unsigned long long)obj->size, job->id, detail);
        return status;
    }
    obj->fd = fd;
    return IVM_SUCCESS;
}

/* MAP of obj on this node: the master (answer now), or a mirror whose missing
 * regions are fetched first (answer when they arrive). op may be an existing
 * LOOKUP operation to reuse. */
int ivmd_cluster_map(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const ivm_msg_map_req_t *req, ivmd_obj_t *obj, ivmd_op_t *op)
{
    ivmd_range_t gaps[16];
    uint64_t size = req->size ? req->size : obj->size - req->offset;
    int ngaps, i;

    if (req->offset >= obj->size || size > obj->size - req->offset) {
        if (op != NULL) {
            ivmd_op_answer(d, op, IVM_ERROR_INVALID_VALUE, "range outside the object");
            return IVM_ERROR_INVALID_VALUE;
        }
        return IVM_ERROR_INVALID_VALUE;
    }
    if (obj->master_node < 0) {
        if (op != NULL) {
            ivmd_reply_map(d, op->conn, op->type, op->seq, obj, req->offset, size);
            return IVM_SUCCESS;
        }
        return IVMD_LOCAL;
    }
    if (obj->fd < 0) {
        char why[IVM_MSG_DETAIL_MAX];
        ivmd_job_t *job = (c != NULL && c->job != NULL) ? c->job
                          : ivmd_job_find(&d->reg, op != NULL ? op->job : 0);
        ivmError_t status = (job == NULL) ? IVM_ERROR_NOT_FOUND
                            : ivmd_cluster_mirror_mem(d, job, obj,
                                                      c != NULL ? ivmd_numa_of_pe(job, c->pe)
                                                                : -1,
                                                      why, sizeof(why));
        if (status != IVM_SUCCESS) {
            if (job == NULL) {
                snprintf(why, sizeof(why), "the job ended");
            }
            if (op != NULL) {
                ivmd_op_answer(d, op, status, why);
                return status;
            }
            ivm_msg_map_rep_t rep = {.status = status};
            ivmd_conn_reply(d, c, hdr->type, hdr->seq, &rep, sizeof(rep), why, NULL, 0);
            return IVMD_DEFERRED;
        }
    }
    ngaps = ivmd_obj_gaps(obj, req->offset, size, gaps, 16);
    if (ngaps == 0) {
        /* Every byte is held here: reuse, no data moves. */
        if (op != NULL) {
            ivmd_reply_map(d, op->conn, op->type, op->seq, obj, req->offset, size);
            return IVM_SUCCESS;
        }
        return IVMD_LOCAL;
    }
    if (op == NULL) {
        op = ivmd_op_new(d, IVMD_OP_FILL, c, hdr);
        if (op == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        op->map = *req;
    }
    op->obj = obj->id;
    if (obj->fills > 0) {
        /* A fill of this object is on its way: two fills of one range would
         * let the later one overwrite what PEs wrote after the first. */
        op->kind = IVMD_OP_FILL_WAIT;
        return IVMD_DEFERRED;
    }
    ++obj->fills;
    op->kind = IVMD_OP_FILL;
    op->obj  = obj->id;
    op->off  = req->offset;
    op->len  = size;
    for (i = 0; i < ngaps; ++i) {
        if (ivmd_cluster_read(d, op, obj->master_node, obj->master_id, obj->id, gaps[i].off,
                              gaps[i].len, IVM_XFER_HOLD) != IVM_SUCCESS) {
            /* Answered now if nothing is in flight, else when the lost peer's
             * operations are failed. */
            op->status = IVM_ERROR_DAEMON_LOST;
            if (op->pending == 0) {
                ivmd_cluster_op_done(d, op);
            }
            return IVMD_DEFERRED;
        }
    }
    return IVMD_DEFERRED;
}

/* A fill of obj ended: the maps that waited for it try again. */
static void ivmd_cluster_fill_ended(ivmd_t *d, ivmd_obj_t *obj, uint32_t job_id)
{
    ivmd_op_t *op, *next;

    if (obj == NULL || --obj->fills > 0) {
        return;
    }
    for (op = d->ops; op != NULL; op = next) {
        next = op->next;
        if (op->kind != IVMD_OP_FILL_WAIT || op->obj != obj->id || op->job != job_id) {
            continue;
        }
        if (op->conn == NULL ||
            ivmd_cluster_map(d, op->conn, NULL, &op->map, obj, op) != IVMD_DEFERRED) {
            ivmd_op_free(d, op);
        }
        next = d->ops; /* the list may have changed */
        if (obj->fills > 0) {
            return;
        }
    }
}

/* All DATA/ACK of an operation arrived (or it failed). */
static void ivmd_cluster_op_done(ivmd_t *d, ivmd_op_t *op)
{
    ivmd_job_t *job = ivmd_job_find(&d->reg, op->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, op->obj) : NULL;

    switch (op->kind) {
    case IVMD_OP_FILL_WAIT:
        ivmd_op_answer(d, op, op->status ? op->status : IVM_ERROR_DAEMON_LOST,
                       "the node holding the object's master is unreachable");
        break;
    case IVMD_OP_FILL:
        if (op->status == IVM_SUCCESS && obj != NULL && op->conn != NULL) {
            ivmd_reply_map(d, op->conn, op->type, op->seq, obj, op->off, op->len);
        } else {
            ivmd_op_answer(d, op, op->status ? op->status : IVM_ERROR_NOT_FOUND,
                           "the mirror could not be filled from the master");
        }
        ivmd_op_free(d, op);
        ivmd_cluster_fill_ended(d, obj, job != NULL ? job->id : 0);
        return;
    case IVMD_OP_SYNC:
        if (op->status == IVM_SUCCESS && op->then_group && obj != NULL) {
            /* PUT_GROUP from a mirror: the put is done, now the scatter. */
            ivm_peer_xfer_t x;
            op->then_group = 0;
            memset(&x, 0, sizeof(x));
            x.op    = op->id;
            x.job   = op->job;
            x.flags = IVM_XFER_SCATTER;
            x.obj   = obj->master_id;
            x.off   = op->off;
            x.len   = op->len;
            if (ivmd_peer_post(d, ivmd_cluster_peer(d, obj->master_node), IVM_PEER_GROUP, &x,
                               sizeof(x), NULL, 0) == IVM_SUCCESS) {
                op->pending = 1;
                return;
            }
            op->status = IVM_ERROR_DAEMON_LOST;
        }
        ivmd_op_answer(d, op, op->status,
                       op->status == IVM_ERROR_DAEMON_LOST
                           ? "the node holding the object's master is unreachable"
                           : "the transfer failed");
        break;
    case IVMD_OP_GROUP:
        if (op->reply_peer != NULL) {
            ivm_peer_xfer_t x;
            memset(&x, 0, sizeof(x));
            x.op     = op->reply_op;
            x.job    = op->job;
            x.status = op->status;
            ivmd_peer_post(d, op->reply_peer, IVM_PEER_ACK, &x, sizeof(x), NULL, 0);
        } else {
            ivmd_op_answer(d, op, op->status, "a mirror's node is unreachable");
        }
        break;
    default:
        ivmd_op_answer(d, op, op->status ? op->status : IVM_ERROR_DAEMON_LOST,
                       "a node of the cluster is unreachable");
        break;
    }
    ivmd_op_free(d, op);
}

static void ivmd_cluster_op_step(ivmd_t *d, ivmd_op_t *op, int status)
{
    if (status != IVM_SUCCESS && op->status == IVM_SUCCESS) {
        op->status = status;
    }
    if (--op->pending <= 0) {
        ivmd_cluster_op_done(d, op);
    }
}

/* Master: scatter [off, off+len) to the mirrors (except node `skip`), or
 * gather it from them. Completes op when every mirror answered. */
static void ivmd_cluster_group(ivmd_t *d, ivmd_op_t *op, ivmd_obj_t *obj, int gather,
                               int skip)
{
    uint64_t end = op->off + op->len;
    uint32_t i;

    op->pending = 1; /* held until every request is out */
    for (i = 0; i < obj->nholders; ++i) {
        const ivmd_range_t *h = &obj->holders[i];
        uint64_t lo = h->off > op->off ? h->off : op->off;
        uint64_t hi = (h->off + h->len) < end ? (h->off + h->len) : end;
        if (lo >= hi || h->node == skip) {
            continue;
        }
        if (gather) {
            if (ivmd_cluster_read(d, op, h->node, h->obj, obj->id, lo, hi - lo, 0) !=
                IVM_SUCCESS) {
                op->status = IVM_ERROR_DAEMON_LOST;
            }
        } else if (ivmd_cluster_send_data(d, ivmd_cluster_peer(d, h->node), op->job, op->id, 0,
                                          obj, h->obj, lo, hi - lo) == IVM_SUCCESS) {
            ivmd_op_wait_on(op, h->node);
            ++op->pending;
        } else {
            op->status = IVM_ERROR_DAEMON_LOST;
        }
    }
    ivmd_cluster_op_step(d, op, IVM_SUCCESS);
}

/* SYNC request of a PE on this node. */
int ivmd_cluster_sync(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                      const ivm_msg_sync_req_t *req)
{
    return ivmd_cluster_sync_op(d, c, hdr, c->job->id, obj, req->op, req->offset, req->size, 0);
}

int ivmd_cluster_sync_op(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                         ivmd_obj_t *obj, uint32_t sync_op, uint64_t off, uint64_t len,
                         uint64_t gsync)
{
    ivm_msg_sync_req_t rq = {.offset = off, .size = len, .op = sync_op};
    const ivm_msg_sync_req_t *req = &rq;
    ivmd_op_t *op;
    int is_master = obj->master_node < 0;

    if (req->size == 0 || (is_master && (req->op == IVM_SYNC_PUT || req->op == IVM_SYNC_GET))) {
        return IVM_SUCCESS;
    }
    if (is_master && obj->nholders == 0) {
        return IVM_SUCCESS; /* no mirror anywhere: nothing to scatter or gather */
    }
    op = ivmd_op_new(d, is_master ? IVMD_OP_GROUP : IVMD_OP_SYNC, c, hdr);
    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->job   = job;
    op->gsync = gsync;
    op->obj   = obj->id;
    op->off   = req->offset;
    op->len   = req->size;
    if (is_master) {
        ivmd_cluster_group(d, op, obj, req->op == IVM_SYNC_GET_GROUP, -1);
        return IVMD_DEFERRED;
    }
    switch (req->op) {
    case IVM_SYNC_PUT:
    case IVM_SYNC_PUT_GROUP:
        op->then_group = (req->op == IVM_SYNC_PUT_GROUP);
        if (ivmd_cluster_send_data(d, ivmd_cluster_peer(d, obj->master_node), op->job, op->id,
                                   0, obj, obj->master_id, req->offset, req->size) !=
            IVM_SUCCESS) {
            ivmd_op_free(d, op);
            return IVM_ERROR_DAEMON_LOST;
        }
        ivmd_op_wait_on(op, obj->master_node);
        op->pending = 1;
        return IVMD_DEFERRED;
    case IVM_SYNC_GET:
        if (ivmd_cluster_read(d, op, obj->master_node, obj->master_id, obj->id, req->offset,
                              req->size, 0) != IVM_SUCCESS) {
            ivmd_op_free(d, op);
            return IVM_ERROR_DAEMON_LOST;
        }
        return IVMD_DEFERRED;
    default: { /* GET_GROUP: the master gathers from every mirror, this one too */
        ivm_peer_xfer_t x;
        memset(&x, 0, sizeof(x));
        x.op    = op->id;
        x.job   = op->job;
        x.flags = IVM_XFER_GATHER;
        x.obj   = obj->master_id;
        x.off   = req->offset;
        x.len   = req->size;
        if (ivmd_peer_post(d, ivmd_cluster_peer(d, obj->master_node), IVM_PEER_GROUP, &x,
                           sizeof(x), NULL, 0) != IVM_SUCCESS) {
            ivmd_op_free(d, op);
            return IVM_ERROR_DAEMON_LOST;
        }
        ivmd_op_wait_on(op, obj->master_node);
        op->pending = 1;
        return IVMD_DEFERRED;
    }
    }
}

/* The object a transfer message names, with its range checked. */
static ivmd_obj_t *ivmd_cluster_xfer_obj(ivmd_t *d, const ivm_peer_xfer_t *x)
{
    ivmd_job_t *job = ivmd_job_find(&d->reg, x->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, x->obj) : NULL;

    if (obj == NULL || obj->fd < 0 || x->off > obj->size || x->len > obj->size - x->off) {
        return NULL;
    }
    return obj;
}

/* Device copies in the group calls across nodes. A node that receives
 * scattered bytes refreshes its device copies of them before it ACKs; a
 * mirror asked to give bytes for a gather, and the master before it gathers,
 * first pull their device copies of the range into the node copy. What is to
 * be done after the device copies is kept in an ivmd_xfer_later_t. */
typedef struct ivmd_xfer_later {
    ivm_peer_xfer_t x;     /* the message that asked */
    int             node;  /* the peer that sent it */
    uint64_t        op;    /* GROUP: the operation made for it */
    int             gather;
    int             skip;
} ivmd_xfer_later_t;

/* Scatter: the device copies have the bytes: ACK. */
static void ivmd_cluster_later_ack(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivm_peer_xfer_t ack = {.op = l->x.op, .job = l->x.job, .status = status};

    ivmd_peer_post(d, ivmd_cluster_peer(d, l->node), IVM_PEER_ACK, &ack, sizeof(ack), NULL, 0);
    free(l);
}

/* A fill's last chunk: the device copies have the filled bytes: the
 * operation goes on (its map is answered). A lost GPU daemon fails the GPU
 * maps themselves; CPU PEs go on. */
static void ivmd_cluster_later_fill(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_op_t *op = ivmd_op_find(d, l->x.op);

    free(l);
    if (op != NULL) {
        ivmd_cluster_op_step(d, op, status == IVM_ERROR_DAEMON_LOST ? IVM_SUCCESS : status);
    }
}

/* Gather at a mirror: the node copy has the device copies' bytes: send. */
static void ivmd_cluster_later_send(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_obj_t *obj = ivmd_cluster_xfer_obj(d, &l->x);
    ivmd_peer_t *p = ivmd_cluster_peer(d, l->node);

    if (obj == NULL || status != IVM_SUCCESS) {
        ivm_peer_xfer_t ack = {.op = l->x.op, .job = l->x.job,
                               .status = obj == NULL ? IVM_ERROR_NOT_FOUND : status};
        ivmd_peer_post(d, p, IVM_PEER_ACK, &ack, sizeof(ack), NULL, 0);
    } else {
        ivmd_cluster_send_data(d, p, l->x.job, l->x.op, IVM_XFER_REPLY, obj, l->x.dst, l->x.off,
                               l->x.len);
    }
    free(l);
}

/* GROUP at the master: this node's device copies are done; now the mirrors. */
static void ivmd_cluster_later_group(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_op_t *op = ivmd_op_find(d, l->op);
    ivmd_obj_t *obj = ivmd_cluster_xfer_obj(d, &l->x);

    if (op != NULL) {
        if (obj == NULL || status != IVM_SUCCESS) {
            op->status = obj == NULL ? IVM_ERROR_NOT_FOUND : status;
            op->pending = 0;
            ivmd_cluster_op_done(d, op);
        } else {
            ivmd_cluster_group(d, op, obj, l->gather, l->skip);
        }
    }
    free(l);
}

static ivmd_xfer_later_t *ivmd_cluster_later(const ivm_peer_xfer_t *x, int node)
{
    ivmd_xfer_later_t *l = calloc(1, sizeof(*l));

    if (l != NULL) {
        l->x    = *x;
        l->node = node;
    }
    return l;
}

static void ivmd_cluster_on_xfer(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                 const void *payload)
{
    ivmd_xfer_later_t *later;
    const ivm_peer_xfer_t *x = payload;
    int node = (int)(pc->peer - d->link.peers);
    ivmd_obj_t *obj;
    ivmd_op_t *op;

    switch (hdr->type) {
    case IVM_PEER_READ:
        obj = ivmd_cluster_xfer_obj(d, x);
        if (obj == NULL || hdr->length != sizeof(*x)) {
            ivm_peer_xfer_t ack = {.op = x->op, .job = x->job, .status = IVM_ERROR_NOT_FOUND};
            ivmd_conn_send_parts(d, pc, IVM_PEER_ACK, 0, &ack, sizeof(ack), NULL, 0);
            return;
        }
        if (x->flags & IVM_XFER_HOLD) {
            ivmd_obj_add_holder(obj, node, x->dst, x->off, x->len);
        }
        if (obj->master_node >= 0 && !(x->flags & IVM_XFER_HOLD) &&
            ivmd_gpu_has_copies(d, x->job, obj->id, x->off, x->len) &&
            (later = ivmd_cluster_later(x, node)) != NULL) {
            /* A gather from this mirror: its device copies first. */
            if (ivmd_gpu_group_refresh(d, x->job, obj->id, x->off, x->len, 1, 0,
                                       ivmd_cluster_later_send, later)) {
                return;
            }
            free(later);
        }
        ivmd_cluster_send_data(d, pc->peer, x->job, x->op, IVM_XFER_REPLY, obj, x->dst, x->off,
                               x->len);
        return;
    case IVM_PEER_DATA:
        obj = ivmd_cluster_xfer_obj(d, x);
        if (hdr->length != sizeof(*x) + x->len) {
            ivmd_conn_close(d, pc, "malformed DATA");
            return;
        }
        if (obj != NULL && x->len > 0 &&
            pwrite(obj->fd, x + 1, x->len, (off_t)x->off) != (ssize_t)x->len) {
            obj = NULL;
        }
        d->rx_bytes += x->len;
        if (obj != NULL) {
            obj->rx_bytes += x->len;
        }
        if (x->flags & IVM_XFER_REPLY) {
            op = ivmd_op_find(d, x->op);
            if (op == NULL) {
                return;
            }
            if (op->kind == IVMD_OP_FILL && obj != NULL) {
                ivmd_obj_hold(obj, x->off, x->len);
                /* Device copies of the object made before these bytes were
                 * here get them too; the map is answered once they have. */
                if (!(x->flags & IVM_XFER_LAST)) {
                    ivmd_gpu_filled(d, x->job, obj, x->off, x->len, NULL, NULL);
                } else if ((later = ivmd_cluster_later(x, node)) != NULL) {
                    if (ivmd_gpu_filled(d, x->job, obj, x->off, x->len,
                                        ivmd_cluster_later_fill, later)) {
                        return;
                    }
                    free(later);
                }
            }
            if (obj == NULL) {
                op->status = IVM_ERROR_INTERNAL;
            }
            if (x->flags & IVM_XFER_LAST) {
                ivmd_cluster_op_step(d, op, IVM_SUCCESS);
            }
        } else if (obj != NULL && obj->master_node >= 0 && ivmd_gpu_alive(d) &&
                   !(x->flags & IVM_XFER_LAST)) {
            /* A scatter into this mirror: refresh the device copies. */
            ivmd_gpu_group_refresh(d, x->job, obj->id, x->off, x->len, 0, 0, NULL, NULL);
        } else if (obj != NULL && obj->master_node >= 0 && ivmd_gpu_alive(d) &&
                   (later = ivmd_cluster_later(x, node)) != NULL) {
            /* Its last chunk: ACK once the device copies have every chunk. */
            if (!ivmd_gpu_group_refresh(d, x->job, obj->id, x->off, x->len, 0, 1,
                                        ivmd_cluster_later_ack, later)) {
                ivmd_cluster_later_ack(d, later, IVM_SUCCESS);
            }
        } else if (x->flags & IVM_XFER_LAST) {
            ivm_peer_xfer_t ack = {.op = x->op, .job = x->job,
                                   .status = obj != NULL ? IVM_SUCCESS : IVM_ERROR_NOT_FOUND};
            ivmd_conn_send_parts(d, pc, IVM_PEER_ACK, 0, &ack, sizeof(ack), NULL, 0);
        }
        return;
    case IVM_PEER_ACK:
        op = ivmd_op_find(d, x->op);
        if (op != NULL) {
            ivmd_cluster_op_step(d, op, x->status);
        }
        return;
    case IVM_PEER_GROUP: {
        ivmd_job_t *job = ivmd_job_find(&d->reg, x->job);
        obj = ivmd_cluster_xfer_obj(d, x);
        op = obj != NULL ? ivmd_op_new(d, IVMD_OP_GROUP, NULL, NULL) : NULL;
        if (op == NULL || job == NULL) {
            ivm_peer_xfer_t ack = {.op = x->op, .job = x->job, .status = IVM_ERROR_NOT_FOUND};
            ivmd_conn_send_parts(d, pc, IVM_PEER_ACK, 0, &ack, sizeof(ack), NULL, 0);
            return;
        }
        op->job        = x->job;
        op->obj        = obj->id;
        op->off        = x->off;
        op->len        = x->len;
        op->reply_peer = pc->peer;
        op->reply_op   = x->op;
        if (ivmd_gpu_has_copies(d, x->job, obj->id, x->off, x->len) &&
            (later = ivmd_cluster_later(x, node)) != NULL) {
            /* The master's node first pulls its device copies (gather) or
             * refreshes them with what the put brought (scatter). */
            later->op     = op->id;
            later->gather = (x->flags & IVM_XFER_GATHER) != 0;
            later->skip   = later->gather ? -1 : node;
            if (ivmd_gpu_group_refresh(d, x->job, obj->id, x->off, x->len, later->gather, 0,
                                       ivmd_cluster_later_group, later)) {
                return;
            }
            free(later);
        }
        ivmd_cluster_group(d, op, obj, (x->flags & IVM_XFER_GATHER) != 0,
                           (x->flags & IVM_XFER_GATHER) ? -1 : node);
        return;
    }
    default:
        return;
    }
}

/* ------------------------------------------------------------ dispatch */

void ivmd_cluster_handle_msg(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    switch (hdr->type) {
    case IVM_PEER_NODEINFO: {
        const ivm_peer_nodeinfo_t *m = payload;
        pc->peer->ndevs = m->ndevs > 64 ? 64 : (int)m->ndevs;
        pc->peer->ngpus = m->ngpus > 64 ? 64 : (int)m->ngpus;
        for (int i = 0; i < pc->peer->ndevs; ++i) {
            pc->peer->ncores[i] = m->ncores[i];
        }
        return;
    }
    case IVM_PEER_FWD:
        ivmd_cluster_on_fwd(d, pc, hdr, payload);
        return;
    case IVM_PEER_FWD_REP:
        ivmd_cluster_on_fwd_rep(d, pc, hdr, payload);
        return;
    case IVM_PEER_PE_STATE:
        ivmd_cluster_on_pe_state(d, pc, payload);
        return;
    case IVM_PEER_SPAWN:
        ivmd_cluster_on_spawn(d, pc, hdr, payload);
        return;
    case IVM_PEER_SPAWN_REP:
        ivmd_cluster_on_spawn_rep(d, pc, payload);
        return;
    case IVM_PEER_JOB_END:
        ivmd_cluster_on_job_end(d, payload);
        return;
    case IVM_PEER_OUTPUT:
        ivmd_cluster_on_output(d, pc, hdr, payload);
        return;
    case IVM_PEER_OBJ_REG:
    case IVM_PEER_OBJ_LOOKUP:
        ivmd_cluster_on_obj(d, pc, hdr, payload);
        return;
    case IVM_PEER_OBJ_REP:
        ivmd_cluster_on_obj_rep(d, pc, payload);
        return;
    case IVM_PEER_READ:
    case IVM_PEER_DATA:
    case IVM_PEER_ACK:
    case IVM_PEER_GROUP:
        ivmd_cluster_on_xfer(d, pc, hdr, payload);
        return;
    default:
        ivmd_conn_close(d, pc, "unexpected peer message");
    }
}

/* ------------------------------------------------------------ faults */

void ivmd_cluster_peer_lost(ivmd_t *d, ivmd_peer_t *p)
{
    int node = (int)(p - d->link.peers);
    ivmd_job_t *job, *next;
    ivmd_op_t *op, *onext;
    int i;

    ivmd_cluster_senders_drop(p);
    for (op = d->ops; op != NULL; op = onext) {
        onext = op->next;
        if (node < 64 && (op->peers & (1ull << node))) {
            op->status  = IVM_ERROR_DAEMON_LOST;
            op->pending = 0;
            op->then_group = 0;
            ivmd_cluster_op_done(d, op);
        } else if (op->reply_peer == p) {
            op->reply_peer = NULL;
        }
    }
    for (job = d->reg.jobs; job != NULL; job = next) {
        next = job->next;
        if (job->data == NULL) {
            continue;
        }
        if (ivmd_cluster_is_proxy(job)) {
            if (((ivmd_job_data_t *)job->data)->root_peer == p) {
                ivmd_job_terminate(d, job, "its root daemon was lost");
                ivmd_job_collect(d, job);
            }
            continue;
        }
        for (i = 1; i < job->next_pe_id; ++i) {
            ivmd_pe_t *pe = job->pes[i];
            if (pe != NULL && pe->node == node) {
                ivmd_cluster_remote_end(d, pe, 1, 1);
            }
        }
        ivmd_job_collect(d, job);
    }
}
