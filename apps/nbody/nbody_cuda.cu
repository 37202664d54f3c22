/*
 * nbody: the CUDA kernel (see nbody.h); the same arithmetic as the CPU one.
 */
#include <stdio.h>

extern "C" {
#include "nbody.h"
}

__global__ static void nbody_step_kernel(const nbody_vec_t *pin, nbody_vec_t *pout,
                                         nbody_vec_t *vel, int n, int lo, int hi)
{
    int i = lo + blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= hi)
        return;
    nbody_vec_t p = pin[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float dx = pin[j].x - p.x, dy = pin[j].y - p.y, dz = pin[j].z - p.z;
        float r2 = dx * dx + dy * dy + dz * dz + NBODY_EPS2;
        float inv = 1.0f / sqrtf(r2);
        float s = pin[j].w * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    nbody_vec_t v = vel[i - lo];
    v.x += ax * NBODY_DT;
    v.y += ay * NBODY_DT;
    v.z += az * NBODY_DT;
    vel[i - lo] = v;
    pout[i - lo].x = p.x + v.x * NBODY_DT;
    pout[i - lo].y = p.y + v.y * NBODY_DT;
    pout[i - lo].z = p.z + v.z * NBODY_DT;
    pout[i - lo].w = p.w;
}

extern "C" int nbody_step_cuda(const nbody_vec_t *pin, nbody_vec_t *pout, nbody_vec_t *vel,
                               int n, int lo, int hi)
{
    int threads = 256, blocks = (hi - lo + threads - 1) / threads;
    cudaError_t err;

    if (hi <= lo)
        return 0;
    nbody_step_kernel<<<blocks, threads>>>(pin, pout, vel, n, lo, hi);
    err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "nbody: CUDA kernel failed: %s\n", cudaGetErrorString(err));
        return -1;
    }
    return 0;
}
