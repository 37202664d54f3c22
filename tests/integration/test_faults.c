/*
 * Faults and real network separation:
 *  - three ivmd in three network namespaces joined by a bridge (link-local
 *    169.254.77.0/24), given the CLUSTER table over their Unix sockets, run
 *    a multi-node scenario of pe_nodes as root PE of node0;
 *  - a PE of node1 SIGKILLed in the middle of a 64 MiB transfer
 *    (ivmrun --nodes 2): the job, the object and both daemons stay usable.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proto.h"
#include "sock.h"

/* ------------------------------------------------ network namespaces */

#define NS_NODES 3

typedef struct nsnode {
    pid_t    pid;
    uint16_t port;
    char     ns[64];
    char     addr[32];
    char     sock[IVMT_PATH_MAX + 32];
    char     log[IVMT_PATH_MAX + 32];
} nsnode_t;

static char ns_tmpdir[IVMT_PATH_MAX];
static char ns_bridge[64];
static nsnode_t ns_nodes[NS_NODES];

/* Run a command quietly; returns its exit status (-1 if it did not exit). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[512], full[600];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
    st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void ns_teardown(void)
{
    for (int k = 0; k < NS_NODES; ++k) {
        if (ns_nodes[k].pid > 0) {
            kill(ns_nodes[k].pid, SIGKILL);
            waitpid(ns_nodes[k].pid, NULL, 0);
            ns_nodes[k].pid = 0;
        }
    }
    /* Deleting a namespace destroys the veth ends and the bridge in it. */
    for (int k = 0; k < NS_NODES; ++k) {
        if (ns_nodes[k].ns[0] != '\0') {
            sh("ip netns del %s", ns_nodes[k].ns);
            ns_nodes[k].ns[0] = '\0';
        }
    }
    if (ns_bridge[0] != '\0') {
        sh("ip netns del %s", ns_bridge);
        ns_bridge[0] = '\0';
    }
    if (ns_tmpdir[0] != '\0') {
        ivmt_remove_dir(ns_tmpdir);
        ns_tmpdir[0] = '\0';
    }
}

/* Bridge namespace + one namespace per node, veth into the bridge. Returns
 * NULL, or what failed (the test then skips). */
static const char *ns_setup(void)
{
    static char why[256];
    int pid = (int)getpid();

    snprintf(ns_bridge, sizeof(ns_bridge), "ivmt%dbr", pid);
    if (sh("ip netns add %s", ns_bridge) != 0) {
        ns_bridge[0] = '\0';
        return "'ip netns add' fails (no network namespace support or no privilege)";
    }
    if (sh("ip -n %s link add br0 type bridge", ns_bridge) != 0 ||
        sh("ip -n %s link set br0 up", ns_bridge) != 0) {
        return "cannot create a bridge in a network namespace (no bridge support)";
    }
    for (int k = 0; k < NS_NODES; ++k) {
        nsnode_t *n = &ns_nodes[k];
        snprintf(n->ns, sizeof(n->ns), "ivmt%d%c", pid, 'a' + k);
        snprintf(n->addr, sizeof(n->addr), "169.254.77.%d", k + 1);
        if (sh("ip netns add %s", n->ns) != 0) {
            snprintf(why, sizeof(why), "'ip netns add %s' fails", n->ns);
            n->ns[0] = '\0';
            return why;
        }
        if (sh("ip -n %s link add eth0 type veth peer name p%d netns %s", n->ns, k,
               ns_bridge) != 0) {
            return "cannot create a veth pair across namespaces (no veth support)";
        }
        if (sh("ip -n %s link set p%d master br0", ns_bridge, k) != 0 ||
            sh("ip -n %s link set p%d up", ns_bridge, k) != 0 ||
            sh("ip -n %s addr add %s/24 dev eth0", n->ns, n->addr) != 0 ||
            sh("ip -n %s link set eth0 up", n->ns) != 0 ||
            sh("ip -n %s link set lo up", n->ns) != 0) {
            snprintf(why, sizeof(why), "cannot configure the links of %s", n->ns);
            return why;
        }
    }
    return NULL;
}

/* Start ivmd nodeK inside its namespace; read "R PORT" from its ready fd. */
static void ns_node_start(int k)
{
    nsnode_t *n = &ns_nodes[k];
    char name[16], listen[48];

    snprintf(name, sizeof(name), "node%d", k);
    snprintf(n->sock, sizeof(n->sock), "%s/%s.sock", ns_tmpdir, name);
    snprintf(n->log, sizeof(n->log), "%s/%s.log", ns_tmpdir, name);
    snprintf(listen, sizeof(listen), "%s:0", n->addr);
    n->pid = ivmt_peer_daemon_start(n->ns, name, n->sock, n->log, listen, &n->port);
}

static int ns_send_cluster(int k)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + NS_NODES * sizeof(ivm_msg_cluster_node_t);
    ivm_msg_cluster_req_t *req = calloc(1, len);
    ivm_msg_cluster_node_t *ent = (ivm_msg_cluster_node_t *)(req + 1);
    int status;

    memset(req->secret, 'n', sizeof(req->secret));
    req->n = NS_NODES;
    for (int j = 0; j < NS_NODES; ++j) {
        snprintf(ent[j].node, sizeof(ent[j].node), "node%d", j);
        snprintf(ent[j].addr, sizeof(ent[j].addr), "%s", ns_nodes[j].addr);
        ent[j].port = ns_nodes[j].port;
    }
    status = ivmt_unix_call(ns_nodes[k].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, NULL, 0);
    free(req);
    return status;
}

static uint32_t ns_peers_up(int k)
{
    ivm_msg_info_rep_t info;
    const char *why = "";

    cr_assert_eq(ivmt_info(ns_nodes[k].sock, &info, &why), 0, "node%d INFO: %s", k, why);
    return info.peers_up;
}

static char *ns_logs(void)
{
    size_t cap = 1 << 16, len = 0;
    char *all = calloc(1, cap);

    for (int k = 0; k < NS_NODES; ++k) {
        char buf[4096];
        int fd = open(ns_nodes[k].log, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : 0;
        if (fd >= 0) {
            close(fd);
        }
        buf[n > 0 ? n : 0] = '\0';
        len += (size_t)snprintf(all + len, cap - len, "--- node%d log:\n%s\n", k, buf);
        if (len >= cap) {
            break;
        }
    }
    return all;
}

TestSuite(netns, .fini = ns_teardown, .timeout = 60);

Test(netns, three_daemons_in_namespaces)
{
    const char *why;
    ivmt_result_t r;
    char *logs;

    if (geteuid() != 0) {
        cr_skip("not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN");
    }
    if (sh("ip -V") != 0) {
        cr_skip("the 'ip' command (iproute2) is missing");
    }
    why = ns_setup();
    if (why != NULL) {
        ns_teardown();
        cr_skip("%s", why);
    }
    ivmt_make_tmpdir(ns_tmpdir, sizeof(ns_tmpdir));
    for (int k = 0; k < NS_NODES; ++k) {
        ns_node_start(k);
    }
    for (int k = 0; k < NS_NODES; ++k) {
        cr_assert_eq(ns_send_cluster(k), IVM_SUCCESS, "CLUSTER refused by node%d", k);
    }
    for (int k = 0; k < NS_NODES; ++k) {
        double end = ivmt_now() + 10;
        while (ns_peers_up(k) != NS_NODES - 1 && ivmt_now() < end) {
            ivmt_sleep_ms(20);
        }
        logs = ns_logs();
        cr_assert_eq(ns_peers_up(k), NS_NODES - 1, "node%d does not see both peers\n%s", k,
                     logs);
        free(logs);
    }

    /* The scenarios as root PE of node0 (children on node1, across veths). */
    static const char *const scenarios[] = {"sync_nodes", "procs_nodes"};
    for (size_t s = 0; s < sizeof(scenarios) / sizeof(scenarios[0]); ++s) {
        char sockenv[IVMT_PATH_MAX + 48];
        const char *argv[] = {IVMT_PE_NODES, scenarios[s], NULL};
        const char *env[] = {sockenv, "IVM_AUTOSTART=0", NULL};
        char *desc;

        snprintf(sockenv, sizeof(sockenv), "IVM_SOCKET=%s", ns_nodes[0].sock);
        ivmt_run(argv, env, 30, &r);
        desc = ivmt_describe(NULL, &r);
        logs = ns_logs();
        cr_assert(!r.timed_out && r.exited && r.code == 0, "%s: %s\n%s", scenarios[s], desc,
                  logs);
        {
            char ok[64];
            snprintf(ok, sizeof(ok), "OK %s", scenarios[s]);
            cr_assert(strstr(r.out, ok) != NULL && strstr(r.out, "FAIL ") == NULL, "%s\n%s",
                      desc, logs);
        }
        free(desc);
        free(logs);
        ivmt_result_free(&r);
    }

    /* Every daemon still sees its peers, then each exits 0 on SIGTERM. */
    for (int k = 0; k < NS_NODES; ++k) {
        cr_assert_eq(ns_peers_up(k), NS_NODES - 1, "node%d lost a peer", k);
    }
    for (int k = 0; k < NS_NODES; ++k) {
        int status;
        kill(ns_nodes[k].pid, SIGTERM);
        cr_assert_eq(waitpid(ns_nodes[k].pid, &status, 0), ns_nodes[k].pid);
        ns_nodes[k].pid = 0;
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node%d exit status %d", k,
                  status);
        cr_expect_neq(access(ns_nodes[k].sock, F_OK), 0, "node%d left its socket", k);
    }
}

/* ------------------------------------------------ a PE killed mid-transfer */

TestSuite(faults, .timeout = 90);

Test(faults, pe_killed_mid_transfer)
{
    const char *args[] = {"--nodes", "2", "--timeout", "60", IVMT_PE_NODES,
                          "kill_mid_transfer", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;
    pid_t pids[2];
    char *desc;

    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    ivmt_launch_finish_clean(&c, 75, &r);
    desc = ivmt_describe(NULL, &r);
    cr_assert(!r.timed_out && r.exited && r.code == 0, "%s", desc);
    free(desc);
    ivmt_expect_pe_ok(NULL, &r, "kill_mid_transfer");
    cr_assert_eq(ivmt_parse_pids(r.out, "PIDS", pids, 2), 2, "%s", r.out);
    cr_assert_eq(ivmt_wait_pids_gone(pids, 2, ivmt_leftover_grace_s()), 0,
                 "a PE of node1 outlived the job");
    ivmt_result_free(&r);
}
