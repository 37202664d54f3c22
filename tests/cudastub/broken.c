/*
 * The cuda backend's sequence of driver calls (ivm-gpud/backends/cuda/cuda.c:
 * a VMM allocation exported as a POSIX fd, mapped with access for the device,
 * page-locked host memory, async copies on a stream then a synchronisation,
 * everything released), built once correct and once per deliberate defect
 * (BROKEN_*), each of which the CUDA stand-in must catch with its message
 * (check_broken.sh runs them):
 *   BROKEN_NO_ACCESS    cuMemMap without cuMemSetAccess before a copy
 *   BROKEN_NO_SYNC      a host read of a copy's destination before cuStreamSynchronize
 *   BROKEN_HANDLE_TYPE  export as a POSIX fd an allocation made without that handle type
 *   BROKEN_LEAK         the allocation never released at exit
 * The driver is reached as the backend reaches it, through its table of
 * entry points (ivm-gpud/backends/cuda/cuda_api.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"

#define SIZE (2u << 20)

static gpud_cuda_api_t cu;

#define CHECK(call)                                                                  \
    do {                                                                             \
        CUresult rc_ = cu.call;                                                      \
        if (rc_ != CUDA_SUCCESS) {                                                   \
            fprintf(stderr, "broken: cu%s failed: CUresult %d\n", #call, (int)rc_);  \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The driver's entry points in the ABI the backend asks for: the driver's
 * version, at most our cuda.h's. */
static void load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult (*get_version)(int *) =
        lib != NULL ? (CUresult (*)(int *))dlsym(lib, "cuDriverGetVersion") : NULL;
    const char *missing;
    int version = 0;

    if (get_version == NULL || get_version(&version) != CUDA_SUCCESS || version <= 0) {
        fprintf(stderr, "broken: no libcuda.so.1 telling its version: %s\n",
                lib == NULL ? dlerror() : "cuDriverGetVersion failed");
        exit(2);
    }
    if (gpud_cuda_api_resolve(lib, version < CUDA_VERSION ? version : CUDA_VERSION, &cu,
                              &missing) != CUDA_SUCCESS) {
        fprintf(stderr, "broken: the driver lacks %s\n",
                missing != NULL ? missing : "cuGetProcAddress");
        exit(2);
    }
}

int main(void)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle h;
    CUdeviceptr ptr;
    CUcontext ctx;
    CUstream stream;
    CUdevice dev;
    unsigned char *host = aligned_alloc(4096, SIZE);
    int fd = -1;

    load();
    CHECK(Init(0));
    CHECK(DeviceGet(&dev, 0));
    CHECK(DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(CtxSetCurrent(ctx));
    CHECK(StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    memset(&prop, 0, sizeof(prop));
    prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id   = dev;
#ifndef BROKEN_HANDLE_TYPE
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
#endif
    CHECK(MemCreate(&h, SIZE, &prop, 0));
    CHECK(MemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);
    CHECK(MemAddressReserve(&ptr, SIZE, 0, 0, 0));
    CHECK(MemMap(ptr, SIZE, 0, h, 0));
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
#ifndef BROKEN_NO_ACCESS
    CHECK(MemSetAccess(ptr, SIZE, &access, 1));
#endif
    CHECK(MemHostRegister(host, SIZE, CU_MEMHOSTREGISTER_PORTABLE));
    memset(host, 0x5a, SIZE);
    CHECK(MemcpyHtoDAsync(ptr, host, SIZE, stream));
    CHECK(StreamSynchronize(stream));
    memset(host, 0, SIZE);
    CHECK(MemcpyDtoHAsync(host, ptr, SIZE, stream));
#ifndef BROKEN_NO_SYNC
    CHECK(StreamSynchronize(stream));
#endif
    if (host[0] != 0x5a || host[SIZE - 1] != 0x5a) {
        fprintf(stderr, "broken: the host read 0x%02x, not the 0x5a copied back\n", host[0]);
    }
    CHECK(StreamSynchronize(stream));
    CHECK(MemHostUnregister(host));
    CHECK(MemUnmap(ptr, SIZE));
    CHECK(MemAddressFree(ptr, SIZE));
#ifndef BROKEN_LEAK
    CHECK(MemRelease(h));
#endif
    CHECK(StreamDestroy(stream));
    CHECK(DevicePrimaryCtxRelease(dev));
    free(host);
    printf("broken: done\n");
    return 0;
}
