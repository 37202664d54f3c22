/*
 * PE program of the GPU tests (test_gpu.c): GPU PEs through the real ivmd and
 * ivm-gpud. The root PE (a CPU PE) allocates the objects and creates GPU PEs;
 * figures of the GPU daemon come from this node's ivmd (GPU_INFO).
 *
 * Device memory is reached through dev_write/dev_read: plain memcpy on the
 * emu backend (a device pointer there is a host address of the emulated
 * device memory), cuMemcpy through the dlopen'd driver when
 * IVM_TEST_GPU_BACKEND=cuda.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include "pe_util.h"
#include "client.h"
#include "proto.h"
#include "sock.h"

#define KB 1024u
#define MB (1024u * 1024u)

/* ------------------------------------------------------------ device access */

typedef int (*cu_htod_fn)(unsigned long long, const void *, size_t);
typedef int (*cu_dtoh_fn)(void *, unsigned long long, size_t);

static int dev_cuda_arg; /* "cuda" among the scenario's arguments (ivmrun runs) */

static int dev_cuda(void)
{
    const char *b = getenv("IVM_TEST_GPU_BACKEND");

    return dev_cuda_arg || (b != NULL && strcmp(b, "cuda") == 0);
}

static void dev_write(void *dev, const void *src, size_t n)
{
    if (dev_cuda()) {
        cu_htod_fn f = (cu_htod_fn)pe_cuda_sym("cuMemcpyHtoD_v2");
        ASSERT(f((unsigned long long)(uintptr_t)dev, src, n) == 0, "cuMemcpyHtoD failed");
    } else {
        memcpy(dev, src, n);
    }
}

static void dev_read(void *dst, const void *dev, size_t n)
{
    if (dev_cuda()) {
        cu_dtoh_fn f = (cu_dtoh_fn)pe_cuda_sym("cuMemcpyDtoH_v2");
        ASSERT(f(dst, (unsigned long long)(uintptr_t)dev, n) == 0, "cuMemcpyDtoH failed");
    } else {
        memcpy(dst, dev, n);
    }
}

static void dev_fill(void *dev, int byte, size_t n)
{
    char *buf = malloc(n);

    ASSERT(buf != NULL, "malloc");
    memset(buf, byte, n);
    dev_write(dev, buf, n);
    free(buf);
}

/* Every byte of device [dev, dev+n) is `byte`. */
static void dev_expect(const void *dev, int byte, size_t n, const char *what)
{
    unsigned char *buf = malloc(n);
    size_t i;

    ASSERT(buf != NULL, "malloc");
    dev_read(buf, dev, n);
    for (i = 0; i < n; ++i) {
        if (buf[i] != (unsigned char)byte) {
            pe_failf(__LINE__, "%s: device byte %zu is 0x%02x, expected 0x%02x", what, i,
                     buf[i], (unsigned char)byte);
        }
    }
    free(buf);
}

static void host_expect(const void *p, int byte, size_t n, const char *what)
{
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; ++i) {
        if (b[i] != (unsigned char)byte) {
            pe_failf(__LINE__, "%s: host byte %zu is 0x%02x, expected 0x%02x", what, i, b[i],
                     (unsigned char)byte);
        }
    }
}

/* ------------------------------------------------------------ helpers */

/* GPU_INFO of GPU `gpu` of this node. */
static void gpu_info(int gpu, ivm_msg_gpu_info_rep_t *rep)
{
    ivm_msg_gpu_info_req_t req = {.gpu = (uint32_t)gpu};

    ASSERT(getenv("IVM_SOCKET") != NULL, "GPU_INFO needs IVM_SOCKET (not singleton mode)");
    memset(rep, 0, sizeof(*rep));
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_GPU_INFO, &req, sizeof(req),
                              rep, sizeof(*rep), NULL),
           IVM_SUCCESS);
}

/* The GPU's allocation granularity: the geometry unit of the group scenarios,
 * so that regions stay distinct device copies on any backend. */
static size_t gpu_unit(void)
{
    ivm_msg_gpu_info_rep_t g;

    gpu_info(0, &g);
    ASSERT(g.granularity > 0 && g.granularity <= 64 * MB, "granularity %llu",
           (unsigned long long)g.granularity);
    return (size_t)g.granularity;
}

static void print_info(const char *when, const ivm_msg_gpu_info_rep_t *g)
{
    printf("gpu-info %s: backend %s alive %d used %llu cached %llu copies %u refs %u "
           "allocations %llu evictions %llu waiting %u timeouts %u\n",
           when, g->backend, (g->flags & IVM_GPU_INFO_ALIVE) != 0,
           (unsigned long long)g->used, (unsigned long long)g->cached_bytes, g->copies,
           g->mapped_refs, (unsigned long long)g->allocations,
           (unsigned long long)g->evictions, g->waiting, g->wait_timeouts);
}

static void create_on(const char *host, int devtype, int n, ivm_pe *pes)
{
    ivm_device dev;

    CHECK(ivmCreateDev(host, devtype, &dev));
    CHECK(ivmCreatePEs(dev, n, pes));
    CHECK(ivmDestroyDev(dev));
    for (int i = 0; i < n; ++i) {
        ASSERT(pes[i] > 0, "slot %d got no PE", i);
    }
}

static void expect_gpu_pe(int k)
{
    int devtype = -1;

    CHECK(ivmGetMyDevType(&devtype));
    ASSERT(devtype == IVM_GPU_N(k), "device type 0x%x, expected GPU %d", devtype, k);
    ASSERT(getenv("IVM_GPU") != NULL && atoi(getenv("IVM_GPU")) == k, "IVM_GPU is '%s'",
           getenv("IVM_GPU") ? getenv("IVM_GPU") : "(unset)");
    ASSERT(getenv("IVM_GPU_BACKEND") != NULL &&
               strcmp(getenv("IVM_GPU_BACKEND"), dev_cuda() ? "cuda" : "emu") == 0,
           "IVM_GPU_BACKEND is '%s'",
           getenv("IVM_GPU_BACKEND") ? getenv("IVM_GPU_BACKEND") : "(unset)");
}

static void wait_all(const ivm_pe *pes, int n)
{
    for (int i = 0; i < n; ++i) {
        CHECK(ivmWait(pes[i]));
    }
}

static void signal_n(int n)
{
    for (int i = 0; i < n; ++i) {
        CHECK(ivmSignal());
    }
}

/* One signal addressed to each PE (ivmWaitFrom(0) takes it): for rounds,
 * where a PE that is quick to come back could take a broadcast signal
 * meant for another PE of the round (ivmSignal's counter is the root's). */
static void signal_each(const ivm_pe *pes, int n)
{
    for (int i = 0; i < n; ++i) {
        CHECK(ivmSignalTo(pes[i]));
    }
}

/* ------------------------------------------------------------ scenarios */

/* K GPU PEs map one object on GPU 0: one device copy, one allocation, K
 * references; each sees the master's bytes; unmapped, the copy stays cached. */
/* Posted puts from a CPU PE on node1 into a master on node0 whose range a
 * GPU PE of node0 maps: past IVM_EP_AFTER syncs they go over the PE's
 * endpoint, whose daemon sends each back (a device copy of the range is
 * there), and the quiet redoes them through the PE's daemon: every slot is
 * in the master. */
#define NBIR_SLOTS 300
#define NBIR_SLOT  1024
static int sc_nbi_refused(int argc, char **argv)
{
    char *c;

    (void)argc;
    (void)argv;
    if (pe_enter() != 0) {
        char node[16] = "";
        snprintf(node, sizeof(node), "%s", getenv("IVM_NODE") ? getenv("IVM_NODE") : "?");
        CHECK(ivmMap("nbir", &c, 0));
        if (strcmp(node, "node0") == 0) { /* the GPU PE: holds a device copy */
            CHECK(ivmSignal());
            CHECK(ivmWait(0));
            CHECK(ivmUnmap(c));
            CHECK(ivmExit());
            return 0;
        }
        for (int k = 0; k < NBIR_SLOTS; ++k) {
            memset(c + (size_t)k * NBIR_SLOT, 1 + k % 200, NBIR_SLOT);
            CHECK(ivmSyncPutNbi(c + (size_t)k * NBIR_SLOT, NBIR_SLOT));
        }
        CHECK(ivmQuiet());
        CHECK(ivmUnmap(c));
        CHECK(ivmExit());
        return 0;
    }
    {
        ivm_pe gpu, cpu;
        CHECK(ivmMalloc("nbir", &c, (size_t)NBIR_SLOTS * NBIR_SLOT));
        memset(c, 0, (size_t)NBIR_SLOTS * NBIR_SLOT);
        create_on("node0", IVM_GPU_0, 1, &gpu);
        pe_stage = "root waits for the GPU PE's map";
        CHECK(ivmWait(gpu));
        create_on("node1", IVM_CPU, 1, &cpu);
        pe_stage = "root waits for node1's posted puts";
        CHECK(ivmWait(cpu)); /* its exit */
        for (int k = 0; k < NBIR_SLOTS; ++k) {
            const unsigned char *u = (const unsigned char *)c + (size_t)k * NBIR_SLOT;
            ASSERT(u[0] == 1 + k % 200 && u[NBIR_SLOT - 1] == 1 + k % 200,
                   "slot %d of the master is %d after node1's ivmQuiet, expected %d", k, u[0],
                   1 + k % 200);
        }
        CHECK(ivmSignal());
        CHECK(ivmWait(gpu));
        CHECK(ivmFree(c));
    }
    return pe_ok();
}

static int sc_dedup(int argc, char **argv)
{
    int k = argc > 2 ? atoi(argv[2]) : 4;
    const size_t size = 1 * MB;
    ivm_msg_gpu_info_rep_t g;
    ivm_pe pes[16];
    char *v, *dev, *host;

    if (pe_enter() != 0) {
        expect_gpu_pe(0);
        pe_stage = "GPU PE maps";
        CHECK(ivmMap("v", &dev, 0));
        CHECK(ivmHostPtr(dev, &host));
        ASSERT(host != dev, "the host view of a device copy is the device pointer");
        host_expect(host, 0x5a, size, "node copy");
        dev_expect(dev, 0x5a, size, "device copy");
        CHECK(ivmHostPtr(dev + 4096, &v));
        ASSERT(v == host + 4096, "ivmHostPtr(ref + 4096) = host %+td", v - host);
        CHECK(ivmSignal());
        pe_stage = "GPU PE waits for the root";
        CHECK(ivmWait(0));
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(k >= 1 && k <= 16, "k = %d", k);
    CHECK(ivmMalloc("v", &v, size));
    memset(v, 0x5a, size);
    create_on(IVM_THIS_HOST, IVM_GPU_0, k, pes);
    pe_stage = "root waits for the GPU PEs' maps";
    wait_all(pes, k);
    gpu_info(0, &g);
    print_info("mapped", &g);
    ASSERT(g.flags & IVM_GPU_INFO_ALIVE, "ivm-gpud not alive");
    ASSERT(g.allocations == 1 && g.copies == 1 && g.mapped_refs == (uint32_t)k,
           "%d PEs mapping one object: %llu allocations, %u copies, %u references", k,
           (unsigned long long)g.allocations, g.copies, g.mapped_refs);
    ASSERT(g.used >= size && g.used < size + g.granularity,
           "%llu bytes used for one %zu-byte object (granularity %llu)",
           (unsigned long long)g.used, size, (unsigned long long)g.granularity);
    signal_n(k);
    wait_all(pes, k);
    gpu_info(0, &g);
    print_info("unmapped", &g);
    ASSERT(g.mapped_refs == 0 && g.copies == 1 && g.cached_bytes == g.used,
           "after the unmaps: %u references, %u copies, %llu cached of %llu used",
           g.mapped_refs, g.copies, (unsigned long long)g.cached_bytes,
           (unsigned long long)g.used);
    CHECK(ivmFree(v));
    return pe_ok();
}

/* The sync chain: a GPU PE (on `host`, NULL = this node) writes its device
 * copy and Puts (master sees it); the master changes and the GPU PE Gets
 * (device copy sees it, not before). Also: the host view accepted by syncs,
 * ivmMalloc in a GPU PE (device pointer, master on its node). */
typedef struct chain_ctl {
    atomic_int step;
} chain_ctl_t;

static int sc_chain(int argc, char **argv)
{
    const char *host = argc > 2 && strcmp(argv[2], "local") != 0 ? argv[2] : NULL;
    const size_t size = 256 * KB;
    char *c, *dev, *hv;

    if (pe_enter() != 0) {
        expect_gpu_pe(0);
        CHECK(ivmMap("c", &dev, 0));
        dev_expect(dev, 'A', size, "fresh device copy");
        dev_fill(dev + 4096, 'B', 4096);
        pe_stage = "GPU PE SyncPut";
        CHECK(ivmSyncPut(dev + 4096, 4096));
        /* A posted put: the device copy's bytes reach the master by the quiet. */
        pe_stage = "GPU PE SyncPutNbi";
        dev_fill(dev + 12288, 'F', 4096);
        CHECK(ivmSyncPutNbi(dev + 12288, 4096));
        CHECK(ivmQuiet());
        CHECK(ivmSignal());
        pe_stage = "GPU PE waits for the root's change";
        CHECK(ivmWait(0));
        /* The master changed [0, 4096) to 'C': not yet in the device copy. */
        dev_expect(dev, 'A', 4096, "device copy before SyncGet");
        CHECK(ivmSyncGet(dev, 4096));
        dev_expect(dev, 'C', 4096, "device copy after SyncGet");
        dev_expect(dev + 8192, 'A', 4096, "device bytes outside the Get");
        /* Syncs accept the host view too. */
        CHECK(ivmHostPtr(dev + 8192, &hv));
        dev_fill(dev + 8192, 'D', 100);
        CHECK(ivmSyncPut(hv, 100));
        EXPECT(ivmSyncPut(dev + size - 10, 20), IVM_ERROR_INVALID_VALUE);
        /* An empty range inside the mapping is a no-op, as for a CPU PE. */
        CHECK(ivmSyncPut(dev + 4096, 0));
        CHECK(ivmSyncGet(dev + 8192, 0));
        CHECK(ivmSyncGetGroup(dev + 100, 0));
        /* A GPU PE's own object: a device pointer, the master on its node. */
        CHECK(ivmMalloc("own", &c, 64 * KB));
        dev_expect(c, 0, 64 * KB, "fresh object in a GPU PE");
        dev_fill(c, 'E', 64 * KB);
        CHECK(ivmSyncPut(c, 64 * KB));
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmFree(c));
        /* Not ours to free, not a mapping's start: refused, the mapping intact. */
        EXPECT(ivmFree(dev), IVM_ERROR_PERMISSION);
        EXPECT(ivmUnmap(dev + 1), IVM_ERROR_INVALID_VALUE);
        CHECK(ivmSyncGet(dev, 4096));
        dev_expect(dev, 'C', 4096, "device copy after the refused free");
        CHECK(ivmUnmap(dev));
        EXPECT(ivmSyncGet(dev, 4096), IVM_ERROR_INVALID_VALUE);
        CHECK(ivmExit());
        return 0;
    }
    {
        ivm_pe pe;
        char *own;
        CHECK(ivmMalloc("c", &c, size));
        memset(c, 'A', size);
        create_on(host, IVM_GPU_0, 1, &pe);
        pe_stage = "root waits for the GPU PE's Put";
        CHECK(ivmWait(pe));
        host_expect(c + 4096, 'B', 4096, "master after the GPU PE's SyncPut");
        host_expect(c, 'A', 4096, "master before the changed range");
        host_expect(c + 8192, 'A', 4096, "master after the changed range");
        host_expect(c + 12288, 'F', 4096, "master after the GPU PE's SyncPutNbi + Quiet");
        host_expect(c + 16384, 'A', size - 16384, "master after the posted range");
        memset(c, 'C', 4096);
        CHECK(ivmSignal());
        pe_stage = "root waits for the GPU PE's second Put";
        CHECK(ivmWait(pe));
        host_expect(c + 8192, 'D', 100, "master after a Put through the host view");
        CHECK(ivmMap("own", &own, 0));
        if (host != NULL) {
            CHECK(ivmSyncGet(own, 64 * KB));
        }
        host_expect(own, 'E', 64 * KB, "the GPU PE's own object");
        CHECK(ivmUnmap(own));
        CHECK(ivmSignal());
        CHECK(ivmWait(pe));
        CHECK(ivmFree(c));
    }
    return pe_ok();
}

/* What the sync calls promise a GPU PE (include/ivm.h): its device work
 * queued before the call has finished first. On cuda the PE queues an
 * asynchronous copy on the legacy stream (cuMemcpyHtoDAsync from pageable
 * memory, as cudaMemcpy's staging or a kernel would leave it) and syncs at
 * once: Put must carry the copy's bytes, and Get's bytes must not be
 * overwritten by a copy queued before it. On emu device writes are host
 * code, finished when the call is made; the scenario runs as plain writes. */
typedef int (*cu_htod_async_fn)(unsigned long long, const void *, size_t, void *);

static void dev_write_async(void *dev, int byte, size_t n, char *staging)
{
    memset(staging, byte, n);
    if (dev_cuda()) {
        cu_htod_async_fn f = (cu_htod_async_fn)pe_cuda_sym("cuMemcpyHtoDAsync_v2");
        ASSERT(f((unsigned long long)(uintptr_t)dev, staging, n, NULL) == 0,
               "cuMemcpyHtoDAsync failed");
    } else {
        memcpy(dev, staging, n);
    }
}

static void *unmap_thread(void *dev)
{
    return (void *)(intptr_t)ivmUnmap(dev);
}

/* ivmUnmap from a thread that never touched the GPU (no current context). */
static ivmError_t unmap_in_thread(void *dev)
{
    pthread_t t;
    void *st;

    ASSERT(pthread_create(&t, NULL, unmap_thread, dev) == 0, "pthread_create");
    ASSERT(pthread_join(t, &st) == 0, "pthread_join");
    return (ivmError_t)(intptr_t)st;
}

static int sc_async(int argc, char **argv)
{
    const size_t size = 256 * KB, part = 64 * KB;
    char *c, *dev, *staging;

    if (pe_enter() != 0) {
        expect_gpu_pe(0);
        staging = malloc(part);
        ASSERT(staging != NULL, "malloc");
        CHECK(ivmMap("c", &dev, 0));
        pe_stage = "GPU PE SyncPut right after an async copy";
        dev_write_async(dev, 'B', part, staging);
        CHECK(ivmSyncPut(dev, part));
        CHECK(ivmSignal());
        pe_stage = "GPU PE waits for the root's change";
        CHECK(ivmWait(0));
        /* An async copy queued before the Get lands before it, not after. */
        dev_write_async(dev + part, 'D', part, staging);
        CHECK(ivmSyncGet(dev + part, part));
        dev_expect(dev + part, 'C', part, "device copy after SyncGet behind an async copy");
        /* The mapping goes with a copy into it still queued, from a thread
         * without a current context: the copy ends first (as cudaFree
         * waits), the unmap is done in the PE's context. */
        pe_stage = "GPU PE unmaps from another thread behind an async copy";
        dev_write_async(dev, 'E', part, staging);
        CHECK(unmap_in_thread(dev));
        if (dev_cuda()) {
            int (*ctx_sync)(void) = (int (*)(void))pe_cuda_sym("cuCtxSynchronize");
            /* A copy left queued would now run into unmapped memory: a fault. */
            ASSERT(ctx_sync() == 0, "an async copy into the mapping ran after ivmUnmap");
        }
        free(staging);
        CHECK(ivmExit());
        return 0;
    }
    {
        ivm_pe pe;
        CHECK(ivmMalloc("c", &c, size));
        memset(c, 'A', size);
        create_on(NULL, IVM_GPU_0, 1, &pe);
        pe_stage = "root waits for the GPU PE's Put";
        CHECK(ivmWait(pe));
        host_expect(c, 'B', part, "master after a SyncPut right after an async copy");
        memset(c + part, 'C', part);
        CHECK(ivmSignal());
        CHECK(ivmWait(pe));
        CHECK(ivmFree(c));
    }
    (void)argc;
    (void)argv;
    return pe_ok();
}

/* Group calls with two GPU PEs on GPU 0 holding two different device copies
 * (overlapping regions; U = the GPU's granularity) and a CPU PE:
 *  - PE A writes [U, 1.5U) and PutGroups it: master and PE B's copy get it;
 *  - PE B writes [2.5U, 3U) (outside A's copy); a CPU PE's GetGroup gathers
 *    it into the master.
 * The PEs take turns through `ctl` (an object whose node copy is the master:
 * everybody reads the same bytes, GPU PEs through ivmHostPtr). */
static atomic_int *group_ctl(void)
{
    atomic_int *ref, *host;

    CHECK(ivmMap("ctl", &ref, 0));
    CHECK(ivmHostPtr(ref, &host));
    return host;
}

static void group_turn(atomic_int *ctl, int step)
{
    pe_stage = "waiting for my turn";
    for (double deadline = pe_now() + 30; atomic_load(ctl) < step; pe_sleep_ms(1)) {
        ASSERT(pe_now() < deadline, "turn %d never came (at %d)", step, atomic_load(ctl));
    }
}

static void group_root_step(atomic_int *ctl, int step, ivm_pe who)
{
    atomic_store(ctl, step);
    pe_stage = "root waits for a step";
    CHECK(ivmWait(who));
}

static int sc_group(int argc, char **argv)
{
    const size_t U = gpu_unit(), size = 16 * U;
    ivm_msg_gpu_info_rep_t g;
    ivm_pe gpus[2], cpu;
    int me = pe_enter();
    atomic_int *ctl;
    char *m, *dev;

    if (me != 0) {
        int devtype;
        ctl = group_ctl();
        CHECK(ivmGetMyDevType(&devtype));
        if (!IVM_DEV_IS_GPU(devtype)) {
            /* The CPU PE: gathers B's bytes, sees them in the master. */
            CHECK(ivmMap("g", &m, 0));
            group_turn(ctl, 3);
            host_expect(m + 5 * U / 2, 0, U / 2, "master before the gather");
            CHECK(ivmSyncGetGroup(m + 2 * U, 2 * U));
            host_expect(m + 5 * U / 2, 'Y', U / 2, "master after the CPU PE's GetGroup");
            host_expect(m + U, 'X', U / 2, "master bytes A put");
            CHECK(ivmUnmap(m));
            CHECK(ivmSignal());
            CHECK(ivmExit());
            return 0;
        }
        /* GPU PEs: A (pe 1) maps [0, 2U), B (pe 2) [U, 4U). */
        if (me == 1) {
            CHECK(ivmMapSubset("g", &dev, 0, 2 * U));
            CHECK(ivmSignal());
            group_turn(ctl, 1);
            dev_fill(dev + U, 'X', U / 2);
            CHECK(ivmSyncPutGroup(dev + U, U / 2));
            CHECK(ivmSignal());
        } else {
            CHECK(ivmMapSubset("g", &dev, U, 3 * U));
            CHECK(ivmSignal());
            group_turn(ctl, 2);
            /* dev points at object byte U: A's bytes landed here unasked. */
            dev_expect(dev, 'X', U / 2, "B's device copy after A's PutGroup");
            dev_expect(dev + U / 2, 0, U / 2, "B's bytes beside A's range");
            dev_fill(dev + 3 * U / 2, 'Y', U / 2); /* object [2.5U, 3U) */
            CHECK(ivmSignal());
        }
        group_turn(ctl, 4);
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("ctl", &ctl, sizeof(*ctl)));
    CHECK(ivmMalloc("g", &m, size));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &gpus[0]);
    CHECK(ivmWait(gpus[0])); /* A mapped first: B's range is not inside A's copy */
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &gpus[1]);
    CHECK(ivmWait(gpus[1]));
    gpu_info(0, &g);
    print_info("two copies", &g);
    /* Two copies of g (neither range holds the other), one of ctl. */
    ASSERT(g.copies == 3 && g.mapped_refs == 4, "%u copies, %u references (expected 3, 4)",
           g.copies, g.mapped_refs);
    create_on(IVM_THIS_HOST, IVM_CPU, 1, &cpu);
    group_root_step(ctl, 1, gpus[0]); /* A: write and PutGroup */
    host_expect(m + U, 'X', U / 2, "master after A's PutGroup");
    host_expect(m, 0, U, "master below A's range");
    group_root_step(ctl, 2, gpus[1]); /* B: check, write */
    host_expect(m + 5 * U / 2, 0, U / 2, "master before any gather");
    group_root_step(ctl, 3, cpu);     /* the CPU PE gathers */
    /* The root's own GetGroup over the whole object: the master keeps it all. */
    CHECK(ivmSyncGetGroup(m, size));
    host_expect(m + 5 * U / 2, 'Y', U / 2, "master after the root's GetGroup");
    host_expect(m + U, 'X', U / 2, "master after the root's GetGroup");
    atomic_store(ctl, 4);
    wait_all(gpus, 2);
    CHECK(ivmWait(cpu));
    CHECK(ivmFree(m));
    CHECK(ivmFree(ctl));
    return pe_ok();
}

/* The group calls across two nodes (U = the GPU's granularity), a GPU PE on
 * each: A on node0 (the master's node) maps [0, 2U), B on node1 [U, 4U)
 * (node1 holds a mirror of it). Nobody calls ivmSyncGet: the group calls themselves must reach the
 * device copies.
 *  1. A writes X at [U, 1.5U), PutGroup: node1 refreshes B's copy (scatter).
 *  2. B writes Y at [1.5U, 2U), PutGroup: the master's node refreshes A's.
 *  3. B writes V at [2.5U, 3U); the root's GetGroup makes node1 pull B's
 *     copy before it gives the bytes (gather). */
static void turn2(atomic_int *ref, atomic_int *host, int step)
{
    pe_stage = "waiting for my turn";
    for (double deadline = pe_now() + 30;; pe_sleep_ms(2)) {
        CHECK(ivmSyncGet(ref, sizeof(*ref)));
        if (atomic_load(host) >= step) {
            return;
        }
        ASSERT(pe_now() < deadline, "turn %d never came (at %d)", step, atomic_load(host));
    }
}

static int sc_group2(int argc, char **argv)
{
    const size_t U = gpu_unit(), size = 16 * U;
    int me = pe_enter();
    atomic_int *ctl, *ref;
    ivm_pe a, b;
    char *m, *dev;

    if (me != 0) {
        CHECK(ivmMap("ctl", &ref, 0));
        CHECK(ivmHostPtr(ref, &ctl));
        if (me == 1) {
            CHECK(ivmMapSubset("g", &dev, 0, 2 * U));
            CHECK(ivmSignal());
            turn2(ref, ctl, 1);
            dev_fill(dev + U, 'X', U / 2);
            CHECK(ivmSyncPutGroup(dev + U, U / 2));
            CHECK(ivmSignal());
            turn2(ref, ctl, 3);
            dev_expect(dev + 3 * U / 2, 'Y', U / 2, "A's copy after B's PutGroup from node1");
            CHECK(ivmSignal());
        } else {
            CHECK(ivmMapSubset("g", &dev, U, 3 * U));
            CHECK(ivmSignal());
            turn2(ref, ctl, 2);
            dev_expect(dev, 'X', U / 2, "B's copy on node1 after A's PutGroup");
            dev_fill(dev + U / 2, 'Y', U / 2);
            CHECK(ivmSyncPutGroup(dev + U / 2, U / 2));
            CHECK(ivmSignal());
            turn2(ref, ctl, 4);
            dev_fill(dev + 3 * U / 2, 'V', U / 2);
            CHECK(ivmSignal());
        }
        turn2(ref, ctl, 5);
        CHECK(ivmUnmap(dev));
        CHECK(ivmUnmap(ref));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("ctl", &ctl, sizeof(*ctl)));
    CHECK(ivmMalloc("g", &m, size));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &a);
    CHECK(ivmWait(a));
    create_on("node1", IVM_GPU_0, 1, &b);
    CHECK(ivmWait(b));
    atomic_store(ctl, 1);
    CHECK(ivmWait(a));
    host_expect(m + U, 'X', U / 2, "master after A's PutGroup");
    atomic_store(ctl, 2);
    CHECK(ivmWait(b));
    host_expect(m + 3 * U / 2, 'Y', U / 2, "master after B's PutGroup");
    atomic_store(ctl, 3);
    CHECK(ivmWait(a));
    atomic_store(ctl, 4);
    CHECK(ivmWait(b));
    host_expect(m + 5 * U / 2, 0, U / 2, "master before the gather");
    CHECK(ivmSyncGetGroup(m + 2 * U, 2 * U));
    host_expect(m + 5 * U / 2, 'V', U / 2, "master after the root's GetGroup");
    atomic_store(ctl, 5);
    CHECK(ivmWait(a));
    CHECK(ivmWait(b));
    CHECK(ivmFree(m));
    CHECK(ivmFree(ctl));
    return pe_ok();
}

/* Admission: GPU 0 has 4 MiB; A maps 3 MiB; B's map of another 3 MiB waits
 * (nothing to evict) until A unmaps, then evicts A's cached copy and gets
 * its memory. */
static int sc_admit(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    ivm_pe a, b;
    char *pa, *pb, *dev;
    int me = pe_enter();

    if (me != 0) {
        double t0;
        if (me == 1) {
            CHECK(ivmMap("a", &dev, 0));
            CHECK(ivmSignal());
            pe_stage = "A waits for the root";
            CHECK(ivmWait(0));
            CHECK(ivmUnmap(dev));
            CHECK(ivmSignal());
        } else {
            t0 = pe_now();
            pe_stage = "B maps (waits for memory)";
            CHECK(ivmMap("b", &dev, 0));
            printf("B mapped after %.2f s\n", pe_now() - t0);
            ASSERT(pe_now() - t0 > 0.3, "B's map did not wait (%.2f s)", pe_now() - t0);
            dev_expect(dev, 'b', 3 * MB, "B's device copy");
            CHECK(ivmSignal());
            CHECK(ivmUnmap(dev));
        }
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("a", &pa, 3 * MB));
    CHECK(ivmMalloc("b", &pb, 3 * MB));
    memset(pb, 'b', 3 * MB);
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &a);
    CHECK(ivmWait(a));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &b);
    pe_stage = "root waits for B to queue";
    for (double deadline = pe_now() + 10;; pe_sleep_ms(20)) {
        gpu_info(0, &g);
        if (g.waiting == 1) {
            break;
        }
        ASSERT(pe_now() < deadline, "B's map never queued (waiting %u)", g.waiting);
    }
    print_info("B waits", &g);
    pe_sleep_ms(400);
    gpu_info(0, &g);
    ASSERT(g.waiting == 1 && g.mapped_refs == 1, "B no longer waits before A unmapped");
    CHECK(ivmSignal()); /* A unmaps */
    CHECK(ivmWait(a));
    pe_stage = "root waits for B's map";
    CHECK(ivmWait(b));
    gpu_info(0, &g);
    print_info("B mapped", &g);
    ASSERT(g.evictions == 1 && g.allocations == 2 && g.waiting == 0 && g.wait_timeouts == 0,
           "%llu evictions, %llu allocations, %u waiting, %u time-outs",
           (unsigned long long)g.evictions, (unsigned long long)g.allocations, g.waiting,
           g.wait_timeouts);
    CHECK(ivmWait(b));
    return pe_ok();
}

/* A GPU PE killed while its map waits for memory: ivmd withdraws its request
 * from ivm-gpud (CANCEL), so a map queued behind it is served at once, while
 * the memory it waited for is still taken, and no reference is left. A holds
 * 3 of the GPU's 4 MiB; B's 3 MiB waits; C's 512 KiB would fit but waits
 * behind B (FIFO) until B is killed. */
static int sc_admit_dead(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    ivm_pe a, b, c;
    char *pa, *pb, *pc, *dev;
    double t_kill;
    int me = pe_enter();

    if (me != 0) {
        if (me == 1) {
            CHECK(ivmMap("a", &dev, 0));
            CHECK(ivmSignal());
            CHECK(ivmWait(0));
            CHECK(ivmUnmap(dev));
            CHECK(ivmSignal());
            CHECK(ivmExit());
            return 0;
        }
        if (me == 3) {
            pe_stage = "C maps (queued behind B)";
            CHECK(ivmMap("c", &dev, 0));
            CHECK(ivmSignal());
            CHECK(ivmUnmap(dev));
            CHECK(ivmExit());
            return 0;
        }
        pe_stage = "B maps (waits for memory until killed)";
        ivmMap("b", &dev, 0);
        pe_idle_forever();
    }
    CHECK(ivmMalloc("a", &pa, 3 * MB));
    CHECK(ivmMalloc("b", &pb, 3 * MB));
    CHECK(ivmMalloc("c", &pc, MB / 2));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &a);
    CHECK(ivmWait(a));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &b);
    for (double deadline = pe_now() + 10;; pe_sleep_ms(20)) {
        gpu_info(0, &g);
        if (g.waiting == 1) {
            break;
        }
        ASSERT(pe_now() < deadline, "B's map never queued");
    }
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &c);
    ASSERT(b == 2 && c == 3, "PE ids %d %d", b, c);
    for (double deadline = pe_now() + 10;; pe_sleep_ms(20)) {
        gpu_info(0, &g);
        if (g.waiting == 2) {
            break;
        }
        ASSERT(pe_now() < deadline, "C's map never queued behind B's (%u waiting)", g.waiting);
    }
    t_kill = pe_now();
    CHECK(ivmKillPEs(&b, 1));
    EXPECT(ivmWait(b), IVM_ERROR_PE_FAILED);
    CHECK(ivmWait(c)); /* C's map was served while A still holds its 3 MiB */
    ASSERT(pe_now() - t_kill < 10.0, "C's map took %.1f s after B died (the admission "
           "timeout, not the cancel, ended B's wait)", pe_now() - t_kill);
    gpu_info(0, &g);
    ASSERT(g.waiting == 0, "%u maps still waiting after B died and C was served", g.waiting);
    CHECK(ivmWait(c));
    CHECK(ivmSignal()); /* A unmaps */
    CHECK(ivmWait(a));
    CHECK(ivmWait(a));
    for (double deadline = pe_now() + 10;; pe_sleep_ms(20)) {
        gpu_info(0, &g);
        if (g.waiting == 0 && g.mapped_refs == 0) {
            break;
        }
        ASSERT(pe_now() < deadline, "%u waiting, %u references left after the dead PE's "
               "map was withdrawn", g.waiting, g.mapped_refs);
    }
    ASSERT(g.wait_timeouts == 0, "%u admission timeouts", g.wait_timeouts);
    print_info("dead PE's map withdrawn", &g);
    return pe_ok();
}

/* PEs on two GPUs of a node: one device copy (one allocation) per GPU. */
static int sc_dedup2(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g0, g1;
    ivm_pe pes[4];
    char *v, *dev;

    if (pe_enter() != 0) {
        int devtype;
        CHECK(ivmGetMyDevType(&devtype));
        CHECK(ivmMap("v", &dev, 0));
        dev_expect(dev, 7, MB, "device copy");
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("v", &v, MB));
    memset(v, 7, MB);
    create_on(IVM_THIS_HOST, IVM_GPU_0, 2, pes);
    create_on(IVM_THIS_HOST, IVM_GPU_1, 2, pes + 2);
    wait_all(pes, 4);
    gpu_info(0, &g0);
    gpu_info(1, &g1);
    print_info("GPU 0", &g0);
    print_info("GPU 1", &g1);
    ASSERT(g0.allocations == 1 && g0.mapped_refs == 2 && g1.allocations == 1 &&
               g1.mapped_refs == 2,
           "GPU 0: %llu allocations, %u references; GPU 1: %llu, %u",
           (unsigned long long)g0.allocations, g0.mapped_refs,
           (unsigned long long)g1.allocations, g1.mapped_refs);
    signal_n(4);
    wait_all(pes, 4);
    return pe_ok();
}

/* Eviction order: GPU 0 has 4 MiB; a, b, c (1 MiB each) are mapped and
 * unmapped in the order b, a, c; d fills the GPU; e needs room: b (least
 * recently released) goes, so a comes back without an allocation and b needs
 * one (evicting c, the next). */
static int sc_evict(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    const char *names[] = {"a", "b", "c", "d", "e"};
    char *p[5], *dev[5];
    ivm_pe pe;

    if (pe_enter() != 0) {
        for (int i = 0; i < 3; ++i) {
            CHECK(ivmMap(names[i], &dev[i], 0));
        }
        CHECK(ivmUnmap(dev[1]));
        CHECK(ivmUnmap(dev[0]));
        CHECK(ivmUnmap(dev[2]));
        CHECK(ivmMap("d", &dev[3], 0));
        CHECK(ivmMap("e", &dev[4], 0));
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmMap("a", &dev[0], 0));
        dev_expect(dev[0], 'a', MB, "a after coming back from the cache");
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmMap("b", &dev[1], 0));
        dev_expect(dev[1], 'b', MB, "b after its eviction");
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmExit());
        return 0;
    }
    for (int i = 0; i < 5; ++i) {
        CHECK(ivmMalloc(names[i], &p[i], MB));
        memset(p[i], names[i][0], MB);
    }
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &pe);
    CHECK(ivmWait(pe));
    gpu_info(0, &g);
    print_info("after e", &g);
    ASSERT(g.allocations == 5 && g.evictions == 1, "%llu allocations, %llu evictions "
           "(expected 5, 1)", (unsigned long long)g.allocations,
           (unsigned long long)g.evictions);
    CHECK(ivmSignal());
    CHECK(ivmWait(pe));
    gpu_info(0, &g);
    print_info("after a", &g);
    ASSERT(g.allocations == 5 && g.evictions == 1,
           "a was evicted instead of b: %llu allocations, %llu evictions",
           (unsigned long long)g.allocations, (unsigned long long)g.evictions);
    CHECK(ivmSignal());
    CHECK(ivmWait(pe));
    gpu_info(0, &g);
    print_info("after b", &g);
    ASSERT(g.allocations == 6 && g.evictions == 2,
           "b was not evicted: %llu allocations, %llu evictions",
           (unsigned long long)g.allocations, (unsigned long long)g.evictions);
    CHECK(ivmSignal());
    CHECK(ivmWait(pe));
    return pe_ok();
}

/* Time-out: a map that cannot fit while the PE's own copy stays mapped fails
 * with IVM_ERROR_NO_MEMORY after the admission time-out (1 s in the test); a
 * map larger than the GPU fails at once; a failed ivmMalloc leaves nothing. */
static int sc_timeout(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    char *pa, *pb, *dev, *big;
    ivm_pe pe;
    double t0, dt;

    if (pe_enter() != 0) {
        CHECK(ivmMap("a", &dev, 0));
        t0 = pe_now();
        EXPECT(ivmMap("b", &big, 0), IVM_ERROR_NO_MEMORY);
        dt = pe_now() - t0;
        printf("b failed after %.2f s: %s\n", dt, ivmGetLastErrorMessage());
        ASSERT(dt > 0.8 && dt < 10, "time-out after %.2f s (admission time-out 1 s)", dt);
        ASSERT(strlen(ivmGetLastErrorMessage()) > 0, "no message with the time-out");
        t0 = pe_now();
        EXPECT(ivmMalloc("huge", &big, 8 * MB), IVM_ERROR_NO_MEMORY);
        dt = pe_now() - t0;
        printf("huge failed after %.2f s: %s\n", dt, ivmGetLastErrorMessage());
        ASSERT(dt < 0.8, "a map larger than the GPU waited %.2f s", dt);
        EXPECT(ivmMap("huge", &big, 0), IVM_ERROR_NOT_FOUND);
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("a", &pa, 3 * MB));
    CHECK(ivmMalloc("b", &pb, 3 * MB));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &pe);
    CHECK(ivmWait(pe));
    gpu_info(0, &g);
    print_info("end", &g);
    ASSERT(g.wait_timeouts == 1 && g.waiting == 0, "%u time-outs, %u waiting",
           g.wait_timeouts, g.waiting);
    return pe_ok();
}

/* A GPU PE killed while it maps: its reference goes, the copy is cached. */
static int sc_crash(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    ivm_pe pes[2];
    char *v, *dev;

    if (pe_enter() != 0) {
        CHECK(ivmMap("v", &dev, 0));
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    CHECK(ivmMalloc("v", &v, MB));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 2, pes);
    wait_all(pes, 2);
    gpu_info(0, &g);
    ASSERT(g.mapped_refs == 2, "%u references", g.mapped_refs);
    CHECK(ivmKillPEs(&pes[0], 1));
    EXPECT(ivmWait(pes[0]), IVM_ERROR_PE_FAILED);
    gpu_info(0, &g);
    print_info("one killed", &g);
    ASSERT(g.mapped_refs == 1 && g.copies == 1, "%u references, %u copies", g.mapped_refs,
           g.copies);
    CHECK(ivmKillPEs(&pes[1], 1));
    EXPECT(ivmWait(pes[1]), IVM_ERROR_PE_FAILED);
    gpu_info(0, &g);
    print_info("both killed", &g);
    ASSERT(g.mapped_refs == 0 && g.copies == 1 && g.allocations == 1,
           "%u references, %u copies, %llu allocations", g.mapped_refs, g.copies,
           (unsigned long long)g.allocations);
    return pe_ok();
}

/* ivm-gpud killed: GPU calls fail with IVM_ERROR_DAEMON_LOST, CPU PEs and
 * the root keep working. */
static int sc_gpud_dead(int argc, char **argv)
{
    ivm_msg_gpu_info_rep_t g;
    ivm_device devh;
    ivm_pe gpu, cpu;
    char *v, *dev, *again;
    int devtype;

    if (pe_enter() != 0) {
        CHECK(ivmGetMyDevType(&devtype));
        CHECK(ivmMap("v", &dev, 0));
        if (!IVM_DEV_IS_GPU(devtype)) {
            host_expect(dev, 'v', 4096, "a CPU PE's map after the GPU daemon died");
            CHECK(ivmSyncPutGroup(dev, 4096));
            CHECK(ivmUnmap(dev));
            CHECK(ivmExit());
            return 0;
        }
        CHECK(ivmSignal());
        pe_stage = "GPU PE waits for the GPU daemon's death";
        CHECK(ivmWait(0));
        EXPECT(ivmSyncPut(dev, 4096), IVM_ERROR_DAEMON_LOST);
        EXPECT(ivmSyncGet(dev, 4096), IVM_ERROR_DAEMON_LOST);
        EXPECT(ivmMap("v", &again, 0), IVM_ERROR_DAEMON_LOST);
        printf("GPU PE: %s\n", ivmGetLastErrorMessage());
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("v", &v, MB));
    memset(v, 'v', MB);
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &gpu);
    CHECK(ivmWait(gpu));
    gpu_info(0, &g);
    ASSERT(g.gpud_pid > 0 && (g.flags & IVM_GPU_INFO_ALIVE), "no ivm-gpud pid");
    printf("gpud-pid %u\n", g.gpud_pid);
    ASSERT(kill((pid_t)g.gpud_pid, SIGKILL) == 0, "kill ivm-gpud: %s", strerror(errno));
    for (double deadline = pe_now() + 5;; pe_sleep_ms(20)) {
        gpu_info(0, &g);
        if (!(g.flags & IVM_GPU_INFO_ALIVE)) {
            break;
        }
        ASSERT(pe_now() < deadline, "ivmd still reports ivm-gpud alive");
    }
    CHECK(ivmSignal());
    CHECK(ivmWait(gpu));
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_0, &devh), IVM_ERROR_DAEMON_LOST);
    create_on(IVM_THIS_HOST, IVM_CPU, 1, &cpu);
    CHECK(ivmWait(cpu));
    CHECK(ivmSyncGetGroup(v, MB));
    CHECK(ivmFree(v));
    return pe_ok();
}

/* ------------------------------------------------------------ raw requests */

static char raw_detail[IVM_MSG_DETAIL_MAX + 1]; /* the last raw reply's detail text */

/* One request on fd (a PE's own connection, entered by raw_enter); the
 * reply's first rep_len bytes into rep, its fds closed and counted in
 * *nfds_p. Returns the reply's status. */
static int raw_call(int fd, uint16_t type, const void *req, uint32_t len, void *rep,
                    uint32_t rep_len, int *nfds_p)
{
    static uint32_t seq;
    char buf[sizeof(ivm_msg_map_rep_t) + sizeof(ivm_msg_gpu_info_rep_t) +
             IVM_MSG_DETAIL_MAX + 1];
    int fds[4], nfds = 0, status;
    ivm_msg_hdr_t hdr;

    ivm_proto_hdr_init(&hdr, type, len, ++seq);
    CHECK(ivm_sock_send(fd, &hdr, req, NULL, 0));
    CHECK(ivm_sock_recv(fd, &hdr, sizeof(hdr), fds, &nfds, 4));
    ASSERT(hdr.type == (type | IVM_MSG_REPLY) && hdr.seq == seq &&
               hdr.length >= sizeof(int32_t) && hdr.length < sizeof(buf),
           "reply type 0x%x seq %u length %u to a raw request of type %u", hdr.type, hdr.seq,
           hdr.length, type);
    CHECK(ivm_sock_recv(fd, buf, hdr.length, fds, &nfds, 4));
    buf[hdr.length] = '\0';
    memcpy(&status, buf, sizeof(status));
    memset(rep, 0, rep_len);
    memcpy(rep, buf, hdr.length < rep_len ? hdr.length : rep_len);
    snprintf(raw_detail, sizeof(raw_detail), "%s", hdr.length > rep_len ? buf + rep_len : "");
    for (int i = 0; i < nfds; ++i) {
        close(fds[i]);
    }
    if (nfds_p != NULL) {
        *nfds_p = nfds;
    }
    return status;
}

/* ENTER as the child PE the daemon started, on a connection of our own. */
static int raw_enter(int *devtype_p)
{
    ivm_msg_enter_req_t req;
    ivm_msg_enter_rep_t rep;
    int fd = ivm_sock_connect(getenv("IVM_SOCKET"));

    ASSERT(fd >= 0, "connect to %s", getenv("IVM_SOCKET"));
    memset(&req, 0, sizeof(req));
    req.pid    = (uint32_t)getpid();
    req.job_id = (uint32_t)strtoul(getenv("IVM_JOB_ID"), NULL, 10);
    req.pe_id  = (int32_t)strtol(getenv("IVM_PE_ID"), NULL, 10);
    req.token  = strtoull(getenv("IVM_PE_TOKEN"), NULL, 10);
    EXPECT(raw_call(fd, IVM_MSG_ENTER, &req, sizeof(req), &rep, sizeof(rep), NULL),
           IVM_SUCCESS);
    *devtype_p = rep.devtype;
    return fd;
}

static int raw_map(int fd, const char *name, ivm_msg_map_rep_t *rep, int *nfds_p)
{
    ivm_msg_map_req_t req;

    memset(&req, 0, sizeof(req));
    ivm_proto_strset(req.name, sizeof(req.name), name);
    return raw_call(fd, IVM_MSG_MAP, &req, sizeof(req), rep, sizeof(*rep), nfds_p);
}

static int raw_sync(int fd, uint64_t obj, uint64_t off, uint64_t size, uint32_t op,
                    uint64_t gpu_ref)
{
    ivm_msg_sync_req_t req = {
        .obj_id = obj, .offset = off, .size = size, .op = op, .gpu_ref = gpu_ref};
    ivm_msg_status_t rep;

    return raw_call(fd, IVM_MSG_SYNC, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

static int raw_obj(int fd, uint16_t type, uint64_t obj, uint64_t gpu_ref)
{
    ivm_msg_obj_req_t req = {.obj_id = obj, .gpu_ref = gpu_ref};
    ivm_msg_status_t rep;

    return raw_call(fd, type, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

#define RAW_EXPECT(call, want)                                                           \
    do {                                                                                 \
        int raw_rc_ = (call);                                                            \
        ASSERT(raw_rc_ == (want), "%s returned %s (%d), expected %s [%s]", #call,        \
               pe_status_name(raw_rc_), raw_rc_, pe_status_name(want), raw_detail);     \
        ASSERT(raw_rc_ == IVM_SUCCESS || raw_detail[0] != '\0',                          \
               "%s failed without a detail text", #call);                                \
    } while (0)

/* A GPU PE (and a CPU PE) sending requests with bogus gpu_ref values on a
 * connection of their own: each gets a clear error, the daemon stays up,
 * the references of the PE still go when it exits. */
static int sc_bogus(int argc, char **argv)
{
    const char *pe_id = getenv("IVM_PE_ID");
    ivm_msg_gpu_info_rep_t g;
    ivm_msg_gpu_info_req_t greq = {.gpu = 7};
    ivm_pe pes[2];
    char *v, *w;

    if (pe_id != NULL && atoi(pe_id) > 0) {
        ivm_msg_map_rep_t mv, mw;
        int devtype, nfds, fd = raw_enter(&devtype), gpu = IVM_DEV_IS_GPU(devtype);

        RAW_EXPECT(raw_map(fd, "v", &mv, &nfds), IVM_SUCCESS);
        ASSERT(nfds == (gpu ? 2 : 1) && (mv.gpu_ref != 0) == gpu,
               "MAP of a %s PE: %d fds, gpu_ref %llu", gpu ? "GPU" : "CPU", nfds,
               (unsigned long long)mv.gpu_ref);
        RAW_EXPECT(raw_map(fd, "w", &mw, &nfds), IVM_SUCCESS);
        if (!gpu) {
            pe_stage = "a CPU PE naming device copies";
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_PUT, 1),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_GET, ~0ull),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_GET_GROUP, 1),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, 1), IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_FREE, mw.obj_id, 1), IVM_ERROR_PERMISSION);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_PUT, 0), IVM_SUCCESS);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, 0), IVM_SUCCESS);
        } else {
            uint64_t other = mv.gpu_ref + mw.gpu_ref + 1000;
            pe_stage = "a GPU PE naming bogus device copies";
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_PUT, other),
                       IVM_ERROR_INVALID_VALUE);
            /* w's reference names no copy of v */
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_GET, mw.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, 99, mv.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, MB - 4096, 8192, IVM_SYNC_PUT, mv.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 0, IVM_SYNC_PUT, other),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, 12345, 0, 4096, IVM_SYNC_PUT, mv.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, other), IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, mw.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_FREE, mw.obj_id, other), IVM_ERROR_PERMISSION);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_FREE, 12345, other), IVM_ERROR_INVALID_VALUE);
            /* the good ones still work, once; an empty range as for a CPU PE */
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 0, IVM_SYNC_PUT, mv.gpu_ref), IVM_SUCCESS);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, MB, 0, IVM_SYNC_GET, mv.gpu_ref), IVM_SUCCESS);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_PUT, mv.gpu_ref),
                       IVM_SUCCESS);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 4096, 4096, IVM_SYNC_GET, mv.gpu_ref),
                       IVM_SUCCESS);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, mv.gpu_ref), IVM_SUCCESS);
            RAW_EXPECT(raw_obj(fd, IVM_MSG_UNMAP, mv.obj_id, mv.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
            RAW_EXPECT(raw_sync(fd, mv.obj_id, 0, 4096, IVM_SYNC_PUT, mv.gpu_ref),
                       IVM_ERROR_INVALID_VALUE);
        }
        /* w stays mapped: the daemon releases its reference at the exit. */
        {
            ivm_msg_empty_t e = {0};
            ivm_msg_status_t rep;
            RAW_EXPECT(raw_call(fd, IVM_MSG_EXIT, &e, sizeof(e), &rep, sizeof(rep), NULL),
                       IVM_SUCCESS);
        }
        close(fd);
        return 0;
    }
    pe_enter();
    CHECK(ivmMalloc("v", &v, MB));
    CHECK(ivmMalloc("w", &w, MB));
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &pes[0]);
    create_on(IVM_THIS_HOST, IVM_CPU, 1, &pes[1]);
    wait_all(pes, 2);
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_GPU_INFO, &greq, sizeof(greq),
                              &g, sizeof(g), NULL),
           IVM_ERROR_NOT_FOUND);
    gpu_info(0, &g);
    print_info("after the bogus requests", &g);
    ASSERT((g.flags & IVM_GPU_INFO_ALIVE) && g.mapped_refs == 0,
           "ivm-gpud alive %d, %u references left", (g.flags & IVM_GPU_INFO_ALIVE) != 0,
           g.mapped_refs);
    CHECK(ivmFree(w));
    CHECK(ivmFree(v));
    return pe_ok();
}

/* Devices the node lacks. */
static int sc_nodev(int argc, char **argv)
{
    int ngpus = argc > 2 ? atoi(argv[2]) : 0;
    ivm_device dev;

    pe_enter();
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_N(ngpus), &dev), IVM_ERROR_NOT_FOUND);
    printf("GPU %d: %s\n", ngpus, ivmGetLastErrorMessage());
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_N(7), &dev), IVM_ERROR_NOT_FOUND);
    if (ngpus > 0) {
        CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_N(ngpus - 1), &dev));
        CHECK(ivmDestroyDev(dev));
    }
    return pe_ok();
}

/* GPU shares (ivmd --gpu-shares): argv[2] is the host of the share devices
 * ("-": this node), argv[3] their percentages ("50,50": two shares of one
 * physical GPU). ivmCreateDev works on each share and fails on the next
 * index (on this node and on host); a PE on share k sees IVM_GPU=k and IVM_GPU_SHARE (and on cuda
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); all map one object: on this node one
 * device copy of the physical GPU (GPU_INFO 0); each Puts its own part, then
 * all Get the master's change. */
static int sc_shares(int argc, char **argv)
{
    const char *host = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
    const char *list = argc > 3 ? argv[3] : "50,50";
    const size_t size = 2 * MB;
    int pct[8], n = 0;
    ivm_msg_gpu_info_rep_t g;
    ivm_device devh;
    ivm_pe pes[8];
    char *v, *dev;

    for (const char *p = list; *p != '\0' && n < 8; ++n) {
        pct[n] = atoi(p);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    ASSERT(n >= 1, "no shares in '%s'", list);
    if (pe_enter() != 0) {
        int k = getenv("IVM_GPU") != NULL ? atoi(getenv("IVM_GPU")) : -1;
        const char *share = getenv("IVM_GPU_SHARE");
        const char *mps = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        size_t part = size / (size_t)n;
        ASSERT(k >= 0 && k < n, "IVM_GPU is '%s'", getenv("IVM_GPU") ? getenv("IVM_GPU") : "");
        expect_gpu_pe(k);
        ASSERT(share != NULL && atoi(share) == pct[k], "share %d: IVM_GPU_SHARE is '%s', "
               "expected %d", k, share ? share : "(unset)", pct[k]);
        if (dev_cuda() && pct[k] < 100) {
            ASSERT(mps != NULL && atoi(mps) == pct[k], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE "
                   "is '%s', expected %d", mps ? mps : "(unset)", pct[k]);
        }
        printf("share %d: IVM_GPU_SHARE=%s\n", k, share);
        pe_stage = "share PE maps";
        CHECK(ivmMap("v", &dev, 0));
        /* Only our part: PEs of shares of one GPU share its device copy,
         * so another share's PE may already have written its part. */
        dev_expect(dev + (size_t)k * part, 0x11, part, "device copy");
        dev_fill(dev + (size_t)k * part, 0x20 + k, part);
        CHECK(ivmSyncPut(dev + (size_t)k * part, part));
        CHECK(ivmSignal());
        pe_stage = "share PE waits for the root's change";
        CHECK(ivmWaitFrom(0));
        CHECK(ivmSyncGet(dev, size));
        dev_expect(dev, 0x33, size, "device copy after SyncGet");
        CHECK(ivmSignal());
        CHECK(ivmWaitFrom(0));
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    /* The share devices on this node and on host. */
    for (int h = 0; h < (host != NULL ? 2 : 1); ++h) {
        const char *on = h == 0 ? IVM_THIS_HOST : host;
        for (int k = 0; k < n; ++k) {
            CHECK(ivmCreateDev(on, IVM_GPU_N(k), &devh));
            CHECK(ivmDestroyDev(devh));
        }
        EXPECT(ivmCreateDev(on, IVM_GPU_N(n), &devh), IVM_ERROR_NOT_FOUND);
        printf("GPU device %d of %s: %s\n", n, h == 0 ? "this node" : host,
               ivmGetLastErrorMessage());
    }
    CHECK(ivmMalloc("v", &v, size));
    memset(v, 0x11, size);
    for (int k = 0; k < n; ++k) {
        create_on(host, IVM_GPU_N(k), 1, &pes[k]);
    }
    pe_stage = "root waits for the share PEs' Puts";
    wait_all(pes, n);
    for (int k = 0; k < n; ++k) {
        host_expect(v + (size_t)k * (size / (size_t)n), 0x20 + k, size / (size_t)n,
                    "master after a share PE's SyncPut");
    }
    if (host == NULL) {
        gpu_info(0, &g);
        print_info("shares mapped", &g);
        ASSERT(g.ngpus == 1 && g.allocations == 1 && g.copies == 1 &&
                   g.mapped_refs == (uint32_t)n,
               "%d share PEs of one GPU mapping one object: %u physical GPUs, %llu "
               "allocations, %u copies, %u references", n, g.ngpus,
               (unsigned long long)g.allocations, g.copies, g.mapped_refs);
    }
    memset(v, 0x33, size);
    signal_each(pes, n);
    pe_stage = "root waits for the share PEs' Gets";
    wait_all(pes, n);
    signal_each(pes, n);
    wait_all(pes, n);
    CHECK(ivmFree(v));
    return pe_ok();
}

/* Figures (not a test): a GPU PE's cold start, its first map of 64 MiB, and
 * SyncPut/SyncGet bandwidth of the whole object beside memcpy of the same bytes
 * in the same process. */
static int sc_bench(int argc, char **argv)
{
    const size_t size = 64 * MB;
    const int reps = 5;
    char *m, *dev, *h, *buf;
    double t0, t_put, t_get, t_cpy, t_map;
    ivm_pe pe;

    if (pe_enter() != 0) {
        CHECK(ivmSignal()); /* entered */
        t0 = pe_now();
        CHECK(ivmMap("b", &dev, 0));
        t_map = pe_now() - t0;
        CHECK(ivmHostPtr(dev, &h));
        CHECK(ivmSyncPut(dev, size)); /* warm */
        t0 = pe_now();
        for (int i = 0; i < reps; ++i) {
            CHECK(ivmSyncPut(dev, size));
        }
        t_put = (pe_now() - t0) / reps;
        t0 = pe_now();
        for (int i = 0; i < reps; ++i) {
            CHECK(ivmSyncGet(dev, size));
        }
        t_get = (pe_now() - t0) / reps;
        buf = malloc(size);
        ASSERT(buf != NULL, "malloc");
        memcpy(buf, h, size);
        t0 = pe_now();
        for (int i = 0; i < reps; ++i) {
            dev_read(buf, dev, size);
        }
        t_cpy = (pe_now() - t0) / reps;
        free(buf);
        printf("bench first_map_ms %.2f put_gbs %.2f get_gbs %.2f copy_gbs %.2f "
               "(64 MiB, %s)\n", t_map * 1e3, size / t_put / 1e9, size / t_get / 1e9,
               size / t_cpy / 1e9, dev_cuda() ? "cuda" : "emu");
        CHECK(ivmUnmap(dev));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("b", &m, size));
    memset(m, 1, size);
    t0 = pe_now();
    create_on(IVM_THIS_HOST, IVM_GPU_0, 1, &pe);
    CHECK(ivmWait(pe));
    printf("bench gpu_pe_cold_start_ms %.2f\n", (pe_now() - t0) * 1e3);
    CHECK(ivmWait(pe));
    CHECK(ivmFree(m));
    return pe_ok();
}

int main(int argc, char **argv)
{
    static const pe_scenario_entry_t table[] = {
        {"dedup", sc_dedup},     {"chain", sc_chain},     {"group", sc_group},
        {"async", sc_async},
        {"group2", sc_group2},   {"bench", sc_bench},     {"admit_dead", sc_admit_dead},
        {"dedup2", sc_dedup2},
        {"admit", sc_admit},     {"evict", sc_evict},     {"timeout", sc_timeout},
        {"crash", sc_crash},     {"gpud_dead", sc_gpud_dead}, {"nodev", sc_nodev},
        {"bogus", sc_bogus},     {"shares", sc_shares},
        {"nbi_refused", sc_nbi_refused},
        {NULL, NULL}};

    for (int i = 2; i < argc; ++i) {
        dev_cuda_arg |= strcmp(argv[i], "cuda") == 0;
    }
    return pe_main(table, argc, argv);
}
