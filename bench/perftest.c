/*
 * ivm-perftest: IVM's data-path and process-creation micro-benchmark, in the
 * style of ucx_perftest and the OSU benchmarks. Installed; run it under ivmrun.
 *
 * The root PE (node0) allocates the object (the master copy) and creates one
 * measuring PE on --node/--device. That PE maps the whole object (a mirror
 * when it is on another node) and times each operation call by call:
 *   put, get            ivmSyncPut / ivmSyncGet of SIZE bytes;
 *   putgroup, getgroup  ivmSyncPutGroup / ivmSyncGetGroup of SIZE bytes (the
 *                       copies involved: the master and the measuring PE's);
 *   map                 ivmMapSubset + ivmUnmap of SIZE bytes.
 * The root itself times
 *   dpc                 ivmCreatePEs of one PE on the same device until that
 *                       PE's first ivmSignal (it then exits; runs never overlap).
 * Per row: the median, mean and p99 latency of one call, the bandwidth
 * (SIZE / mean latency, MB = 10^6 bytes) and the message rate (1 / mean).
 * A figure that means nothing for an operation (the size and bandwidth of
 * dpc, the bandwidth of map) prints as "-", never as 0 or inf.
 *
 * Every non-root PE signals first, then waits for the root's go, then reads
 * its role from a small control object: at most one non-root PE is alive at a
 * time, so the root's signals cannot go to the wrong one.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ivm.h>

#include "bench_util.h"
#include "ep_defaults.h"
#include "version.h"

#define PT_CTL_NAME  "ivm-perftest-ctl"
#define PT_DATA_NAME "ivm-perftest-data"
#define PT_MAX_SIZES 48
#define PT_MAX_OPS   6
#define PT_ROLE_EXIT    1
#define PT_ROLE_MEASURE 2

typedef enum {
    PT_OP_PUT,
    PT_OP_GET,
    PT_OP_PUTGROUP,
    PT_OP_GETGROUP,
    PT_OP_MAP,
    PT_OP_DPC
} pt_op_t;

static const char *const pt_op_names[] = {"put", "get", "putgroup", "getgroup", "map", "dpc"};

/* One row of results, written by whoever measured it. */
typedef struct {
    uint32_t op, iters;
    uint64_t size;
    double   p50_us, mean_us, p99_us;
} pt_row_t;

/* The control object: the run's settings, the roles, the results. */
typedef struct {
    uint32_t role;                    /* of the PE created last */
    uint32_t nops, nsizes, iters, warmup;
    uint32_t ops[PT_MAX_OPS];
    uint64_t sizes[PT_MAX_SIZES];
    uint32_t nrows;
    int32_t  failed;                  /* the measuring PE's IVM status, 0 if none */
    char     message[256];
    pt_row_t rows[PT_MAX_OPS * PT_MAX_SIZES];
} pt_ctl_t;

typedef struct {
    pt_ctl_t    set;                  /* the settings part, filled from argv */
    const char *node;
    int         device, csv;
} pt_args_t;

/* Warm-up of the rows of small syncs (past the syncs that go through the
 * daemon before a PE's endpoint opens), and their largest size. */
#define PT_EP_WARMUP   (IVM_EP_AFTER + 2u)
#define PT_EP_SIZE_MAX IVM_EP_PUT_MAX_DEFAULT

static void pt_usage(FILE *out)
{
    fprintf(out,
            "usage: ivmrun [--nodes 2] ivm-perftest [options]\n"
            "Times IVM's sync calls, maps and process creation between a measuring PE\n"
            "and the master copy on node0, call by call.\n\n"
            "  -o, --op LIST       operations, comma-separated: put, get, putgroup,\n"
            "                      getgroup, map, dpc, or all (default: put,get)\n"
            "  -N, --node NODE     node of the measuring PE (default: node1 when the job\n"
            "                      has it, else node0)\n"
            "  -d, --device K      its CPU device (default 0)\n"
            "  -s, --size LIST     sizes: comma-separated (8,4K,1M) or MIN:MAX, powers of\n"
            "                      two between (default 8:1M)\n"
            "  -n, --iters N       timed calls per size (default 1000, 100 for dpc; sizes\n"
            "                      over 1 MiB get fewer, at most 256 MiB moved per row)\n"
            "  -w, --warmup N      untimed calls before each row (default iters/10, >= 1; >= %u\n"
            "                      for syncs of up to 64 KiB, whose endpoint opens past the %uth)\n"
            "      --csv           comma-separated output\n"
            "  -V, --version       print the version\n"
            "  -h, --help          print this help\n"
            "\n"
            "Columns: op, size (bytes), iters, lat_p50_us, lat_mean_us, lat_p99_us,\n"
            "bw_MBps (size / mean, MB = 10^6 B), msg_per_s (1 / mean); '-' where a\n"
            "figure does not apply (dpc's size and bandwidth, map's bandwidth).\n",
            PT_EP_WARMUP, IVM_EP_AFTER);
}

/* "8", "4K", "64k", "1M", "2G": bytes, or 0 when not a size. */
static uint64_t pt_parse_size(const char *text, const char **end_p)
{
    char *end;
    unsigned long long v;

    errno = 0;
    if (*text < '0' || *text > '9') {
        return 0;
    }
    v = strtoull(text, &end, 10);
    if (errno != 0) {
        return 0;
    }
    switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
    }
    *end_p = end;
    return (uint64_t)v;
}

static int pt_parse_sizes(const char *text, pt_ctl_t *set)
{
    const char *p = text, *end;
    uint64_t lo, hi, s;

    set->nsizes = 0;
    if (strchr(text, ':') != NULL) {
        lo = pt_parse_size(p, &end);
        if (lo == 0 || *end != ':') {
            return -1;
        }
        hi = pt_parse_size(end + 1, &end);
        if (hi < lo || *end != '\0') {
            return -1;
        }
        for (s = lo; s <= hi && set->nsizes < PT_MAX_SIZES; s *= 2) {
            set->sizes[set->nsizes++] = s;
        }
        return 0;
    }
    for (;;) {
        s = pt_parse_size(p, &end);
        if (s == 0 || (*end != ',' && *end != '\0') || set->nsizes == PT_MAX_SIZES) {
            return -1;
        }
        set->sizes[set->nsizes++] = s;
        if (*end == '\0') {
            return 0;
        }
        p = end + 1;
    }
}

static int pt_parse_ops(const char *text, pt_ctl_t *set)
{
    char buf[128], *tok, *save = NULL;
    uint32_t k, i;

    if (strlen(text) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, text);
    set->nops = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "all") == 0) {
            for (k = 0; k < PT_MAX_OPS; ++k) {
                set->ops[k] = k;
            }
            set->nops = PT_MAX_OPS;
            continue;
        }
        for (k = 0; k < PT_MAX_OPS && strcmp(tok, pt_op_names[k]) != 0; ++k) {
        }
        if (k == PT_MAX_OPS) {
            return -1;
        }
        for (i = 0; i < set->nops && set->ops[i] != k; ++i) {
        }
        if (i == set->nops) {
            set->ops[set->nops++] = k;
        }
    }
    return set->nops > 0 ? 0 : -1;
}

/* 0 to run, 1 after --help/--version, 2 for a bad command line. */
static int pt_parse_args(int argc, char **argv, pt_args_t *a)
{
    static const struct option longopts[] = {
        {"op", required_argument, NULL, 'o'},     {"node", required_argument, NULL, 'N'},
        {"device", required_argument, NULL, 'd'}, {"size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'n'},  {"warmup", required_argument, NULL, 'w'},
        {"csv", no_argument, NULL, 'c'},          {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    char version[IVM_MAX_LIBRARY_VERSION_STRING];
    int opt, iters = 0, warmup = -1;

    memset(a, 0, sizeof(*a));
    pt_parse_ops("put,get", &a->set);
    pt_parse_sizes("8:1M", &a->set);
    a->device = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "o:N:d:s:n:w:Vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'o':
            if (pt_parse_ops(optarg, &a->set) != 0) {
                fprintf(stderr, "ivm-perftest: --op '%s': give a comma-separated list of "
                        "put, get, putgroup, getgroup, map, dpc or all\n", optarg);
                return 2;
            }
            break;
        case 'N':
            a->node = optarg;
            break;
        case 'd':
            if ((a->device = bench_parse_int(optarg, 0)) < 0) {
                fprintf(stderr, "ivm-perftest: --device '%s' is not a device index\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (pt_parse_sizes(optarg, &a->set) != 0) {
                fprintf(stderr, "ivm-perftest: --size '%s': give sizes such as 8,4K,1M or "
                        "MIN:MAX (at most %d sizes, each > 0)\n", optarg, PT_MAX_SIZES);
                return 2;
            }
            break;
        case 'n':
            if ((iters = bench_parse_int(optarg, 1)) < 0) {
                fprintf(stderr, "ivm-perftest: --iters '%s' is not a count >= 1\n", optarg);
                return 2;
            }
            break;
        case 'w':
            if ((warmup = bench_parse_int(optarg, 0)) < 0) {
                fprintf(stderr, "ivm-perftest: --warmup '%s' is not a count >= 0\n", optarg);
                return 2;
            }
            break;
        case 'c':
            a->csv = 1;
            break;
        case 'V':
            /* The build's lines as every IVM program prints them, then the
             * library actually loaded, which LD_LIBRARY_PATH may change. */
            ivm_version_print(stdout, "ivm-perftest");
            ivmGetLibraryVersion(version, sizeof(version));
            printf("library:    %s\n", version);
            return 1;
        case 'h':
            pt_usage(stdout);
            return 1;
        default:
            fprintf(stderr, "ivm-perftest: unknown option or missing value: %s (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ivm-perftest: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    a->set.iters  = (uint32_t)iters;
    a->set.warmup = warmup < 0 ? UINT32_MAX : (uint32_t)warmup;
    return 0;
}

/* Iterations and warm-up of a row: the defaults, fewer for big transfers. */
static void pt_row_counts(const pt_ctl_t *set, pt_op_t op, uint64_t size, uint32_t *iters,
                          uint32_t *warmup)
{
    uint64_t n = set->iters;

    if (n == 0) {
        n = op == PT_OP_DPC ? 100 : 1000;
        if (op != PT_OP_DPC && size > (1u << 20)) {
            n = (256ull << 20) / size;
            n = n < 5 ? 5 : n;
        }
    }
    *iters = (uint32_t)n;
    if (set->warmup != UINT32_MAX) {
        *warmup = set->warmup;
    } else if (op != PT_OP_DPC && size <= PT_EP_SIZE_MAX) {
        /* A small sync's row: its PE's endpoint to the master's node opens
         * within the warm-up (past IVM_EP_AFTER small syncs, libivm/ep.c). */
        *warmup = (uint32_t)(n / 10 > PT_EP_WARMUP ? n / 10 : PT_EP_WARMUP);
    } else {
        *warmup = (uint32_t)(n / 10 > 0 ? n / 10 : 1);
    }
}

static void pt_row_store(pt_ctl_t *ctl, pt_op_t op, uint64_t size, double *ns, uint32_t n)
{
    pt_row_t *row = &ctl->rows[ctl->nrows++];
    double sum = 0.0;
    uint32_t i, r99 = (99 * n + 99) / 100;

    for (i = 0; i < n; ++i) {
        sum += ns[i];
    }
    qsort(ns, n, sizeof(*ns), bench_cmp_double);
    row->op      = op;
    row->size    = size;
    row->iters   = n;
    row->p50_us  = (n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2.0) / 1e3;
    row->mean_us = sum / n / 1e3;
    row->p99_us  = ns[(r99 < 1 ? 1 : r99) - 1] / 1e3;
}

/* One call of a data operation on [ref, ref+size). */
static ivmError_t pt_call(pt_op_t op, char *ref, uint64_t size)
{
    void *sub = NULL;
    ivmError_t rc;

    switch (op) {
    case PT_OP_PUT: return ivmSyncPut(ref, size);
    case PT_OP_GET: return ivmSyncGet(ref, size);
    case PT_OP_PUTGROUP: return ivmSyncPutGroup(ref, size);
    case PT_OP_GETGROUP: return ivmSyncGetGroup(ref, size);
    case PT_OP_MAP:
        rc = ivmMapSubset(PT_DATA_NAME, &sub, 0, size);
        return rc == IVM_SUCCESS ? ivmUnmap(sub) : rc;
    default: return IVM_ERROR_INVALID_VALUE;
    }
}

/* The measuring PE: every data row, into the control object. */
static int pt_measure(pt_ctl_t *ctl)
{
    uint64_t max = 0;
    uint32_t k, s, i, iters, warmup;
    double *ns = NULL, t0;
    char *ref = NULL;
    ivmError_t rc;

    for (s = 0; s < ctl->nsizes; ++s) {
        max = ctl->sizes[s] > max ? ctl->sizes[s] : max;
    }
    rc = ivmMap(PT_DATA_NAME, &ref, 0);
    for (k = 0; rc == IVM_SUCCESS && k < ctl->nops; ++k) {
        if (ctl->ops[k] == PT_OP_DPC) {
            continue;
        }
        for (s = 0; rc == IVM_SUCCESS && s < ctl->nsizes; ++s) {
            pt_row_counts(ctl, ctl->ops[k], ctl->sizes[s], &iters, &warmup);
            free(ns);
            ns = malloc(iters * sizeof(*ns));
            if (ns == NULL) {
                rc = IVM_ERROR_NO_MEMORY;
                break;
            }
            memset(ref, (int)(s + 1), ctl->sizes[s]);
            for (i = 0; rc == IVM_SUCCESS && i < warmup; ++i) {
                rc = pt_call(ctl->ops[k], ref, ctl->sizes[s]);
            }
            for (i = 0; rc == IVM_SUCCESS && i < iters; ++i) {
                t0    = bench_now_ns();
                rc    = pt_call(ctl->ops[k], ref, ctl->sizes[s]);
                ns[i] = bench_now_ns() - t0;
            }
            if (rc == IVM_SUCCESS) {
                pt_row_store(ctl, ctl->ops[k], ctl->sizes[s], ns, iters);
            }
        }
    }
    free(ns);
    if (rc != IVM_SUCCESS) {
        ctl->failed = rc;
        snprintf(ctl->message, sizeof(ctl->message), "%s", ivmGetLastErrorMessage());
    }
    if (ref != NULL) {
        ivmUnmap(ref);
    }
    return rc == IVM_SUCCESS ? 0 : 1;
}

/* A non-root PE: signal (dpc's timed part ends here), wait for the root's
 * go, then do what the control object says. */
static int pt_child(void)
{
    pt_ctl_t *ctl = NULL;
    int ret = 0;

    BENCH_CHECK(ivmSignal());
    BENCH_CHECK(ivmWait(0));
    BENCH_CHECK(ivmMap(PT_CTL_NAME, &ctl, 0));
    BENCH_CHECK(ivmSyncGet(ctl, sizeof(*ctl)));
    if (ctl->role == PT_ROLE_MEASURE) {
        ret = pt_measure(ctl);
        BENCH_CHECK(ivmSyncPut(ctl, sizeof(*ctl)));
    }
    BENCH_CHECK(ivmUnmap(ctl));
    BENCH_CHECK(ivmExit());
    return ret;
}

/* Create one PE on dev with `role`, wait for its first signal; *ns: that time. */
static ivm_pe pt_start(ivm_device dev, pt_ctl_t *ctl, uint32_t role, double *ns)
{
    double t0 = bench_now_ns();
    ivm_pe pe = IVM_PE_NULL;

    BENCH_CHECK(ivmCreatePEs(dev, 1, &pe));
    if (pe == IVM_PE_NULL) {
        fprintf(stderr, "ivm-perftest: ivmCreatePEs gave no PE\n");
        exit(1);
    }
    BENCH_CHECK(ivmWait(pe));
    *ns = bench_now_ns() - t0;
    ctl->role = role;
    BENCH_CHECK(ivmSyncPut(&ctl->role, sizeof(ctl->role)));
    BENCH_CHECK(ivmSignal());
    return pe;
}

static void pt_cell(char *buf, size_t len, double v)
{
    snprintf(buf, len, "%.2f", v);
}

static void pt_print(const pt_ctl_t *ctl, int csv)
{
    const char *fmt = csv ? "%s,%s,%u,%s,%s,%s,%s,%s\n" : "%10s %12s %7u %12s %12s %12s %12s %12s\n";
    char size[24], p50[24], mean[24], p99[24], bw[24], rate[24];
    uint32_t r;

    if (csv) {
        printf("op,size,iters,lat_p50_us,lat_mean_us,lat_p99_us,bw_MBps,msg_per_s\n");
    } else {
        printf("%10s %12s %7s %12s %12s %12s %12s %12s\n", "op", "size", "iters", "lat_p50_us",
               "lat_mean_us", "lat_p99_us", "bw_MBps", "msg_per_s");
    }
    for (r = 0; r < ctl->nrows; ++r) {
        const pt_row_t *row = &ctl->rows[r];
        int has_size = row->op != PT_OP_DPC;
        int has_bw   = has_size && row->op != PT_OP_MAP && row->mean_us > 0.0;

        snprintf(size, sizeof(size), has_size ? "%llu" : "-", (unsigned long long)row->size);
        pt_cell(p50, sizeof(p50), row->p50_us);
        pt_cell(mean, sizeof(mean), row->mean_us);
        pt_cell(p99, sizeof(p99), row->p99_us);
        if (has_bw) {
            pt_cell(bw, sizeof(bw), (double)row->size / row->mean_us);
        } else {
            strcpy(bw, "-");
        }
        if (row->mean_us > 0.0) {
            snprintf(rate, sizeof(rate), "%.0f", 1e6 / row->mean_us);
        } else {
            strcpy(rate, "-");
        }
        printf(fmt, pt_op_names[row->op], size, row->iters, p50, mean, p99, bw, rate);
    }
}

static int pt_root(const pt_args_t *a)
{
    char version[IVM_MAX_LIBRARY_VERSION_STRING];
    const char *node = a->node;
    pt_ctl_t *ctl = NULL;
    ivm_device dev = NULL;
    uint64_t max = 0;
    uint32_t k, i, iters, warmup;
    double *ns, t;
    void *data = NULL;
    ivm_pe pe;
    ivmError_t rc;

    if (node == NULL) {
        node = ivmCreateDev("node1", IVM_CPU_N(a->device), &dev) == IVM_SUCCESS ? "node1"
                                                                                : "node0";
    }
    if (dev == NULL) {
        rc = ivmCreateDev(node, IVM_CPU_N(a->device), &dev);
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "ivm-perftest: CPU device %d of %s: %s (%s)\n", a->device, node,
                    ivmGetErrorString(rc), ivmGetLastErrorMessage());
            return 1;
        }
    }
    for (k = 0; k < a->set.nsizes; ++k) {
        max = a->set.sizes[k] > max ? a->set.sizes[k] : max;
    }
    BENCH_CHECK(ivmMalloc(PT_CTL_NAME, &ctl, sizeof(*ctl)));
    memcpy(ctl, &a->set, sizeof(*ctl));
    ctl->nrows  = 0;
    ctl->failed = 0;
    rc = ivmMalloc(PT_DATA_NAME, &data, max);
    if (rc != IVM_SUCCESS) {
        fprintf(stderr, "ivm-perftest: an object of %llu bytes: %s (%s)\n",
                (unsigned long long)max, ivmGetErrorString(rc), ivmGetLastErrorMessage());
        return 1;
    }
    ivmGetLibraryVersion(version, sizeof(version));
    printf("# ivm-perftest: %s\n# measuring PE on %s, CPU device %d; master copy on node0\n",
           version, node, a->device);
    fflush(stdout);

    for (k = 0; k < ctl->nops; ++k) {
        if (ctl->ops[k] != PT_OP_DPC) {
            continue;
        }
        pt_row_counts(ctl, PT_OP_DPC, 0, &iters, &warmup);
        ns = malloc(iters * sizeof(*ns));
        if (ns == NULL) {
            fprintf(stderr, "ivm-perftest: no memory\n");
            return 1;
        }
        for (i = 0; i < warmup + iters; ++i) {
            pe = pt_start(dev, ctl, PT_ROLE_EXIT, &t);
            if (i >= warmup) {
                ns[i - warmup] = t;
            }
            BENCH_CHECK(ivmWait(pe));
        }
        pt_row_store(ctl, PT_OP_DPC, 0, ns, iters);
        free(ns);
        BENCH_CHECK(ivmSyncPut(ctl, sizeof(*ctl)));
    }
    for (k = 0; k < ctl->nops && ctl->ops[k] == PT_OP_DPC; ++k) {
    }
    if (k < ctl->nops) {
        pe = pt_start(dev, ctl, PT_ROLE_MEASURE, &t);
        rc = ivmWait(pe);
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "ivm-perftest: the measuring PE: %s\n", ivmGetErrorString(rc));
            return 1;
        }
        BENCH_CHECK(ivmSyncGet(ctl, sizeof(*ctl)));
        if (ctl->failed != 0) {
            fprintf(stderr, "ivm-perftest: the measuring PE failed: %s (%s)\n",
                    ivmGetErrorString((ivmError_t)ctl->failed), ctl->message);
            return 1;
        }
    }
    pt_print(ctl, a->csv);
    BENCH_CHECK(ivmFree(data));
    BENCH_CHECK(ivmFree(ctl));
    BENCH_CHECK(ivmDestroyDev(dev));
    return 0;
}

int main(int argc, char **argv)
{
    pt_args_t args;
    int id = -1, ret;

    ret = pt_parse_args(argc, argv, &args);
    if (ret != 0) {
        return ret == 1 ? 0 : 2;
    }
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&id));
    if (id != 0) {
        return pt_child();
    }
    ret = pt_root(&args);
    BENCH_CHECK(ivmExit());
    return ret;
}
