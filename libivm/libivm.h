/* libivm internals: the process-wide context, the daemon connection (rpc.c),
 * the mapping table (maps.c) and singleton-mode start (singleton.c). */
#ifndef LIBIVM_LIBIVM_H
#define LIBIVM_LIBIVM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ivm.h"
#include "proto.h"

/* One mapping of an object into this process. */
typedef struct ivm_map {
    char     *ref;        /* the caller's reference: byte `offset` of the object */
    size_t    size;       /* bytes reachable from ref */
    void     *map_base;   /* what mmap returned (page aligned) */
    size_t    map_len;
    uint64_t  obj_id;
    uint64_t  offset;     /* of ref within the object */
    uint32_t  flags;      /* IVM_MAP_* */
    int       allocated;  /* made by ivmMalloc */
    /* GPU PE (flags & IVM_MAP_GPU): ref/map_base are the device copy's, these
     * the node copy's (what ivmHostPtr returns). */
    char     *host;       /* node copy: byte `offset` of the object */
    void     *host_base;  /* what mmap of the node copy returned */
    size_t    host_len;
    uint64_t  gpu_ref;    /* the daemon's id of the device-copy reference */
    /* IVM_MAP_DIRECT: where the master is, for the PE's own endpoint (ep.c) */
    uint64_t  master_id;
    int       master_node;
} ivm_map_t;

typedef struct ivm_pending ivm_pending_t;

typedef struct ivm_ctx {
    pthread_mutex_t  lock;        /* state, pending list, reader role */
    pthread_cond_t   cond;        /* a reply arrived or the reader left */
    pthread_mutex_t  send_lock;   /* one writer at a time on fd */
    int              state;       /* IVM_CTX_* */
    int              fd;
    int              lost;        /* connection broken */
    int              reading;     /* a thread is reading replies */
    uint32_t         next_seq;
    uint64_t         spin_ns;     /* poll this long for a reply before sleeping */
    int              put_signal_two; /* IVM_PUT_SIGNAL=0: ivmSyncPutSignal as two calls */
    size_t           populate_max; /* maps up to this size are populated (IVM_MAP_POPULATE) */
    int              read_first;  /* IVM_MAP_READ_FIRST: 1 or 0; -1: as the daemon says */
    int              own_board_off; /* IVM_SIGNAL_BOARD=0: own ivmSignal / ivmWait through
                                       the daemon (libivm/board.c) */
    ivm_pending_t   *pending;
    /* identity */
    uint32_t         job_id;
    int              pe_id;
    int              devtype;
    int              ncores;
    char             node[IVM_HOST_MAX + 1];
    /* mappings: a search tree by ref, and one by host of the GPU ones */
    pthread_rwlock_t maps_lock;
    void            *maps;        /* tsearch root of ivm_map_t *, by ref */
    void            *maps_host;   /* the same GPU mappings, by host */
    size_t           nmaps;
} ivm_ctx_t;

/* Bytes up to which a map is populated at once (IVM_MAP_POPULATE). */
#define IVM_MAP_POPULATE_DEFAULT (64u << 20)

/* Microseconds a call polls for its reply before it sleeps (IVM_SPIN_US). */
#define IVM_SPIN_US_DEFAULT 50u

/* Parked processes per CPU device of a job whose root PE has no IVM_PE_POOL
 * (see docs/user-guide.md for why this value). */
#define IVM_PE_POOL_DEFAULT 0

enum { IVM_CTX_NEW = 0, IVM_CTX_ENTERED = 1, IVM_CTX_EXITED = 2 };

extern ivm_ctx_t ivm_ctx;

/* Reply of one request. */
typedef struct ivm_rpc_reply {
    void   *buf;      /* reply payload (caller's buffer) */
    size_t  len;      /* its size */
    int     fd;       /* received fd or -1 */
    int     fd2;      /* second received fd (a GPU map's device copy) or -1 */
} ivm_rpc_reply_t;

/* Connect to the daemon (fd in ivm_ctx). */
ivmError_t ivm_rpc_open(const char *path);
void ivm_rpc_close(void);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ivm_now_ns(void);

/* Poll fd for up to spin_ns, yielding the CPU between polls, before the
 * caller's read blocks (rpc.c: why the yield). 1 when fd is readable. */
int ivm_spin_readable(int fd, uint64_t spin_ns);

/* Send a request and wait for its reply. The reply payload is copied into
 * rep->buf (at most rep->len bytes; a detail text after it is stored as the
 * thread's error message). Returns the transport status; the call's own
 * status is the first int32 of the reply. */
ivmError_t ivm_rpc_call(uint16_t type, const void *req, uint32_t req_len,
                        const int *fds, int nfds, ivm_rpc_reply_t *rep);

/* Requests sent now whose status-only replies are taken later
 * (ivmSyncPutNbi, ivmSyncGetNbi). ivm_rpc_post sends one; any thread's later
 * call may read its reply meanwhile; past IVM_POSTED_MAX outstanding, the
 * oldest is waited for first. ivm_rpc_drain waits for every request posted
 * before it, keeping the first failure (ivm_rpc_keep_failure, which the
 * endpoints' posted puts use too); ivm_rpc_quiet drains, then returns that
 * failure (its message as the thread's error; `what` names the API call)
 * and forgets it. */
#define IVM_POSTED_MAX 64u
ivmError_t ivm_rpc_post(uint16_t type, const void *req, uint32_t req_len, const char *what);
void ivm_rpc_keep_failure(ivmError_t status);
void ivm_rpc_drain(void);
ivmError_t ivm_rpc_quiet(void);

/* A request and its reply (at most rep_len bytes into rep): the transport's
 * failure or the reply's own status; a passed fd goes to *fd_p (closed when
 * fd_p is NULL). api.c. */
ivmError_t ivm_call(uint16_t type, const void *req, uint32_t req_len, void *rep,
                    size_t rep_len, int *fd_p);

/* Addressed signals through the node's signal board (board.c): 1 if the
 * pair (the caller, pe) is on it and the call was served there (its status
 * in *status_p), 0 if the daemon must carry it. */
int ivm_board_signal(int to, ivmError_t *status_p);
int ivm_board_wait(int from, ivmError_t *status_p);
/* Whether signals from the caller to pe go through the board. */
int ivm_board_has_pair(int to);
/* ivmSignal on the board, when it holds the caller's own signals (the job's
 * root node): -1 it does not (the daemon carries the signal), 0 posted, 1
 * posted while the daemon holds WAITs on the caller (send SIGNAL_POKE). */
int ivm_board_post(void);
/* ivmWait(pe) on the board when it holds pe's own signals: 1 served (its
 * status in *status_p), 0 the daemon must carry it. */
int ivm_board_wait_pe(int pe, ivmError_t *status_p);
/* A parked process of the warm pool: the job's board, from its memfd fd
 * (closed), mapped and its pages for the PE's own signals touched now, so
 * the PE it becomes signals on it from its first call. */
void ivm_board_adopt(int fd);
/* ivmBarrier over pes[0..n) on the board when every member is a live PE of
 * this node (and n <= IVM_BOARD_SET_MAX); 0: the daemon serves it. */
int ivm_board_barrier(const ivm_pe *pes, int n, ivmError_t *status_p);

/* Error messages of the calling thread. */
void ivm_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Set the thread's error message (also logged at debug level) and return
 * status from the calling function (log.h's ivm_debug). */
#define IVM_FAIL(status, ...)            \
    do {                                 \
        ivm_set_error(__VA_ARGS__);      \
        ivm_debug(__VA_ARGS__);          \
        return (status);                 \
    } while (0)
void ivm_clear_error(void);

/* Mapping table. */
ivmError_t ivm_maps_add(const ivm_map_t *map);
/* Find the mapping containing [addr, addr+size); copy it to *map_p. */
ivmError_t ivm_maps_lookup(const void *addr, size_t size, ivm_map_t *map_p);
/* Remove the mapping whose ref is exactly ref; copy it to *map_p. */
ivmError_t ivm_maps_take(const void *ref, ivm_map_t *map_p);
/* Unmap and forget every mapping. */
void ivm_maps_clear(void);

/* Find the GPU mapping whose host (node copy) range holds [addr, addr+size). */
ivmError_t ivm_maps_lookup_host(const void *addr, size_t size, ivm_map_t *map_p);

/* GPU device copies seen from a PE (gpu.c): one ops table per backend. */
typedef struct ivm_gpu_ops {
    const char *name;
    /* Import the device copy's fd (size bytes): *devptr_p is what kernels use. */
    ivmError_t (*import)(int fd, size_t size, void **devptr_p);
    /* Undo import. */
    void (*release)(void *devptr, size_t size);
    /* Wait for the PE's outstanding device work (before a sync call moves
     * the device copy's bytes); NULL: nothing can be outstanding. */
    ivmError_t (*device_sync)(void);
} ivm_gpu_ops_t;

/* The backend of a GPU mapping's flags (IVM_MAP_GPU_EMU / _CUDA), or NULL. */
const ivm_gpu_ops_t *ivm_gpu_ops_for(uint32_t flags);
/* A parked process of a GPU's warm pool on the cuda backend: load the driver,
 * cuInit, retain device 0's primary context (the PE sees its own GPU only)
 * and make it current, so the application's CUDA runtime later finds that
 * context made. Failure is logged (the process parks anyway). */
ivmError_t ivm_gpu_cuda_warm(void);
/* Unmap a mapping's memory (host and device parts). */
void ivm_map_release(const ivm_map_t *map);

/* Start a private daemon on path (singleton mode). */
ivmError_t ivm_singleton_start(const char *path);

#endif /* LIBIVM_LIBIVM_H */
