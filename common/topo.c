/* The machine's topology from hwloc; see topo.h. */
#include "topo.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char      *name;
    hwloc_obj_type_t type;
} ivm_topo_units[] = {
    {"numa", HWLOC_OBJ_NUMANODE}, {"socket", HWLOC_OBJ_PACKAGE},
    {"package", HWLOC_OBJ_PACKAGE}, {"l3", HWLOC_OBJ_L3CACHE}, {"core", HWLOC_OBJ_CORE},
};
#define IVM_TOPO_NUNITS (sizeof(ivm_topo_units) / sizeof(ivm_topo_units[0]))

static pthread_once_t ivm_topo_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t ivm_topo;   /* NULL when hwloc could not load it */

static void ivm_topo_load(void)
{
    hwloc_topology_t t;

    if (hwloc_topology_init(&t) != 0) {
        return;
    }
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return;
    }
    ivm_topo = t;
}

static hwloc_topology_t ivm_topo_get(void)
{
    pthread_once(&ivm_topo_once, ivm_topo_load);
    return ivm_topo;
}

/* The unit of a keyword spec and the length of its keyword; -1 if none. */
static int ivm_topo_unit(const char *spec, size_t *len_p)
{
    size_t len = strcspn(spec, ":");
    size_t k;

    for (k = 0; k < IVM_TOPO_NUNITS; ++k) {
        if (strlen(ivm_topo_units[k].name) == len &&
            strncmp(spec, ivm_topo_units[k].name, len) == 0) {
            *len_p = len;
            return (int)k;
        }
    }
    return -1;
}

int ivm_topo_is_keyword(const char *spec)
{
    size_t len;

    return ivm_topo_unit(spec, &len) >= 0;
}

/* The ":PCT" share after a unit keyword (spec[len] on), "" when none;
 * IVM_ERROR_INVALID_VALUE unless PCT is 1..100. */
static ivmError_t ivm_topo_share(const char *spec, size_t len, const char **share_p,
                                 char *err, size_t errlen)
{
    const char *share = spec + len;
    char *end;
    long pct;

    *share_p = "";
    if (*share != ':') {
        return IVM_SUCCESS;
    }
    pct = strtol(share + 1, &end, 10);
    if (share[1] < '0' || share[1] > '9' || *end != '\0' || pct < 1 || pct > 100) {
        snprintf(err, errlen, "spec '%s': '%s' is not a share of 1..100 percent", spec,
                 share + 1);
        return IVM_ERROR_INVALID_VALUE;
    }
    *share_p = share;
    return IVM_SUCCESS;
}

/* Append to out (used bytes so far, in *used_p) one device of the cores of
 * obj, written "a+b-c" and followed by share; nothing for a unit without
 * cores (e.g. a NUMA node of memory only). */
static ivmError_t ivm_topo_append_unit(hwloc_obj_t obj, const char *unit_name, const char *spec,
                                       const char *share, char *out, size_t outlen,
                                       size_t *used_p, char *err, size_t errlen)
{
    size_t used = *used_p;
    char cores[1024];
    char *c;
    int w;

    if (obj == NULL || obj->cpuset == NULL || hwloc_bitmap_iszero(obj->cpuset)) {
        return IVM_SUCCESS;
    }
    if (hwloc_bitmap_list_snprintf(cores, sizeof(cores), obj->cpuset) >= (int)sizeof(cores)) {
        snprintf(err, errlen, "spec '%s': a %s has too many cores to list", spec, unit_name);
        return IVM_ERROR_INVALID_VALUE;
    }
    for (c = cores; *c != '\0'; ++c) {
        *c = *c == ',' ? '+' : *c;
    }
    w = snprintf(out + used, outlen - used, "%s%s%s", used > 0 ? "," : "", cores, share);
    if (w < 0 || (size_t)w >= outlen - used) {
        snprintf(err, errlen, "spec '%s': the expanded spec is longer than %zu characters",
                 spec, outlen - 1);
        return IVM_ERROR_INVALID_VALUE;
    }
    *used_p = used + (size_t)w;
    return IVM_SUCCESS;
}

ivmError_t ivm_topo_expand(const char *spec, char *out, size_t outlen, char *err,
                           size_t errlen)
{
    const char *share, *name;
    hwloc_topology_t t;
    size_t len, used = 0;
    ivmError_t status;
    int unit, n, i;

    unit = ivm_topo_unit(spec, &len);
    if (unit < 0) {
        if ((size_t)snprintf(out, outlen, "%s", spec) >= outlen) {
            snprintf(err, errlen, "spec '%.64s...' is too long", spec);
            return IVM_ERROR_INVALID_VALUE;
        }
        return IVM_SUCCESS;
    }
    status = ivm_topo_share(spec, len, &share, err, errlen);
    if (status != IVM_SUCCESS) {
        return status;
    }
    name = ivm_topo_units[unit].name;
    t    = ivm_topo_get();
    if (t == NULL) {
        snprintf(err, errlen, "spec '%s': hwloc cannot read this machine's topology", spec);
        return IVM_ERROR_UNSUPPORTED;
    }
    n = hwloc_get_nbobjs_by_type(t, ivm_topo_units[unit].type);
    if (n <= 0) {
        snprintf(err, errlen, "spec '%s': this machine has no %s unit (hwloc)", spec, name);
        return IVM_ERROR_UNSUPPORTED;
    }
    out[0] = '\0';
    for (i = 0; i < n; ++i) {
        status = ivm_topo_append_unit(hwloc_get_obj_by_type(t, ivm_topo_units[unit].type,
                                                            (unsigned)i),
                                      name, spec, share, out, outlen, &used, err, errlen);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    if (used == 0) {
        snprintf(err, errlen, "spec '%s': no %s of this machine has cores", spec, name);
        return IVM_ERROR_UNSUPPORTED;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_topo_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                                  int max_devs, int *ndevs_p, char *err, size_t errlen)
{
    char expanded[4096];
    ivmError_t status;
    int k;

    status = ivm_topo_expand(spec, expanded, sizeof(expanded), err, errlen);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_devspec_parse(expanded, ncpus_max, devs, max_devs, ndevs_p, err, errlen);
    if (status == IVM_SUCCESS) {
        for (k = 0; k < *ndevs_p; ++k) {
            devs[k].numa = ivm_topo_numa_of(&devs[k].cores);
        }
    }
    return status;
}

/* cores as an hwloc bitmap; NULL without memory. */
static hwloc_bitmap_t ivm_topo_bitmap(const cpu_set_t *cores)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int c;

    if (set == NULL) {
        return NULL;
    }
    for (c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, cores)) {
            hwloc_bitmap_set(set, (unsigned)c);
        }
    }
    return set;
}

int ivm_topo_numa_of(const cpu_set_t *cores)
{
    hwloc_topology_t t = ivm_topo_get();
    hwloc_bitmap_t set;
    hwloc_obj_t obj;
    int i, n, numa = -1;

    if (t == NULL || CPU_COUNT(cores) == 0 || (set = ivm_topo_bitmap(cores)) == NULL) {
        return -1;
    }
    n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (i = 0; i < n; ++i) {
        obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (obj != NULL && obj->cpuset != NULL && hwloc_bitmap_isincluded(set, obj->cpuset)) {
            numa = (int)obj->os_index;
            break;
        }
    }
    hwloc_bitmap_free(set);
    return numa;
}

int ivm_topo_numa_count(void)
{
    hwloc_topology_t t = ivm_topo_get();
    int n = t != NULL ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) : 0;

    return n > 0 ? n : 1;
}

int ivm_topo_numa_cores(int numa, cpu_set_t *cores)
{
    hwloc_topology_t t = ivm_topo_get();
    hwloc_obj_t obj;
    int c;

    if (t == NULL || numa < 0) {
        return -1;
    }
    obj = hwloc_get_numanode_obj_by_os_index(t, (unsigned)numa);
    if (obj == NULL || obj->cpuset == NULL) {
        return -1;
    }
    CPU_ZERO(cores);
    hwloc_bitmap_foreach_begin(c, obj->cpuset)
        if (c < CPU_SETSIZE) {
            CPU_SET(c, cores);
        }
    hwloc_bitmap_foreach_end();
    return 0;
}
