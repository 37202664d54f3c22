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

ivmError_t ivm_devspec_gpu_shares_parse(const char *spec, int ngpus_max,
                                        ivm_gpu_share_t *shares, int max_shares, int *n_p,
                                        char *err, size_t errlen)
{
    const char *p = spec, *entry;
    long gpu, pct;
    int n = 0, i, sum;

    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "--gpu-shares: empty spec (give e.g. 0:50,0:50,1)");
        return IVM_ERROR_INVALID_VALUE;
    }
    while (*p != '\0') {
        entry = p;
        if (n == max_shares) {
            snprintf(err, errlen, "--gpu-shares: more than %d GPU devices in '%s'",
                     max_shares, spec);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (ivm_devspec_number(&p, &gpu) != 0 || gpu > 255) {
            snprintf(err, errlen, "--gpu-shares '%s': '%.*s' does not start with a GPU index "
                     "(0..255; entries are G or G:PERCENT)", spec,
                     (int)strcspn(entry, ","), entry);
            return IVM_ERROR_INVALID_VALUE;
        }
        pct = 100;
        if (*p == ':') {
            ++p;
            if (ivm_devspec_number(&p, &pct) != 0 || pct < 1 || pct > 100) {
                snprintf(err, errlen, "--gpu-shares '%s': '%.*s' has no percentage of 1..100 "
                         "after ':'", spec, (int)strcspn(entry, ","), entry);
                return IVM_ERROR_INVALID_VALUE;
            }
        }
        if (*p != ',' && *p != '\0') {
            snprintf(err, errlen, "--gpu-shares '%s': '%.*s' is not G or G:PERCENT", spec,
                     (int)strcspn(entry, ","), entry);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (*p == ',' && *++p == '\0') {
            snprintf(err, errlen, "--gpu-shares '%s': trailing ','", spec);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (ngpus_max > 0 && gpu >= ngpus_max) {
            snprintf(err, errlen, "--gpu-shares '%s': there is no GPU %ld (this node has %d)",
                     spec, gpu, ngpus_max);
            return IVM_ERROR_INVALID_VALUE;
        }
        for (i = 0, sum = (int)pct; i < n; ++i) {
            sum += shares[i].phys == gpu ? shares[i].percent : 0;
        }
        if (sum > 100) {
            snprintf(err, errlen, "--gpu-shares '%s': the shares of GPU %ld add up to %d%% "
                     "(at most 100%%)", spec, gpu, sum);
            return IVM_ERROR_INVALID_VALUE;
        }
        shares[n].phys    = (int)gpu;
        shares[n].percent = (int)pct;
        ++n;
    }
    *n_p = n;
    return IVM_SUCCESS;
}
