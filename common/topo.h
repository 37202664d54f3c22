/*
 * The machine's topology, from hwloc: CPU device specs that name hardware
 * units instead of core numbers, and the NUMA node of a set of cores.
 *
 * A spec may be one keyword, optionally with a share: "numa", "socket" (or
 * "package"), "l3", "core", e.g. "numa" or "core:50": one device per such unit
 * of this machine, made of the unit's cores (the cores this process may use),
 * each with that share. The keyword is expanded where the devices live: a
 * daemon expands it on its own node's hardware.
 *
 * hwloc honours HWLOC_SYNTHETIC and HWLOC_XMLFILE: the tests describe a
 * multi-NUMA machine that way.
 */
#ifndef IVM_COMMON_TOPO_H
#define IVM_COMMON_TOPO_H

#include <stddef.h>

#include "devspec.h"
#include "ivm.h"

/* 1 if spec is a topology keyword spec ("numa", "core:50", ...), else 0. */
int ivm_topo_is_keyword(const char *spec);

/* Expand a keyword spec into core numbers ("numa" -> "0-3,4-7"); copy any
 * other spec unchanged. IVM_ERROR_INVALID_VALUE (bad share, or out too
 * small), IVM_ERROR_UNSUPPORTED (the topology cannot be read, or the machine
 * has no such unit), with the reason in err. */
ivmError_t ivm_topo_expand(const char *spec, char *out, size_t outlen, char *err,
                           size_t errlen);

/* ivm_devspec_parse() after ivm_topo_expand(); also fills each device's
 * NUMA node (see ivm_topo_numa_of). */
ivmError_t ivm_topo_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                                  int max_devs, int *ndevs_p, char *err, size_t errlen);

/* The NUMA node (its OS index) whose cores include every core of cores; -1
 * when they span several nodes or the topology is unknown. */
int ivm_topo_numa_of(const cpu_set_t *cores);

/* NUMA nodes of the machine (1 when unknown). */
int ivm_topo_numa_count(void);

/* The cores of NUMA node numa, into cores; -1 if there is no such node. */
int ivm_topo_numa_cores(int numa, cpu_set_t *cores);

#endif /* IVM_COMMON_TOPO_H */
