/*
 * dmm: the kernels and layout of DMM (C = A x B, square n x n floats),
 * shared by the IVM version, the MPI baseline and the serial reference.
 *
 * C is cut into M x M tiles; tile (i, j) covers rows [lo(i), lo(i+1)) and
 * columns [lo(j), lo(j+1)) with lo(k) = n * k / M. A is stored row-major, so
 * the rows of tile row i are one contiguous strip; B is stored transposed
 * (Bt, row c = column c of B), so the columns of tile column j are one
 * contiguous strip too. C is stored tile by tile (tile-major): tile (i, j)
 * is contiguous, row-major inside, at element lo(i) * n + (lo(i+1) - lo(i)) * lo(j).
 * Tiles are counted in row order (tile k = i * M + j), which is also their
 * order in C, so tiles [k0, k1) are one contiguous range of C; they are the
 * work units the runs (DS-LB portions, MPI ranks' shares) are cut from.
 * C[r][c] = sum over k of A[r][k] * Bt[c][k], summed in float in 8 lanes
 * (k % 8) folded in a fixed order: the same bits whoever computes the tile.
 */
#ifndef IVM_APP_DMM_H
#define IVM_APP_DMM_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"

static inline int dmm_lo(int n, int M, int k)
{
    return (int)((long long)n * k / M);
}

/* Element offset of tile (i, j) in the tile-major C. */
static inline size_t dmm_tile_off(int n, int M, int i, int j)
{
    int r0 = dmm_lo(n, M, i), r1 = dmm_lo(n, M, i + 1);
    return (size_t)r0 * (size_t)n + (size_t)(r1 - r0) * (size_t)dmm_lo(n, M, j);
}

/* Element offset of tile k (row order) in C; tile M * M is the end, n * n. */
static inline size_t dmm_tile_at(int n, int M, long long k)
{
    return dmm_tile_off(n, M, (int)(k / M), (int)(k % M));
}

#define DMM_GRID_MIN 16        /* default tile grid: at least 16 x 16 tiles */

/* The side M of the tile grid for --tiles (args->tiles = M * M; 0: the
   default, the least M >= DMM_GRID_MIN whose M * M tiles hold --portions,
   at most n), or -1 when --tiles is not a square of at most n * n tiles. */
static inline int dmm_grid(const app_args_t *a)
{
    int M;

    if (a->tiles == 0) {
        for (M = DMM_GRID_MIN; (long long)M * M < a->portions; M++)
            ;
        return (long long)M > a->size ? (int)a->size : M;
    }
    for (M = 1; (long long)M * M < a->tiles; M++)
        ;
    return (long long)M * M == a->tiles && M <= a->size ? M : -1;
}

/* Deterministic input: A and Bt in [0, 1). */
void dmm_init(uint64_t seed, int n, float *a, float *bt);

/* x . y over n floats as both kernels sum it: 8 float lanes (element k in
   lane k % 8), added pairwise at the end. */
static inline APP_HOST_DEVICE float dmm_dot(const float *x, const float *y, int n)
{
    float lane[8] = { 0 };
    int k = 0;

    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += x[k + l] * y[k + l];
    for (int l = 0; k < n; k++, l++)
        lane[l] += x[k] * y[k];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* One tile with OpenMP: a = the tile's `rows` rows of A, bt = its `cols`
   rows of Bt (n elements each), c = the tile (rows x cols, row-major). */
void dmm_tile_cpu(const float *a, const float *bt, float *c, int n, int rows, int cols);

/* The same on a GPU (device pointers). 0, or -1 after printing the CUDA
   error. Defined only when APP_HAVE_CUDA. */
int dmm_tile_cuda(const float *a, const float *bt, float *c, int n, int rows, int cols);

/* Tile-major C -> row-major out. */
void dmm_untile(const float *c, float *out, int n, int M);

/* Serial reference in double precision: row-major C of the seed's input.
   0, or -1 (no memory). */
int dmm_reference(uint64_t seed, int n, float *out);

#define DMM_RTOL 1e-4
#define DMM_ATOL 1e-4

#endif /* IVM_APP_DMM_H */
