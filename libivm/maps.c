/* The mapping table: two balanced search trees (glibc's tsearch, red-black)
 * of the process's mappings, one by reference and one by host view (GPU
 * mappings), under a reader-writer lock. A lookup on the sync fast path and
 * an add or take of ivmMalloc/ivmMap/ivmFree cost O(log n): a sorted array
 * cost a memmove of the whole table per map, since mmap hands out addresses
 * downwards and every new mapping went to its front. */
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "libivm.h"

/* Order of two mappings (never overlapping) by reference. */
static int ivm_maps_cmp_ref(const void *a, const void *b)
{
    const char *x = ((const ivm_map_t *)a)->ref, *y = ((const ivm_map_t *)b)->ref;

    return (x > y) - (x < y);
}

static int ivm_maps_cmp_host(const void *a, const void *b)
{
    const char *x = ((const ivm_map_t *)a)->host, *y = ((const ivm_map_t *)b)->host;

    return (x > y) - (x < y);
}

/* A key (its ref) against a mapping: 0 when the mapping holds the key's
 * address. Consistent with ivm_maps_cmp_ref since mappings do not overlap. */
static int ivm_maps_cmp_in(const void *key, const void *node)
{
    const char *a = ((const ivm_map_t *)key)->ref;
    const ivm_map_t *m = node;

    if (a < m->ref) {
        return -1;
    }
    return (size_t)(a - m->ref) < m->size ? 0 : 1;
}

static int ivm_maps_cmp_in_host(const void *key, const void *node)
{
    const char *a = ((const ivm_map_t *)key)->host;
    const ivm_map_t *m = node;

    if (a < m->host) {
        return -1;
    }
    return (size_t)(a - m->host) < m->size ? 0 : 1;
}

ivmError_t ivm_maps_add(const ivm_map_t *map)
{
    ivm_map_t *m = malloc(sizeof(*m));
    void *node;

    if (m == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *m = *map;
    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    node = tsearch(m, &ivm_ctx.maps, ivm_maps_cmp_ref);
    if (node != NULL && (m->flags & IVM_MAP_GPU) &&
        tsearch(m, &ivm_ctx.maps_host, ivm_maps_cmp_host) == NULL) {
        tdelete(m, &ivm_ctx.maps, ivm_maps_cmp_ref);
        node = NULL;
    }
    if (node != NULL) {
        ++ivm_ctx.nmaps;
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    if (node == NULL) {
        free(m);
        return IVM_ERROR_NO_MEMORY;
    }
    return IVM_SUCCESS;
}

/* The mapping holding [a, a+size) in `root` under cmp, NULL if none. A
 * zero-sized range may sit just past a mapping's last byte. */
static const ivm_map_t *ivm_maps_find(void *const *root, const ivm_map_t *key, size_t size,
                                      const char *(*start)(const ivm_map_t *),
                                      int (*cmp)(const void *, const void *))
{
    void *node = tfind(key, root, cmp);
    const char *a = start(key);
    const ivm_map_t *m;

    if (node == NULL && size == 0) {
        ivm_map_t before = *key;
        before.ref  = key->ref != NULL ? key->ref - 1 : NULL;
        before.host = key->host != NULL ? key->host - 1 : NULL;
        node = tfind(&before, root, cmp);
    }
    if (node == NULL) {
        return NULL;
    }
    m = *(ivm_map_t *const *)node;
    if (a < start(m) || size > m->size || (size_t)(a - start(m)) > m->size - size) {
        return NULL;
    }
    return m;
}

static const char *ivm_map_ref(const ivm_map_t *m)
{
    return m->ref;
}

static const char *ivm_map_host(const ivm_map_t *m)
{
    return m->host;
}

ivmError_t ivm_maps_lookup(const void *addr, size_t size, ivm_map_t *map_p)
{
    ivm_map_t key = {.ref = (char *)addr};
    const ivm_map_t *m;
    ivmError_t status = IVM_ERROR_INVALID_VALUE;

    pthread_rwlock_rdlock(&ivm_ctx.maps_lock);
    m = ivm_maps_find(&ivm_ctx.maps, &key, size, ivm_map_ref, ivm_maps_cmp_in);
    if (m != NULL) {
        *map_p = *m;
        status = IVM_SUCCESS;
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return status;
}

ivmError_t ivm_maps_take(const void *ref, ivm_map_t *map_p)
{
    ivm_map_t key = {.ref = (char *)ref};
    ivmError_t status = IVM_ERROR_INVALID_VALUE;
    void *node;

    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    node = tfind(&key, &ivm_ctx.maps, ivm_maps_cmp_ref);
    if (node != NULL) {
        ivm_map_t *m = *(ivm_map_t **)node;
        tdelete(m, &ivm_ctx.maps, ivm_maps_cmp_ref);
        if (m->flags & IVM_MAP_GPU) {
            tdelete(m, &ivm_ctx.maps_host, ivm_maps_cmp_host);
        }
        --ivm_ctx.nmaps;
        *map_p = *m;
        free(m);
        status = IVM_SUCCESS;
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return status;
}

ivmError_t ivm_maps_lookup_host(const void *addr, size_t size, ivm_map_t *map_p)
{
    ivm_map_t key = {.host = (char *)addr};
    const ivm_map_t *m;
    ivmError_t status = IVM_ERROR_INVALID_VALUE;

    pthread_rwlock_rdlock(&ivm_ctx.maps_lock);
    m = ivm_maps_find(&ivm_ctx.maps_host, &key, size, ivm_map_host, ivm_maps_cmp_in_host);
    if (m != NULL) {
        *map_p = *m;
        status = IVM_SUCCESS;
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return status;
}

void ivm_map_release(const ivm_map_t *map)
{
    const ivm_gpu_ops_t *ops = ivm_gpu_ops_for(map->flags);

    if (ops != NULL) {
        ops->release(map->map_base, map->map_len);
        munmap(map->host_base, map->host_len);
    } else {
        munmap(map->map_base, map->map_len);
    }
}

static void ivm_maps_release_free(void *node)
{
    ivm_map_release(node);
    free(node);
}

static void ivm_maps_keep(void *node)
{
    (void)node; /* the same mapping is released through the tree by ref */
}

void ivm_maps_clear(void)
{
    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    tdestroy(ivm_ctx.maps_host, ivm_maps_keep);
    tdestroy(ivm_ctx.maps, ivm_maps_release_free);
    ivm_ctx.maps      = NULL;
    ivm_ctx.maps_host = NULL;
    ivm_ctx.nmaps     = 0;
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
}
