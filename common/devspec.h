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

#endif /* IVM_COMMON_DEVSPEC_H */
