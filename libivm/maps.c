/* The mapping table: sorted by reference for O(log n) lookups on the sync
 * fast path, under a reader-writer lock. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "libivm.h"

/* Index of the first mapping whose ref is > addr. */
static size_t ivm_maps_upper(const char *addr)
{
    size_t lo = 0, hi = ivm_ctx.nmaps;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ivm_ctx.maps[mid].ref <= addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

ivmError_t ivm_maps_add(const ivm_map_t *map)
{
    size_t at;

    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    if (ivm_ctx.nmaps == ivm_ctx.maps_cap) {
        size_t cap = ivm_ctx.maps_cap ? ivm_ctx.maps_cap * 2 : 16;
        ivm_map_t *maps = realloc(ivm_ctx.maps, cap * sizeof(*maps));
        if (maps == NULL) {
            pthread_rwlock_unlock(&ivm_ctx.maps_lock);
            return IVM_ERROR_NO_MEMORY;
        }
        ivm_ctx.maps     = maps;
        ivm_ctx.maps_cap = cap;
    }
    at = ivm_maps_upper(map->ref);
    memmove(&ivm_ctx.maps[at + 1], &ivm_ctx.maps[at],
            (ivm_ctx.nmaps - at) * sizeof(ivm_map_t));
    ivm_ctx.maps[at] = *map;
    ++ivm_ctx.nmaps;
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return IVM_SUCCESS;
}

ivmError_t ivm_maps_lookup(const void *addr, size_t size, ivm_map_t *map_p)
{
    const char *a = addr;
    ivmError_t status = IVM_ERROR_INVALID_VALUE;
    size_t at;

    pthread_rwlock_rdlock(&ivm_ctx.maps_lock);
    at = ivm_maps_upper(a);
    /* Mappings never overlap in the address space: only the one just below
     * addr can contain it. */
    if (at > 0) {
        const ivm_map_t *m = &ivm_ctx.maps[at - 1];
        if (a >= m->ref && size <= m->size && (size_t)(a - m->ref) <= m->size - size) {
            *map_p = *m;
            status = IVM_SUCCESS;
        }
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return status;
}

ivmError_t ivm_maps_take(const void *ref, ivm_map_t *map_p)
{
    ivmError_t status = IVM_ERROR_INVALID_VALUE;
    size_t at;

    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    at = ivm_maps_upper(ref);
    if (at > 0 && ivm_ctx.maps[at - 1].ref == (const char *)ref) {
        *map_p = ivm_ctx.maps[at - 1];
        memmove(&ivm_ctx.maps[at - 1], &ivm_ctx.maps[at],
                (ivm_ctx.nmaps - at) * sizeof(ivm_map_t));
        --ivm_ctx.nmaps;
        status = IVM_SUCCESS;
    }
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
    return status;
}

ivmError_t ivm_maps_lookup_host(const void *addr, size_t size, ivm_map_t *map_p)
{
    const char *a = addr;
    ivmError_t status = IVM_ERROR_INVALID_VALUE;
    size_t i;

    pthread_rwlock_rdlock(&ivm_ctx.maps_lock);
    for (i = 0; i < ivm_ctx.nmaps; ++i) {
        const ivm_map_t *m = &ivm_ctx.maps[i];
        if ((m->flags & IVM_MAP_GPU) && a >= m->host && size <= m->size &&
            (size_t)(a - m->host) <= m->size - size) {
            *map_p = *m;
            status = IVM_SUCCESS;
            break;
        }
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

void ivm_maps_clear(void)
{
    size_t i;

    pthread_rwlock_wrlock(&ivm_ctx.maps_lock);
    for (i = 0; i < ivm_ctx.nmaps; ++i) {
        ivm_map_release(&ivm_ctx.maps[i]);
    }
    free(ivm_ctx.maps);
    ivm_ctx.maps     = NULL;
    ivm_ctx.nmaps    = 0;
    ivm_ctx.maps_cap = 0;
    pthread_rwlock_unlock(&ivm_ctx.maps_lock);
}
