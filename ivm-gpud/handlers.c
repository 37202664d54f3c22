/* ivm-gpud's message handlers: node copies, device copies (dedup, refcounts,
 * LRU cache), admission (wait, evict, time out), copies and job ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpud.h"
#include "log.h"
#include "status.h"

#define GPUD_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

typedef enum gpud_try {
    GPUD_TRY_DONE, /* answered (success or failure) */
    GPUD_TRY_WAIT  /* no room yet: stays (or goes) in the GPU's queue */
} gpud_try_t;

/* ------------------------------------------------------------ node copies */

/* mmap size bytes of fd at a GPUD_PIN_CHUNK-aligned address (pinned chunks
 * start at aligned addresses); MAP_FAILED and errno on failure. */
static void *gpud_map_aligned(int fd, uint64_t size)
{
    size_t span = (size_t)(size + GPUD_PIN_CHUNK);
    char *area = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    char *at, *p;

    if (area == MAP_FAILED) {
        return MAP_FAILED;
    }
    at = (char *)(((uintptr_t)area + GPUD_PIN_CHUNK - 1) & ~(uintptr_t)(GPUD_PIN_CHUNK - 1));
    p = mmap(at, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(area, span);
        return MAP_FAILED;
    }
    if (at > area) {
        munmap(area, (size_t)(at - area));
    }
    munmap(at + size, (size_t)(area + span - (at + size)));
    return p;
}

static gpud_obj_t *gpud_obj_find(gpud_t *g, uint32_t job, uint64_t obj_id)
{
    gpud_obj_t *o;

    for (o = g->objs; o != NULL; o = o->next) {
        if (o->job == job && o->obj_id == obj_id) {
            return o;
        }
    }
    return NULL;
}

static ivmError_t gpud_obj_map(gpud_t *g, const ivm_gpud_acquire_req_t *req, int fd,
                               gpud_obj_t **obj_p, char *why, size_t why_len)
{
    gpud_obj_t *o;
    struct stat st;

    if (fd < 0) {
        snprintf(why, why_len, "ACQUIRE of a new object came without the node copy's fd");
        return IVM_ERROR_INVALID_VALUE;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < req->obj_size) {
        snprintf(why, why_len, "the node copy's fd is not a file of %llu bytes",
                 (unsigned long long)req->obj_size);
        return IVM_ERROR_INVALID_VALUE;
    }
    o = calloc(1, sizeof(*o));
    if (o == NULL) {
        snprintf(why, why_len, "out of host memory");
        return IVM_ERROR_NO_MEMORY;
    }
    o->host = gpud_map_aligned(fd, req->obj_size);
    if (o->host == MAP_FAILED) {
        snprintf(why, why_len, "mmap of the node copy (%llu bytes): %s",
                 (unsigned long long)req->obj_size, strerror(errno));
        free(o);
        return IVM_ERROR_NO_MEMORY;
    }
    o->job    = req->job;
    o->obj_id = req->obj_id;
    o->size   = req->obj_size;
    o->fd     = fd;
    o->next   = g->objs;
    g->objs   = o;
    *obj_p    = o;
    return IVM_SUCCESS;
}

/* The node copy of the request's object, one more reference on it; takes fd. */
static ivmError_t gpud_obj_get(gpud_t *g, const ivm_gpud_acquire_req_t *req, int fd,
                               gpud_obj_t **obj_p, char *why, size_t why_len)
{
    gpud_obj_t *o = gpud_obj_find(g, req->job, req->obj_id);
    ivmError_t status;

    if (o != NULL) {
        if (fd >= 0) {
            close(fd); /* gpud maps an object once */
        }
        if (o->size != req->obj_size) {
            snprintf(why, why_len, "object %llu of job %u has %llu bytes, not %llu",
                     (unsigned long long)req->obj_id, req->job,
                     (unsigned long long)o->size, (unsigned long long)req->obj_size);
            return IVM_ERROR_INVALID_VALUE;
        }
    } else {
        status = gpud_obj_map(g, req, fd, &o, why, why_len);
        if (status != IVM_SUCCESS) {
            if (fd >= 0) {
                close(fd);
            }
            return status;
        }
    }
    o->refs++;
    *obj_p = o;
    return IVM_SUCCESS;
}

static void gpud_obj_put(gpud_t *g, gpud_obj_t *o)
{
    gpud_obj_t **pp;

    if (--o->refs > 0) {
        return;
    }
    for (pp = &g->objs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == o) {
            *pp = o->next;
            break;
        }
    }
    free(o->pins); /* every chunk unpinned with its last copy */
    munmap(o->host, o->size);
    close(o->fd);
    free(o);
}

/* ---------------------------------------------------------- device copies */

static gpud_copy_t *gpud_copy_find(gpud_t *g, uint64_t id)
{
    gpud_copy_t *c;

    for (c = g->copies; c != NULL; c = c->next) {
        if (c->id == id) {
            return c;
        }
    }
    return NULL;
}

/* A copy of obj on gpu holding [offset, offset+size). */
static gpud_copy_t *gpud_copy_find_cover(gpud_t *g, const gpud_obj_t *obj, uint32_t gpu,
                                         uint64_t offset, uint64_t size)
{
    gpud_copy_t *c;

    for (c = g->copies; c != NULL; c = c->next) {
        if (c->obj == obj && c->gpu == gpu && c->offset <= offset &&
            offset + size <= c->offset + c->size) {
            return c;
        }
    }
    return NULL;
}

/* Unpin the chunks of [off, off+size) of o that no other copy uses. */
static void gpud_obj_unpin(gpud_t *g, gpud_obj_t *o, uint64_t off, uint64_t size)
{
    uint64_t k;

    for (k = off / GPUD_PIN_CHUNK; size > 0 && k <= (off + size - 1) / GPUD_PIN_CHUNK; ++k) {
        if (--o->pins[k] == 0) {
            g->ops->host_unregister(g->bctx, (char *)o->host + k * GPUD_PIN_CHUNK);
        }
    }
}

/* Pin the chunks of [off, off+size) of o (a device copy's bytes) that no
 * copy uses yet: the whole node copy may be far larger than the GPU, or
 * than what the machine lets a process page-lock. */
static ivmError_t gpud_obj_pin(gpud_t *g, gpud_obj_t *o, uint64_t off, uint64_t size)
{
    uint64_t first = off / GPUD_PIN_CHUNK, k, start;
    ivmError_t status;

    if (size == 0) {
        return IVM_SUCCESS;
    }
    if (o->pins == NULL) {
        o->pins = calloc((size_t)((o->size + GPUD_PIN_CHUNK - 1) / GPUD_PIN_CHUNK),
                         sizeof(*o->pins));
        if (o->pins == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
    }
    for (k = first; k <= (off + size - 1) / GPUD_PIN_CHUNK; ++k) {
        start = k * GPUD_PIN_CHUNK;
        if (o->pins[k] == 0) {
            status = g->ops->host_register(g->bctx, (char *)o->host + start,
                                           o->size - start < GPUD_PIN_CHUNK ? o->size - start
                                                                            : GPUD_PIN_CHUNK);
            if (status != IVM_SUCCESS) {
                gpud_obj_unpin(g, o, first * GPUD_PIN_CHUNK, (k - first) * GPUD_PIN_CHUNK);
                return status;
            }
        }
        o->pins[k]++;
    }
    return IVM_SUCCESS;
}

/* Free a copy (and its reference on the node copy); it may be cached or
 * referenced (job end). */
static void gpud_copy_destroy(gpud_t *g, gpud_copy_t *c)
{
    gpud_copy_t **pp;

    for (pp = &g->copies; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    gpud_admit_uncache(g->admit, c->gpu, &c->lru);
    g->ops->free(g->bctx, c->mem);
    gpud_obj_unpin(g, c->obj, c->offset, c->size);
    gpud_admit_give(g->admit, c->gpu, c->alloc_size);
    ivm_debug("freed copy %llu (GPU %u, %llu bytes)", (unsigned long long)c->id, c->gpu,
              (unsigned long long)c->alloc_size);
    gpud_obj_put(g, c->obj);
    free(c);
}

static void gpud_copy_region(const gpud_t *g, const ivm_gpud_acquire_req_t *req,
                             uint64_t *offset_p, uint64_t *size_p, uint64_t *alloc_p)
{
    uint64_t gran = g->gpus[req->gpu].granularity;
    uint64_t start = req->offset - req->offset % gran;
    uint64_t end = req->offset + req->size;

    end = end + (gran - end % gran) % gran;
    *alloc_p  = end - start;
    *offset_p = start;
    *size_p   = (end < req->obj_size ? end : req->obj_size) - start;
}

/* Allocate, fill from the node copy; the new copy takes the request's
 * reference on obj. */
static ivmError_t gpud_copy_create(gpud_t *g, const ivm_gpud_acquire_req_t *req,
                                   gpud_obj_t *obj, gpud_copy_t **c_p)
{
    gpud_copy_t *c = calloc(1, sizeof(*c));
    ivmError_t status;

    if (c == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    gpud_copy_region(g, req, &c->offset, &c->size, &c->alloc_size);
    status = g->ops->alloc(g->bctx, req->gpu, c->alloc_size, &c->mem);
    if (status != IVM_SUCCESS) {
        free(c);
        return status;
    }
    status = gpud_obj_pin(g, obj, c->offset, c->size);
    if (status != IVM_SUCCESS) {
        g->ops->free(g->bctx, c->mem);
        free(c);
        /* Not the device's memory: no reason to wait for it. */
        return status == IVM_ERROR_NO_MEMORY ? IVM_ERROR_INTERNAL : status;
    }
    status = g->ops->copy(g->bctx, c->mem, 0, (char *)obj->host + c->offset, c->size,
                          IVM_GPUD_COPY_H2D);
    if (status != IVM_SUCCESS) {
        g->ops->free(g->bctx, c->mem);
        gpud_obj_unpin(g, obj, c->offset, c->size);
        free(c);
        return status;
    }
    gpud_admit_take(g->admit, req->gpu, c->alloc_size);
    c->id   = g->next_copy_id++;
    c->obj  = obj;
    c->gpu  = req->gpu;
    c->refs = 1;
    c->next = g->copies;
    g->copies = c;
    ivm_debug("copy %llu: job %u object %llu [%llu, +%llu) on GPU %u, %llu bytes",
              (unsigned long long)c->id, req->job, (unsigned long long)req->obj_id,
              (unsigned long long)c->offset, (unsigned long long)c->size, c->gpu,
              (unsigned long long)c->alloc_size);
    *c_p = c;
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------- ACQUIRE */

static void gpud_acquire_reply(gpud_t *g, uint32_t seq, gpud_copy_t *c, uint32_t flags)
{
    ivm_gpud_acquire_rep_t rep;
    ivmError_t status;
    int fd;

    status = g->ops->export_fd(g->bctx, c->mem, &fd);
    if (status != IVM_SUCCESS) {
        gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, status,
                         "exporting device copy %llu failed", (unsigned long long)c->id);
        return;
    }
    memset(&rep, 0, sizeof(rep));
    rep.flags       = g->ops->copy_flag | flags;
    rep.copy_id     = c->id;
    rep.copy_offset = c->offset;
    rep.copy_size   = c->size;
    rep.alloc_size  = c->alloc_size;
    gpud_reply(g, IVM_GPUD_ACQUIRE, seq, &rep, sizeof(rep), NULL, fd);
    close(fd);
}

static void gpud_reply_no_room(gpud_t *g, uint32_t seq, const ivm_gpud_acquire_req_t *req,
                               uint64_t need, const char *what)
{
    gpud_admit_stats_t s;
    uint64_t dev_free = 0;
    char dev[96] = "";

    gpud_admit_get_stats(g->admit, req->gpu, &s);
    if (g->ops->mem_free != NULL &&
        g->ops->mem_free(g->bctx, req->gpu, &dev_free) == IVM_SUCCESS) {
        snprintf(dev, sizeof(dev), "; the device has %llu bytes free (other processes' memory "
                 "included)", (unsigned long long)dev_free);
    }
    gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, IVM_ERROR_NO_MEMORY,
                     "GPU %u: no room for %llu bytes (job %u object %llu [%llu, +%llu)) %s: "
                     "%llu of %llu bytes free, %llu cached%s",
                     req->gpu, (unsigned long long)need, req->job,
                     (unsigned long long)req->obj_id, (unsigned long long)req->offset,
                     (unsigned long long)req->size, what,
                     (unsigned long long)(s.capacity - s.used), (unsigned long long)s.capacity,
                     (unsigned long long)s.cached, dev);
}

static void gpud_copy_ref(gpud_t *g, gpud_copy_t *c)
{
    if (c->refs++ == 0) {
        gpud_admit_uncache(g->admit, c->gpu, &c->lru);
    }
}

/* Free the least recently released cached copy of gpu; 0 if none is cached. */
static int gpud_evict_one(gpud_t *g, uint32_t gpu, uint64_t alloc)
{
    gpud_admit_lru_t *victim = gpud_admit_evict(g->admit, gpu);
    gpud_copy_t *c;

    if (victim == NULL) {
        return 0;
    }
    c = GPUD_CONTAINER(victim, gpud_copy_t, lru);
    ivm_debug("evicting cached copy %llu for %llu bytes", (unsigned long long)c->id,
              (unsigned long long)alloc);
    gpud_copy_destroy(g, c);
    return 1;
}

/* gpud's accounting admitted alloc bytes; the device may still lack them:
 * memory gpud does not hand out (PE and pool contexts, the applications'
 * own cudaMalloc, other jobs' processes) is taken from the same GPU. Ask the
 * device (cuMemGetInfo) and evict cached copies while it is short; a driver
 * out-of-memory at the allocation itself (taken since) is treated the same.
 * NO_MEMORY with *c_p NULL: still short with nothing left to evict, i.e. wait
 * (marked device_short, so the wait is retried: nothing in gpud will
 * announce memory another process frees). */
static ivmError_t gpud_copy_create_on_device(gpud_t *g, const ivm_gpud_acquire_req_t *req,
                                             gpud_obj_t *obj, uint64_t alloc, gpud_copy_t **c_p)
{
    uint64_t free_bytes;
    ivmError_t status;

    *c_p = NULL;
    for (;;) {
        if (g->ops->mem_free != NULL &&
            g->ops->mem_free(g->bctx, req->gpu, &free_bytes) == IVM_SUCCESS &&
            free_bytes < alloc) {
            status = IVM_ERROR_NO_MEMORY;
        } else {
            status = gpud_copy_create(g, req, obj, c_p);
        }
        if (status != IVM_ERROR_NO_MEMORY) {
            g->device_short[req->gpu] = 0;
            return status;
        }
        *c_p = NULL;
        if (!gpud_evict_one(g, req->gpu, alloc)) {
            if (!g->device_short[req->gpu]) {
                ivm_info("GPU %u: the device lacks %llu bytes that gpud's accounting has free "
                         "(memory of other processes); waiting", req->gpu,
                         (unsigned long long)alloc);
            }
            g->device_short[req->gpu] = 1;
            return IVM_ERROR_NO_MEMORY;
        }
    }
}

/* Serve an ACQUIRE whose request holds a reference on obj: reuse, allocate
 * (evicting cached copies if that makes room), fail, or say WAIT. head: it is
 * first in the GPU's queue (or the queue is empty). */
static gpud_try_t gpud_acquire_try(gpud_t *g, uint32_t seq, const ivm_gpud_acquire_req_t *req,
                                   gpud_obj_t *obj, int head)
{
    gpud_copy_t *c = gpud_copy_find_cover(g, obj, req->gpu, req->offset, req->size);
    uint64_t offset, size, alloc;
    gpud_admit_verdict_t verdict;
    ivmError_t status;

    if (c != NULL) {
        gpud_copy_ref(g, c);
        gpud_obj_put(g, obj);
        gpud_acquire_reply(g, seq, c, IVM_GPUD_COPY_REUSED);
        return GPUD_TRY_DONE;
    }
    gpud_copy_region(g, req, &offset, &size, &alloc);
    verdict = gpud_admit_check(g->admit, req->gpu, alloc);
    if (verdict == GPUD_ADMIT_TOO_LARGE) {
        gpud_obj_put(g, obj);
        gpud_reply_no_room(g, seq, req, alloc, "ever (larger than the GPU)");
        return GPUD_TRY_DONE;
    }
    if (!head || verdict == GPUD_ADMIT_WAIT) {
        return GPUD_TRY_WAIT;
    }
    while (gpud_admit_check(g->admit, req->gpu, alloc) == GPUD_ADMIT_EVICT) {
        gpud_evict_one(g, req->gpu, alloc);
    }
    status = gpud_copy_create_on_device(g, req, obj, alloc, &c);
    if (status == IVM_ERROR_NO_MEMORY && c == NULL) {
        return GPUD_TRY_WAIT; /* the device is short: retried (gpud_expire) */
    }
    if (status != IVM_SUCCESS) {
        gpud_obj_put(g, obj);
        gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, status,
                         "GPU %u: allocating or filling %llu bytes failed (%s)", req->gpu,
                         (unsigned long long)alloc, g->ops->name);
        return GPUD_TRY_DONE;
    }
    gpud_acquire_reply(g, seq, c, 0);
    return GPUD_TRY_DONE;
}

static void gpud_pending_unlink(gpud_t *g, gpud_pending_t *p)
{
    gpud_pending_t **pp;

    for (pp = &g->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    gpud_admit_wait_remove(g->admit, p->req.gpu, &p->wait);
}

/* Memory or copies changed on gpu: grant waiters that can reuse a copy, then
 * the queue's head while it fits. */
static void gpud_queue_run(gpud_t *g, uint32_t gpu)
{
    gpud_admit_wait_t *w, *next;
    gpud_pending_t *p;

    for (w = gpud_admit_wait_head(g->admit, gpu); w != NULL; w = next) {
        next = w->next;
        p = GPUD_CONTAINER(w, gpud_pending_t, wait);
        if (gpud_copy_find_cover(g, p->obj, gpu, p->req.offset, p->req.size) != NULL) {
            gpud_pending_unlink(g, p);
            gpud_acquire_try(g, p->seq, &p->req, p->obj, 1);
            free(p);
        }
    }
    while ((w = gpud_admit_wait_head(g->admit, gpu)) != NULL && !g->stopping) {
        p = GPUD_CONTAINER(w, gpud_pending_t, wait);
        if (gpud_acquire_try(g, p->seq, &p->req, p->obj, 1) == GPUD_TRY_WAIT) {
            break;
        }
        gpud_pending_unlink(g, p);
        free(p);
    }
}

static void gpud_acquire_queue(gpud_t *g, uint32_t seq, const ivm_gpud_acquire_req_t *req,
                               gpud_obj_t *obj)
{
    gpud_pending_t *p = calloc(1, sizeof(*p));
    uint64_t offset, size, alloc;

    if (p == NULL) {
        gpud_obj_put(g, obj);
        gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, IVM_ERROR_NO_MEMORY, "out of host memory");
        return;
    }
    gpud_copy_region(g, req, &offset, &size, &alloc);
    p->seq  = seq;
    p->req  = *req;
    p->obj  = obj;
    p->next = g->pending;
    g->pending = p;
    gpud_admit_wait_push(g->admit, req->gpu, &p->wait, alloc,
                         gpud_now_ns() + (uint64_t)(g->cfg.admit_timeout * 1e9));
    ivm_debug("ACQUIRE seq %u waits for %llu bytes on GPU %u", seq, (unsigned long long)alloc,
              req->gpu);
}

static void gpud_on_acquire(gpud_t *g, uint32_t seq, const ivm_gpud_acquire_req_t *req, int fd)
{
    char why[IVM_MSG_DETAIL_MAX];
    gpud_obj_t *obj;
    ivmError_t status;
    int head;

    if (req->gpu >= g->ngpus) {
        if (fd >= 0) {
            close(fd);
        }
        gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, IVM_ERROR_NO_DEVICE,
                         "GPU %u: this node has %u GPUs", req->gpu, g->ngpus);
        return;
    }
    status = gpud_obj_get(g, req, fd, &obj, why, sizeof(why));
    if (status != IVM_SUCCESS) {
        gpud_reply_error(g, IVM_GPUD_ACQUIRE, seq, status, "%s", why);
        return;
    }
    head = gpud_admit_wait_head(g->admit, req->gpu) == NULL;
    if (gpud_acquire_try(g, seq, req, obj, head) == GPUD_TRY_WAIT) {
        gpud_acquire_queue(g, seq, req, obj);
    }
}

/* --------------------------------------------------------- the others */

static void gpud_on_release(gpud_t *g, uint32_t seq, const ivm_gpud_copy_ref_t *req)
{
    gpud_copy_t *c = gpud_copy_find(g, req->copy_id);
    ivm_gpud_status_t rep = {0};

    if (c == NULL || c->refs == 0) {
        gpud_reply_error(g, IVM_GPUD_RELEASE, seq, IVM_ERROR_NOT_FOUND,
                         "copy %llu is %s", (unsigned long long)req->copy_id,
                         c == NULL ? "unknown" : "not referenced");
        return;
    }
    gpud_reply(g, IVM_GPUD_RELEASE, seq, &rep, sizeof(rep), NULL, -1);
    if (--c->refs == 0) {
        gpud_admit_cache(g->admit, c->gpu, &c->lru, c->alloc_size);
        gpud_queue_run(g, c->gpu);
    }
}

static void gpud_on_copy(gpud_t *g, uint32_t seq, const ivm_gpud_copy_req_t *req)
{
    gpud_copy_t *c = gpud_copy_find(g, req->copy_id);
    ivm_gpud_status_t rep = {0};
    ivmError_t status;

    if (c == NULL) {
        gpud_reply_error(g, IVM_GPUD_COPY, seq, IVM_ERROR_NOT_FOUND, "copy %llu is unknown",
                         (unsigned long long)req->copy_id);
        return;
    }
    if (req->offset < c->offset || req->offset + req->size > c->offset + c->size) {
        gpud_reply_error(g, IVM_GPUD_COPY, seq, IVM_ERROR_INVALID_VALUE,
                         "[%llu, +%llu) is outside copy %llu [%llu, +%llu)",
                         (unsigned long long)req->offset, (unsigned long long)req->size,
                         (unsigned long long)c->id, (unsigned long long)c->offset,
                         (unsigned long long)c->size);
        return;
    }
    status = g->ops->copy(g->bctx, c->mem, req->offset - c->offset,
                          (char *)c->obj->host + req->offset, req->size, req->dir);
    if (status != IVM_SUCCESS) {
        gpud_reply_error(g, IVM_GPUD_COPY, seq, status, "%s copy of %llu bytes failed",
                         req->dir == IVM_GPUD_COPY_H2D ? "H2D" : "D2H",
                         (unsigned long long)req->size);
        return;
    }
    gpud_reply(g, IVM_GPUD_COPY, seq, &rep, sizeof(rep), NULL, -1);
}

static void gpud_on_filled(gpud_t *g, uint32_t seq, const ivm_gpud_filled_req_t *req)
{
    ivm_gpud_status_t rep = {0};
    uint64_t end = req->offset + req->size;
    uint32_t n = 0;
    gpud_copy_t *c;

    for (c = g->copies; c != NULL; c = c->next) {
        uint64_t lo, hi;
        ivmError_t status;

        if (c->obj->job != req->job || c->obj->obj_id != req->obj_id) {
            continue;
        }
        lo = req->offset > c->offset ? req->offset : c->offset;
        hi = end < c->offset + c->size ? end : c->offset + c->size;
        if (lo >= hi) {
            continue;
        }
        status = g->ops->copy(g->bctx, c->mem, lo - c->offset, (char *)c->obj->host + lo,
                              hi - lo, IVM_GPUD_COPY_H2D);
        if (status != IVM_SUCCESS) {
            gpud_reply_error(g, IVM_GPUD_FILLED, seq, status,
                             "H2D copy of %llu filled bytes into copy %llu failed",
                             (unsigned long long)(hi - lo), (unsigned long long)c->id);
            return;
        }
        ++n;
    }
    if (n > 0) {
        ivm_debug("job %u object %llu: [%llu, +%llu) filled: %u device copies refreshed",
                  req->job, (unsigned long long)req->obj_id,
                  (unsigned long long)req->offset, (unsigned long long)req->size, n);
    }
    gpud_reply(g, IVM_GPUD_FILLED, seq, &rep, sizeof(rep), NULL, -1);
}

static void gpud_on_cancel(gpud_t *g, uint32_t seq, const ivm_gpud_cancel_req_t *req)
{
    ivm_gpud_status_t rep = {0};
    gpud_pending_t *p;
    uint32_t gpu;

    for (p = g->pending; p != NULL && p->seq != req->seq; p = p->next) {
    }
    if (p == NULL) {
        gpud_reply_error(g, IVM_GPUD_CANCEL, seq, IVM_ERROR_NOT_FOUND,
                         "no ACQUIRE %u waits", req->seq);
        return;
    }
    gpu = p->req.gpu;
    gpud_pending_unlink(g, p);
    gpud_obj_put(g, p->obj);
    gpud_reply_error(g, IVM_GPUD_ACQUIRE, p->seq, IVM_ERROR_NOT_FOUND,
                     "cancelled while it waited for device memory");
    ivm_debug("ACQUIRE seq %u cancelled while waiting on GPU %u", p->seq, gpu);
    free(p);
    gpud_reply(g, IVM_GPUD_CANCEL, seq, &rep, sizeof(rep), NULL, -1);
    gpud_queue_run(g, gpu); /* the waiters behind it may fit now */
}

static void gpud_on_job_end(gpud_t *g, uint32_t seq, const ivm_gpud_job_req_t *req)
{
    ivm_gpud_status_t rep = {0};
    gpud_pending_t *p, *pnext;
    gpud_copy_t *c, *cnext;
    uint32_t i, freed = 0;

    for (p = g->pending; p != NULL; p = pnext) {
        pnext = p->next;
        if (p->req.job == req->job) {
            gpud_pending_unlink(g, p);
            gpud_obj_put(g, p->obj);
            gpud_reply_error(g, IVM_GPUD_ACQUIRE, p->seq, IVM_ERROR_NOT_FOUND,
                             "job %u ended while this ACQUIRE waited", req->job);
            free(p);
        }
    }
    for (c = g->copies; c != NULL; c = cnext) {
        cnext = c->next;
        if (c->obj->job == req->job) {
            gpud_copy_destroy(g, c);
            freed++;
        }
    }
    ivm_debug("job %u ended: %u copies freed", req->job, freed);
    gpud_reply(g, IVM_GPUD_JOB_END, seq, &rep, sizeof(rep), NULL, -1);
    for (i = 0; i < g->ngpus; ++i) {
        gpud_queue_run(g, i);
    }
}

static void gpud_on_gstats(gpud_t *g, uint32_t seq, const ivm_gpud_stats_req_t *req)
{
    ivm_gpud_stats_rep_t rep;
    gpud_admit_stats_t s;
    gpud_copy_t *c;

    if (req->gpu >= g->ngpus) {
        gpud_reply_error(g, IVM_GPUD_GSTATS, seq, IVM_ERROR_NO_DEVICE,
                         "GPU %u: this node has %u GPUs", req->gpu, g->ngpus);
        return;
    }
    gpud_admit_get_stats(g->admit, req->gpu, &s);
    memset(&rep, 0, sizeof(rep));
    rep.gpu           = req->gpu;
    rep.capacity      = s.capacity;
    rep.used          = s.used;
    rep.cached_bytes  = s.cached;
    rep.allocations   = s.allocations;
    rep.evictions     = s.evictions;
    rep.waiting       = s.waiting;
    rep.wait_timeouts = (uint32_t)s.wait_timeouts;
    for (c = g->copies; c != NULL; c = c->next) {
        if (c->gpu == req->gpu) {
            rep.copies++;
            rep.mapped_refs += c->refs;
        }
    }
    gpud_reply(g, IVM_GPUD_GSTATS, seq, &rep, sizeof(rep), NULL, -1);
}

static void gpud_on_hello(gpud_t *g, uint32_t seq)
{
    ivm_gpud_hello_rep_t rep;

    memset(&rep, 0, sizeof(rep));
    rep.backend = g->ops != NULL ? g->ops->kind : 0;
    snprintf(rep.backend_name, sizeof(rep.backend_name), "%s",
             g->ops != NULL ? g->ops->name : "none");
    rep.ngpus = g->ngpus;
    rep.pid   = (uint32_t)getpid();
    memcpy(rep.gpus, g->gpus, sizeof(rep.gpus));
    gpud_reply(g, IVM_GPUD_GHELLO, seq, &rep, sizeof(rep), NULL, -1);
}

void gpud_handle(gpud_t *g, const ivm_msg_hdr_t *hdr, const void *payload, int fd)
{
    if (hdr->type != IVM_GPUD_ACQUIRE && fd >= 0) {
        close(fd);
    }
    switch (hdr->type) {
    case IVM_GPUD_GHELLO:  gpud_on_hello(g, hdr->seq); break;
    case IVM_GPUD_ACQUIRE: gpud_on_acquire(g, hdr->seq, payload, fd); break;
    case IVM_GPUD_RELEASE: gpud_on_release(g, hdr->seq, payload); break;
    case IVM_GPUD_COPY:    gpud_on_copy(g, hdr->seq, payload); break;
    case IVM_GPUD_JOB_END: gpud_on_job_end(g, hdr->seq, payload); break;
    case IVM_GPUD_GSTATS:  gpud_on_gstats(g, hdr->seq, payload); break;
    case IVM_GPUD_FILLED:  gpud_on_filled(g, hdr->seq, payload); break;
    case IVM_GPUD_CANCEL:  gpud_on_cancel(g, hdr->seq, payload); break;
    default:
        gpud_reply_error(g, hdr->type, hdr->seq, IVM_ERROR_PROTOCOL, "unhandled type");
    }
}

int gpud_expire(gpud_t *g)
{
    gpud_admit_wait_t *w;
    gpud_pending_t *p;
    uint64_t now = gpud_now_ns(), next;
    uint32_t i;

    for (i = 0; i < g->ngpus; ++i) {
        while ((w = gpud_admit_wait_expired(g->admit, i, now)) != NULL) {
            p = GPUD_CONTAINER(w, gpud_pending_t, wait);
            gpud_pending_unlink(g, p);
            gpud_obj_put(g, p->obj);
            gpud_reply_no_room(g, p->seq, &p->req, w->size, "after the admission time-out");
            free(p);
        }
        gpud_queue_run(g, i); /* a head that timed out may have blocked others */
    }
    next = gpud_admit_next_deadline(g->admit);
    now = gpud_now_ns();
    for (i = 0; i < g->ngpus; ++i) {
        if (g->device_short[i] && gpud_admit_wait_head(g->admit, i) != NULL &&
            next > now + GPUD_DEVICE_RETRY_MS * 1000000ull) {
            next = now + GPUD_DEVICE_RETRY_MS * 1000000ull;
        }
    }
    if (next == UINT64_MAX) {
        return -1;
    }
    return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

void gpud_state_clear(gpud_t *g)
{
    gpud_pending_t *p;

    while ((p = g->pending) != NULL) {
        gpud_pending_unlink(g, p);
        gpud_obj_put(g, p->obj);
        free(p);
    }
    while (g->copies != NULL) {
        gpud_copy_destroy(g, g->copies);
    }
}
