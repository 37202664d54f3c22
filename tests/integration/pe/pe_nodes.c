/* PE program for multi-node runs (ivmrun --nodes 2): node copies (mirrors)
 * and the four sync directions of SPEC section 2, and PE management across
 * nodes. The root runs on node0 and starts its children on node1. */
#include "pe_util.h"

#include <stdint.h>

#define OBJ_SIZE (64u * 1024u)
#define HALF     (OBJ_SIZE / 2)

/* Control block, kept apart from the object under test. */
typedef struct ctl {
    atomic_int step;      /* root -> children: the phase to run */
    atomic_int done[8];   /* child k -> root: last phase finished */
    int        pid[8];
    int        gid[8];
    int        devtype[8];
    char       node[8][IVM_HOST_MAX + 1];
} ctl_t;

static unsigned char pat(char tag, size_t i)
{
    return (unsigned char)(tag * 31 + (int)(i % 251));
}

static void fill(unsigned char *p, char tag, size_t off, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = pat(tag, off + i);
    }
}

/* p[0..n) holds pattern `tag` for object bytes off..off+n. */
static void expect_pat(const unsigned char *p, char tag, size_t off, size_t n, int line,
                       const char *what)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pat(tag, off + i)) {
            pe_failf(line, "%s: object byte %zu is 0x%02x, expected pattern '%c' (0x%02x)",
                     what, off + i, p[i], tag, pat(tag, off + i));
        }
    }
}

/* The ctl block is a master on node0; children read it through their node's
 * mirror, so every read and write of it is synced explicitly. */
static void ctl_put_field(void *field, size_t len) { CHECK(ivmSyncPut(field, len)); }

/* Children: wait until the root announces phase `step` (polling the master
 * through this node's copy: each read is an explicit ivmSyncGet). */
static void child_phase(ctl_t *c, int step)
{
    pe_stage = "child waits for the next phase";
    for (double deadline = pe_now() + 30.0;; pe_sleep_ms(1)) {
        CHECK(ivmSyncGet(&c->step, sizeof(c->step)));
        if (atomic_load(&c->step) >= step) {
            break;
        }
        ASSERT(pe_now() < deadline, "phase %d never announced", step);
    }
    ASSERT(atomic_load(&c->step) == step, "phase %d announced, expected %d",
           atomic_load(&c->step), step);
}

/* Children: report phase `step` done (the field, then a signal). */
static void child_done(ctl_t *c, int k, int step)
{
    atomic_store(&c->done[k], step);
    ctl_put_field(&c->done[k], sizeof(c->done[k]));
    CHECK(ivmSignal());
}

/* Root: announce a phase and wait for every child's signal. */
static void root_phase(ctl_t *c, const ivm_pe *kids, int n, int step)
{
    atomic_store(&c->step, step);
    pe_stage = "root waits for the children's phase";
    for (int k = 0; k < n; ++k) {
        CHECK(ivmWait(kids[k]));
        ASSERT(atomic_load(&c->done[k]) == step, "child %d finished phase %d, expected %d", k,
               atomic_load(&c->done[k]), step);
    }
}

/* Sync directions between a master on node0 and node1's copy. */
static int sc_sync_nodes(int argc, char **argv)
{
    unsigned char *p, *q, *s;
    ctl_t *c;
    int id = pe_enter();

    if (id != 0) {
        int k = id - 1;
        char node[IVM_HOST_MAX + 1] = "";
        const char *env_node = getenv("IVM_NODE");
        /* The first map fills this node's copy. No whole-block ivmSyncGet here:
         * both children share node1's one copy, and a Get would overwrite the
         * other child's fields before it has put them. */
        CHECK(ivmMap("ctl", &c, 0));
        c->pid[k] = (int)getpid();
        CHECK(ivmGetMyGroupId(&c->gid[k]));
        CHECK(ivmGetMyDevType(&c->devtype[k]));
        snprintf(node, sizeof(node), "%s", env_node ? env_node : "?");
        memcpy(c->node[k], node, sizeof(node));
        /* field by field: the other child's fields in this copy are stale */
        ctl_put_field(&c->pid[k], sizeof(c->pid[k]));
        ctl_put_field(&c->gid[k], sizeof(c->gid[k]));
        ctl_put_field(&c->devtype[k], sizeof(c->devtype[k]));
        ctl_put_field(c->node[k], sizeof(c->node[k]));
        if (k == 0) {
            /* the whole object: the first map fills node1's copy from the master */
            CHECK(ivmMap("v", &q, 0));
            expect_pat(q, 'A', 0, OBJ_SIZE, __LINE__, "first map on node1");
            /* phase 1: Put pushes this node's copy to the master */
            fill(q, 'B', 0, HALF);
            CHECK(ivmSyncPut(q, HALF));
            child_done(c, k, 1);
            /* phase 2: Get pulls the master into this node's copy */
            child_phase(c, 2);
            CHECK(ivmSyncGet(q + HALF, HALF));
            expect_pat(q + HALF, 'C', HALF, HALF, __LINE__, "after ivmSyncGet");
            expect_pat(q, 'B', 0, HALF, __LINE__, "outside the range of ivmSyncGet");
            child_done(c, k, 2);
            /* phase 3: the root's PutGroup broadcasts into this copy */
            child_phase(c, 3);
            expect_pat(q, 'D', 0, OBJ_SIZE, __LINE__, "after the root's ivmSyncPutGroup");
            /* phase 4: GetGroup gathers this copy into the master */
            fill(q, 'E', 0, 4096);
            child_done(c, k, 3);
            child_phase(c, 4);
            child_done(c, k, 4);
            CHECK(ivmUnmap(q));
        } else {
            /* a subset on the same node: the node's one copy, not another */
            CHECK(ivmMapSubset("v", &s, HALF + 100, 1000));
            expect_pat(s, 'A', HALF + 100, 1000, __LINE__, "subset map on node1");
            child_done(c, k, 1);
            child_phase(c, 2);
            child_done(c, k, 2);
            child_phase(c, 3);
            expect_pat(s, 'D', HALF + 100, 1000, __LINE__, "subset after ivmSyncPutGroup");
            child_done(c, k, 3);
            child_phase(c, 4);
            child_done(c, k, 4);
            CHECK(ivmUnmap(s));
        }
        CHECK(ivmUnmap(c));
        CHECK(ivmExit());
        return 0;
    }

    ivm_device d1, dx = NULL;
    ivm_pe kids[2];
    int n, gid;

    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmMalloc("ctl", &c, sizeof(*c)));
    CHECK(ivmMalloc("v", &p, OBJ_SIZE));
    fill(p, 'A', 0, OBJ_SIZE);
    EXPECT(ivmCreateDev("node9", IVM_CPU, &dx), IVM_ERROR_NOT_FOUND);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 2, kids));
    ASSERT(kids[0] > 0 && kids[1] > kids[0], "ids %d %d", kids[0], kids[1]);

    pe_stage = "phase 1: Put from node1";
    for (int k = 0; k < 2; ++k) {
        CHECK(ivmWait(kids[k]));
        ASSERT(atomic_load(&c->done[k]) == 1, "child %d phase %d", k, atomic_load(&c->done[k]));
    }
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 3, "ivmGetNumPEs counts %d PEs over two nodes, expected 3", n);
    for (int k = 0; k < 2; ++k) {
        ASSERT(c->gid[k] == gid, "child %d on node1 has group id %d, the root %d", k, c->gid[k],
               gid);
        ASSERT(strcmp(c->node[k], "node1") == 0, "child %d runs on '%s'", k, c->node[k]);
    }
    expect_pat(p, 'B', 0, HALF, __LINE__, "master after node1's ivmSyncPut");
    expect_pat(p + HALF, 'A', HALF, HALF, __LINE__, "master outside node1's put");

    pe_stage = "phase 2: Get into node1";
    fill(p + HALF, 'C', HALF, HALF);
    root_phase(c, kids, 2, 2);

    pe_stage = "phase 3: PutGroup from the master";
    fill(p, 'D', 0, OBJ_SIZE);
    CHECK(ivmSyncPutGroup(p, OBJ_SIZE));
    root_phase(c, kids, 2, 3);

    pe_stage = "phase 4: GetGroup into the master";
    CHECK(ivmSyncGetGroup(p, OBJ_SIZE));
    expect_pat(p, 'E', 0, 4096, __LINE__, "master after ivmSyncGetGroup");
    root_phase(c, kids, 2, 4);

    for (int k = 0; k < 2; ++k) {
        CHECK(ivmWait(kids[k]));
    }
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmFree(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* A second map of a region node1 already holds moves no data: the child
 * maps, the root changes the master, the child maps again and still sees its
 * node's copy (no refill), until it calls ivmSyncGet. */
static int sc_reuse_nodes(int argc, char **argv)
{
    unsigned char *p, *q, *q2;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMapSubset("t", &q, 4096, 4096));
        expect_pat(q, 'A', 4096, 4096, __LINE__, "first map");
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmMapSubset("t", &q2, 4096, 4096));
        expect_pat(q2, 'A', 4096, 4096, __LINE__,
                   "a second map of a held region (no data may move: the tile is reused)");
        CHECK(ivmSyncGet(q2, 4096));
        expect_pat(q2, 'B', 4096, 4096, __LINE__, "after ivmSyncGet");
        expect_pat(q, 'B', 4096, 4096, __LINE__, "one node copy under both mappings");
        CHECK(ivmUnmap(q2));
        CHECK(ivmUnmap(q));
        CHECK(ivmExit());
        return 0;
    }
    ivm_device d1;
    ivm_pe kid;

    CHECK(ivmMalloc("t", &p, 3 * 4096));
    fill(p, 'A', 0, 3 * 4096);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmWait(kid));
    fill(p, 'B', 0, 3 * 4096);
    CHECK(ivmSignal());
    CHECK(ivmWait(kid));
    CHECK(ivmExit());
    return pe_ok();
}

/* PEs across nodes: wait, signal, kill, failure, and the end of the job. */
static int sc_procs_nodes(int argc, char **argv)
{
    atomic_int *pids;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("pids", &pids, 0));
        atomic_store(&pids[id], (int)getpid());
        CHECK(ivmSyncPut(&pids[id], sizeof(int)));
        if (id == 3) {
            abort();
        }
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    ivm_device d1;
    ivm_pe kids[3];

    CHECK(ivmMalloc("pids", &pids, 8 * sizeof(int)));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 3, kids));
    ASSERT(kids[2] == 3, "ids %d %d %d", kids[0], kids[1], kids[2]);
    pe_stage = "signals from node1";
    CHECK(ivmWait(kids[0]));
    CHECK(ivmWait(kids[1]));
    pe_stage = "a PE of node1 that aborts";
    EXPECT(ivmWait(kids[2]), IVM_ERROR_PE_FAILED);
    CHECK(ivmKillPEs(&kids[0], 1));
    EXPECT(ivmWait(kids[0]), IVM_ERROR_PE_FAILED);
    printf("PIDS %d %d\n", atomic_load(&pids[kids[0]]), atomic_load(&pids[kids[1]]));
    /* kids[1] is still running: the root's exit must end it */
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"sync_nodes", sc_sync_nodes},
    {"reuse_nodes", sc_reuse_nodes},
    {"procs_nodes", sc_procs_nodes},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
