/*
 * The protocol between ivmd and ivm-gpud, on the socketpair(AF_UNIX,
 * SOCK_STREAM) whose gpud end is `ivm-gpud --ctl-fd N` (docs/design-gpu.md).
 * A stream, not SOCK_SEQPACKET: gpud reads each message exactly (header, then
 * payload) so that the fds of a message never arrive with another's bytes;
 * senders attach fds to the first byte of their message (ivm_sock_send does).
 *
 * Same 16-byte ivm_msg_hdr_t as common/proto.h (magic, version, type, length,
 * seq); gpud types start at 128 and never mix with the PE or peer types. The
 * reply to a request has the request's type | IVM_MSG_REPLY and its seq, and
 * starts with an int32 status (ivmError_t). Every reply has its type's full
 * fixed size (a failed one: fields zero but status), and a failed one may be
 * followed by a NUL-terminated detail text (at most IVM_MSG_DETAIL_MAX bytes,
 * counted in `length`). Replies can
 * come out of order: an ACQUIRE that waits for memory is answered later.
 *
 * File descriptors travel as SCM_RIGHTS on the message they belong to:
 * ACQUIRE carries the node copy's memfd (ivmd -> gpud), its reply the device
 * copy's exported fd (gpud -> ivmd), on success only.
 *
 * Fixed-width fields only, host byte order (the socket never leaves the node).
 */
#ifndef IVM_COMMON_GPUD_PROTO_H
#define IVM_COMMON_GPUD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "ivm.h"
#include "proto.h"

#define IVM_GPUD_MAX_GPUS     16  /* GPUs per node gpud reports */
#define IVM_GPUD_BACKEND_MAX  16  /* bytes of the backend name field */
#define IVM_GPUD_GPU_NAME_MAX 64  /* bytes of a GPU name field */
#define IVM_GPUD_ENV_MAX      64  /* bytes of an environment field of a GPU (a GPU-<uuid> fits) */

/* X(name, value, request struct, reply struct) */
#define IVM_GPUD_TABLE(X)                                                   \
    X(GHELLO,   128, ivm_gpud_empty_t,       ivm_gpud_hello_rep_t)          \
    X(ACQUIRE,  129, ivm_gpud_acquire_req_t, ivm_gpud_acquire_rep_t)        \
    X(RELEASE,  130, ivm_gpud_copy_ref_t,    ivm_gpud_status_t)             \
    X(COPY,     131, ivm_gpud_copy_req_t,    ivm_gpud_status_t)             \
    X(JOB_END,  132, ivm_gpud_job_req_t,     ivm_gpud_status_t)             \
    X(GSTATS,   133, ivm_gpud_stats_req_t,   ivm_gpud_stats_rep_t)          \
    X(FILLED,   134, ivm_gpud_filled_req_t,  ivm_gpud_status_t)            \
    X(CANCEL,   135, ivm_gpud_cancel_req_t,  ivm_gpud_status_t)

#define IVM_GPUD_ENUM_ENTRY(name, value, req, rep) IVM_GPUD_##name = (value),
typedef enum ivm_gpud_type {
    IVM_GPUD_FIRST = 128,
    IVM_GPUD_TABLE(IVM_GPUD_ENUM_ENTRY)
    IVM_GPUD_LAST
} ivm_gpud_type_t;

typedef struct ivm_gpud_empty {
    uint32_t reserved;   /* zero */
} ivm_gpud_empty_t;

/* Start of every reply (the whole reply of RELEASE, COPY and JOB_END). */
typedef struct ivm_gpud_status {
    int32_t  status;     /* ivmError_t */
    uint32_t reserved;   /* zero */
} ivm_gpud_status_t;

/* GHELLO reply: the backend and its GPUs; entries [ngpus..) are zero. */
#define IVM_GPUD_BACKEND_EMU  1u /* emulated GPUs, device memory is host memfd */
#define IVM_GPUD_BACKEND_CUDA 2u /* real GPUs through the CUDA driver API */
typedef struct ivm_gpud_gpu_info {
    uint64_t capacity;   /* bytes of device memory gpud may hand out */
    uint64_t granularity;/* bytes; every allocation is a multiple of it */
    char     name[IVM_GPUD_GPU_NAME_MAX]; /* e.g. "emu0", "NVIDIA H100" */
    /* The environment of a PE on this GPU, which ivmd passes on without
     * knowing the backend: env is one "NAME=value" it needs ("" for none;
     * cuda: CUDA_VISIBLE_DEVICES=GPU-<the GPU's UUID>), share_env the NAME of a
     * variable that limits a PE to a share of the GPU's SMs, set to the
     * share's percent when it is below 100 ("" for none; cuda: MPS's
     * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). NUL-terminated. */
    char     env[IVM_GPUD_ENV_MAX];
    char     share_env[IVM_GPUD_ENV_MAX];
} ivm_gpud_gpu_info_t;

typedef struct ivm_gpud_hello_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t backend;    /* IVM_GPUD_BACKEND_* */
    char     backend_name[IVM_GPUD_BACKEND_MAX]; /* "emu" or "cuda" */
    uint32_t ngpus;      /* GPUs, 0 .. IVM_GPUD_MAX_GPUS */
    uint32_t pid;        /* gpud's pid */
    ivm_gpud_gpu_info_t gpus[IVM_GPUD_MAX_GPUS];
} ivm_gpud_hello_rep_t;

/*
 * ACQUIRE: a device copy of [offset, offset+size) of object obj_id of job on
 * GPU gpu, with the node copy's memfd (obj_size bytes) as SCM_RIGHTS. Reuses
 * an existing copy of the same (job, obj_id, gpu) that covers the range
 * (refcount+1), else allocates one (range rounded out to the granularity,
 * clipped to the object) and fills it from the node copy before replying.
 * Waits (reply deferred) while the GPU has no room; NO_MEMORY after the
 * admission timeout, or at once when the copy exceeds the GPU's capacity.
 */
typedef struct ivm_gpud_acquire_req {
    uint32_t job;        /* job id */
    uint32_t gpu;        /* GPU index on this node, < ngpus */
    uint64_t obj_id;     /* object id at ivmd (unique per daemon) */
    uint64_t obj_size;   /* bytes of the object (= the memfd's size) */
    uint64_t offset;     /* bytes from the object's start */
    uint64_t size;       /* bytes, > 0, offset + size <= obj_size */
    uint32_t flags;      /* none defined yet: zero */
    uint32_t reserved;   /* zero */
} ivm_gpud_acquire_req_t;

/* ACQUIRE reply flags: which kind of fd comes back (the PE imports it so). */
#define IVM_GPUD_COPY_EMU    0x1u /* fd is a memfd: mmap it MAP_SHARED */
#define IVM_GPUD_COPY_CUDA   0x2u /* fd is a CUDA POSIX-fd shareable handle */
#define IVM_GPUD_COPY_REUSED 0x4u /* an existing copy was reused (no allocation) */

typedef struct ivm_gpud_acquire_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t flags;      /* IVM_GPUD_COPY_* */
    uint64_t copy_id;    /* names the copy in RELEASE and COPY; never 0 */
    uint64_t copy_offset;/* bytes: object offset of the copy's first byte */
    uint64_t copy_size;  /* bytes of the object the copy holds */
    uint64_t alloc_size; /* bytes of the device allocation (import/map size) */
} ivm_gpud_acquire_rep_t;

/* RELEASE: drop one reference; at zero the copy stays cached (LRU). */
typedef struct ivm_gpud_copy_ref {
    uint64_t copy_id;    /* from the ACQUIRE reply */
} ivm_gpud_copy_ref_t;

/* COPY: move bytes between a device copy and the node copy; answered when
 * they have landed. offset/size in object coordinates, inside the copy. */
#define IVM_GPUD_COPY_H2D 1u /* node copy -> device copy (for a Get) */
#define IVM_GPUD_COPY_D2H 2u /* device copy -> node copy (for a Put) */
typedef struct ivm_gpud_copy_req {
    uint64_t copy_id;    /* from the ACQUIRE reply */
    uint64_t offset;     /* bytes from the object's start */
    uint64_t size;       /* bytes, > 0 */
    uint32_t dir;        /* IVM_GPUD_COPY_H2D or IVM_GPUD_COPY_D2H */
    uint32_t reserved;   /* zero */
} ivm_gpud_copy_req_t;

/* CANCEL: withdraw the ACQUIRE sent with sequence number seq while it waits
 * for memory (ivmd: its PE is gone). That ACQUIRE is answered at once with
 * IVM_ERROR_NOT_FOUND, and the waiters behind it move up; the CANCEL itself
 * gets IVM_SUCCESS, or IVM_ERROR_NOT_FOUND when no ACQUIRE with that number
 * waits (it was answered before the CANCEL arrived). */
typedef struct ivm_gpud_cancel_req {
    uint32_t seq;        /* the ACQUIRE's sequence number */
    uint32_t reserved;   /* zero */
} ivm_gpud_cancel_req_t;

/* JOB_END: free every copy of the job, mapped or not. */
typedef struct ivm_gpud_job_req {
    uint32_t job;        /* job id */
    uint32_t reserved;   /* zero */
} ivm_gpud_job_req_t;

/* FILLED: the node copy of (job, obj_id) has just received [offset,
 * offset+size), bytes it did not hold before (a mirror fill from the
 * master). gpud copies them (H2D) into every device copy of the object, on
 * any GPU, mapped or cached, that covers part of the range: a copy made when
 * those node bytes were not there yet would otherwise hand them out stale
 * on reuse. No PE can have written them in a device copy (a PE maps only
 * ranges its node holds). Answered when the bytes have landed; success when
 * no copy of the object exists. */
typedef struct ivm_gpud_filled_req {
    uint32_t job;        /* job id */
    uint32_t reserved;   /* zero */
    uint64_t obj_id;     /* object id at ivmd */
    uint64_t offset;     /* bytes from the object's start */
    uint64_t size;       /* bytes, > 0 */
} ivm_gpud_filled_req_t;

typedef struct ivm_gpud_stats_req {
    uint32_t gpu;        /* GPU index, < ngpus */
    uint32_t reserved;   /* zero */
} ivm_gpud_stats_req_t;

typedef struct ivm_gpud_stats_rep {
    int32_t  status;       /* ivmError_t */
    uint32_t gpu;          /* GPU index */
    uint64_t capacity;     /* bytes */
    uint64_t used;         /* bytes allocated now (mapped and cached copies) */
    uint64_t cached_bytes; /* bytes of copies with no reference (evictable) */
    uint32_t copies;       /* device copies alive (mapped and cached) */
    uint32_t mapped_refs;  /* references held on them, summed */
    uint64_t allocations;  /* device allocations made since start */
    uint64_t evictions;    /* cached copies freed to make room */
    uint32_t waiting;      /* ACQUIREs queued for memory now */
    uint32_t wait_timeouts;/* ACQUIREs that timed out waiting, since start */
} ivm_gpud_stats_rep_t;

_Static_assert(sizeof(ivm_gpud_gpu_info_t) == 80 + 2 * IVM_GPUD_ENV_MAX, "gpu info size");
_Static_assert(offsetof(ivm_gpud_gpu_info_t, env) == 80, "env at byte 80");
_Static_assert(sizeof(ivm_gpud_hello_rep_t) == 32 + (80 + 2 * IVM_GPUD_ENV_MAX) * IVM_GPUD_MAX_GPUS,
               "hello reply size");
_Static_assert(offsetof(ivm_gpud_hello_rep_t, gpus) == 32, "gpus at byte 32");
_Static_assert(sizeof(ivm_gpud_acquire_req_t) == 48, "acquire request size");
_Static_assert(sizeof(ivm_gpud_acquire_rep_t) == 40, "acquire reply size");
_Static_assert(sizeof(ivm_gpud_copy_ref_t) == 8, "copy ref size");
_Static_assert(sizeof(ivm_gpud_copy_req_t) == 32, "copy request size");
_Static_assert(sizeof(ivm_gpud_job_req_t) == 8, "job request size");
_Static_assert(sizeof(ivm_gpud_cancel_req_t) == 8, "cancel request size");
_Static_assert(sizeof(ivm_gpud_stats_req_t) == 8, "stats request size");
_Static_assert(sizeof(ivm_gpud_filled_req_t) == 32, "filled request size");
_Static_assert(sizeof(ivm_gpud_stats_rep_t) == 64, "stats reply size");
_Static_assert(sizeof(ivm_gpud_status_t) == 8, "status size");

/* Validation (common/gpud_proto.c). */

/* Check magic, version, that the type (without IVM_MSG_REPLY) is a gpud type,
 * and that the payload fits IVM_MSG_MAX_PAYLOAD. IVM_ERROR_PROTOCOL + *why_p. */
ivmError_t ivm_gpud_check_hdr(const ivm_msg_hdr_t *hdr, const char **why_p);

/* Check a request (header passed ivm_gpud_check_hdr): not a reply, exact
 * payload length for the type, reserved fields zero, field ranges that do not
 * need gpud's state (ACQUIRE: size > 0, offset + size <= obj_size without
 * overflow; COPY: size > 0, dir valid; FILLED: size > 0, no overflow). */
ivmError_t ivm_gpud_check_req(const ivm_msg_hdr_t *hdr, const void *payload,
                              const char **why_p);

/* Check a reply's length: fixed size, up to IVM_MSG_DETAIL_MAX more. */
ivmError_t ivm_gpud_check_rep(const ivm_msg_hdr_t *hdr, const char **why_p);

/* Fixed payload bytes of a gpud request / reply type; 0 if not a gpud type. */
uint32_t ivm_gpud_req_size(uint32_t type);
uint32_t ivm_gpud_rep_size(uint32_t type);

/* Name of a gpud type ("ACQUIRE"), with or without IVM_MSG_REPLY; "?". */
const char *ivm_gpud_type_name(uint32_t type);

#endif /* IVM_COMMON_GPUD_PROTO_H */
