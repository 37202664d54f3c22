/*
 * Transfers between copies (data/xfer.h). A PE's SYNC on a mirror: Put sends
 * DATA to the master's daemon (ACK on the last chunk); Get READs; PutGroup
 * puts, then asks the master to scatter (GROUP) each mirror's intersection;
 * GetGroup asks the master to gather from every mirror.
 *
 * Device copies in the group calls across nodes: a node that receives
 * scattered bytes refreshes its device copies of them before it ACKs; a
 * mirror asked to give bytes for a gather, and the master before it gathers,
 * first pull their device copies of the range into the node copy. What is to
 * be done after the device copies is kept in an ivmd_xfer_later_t.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/copies.h"
#include "data/group.h"
#include "data/op.h"
#include "data/target.h"
#include "data/transport.h"
#include "data/xfer.h"
#include "log.h"

typedef struct ivmd_xfer_later {
    ivmd_data_t    *dp;
    ivm_peer_xfer_t x;     /* the message that asked */
    int             node;  /* the peer that sent it */
    uint64_t        op;    /* GROUP: the operation made for it */
    int             gather;
    int             skip;
} ivmd_xfer_later_t;

/* A transfer message to node about op_id (ours or the peer's). */
static ivmError_t ivmd_xfer_post(ivmd_data_t *dp, int node, uint16_t type, uint64_t op_id,
                                 uint32_t job, uint32_t flags, uint64_t obj, uint64_t dst,
                                 uint64_t off, uint64_t len)
{
    ivm_peer_xfer_t x;

    memset(&x, 0, sizeof(x));
    x.op    = op_id;
    x.job   = job;
    x.flags = flags;
    x.obj   = obj;
    x.dst   = dst;
    x.off   = off;
    x.len   = len;
    return ivmd_data_transport(dp)->send_msg(dp, node, type, &x, sizeof(x), NULL, 0);
}

static void ivmd_xfer_ack(ivmd_data_t *dp, int node, uint64_t op_id, uint32_t job, int status)
{
    ivm_peer_xfer_t ack = {.op = op_id, .job = job, .status = status};

    ivmd_data_transport(dp)->send_msg(dp, node, IVM_PEER_ACK, &ack, sizeof(ack), NULL, 0);
}

/* Write [off, off+len) of our copy obj into node's copy dst, for op_id. */
static ivmError_t ivmd_xfer_put(ivmd_data_t *dp, int node, uint32_t job, uint64_t op_id,
                                uint32_t flags, const ivmd_obj_t *obj, uint64_t dst,
                                uint64_t off, uint64_t len, int32_t sig_from, int32_t sig_to)
{
    ivmd_xfer_range_t r = {.job = job, .op = op_id, .flags = flags, .fd = obj->fd,
                           .src = obj->id, .dst = dst, .off = off, .len = len,
                           .sig_from = sig_from, .sig_to = sig_to};

    return ivmd_data_transport(dp)->put(dp, node, &r);
}

ivmError_t ivmd_xfer_read(ivmd_data_t *dp, ivmd_op_t *op, int node, uint64_t obj_there, uint64_t dst,
                          uint64_t off, uint64_t len, uint32_t flags)
{
    ivmd_xfer_range_t r = {.job = op->job, .op = op->id, .flags = flags, .fd = -1,
                           .src = dst, .dst = obj_there, .off = off, .len = len};

    if (flags & IVM_XFER_HOLD) {
        /* The master learns of this mirror now: it may write into it
         * one-sided from here on (scatter), so it gets its key first. */
        ivmd_job_t *job = ivmd_job_find(dp->reg, op->job);
        ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, dst) : NULL;

        if (obj != NULL) {
            ivmd_data_transport(dp)->offer(dp, node, op->job, obj);
        }
    }
    if (ivmd_tcp_read(dp, node, &r) != IVM_SUCCESS) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_op_wait_on(op, node);
    ++op->pending;
    return IVM_SUCCESS;
}

/* A Get of the master's [off, off+len) into our mirror obj: the transport's
 * get (one-sided where it can). */
static ivmError_t ivmd_xfer_get(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj)
{
    ivmd_xfer_range_t r = {.job = op->job, .op = op->id, .fd = obj->fd, .src = obj->id,
                           .dst = obj->master_id, .off = op->off, .len = op->len};
    ivmError_t status = ivmd_data_transport(dp)->get(dp, obj->master_node, &r);

    if (status != IVM_SUCCESS) {
        return status;
    }
    ivmd_op_wait_on(op, obj->master_node);
    ++op->pending;
    return IVM_SUCCESS;
}

/* Ask the master's node to scatter or gather (GROUP) for op. */
static ivmError_t ivmd_xfer_group_ask(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj,
                                      uint32_t flags)
{
    if (ivmd_xfer_post(dp, obj->master_node, IVM_PEER_GROUP, op->id, op->job, flags,
                       obj->master_id, 0, op->off, op->len) != IVM_SUCCESS) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_op_wait_on(op, obj->master_node);
    op->pending = 1;
    return IVM_SUCCESS;
}

/* Answer a READ with our copy's bytes; a range the transport cannot take
 * (no memory, no descriptor) fails the reader's operation at once. */
static void ivmd_xfer_reply(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x,
                            const ivmd_obj_t *obj)
{
    ivmError_t status = ivmd_xfer_put(dp, node, x->job, x->op, IVM_XFER_REPLY, obj, x->dst,
                                      x->off, x->len, 0, 0);

    if (status != IVM_SUCCESS && status != IVM_ERROR_DAEMON_LOST) {
        ivmd_xfer_ack(dp, node, x->op, x->job, status);
    }
}

/* ------------------------------------------------------------ operations */

/* Master: scatter [off, off+len) to the mirrors (except node `skip`:
 * data/group.c), or gather it from them. Completes op when every mirror
 * answered. */
static void ivmd_xfer_group(ivmd_data_t *dp, ivmd_op_t *op, ivmd_obj_t *obj, int gather, int skip)
{
    uint64_t end = op->off + op->len;
    uint32_t i;

    op->pending = 1; /* held until every request is out */
    if (!gather) {
        ivmd_group_scatter(dp, op, obj, skip);
        ivmd_op_step(dp, op, IVM_SUCCESS);
        return;
    }
    for (i = 0; i < obj->nholders; ++i) {
        const ivmd_range_t *h = &obj->holders[i];
        uint64_t lo = h->off > op->off ? h->off : op->off;
        uint64_t hi = (h->off + h->len) < end ? (h->off + h->len) : end;
        ivmError_t status;

        if (lo >= hi || h->node == skip) {
            continue;
        }
        status = ivmd_xfer_read(dp, op, h->node, h->obj, obj->id, lo, hi - lo, 0);
        if (status != IVM_SUCCESS) {
            op->status = status;
        }
    }
    ivmd_op_step(dp, op, IVM_SUCCESS);
}

/* SYNC: the transfer ended; a PUT_GROUP goes on with the master's scatter. */
void ivmd_xfer_sync_step(ivmd_data_t *dp, ivmd_op_t *op)
{
    ivmd_job_t *job = ivmd_job_find(dp->reg, op->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, op->obj) : NULL;

    if (op->phase == IVMD_OP_MOVE && op->then_group && op->status == IVM_SUCCESS &&
        obj != NULL) {
        op->phase = IVMD_OP_SCATTER;
        if (ivmd_xfer_group_ask(dp, op, obj, IVM_XFER_SCATTER) == IVM_SUCCESS) {
            return;
        }
        op->status = IVM_ERROR_DAEMON_LOST;
    }
    ivmd_op_answer(dp, op, op->status,
                   op->status == IVM_ERROR_DAEMON_LOST
                       ? "the node holding the object's master is unreachable"
                       : "the transfer failed");
    ivmd_op_free(dp, op);
}

/* GROUP: every mirror answered: ACK the mirror that asked, or the PE. */
void ivmd_xfer_group_step(ivmd_data_t *dp, ivmd_op_t *op)
{
    if (op->reply_node >= 0) {
        ivmd_xfer_ack(dp, op->reply_node, op->reply_op, op->job, op->status);
    } else {
        ivmd_op_answer(dp, op, op->status, "a mirror's node is unreachable");
    }
    ivmd_op_free(dp, op);
}

int ivmd_data_sync(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                   const ivm_msg_sync_req_t *req)
{
    return ivmd_data_sync_op(dp, c, hdr, c->job->id, obj, req->op, req->offset, req->size, NULL,
                             NULL, 0);
}

/* A SYNC on a mirror: its first phase. */
static ivmError_t ivmd_xfer_sync_start(ivmd_data_t *dp, ivmd_op_t *op, ivmd_obj_t *obj,
                                       uint32_t sync_op)
{
    ivmError_t status;

    switch (sync_op) {
    case IVM_SYNC_PUT:
    case IVM_SYNC_PUT_GROUP:
        op->then_group = (sync_op == IVM_SYNC_PUT_GROUP);
        status = ivmd_xfer_put(dp, obj->master_node, op->job, op->id,
                               op->signal ? IVM_XFER_SIGNAL : 0, obj, obj->master_id, op->off,
                               op->len, op->sig_from, op->sig_to);
        if (status != IVM_SUCCESS) {
            return status;
        }
        ivmd_op_wait_on(op, obj->master_node);
        op->pending = 1;
        return IVM_SUCCESS;
    case IVM_SYNC_GET:
        return ivmd_xfer_get(dp, op, obj);
    default: /* GET_GROUP: the master gathers from every mirror, this one too */
        return ivmd_xfer_group_ask(dp, op, obj, IVM_XFER_GATHER);
    }
}

/* sync_op of [off, off+len) of obj, with the signal sig (NULL: none) in a
 * put's last DATA (ivmd_data_put_signal). */
static int ivmd_data_sync_sig(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                              uint32_t job, ivmd_obj_t *obj, uint32_t sync_op, uint64_t off,
                              uint64_t len, const int32_t *sig, ivmd_data_done_t done, void *arg,
                              uint64_t tag)
{
    int is_master = obj->master_node < 0;
    ivmError_t status;
    ivmd_op_t *op;

    if (len == 0 || (is_master && (sync_op == IVM_SYNC_PUT || sync_op == IVM_SYNC_GET))) {
        return IVM_SUCCESS;
    }
    if (is_master && obj->nholders == 0) {
        return IVM_SUCCESS; /* no mirror anywhere: nothing to scatter or gather */
    }
    op = ivmd_op_new(dp, is_master ? IVMD_OP_GROUP : IVMD_OP_SYNC, c, hdr);
    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->job   = job;
    op->done     = done;
    op->done_arg = arg;
    op->done_tag = tag;
    op->obj   = obj->id;
    op->off   = off;
    op->len   = len;
    if (sig != NULL) {
        op->signal   = 1;
        op->sig_from = sig[0];
        op->sig_to   = sig[1];
    }
    if (is_master) {
        ivmd_xfer_group(dp, op, obj, sync_op == IVM_SYNC_GET_GROUP, -1);
        return IVMD_DEFERRED;
    }
    status = ivmd_xfer_sync_start(dp, op, obj, sync_op);
    if (status != IVM_SUCCESS) {
        ivmd_op_free(dp, op);
        return status;
    }
    return IVMD_DEFERRED;
}

int ivmd_data_sync_op(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                      ivmd_obj_t *obj, uint32_t sync_op, uint64_t off, uint64_t len,
                      ivmd_data_done_t done, void *arg, uint64_t tag)
{
    return ivmd_data_sync_sig(dp, c, hdr, job, obj, sync_op, off, len, NULL, done, arg, tag);
}

int ivmd_data_put_signal(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                         ivmd_obj_t *obj, uint64_t off, uint64_t len, int from, int to,
                         ivmd_data_done_t done, void *arg, uint64_t tag)
{
    int32_t sig[2] = {from, to};

    if (obj->master_node < 0 || len == 0) {
        return IVM_ERROR_INVALID_VALUE; /* no DATA to carry it */
    }
    return ivmd_data_sync_sig(dp, c, hdr, job, obj, IVM_SYNC_PUT, off, len, sig, done, arg, tag);
}

/* ------------------------------------------------------------ later steps */

static ivmd_xfer_later_t *ivmd_xfer_later(ivmd_data_t *dp, const ivm_peer_xfer_t *x, int node)
{
    ivmd_xfer_later_t *l = calloc(1, sizeof(*l));

    if (l != NULL) {
        l->dp   = dp;
        l->x    = *x;
        l->node = node;
    }
    return l;
}

/* The last DATA of a put from node is in our copy (status): a signal it
 * carries is posted now, before the ACK (ivmSyncPutSignal, the master here). */
static void ivmd_xfer_put_landed(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x, int status)
{
    if (status == IVM_SUCCESS && (x->flags & IVM_XFER_SIGNAL)) {
        ivmd_remote_post_signal(dp->remote, x->job, x->sig_from, x->sig_to, node);
    }
    ivmd_xfer_ack(dp, node, x->op, x->job, status);
}

/* Scatter: the device copies have the bytes: ACK. */
static void ivmd_xfer_later_ack(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_data_t *dp = l->dp;

    ivmd_xfer_put_landed(dp, l->node, &l->x, status);
    free(l);
}

/* A fill's last chunk: the device copies have the filled bytes: the
 * operation goes on (its map is answered). A lost GPU daemon fails the GPU
 * maps themselves; CPU PEs go on. */
static void ivmd_xfer_later_fill(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_data_t *dp = l->dp;
    ivmd_op_t *op = ivmd_op_find(dp, l->x.op);

    free(l);
    if (op != NULL) {
        ivmd_op_step(dp, op, status == IVM_ERROR_DAEMON_LOST ? IVM_SUCCESS : status);
    }
}

/* Gather at a mirror: the node copy has the device copies' bytes: send. */
static void ivmd_xfer_later_send(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_data_t *dp = l->dp;
    ivmd_obj_t *obj = ivmd_copies_xfer_obj(dp, &l->x);

    if (obj == NULL || status != IVM_SUCCESS) {
        ivmd_xfer_ack(dp, l->node, l->x.op, l->x.job,
                      obj == NULL ? IVM_ERROR_NOT_FOUND : status);
    } else {
        ivmd_xfer_reply(dp, l->node, &l->x, obj);
    }
    free(l);
}

/* GROUP at the master: this node's device copies are done; now the mirrors. */
static void ivmd_xfer_later_group(ivmd_t *d, void *arg, int status)
{
    ivmd_xfer_later_t *l = arg;
    ivmd_data_t *dp = l->dp;
    ivmd_op_t *op = ivmd_op_find(dp, l->op);
    ivmd_obj_t *obj = ivmd_copies_xfer_obj(dp, &l->x);

    if (op != NULL) {
        if (obj == NULL || status != IVM_SUCCESS) {
            op->status  = obj == NULL ? IVM_ERROR_NOT_FOUND : status;
            op->pending = 0;
            ivmd_op_done(dp, op);
        } else {
            ivmd_xfer_group(dp, op, obj, l->gather, l->skip);
        }
    }
    free(l);
}

/* ------------------------------------------------------------ peer messages */

ivmError_t ivmd_data_on_read(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    ivmd_obj_t *obj = ivmd_copies_xfer_obj(dp, x);
    ivmd_xfer_later_t *later;

    if (obj == NULL || hdr->length != sizeof(*x)) {
        ivmd_xfer_ack(dp, node, x->op, x->job, IVM_ERROR_NOT_FOUND);
        return IVM_SUCCESS;
    }
    if (x->flags & IVM_XFER_HOLD) {
        ivmd_obj_add_holder(obj, node, x->dst, x->off, x->len);
        /* The mirror's node may now put into and get from this master. */
        ivmd_data_transport(dp)->offer(dp, node, x->job, obj);
    } else if (obj->master_node >= 0 &&
               ivmd_target_has_copies(dp, x->job, obj->id, x->off, x->len) &&
               (later = ivmd_xfer_later(dp, x, node)) != NULL) {
        /* A gather from this mirror: its device copies first. */
        if (ivmd_target_refresh(dp, x->job, obj->id, x->off, x->len, 1, 0,
                                   ivmd_xfer_later_send, later)) {
            return IVM_SUCCESS;
        }
        free(later);
    }
    ivmd_xfer_reply(dp, node, x, obj);
    return IVM_SUCCESS;
}

/* DATA answering one of our READs: a fill's chunk or a Get's. */
static void ivmd_xfer_on_reply(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x, ivmd_obj_t *obj)
{
    ivmd_op_t *op = ivmd_op_find(dp, x->op);
    ivmd_xfer_later_t *later;

    if (op == NULL) {
        return;
    }
    if (op->kind == IVMD_OP_FILL && obj != NULL) {
        ivmd_obj_hold(obj, x->off, x->len);
        /* Device copies of the object made before these bytes were here get
         * them too; the map is answered once they have. */
        if (!(x->flags & IVM_XFER_LAST)) {
            ivmd_target_filled(dp, x->job, obj, x->off, x->len, NULL, NULL);
        } else if ((later = ivmd_xfer_later(dp, x, node)) != NULL) {
            if (ivmd_target_filled(dp, x->job, obj, x->off, x->len, ivmd_xfer_later_fill, later)) {
                return;
            }
            free(later);
        }
    }
    if (obj == NULL) {
        op->status = IVM_ERROR_INTERNAL;
    }
    if (x->flags & IVM_XFER_LAST) {
        ivmd_op_step(dp, op, IVM_SUCCESS);
    }
}

/* DATA put or scattered into our copy: ACK its last chunk, once this node's
 * device copies have the bytes. */
static void ivmd_xfer_on_put(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x, ivmd_obj_t *obj)
{
    int devices = obj != NULL && obj->master_node >= 0 && dp->target != NULL;
    ivmd_xfer_later_t *later;

    if (devices && !(x->flags & IVM_XFER_LAST)) {
        /* A scatter into this mirror: refresh the device copies. */
        ivmd_target_refresh(dp, x->job, obj->id, x->off, x->len, 0, 0, NULL, NULL);
    } else if (devices && (later = ivmd_xfer_later(dp, x, node)) != NULL) {
        /* Its last chunk: ACK once the device copies have every chunk. */
        if (!ivmd_target_refresh(dp, x->job, obj->id, x->off, x->len, 0, 1,
                                    ivmd_xfer_later_ack, later)) {
            ivmd_xfer_later_ack(dp->d, later, IVM_SUCCESS);
        }
    } else if (x->flags & IVM_XFER_LAST) {
        ivmd_xfer_put_landed(dp, node, x, obj != NULL ? IVM_SUCCESS : IVM_ERROR_NOT_FOUND);
    }
}

ivmError_t ivmd_data_on_data(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    ivmd_obj_t *obj;

    uint64_t carried = (x->flags & IVM_XFER_PLACED) ? 0 : x->len;

    if (hdr->length != sizeof(*x) + carried) {
        return IVM_ERROR_PROTOCOL;
    }
    obj = ivmd_copies_xfer_obj(dp, x);
    /* PLACED: the sender wrote the bytes into our copy one-sided. */
    if (obj != NULL && carried > 0 &&
        pwrite(obj->fd, x + 1, carried, (off_t)x->off) != (ssize_t)carried) {
        obj = NULL;
    }
    dp->rx_bytes += x->len;
    dp->buf_bytes += carried;
    if (obj != NULL) {
        obj->rx_bytes += x->len;
    }
    if (x->flags & IVM_XFER_CHAIN) {
        ivmd_group_on_piece(dp, node, x, obj);
    } else if (x->flags & IVM_XFER_REPLY) {
        ivmd_xfer_on_reply(dp, node, x, obj);
    } else {
        ivmd_xfer_on_put(dp, node, x, obj);
    }
    return IVM_SUCCESS;
}

/* What an endpoint's put (writes) or get may reach here: the job its PE is
 * of, a master copy here, a range in it; for a put, no device copies of the
 * range here (their refresh is the daemon path's). IVM_ERROR_UNSUPPORTED:
 * the PE goes through its own daemon instead. */
static ivmError_t ivmd_xfer_ep_check(ivmd_data_t *dp, const ivmd_conn_t *c,
                                     const ivm_peer_xfer_t *x, int writes, ivmd_obj_t **obj_p)
{
    ivmd_obj_t *obj;

    if (x->job != c->ep_job) {
        return IVM_ERROR_PERMISSION;
    }
    obj = ivmd_copies_xfer_obj(dp, x);
    if (obj == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    if (obj->master_node >= 0 ||
        (writes && ivmd_target_has_copies(dp, x->job, obj->id, x->off, x->len))) {
        return IVM_ERROR_UNSUPPORTED;
    }
    *obj_p = obj;
    return IVM_SUCCESS;
}

ivmError_t ivmd_data_on_ep_put(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                               const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    struct ivmd_job *sig_job = NULL;
    ivm_peer_xfer_t ack;
    ivmd_obj_t *obj = NULL;
    ivmError_t status;

    if (hdr->length < sizeof(*x) || x->len > IVM_PEER_CHUNK ||
        hdr->length - sizeof(*x) != x->len || (x->flags & ~IVM_XFER_SIGNAL) != 0) {
        return IVM_ERROR_PROTOCOL;
    }
    status = ivmd_xfer_ep_check(dp, c, x, 1, &obj);
    /* ivmSyncPutSignal: the signal is ours to post once the bytes are in
     * (the receiver is of this node), else the PE's daemon carries both. */
    if (status == IVM_SUCCESS && (x->flags & IVM_XFER_SIGNAL) &&
        (x->sig_from != c->ep_pe ||
         (sig_job = ivmd_remote_signal_here(dp->remote, x->job, x->sig_from, x->sig_to,
                                            (int)c->ep_node)) == NULL)) {
        status = IVM_ERROR_UNSUPPORTED;
    }
    if (status == IVM_SUCCESS && x->len > 0 &&
        pwrite(obj->fd, x + 1, x->len, (off_t)x->off) != (ssize_t)x->len) {
        status = IVM_ERROR_INTERNAL;
    }
    if (status == IVM_SUCCESS) {
        dp->rx_bytes  += x->len;
        dp->buf_bytes += x->len;
        obj->rx_bytes += x->len;
        ++dp->ep_puts;
        if (sig_job != NULL) {
            ivmd_remote_signal_post(dp->remote, sig_job, x->sig_from, x->sig_to);
        }
    }
    memset(&ack, 0, sizeof(ack));
    ack.op     = x->op;
    ack.job    = x->job;
    ack.status = status;
    ivmd_conn_send(dp->d, c, IVM_PEER_EP_ACK, &ack, sizeof(ack));
    return IVM_SUCCESS;
}

/* EP_GET on a PE's endpoint: the master's bytes, read straight into the
 * reply (EP_DATA), or its status alone. */
ivmError_t ivmd_data_on_ep_get(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                               const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    ivm_peer_xfer_t rep;
    ivmd_outbuf_t *b;
    ivmd_obj_t *obj = NULL;
    ivmError_t status;
    uint64_t n;

    if (hdr->length != sizeof(*x) || x->len > IVM_PEER_CHUNK || x->flags != 0) {
        return IVM_ERROR_PROTOCOL;
    }
    status = ivmd_xfer_ep_check(dp, c, x, 0, &obj);
    n = status == IVM_SUCCESS ? x->len : 0;
    b = ivmd_conn_out_alloc(dp->d, c, IVM_PEER_EP_DATA, 0, (uint32_t)(sizeof(rep) + n));
    if (b == NULL) {
        return IVM_SUCCESS; /* the endpoint is closing */
    }
    if (n > 0 && pread(obj->fd, IVMD_OUTBUF_PAYLOAD(b) + sizeof(rep), n, (off_t)x->off) !=
                     (ssize_t)n) {
        status = IVM_ERROR_INTERNAL;
        n      = 0;
        free(b);
        b = ivmd_conn_out_alloc(dp->d, c, IVM_PEER_EP_DATA, 0, (uint32_t)sizeof(rep));
        if (b == NULL) {
            return IVM_SUCCESS;
        }
    }
    memset(&rep, 0, sizeof(rep));
    rep.op     = x->op;
    rep.job    = x->job;
    rep.status = status;
    rep.off    = x->off;
    rep.len    = n;
    memcpy(IVMD_OUTBUF_PAYLOAD(b), &rep, sizeof(rep));
    if (n > 0) {
        dp->tx_bytes  += n;
        dp->buf_bytes += n;
        obj->tx_bytes += n;
        ++dp->ep_gets;
    }
    ivmd_conn_out_push(dp->d, c, b, NULL, 0);
    return IVM_SUCCESS;
}

ivmError_t ivmd_data_on_ack(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    ivmd_op_t *op = ivmd_op_find(dp, x->op);

    (void)node;
    (void)hdr;
    if (op != NULL) {
        ivmd_op_step(dp, op, x->status);
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_data_on_group(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    const ivm_peer_xfer_t *x = payload;
    int gather = (x->flags & IVM_XFER_GATHER) != 0;
    ivmd_obj_t *obj = ivmd_copies_xfer_obj(dp, x);
    ivmd_op_t *op = obj != NULL ? ivmd_op_new(dp, IVMD_OP_GROUP, NULL, NULL) : NULL;
    ivmd_xfer_later_t *later;

    (void)hdr;
    if (op == NULL) {
        ivmd_xfer_ack(dp, node, x->op, x->job, IVM_ERROR_NOT_FOUND);
        return IVM_SUCCESS;
    }
    op->job        = x->job;
    op->obj        = obj->id;
    op->off        = x->off;
    op->len        = x->len;
    op->reply_node = node;
    op->reply_op   = x->op;
    if (ivmd_target_has_copies(dp, x->job, obj->id, x->off, x->len) &&
        (later = ivmd_xfer_later(dp, x, node)) != NULL) {
        /* The master's node first pulls its device copies (gather) or
         * refreshes them with what the put brought (scatter). */
        later->op     = op->id;
        later->gather = gather;
        later->skip   = gather ? -1 : node;
        if (ivmd_target_refresh(dp, x->job, obj->id, x->off, x->len, gather, 0,
                                   ivmd_xfer_later_group, later)) {
            return IVM_SUCCESS;
        }
        free(later);
    }
    ivmd_xfer_group(dp, op, obj, gather, gather ? -1 : node);
    return IVM_SUCCESS;
}
