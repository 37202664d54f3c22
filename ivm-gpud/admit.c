#include "admit.h"

#include <stdlib.h>

typedef struct gpud_admit_gpu {
    uint64_t capacity, used, cached;
    uint32_t ncached, waiting;
    uint64_t allocations, evictions, wait_timeouts;
    gpud_admit_lru_t  *lru_head, *lru_tail;   /* head: least recently cached */
    gpud_admit_wait_t *wait_head, *wait_tail; /* head: first come */
} gpud_admit_gpu_t;

struct gpud_admit {
    uint32_t         ngpus;
    gpud_admit_gpu_t gpus[];
};

ivmError_t gpud_admit_create(uint32_t ngpus, const uint64_t *capacity, gpud_admit_t **a_p)
{
    gpud_admit_t *a = calloc(1, sizeof(*a) + ngpus * sizeof(gpud_admit_gpu_t));
    uint32_t i;

    if (a == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    a->ngpus = ngpus;
    for (i = 0; i < ngpus; ++i) {
        a->gpus[i].capacity = capacity[i];
    }
    *a_p = a;
    return IVM_SUCCESS;
}

void gpud_admit_destroy(gpud_admit_t *a)
{
    free(a);
}

gpud_admit_verdict_t gpud_admit_check(const gpud_admit_t *a, uint32_t gpu, uint64_t size)
{
    const gpud_admit_gpu_t *g = &a->gpus[gpu];
    uint64_t free_bytes = g->capacity - g->used;

    if (size > g->capacity) {
        return GPUD_ADMIT_TOO_LARGE;
    }
    if (size <= free_bytes) {
        return GPUD_ADMIT_FITS;
    }
    if (size <= free_bytes + g->cached) {
        return GPUD_ADMIT_EVICT;
    }
    return GPUD_ADMIT_WAIT;
}

void gpud_admit_take(gpud_admit_t *a, uint32_t gpu, uint64_t size)
{
    a->gpus[gpu].used += size;
    a->gpus[gpu].allocations++;
}

void gpud_admit_give(gpud_admit_t *a, uint32_t gpu, uint64_t size)
{
    gpud_admit_gpu_t *g = &a->gpus[gpu];

    g->used = (size <= g->used) ? g->used - size : 0;
}

void gpud_admit_cache(gpud_admit_t *a, uint32_t gpu, gpud_admit_lru_t *node, uint64_t size)
{
    gpud_admit_gpu_t *g = &a->gpus[gpu];

    if (node->linked) {
        gpud_admit_uncache(a, gpu, node);
    }
    node->size   = size;
    node->next   = NULL;
    node->prev   = g->lru_tail;
    node->linked = 1;
    if (g->lru_tail != NULL) {
        g->lru_tail->next = node;
    } else {
        g->lru_head = node;
    }
    g->lru_tail = node;
    g->cached += size;
    g->ncached++;
}

void gpud_admit_uncache(gpud_admit_t *a, uint32_t gpu, gpud_admit_lru_t *node)
{
    gpud_admit_gpu_t *g = &a->gpus[gpu];

    if (!node->linked) {
        return;
    }
    if (node->prev != NULL) {
        node->prev->next = node->next;
    } else {
        g->lru_head = node->next;
    }
    if (node->next != NULL) {
        node->next->prev = node->prev;
    } else {
        g->lru_tail = node->prev;
    }
    node->prev = node->next = NULL;
    node->linked = 0;
    g->cached -= node->size;
    g->ncached--;
}

gpud_admit_lru_t *gpud_admit_evict(gpud_admit_t *a, uint32_t gpu)
{
    gpud_admit_lru_t *node = a->gpus[gpu].lru_head;

    if (node == NULL) {
        return NULL;
    }
    gpud_admit_uncache(a, gpu, node);
    a->gpus[gpu].evictions++;
    return node;
}

void gpud_admit_wait_push(gpud_admit_t *a, uint32_t gpu, gpud_admit_wait_t *w,
                          uint64_t size, uint64_t deadline_ns)
{
    gpud_admit_gpu_t *g = &a->gpus[gpu];

    w->size        = size;
    w->deadline_ns = deadline_ns;
    w->next        = NULL;
    w->prev        = g->wait_tail;
    w->linked      = 1;
    if (g->wait_tail != NULL) {
        g->wait_tail->next = w;
    } else {
        g->wait_head = w;
    }
    g->wait_tail = w;
    g->waiting++;
}

gpud_admit_wait_t *gpud_admit_wait_head(const gpud_admit_t *a, uint32_t gpu)
{
    return a->gpus[gpu].wait_head;
}

void gpud_admit_wait_remove(gpud_admit_t *a, uint32_t gpu, gpud_admit_wait_t *w)
{
    gpud_admit_gpu_t *g = &a->gpus[gpu];

    if (!w->linked) {
        return;
    }
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else {
        g->wait_head = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    } else {
        g->wait_tail = w->prev;
    }
    w->prev = w->next = NULL;
    w->linked = 0;
    g->waiting--;
}

gpud_admit_wait_t *gpud_admit_wait_expired(gpud_admit_t *a, uint32_t gpu, uint64_t now_ns)
{
    gpud_admit_wait_t *w;

    for (w = a->gpus[gpu].wait_head; w != NULL; w = w->next) {
        if (w->deadline_ns <= now_ns) {
            gpud_admit_wait_remove(a, gpu, w);
            a->gpus[gpu].wait_timeouts++;
            return w;
        }
    }
    return NULL;
}

uint64_t gpud_admit_next_deadline(const gpud_admit_t *a)
{
    const gpud_admit_wait_t *w;
    uint64_t best = UINT64_MAX;
    uint32_t i;

    for (i = 0; i < a->ngpus; ++i) {
        for (w = a->gpus[i].wait_head; w != NULL; w = w->next) {
            if (w->deadline_ns < best) {
                best = w->deadline_ns;
            }
        }
    }
    return best;
}

void gpud_admit_get_stats(const gpud_admit_t *a, uint32_t gpu, gpud_admit_stats_t *s)
{
    const gpud_admit_gpu_t *g = &a->gpus[gpu];

    s->capacity      = g->capacity;
    s->used          = g->used;
    s->cached        = g->cached;
    s->ncached       = g->ncached;
    s->waiting       = g->waiting;
    s->allocations   = g->allocations;
    s->evictions     = g->evictions;
    s->wait_timeouts = g->wait_timeouts;
}
