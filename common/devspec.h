/*
 * CPU device specs: "0-7,8-11,12" is three CPU devices of 8, 4 and 1 cores.
 * A device is a core range "a-b" or a single core "a"; "+" joins ranges into
 * one device ("0-3+8-11"). Devices may not share cores.
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
    cpu_set_t cores; /* the device's cores */
    int       ncores;
} ivm_cpu_device_t;

/* Parse spec into devs[0..*ndevs_p). ncpus_max bounds core numbers (cores
 * >= ncpus_max are rejected; pass 0 for no bound). Bad specs fail with
 * IVM_ERROR_INVALID_VALUE and a message in err. */
ivmError_t ivm_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                             int max_devs, int *ndevs_p, char *err, size_t errlen);

/* The default table: one device with every core the process may run on. */
void ivm_devspec_default(ivm_cpu_device_t *dev);

/* Format a device's cores as "0-3,8" into buf. */
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
