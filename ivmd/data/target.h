/*
 * data/target: other copies of an object on this node that the data plane
 * keeps coherent with the node copy, behind one interface (the GPU module's
 * device copies are the first implementation: ivmd/gpu/). The data plane
 * calls a registered target
 *  - when a mirror fill wrote bytes the node did not hold (filled): the
 *    target copies them into its copies of the object;
 *  - before the node copy's bytes leave for a gather (refresh, pull) and
 *    after scattered bytes arrived (refresh, push);
 *  - to know whether it has copies of a range (has_copies).
 * A call that will finish later returns 1 and calls done(dp, arg, status)
 * once; one with nothing to do returns 0 and never calls done.
 */
#ifndef IVMD_DATA_TARGET_H
#define IVMD_DATA_TARGET_H

#include <stdint.h>

#include "data/data.h"

typedef void (*ivmd_target_done_t)(ivmd_t *d, void *arg, int status);

typedef struct ivmd_target_ops {
    const char *name;
    int (*has_copies)(const void *ctx, uint32_t job, uint64_t obj, uint64_t off,
                      uint64_t len);
    /* pull: the copies' bytes of the range into the node copy; else the
     * node copy's into them. fence: also wait for earlier work on obj. */
    int (*refresh)(void *ctx, uint32_t job, uint64_t obj, uint64_t off, uint64_t len, int pull,
                   int fence, ivmd_target_done_t done, void *arg);
    /* A fill wrote [off, off+len) of obj (done may be NULL: not waited for). */
    int (*filled)(void *ctx, uint32_t job, const ivmd_obj_t *obj, uint64_t off, uint64_t len,
                  ivmd_target_done_t done, void *arg);
} ivmd_target_ops_t;

/* Register the node's copy target (NULL: none) with its context. */
void ivmd_data_set_target(ivmd_data_t *dp, const ivmd_target_ops_t *ops, void *ctx);

/* The data plane's calls of its target (0 without one). */
int ivmd_target_has_copies(const ivmd_data_t *dp, uint32_t job, uint64_t obj, uint64_t off,
                           uint64_t len);
int ivmd_target_refresh(ivmd_data_t *dp, uint32_t job, uint64_t obj, uint64_t off, uint64_t len,
                        int pull, int fence, ivmd_target_done_t done, void *arg);
int ivmd_target_filled(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj, uint64_t off,
                       uint64_t len, ivmd_target_done_t done, void *arg);

#endif /* IVMD_DATA_TARGET_H */
