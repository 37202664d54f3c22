/*
 * HIMENO: the CUDA kernel backend (himeno_cuda_ops, see himeno.h). The slab
 * and its work copy live in device memory; one thread per point computes the
 * same float expression as the CPU kernel (the compiler may contract it to
 * FMAs, hence the tolerance), gosa is reduced per block in double and added
 * with atomicAdd. Copies in and out use cudaMemcpyDefault: a GPU PE hands
 * its GPU mirror's (device) pointers, a CPU caller host pointers.
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

#include "himeno.h"

#define HIMENO_CUDA_BLOCK 256

struct himeno_kernel {
    himeno_grid_t g;
    int           max_units;
    int           lo, hi;
    float        *slab; /* device: planes lo .. hi+1 */
    float        *wrk;  /* device */
    double       *gosa; /* device: one double */
};

/* Report a failed CUDA call; evaluates to -1 so callers can return it. */
static int himeno_cuda_fail(cudaError_t rc, const char *what)
{
    fprintf(stderr, "himeno: CUDA %s failed: %s\n", what, cudaGetErrorString(rc));
    return -1;
}

#define HIMENO_CUDA_TRY(call)                                                      \
    do {                                                                           \
        cudaError_t himeno_rc_ = (call);                                           \
        if (himeno_rc_ != cudaSuccess)                                             \
            return himeno_cuda_fail(himeno_rc_, #call);                            \
    } while (0)

/* Slab planes l0 .. l0+nl-1 into wrk, their gosa added to *gosa. */
__global__ void himeno_cuda_jacobi(const float *p, float *wrk, double *gosa, int nx, int ny,
                                   int l0, int nl)
{
    __shared__ double part[HIMENO_CUDA_BLOCK];
    const size_t P = (size_t)nx * (size_t)ny;
    const long long inner = (long long)(nx - 2) * (ny - 2) * nl;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double mine = 0.0;

    if (t < inner) {
        int x = (int)(t % (nx - 2)) + 1;
        int y = (int)((t / (nx - 2)) % (ny - 2)) + 1;
        int l = (int)(t / ((long long)(nx - 2) * (ny - 2))) + l0;
        size_t i = (size_t)l * P + (size_t)y * (size_t)nx + (size_t)x;
        float s0 = 1.0f * p[i + P] + 1.0f * p[i + nx] + 1.0f * p[i + 1] +
                   0.0f * (p[i + P + nx] - p[i + P - nx] - p[i - P + nx] + p[i - P - nx]) +
                   0.0f * (p[i + nx + 1] - p[i - nx + 1] - p[i + nx - 1] + p[i - nx - 1]) +
                   0.0f * (p[i + P + 1] - p[i - P + 1] - p[i + P - 1] + p[i - P - 1]) +
                   1.0f * p[i - P] + 1.0f * p[i - nx] + 1.0f * p[i - 1] + 0.0f;
        float ss = (s0 * (1.0f / 6.0f) - p[i]) * 1.0f;
        mine = (double)ss * (double)ss;
        wrk[i] = p[i] + HIMENO_OMEGA * ss;
    }
    part[threadIdx.x] = mine;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(gosa, part[0]);
}

__global__ void himeno_cuda_copy(float *p, const float *wrk, int nx, int ny, int nl)
{
    const size_t P = (size_t)nx * (size_t)ny;
    const long long inner = (long long)(nx - 2) * (ny - 2) * nl;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (t < inner) {
        int x = (int)(t % (nx - 2)) + 1;
        int y = (int)((t / (nx - 2)) % (ny - 2)) + 1;
        int l = (int)(t / ((long long)(nx - 2) * (ny - 2))) + 1;
        size_t i = (size_t)l * P + (size_t)y * (size_t)nx + (size_t)x;
        p[i] = wrk[i];
    }
}

static int cuda_create(const himeno_grid_t *g, int max_units, int threads,
                       himeno_kernel_t **k_p)
{
    himeno_kernel_t *k = (himeno_kernel_t *)calloc(1, sizeof(*k));
    size_t bytes = (size_t)g->nx * (size_t)g->ny * (size_t)(max_units + 2) * sizeof(float);
    cudaError_t rc;

    (void)threads;
    if (k == NULL) {
        fprintf(stderr, "himeno: no memory for a CUDA kernel\n");
        return -1;
    }
    k->g = *g;
    k->max_units = max_units;
    if ((rc = cudaMalloc((void **)&k->slab, bytes)) != cudaSuccess ||
        (rc = cudaMalloc((void **)&k->wrk, bytes)) != cudaSuccess ||
        (rc = cudaMalloc((void **)&k->gosa, sizeof(double))) != cudaSuccess) {
        cudaFree(k->slab);
        cudaFree(k->wrk);
        free(k);
        return himeno_cuda_fail(rc, "cudaMalloc");
    }
    *k_p = k;
    return 0;
}

static void cuda_destroy(himeno_kernel_t *k)
{
    if (k == NULL)
        return;
    cudaFree(k->slab);
    cudaFree(k->wrk);
    cudaFree(k->gosa);
    free(k);
}

static int cuda_load(himeno_kernel_t *k, int lo, int hi, const float *planes)
{
    size_t P = himeno_plane(&k->g);

    if (himeno_slab_check(&k->g, k->max_units, lo, hi) != 0)
        return -1;
    k->lo = lo;
    k->hi = hi;
    HIMENO_CUDA_TRY(cudaMemcpy(k->slab, planes, (size_t)(hi - lo + 2) * P * sizeof(float),
                               cudaMemcpyDefault));
    return 0;
}

static int cuda_halo_set(himeno_kernel_t *k, const float *below, const float *above)
{
    size_t P = himeno_plane(&k->g);

    if (below != NULL)
        HIMENO_CUDA_TRY(cudaMemcpy(k->slab, below, P * sizeof(float), cudaMemcpyDefault));
    if (above != NULL)
        HIMENO_CUDA_TRY(cudaMemcpy(k->slab + (size_t)(k->hi - k->lo + 1) * P, above,
                                   P * sizeof(float), cudaMemcpyDefault));
    return 0;
}

static unsigned himeno_cuda_blocks(const himeno_kernel_t *k, int nl)
{
    long long inner = (long long)(k->g.nx - 2) * (k->g.ny - 2) * nl;

    return (unsigned)((inner + HIMENO_CUDA_BLOCK - 1) / HIMENO_CUDA_BLOCK);
}

/* Planes l0 .. l0+nl-1 of the slab into wrk, gosa added to k->gosa. An
   empty part (or a grid without interior points) launches nothing: a
   zero-block launch is cudaErrorInvalidConfiguration. */
static int cuda_jacobi(himeno_kernel_t *k, int l0, int nl)
{
    if (nl <= 0 || himeno_cuda_blocks(k, nl) == 0)
        return 0;
    himeno_cuda_jacobi<<<himeno_cuda_blocks(k, nl), HIMENO_CUDA_BLOCK>>>(
        k->slab, k->wrk, k->gosa, k->g.nx, k->g.ny, l0, nl);
    HIMENO_CUDA_TRY(cudaGetLastError());
    return 0;
}

/* Every unit's new values into the slab; the gosa of the iteration out. */
static int cuda_commit(himeno_kernel_t *k, double *gosa_p)
{
    int nl = k->hi - k->lo;

    if (nl > 0 && himeno_cuda_blocks(k, nl) > 0) {
        himeno_cuda_copy<<<himeno_cuda_blocks(k, nl), HIMENO_CUDA_BLOCK>>>(k->slab, k->wrk,
                                                                           k->g.nx, k->g.ny, nl);
        HIMENO_CUDA_TRY(cudaGetLastError());
    }
    HIMENO_CUDA_TRY(cudaMemcpy(gosa_p, k->gosa, sizeof(double), cudaMemcpyDeviceToHost));
    return 0;
}

static int cuda_step(himeno_kernel_t *k, double *gosa_p)
{
    HIMENO_CUDA_TRY(cudaMemset(k->gosa, 0, sizeof(double)));
    if (cuda_jacobi(k, 1, k->hi - k->lo) != 0)
        return -1;
    return cuda_commit(k, gosa_p);
}

/* Plane l of the slab with its new interior values from wrk, into dst
   (host or device). cudaMemcpy2D from device memory to host memory returns
   once the copy is done. */
static int cuda_plane_new(himeno_kernel_t *k, int l, float *dst)
{
    const int nx = k->g.nx, ny = k->g.ny;
    const size_t P = himeno_plane(&k->g), row = (size_t)nx * sizeof(float);

    HIMENO_CUDA_TRY(cudaMemcpy(dst, k->slab + (size_t)l * P, P * sizeof(float),
                               cudaMemcpyDefault));
    HIMENO_CUDA_TRY(cudaMemcpy2D(dst + nx + 1, row, k->wrk + (size_t)l * P + nx + 1, row,
                                 (size_t)(nx - 2) * sizeof(float), (size_t)(ny - 2),
                                 cudaMemcpyDefault));
    HIMENO_CUDA_TRY(cudaDeviceSynchronize());
    return 0;
}

/* The first and the last unit (one unit: once), their new planes out; the
   gosa so far (*gosa_p: 0, step_rest reports the iteration's). */
static int cuda_step_edges(himeno_kernel_t *k, float *first, float *last, double *gosa_p)
{
    int nl = k->hi - k->lo;

    HIMENO_CUDA_TRY(cudaMemset(k->gosa, 0, sizeof(double)));
    if (cuda_jacobi(k, 1, 1) != 0 || (nl > 1 && cuda_jacobi(k, nl, 1) != 0))
        return -1;
    if ((first != NULL && cuda_plane_new(k, 1, first) != 0) ||
        (last != NULL && cuda_plane_new(k, nl, last) != 0))
        return -1;
    *gosa_p = 0.0;
    return 0;
}

static int cuda_step_rest(himeno_kernel_t *k, double *gosa_p)
{
    int nl = k->hi - k->lo;

    if (cuda_jacobi(k, 2, nl - 2) != 0)
        return -1;
    return cuda_commit(k, gosa_p);
}

static int cuda_edges_get(himeno_kernel_t *k, float *first, float *last)
{
    size_t P = himeno_plane(&k->g);

    if (first != NULL)
        HIMENO_CUDA_TRY(cudaMemcpy(first, k->slab + P, P * sizeof(float), cudaMemcpyDefault));
    if (last != NULL)
        HIMENO_CUDA_TRY(cudaMemcpy(last, k->slab + (size_t)(k->hi - k->lo) * P,
                                   P * sizeof(float), cudaMemcpyDefault));
    return 0;
}

/* A device-to-device cudaMemcpy may return before the bytes land; the
   ivmSyncPut that follows (himeno_ivm.c) waits for the PE's device work
   first (include/ivm.h), so no synchronisation here. */
static int cuda_store(himeno_kernel_t *k, float *planes)
{
    size_t P = himeno_plane(&k->g);

    HIMENO_CUDA_TRY(cudaMemcpy(planes, k->slab + P, (size_t)(k->hi - k->lo) * P * sizeof(float),
                               cudaMemcpyDefault));
    return 0;
}

static void cuda_threads_set(himeno_kernel_t *k, int threads)
{
    (void)k;
    (void)threads;
}

/* Positional: C++ has no designated initializers before C++20. */
extern "C" const himeno_kernel_ops_t himeno_cuda_ops = {
    "cuda",          cuda_create,     cuda_destroy,   cuda_load,  cuda_halo_set,
    cuda_step,       cuda_step_edges, cuda_step_rest, cuda_edges_get, cuda_store,
    cuda_threads_set,
};
