/*
 * HIMENO: grid setup, the CPU (OpenMP) Jacobi kernel, the serial reference
 * and the CPU kernel backend. See himeno.h.
 */
#include "himeno.h"

#include "app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* The benchmark's coefficients (the same at every point). */
#define A0 1.0f
#define A1 1.0f
#define A2 1.0f
#define A3 (1.0f / 6.0f)
#define B0 0.0f
#define B1 0.0f
#define B2 0.0f
#define C0 1.0f
#define C1 1.0f
#define C2 1.0f
#define BND 1.0f
#define WRK1 0.0f

#define HIMENO_SIZE_MAX 1024 /* --size at most (1024 x 1024 x 2047 floats: 8 GiB) */

int himeno_grid_from_size(long long size, himeno_grid_t *g)
{
    if (size < 3 || size > HIMENO_SIZE_MAX) {
        fprintf(stderr, "himeno: --size %lld out of range: 3 .. %d (grid N x N x (2N-1))\n",
                size, HIMENO_SIZE_MAX);
        return -1;
    }
    g->nx = (int)size;
    g->ny = (int)size;
    g->nz = (int)(2 * size - 1);
    return 0;
}

void himeno_init(const himeno_grid_t *g, int z0, int nplanes, float *p)
{
    size_t plane = himeno_plane(g);
    float denom = (float)(g->nz - 1) * (float)(g->nz - 1);

    for (int l = 0; l < nplanes; l++) {
        int z = z0 + l;
        float v = (float)(z * z) / denom;
        for (size_t i = 0; i < plane; i++)
            p[(size_t)l * plane + i] = v;
    }
}

/* Threads for a kernel call: `threads`, or OpenMP's default when <= 0. */
static int himeno_threads(int threads)
{
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_max_threads();
#else
    return threads;
#endif
}

double himeno_cpu_jacobi(const himeno_grid_t *g, int l0, int l1, const float *slab, float *wrk,
                         int threads)
{
    const int nx = g->nx, ny = g->ny;
    const size_t P = himeno_plane(g);
    const float *p = slab;
    double gosa = 0.0;

    threads = himeno_threads(threads);
#pragma omp parallel for collapse(2) reduction(+ : gosa) schedule(static) num_threads(threads)
    for (int l = l0; l <= l1; l++) {
        for (int y = 1; y < ny - 1; y++) {
            for (int x = 1; x < nx - 1; x++) {
                size_t i = (size_t)l * P + (size_t)y * (size_t)nx + (size_t)x;
                float s0 = A0 * p[i + P] + A1 * p[i + nx] + A2 * p[i + 1] +
                           B0 * (p[i + P + nx] - p[i + P - nx] - p[i - P + nx] +
                                 p[i - P - nx]) +
                           B1 * (p[i + nx + 1] - p[i - nx + 1] - p[i + nx - 1] +
                                 p[i - nx - 1]) +
                           B2 * (p[i + P + 1] - p[i - P + 1] - p[i + P - 1] +
                                 p[i - P - 1]) +
                           C0 * p[i - P] + C1 * p[i - nx] + C2 * p[i - 1] + WRK1;
                float ss = (s0 * A3 - p[i]) * BND;
                gosa += (double)ss * (double)ss;
                wrk[i] = p[i] + HIMENO_OMEGA * ss;
            }
        }
    }
    return gosa;
}

void himeno_cpu_commit(const himeno_grid_t *g, int nl, float *slab, const float *wrk,
                       int threads)
{
    const int nx = g->nx, ny = g->ny;
    const size_t P = himeno_plane(g);

    threads = himeno_threads(threads);
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int l = 1; l <= nl; l++) {
        for (int y = 1; y < ny - 1; y++) {
            size_t i = (size_t)l * P + (size_t)y * (size_t)nx + 1;
            memcpy(&slab[i], &wrk[i], (size_t)(nx - 2) * sizeof(float));
        }
    }
}

double himeno_cpu_step(const himeno_grid_t *g, int lo, int hi, float *slab, float *wrk,
                       int threads)
{
    double gosa = himeno_cpu_jacobi(g, 1, hi - lo, slab, wrk, threads);

    himeno_cpu_commit(g, hi - lo, slab, wrk, threads);
    return gosa;
}

double himeno_checksum(const himeno_grid_t *g, const float *p)
{
    return app_weighted_sum_f(p, himeno_plane(g) * (size_t)g->nz);
}

int himeno_reference(const himeno_grid_t *g, int iters, double *gosa_p, double *checksum_p)
{
    size_t n = himeno_plane(g) * (size_t)g->nz;
    float *p = malloc(n * sizeof(float)), *wrk = malloc(n * sizeof(float));
    double gosa = 0.0;

    if (p == NULL || wrk == NULL) {
        fprintf(stderr, "himeno: no memory for the reference grid (%zu floats)\n", n);
        free(p);
        free(wrk);
        return -1;
    }
    himeno_init(g, 0, g->nz, p);
    for (int it = 0; it < iters; it++)
        gosa = himeno_cpu_step(g, 0, himeno_units(g), p, wrk, 0);
    *gosa_p = gosa;
    *checksum_p = himeno_checksum(g, p);
    free(p);
    free(wrk);
    return 0;
}

int himeno_close(double got, double want)
{
    double scale = fabs(want) > 1e-30 ? fabs(want) : 1e-30;
    return fabs(got - want) <= HIMENO_TOL * scale;
}

/* ------------------------------------------------------------ CPU backend */

struct himeno_kernel {
    himeno_grid_t g;
    int           max_units;
    int           threads;
    int           lo, hi;
    float        *slab; /* planes lo .. hi+1 */
    float        *wrk;
};

static int cpu_create(const himeno_grid_t *g, int max_units, int threads,
                      himeno_kernel_t **k_p)
{
    himeno_kernel_t *k = calloc(1, sizeof(*k));
    size_t n = himeno_plane(g) * (size_t)(max_units + 2);

    if (k == NULL)
        goto fail_k;
    k->slab = app_alloc_pages(n * sizeof(float));
    k->wrk = app_alloc_pages(n * sizeof(float));
    if (k->slab == NULL || k->wrk == NULL)
        goto fail_bufs;
    k->g = *g;
    k->max_units = max_units;
    k->threads = threads;
    *k_p = k;
    return 0;

fail_bufs:
    free(k->slab);
    free(k->wrk);
    free(k);
fail_k:
    fprintf(stderr, "himeno: no memory for a slab of %d planes\n", max_units + 2);
    return -1;
}

static void cpu_destroy(himeno_kernel_t *k)
{
    if (k == NULL)
        return;
    free(k->slab);
    free(k->wrk);
    free(k);
}

int himeno_slab_check(const himeno_grid_t *g, int max_units, int lo, int hi)
{
    if (lo < 0 || hi <= lo || hi - lo > max_units || hi > himeno_units(g)) {
        fprintf(stderr, "himeno: slab [%d, %d) does not fit the kernel's %d units\n", lo, hi,
                max_units);
        return -1;
    }
    return 0;
}

static int cpu_load(himeno_kernel_t *k, int lo, int hi, const float *planes)
{
    if (himeno_slab_check(&k->g, k->max_units, lo, hi) != 0)
        return -1;
    k->lo = lo;
    k->hi = hi;
    memcpy(k->slab, planes, himeno_plane(&k->g) * (size_t)(hi - lo + 2) * sizeof(float));
    return 0;
}

static int cpu_halo_set(himeno_kernel_t *k, const float *below, const float *above)
{
    size_t P = himeno_plane(&k->g);

    if (below != NULL)
        memcpy(k->slab, below, P * sizeof(float));
    if (above != NULL)
        memcpy(k->slab + (size_t)(k->hi - k->lo + 1) * P, above, P * sizeof(float));
    return 0;
}

static int cpu_step(himeno_kernel_t *k, double *gosa_p)
{
    *gosa_p = himeno_cpu_step(&k->g, k->lo, k->hi, k->slab, k->wrk, k->threads);
    return 0;
}

/* Plane l of the slab with its new interior values from wrk, into dst. */
static void cpu_plane_new(const himeno_kernel_t *k, int l, float *dst)
{
    const int nx = k->g.nx, ny = k->g.ny;
    const size_t P = himeno_plane(&k->g);

    memcpy(dst, k->slab + (size_t)l * P, P * sizeof(float));
    for (int y = 1; y < ny - 1; y++)
        memcpy(dst + (size_t)y * nx + 1, k->wrk + (size_t)l * P + (size_t)y * nx + 1,
               (size_t)(nx - 2) * sizeof(float));
}

static int cpu_step_edges(himeno_kernel_t *k, float *first, float *last, double *gosa_p)
{
    int nl = k->hi - k->lo;

    *gosa_p = himeno_cpu_jacobi(&k->g, 1, 1, k->slab, k->wrk, k->threads);
    if (nl > 1)
        *gosa_p += himeno_cpu_jacobi(&k->g, nl, nl, k->slab, k->wrk, k->threads);
    if (first != NULL)
        cpu_plane_new(k, 1, first);
    if (last != NULL)
        cpu_plane_new(k, nl, last);
    return 0;
}

static int cpu_step_rest(himeno_kernel_t *k, double *gosa_p)
{
    int nl = k->hi - k->lo;

    *gosa_p = nl > 2 ? himeno_cpu_jacobi(&k->g, 2, nl - 1, k->slab, k->wrk, k->threads) : 0.0;
    himeno_cpu_commit(&k->g, nl, k->slab, k->wrk, k->threads);
    return 0;
}

static int cpu_edges_get(himeno_kernel_t *k, float *first, float *last)
{
    size_t P = himeno_plane(&k->g);

    if (first != NULL)
        memcpy(first, k->slab + P, P * sizeof(float));
    if (last != NULL)
        memcpy(last, k->slab + (size_t)(k->hi - k->lo) * P, P * sizeof(float));
    return 0;
}

static int cpu_store(himeno_kernel_t *k, float *planes)
{
    size_t P = himeno_plane(&k->g);

    memcpy(planes, k->slab + P, (size_t)(k->hi - k->lo) * P * sizeof(float));
    return 0;
}

static void cpu_threads_set(himeno_kernel_t *k, int threads)
{
    k->threads = threads;
}

const himeno_kernel_ops_t himeno_cpu_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .load = cpu_load,
    .halo_set = cpu_halo_set,
    .step = cpu_step,
    .step_edges = cpu_step_edges,
    .step_rest = cpu_step_rest,
    .edges_get = cpu_edges_get,
    .store = cpu_store,
    .threads_set = cpu_threads_set,
};
