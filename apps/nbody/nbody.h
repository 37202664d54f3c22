/*
 * nbody: the kernels and input of NBODY, shared by the IVM version, the MPI
 * baseline and the serial reference.
 *
 * N particles (x, y, z, mass) with velocities; one time step updates every
 * particle i from the positions of the previous step: a_i = sum_j m_j d /
 * (|d|^2 + eps^2)^(3/2) with d = p_j - p_i, v_i += a_i dt, p_i += v_i dt.
 * The sum runs over j in order in float, so a particle's new value does not
 * depend on which process computes it.
 */
#ifndef IVM_APP_NBODY_H
#define IVM_APP_NBODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"

#define NBODY_DT   0.001f
#define NBODY_EPS2 0.0001f

typedef struct {
    float x, y, z, w;          /* position and mass (w) */
} nbody_vec_t;

/* Deterministic input from the seed: positions in [-1, 1)^3, masses in
   [0.5, 1.5) / n, velocities in [-0.05, 0.05)^3. */
void nbody_init(uint64_t seed, int n, nbody_vec_t *pos, nbody_vec_t *vel);

/* One step of particle i (lo <= i): what both kernels do for each particle
   (pin, pout and vel as for nbody_step_cpu). */
static inline APP_HOST_DEVICE void nbody_step_one(const nbody_vec_t *pin, nbody_vec_t *pout,
                                                  nbody_vec_t *vel, int n, int lo, int i)
{
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

/* One step for particles [lo, hi) with OpenMP: pin = all n positions of the
   previous step; pout and vel point at particle lo of their arrays. */
void nbody_step_cpu(const nbody_vec_t *pin, nbody_vec_t *pout, nbody_vec_t *vel, int n,
                    int lo, int hi);

/* The same on a GPU; all pointers are device pointers. 0, or -1 after
   printing the CUDA error. Defined only when APP_HAVE_CUDA. */
int nbody_step_cuda(const nbody_vec_t *pin, nbody_vec_t *pout, nbody_vec_t *vel, int n,
                    int lo, int hi);

/* Serial reference in double precision: `iters` steps from nbody_init's
   input; writes the final positions (n entries) to out. 0, or -1 (no memory). */
int nbody_reference(uint64_t seed, int n, int iters, nbody_vec_t *out);

/* Tolerance of --verify on positions against the reference. */
#define NBODY_RTOL 1e-3
#define NBODY_ATOL 1e-4

#endif /* IVM_APP_NBODY_H */
