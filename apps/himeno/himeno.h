/*
 * HIMENO: Jacobi iterations of the Himeno benchmark's pressure solver (a
 * 19-point stencil on a 3-D grid of floats), split into Z-slabs.
 *
 * Grid: nx * ny * nz points, x fastest, z slowest, so that a slab of Z planes
 * is contiguous. The coefficient fields of the benchmark (a, b, c, bnd, wrk1)
 * hold the same value at every point in the benchmark's setup (a0..a2 = 1,
 * a3 = 1/6, b = 0, c = 1, bnd = 1, wrk1 = 0); they are kept here as those
 * constants, so a slab is only its pressure planes. p starts as
 * z^2 / (nz-1)^2 on plane z; omega = 0.8.
 *
 * The work units are the interior planes: unit u is plane u+1, u in
 * [0, nz-2). Planes 0 and nz-1 are the fixed boundary.
 *
 * A slab of units [lo, hi) is held with one halo plane on each side: planes
 * lo .. hi+1, (hi - lo + 2) planes. One Jacobi iteration reads every plane of
 * the slab and writes its units; it returns gosa, the sum of the squared
 * residuals of its units (double).
 *
 * Verification: gosa of the last iteration and the checksum (app.h's weighted
 * sum of every pressure value of the grid, in double) against the serial reference, both
 * within HIMENO_TOL relative. The CPU kernel does the same float operations
 * per point whatever the split, so its checksum is in fact exact; gosa sums
 * per slab in another order, and a CUDA kernel may contract to FMAs.
 */
#ifndef IVM_APPS_HIMENO_H
#define IVM_APPS_HIMENO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HIMENO_OMEGA 0.8f
#define HIMENO_TOL   1e-4 /* relative tolerance on gosa and the checksum */

typedef struct himeno_grid {
    int nx, ny, nz; /* points per axis; each >= 3 */
} himeno_grid_t;

/* The grid of --size N: N x N x (2N-1) (33 gives the benchmark's XS grid
   33x33x65, 65 its S grid 65x65x129). 0, or -1 with a message on stderr. */
int himeno_grid_from_size(long long size, himeno_grid_t *g);

static inline size_t himeno_plane(const himeno_grid_t *g)
{
    return (size_t)g->nx * (size_t)g->ny;
}

static inline int himeno_units(const himeno_grid_t *g)
{
    return g->nz - 2;
}

/* Initial pressure of planes [z0, z0 + nplanes) into p. */
void himeno_init(const himeno_grid_t *g, int z0, int nplanes, float *p);

/* One Jacobi iteration, CPU (OpenMP, `threads` threads; 0 = the default):
 * slab holds planes lo .. hi+1 of the grid, units [lo, hi) are updated in
 * place through wrk (same size as slab). Returns gosa of those units. */
double himeno_cpu_step(const himeno_grid_t *g, int lo, int hi, float *slab, float *wrk,
                       int threads);
/* The two halves of it: the new values of slab planes l0 .. l1 (1 .. hi-lo)
 * into wrk, their gosa returned; then every unit's new values from wrk into
 * slab (units 1 .. nl). */
double himeno_cpu_jacobi(const himeno_grid_t *g, int l0, int l1, const float *slab, float *wrk,
                         int threads);
void himeno_cpu_commit(const himeno_grid_t *g, int nl, float *slab, const float *wrk,
                       int threads);

/* The checksum of a whole grid: app_weighted_sum_f of its values. */
double himeno_checksum(const himeno_grid_t *g, const float *p);

/* Serial reference: `iters` iterations over the whole grid from the initial
 * state; the final gosa and checksum. */
int himeno_reference(const himeno_grid_t *g, int iters, double *gosa_p, double *checksum_p);

/* |got - want| <= HIMENO_TOL * max(|want|, tiny). */
int himeno_close(double got, double want);

/*
 * Kernel backends behind one ops table: "cpu" (OpenMP on host memory) and,
 * when built with CUDA, "cuda" (the slab lives in device memory).
 */
typedef struct himeno_kernel himeno_kernel_t;

/* A load's slab [lo, hi) against the grid and a kernel's max_units: 0, or
   -1 after printing why (both kernels' check). */
int himeno_slab_check(const himeno_grid_t *g, int max_units, int lo, int hi);

typedef struct himeno_kernel_ops {
    const char *name;
    /* A kernel for slabs of at most max_units units (its buffers). */
    int (*create)(const himeno_grid_t *g, int max_units, int threads, himeno_kernel_t **k_p);
    void (*destroy)(himeno_kernel_t *k);
    /* Load planes lo .. hi+1 (the whole slab with halos). The CUDA kernel
       takes host or device pointers here and below (cudaMemcpyDefault). */
    int (*load)(himeno_kernel_t *k, int lo, int hi, const float *planes);
    /* Replace the halo planes (plane lo from below, hi+1 from above; NULL = keep). */
    int (*halo_set)(himeno_kernel_t *k, const float *below, const float *above);
    /* One iteration on units [lo, hi); *gosa_p its gosa. */
    int (*step)(himeno_kernel_t *k, double *gosa_p);
    /* The same iteration in two parts, so that the edges can travel while
       the rest computes: step_edges computes the first and the last unit
       and copies their new planes out (NULL: not that one); step_rest the
       others, then takes every new value in. *gosa_p: each part's gosa. */
    int (*step_edges)(himeno_kernel_t *k, float *first, float *last, double *gosa_p);
    int (*step_rest)(himeno_kernel_t *k, double *gosa_p);
    /* Copy the first and the last unit planes (lo+1 and hi) out (NULL: not
       that one). */
    int (*edges_get)(himeno_kernel_t *k, float *first, float *last);
    /* Copy the unit planes lo+1 .. hi out. */
    int (*store)(himeno_kernel_t *k, float *planes);
    /* Threads to use from now on (CPU; ignored by CUDA). */
    void (*threads_set)(himeno_kernel_t *k, int threads);
} himeno_kernel_ops_t;

extern const himeno_kernel_ops_t himeno_cpu_ops;
#ifdef APP_HAVE_CUDA
extern const himeno_kernel_ops_t himeno_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif

#endif /* IVM_APPS_HIMENO_H */
