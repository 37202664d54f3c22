/*
 * cudastub core: cuInit and the emulated devices, primary contexts, error
 * strings, cuGetProcAddress, and the report at exit (stub.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stub.h"

#define STUB_CTX_MAGIC 0x43545843u /* "CXTC" */

stub_state_t stub = {.lock = PTHREAD_MUTEX_INITIALIZER};
__thread stub_ctx_t *stub_current;
static int stub_forked;

static void stub_vreport(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "cudastub: [pid %d] ", (int)getpid());

    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

void stub_violation(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    stub_vreport(fmt, ap);
    va_end(ap);
    stub.violations++;
}

void stub_note(const char *fmt, ...)
{
    va_list ap;

    if (getenv("CUDASTUB_VERBOSE") == NULL) {
        return;
    }
    va_start(ap, fmt);
    stub_vreport(fmt, ap);
    va_end(ap);
}

CUresult stub_enter(const char *call)
{
    pthread_mutex_lock(&stub.lock);
    if (stub_forked) {
        /* Programming Guide, "Initialization": a child process forked after
         * the CUDA driver was initialised cannot use it. */
        stub_violation("%s: called in a child forked after cuInit in its parent (CUDA "
                       "cannot be used across fork)", call);
        pthread_mutex_unlock(&stub.lock);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!stub.init) {
        /* Driver API: "cuInit() must be called before any other function". */
        stub_violation("%s: called before cuInit", call);
        pthread_mutex_unlock(&stub.lock);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return CUDA_SUCCESS;
}

int stub_ctx_valid(const stub_ctx_t *ctx)
{
    return ctx != NULL && ctx->magic == STUB_CTX_MAGIC && ctx->refs > 0;
}

CUresult stub_enter_ctx(const char *call)
{
    CUresult rc = stub_enter(call);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (!stub_ctx_valid(stub_current)) {
        /* Driver API, Context Management: calls that use a context act on the
         * calling thread's current one; none (or a destroyed one) is
         * CUDA_ERROR_INVALID_CONTEXT. */
        stub_violation("%s: no current context on this thread (cuCtxSetCurrent first)%s", call,
                       stub_current != NULL ? "; the current one was released" : "");
        pthread_mutex_unlock(&stub.lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return CUDA_SUCCESS;
}

void stub_leave(void)
{
    pthread_mutex_unlock(&stub.lock);
}

/* ------------------------------------------------------------- device memory */

/* CUDASTUB_DEVICE_FILE: one slot per process, its bytes per device; a slot
 * whose process is gone counts nothing (a GPU frees a dead process's memory). */
#define STUB_SHARED_SLOTS 128
typedef struct stub_shared_slot {
    int32_t  pid;
    uint32_t reserved;
    uint64_t used[STUB_MAX_DEVICES];
} stub_shared_slot_t;

static int stub_shared_fd = -1;
static stub_shared_slot_t *stub_shared;
static int stub_slot = -1;

static int stub_pid_alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static void stub_shared_open(const char *path)
{
    size_t len = STUB_SHARED_SLOTS * sizeof(stub_shared_slot_t);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600), i;
    void *p;

    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        fprintf(stderr, "cudastub: CUDASTUB_DEVICE_FILE %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    if (lseek(fd, 0, SEEK_END) < (off_t)len && ftruncate(fd, (off_t)len) != 0) {
        fprintf(stderr, "cudastub: CUDASTUB_DEVICE_FILE %s: %s\n", path, strerror(errno));
        close(fd);
        return;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return;
    }
    stub_shared = p;
    for (i = 0; i < STUB_SHARED_SLOTS && stub_slot < 0; ++i) {
        if (!stub_pid_alive(stub_shared[i].pid)) {
            memset(&stub_shared[i], 0, sizeof(stub_shared[i]));
            stub_shared[i].pid = (int32_t)getpid();
            stub_slot = i;
        }
    }
    flock(fd, LOCK_UN);
    stub_shared_fd = fd;
}

/* Bytes of device d the other live processes sharing the file hold. */
static size_t stub_dev_others(const stub_device_t *d)
{
    size_t sum = 0;
    int i;

    if (stub_shared == NULL || stub_slot < 0) {
        return 0;
    }
    for (i = 0; i < STUB_SHARED_SLOTS; ++i) {
        if (i != stub_slot && stub_pid_alive(stub_shared[i].pid)) {
            sum += stub_shared[i].used[d->phys];
        }
    }
    return sum;
}

size_t stub_dev_free(const stub_device_t *d)
{
    size_t used;

    if (stub_shared_fd >= 0) {
        flock(stub_shared_fd, LOCK_SH);
    }
    used = d->used + stub_dev_others(d);
    if (stub_shared_fd >= 0) {
        flock(stub_shared_fd, LOCK_UN);
    }
    return used >= d->capacity ? 0 : d->capacity - used;
}

int stub_dev_take(stub_device_t *d, size_t size)
{
    int ok;

    if (stub_shared_fd >= 0) {
        flock(stub_shared_fd, LOCK_EX);
    }
    ok = d->used + stub_dev_others(d) + size <= d->capacity;
    if (ok) {
        d->used += size;
        if (stub_slot >= 0) {
            stub_shared[stub_slot].used[d->phys] = d->used;
        }
    }
    if (stub_shared_fd >= 0) {
        flock(stub_shared_fd, LOCK_UN);
    }
    return ok;
}

void stub_dev_give(stub_device_t *d, size_t size)
{
    d->used -= size;
    if (stub_slot >= 0) {
        stub_shared[stub_slot].used[d->phys] = d->used;
    }
}

/* ------------------------------------------------------------- environment */

/* A comma list of device numbers (CUDASTUB_DEVICES order): set flag on each. */
static void stub_parse_flag_list(const char *env, size_t flag_offset)
{
    const char *p = getenv(env);
    char *end;

    while (p != NULL && *p != '\0') {
        long v = strtol(p, &end, 10);
        if (end == p) {
            break;
        }
        if (v >= 0 && v < stub.ndevs) {
            *(int *)((char *)&stub.devs[v] + flag_offset) = 1;
        }
        p = *end == ',' ? end + 1 : end;
        if (*end != ',') {
            break;
        }
    }
}

static size_t stub_parse_size(const char *s, char **end_p)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    switch (*end) {
    case 'G': case 'g': v <<= 30; ++end; break;
    case 'M': case 'm': v <<= 20; ++end; break;
    case 'K': case 'k': v <<= 10; ++end; break;
    default: break;
    }
    *end_p = end;
    return (size_t)v;
}

/* CUDASTUB_DEVICES: "N:SIZE" or "SIZE,SIZE,...". */
static int stub_parse_devices(const char *spec)
{
    char *end;
    const char *colon = strchr(spec, ':');
    int n = 0, i;

    if (colon != NULL) {
        long count = strtol(spec, &end, 10);
        size_t size = stub_parse_size(colon + 1, &end);
        if (end == colon + 1 || *end != '\0' || count < 1 || count > STUB_MAX_DEVICES) {
            return -1;
        }
        for (i = 0; i < (int)count; ++i) {
            stub.devs[n++].capacity = size;
        }
    } else {
        while (*spec != '\0' && n < STUB_MAX_DEVICES) {
            stub.devs[n++].capacity = stub_parse_size(spec, &end);
            if (end == spec || (*end != ',' && *end != '\0')) {
                return -1;
            }
            spec = *end == ',' ? end + 1 : end;
        }
    }
    return n;
}

static int stub_uuid_match(const char *entry, const CUuuid *u)
{
    char hex[40];
    int i, n = 0;

    for (i = 0; i < 16; ++i) {
        n += snprintf(hex + n, sizeof(hex) - (size_t)n, "%02x%s", (unsigned char)u->bytes[i],
                      (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
    }
    return strncmp(entry + 4, hex, strlen(entry + 4)) == 0;
}

/* CUDA_VISIBLE_DEVICES as the driver reads it: indices or GPU-<uuid> prefixes,
 * up to the first entry that names no device. */
static void stub_parse_visible(void)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    char buf[512], *tok, *save = NULL;
    int i;

    stub.nvisible = 0;
    if (env == NULL) {
        for (i = 0; i < stub.ndevs; ++i) {
            stub.visible[stub.nvisible++] = i;
        }
        return;
    }
    snprintf(buf, sizeof(buf), "%s", env);
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int phys = -1;
        if (strncmp(tok, "GPU-", 4) == 0) {
            for (i = 0; i < stub.ndevs && phys < 0; ++i) {
                phys = stub_uuid_match(tok, &stub.devs[i].uuid) ? i : -1;
            }
        } else {
            char *end;
            long v = strtol(tok, &end, 10);
            phys = (*end == '\0' && v >= 0 && v < stub.ndevs) ? (int)v : -1;
        }
        if (phys < 0 || stub.nvisible == STUB_MAX_DEVICES) {
            break;
        }
        stub.visible[stub.nvisible++] = phys;
    }
}

static CUresult stub_configure(void)
{
    const char *spec = getenv("CUDASTUB_DEVICES");
    const char *gran = getenv("CUDASTUB_GRANULARITY");
    const char *ver  = getenv("CUDASTUB_DRIVER_VERSION");
    const char *st   = getenv("CUDASTUB_EXIT_STATUS");
    char *end;
    int i, j;

    stub.ndevs = stub_parse_devices(spec != NULL ? spec : "1:256M");
    if (stub.ndevs <= 0) {
        fprintf(stderr, "cudastub: CUDASTUB_DEVICES '%s' is not N:SIZE or SIZE,SIZE...\n",
                spec);
        return CUDA_ERROR_NO_DEVICE;
    }
    stub.granularity    = gran != NULL ? stub_parse_size(gran, &end) : (size_t)2 << 20;
    stub.driver_version = ver != NULL ? atoi(ver) : CUDA_VERSION;
    stub.no_peer        = getenv("CUDASTUB_NO_PEER") != NULL;
    stub.exit_status    = st != NULL ? atoi(st) : 86;
    stub.pid            = getpid();
    stub.next_handle    = 0x5100;
    for (i = 0; i < stub.ndevs; ++i) {
        stub.devs[i].phys = i;
        for (j = 0; j < 16; ++j) {
            stub.devs[i].uuid.bytes[j] = (char)(j < 8 ? 0xc5 + j : 0x10 * (j - 7) + i);
        }
    }
    stub_parse_visible();
    stub_parse_flag_list("CUDASTUB_NO_VMM", offsetof(stub_device_t, no_vmm));
    stub_parse_flag_list("CUDASTUB_NO_FD_HANDLES", offsetof(stub_device_t, no_fd));
    if (getenv("CUDASTUB_DEVICE_FILE") != NULL) {
        stub_shared_open(getenv("CUDASTUB_DEVICE_FILE"));
    }
    for (i = 0; i < STUB_MAX_DEVICES; ++i) {
        stub.ctxs[i].magic   = STUB_CTX_MAGIC;
        stub.ctxs[i].ordinal = i;
    }
    return CUDA_SUCCESS;
}

static void stub_atfork_child(void)
{
    if (stub.init) {
        stub_forked = 1;
    }
    pthread_mutex_init(&stub.lock, NULL);
}

/* ------------------------------------------------------------- entry points */

/* cuInit: "Initializes the driver API and must be called before any other
 * function from the driver API"; Flags "must be 0" (CUDA_ERROR_INVALID_VALUE). */
STUB_API CUresult cuInit(unsigned int flags)
{
    static int atfork;
    CUresult rc = CUDA_SUCCESS;

    if (flags != 0) {
        stub_violation("cuInit: Flags must be 0 (got %u)", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&stub.lock);
    if (!atfork) {
        pthread_atfork(NULL, NULL, stub_atfork_child);
        atfork = 1;
    }
    if (stub_forked) {
        stub_violation("%s", "cuInit: in a child forked after cuInit in its parent");
        rc = CUDA_ERROR_NOT_INITIALIZED;
    } else if (!stub.init) {
        rc = stub_configure();
        stub.init = rc == CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&stub.lock);
    return rc;
}

/* cuDriverGetVersion: may be called before cuInit; NULL is CUDA_ERROR_INVALID_VALUE. */
STUB_API CUresult cuDriverGetVersion(int *version)
{
    const char *ver = getenv("CUDASTUB_DRIVER_VERSION");

    if (version == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *version = ver != NULL ? atoi(ver) : CUDA_VERSION;
    return CUDA_SUCCESS;
}

/* cuDeviceGetCount: the devices CUDA_VISIBLE_DEVICES leaves visible. */
STUB_API CUresult cuDeviceGetCount(int *count)
{
    CUresult rc = stub_enter("cuDeviceGetCount");

    if (rc == CUDA_SUCCESS) {
        *count = stub.nvisible;
        stub_leave();
    }
    return rc;
}

static CUresult stub_ordinal(const char *call, int dev)
{
    if (dev < 0 || dev >= stub.nvisible) {
        stub_violation("%s: device %d is not one of the %d visible devices", call, dev,
                       stub.nvisible);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    return CUDA_SUCCESS;
}

/* cuDeviceGet: ordinal in [0, cuDeviceGetCount) else CUDA_ERROR_INVALID_DEVICE. */
STUB_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = stub_enter("cuDeviceGet");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDeviceGet", ordinal);
    if (rc == CUDA_SUCCESS) {
        *device = ordinal;
    }
    stub_leave();
    return rc;
}

/* cuDeviceGetName: a valid device; len > 0. */
STUB_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = stub_enter("cuDeviceGetName");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDeviceGetName", dev);
    if (rc == CUDA_SUCCESS && (name == NULL || len <= 0)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) {
        snprintf(name, (size_t)len, "cudastub GPU %d", stub.visible[dev]);
    }
    stub_leave();
    return rc;
}

/* cuDeviceGetUuid: the device's 16-byte UUID (what CUDA_VISIBLE_DEVICES=GPU-... names). */
STUB_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = stub_enter("cuDeviceGetUuid");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDeviceGetUuid", dev);
    if (rc == CUDA_SUCCESS) {
        *uuid = stub.devs[stub.visible[dev]].uuid;
    }
    stub_leave();
    return rc;
}

/* cuDeviceTotalMem: the device's memory. */
STUB_API CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    CUresult rc = stub_enter("cuDeviceTotalMem");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDeviceTotalMem", dev);
    if (rc == CUDA_SUCCESS) {
        *bytes = stub.devs[stub.visible[dev]].capacity;
    }
    stub_leave();
    return rc;
}

/* cuDeviceGetAttribute: the attributes a VMM user asks (VMM and POSIX fd
 * handle support, unless CUDASTUB_NO_VMM / CUDASTUB_NO_FD_HANDLES name the
 * device; UVA, compute capability 9.0); others are 0. */
STUB_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = stub_enter("cuDeviceGetAttribute");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDeviceGetAttribute", dev);
    if (rc == CUDA_SUCCESS) {
        switch (attrib) {
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
            *pi = !stub.devs[stub.visible[dev]].no_vmm;
            break;
        case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
            *pi = !stub.devs[stub.visible[dev]].no_fd;
            break;
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
            *pi = 1;
            break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
        default: *pi = 0; break;
        }
    }
    stub_leave();
    return rc;
}

/* cuDevicePrimaryCtxRetain: a valid device; the context stays until as many
 * cuDevicePrimaryCtxRelease calls. */
STUB_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = stub_enter("cuDevicePrimaryCtxRetain");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDevicePrimaryCtxRetain", dev);
    if (rc == CUDA_SUCCESS) {
        stub.ctxs[dev].refs++;
        *pctx = (CUcontext)&stub.ctxs[dev];
    }
    stub_leave();
    return rc;
}

/* cuDevicePrimaryCtxRelease: pairs with a retain; at zero the context is
 * destroyed (its streams with it) and may no longer be current. */
STUB_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult rc = stub_enter("cuDevicePrimaryCtxRelease");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_ordinal("cuDevicePrimaryCtxRelease", dev);
    if (rc == CUDA_SUCCESS && stub.ctxs[dev].refs == 0) {
        stub_violation("cuDevicePrimaryCtxRelease: device %d's primary context is not retained",
                       dev);
        rc = CUDA_ERROR_INVALID_CONTEXT;
    }
    if (rc == CUDA_SUCCESS) {
        stub_ctx_flush(&stub.ctxs[dev]);
        stub.ctxs[dev].refs--;
    }
    stub_leave();
    return rc;
}

/* cuCtxSetCurrent: NULL or a live context (CUDA_ERROR_INVALID_CONTEXT). */
STUB_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = stub_enter("cuCtxSetCurrent");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (ctx != NULL && !stub_ctx_valid((stub_ctx_t *)ctx)) {
        stub_violation("cuCtxSetCurrent: %p is not a live context", (void *)ctx);
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        stub_current = (stub_ctx_t *)ctx;
    }
    stub_leave();
    return rc;
}

/* cuCtxGetCurrent: NULL when the thread has none. */
STUB_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult rc = stub_enter("cuCtxGetCurrent");

    if (rc == CUDA_SUCCESS) {
        *pctx = (CUcontext)stub_current;
        stub_leave();
    }
    return rc;
}

/* cuCtxGetDevice: needs a current context. */
STUB_API CUresult cuCtxGetDevice(CUdevice *device)
{
    CUresult rc = stub_enter_ctx("cuCtxGetDevice");

    if (rc == CUDA_SUCCESS) {
        *device = stub_current->ordinal;
        stub_leave();
    }
    return rc;
}

/* cuCtxSynchronize: blocks until the current context finished all its work;
 * "may also return error codes from previous, asynchronous launches" (an
 * illegal address stays). */
STUB_API CUresult cuCtxSynchronize(void)
{
    CUresult rc = stub_enter_ctx("cuCtxSynchronize");

    if (rc == CUDA_SUCCESS) {
        stub_ctx_flush(stub_current);
        rc = stub.sticky;
        stub_leave();
    }
    return rc;
}

/* cuMemGetInfo: free and total memory of the current context's device. */
STUB_API CUresult cuMemGetInfo(size_t *free_p, size_t *total_p)
{
    CUresult rc = stub_enter_ctx("cuMemGetInfo");
    stub_device_t *d;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    d = &stub.devs[stub.visible[stub_current->ordinal]];
    *free_p  = stub_dev_free(d);
    *total_p = d->capacity;
    stub_leave();
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- errors */

#define STUB_ERRORS(X)                                                                      \
    X(CUDA_SUCCESS, "no error") X(CUDA_ERROR_INVALID_VALUE, "invalid argument")             \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                            \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                   \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                           \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                  \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                 \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                 \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                       \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")               \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,                                            \
      "part or all of the requested memory range is already mapped")                       \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered " \
      "memory region")                                                                      \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                  \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")

#define STUB_ERROR_CASE(code, text) case code: *str = text; return CUDA_SUCCESS;
#define STUB_NAME_CASE(code, text)  case code: *str = #code; return CUDA_SUCCESS;

/* cuGetErrorString: an unknown code is CUDA_ERROR_INVALID_VALUE, *pStr NULL. */
STUB_API CUresult cuGetErrorString(CUresult error, const char **str)
{
    switch (error) {
    STUB_ERRORS(STUB_ERROR_CASE)
    default: *str = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}

/* cuGetErrorName: as cuGetErrorString, the enum's name. */
STUB_API CUresult cuGetErrorName(CUresult error, const char **str)
{
    switch (error) {
    STUB_ERRORS(STUB_NAME_CASE)
    default: *str = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ------------------------------------------------------------- cuGetProcAddress */

typedef struct stub_sym {
    const char *name;    /* without version suffix, as cuGetProcAddress is asked */
    int         since;   /* CUDA version that introduced it */
    void       *fn;
} stub_sym_t;

#define STUB_SYM(name, since) {#name, since, (void *)name},

static const stub_sym_t stub_syms[] = {
    STUB_SYM(cuInit, 2000) STUB_SYM(cuDriverGetVersion, 2020) STUB_SYM(cuGetErrorString, 6000)
    STUB_SYM(cuGetErrorName, 6000) STUB_SYM(cuDeviceGetCount, 2000) STUB_SYM(cuDeviceGet, 2000)
    STUB_SYM(cuDeviceGetName, 2000) STUB_SYM(cuDeviceGetUuid, 9020)
    STUB_SYM(cuDeviceTotalMem, 3020) STUB_SYM(cuDeviceGetAttribute, 2000)
    STUB_SYM(cuDevicePrimaryCtxRetain, 7000) STUB_SYM(cuDevicePrimaryCtxRelease, 11000)
    STUB_SYM(cuCtxSetCurrent, 4000) STUB_SYM(cuCtxGetCurrent, 4000)
    STUB_SYM(cuCtxGetDevice, 2000) STUB_SYM(cuCtxSynchronize, 2000)
    STUB_SYM(cuMemGetInfo, 3020) STUB_SYM(cuMemGetAllocationGranularity, 10020)
    STUB_SYM(cuMemCreate, 10020) STUB_SYM(cuMemRelease, 10020)
    STUB_SYM(cuMemExportToShareableHandle, 10020) STUB_SYM(cuMemImportFromShareableHandle, 10020)
    STUB_SYM(cuMemAddressReserve, 10020) STUB_SYM(cuMemAddressFree, 10020)
    STUB_SYM(cuMemMap, 10020) STUB_SYM(cuMemUnmap, 10020) STUB_SYM(cuMemSetAccess, 10020)
    STUB_SYM(cuMemHostRegister, 6050) STUB_SYM(cuMemHostUnregister, 4000)
    STUB_SYM(cuMemcpyHtoD, 3020) STUB_SYM(cuMemcpyDtoH, 3020)
    STUB_SYM(cuMemcpyHtoDAsync, 3020) STUB_SYM(cuMemcpyDtoHAsync, 3020)
    STUB_SYM(cuStreamCreate, 2000) STUB_SYM(cuStreamDestroy, 4000)
    STUB_SYM(cuStreamSynchronize, 2000) STUB_SYM(cuStreamQuery, 2000)
};

/* cuGetProcAddress: the symbol's base name; cudaVersion at least the one
 * that introduced it (else CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) and a
 * driver at least that new; flags one of CU_GET_PROC_ADDRESS_*. "If the
 * specified CUDA version is greater than the driver version, the API will
 * return CUDA_ERROR_INVALID_VALUE" (ask cuDriverGetVersion first). May be
 * called before cuInit. */
STUB_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    size_t i;
    int driver = 0;

    cuDriverGetVersion(&driver);
    if (symbol == NULL || pfn == NULL || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        stub_violation("cuGetProcAddress(%s): invalid argument (flags %llu)",
                       symbol != NULL ? symbol : "NULL", (unsigned long long)flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (cudaVersion > driver) {
        stub_violation("cuGetProcAddress(%s): cudaVersion %d is greater than the driver's "
                       "version %d (cuDriverGetVersion)", symbol, cudaVersion, driver);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    for (i = 0; i < sizeof(stub_syms) / sizeof(stub_syms[0]); ++i) {
        if (strcmp(stub_syms[i].name, symbol) != 0) {
            continue;
        }
        if (cudaVersion < stub_syms[i].since || driver < stub_syms[i].since) {
            if (status != NULL) {
                *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            }
            return CUDA_ERROR_NOT_FOUND;
        }
        *pfn = stub_syms[i].fn;
        if (status != NULL) {
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        }
        return CUDA_SUCCESS;
    }
    if (status != NULL) {
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------------- exit */

__attribute__((destructor)) static void stub_at_exit(void)
{
    if (!stub.init || stub_forked || getpid() != stub.pid ||
        pthread_mutex_trylock(&stub.lock) != 0) {
        return; /* another thread is inside the driver: exit without the report */
    }
    stub_streams_report();
    stub_vmm_report();
    if (stub_slot >= 0) {
        stub_shared[stub_slot].pid = 0; /* the process's device memory goes with it */
    }
    stub_vmm_forget_released();
    if (stub.violations > 0) {
        fprintf(stderr, "cudastub: [pid %d] %lu CUDA driver API contract violation(s) in this "
                "process (see the cudastub: lines above)\n", (int)getpid(), stub.violations);
        fflush(stderr);
        if (stub.exit_status != 0) {
            _exit(stub.exit_status);
        }
    }
    pthread_mutex_unlock(&stub.lock);
}
