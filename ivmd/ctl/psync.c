/* Addressed signals and barriers of the job registry (ctl/psync.h). The
 * pairs are a uthash table per job keyed by (sender, receiver); the places of
 * other nodes' PEs a uthash table per job keyed by id; barriers a short list
 * per job, matched by their sorted member set. A table that cannot grow is an
 * IVM_ERROR_NO_MEMORY for the caller, not an exit. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) ((elt)->hash_oom = 1)

#include "ctl/psync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* The tables' types are the registry's (ctl/jobtypes.h). */

static uint64_t ivmd_pair_key(int from, int to)
{
    return ((uint64_t)(uint32_t)from << 32) | (uint32_t)to;
}

static ivmd_pair_t *ivmd_pair_find(ivmd_job_t *job, int from, int to)
{
    uint64_t key = ivmd_pair_key(from, to);
    ivmd_pair_t *p;

    HASH_FIND(hh, job->pairs, &key, sizeof(key), p);
    return p;
}

static ivmd_pair_t *ivmd_pair_get(ivmd_job_t *job, int from, int to)
{
    ivmd_pair_t *p = ivmd_pair_find(job, from, to);

    if (p != NULL) {
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    p->key = ivmd_pair_key(from, to);
    HASH_ADD(hh, job->pairs, key, sizeof(p->key), p);
    if (p->hash_oom) {
        free(p);
        return NULL;
    }
    return p;
}

static ivmd_waiter_t *ivmd_pair_pop(ivmd_job_t *job, ivmd_pair_t *p)
{
    ivmd_waiter_t *w = p->waiters;

    if (w != NULL) {
        p->waiters = w->next;
        --job->psync_waiting;
    }
    return w;
}

/* ------------------------------------------------------------ places */

static ivmd_place_t *ivmd_place_find(const ivmd_job_t *job, int id)
{
    ivmd_place_t *pl;

    HASH_FIND(hh, job->places, &id, sizeof(id), pl);
    return pl;
}

int ivmd_psync_where(const ivmd_job_t *job, int id, int *node_p)
{
    const ivmd_pe_t *pe = ivmd_pe_find((ivmd_job_t *)job, id);
    const ivmd_place_t *pl;

    *node_p = -1;
    if (pe != NULL) {
        *node_p = pe->node;
        return pe->state == IVMD_PE_EXITED   ? IVMD_PLACE_EXITED
               : pe->state == IVMD_PE_FAILED ? IVMD_PLACE_FAILED
                                             : IVMD_PLACE_RUNNING;
    }
    pl = ivmd_place_find(job, id);
    if (pl == NULL) {
        return IVMD_PLACE_UNKNOWN;
    }
    *node_p = pl->node;
    return pl->state;
}

/* The place of id, made (RUNNING on node) if it was unknown; NULL: no
 * memory. *made_p: it was. */
static ivmd_place_t *ivmd_place_get(ivmd_job_t *job, int id, int node, int *made_p)
{
    ivmd_place_t *pl = ivmd_place_find(job, id);

    *made_p = 0;
    if (pl != NULL) {
        return pl;
    }
    if ((pl = calloc(1, sizeof(*pl))) == NULL) {
        return NULL;
    }
    pl->id    = id;
    pl->node  = node;
    pl->state = IVMD_PLACE_RUNNING;
    HASH_ADD(hh, job->places, id, sizeof(pl->id), pl);
    if (pl->hash_oom) {
        free(pl);
        return NULL;
    }
    *made_p = 1;
    return pl;
}

ivmError_t ivmd_psync_place(ivmd_job_t *job, int id, int node)
{
    int made;

    if (id < 0 || ivmd_pe_find(job, id) != NULL) {
        return IVM_SUCCESS; /* one of ours: the registry knows it */
    }
    return ivmd_place_get(job, id, node, &made) != NULL ? IVM_SUCCESS : IVM_ERROR_NO_MEMORY;
}

static void ivmd_pairs_sender_ended(ivmd_registry_t *reg, ivmd_job_t *job, int id, int failed);

void ivmd_psync_place_ended(ivmd_registry_t *reg, ivmd_job_t *job, int id, int node, int failed,
                            int final)
{
    ivmd_place_t *pl;
    int made;

    if (id < 0 || ivmd_pe_find(job, id) != NULL ||
        (pl = ivmd_place_get(job, id, node, &made)) == NULL) {
        return;
    }
    if (pl->state != IVMD_PLACE_RUNNING || (!made && !final)) {
        return; /* ended already, or a signal of it may still be on its node's link */
    }
    pl->state = failed ? IVMD_PLACE_FAILED : IVMD_PLACE_EXITED;
    ivmd_pairs_sender_ended(reg, job, id, failed);
}

void ivmd_psync_node_lost(ivmd_registry_t *reg, ivmd_job_t *job, int node)
{
    ivmd_place_t *pl, *tmp;

    HASH_ITER(hh, job->places, pl, tmp) {
        if (pl->node == node && pl->state == IVMD_PLACE_RUNNING) {
            pl->state = IVMD_PLACE_FAILED;
            ivmd_pairs_sender_ended(reg, job, pl->id, 1);
        }
    }
}

/* ------------------------------------------------------------ pairs */

ivmError_t ivmd_psync_signal_to(ivmd_registry_t *reg, ivmd_job_t *job, int from, int to)
{
    ivmd_pair_t *p;
    ivmd_waiter_t *w;

    if (ivmd_pe_find(job, to) == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    p = ivmd_pair_get(job, from, to);
    if (p == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    w = ivmd_pair_pop(job, p);
    if (w == NULL) {
        ++p->count;
        return IVM_SUCCESS;
    }
    reg->ops->wait_done(reg->ctx, w->owner, w->seq, w->type, IVM_SUCCESS, NULL);
    free(w);
    return IVM_SUCCESS;
}

ivmError_t ivmd_psync_wait_from(ivmd_registry_t *reg, ivmd_job_t *job,
                                const ivmd_pe_t *receiver, int from, void *owner, uint32_t seq,
                                uint16_t type, int *queued_p)
{
    ivmd_pair_t *p;
    ivmd_waiter_t *w, **tail;
    int node, state = ivmd_psync_where(job, from, &node);

    (void)reg;
    *queued_p = 0;
    if (state == IVMD_PLACE_UNKNOWN) {
        return IVM_ERROR_NOT_FOUND;
    }
    p = ivmd_pair_find(job, from, receiver->id);
    if (p != NULL && p->count > 0) {
        --p->count;
        return IVM_SUCCESS;
    }
    if (state == IVMD_PLACE_EXITED) {
        return IVM_SUCCESS;
    }
    if (state == IVMD_PLACE_FAILED) {
        return IVM_ERROR_PE_FAILED;
    }
    if ((p == NULL && (p = ivmd_pair_get(job, from, receiver->id)) == NULL) ||
        (w = calloc(1, sizeof(*w))) == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    w->owner = owner;
    w->seq   = seq;
    w->type  = type;
    for (tail = &p->waiters; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = w;
    ++job->psync_waiting;
    *queued_p = 1;
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------ barriers */

static int ivmd_int32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

    return (x > y) - (x < y);
}

/* ids sorted, repeats dropped, into a new array (*n_p entries). */
static int32_t *ivmd_barrier_set(const int32_t *ids, int n, int *n_p)
{
    int32_t *set = malloc(sizeof(*set) * (size_t)n);
    int i, k = 0;

    if (set == NULL) {
        return NULL;
    }
    memcpy(set, ids, sizeof(*set) * (size_t)n);
    qsort(set, (size_t)n, sizeof(*set), ivmd_int32_cmp);
    for (i = 0; i < n; ++i) {
        if (k == 0 || set[k - 1] != set[i]) {
            set[k++] = set[i];
        }
    }
    *n_p = k;
    return set;
}

/* Every member of set exists and can still arrive; else the status, with
 * the PE that cannot in *bad_p. */
static ivmError_t ivmd_barrier_check(ivmd_job_t *job, const int32_t *set, int n,
                                     const ivmd_pe_t *caller, int *bad_p)
{
    int i, listed = 0;

    for (i = 0; i < n; ++i) {
        const ivmd_pe_t *m = ivmd_pe_find(job, set[i]);
        *bad_p = set[i];
        if (m == NULL) {
            return IVM_ERROR_NOT_FOUND;
        }
        if (m->state == IVMD_PE_EXITED || m->state == IVMD_PE_FAILED) {
            return IVM_ERROR_PE_FAILED;
        }
        listed |= m == caller;
    }
    *bad_p = caller->id;
    return listed ? IVM_SUCCESS : IVM_ERROR_INVALID_VALUE;
}

static int ivmd_barrier_arrived(const ivmd_barrier_t *b, int pe)
{
    int i;

    for (i = 0; i < b->narr; ++i) {
        if (b->arr[i].pe == pe) {
            return 1;
        }
    }
    return 0;
}

/* The pending barrier of that member set the caller has not reached yet. */
static ivmd_barrier_t *ivmd_barrier_find(ivmd_job_t *job, const int32_t *set, int n, int pe)
{
    ivmd_barrier_t *b;

    for (b = job->barriers; b != NULL; b = b->next) {
        if (b->all == (n == 0) && b->n == n &&
            (n == 0 || memcmp(b->members, set, sizeof(*set) * (size_t)n) == 0) &&
            !ivmd_barrier_arrived(b, pe)) {
            return b;
        }
    }
    return NULL;
}

/* A new barrier at the end of the job's list (older ones match first);
 * takes set. */
static ivmd_barrier_t *ivmd_barrier_new(ivmd_job_t *job, int32_t *set, int n)
{
    ivmd_barrier_t *b = calloc(1, sizeof(*b)), **tail;

    if (b == NULL) {
        return NULL;
    }
    b->all     = n == 0;
    b->n       = n;
    b->members = set;
    for (tail = &job->barriers; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = b;
    return b;
}

static void ivmd_barrier_unlink(ivmd_job_t *job, ivmd_barrier_t *b)
{
    ivmd_barrier_t **link;

    for (link = &job->barriers; *link != NULL; link = &(*link)->next) {
        if (*link == b) {
            *link = b->next;
            return;
        }
    }
}

static void ivmd_barrier_free(ivmd_barrier_t *b)
{
    free(b->members);
    free(b->arr);
    free(b);
}

/* Answer every waiting member and forget the barrier. */
static void ivmd_barrier_finish(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_barrier_t *b,
                                ivmError_t status, const char *why)
{
    int i;

    ivmd_barrier_unlink(job, b);
    job->psync_waiting -= (uint32_t)b->narr;
    for (i = 0; i < b->narr; ++i) {
        reg->ops->wait_done(reg->ctx, b->arr[i].owner, b->arr[i].seq, b->arr[i].type, status,
                            why);
    }
    ivmd_barrier_free(b);
}

static int ivmd_barrier_complete(const ivmd_job_t *job, const ivmd_barrier_t *b)
{
    return b->all ? b->narr >= job->alive : b->narr == b->n;
}

static ivmError_t ivmd_barrier_add(ivmd_job_t *job, ivmd_barrier_t *b, const ivmd_pe_t *pe,
                                   void *owner, uint32_t seq, uint16_t type)
{
    if (b->narr == b->cap) {
        int cap = b->cap ? b->cap * 2 : (b->all ? 16 : b->n);
        ivmd_arrival_t *arr = realloc(b->arr, sizeof(*arr) * (size_t)cap);
        if (arr == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        b->arr = arr;
        b->cap = cap;
    }
    b->arr[b->narr++] = (ivmd_arrival_t){.pe = pe->id, .owner = owner, .seq = seq, .type = type};
    ++job->psync_waiting;
    return IVM_SUCCESS;
}

ivmError_t ivmd_psync_barrier(ivmd_registry_t *reg, ivmd_job_t *job, const ivmd_pe_t *pe,
                              const int32_t *ids, int n, void *owner, uint32_t seq,
                              uint16_t type, int *queued_p, int *bad_p)
{
    int32_t *set = NULL;
    ivmd_barrier_t *b;
    ivmError_t status;
    int k = 0;

    *queued_p = 0;
    *bad_p    = pe->id;
    if (n > 0) {
        if ((set = ivmd_barrier_set(ids, n, &k)) == NULL) {
            return IVM_ERROR_NO_MEMORY;
        }
        if ((status = ivmd_barrier_check(job, set, k, pe, bad_p)) != IVM_SUCCESS) {
            free(set);
            return status;
        }
    }
    b = ivmd_barrier_find(job, set, k, pe->id);
    if (b != NULL) {
        free(set);
    } else if ((b = ivmd_barrier_new(job, set, k)) == NULL) {
        free(set);
        return IVM_ERROR_NO_MEMORY;
    }
    if (ivmd_barrier_add(job, b, pe, owner, seq, type) != IVM_SUCCESS) {
        if (b->narr == 0) {
            ivmd_barrier_unlink(job, b);
            ivmd_barrier_free(b);
        }
        return IVM_ERROR_NO_MEMORY;
    }
    if (!ivmd_barrier_complete(job, b)) {
        *queued_p = 1;
        return IVM_SUCCESS;
    }
    /* The caller completes it: it is answered by the handler, the others here. */
    --b->narr;
    --job->psync_waiting;
    ivmd_barrier_finish(reg, job, b, IVM_SUCCESS, NULL);
    return IVM_SUCCESS;
}

static int ivmd_barrier_has(const ivmd_barrier_t *b, int pe)
{
    return b->all || bsearch(&(int32_t){pe}, b->members, (size_t)b->n, sizeof(int32_t),
                             ivmd_int32_cmp) != NULL;
}

/* Forget pe's arrival at a whole-job barrier it left (it exited; its
 * connection is going). */
static void ivmd_barrier_drop(ivmd_job_t *job, ivmd_barrier_t *b, int pe)
{
    int i, k;

    for (i = 0, k = 0; i < b->narr; ++i) {
        if (b->arr[i].pe != pe) {
            b->arr[k++] = b->arr[i];
        }
    }
    job->psync_waiting -= (uint32_t)(b->narr - k);
    b->narr = k;
}

/* A PE of the job ended: the barriers it belongs to fail, but a whole-job
 * barrier it left by ivmExit may be complete now. */
static void ivmd_barriers_pe_ended(ivmd_registry_t *reg, ivmd_pe_t *pe, int failed)
{
    ivmd_job_t *job = pe->job;
    ivmd_barrier_t *b, *next;
    char why[IVM_MSG_DETAIL_MAX];

    snprintf(why, sizeof(why), "pe %d of the barrier %s", pe->id,
             failed ? "died without ivmExit" : "called ivmExit before reaching it");
    for (b = job->barriers; b != NULL; b = next) {
        next = b->next;
        if (!ivmd_barrier_has(b, pe->id)) {
            continue;
        }
        if (failed || !b->all) {
            ivmd_barrier_finish(reg, job, b, IVM_ERROR_PE_FAILED, why);
            continue;
        }
        ivmd_barrier_drop(job, b, pe->id);
        if (b->narr == 0) {
            ivmd_barrier_unlink(job, b);
            ivmd_barrier_free(b);
        } else if (ivmd_barrier_complete(job, b)) {
            ivmd_barrier_finish(reg, job, b, IVM_SUCCESS, NULL);
        }
    }
}

/* ------------------------------------------------------------ ends */

/* The waiters of the pairs sender id sends on are answered: it ended. */
static void ivmd_pairs_sender_ended(ivmd_registry_t *reg, ivmd_job_t *job, int id, int failed)
{
    ivmError_t status = failed ? IVM_ERROR_PE_FAILED : IVM_SUCCESS;
    char why[IVM_MSG_DETAIL_MAX];
    ivmd_pair_t *p, *tmp;
    ivmd_waiter_t *w;

    if (job->psync_waiting == 0) {
        return;
    }
    snprintf(why, sizeof(why), "pe %d died without ivmExit", id);
    HASH_ITER(hh, job->pairs, p, tmp) {
        if ((int)(p->key >> 32) != id) {
            continue;
        }
        while ((w = ivmd_pair_pop(job, p)) != NULL) {
            reg->ops->wait_done(reg->ctx, w->owner, w->seq, w->type, status,
                                failed ? why : NULL);
            free(w);
        }
    }
}

void ivmd_psync_pe_ended(ivmd_registry_t *reg, ivmd_pe_t *pe, int failed)
{
    if (pe->job->psync_waiting == 0) {
        return;
    }
    ivmd_pairs_sender_ended(reg, pe->job, pe->id, failed);
    ivmd_barriers_pe_ended(reg, pe, failed);
}

static void ivmd_pairs_cancel(ivmd_job_t *job, void *owner)
{
    ivmd_pair_t *p, *tmp;
    ivmd_waiter_t **link, *w;

    HASH_ITER(hh, job->pairs, p, tmp) {
        link = &p->waiters;
        while ((w = *link) != NULL) {
            if (w->owner == owner) {
                *link = w->next;
                --job->psync_waiting;
                free(w);
            } else {
                link = &w->next;
            }
        }
    }
}

static void ivmd_barriers_cancel(ivmd_job_t *job, void *owner)
{
    ivmd_barrier_t *b, *next;
    int i, k;

    for (b = job->barriers; b != NULL; b = next) {
        next = b->next;
        for (i = 0, k = 0; i < b->narr; ++i) {
            if (b->arr[i].owner != owner) {
                b->arr[k++] = b->arr[i];
            }
        }
        job->psync_waiting -= (uint32_t)(b->narr - k);
        b->narr = k;
        if (k == 0) {
            ivmd_barrier_unlink(job, b);
            ivmd_barrier_free(b);
        }
    }
}

void ivmd_psync_cancel(ivmd_registry_t *reg, void *owner)
{
    ivmd_job_t *job;

    for (job = reg->jobs; job != NULL; job = job->next) {
        if (job->psync_waiting > 0) {
            ivmd_pairs_cancel(job, owner);
            ivmd_barriers_cancel(job, owner);
        }
    }
}

void ivmd_psync_job_destroy(ivmd_job_t *job)
{
    ivmd_pair_t *p, *tmp;
    ivmd_place_t *pl, *pltmp;
    ivmd_waiter_t *w;

    HASH_ITER(hh, job->pairs, p, tmp) {
        while ((w = ivmd_pair_pop(job, p)) != NULL) {
            free(w);
        }
        HASH_DELETE(hh, job->pairs, p);
        free(p);
    }
    HASH_ITER(hh, job->places, pl, pltmp) {
        HASH_DELETE(hh, job->places, pl);
        free(pl);
    }
    while (job->barriers != NULL) {
        ivmd_barrier_t *b = job->barriers;
        job->barriers = b->next;
        ivmd_barrier_free(b);
    }
    job->psync_waiting = 0;
}
