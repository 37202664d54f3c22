/*
 * The memory of objects' copies (data/copies.h). The NUMA policy is set on
 * the memfd itself (a shmem object keeps the policy mbind gives one of its
 * mappings), so every later mapping, the PEs' included, allocates there.
 */
#include <numaif.h>
#include <sys/mman.h>

#include "data/copies.h"
#include "log.h"
#include "topo.h"

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
