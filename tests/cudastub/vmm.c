/*
 * cudastub virtual memory management: cuMemCreate/Release, export/import of
 * POSIX fd handles, address reservations, mappings and access (stub.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stub.h"

#define STUB_MEMFD_PREFIX "cudastub-gpu"

static stub_alloc_t *stub_alloc_find(CUmemGenericAllocationHandle h)
{
    stub_alloc_t *a;

    for (a = stub.allocs; a != NULL; a = a->next) {
        if (a->handle == h) {
            return a;
        }
    }
    return NULL;
}

/* A handle the caller may use: known and not released (use after release is reported). */
static stub_alloc_t *stub_alloc_live(const char *call, CUmemGenericAllocationHandle h)
{
    stub_alloc_t *a = stub_alloc_find(h);

    if (a == NULL) {
        stub_violation("%s: 0x%llx is not an allocation handle", call, (unsigned long long)h);
    } else if (a->released) {
        stub_violation("%s: allocation handle 0x%llx used after cuMemRelease", call,
                       (unsigned long long)h);
        a = NULL;
    }
    return a;
}

/* The memory goes once it is released and no mapping holds it. */
static void stub_alloc_drop(stub_alloc_t *a)
{
    if (!a->released || a->maps > 0 || a->fd < 0) {
        return;
    }
    close(a->fd);
    a->fd = -1;
    if (a->created) {
        stub_dev_give(&stub.devs[a->phys], a->size);
    }
}

static int stub_aligned(size_t v)
{
    return v % stub.granularity == 0;
}

/* A device allocation's properties: pinned, on a visible device, handle
 * types this platform has (none or POSIX fd). */
static CUresult stub_prop_check(const char *call, const CUmemAllocationProp *prop)
{
    if (prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
        stub_violation("%s: prop must describe a pinned allocation on a device", call);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->location.id < 0 || prop->location.id >= stub.nvisible) {
        stub_violation("%s: prop->location.id %d is not a visible device", call,
                       prop->location.id);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if ((prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
        stub_violation("%s: requestedHandleTypes 0x%x: only POSIX file descriptors exist on "
                       "Linux", call, (unsigned)prop->requestedHandleTypes);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

/* cuMemGetAllocationGranularity: valid prop; option MINIMUM or RECOMMENDED. */
STUB_API CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                const CUmemAllocationProp *prop,
                                                CUmemAllocationGranularity_flags option)
{
    CUresult rc = stub_enter("cuMemGetAllocationGranularity");

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_prop_check("cuMemGetAllocationGranularity", prop);
    if (rc == CUDA_SUCCESS && option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
        option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) {
        *granularity = stub.granularity;
    }
    stub_leave();
    return rc;
}

static CUresult stub_create_checks(size_t size, const CUmemAllocationProp *prop,
                                   unsigned long long flags)
{
    CUresult rc = stub_prop_check("cuMemCreate", prop);

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (flags != 0) {
        stub_violation("cuMemCreate: flags must be zero (got %llu)", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (size == 0 || !stub_aligned(size)) {
        stub_violation("cuMemCreate: size %zu is not a multiple of the granularity %zu "
                       "(cuMemGetAllocationGranularity)", size, stub.granularity);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* cuMemCreate: size a multiple of the MINIMUM granularity; flags zero; a
 * device location; OUT_OF_MEMORY when the device has not that much free. */
STUB_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc = stub_enter("cuMemCreate");
    stub_device_t *d;
    stub_alloc_t *a;
    char name[64];

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_create_checks(size, prop, flags);
    if (rc != CUDA_SUCCESS) {
        goto out;
    }
    d = &stub.devs[stub.visible[prop->location.id]];
    if (d->no_vmm || ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
                      d->no_fd)) {
        /* cuMemCreate: CUDA_ERROR_NOT_SUPPORTED on a device without VMM, or
         * for a handle type the device does not support (the attributes
         * say so; check them first). */
        stub_violation("cuMemCreate: GPU %d does not support %s (its device attribute says 0)",
                       d->phys, d->no_vmm ? "virtual memory management" : "POSIX fd handles");
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto out;
    }
    if (!stub_dev_take(d, size)) {
        stub_note("cuMemCreate: %zu bytes on GPU %d: out of memory (%zu of %zu free)", size,
                  d->phys, stub_dev_free(d), d->capacity);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    a = calloc(1, sizeof(*a));
    snprintf(name, sizeof(name), STUB_MEMFD_PREFIX "%d", d->phys);
    if (a == NULL || (a->fd = memfd_create(name, MFD_CLOEXEC)) < 0 ||
        ftruncate(a->fd, (off_t)size) != 0) {
        if (a != NULL && a->fd >= 0) {
            close(a->fd);
        }
        free(a);
        stub_dev_give(d, size);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    a->handle  = stub.next_handle++;
    a->size    = size;
    a->phys    = d->phys;
    a->created = 1;
    a->types   = prop->requestedHandleTypes;
    a->next    = stub.allocs;
    stub.allocs = a;
    *handle = a->handle;
out:
    stub_leave();
    return rc;
}

/* cuMemRelease: a handle from cuMemCreate or cuMemImportFromShareableHandle,
 * released once ("If handle is not a valid handle the behavior is
 * undefined": reported here); the memory stays while mappings hold it. */
STUB_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = stub_enter("cuMemRelease");
    stub_alloc_t *a;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    a = stub_alloc_find(handle);
    if (a == NULL || a->released) {
        stub_violation("cuMemRelease: 0x%llx %s", (unsigned long long)handle,
                       a == NULL ? "is not an allocation handle" : "was already released "
                       "(double release)");
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        a->released = 1;
        stub_alloc_drop(a);
    }
    stub_leave();
    return rc;
}

/* cuMemExportToShareableHandle: flags zero; handleType one of those
 * requested at cuMemCreate (requestedHandleTypes); POSIX fd: a new fd. */
STUB_API CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                               CUmemAllocationHandleType type,
                                               unsigned long long flags)
{
    CUresult rc = stub_enter("cuMemExportToShareableHandle");
    stub_alloc_t *a;
    int fd;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    a = stub_alloc_live("cuMemExportToShareableHandle", handle);
    if (a == NULL || shareable == NULL || flags != 0) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((a->types & (unsigned long long)type) == 0 ||
               type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        stub_violation("cuMemExportToShareableHandle: handle type 0x%x was not requested at "
                       "cuMemCreate (requestedHandleTypes 0x%llx)", (unsigned)type, a->types);
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if ((fd = fcntl(a->fd, F_DUPFD, 0)) < 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *(int *)shareable = fd;
    }
    stub_leave();
    return rc;
}

/* The physical GPU of one of our memfds (by its name), -1 if it is none. */
static int stub_fd_phys(int fd)
{
    char path[64], target[128];
    ssize_t n;
    int phys;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        return -1;
    }
    target[n] = '\0';
    if (sscanf(target, "/memfd:" STUB_MEMFD_PREFIX "%d", &phys) != 1 || phys < 0 ||
        phys >= stub.ndevs) {
        return -1;
    }
    return phys;
}

/* cuMemImportFromShareableHandle: a handle of shHandleType (POSIX fd: the
 * int itself in osHandle); each import is paired with a cuMemRelease. The
 * caller keeps its fd (and closes it). */
STUB_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                 void *osHandle, CUmemAllocationHandleType type)
{
    CUresult rc = stub_enter("cuMemImportFromShareableHandle");
    int fd = (int)(intptr_t)osHandle, phys;
    stub_alloc_t *a;
    struct stat st;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        stub_violation("cuMemImportFromShareableHandle: handle type 0x%x is not a POSIX fd",
                       (unsigned)type);
        rc = CUDA_ERROR_NOT_SUPPORTED;
        goto out;
    }
    phys = stub_fd_phys(fd);
    if (phys < 0 || fstat(fd, &st) != 0) {
        stub_violation("cuMemImportFromShareableHandle: fd %d is not a CUDA shareable handle",
                       fd);
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL || (a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(a);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    a->handle = stub.next_handle++;
    a->size   = (size_t)st.st_size;
    a->phys   = phys;
    a->types  = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    a->next   = stub.allocs;
    stub.allocs = a;
    *handle = a->handle;
out:
    stub_leave();
    return rc;
}

/* ------------------------------------------------------------- address ranges */

static stub_range_t *stub_reserved_at(uintptr_t p, size_t size)
{
    stub_range_t *r;

    for (r = stub.reserved; r != NULL; r = r->next) {
        if (p >= r->base && p + size <= r->base + r->size && p + size >= p) {
            return r;
        }
    }
    return NULL;
}

/* cuMemAddressReserve: size a multiple of the host page size, alignment a
 * power of two or 0, flags zero; addr only a hint. The range is PROT_NONE. */
STUB_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                      CUdeviceptr addr, unsigned long long flags)
{
    CUresult rc = stub_enter("cuMemAddressReserve");
    size_t page = (size_t)sysconf(_SC_PAGESIZE), align, span;
    uintptr_t base, start;
    stub_range_t *r;
    void *p;

    (void)addr;
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (size == 0 || size % page != 0 || (alignment & (alignment - 1)) != 0 || flags != 0) {
        stub_violation("cuMemAddressReserve: size %zu must be a multiple of the page size, "
                       "alignment %zu a power of two or 0, flags 0 (got %llu)", size, alignment,
                       flags);
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    align = alignment > stub.granularity ? alignment : stub.granularity;
    span  = size + align;
    p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    r = calloc(1, sizeof(*r));
    if (p == MAP_FAILED || r == NULL) {
        if (p != MAP_FAILED) {
            munmap(p, span);
        }
        free(r);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    base  = (uintptr_t)p;
    start = (base + align - 1) & ~(uintptr_t)(align - 1);
    if (start > base) {
        munmap(p, start - base);
    }
    if (start + size < base + span) {
        munmap((void *)(start + size), base + span - start - size);
    }
    r->base = start;
    r->size = size;
    r->next = stub.reserved;
    stub.reserved = r;
    *ptr = (CUdeviceptr)start;
out:
    stub_leave();
    return rc;
}

static unsigned stub_maps_in(uintptr_t base, size_t size)
{
    stub_map_t *m;
    unsigned n = 0;

    for (m = stub.maps; m != NULL; m = m->next) {
        n += m->base < base + size && base < m->base + m->size;
    }
    return n;
}

/* cuMemAddressFree: ptr and size exactly as cuMemAddressReserve gave and was
 * given; a range still mapped is reported (unmap first). */
STUB_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = stub_enter("cuMemAddressFree");
    stub_range_t **pp, *r;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    for (pp = &stub.reserved; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == (uintptr_t)ptr) {
            break;
        }
    }
    r = *pp;
    if (r == NULL || r->size != size) {
        stub_violation("cuMemAddressFree: 0x%llx+%zu is not a reservation of cuMemAddressReserve "
                       "(freed twice, or another size)", (unsigned long long)ptr, size);
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (stub_maps_in(r->base, r->size) > 0) {
        stub_violation("cuMemAddressFree: 0x%llx+%zu still has %u mapping(s) (cuMemUnmap "
                       "first)", (unsigned long long)ptr, size, stub_maps_in(r->base, r->size));
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        *pp = r->next;
        munmap((void *)r->base, r->size);
        free(r);
    }
    stub_leave();
    return rc;
}

static CUresult stub_map_checks(CUdeviceptr ptr, size_t size, size_t offset,
                                const stub_alloc_t *a, unsigned long long flags)
{
    if (flags != 0 || offset != 0) {
        stub_violation("cuMemMap: offset (currently) and flags must be zero (got %zu, %llu)",
                       offset, flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (size == 0 || !stub_aligned(size) || !stub_aligned((size_t)ptr)) {
        stub_violation("cuMemMap: ptr 0x%llx and size %zu must be multiples of the granularity "
                       "%zu", (unsigned long long)ptr, size, stub.granularity);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (offset + size > a->size) {
        stub_violation("cuMemMap: offset+size %zu is beyond the allocation's %zu bytes",
                       offset + size, a->size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (stub_reserved_at((uintptr_t)ptr, size) == NULL) {
        stub_violation("cuMemMap: 0x%llx+%zu is not inside a reservation of cuMemAddressReserve",
                       (unsigned long long)ptr, size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (stub_maps_in((uintptr_t)ptr, size) > 0) {
        stub_violation("cuMemMap: 0x%llx+%zu is already mapped (only unmapped reservations)",
                       (unsigned long long)ptr, size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* cuMemMap: "This range must be an address reservation previously reserved
 * with cuMemAddressReserve" and not mapped; ptr, size, offset multiples of
 * the granularity, offset zero, offset + size within the allocation, flags
 * zero. The mapping has no access until cuMemSetAccess (PROT_NONE here). */
STUB_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CUresult rc = stub_enter("cuMemMap");
    stub_alloc_t *a;
    stub_map_t *m;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    a = stub_alloc_live("cuMemMap", handle);
    rc = a == NULL ? CUDA_ERROR_INVALID_VALUE : stub_map_checks(ptr, size, offset, a, flags);
    if (rc != CUDA_SUCCESS) {
        goto out;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL || mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd,
                          (off_t)offset) == MAP_FAILED) {
        free(m);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    m->base  = (uintptr_t)ptr;
    m->size  = size;
    m->alloc = a;
    m->next  = stub.maps;
    stub.maps = m;
    a->maps++;
out:
    stub_leave();
    return rc;
}

stub_map_t *stub_map_find(uintptr_t addr)
{
    stub_map_t *m;

    for (m = stub.maps; m != NULL; m = m->next) {
        if (addr >= m->base && addr < m->base + m->size) {
            return m;
        }
    }
    return NULL;
}

/* The mappings [ptr, ptr+size) covers, without a gap: their count, 0 if a
 * byte is unmapped; whole: they start and end at its ends. */
static int stub_span(uintptr_t ptr, size_t size, int *whole_p)
{
    uintptr_t at = ptr;
    stub_map_t *m;
    int n = 0;

    *whole_p = 1;
    while (at < ptr + size) {
        m = stub_map_find(at);
        if (m == NULL) {
            return 0;
        }
        if ((at == ptr && m->base != ptr) || m->base + m->size > ptr + size) {
            *whole_p = 0;
        }
        at = m->base + m->size;
        ++n;
    }
    return n;
}

static CUresult stub_access_checks(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count)
{
    size_t i;
    int whole;

    if (desc == NULL || count == 0 || size == 0 || stub_span((uintptr_t)ptr, size, &whole) == 0) {
        stub_violation("cuMemSetAccess: 0x%llx+%zu is not a fully mapped range (cuMemMap "
                       "first)", (unsigned long long)ptr, size);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; i < count; ++i) {
        const CUmemLocation *loc = &desc[i].location;
        if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE || loc->id < 0 || loc->id >= stub.nvisible) {
            stub_violation("cuMemSetAccess: desc[%zu] names no visible device (type %d, id %d)",
                           i, (int)loc->type, loc->id);
            return CUDA_ERROR_INVALID_DEVICE;
        }
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static CUresult stub_access_set(stub_map_t *m, const CUmemAccessDesc *d)
{
    int phys = stub.visible[d->location.id];
    uint32_t bit = 1u << d->location.id;

    if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && phys != m->alloc->phys && stub.no_peer) {
        stub_violation("cuMemSetAccess: device %d (GPU %d) cannot access memory of GPU %d (no "
                       "peer access)", d->location.id, phys, m->alloc->phys);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    m->access = d->flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? m->access & ~bit : m->access | bit;
    return CUDA_SUCCESS;
}

/* cuMemSetAccess: "The range must be a fully mapped address range";
 * locations are visible devices; a device without peer access to the
 * memory's GPU is CUDA_ERROR_INVALID_DEVICE (CUDASTUB_NO_PEER). */
STUB_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                 size_t count)
{
    CUresult rc = stub_enter("cuMemSetAccess");
    uintptr_t at;
    size_t i;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    rc = stub_access_checks(ptr, size, desc, count);
    for (at = (uintptr_t)ptr; rc == CUDA_SUCCESS && at < (uintptr_t)ptr + size;) {
        stub_map_t *m = stub_map_find(at);
        for (i = 0; i < count && rc == CUDA_SUCCESS; ++i) {
            rc = stub_access_set(m, &desc[i]);
        }
        mprotect((void *)m->base, m->size, m->access != 0 ? PROT_READ | PROT_WRITE : PROT_NONE);
        at = m->base + m->size;
    }
    stub_leave();
    return rc;
}

/* cuMemUnmap: "The range must be the entire contiguous address range that
 * was mapped to"; it becomes a reservation again (PROT_NONE), and memory
 * released with no mapping left is freed. */
STUB_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = stub_enter("cuMemUnmap");
    stub_map_t **pp, *m;
    int whole;

    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    if (size == 0 || stub_span((uintptr_t)ptr, size, &whole) == 0 || !whole) {
        stub_violation("cuMemUnmap: 0x%llx+%zu is not the entire range of one or more "
                       "mappings (unmapped twice, or a part)", (unsigned long long)ptr, size);
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (pp = &stub.maps; *pp != NULL;) {
        m = *pp;
        if (m->base < (uintptr_t)ptr || m->base >= (uintptr_t)ptr + size) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        mmap((void *)m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
             MAP_NORESERVE, -1, 0);
        m->alloc->maps--;
        stub_alloc_drop(m->alloc);
        free(m);
    }
out:
    stub_leave();
    return rc;
}

/* For copies: [ptr, ptr+size) mapped, and accessible to device `ordinal`.
 * Without access a GPU faults: so does the stand-in (SIGSEGV), after saying why. */
CUresult stub_dev_check(const char *call, uintptr_t ptr, size_t size, int ordinal)
{
    uintptr_t at = ptr;
    stub_map_t *m;

    while (at < ptr + size) {
        m = stub_map_find(at);
        if (m == NULL) {
            stub_violation("%s: device address 0x%lx+%zu is not mapped (cuMemMap)%s", call,
                           (unsigned long)ptr, size,
                           stub_reserved_at(at, 1) != NULL ? "; it is a bare reservation" : "");
            return CUDA_ERROR_INVALID_VALUE;
        }
        if ((m->access & (1u << ordinal)) == 0) {
            stub_violation("%s: device address 0x%lx is mapped but device %d has no access "
                           "(cuMemSetAccess): illegal address, faulting as a GPU would", call,
                           (unsigned long)at, ordinal);
            pthread_mutex_unlock(&stub.lock);
            raise(SIGSEGV);
            pthread_mutex_lock(&stub.lock);
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        }
        at = m->base + m->size;
    }
    return CUDA_SUCCESS;
}

/* At exit: what the process still holds. */
void stub_vmm_report(void)
{
    stub_alloc_t *a;
    stub_map_t *m;
    stub_range_t *r;

    for (a = stub.allocs; a != NULL; a = a->next) {
        if (!a->released) {
            stub_violation("leak: allocation handle 0x%llx (%zu bytes on GPU %d, %s) never "
                           "released (cuMemRelease)", (unsigned long long)a->handle, a->size,
                           a->phys, a->created ? "cuMemCreate" : "imported");
        }
    }
    for (m = stub.maps; m != NULL; m = m->next) {
        stub_violation("leak: mapping 0x%lx+%zu never unmapped (cuMemUnmap)",
                       (unsigned long)m->base, m->size);
    }
    for (r = stub.reserved; r != NULL; r = r->next) {
        stub_violation("leak: reservation 0x%lx+%zu never freed (cuMemAddressFree)",
                       (unsigned long)r->base, r->size);
    }
    for (r = stub.pinned; r != NULL; r = r->next) {
        stub_violation("leak: host range %p+%zu never unregistered (cuMemHostUnregister)",
                       (void *)r->base, r->size);
    }
}

/* The records of released allocations stay until exit so that a use after
 * release is reported; at exit, after the report, they go (so that the
 * sanitizer pass's leak check sees only what the driver's user leaked). */
void stub_vmm_forget_released(void)
{
    stub_alloc_t **pp = &stub.allocs;

    while (*pp != NULL) {
        stub_alloc_t *a = *pp;

        if (a->released && a->maps == 0) {
            *pp = a->next;
            if (a->fd >= 0) {
                close(a->fd);
            }
            free(a);
        } else {
            pp = &a->next;
        }
    }
}
