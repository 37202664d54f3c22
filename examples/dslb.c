/*
 * dslb: Dynamic Spawning Load Balancing (DS-LB, Listing 5-2a of the
 * dissertation).
 *
 * The work is cut into P portions; each portion is done by one PE. In every
 * iteration the root PE clears one flag per portion, raises the job's PE id
 * limit to P*(iteration+1) and starts one PE on each CPU device of its node.
 * Every child computes the portion given by its id, starts its successor on
 * its own device, pushes its result and then its flag, and exits. A chain ends
 * when ivmCreatePEs hits the id limit (the slot comes back as IVM_PE_NULL).
 * Faster devices finish portions sooner, so their chains take more of them.
 *
 * PE ids are assigned in increasing order and never reused, so PE id i does
 * portion (i-1) % P of iteration (i-1) / P: iteration t uses exactly the ids
 * P*t+1 .. P*(t+1), each once, whichever chain gets it.
 *
 * A portion's work: the sum over its range of [0, N_ELEMS) of (i+t)^2
 * modulo 2^64 (t = iteration), checked by the root against a serial loop.
 *
 * With --all-nodes the root starts one chain on every CPU device of every
 * node of the cluster (it probes the hosts node0, node1, ... until one is
 * unknown), not only on its own node's. A chain stays on its node: each
 * child starts its successor on its own device of its own node. Children on
 * other nodes reach the flags and results through their node's copies, so
 * each one pushes exactly its own record and flag with ivmSyncPut (the other
 * fields of those copies are stale, and other PEs of that node share them).
 * A child learns its node from IVM_NODE, which ivmd sets for the PEs it starts.
 *
 * Run:  ivmrun ./dslb [portions (50)] [iterations (1)] [--all-nodes]
 *       ivmrun --cpu-devices 0,1 ./dslb 100 3     (two CPU devices)
 *       ivmrun --nodes 3 ./dslb 100 1 --all-nodes (chains on three nodes)
 * Prints the portions each device did and "dslb: OK", exit 0; exit 1 on error.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ivm.h>

#define N_ELEMS       (1u << 26)     /* elements of the whole computation */
#define MAX_DEVS      64             /* CPU devices probed at most */
#define MAX_NODES     64             /* nodes probed at most (--all-nodes) */
#define POLL_NS       100000L        /* root's flag polling period: 100 us */
#define LIVENESS_NS   100000000L     /* root checks the PE count every 100 ms */
#define GRACE_S       5.0            /* no child alive this long: chain broken */
#define TIMEOUT_S     120.0          /* bound on one iteration */

/* Abort the PE with the status text and the detailed message of a failed call. */
#define CHECK(call)                                                            \
    do {                                                                       \
        ivmError_t check_rc_ = (call);                                         \
        if (check_rc_ != IVM_SUCCESS) {                                        \
            const char *check_msg_ = ivmGetLastErrorMessage();                 \
            fprintf(stderr, "dslb: %s:%d: %s failed: %s (%s)\n", __FILE__,     \
                    __LINE__, #call, ivmGetErrorString(check_rc_),             \
                    check_msg_);                                               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* One portion's result, written by the PE that computed it ("result" object). */
typedef struct {
    uint64_t value;     /* the portion's sum */
    int32_t devtype;    /* device type of the PE that computed it */
    int32_t pe;         /* id of that PE */
    int32_t iteration;  /* iteration it belongs to */
    int32_t node;       /* k of the node "node<k>" it ran on, -1 if unknown */
} portion_rec_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ns(long ns)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = ns };
    nanosleep(&ts, NULL);
}

/* Sum of (i+t)^2 mod 2^64 over portion p of P. */
static uint64_t portion_compute(int p, int P, int t)
{
    uint64_t lo = (uint64_t)N_ELEMS * (uint64_t)p / (uint64_t)P;
    uint64_t hi = (uint64_t)N_ELEMS * (uint64_t)(p + 1) / (uint64_t)P;
    uint64_t sum = 0;

    for (uint64_t i = lo; i < hi; i++) {
        uint64_t x = i + (uint64_t)t;
        sum += x * x;
    }
    return sum;
}

static void devtype_name(int devtype, char *buf, size_t len)
{
    snprintf(buf, len, "%s%d", IVM_DEV_IS_GPU(devtype) ? "gpu" : "cpu",
             IVM_DEV_INDEX(devtype));
}

/* k of this PE's node "node<k>" (IVM_NODE, set by ivmd for the PEs it
   starts), -1 if unknown. */
static int my_node_index(void)
{
    const char *node = getenv("IVM_NODE");
    char *end;
    long k;

    if (node == NULL || strncmp(node, "node", 4) != 0 || node[4] == '\0')
        return -1;
    k = strtol(node + 4, &end, 10);
    return (*end == '\0' && k >= 0 && k < INT_MAX) ? (int)k : -1;
}

/* One device handle per CPU device of `host` (IVM_THIS_HOST: the caller's
   node), appended to devs[*ndevs..MAX_DEVS) with its type and node index.
   Returns how many were added (0: the host is unknown or has none). */
static int probe_cpu_devices(const char *host, int node, ivm_device *devs, int *types,
                             int *nodes, int *ndevs)
{
    int added = 0;

    for (int k = 0; *ndevs < MAX_DEVS; k++) {
        ivmError_t rc = ivmCreateDev(host, IVM_CPU_N(k), &devs[*ndevs]);
        if (rc == IVM_ERROR_NOT_FOUND || rc == IVM_ERROR_NO_DEVICE)
            break;
        CHECK(rc);
        types[*ndevs] = IVM_CPU_N(k);
        nodes[*ndevs] = node;
        ++*ndevs;
        ++added;
    }
    return added;
}

static int parse_int(const char *s, const char *what, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < 1 || v > INT_MAX) {
        fprintf(stderr, "dslb: bad %s '%s' (a positive integer)\n", what, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Number of flags set; the acquire loads make the portions' results visible. */
static int flags_count(atomic_int *sync, int P)
{
    int done = 0;

    for (int p = 0; p < P; p++)
        done += atomic_load_explicit(&sync[p], memory_order_acquire) == 1;
    return done;
}

/* Wait until all P flags are set; 0 on success, -1 on timeout or lost chain. */
static int root_wait_flags(atomic_int *sync, int P, int iter)
{
    double start = now_s(), last_check = start, alone_since = -1.0;

    for (;;) {
        if (flags_count(sync, P) == P)
            return 0;
        double t = now_s();
        if (t - start > TIMEOUT_S) {
            fprintf(stderr, "dslb: iteration %d: only %d of %d portions done after %.0f s\n",
                    iter, flags_count(sync, P), P, TIMEOUT_S);
            return -1;
        }
        if ((t - last_check) * 1e9 >= (double)LIVENESS_NS) {
            int npes;
            last_check = t;
            CHECK(ivmGetNumPEs(&npes));
            /* Count first, flags second: a child gone before the count has
               set its flag before it. */
            if (npes <= 1 && flags_count(sync, P) < P) {
                if (alone_since < 0)
                    alone_since = t;
                else if (t - alone_since > GRACE_S) {
                    fprintf(stderr, "dslb: iteration %d: no child PE alive for %.0f s "
                            "but only %d of %d portions done (a PE died?)\n",
                            iter, GRACE_S, flags_count(sync, P), P);
                    return -1;
                }
            } else {
                alone_since = -1.0;
            }
        }
        sleep_ns(POLL_NS);
    }
}

static int run_root(int P, int iters, int all_nodes)
{
    atomic_int *sync;
    portion_rec_t *res;
    ivm_device devs[MAX_DEVS];
    int ndevs = 0, nnodes = 0;
    int dev_types[MAX_DEVS], dev_nodes[MAX_DEVS], dev_counts[MAX_DEVS] = { 0 };
    double total = 0.0;
    char name[32 + IVM_HOST_MAX];

    CHECK(ivmMalloc("sync", &sync, (size_t)P * sizeof(*sync)));
    CHECK(ivmMalloc("result", &res, (size_t)P * sizeof(*res)));

    if (all_nodes) {
        /* One device handle per CPU device of node0, node1, ... up to the
           first unknown host. */
        for (int h = 0; h < MAX_NODES && ndevs < MAX_DEVS; h++) {
            char host[IVM_HOST_MAX + 1];
            snprintf(host, sizeof(host), "node%d", h);
            if (probe_cpu_devices(host, h, devs, dev_types, dev_nodes, &ndevs) == 0)
                break;
            nnodes++;
        }
    } else {
        /* One device handle per CPU device of this node. */
        probe_cpu_devices(IVM_THIS_HOST, -1, devs, dev_types, dev_nodes, &ndevs);
    }
    if (ndevs == 0) {
        fprintf(stderr, "dslb: no CPU device found%s\n",
                all_nodes ? " (no host named node0?)" : "");
        return 1;
    }
    if (all_nodes)
        printf("dslb: %d portions x %d iteration(s) on %d CPU device(s) of %d node(s), "
               "%u elements\n", P, iters, ndevs, nnodes, N_ELEMS);
    else
        printf("dslb: %d portions x %d iteration(s) on %d CPU device(s), %u elements\n",
               P, iters, ndevs, N_ELEMS);

    for (int iter = 0; iter < iters; iter++) {
        memset(res, 0, (size_t)P * sizeof(*res));
        for (int p = 0; p < P; p++)
            atomic_store_explicit(&sync[p], 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);

        CHECK(ivmSetMaxPesId(P * (iter + 1)));
        double t0 = now_s();
        int first = IVM_PE_NULL;
        for (int d = 0; d < ndevs; d++) {
            ivm_pe pe;
            CHECK(ivmCreatePEs(devs[d], 1, &pe));
            if (first == IVM_PE_NULL)
                first = pe;
        }
        if (first != P * iter + 1) {
            fprintf(stderr, "dslb: iteration %d: first PE id is %d, expected %d "
                    "(ids not assigned in order without gaps?)\n",
                    iter, first, P * iter + 1);
            return 1;
        }
        if (root_wait_flags(sync, P, iter) != 0)
            return 1;
        double dt = now_s() - t0;
        total += dt;

        for (int p = 0; p < P; p++) {
            uint64_t want = portion_compute(p, P, iter);
            if (res[p].iteration != iter || res[p].value != want) {
                fprintf(stderr, "dslb: iteration %d portion %d (PE %d): got %llu of "
                        "iteration %d, expected %llu\n", iter, p, res[p].pe,
                        (unsigned long long)res[p].value, res[p].iteration,
                        (unsigned long long)want);
                return 1;
            }
            int d;
            for (d = 0; d < ndevs && (dev_types[d] != res[p].devtype ||
                                      (all_nodes && dev_nodes[d] != res[p].node)); d++)
                ;
            if (d == ndevs) {
                fprintf(stderr, "dslb: portion %d done on unknown device type %d "
                        "(node index %d)\n", p, res[p].devtype, res[p].node);
                return 1;
            }
            dev_counts[d]++;
        }
        printf("dslb: iteration %d: %.3f s\n", iter, dt);
    }

    for (int d = 0; d < ndevs; d++) {
        char dev[16];
        devtype_name(dev_types[d], dev, sizeof(dev));
        if (all_nodes)
            snprintf(name, sizeof(name), "node%d:%s", dev_nodes[d], dev);
        else
            snprintf(name, sizeof(name), "%s", dev);
        printf("dslb: %-6s %d portions\n", name, dev_counts[d]);
        CHECK(ivmDestroyDev(devs[d]));
    }
    printf("dslb: total %.3f s, %.2f ms per portion\n", total,
           total * 1e3 / ((double)P * iters));
    CHECK(ivmFree(res));
    CHECK(ivmFree(sync));
    printf("dslb: OK\n");
    return 0;
}

static int run_child(int id, int P, int iters)
{
    int portion = (id - 1) % P, iter = (id - 1) / P, devtype;
    atomic_int *sync;
    portion_rec_t *rec;
    ivm_device self;
    ivm_pe next;

    if (id < 1 || iter >= iters) {
        fprintf(stderr, "dslb: PE id %d outside the %d x %d portions\n", id, P, iters);
        return 1;
    }
    CHECK(ivmGetMyDevType(&devtype));
    CHECK(ivmMap("sync", &sync, 0));
    CHECK(ivmMapSubset("result", &rec, (size_t)portion * sizeof(*rec), sizeof(*rec)));

    uint64_t value = portion_compute(portion, P, iter);

    /* Pass the baton on this device. The id limit ends the chain (next is
       IVM_PE_NULL then). This comes before the flag: the root raises the
       limit only once every flag of the iteration is set, so a late spawn
       never takes an id of the next iteration. */
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
    CHECK(ivmCreatePEs(self, 1, &next));
    CHECK(ivmDestroyDev(self));

    rec->value = value;
    rec->devtype = devtype;
    rec->pe = id;
    rec->iteration = iter;
    rec->node = my_node_index();
    CHECK(ivmSyncPut(rec, sizeof(*rec)));
    atomic_store_explicit(&sync[portion], 1, memory_order_release);
    CHECK(ivmSyncPut(&sync[portion], sizeof(sync[portion])));

    CHECK(ivmUnmap(rec));
    CHECK(ivmUnmap(sync));
    return 0;
}

int main(int argc, char **argv)
{
    int P = 50, iters = 1, all_nodes = 0, npos = 0, id, ret, bad = 0;

    /* Every PE parses the same arguments: the children need P and iters. */
    for (int i = 1; i < argc && !bad; i++) {
        if (strcmp(argv[i], "--all-nodes") == 0) {
            all_nodes = 1;
        } else if (npos < 2 && argv[i][0] != '-') {
            bad = parse_int(argv[i], npos == 0 ? "portions" : "iterations",
                            npos == 0 ? &P : &iters) != 0;
            npos++;
        } else {
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr, "usage: %s [portions (50)] [iterations (1)] [--all-nodes]\n",
                argv[0]);
        return 2;
    }
    if ((long long)P * iters > INT_MAX) {
        fprintf(stderr, "dslb: portions x iterations exceeds the PE id range\n");
        return 2;
    }

    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_root(P, iters, all_nodes) : run_child(id, P, iters);
    CHECK(ivmExit());
    return ret;
}
