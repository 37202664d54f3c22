/*
 * The cuda backend: real GPUs through the CUDA driver API, reached with
 * dlopen("libcuda.so.1") + cuGetProcAddress (cuda.h supplies types only; no
 * binary links libcuda or cudart, so ivm-gpud starts anywhere).
 *
 * A device copy is a VMM allocation (cuMemCreate, POSIX fd handle type) that
 * gpud also maps for itself (cuMemAddressReserve/cuMemMap/cuMemSetAccess);
 * export_fd hands a PE the shareable fd it imports. Node copies gpud maps are
 * pinned with cuMemHostRegister (the chunks device copies use); copies are
 * cuMemcpy{HtoD,DtoH}Async on a per-GPU stream followed by cuStreamSynchronize.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "cuda_api.h"
#include "gpud.h"
#include "log.h"

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
    int              driver_version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
    int              abi;            /* the version asked of cuGetProcAddress */
    gpud_cuda_api_t  api;
    uint32_t         ngpus;
    gpud_cuda_gpu_t  gpus[IVM_GPUD_MAX_GPUS];
    /* GPU k as CUDA_VISIBLE_DEVICES names it for a PE: "GPU-<uuid>", which
     * means the same device whatever list the PE inherits or MPS renumbers. */
    char             visible[IVM_GPUD_MAX_GPUS][48];
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
    /* Out of memory is no error of gpud's: it evicts, then waits (handlers.c). */
    IVM_LOG(rc == CUDA_ERROR_OUT_OF_MEMORY ? IVM_LOG_INFO : IVM_LOG_ERROR,
            "cuda: cu%s: %s (CUresult %d)", call, text, (int)rc);
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

/* The driver's version (cuDriverGetVersion, callable before cuInit), and
 * the one to ask cuGetProcAddress for: a version newer than the driver is
 * CUDA_ERROR_INVALID_VALUE there, and one newer than our cuda.h would hand
 * back entry points whose prototypes we do not know. */
static ivmError_t gpud_cuda_version(gpud_cuda_t *cu)
{
    CUresult (*get_version)(int *) = (CUresult (*)(int *))dlsym(cu->lib, "cuDriverGetVersion");

    if (get_version == NULL || get_version(&cu->driver_version) != CUDA_SUCCESS ||
        cu->driver_version <= 0) {
        ivm_error("%s", "cuda: the CUDA driver does not tell its version (cuDriverGetVersion)");
        return IVM_ERROR_UNSUPPORTED;
    }
    cu->abi = cu->driver_version < CUDA_VERSION ? cu->driver_version : CUDA_VERSION;
    ivm_info("cuda: CUDA driver %d.%d, entry points of CUDA %d.%d", cu->driver_version / 1000,
             cu->driver_version % 1000 / 10, cu->abi / 1000, cu->abi % 1000 / 10);
    return IVM_SUCCESS;
}

/* quiet: --backend auto, where finding no driver is no error. */
static ivmError_t gpud_cuda_load(gpud_cuda_t *cu, int quiet)
{
    const char *missing;
    ivmError_t status;
    CUresult rc;

    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu->lib == NULL) {
        IVM_LOG(quiet ? IVM_LOG_INFO : IVM_LOG_ERROR,
                "cuda: no CUDA driver on this machine: dlopen libcuda.so.1: %s", dlerror());
        return IVM_ERROR_NO_DEVICE;
    }
    status = gpud_cuda_version(cu);
    if (status != IVM_SUCCESS) {
        return status;
    }
    rc = gpud_cuda_api_resolve(cu->lib, cu->abi, &cu->api, &missing);
    if (rc != CUDA_SUCCESS && missing == NULL) {
        ivm_error("cuda: the CUDA driver (version %d.%d) has no cuGetProcAddress: the cuda "
                  "backend needs CUDA 11.3 or newer", cu->driver_version / 1000,
                  cu->driver_version % 1000 / 10);
        return IVM_ERROR_UNSUPPORTED;
    }
    if (rc != CUDA_SUCCESS) {
        ivm_error("cuda: the CUDA driver (version %d.%d) lacks %s (CUresult %d): the cuda "
                  "backend needs a driver with virtual memory management (CUDA 11.3 or "
                  "newer)", cu->driver_version / 1000, cu->driver_version % 1000 / 10,
                  missing, (int)rc);
        return IVM_ERROR_UNSUPPORTED;
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

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": how nvidia-smi -L and
 * CUDA_VISIBLE_DEVICES spell a device's UUID. */
static void gpud_cuda_uuid_format(const CUuuid *u, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "GPU-");
    int i;

    for (i = 0; i < 16 && n < len; ++i) {
        n += (size_t)snprintf(out + n, len - n, "%02x%s", (unsigned char)u->bytes[i],
                              (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
    }
}

/* Device ordinal can hold IVM's device copies: VMM allocations exported as
 * POSIX fds. A GPU without them (older GPUs, some vGPU and WSL setups) is
 * left out, saying why, rather than failing at the first map. */
static int gpud_cuda_usable(gpud_cuda_t *cu, int ordinal)
{
    static const struct {
        CUdevice_attribute attr;
        const char        *name, *what;
    } need[] = {
        {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
         "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", "virtual memory management (cuMemCreate)"},
        {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
         "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
         "POSIX file descriptor handles (cuMemExportToShareableHandle)"},
    };
    char name[IVM_GPUD_GPU_NAME_MAX] = "?";
    CUdevice dev;
    size_t k;
    int v;

    if (GPUD_CU(cu, DeviceGet(&dev, ordinal)) != IVM_SUCCESS) {
        return 0;
    }
    cu->api.DeviceGetName(name, (int)sizeof(name), dev);
    for (k = 0; k < sizeof(need) / sizeof(need[0]); ++k) {
        v = 0;
        if (GPUD_CU(cu, DeviceGetAttribute(&v, need[k].attr, dev)) != IVM_SUCCESS || v == 0) {
            ivm_error("cuda: CUDA device %d (%s) is not used: it lacks %s "
                      "(CU_DEVICE_ATTRIBUTE_%s is 0), which IVM's device copies need", ordinal,
                      name, need[k].what, need[k].name);
            return 0;
        }
    }
    return 1;
}

/* Primary context, stream, granularity, capacity (free bytes at start) of
 * GPU i, CUDA device ordinal. */
static ivmError_t gpud_cuda_gpu_open(gpud_cuda_t *cu, uint32_t i, int ordinal)
{
    gpud_cuda_gpu_t *gpu = &cu->gpus[i];
    CUmemAllocationProp prop;
    size_t free_bytes, total;
    ivmError_t status;
    CUuuid uuid;

    status = GPUD_CU(cu, DeviceGet(&gpu->dev, ordinal));
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, DeviceGetName(gpu->name, (int)sizeof(gpu->name), gpu->dev));
    }
    /* An index would name the i-th device of the PE's own list (the one the
     * PE inherits, or MPS's renumbering), not ours: the UUID names ours. */
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, DeviceGetUuid(&uuid, gpu->dev));
    }
    if (status == IVM_SUCCESS) {
        gpud_cuda_uuid_format(&uuid, cu->visible[i], sizeof(cu->visible[i]));
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
    ivm_info("cuda: GPU %u %s (%s): %zu of %zu bytes free, granularity %zu", i, gpu->name,
             cu->visible[i], free_bytes, total, gpu->granularity);
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
    for (i = 0; status == IVM_SUCCESS && i < (uint32_t)count && cu->ngpus < IVM_GPUD_MAX_GPUS;
         ++i) {
        if (gpud_cuda_usable(cu, (int)i)) {
            cu->ngpus++;
            status = gpud_cuda_gpu_open(cu, cu->ngpus - 1, (int)i);
        }
    }
    if (status == IVM_SUCCESS && cu->ngpus == 0) {
        ivm_error("cuda: none of the %d GPUs the CUDA driver shows can be used (see above)",
                  count);
        status = IVM_ERROR_NO_DEVICE;
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

/* A PE on gpu sees that GPU only (as its device 0, named by UUID); on a share of it, MPS
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
    /* One async copy per pinned chunk (gpud registers node copies chunk by
     * chunk, GPUD_PIN_CHUNK-aligned): a transfer is page-locked only within
     * one registration. One synchronisation at the end. */
    while (status == IVM_SUCCESS && size > 0) {
        uint64_t piece = GPUD_PIN_CHUNK - (uint64_t)((uintptr_t)host % GPUD_PIN_CHUNK);
        if (piece > size) {
            piece = size;
        }
        if (dir == IVM_GPUD_COPY_H2D) {
            status = GPUD_CU(cu, MemcpyHtoDAsync(mem->ptr + mem_off, host, piece, g->stream));
        } else {
            status = GPUD_CU(cu, MemcpyDtoHAsync(host, mem->ptr + mem_off, piece, g->stream));
        }
        host = (char *)host + piece;
        mem_off += piece;
        size -= piece;
    }
    if (status != IVM_SUCCESS) {
        cu->api.StreamSynchronize(g->stream); /* what was queued ends before we return */
        return status;
    }
    return GPUD_CU(cu, StreamSynchronize(g->stream));
}

/* The device's free bytes now (cuMemGetInfo: every process's allocations
 * and contexts count), for admission. */
static ivmError_t gpud_cuda_mem_free(void *ctx, uint32_t gpu, uint64_t *free_p)
{
    gpud_cuda_t *cu = ctx;
    size_t free_bytes, total;
    ivmError_t status;

    status = GPUD_CU(cu, CtxSetCurrent(cu->gpus[gpu].ctx));
    if (status == IVM_SUCCESS) {
        status = GPUD_CU(cu, MemGetInfo(&free_bytes, &total));
    }
    if (status == IVM_SUCCESS) {
        *free_p = free_bytes;
    }
    return status;
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
    .mem_free        = gpud_cuda_mem_free,
    .host_register   = gpud_cuda_host_register,
    .host_unregister = gpud_cuda_host_unregister,
};
