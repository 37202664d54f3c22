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
    nbody_step_one(pin, pout, vel, n, lo, i);
}

extern "C" int nbody_step_cuda(const nbody_vec_t *pin, nbody_vec_t *pout, nbody_vec_t *vel,
                               int n, int lo, int hi)
{
    int threads = 256, blocks = (hi - lo + threads - 1) / threads;

    if (hi <= lo)
        return 0;
    nbody_step_kernel<<<blocks, threads>>>(pin, pout, vel, n, lo, hi);
    return app_cuda_launched("nbody");
}
