/* PE program for multi-node runs (ivmrun --nodes N): node copies (mirrors)
 * and the four sync directions of SPEC section 2, scatter and gather over
 * subset mirrors, PE management across nodes, spawn errors and the loss of
 * a node's daemon. The root runs on node0 and starts its children on node1
 * (and node2).
 *
 * Byte counts: a daemon's INFO reports the object bytes it received from and
 * sent to other nodes (rx_bytes, tx_bytes). ivmrun --nodes puts every node's
 * socket in one run directory, <dir>/node<k>.sock, and gives each PE its own
 * node's socket in IVM_SOCKET, so a PE can ask any node of its run. */
#include "pe_util.h"

#include <libgen.h>
#include <pthread.h>
#include <limits.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "client.h"
#include "ep_defaults.h"
#include "sock.h"

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

/* INFO of the daemon of `node` of this run (NULL: this PE's own node). */
static void node_info(const char *node, ivm_msg_info_rep_t *info)
{
    const char *own = getenv("IVM_SOCKET");
    char dir[PATH_MAX], path[PATH_MAX + 80];

    ASSERT(own != NULL && own[0] == '/', "IVM_SOCKET is '%s'", own ? own : "(unset)");
    if (node == NULL) {
        snprintf(path, sizeof(path), "%s", own);
    } else {
        snprintf(dir, sizeof(dir), "%s", own);
        snprintf(path, sizeof(path), "%s/%s.sock", dirname(dir), node);
    }
    memset(info, 0, sizeof(*info));
    EXPECT(ivm_client_info(path, 5000, info, NULL), IVM_SUCCESS);
    ASSERT(node == NULL || strcmp(info->node, node) == 0, "%s answers as node '%s'", path,
           info->node);
}

/* This node's OBJ_INFO of object `name` of our job. */
static void obj_info(const char *name, ivm_msg_obj_info_rep_t *rep)
{
    ivm_msg_obj_info_req_t req;
    int gid;

    CHECK(ivmGetMyGroupId(&gid));
    memset(&req, 0, sizeof(req));
    req.job = (uint32_t)gid;
    snprintf(req.name, sizeof(req.name), "%s", name);
    memset(rep, 0, sizeof(*rep));
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_OBJ_INFO, &req, sizeof(req),
                              rep, sizeof(*rep), NULL),
           IVM_SUCCESS);
}

static uint64_t node_rx(const char *node)
{
    ivm_msg_info_rep_t info;

    node_info(node, &info);
    return info.rx_bytes;
}

static uint64_t node_tx(const char *node)
{
    ivm_msg_info_rep_t info;

    node_info(node, &info);
    return info.tx_bytes;
}

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
        /* The only PE of node1: every object byte node1's daemon receives
         * meanwhile is for this PE. */
        uint64_t rx0 = node_rx(NULL), rx1, rx2, rx3;
        CHECK(ivmMapSubset("t", &q, 4096, 4096));
        rx1 = node_rx(NULL);
        ASSERT(rx1 - rx0 == 4096, "the first map of a 4096-byte tile made node1 receive %llu "
               "bytes", (unsigned long long)(rx1 - rx0));
        expect_pat(q, 'A', 4096, 4096, __LINE__, "first map");
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmMapSubset("t", &q2, 4096, 4096));
        rx2 = node_rx(NULL);
        ASSERT(rx2 == rx1, "the second map of a held tile made node1 receive %llu bytes "
               "(tile reuse moves none)", (unsigned long long)(rx2 - rx1));
        expect_pat(q2, 'A', 4096, 4096, __LINE__,
                   "a second map of a held region (no data may move: the tile is reused)");
        {
            /* The Get's bytes leave node0; they come through node1's daemon,
             * or (a small Get through this PE's own endpoint, libivm/ep.c)
             * straight to the PE. */
            ivm_msg_info_rep_t i0, i1;
            ivm_msg_obj_info_rep_t oi;
            uint64_t direct;
            node_info("node0", &i0);
            CHECK(ivmSyncGet(q2, 4096));
            node_info("node0", &i1);
            rx3    = node_rx(NULL);
            direct = i1.ep_gets - i0.ep_gets;
            /* (UCX: node1's daemon reads them one-sided; node0 counts none.) */
            ASSERT(direct <= 1 && (strcmp(i0.transport, "tcp") != 0 ||
                                   i1.tx_bytes - i0.tx_bytes == 4096),
                   "ivmSyncGet of 4096 bytes made node0 send %llu bytes (%llu through endpoints)",
                   (unsigned long long)(i1.tx_bytes - i0.tx_bytes), (unsigned long long)direct);
            ASSERT(rx3 - rx2 == (direct ? 0 : 4096),
                   "ivmSyncGet of 4096 bytes made node1's daemon receive %llu bytes",
                   (unsigned long long)(rx3 - rx2));
            /* The same, counted for the object itself on node1. */
            obj_info("t", &oi);
            ASSERT(!(oi.flags & IVM_OBJ_INFO_MASTER) && oi.size == 3 * 4096 &&
                       oi.held == 4096 && oi.rx_bytes == (direct ? 1 : 2) * 4096 &&
                       oi.tx_bytes == 0,
                   "node1's copy of 't': flags %u size %llu held %llu rx %llu tx %llu",
                   oi.flags, (unsigned long long)oi.size, (unsigned long long)oi.held,
                   (unsigned long long)oi.rx_bytes, (unsigned long long)oi.tx_bytes);
        }
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
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmWait(kid));
    fill(p, 'B', 0, 3 * 4096);
    CHECK(ivmSignal());
    CHECK(ivmWait(kid));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmd --poll-us (ivmrun --daemon-poll-us): argv[2] is the poll window every
 * daemon of the run must report. A PE on node1 makes 8-byte syncs to the
 * master on node0, each read back with a Get; with a window,
 * node1's daemon must have caught some of them polling (INFO polled), and
 * without one never. */
#define POLL_SYNCS 200
static int sc_poll_nodes(int argc, char **argv)
{
    unsigned long want = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
    ivm_msg_info_rep_t info;
    unsigned char *p;
    int id = pe_enter();

    if (id != 0) {
        uint64_t polled0;
        CHECK(ivmMap("p", &p, 0));
        node_info(NULL, &info);
        ASSERT(info.poll_us == want, "node1's daemon polls %u us, expected %lu", info.poll_us,
               want);
        polled0 = info.polled;
        for (int i = 1; i <= POLL_SYNCS; ++i) {
            memcpy(p, &i, sizeof(i));
            CHECK(ivmSyncPut(p, 8));
            memset(p, 0xEE, 8); /* only node1's copy: the Get must restore it */
            CHECK(ivmSyncGet(p, 8));
            ASSERT(memcmp(p, &i, sizeof(i)) == 0, "sync %d: the Get after the Put did not "
                   "bring the value back from node0's master", i);
        }
        node_info(NULL, &info);
        if (want > 0) {
            ASSERT(info.polled > polled0, "node1's daemon polled %lu us after each reply "
                   "but caught none of %d requests polling", want, 2 * POLL_SYNCS);
        } else {
            ASSERT(info.polled == 0, "node1's daemon without --poll-us counts %llu polled "
                   "events", (unsigned long long)info.polled);
        }
        printf("POLLED %llu loop turns over %d sync calls\n",
               (unsigned long long)(info.polled - polled0), 2 * POLL_SYNCS);
        CHECK(ivmUnmap(p));
        CHECK(ivmExit());
        return 0;
    }
    ivm_device d1;
    ivm_pe kid;
    int v;

    node_info(NULL, &info);
    ASSERT(info.poll_us == want, "node0's daemon polls %u us, expected %lu", info.poll_us,
           want);
    CHECK(ivmMalloc("p", &p, 4096));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmWait(kid));
    memcpy(&v, p, sizeof(v));
    ASSERT(v == POLL_SYNCS, "the master holds %d, expected the last Put %d", v, POLL_SYNCS);
    CHECK(ivmFree(p));
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
        printf("hello from pe %d env %s\n", id,
               getenv("IVMT_X") != NULL ? getenv("IVMT_X") : "-");
        fflush(stdout);
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    ivm_device d1;
    ivm_pe kids[3];

    CHECK(ivmMalloc("pids", &pids, 8 * sizeof(int)));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 3, kids));
    CHECK(ivmDestroyDev(d1));
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

/* PutGroup scatter and GetGroup gather over subset mirrors on three nodes
 * (ivmrun --nodes 3). Object v of OBJ_SIZE bytes, master on node0 (the root);
 * child 0 on node1 maps [0, HALF), child 1 on node2 maps [HALF, OBJ_SIZE),
 * child 2 on node2 maps the middle [HALF - Q, HALF + Q), so node1 holds
 * [0, HALF) and node2 [HALF - Q, OBJ_SIZE): the two node copies overlap in
 * [HALF - Q, HALF).
 *  - PutGroup of the whole object from the master: node1 receives exactly
 *    HALF bytes, node2 exactly HALF + Q (byte counters), and every child sees
 *    the new pattern in its whole subset.
 *  - Each child writes its own pattern into its own part (no Put): child 0
 *    [0, HALF - Q), child 2 [HALF, HALF + Q), child 1 [HALF + Q, OBJ_SIZE);
 *    nobody writes the overlap, which both copies hold unchanged, so the
 *    gather's result is defined everywhere. GetGroup of the whole object
 *    brings each part into the master (node0 receives each copy's holding).
 * Phases are announced in the ctl block (polled with ivmSyncGet), except
 * around the measured PutGroup: then the children are blocked in ivmWait(0),
 * so no other object byte moves. */
#define SG_Q (OBJ_SIZE / 8)

static const struct {
    const char *node;
    size_t      map_off, map_len;     /* the child's subset mapping */
    size_t      write_off, write_len; /* what it writes before the gather */
    char        tag;
} sg_kids[3] = {
    {"node1", 0, HALF, 0, HALF - SG_Q, 'E'},
    {"node2", HALF, HALF, HALF + SG_Q, HALF - SG_Q, 'F'},
    {"node2", HALF - SG_Q, 2 * SG_Q, HALF, SG_Q, 'G'},
};

static int sc_scatter_nodes(int argc, char **argv)
{
    unsigned char *p, *q;
    ctl_t *c;
    int id = pe_enter();

    if (id != 0) {
        int k = id - 1;
        const char *node = getenv("IVM_NODE");
        ASSERT(k >= 0 && k < 3, "unexpected id %d", id);
        ASSERT(node != NULL && strcmp(node, sg_kids[k].node) == 0, "child %d runs on '%s'", k,
               node ? node : "(unset)");
        size_t off = sg_kids[k].map_off, len = sg_kids[k].map_len;
        CHECK(ivmMap("ctl", &c, 0));
        CHECK(ivmMapSubset("v", &q, off, len));
        expect_pat(q, 'A', off, len, __LINE__, "first map of the subset");
        child_done(c, k, 1);
        /* phase 2: the root's PutGroup, while every child is blocked here */
        pe_stage = "child waits for the root's PutGroup";
        CHECK(ivmWait(0));
        expect_pat(q, 'D', off, len, __LINE__, "subset after the root's ivmSyncPutGroup");
        child_done(c, k, 2);
        /* phase 3: write this child's part (node copy only) */
        child_phase(c, 3);
        fill(q + (sg_kids[k].write_off - off), sg_kids[k].tag, sg_kids[k].write_off,
             sg_kids[k].write_len);
        child_done(c, k, 3);
        /* phase 4: the root has gathered; keep the mappings until then */
        child_phase(c, 4);
        CHECK(ivmUnmap(q));
        CHECK(ivmUnmap(c));
        CHECK(ivmExit());
        return 0;
    }

    ivm_device d1, d2;
    ivm_pe kids[3];
    uint64_t rx1, rx2, tx0, rx0, d_rx1, d_rx2, d_tx0, d_rx0;

    CHECK(ivmMalloc("ctl", &c, sizeof(*c)));
    CHECK(ivmMalloc("v", &p, OBJ_SIZE));
    fill(p, 'A', 0, OBJ_SIZE);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreateDev("node2", IVM_CPU, &d2));
    CHECK(ivmCreatePEs(d1, 1, &kids[0]));
    CHECK(ivmCreatePEs(d2, 2, &kids[1]));
    ASSERT(kids[0] == 1 && kids[1] == 2 && kids[2] == 3, "ids %d %d %d", kids[0], kids[1],
           kids[2]);
    pe_stage = "phase 1: subset maps on node1 and node2";
    for (int k = 0; k < 3; ++k) {
        CHECK(ivmWait(kids[k]));
        ASSERT(atomic_load(&c->done[k]) == 1, "child %d phase %d", k, atomic_load(&c->done[k]));
    }

    pe_stage = "phase 2: PutGroup scatters into the subset mirrors";
    rx1 = node_rx("node1");
    rx2 = node_rx("node2");
    tx0 = node_tx("node0");
    fill(p, 'D', 0, OBJ_SIZE);
    CHECK(ivmSyncPutGroup(p, OBJ_SIZE));
    d_rx1 = node_rx("node1") - rx1;
    d_rx2 = node_rx("node2") - rx2;
    d_tx0 = node_tx("node0") - tx0;
    ASSERT(d_rx1 == HALF, "node1 holds %u bytes of v but received %llu from the PutGroup",
           HALF, (unsigned long long)d_rx1);
    ASSERT(d_rx2 == HALF + SG_Q, "node2 holds %u bytes of v but received %llu from the "
           "PutGroup", HALF + SG_Q, (unsigned long long)d_rx2);
    ASSERT(d_tx0 == OBJ_SIZE + SG_Q, "node0 sent %llu bytes for the PutGroup, expected %u",
           (unsigned long long)d_tx0, OBJ_SIZE + SG_Q);
    atomic_store(&c->step, 2);
    for (int k = 0; k < 3; ++k) {
        CHECK(ivmSignal()); /* one per child, each waits once */
    }
    for (int k = 0; k < 3; ++k) {
        CHECK(ivmWait(kids[k]));
        ASSERT(atomic_load(&c->done[k]) == 2, "child %d phase %d", k, atomic_load(&c->done[k]));
    }
    expect_pat(p, 'D', 0, OBJ_SIZE, __LINE__, "master after its own PutGroup");

    pe_stage = "phase 3: the children write their parts";
    root_phase(c, kids, 3, 3);
    expect_pat(p, 'D', 0, OBJ_SIZE, __LINE__, "master before the GetGroup (nobody put)");

    pe_stage = "phase 4: GetGroup gathers the parts";
    rx0 = node_rx("node0");
    CHECK(ivmSyncGetGroup(p, OBJ_SIZE));
    d_rx0 = node_rx("node0") - rx0;
    expect_pat(p, 'E', 0, HALF - SG_Q, __LINE__, "master: child 0's part (node1)");
    expect_pat(p + HALF - SG_Q, 'D', HALF - SG_Q, SG_Q, __LINE__,
               "master: the overlap of node1's and node2's copies (written by nobody)");
    expect_pat(p + HALF, 'G', HALF, SG_Q, __LINE__, "master: child 2's part (node2)");
    expect_pat(p + HALF + SG_Q, 'F', HALF + SG_Q, HALF - SG_Q, __LINE__,
               "master: child 1's part (node2)");
    ASSERT(d_rx0 == OBJ_SIZE + SG_Q, "node0 received %llu bytes for the GetGroup, expected "
           "%u (each copy's holding)", (unsigned long long)d_rx0, OBJ_SIZE + SG_Q);
    root_phase(c, kids, 0, 4); /* announce only: the children unmap and exit */
    for (int k = 0; k < 3; ++k) {
        CHECK(ivmWait(kids[k]));
    }
    CHECK(ivmDestroyDev(d2));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmFree(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* A PE of node1 starts its successor on its own device, the DS-LB idiom:
 * ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV), which libivm answers from
 * ivmEnter's reply without a round trip. The successor must run on node1,
 * on the same device, not on the job's home node. */
static int sc_self_dev_nodes(int argc, char **argv)
{
    int id = pe_enter(), devtype;
    const char *node = getenv("IVM_NODE");
    ivm_device dev;
    ivm_pe pe;

    (void)argc;
    (void)argv;
    if (id == 1) {
        ASSERT(node != NULL && strcmp(node, "node1") == 0, "PE 1 runs on '%s'",
               node ? node : "(unset)");
        CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &dev));
        CHECK(ivmCreatePEs(dev, 1, &pe));
        ASSERT(pe == 2, "the successor got id %d, expected 2", pe);
        CHECK(ivmDestroyDev(dev));
        CHECK(ivmExit());
        return 0;
    }
    if (id == 2) {
        CHECK(ivmGetMyDevType(&devtype));
        ASSERT(node != NULL && strcmp(node, "node1") == 0,
               "the successor of a node1 PE on IVM_THIS_DEV runs on '%s'",
               node ? node : "(unset)");
        ASSERT(devtype == IVM_CPU, "the successor's device type is %d", devtype);
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(id == 0, "unexpected id %d", id);
    CHECK(ivmCreateDev("node1", IVM_CPU, &dev));
    CHECK(ivmCreatePEs(dev, 1, &pe));
    ASSERT(pe == 1, "PE on node1 got id %d", pe);
    CHECK(ivmDestroyDev(dev));
    pe_stage = "waiting for PE 1 and its successor";
    CHECK(ivmWait(1));
    /* PE 1 ended after its ivmCreatePEs returned: PE 2 exists (NOT_FOUND
       would mean it was never started). */
    CHECK(ivmWait(2));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmCreatePEs of a program whose executable is gone: IVM_ERROR_SPAWN (no
 * hang), every slot IVM_PE_NULL, the message names the path; on node1 and on
 * the root's own node. The test runs a copy of this binary, named by argv[2]
 * (it must be this process's executable, and a copy: the root deletes it). */
static int sc_spawn_missing(int argc, char **argv)
{
    char exe[PATH_MAX];
    const char *hosts[2] = {"node1", IVM_THIS_HOST};
    ssize_t n;
    int id = pe_enter();

    ASSERT(id == 0, "PE %d was started from an executable that was deleted", id);
    ASSERT(argc > 2 && strstr(argv[2], "spawn-missing-copy") != NULL,
           "usage: spawn_missing PATH-OF-A-COPY-OF-THIS-PROGRAM");
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    ASSERT(strcmp(exe, argv[2]) == 0, "running %s, not the copy %s", exe, argv[2]);
    ASSERT(unlink(exe) == 0, "unlink %s: %s", exe, strerror(errno));

    for (int h = 0; h < 2; ++h) {
        ivm_device d;
        ivm_pe kids[2] = {12345, 12345};
        const char *msg;
        double t0;
        int npes = -1;

        pe_stage = h == 0 ? "ivmCreatePEs on node1 from a deleted executable"
                          : "ivmCreatePEs on node0 from a deleted executable";
        CHECK(ivmCreateDev(hosts[h], IVM_CPU, &d));
        t0 = pe_now();
        EXPECT(ivmCreatePEs(d, 2, kids), IVM_ERROR_SPAWN);
        ASSERT(pe_now() - t0 < 10.0, "ivmCreatePEs took %.1f s", pe_now() - t0);
        msg = ivmGetLastErrorMessage();
        ASSERT(msg != NULL && strstr(msg, exe) != NULL,
               "the message of ivmCreatePEs on %s does not name %s: '%s'",
               hosts[h] ? hosts[h] : "this node", exe, msg ? msg : "(null)");
        ASSERT(kids[0] == IVM_PE_NULL && kids[1] == IVM_PE_NULL,
               "slots after a failed spawn on %s: %d %d", hosts[h] ? hosts[h] : "this node",
               kids[0], kids[1]);
        CHECK(ivmGetNumPEs(&npes));
        ASSERT(npes == 1, "ivmGetNumPEs counts %d PEs after the failed spawn", npes);
        CHECK(ivmDestroyDev(d));
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* node1's daemon is killed (SIGKILL) while the job runs. The child on node1
 * allocated "n1obj" (master on node1) and blocks in ivmWait(0) (the root never
 * signals); the root maps part of n1obj (node0's mirror), kills node1's ivmd
 * (its pid from node1's INFO), then: ivmWait(child) fails with
 * IVM_ERROR_PE_FAILED within 10 s, Put and Get on n1obj and a map of a part
 * node0 does not hold fail with IVM_ERROR_DAEMON_LOST, and the job goes on
 * and ends normally. The child's blocked call fails once its daemon is gone
 * (IVM_ERROR_DAEMON_LOST) and it exits; its output went through node1's
 * daemon, so it writes what the call returned to the file argv[2]/child-rc
 * instead. The test checks that file and that the child's pid and the
 * daemon's ("PIDS child daemon") are gone. */
static int sc_daemon_lost(int argc, char **argv)
{
    unsigned char *p, *q, *q2 = NULL;
    ctl_t *c;
    int id = pe_enter();

    if (id != 0) {
        ivmError_t rc;
        char path[PATH_MAX];
        FILE *f;
        ASSERT(argc > 2, "usage: daemon_lost DIR");
        CHECK(ivmMap("ctl", &c, 0));
        c->pid[0] = (int)getpid();
        ctl_put_field(&c->pid[0], sizeof(c->pid[0]));
        CHECK(ivmMalloc("n1obj", &p, OBJ_SIZE));
        fill(p, 'K', 0, OBJ_SIZE);
        CHECK(ivmSignal());
        pe_stage = "child blocked in ivmWait(0) until its daemon dies";
        rc = ivmWait(0);
        snprintf(path, sizeof(path), "%s/child-rc", argv[2]);
        f = fopen(path, "w");
        if (f != NULL) {
            fprintf(f, "%s\n", pe_status_name(rc));
            fclose(f);
        }
        if (rc == IVM_ERROR_DAEMON_LOST) {
            _exit(0);
        }
        pe_failf(__LINE__, "ivmWait(0) returned %s (%d) on node1, expected "
                 "IVM_ERROR_DAEMON_LOST once node1's daemon was killed",
                 pe_status_name(rc), rc);
    }

    ivm_device d1;
    ivm_pe kid;
    ivm_msg_info_rep_t info;
    ivmError_t rc;
    double t0, dt;
    int npes = -1;

    CHECK(ivmMalloc("ctl", &c, sizeof(*c)));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmDestroyDev(d1));
    pe_stage = "the child allocates n1obj on node1";
    CHECK(ivmWait(kid));
    ASSERT(c->pid[0] > 0, "the child's pid %d", c->pid[0]);
    CHECK(ivmMapSubset("n1obj", &q, 0, HALF));
    expect_pat(q, 'K', 0, HALF, __LINE__, "node0's copy of an object mastered on node1");

    /* Small puts open this PE's endpoint to node1's daemon (after
     * IVM_EP_AFTER through the daemons, libivm/ep.c), which then dies under
     * it (either transport). */
    for (int k = 0; k < (int)IVM_EP_AFTER + 1; ++k) {
        CHECK(ivmSyncPut(q, 8));
    }
    node_info("node1", &info);
    ASSERT(info.ep_puts == 1u, "node1 took %llu puts from endpoints on transport %s",
           (unsigned long long)info.ep_puts, info.transport);
    ASSERT(info.pid > 1 && (pid_t)info.pid != getpid(), "node1's daemon pid %u", info.pid);
    printf("PIDS %d %u\n", c->pid[0], info.pid);
    pe_stage = "killing node1's daemon";
    ASSERT(kill((pid_t)info.pid, SIGKILL) == 0, "kill %u: %s", info.pid, strerror(errno));

    pe_stage = "ivmWait on a PE of the lost node";
    t0 = pe_now();
    EXPECT(ivmWait(kid), IVM_ERROR_PE_FAILED);
    dt = pe_now() - t0;
    ASSERT(dt < 10.0, "ivmWait on a PE of the lost node returned after %.1f s", dt);

    pe_stage = "syncs of an object mastered on the lost node";
    EXPECT(ivmSyncGet(q, 4096), IVM_ERROR_DAEMON_LOST);
    EXPECT(ivmSyncPut(q, 4096), IVM_ERROR_DAEMON_LOST);
    EXPECT(ivmSyncPut(q, 8), IVM_ERROR_DAEMON_LOST); /* again, after the endpoint broke */
    pe_stage = "a map that needs the lost master";
    EXPECT(ivmMapSubset("n1obj", &q2, HALF, 4096), IVM_ERROR_DAEMON_LOST);
    pe_stage = "a PutGroup of an object with a mirror on the lost node";
    rc = ivmSyncPutGroup(c, sizeof(*c));
    ASSERT(rc == IVM_SUCCESS || rc == IVM_ERROR_DAEMON_LOST,
           "ivmSyncPutGroup of the root's object with a mirror on the lost node returned "
           "%s (%d) [%s]", pe_status_name(rc), rc, ivmGetLastErrorMessage());
    CHECK(ivmGetNumPEs(&npes));
    ASSERT(npes == 1, "ivmGetNumPEs counts %d PEs once node1 was lost", npes);
    pe_stage = "the end of the job";
    CHECK(ivmUnmap(q));
    CHECK(ivmFree(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* Small puts and gets of node1's copy take the PE's own endpoint to the
 * master's daemon (libivm/ep.c): node0 counts each (INFO ep_puts, ep_gets),
 * and the master has every byte, with two threads putting at once and beside
 * a put above the endpoint's limit (through the daemons); an
 * ivmSyncPutSignal to the root (the master's node) has its bytes there when
 * its signal arrives; small Gets and a large one read them back. The first
 * EP_AFTER small syncs go through the daemons: the endpoint opens after.
 * argv[2] "off": the run set IVM_PE_ENDPOINTS=0, so node0 counts none. */
#define EP_SIZE    (512u * 1024u)
#define EP_AFTER   ((int)IVM_EP_AFTER) /* small syncs to a node before its endpoint
                                          opens (libivm/ep.c) */
#define EP_SMALL_N 256              /* 8-byte puts of thread A, [0, 2048) */
#define EP_PAGE_N  32               /* 4 KiB puts of thread B, [64 KiB, 192 KiB) */
#define EP_BIG_OFF (192u * 1024u)   /* one put of 300 KiB: above the endpoint's 256 KiB */
#define EP_BIG_LEN (300u * 1024u)
#define EP_GET_N   16               /* 8 KiB Gets of the child, over thread B's range */
#define EP_SIG_OFF (496u * 1024u)   /* an ivmSyncPutSignal of 8 KiB to the root */

typedef struct ep_thread {
    unsigned char *p;
    size_t         off, piece;
    int            n;
    char           tag;
    ivmError_t     rc;
} ep_thread_t;

static void *ep_thread_main(void *arg)
{
    ep_thread_t *t = arg;

    t->rc = IVM_SUCCESS;
    for (int k = 0; k < t->n && t->rc == IVM_SUCCESS; ++k) {
        size_t off = t->off + (size_t)k * t->piece;
        fill(t->p + off, t->tag, off, t->piece);
        t->rc = ivmSyncPut(t->p + off, t->piece);
    }
    return NULL;
}

/* ivmSyncPutNbi from a mirror on node1 into the master on node0: bad
 * ranges fail at the call; NBI_SLOTS puts (past the 64 outstanding, so the
 * oldest are waited for on the way) all land by ivmQuiet; so do the puts of
 * three threads posting at once between blocking Gets; a put left
 * outstanding lands by the ivmUnmap that follows it; posted gets of the
 * root's pattern are in the mirror after ivmQuiet; the master's own PE
 * moves nothing. The root checks the master after each phase. */
#define NBI_SLOTS 200
#define NBI_SLOT  4096
#define NBI_THREADS 3

/* Slot k's byte in the pattern (base, mod, sign): base + sign * (k % mod). */
static int nbi_byte(int k, int base, int mod, int sign)
{
    return base + sign * (k % mod);
}

/* Every slot of p holds its pattern byte (sampled every 512 bytes). */
static void nbi_expect(const unsigned char *p, int base, int mod, int sign, const char *after)
{
    for (int k = 0; k < NBI_SLOTS; ++k) {
        int want = nbi_byte(k, base, mod, sign);
        for (int b = 0; b < NBI_SLOT; b += 512) {
            int got = p[(size_t)k * NBI_SLOT + (size_t)b];
            ASSERT(got == want, "slot %d byte %d is %d after %s, expected %d", k, b, got,
                   after, want);
        }
    }
}

typedef struct nbi_thread {
    pthread_t      th;
    unsigned char *q;     /* the mapping */
    int            index; /* slots index, index + NBI_THREADS, ... */
    int            rc;    /* the first failure */
    char           what[160];
} nbi_thread_t;

/* Posts its slots with the second pattern, a blocking Get of another slot
 * between two posts (its reply and the posted ones share the connection),
 * then its own ivmQuiet. */
static void *nbi_thread_main(void *arg)
{
    nbi_thread_t *t = arg;
    unsigned char probe[8];

    for (int k = t->index; k < NBI_SLOTS; k += NBI_THREADS) {
        unsigned char *slot = t->q + (size_t)k * NBI_SLOT;
        memset(slot, nbi_byte(k, 100, 150, 1), NBI_SLOT);
        ivmError_t rc = ivmSyncPutNbi(slot, NBI_SLOT);
        if (rc == IVM_SUCCESS && k % 7 == 0)
            rc = ivmSyncGet(t->q + (size_t)NBI_SLOTS * NBI_SLOT, sizeof(probe));
        if (rc != IVM_SUCCESS) {
            t->rc = rc;
            snprintf(t->what, sizeof(t->what), "slot %d: %s", k, ivmGetLastErrorMessage());
            return NULL;
        }
    }
    t->rc = ivmQuiet();
    if (t->rc != IVM_SUCCESS)
        snprintf(t->what, sizeof(t->what), "ivmQuiet: %s", ivmGetLastErrorMessage());
    return NULL;
}

static int sc_put_nbi(int argc, char **argv)
{
    unsigned char *p;
    int id = pe_enter();

    (void)argc;
    (void)argv;
    if (id != 0) {
        unsigned char *q;
        CHECK(ivmMap("nbi", &q, 0));
        EXPECT(ivmSyncPutNbi(NULL, 8), IVM_ERROR_INVALID_VALUE);
        EXPECT(ivmSyncPutNbi(q + (NBI_SLOTS + 1) * NBI_SLOT - 8, 16), IVM_ERROR_INVALID_VALUE);
        CHECK(ivmQuiet()); /* nothing outstanding */
        for (int k = 0; k < NBI_SLOTS; ++k) {
            memset(q + (size_t)k * NBI_SLOT, nbi_byte(k, 1, 250, 1), NBI_SLOT);
            CHECK(ivmSyncPutNbi(q + (size_t)k * NBI_SLOT, NBI_SLOT));
        }
        CHECK(ivmQuiet());
        CHECK(ivmSignal()); /* the root checks the slots */
        CHECK(ivmWait(0));  /* until it has: the threads overwrite them */
        /* Threads posting at once, each with its own quiet. */
        pe_stage = "threads post puts";
        nbi_thread_t th[NBI_THREADS];
        memset(th, 0, sizeof(th));
        for (int t = 0; t < NBI_THREADS; ++t) {
            th[t].q = q;
            th[t].index = t;
            ASSERT(pthread_create(&th[t].th, NULL, nbi_thread_main, &th[t]) == 0, "thread");
        }
        for (int t = 0; t < NBI_THREADS; ++t) {
            pthread_join(th[t].th, NULL);
            ASSERT(th[t].rc == IVM_SUCCESS, "thread %d: %s (%s)", t,
                   pe_status_name(th[t].rc), th[t].what);
        }
        CHECK(ivmSignal()); /* the root checks the second pattern */
        /* Posted gets of the root's third pattern, complete by the quiet. */
        pe_stage = "posted gets";
        CHECK(ivmWait(0));
        EXPECT(ivmSyncGetNbi(q + (NBI_SLOTS + 1) * NBI_SLOT - 8, 16), IVM_ERROR_INVALID_VALUE);
        for (int k = 0; k < NBI_SLOTS; ++k) {
            CHECK(ivmSyncGetNbi(q + (size_t)k * NBI_SLOT, NBI_SLOT));
        }
        CHECK(ivmQuiet());
        nbi_expect(q, 255, 100, -1, "ivmSyncGetNbi + ivmQuiet");
        memset(q + (size_t)NBI_SLOTS * NBI_SLOT, 0xEE, NBI_SLOT);
        CHECK(ivmSyncPutNbi(q + (size_t)NBI_SLOTS * NBI_SLOT, NBI_SLOT));
        CHECK(ivmUnmap(q)); /* waits for the last put */
        CHECK(ivmQuiet());
        CHECK(ivmExit());
        return 0;
    }

    ivm_device d1;
    ivm_pe kid;

    EXPECT(ivmQuiet(), IVM_SUCCESS);
    CHECK(ivmMalloc("nbi", &p, (size_t)(NBI_SLOTS + 1) * NBI_SLOT));
    memset(p, 0, (size_t)(NBI_SLOTS + 1) * NBI_SLOT);
    CHECK(ivmSyncPutNbi(p, 64)); /* the master itself: complete at once */
    CHECK(ivmQuiet());
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    pe_stage = "root waits for the posted puts";
    CHECK(ivmWait(kid));
    nbi_expect(p, 1, 250, 1, "the child's ivmQuiet");
    CHECK(ivmSignal()); /* checked: the child's threads may post */
    pe_stage = "root waits for the threads' posted puts";
    CHECK(ivmWait(kid));
    nbi_expect(p, 100, 150, 1, "the threads' ivmQuiet");
    for (int k = 0; k < NBI_SLOTS; ++k) {
        memset(p + (size_t)k * NBI_SLOT, nbi_byte(k, 255, 100, -1), NBI_SLOT);
    }
    CHECK(ivmSignal()); /* the child gets them */
    pe_stage = "root waits for the child's exit";
    CHECK(ivmWait(kid)); /* its ivmExit */
    for (int b = 0; b < NBI_SLOT; b += 512) {
        ASSERT(p[(size_t)NBI_SLOTS * NBI_SLOT + (size_t)b] == 0xEE,
               "byte %d of the put left outstanding at ivmUnmap is %d, expected 0xEE", b,
               p[(size_t)NBI_SLOTS * NBI_SLOT + (size_t)b]);
    }
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

static int sc_endpoint_nodes(int argc, char **argv)
{
    int off = argc > 2 && strcmp(argv[2], "off") == 0;
    int id = pe_enter();
    unsigned char *p;

    if (id != 0) {
        ep_thread_t a = {.off = 0, .piece = 8, .n = EP_SMALL_N, .tag = 'E'};
        ep_thread_t b = {.off = 64u * 1024u, .piece = 4096, .n = EP_PAGE_N, .tag = 'F'};
        pthread_t ta, tb;

        CHECK(ivmMap("epobj", &p, 0));
        a.p = b.p = p;
        pe_stage = "two threads put small ranges while the main thread puts a large one";
        ASSERT(pthread_create(&ta, NULL, ep_thread_main, &a) == 0, "thread A");
        ASSERT(pthread_create(&tb, NULL, ep_thread_main, &b) == 0, "thread B");
        fill(p + EP_BIG_OFF, 'G', EP_BIG_OFF, EP_BIG_LEN);
        CHECK(ivmSyncPut(p + EP_BIG_OFF, EP_BIG_LEN));
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        EXPECT(a.rc, IVM_SUCCESS);
        EXPECT(b.rc, IVM_SUCCESS);
        pe_stage = "a put with a signal to the root, whose node holds the master";
        fill(p + EP_SIG_OFF, 'S', EP_SIG_OFF, 8192);
        CHECK(ivmSyncPutSignal(p + EP_SIG_OFF, 8192, 0));
        pe_stage = "small Gets (through the endpoint) read the puts back";
        memset(p, 0, EP_SIZE);
        for (int k = 0; k < EP_GET_N; ++k) {
            CHECK(ivmSyncGet(p + 64u * 1024u + (size_t)k * 8192, 8192));
        }
        expect_pat(p + 64u * 1024u, 'F', 64u * 1024u, (size_t)EP_PAGE_N * 4096, __LINE__,
                   "node1's copy after its small Gets");
        pe_stage = "a large Get (through the daemons) reads the puts back";
        memset(p, 0, EP_SIZE);
        CHECK(ivmSyncGet(p, EP_SIZE));
        expect_pat(p, 'E', 0, (size_t)EP_SMALL_N * 8, __LINE__, "node1's copy after its Get");
        expect_pat(p + 64u * 1024u, 'F', 64u * 1024u, (size_t)EP_PAGE_N * 4096, __LINE__,
                   "node1's copy after its Get");
        CHECK(ivmUnmap(p));
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }

    ivm_msg_info_rep_t before, after;
    ivm_device d1;
    ivm_pe kid;
    uint64_t n;

    node_info("node0", &before);
    CHECK(ivmMalloc("epobj", &p, EP_SIZE));
    memset(p, 0, EP_SIZE);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    pe_stage = "waiting for the child's put with a signal";
    CHECK(ivmWaitFrom(kid));
    expect_pat(p + EP_SIG_OFF, 'S', EP_SIG_OFF, 8192, __LINE__,
               "master when the signal of ivmSyncPutSignal arrived");
    pe_stage = "waiting for the child's puts";
    CHECK(ivmWait(kid));
    expect_pat(p, 'E', 0, (size_t)EP_SMALL_N * 8, __LINE__, "master after thread A's puts");
    expect_pat(p + 64u * 1024u, 'F', 64u * 1024u, (size_t)EP_PAGE_N * 4096, __LINE__,
               "master after thread B's puts");
    expect_pat(p + EP_BIG_OFF, 'G', EP_BIG_OFF, EP_BIG_LEN, __LINE__,
               "master after the large put");
    node_info("node0", &after);
    n = after.ep_puts - before.ep_puts;
    printf("ENDPOINT_PUTS %llu\n", (unsigned long long)n);
    ASSERT(n == (off ? 0u : (uint64_t)(EP_SMALL_N + EP_PAGE_N + 1 - EP_AFTER)),
           "node0 took %llu puts from endpoints, expected %d", (unsigned long long)n,
           off ? 0 : EP_SMALL_N + EP_PAGE_N + 1 - EP_AFTER);
    n = after.ep_gets - before.ep_gets;
    printf("ENDPOINT_GETS %llu\n", (unsigned long long)n);
    ASSERT(n == (off ? 0u : (uint64_t)EP_GET_N), "node0 served %llu gets to endpoints, "
           "expected %d", (unsigned long long)n, off ? 0 : EP_GET_N);
    CHECK(ivmWait(kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* The master's daemon has no fd left when a PE of another node opens its
 * endpoint there: the handshake goes unanswered, and the PE's small puts take
 * the daemon path after at most libivm's IVM_EP_HELLO_MS (2 s), not the
 * node's whole timeout (10 s); every byte arrives, and the daemon took no put
 * from an endpoint. The root fills node0's fd table (prlimit on its daemon)
 * once the child has mapped the object, and empties it after. */
#define FULL_N ((int)IVM_EP_AFTER + 8) /* the put after IVM_EP_AFTER tries the endpoint */

static int fd_count(pid_t pid)
{
    char path[64];
    struct dirent *e;
    DIR *d;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    ASSERT(d != NULL, "cannot list %s", path);
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static int sc_endpoint_full_nodes(int argc, char **argv)
{
    int id = pe_enter();
    uint64_t *p;

    if (id != 0) {
        double worst = 0.0;

        CHECK(ivmMap("fullobj", &p, 0));
        CHECK(ivmSignalTo(0));
        pe_stage = "waiting for node0's daemon to run out of fds";
        CHECK(ivmWaitFrom(0));
        pe_stage = "small puts to node0's master (its endpoint opens past IVM_EP_AFTER)";
        for (int k = 0; k < FULL_N; ++k) {
            double t0 = pe_now();
            p[k] = 1000u + (uint64_t)k;
            CHECK(ivmSyncPut(&p[k], sizeof(p[k])));
            worst = pe_now() - t0 > worst ? pe_now() - t0 : worst;
        }
        printf("SLOWEST_PUT_MS %.0f\n", worst * 1e3);
        ASSERT(worst < 5.0, "a small put took %.1f s with the master's daemon out of fds",
               worst);
        CHECK(ivmUnmap(p));
        CHECK(ivmSignalTo(0));
        CHECK(ivmExit());
        return 0;
    }

    ivm_msg_info_rep_t before, after;
    struct rlimit old, full;
    ivm_device d1;
    ivm_pe kid;

    node_info("node0", &before);
    CHECK(ivmMalloc("fullobj", &p, FULL_N * sizeof(*p)));
    memset(p, 0, FULL_N * sizeof(*p));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmWaitFrom(kid));
    ASSERT(prlimit((pid_t)before.pid, RLIMIT_NOFILE, NULL, &old) == 0, "prlimit: %s",
           strerror(errno));
    full = old;
    full.rlim_cur = (rlim_t)fd_count((pid_t)before.pid);
    ASSERT(prlimit((pid_t)before.pid, RLIMIT_NOFILE, &full, NULL) == 0, "prlimit: %s",
           strerror(errno));
    CHECK(ivmSignalTo(kid));
    pe_stage = "waiting for the child's puts";
    ivmError_t st = ivmWaitFrom(kid);
    prlimit((pid_t)before.pid, RLIMIT_NOFILE, &old, NULL);
    EXPECT(st, IVM_SUCCESS);
    for (int k = 0; k < FULL_N; ++k) {
        ASSERT(p[k] == 1000u + (uint64_t)k, "master word %d is %llu after the child's puts",
               k, (unsigned long long)p[k]);
    }
    node_info("node0", &after);
    ASSERT(after.ep_puts == before.ep_puts, "node0 took %llu puts from an endpoint it could "
           "not have accepted", (unsigned long long)(after.ep_puts - before.ep_puts));
    CHECK(ivmWait(kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* A PE of node1 is SIGKILLed in the middle of moving a large object. Child 1
 * (node1) maps "big" (BIG_SIZE bytes, master on node0) and loops
 * ivmSyncPut/ivmSyncGet of the whole object, counting rounds in the ctl block
 * (done[0], pid[0]); the root waits for two rounds, kills it (SIGKILL) and
 * then: ivmWait on it returns IVM_ERROR_PE_FAILED; a new child 2 on node1
 * maps "big", puts pattern 'P' over all of it and gets it back intact; the
 * master then holds 'P'; node0's and node1's daemons still answer INFO; the
 * job ends normally. The root prints "PIDS killed second" for the test. */
#define BIG_SIZE (64u * 1024u * 1024u)

static int sc_kill_mid_transfer(int argc, char **argv)
{
    unsigned char *p, *q;
    ctl_t *c;
    int id = pe_enter();

    if (id == 1) {
        CHECK(ivmMap("ctl", &c, 0));
        c->pid[0] = (int)getpid();
        ctl_put_field(&c->pid[0], sizeof(c->pid[0]));
        CHECK(ivmMap("big", &q, 0));
        pe_stage = "child 1 loops Put/Get of the whole object until killed";
        for (int round = 1;; ++round) {
            memset(q, round & 0xff, 4096);
            CHECK(ivmSyncPut(q, BIG_SIZE));
            CHECK(ivmSyncGet(q, BIG_SIZE));
            atomic_store(&c->done[0], round);
            ctl_put_field(&c->done[0], sizeof(c->done[0]));
        }
    }
    if (id == 2) {
        CHECK(ivmMap("ctl", &c, 0));
        c->pid[1] = (int)getpid();
        ctl_put_field(&c->pid[1], sizeof(c->pid[1]));
        pe_stage = "child 2 maps the object after child 1 was killed";
        CHECK(ivmMap("big", &q, 0));
        fill(q, 'P', 0, BIG_SIZE);
        pe_stage = "child 2 puts the whole object";
        CHECK(ivmSyncPut(q, BIG_SIZE));
        memset(q, 0, BIG_SIZE);
        pe_stage = "child 2 gets the whole object";
        CHECK(ivmSyncGet(q, BIG_SIZE));
        expect_pat(q, 'P', 0, BIG_SIZE, __LINE__, "node1's copy after a Put/Get round trip");
        CHECK(ivmUnmap(q));
        CHECK(ivmUnmap(c));
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(id == 0, "unexpected id %d", id);

    ivm_device d1;
    ivm_pe kid, kid2;
    ivm_msg_info_rep_t info;
    pid_t victim;
    double t0;

    CHECK(ivmMalloc("ctl", &c, sizeof(*c)));
    CHECK(ivmMalloc("big", &p, BIG_SIZE));
    fill(p, 'A', 0, BIG_SIZE);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    ASSERT(kid == 1, "id %d", kid);
    t0 = pe_now();
    pe_stage = "waiting for child 1's transfer rounds";
    pe_wait_flag(&c->done[0], 2, 60.0, "two Put/Get rounds of child 1");
    victim = (pid_t)c->pid[0];
    ASSERT(victim > 1 && victim != getpid(), "child 1's pid %d", (int)victim);
    /* the child is now inside the next round's Put or Get (each moves 64 MiB) */
    pe_sleep_ms(5 + (int)(getpid() % 20));
    ASSERT(kill(victim, SIGKILL) == 0, "kill %d: %s", (int)victim, strerror(errno));
    printf("KILLED after %d rounds (%.3f s per round)\n", atomic_load(&c->done[0]),
           (pe_now() - t0) / atomic_load(&c->done[0]));

    pe_stage = "ivmWait on the killed PE";
    t0 = pe_now();
    EXPECT(ivmWait(kid), IVM_ERROR_PE_FAILED);
    ASSERT(pe_now() - t0 < 10.0, "ivmWait on the killed PE took %.1f s", pe_now() - t0);

    pe_stage = "a new child on node1 after the kill";
    CHECK(ivmCreatePEs(d1, 1, &kid2));
    ASSERT(kid2 == 2, "id %d", kid2);
    CHECK(ivmWait(kid2));
    expect_pat(p, 'P', 0, BIG_SIZE, __LINE__, "master after child 2's ivmSyncPut");
    printf("PIDS %d %d\n", (int)victim, c->pid[1]);

    pe_stage = "the daemons still answer INFO";
    node_info("node0", &info);
    node_info("node1", &info);
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmFree(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivm-info on a live job: object "infovec" (master on node0) mapped by a PE
 * on node1; the root runs IVM_INFO (argv[2]) with the arguments in argv[3]
 * (";"-separated runs, "%J" standing for the job id), its output going to
 * stdout between "INFO-BEGIN ARGS" and "INFO-END" lines, while the PE holds
 * its mapping. */
static int sc_info_nodes(int argc, char **argv)
{
    char cmd[4096], *runs, *run, *save = NULL, *j;
    unsigned char *v;
    ivm_device d1;
    ivm_pe kid;
    int id = pe_enter(), gid = 0;

    if (id != 0) {
        CHECK(ivmMap("infovec", &v, 0));
        CHECK(ivmSignal());
        CHECK(ivmWait(0));
        CHECK(ivmUnmap(v));
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(argc > 3, "%s", "usage: info_nodes IVM_INFO ARGS[;ARGS...]");
    CHECK(ivmMalloc("infovec", &v, OBJ_SIZE));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmWait(kid));
    CHECK(ivmGetMyGroupId(&gid));
    runs = strdup(argv[3]);
    for (run = strtok_r(runs, ";", &save); run != NULL; run = strtok_r(NULL, ";", &save)) {
        printf("INFO-BEGIN %s\n", run);
        fflush(stdout);
        j = strstr(run, "%J");
        if (j != NULL) {
            snprintf(cmd, sizeof(cmd), "%s %.*s%d%s", argv[2], (int)(j - run), run, gid, j + 2);
        } else {
            snprintf(cmd, sizeof(cmd), "%s %s", argv[2], run);
        }
        printf("INFO-STATUS %d\n", system(cmd));
        printf("INFO-END\n");
        fflush(stdout);
    }
    free(runs);
    CHECK(ivmSignal());
    CHECK(ivmWait(kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmExit());
    return pe_ok();
}

/* Flow control: a big object crosses the link three ways (node1's map fills
 * its mirror from node0, a Put from node1 while node0's daemon is stopped for
 * half a second, so that the link is full, a Get from node0) while neither
 * daemon may hold more than a few MiB of it queued: each daemon's VmHWM
 * (its peak resident memory) rises at most BIG_HWM_MIB above its resident
 * memory before the transfers. Before flow control a daemon queued a whole
 * transfer (1 GiB Put: +449 MiB). argv[2]: the object's MiB (512). */
#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer keeps freed blocks in a quarantine of up to 256 MiB
 * (quarantine_size_mb) before reusing them: a daemon that queued a whole
 * 512 MiB transfer still goes past this. */
#define BIG_HWM_MIB (64 + 256)
#else
#define BIG_HWM_MIB 64
#endif

/* Resident kB of process pid: VmRSS or VmHWM ("VmHWM:"). */
static long proc_kb(uint32_t pid, const char *field)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%u/status", pid);
    f = fopen(path, "r");
    ASSERT(f != NULL, "cannot read %s", path);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            kb = strtol(line + strlen(field), NULL, 10);
        }
    }
    fclose(f);
    ASSERT(kb >= 0, "no %s in %s", field, path);
    return kb;
}

static int sc_big_nodes(int argc, char **argv)
{
    size_t size = (size_t)(argc > 2 ? strtoul(argv[2], NULL, 10) : 512) << 20;
    ivm_msg_info_rep_t i0, i1;
    unsigned char *p;
    long rss0, rss1, hwm0, hwm1;
    ivm_device d1;
    ivm_pe kid;
    pid_t waker;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("big", &p, 0));
        expect_pat(p, 'B', 0, 4096, __LINE__, "node1's mirror, first page");
        expect_pat(p + size - 4096, 'B', size - 4096, 4096, __LINE__,
                   "node1's mirror, last page");
        fill(p, 'C', 0, size);
        /* node0's daemon stops reading for half a second while node1's sends
         * the Put: the link fills up, and node1's daemon must hold back. */
        node_info("node0", &i0);
        ASSERT(kill((pid_t)i0.pid, SIGSTOP) == 0, "SIGSTOP node0's daemon: %s",
               strerror(errno));
        waker = fork();
        if (waker == 0) {
            usleep(500000);
            kill((pid_t)i0.pid, SIGCONT);
            _exit(0);
        }
        if (waker < 0) {
            kill((pid_t)i0.pid, SIGCONT);
        }
        ASSERT(waker > 0, "fork: %s", strerror(errno));
        CHECK(ivmSyncPut(p, size));
        ASSERT(waitpid(waker, NULL, 0) == waker, "waitpid: %s", strerror(errno));
        memset(p, 0, size);
        CHECK(ivmSyncGet(p, size));
        expect_pat(p + size / 2, 'C', size / 2, 4096, __LINE__, "the Get of the Put");
        CHECK(ivmUnmap(p));
        CHECK(ivmExit());
        return 0;
    }
    node_info(NULL, &i0);
    node_info("node1", &i1);
    rss0 = proc_kb(i0.pid, "VmRSS:");
    rss1 = proc_kb(i1.pid, "VmRSS:");
    CHECK(ivmMalloc("big", &p, size));
    fill(p, 'B', 0, size);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmWait(kid));
    expect_pat(p, 'C', 0, 4096, __LINE__, "the master after node1's Put");
    expect_pat(p + size - 4096, 'C', size - 4096, 4096, __LINE__, "the master's last page");
    hwm0 = proc_kb(i0.pid, "VmHWM:");
    hwm1 = proc_kb(i1.pid, "VmHWM:");
    printf("HWM node0 +%ld MiB node1 +%ld MiB for %zu MiB three ways\n", (hwm0 - rss0) >> 10,
           (hwm1 - rss1) >> 10, size >> 20);
    ASSERT(hwm0 - rss0 <= BIG_HWM_MIB * 1024L && hwm1 - rss1 <= BIG_HWM_MIB * 1024L,
           "a daemon's peak memory rose by more than %d MiB moving %zu MiB: node0 +%ld MiB, "
           "node1 +%ld MiB (a transfer queued whole?)", BIG_HWM_MIB, size >> 20,
           (hwm0 - rss0) >> 10, (hwm1 - rss1) >> 10);
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* The data transport (IVM_TRANSPORT: tcp, or ucx with UCX_TLS=sm,self or
 * tcp,self): node1 Puts and Gets 64 MiB (argv[2] MiB) of a master on node0
 * GETS times while two PEs on node0 keep node0's daemon busy with requests
 * (a Get emulated over UCX's TCP must progress meanwhile). On ucx, not one
 * object byte may pass through a daemon's buffers (INFO buf_bytes), and the
 * bytes moved one-sided are counted; on tcp, none is one-sided. */
#define TRANSPORT_GETS 8
#define TRANSPORT_SMALL 8 /* then a small Put: over the link unless UCX has a network */
static void transport_node1(size_t size)
{
    unsigned char *p;
    int k;

    CHECK(ivmMap("tr", &p, 0));
    expect_pat(p, 'T', 0, size, __LINE__, "node1's mirror after the fill");
    fill(p, 'U', 0, size);
    CHECK(ivmSyncPut(p, size));
    for (k = 0; k < TRANSPORT_GETS; ++k) {
        memset(p, 0, size);
        CHECK(ivmSyncGet(p, size));
        expect_pat(p, 'U', 0, size, __LINE__, "a Get of the Put while node0 is busy");
    }
    fill(p, 'V', 0, TRANSPORT_SMALL);
    CHECK(ivmSyncPut(p, TRANSPORT_SMALL));
    CHECK(ivmUnmap(p));
}

/* node0: INFO requests until the root says stop (stop[0] = 1). */
static void transport_busy(void)
{
    volatile unsigned char *stop;
    ivm_msg_info_rep_t info;
    int n;

    CHECK(ivmMap("stop", &stop, 0));
    while (!stop[0]) {
        CHECK(ivmGetNumPEs(&n));
        node_info(NULL, &info);
    }
    CHECK(ivmUnmap((void *)stop));
}

/* UCX_TLS names only shared memory or TCP (as in CI): small puts take the
 * peer link, and both daemons count their bytes as buffered. */
static int ucx_small_inline(void)
{
    const char *tls = getenv("UCX_TLS");

    return tls != NULL && (strcmp(tls, "sm,self") == 0 || strcmp(tls, "tcp,self") == 0);
}

static void transport_check(const char *node, size_t size, int moved)
{
    const char *want = getenv("IVM_TRANSPORT") != NULL ? getenv("IVM_TRANSPORT") : "tcp";
    ivm_msg_info_rep_t info;

    node_info(node, &info);
    printf("TRANSPORT %s %s (%s) buffered %llu one-sided %llu\n", node, info.transport,
           info.ucx_tls, (unsigned long long)info.buf_bytes,
           (unsigned long long)info.rdma_bytes);
    ASSERT(strcmp(info.transport, want) == 0, "%s runs transport '%s', not '%s'", node,
           info.transport, want);
    if (strcmp(want, "ucx") == 0) {
        /* Only the small Put may pass through a buffer (the sender's and the
         * master's): it takes the peer link when UCX has shared memory or TCP
         * only (IVM_UCX_PUT_INLINE). */
        uint64_t small = ucx_small_inline() ? TRANSPORT_SMALL : 0;

        ASSERT(info.buf_bytes == small,
               "%s copied %llu object bytes through its buffers on UCX, not %llu", node,
               (unsigned long long)info.buf_bytes, (unsigned long long)small);
        ASSERT(!moved || info.rdma_bytes >= (TRANSPORT_GETS + 1) * (uint64_t)size,
               "%s moved only %llu bytes one-sided", node,
               (unsigned long long)info.rdma_bytes);
    } else {
        ASSERT(info.rdma_bytes == 0 && info.buf_bytes > 0, "%s: tcp moved %llu bytes one-sided",
               node, (unsigned long long)info.rdma_bytes);
    }
}

static int sc_transport_nodes(int argc, char **argv)
{
    size_t size = (size_t)(argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20;
    int id = pe_enter();
    unsigned char *p, *stop;
    ivm_pe busy[2], kid;
    ivm_device d0, d1;
    int node1 = getenv("IVM_NODE") != NULL && strcmp(getenv("IVM_NODE"), "node1") == 0;

    if (id != 0) {
        if (node1) {
            transport_node1(size);
        } else {
            transport_busy();
        }
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("tr", &p, size));
    CHECK(ivmMalloc("stop", &stop, 4096));
    fill(p, 'T', 0, size);
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU, &d0));
    CHECK(ivmCreatePEs(d0, 2, busy));
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmWait(kid));
    stop[0] = 1;
    CHECK(ivmWait(busy[0]));
    CHECK(ivmWait(busy[1]));
    expect_pat(p, 'V', 0, TRANSPORT_SMALL, __LINE__, "the master after node1's small Put");
    expect_pat(p + TRANSPORT_SMALL, 'U', TRANSPORT_SMALL, size - TRANSPORT_SMALL, __LINE__,
               "the master after node1's Put");
    transport_check("node0", size, 0);
    transport_check("node1", size, 1);
    CHECK(ivmDestroyDev(d0));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(stop));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* get_beside_put: two PEs of node1 use one peer link both ways at once. PE 1
 * Gets [0, GBP_GET) of the root's object (more than the link's 4 MiB window,
 * and not a whole number of chunks: the last one arrives short) over and over
 * and checks every byte; PE 2 Puts another range, [GBP_PUT_OFF, +GBP_PUT),
 * as often. The Get's DATA and the Put's ACKs, the Put's DATA and the Get's
 * READs interleave on the link; a receiver waiting for the rest of one
 * payload must still see the small messages between them. The root checks
 * the Put range in the master at the end. */
#define GBP_GET     ((size_t)6 * 1024 * 1024 + 4097)
#define GBP_PUT_OFF ((size_t)8 * 1024 * 1024)
#define GBP_PUT     ((size_t)5 * 1024 * 1024 + 333)
#define GBP_ROUNDS  6

static void get_beside_put_child(int id)
{
    unsigned char *p;
    int k;

    CHECK(ivmMap("gbp", &p, 0));
    for (k = 0; k < GBP_ROUNDS; ++k) {
        if (id == 1) {
            memset(p, 0, GBP_GET);
            CHECK(ivmSyncGet(p, GBP_GET));
            expect_pat(p, 'G', 0, GBP_GET, __LINE__, "a Get beside another PE's Put");
        } else {
            fill(p + GBP_PUT_OFF, k % 2 ? 'P' : 'Q', GBP_PUT_OFF, GBP_PUT);
            CHECK(ivmSyncPut(p + GBP_PUT_OFF, GBP_PUT));
        }
    }
    CHECK(ivmUnmap(p));
}

static int sc_get_beside_put(int argc, char **argv)
{
    size_t size = GBP_PUT_OFF + GBP_PUT;
    int id = pe_enter();
    unsigned char *p;
    ivm_pe kids[2];
    ivm_device d1;

    (void)argc;
    (void)argv;
    if (id != 0) {
        get_beside_put_child(id);
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("gbp", &p, size));
    fill(p, 'G', 0, size);
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 2, kids));
    CHECK(ivmWait(kids[0]));
    CHECK(ivmWait(kids[1]));
    expect_pat(p, 'G', 0, GBP_GET, __LINE__, "the master's Get range after the Gets");
    expect_pat(p + GBP_PUT_OFF, (GBP_ROUNDS - 1) % 2 ? 'P' : 'Q', GBP_PUT_OFF, GBP_PUT,
               __LINE__, "the master after node1's last Put");
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* get_master_lost: node1's daemon, which holds the master, is killed while
 * node0's root Gets the whole object again and again (64 MiB, many chunks
 * per Get). The child on node1 allocates "m1" (master on node1), fills it and
 * blocks in ivmWait(0); the root maps all of it (its mirror), forks a killer
 * that SIGKILLs node1's ivmd 20 ms later, and Gets until one fails: every Get
 * returns IVM_SUCCESS with the master's bytes or IVM_ERROR_DAEMON_LOST, none
 * takes 10 s, and one fails. Then ivmWait on the child fails and the job ends
 * normally. Prints "PIDS daemon" for the test. */
#define GML_SIZE (64u * 1024u * 1024u)

static int gml_child(void)
{
    unsigned char *p;

    CHECK(ivmMalloc("m1", &p, GML_SIZE));
    fill(p, 'M', 0, GML_SIZE);
    CHECK(ivmSignal());
    ivmWait(0); /* fails once its daemon is gone; nothing to report through it */
    _exit(0);
}

/* Get q until a Get fails; returns how many succeeded. */
static int gml_get_until_lost(unsigned char *q)
{
    ivmError_t rc = IVM_SUCCESS;
    double t0, dt;
    int k;

    for (k = 0; k < 2000; ++k) {
        memset(q, 0, GML_SIZE);
        t0 = pe_now();
        rc = ivmSyncGet(q, GML_SIZE);
        dt = pe_now() - t0;
        ASSERT(dt < 10.0, "Get %d took %.1f s (%s)", k, dt, pe_status_name(rc));
        if (rc != IVM_SUCCESS) {
            break;
        }
        expect_pat(q, 'M', 0, GML_SIZE, __LINE__, "a whole Get before the master's node died");
    }
    ASSERT(rc == IVM_ERROR_DAEMON_LOST,
           "a Get from the killed master's node returned %s (%d) [%s], expected "
           "IVM_ERROR_DAEMON_LOST", pe_status_name(rc), rc, ivmGetLastErrorMessage());
    return k;
}

static int sc_get_master_lost(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    unsigned char *q;
    ivm_device d1;
    ivm_pe kid;
    pid_t killer;
    int id = pe_enter(), ok;

    (void)argc;
    (void)argv;
    if (id != 0) {
        return gml_child();
    }
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmWait(kid));
    CHECK(ivmMap("m1", &q, 0));
    node_info("node1", &info);
    ASSERT(info.pid > 1 && (pid_t)info.pid != getpid(), "node1's daemon pid %u", info.pid);
    printf("PIDS %u\n", info.pid);
    fflush(stdout);
    killer = fork();
    ASSERT(killer >= 0, "fork: %s", strerror(errno));
    if (killer == 0) {
        usleep(20000);
        kill((pid_t)info.pid, SIGKILL);
        _exit(0);
    }
    pe_stage = "Gets while node1's daemon is killed";
    ok = gml_get_until_lost(q);
    printf("GETS %d before the loss\n", ok);
    /* A put posted to the lost master fails at the quiet, once. */
    pe_stage = "a posted put to the lost master";
    ivmError_t rc = ivmSyncPutNbi(q, GML_SIZE);
    ASSERT(rc == IVM_SUCCESS, "ivmSyncPutNbi to the lost master returned %s at the call",
           pe_status_name(rc));
    EXPECT(ivmQuiet(), IVM_ERROR_DAEMON_LOST);
    ASSERT(ivmGetLastErrorMessage()[0] != '\0', "ivmQuiet failed without a message");
    printf("QUIET %s\n", ivmGetLastErrorMessage());
    CHECK(ivmQuiet()); /* reported once */
    waitpid(killer, NULL, 0);
    EXPECT(ivmWait(kid), IVM_ERROR_PE_FAILED);
    CHECK(ivmUnmap(q));
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ many objects */

/* Issue 17: live objects of one job; 5000 in the sanitizer build, where
 * every object call costs several times more: the same paths (the tables
 * grow through the same sizes), a quarter of its CI time. */
#if defined(__SANITIZE_ADDRESS__)
#define MANY_MAX    5000
#else
#define MANY_MAX    20000
#endif
#define MANY_SAMPLE 97    /* every 97th object's bytes are checked */

/* Objects the run can hold: MANY_MAX, or fewer where the hard open-file limit
 * the daemons inherit leaves less (each object is one fd in its daemon). */
static int many_count(void)
{
    struct rlimit rl;
    long n = MANY_MAX;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
        (long)rl.rlim_max - 256 < n) {
        n = (long)rl.rlim_max - 256;
    }
    return (int)n;
}

static size_t many_size(int i)
{
    return (size_t)64 << (i % 4); /* 64 B .. 512 B */
}

static unsigned char many_byte(int i, size_t j)
{
    return (unsigned char)(i * 31 + (int)j * 7 + 1);
}

/* node1's PE: map every object (each a mirror here), check a sample, unmap. */
static int many_child(int n)
{
    char name[32];
    unsigned char **q = calloc((size_t)n, sizeof(*q));

    ASSERT(q != NULL, "out of memory");
    pe_stage = "node1 maps every object";
    for (int i = 0; i < n; ++i) {
        snprintf(name, sizeof(name), "many%05d", i);
        CHECK(ivmMap(name, &q[i], 0));
    }
    pe_stage = "node1 checks a sample";
    for (int i = 0; i < n; i += MANY_SAMPLE) {
        for (size_t j = 0; j < many_size(i); ++j) {
            ASSERT(q[i][j] == many_byte(i, j), "object %d byte %zu: %u, expected %u", i, j,
                   q[i][j], many_byte(i, j));
        }
    }
    pe_stage = "node1 unmaps";
    for (int i = 0; i < n; ++i) {
        CHECK(ivmUnmap(q[i]));
    }
    free(q);
    CHECK(ivmExit());
    return 0;
}

/* Issue 17: many live objects in one job across two nodes: ivmMalloc of each
 * on the root's node, ivmMap of each from a PE of node1, a sample of their
 * bytes checked there, then ivmFree of all; nothing may be left. */
static int sc_many_objects(int argc, char **argv)
{
    int n = many_count(), id = pe_enter();
    unsigned char **p;
    char name[32];
    ivm_device d1;
    ivm_pe kid;

    if (id != 0) {
        return many_child(n);
    }
    p = calloc((size_t)n, sizeof(*p));
    ASSERT(p != NULL, "out of memory");
    printf("objects %d\n", n);
    pe_stage = "root allocates";
    for (int i = 0; i < n; ++i) {
        snprintf(name, sizeof(name), "many%05d", i);
        CHECK(ivmMalloc(name, &p[i], many_size(i)));
        for (size_t j = 0; j < many_size(i); ++j) {
            p[i][j] = many_byte(i, j);
        }
    }
    pe_stage = "node1's PE";
    CHECK(ivmCreateDev("node1", IVM_CPU, &d1));
    CHECK(ivmCreatePEs(d1, 1, &kid));
    CHECK(ivmDestroyDev(d1));
    CHECK(ivmWait(kid));
    pe_stage = "root frees";
    for (int i = 0; i < n; ++i) {
        CHECK(ivmFree(p[i]));
    }
    EXPECT(ivmMap("many00000", &p[0], 0), IVM_ERROR_NOT_FOUND);
    free(p);
    CHECK(ivmExit());
    return pe_ok();
}

/* The pipelined scatter (issue 17) on five nodes (ivmrun --nodes 5). Object
 * "g" of GR_SIZE bytes (no multiple of a piece), master on node0; child 0 on
 * node1 and child 1 on node2 map all of it, child 2 on node3 and child 3 on
 * node4 map the same range X, child 4 on node4 maps the last GR_T bytes, so
 * node4 holds X and the tail (two ranges). PutGroup of the whole object: the
 * master sends every range once (node1 and node2 form one route, node3 and
 * node4 another, the tail goes straight): node0 sends GR_SIZE + X + tail
 * bytes, node1 and node2 together forward GR_SIZE, node3 and node4 X, each
 * node receives exactly what it holds, and every child sees the new bytes.
 * Then each child writes one pattern over its whole mapping (the same bytes
 * in every copy, so the gather's result is defined where copies overlap) and
 * GetGroup brings every copy's holding into the master. */
#define GR_SIZE (4u * 1024u * 1024u + 12345u)
#define GR_X_OFF (GR_SIZE / 2 + 5u)
#define GR_X_LEN (1536u * 1024u)
#define GR_T_LEN 1000u

static const struct {
    const char *node;
    size_t      off, len;
} gr_kids[5] = {
    {"node1", 0, GR_SIZE},
    {"node2", 0, GR_SIZE},
    {"node3", GR_X_OFF, GR_X_LEN},
    {"node4", GR_X_OFF, GR_X_LEN},
    {"node4", GR_SIZE - GR_T_LEN, GR_T_LEN},
};

static int gr_child(int id)
{
    int k = id - 1;
    unsigned char *q;
    ctl_t *c;

    ASSERT(k >= 0 && k < 5, "unexpected id %d", id);
    size_t off = gr_kids[k].off, len = gr_kids[k].len;
    CHECK(ivmMap("ctl", &c, 0));
    CHECK(ivmMapSubset("g", &q, off, len));
    expect_pat(q, 'A', off, len, __LINE__, "first map of the range");
    child_done(c, k, 1);
    pe_stage = "child waits for the root's PutGroup";
    CHECK(ivmWait(0));
    expect_pat(q, 'D', off, len, __LINE__, "the range after the root's ivmSyncPutGroup");
    child_done(c, k, 2);
    child_phase(c, 3);
    fill(q, 'H', off, len);
    child_done(c, k, 3);
    child_phase(c, 4);
    CHECK(ivmUnmap(q));
    CHECK(ivmUnmap(c));
    CHECK(ivmExit());
    return 0;
}

/* The bytes each node of the run sent (tx) or received (rx) since `base`. */
static void gr_counts(uint64_t *tx, uint64_t *rx, const uint64_t *base_tx,
                      const uint64_t *base_rx)
{
    for (int n = 0; n < 5; ++n) {
        char node[16];
        ivm_msg_info_rep_t info;
        snprintf(node, sizeof(node), "node%d", n);
        node_info(node, &info);
        tx[n] = info.tx_bytes - (base_tx != NULL ? base_tx[n] : 0);
        rx[n] = info.rx_bytes - (base_rx != NULL ? base_rx[n] : 0);
    }
}

/* UCX puts to every mirror from the master (no route): each mirror's
 * holding goes from node0, none is forwarded. */
static void gr_check_direct(const uint64_t *tx)
{
    ASSERT(tx[0] == 2u * GR_SIZE + 2u * GR_X_LEN + GR_T_LEN, "the master's node sent %llu "
           "bytes, expected every mirror's holding (%u): routes are TCP's only",
           (unsigned long long)tx[0], 2u * GR_SIZE + 2u * GR_X_LEN + GR_T_LEN);
    for (int n = 1; n < 5; ++n) {
        ASSERT(tx[n] == 0, "node%d forwarded %llu bytes over UCX", n, (unsigned long long)tx[n]);
    }
}

static void gr_check_scatter(const uint64_t *tx, const uint64_t *rx)
{
    const uint64_t want_rx[5] = {0, GR_SIZE, GR_SIZE, GR_X_LEN, GR_X_LEN + GR_T_LEN};
    ivm_msg_info_rep_t info;

    for (int n = 1; n < 5; ++n) {
        ASSERT(rx[n] == want_rx[n], "node%d received %llu bytes from the PutGroup, it holds "
               "%llu", n, (unsigned long long)rx[n], (unsigned long long)want_rx[n]);
    }
    node_info("node0", &info);
    if (strcmp(info.transport, "ucx") == 0) {
        gr_check_direct(tx);
        return;
    }
    ASSERT(tx[0] == GR_SIZE + GR_X_LEN + GR_T_LEN, "the master's node sent %llu bytes, expected "
           "each range once (%u): no pipelined route", (unsigned long long)tx[0],
           GR_SIZE + GR_X_LEN + GR_T_LEN);
    ASSERT(tx[1] + tx[2] == GR_SIZE, "node1 and node2 forwarded %llu + %llu bytes, expected %u",
           (unsigned long long)tx[1], (unsigned long long)tx[2], GR_SIZE);
    ASSERT(tx[3] + tx[4] == GR_X_LEN, "node3 and node4 forwarded %llu + %llu bytes, expected %u",
           (unsigned long long)tx[3], (unsigned long long)tx[4], GR_X_LEN);
}

static int sc_group_route(int argc, char **argv)
{
    uint64_t tx0[5], rx0[5], tx[5], rx[5];
    const char *last = NULL;
    ivm_pe kids[5];
    unsigned char *p;
    ivm_device d;
    ctl_t *c;
    int id = pe_enter();

    if (id != 0) {
        return gr_child(id);
    }
    CHECK(ivmMalloc("ctl", &c, sizeof(*c)));
    CHECK(ivmMalloc("g", &p, GR_SIZE));
    fill(p, 'A', 0, GR_SIZE);
    pe_stage = "phase 1: the maps on node1 .. node4";
    for (int k = 0; k < 5; ++k) {
        if (last == NULL || strcmp(last, gr_kids[k].node) != 0) {
            CHECK(ivmCreateDev(gr_kids[k].node, IVM_CPU, &d));
            last = gr_kids[k].node;
        }
        CHECK(ivmCreatePEs(d, 1, &kids[k]));
        CHECK(ivmWait(kids[k])); /* its map is done: the holders' order is fixed */
        ASSERT(kids[k] == k + 1, "child %d has id %d", k, kids[k]);
        if (k == 4 || strcmp(gr_kids[k + 1].node, last) != 0) {
            CHECK(ivmDestroyDev(d));
        }
    }

    pe_stage = "phase 2: PutGroup down the routes";
    gr_counts(tx0, rx0, NULL, NULL);
    fill(p, 'D', 0, GR_SIZE);
    CHECK(ivmSyncPutGroup(p, GR_SIZE));
    gr_counts(tx, rx, tx0, rx0);
    gr_check_scatter(tx, rx);
    atomic_store(&c->step, 2);
    for (int k = 0; k < 5; ++k) {
        CHECK(ivmSignal());
    }
    for (int k = 0; k < 5; ++k) {
        CHECK(ivmWait(kids[k]));
        ASSERT(atomic_load(&c->done[k]) == 2, "child %d phase %d", k, atomic_load(&c->done[k]));
    }

    pe_stage = "phase 3: the children write their copies";
    root_phase(c, kids, 5, 3);
    pe_stage = "phase 4: GetGroup gathers every copy";
    gr_counts(tx0, rx0, NULL, NULL);
    CHECK(ivmSyncGetGroup(p, GR_SIZE));
    gr_counts(tx, rx, tx0, rx0);
    ASSERT(rx[0] == 2u * GR_SIZE + 2u * GR_X_LEN + GR_T_LEN, "the master's node received %llu "
           "bytes for the GetGroup, expected each copy's holding", (unsigned long long)rx[0]);
    expect_pat(p, 'H', 0, GR_SIZE, __LINE__, "master after the GetGroup");
    root_phase(c, kids, 0, 4);
    for (int k = 0; k < 5; ++k) {
        CHECK(ivmWait(kids[k]));
    }
    CHECK(ivmFree(p));
    CHECK(ivmFree(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* A node in the middle of a route dies during a PutGroup (ivmrun --nodes 4):
 * object "big" (BIG_SIZE bytes, master on node0) is mapped whole on node1,
 * node2 and node3, in that order, so the route runs node0 -> node1 -> node2
 * -> node3. node2's daemon is stopped (SIGSTOP) before the call and a forked
 * process SIGKILLs it GL_KILL_MS after the root enters ivmSyncPutGroup, so
 * the call cannot be done before the kill however fast the transport (over
 * UCX's shared memory 64 MiB to three nodes takes about 25 ms): it fails
 * with IVM_ERROR_DAEMON_LOST within 10 s (node3, fed by node2, never ACKs:
 * the master must not wait for it), a second PutGroup fails or succeeds as fast, the PEs of node1 and
 * node3 still end normally and so does the job. The root prints "PIDS daemon". */
#define GL_KILL_MS 30

static int gl_child(int id)
{
    unsigned char *q;
    ivmError_t rc;

    CHECK(ivmMap("big", &q, 0));
    CHECK(ivmSignal());
    pe_stage = "child waits for the root's end";
    rc = ivmWait(0);
    if (id == 2) {
        _exit(0); /* its daemon is gone (and its output with it) */
    }
    CHECK(rc);
    CHECK(ivmUnmap(q));
    CHECK(ivmExit());
    return 0;
}

/* A process that kills pid after ms milliseconds. */
static pid_t gl_killer(pid_t pid, int ms)
{
    pid_t k = fork();

    ASSERT(k >= 0, "fork: %s", strerror(errno));
    if (k == 0) {
        pe_sleep_ms(ms);
        kill(pid, SIGKILL);
        _exit(0);
    }
    return k;
}

static int sc_group_node_lost(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    unsigned char *p;
    ivm_pe kids[3];
    ivm_device d;
    ivmError_t rc;
    double t0, dt;
    int id = pe_enter(), status;
    pid_t killer;

    if (id != 0) {
        return gl_child(id);
    }
    CHECK(ivmMalloc("big", &p, BIG_SIZE));
    fill(p, 'A', 0, BIG_SIZE);
    for (int k = 0; k < 3; ++k) {
        char node[16];
        snprintf(node, sizeof(node), "node%d", k + 1);
        CHECK(ivmCreateDev(node, IVM_CPU, &d));
        CHECK(ivmCreatePEs(d, 1, &kids[k]));
        CHECK(ivmDestroyDev(d));
        CHECK(ivmWait(kids[k])); /* mapped: the route's order is node1, node2, node3 */
    }
    node_info("node2", &info);
    ASSERT(info.pid > 1 && (pid_t)info.pid != getpid(), "node2's daemon pid %u", info.pid);
    printf("PIDS %u\n", info.pid);
    fflush(stdout);

    pe_stage = "a PutGroup while a node of its route is killed";
    ASSERT(kill((pid_t)info.pid, SIGSTOP) == 0, "SIGSTOP node2's daemon: %s", strerror(errno));
    killer = gl_killer((pid_t)info.pid, GL_KILL_MS);
    t0 = pe_now();
    rc = ivmSyncPutGroup(p, BIG_SIZE);
    dt = pe_now() - t0;
    ASSERT(waitpid(killer, &status, 0) == killer, "waitpid: %s", strerror(errno));
    ASSERT(rc == IVM_ERROR_DAEMON_LOST, "ivmSyncPutGroup returned %s (%d) [%s] when node2's "
           "daemon was killed %d ms into it, expected IVM_ERROR_DAEMON_LOST",
           pe_status_name(rc), rc, ivmGetLastErrorMessage(), GL_KILL_MS);
    ASSERT(dt < 10.0, "the failed ivmSyncPutGroup returned after %.1f s", dt);

    pe_stage = "a PutGroup after the loss";
    t0 = pe_now();
    rc = ivmSyncPutGroup(p, BIG_SIZE);
    ASSERT(rc == IVM_SUCCESS || rc == IVM_ERROR_DAEMON_LOST, "the next ivmSyncPutGroup "
           "returned %s (%d) [%s]", pe_status_name(rc), rc, ivmGetLastErrorMessage());
    ASSERT(pe_now() - t0 < 10.0, "the next ivmSyncPutGroup took %.1f s", pe_now() - t0);

    pe_stage = "the end of the job";
    EXPECT(ivmWait(kids[1]), IVM_ERROR_PE_FAILED);
    CHECK(ivmSignal());
    CHECK(ivmSignal());
    CHECK(ivmWait(kids[0]));
    CHECK(ivmWait(kids[2]));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"get_master_lost", sc_get_master_lost},
    {"get_beside_put", sc_get_beside_put},
    {"transport_nodes", sc_transport_nodes},
    {"info_nodes", sc_info_nodes},
    {"sync_nodes", sc_sync_nodes},
    {"reuse_nodes", sc_reuse_nodes},
    {"procs_nodes", sc_procs_nodes},
    {"poll_nodes", sc_poll_nodes},
    {"scatter_nodes", sc_scatter_nodes},
    {"self_dev_nodes", sc_self_dev_nodes},
    {"spawn_missing", sc_spawn_missing},
    {"daemon_lost", sc_daemon_lost},
    {"endpoint_nodes", sc_endpoint_nodes},
    {"put_nbi", sc_put_nbi},
    {"endpoint_full_nodes", sc_endpoint_full_nodes},
    {"kill_mid_transfer", sc_kill_mid_transfer},
    {"big_nodes", sc_big_nodes},
    {"many_objects", sc_many_objects},
    {"group_route", sc_group_route},
    {"group_node_lost", sc_group_node_lost},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
