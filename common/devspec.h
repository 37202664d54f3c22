/*
 * CPU device specs: "0-7,8-11,12" is three CPU devices of 8, 4 and 1 cores.
 * A device is a core range "a-b" or a single core "a"; "+" joins ranges into
 * one device ("0-3+8-11"). An entry may end in ":PCT" (1..100): the device is
 * that share of its cores' time ("0,1:50,1:25": all of core 0, half of core
 * 1, a quarter of core 1; "0-3:50" is half of each of cores 0..3, two cores'
 * time in all). Devices may share a core only if their shares on it add up
 * to at most 100 (an entry without ":PCT" counts 100 on each of its cores).
 */
#ifndef IVM_COMMON_DEVSPEC_H
#define IVM_COMMON_DEVSPEC_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stddef.h>

#include "ivm.h"

#define IVM_DEVSPEC_MAX_DEVICES 64

typedef struct ivm_cpu_device {
    cpu_set_t cores;   /* the device's cores */
    int       ncores;
    int       percent; /* its share of each of its cores' time, 1..100 (100: whole cores) */
    int       numa;    /* the NUMA node holding all its cores; -1: several or unknown
                          (set by ivm_topo_devspec_parse) */
} ivm_cpu_device_t;

/* Parse spec into devs[0..*ndevs_p). ncpus_max bounds core numbers (cores
 * >= ncpus_max are rejected; pass 0 for no bound). Bad specs fail with
 * IVM_ERROR_INVALID_VALUE and a message in err that names the spec, the
 * faulty entry and the reason; *ndevs_p is then not written. */
ivmError_t ivm_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                             int max_devs, int *ndevs_p, char *err, size_t errlen);

/* Whether device k of devs[0..ndevs) may have share percent, the other
 * devices keeping theirs: IVM_SUCCESS, IVM_ERROR_NOT_FOUND (no device k),
 * IVM_ERROR_INVALID_VALUE (percent outside 1..100, or a core of k whose
 * shares would add up to more than 100), with the reason in err. */
ivmError_t ivm_devspec_share_check(const ivm_cpu_device_t *devs, int ndevs, int k,
                                   int percent, char *err, size_t errlen);

/* 1 if some device of devs[0..ndevs) is a share (percent < 100), else 0. */
int ivm_devspec_has_shares(const ivm_cpu_device_t *devs, int ndevs);

/* The default table: one device with every core the process may run on. */
void ivm_devspec_default(ivm_cpu_device_t *dev);

/* Format a device as a spec entry into buf: its cores ("0-3+8") and, for a
 * share, ":PCT" ("1:25"). Truncated to len bytes, always NUL-terminated. */
void ivm_devspec_format(const ivm_cpu_device_t *dev, char *buf, size_t len);

/*
 * GPU share specs (--gpu-shares): "0:50,0:50,1" is three GPU devices: half of
 * physical GPU 0, its other half, and all of GPU 1. Each entry is "G" (all of
 * GPU G) or "G:P" (P percent of its SMs, 1..100); the shares of one GPU may
 * not add up to more than 100. Physical GPUs are numbered as ivm-gpud reports
 * them (after --gpus).
 */
#define IVM_DEVSPEC_MAX_GPU_DEVICES 64

typedef struct ivm_gpu_share {
    int phys;    /* the physical GPU */
    int percent; /* its share of the SMs, 1..100 */
} ivm_gpu_share_t;

/* Parse spec into shares[0..*n_p). ngpus_max bounds physical GPU numbers
 * (0: no bound). Bad specs fail with IVM_ERROR_INVALID_VALUE and a message in
 * err that names the spec and the faulty entry. */
ivmError_t ivm_devspec_gpu_shares_parse(const char *spec, int ngpus_max,
                                        ivm_gpu_share_t *shares, int max_shares, int *n_p,
                                        char *err, size_t errlen);

#endif /* IVM_COMMON_DEVSPEC_H */
