/* Device copies seen from a GPU PE. ivmd hands a GPU PE's map two fds: the
 * node copy (mmap'd as for a CPU PE: ivmHostPtr's view) and the device copy
 * that ivm-gpud made, which a backend imports here:
 *  - emu: the "device memory" is a memfd; the device pointer is an mmap of it.
 *  - cuda: a POSIX-fd shareable handle of a cuMemCreate allocation, imported
 *    with the driver API (dlopen'd: no CUDA header, never linked), reserved,
 *    mapped and made accessible on device 0 (the PE sees only its own GPU).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libivm.h"
#include "log.h"

/* ------------------------------------------------------------ emu */

static ivmError_t ivm_gpu_emu_import(int fd, size_t size, void **devptr_p)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    if (p == MAP_FAILED) {
        ivm_set_error("mmap of an emulated device copy of %zu bytes failed: %s", size,
                      strerror(errno));
        return IVM_ERROR_NO_MEMORY;
    }
    *devptr_p = p;
    return IVM_SUCCESS;
}

static void ivm_gpu_emu_release(void *devptr, size_t size)
{
    munmap(devptr, size);
}

/* No device_sync: an emulated device copy is written by host code, which
 * has finished when the sync call is made. */
static const ivm_gpu_ops_t ivm_gpu_emu_ops = {
    .name    = "emu",
    .import  = ivm_gpu_emu_import,
    .release = ivm_gpu_emu_release,
};

/* ------------------------------------------------------------ cuda */

/* The few driver API types and calls used, declared with fixed-width types
 * as the driver's ABI defines them. */
typedef int ivm_cu_result_t;                 /* CUresult, 0 = CUDA_SUCCESS */
typedef unsigned long long ivm_cu_ptr_t;     /* CUdeviceptr */
typedef unsigned long long ivm_cu_handle_t;  /* CUmemGenericAllocationHandle */
typedef int ivm_cu_device_t;                 /* CUdevice */
typedef void *ivm_cu_context_t;              /* CUcontext */

typedef struct ivm_cu_location {
    int type;                                /* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
    int id;                                  /* device ordinal */
} ivm_cu_location_t;

typedef struct ivm_cu_access_desc {
    ivm_cu_location_t location;
    int               flags;                 /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
} ivm_cu_access_desc_t;

#define IVM_CU_HANDLE_POSIX_FD    1          /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
#define IVM_CU_LOCATION_DEVICE    1
#define IVM_CU_ACCESS_READWRITE   3
#define IVM_CU_ERROR_OUT_OF_MEMORY 2

typedef struct ivm_cu_api {
    ivm_cu_result_t (*init)(unsigned int);
    ivm_cu_result_t (*device_get)(ivm_cu_device_t *, int);
    ivm_cu_result_t (*primary_ctx_retain)(ivm_cu_context_t *, ivm_cu_device_t);
    ivm_cu_result_t (*ctx_set_current)(ivm_cu_context_t);
    ivm_cu_result_t (*ctx_get_current)(ivm_cu_context_t *);
    ivm_cu_result_t (*ctx_synchronize)(void);
    ivm_cu_result_t (*import_handle)(ivm_cu_handle_t *, void *, int);
    ivm_cu_result_t (*address_reserve)(ivm_cu_ptr_t *, size_t, size_t, ivm_cu_ptr_t,
                                       unsigned long long);
    ivm_cu_result_t (*address_free)(ivm_cu_ptr_t, size_t);
    ivm_cu_result_t (*map)(ivm_cu_ptr_t, size_t, size_t, ivm_cu_handle_t, unsigned long long);
    ivm_cu_result_t (*unmap)(ivm_cu_ptr_t, size_t);
    ivm_cu_result_t (*set_access)(ivm_cu_ptr_t, size_t, const ivm_cu_access_desc_t *, size_t);
    ivm_cu_result_t (*release)(ivm_cu_handle_t);
    ivm_cu_result_t (*error_string)(ivm_cu_result_t, const char **);
} ivm_cu_api_t;

static ivm_cu_api_t ivm_cu;
static ivm_cu_context_t ivm_cu_ctx;
static ivmError_t ivm_cu_state = IVM_ERROR_UNSUPPORTED;
static char ivm_cu_why[200];
static pthread_once_t ivm_cu_once = PTHREAD_ONCE_INIT;

/* The one place a CUresult becomes an ivmError_t: logged with its text. */
static ivmError_t ivm_cu_check(ivm_cu_result_t rc, const char *call)
{
    const char *text = NULL;

    if (rc == 0) {
        return IVM_SUCCESS;
    }
    if (ivm_cu.error_string == NULL || ivm_cu.error_string(rc, &text) != 0 || text == NULL) {
        text = "unknown CUDA error";
    }
    ivm_set_error("%s failed: %s (CUresult %d)", call, text, rc);
    ivm_warn("%s failed: %s (CUresult %d)", call, text, rc);
    return rc == IVM_CU_ERROR_OUT_OF_MEMORY ? IVM_ERROR_NO_MEMORY : IVM_ERROR_INTERNAL;
}

static void ivm_cu_load(void)
{
    static const struct {
        const char *sym;
        size_t      off;
    } syms[] = {
        {"cuInit", offsetof(ivm_cu_api_t, init)},
        {"cuDeviceGet", offsetof(ivm_cu_api_t, device_get)},
        {"cuDevicePrimaryCtxRetain", offsetof(ivm_cu_api_t, primary_ctx_retain)},
        {"cuCtxSetCurrent", offsetof(ivm_cu_api_t, ctx_set_current)},
        {"cuCtxGetCurrent", offsetof(ivm_cu_api_t, ctx_get_current)},
        {"cuCtxSynchronize", offsetof(ivm_cu_api_t, ctx_synchronize)},
        {"cuMemImportFromShareableHandle", offsetof(ivm_cu_api_t, import_handle)},
        {"cuMemAddressReserve", offsetof(ivm_cu_api_t, address_reserve)},
        {"cuMemAddressFree", offsetof(ivm_cu_api_t, address_free)},
        {"cuMemMap", offsetof(ivm_cu_api_t, map)},
        {"cuMemUnmap", offsetof(ivm_cu_api_t, unmap)},
        {"cuMemSetAccess", offsetof(ivm_cu_api_t, set_access)},
        {"cuMemRelease", offsetof(ivm_cu_api_t, release)},
        {"cuGetErrorString", offsetof(ivm_cu_api_t, error_string)},
    };
    ivm_cu_device_t dev;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    size_t i;

    if (lib == NULL) {
        snprintf(ivm_cu_why, sizeof(ivm_cu_why), "the CUDA driver is not loadable: %s",
                 dlerror());
        return;
    }
    for (i = 0; i < sizeof(syms) / sizeof(syms[0]); ++i) {
        void *fn = dlsym(lib, syms[i].sym);
        if (fn == NULL) {
            snprintf(ivm_cu_why, sizeof(ivm_cu_why), "the CUDA driver lacks %s", syms[i].sym);
            return;
        }
        memcpy((char *)&ivm_cu + syms[i].off, &fn, sizeof(fn));
    }
    if (ivm_cu_check(ivm_cu.init(0), "cuInit") != IVM_SUCCESS ||
        ivm_cu_check(ivm_cu.device_get(&dev, 0), "cuDeviceGet(0)") != IVM_SUCCESS ||
        ivm_cu_check(ivm_cu.primary_ctx_retain(&ivm_cu_ctx, dev), "cuDevicePrimaryCtxRetain") !=
            IVM_SUCCESS) {
        snprintf(ivm_cu_why, sizeof(ivm_cu_why), "%s", ivmGetLastErrorMessage());
        return;
    }
    ivm_cu_state = IVM_SUCCESS;
}

static ivmError_t ivm_gpu_cuda_import(int fd, size_t size, void **devptr_p)
{
    ivm_cu_access_desc_t access;
    ivm_cu_handle_t handle;
    ivm_cu_ptr_t ptr = 0;
    ivmError_t status;

    pthread_once(&ivm_cu_once, ivm_cu_load);
    if (ivm_cu_state != IVM_SUCCESS) {
        ivm_set_error("a CUDA device copy cannot be imported: %s", ivm_cu_why);
        return IVM_ERROR_UNSUPPORTED;
    }
    status = ivm_cu_check(ivm_cu.ctx_set_current(ivm_cu_ctx), "cuCtxSetCurrent");
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_cu_check(ivm_cu.import_handle(&handle, (void *)(intptr_t)fd,
                                               IVM_CU_HANDLE_POSIX_FD),
                          "cuMemImportFromShareableHandle");
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_cu_check(ivm_cu.address_reserve(&ptr, size, 0, 0, 0), "cuMemAddressReserve");
    if (status != IVM_SUCCESS) {
        goto out_release;
    }
    status = ivm_cu_check(ivm_cu.map(ptr, size, 0, handle, 0), "cuMemMap");
    if (status != IVM_SUCCESS) {
        goto out_free;
    }
    memset(&access, 0, sizeof(access));
    access.location.type = IVM_CU_LOCATION_DEVICE;
    access.location.id   = 0;
    access.flags         = IVM_CU_ACCESS_READWRITE;
    status = ivm_cu_check(ivm_cu.set_access(ptr, size, &access, 1), "cuMemSetAccess");
    if (status != IVM_SUCCESS) {
        goto out_unmap;
    }
    ivm_cu.release(handle); /* the mapping keeps the memory */
    *devptr_p = (void *)(uintptr_t)ptr;
    return IVM_SUCCESS;

out_unmap:
    ivm_cu.unmap(ptr, size);
out_free:
    ivm_cu.address_free(ptr, size);
out_release:
    ivm_cu.release(handle);
    return status;
}

/* Make the PE's primary context current for a driver call; *prev_p is the
 * caller's (the application may have set another one), restored by
 * ivm_cu_ctx_leave. */
static ivmError_t ivm_cu_ctx_enter(ivm_cu_context_t *prev_p)
{
    *prev_p = NULL;
    if (ivm_cu_check(ivm_cu.ctx_get_current(prev_p), "cuCtxGetCurrent") != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    if (*prev_p == ivm_cu_ctx) {
        return IVM_SUCCESS;
    }
    return ivm_cu_check(ivm_cu.ctx_set_current(ivm_cu_ctx), "cuCtxSetCurrent");
}

static void ivm_cu_ctx_leave(ivm_cu_context_t prev)
{
    if (prev != ivm_cu_ctx && prev != NULL) {
        ivm_cu_check(ivm_cu.ctx_set_current(prev), "cuCtxSetCurrent");
    }
}

static void ivm_gpu_cuda_release(void *devptr, size_t size)
{
    ivm_cu_ptr_t ptr = (ivm_cu_ptr_t)(uintptr_t)devptr;
    ivm_cu_context_t prev;

    if (ivm_cu_state != IVM_SUCCESS) {
        return;
    }
    /* ivmUnmap/ivmFree may come from a thread that never touched the GPU, or
     * after the application set a context of its own: the mapping belongs
     * to the PE's primary context. Device work still using the range ends
     * first (the memory must not go while a kernel reads it). */
    if (ivm_cu_ctx_enter(&prev) != IVM_SUCCESS) {
        return;
    }
    ivm_cu_check(ivm_cu.ctx_synchronize(), "cuCtxSynchronize");
    ivm_cu_check(ivm_cu.unmap(ptr, size), "cuMemUnmap");
    ivm_cu_check(ivm_cu.address_free(ptr, size), "cuMemAddressFree");
    ivm_cu_ctx_leave(prev);
}

/* What the sync calls promise a GPU PE: the device work it queued on its
 * primary context (the CUDA runtime's: kernels, cudaMemcpy*Async, the
 * staging of a pageable cudaMemcpy) has finished before ivm-gpud reads or
 * overwrites its device copy. cuCtxSynchronize waits for every stream of
 * the context, the legacy default stream included. */
static ivmError_t ivm_gpu_cuda_device_sync(void)
{
    ivm_cu_context_t prev;
    ivmError_t status;

    if (ivm_cu_state != IVM_SUCCESS) {
        ivm_set_error("the CUDA device cannot be synchronised: %s", ivm_cu_why);
        return IVM_ERROR_UNSUPPORTED;
    }
    status = ivm_cu_ctx_enter(&prev);
    if (status == IVM_SUCCESS) {
        /* An error here is one of the PE's own kernels or copies (sticky). */
        status = ivm_cu_check(ivm_cu.ctx_synchronize(),
                              "cuCtxSynchronize (the PE's device work before the sync)");
        ivm_cu_ctx_leave(prev);
    }
    return status;
}

ivmError_t ivm_gpu_cuda_warm(void)
{
    pthread_once(&ivm_cu_once, ivm_cu_load);
    if (ivm_cu_state != IVM_SUCCESS) {
        ivm_warn("parked GPU process: no warm CUDA context (%s); it parks anyway, its "
                 "context is made when it first uses the GPU", ivm_cu_why);
        return ivm_cu_state;
    }
    if (ivm_cu_check(ivm_cu.ctx_set_current(ivm_cu_ctx), "cuCtxSetCurrent") != IVM_SUCCESS) {
        ivm_warn("%s", "parked GPU process: its primary context is not current; it parks "
                 "anyway");
        return IVM_ERROR_INTERNAL;
    }
    ivm_debug("%s", "parked GPU process: CUDA primary context of device 0 retained and "
              "current");
    return IVM_SUCCESS;
}

static const ivm_gpu_ops_t ivm_gpu_cuda_ops = {
    .name        = "cuda",
    .import      = ivm_gpu_cuda_import,
    .release     = ivm_gpu_cuda_release,
    .device_sync = ivm_gpu_cuda_device_sync,
};

const ivm_gpu_ops_t *ivm_gpu_ops_for(uint32_t flags)
{
    if (flags & IVM_MAP_GPU_EMU) {
        return &ivm_gpu_emu_ops;
    }
    if (flags & IVM_MAP_GPU_CUDA) {
        return &ivm_gpu_cuda_ops;
    }
    return NULL;
}
