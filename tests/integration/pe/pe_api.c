/* PE program: entering and leaving, calls outside ivmEnter/ivmExit, devices. */
#include "pe_util.h"

#include <sched.h>

/* Every call other than ivmEnter must say IVM_ERROR_NOT_ENTERED. dev is a
 * handle made while entered, or NULL. */
/* The call fails with IVM_ERROR_NOT_ENTERED and its message names the call
 * (not an internal function). */
#define EXPECT_NOT_ENTERED(fn, args)                                                   \
    do {                                                                               \
        EXPECT(fn args, IVM_ERROR_NOT_ENTERED);                                        \
        ASSERT(strncmp(ivmGetLastErrorMessage(), #fn ": ", strlen(#fn ": ")) == 0,     \
               "the message names " #fn ": '%s'", ivmGetLastErrorMessage());           \
    } while (0)

static void expect_not_entered(ivm_device dev, const char *when)
{
    int v = 0;
    void *p = NULL;
    char buf[64] = {0};
    ivm_pe pe = 1;
    ivm_device d = NULL;

    pe_stage = when;
    EXPECT_NOT_ENTERED(ivmGetMyId, (&v));
    EXPECT_NOT_ENTERED(ivmGetMyGroupId, (&v));
    EXPECT_NOT_ENTERED(ivmGetMyDevType, (&v));
    EXPECT_NOT_ENTERED(ivmGetNumPEs, (&v));
    EXPECT_NOT_ENTERED(ivmSetMaxPesId, (10));
    EXPECT_NOT_ENTERED(ivmWait, (0));
    EXPECT_NOT_ENTERED(ivmWait, (1));
    EXPECT_NOT_ENTERED(ivmSignal, ());
    EXPECT_NOT_ENTERED(ivmKillPEs, (&pe, 1));
    EXPECT_NOT_ENTERED(ivmCreateDev, (IVM_THIS_HOST, IVM_CPU, &d));
    EXPECT_NOT_ENTERED(ivmCreateDev, ("node0", IVM_CPU, &d));
    EXPECT_NOT_ENTERED(ivmMalloc, ("never", &p, 64));
    EXPECT_NOT_ENTERED(ivmMap, ("never", &p, 0));
    EXPECT_NOT_ENTERED(ivmMapSubset, ("never", &p, 0, 8));
    EXPECT_NOT_ENTERED(ivmUnmap, (buf));
    EXPECT_NOT_ENTERED(ivmFree, (buf));
    EXPECT_NOT_ENTERED(ivmSyncPut, (buf, 8));
    EXPECT_NOT_ENTERED(ivmSyncGet, (buf, 8));
    EXPECT_NOT_ENTERED(ivmSyncPutGroup, (buf, 8));
    EXPECT_NOT_ENTERED(ivmSyncGetGroup, (buf, 8));
    EXPECT_NOT_ENTERED(ivmHostPtr, (buf, &p));
    if (dev != NULL) {
        ivm_pe pes[2] = {IVM_PE_NULL, IVM_PE_NULL};
        EXPECT_NOT_ENTERED(ivmCreatePEs, (dev, 2, pes));
        ASSERT(pes[0] == IVM_PE_NULL && pes[1] == IVM_PE_NULL, "pes %d %d", pes[0], pes[1]);
        EXPECT_NOT_ENTERED(ivmDestroyDev, (dev));
    }
    EXPECT_NOT_ENTERED(ivmExit, ());
    ASSERT(d == NULL, "no handle made");
    ASSERT(p == NULL, "no pointer returned");
}

/* ivmEnter twice is an error that changes nothing; nothing works before ivmEnter or after ivmExit. */
static int sc_enter(int argc, char **argv)
{
    /* The handle outlives ivmExit on purpose (ivmDestroyDev after ivmExit is
     * IVM_ERROR_NOT_ENTERED, so it can never be freed): static, so that
     * LeakSanitizer sees it still reachable rather than leaked. */
    static ivm_device dev;
    int id, n, gid, gid2, t;

    expect_not_entered(NULL, "before ivmEnter");
    pe_stage = "enter";
    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    CHECK(ivmGetMyGroupId(&gid));
    EXPECT(ivmEnter(), IVM_ERROR_ALREADY_ENTERED);
    ASSERT(strstr(ivmGetLastErrorMessage(), "ivmEnter") != NULL,
           "the second ivmEnter's message names it: '%s'", ivmGetLastErrorMessage());
    CHECK(ivmGetMyId(&id));
    ASSERT(id == 0, "a process started by the user is the root PE, got id %d", id);
    pe_me = id;
    CHECK(ivmGetMyGroupId(&gid2));
    ASSERT(gid == gid2, "the second ivmEnter changed the group id %d -> %d", gid, gid2);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "after ivmEnter twice the job has %d PEs, expected 1", n);
    CHECK(ivmGetMyDevType(&t));
    ASSERT(t == IVM_CPU, "root PE device type %d, expected IVM_CPU", t);
    EXPECT(ivmGetMyId(NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetNumPEs(NULL), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, &dev));
    CHECK(ivmExit());
    expect_not_entered(dev, "after ivmExit");
    return pe_ok();
}

/* IVM_AUTOSTART=0 and no daemon: IVM_ERROR_NO_DAEMON, and a hint. */
static int sc_no_daemon(int argc, char **argv)
{
    pe_stage = "ivmEnter without a daemon";
    EXPECT(ivmEnter(), IVM_ERROR_NO_DAEMON);
    printf("MESSAGE: %s\n", ivmGetLastErrorMessage());
    expect_not_entered(NULL, "after a failed ivmEnter");
    return pe_ok();
}

/* ivmCreateDev and ivmDestroyDev. */
static int sc_dev(int argc, char **argv)
{
    ivm_device d_this, d_node, d_self, d_tmp = NULL, d_gone;
    ivm_pe pes[3];
    int id = pe_enter(), t, gid, mygid;

    if (id != 0) {
        CHECK(ivmGetMyDevType(&t));
        ASSERT(t == IVM_CPU, "child PE device type %d, expected IVM_CPU", t);
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmGetMyGroupId(&mygid));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, &d_this));
    ASSERT(d_this != NULL, "%s", "handle");
    CHECK(ivmCreateDev("node0", IVM_CPU, &d_node));
    ASSERT(d_node != NULL, "%s", "handle");
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &d_self));
    ASSERT(d_self != NULL, "%s", "handle");
    EXPECT(ivmCreateDev("no-such-node", IVM_CPU, &d_tmp), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmCreateDev("node00", IVM_CPU, &d_tmp), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(60), &d_tmp), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmCreateDev("node0", IVM_CPU_N(60), &d_tmp), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_N(200), &d_tmp), IVM_ERROR_NOT_FOUND);
    ASSERT(d_tmp == NULL, "%s", "failed ivmCreateDev wrote a handle");
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmDestroyDev(NULL), IVM_ERROR_INVALID_VALUE);

    /* Each handle starts PEs on this node's CPU device. */
    pe_stage = "PEs on the handles";
    CHECK(ivmCreatePEs(d_this, 1, &pes[0]));
    CHECK(ivmCreatePEs(d_node, 1, &pes[1]));
    CHECK(ivmCreatePEs(d_self, 1, &pes[2]));
    /* PEs keep running when their handle is destroyed. */
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, &d_gone));
    {
        ivm_pe late;
        CHECK(ivmCreatePEs(d_gone, 1, &late));
        CHECK(ivmDestroyDev(d_gone));
        ASSERT(late != IVM_PE_NULL, "%s", "no PE");
        CHECK(ivmWait(late));
    }
    for (int i = 0; i < 3; ++i) {
        ASSERT(pes[i] > 0, "pe %d", pes[i]);
        CHECK(ivmWait(pes[i]));
    }
    CHECK(ivmDestroyDev(d_this));
    CHECK(ivmDestroyDev(d_node));
    CHECK(ivmDestroyDev(d_self));
    CHECK(ivmGetMyGroupId(&gid));
    ASSERT(gid == mygid, "%d %d", gid, mygid);
    CHECK(ivmExit());
    return pe_ok();
}

/* What a PE on a numbered CPU device reports about itself. */
typedef struct dev_report {
    atomic_int done;
    int        devtype;
    int        ncores;     /* cores in the affinity mask */
    int        mask;       /* bits of cores 0..30 */
    int        omp;        /* OMP_NUM_THREADS, -1 if unset */
    int        grandchild; /* id of the PE this one started, if any */
} dev_report_t;

typedef struct dev_board {
    atomic_int   spawned;    /* a device-1 PE started its successor */
    dev_report_t rep[16];
} dev_board_t;

static void dev_report_self(dev_board_t *b, int id)
{
    cpu_set_t set;
    const char *omp = getenv("OMP_NUM_THREADS");
    dev_report_t *r = &b->rep[id];

    ASSERT(id < 16, "id %d", id);
    CHECK(ivmGetMyDevType(&r->devtype));
    ASSERT(sched_getaffinity(0, sizeof(set), &set) == 0, "%s", "sched_getaffinity");
    r->ncores = CPU_COUNT(&set);
    r->mask = 0;
    for (int c = 0; c < 31; ++c) {
        if (CPU_ISSET(c, &set)) {
            r->mask |= 1 << c;
        }
    }
    r->omp = omp ? atoi(omp) : -1;
}

/* With IVM_CPU_DEVICES=0,1 in the root's environment the job has two CPU
 * devices of one core each; PEs on them are pinned and report their device. */
static int sc_devices(int argc, char **argv)
{
    dev_board_t *b;
    ivm_device d0, d1, dx = NULL;
    ivm_pe on1, on0;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("board", &b, 0));
        dev_report_self(b, id);
        if (b->rep[id].devtype == IVM_CPU_N(1) && atomic_exchange(&b->spawned, 1) == 0) {
            /* DS-LB idiom: a successor on the caller's own device. */
            ivm_device self;
            ivm_pe next;
            CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
            CHECK(ivmCreatePEs(self, 1, &next));
            ASSERT(next > 0, "next %d", next);
            b->rep[id].grandchild = next;
            CHECK(ivmWait(next));
            CHECK(ivmDestroyDev(self));
        }
        atomic_store(&b->rep[id].done, 1);
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &d0));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(1), &d1));
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(2), &dx), IVM_ERROR_NOT_FOUND);
    CHECK(ivmCreatePEs(d1, 1, &on1));
    CHECK(ivmCreatePEs(d0, 1, &on0));
    ASSERT(on1 > 0 && on0 > on1, "ids %d %d", on1, on0);
    pe_stage = "waiting for the PEs on devices 0 and 1";
    CHECK(ivmWait(on1));
    CHECK(ivmWait(on0));
    ASSERT(atomic_load(&b->rep[on1].done) && atomic_load(&b->rep[on0].done), "%s",
           "children reported");

    ASSERT(b->rep[on1].devtype == IVM_CPU_N(1), "PE on device 1 reports type %d",
           b->rep[on1].devtype);
    ASSERT(b->rep[on1].mask == 1 << 1, "PE on device 1 (core 1) has affinity mask 0x%x",
           b->rep[on1].mask);
    ASSERT(b->rep[on1].omp == 1, "PE on a 1-core device has OMP_NUM_THREADS=%d",
           b->rep[on1].omp);
    ASSERT(b->rep[on0].devtype == IVM_CPU_N(0), "PE on device 0 reports type %d",
           b->rep[on0].devtype);
    ASSERT(b->rep[on0].mask == 1 << 0, "PE on device 0 (core 0) has affinity mask 0x%x",
           b->rep[on0].mask);
    {
        int g = b->rep[on1].grandchild;
        ASSERT(g > on1, "successor id %d", g);
        ASSERT(atomic_load(&b->rep[g].done), "%s", "successor reported");
        ASSERT(b->rep[g].devtype == IVM_CPU_N(1),
               "PE started on IVM_THIS_DEV by a device-1 PE reports type %d",
               b->rep[g].devtype);
        ASSERT(b->rep[g].mask == 1 << 1, "its affinity mask is 0x%x", b->rep[g].mask);
    }
    CHECK(ivmDestroyDev(d0));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* The daemon's --node name is the name of this host. argv[2]: the name. */
static int sc_node_name(int argc, char **argv)
{
    ivm_device d, dx = NULL;
    ivm_pe pe;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(argc > 2, "%s", "usage: node_name NAME");
    CHECK(ivmCreateDev(argv[2], IVM_CPU, &d));
    CHECK(ivmCreatePEs(d, 1, &pe));
    CHECK(ivmWait(pe));
    CHECK(ivmDestroyDev(d));
    if (strcmp(argv[2], "node0") != 0) {
        EXPECT(ivmCreateDev("node0", IVM_CPU, &dx), IVM_ERROR_NOT_FOUND);
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* Two PEs on CPU device 0, created one after the other, each printing the
 * cores it may run on after ivmEnter: "AFFINITY <k> <list>" (ivmrun --bind-to). */
static int sc_bind(int argc, char **argv)
{
    char line[256];
    ivm_device d;
    ivm_pe pe[2];
    FILE *f;
    int id = pe_enter();

    if (id != 0) {
        f = fopen("/proc/self/status", "r");
        ASSERT(f != NULL, "%s", "no /proc/self/status");
        while (fgets(line, sizeof(line), f) != NULL) {
            if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
                printf("AFFINITY %d %s", id, line + 18 + strspn(line + 18, " \t"));
            }
        }
        fclose(f);
        fflush(stdout);
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, &d));
    for (int k = 0; k < 2; ++k) {
        CHECK(ivmCreatePEs(d, 1, &pe[k]));
        CHECK(ivmWait(pe[k]));
    }
    CHECK(ivmSignal());
    CHECK(ivmSignal());
    CHECK(ivmWait(pe[0]));
    CHECK(ivmWait(pe[1]));
    CHECK(ivmDestroyDev(d));
    CHECK(ivmExit());
    return pe_ok();
}

/* The NUMA policy of a fresh object's pages as this PE's mapping shows it
 * (/proc/self/numa_maps): "POLICY prefer:N" or "POLICY default". */
static int sc_numa(int argc, char **argv)
{
    char line[512], key[32], *p = NULL;
    FILE *f;
    int found = 0;

    pe_enter();
    CHECK(ivmMalloc("numa", &p, 1 << 20));
    memset(p, 1, 1 << 20);
    snprintf(key, sizeof(key), "%lx ", (unsigned long)p);
    f = fopen("/proc/self/numa_maps", "r");
    ASSERT(f != NULL, "%s", "no /proc/self/numa_maps");
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0) {
            printf("POLICY %.*s\n", (int)strcspn(line + strlen(key), " "), line + strlen(key));
            found = 1;
        }
    }
    fclose(f);
    ASSERT(found, "no numa_maps line for the object at %p", (void *)p);
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"numa", sc_numa},
    {"bind", sc_bind},
    {"enter", sc_enter},
    {"no_daemon", sc_no_daemon},
    {"dev", sc_dev},
    {"devices", sc_devices},
    {"node_name", sc_node_name},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
