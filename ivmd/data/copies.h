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
