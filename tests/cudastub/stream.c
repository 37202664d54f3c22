/*
 * cudastub streams and copies: asynchronous copies wait in their stream's
 * queue and run, in order, at cuStreamSynchronize / cuCtxSynchronize (or when
 * an ordered operation needs them done), never before; page-locked host
 * memory (cuMemHostRegister) is read and written when the copy runs (stub.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stub.h"

#define STUB_STREAM_MAGIC 0x5354524du /* "STRM" */
#define STUB_GUARDS       64

/* Page-locked host memory a queued copy will write (device to host) or read
 * (host to device): its whole pages are PROT_NONE (resp. read-only) until the
 * copy runs, so that the host touching them before the stream's
 * synchronisation faults with a message instead of silently reading old data.
 * The signal handler reads this table only. */
static struct {
    uintptr_t base;
    size_t    len;
    int       d2h;
} stub_guards[STUB_GUARDS];
static struct sigaction stub_segv_prev;
static int stub_segv_installed;

static void stub_segv(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    char msg[256];
    int i, n;

    for (i = 0; i < STUB_GUARDS; ++i) {
        if (stub_guards[i].len != 0 && a >= stub_guards[i].base &&
            a < stub_guards[i].base + stub_guards[i].len) {
            n = snprintf(msg, sizeof(msg), "cudastub: [pid %d] host access to %p, the %s of an "
                         "async copy not yet synchronised (cuStreamSynchronize first)\n",
                         (int)getpid(), si->si_addr,
                         stub_guards[i].d2h ? "destination" : "source");
            if (write(2, msg, (size_t)n) < 0) {
                /* nothing more to say */
            }
            signal(SIGSEGV, SIG_DFL);
            return; /* faults again, now fatally */
        }
    }
    if (stub_segv_prev.sa_flags & SA_SIGINFO) {
        stub_segv_prev.sa_sigaction(sig, si, uc);
    } else if (stub_segv_prev.sa_handler != SIG_DFL && stub_segv_prev.sa_handler != SIG_IGN) {
        stub_segv_prev.sa_handler(sig);
    } else {
        signal(SIGSEGV, SIG_DFL);
    }
}

static int stub_guard_add(const void *p, size_t size, int d2h)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + size) & ~(uintptr_t)(page - 1);
    struct sigaction sa;
    int i;

    if (hi <= lo) {
        return -1;
    }
    for (i = 0; i < STUB_GUARDS && stub_guards[i].len != 0; ++i) {
    }
    if (i == STUB_GUARDS || mprotect((void *)lo, hi - lo, d2h ? PROT_NONE : PROT_READ) != 0) {
        return -1;
    }
    if (!stub_segv_installed) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = stub_segv;
        sa.sa_flags     = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, &stub_segv_prev);
        stub_segv_installed = 1;
    }
    stub_guards[i].base = lo;
    stub_guards[i].d2h  = d2h;
    stub_guards[i].len  = hi - lo;
    return i;
}

static void stub_guard_drop(int i)
{
    if (i >= 0) {
        mprotect((void *)stub_guards[i].base, stub_guards[i].len, PROT_READ | PROT_WRITE);
        stub_guards[i].len = 0;
    }
}

int stub_pinned(const void *p, size_t size)
{
    stub_range_t *r;
    uintptr_t a = (uintptr_t)p;

    for (r = stub.pinned; r != NULL; r = r->next) {
        if (a >= r->base && a + size <= r->base + r->size) {
            return 1;
        }
    }
    return 0;
}

static void stub_op_run(stub_op_t *op)
{
    const void *src = op->staging != NULL ? op->staging : op->src;
    stub_map_t *m = stub_map_find((uintptr_t)(op->h2d ? op->dst : op->src));

    if (m == NULL) {
        stub_violation("async copy %s device address %p runs after that address was unmapped "
                       "(cuMemUnmap before the stream was synchronised)", op->h2d ? "to" : "from",
                       op->h2d ? op->dst : op->src);
        /* On a GPU: a fault, CUDA_ERROR_ILLEGAL_ADDRESS from this
         * synchronisation on, and the context is unusable. */
        stub.sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
        stub_guard_drop(op->guard);
        return;
    }
    stub_guard_drop(op->guard);
    memcpy(op->dst, src, op->size);
}

void stub_stream_flush(stub_stream_t *s)
{
    stub_op_t *op;

    while ((op = s->head) != NULL) {
        s->head = op->next;
        stub_op_run(op);
        free(op->staging);
        free(op);
    }
    s->tail    = NULL;
    s->pending = 0;
}

void stub_ctx_flush(const stub_ctx_t *ctx)
{
    stub_stream_t *s;

    for (s = stub.streams; s != NULL; s = s->next) {
        if (s->ctx == ctx) {
            stub_stream_flush(s);
        }
    }
    stub_stream_flush(&stub.null_streams[ctx->ordinal]);
}

/* A stream handle of a live context; NULL is the current context's legacy stream. */
static stub_stream_t *stub_stream_get(const char *call, CUstream h)
{
    stub_stream_t *s;

    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        return stub_ctx_valid(stub_current) ? &stub.null_streams[stub_current->ordinal] : NULL;
    }
    for (s = stub.streams; s != NULL; s = s->next) {
        if (s == (stub_stream_t *)h && s->magic == STUB_STREAM_MAGIC && stub_ctx_valid(s->ctx)) {
            return s;
        }
    }
    stub_violation("%s: %p is not a live stream (destroyed, or its context released)", call,
                   (void *)h);
    return NULL;
}

/* cuStreamCreate: needs a current context; flags DEFAULT or NON_BLOCKING. */
STUB_API CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    CUresult rc = stub_enter_ctx("cuStreamCreate");
    stub_stream_t *s;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if ((flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0) {
        stub_violation("cuStreamCreate: flags 0x%x", flags);
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((s = calloc(1, sizeof(*s))) == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->magic = STUB_STREAM_MAGIC;
        s->ctx   = stub_current;
        s->next  = stub.streams;
        stub.streams = s;
        *phStream = (CUstream)s;
    }
    stub_leave();
    return rc;
}

/* cuStreamDestroy: a live stream; work still in it completes first ("the
 * resources ... released automatically once the device has completed all
 * work"); destroying it twice is reported. */
STUB_API CUresult cuStreamDestroy(CUstream hStream)
{
    CUresult rc = stub_enter("cuStreamDestroy");
    stub_stream_t **pp, *s;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    s = hStream != NULL ? stub_stream_get("cuStreamDestroy", hStream) : NULL;
    if (s == NULL) {
        rc = CUDA_ERROR_INVALID_HANDLE;
        goto out;
    }
    stub_stream_flush(s);
    for (pp = &stub.streams; *pp != s; pp = &(*pp)->next) {
    }
    *pp = s->next;
    s->magic = 0;
    free(s);
out:
    stub_leave();
    return rc;
}

/* cuStreamSynchronize: "Waits until the device has completed all operations
 * in the stream": the queued copies run now, in order. */
STUB_API CUresult cuStreamSynchronize(CUstream hStream)
{
    CUresult rc = stub_enter("cuStreamSynchronize");
    stub_stream_t *s;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    s = stub_stream_get("cuStreamSynchronize", hStream);
    if (s == NULL) {
        rc = hStream == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
    } else {
        stub_stream_flush(s);
        rc = stub.sticky;
    }
    stub_leave();
    return rc;
}

/* cuStreamQuery: CUDA_ERROR_NOT_READY while work waits (it waits for a sync). */
STUB_API CUresult cuStreamQuery(CUstream hStream)
{
    CUresult rc = stub_enter("cuStreamQuery");
    stub_stream_t *s;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    s = stub_stream_get("cuStreamQuery", hStream);
    rc = s == NULL ? CUDA_ERROR_INVALID_HANDLE : s->pending > 0 ? CUDA_ERROR_NOT_READY
                                                                : CUDA_SUCCESS;
    stub_leave();
    return rc;
}

static CUresult stub_enqueue(stub_stream_t *s, int h2d, void *dst, const void *src, size_t n)
{
    stub_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->h2d   = h2d;
    op->dst   = dst;
    op->src   = src;
    op->size  = n;
    op->guard = -1;
    if (stub_pinned(h2d ? src : dst, n)) {
        op->guard = stub_guard_add(h2d ? src : dst, n, !h2d);
    } else if (h2d) {
        /* Pageable source: staged at the call, which returns once it is copied. */
        op->staging = malloc(n);
        if (op->staging == NULL) {
            free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->staging, src, n);
    }
    if (s->tail != NULL) {
        s->tail->next = op;
    } else {
        s->head = op;
    }
    s->tail = op;
    s->pending++;
    return CUDA_SUCCESS;
}

/* The common part of the four copies: a current context, a live stream,
 * device memory mapped and accessible to the context's device. */
static CUresult stub_copy(const char *call, int h2d, void *dst, const void *src, size_t n,
                          CUstream hStream, int async)
{
    CUresult rc = stub_enter_ctx(call);
    uintptr_t dev = (uintptr_t)(h2d ? dst : src);
    const void *host = h2d ? src : dst;
    stub_stream_t *s;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    s = stub_stream_get(call, async ? hStream : NULL);
    if (s == NULL) {
        rc = CUDA_ERROR_INVALID_HANDLE;
    } else if (n > 0 && host == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (n > 0) {
        rc = stub_dev_check(call, dev, n, stub_current->ordinal);
    }
    if (rc == CUDA_SUCCESS && n > 0) {
        rc = stub_enqueue(s, h2d, dst, src, n);
    }
    /* Synchronous copies, and device-to-pageable-host ones ("the function
     * will return only once the copy has completed"), finish before return. */
    if (rc == CUDA_SUCCESS && (!async || (!h2d && !stub_pinned(dst, n)))) {
        stub_stream_flush(s);
    }
    stub_leave();
    return rc;
}

/* cuMemcpyHtoD: synchronous in the legacy stream of the current context. */
STUB_API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    return stub_copy("cuMemcpyHtoD", 1, (void *)(uintptr_t)dst, src, n, NULL, 0);
}

/* cuMemcpyDtoH: synchronous in the legacy stream of the current context. */
STUB_API CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
    return stub_copy("cuMemcpyDtoH", 0, dst, (const void *)(uintptr_t)src, n, NULL, 0);
}

/* cuMemcpyHtoDAsync: ordered in hStream, done at its synchronisation; a
 * pageable source is staged at the call, a page-locked one read when it runs. */
STUB_API CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream hStream)
{
    return stub_copy("cuMemcpyHtoDAsync", 1, (void *)(uintptr_t)dst, src, n, hStream, 1);
}

/* cuMemcpyDtoHAsync: into page-locked memory it completes at the stream's
 * synchronisation, not before (reading the buffer earlier sees old data). */
STUB_API CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream hStream)
{
    return stub_copy("cuMemcpyDtoHAsync", 0, dst, (const void *)(uintptr_t)src, n, hStream, 1);
}

/* Bytes this process has page-locked. */
static size_t stub_pinned_total(void)
{
    const stub_range_t *r;
    size_t n = 0;

    for (r = stub.pinned; r != NULL; r = r->next) {
        n += r->size;
    }
    return n;
}

/* cuMemHostRegister: a current context; bytesize > 0; flags among
 * PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY; a range overlapping a
 * registered one is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED. Page-locked
 * memory is limited (the system's, RLIMIT_MEMLOCK): beyond
 * CUDASTUB_PIN_LIMIT bytes it is CUDA_ERROR_OUT_OF_MEMORY, no violation. */
STUB_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)
{
    CUresult rc = stub_enter_ctx("cuMemHostRegister");
    uintptr_t a = (uintptr_t)p;
    stub_range_t *r;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (p == NULL || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)) != 0) {
        stub_violation("cuMemHostRegister: %p+%zu flags 0x%x", p, bytesize, flags);
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (r = stub.pinned; r != NULL; r = r->next) {
        if (a < r->base + r->size && r->base < a + bytesize) {
            stub_violation("cuMemHostRegister: %p+%zu overlaps the registered %p+%zu", p,
                           bytesize, (void *)r->base, r->size);
            rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
            goto out;
        }
    }
    if (getenv("CUDASTUB_PIN_LIMIT") != NULL &&
        stub_pinned_total() + bytesize > strtoull(getenv("CUDASTUB_PIN_LIMIT"), NULL, 0)) {
        stub_note("cuMemHostRegister: %zu more bytes exceed CUDASTUB_PIN_LIMIT", bytesize);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    r->base = a;
    r->size = bytesize;
    r->next = stub.pinned;
    stub.pinned = r;
out:
    stub_leave();
    return rc;
}

static size_t stub_pending_one(const stub_stream_t *s, uintptr_t base, size_t size)
{
    const stub_op_t *op;
    size_t n = 0;

    for (op = s->head; op != NULL; op = op->next) {
        uintptr_t h = (uintptr_t)(op->h2d ? op->src : op->dst);
        n += op->staging == NULL && h < base + size && base < h + op->size;
    }
    return n;
}

/* Queued copies that will read or write page-locked [base, base+size). */
static size_t stub_pending_in(uintptr_t base, size_t size)
{
    const stub_stream_t *s;
    size_t n = 0;
    int i;

    for (s = stub.streams; s != NULL; s = s->next) {
        n += stub_pending_one(s, base, size);
    }
    for (i = 0; i < STUB_MAX_DEVICES; ++i) {
        n += stub_pending_one(&stub.null_streams[i], base, size);
    }
    return n;
}

/* cuMemHostUnregister: p the base address given to cuMemHostRegister
 * (else CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED); copies in flight on the
 * range are reported (they would DMA into memory no longer pinned). */
STUB_API CUresult cuMemHostUnregister(void *p)
{
    CUresult rc = stub_enter_ctx("cuMemHostUnregister");
    stub_range_t **pp, *r;
    size_t pending;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    for (pp = &stub.pinned; *pp != NULL && (*pp)->base != (uintptr_t)p; pp = &(*pp)->next) {
    }
    r = *pp;
    if (r == NULL) {
        stub_violation("cuMemHostUnregister: %p is not the base of a registered range", p);
        rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        goto out;
    }
    pending = stub_pending_in(r->base, r->size);
    if (pending > 0) {
        stub_violation("cuMemHostUnregister: %p+%zu has %zu async copies in flight (synchronise "
                       "their stream first)", p, r->size, pending);
    }
    *pp = r->next;
    free(r);
out:
    stub_leave();
    return rc;
}

/* At exit: copies queued and never synchronised. */
void stub_streams_report(void)
{
    stub_stream_t *s;
    int i;

    for (s = stub.streams; s != NULL; s = s->next) {
        if (s->pending > 0) {
            stub_violation("stream %p: %zu async copies never synchronised (cuStreamSynchronize)"
                           " before exit: they never completed", (void *)s, s->pending);
        }
    }
    for (i = 0; i < STUB_MAX_DEVICES; ++i) {
        if (stub.null_streams[i].pending > 0) {
            stub_violation("the legacy stream of device %d: %zu async copies never synchronised "
                           "before exit", i, stub.null_streams[i].pending);
        }
    }
}
