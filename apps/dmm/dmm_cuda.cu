/*
 * dmm: the CUDA kernel (see dmm.h); the same 8-lane float sum as the CPU one.
 */
#include <stdio.h>

extern "C" {
#include "dmm.h"
}

__global__ static void dmm_tile_kernel(const float *a, const float *bt, float *c, int n,
                                       int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || col >= cols)
        return;
    c[(size_t)r * cols + col] = dmm_dot(a + (size_t)r * n, bt + (size_t)col * n, n);
}

extern "C" int dmm_tile_cuda(const float *a, const float *bt, float *c, int n, int rows,
                             int cols)
{
    dim3 threads(16, 16), blocks((cols + 15) / 16, (rows + 15) / 16);

    if (rows <= 0 || cols <= 0)
        return 0;
    dmm_tile_kernel<<<blocks, threads>>>(a, bt, c, n, rows, cols);
    return app_cuda_launched("dmm");
}
