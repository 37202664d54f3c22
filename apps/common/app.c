/*
 * app: arguments, input, timing, kernel picker, checksums and the result line
 * shared by the applications (see app.h).
 */
#include "app.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static const char *app_name = "app";

void app_ivm_error(ivmError_t rc, const char *call, const char *file, int line)
{
    fprintf(stderr, "%s: %s:%d: %s failed: %s (%s)\n", app_name, file, line, call,
            ivmGetErrorString(rc), ivmGetLastErrorMessage());
}

static void app_usage(const app_args_t *a, const char *extra)
{
    fprintf(stderr,
            "usage: %s [--size N] [--seed S] [--portions P] [--iters I]\n"
            "       [--threshold T] [--max-per-dev K] [--local] [--verify] [--serial]\n"
            "       [--gpu-ranks K]  (MPI baselines: ranks 0..K-1 run the CUDA kernel)\n"
            "       [--dpc]  (DS-LB: measure each PE's creation latency, print a DPC line)\n"
            "       [--layout weighted|equal]  (DS-LB: each chain's first\n"
            "                                   portion by its device's speed, the rest\n"
            "                                   tapered (default); or P equal portions)\n"
            "       [--tiles T]  (DMM: C in T = M*M tiles, the work units)\n"
            "       [--weights W0,W1,...]  (MPI baselines: rank r's relative speed; the\n"
            "                               split that best fits them, not the equal one)\n"
            "  defaults: size %lld, seed %llu, portions %d, iters %d, threshold %s%.3g,"
            " max-per-dev %d\n",
            a->app, a->size, (unsigned long long)a->seed, a->portions, a->iters,
            a->threshold > 0.0 ? "" : "auto (measured) ", a->threshold, a->max_per_dev);
    if (extra != NULL)
        fprintf(stderr, "%s\n", extra);
}

static int app_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int app_parse_int(const char *s, int lo, int hi, int *out)
{
    long long v;

    if (app_parse_ll(s, lo, hi, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int app_parse_double(const char *s, double lo, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < lo)
        return -1;
    *out = v;
    return 0;
}

/* "W0,W1,..." into args->weights; -1 when malformed or a weight is not > 0. */
static int app_parse_weights(const char *s, app_args_t *args)
{
    const char *p = s;

    args->nweights = 0;
    for (;;) {
        char *end;
        double w;
        errno = 0;
        w = strtod(p, &end);
        if (end == p || errno != 0 || !isfinite(w) || !(w > 0.0) ||
            args->nweights == APP_MAX_DEVS || (*end != ',' && *end != '\0'))
            return -1;
        args->weights[args->nweights++] = w;
        if (*end == '\0')
            return 0;
        p = end + 1;
    }
}

int app_args_parse(int argc, char **argv, app_args_t *args, const char *usage_extra)
{
    app_name = args->app;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        long long v;
        int bad = 0, takes = 1;

        if (strcmp(opt, "--verify") == 0) {
            args->verify = 1;
            takes = 0;
        } else if (strcmp(opt, "--serial") == 0) {
            args->serial = 1;
            takes = 0;
        } else if (strcmp(opt, "--local") == 0) {
            args->local = 1;
            takes = 0;
        } else if (strcmp(opt, "--dpc") == 0) {
            args->dpc = 1;
            takes = 0;
        } else if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
            app_usage(args, usage_extra);
            return -1;
        } else if (val == NULL) {
            fprintf(stderr, "%s: %s: unknown option or missing value\n", args->app, opt);
            app_usage(args, usage_extra);
            return -1;
        } else if (strcmp(opt, "--size") == 0) {
            bad = app_parse_ll(val, 1, LLONG_MAX / 4, &args->size);
        } else if (strcmp(opt, "--seed") == 0) {
            bad = app_parse_ll(val, 0, LLONG_MAX, &v);
            if (!bad)
                args->seed = (uint64_t)v;
        } else if (strcmp(opt, "--portions") == 0) {
            bad = app_parse_int(val, 1, 1 << 20, &args->portions);
        } else if (strcmp(opt, "--iters") == 0) {
            bad = app_parse_int(val, 1, 1 << 20, &args->iters);
        } else if (strcmp(opt, "--max-per-dev") == 0) {
            bad = app_parse_int(val, 1, 1024, &args->max_per_dev);
        } else if (strcmp(opt, "--gpu-ranks") == 0) {
            bad = app_parse_int(val, 0, 1 << 20, &args->gpu_ranks);
        } else if (strcmp(opt, "--tiles") == 0) {
            bad = app_parse_int(val, 1, 1 << 24, &args->tiles);
        } else if (strcmp(opt, "--weights") == 0) {
            bad = app_parse_weights(val, args);
        } else if (strcmp(opt, "--layout") == 0) {
            bad = strcmp(val, "equal") != 0 && strcmp(val, "weighted") != 0;
            args->layout_equal = strcmp(val, "equal") == 0;
        } else if (strcmp(opt, "--threshold") == 0) {
            bad = app_parse_double(val, 1.0, &args->threshold);
        } else {
            fprintf(stderr, "%s: %s: unknown option\n", args->app, opt);
            app_usage(args, usage_extra);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value '%s' for %s\n", args->app, val, opt);
            app_usage(args, usage_extra);
            return -1;
        }
        i += takes;
    }
    if ((long long)args->portions * args->iters > INT_MAX / 2) {
        fprintf(stderr, "%s: portions x iters (%d x %d) exceeds the PE id range\n",
                args->app, args->portions, args->iters);
        return -1;
    }
    return 0;
}

/* Whether the contiguous split with the slowest rank's time at most t
   exists; the split into first[] (greedy: each rank as many portions as
   fit, at least one, leaving one for each rank after it). */
static int app_split_fits(int P, const double *work, int R, const double *weights, double t,
                          int *first)
{
    int p = 0;

    for (int r = 0; r < R; r++) {
        double sum = 0.0;
        first[r] = p;
        int last = P - (R - 1 - r); /* portions [p, last) may go to r */
        if (r == R - 1) {
            for (; p < P; p++)
                sum += work != NULL ? work[p] : 1.0;
            first[R] = P;
            return sum <= t * weights[r];
        }
        do {
            sum += work != NULL ? work[p] : 1.0;
            p++;
        } while (p < last && sum + (work != NULL ? work[p] : 1.0) <= t * weights[r]);
        if (sum > t * weights[r])
            return 0;
    }
    first[R] = p;
    return p == P;
}

void app_split(int P, const double *work, int R, const double *weights, int *first)
{
    double lo = 0.0, hi = 0.0, wmin = 0.0;

    if (weights == NULL) {
        for (int r = 0; r <= R; r++)
            first[r] = (int)((long long)P * r / R);
        return;
    }
    /* Bisection on the slowest rank's time: all the work on the slowest
       rank always fits. */
    for (int p = 0; p < P; p++)
        hi += work != NULL ? work[p] : 1.0;
    for (int r = 0; r < R; r++)
        wmin = r == 0 || weights[r] < wmin ? weights[r] : wmin;
    hi /= wmin;
    for (int k = 0; k < 200 && hi - lo > 1e-12 * hi; k++) {
        double mid = 0.5 * (lo + hi);
        if (app_split_fits(P, work, R, weights, mid, first))
            hi = mid;
        else
            lo = mid;
    }
    app_split_fits(P, work, R, weights, hi, first);
}

double app_wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double app_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t app_rand_u64(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0xd1342543de82ef95ull + (i + 1) * 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double app_rand_unit(uint64_t seed, uint64_t i)
{
    return (double)(app_rand_u64(seed, i) >> 11) * 0x1.0p-53;
}

int app_have_cuda(void)
{
#ifdef APP_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int app_kernel_pick(int devtype, app_kernel_t *kernel_p)
{
    const char *backend;
    int cuda;

    if (!IVM_DEV_IS_GPU(devtype)) {
        *kernel_p = APP_KERNEL_CPU;
        return 0;
    }
    /* ivmd names the backend of every GPU PE; only "cuda" means device
       memory. An emulated GPU's memory is host memory: the CPU kernel. */
    backend = getenv("IVM_GPU_BACKEND");
    if (backend == NULL || *backend == '\0' || strcmp(backend, "emu") == 0) {
        cuda = 0;
    } else if (strcmp(backend, "cuda") == 0) {
        cuda = 1;
    } else {
        fprintf(stderr, "%s: IVM_GPU_BACKEND='%s': expected cuda or emu\n", app_name,
                backend);
        return -1;
    }
    if (cuda && !app_have_cuda()) {
        fprintf(stderr, "%s: this PE runs on a CUDA GPU (gpu%d) but the apps were built "
                "without CUDA (configure with IVM_ENABLE_CUDA=ON)\n", app_name,
                IVM_DEV_INDEX(devtype));
        return -1;
    }
    *kernel_p = cuda ? APP_KERNEL_CUDA : APP_KERNEL_CPU;
    return 0;
}

int app_kernel_pick_ref(int devtype, const void *ref, app_kernel_t *kernel_p)
{
    const char *backend = getenv("IVM_GPU_BACKEND");

    if (!IVM_DEV_IS_GPU(devtype) || (backend != NULL && *backend != '\0'))
        return app_kernel_pick(devtype, kernel_p);
#ifdef APP_HAVE_CUDA
    *kernel_p = app_cuda_is_device_ptr(ref) ? APP_KERNEL_CUDA : APP_KERNEL_CPU;
#else
    (void)ref;
    *kernel_p = APP_KERNEL_CPU;
#endif
    return 0;
}

int app_kernel_pick_mine(app_kernel_t *kernel_p)
{
    int devtype;

    APP_TRY(ivmGetMyDevType(&devtype));
    return app_kernel_pick(devtype, kernel_p);
}

void *app_host_view(void *ref)
{
    void *host = NULL;
    ivmError_t rc = ivmHostPtr(ref, &host);

    if (rc != IVM_SUCCESS) {
        app_ivm_error(rc, "ivmHostPtr(ref, &host)", __FILE__, __LINE__);
        return NULL;
    }
    return host;
}

/* val's bytes into ref (on the device for the CUDA kernel). */
static int app_ref_store(app_kernel_t kernel, void *ref, const void *val, size_t size)
{
    if (kernel == APP_KERNEL_CUDA) {
#ifdef APP_HAVE_CUDA
        if (app_cuda_upload(ref, val, size) != 0)
            return -1;
#else
        fprintf(stderr, "%s: CUDA kernel picked in a build without CUDA\n", app_name);
        return -1;
#endif
    } else {
        memcpy(ref, val, size);
    }
    return 0;
}

int app_ref_put(app_kernel_t kernel, void *ref, const void *val, size_t size)
{
    if (app_ref_store(kernel, ref, val, size) != 0)
        return -1;
    APP_TRY(ivmSyncPut(ref, size));
    return 0;
}

int app_ref_put_nbi(app_kernel_t kernel, void *ref, const void *val, size_t size)
{
    if (app_ref_store(kernel, ref, val, size) != 0)
        return -1;
    APP_TRY(ivmSyncPutNbi(ref, size));
    return 0;
}

int app_kernel_pick_rank(const app_args_t *args, int rank, app_kernel_t *kernel_p)
{
    if (rank >= args->gpu_ranks) {
        *kernel_p = APP_KERNEL_CPU;
        return 0;
    }
    if (!app_have_cuda()) {
        fprintf(stderr, "%s: --gpu-ranks needs the apps built with CUDA "
                "(IVM_ENABLE_CUDA=ON)\n", app_name);
        return -1;
    }
#ifdef APP_HAVE_CUDA
    if (app_cuda_use_rank(rank) != 0)
        return -1;
#endif
    *kernel_p = APP_KERNEL_CUDA;
    return 0;
}

double app_slow_factor(const char *env, int index)
{
    const char *spec = getenv(env), *p = spec;
    double found = 1.0;

    if (spec == NULL || *spec == '\0')
        return 1.0;
    /* The whole value is checked, whichever index is asked. */
    for (;;) {
        char *end;
        long d = strtol(p, &end, 10);
        double f;
        if (end == p || *end != ':' || d < 0)
            goto bad;
        p = end + 1;
        f = strtod(p, &end);
        if (end == p || !(f >= 1.0) || !isfinite(f) || (*end != ',' && *end != '\0'))
            goto bad;
        if (d == index)
            found = f;
        if (*end == '\0')
            return found;
        p = end + 1;
    }
bad:
    fprintf(stderr, "%s: %s='%s': expected D:F[,D:F...] with F >= 1\n", app_name, env, spec);
    return -1.0;
}

void app_sleep_s(double seconds)
{
    struct timespec ts;

    if (!(seconds > 0.0))
        return;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void app_slow_apply(double factor, double seconds)
{
    app_sleep_s((factor - 1.0) * seconds);
}

uint64_t app_fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void app_checksum_hex(app_result_t *r, uint64_t value)
{
    snprintf(r->checksum, sizeof(r->checksum), "%016llx", (unsigned long long)value);
}

void app_checksum_real(app_result_t *r, double value)
{
    snprintf(r->checksum, sizeof(r->checksum), "%.9e", value);
}

double app_weighted_sum_f(const float *x, size_t n)
{
    double s = 0.0;

    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)(1 + i % 8);
    return s;
}

double app_weighted_sum_d(const double *x, size_t n)
{
    double s = 0.0;

    for (size_t i = 0; i < n; i++)
        s += x[i] * (double)(1 + i % 8);
    return s;
}

int app_verify_f(const char *app, const char *what, const float *got, const float *want,
                 size_t n, double rtol, double atol)
{
    size_t bad = 0, first = 0;

    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (!(fabs(g - w) <= atol + rtol * fabs(w))) {
            if (bad++ == 0)
                first = i;
        }
    }
    if (bad == 0)
        return 0;
    fprintf(stderr, "%s: verify: %s[%zu] = %.9g, reference %.9g (%zu of %zu elements "
            "outside rtol %g atol %g)\n", app, what, first, (double)got[first],
            (double)want[first], bad, n, rtol, atol);
    return -1;
}

int app_verify_exact(const char *app, const char *what, const void *got, const void *want,
                     size_t n_elems, size_t elem_size)
{
    const unsigned char *g = got, *w = want;
    size_t bad = 0, first = 0;

    for (size_t i = 0; i < n_elems; i++) {
        if (memcmp(g + i * elem_size, w + i * elem_size, elem_size) != 0) {
            if (bad++ == 0)
                first = i;
        }
    }
    if (bad == 0)
        return 0;
    fprintf(stderr, "%s: verify: %s element %zu differs from the reference (%zu of %zu "
            "elements differ)\n", app, what, first, bad, n_elems);
    return -1;
}

void app_result_init(app_result_t *r, const char *app, const char *version,
                     long long size)
{
    memset(r, 0, sizeof(*r));
    r->app = app;
    r->version = version;
    r->size = size;
    snprintf(r->checksum, sizeof(r->checksum), "-");
}

int app_result_add_share(app_result_t *r, const char *name, double work)
{
    for (int i = 0; i < r->nshare; i++) {
        if (strcmp(r->share_name[i], name) == 0) {
            r->share_work[i] += work;
            return i;
        }
    }
    if (r->nshare == APP_MAX_DEVS)
        return -1;
    snprintf(r->share_name[r->nshare], APP_NAME_MAX, "%s", name);
    r->share_work[r->nshare] = work;
    return r->nshare++;
}

void app_result_print(FILE *out, const app_result_t *r)
{
    double total = 0.0, rates = 0.0;
    int rated = r->nshare > 0;

    for (int i = 0; i < r->nshare; i++) {
        total += r->share_work[i];
        rates += r->share_rate[i];
        rated = rated && r->share_rate[i] > 0.0;
    }
    fprintf(out, "RESULT app=%s version=%s size=%lld pes=%d seconds=%.6f checksum=%s "
            "verified=%s share=", r->app, r->version, r->size, r->pes, r->seconds,
            r->checksum, r->verified ? "yes" : "no");
    if (r->nshare == 0)
        fputc('-', out);
    for (int i = 0; i < r->nshare; i++)
        fprintf(out, "%s%s:%.4f", i ? "," : "", r->share_name[i],
                total > 0.0 ? r->share_work[i] / total : 0.0);
    for (int i = 0; rated && i < r->nshare; i++)
        fprintf(out, "%s%s:%.4f", i ? "," : " speed=", r->share_name[i],
                r->share_rate[i] / rates);
    fputc('\n', out);
    fflush(out);
}

int app_serial_finish(const app_args_t *args, app_result_t *r, int check_rc)
{
    r->pes = 1;
    app_result_add_share(r, "serial", 1.0);
    app_result_print(stdout, r);
    return check_rc != 0 || (args->verify && !r->verified);
}

void app_dev_name(const char *host, int devtype, char *buf, size_t len)
{
    const char *kind = IVM_DEV_IS_GPU(devtype) ? "gpu" : "cpu";

    if (host == NULL || *host == '\0')
        snprintf(buf, len, "%s%d", kind, IVM_DEV_INDEX(devtype));
    else
        snprintf(buf, len, "%s.%s%d", host, kind, IVM_DEV_INDEX(devtype));
}

#define APP_MAX_NODES 64        /* nodes app_devices_probe asks for at most */

#define APP_HUGE_PAGE ((size_t)2 << 20)

void *app_alloc_pages(size_t bytes)
{
    void *p = NULL;

    if (bytes < APP_HUGE_PAGE)
        return malloc(bytes > 0 ? bytes : 1);
    if (posix_memalign(&p, APP_HUGE_PAGE, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: where THP is off the pages stay small. */
    (void)madvise(p, bytes / APP_HUGE_PAGE * APP_HUGE_PAGE, MADV_HUGEPAGE);
#endif
    return p;
}

int app_node_index(const char *host)
{
    char name[IVM_HOST_MAX + 1];
    int n;

    if (host == NULL || host[0] == '\0')
        return IVM_THIS_NODE;
    ivmError_t rc = ivmGetNumNodes(&n);
    if (rc != IVM_SUCCESS) {
        app_ivm_error(rc, "ivmGetNumNodes", __FILE__, __LINE__);
        return -3;
    }
    for (int k = 0; k < n; k++) {
        rc = ivmGetNodeName(k, name, sizeof(name));
        if (rc != IVM_SUCCESS) {
            app_ivm_error(rc, "ivmGetNodeName", __FILE__, __LINE__);
            return -3;
        }
        if (strcmp(name, host) == 0)
            return k;
    }
    return -2;
}

int app_dev_share(int node, int devtype, int *ncores_p)
{
    ivm_device_info info[IVM_NODE_DEVICES_MAX];
    int n;

    *ncores_p = 0;
    if (IVM_DEV_IS_GPU(devtype) || node < IVM_THIS_NODE ||
        ivmGetDevices(node, info, IVM_NODE_DEVICES_MAX, &n) != IVM_SUCCESS)
        return 0;
    for (int k = 0; k < n && k < IVM_NODE_DEVICES_MAX; k++)
        if (info[k].devtype == devtype && info[k].ncores > 0 && info[k].share > 0) {
            *ncores_p = info[k].ncores;
            return info[k].share;
        }
    return 0;
}

/* Pass the devices of one kind of node `name` ("": the root's node) to
   `found`; how many, or -1. */
static int app_probe_kind(const char *name, int gpu, int max_devs, int *count_p,
                          app_dev_found_fn found, void *arg)
{
    const char *host = name[0] != '\0' ? name : IVM_THIS_HOST;
    int added = 0;

    for (int k = 0; *count_p < max_devs; k++) {
        int devtype = gpu ? IVM_GPU_N(k) : IVM_CPU_N(k);
        ivm_device dev;
        ivmError_t rc = ivmCreateDev(host, devtype, &dev);

        if (rc == IVM_ERROR_NOT_FOUND || rc == IVM_ERROR_NO_DEVICE)
            break;
        APP_TRY(rc);
        int taken = found(arg, name, devtype, dev);
        if (taken < 0)
            return -1;
        if (taken == 0) {
            ++*count_p;
            added++;
        }
    }
    return added;
}

int app_devices_probe(int local, int max_devs, app_dev_found_fn found, void *arg)
{
    int count = 0, cpus;

    for (int h = 0; !local && h < APP_MAX_NODES && count < max_devs; h++) {
        char host[IVM_HOST_MAX + 1];

        snprintf(host, sizeof(host), "node%d", h);
        /* A node is known if its first CPU device is. */
        cpus = app_probe_kind(host, 0, max_devs, &count, found, arg);
        if (cpus < 0)
            return -1;
        if (cpus == 0)
            break;
        if (app_probe_kind(host, 1, max_devs, &count, found, arg) < 0)
            return -1;
    }
    if (count == 0 && (app_probe_kind("", 0, max_devs, &count, found, arg) < 0 ||
                       app_probe_kind("", 1, max_devs, &count, found, arg) < 0))
        return -1;
    return count;
}
