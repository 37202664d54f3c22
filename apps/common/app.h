/*
 * app: what the applications of section 5.4 share (NBODY, DMM, NW, HIMENO).
 *
 * Argument parsing, deterministic seeded input, wall-clock timing, the kernel
 * picker (CPU or CUDA kernel from the PE's device type), checksums, result
 * verification and the one machine-readable result line. Used by the IVM
 * versions, the MPI baselines and the serial references alike; only
 * app_kernel_pick_mine() calls IVM.
 */
#ifndef IVM_APP_H
#define IVM_APP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ivm.h>

/* A function both kernels run: the CPU kernel (C) and, compiled by nvcc,
   the CUDA kernel (host and device code). */
#ifdef __CUDACC__
#define APP_HOST_DEVICE __host__ __device__
#else
#define APP_HOST_DEVICE
#endif

#define APP_MAX_DEVS   64      /* devices one run may use (share entries) */
#define APP_NAME_MAX   80      /* device name in the share list, e.g. node1.gpu0 */
#define APP_CHECKSUM_MAX 32    /* checksum text, NUL included */

/* Print a failed IVM call (status text and detailed message) prefixed with the
   app's name, and make the enclosing function return -1. */
#define APP_TRY(call)                                                          \
    do {                                                                       \
        ivmError_t app_try_rc_ = (call);                                       \
        if (app_try_rc_ != IVM_SUCCESS) {                                      \
            app_ivm_error(app_try_rc_, #call, __FILE__, __LINE__);             \
            return -1;                                                         \
        }                                                                      \
    } while (0)

/* The same, jumping to `label` (cleanup) instead of returning. */
#define APP_TRY_GOTO(call, label)                                              \
    do {                                                                       \
        ivmError_t app_try_rc_ = (call);                                       \
        if (app_try_rc_ != IVM_SUCCESS) {                                      \
            app_ivm_error(app_try_rc_, #call, __FILE__, __LINE__);             \
            goto label;                                                        \
        }                                                                      \
    } while (0)

/* The options every app takes (app_args_parse). Each app gives its defaults
   in the same struct and says in its usage what size and portions mean. */
typedef struct app_args {
    const char *app;        /* program name for messages and the result line */
    long long size;         /* --size N: problem size (app-defined unit) */
    uint64_t seed;          /* --seed S: input seed */
    int portions;           /* --portions P: work portions per iteration */
    int iters;              /* --iters I: iterations (time steps) */
    double threshold;       /* --threshold T: spawn while time/min < T (default 2) */
    int max_per_dev;        /* --max-per-dev K: PEs at once on one device (default 1) */
    int local;              /* --local: only the devices of the root's node */
    int verify;             /* --verify: check against the serial reference */
    int serial;             /* --serial: the CPU kernel in one process (version=serial) */
    int gpu_ranks;          /* --gpu-ranks K: MPI ranks 0..K-1 run the CUDA kernel */
    int dpc;                /* --dpc: DS-LB measures every PE's creation latency */
    int layout_equal;       /* --layout equal: DS-LB's equal portions (default weighted) */
    int tiles;              /* --tiles T: DMM's tiles of C, T = M*M (0: the app's default) */
    int nweights;           /* --weights W0,W1,..: MPI baselines' speed-weighted split */
    double weights[APP_MAX_DEVS]; /* relative speed of each rank, > 0 */
} app_args_t;

/* Kernel flavour a PE runs. */
typedef enum app_kernel {
    APP_KERNEL_CPU = 0,     /* OpenMP on host memory (CPU devices, emu GPUs) */
    APP_KERNEL_CUDA = 1     /* CUDA on device memory (GPU PEs of the cuda backend) */
} app_kernel_t;

/* One machine-readable result line (app_result_print). */
typedef struct app_result {
    const char *app;                  /* "nbody", "dmm", "nw", "himeno" */
    const char *version;              /* "ivm", "mpi" or "serial" */
    long long size;
    int pes;                          /* PEs (processes) spawned, the root excluded */
    double seconds;                   /* wall-clock of the computation */
    char checksum[APP_CHECKSUM_MAX];  /* app_checksum_hex / app_checksum_real */
    int verified;                     /* 1: checked against the reference and equal */
    int nshare;                       /* devices in share[] */
    char share_name[APP_MAX_DEVS][APP_NAME_MAX];
    double share_work[APP_MAX_DEVS];  /* work done per device, any unit */
    double share_rate[APP_MAX_DEVS];  /* its measured work per busy second; 0: none */
} app_result_t;

/* Parse argv into *args, starting from the defaults already in *args.
   Returns 0, or -1 after printing what is wrong and the usage (exit 2 then).
   `usage_extra` (may be NULL) is printed under the usage line: what --size
   and --portions mean for this app. Every PE parses the same argv. */
int app_args_parse(int argc, char **argv, app_args_t *args, const char *usage_extra);

/* The static split of the MPI baselines: portions [first[r], first[r+1]) of
   P (work units work[p]; NULL: 1 each) to rank r of R, in order, at least
   one each (R <= P). Without weights (NULL) the equal split, portions
   [P*r/R, P*(r+1)/R); with weights (relative speeds, > 0) the contiguous
   split that makes the slowest rank's time, max over r of (its work /
   weights[r]), the least: the best a static program that knows the
   devices' speeds can do with these portions. first has R + 1 entries. */
void app_split(int P, const double *work, int R, const double *weights, int *first);

/* Seconds of a monotonic clock. */
double app_now_s(void);
/* Seconds of the wall clock (CLOCK_REALTIME): comparable between processes,
   across hosts only as far as their clocks agree. */
double app_wall_s(void);

/* Deterministic input: the i-th value of the stream of `seed`, independent of
   which process computes it (splitmix64 of seed and i). */
uint64_t app_rand_u64(uint64_t seed, uint64_t i);
/* The same value as a double in [0, 1). */
double app_rand_unit(uint64_t seed, uint64_t i);

/* Decide which kernel a PE of device type `devtype` runs: the CPU kernel on
   CPU devices and emulated GPUs, the CUDA kernel on GPUs of the cuda backend
   only. The GPU backend comes from IVM_GPU_BACKEND ("cuda" or "emu", set by
   ivmd for every GPU PE); unset counts as emu. Returns 0, or -1 with a
   message (another value; a cuda GPU in a build without CUDA). */
int app_kernel_pick(int devtype, app_kernel_t *kernel_p);
/* app_kernel_pick for the calling PE (ivmGetMyDevType). */
int app_kernel_pick_mine(app_kernel_t *kernel_p);
/* The same, and when IVM_GPU_BACKEND is unset on a GPU PE (a daemon that
   does not set it), decided by what the reference `ref` of a mapped object
   is: CUDA device memory (asked to the CUDA runtime, in a build with CUDA)
   or not, so the CPU kernel never touches device memory. */
int app_kernel_pick_ref(int devtype, const void *ref, app_kernel_t *kernel_p);
/* The host view (node copy) of reference `ref` of a mapped object
   (ivmHostPtr: itself for a CPU PE). On a GPU PE, flags, records and control
   data are read there, after an ivmSyncGet of the range when the node copy
   may be older than the master. NULL after printing the error. */
void *app_host_view(void *ref);
/* Write `size` bytes of `val` at reference `ref` (the PE's own copy: host
   memory, an emulated GPU's memory, or CUDA device memory with the CUDA
   kernel) and push them to the master (ivmSyncPut). On a GPU PE a push first
   copies the device copy's range to the node copy, so writes made to the
   host view would be overwritten: GPU PEs write through this. The CUDA
   upload (cudaMemcpy from pageable memory may return before the bytes
   land) needs no synchronisation: ivmSyncPut waits for the PE's device
   work first (include/ivm.h). 0 or -1 (printed). */
int app_ref_put(app_kernel_t kernel, void *ref, const void *val, size_t size);
/* The same, the push posted (ivmSyncPutNbi): it lands by the PE's next
   ivmQuiet (or ivmUnmap, ivmExit), and a GPU PE's device work is waited
   for at the call. 0 or -1 (printed). */
int app_ref_put_nbi(app_kernel_t kernel, void *ref, const void *val, size_t size);

/* Non-zero if the apps were built with their CUDA kernels. */
int app_have_cuda(void);

/* CUDA buffers for the MPI baselines (ranks of --gpu-ranks), defined only
   when APP_HAVE_CUDA: pick GPU rank % visible GPUs, allocate, copy, free.
   0, or -1 after printing the CUDA error. */
int app_cuda_use_rank(int rank);
int app_cuda_is_device_ptr(const void *ptr);    /* 1: CUDA device memory */
int app_cuda_alloc(void **dev_p, size_t bytes);
int app_cuda_upload(void *dev, const void *host, size_t bytes);
int app_cuda_download(void *host, const void *dev, size_t bytes);
void app_cuda_free(void *dev);
/* After a kernel launch: its launch error, then cudaDeviceSynchronize's.
   0, or -1 after printing "<app>: CUDA kernel failed: <error>". */
int app_cuda_launched(const char *app);

/* MPI baselines: the kernel rank `rank` runs (CUDA for ranks below
   --gpu-ranks). 0, or -1 with a message (--gpu-ranks in a build without
   CUDA). */
int app_kernel_pick_rank(const app_args_t *args, int rank, app_kernel_t *kernel_p);

/* Test knob that emulates slower devices on a homogeneous machine: the
   variable `env` holds "D:F[,D:F...]"; returns F for index D (a DS-LB
   device index, or an MPI rank), 1 when not listed, -1 (printed) when the
   variable is malformed or F < 1. */
double app_slow_factor(const char *env, int index);
/* Sleep `seconds` (nothing when not > 0), resumed after a signal. */
void app_sleep_s(double seconds);
/* Sleep (factor - 1) x seconds: a device `factor` times slower did the work. */
void app_slow_apply(double factor, double seconds);

/* Checksums. Integers: FNV-1a of the bytes, printed as 16 hex digits.
   Floats: sum of x[i] * (1 + i % 8) in double, printed %.9e (the same
   kernel on the same split of elements gives the same bits, whatever the
   number of processes, as each element is computed by one process). */
uint64_t app_fnv1a(const void *data, size_t len);
void app_checksum_hex(app_result_t *r, uint64_t value);
void app_checksum_real(app_result_t *r, double value);
double app_weighted_sum_f(const float *x, size_t n);
double app_weighted_sum_d(const double *x, size_t n);

/* Compare n floats: |got - want| <= atol + rtol * |want| for each. Returns 0,
   or -1 after printing the first bad element and how many are bad. */
int app_verify_f(const char *app, const char *what, const float *got, const float *want,
                 size_t n, double rtol, double atol);
/* Compare bytes exactly; 0 or -1 after printing the first differing element
   (elem_size bytes each). */
int app_verify_exact(const char *app, const char *what, const void *got, const void *want,
                     size_t n_elems, size_t elem_size);

/* Start a result: app, version, size; no share entries yet. */
void app_result_init(app_result_t *r, const char *app, const char *version,
                     long long size);
/* Add `work` to the device named `name` (a new entry if not listed yet).
   Returns the entry's index, or -1 when APP_MAX_DEVS entries are taken. */
int app_result_add_share(app_result_t *r, const char *name, double work);
/* Print the one result line:
   RESULT app=A version=V size=N pes=P seconds=S checksum=C verified=yes|no
          share=dev0:x,dev1:y,... [speed=dev0:x,dev1:y,...]
   (one line; share = fraction of the work per device, 4 decimals; "-" when
   no device is listed; speed, only when every device has a share_rate: each
   one's fraction of their summed rates). */
void app_result_print(FILE *out, const app_result_t *r);

/* The end of a --serial run: r->pes = 1, share "serial", the result line.
   `check_rc` is what the app's check returned (non-zero: it failed). The
   exit status: 1 when the check failed or --verify found a mismatch, else 0. */
int app_serial_finish(const app_args_t *args, app_result_t *r, int check_rc);

/* Print "<app>: <call> failed: <status> (<message>)" for a failed IVM call. */
void app_ivm_error(ivmError_t rc, const char *call, const char *file, int line);

/* Device name for the share list: "<host>.cpu<k>" or "<host>.gpu<k>"
   (host "" gives "cpu<k>"). */
void app_dev_name(const char *host, int devtype, char *buf, size_t len);

/* A device found by app_devices_probe: `host` is its node's name ("" for the
   root's node when no node is named), `devtype` IVM_CPU_N(k) or IVM_GPU_N(k),
   `dev` its handle (ivmCreateDev; the callback owns it). 0: taken, 1: left
   out (not counted), -1 (printed): the probe fails. */
typedef int (*app_dev_found_fn)(void *arg, const char *host, int devtype, ivm_device dev);

/* The devices a driver (DS-LB, OM-LB) runs on: the CPU then the GPU devices
   (k = 0, 1, ... until IVM_ERROR_NOT_FOUND or IVM_ERROR_NO_DEVICE) of node0,
   node1, ... (until a node without a CPU device), or with `local` (or no node
   named node0) those of the root's node, host ""; `max_devs` at most. Each is
   passed to `found`. The count (0: none found), or -1 after printing an
   unexpected ivmCreateDev error or when `found` failed. */
int app_devices_probe(int local, int max_devs, app_dev_found_fn found, void *arg);

/* `bytes` of memory for a kernel's large working arrays, freed with free():
   aligned to 2 MiB and marked for transparent huge pages (madvise), so that
   a PE created at run time does not pay a page fault per 4 KiB when it
   first touches them (about 19 us each on a guest with shadow paging: 34
   MiB took 160 ms, 3 ms in huge pages). NULL when out of memory. */
void *app_alloc_pages(size_t bytes);

/* The index of the node named `host` as app_devices_probe passes it
   (IVM_THIS_NODE for ""); -2 when no node has that name, -3 when asking
   failed (printed). */
int app_node_index(const char *host);

/* What CPU device `devtype` of node `node` declares (ivmGetDevices): its
   share of its cores' time in percent ("0:80" gives 80), its cores into
   *ncores_p. 0 for a GPU, or when it is not known. */
int app_dev_share(int node, int devtype, int *ncores_p);

#endif /* IVM_APP_H */
