#include "devspec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ivm_devspec_number(const char **p, long *value)
{
    char *end;

    if (!isdigit((unsigned char)**p)) {
        return -1;
    }
    *value = strtol(*p, &end, 10);
    *p = end;
    return 0;
}

ivmError_t ivm_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                             int max_devs, int *ndevs_p, char *err, size_t errlen)
{
    cpu_set_t used;
    const char *p = spec;
    long lo, hi, c;
    int ndevs = 0;

    CPU_ZERO(&used);
    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "empty CPU device spec");
        return IVM_ERROR_INVALID_VALUE;
    }
    while (*p != '\0') {
        ivm_cpu_device_t *dev;
        if (ndevs == max_devs) {
            snprintf(err, errlen, "more than %d CPU devices in '%s'", max_devs, spec);
            return IVM_ERROR_INVALID_VALUE;
        }
        dev = &devs[ndevs];
        CPU_ZERO(&dev->cores);
        dev->ncores = 0;
        for (;;) {
            if (ivm_devspec_number(&p, &lo) != 0) {
                snprintf(err, errlen, "expected a core number at '%s' in '%s'", p, spec);
                return IVM_ERROR_INVALID_VALUE;
            }
            hi = lo;
            if (*p == '-') {
                ++p;
                if (ivm_devspec_number(&p, &hi) != 0 || hi < lo) {
                    snprintf(err, errlen, "bad core range in '%s'", spec);
                    return IVM_ERROR_INVALID_VALUE;
                }
            }
            if (hi >= CPU_SETSIZE || (ncpus_max > 0 && hi >= ncpus_max)) {
                snprintf(err, errlen, "core %ld in '%s' does not exist (this node has %d)",
                         hi, spec, ncpus_max);
                return IVM_ERROR_INVALID_VALUE;
            }
            for (c = lo; c <= hi; ++c) {
                if (CPU_ISSET((int)c, &used)) {
                    snprintf(err, errlen, "core %ld is in two devices in '%s'", c, spec);
                    return IVM_ERROR_INVALID_VALUE;
                }
                CPU_SET((int)c, &used);
                CPU_SET((int)c, &dev->cores);
                ++dev->ncores;
            }
            if (*p != '+') {
                break;
            }
            ++p;
        }
        ++ndevs;
        if (*p == ',') {
            ++p;
            if (*p == '\0') {
                snprintf(err, errlen, "trailing ',' in '%s'", spec);
                return IVM_ERROR_INVALID_VALUE;
            }
        } else if (*p != '\0') {
            snprintf(err, errlen, "unexpected '%c' in CPU device spec '%s'", *p, spec);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    *ndevs_p = ndevs;
    return IVM_SUCCESS;
}

void ivm_devspec_default(ivm_cpu_device_t *dev)
{
    if (sched_getaffinity(0, sizeof(dev->cores), &dev->cores) != 0) {
        CPU_ZERO(&dev->cores);
        CPU_SET(0, &dev->cores);
    }
    dev->ncores = CPU_COUNT(&dev->cores);
}

void ivm_devspec_format(const ivm_cpu_device_t *dev, char *buf, size_t len)
{
    size_t used = 0;
    int c = 0, start;

    buf[0] = '\0';
    while (c < CPU_SETSIZE) {
        if (!CPU_ISSET(c, &dev->cores)) {
            ++c;
            continue;
        }
        start = c;
        while (c + 1 < CPU_SETSIZE && CPU_ISSET(c + 1, &dev->cores)) {
            ++c;
        }
        if (used < len) {
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "+" : "",
                                     start);
        }
        if (c > start && used < len) {
            used += (size_t)snprintf(buf + used, len - used, "-%d", c);
        }
        ++c;
    }
}
