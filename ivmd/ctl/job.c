/* The job registry (ctl/job.h). Jobs by id and a job's objects by id and by
 * name are uthash tables beside the lists that keep their order; a table
 * that cannot grow is an IVM_ERROR_NO_MEMORY for the caller, not an exit. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) ((elt)->hash_oom = 1)

#include "ctl/job.h"
#include "ctl/psync.h"
#include "proto.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void ivmd_registry_init(ivmd_registry_t *reg, const ivmd_job_ops_t *ops, void *ctx)
{
    memset(reg, 0, sizeof(*reg));
    reg->next_job_id = 1;
    reg->next_obj_id = 1;
    reg->ops         = ops;
    reg->ctx         = ctx;
}

void ivmd_registry_cleanup(ivmd_registry_t *reg)
{
    while (reg->jobs != NULL) {
        ivmd_job_end(reg, reg->jobs);
        ivmd_job_destroy(reg, reg->jobs);
    }
}

static ivmError_t ivmd_job_grow_pes(ivmd_job_t *job)
{
    int cap = job->pes_cap ? job->pes_cap * 2 : 16;
    ivmd_pe_t **pes = realloc(job->pes, sizeof(*pes) * (size_t)cap);

    if (pes == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    job->pes     = pes;
    job->pes_cap = cap;
    return IVM_SUCCESS;
}

static ivmd_pe_t *ivmd_pe_add(ivmd_job_t *job, int devtype)
{
    ivmd_pe_t *pe;

    if (job->next_pe_id == job->pes_cap && ivmd_job_grow_pes(job) != IVM_SUCCESS) {
        return NULL;
    }
    pe = calloc(1, sizeof(*pe));
    if (pe == NULL) {
        return NULL;
    }
    pe->id      = job->next_pe_id;
    pe->state   = IVMD_PE_SPAWNED;
    pe->devtype = devtype;
    pe->node    = -1;
    pe->job     = job;
    job->pes[job->next_pe_id++] = pe;
    ++job->alive;
    return pe;
}

/* A job with a copy of the device table and no PE, linked into reg. */
static ivmd_job_t *ivmd_job_alloc(ivmd_registry_t *reg, uint32_t id,
                                  const ivm_cpu_device_t *devs, int ndevs)
{
    ivmd_job_t *job = calloc(1, sizeof(*job));

    if (job == NULL) {
        return NULL;
    }
    job->devs = malloc(sizeof(*devs) * (size_t)ndevs);
    if (job->devs == NULL) {
        free(job);
        return NULL;
    }
    memcpy(job->devs, devs, sizeof(*devs) * (size_t)ndevs);
    job->ndevs     = ndevs;
    job->max_pe_id = INT_MAX;
    job->id        = id;
    HASH_ADD(hh, reg->jobs_by_id, id, sizeof(job->id), job);
    if (job->hash_oom) {
        free(job->devs);
        free(job);
        return NULL;
    }
    job->next      = reg->jobs;
    reg->jobs      = job;
    ++reg->njobs;
    return job;
}

ivmError_t ivmd_job_create(ivmd_registry_t *reg, const ivm_cpu_device_t *devs,
                           int ndevs, ivmd_job_t **job_p)
{
    ivmd_job_t *job;
    ivmd_pe_t *root;

    if (ndevs < 1) {
        return IVM_ERROR_INVALID_VALUE;
    }
    job = ivmd_job_alloc(reg, reg->next_job_id, devs, ndevs);
    if (job == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    root = ivmd_pe_add(job, IVM_CPU_N(0));
    if (root == NULL) {
        ivmd_job_destroy(reg, job);
        return IVM_ERROR_NO_MEMORY;
    }
    root->state  = IVMD_PE_RUNNING;
    root->reaped = 1;
    ++reg->next_job_id;
    *job_p = job;
    return IVM_SUCCESS;
}

ivmd_job_t *ivmd_job_find(ivmd_registry_t *reg, uint32_t id)
{
    ivmd_job_t *job;

    HASH_FIND(hh, reg->jobs_by_id, &id, sizeof(id), job);
    return job;
}

static void ivmd_obj_free_ranges(ivmd_obj_t *obj)
{
    free(obj->regions);
    free(obj->holders);
}

/* Forget obj's name (its hash entry goes with it). */
static void ivmd_obj_unname(ivmd_job_t *job, ivmd_obj_t *obj)
{
    if (obj->name != NULL) {
        HASH_DELETE(hh_name, job->objs_by_name, obj);
        free(obj->name);
        obj->name = NULL;
    }
}

static void ivmd_obj_release(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_obj_t *obj)
{
    *obj->pprev = obj->next;
    if (obj->next != NULL) {
        obj->next->pprev = obj->pprev;
    }
    HASH_DELETE(hh_id, job->objs_by_id, obj);
    ivmd_obj_unname(job, obj);
    reg->ops->obj_release(reg->ctx, obj);
    reg->obj_bytes -= obj->size;
    --reg->nobjs;
    --job->nobjs;
    job->obj_bytes -= obj->size;
    ivmd_obj_free_ranges(obj);
    free(obj);
}

/* Forget every mapping of pe, leaving the objects' counts alone (the job's
 * end releases the objects themselves). */
static void ivmd_pe_maps_clear(ivmd_pe_t *pe)
{
    ivmd_pe_map_t *m, *tmp;

    HASH_ITER(hh, pe->maps, m, tmp) {
        HASH_DEL(pe->maps, m);
        free(m);
    }
    pe->nmaps = 0;
}

void ivmd_job_end(ivmd_registry_t *reg, ivmd_job_t *job)
{
    int i;

    job->ending = 1;
    /* Every object goes now: forget the PEs' references to them first. */
    for (i = 0; i < job->next_pe_id; ++i) {
        if (job->pes[i] != NULL) {
            ivmd_pe_maps_clear(job->pes[i]);
        }
    }
    while (job->objs != NULL) {
        ivmd_obj_release(reg, job, job->objs);
    }
}

/* The registry lists the PEs that have waiters, so that dropping a
 * connection's waiters visits those PEs only, not every PE ever created
 * (a DS-LB run ends thousands of PEs, each end dropping a connection). */
static void ivmd_waited_unlist(ivmd_pe_t *pe)
{
    if (pe->wlink == NULL) {
        return;
    }
    *pe->wlink = pe->wnext;
    if (pe->wnext != NULL) {
        pe->wnext->wlink = pe->wlink;
    }
    pe->wnext = NULL;
    pe->wlink = NULL;
}

static void ivmd_waited_list(ivmd_registry_t *reg, ivmd_pe_t *pe)
{
    if (pe->wlink != NULL) {
        return;
    }
    pe->wnext = reg->waited;
    if (reg->waited != NULL) {
        reg->waited->wlink = &pe->wnext;
    }
    reg->waited = pe;
    pe->wlink   = &reg->waited;
}

/* The oldest waiter of pe, unlinked (the PE leaves the list with its last),
 * or NULL. */
static ivmd_waiter_t *ivmd_waiter_pop(ivmd_pe_t *pe)
{
    ivmd_waiter_t *w = pe->waiters;

    if (w != NULL) {
        pe->waiters = w->next;
        if (pe->waiters == NULL) {
            ivmd_waited_unlist(pe);
        }
    }
    return w;
}

static void ivmd_pe_forget(ivmd_registry_t *reg, ivmd_pe_t *pe)
{
    ivmd_waiter_t *w;

    while ((w = ivmd_waiter_pop(pe)) != NULL) {
        free(w);
    }
    ivmd_pe_maps_clear(pe);
    free(pe);
}

void ivmd_job_destroy(ivmd_registry_t *reg, ivmd_job_t *job)
{
    ivmd_job_t **link;
    int i;

    ivmd_job_end(reg, job);
    for (link = &reg->jobs; *link != NULL; link = &(*link)->next) {
        if (*link == job) {
            *link = job->next;
            --reg->njobs;
            HASH_DELETE(hh, reg->jobs_by_id, job);
            break;
        }
    }
    ivmd_psync_job_destroy(job);
    for (i = 0; i < job->next_pe_id; ++i) {
        if (job->pes[i] != NULL) {
            ivmd_pe_forget(reg, job->pes[i]);
        }
    }
    free(job->pes);
    free(job->devs);
    free(job);
}

ivmError_t ivmd_job_resolve_dev(const ivmd_job_t *job, const ivmd_pe_t *caller,
                                int devtype, int *resolved_p)
{
    if (devtype == IVM_THIS_DEV) {
        *resolved_p = caller->devtype;
        return IVM_SUCCESS;
    }
    if (devtype < 0 || IVM_DEV_IS_GPU(devtype)) {
        /* GPU devices come with ivm-gpud; a node without it has none. */
        return IVM_ERROR_NOT_FOUND;
    }
    if (devtype >= job->ndevs) {
        return IVM_ERROR_NOT_FOUND;
    }
    *resolved_p = devtype;
    return IVM_SUCCESS;
}

ivmError_t ivmd_pe_reserve(ivmd_registry_t *reg, ivmd_job_t *job, int devtype,
                           ivmd_pe_t **pe_p)
{
    ivmd_pe_t *pe;

    if (job->ending) {
        return IVM_ERROR_NOT_FOUND;
    }
    if (job->next_pe_id > job->max_pe_id) {
        *pe_p = NULL;
        return IVM_SUCCESS;
    }
    pe = ivmd_pe_add(job, devtype);
    if (pe == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *pe_p = pe;
    return IVM_SUCCESS;
}

void ivmd_pe_unreserve(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_pe_t *pe)
{
    if (pe->id != job->next_pe_id - 1) {
        /* Not the last one: keep the id used, as a PE that failed at once. */
        ivmd_pe_end(reg, pe, 1);
        pe->reaped = 1;
        return;
    }
    --job->next_pe_id;
    --job->alive;
    ivmd_pe_forget(reg, pe);
}

void ivmd_pe_enter(ivmd_pe_t *pe, void *conn)
{
    pe->state = IVMD_PE_RUNNING;
    pe->conn  = conn;
}

void ivmd_pe_signal(ivmd_registry_t *reg, ivmd_pe_t *pe)
{
    ivmd_waiter_t *w = ivmd_waiter_pop(pe);

    if (w == NULL) {
        ++pe->signals;
        return;
    }
    reg->ops->wait_done(reg->ctx, w->owner, w->seq, w->type, IVM_SUCCESS, NULL);
    free(w);
}

ivmError_t ivmd_pe_wait(ivmd_registry_t *reg, ivmd_job_t *job, int pe_id, void *owner,
                        uint32_t seq, int *queued_p)
{
    ivmd_pe_t *pe = ivmd_pe_find(job, pe_id);
    ivmd_waiter_t *w, **tail;

    *queued_p = 0;
    if (pe == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    if (pe->signals > 0) {
        --pe->signals;
        return IVM_SUCCESS;
    }
    if (pe->state == IVMD_PE_EXITED) {
        return IVM_SUCCESS;
    }
    if (pe->state == IVMD_PE_FAILED) {
        return IVM_ERROR_PE_FAILED;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    w->owner = owner;
    w->seq   = seq;
    w->type  = IVM_MSG_WAIT;
    for (tail = &pe->waiters; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail     = w;
    ivmd_waited_list(reg, pe);
    *queued_p = 1;
    return IVM_SUCCESS;
}

void ivmd_waiter_cancel(ivmd_registry_t *reg, void *owner)
{
    ivmd_waiter_t **link, *w;
    ivmd_pe_t *pe, *next;

    for (pe = reg->waited; pe != NULL; pe = next) {
        next = pe->wnext;
        link = &pe->waiters;
        while ((w = *link) != NULL) {
            if (w->owner == owner) {
                *link = w->next;
                free(w);
            } else {
                link = &w->next;
            }
        }
        if (pe->waiters == NULL) {
            ivmd_waited_unlist(pe);
        }
    }
    ivmd_psync_cancel(reg, owner);
}

static void ivmd_pe_drop_maps(ivmd_registry_t *reg, ivmd_pe_t *pe)
{
    ivmd_job_t *job = pe->job;
    ivmd_pe_map_t *m, *tmp;

    HASH_ITER(hh, pe->maps, m, tmp) {
        ivmd_obj_t *obj = m->obj;
        obj->nmaps -= m->count;
        HASH_DEL(pe->maps, m);
        free(m);
        if (obj->name == NULL && obj->nmaps == 0) {
            ivmd_obj_release(reg, job, obj);
        }
    }
    pe->nmaps = 0;
}

void ivmd_pe_end(ivmd_registry_t *reg, ivmd_pe_t *pe, int failed)
{
    ivmError_t status = failed ? IVM_ERROR_PE_FAILED : IVM_SUCCESS;
    ivmd_waiter_t *w;

    if (pe->state == IVMD_PE_EXITED || pe->state == IVMD_PE_FAILED) {
        return;
    }
    pe->state = failed ? IVMD_PE_FAILED : IVMD_PE_EXITED;
    pe->conn  = NULL;
    --pe->job->alive;
    if (reg->ops->pe_ended != NULL) {
        reg->ops->pe_ended(reg->ctx, pe, failed);
    }
    while ((w = ivmd_waiter_pop(pe)) != NULL) {
        reg->ops->wait_done(reg->ctx, w->owner, w->seq, w->type, status,
                            failed ? "the PE died without ivmExit" : NULL);
        free(w);
    }
    ivmd_psync_pe_ended(reg, pe, failed);
    ivmd_pe_drop_maps(reg, pe);
}

ivmError_t ivmd_job_set_max_id(ivmd_job_t *job, int max_id)
{
    if (max_id < 0) {
        return IVM_ERROR_INVALID_VALUE;
    }
    job->max_pe_id = max_id;
    return IVM_SUCCESS;
}

ivmError_t ivmd_obj_create(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_pe_t *pe,
                           const char *name, uint64_t size, int fd,
                           ivmd_obj_t **obj_p)
{
    ivmd_obj_t *obj;

    if (ivmd_obj_find_name(job, name) != NULL) {
        return IVM_ERROR_EXISTS;
    }
    obj = calloc(1, sizeof(*obj));
    if (obj == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    obj->name = strdup(name);
    if (obj->name == NULL) {
        goto err_free;
    }
    obj->id = reg->next_obj_id;
    HASH_ADD_KEYPTR(hh_name, job->objs_by_name, obj->name, strlen(obj->name), obj);
    if (obj->hash_oom) {
        goto err_free_name;
    }
    HASH_ADD(hh_id, job->objs_by_id, id, sizeof(obj->id), obj);
    if (obj->hash_oom) {
        goto err_unname;
    }
    ++reg->next_obj_id;
    obj->size        = size;
    obj->fd          = fd;
    obj->owner_pe    = pe != NULL ? pe->id : -1;
    obj->master_node = -1;
    obj->next  = job->objs;
    obj->pprev = &job->objs;
    if (job->objs != NULL) {
        job->objs->pprev = &obj->next;
    }
    job->objs = obj;
    ++job->nobjs;
    job->obj_bytes += size;
    ++reg->nobjs;
    reg->obj_bytes += size;
    *obj_p = obj;
    return IVM_SUCCESS;

err_unname:
    HASH_DELETE(hh_name, job->objs_by_name, obj);
err_free_name:
    free(obj->name);
err_free:
    free(obj);
    return IVM_ERROR_NO_MEMORY;
}

ivmd_obj_t *ivmd_obj_find_name(ivmd_job_t *job, const char *name)
{
    ivmd_obj_t *obj;

    HASH_FIND(hh_name, job->objs_by_name, name, strlen(name), obj);
    return obj;
}

ivmd_obj_t *ivmd_obj_find_id(ivmd_job_t *job, uint64_t id)
{
    ivmd_obj_t *obj;

    HASH_FIND(hh_id, job->objs_by_id, &id, sizeof(id), obj);
    return obj;
}

ivmError_t ivmd_obj_map(ivmd_registry_t *reg, ivmd_pe_t *pe, ivmd_obj_t *obj)
{
    ivmd_pe_map_t *m;

    (void)reg;
    HASH_FIND(hh, pe->maps, &obj->id, sizeof(obj->id), m);
    if (m == NULL) {
        m = calloc(1, sizeof(*m));
        if (m == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        m->obj_id = obj->id;
        m->obj    = obj;
        HASH_ADD(hh, pe->maps, obj_id, sizeof(m->obj_id), m);
        if (m->hash_oom) {
            free(m);
            return IVM_ERROR_NO_MEMORY;
        }
        ++pe->nmaps;
    }
    ++m->count;
    ++obj->nmaps;
    return IVM_SUCCESS;
}

ivmError_t ivmd_obj_unmap(ivmd_registry_t *reg, ivmd_pe_t *pe, uint64_t obj_id)
{
    ivmd_pe_map_t *m;
    ivmd_obj_t *obj;

    HASH_FIND(hh, pe->maps, &obj_id, sizeof(obj_id), m);
    if (m == NULL) {
        return IVM_ERROR_INVALID_VALUE;
    }
    obj = m->obj;
    --obj->nmaps;
    if (--m->count == 0) {
        HASH_DEL(pe->maps, m);
        free(m);
        --pe->nmaps;
    }
    if (obj->name == NULL && obj->nmaps == 0) {
        ivmd_obj_release(reg, pe->job, obj);
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_obj_free(ivmd_registry_t *reg, ivmd_pe_t *pe, uint64_t obj_id)
{
    ivmd_obj_t *obj = ivmd_obj_find_id(pe->job, obj_id);

    if (obj == NULL || obj->name == NULL) {
        return IVM_ERROR_INVALID_VALUE;
    }
    if (obj->owner_pe != pe->id) {
        return IVM_ERROR_PERMISSION;
    }
    ivmd_obj_unname(pe->job, obj);
    if (ivmd_obj_unmap(reg, pe, obj_id) != IVM_SUCCESS && obj->nmaps == 0) {
        ivmd_obj_release(reg, pe->job, obj);
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_job_create_proxy(ivmd_registry_t *reg, uint32_t id,
                                 const ivm_cpu_device_t *devs, int ndevs,
                                 ivmd_job_t **job_p)
{
    ivmd_job_t *job = ivmd_job_alloc(reg, id, devs, ndevs);

    if (job == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *job_p = job;
    return IVM_SUCCESS;
}

ivmd_pe_t *ivmd_pe_add_at(ivmd_job_t *job, int id, int devtype)
{
    ivmd_pe_t *pe;

    if (id < 0 || (id < job->next_pe_id && job->pes[id] != NULL)) {
        return NULL;
    }
    while (id >= job->pes_cap) {
        if (ivmd_job_grow_pes(job) != IVM_SUCCESS) {
            return NULL;
        }
    }
    pe = calloc(1, sizeof(*pe));
    if (pe == NULL) {
        return NULL;
    }
    for (; job->next_pe_id <= id; ++job->next_pe_id) {
        job->pes[job->next_pe_id] = NULL;
    }
    pe->id      = id;
    pe->state   = IVMD_PE_SPAWNED;
    pe->devtype = devtype;
    pe->node    = -1;
    pe->job     = job;
    job->pes[id] = pe;
    ++job->alive;
    return pe;
}

int ivmd_obj_gaps(const ivmd_obj_t *obj, uint64_t off, uint64_t len, ivmd_range_t *gaps,
                  int max)
{
    uint64_t pos = off, end = off + len;
    uint32_t i;
    int n = 0;

    for (i = 0; i < obj->nregions && pos < end && n < max; ++i) {
        const ivmd_range_t *r = &obj->regions[i];
        if (r->off + r->len <= pos) {
            continue;
        }
        if (r->off >= end) {
            break;
        }
        if (r->off > pos) {
            gaps[n].off = pos;
            gaps[n].len = r->off - pos;
            ++n;
        }
        pos = r->off + r->len;
    }
    if (pos < end && n < max) {
        gaps[n].off = pos;
        gaps[n].len = end - pos;
        ++n;
    }
    return n;
}

ivmError_t ivmd_obj_hold(ivmd_obj_t *obj, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    uint32_t i, j;

    if (obj->nregions == obj->regions_cap) {
        uint32_t cap = obj->regions_cap ? obj->regions_cap * 2 : 4;
        ivmd_range_t *r = realloc(obj->regions, sizeof(*r) * cap);
        if (r == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        obj->regions     = r;
        obj->regions_cap = cap;
    }
    /* Insert sorted, then merge touching or overlapping neighbours. */
    for (i = 0; i < obj->nregions && obj->regions[i].off < off; ++i) {
    }
    memmove(&obj->regions[i + 1], &obj->regions[i],
            sizeof(ivmd_range_t) * (obj->nregions - i));
    memset(&obj->regions[i], 0, sizeof(ivmd_range_t));
    obj->regions[i].off = off;
    obj->regions[i].len = len;
    ++obj->nregions;
    for (i = 0, j = 0; i < obj->nregions; ++i) {
        if (j > 0 && obj->regions[i].off <= obj->regions[j - 1].off + obj->regions[j - 1].len) {
            uint64_t e = obj->regions[i].off + obj->regions[i].len;
            if (e > obj->regions[j - 1].off + obj->regions[j - 1].len) {
                obj->regions[j - 1].len = e - obj->regions[j - 1].off;
            }
        } else {
            obj->regions[j++] = obj->regions[i];
        }
    }
    obj->nregions = j;
    (void)end;
    return IVM_SUCCESS;
}

ivmError_t ivmd_obj_add_holder(ivmd_obj_t *obj, int node, uint64_t mirror_id, uint64_t off,
                               uint64_t len)
{
    uint32_t i;

    for (i = 0; i < obj->nholders; ++i) {
        ivmd_range_t *h = &obj->holders[i];
        if (h->node == node && h->off == off && h->len == len) {
            return IVM_SUCCESS;
        }
    }
    if (obj->nholders == obj->holders_cap) {
        uint32_t cap = obj->holders_cap ? obj->holders_cap * 2 : 4;
        ivmd_range_t *h = realloc(obj->holders, sizeof(*h) * cap);
        if (h == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        obj->holders     = h;
        obj->holders_cap = cap;
    }
    obj->holders[obj->nholders].off  = off;
    obj->holders[obj->nholders].len  = len;
    obj->holders[obj->nholders].node = node;
    obj->holders[obj->nholders].obj  = mirror_id;
    ++obj->nholders;
    return IVM_SUCCESS;
}

void ivmd_obj_free_name(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_obj_t *obj)
{
    ivmd_obj_unname(job, obj);
    if (obj->nmaps == 0) {
        ivmd_obj_release(reg, job, obj);
    }
}
