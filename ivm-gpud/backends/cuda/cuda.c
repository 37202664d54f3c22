/*
 * The cuda backend: real GPUs through the CUDA driver API, reached with
 * dlopen("libcuda.so.1") + cuGetProcAddress (cuda.h supplies types only; no
 * binary links libcuda or cudart, so ivm-gpud starts anywhere).
 *
 * A device copy is a VMM allocation (cuMemCreate, POSIX fd handle type) that
 * gpud also maps for itself (cuMemAddressReserve/cuMemMap/cuMemSetAccess);
 * export_fd hands a PE the shareable fd it imports. Node copies gpud maps are
 * pinned with cuMemHostRegister; copies are cuMemcpy{HtoD,DtoH}Async on a
 * per-GPU stream followed by cuStreamSynchronize.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "gpud.h"
#include "log.h"

#define GPUD_CUDA_ABI 12000 /* driver ABI version asked of cuGetProcAddress */

/* The driver entry points used, with the ABI of GPUD_CUDA_ABI. */
typedef struct gpud_cuda_api {
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                            CUmemAllocationGranularity_flags);
    CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle);
    CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle,
                                           CUmemAllocationHandleType, unsigned long long);
    CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                  unsigned long long);
    CUresult (*MemAddressFree)(CUdeviceptr, size_t);
    CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long);
    CUresult (*MemUnmap)(CUdeviceptr, size_t);
    CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*MemHostRegister)(void *, size_t, unsigned int);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
} gpud_cuda_api_t;

#define GPUD_CUDA_SYMS(X)                                                         \
    X(GetErrorString, "cuGetErrorString") X(Init, "cuInit")                       \
    X(DeviceGetCount, "cuDeviceGetCount") X(DeviceGet, "cuDeviceGet")             \
    X(DeviceGetName, "cuDeviceGetName")                                           \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                         \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease")                       \
    X(CtxSetCurrent, "cuCtxSetCurrent") X(MemGetInfo, "cuMemGetInfo")             \
    X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity")               \
    X(MemCreate, "cuMemCreate") X(MemRelease, "cuMemRelease")                     \
    X(MemExportToShareableHandle, "cuMemExportToShareableHandle")                 \
    X(MemAddressReserve, "cuMemAddressReserve")                                   \
    X(MemAddressFree, "cuMemAddressFree") X(MemMap, "cuMemMap")                   \
    X(MemUnmap, "cuMemUnmap") X(MemSetAccess, "cuMemSetAccess")                   \
    X(MemHostRegister, "cuMemHostRegister")                                       \
    X(MemHostUnregister, "cuMemHostUnregister")                                   \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync") X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync") \
    X(StreamCreate, "cuStreamCreate") X(StreamDestroy, "cuStreamDestroy")         \
    X(StreamSynchronize, "cuStreamSynchronize")

#define GPUD_CUDA_SYM_ENTRY(field, name) {name, offsetof(gpud_cuda_api_t, field)},
static const struct {
    const char *name;
    size_t      offset;
} gpud_cuda_syms[] = {GPUD_CUDA_SYMS(GPUD_CUDA_SYM_ENTRY)};

typedef struct gpud_cuda_gpu {
    CUdevice  dev;
    CUcontext ctx;     /* primary context, retained */
    CUstream  stream;
    size_t    granularity;
    size_t    capacity;
    char      name[IVM_GPUD_GPU_NAME_MAX];
} gpud_cuda_gpu_t;

typedef struct gpud_cuda {
    void            *lib;
    gpud_cuda_api_t  api;
    uint32_t         ngpus;
    gpud_cuda_gpu_t  gpus[IVM_GPUD_MAX_GPUS];
    char             visible[IVM_GPUD_MAX_GPUS][16]; /* GPU k's CUDA index, for PEs */
} gpud_cuda_t;

struct gpud_mem {
    uint32_t                     gpu;
    CUmemGenericAllocationHandle handle;
    CUdeviceptr                  ptr;  /* gpud's own mapping */
    size_t                       size;
};

/* The one place CUresult becomes ivmError_t: logs the call and the driver's text. */
static ivmError_t gpud_cuda_status(const gpud_cuda_t *cu, CUresult rc, const char *call)
{
    const char *text = NULL;

    if (rc == CUDA_SUCCESS) {
        return IVM_SUCCESS;
    }
    if (cu->api.GetErrorString == NULL || cu->api.GetErrorString(rc, &text) != CUDA_SUCCESS ||
        text == NULL) {
        text = "unknown CUDA error";
    }
    ivm_error("cuda: cu%s: %s (CUresult %d)", call, text, (int)rc);
    switch (rc) {
    case CUDA_ERROR_OUT_OF_MEMORY:    return IVM_ERROR_NO_MEMORY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:   return IVM_ERROR_NO_DEVICE;
    case CUDA_ERROR_INVALID_VALUE:    return IVM_ERROR_INVALID_VALUE;
    case CUDA_ERROR_NOT_SUPPORTED:    return IVM_ERROR_UNSUPPORTED;
    case CUDA_ERROR_NOT_PERMITTED:    return IVM_ERROR_PERMISSION;
    default:                          return IVM_ERROR_INTERNAL;
    }
}

/* GPUD_CU(cu, MemCreate(...)): call the entry point, translate, log the call. */
#define GPUD_CU(cu, call) gpud_cuda_status((cu), (cu)->api.call, #call)

typedef CUresult (*gpud_cuda_gpa_v2_t)(const char *, void **, int, cuuint64_t,
                                       CUdriverProcAddressQueryResult *);
typedef CUresult (*gpud_cuda_gpa_v1_t)(const char *, void **, int, cuuint64_t);

/* quiet: --backend auto, where finding no driver is no error. */
static ivmError_t gpud_cuda_load(gpud_cuda_t *cu, int quiet)
{
    gpud_cuda_gpa_v2_t gpa2;
    gpud_cuda_gpa_v1_t gpa1;
    CUdriverProcAddressQueryResult found;
    CUresult rc;
    size_t i;

    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu->lib == NULL) {
        IVM_LOG(quiet ? IVM_LOG_INFO : IVM_LOG_ERROR,
                "cuda: no CUDA driver on this machine: dlopen libcuda.so.1: %s", dlerror());
        return IVM_ERROR_NO_DEVICE;
    }
    gpa2 = (gpud_cuda_gpa_v2_t)dlsym(cu->lib, "cuGetProcAddress_v2");
    gpa1 = (gpud_cuda_gpa_v1_t)dlsym(cu->lib, "cuGetProcAddress");
    if (gpa2 == NULL && gpa1 == NULL) {
        ivm_error("cuda: the CUDA driver has no cuGetProcAddress (too old)");
        return IVM_ERROR_UNSUPPORTED;
    }
    for (i = 0; i < sizeof(gpud_cuda_syms) / sizeof(gpud_cuda_syms[0]); ++i) {
        void **slot = (void **)((char *)&cu->api + gpud_cuda_syms[i].offset);
        rc = gpa2 != NULL ? gpa2(gpud_cuda_syms[i].name, slot, GPUD_CUDA_ABI,
                                 CU_GET_PROC_ADDRESS_DEFAULT, &found)
                          : gpa1(gpud_cuda_syms[i].name, slot, GPUD_CUDA_ABI,
                                 CU_GET_PROC_ADDRESS_DEFAULT);
        if (rc != CUDA_SUCCESS || *slot == NULL) {
            ivm_error("cuda: the CUDA driver lacks %s (CUresult %d)", gpud_cuda_syms[i].name,
                      (int)rc);
            return IVM_ERROR_UNSUPPORTED;
        }
    }
    return IVM_SUCCESS;
}

static void gpud_cuda_prop(const gpud_cuda_gpu_t *gpu, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id          = gpu->dev;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

/* Primary context, stream, granularity, capacity (free bytes at start) of GPU i. */
static ivmError_t gpud_cuda_gpu_open(gpud_cuda_t *cu, uint32_t i)
{
    gpud_cuda_gpu_t *gpu = &cu->gpus[i];
    CUmemAllocationProp prop;
    size_t free_bytes, total;
    ivmError_t status;

    status = GPUD_CU(cu, DeviceGet(&gpu->dev, (int)i));
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, DeviceGetName(gpu->name, (int)sizeof(gpu->name), gpu->dev));
    }
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, DevicePrimaryCtxRetain(&gpu->ctx, gpu->dev));
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    gpud_cuda_prop(gpu, &prop);
    status = GPUD_CU(cu, CtxSetCurrent(gpu->ctx));
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, StreamCreate(&gpu->stream, CU_STREAM_NON_BLOCKING));
    }
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, MemGetAllocationGranularity(&gpu->granularity, &prop,
                                                         CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    }
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, MemGetInfo(&free_bytes, &total));
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    gpu->capacity = free_bytes - free_bytes % gpu->granularity;
    ivm_info("cuda: GPU %u %s: %zu of %zu bytes free, granularity %zu", i, gpu->name,
             free_bytes, total, gpu->granularity);
    return IVM_SUCCESS;
}

static void gpud_cuda_fini(void *ctx)
{
    gpud_cuda_t *cu = ctx;
    uint32_t i;

    for (i = 0; i < cu->ngpus; ++i) {
        if (cu->gpus[i].stream != NULL) {
            cu->api.CtxSetCurrent(cu->gpus[i].ctx);
            cu->api.StreamDestroy(cu->gpus[i].stream);
        }
        if (cu->gpus[i].ctx != NULL) {
            cu->api.DevicePrimaryCtxRelease(cu->gpus[i].dev);
        }
    }
    if (cu->lib != NULL) {
        dlclose(cu->lib);
    }
    free(cu);
}

/* GPU k of the driver is the k-th index of CUDA_VISIBLE_DEVICES where it is
 * a list of numbers (else k): a PE on GPU k sees that one GPU only. */
static void gpud_cuda_visible_parse(gpud_cuda_t *cu, const char *list)
{
    const char *p = list;
    uint32_t k;

    for (k = 0; k < IVM_GPUD_MAX_GPUS; ++k) {
        snprintf(cu->visible[k], sizeof(cu->visible[k]), "%u", k);
    }
    for (k = 0; p != NULL && *p != '\0' && k < IVM_GPUD_MAX_GPUS; ++k) {
        size_t n = strspn(p, "0123456789");
        if (n == 0 || n >= sizeof(cu->visible[k]) || (p[n] != ',' && p[n] != '\0')) {
            return; /* UUIDs or garbage: the driver's own numbering */
        }
        snprintf(cu->visible[k], sizeof(cu->visible[k]), "%.*s", (int)n, p);
        p += n + (p[n] == ',');
    }
}

/* --gpus named more GPUs than the driver shows: CUDA silently drops the first
 * entry of CUDA_VISIBLE_DEVICES that names no device and every one after it,
 * so say which ones this node will not use. */
static void gpud_cuda_visible_check(const char *gpus, int count)
{
    const char *p = gpus;
    int named = 1, k;

    if (gpus[0] == '\0') {
        return;
    }
    for (; *p != '\0'; ++p) {
        named += *p == ',';
    }
    if (count >= named) {
        return;
    }
    for (p = gpus, k = 0; k < count; ++k) {
        p = strchr(p, ',') + 1;
    }
    ivm_warn("--gpus %s: the CUDA driver shows %d of the %d GPUs named; '%s' names no GPU "
             "of this node (or follows one that does not), so it is not used",
             gpus, count, named, p);
}

static ivmError_t gpud_cuda_init(const gpud_config_t *cfg, void **ctx_p, uint32_t *ngpus_p)
{
    gpud_cuda_t *cu = calloc(1, sizeof(*cu));
    ivmError_t status;
    int count = 0;
    uint32_t i;
    int quiet = strcmp(cfg->backend, "auto") == 0;

    if (cu == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    /* --gpus: the driver shows those GPUs only, numbered from 0. */
    if (cfg->gpus[0] != '\0' && setenv("CUDA_VISIBLE_DEVICES", cfg->gpus, 1) != 0) {
        free(cu);
        return IVM_ERROR_NO_MEMORY;
    }
    gpud_cuda_visible_parse(cu, getenv("CUDA_VISIBLE_DEVICES"));
    status = gpud_cuda_load(cu, quiet);
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, Init(0));
    }
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, DeviceGetCount(&count));
    }
    if (status == IVM_SUCCESS && count <= 0) {
        IVM_LOG(quiet ? IVM_LOG_INFO : IVM_LOG_ERROR, "cuda: the CUDA driver sees no GPU");
        status = IVM_ERROR_NO_DEVICE;
    }
    if (status == IVM_SUCCESS) {
        gpud_cuda_visible_check(cfg->gpus, count);
    }
    for (i = 0; status == IVM_SUCCESS && i < (uint32_t)count && i < IVM_GPUD_MAX_GPUS; ++i) {
        cu->ngpus = i + 1;
        status = gpud_cuda_gpu_open(cu, i);
    }
    if (status != IVM_SUCCESS) {
        gpud_cuda_fini(cu);
        return status;
    }
    *ctx_p   = cu;
    *ngpus_p = cu->ngpus;
    return IVM_SUCCESS;
}

static ivmError_t gpud_cuda_gpu_info(void *ctx, uint32_t gpu, uint64_t *capacity_p,
                                     uint64_t *granularity_p, char *name, size_t name_len)
{
    gpud_cuda_t *cu = ctx;

    *capacity_p    = cu->gpus[gpu].capacity;
    *granularity_p = cu->gpus[gpu].granularity;
    snprintf(name, name_len, "%s", cu->gpus[gpu].name);
    return IVM_SUCCESS;
}

/* A PE on gpu sees that GPU only (as its device 0); on a share of it, MPS
 * limits it to the share's percent of the SMs (where an MPS daemon runs;
 * without one the share is advisory). */
static void gpud_cuda_gpu_env(void *ctx, uint32_t gpu, char *env, char *share_env)
{
    gpud_cuda_t *cu = ctx;

    snprintf(env, IVM_GPUD_ENV_MAX, "CUDA_VISIBLE_DEVICES=%s", cu->visible[gpu]);
    snprintf(share_env, IVM_GPUD_ENV_MAX, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
}

static ivmError_t gpud_cuda_alloc(void *ctx, uint32_t gpu, uint64_t size, gpud_mem_t **mem_p)
{
    gpud_cuda_t *cu = ctx;
    gpud_cuda_gpu_t *g = &cu->gpus[gpu];
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    gpud_mem_t *m = calloc(1, sizeof(*m));
    ivmError_t status;

    if (m == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    m->gpu  = gpu;
    m->size = size;
    gpud_cuda_prop(g, &prop);
    status = GPUD_CU(cu, CtxSetCurrent(g->ctx));
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, MemCreate(&m->handle, size, &prop, 0));
    }
    if (status != IVM_SUCCESS) {
        goto err_free;
    }
    status = GPUD_CU(cu, MemAddressReserve(&m->ptr, size, g->granularity, 0, 0));
    if (status != IVM_SUCCESS) {
        goto err_release;
    }
    status = GPUD_CU(cu, MemMap(m->ptr, size, 0, m->handle, 0));
    if (status != IVM_SUCCESS) {
        goto err_address;
    }
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = GPUD_CU(cu, MemSetAccess(m->ptr, size, &access, 1));
    if (status != IVM_SUCCESS) {
        goto err_unmap;
    }
    *mem_p = m;
    return IVM_SUCCESS;
err_unmap:
    cu->api.MemUnmap(m->ptr, size);
err_address:
    cu->api.MemAddressFree(m->ptr, size);
err_release:
    cu->api.MemRelease(m->handle);
err_free:
    free(m);
    return status;
}

static ivmError_t gpud_cuda_export_fd(void *ctx, gpud_mem_t *mem, int *fd_p)
{
    gpud_cuda_t *cu = ctx;
    ivmError_t status;
    int fd = -1;

    status = GPUD_CU(cu, MemExportToShareableHandle(&fd, mem->handle,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (status != IVM_SUCCESS) {
        return status;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    *fd_p = fd;
    return IVM_SUCCESS;
}

static ivmError_t gpud_cuda_copy(void *ctx, gpud_mem_t *mem, uint64_t mem_off, void *host,
                                 uint64_t size, uint32_t dir)
{
    gpud_cuda_t *cu = ctx;
    gpud_cuda_gpu_t *g = &cu->gpus[mem->gpu];
    ivmError_t status;

    status = GPUD_CU(cu, CtxSetCurrent(g->ctx));
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (dir == IVM_GPUD_COPY_H2D) {
        status = GPUD_CU(cu, MemcpyHtoDAsync(mem->ptr + mem_off, host, size, g->stream));
    } else {
        status = GPUD_CU(cu, MemcpyDtoHAsync(host, mem->ptr + mem_off, size, g->stream));
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    return GPUD_CU(cu, StreamSynchronize(g->stream));
}

static void gpud_cuda_free(void *ctx, gpud_mem_t *mem)
{
    gpud_cuda_t *cu = ctx;

    GPUD_CU(cu, CtxSetCurrent(cu->gpus[mem->gpu].ctx));
    GPUD_CU(cu, MemUnmap(mem->ptr, mem->size));
    GPUD_CU(cu, MemAddressFree(mem->ptr, mem->size));
    GPUD_CU(cu, MemRelease(mem->handle));
    free(mem);
}

static ivmError_t gpud_cuda_host_register(void *ctx, void *ptr, uint64_t size)
{
    gpud_cuda_t *cu = ctx;
    ivmError_t status;

    status = GPUD_CU(cu, CtxSetCurrent(cu->gpus[0].ctx));
    if (status != IVM_SUCCESS) {
        return status;
    }
    return GPUD_CU(cu, MemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE));
}

static void gpud_cuda_host_unregister(void *ctx, void *ptr)
{
    gpud_cuda_t *cu = ctx;

    GPUD_CU(cu, CtxSetCurrent(cu->gpus[0].ctx));
    GPUD_CU(cu, MemHostUnregister(ptr));
}

const gpud_backend_ops_t gpud_backend_cuda = {
    .name            = "cuda",
    .desc            = "cuda (CUDA driver API, VMM allocations)",
    .kind            = IVM_GPUD_BACKEND_CUDA,
    .copy_flag       = IVM_GPUD_COPY_CUDA,
    .init            = gpud_cuda_init,
    .fini            = gpud_cuda_fini,
    .gpu_info        = gpud_cuda_gpu_info,
    .gpu_env         = gpud_cuda_gpu_env,
    .alloc           = gpud_cuda_alloc,
    .export_fd       = gpud_cuda_export_fd,
    .copy            = gpud_cuda_copy,
    .free            = gpud_cuda_free,
    .host_register   = gpud_cuda_host_register,
    .host_unregister = gpud_cuda_host_unregister,
};
