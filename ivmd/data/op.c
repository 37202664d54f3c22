/* The data plane's operations in flight (see data/op.h). */
#include <stdlib.h>
#include <string.h>

#include "data/op.h"
#include "data/target.h"
#include "data/transport.h"

typedef void (*ivmd_op_step_fn_t)(ivmd_data_t *dp, ivmd_op_t *op);

static void ivmd_op_fail_step(ivmd_data_t *dp, ivmd_op_t *op);
static void ivmd_op_wait_step(ivmd_data_t *dp, ivmd_op_t *op);

/* What each kind does once nothing is awaited any more. */
static const ivmd_op_step_fn_t ivmd_op_steps[IVMD_OP_KINDS] = {
    [IVMD_OP_MALLOC]    = ivmd_op_fail_step, /* ends with OBJ_REP, here only when failed */
    [IVMD_OP_LOOKUP]    = ivmd_op_fail_step,
    [IVMD_OP_FILL]      = ivmd_objects_fill_step,
    [IVMD_OP_FILL_WAIT] = ivmd_op_wait_step, /* retried when the fill ends, here when failed */
    [IVMD_OP_SYNC]      = ivmd_xfer_sync_step,
    [IVMD_OP_GROUP]     = ivmd_xfer_group_step,
};

ivmd_op_t *ivmd_op_new(ivmd_data_t *dp, ivmd_op_kind_t kind, ivmd_conn_t *c,
                       const ivm_msg_hdr_t *hdr)
{
    ivmd_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return NULL;
    }
    op->id   = ++dp->next_op;
    op->reply_node = -1;
    op->kind = kind;
    op->conn = c;
    if (hdr != NULL) {
        op->seq  = hdr->seq;
        op->type = hdr->type;
    }
    op->job = (c != NULL && c->job != NULL) ? c->job->id : 0;
    HASH_ADD(hh, dp->ops, id, sizeof(op->id), op);
    return op;
}

ivmd_op_t *ivmd_op_find(ivmd_data_t *dp, uint64_t id)
{
    ivmd_op_t *op;

    HASH_FIND(hh, dp->ops, &id, sizeof(id), op);
    return op;
}

void ivmd_op_free(ivmd_data_t *dp, ivmd_op_t *op)
{
    HASH_DEL(dp->ops, op);
    free(op);
}

void ivmd_op_wait_on(ivmd_op_t *op, int node)
{
    if (node >= 0 && node < 64) {
        op->peers |= 1ull << node;
    }
}

void ivmd_op_answer(ivmd_data_t *dp, ivmd_op_t *op, int status, const char *detail)
{
    /* The reply has its type's full size (a MAP reply is no bare status). */
    union {
        ivm_msg_status_t         status;
        ivm_msg_create_pes_rep_t largest;
        ivm_msg_map_rep_t        map;
    } rep;
    uint32_t len;

    if (op->done != NULL) {
        ivmd_data_done_t done = op->done;
        op->done = NULL;
        done(op->done_arg, op->done_tag, status);
        return;
    }
    if (op->conn == NULL) {
        return;
    }
    len = dp->svc->reply_size(op->type);
    memset(&rep, 0, len);
    rep.status.status = status;
    ivmd_conn_reply(dp->d, op->conn, op->type, op->seq, &rep, len,
                    status != IVM_SUCCESS ? detail : NULL, NULL, 0);
}

void ivmd_op_step(ivmd_data_t *dp, ivmd_op_t *op, int status)
{
    if (status != IVM_SUCCESS && op->status == IVM_SUCCESS) {
        op->status = status;
    }
    if (--op->pending <= 0) {
        ivmd_op_done(dp, op);
    }
}

void ivmd_op_done(ivmd_data_t *dp, ivmd_op_t *op)
{
    ivmd_op_steps[op->kind](dp, op);
}

static void ivmd_op_fail_step(ivmd_data_t *dp, ivmd_op_t *op)
{
    ivmd_op_answer(dp, op, op->status ? op->status : IVM_ERROR_DAEMON_LOST,
                   "a node of the cluster is unreachable");
    ivmd_op_free(dp, op);
}

static void ivmd_op_wait_step(ivmd_data_t *dp, ivmd_op_t *op)
{
    ivmd_op_answer(dp, op, op->status ? op->status : IVM_ERROR_DAEMON_LOST,
                   "the node holding the object's master is unreachable");
    ivmd_op_free(dp, op);
}

void ivmd_data_init(ivmd_data_t *dp, ivmd_t *d, ivmd_registry_t *reg, ivmd_link_t *link,
                    ivmd_quota_t *quota, ivmd_remote_t *remote, const ivmd_data_ops_t *svc)
{
    dp->remote = remote;
    dp->d     = d;
    dp->reg   = reg;
    dp->link  = link;
    dp->quota = quota;
    dp->svc   = svc;
}

int ivmd_data_busy(const ivmd_data_t *dp)
{
    return dp->ops != NULL;
}

void ivmd_data_conn_gone(ivmd_data_t *dp, ivmd_conn_t *c)
{
    ivmd_op_t *op, *tmp;

    HASH_ITER(hh, dp->ops, op, tmp) {
        if (op->conn == c) {
            op->conn = NULL;
        }
    }
}

void ivmd_data_peer_up(ivmd_data_t *dp, int node)
{
    ivmd_data_transport(dp)->peer_up(dp, node);
}

ivmError_t ivmd_data_on_transport(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                  const void *payload)
{
    return ivmd_data_transport(dp)->on_msg(dp, node, hdr, payload);
}

void ivmd_data_copy_made(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj)
{
    ivmd_data_transport(dp)->copy_made(dp, job, obj);
}

const ivmd_transport_ops_t *ivmd_data_transport(const ivmd_data_t *dp)
{
    return dp->transport != NULL ? dp->transport : &ivmd_tcp_transport_ops;
}

void ivmd_data_set_target(ivmd_data_t *dp, const ivmd_target_ops_t *ops, void *ctx)
{
    dp->target     = ops;
    dp->target_ctx = ctx;
}

int ivmd_target_has_copies(const ivmd_data_t *dp, uint32_t job, uint64_t obj, uint64_t off,
                           uint64_t len)
{
    const ivmd_target_ops_t *t = dp->target;

    return t != NULL && t->has_copies(dp->target_ctx, job, obj, off, len);
}

int ivmd_target_refresh(ivmd_data_t *dp, uint32_t job, uint64_t obj, uint64_t off, uint64_t len,
                        int pull, int fence, ivmd_target_done_t done, void *arg)
{
    const ivmd_target_ops_t *t = dp->target;

    return t != NULL && t->refresh(dp->target_ctx, job, obj, off, len, pull, fence, done, arg);
}

int ivmd_target_filled(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj, uint64_t off,
                       uint64_t len, ivmd_target_done_t done, void *arg)
{
    const ivmd_target_ops_t *t = dp->target;

    return t != NULL && t->filled(dp->target_ctx, job, obj, off, len, done, arg);
}
