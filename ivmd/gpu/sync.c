/*
 * Syncs that involve device copies, and the device copies as the data
 * plane's copy target (gpu/gpud.h). A sync runs as steps, one after the
 * other: COPY device -> node copy (D2H), the node copy's sync by the data
 * plane, COPY node copy -> device (H2D); the PE is answered after the last.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpud.h"
#include "log.h"

typedef enum ivmd_gstep_kind {
    IVMD_GSTEP_D2H,  /* device copy -> node copy */
    IVMD_GSTEP_H2D,  /* node copy -> device copy */
    IVMD_GSTEP_NODE, /* the node copy's sync with the master (data plane) */
    IVMD_GSTEP_FENCE /* wait until ivm-gpud answered everything sent before */
} ivmd_gstep_kind_t;

typedef struct ivmd_gstep {
    ivmd_gstep_kind_t kind;
    uint64_t          copy;     /* COPY steps */
    uint64_t          off, len; /* object bytes */
    uint32_t          op;       /* NODE: IVM_SYNC_* */
} ivmd_gstep_t;

struct ivmd_gsync {
    UT_hash_handle     hh;
    uint64_t           id;
    ivmd_conn_t       *conn;    /* PE to answer (NULL: a peer's, see done) */
    uint32_t           seq;
    uint16_t           type;
    uint32_t           job;
    uint64_t           obj;
    ivmd_gstep_t      *steps;
    int                nsteps, at, max;
    ivmd_target_done_t done;    /* instead of answering a PE */
    void              *arg;     /* for done */
};

static ivmd_gsync_t *ivmd_gsync_find(ivmd_gpu_t *gm, uint64_t id)
{
    ivmd_gsync_t *gs = NULL;

    if (gm->g != NULL) {
        HASH_FIND(hh, gm->g->syncs, &id, sizeof(id), gs);
    }
    return gs;
}

static void ivmd_gsync_free(ivmd_gpu_t *gm, ivmd_gsync_t *gs)
{
    HASH_DEL(gm->g->syncs, gs);
    free(gs->steps);
    free(gs);
}

void ivmd_gpu_syncs_clear(ivmd_gpu_t *gm)
{
    ivmd_gsync_t *gs, *tmp;

    HASH_ITER(hh, gm->g->syncs, gs, tmp) {
        ivmd_gsync_free(gm, gs);
    }
}

void ivmd_gpu_syncs_conn_gone(ivmd_gpu_t *gm, ivmd_conn_t *c)
{
    ivmd_gsync_t *gs, *tmp;

    HASH_ITER(hh, gm->g->syncs, gs, tmp) {
        if (gs->conn == c) {
            gs->conn = NULL;
        }
    }
}

void ivmd_gpu_forget_conn(ivmd_gpu_t *gm, ivmd_conn_t *c)
{
    ivmd_gpu_req_t *r, *tmp;

    if (gm->g == NULL) {
        return;
    }
    HASH_ITER(hh, gm->g->reqs, r, tmp) {
        if (r->conn != c) {
            continue;
        }
        r->conn = NULL;
        if (r->type == IVM_GPUD_ACQUIRE) {
            /* It may wait for device memory, ahead of other PEs' maps:
             * withdraw it. If it was granted meanwhile, its reply comes
             * first and the copy is released (on_acquire). */
            ivm_gpud_cancel_req_t req = {.seq = r->seq};
            ivmd_gpu_tell(gm, IVM_GPUD_CANCEL, &req, sizeof(req));
        }
    }
    ivmd_gpu_syncs_conn_gone(gm, c);
}

static void ivmd_gsync_finish(ivmd_gpu_t *gm, ivmd_gsync_t *gs, int status, const char *detail)
{
    HASH_DEL(gm->g->syncs, gs);
    if (gs->done != NULL) {
        gs->done(gm->d, gs->arg, status);
    } else if (gs->conn != NULL) {
        ivm_msg_status_t rep = {.status = status};
        ivmd_conn_reply(gm->d, gs->conn, gs->type, gs->seq, &rep, sizeof(rep),
                        status != IVM_SUCCESS ? detail : NULL, NULL, 0);
    }
    free(gs->steps);
    free(gs);
}

static void ivmd_gsync_run(ivmd_gpu_t *gm, ivmd_gsync_t *gs);

static void ivmd_gsync_on_reply(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *rep,
                                int *fds, int nfds, const char *detail)
{
    ivmd_gsync_t *gs = ivmd_gsync_find(gm, r->gsync);

    (void)rep;
    (void)fds;
    (void)nfds;
    if (gs == NULL) {
        return;
    }
    if (status != IVM_SUCCESS) {
        ivmd_gsync_finish(gm, gs, status,
                          detail[0] ? detail : "moving bytes to or from the device copy failed");
        return;
    }
    ivmd_gsync_run(gm, gs);
}

/* The node copy's sync ended (the data plane's done callback). */
static void ivmd_gsync_resume(void *arg, uint64_t id, int status)
{
    ivmd_gpu_t *gm = arg;
    ivmd_gsync_t *gs = ivmd_gsync_find(gm, id);

    if (gs == NULL) {
        return;
    }
    if (status != IVM_SUCCESS) {
        ivmd_gsync_finish(gm, gs, status,
                          status == IVM_ERROR_DAEMON_LOST
                              ? "the node holding the object's master is unreachable"
                              : "the transfer failed");
        return;
    }
    ivmd_gsync_run(gm, gs);
}

/* Send a step's request to ivm-gpud: the sync goes on in its reply (or ends
 * here if it cannot be sent). */
static void ivmd_gsync_send(ivmd_gpu_t *gm, ivmd_gsync_t *gs, uint16_t type, const void *req,
                            uint32_t len)
{
    ivmd_gpu_req_t *r = ivmd_gpu_req_new(gm, type, ivmd_gsync_on_reply);

    if (r == NULL) {
        ivmd_gsync_finish(gm, gs, IVM_ERROR_NO_MEMORY, "out of memory");
        return;
    }
    r->gsync = gs->id;
    if (ivmd_gpu_send(gm, r, req, len, NULL, 0) != IVM_SUCCESS) {
        ivmd_gsync_finish(gm, gs, IVM_ERROR_DAEMON_LOST,
                          "the GPU daemon (ivm-gpud) of this node is gone");
    }
}

/* A COPY step's request. */
static void ivmd_gsync_copy(ivmd_gpu_t *gm, ivmd_gsync_t *gs, const ivmd_gstep_t *s)
{
    ivm_gpud_copy_req_t req;

    memset(&req, 0, sizeof(req));
    req.copy_id = s->copy;
    req.offset  = s->off;
    req.size    = s->len;
    req.dir     = s->kind == IVMD_GSTEP_D2H ? IVM_GPUD_COPY_D2H : IVM_GPUD_COPY_H2D;
    ivmd_gsync_send(gm, gs, IVM_GPUD_COPY, &req, sizeof(req));
}

/* The NODE step: 1 if the sync waits for it (or ended), 0 to go on. */
static int ivmd_gsync_node(ivmd_gpu_t *gm, ivmd_gsync_t *gs, const ivmd_gstep_t *s)
{
    ivmd_job_t *job = ivmd_job_find(gm->reg, gs->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, gs->obj) : NULL;
    int rc;

    if (obj == NULL) {
        ivmd_gsync_finish(gm, gs, IVM_ERROR_INVALID_VALUE, "the object is gone");
        return 1;
    }
    rc = ivmd_data_sync_op(gm->data, NULL, NULL, gs->job, obj, s->op, s->off, s->len,
                           ivmd_gsync_resume, gm, gs->id);
    if (rc == IVMD_DEFERRED) {
        return 1;
    }
    if (rc != IVM_SUCCESS) {
        ivmd_gsync_finish(gm, gs, rc,
                          rc == IVM_ERROR_DAEMON_LOST
                              ? "the node holding the object's master is unreachable"
                              : "the sync of the node copy failed");
        return 1;
    }
    return 0;
}

/* Run the steps from gs->at on until one must wait. */
static void ivmd_gsync_run(ivmd_gpu_t *gm, ivmd_gsync_t *gs)
{
    while (gs->at < gs->nsteps) {
        const ivmd_gstep_t *s = &gs->steps[gs->at++];

        switch (s->kind) {
        case IVMD_GSTEP_D2H:
        case IVMD_GSTEP_H2D:
            ivmd_gsync_copy(gm, gs, s);
            return;
        case IVMD_GSTEP_FENCE: {
            ivm_gpud_stats_req_t req = {.gpu = 0};
            ivmd_gsync_send(gm, gs, IVM_GPUD_GSTATS, &req, sizeof(req));
            return;
        }
        case IVMD_GSTEP_NODE:
            if (ivmd_gsync_node(gm, gs, s)) {
                return;
            }
            break;
        }
    }
    ivmd_gsync_finish(gm, gs, IVM_SUCCESS, NULL);
}

/* A sync of (job, obj) with room for the steps it may need. */
static ivmd_gsync_t *ivmd_gsync_new(ivmd_gpu_t *gm, uint32_t job, uint64_t obj, int extra_steps)
{
    ivmd_gsync_t *gs = calloc(1, sizeof(*gs));

    if (gs == NULL) {
        return NULL;
    }
    gs->max   = (int)gm->g->nrefs + extra_steps;
    gs->steps = calloc((size_t)gs->max, sizeof(*gs->steps));
    if (gs->steps == NULL) {
        free(gs);
        return NULL;
    }
    gs->id  = ++gm->g->next_sync;
    gs->job = job;
    gs->obj = obj;
    HASH_ADD(hh, gm->g->syncs, id, sizeof(gs->id), gs);
    return gs;
}

static void ivmd_gsync_add(ivmd_gsync_t *gs, ivmd_gstep_kind_t kind, uint64_t copy,
                           uint64_t off, uint64_t len, uint32_t op)
{
    ivmd_gstep_t *s;

    if (gs->nsteps >= gs->max) {
        return;
    }
    s       = &gs->steps[gs->nsteps++];
    s->kind = kind;
    s->copy = copy;
    s->off  = off;
    s->len  = len;
    s->op   = op;
}

/* [off, off+len) clipped to a copy; 0 if they do not meet. */
static int ivmd_gpu_clip(const ivmd_gpu_ref_t *ref, uint64_t off, uint64_t len,
                         uint64_t *lo_p, uint64_t *n_p)
{
    uint64_t lo = off > ref->copy_off ? off : ref->copy_off;
    uint64_t end = off + len, cend = ref->copy_off + ref->copy_size;
    uint64_t hi = end < cend ? end : cend;

    if (lo >= hi) {
        return 0;
    }
    *lo_p = lo;
    *n_p  = hi - lo;
    return 1;
}

/* Add a COPY step for each device copy of the sync's object on this node
 * meeting [off, off+len), once per copy, except copy `skip`. */
static void ivmd_gsync_add_copies(ivmd_gpu_t *gm, ivmd_gsync_t *gs, ivmd_gstep_kind_t kind,
                                  uint64_t off, uint64_t len, uint64_t skip)
{
    ivmd_gpu_ref_t *head = ivmd_gpu_obj_refs(gm, gs->job, gs->obj), *ref, *seen;
    uint64_t lo, n;

    for (ref = head; ref != NULL; ref = ref->next) {
        if (ref->copy == skip || !ivmd_gpu_clip(ref, off, len, &lo, &n)) {
            continue;
        }
        for (seen = head; seen != ref && seen->copy != ref->copy; seen = seen->next) {
        }
        if (seen == ref) {
            ivmd_gsync_add(gs, kind, ref->copy, lo, n, 0);
        }
    }
}

int ivmd_gpu_has_copies(const ivmd_gpu_t *gm, uint32_t job, uint64_t obj, uint64_t off,
                        uint64_t len)
{
    const ivmd_gpu_ref_t *ref;
    uint64_t lo, n;

    if (gm->g == NULL || !gm->g->alive) {
        return 0;
    }
    for (ref = ivmd_gpu_obj_refs(gm, job, obj); ref != NULL; ref = ref->next) {
        if (ivmd_gpu_clip(ref, off, len, &lo, &n)) {
            return 1;
        }
    }
    return 0;
}

/* The reference a GPU PE's sync names, checked: IVM_SUCCESS (*own_p NULL
 * when it names none), or an error with detail. */
static ivmError_t ivmd_gpu_sync_ref(ivmd_gpu_t *gm, ivmd_conn_t *c, const ivmd_obj_t *obj,
                                    const ivm_msg_sync_req_t *req, ivmd_gpu_ref_t **own_p,
                                    char *detail, size_t detail_len)
{
    uint64_t off = req->offset, len = req->size;
    ivmd_gpu_ref_t *own;

    *own_p = NULL;
    if (req->gpu_ref == 0) {
        return IVM_SUCCESS;
    }
    if (gm->g == NULL || c->pe == NULL || !IVM_DEV_IS_GPU(c->pe->devtype)) {
        snprintf(detail, detail_len, "a sync names a device copy, but pe %d is no GPU PE",
                 c->pe != NULL ? c->pe->id : -1);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (!ivmd_gpu_alive(gm)) {
        snprintf(detail, detail_len, "the GPU daemon (ivm-gpud) of this node is gone");
        return IVM_ERROR_DAEMON_LOST;
    }
    own = ivmd_gpu_ref_find(gm, req->gpu_ref);
    /* The copy holds [off, off+len) (an empty range: off inside or at its end). */
    if (own == NULL || own->job != c->job->id || own->pe != c->pe->id || own->obj != obj->id ||
        off < own->copy_off || off - own->copy_off > own->copy_size ||
        len > own->copy_size - (off - own->copy_off)) {
        snprintf(detail, detail_len, "no device copy of this PE holds the range");
        return IVM_ERROR_INVALID_VALUE;
    }
    *own_p = own;
    return IVM_SUCCESS;
}

/* The steps of a sync op of [off, off+len) with the caller's copy own. */
static void ivmd_gsync_plan(ivmd_gpu_t *gm, ivmd_gsync_t *gs, const ivmd_obj_t *obj, uint32_t op,
                            const ivmd_gpu_ref_t *own, uint64_t off, uint64_t len)
{
    int mirror = obj->master_node >= 0;

    switch (op) {
    case IVM_SYNC_PUT:
        ivmd_gsync_add(gs, IVMD_GSTEP_D2H, own->copy, off, len, 0);
        if (mirror) {
            ivmd_gsync_add(gs, IVMD_GSTEP_NODE, 0, off, len, IVM_SYNC_PUT);
        }
        break;
    case IVM_SYNC_GET:
        if (mirror) {
            ivmd_gsync_add(gs, IVMD_GSTEP_NODE, 0, off, len, IVM_SYNC_GET);
        }
        ivmd_gsync_add(gs, IVMD_GSTEP_H2D, own->copy, off, len, 0);
        break;
    case IVM_SYNC_PUT_GROUP:
        /* Caller's copy -> node copy -> master -> other nodes; then this
         * node's other device copies. */
        if (own != NULL) {
            ivmd_gsync_add(gs, IVMD_GSTEP_D2H, own->copy, off, len, 0);
        }
        ivmd_gsync_add(gs, IVMD_GSTEP_NODE, 0, off, len, IVM_SYNC_PUT_GROUP);
        ivmd_gsync_add_copies(gm, gs, IVMD_GSTEP_H2D, off, len, own != NULL ? own->copy : 0);
        break;
    default:
        /* GET_GROUP: every device copy of this node into the node copy, then
         * the master gathers from the nodes. */
        ivmd_gsync_add_copies(gm, gs, IVMD_GSTEP_D2H, off, len, 0);
        ivmd_gsync_add(gs, IVMD_GSTEP_NODE, 0, off, len, IVM_SYNC_GET_GROUP);
        break;
    }
}

int ivmd_gpu_sync(ivmd_gpu_t *gm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                  const ivm_msg_sync_req_t *req, char *detail, size_t detail_len)
{
    ivmd_gpu_ref_t *own = NULL;
    ivmd_gsync_t *gs;
    ivmError_t status;

    status = ivmd_gpu_sync_ref(gm, c, obj, req, &own, detail, detail_len);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (req->size == 0) {
        return IVM_SUCCESS;
    }
    gs = ivmd_gsync_new(gm, c->job->id, obj->id, 3);
    if (gs == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    gs->conn = c;
    gs->seq  = hdr->seq;
    gs->type = hdr->type;
    ivmd_gsync_plan(gm, gs, obj, req->op, own, req->offset, req->size);
    ivmd_gsync_run(gm, gs);
    return IVMD_DEFERRED;
}

/* ------------------------------------------------------------ the copy target */

/* Bytes of (job, obj) at [off, off+len) are about to leave this node for a
 * gather (pull = D2H from this node's device copies first) or just arrived
 * from a scatter (push = H2D into them). `fence`: wait for earlier copies of
 * the object too. */
static int ivmd_gpu_refresh(void *ctx, uint32_t job, uint64_t obj, uint64_t off, uint64_t len,
                            int pull, int fence, ivmd_target_done_t done, void *arg)
{
    ivmd_gpu_t *gm = ctx;
    ivmd_gsync_t *gs, *tmp;
    int busy = 0;

    if (gm->g == NULL || !gm->g->alive) {
        return 0;
    }
    HASH_ITER(hh, gm->g->syncs, gs, tmp) {
        busy |= gs->job == job && gs->obj == obj;
    }
    if (!ivmd_gpu_has_copies(gm, job, obj, off, len) && !(fence && busy)) {
        return 0;
    }
    gs = ivmd_gsync_new(gm, job, obj, 2);
    if (gs == NULL) {
        return 0;
    }
    gs->done = done;
    gs->arg  = arg;
    ivmd_gsync_add_copies(gm, gs, pull ? IVMD_GSTEP_D2H : IVMD_GSTEP_H2D, off, len, 0);
    if (gs->nsteps == 0) {
        ivmd_gsync_add(gs, IVMD_GSTEP_FENCE, 0, 0, 0, 0);
    }
    ivmd_gsync_run(gm, gs);
    return 1;
}

static void ivmd_gpu_on_filled(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *payload,
                               int *fds, int nfds, const char *detail)
{
    (void)payload;
    (void)fds;
    (void)nfds;
    if (status != IVM_SUCCESS && status != IVM_ERROR_DAEMON_LOST) {
        ivm_error("job %u object %llu: the device copies did not get the filled bytes: %s",
                  r->job, (unsigned long long)r->obj, detail[0] ? detail : "?");
    }
    if (r->done != NULL) {
        r->done(gm->d, r->done_arg, status);
    }
}

/* A mirror fill just wrote [off, off+len) of obj, bytes this node did not
 * hold: ivm-gpud copies them into the object's device copies of this node,
 * cached ones included (FILLED). */
static int ivmd_gpu_filled(void *ctx, uint32_t job, const ivmd_obj_t *obj, uint64_t off,
                           uint64_t len, ivmd_target_done_t done, void *arg)
{
    ivmd_gpu_t *gm = ctx;
    ivm_gpud_filled_req_t req;
    ivmd_gpu_req_t *r;

    if (len == 0 || obj->gpu_acquires == 0 || !ivmd_gpu_alive(gm)) {
        return 0;
    }
    r = ivmd_gpu_req_new(gm, IVM_GPUD_FILLED, ivmd_gpu_on_filled);
    if (r == NULL) {
        ivm_error("job %u object %llu: out of memory: its device copies miss filled bytes",
                  job, (unsigned long long)obj->id);
        return 0;
    }
    r->job      = job;
    r->obj      = obj->id;
    r->done     = done;
    r->done_arg = arg;
    memset(&req, 0, sizeof(req));
    req.job    = job;
    req.obj_id = obj->id;
    req.offset = off;
    req.size   = len;
    /* On failure r is freed and gpud is gone: no device copy is used again. */
    return ivmd_gpu_send(gm, r, &req, sizeof(req), NULL, 0) == IVM_SUCCESS;
}

static int ivmd_gpu_target_has_copies(const void *ctx, uint32_t job, uint64_t obj,
                                      uint64_t off, uint64_t len)
{
    return ivmd_gpu_has_copies(ctx, job, obj, off, len);
}

const ivmd_target_ops_t ivmd_gpu_target_ops = {
    .name       = "gpu",
    .has_copies = ivmd_gpu_target_has_copies,
    .refresh    = ivmd_gpu_refresh,
    .filled     = ivmd_gpu_filled,
};
