#include "devspec.h"

#include <ctype.h>
#include <stdarg.h>
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

/* A CPU spec error: the spec, the entry (up to its ',') and the reason. */
static ivmError_t ivm_devspec_fail(char *err, size_t errlen, const char *spec,
                                   const char *entry, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static ivmError_t ivm_devspec_fail(char *err, size_t errlen, const char *spec,
                                   const char *entry, const char *fmt, ...)
{
    int used = snprintf(err, errlen, "CPU device spec '%s', entry '%.*s': ", spec,
                        (int)strcspn(entry, ","), entry);
    va_list ap;

    if (used >= 0 && (size_t)used < errlen) {
        va_start(ap, fmt);
        vsnprintf(err + used, errlen - (size_t)used, fmt, ap);
        va_end(ap);
    }
    return IVM_ERROR_INVALID_VALUE;
}

/* The cores of one entry ("a", "a-b", joined by '+') into dev; *p moves past
 * them. */
static ivmError_t ivm_devspec_cores(const char *spec, const char *entry, const char **p,
                                    int ncpus_max, ivm_cpu_device_t *dev, char *err,
                                    size_t errlen)
{
    long lo, hi, c;

    CPU_ZERO(&dev->cores);
    dev->ncores = 0;
    for (;;) {
        if (ivm_devspec_number(p, &lo) != 0) {
            return ivm_devspec_fail(err, errlen, spec, entry,
                                    "expected a core number at '%.*s'",
                                    (int)strcspn(*p, ","), *p);
        }
        hi = lo;
        if (**p == '-') {
            ++*p;
            if (ivm_devspec_number(p, &hi) != 0 || hi < lo) {
                return ivm_devspec_fail(err, errlen, spec, entry, "bad core range");
            }
        }
        if (ncpus_max > 0 && hi >= ncpus_max) {
            return ivm_devspec_fail(err, errlen, spec, entry,
                                    "core %ld does not exist (this node has %d)", hi,
                                    ncpus_max);
        }
        if (hi >= CPU_SETSIZE) {
            return ivm_devspec_fail(err, errlen, spec, entry,
                                    "core %ld is beyond the largest core number, %d", hi,
                                    CPU_SETSIZE - 1);
        }
        for (c = lo; c <= hi; ++c) {
            if (CPU_ISSET((int)c, &dev->cores)) {
                return ivm_devspec_fail(err, errlen, spec, entry,
                                        "core %ld appears twice in the device", c);
            }
            CPU_SET((int)c, &dev->cores);
            ++dev->ncores;
        }
        if (**p != '+') {
            return IVM_SUCCESS;
        }
        ++*p;
    }
}

/* One entry "CORES[:PCT]" into dev, its share added to each of its cores'
 * sums[]; *p moves to the ',' or the end. */
static ivmError_t ivm_devspec_entry(const char *spec, const char **p, int ncpus_max,
                                    ivm_cpu_device_t *dev, int *sums, char *err,
                                    size_t errlen)
{
    const char *entry = *p;
    ivmError_t status;
    long pct = 100;
    int c;

    if (**p == ',' || **p == '\0') {
        return ivm_devspec_fail(err, errlen, spec, entry, "empty device");
    }
    status = ivm_devspec_cores(spec, entry, p, ncpus_max, dev, err, errlen);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (**p == ':') {
        const char *pct_text = ++*p;
        if (ivm_devspec_number(p, &pct) != 0 || pct < 1 || pct > 100) {
            return ivm_devspec_fail(err, errlen, spec, entry,
                                    "share '%.*s' is not a percentage of 1..100",
                                    (int)strcspn(pct_text, ","), pct_text);
        }
    }
    if (**p != ',' && **p != '\0') {
        return ivm_devspec_fail(err, errlen, spec, entry,
                                "unexpected '%c' (entries are CORES or CORES:PERCENT)", **p);
    }
    dev->percent = (int)pct;
    dev->numa    = -1;
    for (c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &dev->cores) && (sums[c] += (int)pct) > 100) {
            return ivm_devspec_fail(err, errlen, spec, entry,
                                    "core %d is shared by devices whose shares add up to "
                                    "%d%% (at most 100%%)", c, sums[c]);
        }
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_devspec_parse(const char *spec, int ncpus_max, ivm_cpu_device_t *devs,
                             int max_devs, int *ndevs_p, char *err, size_t errlen)
{
    int sums[CPU_SETSIZE]; /* per core: the shares of the devices so far */
    const char *p = spec;
    ivmError_t status;
    int ndevs = 0;

    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "empty CPU device spec");
        return IVM_ERROR_INVALID_VALUE;
    }
    memset(sums, 0, sizeof(sums));
    for (;;) {
        if (ndevs == max_devs) {
            return ivm_devspec_fail(err, errlen, spec, p, "more than %d CPU devices",
                                    max_devs);
        }
        status = ivm_devspec_entry(spec, &p, ncpus_max, &devs[ndevs], sums, err, errlen);
        if (status != IVM_SUCCESS) {
            return status;
        }
        ++ndevs;
        if (*p == '\0') {
            break;
        }
        if (*++p == '\0') {
            snprintf(err, errlen, "CPU device spec '%s': trailing ','", spec);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    *ndevs_p = ndevs;
    return IVM_SUCCESS;
}

ivmError_t ivm_devspec_share_check(const ivm_cpu_device_t *devs, int ndevs, int k,
                                   int percent, char *err, size_t errlen)
{
    int c, j, sum;

    if (k < 0 || k >= ndevs) {
        snprintf(err, errlen, "there is no CPU device %d (the table has %d)", k, ndevs);
        return IVM_ERROR_NOT_FOUND;
    }
    if (percent < 1 || percent > 100) {
        snprintf(err, errlen, "share %d is not a percentage of 1..100", percent);
        return IVM_ERROR_INVALID_VALUE;
    }
    for (c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &devs[k].cores)) {
            continue;
        }
        for (j = 0, sum = percent; j < ndevs; ++j) {
            sum += (j != k && CPU_ISSET(c, &devs[j].cores)) ? devs[j].percent : 0;
        }
        if (sum > 100) {
            snprintf(err, errlen, "CPU device %d at %d%%: core %d would be shared by devices "
                     "whose shares add up to %d%% (at most 100%%)", k, percent, c, sum);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    return IVM_SUCCESS;
}

int ivm_devspec_has_shares(const ivm_cpu_device_t *devs, int ndevs)
{
    int k;

    for (k = 0; k < ndevs; ++k) {
        if (devs[k].percent < 100) {
            return 1;
        }
    }
    return 0;
}

void ivm_devspec_default(ivm_cpu_device_t *dev)
{
    if (sched_getaffinity(0, sizeof(dev->cores), &dev->cores) != 0) {
        CPU_ZERO(&dev->cores);
        CPU_SET(0, &dev->cores);
    }
    dev->ncores  = CPU_COUNT(&dev->cores);
    dev->percent = 100;
    dev->numa    = -1;
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
    if (dev->percent < 100 && used < len) {
        snprintf(buf + used, len - used, ":%d", dev->percent);
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
