/*
 * cudaprobe: a second CUDA driver user beside the one under test, for the
 * cuda backend's tests; it reaches the driver as every CUDA program does
 * (dlopen("libcuda.so.1")), so it runs the same on the stand-in and on a GPU.
 *
 *   cudaprobe uuids           one line per visible device: "GPU-<uuid> <name>"
 *   cudaprobe fill ORD LEAVE  take what visible device ORD has free but
 *                             LEAVE bytes (cuMemGetInfo; whole granules)
 *                             with cuMemCreate, print "ready", hold it
 *                             until stdin closes, release.
 *                             The device memory another process (ivm-gpud)
 *                             does not know about, as an application's own
 *                             cudaMalloc is.
 * Exit status: 0, or 1 with the failing call on stderr.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

static void *probe_lib;

static void *probe_sym(const char *name)
{
    void *fn = dlsym(probe_lib, name);

    if (fn == NULL) {
        fprintf(stderr, "cudaprobe: the driver lacks %s\n", name);
        exit(1);
    }
    return fn;
}

#define PROBE_FN(type, name) ((type)probe_sym(name))
#define PROBE_CHECK(call)                                                            \
    do {                                                                             \
        CUresult rc_ = (call);                                                       \
        if (rc_ != CUDA_SUCCESS) {                                                   \
            fprintf(stderr, "cudaprobe: %s failed: CUresult %d\n", #call, (int)rc_); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static int probe_uuids(void)
{
    CUresult (*count_fn)(int *) = PROBE_FN(CUresult (*)(int *), "cuDeviceGetCount");
    CUresult (*uuid_fn)(CUuuid *, CUdevice) =
        PROBE_FN(CUresult (*)(CUuuid *, CUdevice), "cuDeviceGetUuid_v2");
    CUresult (*name_fn)(char *, int, CUdevice) =
        PROBE_FN(CUresult (*)(char *, int, CUdevice), "cuDeviceGetName");
    int n = 0, d, i;

    PROBE_CHECK(count_fn(&n));
    for (d = 0; d < n; ++d) {
        CUuuid u;
        char name[128];

        PROBE_CHECK(uuid_fn(&u, d));
        PROBE_CHECK(name_fn(name, (int)sizeof(name), d));
        printf("GPU-");
        for (i = 0; i < 16; ++i) {
            printf("%02x%s", (unsigned char)u.bytes[i],
                   (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
        }
        printf(" %s\n", name);
    }
    return 0;
}

static int probe_fill(int ord, size_t leave)
{
    CUresult (*retain)(CUcontext *, CUdevice) =
        PROBE_FN(CUresult (*)(CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain");
    CUresult (*release_ctx)(CUdevice) = PROBE_FN(CUresult (*)(CUdevice),
                                                 "cuDevicePrimaryCtxRelease_v2");
    CUresult (*set_current)(CUcontext) = PROBE_FN(CUresult (*)(CUcontext), "cuCtxSetCurrent");
    CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags) =
        PROBE_FN(CUresult (*)(size_t *, const CUmemAllocationProp *,
                              CUmemAllocationGranularity_flags),
                 "cuMemGetAllocationGranularity");
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long) =
        PROBE_FN(CUresult (*)(CUmemGenericAllocationHandle *, size_t,
                              const CUmemAllocationProp *, unsigned long long),
                 "cuMemCreate");
    CUresult (*release)(CUmemGenericAllocationHandle) =
        PROBE_FN(CUresult (*)(CUmemGenericAllocationHandle), "cuMemRelease");
    CUresult (*info)(size_t *, size_t *) = PROBE_FN(CUresult (*)(size_t *, size_t *),
                                                    "cuMemGetInfo_v2");
    size_t free_bytes, total, bytes;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h = 0;
    CUcontext ctx;
    size_t gran;
    char c;

    memset(&prop, 0, sizeof(prop));
    prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id   = ord;
    PROBE_CHECK(retain(&ctx, ord));
    PROBE_CHECK(set_current(ctx));
    PROBE_CHECK(gran_fn(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    PROBE_CHECK(info(&free_bytes, &total));
    bytes = free_bytes > leave ? (free_bytes - leave) / gran * gran : 0;
    if (bytes > 0) {
        PROBE_CHECK(create(&h, bytes, &prop, 0));
    }
    printf("ready %zu\n", bytes);
    fflush(stdout);
    while (read(STDIN_FILENO, &c, 1) > 0) {
    }
    if (bytes > 0) {
        PROBE_CHECK(release(h));
    }
    PROBE_CHECK(release_ctx(ord));
    return 0;
}

int main(int argc, char **argv)
{
    CUresult (*init)(unsigned int);

    if (argc < 2 || (strcmp(argv[1], "fill") == 0 && argc != 4)) {
        fprintf(stderr, "usage: cudaprobe uuids | cudaprobe fill ORDINAL LEAVE_BYTES\n");
        return 2;
    }
    probe_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (probe_lib == NULL) {
        fprintf(stderr, "cudaprobe: dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    init = PROBE_FN(CUresult (*)(unsigned int), "cuInit");
    PROBE_CHECK(init(0));
    if (strcmp(argv[1], "uuids") == 0) {
        return probe_uuids();
    }
    if (strcmp(argv[1], "fill") == 0) {
        return probe_fill(atoi(argv[2]), strtoull(argv[3], NULL, 0));
    }
    fprintf(stderr, "cudaprobe: unknown mode %s\n", argv[1]);
    return 2;
}
