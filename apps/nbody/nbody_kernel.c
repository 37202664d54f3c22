/*
 * nbody: input, CPU kernel and serial reference (see nbody.h).
 */
#include "nbody.h"

#include <math.h>
#include <stdlib.h>

#include "app.h"

void nbody_init(uint64_t seed, int n, nbody_vec_t *pos, nbody_vec_t *vel)
{
    for (int i = 0; i < n; i++) {
        uint64_t k = (uint64_t)i * 8;
        pos[i].x = (float)(2.0 * app_rand_unit(seed, k) - 1.0);
        pos[i].y = (float)(2.0 * app_rand_unit(seed, k + 1) - 1.0);
        pos[i].z = (float)(2.0 * app_rand_unit(seed, k + 2) - 1.0);
        pos[i].w = (float)((0.5 + app_rand_unit(seed, k + 3)) / n);
        vel[i].x = (float)(0.1 * app_rand_unit(seed, k + 4) - 0.05);
        vel[i].y = (float)(0.1 * app_rand_unit(seed, k + 5) - 0.05);
        vel[i].z = (float)(0.1 * app_rand_unit(seed, k + 6) - 0.05);
        vel[i].w = 0.0f;
    }
}

void nbody_step_cpu(const nbody_vec_t *pin, nbody_vec_t *pout, nbody_vec_t *vel, int n,
                    int lo, int hi)
{
#pragma omp parallel for schedule(static)
    for (int i = lo; i < hi; i++)
        nbody_step_one(pin, pout, vel, n, lo, i);
}

int nbody_reference(uint64_t seed, int n, int iters, nbody_vec_t *out)
{
    nbody_vec_t *pos = malloc((size_t)n * sizeof(*pos));
    nbody_vec_t *vel = malloc((size_t)n * sizeof(*vel));
    double *p = malloc((size_t)n * 4 * sizeof(*p)), *np = malloc((size_t)n * 4 * sizeof(*np));
    double *v = malloc((size_t)n * 3 * sizeof(*v));
    int ret = -1;

    if (pos == NULL || vel == NULL || p == NULL || np == NULL || v == NULL)
        goto out;
    nbody_init(seed, n, pos, vel);
    for (int i = 0; i < n; i++) {
        p[4 * i] = pos[i].x;
        p[4 * i + 1] = pos[i].y;
        p[4 * i + 2] = pos[i].z;
        p[4 * i + 3] = pos[i].w;
        v[3 * i] = vel[i].x;
        v[3 * i + 1] = vel[i].y;
        v[3 * i + 2] = vel[i].z;
    }
    for (int t = 0; t < iters; t++) {
        for (int i = 0; i < n; i++) {
            double a[3] = { 0.0, 0.0, 0.0 };
            for (int j = 0; j < n; j++) {
                double d[3], r2 = NBODY_EPS2;
                for (int c = 0; c < 3; c++) {
                    d[c] = p[4 * j + c] - p[4 * i + c];
                    r2 += d[c] * d[c];
                }
                double s = p[4 * j + 3] / (r2 * sqrt(r2));
                for (int c = 0; c < 3; c++)
                    a[c] += d[c] * s;
            }
            for (int c = 0; c < 3; c++) {
                v[3 * i + c] += a[c] * NBODY_DT;
                np[4 * i + c] = p[4 * i + c] + v[3 * i + c] * NBODY_DT;
            }
            np[4 * i + 3] = p[4 * i + 3];
        }
        double *tmp = p;
        p = np;
        np = tmp;
    }
    for (int i = 0; i < n; i++) {
        out[i].x = (float)p[4 * i];
        out[i].y = (float)p[4 * i + 1];
        out[i].z = (float)p[4 * i + 2];
        out[i].w = (float)p[4 * i + 3];
    }
    ret = 0;
out:
    free(v);
    free(np);
    free(p);
    free(vel);
    free(pos);
    return ret;
}
