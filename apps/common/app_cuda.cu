/*
 * app_cuda: device buffers for the MPI baselines' CUDA path (app.h). The one
 * place where the apps' host code meets the CUDA runtime; every failure is
 * printed with cudaGetErrorString and returned as -1.
 */
#include <stdio.h>

extern "C" {
#include "app.h"
}

static int app_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    fprintf(stderr, "app: %s failed: %s\n", what, cudaGetErrorString(err));
    return -1;
}

extern "C" int app_cuda_use_rank(int rank)
{
    int count = 0;

    if (app_cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount") != 0)
        return -1;
    if (count == 0) {
        fprintf(stderr, "app: no CUDA device visible\n");
        return -1;
    }
    return app_cuda_check(cudaSetDevice(rank % count), "cudaSetDevice");
}

extern "C" int app_cuda_is_device_ptr(const void *ptr)
{
    cudaPointerAttributes attr;

    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
        cudaGetLastError();     /* no driver, or not a CUDA pointer: clear it */
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice;
}

extern "C" int app_cuda_alloc(void **dev_p, size_t bytes)
{
    return app_cuda_check(cudaMalloc(dev_p, bytes > 0 ? bytes : 1), "cudaMalloc");
}

extern "C" int app_cuda_upload(void *dev, const void *host, size_t bytes)
{
    return app_cuda_check(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice),
                          "cudaMemcpy to the device");
}

extern "C" int app_cuda_download(void *host, const void *dev, size_t bytes)
{
    return app_cuda_check(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost),
                          "cudaMemcpy from the device");
}

extern "C" void app_cuda_free(void *dev)
{
    if (dev != NULL)
        cudaFree(dev);
}

extern "C" int app_cuda_launched(const char *app)
{
    cudaError_t err = cudaGetLastError();

    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: CUDA kernel failed: %s\n", app, cudaGetErrorString(err));
        return -1;
    }
    return 0;
}
