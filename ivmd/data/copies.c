/*
 * The memory of objects' copies (data/copies.h). The NUMA policy is set on
 * the memfd itself (a shmem object keeps the policy mbind gives one of its
 * mappings), so every later mapping, the PEs' included, allocates there.
 */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/copies.h"
#include "hugemap.h"
#include "log.h"
#include "topo.h"
#include "transport/loop.h"

#define IVMD_TOUCH_PAGES 64 /* pages of the probe's memfd */
#define IVMD_TOUCH_TRIES 5  /* the least of this many tries counts */

_Static_assert(sizeof(((ivmd_data_t *)0)->touch_ns) == IVMD_TOUCH_KINDS * sizeof(uint32_t),
               "a figure per kind of touch");

/* One try of one kind: mmap (and mprotect for ro) and the first touch of
 * every page, ns per page; UINT64_MAX if a call failed. */
static uint64_t ivmd_touch_try(int fd, size_t page, ivmd_touch_kind_t kind)
{
    size_t len = IVMD_TOUCH_PAGES * page;
    int ro = kind == IVMD_TOUCH_RO_READ || kind == IVMD_TOUCH_RO_WRITE;
    int write = kind == IVMD_TOUCH_RW_WRITE || kind == IVMD_TOUCH_RO_WRITE;
    uint64_t t0 = ivmd_now_ns(), t1;
    volatile unsigned char *p;
    unsigned sum = 0;
    size_t i;

    p = mmap(NULL, len, ro ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
             fd, 0);
    if (p == MAP_FAILED) {
        return UINT64_MAX;
    }
    if (ro && mprotect((void *)p, len, PROT_READ | PROT_WRITE) != 0) {
        munmap((void *)p, len);
        return UINT64_MAX;
    }
    for (i = 0; i < len; i += page) {
        if (write) {
            p[i] = (unsigned char)i;
        } else {
            sum += p[i];
        }
    }
    t1 = ivmd_now_ns();
    munmap((void *)p, len);
    (void)sum;
    return (t1 - t0) / IVMD_TOUCH_PAGES;
}

void ivmd_copies_probe_touch(ivmd_data_t *dp)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t best[IVMD_TOUCH_KINDS];
    int fd, k, t;

    dp->map_flags = 0;
    memset(dp->touch_ns, 0, sizeof(dp->touch_ns));
    for (k = 0; k < IVMD_TOUCH_KINDS; ++k) {
        best[k] = UINT64_MAX;
    }
    fd = memfd_create("ivmd-touch-probe", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)(IVMD_TOUCH_PAGES * page)) == 0) {
        /* The kinds in turn, so that noise falls on all of them alike; the
           first write of all makes the memfd's pages. */
        (void)ivmd_touch_try(fd, page, IVMD_TOUCH_RW_WRITE);
        for (t = 0; t < IVMD_TOUCH_TRIES; ++t) {
            for (k = 0; k < IVMD_TOUCH_KINDS; ++k) {
                uint64_t ns = ivmd_touch_try(fd, page, (ivmd_touch_kind_t)k);
                best[k] = ns < best[k] ? ns : best[k];
            }
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    for (k = 0; k < IVMD_TOUCH_KINDS; ++k) {
        if (best[k] == UINT64_MAX) {
            ivm_warn("cannot measure the first touch of a mapping (memfd, mmap or mprotect "
                     "failed): maps are populated writable");
            memset(dp->touch_ns, 0, sizeof(dp->touch_ns));
            return;
        }
        dp->touch_ns[k] = best[k] > UINT32_MAX ? UINT32_MAX : (uint32_t)best[k];
    }
    if (3 * best[IVMD_TOUCH_RO_READ] <= 2 * best[IVMD_TOUCH_RW_READ] &&
        2 * best[IVMD_TOUCH_RO_WRITE] <= 3 * best[IVMD_TOUCH_RW_WRITE]) {
        dp->map_flags = IVM_MAP_READ_FIRST;
    }
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older C libraries lack the name */
#endif

#define IVMD_HUGE_WINDOW (8 * IVM_HUGE_PAGE_SIZE) /* bytes collapsed per mapping */

/* The whole 2 MiB pages of [0, size) of fd put in 2 MiB pages: 0, or an
 * errno value. A window of the copy at a time is mapped, collapsed (which
 * maps it in this process) and unmapped, so the daemon's resident memory
 * grows by one window, not by the copy. */
static int ivmd_huge_collapse(int fd, uint64_t size)
{
    uint64_t end = size & ~(uint64_t)(IVM_HUGE_PAGE_SIZE - 1), off;
    size_t len;
    void *p;
    int rc;

    for (off = 0; off < end; off += len) {
        len = (size_t)(end - off < IVMD_HUGE_WINDOW ? end - off : IVMD_HUGE_WINDOW);
        p   = ivm_hugemap_mmap(len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
        if (p == MAP_FAILED) {
            return errno;
        }
        rc = madvise(p, len, MADV_COLLAPSE) == 0 ? 0 : errno;
        munmap(p, len);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

ivmError_t ivmd_copies_huge_open(ivmd_data_t *dp, const char *mode, int reserve_memory,
                                 char *detail, size_t detail_len)
{
    int on = mode != NULL && strcmp(mode, "on") == 0;
    int fd, rc;

    dp->huge = 0;
    if (mode == NULL || strcmp(mode, "off") == 0) {
        return IVM_SUCCESS;
    }
    if (!on && strcmp(mode, "auto") != 0) {
        snprintf(detail, detail_len, "--huge-pages '%s' is not auto, on or off", mode);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (!reserve_memory) {
        if (on) {
            snprintf(detail, detail_len, "--huge-pages on needs --reserve-memory: only "
                     "reserved pages can be put in 2 MiB pages");
            return IVM_ERROR_INVALID_VALUE;
        }
        ivm_info("objects stay in 4 KiB pages: --reserve-memory is off");
        return IVM_SUCCESS;
    }
    fd = memfd_create("ivmd-huge-probe", MFD_CLOEXEC);
    if (fd < 0) {
        rc = errno;
    } else {
        rc = ftruncate(fd, (off_t)IVM_HUGE_PAGE_SIZE) != 0 ? errno
             : posix_fallocate(fd, 0, (off_t)IVM_HUGE_PAGE_SIZE);
        rc = rc != 0 ? rc : ivmd_huge_collapse(fd, IVM_HUGE_PAGE_SIZE);
        close(fd);
    }
    if (rc != 0) {
        if (on) {
            snprintf(detail, detail_len, "--huge-pages on: this kernel does not put shared "
                     "memory in 2 MiB pages: madvise(MADV_COLLAPSE) on a memfd: %s (Linux "
                     "6.1 or later with transparent huge pages, "
                     "/sys/kernel/mm/transparent_hugepage/shmem_enabled not 'deny')",
                     strerror(rc));
            return IVM_ERROR_UNSUPPORTED;
        }
        ivm_info("objects stay in 4 KiB pages: the kernel does not collapse a memfd into 2 "
                 "MiB pages (madvise(MADV_COLLAPSE): %s)", strerror(rc));
        return IVM_SUCCESS;
    }
    dp->huge = 1;
    return IVM_SUCCESS;
}

void ivmd_copies_huge(void *arg, int fd, uint64_t size)
{
    ivmd_data_t *dp = arg;
    int rc;

    if (!dp->huge || size < IVM_HUGE_PAGE_SIZE) {
        return;
    }
    rc = ivmd_huge_collapse(fd, size);
    if (rc != 0) {
        dp->huge_failed++;
        ivm_warn_limited("a copy of %llu bytes stays in 4 KiB pages: madvise(MADV_COLLAPSE): "
                         "%s", (unsigned long long)size, strerror(rc));
        return;
    }
    dp->huge_bytes += size & ~(uint64_t)(IVM_HUGE_PAGE_SIZE - 1);
}

int ivmd_numa_of_pe(const ivmd_job_t *job, const ivmd_pe_t *pe)
{
    const ivm_cpu_device_t *dev;

    if (job == NULL || pe == NULL) {
        return -1;
    }
    /* A GPU PE's host threads, and so its node copies, are on device 0. */
    dev = IVM_DEV_IS_GPU(pe->devtype) ? &job->devs[0] : &job->devs[pe->devtype];
    return dev->numa;
}

void ivmd_numa_place(int fd, uint64_t size, int numa)
{
    unsigned long mask[4] = {0, 0, 0, 0};
    void *p;

    if (numa < 0 || numa >= (int)(8 * sizeof(mask)) || size == 0 ||
        ivm_topo_numa_count() < 2) {
        return;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        return;
    }
    mask[numa / (8 * sizeof(mask[0]))] |= 1ul << (numa % (8 * sizeof(mask[0])));
    if (mbind(p, size, MPOL_PREFERRED, mask, 8 * sizeof(mask), 0) != 0) {
        ivm_warn_limited("cannot place object memory on NUMA node %d: %m (left to the kernel)",
                         numa);
    }
    munmap(p, size);
}

ivmError_t ivmd_copies_mirror_mem(ivmd_data_t *dp, ivmd_job_t *job, ivmd_obj_t *obj, int numa,
                                  char *detail, size_t detail_len)
{
    ivmError_t status;
    int fd;

    if (obj->fd >= 0) {
        return IVM_SUCCESS;
    }
    status = ivmd_quota_obj_mem(dp->quota, job, obj->name != NULL ? obj->name : "(mirror)",
                                 obj->size, 1, numa, &fd, detail, detail_len);
    if (status != IVM_SUCCESS) {
        ivm_warn_limited("no mirror of %llu bytes for job %u: %s",
                         (unsigned long long)obj->size, job->id, detail);
        return status;
    }
    obj->fd = fd;
    ivmd_data_copy_made(dp, job->id, obj);
    return IVM_SUCCESS;
}

ivmd_obj_t *ivmd_copies_xfer_obj(ivmd_data_t *dp, const ivm_peer_xfer_t *x)
{
    ivmd_job_t *job = ivmd_job_find(dp->reg, x->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, x->obj) : NULL;

    if (obj == NULL || obj->fd < 0 || x->off > obj->size || x->len > obj->size - x->off) {
        return NULL;
    }
    return obj;
}
