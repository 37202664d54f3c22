/*
 * NUMA placement of object copies: a master's pages prefer the NUMA node of
 * the device whose PE allocated it, a mirror's those of the device of the
 * first PE that maps it. The policy is set on the memfd itself (a shmem
 * object keeps the policy mbind gives one of its mappings), so every later
 * mapping, the PEs' included, allocates there. Nothing is done on a machine
 * with one NUMA node.
 */
#include <numaif.h>
#include <sys/mman.h>

#include "ivmd.h"
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
    static int warned;
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
    if (mbind(p, size, MPOL_PREFERRED, mask, 8 * sizeof(mask), 0) != 0 && !warned) {
        warned = 1;
        ivm_warn("cannot place object memory on NUMA node %d: %m (left to the kernel)", numa);
    }
    munmap(p, size);
}
