/*
 * Objects across nodes (data/data.h): registration of masters at the root
 * daemon, lookups of masters, and the maps of mirrors with their fills.
 */
#include <stdio.h>
#include <string.h>

#include "ctl/remote.h"
#include "data/copies.h"
#include "data/op.h"
#include "data/transport.h"
#include "data/xfer.h"
#include "log.h"

#define IVMD_MAP_GAPS 16 /* regions a map fetches at most at once */

static int ivmd_objects_map_op(ivmd_data_t *dp, ivmd_op_t *op, ivmd_obj_t *obj);

/* ------------------------------------------------------------ registration */

/* Send an object message to the job's root daemon for op (NULL: none). */
static ivmError_t ivmd_objects_ask_root(ivmd_data_t *dp, ivmd_job_t *job, uint16_t type,
                                        ivm_peer_obj_t *m, ivmd_op_t *op)
{
    int root = ivmd_remote_root_node(dp->remote, job->id);

    if (op != NULL) {
        m->op = op->id;
        ivmd_op_wait_on(op, root);
    }
    m->job = job->id;
    return ivmd_data_transport(dp)->send_msg(dp, root, type, m, sizeof(*m), NULL, 0);
}

int ivmd_data_register(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj)
{
    ivm_peer_obj_t m;
    ivmd_op_t *op = ivmd_op_new(dp, IVMD_OP_MALLOC, c, hdr);

    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->obj = obj->id;
    memset(&m, 0, sizeof(m));
    m.status    = c->pe->id; /* owner PE */
    m.master_id = obj->id;
    m.size      = obj->size;
    ivm_proto_strset(m.name, sizeof(m.name), obj->name);
    if (ivmd_objects_ask_root(dp, c->job, IVM_PEER_OBJ_REG, &m, op) != IVM_SUCCESS) {
        ivmd_op_free(dp, op);
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVMD_DEFERRED;
}

void ivmd_data_unregister(ivmd_data_t *dp, ivmd_job_t *job, ivmd_obj_t *obj)
{
    ivm_peer_obj_t m;

    memset(&m, 0, sizeof(m));
    m.master_id = obj->id;
    ivm_proto_strset(m.name, sizeof(m.name), obj->name);
    ivmd_objects_ask_root(dp, job, IVM_PEER_OBJ_REG, &m, NULL);
}

int ivmd_data_lookup(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const ivm_msg_map_req_t *req)
{
    ivm_peer_obj_t m;
    ivmd_op_t *op = ivmd_op_new(dp, IVMD_OP_LOOKUP, c, hdr);

    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->map = *req;
    memset(&m, 0, sizeof(m));
    memcpy(m.name, req->name, sizeof(m.name));
    if (ivmd_objects_ask_root(dp, c->job, IVM_PEER_OBJ_LOOKUP, &m, op) != IVM_SUCCESS) {
        ivmd_op_free(dp, op);
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVMD_DEFERRED;
}

/* Root daemon: OBJ_REG of a master on node `node` (size 0: it was freed). */
static void ivmd_objects_on_reg(ivmd_data_t *dp, ivmd_job_t *job, int node, const ivm_peer_obj_t *m,
                                ivm_peer_obj_t *rep)
{
    ivmd_obj_t *obj = ivmd_obj_find_name(job, m->name);

    if (m->size == 0) {
        if (obj != NULL && obj->master_node == node && obj->master_id == m->master_id) {
            ivmd_obj_free_name(dp->reg, job, obj);
        }
        return;
    }
    if (obj != NULL) {
        rep->status = IVM_ERROR_EXISTS;
    } else if (ivmd_obj_create(dp->reg, job, NULL, m->name, m->size, -1, &obj) == IVM_SUCCESS) {
        obj->owner_pe    = m->status;
        obj->master_node = node;
        obj->master_id   = m->master_id;
    } else {
        rep->status = IVM_ERROR_NO_MEMORY;
    }
}

/* Root daemon: where the master of a name is. */
static void ivmd_objects_on_lookup(ivmd_data_t *dp, ivmd_job_t *job, const ivm_peer_obj_t *m,
                                   ivm_peer_obj_t *rep)
{
    ivmd_obj_t *obj = ivmd_obj_find_name(job, m->name);

    if (obj == NULL) {
        rep->status = IVM_ERROR_NOT_FOUND;
        return;
    }
    rep->size        = obj->size;
    rep->master_node = obj->master_node < 0 ? (uint32_t)ivmd_remote_self(dp->remote)
                                            : (uint32_t)obj->master_node;
    rep->master_id   = obj->master_node < 0 ? obj->id : obj->master_id;
}

ivmError_t ivmd_data_on_obj(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload)
{
    const ivm_peer_obj_t *m = payload;
    ivm_peer_obj_t rep;
    ivmd_job_t *job = ivmd_job_find(dp->reg, m->job);

    if (!ivm_proto_strok(m->name, sizeof(m->name))) {
        return IVM_ERROR_PROTOCOL;
    }
    memset(&rep, 0, sizeof(rep));
    rep.op  = m->op;
    rep.job = m->job;
    if (job == NULL || ivmd_remote_is_proxy(job) || job->ending) {
        rep.status = IVM_ERROR_NOT_FOUND;
    } else if (hdr->type == IVM_PEER_OBJ_REG) {
        ivmd_objects_on_reg(dp, job, node, m, &rep);
        if (m->size == 0) {
            return IVM_SUCCESS; /* an unregistration has no reply */
        }
    } else {
        ivmd_objects_on_lookup(dp, job, m, &rep);
    }
    ivmd_data_transport(dp)->send_msg(dp, node, IVM_PEER_OBJ_REP, &rep, sizeof(rep), NULL, 0);
    return IVM_SUCCESS;
}

/* Node daemon: the root daemon registered (or refused) our master. */
static void ivmd_objects_registered(ivmd_data_t *dp, ivmd_op_t *op, ivmd_job_t *job,
                                    const ivm_peer_obj_t *m)
{
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, op->obj) : NULL;

    if (m->status == IVM_SUCCESS && obj != NULL && op->conn != NULL) {
        dp->svc->reply_map(dp->d, op->conn, op->type, op->seq, obj, 0, obj->size);
    } else {
        if (obj != NULL) {
            ivmd_obj_free_name(dp->reg, job, obj);
        }
        ivmd_op_answer(dp, op, m->status != IVM_SUCCESS ? m->status : IVM_ERROR_NOT_FOUND,
                       m->status == IVM_ERROR_EXISTS
                           ? "an object of that name already exists in the job"
                           : "the object could not be registered");
    }
    ivmd_op_free(dp, op);
}

/* Node daemon: the root daemon said where the master is: map a mirror. */
static void ivmd_objects_found(ivmd_data_t *dp, ivmd_op_t *op, ivmd_job_t *job,
                               const ivm_peer_obj_t *m)
{
    ivmd_obj_t *obj;

    if (m->status != IVM_SUCCESS || job == NULL || op->conn == NULL) {
        char detail[IVM_MSG_DETAIL_MAX];
        snprintf(detail, sizeof(detail), "no object named '%.200s' in job %u", op->map.name,
                 op->job);
        ivmd_op_answer(dp, op, m->status != IVM_SUCCESS ? m->status : IVM_ERROR_NOT_FOUND,
                       detail);
        ivmd_op_free(dp, op);
        return;
    }
    obj = ivmd_obj_find_name(job, op->map.name);
    if (obj == NULL) {
        if (ivmd_obj_create(dp->reg, job, NULL, op->map.name, m->size, -1, &obj) !=
            IVM_SUCCESS) {
            ivmd_op_answer(dp, op, IVM_ERROR_NO_MEMORY, "out of memory");
            ivmd_op_free(dp, op);
            return;
        }
        obj->master_node = (int)m->master_node;
        obj->master_id   = m->master_id;
    }
    if (ivmd_objects_map_op(dp, op, obj) != IVMD_DEFERRED) {
        ivmd_op_free(dp, op);
    }
}

ivmError_t ivmd_data_on_obj_rep(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                const void *payload)
{
    const ivm_peer_obj_t *m = payload;
    ivmd_op_t *op = ivmd_op_find(dp, m->op);
    ivmd_job_t *job;

    (void)node;
    (void)hdr;
    if (op == NULL || (op->kind != IVMD_OP_MALLOC && op->kind != IVMD_OP_LOOKUP)) {
        return IVM_SUCCESS;
    }
    job = ivmd_job_find(dp->reg, op->job);
    if (op->kind == IVMD_OP_MALLOC) {
        ivmd_objects_registered(dp, op, job, m);
    } else {
        ivmd_objects_found(dp, op, job, m);
    }
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------ maps */

/* The size a map request resolves to on obj, 0 if its range is outside. */
static uint64_t ivmd_objects_map_size(const ivmd_obj_t *obj, const ivm_msg_map_req_t *req)
{
    uint64_t size = req->size ? req->size : obj->size - req->offset;

    if (req->offset >= obj->size || size > obj->size - req->offset) {
        return 0;
    }
    return size;
}

/* What a map of [req->offset, +size) of obj needs: IVMD_LOCAL (the copy here
 * holds it), IVMD_DEFERRED (the regions in gaps are to be fetched), or an
 * error (why says it) when a mirror gets no memory. */
static int ivmd_objects_map_need(ivmd_data_t *dp, ivmd_job_t *job, int numa,
                                 const ivm_msg_map_req_t *req, uint64_t size, ivmd_obj_t *obj,
                                 ivmd_range_t *gaps, int *ngaps_p, char *why, size_t why_len)
{
    ivmError_t status;

    if (obj->master_node < 0) {
        return IVMD_LOCAL;
    }
    if (obj->fd < 0) {
        if (job == NULL) {
            snprintf(why, why_len, "the job ended");
            return IVM_ERROR_NOT_FOUND;
        }
        status = ivmd_copies_mirror_mem(dp, job, obj, numa, why, why_len);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    *ngaps_p = ivmd_obj_gaps(obj, req->offset, size, gaps, IVMD_MAP_GAPS);
    /* Every byte held here: reuse, no data moves. */
    return *ngaps_p == 0 ? IVMD_LOCAL : IVMD_DEFERRED;
}

/* Fetch a mirror's gaps for op's map: IVMD_DEFERRED (op answers when they
 * arrive, or when the fill of obj in flight ended). */
static int ivmd_objects_fill(ivmd_data_t *dp, ivmd_op_t *op, ivmd_obj_t *obj, uint64_t size,
                             const ivmd_range_t *gaps, int ngaps)
{
    int i;

    op->obj = obj->id;
    if (obj->fills > 0) {
        /* A fill of this object is on its way: two fills of one range would
         * let the later one overwrite what PEs wrote after the first. */
        op->kind = IVMD_OP_FILL_WAIT;
        return IVMD_DEFERRED;
    }
    ++obj->fills;
    op->kind = IVMD_OP_FILL;
    op->off  = op->map.offset;
    op->len  = size;
    for (i = 0; i < ngaps; ++i) {
        if (ivmd_xfer_read(dp, op, obj->master_node, obj->master_id, obj->id, gaps[i].off,
                           gaps[i].len, IVM_XFER_HOLD) != IVM_SUCCESS) {
            /* Answered now if nothing is in flight, else when the lost peer's
             * operations are failed. */
            op->status = IVM_ERROR_DAEMON_LOST;
            if (op->pending == 0) {
                ivmd_op_done(dp, op);
            }
            return IVMD_DEFERRED;
        }
    }
    return IVMD_DEFERRED;
}

int ivmd_data_map(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_map_req_t *req, ivmd_obj_t *obj)
{
    ivmd_range_t gaps[IVMD_MAP_GAPS];
    char why[IVM_MSG_DETAIL_MAX];
    uint64_t size = ivmd_objects_map_size(obj, req);
    ivmd_op_t *op;
    int ngaps = 0, r;

    if (size == 0) {
        return IVM_ERROR_INVALID_VALUE;
    }
    r = ivmd_objects_map_need(dp, c->job, ivmd_numa_of_pe(c->job, c->pe), req, size, obj, gaps,
                              &ngaps, why, sizeof(why));
    if (r == IVMD_LOCAL) {
        return r;
    }
    if (r != IVMD_DEFERRED) {
        ivm_msg_map_rep_t rep = {.status = r};
        ivmd_conn_reply(dp->d, c, hdr->type, hdr->seq, &rep, sizeof(rep), why, NULL, 0);
        return IVMD_DEFERRED;
    }
    op = ivmd_op_new(dp, IVMD_OP_FILL, c, hdr);
    if (op == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    op->map = *req;
    return ivmd_objects_fill(dp, op, obj, size, gaps, ngaps);
}

/* The map of an existing operation (a LOOKUP answered, a FILL_WAIT whose
 * fill ended): answered through op. IVMD_DEFERRED if op lives on, else the
 * caller frees it. */
static int ivmd_objects_map_op(ivmd_data_t *dp, ivmd_op_t *op, ivmd_obj_t *obj)
{
    ivmd_range_t gaps[IVMD_MAP_GAPS];
    char why[IVM_MSG_DETAIL_MAX];
    uint64_t size = ivmd_objects_map_size(obj, &op->map);
    ivmd_conn_t *c = op->conn;
    ivmd_job_t *job;
    int ngaps = 0, r;

    if (size == 0) {
        ivmd_op_answer(dp, op, IVM_ERROR_INVALID_VALUE, "range outside the object");
        return IVM_ERROR_INVALID_VALUE;
    }
    job = (c != NULL && c->job != NULL) ? c->job : ivmd_job_find(dp->reg, op->job);
    r   = ivmd_objects_map_need(dp, job, c != NULL ? ivmd_numa_of_pe(job, c->pe) : -1, &op->map,
                                size, obj, gaps, &ngaps, why, sizeof(why));
    if (r == IVMD_LOCAL) {
        dp->svc->reply_map(dp->d, op->conn, op->type, op->seq, obj, op->map.offset, size);
        return IVM_SUCCESS;
    }
    if (r != IVMD_DEFERRED) {
        ivmd_op_answer(dp, op, r, why);
        return r;
    }
    return ivmd_objects_fill(dp, op, obj, size, gaps, ngaps);
}

/* A fill of obj ended: the maps that waited for it try again, until one of
 * them starts a fill of its own. */
static void ivmd_objects_fill_ended(ivmd_data_t *dp, ivmd_obj_t *obj, uint32_t job_id)
{
    ivmd_op_t *op, *tmp;

    if (obj == NULL || --obj->fills > 0) {
        return;
    }
again:
    HASH_ITER(hh, dp->ops, op, tmp) {
        if (op->kind != IVMD_OP_FILL_WAIT || op->obj != obj->id || op->job != job_id) {
            continue;
        }
        if (op->conn == NULL || ivmd_objects_map_op(dp, op, obj) != IVMD_DEFERRED) {
            ivmd_op_free(dp, op);
        }
        if (obj->fills > 0) {
            return;
        }
        goto again; /* the table may have changed */
    }
}

/* FILL: every region arrived (or the fill failed). */
void ivmd_objects_fill_step(ivmd_data_t *dp, ivmd_op_t *op)
{
    ivmd_job_t *job = ivmd_job_find(dp->reg, op->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, op->obj) : NULL;

    if (op->status == IVM_SUCCESS && obj != NULL && op->conn != NULL) {
        dp->svc->reply_map(dp->d, op->conn, op->type, op->seq, obj, op->off, op->len);
    } else {
        ivmd_op_answer(dp, op, op->status ? op->status : IVM_ERROR_NOT_FOUND,
                       "the mirror could not be filled from the master");
    }
    ivmd_op_free(dp, op);
    ivmd_objects_fill_ended(dp, obj, job != NULL ? job->id : 0);
}
