/*
 * cudastub: a contract-checking stand-in for the CUDA driver (libcuda.so.1),
 * for tests only (docs/design-gpu.md, "The CUDA stand-in").
 *
 * Device memory is host memory: a memfd per physical allocation (so the
 * POSIX-fd shareable handles cross processes with SCM_RIGHTS), mapped at the
 * device address inside a PROT_NONE reservation and made readable/writable
 * only by cuMemSetAccess. Every entry point checks the rules the CUDA Driver
 * API documentation states for it (the comment above each names them) and
 * returns the documented error code; a broken rule is also reported on
 * stderr with the prefix "cudastub:" and counted, and at exit leaked
 * allocations, mappings, reservations, host registrations and copies never
 * synchronised are reported the same way. A process that broke a rule exits
 * with status CUDASTUB_EXIT_STATUS (default 86; 0 keeps its own status).
 *
 * Environment (read by cuInit):
 *   CUDASTUB_DEVICES        N:SIZE emulated GPUs of SIZE bytes each (K/M/G),
 *                           or a comma list of SIZEs (default 1:256M)
 *   CUDASTUB_GRANULARITY    allocation granularity (default 2M)
 *   CUDASTUB_DRIVER_VERSION what cuDriverGetVersion says (default CUDA_VERSION)
 *   CUDASTUB_NO_PEER=1      a device cannot access another one's memory
 *   CUDASTUB_DEVICE_FILE    a file: the processes naming the same one share
 *                           the devices' memory (cuMemGetInfo, out of memory),
 *                           as all processes on a GPU do; unset: per process
 *   CUDASTUB_PIN_LIMIT      bytes a process may page-lock (cuMemHostRegister)
 *   CUDASTUB_NO_VMM, CUDASTUB_NO_FD_HANDLES
 *                           comma lists of devices (CUDASTUB_DEVICES numbering)
 *                           without virtual memory management / without POSIX
 *                           fd shareable handles (their attributes say 0)
 *   CUDASTUB_EXIT_STATUS    exit status of a process that broke a rule
 *   CUDA_VISIBLE_DEVICES    indices or GPU-<uuid> prefixes, as the driver reads it
 */
#ifndef CUDASTUB_STUB_H
#define CUDASTUB_STUB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#define STUB_API         __attribute__((visibility("default")))
#define STUB_MAX_DEVICES 16

typedef struct stub_device {
    int      phys;         /* index in CUDASTUB_DEVICES */
    size_t   capacity;     /* bytes */
    size_t   used;         /* bytes of this process's cuMemCreate allocations */
    CUuuid   uuid;
    int      no_vmm;       /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED 0 */
    int      no_fd;        /* CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 0 */
} stub_device_t;

/* A device's primary context (the only kind IVM uses). */
typedef struct stub_ctx {
    uint32_t magic;
    int      ordinal;      /* visible device */
    int      refs;         /* cuDevicePrimaryCtxRetain count */
} stub_ctx_t;

/* A physical allocation this process holds a handle on (made or imported). */
typedef struct stub_alloc {
    struct stub_alloc *next;
    CUmemGenericAllocationHandle handle;
    int      fd;           /* the memfd; -1 once freed */
    size_t   size;
    int      phys;         /* device it lives on */
    int      created;      /* cuMemCreate here (counts in used) rather than imported */
    int      released;     /* cuMemRelease called */
    int      maps;         /* live mappings of it */
    unsigned long long types; /* requested handle types */
} stub_alloc_t;

typedef struct stub_range {
    struct stub_range *next;
    uintptr_t base;
    size_t    size;
} stub_range_t;

typedef struct stub_map {
    struct stub_map *next;
    uintptr_t     base;
    size_t        size;
    stub_alloc_t *alloc;
    uint32_t      access;  /* bit d: visible device d may read+write */
} stub_map_t;

typedef struct stub_op {
    struct stub_op *next;
    int       h2d;
    void     *dst;
    const void *src;
    size_t    size;
    void     *staging;     /* pageable source, copied at the call */
    int       guard;       /* its slot in the host guards, -1: none */
} stub_op_t;

typedef struct stub_stream {
    struct stub_stream *next;
    uint32_t    magic;
    stub_ctx_t *ctx;
    stub_op_t  *head, *tail;
    size_t      pending;
} stub_stream_t;

typedef struct stub_state {
    pthread_mutex_t lock;
    int           init;
    pid_t         pid;           /* the process that called cuInit */
    int           driver_version;
    size_t        granularity;
    int           no_peer;
    int           exit_status;
    int           ndevs;         /* physical */
    stub_device_t devs[STUB_MAX_DEVICES];
    int           nvisible;
    int           visible[STUB_MAX_DEVICES]; /* ordinal -> physical */
    stub_ctx_t    ctxs[STUB_MAX_DEVICES];    /* by ordinal */
    stub_alloc_t *allocs;
    stub_range_t *reserved;
    stub_map_t   *maps;
    stub_range_t *pinned;        /* cuMemHostRegister'd */
    stub_stream_t *streams;
    stub_stream_t  null_streams[STUB_MAX_DEVICES]; /* the legacy stream of each context */
    CUmemGenericAllocationHandle next_handle;
    unsigned long violations;
    CUresult      sticky;        /* an async error (illegal address): every sync returns it */
} stub_state_t;

extern stub_state_t stub;
extern __thread stub_ctx_t *stub_current;

/* A broken contract: report it (once per line, "cudastub: ...") and count it. */
void stub_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note that is no violation (e.g. out of memory), only with CUDASTUB_VERBOSE. */
void stub_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Locked entry: checks cuInit was called (and not in a forked child). */
CUresult stub_enter(const char *call);
/* stub_enter plus a current context (CUDA_ERROR_INVALID_CONTEXT without). */
CUresult stub_enter_ctx(const char *call);
void     stub_leave(void);

/* Device memory: free bytes (this process's and, with CUDASTUB_DEVICE_FILE,
 * every other live process's allocations count); take size bytes if free
 * (0: out of memory); give them back. Called with the lock held. */
size_t stub_dev_free(const stub_device_t *d);
int    stub_dev_take(stub_device_t *d, size_t size);
void   stub_dev_give(stub_device_t *d, size_t size);

int  stub_ctx_valid(const stub_ctx_t *ctx);
void stub_stream_flush(stub_stream_t *s);
void stub_ctx_flush(const stub_ctx_t *ctx);
stub_map_t *stub_map_find(uintptr_t addr);
/* The device range [ptr, ptr+size) is mapped, accessible to `ordinal`; else reports. */
CUresult stub_dev_check(const char *call, uintptr_t ptr, size_t size, int ordinal);
int  stub_pinned(const void *p, size_t size);
void stub_streams_report(void);
void stub_vmm_report(void);
/* At exit, after the report: forget the released allocations' records. */
void stub_vmm_forget_released(void);

#endif
