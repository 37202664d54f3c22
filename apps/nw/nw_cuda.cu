/*
 * nw: the CUDA kernel (see nw.h): one block per pair, the matrix swept by
 * anti-diagonals kept in shared memory (three of la + 1 cells).
 */
#include <stdio.h>

extern "C" {
#include "nw.h"
}

typedef struct {
    unsigned long long off;
    int la, lb;
} nw_pair_desc_t;

__global__ static void nw_pair_kernel(const char *seq, const nw_pair_desc_t *desc,
                                      int32_t *score)
{
    __shared__ int32_t diag[3][NW_MAX_LEN + 1];
    nw_pair_desc_t p = desc[blockIdx.x];
    const char *a = seq + p.off, *b = a + p.la;

    for (int d = 0; d <= p.la + p.lb; d++) {
        int32_t *cur = diag[d % 3], *d1 = diag[(d + 2) % 3], *d2 = diag[(d + 1) % 3];
        int ilo = d - p.lb > 0 ? d - p.lb : 0, ihi = d < p.la ? d : p.la;
        for (int i = ilo + threadIdx.x; i <= ihi; i += blockDim.x) {
            int j = d - i;
            int32_t h;
            if (i == 0 || j == 0) {
                h = NW_GAP * (i + j);
            } else {
                h = d2[i - 1] + (a[i - 1] == b[j - 1] ? NW_MATCH : NW_MISMATCH);
                h = max(h, d1[i - 1] + NW_GAP);
                h = max(h, d1[i] + NW_GAP);
            }
            cur[i] = h;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        score[blockIdx.x] = diag[(p.la + p.lb) % 3][p.la];
}

extern "C" int nw_pairs_cuda(const char *seq, const size_t *off, const int *la,
                             const int *lb, int32_t *score, int lo, int hi)
{
    int n = hi - lo;
    nw_pair_desc_t *host, *dev = NULL;
    cudaError_t err;

    if (n <= 0)
        return 0;
    host = (nw_pair_desc_t *)malloc((size_t)n * sizeof(*host));
    if (host == NULL) {
        fprintf(stderr, "nw: no memory\n");
        return -1;
    }
    for (int k = 0; k < n; k++) {
        host[k].off = off[lo + k];
        host[k].la = la[lo + k];
        host[k].lb = lb[lo + k];
    }
    err = cudaMalloc((void **)&dev, (size_t)n * sizeof(*dev));
    if (err == cudaSuccess)
        err = cudaMemcpy(dev, host, (size_t)n * sizeof(*dev), cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
        nw_pair_kernel<<<n, 256>>>(seq, dev, score);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    cudaFree(dev);
    free(host);
    if (err != cudaSuccess) {
        fprintf(stderr, "nw: CUDA kernel failed: %s\n", cudaGetErrorString(err));
        return -1;
    }
    return 0;
}
