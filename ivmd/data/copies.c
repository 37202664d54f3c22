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

/* Time a copy's collapse may take, ns: the kernel compacts memory to find
 * free 2 MiB pages, which took 2 s for 1 GiB on a fragmented test VM (60-70 ms
 * once compacted; posix_fallocate of 1 GiB in 4 KiB pages: 70-290 ms). Past
 * it the rest of the copy is reserved in 4 KiB pages. */
#define IVMD_HUGE_BUDGET_NS(len) (5000000ull + ((len) >> 20) * 250000ull)

/* Reserve [0, len) of fd (len a multiple of 2 MiB) in 2 MiB pages: a byte
 * written at the start of each (so that each has a page for the kernel to
 * collapse), then a window at a time mapped, collapsed (which allocates and
 * zeroes the 2 MiB page and maps it in this process) and unmapped, so the
 * daemon's resident memory grows by one window, not by the copy. Returns the
 * bytes reserved so (a prefix of whole windows, len when all went well);
 * *err_p gets the errno value that stopped it (ETIMEDOUT: the budget). */
static uint64_t ivmd_huge_reserve(int fd, uint64_t len, int *err_p)
{
    uint64_t off, k, t0 = ivmd_now_ns();
    size_t win;
    void *p;
    int rc;

    *err_p = 0;
    for (off = 0; off < len; off += win) {
        if (off > 0 && ivmd_now_ns() - t0 > IVMD_HUGE_BUDGET_NS(len)) {
            *err_p = ETIMEDOUT;
            return off;
        }
        win = (size_t)(len - off < IVMD_HUGE_WINDOW ? len - off : IVMD_HUGE_WINDOW);
        for (k = 0; k < win; k += IVM_HUGE_PAGE_SIZE) {
            if (pwrite(fd, "", 1, (off_t)(off + k)) != 1) {
                *err_p = errno;
                return off;
            }
        }
        p  = ivm_hugemap_mmap(win, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
        rc = p == MAP_FAILED ? errno : madvise(p, win, MADV_COLLAPSE) == 0 ? 0 : errno;
        if (p != MAP_FAILED) {
            munmap(p, win);
        }
        if (rc != 0) {
            *err_p = rc;
            return off;
        }
    }
    return len;
}

ivmError_t ivmd_copies_huge_open(ivmd_data_t *dp, const char *mode, int reserve_memory,
                                 char *detail, size_t detail_len)
{
    int on = mode != NULL && strcmp(mode, "on") == 0;
    int fd, rc = 0;

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
            snprintf(detail, detail_len, "--huge-pages on needs --reserve-memory: 2 MiB "
                     "pages are made when an object's memory is reserved");
            return IVM_ERROR_INVALID_VALUE;
        }
        ivm_info("objects stay in 4 KiB pages: --reserve-memory is off");
        return IVM_SUCCESS;
    }
    fd = memfd_create("ivmd-huge-probe", MFD_CLOEXEC);
    if (fd < 0) {
        rc = errno;
    } else {
        if (ftruncate(fd, (off_t)IVM_HUGE_PAGE_SIZE) != 0) {
            rc = errno;
        } else {
            (void)ivmd_huge_reserve(fd, IVM_HUGE_PAGE_SIZE, &rc);
        }
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

int ivmd_copies_reserve(void *arg, int fd, uint64_t size)
{
    ivmd_data_t *dp = arg;
    uint64_t whole = dp->huge ? size & ~(uint64_t)(IVM_HUGE_PAGE_SIZE - 1) : 0, done = 0;
    int err;

    if (whole > 0) {
        done = ivmd_huge_reserve(fd, whole, &err);
        dp->huge_bytes += done;
        if (done < whole) {
            dp->huge_failed++;
            ivm_warn_limited("%llu of a copy's %llu bytes stay in 4 KiB pages: %s",
                             (unsigned long long)(size - done), (unsigned long long)size,
                             err == ETIMEDOUT ? "the kernel took too long to find free 2 MiB "
                                                "pages (fragmented memory)"
                                              : strerror(err));
        }
    }
    return done < size ? posix_fallocate(fd, (off_t)done, (off_t)(size - done)) : 0;
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
