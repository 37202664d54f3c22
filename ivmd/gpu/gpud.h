/*
 * gpu/gpud: the GPU module's state and its requests to ivm-gpud, shared by
 * gpu/start.c (process, GHELLO), gpu/req.c (requests in flight, GPU_INFO),
 * gpu/refs.c (references, maps) and gpu/sync.c (syncs, the copy target).
 */
#ifndef IVMD_GPU_GPUD_H
#define IVMD_GPU_GPUD_H

#include <stdint.h>
#include <uthash.h>

#include "data/target.h"
#include "devspec.h"
#include "gpu/gpu.h"
#include "gpud_proto.h"

typedef struct ivmd_gpu_req ivmd_gpu_req_t;
typedef void (*ivmd_gpu_cb_t)(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *rep,
                              int *fds, int nfds, const char *detail);

/* A request to ivm-gpud in flight, by sequence number. */
struct ivmd_gpu_req {
    UT_hash_handle     hh;
    uint32_t           seq;
    uint16_t           type;     /* IVM_GPUD_* */
    ivmd_gpu_cb_t      cb;
    ivmd_conn_t       *conn;     /* the PE (or tool) to answer; NULL once it is gone */
    uint32_t           pe_seq;   /* its request */
    uint16_t           pe_type;
    uint32_t           job;
    uint64_t           obj;      /* ACQUIRE: object id */
    uint64_t           off, len; /* ACQUIRE: the range the PE maps */
    uint64_t           gsync;    /* COPY: the sync it is a step of */
    uint32_t           gpu;      /* GSTATS: the GPU asked about */
    ivmd_target_done_t done;     /* FILLED: called with the status (may be NULL) */
    void              *done_arg;
};

/* The references of one object on this node: the key of ivmd_gpu_obj_t. */
typedef struct ivmd_gpu_obj_key {
    uint32_t job;
    uint32_t reserved; /* zero */
    uint64_t obj;
} ivmd_gpu_obj_key_t;

/* One GPU PE mapping: a reference on a device copy, by id and by object. */
typedef struct ivmd_gpu_ref {
    UT_hash_handle       hh;        /* by id */
    struct ivmd_gpu_ref *prev, *next; /* the object's references */
    uint64_t             id;        /* the PE's gpu_ref */
    uint32_t             job;
    int                  pe;
    uint64_t             obj;
    uint64_t             copy;      /* ivm-gpud's copy id */
    uint64_t             copy_off;  /* object bytes the copy holds */
    uint64_t             copy_size;
    uint32_t             gpu;
} ivmd_gpu_ref_t;

typedef struct ivmd_gpu_obj {
    UT_hash_handle     hh;
    ivmd_gpu_obj_key_t key;
    ivmd_gpu_ref_t    *refs;
} ivmd_gpu_obj_t;

typedef struct ivmd_gsync ivmd_gsync_t;


struct ivmd_gpud {
    pid_t               pid;        /* ivm-gpud, 0 once reaped */
    ivmd_conn_t        *conn;       /* the control socket, NULL once lost */
    int                 alive;
    uint32_t            backend;    /* IVM_GPUD_BACKEND_* */
    char                backend_name[IVM_GPUD_BACKEND_MAX];
    uint32_t            ngpus;
    ivm_gpud_gpu_info_t gpus[IVM_GPUD_MAX_GPUS];
    uint32_t            ndevs;      /* GPU devices: ngpus, or --gpu-shares's entries */
    ivm_gpu_share_t     devs[IVM_DEVSPEC_MAX_GPU_DEVICES]; /* device k: a share of a GPU */
    uint32_t            next_seq;
    ivmd_gpu_req_t     *reqs;       /* by seq */
    ivmd_gpu_ref_t     *refs;       /* by id */
    ivmd_gpu_obj_t     *objs;       /* references by (job, object) */
    uint32_t            nrefs;
    uint64_t            next_ref;
    ivmd_gsync_t       *syncs;      /* by id */
    uint64_t            next_sync;
    int                 closing;    /* ivmd_gpu_stop closes the socket: no failure */
};

/* The physical GPU of device dev (< ndevs). */
static inline uint32_t ivmd_gpu_phys(const ivmd_gpud_t *g, int dev)
{
    return (uint32_t)g->devs[dev].phys;
}

/* Requests (gpu/req.c). */
ivmd_gpu_req_t *ivmd_gpu_req_new(ivmd_gpu_t *gm, uint16_t type, ivmd_gpu_cb_t cb);
/* Send r's request; r is then in flight (its cb runs exactly once, with the
 * reply or DAEMON_LOST). Returns IVM_ERROR_DAEMON_LOST (r freed) if
 * ivm-gpud is gone, or the error of fds that could not go along (r freed). */
ivmError_t ivmd_gpu_send(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, const void *payload, uint32_t len,
                         const int *fds, int nfds);
/* Fail every request in flight (ivm-gpud is gone). */
void ivmd_gpu_reqs_fail(ivmd_gpu_t *gm);
/* A one-way request whose reply only matters for the log. */
void ivmd_gpu_tell(ivmd_gpu_t *gm, uint16_t type, const void *req, uint32_t len);
void ivmd_gpu_release(ivmd_gpu_t *gm, uint64_t copy);

/* References (gpu/refs.c). */
ivmd_gpu_ref_t *ivmd_gpu_ref_find(const ivmd_gpu_t *gm, uint64_t id);
/* The references of (job, obj), NULL if none. */
ivmd_gpu_ref_t *ivmd_gpu_obj_refs(const ivmd_gpu_t *gm, uint32_t job, uint64_t obj);
/* Drop a reference from the tables and free it (no RELEASE sent). */
void ivmd_gpu_ref_forget(ivmd_gpu_t *gm, ivmd_gpu_ref_t *ref);
void ivmd_gpu_refs_clear(ivmd_gpu_t *gm);

/* Syncs (gpu/sync.c). */
void ivmd_gpu_syncs_clear(ivmd_gpu_t *gm);
void ivmd_gpu_syncs_conn_gone(ivmd_gpu_t *gm, ivmd_conn_t *c);
extern const ivmd_target_ops_t ivmd_gpu_target_ops;

#endif /* IVMD_GPU_GPUD_H */
