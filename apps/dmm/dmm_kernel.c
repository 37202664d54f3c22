/*
 * dmm: input, CPU kernel, layout helpers and serial reference (see dmm.h).
 */
#include "dmm.h"

#include <stdlib.h>
#include <string.h>

#include "app.h"

void dmm_init(uint64_t seed, int n, float *a, float *bt)
{
    size_t nn = (size_t)n * (size_t)n;

    for (size_t e = 0; e < nn; e++) {
        a[e] = (float)app_rand_unit(seed, 2 * e);
        bt[e] = (float)app_rand_unit(seed, 2 * e + 1);
    }
}

void dmm_tile_cpu(const float *a, const float *bt, float *c, int n, int rows, int cols)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < rows; r++)
        for (int col = 0; col < cols; col++)
            c[(size_t)r * cols + col] = dmm_dot(a + (size_t)r * n, bt + (size_t)col * n, n);
}

void dmm_untile(const float *c, float *out, int n, int M)
{
    for (int i = 0; i < M; i++) {
        int r0 = dmm_lo(n, M, i), rows = dmm_lo(n, M, i + 1) - r0;
        for (int j = 0; j < M; j++) {
            int c0 = dmm_lo(n, M, j), cols = dmm_lo(n, M, j + 1) - c0;
            const float *t = c + dmm_tile_off(n, M, i, j);
            for (int r = 0; r < rows; r++)
                memcpy(out + (size_t)(r0 + r) * n + c0, t + (size_t)r * cols,
                       (size_t)cols * sizeof(float));
        }
    }
}

int dmm_reference(uint64_t seed, int n, float *out)
{
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *bt = malloc(nn * sizeof(float));

    if (a == NULL || bt == NULL) {
        free(bt);
        free(a);
        return -1;
    }
    dmm_init(seed, n, a, bt);
    for (int r = 0; r < n; r++) {
        for (int c = 0; c < n; c++) {
            double s = 0.0;
            for (int k = 0; k < n; k++)
                s += (double)a[(size_t)r * n + k] * (double)bt[(size_t)c * n + k];
            out[(size_t)r * n + c] = (float)s;
        }
    }
    free(bt);
    free(a);
    return 0;
}
