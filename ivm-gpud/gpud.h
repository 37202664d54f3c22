/*
 * ivm-gpud: the GPU daemon of one node. ivmd is its only client, over the
 * socketpair named by --ctl-fd (protocol: common/gpud_proto.h). It owns the
 * node's GPUs through one backend (emu or cuda, gpud_backend_ops_t), keeps one
 * device copy per (job, object region, GPU) with reference counts, caches
 * released copies (LRU) and admits allocations memory-safely (admit.c).
 */
#ifndef IVM_GPUD_GPUD_H
#define IVM_GPUD_GPUD_H

#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "config.h"
#include "gpud_proto.h"

#define GPUD_CONFIG_TABLE(X)                                                        \
    X(ctl_fd, "ctl-fd", INT, "-1",                                                  \
      "fd of the control socket to ivmd (required); gpud exits when it closes")     \
    X(backend, "backend", STRING, "auto",                                           \
      "emu, cuda or auto (cuda if a driver and GPUs are found, else no GPUs)")      \
    X(emu_gpus, "emu-gpus", STRING, "1:1G",                                         \
      "emu backend: N[:MEM] emulated GPUs of MEM bytes each (K/M/G suffix)")        \
    X(admit_timeout, "admit-timeout", DOUBLE, "60",                                 \
      "seconds an ACQUIRE waits for GPU memory before NO_MEMORY "                   \
      "(env IVM_GPU_ADMIT_TIMEOUT too)")                                            \
    X(gpus, "gpus", STRING, "",                                                     \
      "cuda backend: the CUDA indices of the GPUs to use, e.g. 0,2 (GPU k is the "   \
      "k-th listed); empty: every GPU the driver shows")                            \
    X(mem_limit, "mem-limit", STRING, "0",                                          \
      "bytes of each GPU gpud may hand out (K/M/G suffix); 0: all it has")          \
    X(node, "node", STRING, "node0", "this node's name, for the log prefix")        \
    X(log_level, "log-level", STRING, "warn", "error, warn, info, debug or trace")

IVM_CONFIG_STRUCT(gpud_config, GPUD_CONFIG_TABLE);

/* Node copies are pinned (host_register) in chunks of this many bytes, only
 * the chunks some device copy uses; a node copy's mapping is aligned to it,
 * so a chunk boundary is an aligned host address. */
#define GPUD_PIN_CHUNK ((uint64_t)2 << 20)
#define GPUD_DEVICE_RETRY_MS 50 /* a waiter short of device memory is retried this often */
#define GPUD_RX_MAX_FDS 16 /* fds kept per incoming message (extra ones closed) */

/* A device allocation; each backend defines the struct. */
typedef struct gpud_mem gpud_mem_t;

typedef struct gpud_backend_ops {
    const char *name;      /* "emu", "cuda" */
    const char *desc;      /* for logs: "emu (emulated GPU, host memory)" */
    uint32_t    kind;      /* IVM_GPUD_BACKEND_* */
    uint32_t    copy_flag; /* IVM_GPUD_COPY_EMU or IVM_GPUD_COPY_CUDA */
    /* Bring up; *ngpus_p may be 0. */
    ivmError_t (*init)(const gpud_config_t *cfg, void **ctx_p, uint32_t *ngpus_p);
    void (*fini)(void *ctx);
    ivmError_t (*gpu_info)(void *ctx, uint32_t gpu, uint64_t *capacity_p,
                           uint64_t *granularity_p, char *name, size_t name_len);
    /* The environment a PE on gpu needs (ivm_gpud_gpu_info_t's env and
     * share_env, each IVM_GPUD_ENV_MAX bytes; "" for none). */
    void (*gpu_env)(void *ctx, uint32_t gpu, char *env, char *share_env);
    /* size is a multiple of the GPU's granularity. */
    ivmError_t (*alloc)(void *ctx, uint32_t gpu, uint64_t size, gpud_mem_t **mem_p);
    /* A new fd the PE imports (the caller closes it after sending). */
    ivmError_t (*export_fd)(void *ctx, gpud_mem_t *mem, int *fd_p);
    /* Move size bytes between mem at mem_off and host (synchronous). */
    ivmError_t (*copy)(void *ctx, gpud_mem_t *mem, uint64_t mem_off, void *host,
                       uint64_t size, uint32_t dir);
    void (*free)(void *ctx, gpud_mem_t *mem);
    /* Bytes the device has free now, whoever took the rest (other
     * processes, contexts); NULL where gpud's own accounting is the truth (emu). */
    ivmError_t (*mem_free)(void *ctx, uint32_t gpu, uint64_t *free_p);
    /* The parts of node copies that device copies use: pin them for fast
     * copies (cuda), or nothing. copy() splits its transfers at
     * GPUD_PIN_CHUNK-aligned host addresses, so each piece lies in one
     * registration. */
    ivmError_t (*host_register)(void *ctx, void *ptr, uint64_t size);
    void (*host_unregister)(void *ctx, void *ptr);
} gpud_backend_ops_t;

extern const gpud_backend_ops_t gpud_backend_emu;
#ifdef IVM_HAVE_CUDA
extern const gpud_backend_ops_t gpud_backend_cuda;
#endif

/* The node copy of one object, mapped by gpud while a copy or a waiting
 * ACQUIRE of it exists. */
typedef struct gpud_obj {
    struct gpud_obj *next;
    uint32_t job;
    uint64_t obj_id;
    uint64_t size;  /* bytes */
    int      fd;    /* the memfd ivmd sent */
    void    *host;  /* its mapping, GPUD_PIN_CHUNK-aligned */
    uint32_t refs;  /* copies + waiting requests */
    uint32_t *pins; /* per GPUD_PIN_CHUNK chunk: the copies using it (pinned while > 0) */
} gpud_obj_t;

/* One device copy of [offset, offset+size) of an object on one GPU. */
typedef struct gpud_copy {
    struct gpud_copy *next;
    uint64_t    id;
    gpud_obj_t *obj;
    uint32_t    gpu;
    uint64_t    offset;     /* object offset of the first byte */
    uint64_t    size;       /* object bytes held */
    uint64_t    alloc_size; /* bytes allocated (granularity multiple) */
    gpud_mem_t *mem;
    uint32_t    refs;       /* 0: cached, in the GPU's LRU */
    gpud_admit_lru_t lru;
} gpud_copy_t;

/* An ACQUIRE waiting for memory. */
typedef struct gpud_pending {
    struct gpud_pending   *next;
    uint32_t               seq;
    ivm_gpud_acquire_req_t req;
    gpud_obj_t            *obj;
    gpud_admit_wait_t      wait;
} gpud_pending_t;

typedef struct gpud {
    gpud_config_t              cfg;
    const gpud_backend_ops_t  *ops;  /* NULL: no GPUs */
    void                      *bctx;
    uint64_t                   mem_limit; /* --mem-limit in bytes, 0: none */
    uint32_t                   ngpus;
    ivm_gpud_gpu_info_t        gpus[IVM_GPUD_MAX_GPUS];
    gpud_admit_t              *admit;
    gpud_obj_t                *objs;
    gpud_copy_t               *copies;
    gpud_pending_t            *pending;
    uint64_t                   next_copy_id;
    /* GPU k's first waiter waits for the device, not for gpud's accounting
     * (memory other processes hold): retried every GPUD_DEVICE_RETRY_MS. */
    uint8_t                    device_short[IVM_GPUD_MAX_GPUS];
    int                        epoll_fd;
    int                        signal_fd;
    int                        ctl_fd;
    int                        stopping;
    /* The control message being read (16 + IVM_MSG_MAX_PAYLOAD bytes), and
     * the fds that came with its bytes. */
    char                      *rx;
    size_t                     rx_len;
    int                        rx_fds[GPUD_RX_MAX_FDS];
    int                        rx_nfds;
} gpud_t;

/* main.c: "123", "64K", "256M", "2G" -> bytes (at most 2^50). */
ivmError_t gpud_parse_size(const char *text, uint64_t *bytes_p);

/* loop.c */
ivmError_t gpud_loop_run(gpud_t *g);
/* Send a reply: rep_len bytes of the fixed reply, then detail text if any,
 * with fd (-1: none). Failure to send stops the daemon. */
void gpud_reply(gpud_t *g, uint32_t type, uint32_t seq, const void *rep,
                uint32_t rep_len, const char *detail, int fd);
/* A failed reply: the type's fixed reply, zero but status, with detail. */
void gpud_reply_error(gpud_t *g, uint32_t type, uint32_t seq, ivmError_t status,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* handlers.c */
/* Handle one validated request; fd: the fd that came with it or -1 (owned). */
void gpud_handle(gpud_t *g, const ivm_msg_hdr_t *hdr, const void *payload, int fd);
/* Answer waiting ACQUIREs whose deadline passed; ms until the next one (-1: none). */
int gpud_expire(gpud_t *g);
/* Free everything (teardown). */
void gpud_state_clear(gpud_t *g);

/* Monotonic clock, nanoseconds. */
uint64_t gpud_now_ns(void);

#endif /* IVM_GPUD_GPUD_H */
