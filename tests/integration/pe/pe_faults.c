/* PE program for the fault tests: jobs that hold PEs on every node while a
 * launcher is killed (test_launcher.c, ivmrun/test-hosts.sh,
 * ivmrun/test-slurm.sh). The root runs on node0. */
#include "pe_util.h"

#define MAX_NODES 16

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

static const pe_scenario_entry_t scenarios[] = {
    {"hold_nodes", sc_hold_nodes},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
