/*
 * PE program of test_psync: discovery (ivmGetNumNodes, ivmGetMyNode,
 * ivmGetNodeName, ivmGetDevices), addressed signals (ivmSignalTo,
 * ivmWaitFrom), the plain ivmSignal / ivmWait, barriers (ivmBarrier, ivmBarrierAll) and ivmSyncPutSignal,
 * on however many nodes the run has (ivmrun --nodes 1 or 3): the root finds
 * the nodes with the discovery calls and spreads its PEs over them.
 *
 * Every scenario starts a team: the root creates `per` PEs on each node
 * (round robin), writes the team's ids into the object "team" and signals
 * each PE (ivmSignalTo); a PE waits for that (ivmWaitFrom(0)) and reads the
 * team. A PE that passed its checks posts ivmSignalTo(0) and exits; the
 * root's ivmWaitFrom on it fails with IVM_ERROR_PE_FAILED if it died on a
 * FAIL instead.
 */
#include "pe_util.h"

#include <libgen.h>
#include <limits.h>

#include "client.h"
#include "proto.h"

#define TEAM_MAX 64

typedef struct team {
    int   n;              /* PEs, root included (index 0) */
    int   me;             /* the caller's index */
    ivm_pe ids[TEAM_MAX];
} team_t;

static int nodes_count(void)
{
    int n = 0;

    CHECK(ivmGetNumNodes(&n));
    ASSERT(n >= 1 && n <= 16, "%d nodes", n);
    return n;
}

/* The PE of index i (1..) goes to node (i - 1) % nnodes: PE 1 on node0. */
static int team_node(int i, int nnodes)
{
    return (i - 1) % nnodes;
}

/* One PE on node k's CPU device 0. */
static ivm_pe pe_on_node(int k)
{
    char name[IVM_HOST_MAX + 1];
    ivm_device d;
    ivm_pe pe = IVM_PE_NULL;

    CHECK(ivmGetNodeName(k, name, sizeof(name)));
    CHECK(ivmCreateDev(name, IVM_CPU, &d));
    CHECK(ivmCreatePEs(d, 1, &pe));
    CHECK(ivmDestroyDev(d));
    ASSERT(pe != IVM_PE_NULL, "no PE on %s", name);
    return pe;
}

/* Root: `per` PEs on every node; their ids into "team"; then each is told. */
static void team_create(team_t *t, int per)
{
    int nnodes = nodes_count(), i;
    int *shared;

    memset(t, 0, sizeof(*t));
    t->n = 1 + per * nnodes;
    ASSERT(t->n <= TEAM_MAX, "team of %d", t->n);
    CHECK(ivmMalloc("team", &shared, sizeof(int) * (TEAM_MAX + 1)));
    t->ids[0] = 0;
    for (i = 1; i < t->n; ++i) {
        t->ids[i] = pe_on_node(team_node(i, nnodes));
    }
    shared[0] = t->n;
    memcpy(&shared[1], t->ids, sizeof(int) * (size_t)t->n);
    CHECK(ivmSyncPut(shared, sizeof(int) * (TEAM_MAX + 1)));
    for (i = 1; i < t->n; ++i) {
        CHECK(ivmSignalTo(t->ids[i]));
    }
}

/* A PE of the team: wait for the root's word, read the team. */
static void team_join(team_t *t, int id)
{
    int *shared, i;

    pe_stage = "waiting for the team";
    CHECK(ivmWaitFrom(0));
    CHECK(ivmMap("team", &shared, 0));
    CHECK(ivmSyncGet(shared, sizeof(int) * (TEAM_MAX + 1)));
    t->n = shared[0];
    ASSERT(t->n > 1 && t->n <= TEAM_MAX, "team of %d", t->n);
    memcpy(t->ids, &shared[1], sizeof(int) * (size_t)t->n);
    t->me = -1;
    for (i = 0; i < t->n; ++i) {
        if (t->ids[i] == id) {
            t->me = i;
        }
    }
    ASSERT(t->me > 0, "pe %d is not in the team", id);
}

/* A PE's last words: checks passed. */
static int team_done(void)
{
    CHECK(ivmSignalTo(0));
    CHECK(ivmExit());
    return 0;
}

/* Root: every PE of the team passed (its signal), then ended. */
static void team_collect(const team_t *t, int from)
{
    int i;

    pe_stage = "collecting the team's results";
    for (i = from; i < t->n; ++i) {
        CHECK(ivmWaitFrom(t->ids[i]));
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* ------------------------------------------------------------ discovery */

/* argv[2]: the node count the run has. The root checks the nodes' names and
 * devices, then the PE counts per device with a team of 2 PEs per node; each
 * PE checks its own node's index and name against IVM_NODE. */
static void discover_pe(int id)
{
    char name[IVM_HOST_MAX + 1];
    const char *env = getenv("IVM_NODE");
    team_t t;
    int node = -1;

    team_join(&t, id);
    CHECK(ivmGetMyNode(&node));
    CHECK(ivmGetNodeName(IVM_THIS_NODE, name, sizeof(name)));
    ASSERT(env != NULL && strcmp(env, name) == 0, "my node is %s, IVM_NODE %s", name,
           env ? env : "(none)");
    CHECK(ivmGetNodeName(node, name, sizeof(name)));
    ASSERT(strcmp(env, name) == 0, "node %d is %s, IVM_NODE %s", node, name, env);
    ASSERT(node == team_node(t.me, nodes_count()), "index %d on node %d", t.me, node);
    /* Passed; stay alive until the root has counted the PEs per device. */
    CHECK(ivmSignalTo(0));
    pe_stage = "waiting for the root's count";
    CHECK(ivmWaitFrom(0));
    CHECK(ivmExit());
}

static void discover_errors(int nnodes)
{
    ivm_device_info info[2];
    char small[3];
    int n = -1;

    EXPECT(ivmGetDevices(nnodes, info, 2, &n), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmGetDevices(-5, info, 2, &n), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmGetNodeName(nnodes, small, sizeof(small)), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmGetDevices(0, NULL, 2, &n), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetDevices(0, info, 2, NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetDevices(0, info, -1, &n), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetNumNodes(NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetMyNode(NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetNodeName(0, NULL, 8), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetNodeName(0, small, sizeof(small)), IVM_ERROR_INVALID_VALUE);
    ASSERT(strcmp(small, "no") == 0, "cut name '%s'", small);
    CHECK(ivmGetDevices(0, NULL, 0, &n));
    ASSERT(n >= 1, "node0 has %d devices", n);
}

/* Node k's CPU device 0 runs want PEs of the job; its table is sane. */
static void discover_node(int k, int want)
{
    ivm_device_info info[IVM_NODE_DEVICES_MAX];
    char name[IVM_HOST_MAX + 1], expect[32];
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = -1, i;

    CHECK(ivmGetNodeName(k, name, sizeof(name)));
    snprintf(expect, sizeof(expect), "node%d", k);
    ASSERT(strcmp(name, expect) == 0, "node %d is named %s", k, name);
    CHECK(ivmGetDevices(k, info, IVM_NODE_DEVICES_MAX, &n));
    ASSERT(n >= 1, "%s has %d devices", name, n);
    for (i = 0; i < n; ++i) {
        int cpu = !IVM_DEV_IS_GPU(info[i].devtype);
        ASSERT(!cpu || info[i].devtype == IVM_CPU_N(i), "%s device %d is %#x", name, i,
               (unsigned)info[i].devtype);
        ASSERT(!cpu || (info[i].ncores >= 1 && info[i].ncores <= ncpus), "%s cpu%d: %d cores",
               name, i, info[i].ncores);
        ASSERT(info[i].share >= 1 && info[i].share <= 100, "%s dev %d share %d", name, i,
               info[i].share);
        ASSERT(info[i].numa >= -1, "numa %d", info[i].numa);
    }
    ASSERT(info[0].npes == want, "%s cpu0 runs %d PEs of the job, expected %d", name,
           info[0].npes, want);
    printf("NODE %s devices %d cpu0 cores %d share %d numa %d pes %d\n", name, n,
           info[0].ncores, info[0].share, info[0].numa, info[0].npes);
}

static int sc_discover(int argc, char **argv)
{
    int id = pe_enter(), nnodes, node = -1, k;
    team_t t;

    if (id != 0) {
        discover_pe(id);
        return 0;
    }
    ASSERT(argc > 2, "usage: discover NODES");
    nnodes = nodes_count();
    ASSERT(nnodes == atoi(argv[2]), "%d nodes, the run has %s", nnodes, argv[2]);
    CHECK(ivmGetMyNode(&node));
    ASSERT(node == 0, "the root runs on node %d", node);
    discover_errors(nnodes);
    discover_node(0, 1);
    team_create(&t, 2);
    for (k = 0; k < nnodes; ++k) {
        discover_node(k, 2 + (k == 0));
    }
    team_collect(&t, 1);
    for (k = 1; k < t.n; ++k) {
        CHECK(ivmSignalTo(t.ids[k]));
    }
    team_collect(&t, 1); /* each wait returns when its PE has exited */
    for (k = 0; k < nnodes; ++k) {
        discover_node(k, k == 0);
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ halo ring */

#define ROW 8192

static unsigned char row_byte(int index, int round)
{
    return (unsigned char)(index * 31 + round * 7 + 1);
}

/* Row of team index i for round r: two per PE (by parity), so a neighbour
 * one round ahead writes the other one. */
static unsigned char *row_of(unsigned char *halo, int i, int r)
{
    return halo + ((size_t)i * 2 + (size_t)(r % 2)) * ROW;
}

static void check_row(unsigned char *halo, int i, int r)
{
    unsigned char *row = row_of(halo, i, r), want = row_byte(i, r);
    int b;

    CHECK(ivmSyncGet(row, ROW));
    for (b = 0; b < ROW; ++b) {
        ASSERT(row[b] == want, "round %d: row of index %d byte %d is %u, expected %u", r, i, b,
               row[b], want);
    }
}

/* The halo exchange of a 1-D stencil: each round a PE writes its row, puts it
 * with a signal to its left neighbour and signals its right one, waits for
 * both neighbours' signals and checks their rows of that round. */
static double halo_rounds(const team_t *t, unsigned char *halo, int rounds)
{
    int left = (t->me + t->n - 1) % t->n, right = (t->me + 1) % t->n, r;
    double t0 = pe_now();

    for (r = 0; r < rounds; ++r) {
        memset(row_of(halo, t->me, r), row_byte(t->me, r), ROW);
        CHECK(ivmSyncPutSignal(row_of(halo, t->me, r), ROW, t->ids[left]));
        CHECK(ivmSignalTo(t->ids[right]));
        pe_stage = "halo: waiting for the neighbours";
        CHECK(ivmWaitFrom(t->ids[left]));
        CHECK(ivmWaitFrom(t->ids[right]));
        check_row(halo, left, r);
        check_row(halo, right, r);
    }
    return (pe_now() - t0) / rounds * 1e6;
}

static int sc_halo(int argc, char **argv)
{
    int id = pe_enter(), rounds = argc > 2 ? atoi(argv[2]) : 50;
    unsigned char *halo;
    team_t t;
    double us;

    if (id != 0) {
        team_join(&t, id);
        CHECK(ivmMap("halo", &halo, 0));
        halo_rounds(&t, halo, rounds);
        return team_done();
    }
    CHECK(ivmMalloc("halo", &halo, (size_t)TEAM_MAX * 2 * ROW));
    team_create(&t, nodes_count() == 1 ? 3 : 2);
    us = halo_rounds(&t, halo, rounds);
    team_collect(&t, 1);
    printf("HALO pes %d rounds %d us_per_round %.1f\n", t.n, rounds, us);
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ p2p faults */

/* Team of 5 (index: role): 1 V dies 300 ms after joining; 2 W waits from V
 * (PE_FAILED) and from K (PE_FAILED once the root kills it), then passes;
 * 3 D signals the root and dies; 4 K idles until killed. */
static int p2p_fail_pe(int id)
{
    team_t t;

    team_join(&t, id);
    switch (t.me) {
    case 1:
        pe_sleep_ms(300);
        abort();
    case 2:
        pe_stage = "waiting from a PE that dies";
        EXPECT(ivmWaitFrom(t.ids[1]), IVM_ERROR_PE_FAILED);
        ASSERT(strstr(ivmGetLastErrorMessage(), "died") != NULL, "detail '%s'",
               ivmGetLastErrorMessage());
        pe_stage = "waiting from a PE that is killed";
        EXPECT(ivmWaitFrom(t.ids[4]), IVM_ERROR_PE_FAILED);
        return team_done();
    case 3:
        CHECK(ivmSignalTo(0));
        abort();
    default:
        pe_idle_forever();
    }
}

static int sc_p2p_fail(int argc, char **argv)
{
    int id = pe_enter();
    ivm_pe v, w, dd, k;
    char *buf;
    team_t t;

    (void)argc;
    (void)argv;
    if (id != 0) {
        return p2p_fail_pe(id);
    }
    /* One PE per node, and then some: the roles land on every node there is. */
    team_create(&t, 4 / nodes_count() + (4 % nodes_count() != 0));
    v = t.ids[1], w = t.ids[2], dd = t.ids[3], k = t.ids[4];
    pe_stage = "waiting from a PE that dies";
    EXPECT(ivmWaitFrom(v), IVM_ERROR_PE_FAILED);
    EXPECT(ivmWaitFrom(v), IVM_ERROR_PE_FAILED);
    pe_stage = "a signal posted before the sender's death";
    CHECK(ivmWaitFrom(dd));
    EXPECT(ivmWaitFrom(dd), IVM_ERROR_PE_FAILED);
    CHECK(ivmKillPEs(&k, 1));
    pe_stage = "W's result";
    CHECK(ivmWaitFrom(w));
    CHECK(ivmWaitFrom(w)); /* it exited: success, as ivmWait */
    EXPECT(ivmWaitFrom(9999), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmWaitFrom(-3), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmSignalTo(9999), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmSignalTo(-1), IVM_ERROR_NOT_FOUND);
    CHECK(ivmMalloc("buf", &buf, 64));
    EXPECT(ivmSyncPutSignal(buf, 64, 9999), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmSyncPutSignal(buf, 65, w), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmSyncPutSignal(&w, 4, w), IVM_ERROR_INVALID_VALUE);
    /* Addressed and plain signals are counted apart. */
    CHECK(ivmSignalTo(0));
    CHECK(ivmSignal());
    CHECK(ivmWaitFrom(0));
    CHECK(ivmWait(0));
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ own signals */

/* ivmSignal / ivmWait (the dissertation's signals, posted on the signaller's
 * own count) between the root and one PE at a time, on every node in turn.
 * On the root's node the counts live on the signal board, and a process takes
 * the board's path from its third call on; the root daemon serves there the
 * WAITs of other nodes' PEs (the root's posts then tell it) and posts there
 * the SIGNALs it gets. argv[2]: rounds, ",daemon" after it: the PEs keep the
 * board off (IVM_SIGNAL_BOARD=0), so that the root's node mixes both paths
 * too. A PE signals `rounds` times, waits for as many of the root's signals,
 * signals `rounds` times more and dies without ivmExit: the root takes
 * exactly its signals, then IVM_ERROR_PE_FAILED (a signal counted twice or
 * lost would show there, or hang the run). First, own_late. */
static int own_pe(int rounds)
{
    int r;

    pe_stage = "signalling the root";
    for (r = 0; r < rounds; ++r) {
        CHECK(ivmSignal());
    }
    pe_stage = "waiting on the root's signals";
    for (r = 0; r < rounds; ++r) {
        CHECK(ivmWait(0));
    }
    pe_stage = "signalling the root before dying";
    for (r = 0; r < rounds; ++r) {
        CHECK(ivmSignal());
    }
    abort();
}

/* PE 1: its WAIT on the root queues in the daemon before the job has a
 * board; the root's ivmSignalTo then makes the board, and its ivmSignal
 * posts there: the board must know of the queued WAIT. Then an addressed
 * signal and a barrier between the two: with the board off in this process
 * alone (own ",daemon"), they still meet the root's, which takes the board
 * (pairs follow the job's setting, not each process's). */
static int own_late_pe(void)
{
    static const ivm_pe pair[] = {0, 1};

    pe_stage = "a WAIT queued before the board";
    CHECK(ivmWait(0));
    CHECK(ivmWaitFrom(0));
    pe_stage = "an addressed signal and a barrier with the root";
    CHECK(ivmSignalTo(0));
    CHECK(ivmBarrier(pair, 2));
    CHECK(ivmExit());
    return 0;
}

static void own_late(void)
{
    ivm_pe pe = pe_on_node(0);

    ASSERT(pe == 1, "the first PE is %d", pe);
    pe_sleep_ms(50);
    pe_stage = "a signal posted on a board made after the WAIT";
    CHECK(ivmSignalTo(pe));
    CHECK(ivmSignal());
    pe_stage = "an addressed signal and a barrier with PE 1";
    CHECK(ivmWaitFrom(pe));
    CHECK(ivmBarrier((const ivm_pe[]){0, pe}, 2));
    CHECK(ivmWait(pe)); /* it exited */
}

static int sc_own(int argc, char **argv)
{
    int rounds = argc > 2 ? atoi(argv[2]) : 20, id, k, r, nnodes;
    int off = argc > 2 && strstr(argv[2], ",daemon") != NULL;
    const char *pe_env = getenv("IVM_PE_ID");
    double t0;

    if (off && pe_env != NULL && strcmp(pe_env, "0") != 0) {
        setenv("IVM_SIGNAL_BOARD", "0", 1); /* before the first board call */
    }
    id = pe_enter();
    ASSERT(rounds > 2, "rounds %d", rounds);
    if (id == 1) {
        return own_late_pe();
    }
    if (id != 0) {
        return own_pe(rounds);
    }
    own_late();
    nnodes = nodes_count();
    t0     = pe_now();
    for (k = 0; k < 2 * nnodes; ++k) {
        ivm_pe pe = pe_on_node(k % nnodes);
        pe_stage = "the PE's signals";
        for (r = 0; r < rounds; ++r) {
            CHECK(ivmWait(pe));
        }
        /* Its first WAIT queued (or asleep on the board) before the posts. */
        pe_sleep_ms(20);
        pe_stage = "signalling the PE";
        for (r = 0; r < rounds; ++r) {
            CHECK(ivmSignal());
        }
        pe_stage = "the signals of a PE that dies";
        for (r = 0; r < rounds; ++r) {
            CHECK(ivmWait(pe));
        }
        EXPECT(ivmWait(pe), IVM_ERROR_PE_FAILED);
        ASSERT(strstr(ivmGetLastErrorMessage(), "died") != NULL, "detail '%s'",
               ivmGetLastErrorMessage());
        EXPECT(ivmWait(pe), IVM_ERROR_PE_FAILED);
    }
    printf("OWN %d PEs x %d rounds: %.1f ms\n", 2 * nnodes, rounds, (pe_now() - t0) * 1e3);
    EXPECT(ivmWait(9999), IVM_ERROR_NOT_FOUND);
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ barriers */

/* bar[parity][index]: each round a PE writes its slot, puts it, enters the
 * barrier (the team's list on odd rounds, the whole job on even ones) and
 * then reads every slot of that round. */
static double barrier_rounds(const team_t *t, int *bar, int rounds, double *med_p)
{
    double lat[512], t0 = pe_now(), t1;
    int r, i, nlat = 0;

    for (r = 0; r < rounds; ++r) {
        int *row = bar + (size_t)(r % 2) * TEAM_MAX;
        row[t->me] = r + 1;
        CHECK(ivmSyncPut(&row[t->me], sizeof(int)));
        pe_stage = "in a barrier";
        t1 = pe_now();
        if (r % 2) {
            CHECK(ivmBarrier(t->ids, t->n));
        } else {
            CHECK(ivmBarrierAll());
        }
        if (nlat < 512) {
            lat[nlat++] = (pe_now() - t1) * 1e6;
        }
        CHECK(ivmSyncGet(row, sizeof(int) * (size_t)t->n));
        for (i = 0; i < t->n; ++i) {
            ASSERT(row[i] == r + 1, "round %d: index %d wrote %d", r, i, row[i]);
        }
    }
    qsort(lat, (size_t)nlat, sizeof(lat[0]), cmp_double);
    *med_p = lat[nlat / 2];
    return (pe_now() - t0) / rounds * 1e6;
}

static void barrier_errors(const team_t *t)
{
    ivm_pe others[2] = {t->ids[1], t->ids[2]};
    ivm_pe bad[2]    = {t->ids[0], 9999};

    EXPECT(ivmBarrier(others, 2), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmBarrier(NULL, 1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmBarrier(t->ids, 0), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmBarrier(t->ids, IVM_BARRIER_PES_MAX + 1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmBarrier(bad, 2), IVM_ERROR_NOT_FOUND);
}

static int sc_barrier(int argc, char **argv)
{
    int id = pe_enter(), rounds = argc > 2 ? atoi(argv[2]) : 40, r;
    double us, med;
    int *bar;
    team_t t;

    if (id != 0) {
        team_join(&t, id);
        CHECK(ivmMap("bar", &bar, 0));
        barrier_rounds(&t, bar, rounds, &med);
        if (t.me <= 2) {
            /* A barrier of two members only, repeated: the root is not in it. */
            ivm_pe pair[2] = {t.ids[2], t.ids[1]};
            for (r = 0; r < 20; ++r) {
                CHECK(ivmBarrier(pair, 2));
            }
        }
        return team_done();
    }
    CHECK(ivmMalloc("bar", &bar, sizeof(int) * 2 * TEAM_MAX));
    team_create(&t, nodes_count() == 1 ? 3 : 2);
    barrier_errors(&t);
    us = barrier_rounds(&t, bar, rounds, &med);
    team_collect(&t, 1);
    printf("BARRIER pes %d rounds %d us_per_round %.1f median_wait_us %.1f\n", t.n, rounds, us,
           med);
    CHECK(ivmExit());
    return pe_ok();
}

/* Team of 5 (index: role): 1 V dies 300 ms after joining without reaching
 * the barrier; 2, 3 and the root enter the barrier of all five, which must
 * fail, then ivmBarrierAll, which fails when 4 (X) dies 1.5 s after joining.
 * PEs beyond the five (3 nodes) enter ivmBarrierAll at once: V's death fails
 * it. */
static int barrier_fail_pe(int id)
{
    team_t t;

    team_join(&t, id);
    if (t.me == 1 || t.me == 4) {
        pe_sleep_ms(t.me == 1 ? 300 : 1500);
        abort();
    }
    if (t.me >= 5) {
        /* Beyond the roles (3 nodes): fails with the first death. */
        EXPECT(ivmBarrierAll(), IVM_ERROR_PE_FAILED);
        return team_done();
    }
    t.n = 5;
    pe_stage = "a barrier whose member dies";
    EXPECT(ivmBarrier(t.ids, t.n), IVM_ERROR_PE_FAILED);
    ASSERT(strstr(ivmGetLastErrorMessage(), "died") != NULL, "detail '%s'",
           ivmGetLastErrorMessage());
    pe_stage = "ivmBarrierAll while a PE dies";
    EXPECT(ivmBarrierAll(), IVM_ERROR_PE_FAILED);
    return team_done();
}

static int sc_barrier_fail(int argc, char **argv)
{
    int id = pe_enter(), i;
    ivm_pe two[2];
    team_t t;

    (void)argc;
    (void)argv;
    if (id != 0) {
        return barrier_fail_pe(id);
    }
    team_create(&t, 4 / nodes_count() + (4 % nodes_count() != 0));
    ASSERT(t.n >= 5, "team of %d", t.n);
    pe_stage = "a barrier whose member dies";
    EXPECT(ivmBarrier(t.ids, 5), IVM_ERROR_PE_FAILED);
    pe_stage = "ivmBarrierAll while a PE dies";
    EXPECT(ivmBarrierAll(), IVM_ERROR_PE_FAILED);
    CHECK(ivmWaitFrom(t.ids[2]));
    CHECK(ivmWaitFrom(t.ids[3]));
    for (i = 5; i < t.n; ++i) {
        CHECK(ivmWaitFrom(t.ids[i]));
    }
    CHECK(ivmWaitFrom(t.ids[2])); /* exited */
    two[0] = 0;
    two[1] = t.ids[2];
    EXPECT(ivmBarrier(two, 2), IVM_ERROR_PE_FAILED);
    ASSERT(strstr(ivmGetLastErrorMessage(), "ivmExit") != NULL, "detail '%s'",
           ivmGetLastErrorMessage());
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ far pair */

/* ivmrun --nodes 3. A (index 2, node1) and B (index 3, node2): a pair the
 * root's node has no part in, the path issue 16 wants at one daemon hop.
 * Once A's rounds are over, the root puts a row into A's in-box (a mirror
 * on node0) with a signal, and A checks it.
 * Each has an in-box with its master on its own node; argv[2] rounds of
 * ivmSyncPutSignal of a row into the other's in-box, ivmWaitFrom, and a
 * check of every byte of the row received. Then B signals A once more and
 * dies: A's first wait takes that signal, the second fails. Then A and the
 * root enter a barrier with K (index 6, node2), which the root kills while
 * A waits in it: both fail, nobody hangs. Indices 1, 4, 5 only report. */
#define FAR_A 2
#define FAR_B 3
#define FAR_K 6

static unsigned char *far_theirs; /* the other's in-box, mapped here */

static void far_rounds(const team_t *t, int other, int rounds)
{
    unsigned char *mine, *theirs, want;
    char name[32];
    int r, b;

    snprintf(name, sizeof(name), "inbox%d", t->ids[t->me]);
    CHECK(ivmMalloc(name, &mine, 2 * ROW));
    CHECK(ivmSignalTo(t->ids[other]));
    CHECK(ivmWaitFrom(t->ids[other]));
    snprintf(name, sizeof(name), "inbox%d", t->ids[other]);
    CHECK(ivmMap(name, &theirs, 2 * ROW));
    far_theirs = theirs;
    for (r = 0; r < rounds; ++r) {
        size_t off = (size_t)(r % 2) * ROW;
        memset(theirs + off, row_byte(t->me, r), ROW);
        CHECK(ivmSyncPutSignal(theirs + off, ROW, t->ids[other]));
        pe_stage = "far pair: waiting for the other's row";
        CHECK(ivmWaitFrom(t->ids[other]));
        CHECK(ivmSyncGet(mine + off, ROW));
        want = row_byte(other, r);
        for (b = 0; b < ROW; ++b) {
            ASSERT(mine[off + b] == want, "round %d: byte %d of the row from index %d is %u, "
                   "expected %u", r, b, other, mine[off + b], want);
        }
    }
}

/* A's rounds are over: the root, on a mirror of A's in-box, puts a row
 * with a signal (its daemon is the registry's: the put's completion posts
 * the signal there); A finds the row. */
static void far_from_root(const team_t *t)
{
    unsigned char *mine;
    char name[32];
    int b;

    CHECK(ivmSignalTo(0));
    pe_stage = "far pair: the root's put-with-signal";
    CHECK(ivmWaitFrom(0));
    snprintf(name, sizeof(name), "inbox%d", t->ids[t->me]);
    CHECK(ivmMap(name, &mine, 2 * ROW));
    CHECK(ivmSyncGet(mine, ROW));
    for (b = 0; b < ROW; ++b) {
        ASSERT(mine[b] == 0xa5, "byte %d of the root's row is %u", b, mine[b]);
    }
}

static void far_root_put(const team_t *t)
{
    unsigned char *box;
    char name[32];

    CHECK(ivmWaitFrom(t->ids[FAR_A]));
    snprintf(name, sizeof(name), "inbox%d", t->ids[FAR_A]);
    CHECK(ivmMap(name, &box, 2 * ROW));
    memset(box, 0xa5, ROW);
    CHECK(ivmSyncPutSignal(box, ROW, t->ids[FAR_A]));
}

static int far_pe(int id, int rounds)
{
    ivm_pe three[3];
    team_t t;

    team_join(&t, id);
    switch (t.me) {
    case FAR_A:
        far_rounds(&t, FAR_B, rounds);
        pe_stage = "far pair: put-with-signal from a mirror to no PE";
        EXPECT(ivmSyncPutSignal(far_theirs, ROW, 9999), IVM_ERROR_NOT_FOUND);
        ASSERT(strstr(ivmGetLastErrorMessage(), "9999") != NULL, "detail '%s'",
               ivmGetLastErrorMessage());
        far_from_root(&t);
        pe_stage = "far pair: a signal posted before the sender's death";
        CHECK(ivmWaitFrom(t.ids[FAR_B]));
        EXPECT(ivmWaitFrom(t.ids[FAR_B]), IVM_ERROR_PE_FAILED);
        ASSERT(strstr(ivmGetLastErrorMessage(), "died") != NULL, "detail '%s'",
               ivmGetLastErrorMessage());
        three[0] = 0, three[1] = t.ids[FAR_A], three[2] = t.ids[FAR_K];
        CHECK(ivmSignalTo(0)); /* in the barrier soon: the root may kill K */
        pe_stage = "far pair: a barrier whose member is killed";
        EXPECT(ivmBarrier(three, 3), IVM_ERROR_PE_FAILED);
        return team_done();
    case FAR_B:
        far_rounds(&t, FAR_A, rounds);
        CHECK(ivmSignalTo(t.ids[FAR_A]));
        abort();
    case FAR_K:
        pe_idle_forever();
    default:
        return team_done();
    }
}

/* The INFO reply of node `node`'s daemon (its socket is next to ours). */
static void node_info(const char *node, ivm_msg_info_rep_t *info)
{
    char sock[PATH_MAX], dir[PATH_MAX];

    snprintf(dir, sizeof(dir), "%s", getenv("IVM_SOCKET"));
    snprintf(sock, sizeof(sock), "%s/%s.sock", dirname(dir), node);
    memset(info, 0, sizeof(*info));
    EXPECT(ivm_client_info(sock, 5000, info, NULL), IVM_SUCCESS);
    ASSERT(info->pid > 1, "%s's daemon pid %u", node, info->pid);
}

/* Every addressed signal and wait of the run took the direct way: no daemon
 * had to send one back with a place it lacked (issue 16: one hop). With
 * root_bounces (the daemons' IVM_PSYNC_PLACES=0: no PLACED, the fallback
 * under test) the root's daemon must have sent some back instead. */
static void expect_relays(int root_bounces)
{
    ivm_msg_info_rep_t info;
    char node[16];
    int k;

    for (k = 0; k < nodes_count(); ++k) {
        snprintf(node, sizeof(node), "node%d", k);
        node_info(node, &info);
        if (root_bounces && k == 0) {
            ASSERT(info.psync_relayed > 0, "the root's daemon relayed nothing without PLACED");
            continue;
        }
        ASSERT(info.psync_relayed == 0, "%s's daemon relayed %u addressed signals or waits",
               node, info.psync_relayed);
    }
}

/* expect_relays for a run whose daemons may have IVM_PSYNC_PLACES=0. */
static void expect_no_relay(void)
{
    const char *places = getenv("IVM_PSYNC_PLACES");

    expect_relays(places != NULL && strcmp(places, "0") == 0);
}

static int sc_far_pair(int argc, char **argv)
{
    int id = pe_enter(), rounds = argc > 2 ? atoi(argv[2]) : 200;
    ivm_pe three[3];
    team_t t;

    if (id != 0) {
        return far_pe(id, rounds);
    }
    ASSERT(nodes_count() == 3, "far_pair wants ivmrun --nodes 3, not %d", nodes_count());
    team_create(&t, 2);
    pe_stage = "far pair: A's rounds";
    far_root_put(&t);
    pe_stage = "far pair: A's word that it enters the barrier";
    CHECK(ivmWaitFrom(t.ids[FAR_A]));
    pe_sleep_ms(200);
    CHECK(ivmKillPEs(&t.ids[FAR_K], 1));
    three[0] = 0, three[1] = t.ids[FAR_A], three[2] = t.ids[FAR_K];
    EXPECT(ivmBarrier(three, 3), IVM_ERROR_PE_FAILED);
    pe_stage = "far pair: the others' results";
    CHECK(ivmWaitFrom(t.ids[1]));
    CHECK(ivmWaitFrom(t.ids[FAR_A]));
    CHECK(ivmWaitFrom(t.ids[4]));
    CHECK(ivmWaitFrom(t.ids[5]));
    EXPECT(ivmWaitFrom(t.ids[FAR_B]), IVM_ERROR_PE_FAILED);
    expect_no_relay();
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ root placed */

/* ivmrun --nodes 3, the daemons without PLACED (IVM_PSYNC_PLACES=0): a PE
 * on each other node waits from the root as soon as it starts, then
 * signals it. Every node daemon knows the root PE's place from the job's
 * first SPAWN, before any table: no daemon relays a wait (the root PE's
 * place once came only in the table that follows the SPAWN on the link,
 * and a PE's first wait could come before it). */
static int sc_root_placed(int argc, char **argv)
{
    int id = pe_enter(), k, n;
    ivm_pe pe[16];

    (void)argc;
    (void)argv;
    if (id != 0) {
        pe_stage = "root placed: the root's signal";
        CHECK(ivmWaitFrom(0));
        return team_done();
    }
    n = nodes_count();
    ASSERT(n >= 2, "root_placed wants ivmrun --nodes 2 or more, not %d", n);
    for (k = 1; k < n; ++k) {
        pe[k] = pe_on_node(k);
    }
    pe_sleep_ms(300); /* their waits first (a signal from the root places it too) */
    for (k = 1; k < n; ++k) {
        CHECK(ivmSignalTo(pe[k]));
    }
    pe_stage = "root placed: the PEs' signals";
    for (k = 1; k < n; ++k) {
        CHECK(ivmWaitFrom(pe[k]));
    }
    expect_relays(0); /* none, PLACED or not */
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ lost node */

/* ivmrun --nodes 3: A on node1, B on node2, their pair kept by node2's
 * daemon. A signals B (one hop) and the root; B consumes it, tells the
 * root, and waits from A again; the root kills node1's daemon: B's wait
 * fails with IVM_ERROR_PE_FAILED (node2 lost node1), no hang; A sees
 * IVM_ERROR_DAEMON_LOST and leaves. No daemon relayed anything. */
static int sc_far_lost(int argc, char **argv)
{
    int id = pe_enter(), i, *shared;
    ivm_msg_info_rep_t info;
    team_t t;

    (void)argc;
    (void)argv;
    if (id != 0) {
        team_join(&t, id);
        if (t.me == 1) {
            CHECK(ivmSignalTo(t.ids[2]));
            CHECK(ivmSignalTo(0));
            pe_stage = "blocked until its daemon dies";
            _exit(ivmWaitFrom(0) == IVM_ERROR_DAEMON_LOST ? 0 : 1);
        }
        pe_stage = "far lost: the signal of node1's PE";
        CHECK(ivmWaitFrom(t.ids[1]));
        CHECK(ivmSignalTo(0));
        pe_stage = "far lost: waiting from a PE of a lost node";
        EXPECT(ivmWaitFrom(t.ids[1]), IVM_ERROR_PE_FAILED);
        ASSERT(strstr(ivmGetLastErrorMessage(), "died") != NULL, "detail '%s'",
               ivmGetLastErrorMessage());
        return team_done();
    }
    ASSERT(nodes_count() == 3, "far_lost wants ivmrun --nodes 3, not %d", nodes_count());
    CHECK(ivmMalloc("team", &shared, sizeof(int) * (TEAM_MAX + 1)));
    memset(&t, 0, sizeof(t));
    t.n = 3;
    for (i = 1; i < 3; ++i) {
        t.ids[i] = pe_on_node(i);
    }
    shared[0] = t.n;
    memcpy(&shared[1], t.ids, sizeof(int) * 3);
    CHECK(ivmSyncPut(shared, sizeof(int) * (TEAM_MAX + 1)));
    for (i = 1; i < 3; ++i) {
        CHECK(ivmSignalTo(t.ids[i]));
    }
    pe_stage = "far lost: both PEs' word";
    for (i = 1; i < 3; ++i) {
        CHECK(ivmWaitFrom(t.ids[i]));
    }
    expect_no_relay();
    pe_sleep_ms(300); /* B waits from A at node2's daemon */
    node_info("node1", &info);
    ASSERT(kill((pid_t)info.pid, SIGKILL) == 0, "kill %u: %s", info.pid, strerror(errno));
    pe_stage = "far lost: B's result";
    CHECK(ivmWaitFrom(t.ids[2]));
    EXPECT(ivmWaitFrom(t.ids[1]), IVM_ERROR_PE_FAILED);
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ lost daemon */

/* ivmrun --nodes 2; argv[2]: a directory. Two PEs of node1, A and B, block
 * on the signal board: A in ivmWaitFrom(B), B in ivmBarrier({A, B}); then
 * the root kills node1's daemon. Both calls must fail with
 * IVM_ERROR_DAEMON_LOST (their output would go through the dead daemon, so
 * each writes what it got to DIR/<index>-rc), the root's ivmWaitFrom(A)
 * with IVM_ERROR_PE_FAILED, and its ivmSyncPutSignal of a mirror whose
 * master (A's object) was on node1 with IVM_ERROR_DAEMON_LOST. */
static void lost_write(const char *dir, int index, ivmError_t rc)
{
    char path[PATH_MAX];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%d-rc", dir, index);
    f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%s\n", pe_status_name(rc));
        fclose(f);
    }
}

static void lost_check(const char *dir, int index)
{
    char path[PATH_MAX], line[64] = "";
    double t0 = pe_now();
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%d-rc", dir, index);
    while ((f = fopen(path, "r")) == NULL && pe_now() - t0 < 5.0) {
        pe_sleep_ms(10);
    }
    ASSERT(f != NULL, "PE %d of node1 wrote no result within 5 s of its daemon's death", index);
    pe_sleep_ms(20); /* the line is written */
    ASSERT(fgets(line, sizeof(line), f) != NULL, "empty %s", path);
    fclose(f);
    ASSERT(strcmp(line, "IVM_ERROR_DAEMON_LOST\n") == 0, "PE %d of node1 got %s", index, line);
    unlink(path);
}

static int sc_board_lost(int argc, char **argv)
{
    int id = pe_enter(), i, *shared;
    unsigned char *box;
    ivm_msg_info_rep_t info;
    char sock[PATH_MAX], dir[PATH_MAX];
    ivm_device d;
    team_t t;

    ASSERT(argc > 2, "usage: board_lost DIR");
    if (id != 0) {
        team_join(&t, id);
        if (t.me == 1) {
            CHECK(ivmMalloc("lostbox", &box, 64)); /* its master on node1 */
        }
        CHECK(ivmSignalTo(0));
        pe_stage = "blocked on the board until the daemon dies";
        lost_write(argv[2], t.me, t.me == 1 ? ivmWaitFrom(t.ids[2]) : ivmBarrier(t.ids + 1, 2));
        _exit(0);
    }
    CHECK(ivmMalloc("team", &shared, sizeof(int) * (TEAM_MAX + 1)));
    memset(&t, 0, sizeof(t));
    t.n = 3;
    CHECK(ivmCreateDev("node1", IVM_CPU, &d));
    CHECK(ivmCreatePEs(d, 2, &t.ids[1]));
    CHECK(ivmDestroyDev(d));
    shared[0] = t.n;
    memcpy(&shared[1], t.ids, sizeof(int) * 3);
    for (i = 1; i < 3; ++i) {
        CHECK(ivmSignalTo(t.ids[i]));
    }
    for (i = 1; i < 3; ++i) {
        CHECK(ivmWaitFrom(t.ids[i]));
    }
    CHECK(ivmMap("lostbox", &box, 64));
    pe_sleep_ms(300); /* both asleep on the board */
    snprintf(dir, sizeof(dir), "%s", getenv("IVM_SOCKET"));
    snprintf(sock, sizeof(sock), "%s/node1.sock", dirname(dir));
    memset(&info, 0, sizeof(info));
    EXPECT(ivm_client_info(sock, 5000, &info, NULL), IVM_SUCCESS);
    ASSERT(info.pid > 1, "node1's daemon pid %u", info.pid);
    ASSERT(kill((pid_t)info.pid, SIGKILL) == 0, "kill %u: %s", info.pid, strerror(errno));
    lost_check(argv[2], 1);
    lost_check(argv[2], 2);
    pe_stage = "waiting from a PE of the lost node";
    EXPECT(ivmWaitFrom(t.ids[1]), IVM_ERROR_PE_FAILED);
    pe_stage = "put-with-signal into a master on the lost node";
    memset(box, 7, 64);
    EXPECT(ivmSyncPutSignal(box, 64, t.ids[2]), IVM_ERROR_DAEMON_LOST);
    ASSERT(strstr(ivmGetLastErrorMessage(), "unreachable") != NULL, "detail '%s'",
           ivmGetLastErrorMessage());
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ slots */

static char slots_why[512]; /* the last refused create's message */

/* Root: n PEs on node k's CPU device 0, ids into ids; a refusal's message
 * into slots_why (ivmDestroyDev clears it). */
static ivmError_t slots_create(int k, int n, ivm_pe *ids)
{
    char name[IVM_HOST_MAX + 1];
    ivmError_t status;
    ivm_device d;

    CHECK(ivmGetNodeName(k, name, sizeof(name)));
    CHECK(ivmCreateDev(name, IVM_CPU, &d));
    status = ivmCreatePEs(d, n, ids);
    snprintf(slots_why, sizeof(slots_why), "%s", ivmGetLastErrorMessage());
    CHECK(ivmDestroyDev(d));
    return status;
}

/* The job's PEs on node k's devices now. */
static int slots_npes(int k)
{
    ivm_device_info info[IVM_NODE_DEVICES_MAX];
    int n = 0, i, sum = 0;

    CHECK(ivmGetDevices(k, info, IVM_NODE_DEVICES_MAX, &n));
    for (i = 0; i < n; ++i) {
        sum += info[i].npes;
    }
    return sum;
}

/* Root: tell PEs ids[0..n-1] to end and wait until they have. */
static void slots_release(const ivm_pe *ids, int n)
{
    int i;

    for (i = 0; i < n; ++i) {
        CHECK(ivmSignalTo(ids[i]));
    }
    for (i = 0; i < n; ++i) {
        CHECK(ivmWaitFrom(ids[i])); /* its signal */
        CHECK(ivmWaitFrom(ids[i])); /* returns once it has exited */
    }
}

/* Node k with max_slots max (root on node0 counted): one PE past the limit
 * is refused with IVM_ERROR_LIMIT naming the node and the limit, and leaves
 * no PE behind; up to the limit works, and works again once PEs ended. */
static void slots_limit(int k, int max)
{
    ivm_pe ids[TEAM_MAX];
    char name[IVM_HOST_MAX + 1], want[64];
    int room = max - (k == 0), before = slots_npes(k);

    ASSERT(room >= 1 && room < TEAM_MAX, "node %d: room for %d PEs", k, room);
    CHECK(ivmGetNodeName(k, name, sizeof(name)));
    EXPECT(slots_create(k, room + 1, ids), IVM_ERROR_LIMIT);
    snprintf(want, sizeof(want), "max_slots %d", max);
    ASSERT(strstr(slots_why, name) != NULL && strstr(slots_why, want) != NULL,
           "message '%s' (want %s, %s)", slots_why, name, want);
    printf("LIMIT %s: %s\n", name, slots_why);
    ASSERT(slots_npes(k) == before, "%s runs %d PEs after the refused create, %d before",
           name, slots_npes(k), before);
    CHECK(slots_create(k, room, ids));
    EXPECT(slots_create(k, 1, &ids[room]), IVM_ERROR_LIMIT);
    ASSERT(slots_npes(k) == before + room, "%s runs %d PEs", name, slots_npes(k));
    slots_release(ids, room);
    ASSERT(slots_npes(k) == before, "%s runs %d PEs after they ended", name, slots_npes(k));
    CHECK(slots_create(k, 1, ids));
    slots_release(ids, 1);
}

/* argv[2]: each node's "SLOTS:MAX", ','-separated, as ivmGetNodeSlots must
 * report them. Where max_slots limits a node, slots_limit checks it; where
 * only slots is given, more PEs than slots still start (a hint, not a limit). */
static int sc_slots(int argc, char **argv)
{
    int id = pe_enter(), nnodes, k, slots = -1, max = -1, want_s, want_m;
    const char *p;
    ivm_pe ids[4];

    if (id != 0) {
        CHECK(ivmWaitFrom(0));
        return team_done();
    }
    ASSERT(argc > 2, "usage: slots S:M,S:M,...");
    nnodes = nodes_count();
    EXPECT(ivmGetNodeSlots(nnodes, &slots, &max), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmGetNodeSlots(0, NULL, &max), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmGetNodeSlots(0, &slots, NULL), IVM_ERROR_INVALID_VALUE);
    for (k = 0, p = argv[2]; k < nnodes; ++k, p = strchr(p, ',') + 1) {
        ASSERT(p != NULL && sscanf(p, "%d:%d", &want_s, &want_m) == 2, "bad list %s", argv[2]);
        CHECK(ivmGetNodeSlots(k, &slots, &max));
        printf("SLOTS node%d slots %d max_slots %d\n", k, slots, max);
        ASSERT(slots == want_s && max == want_m, "node%d: slots %d max_slots %d, expected %d:%d",
               k, slots, max, want_s, want_m);
        if (max > 0) {
            slots_limit(k, max);
        } else if (slots > 0) {
            CHECK(slots_create(k, slots + 1, ids));
            slots_release(ids, slots + 1);
        }
        if (k + 1 < nnodes) {
            ASSERT(strchr(p, ',') != NULL, "list %s is short", argv[2]);
        }
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ table once */

/* argv[2]: rounds R (2 nodes). The root starts R times a PE on node0 and one
 * on node1, one after the other, each ending once it signalled; then a pair,
 * A on node0 and B on node1, that signal each other. node1 gets the job's
 * table of places after its first SPAWN only (INFO places_told of the root's
 * daemon: at most each PE once per other node, where a table after every
 * SPAWN counted every earlier PE again, R * R of them); the places of later
 * PEs reach it by PLACED, so the pair's addressed signals still go. */
static int table_once_pe(int id, int rounds)
{
    int *pair;

    if (id <= 2 * rounds) {
        return team_done();
    }
    CHECK(ivmWaitFrom(0));
    CHECK(ivmMap("pair", &pair, 0));
    CHECK(ivmSyncGet(pair, 2 * sizeof(int)));
    pe_stage = "the pair's exchange";
    if (id == pair[0]) {
        CHECK(ivmSignalTo(pair[1]));
        CHECK(ivmWaitFrom(pair[1]));
    } else {
        CHECK(ivmWaitFrom(pair[0]));
        CHECK(ivmSignalTo(pair[0]));
    }
    CHECK(ivmUnmap(pair));
    return team_done();
}

static int sc_table_once(int argc, char **argv)
{
    int id = pe_enter(), rounds = argc > 2 ? atoi(argv[2]) : 16, r, k, *pair;
    ivm_msg_info_rep_t root, node1;
    uint64_t most;
    ivm_pe pe;

    ASSERT(rounds >= 1 && rounds <= 200, "rounds %d", rounds);
    if (id != 0) {
        return table_once_pe(id, rounds);
    }
    ASSERT(nodes_count() == 2, "table_once wants ivmrun --nodes 2, not %d", nodes_count());
    pe_stage = "PEs one after the other on node0 and node1";
    for (r = 0; r < rounds; ++r) {
        for (k = 0; k < 2; ++k) {
            pe = pe_on_node(k);
            CHECK(ivmWaitFrom(pe));
        }
    }
    CHECK(ivmMalloc("pair", &pair, 2 * sizeof(int)));
    pair[0] = pe_on_node(0);
    pair[1] = pe_on_node(1);
    CHECK(ivmSyncPut(pair, 2 * sizeof(int)));
    CHECK(ivmSignalTo(pair[0]));
    CHECK(ivmSignalTo(pair[1]));
    CHECK(ivmWaitFrom(pair[0]));
    CHECK(ivmWaitFrom(pair[1]));
    node_info("node0", &root);
    node_info("node1", &node1);
    /* The job's PEs (the root's, R on each node, the pair) once to node1. */
    most = 2u * (uint64_t)rounds + 3u;
    printf("TOLD places_told %llu (at most %llu) for %d rounds\n",
           (unsigned long long)root.places_told, (unsigned long long)most, rounds);
    ASSERT(root.places_told >= 1 && root.places_told <= most,
           "the root's daemon described %llu PEs to node1 in tables, at most %llu expected "
           "(each PE once)", (unsigned long long)root.places_told, (unsigned long long)most);
    ASSERT(node1.places_told == 0, "node1's daemon, no job's root, sent %llu places",
           (unsigned long long)node1.places_told);
    CHECK(ivmFree(pair));
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"board_lost", sc_board_lost},
    {"discover", sc_discover},
    {"halo", sc_halo},
    {"p2p_fail", sc_p2p_fail},
    {"own", sc_own},
    {"barrier", sc_barrier},
    {"barrier_fail", sc_barrier_fail},
    {"far_pair", sc_far_pair},
    {"far_lost", sc_far_lost},
    {"root_placed", sc_root_placed},
    {"slots", sc_slots},
    {"table_once", sc_table_once},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
