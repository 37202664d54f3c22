/*
 * data/copies: the memory of objects' copies on this node. A master is made
 * by MALLOC (the limits' object memory); a node mirror gets a memfd of the
 * object's size when it is first mapped here. NUMA placement: a master's
 * pages prefer the NUMA node of the device whose PE allocated it, a mirror's
 * those of the device of the first PE that maps it.
 */
#ifndef IVMD_DATA_COPIES_H
#define IVMD_DATA_COPIES_H

#include <stdint.h>

#include "data/data.h"

/* What a page of a fresh populated mapping of a copy costs on its first
 * touch here, ns: read or write, through a mapping made writable at once
 * (rw) or populated read-only and opened for writing after by mprotect
 * (ro). Under shadow paging (a paravirtualised guest such as PVM) the first
 * access through an entry populated writable costs about a page fault, a
 * first read after ro a fraction of it, and a first write the same; on bare
 * metal and with nested paging both cost the same, and ro only adds the
 * mprotect. */
typedef enum {
    IVMD_TOUCH_RW_READ,
    IVMD_TOUCH_RO_READ,
    IVMD_TOUCH_RW_WRITE,
    IVMD_TOUCH_RO_WRITE,
    IVMD_TOUCH_KINDS
} ivmd_touch_kind_t;

/* Measure the four (the least of a few tries over a small memfd, a few ms in
 * all) into dp->touch_ns and set dp->map_flags: IVM_MAP_READ_FIRST when a
 * first read costs at most 2/3 through ro and a first write at most 3/2 (the
 * mprotect makes the entries writable where the kernel needs no write
 * notification, as for memfds: writes cost the same either way, the bound only
 * catches a kernel that would fault them), so that the PEs populate their maps
 * read-only first. */
void ivmd_copies_probe_touch(ivmd_data_t *dp);

/* 2 MiB pages (--huge-pages auto|on|off). A PE is a fresh process: every
 * page of a copy it maps costs it a page table entry, and under shadow paging
 * a first touch that exits to the hypervisor (3.7-6 us a page on a PVM
 * guest). A copy in 2 MiB pages is mapped 512 pages to an entry (libivm
 * places its maps for them, common/hugemap.h): a first touch costs 0.03 us a
 * 4 KiB page there, and on any machine the TLB reaches 512 times as far.
 * Shared memory gets 2 MiB pages only where the administrator allows it
 * (transparent_hugepage/shmem_enabled is "never" by default);
 * madvise(MADV_COLLAPSE), Linux 6.1 on, puts a memfd's pages in 2 MiB pages
 * whatever that setting (but "deny"). A copy's memory is reserved so: a byte
 * written per 2 MiB, then collapsed, which allocates and zeroes each 2 MiB
 * page whole (5-9 ms for 64 MiB here, against 9-17 ms for posix_fallocate of
 * 4 KiB pages); its tail, and what the kernel refuses (memory too
 * fragmented, or slower than a budget), by posix_fallocate.
 * ivmd_copies_huge_open probes it on a 2 MiB memfd at start: mode "auto"
 * uses it where it works, "on" refuses to start where it does not, "off"
 * never. Both need --reserve-memory. IVM_SUCCESS, or an error with detail
 * saying why. */
ivmError_t ivmd_copies_huge_open(ivmd_data_t *dp, const char *mode, int reserve_memory,
                                 char *detail, size_t detail_len);
/* The quota's reserve callback (ctl/quota.h; arg: dp): every page of [0, size)
 * of fd made, the whole 2 MiB pages in 2 MiB pages when dp->huge. 0, or the
 * errno value of posix_fallocate. */
int ivmd_copies_reserve(void *arg, int fd, uint64_t size);

/* The NUMA node of a PE's device (-1: none or several). */
int ivmd_numa_of_pe(const ivmd_job_t *job, const ivmd_pe_t *pe);
/* Place an object copy's pages on NUMA node numa (nothing on one-node
 * machines, or for numa < 0). */
void ivmd_numa_place(int fd, uint64_t size, int numa);
/* Make sure a mirror has its memory, its pages on NUMA node numa (-1: any;
 * the limits of its job and node apply; on failure it has none, and detail
 * says why). */
ivmError_t ivmd_copies_mirror_mem(ivmd_data_t *dp, ivmd_job_t *job, ivmd_obj_t *obj, int numa,
                                  char *detail, size_t detail_len);
/* The copy a transfer message names, with its memory and range checked;
 * NULL if there is none. */
ivmd_obj_t *ivmd_copies_xfer_obj(ivmd_data_t *dp, const ivm_peer_xfer_t *x);

#endif /* IVMD_DATA_COPIES_H */
