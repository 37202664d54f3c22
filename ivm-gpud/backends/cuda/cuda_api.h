/*
 * The CUDA driver entry points the cuda backend uses, as one table filled
 * through cuGetProcAddress (cuda.h supplies the types; no binary links
 * libcuda). Shared by the backend (cuda.c) and by the stand-in's contract
 * program (tests/cudastub/broken.c), which replays the backend's sequence of
 * calls through the same table.
 */
#ifndef IVM_GPUD_CUDA_API_H
#define IVM_GPUD_CUDA_API_H

#include <dlfcn.h>
#include <stddef.h>

#include <cuda.h>

/* The driver entry points used, in the ABI of the CUDA version asked of
 * cuGetProcAddress: the driver's own version, at most the cuda.h we were
 * built with (whose prototypes these are). */
typedef struct gpud_cuda_api {
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetUuid)(CUuuid *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
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
    X(DeviceGetName, "cuDeviceGetName") X(DeviceGetUuid, "cuDeviceGetUuid")       \
    X(DeviceGetAttribute, "cuDeviceGetAttribute")                                 \
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

typedef CUresult (*gpud_cuda_gpa_v2_t)(const char *, void **, int, cuuint64_t,
                                       CUdriverProcAddressQueryResult *);
typedef CUresult (*gpud_cuda_gpa_v1_t)(const char *, void **, int, cuuint64_t);

/* Fill api from the driver lib (dlopen'd) in the ABI of CUDA version abi:
 * CUDA_SUCCESS; else the driver's result for the entry point named in
 * *missing (NULL: the driver has no cuGetProcAddress at all). */
static inline CUresult gpud_cuda_api_resolve(void *lib, int abi, gpud_cuda_api_t *api,
                                             const char **missing)
{
    static const struct {
        const char *name;
        size_t      offset;
    } syms[] = {GPUD_CUDA_SYMS(GPUD_CUDA_SYM_ENTRY)};
    gpud_cuda_gpa_v2_t gpa2 = (gpud_cuda_gpa_v2_t)dlsym(lib, "cuGetProcAddress_v2");
    gpud_cuda_gpa_v1_t gpa1 = (gpud_cuda_gpa_v1_t)dlsym(lib, "cuGetProcAddress");
    CUdriverProcAddressQueryResult found;
    CUresult rc;
    size_t i;

    *missing = NULL;
    if (gpa2 == NULL && gpa1 == NULL) {
        return CUDA_ERROR_NOT_FOUND;
    }
    for (i = 0; i < sizeof(syms) / sizeof(syms[0]); ++i) {
        void **slot = (void **)((char *)api + syms[i].offset);

        rc = gpa2 != NULL ? gpa2(syms[i].name, slot, abi, CU_GET_PROC_ADDRESS_DEFAULT, &found)
                          : gpa1(syms[i].name, slot, abi, CU_GET_PROC_ADDRESS_DEFAULT);
        if (rc != CUDA_SUCCESS || *slot == NULL) {
            *missing = syms[i].name;
            return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_NOT_FOUND;
        }
    }
    return CUDA_SUCCESS;
}

#endif /* IVM_GPUD_CUDA_API_H */
