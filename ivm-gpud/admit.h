/*
 * Memory-safe admission of device allocations (after schedGPU): per GPU a
 * capacity, the bytes in use, an LRU list of cached (unreferenced) copies and
 * a FIFO of requests waiting for memory. Pure bookkeeping: no I/O, no clock;
 * the caller owns the list nodes (embedded in its own structs), frees the
 * evicted copies and answers the requests.
 */
#ifndef IVM_GPUD_ADMIT_H
#define IVM_GPUD_ADMIT_H

#include <stdint.h>

#include "ivm.h"

/* A cached copy (embed in the copy). */
typedef struct gpud_admit_lru {
    struct gpud_admit_lru *prev, *next;
    uint64_t size;   /* bytes it holds */
    int      linked;
} gpud_admit_lru_t;

/* A waiting request (embed in the request). */
typedef struct gpud_admit_wait {
    struct gpud_admit_wait *prev, *next;
    uint64_t size;        /* bytes it needs */
    uint64_t deadline_ns; /* caller's clock */
    int      linked;
} gpud_admit_wait_t;

typedef enum gpud_admit_verdict {
    GPUD_ADMIT_FITS,      /* free bytes suffice: gpud_admit_take */
    GPUD_ADMIT_EVICT,     /* fits once cached copies go: gpud_admit_evict until FITS */
    GPUD_ADMIT_WAIT,      /* even evicting every cached copy is not enough */
    GPUD_ADMIT_TOO_LARGE  /* more than the GPU's capacity */
} gpud_admit_verdict_t;

typedef struct gpud_admit_stats {
    uint64_t capacity, used, cached; /* bytes */
    uint32_t ncached, waiting;
    uint64_t allocations, evictions, wait_timeouts;
} gpud_admit_stats_t;

typedef struct gpud_admit gpud_admit_t;

ivmError_t gpud_admit_create(uint32_t ngpus, const uint64_t *capacity, gpud_admit_t **a_p);
void gpud_admit_destroy(gpud_admit_t *a);

/* What it takes to allocate size bytes on gpu now. */
gpud_admit_verdict_t gpud_admit_check(const gpud_admit_t *a, uint32_t gpu, uint64_t size);

/* Account an allocation of size bytes (counts it). */
void gpud_admit_take(gpud_admit_t *a, uint32_t gpu, uint64_t size);

/* Account the freeing of size bytes. */
void gpud_admit_give(gpud_admit_t *a, uint32_t gpu, uint64_t size);

/* A copy lost its last reference: it becomes the most recently cached. */
void gpud_admit_cache(gpud_admit_t *a, uint32_t gpu, gpud_admit_lru_t *node, uint64_t size);

/* A cached copy is referenced again, or freed: off the LRU (no-op if not on it). */
void gpud_admit_uncache(gpud_admit_t *a, uint32_t gpu, gpud_admit_lru_t *node);

/* Take the least recently cached copy off the LRU and count an eviction; the
 * caller frees it and calls gpud_admit_give. NULL if none is cached. */
gpud_admit_lru_t *gpud_admit_evict(gpud_admit_t *a, uint32_t gpu);

/* Queue a request at the tail of gpu's FIFO. */
void gpud_admit_wait_push(gpud_admit_t *a, uint32_t gpu, gpud_admit_wait_t *w,
                          uint64_t size, uint64_t deadline_ns);

/* The first waiting request of gpu, NULL if none. */
gpud_admit_wait_t *gpud_admit_wait_head(const gpud_admit_t *a, uint32_t gpu);

/* Take a request off the FIFO (granted, cancelled); no-op if not queued. */
void gpud_admit_wait_remove(gpud_admit_t *a, uint32_t gpu, gpud_admit_wait_t *w);

/* A waiting request whose deadline is <= now_ns, taken off the FIFO and
 * counted as a time-out; NULL if none. */
gpud_admit_wait_t *gpud_admit_wait_expired(gpud_admit_t *a, uint32_t gpu, uint64_t now_ns);

/* Earliest deadline of all waiting requests; UINT64_MAX if none. */
uint64_t gpud_admit_next_deadline(const gpud_admit_t *a);

void gpud_admit_get_stats(const gpud_admit_t *a, uint32_t gpu, gpud_admit_stats_t *s);

#endif /* IVM_GPUD_ADMIT_H */
