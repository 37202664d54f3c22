/* GPU references by id and by object, and the maps that make them (gpu/gpud.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "ctl/remote.h"
#include "gpu/gpud.h"
#include "log.h"

ivmd_gpu_ref_t *ivmd_gpu_ref_find(const ivmd_gpu_t *gm, uint64_t id)
{
    ivmd_gpu_ref_t *ref = NULL;

    if (gm->g != NULL) {
        HASH_FIND(hh, gm->g->refs, &id, sizeof(id), ref);
    }
    return ref;
}

static ivmd_gpu_obj_t *ivmd_gpu_obj_find(const ivmd_gpud_t *g, uint32_t job, uint64_t obj)
{
    ivmd_gpu_obj_key_t key;
    ivmd_gpu_obj_t *o;

    memset(&key, 0, sizeof(key));
    key.job = job;
    key.obj = obj;
    HASH_FIND(hh, g->objs, &key, sizeof(key), o);
    return o;
}

ivmd_gpu_ref_t *ivmd_gpu_obj_refs(const ivmd_gpu_t *gm, uint32_t job, uint64_t obj)
{
    ivmd_gpu_obj_t *o = gm->g != NULL ? ivmd_gpu_obj_find(gm->g, job, obj) : NULL;

    return o != NULL ? o->refs : NULL;
}

/* Enter ref (filled) in both tables. */
static ivmError_t ivmd_gpu_ref_add(ivmd_gpud_t *g, ivmd_gpu_ref_t *ref)
{
    ivmd_gpu_obj_t *o = ivmd_gpu_obj_find(g, ref->job, ref->obj);

    if (o == NULL) {
        o = calloc(1, sizeof(*o));
        if (o == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        o->key.job = ref->job;
        o->key.obj = ref->obj;
        HASH_ADD(hh, g->objs, key, sizeof(o->key), o);
    }
    DL_APPEND(o->refs, ref);
    HASH_ADD(hh, g->refs, id, sizeof(ref->id), ref);
    ++g->nrefs;
    return IVM_SUCCESS;
}

void ivmd_gpu_ref_forget(ivmd_gpu_t *gm, ivmd_gpu_ref_t *ref)
{
    ivmd_gpud_t *g = gm->g;
    ivmd_gpu_obj_t *o = ivmd_gpu_obj_find(g, ref->job, ref->obj);

    if (o != NULL) {
        DL_DELETE(o->refs, ref);
        if (o->refs == NULL) {
            HASH_DEL(g->objs, o);
            free(o);
        }
    }
    HASH_DEL(g->refs, ref);
    --g->nrefs;
    free(ref);
}

void ivmd_gpu_refs_clear(ivmd_gpu_t *gm)
{
    ivmd_gpu_ref_t *ref, *tmp;

    if (gm->g == NULL) {
        return;
    }
    HASH_ITER(hh, gm->g->refs, ref, tmp) {
        ivmd_gpu_ref_forget(gm, ref);
    }
}

ivmError_t ivmd_gpu_unref(ivmd_gpu_t *gm, ivmd_pe_t *pe, uint64_t gpu_ref, uint64_t obj_id)
{
    ivmd_gpu_ref_t *ref;

    if (gpu_ref == 0) {
        return IVM_SUCCESS;
    }
    if (gm->g == NULL) {
        return IVM_ERROR_INVALID_VALUE;
    }
    if (!gm->g->alive) {
        return IVM_SUCCESS; /* the copies went with ivm-gpud */
    }
    ref = ivmd_gpu_ref_find(gm, gpu_ref);
    if (ref == NULL || ref->job != pe->job->id || ref->pe != pe->id || ref->obj != obj_id) {
        return IVM_ERROR_INVALID_VALUE;
    }
    ivmd_gpu_release(gm, ref->copy);
    ivmd_gpu_ref_forget(gm, ref);
    return IVM_SUCCESS;
}

void ivmd_gpu_pe_ended(ivmd_gpu_t *gm, ivmd_pe_t *pe)
{
    ivmd_gpu_ref_t *ref, *tmp;

    if (gm->g == NULL) {
        return;
    }
    HASH_ITER(hh, gm->g->refs, ref, tmp) {
        if (ref->job == pe->job->id && ref->pe == pe->id) {
            ivm_debug("job %u: pe %d ended: its reference on GPU copy %llu released",
                      ref->job, ref->pe, (unsigned long long)ref->copy);
            ivmd_gpu_release(gm, ref->copy);
            ivmd_gpu_ref_forget(gm, ref);
        }
    }
}

void ivmd_gpu_job_end(ivmd_gpu_t *gm, ivmd_job_t *job)
{
    ivm_gpud_job_req_t req = {.job = job->id};
    ivmd_gpu_ref_t *ref, *tmp;

    if (gm->g == NULL || !gm->g->alive) {
        return;
    }
    HASH_ITER(hh, gm->g->refs, ref, tmp) {
        if (ref->job == job->id) {
            ivmd_gpu_ref_forget(gm, ref);
        }
    }
    ivmd_gpu_tell(gm, IVM_GPUD_JOB_END, &req, sizeof(req));
}

/* ------------------------------------------------------------ maps */

static void ivmd_gpu_map_reply_error(ivmd_gpu_t *gm, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                     int status, const char *detail)
{
    ivm_msg_map_rep_t rep;

    if (c == NULL) {
        return;
    }
    memset(&rep, 0, sizeof(rep));
    rep.status = status;
    ivmd_conn_reply(gm->d, c, type, seq, &rep, sizeof(rep), detail, NULL, 0);
}

/* A failed ivmMalloc leaves no object behind. */
static void ivmd_gpu_map_undo_malloc(ivmd_gpu_t *gm, ivmd_job_t *job, ivmd_obj_t *obj,
                                     uint16_t type)
{
    if (type != IVM_MSG_MALLOC || obj == NULL || obj->name == NULL || obj->nmaps > 0) {
        return;
    }
    if (ivmd_remote_is_proxy(job) && obj->master_node < 0) {
        ivmd_data_unregister(gm->data, job, obj);
    }
    ivmd_obj_free_name(gm->reg, job, obj);
}

/* The map of r fails with status: the PE is told, a MALLOC undone. */
static void ivmd_gpu_map_fail(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, ivmd_job_t *job, ivmd_obj_t *obj,
                              int status, const char *detail)
{
    ivmd_gpu_map_reply_error(gm, r->conn, r->pe_type, r->pe_seq, status, detail);
    if (job != NULL) {
        ivmd_gpu_map_undo_malloc(gm, job, obj, r->pe_type);
    }
}

/* ACQUIRE's copy covers the range r maps, with its fd. */
static int ivmd_gpu_acquire_ok(const ivmd_gpu_req_t *r, const ivm_gpud_acquire_rep_t *a,
                               int nfds)
{
    return nfds >= 1 && a->copy_id != 0 && a->copy_offset <= r->off &&
           r->off - a->copy_offset <= a->copy_size &&
           r->len <= a->copy_size - (r->off - a->copy_offset) && a->alloc_size >= a->copy_size;
}

/* The PE's reply: both fds and the device copy's place. */
static void ivmd_gpu_map_reply(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, const ivmd_obj_t *obj,
                               const ivmd_gpu_ref_t *ref, const ivm_gpud_acquire_rep_t *a,
                               int devfd)
{
    ivm_msg_map_rep_t rep;
    int two[2] = {obj->fd, devfd};

    memset(&rep, 0, sizeof(rep));
    rep.flags      = (obj->master_node < 0 ? IVM_MAP_MASTER : 0) |
                     ((a->flags & IVM_GPUD_COPY_CUDA) ? IVM_MAP_GPU_CUDA : IVM_MAP_GPU_EMU) |
                     gm->data->map_flags;
    rep.obj_id     = obj->id;
    rep.obj_size   = obj->size;
    rep.offset     = r->off;
    rep.size       = r->len;
    rep.gpu_ref    = ref->id;
    rep.gpu_offset = a->copy_offset;
    rep.gpu_size   = a->alloc_size;
    ivm_debug("job %u: pe %d maps [%llu, +%llu) of object %llu on GPU %u: copy %llu%s",
              ref->job, ref->pe, (unsigned long long)r->off, (unsigned long long)r->len,
              (unsigned long long)obj->id, ref->gpu, (unsigned long long)a->copy_id,
              (a->flags & IVM_GPUD_COPY_REUSED) ? " (reused)" : "");
    ivmd_conn_reply(gm->d, r->conn, r->pe_type, r->pe_seq, &rep, sizeof(rep), NULL, two, 2);
}

/* A granted copy becomes the PE's reference: IVM_SUCCESS, or an error after
 * which the copy is released and the map failed. */
static ivmError_t ivmd_gpu_map_ref(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, ivmd_pe_t *pe,
                                   ivmd_obj_t *obj, const ivm_gpud_acquire_rep_t *a,
                                   ivmd_gpu_ref_t **ref_p)
{
    ivmd_gpu_ref_t *ref = calloc(1, sizeof(*ref));

    if (ref == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    ref->id        = ++gm->g->next_ref;
    ref->job       = r->job;
    ref->pe        = pe->id;
    ref->obj       = obj->id;
    ref->copy      = a->copy_id;
    ref->copy_off  = a->copy_offset;
    ref->copy_size = a->copy_size;
    ref->gpu       = ivmd_gpu_phys(gm->g, IVM_DEV_INDEX(pe->devtype));
    if (ivmd_obj_map(gm->reg, pe, obj) != IVM_SUCCESS) {
        free(ref);
        return IVM_ERROR_NO_MEMORY;
    }
    if (ivmd_gpu_ref_add(gm->g, ref) != IVM_SUCCESS) {
        ivmd_obj_unmap(gm->reg, pe, obj->id);
        free(ref);
        return IVM_ERROR_NO_MEMORY;
    }
    *ref_p = ref;
    return IVM_SUCCESS;
}

static void ivmd_gpu_on_acquire(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *payload,
                                int *fds, int nfds, const char *detail)
{
    const ivm_gpud_acquire_rep_t *a = payload;
    ivmd_job_t *job = ivmd_job_find(gm->reg, r->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, r->obj) : NULL;
    ivmd_pe_t *pe = r->conn != NULL ? r->conn->pe : NULL;
    ivmd_gpu_ref_t *ref;

    if (status == IVM_SUCCESS && !ivmd_gpu_acquire_ok(r, a, nfds)) {
        ivm_error("ivm-gpud's ACQUIRE reply is unusable (no fd or a copy not covering "
                  "the range)");
        if (a->copy_id != 0) {
            ivmd_gpu_release(gm, a->copy_id);
        }
        status = IVM_ERROR_PROTOCOL;
        detail = "the GPU daemon sent an unusable device copy";
    }
    if (status != IVM_SUCCESS) {
        ivmd_gpu_map_fail(gm, r, job, obj, status,
                          detail[0] ? detail : "the GPU daemon refused the device copy");
        return;
    }
    if (pe == NULL || pe->state != IVMD_PE_RUNNING || obj == NULL || obj->fd < 0 ||
        job->ending) {
        ivmd_gpu_release(gm, a->copy_id);
        ivmd_gpu_map_reply_error(gm, r->conn, r->pe_type, r->pe_seq, IVM_ERROR_NOT_FOUND,
                                 "the object or the PE went away while its device copy "
                                 "was made");
        return;
    }
    if (ivmd_gpu_map_ref(gm, r, pe, obj, a, &ref) != IVM_SUCCESS) {
        ivmd_gpu_release(gm, a->copy_id);
        ivmd_gpu_map_fail(gm, r, job, obj, IVM_ERROR_NO_MEMORY, "out of memory");
        return;
    }
    ivmd_gpu_map_reply(gm, r, obj, ref, a, fds[0]);
}

void ivmd_gpu_map(ivmd_gpu_t *gm, ivmd_conn_t *c, uint16_t type, uint32_t seq, ivmd_obj_t *obj,
                  uint64_t off, uint64_t size)
{
    ivm_gpud_acquire_req_t req;
    ivmd_gpu_req_t *r;
    int dev = IVM_DEV_INDEX(c->pe->devtype);

    if (!ivmd_gpu_alive(gm) || (uint32_t)dev >= gm->g->ndevs) {
        ivmd_gpu_map_reply_error(gm, c, type, seq, IVM_ERROR_DAEMON_LOST,
                                 "the GPU daemon (ivm-gpud) of this node is gone");
        ivmd_gpu_map_undo_malloc(gm, c->job, obj, type);
        return;
    }
    r = ivmd_gpu_req_new(gm, IVM_GPUD_ACQUIRE, ivmd_gpu_on_acquire);
    if (r == NULL) {
        ivmd_gpu_map_reply_error(gm, c, type, seq, IVM_ERROR_NO_MEMORY, "out of memory");
        ivmd_gpu_map_undo_malloc(gm, c->job, obj, type);
        return;
    }
    *r = (ivmd_gpu_req_t){.type = IVM_GPUD_ACQUIRE, .cb = ivmd_gpu_on_acquire, .conn = c,
                          .pe_type = type, .pe_seq = seq, .job = c->job->id, .obj = obj->id,
                          .off = off, .len = size};
    memset(&req, 0, sizeof(req));
    req.job      = c->job->id;
    req.gpu      = ivmd_gpu_phys(gm->g, dev); /* copies are per physical GPU */
    req.obj_id   = obj->id;
    req.obj_size = obj->size;
    req.offset   = off;
    req.size     = size;
    ++obj->gpu_acquires;
    if (ivmd_gpu_send(gm, r, &req, sizeof(req), &obj->fd, 1) != IVM_SUCCESS) {
        ivmd_gpu_map_reply_error(gm, c, type, seq, IVM_ERROR_DAEMON_LOST,
                                 "the GPU daemon (ivm-gpud) of this node is gone");
        ivmd_gpu_map_undo_malloc(gm, c->job, obj, type);
    }
}
