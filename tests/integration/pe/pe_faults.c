/* PE program for the fault tests: jobs that hold PEs on every node while a
 * launcher is killed (test_launcher.c, ivmrun/test-hosts.sh,
 * ivmrun/test-slurm.sh), and jobs whose link between node0 and node1 runs
 * through ivm-faultproxy while it delays, stalls, drops or corrupts bytes
 * (test_netfault.c). The root runs on node0; its child PEs on node1. The
 * network scenarios take the proxy's control socket as argv[2] and send it
 * their fault themselves, at the moment the scenario needs it. */
#include "pe_util.h"

#include <sys/socket.h>
#include <sys/un.h>

#define MAX_NODES 16
#define SMALL     (64u * 1024u)

static unsigned char pat(char tag, size_t i)
{
    return (unsigned char)(tag * 31 + (int)(i % 251));
}

static void fill(unsigned char *p, char tag, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = pat(tag, i);
    }
}

/* The first byte of p[0..n) that is not pattern tag, or n. */
static size_t first_bad(const unsigned char *p, char tag, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pat(tag, i)) {
            return i;
        }
    }
    return n;
}

/* One command to ivm-faultproxy's control socket; the reply must be "OK". */
static void proxy_cmd(const char *ctl, const char *cmd)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    char reply[256];
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ASSERT(fd >= 0, "socket: %s", strerror(errno));
    snprintf(un.sun_path, sizeof(un.sun_path), "%s", ctl);
    ASSERT(connect(fd, (struct sockaddr *)&un, sizeof(un)) == 0, "connect %s: %s", ctl,
           strerror(errno));
    ASSERT(write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd) && write(fd, "\n", 1) == 1,
           "write to %s: %s", ctl, strerror(errno));
    while (got < sizeof(reply) - 1 && memchr(reply, '\n', got) == NULL) {
        n = read(fd, reply + got, sizeof(reply) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    reply[got] = '\0';
    ASSERT(strncmp(reply, "OK", 2) == 0, "proxy command '%s' answered '%s'", cmd, reply);
}

/* One PE on `node`. */
static ivm_pe spawn_on(const char *node)
{
    ivm_device dev;
    ivm_pe pe;

    CHECK(ivmCreateDev(node, IVM_CPU, &dev));
    CHECK(ivmCreatePEs(dev, 1, &pe));
    CHECK(ivmDestroyDev(dev));
    return pe;
}

/* ---------------------------------------------------------- hold_nodes */

/* A job that holds a PE on every node of the cluster (node0, node1, ... as
 * far as ivmCreateDev knows them) and never ends on its own: each child puts
 * its pid, signals and idles; the root prints "PIDS <root> <child>..." once
 * all have signalled, then blocks in ivmWait on its first child. Whatever
 * kills the run must kill all of them. */
static int sc_hold_nodes(int argc, char **argv)
{
    ivm_pe kids[MAX_NODES];
    atomic_int *pids;
    int id = pe_enter(), n = 0;
    ivm_device dev;

    (void)argc;
    (void)argv;
    if (id != 0) {
        CHECK(ivmMap("pids", &pids, 0));
        atomic_store(&pids[id], (int)getpid());
        CHECK(ivmSyncPut(&pids[id], sizeof(int)));
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    CHECK(ivmMalloc("pids", &pids, (MAX_NODES + 1) * sizeof(int)));
    for (n = 0; n < MAX_NODES; ++n) {
        char node[16];
        snprintf(node, sizeof(node), "node%d", n);
        if (ivmCreateDev(node, IVM_CPU, &dev) != IVM_SUCCESS) {
            break;
        }
        CHECK(ivmDestroyDev(dev));
        kids[n] = spawn_on(node);
    }
    ASSERT(n >= 1, "no node found");
    pe_stage = "every child's signal";
    for (int k = 0; k < n; ++k) {
        CHECK(ivmWait(kids[k]));
    }
    printf("PIDS %d", (int)getpid());
    for (int k = 0; k < n; ++k) {
        printf(" %d", atomic_load(&pids[kids[k]]));
    }
    printf("\n");
    fflush(stdout);
    pe_stage = "holding the job until it is killed";
    ivmWait(kids[0]);
    pe_idle_forever();
}

/* ----------------------------------------------- the network scenarios */

/* The child of every network scenario (on node1): allocates "obj" of size
 * bytes with pattern 'K', signals, then waits for the root's signal; then
 * (net_xfer) checks that the master holds the root's pattern 'R' in its second
 * half and signals again. In the fault scenarios it blocks until its job ends
 * (its node loses the root's) and is killed. */
static void net_child(size_t size, int check_put)
{
    unsigned char *p;
    size_t bad;

    CHECK(ivmMalloc("obj", &p, size));
    fill(p, 'K', size);
    CHECK(ivmSignal());
    pe_stage = "child waits for the root";
    if (!check_put) {
        ivmWait(0);
        pe_idle_forever();
    }
    CHECK(ivmWait(0));
    /* the master (this PE's memory) holds what the root's Put delivered */
    bad = first_bad(p + size / 2, 'R', size / 2);
    ASSERT(bad == size / 2, "byte %zu of the object on node1 is 0x%02x after the root's "
           "ivmSyncPut, expected 0x%02x", size / 2 + bad, p[size / 2 + bad], pat('R', bad));
    CHECK(ivmSignal());
    CHECK(ivmExit());
    exit(0);
}

static size_t arg_size(int argc, char **argv, int k, size_t def)
{
    return argc > k ? (size_t)strtoull(argv[k], NULL, 0) : def;
}

/* net_xfer SIZE: data both ways across the link (delay test): the root maps
 * node1's object (bytes come down), checks them, writes 'R' into the second
 * half and puts it (bytes go up); the child checks the master. */
static int sc_net_xfer(int argc, char **argv)
{
    size_t size = arg_size(argc, argv, 2, 1u << 20), bad;
    unsigned char *q;
    double t0;
    ivm_pe kid;
    int id = pe_enter();

    if (id != 0) {
        net_child(size, 1);
    }
    t0  = pe_now();
    kid = spawn_on("node1");
    pe_stage = "the child allocates on node1";
    CHECK(ivmWait(kid));
    pe_stage = "the map of node1's object (through the proxy)";
    CHECK(ivmMap("obj", &q, 0));
    bad = first_bad(q, 'K', size);
    ASSERT(bad == size, "byte %zu of node1's object reads 0x%02x on node0, expected 0x%02x",
           bad, bad < size ? q[bad] : 0, bad < size ? pat('K', bad) : 0);
    fill(q + size / 2, 'R', size / 2);
    pe_stage = "the put back to node1 (through the proxy)";
    CHECK(ivmSyncPut(q + size / 2, size / 2));
    CHECK(ivmSignal());
    pe_stage = "the child checks the master";
    CHECK(ivmWait(kid));
    CHECK(ivmUnmap(q));
    printf("XFER %zu bytes each way in %.3f s\n", size, pe_now() - t0);
    CHECK(ivmExit());
    return pe_ok();
}

/* net_stall CTL: the link goes silent ("stall both") while the root waits
 * on its child: the peer must be declared lost after the heartbeat timeout
 * and the wait fail with IVM_ERROR_PE_FAILED; a sync of the object mastered
 * there fails with IVM_ERROR_DAEMON_LOST. Prints "LOST <seconds>". */
static int sc_net_stall(int argc, char **argv)
{
    unsigned char *q;
    double t0;
    ivm_pe kid;
    int id = pe_enter();

    if (id != 0) {
        net_child(SMALL, 0);
    }
    ASSERT(argc > 2, "usage: net_stall CONTROL_SOCKET");
    kid = spawn_on("node1");
    CHECK(ivmWait(kid));
    CHECK(ivmMap("obj", &q, 0));
    ASSERT(first_bad(q, 'K', SMALL) == SMALL, "node1's object has wrong bytes");
    proxy_cmd(argv[2], "stall both");
    t0 = pe_now();
    pe_stage = "ivmWait on a PE behind a silent link";
    EXPECT(ivmWait(kid), IVM_ERROR_PE_FAILED);
    printf("LOST %.3f\n", pe_now() - t0);
    pe_stage = "a sync of an object mastered behind the silent link";
    EXPECT(ivmSyncGet(q, 4096), IVM_ERROR_DAEMON_LOST);
    CHECK(ivmExit());
    return pe_ok();
}

/* net_drop CTL: the proxy closes the connection ("drop") while the root
 * waits on its child: the peer is lost at once (IVM_ERROR_PE_FAILED,
 * IVM_ERROR_DAEMON_LOST as above); then the link comes back (the lower node
 * redials) and a new PE on node1 runs. Prints "LOST <s>" and "BACK <s>". */
static int sc_net_drop(int argc, char **argv)
{
    unsigned char *q;
    ivm_device dev;
    ivmError_t rc;
    double t0;
    ivm_pe kid;
    int id = pe_enter();

    if (id == 1) {
        net_child(SMALL, 0);
    }
    if (id != 0) {
        CHECK(ivmSignal()); /* the PE started once the link was back */
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(argc > 2, "usage: net_drop CONTROL_SOCKET");
    kid = spawn_on("node1");
    CHECK(ivmWait(kid));
    CHECK(ivmMap("obj", &q, 0));
    proxy_cmd(argv[2], "drop");
    t0 = pe_now();
    pe_stage = "ivmWait on a PE behind a dropped link";
    EXPECT(ivmWait(kid), IVM_ERROR_PE_FAILED);
    printf("LOST %.3f\n", pe_now() - t0);
    EXPECT(ivmSyncGet(q, 4096), IVM_ERROR_DAEMON_LOST);
    CHECK(ivmUnmap(q));
    pe_stage = "node1 reachable again";
    for (;;) {
        rc = ivmCreateDev("node1", IVM_CPU, &dev);
        if (rc == IVM_SUCCESS) {
            break;
        }
        ASSERT(rc == IVM_ERROR_DAEMON_LOST, "ivmCreateDev(node1) while the link is down: "
               "%s [%s]", pe_status_name(rc), ivmGetLastErrorMessage());
        ASSERT(pe_now() - t0 < 15.0, "node1 still unreachable %.1f s after the drop",
               pe_now() - t0);
        pe_sleep_ms(20);
    }
    CHECK(ivmDestroyDev(dev));
    printf("BACK %.3f\n", pe_now() - t0);
    kid = spawn_on("node1");
    pe_stage = "a PE on node1 after the link came back";
    CHECK(ivmWait(kid));
    CHECK(ivmExit());
    return pe_ok();
}

/* net_corrupt CTL SIZE: one byte of node1's object is inverted on its way
 * down ("corrupt down at 4096") while the root maps it. The receiving
 * daemon must notice (a per-message MAC) and drop the link: the map fails
 * with IVM_ERROR_DAEMON_LOST. Whatever happens, never wrong data: a map that
 * succeeds must hold every byte right. Prints "CORRUPT <status of the map>". */
static int sc_net_corrupt(int argc, char **argv)
{
    size_t size = arg_size(argc, argv, 3, 1u << 20), bad;
    unsigned char *q = NULL;
    ivmError_t rc;
    ivm_pe kid;
    int id = pe_enter();

    if (id != 0) {
        net_child(size, 0);
    }
    ASSERT(argc > 2, "usage: net_corrupt CONTROL_SOCKET [SIZE]");
    kid = spawn_on("node1");
    CHECK(ivmWait(kid));
    proxy_cmd(argv[2], "corrupt down at 4096");
    pe_stage = "the map of node1's object while a byte is corrupted";
    rc = ivmMap("obj", &q, 0);
    printf("CORRUPT %s\n", pe_status_name(rc));
    if (rc == IVM_SUCCESS) {
        bad = first_bad(q, 'K', size);
        ASSERT(bad == size, "wrong data: byte %zu of node1's object reads 0x%02x on node0, "
               "expected 0x%02x (the corrupted byte went unnoticed)", bad, q[bad],
               pat('K', bad));
        CHECK(ivmUnmap(q));
    } else {
        ASSERT(rc == IVM_ERROR_DAEMON_LOST, "the map returned %s [%s]", pe_status_name(rc),
               ivmGetLastErrorMessage());
    }
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"hold_nodes", sc_hold_nodes},
    {"net_xfer", sc_net_xfer},
    {"net_stall", sc_net_stall},
    {"net_drop", sc_net_drop},
    {"net_corrupt", sc_net_corrupt},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
