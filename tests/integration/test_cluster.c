/*
 * The daemon cluster layer: real ivmd processes with --listen on loopback,
 * given the CLUSTER table over their Unix sockets; checked through INFO
 * (peers, peers_up) and by talking TCP to them directly.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proto.h"
#include "sock.h"

#define NODES_MAX 3

typedef struct node {
    pid_t    pid;
    uint16_t port;
    char     sock[IVMT_PATH_MAX + 32];
    char     log[IVMT_PATH_MAX + 32];
} node_t;

static char tmpdir[IVMT_PATH_MAX];
static node_t nodes[NODES_MAX];
static int nnodes;

static void cluster_setup(int count)
{
    ivmt_make_tmpdir(tmpdir, sizeof(tmpdir));
    nnodes = count;
    for (int k = 0; k < count; ++k) {
        char name[16];
        snprintf(name, sizeof(name), "node%d", k);
        snprintf(nodes[k].sock, sizeof(nodes[k].sock), "%s/%s.sock", tmpdir, name);
        snprintf(nodes[k].log, sizeof(nodes[k].log), "%s/%s.log", tmpdir, name);
        nodes[k].pid = ivmt_peer_daemon_start(NULL, name, nodes[k].sock, nodes[k].log,
                                              "127.0.0.1:0", &nodes[k].port);
    }
}

static void cluster_teardown(void)
{
    for (int k = 0; k < nnodes; ++k) {
        if (nodes[k].pid > 0) {
            kill(nodes[k].pid, SIGKILL);
            waitpid(nodes[k].pid, NULL, 0);
            nodes[k].pid = 0;
        }
    }
    ivmt_remove_dir(tmpdir);
}

/* SIGTERM every node still running; each must exit 0 and remove its socket. */
static void cluster_stop_clean(void)
{
    for (int k = 0; k < nnodes; ++k) {
        int status;
        if (nodes[k].pid <= 0) {
            continue;
        }
        kill(nodes[k].pid, SIGTERM);
        cr_assert_eq(waitpid(nodes[k].pid, &status, 0), nodes[k].pid);
        nodes[k].pid = 0;
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node%d exit status %d", k,
                  status);
        cr_expect_neq(access(nodes[k].sock, F_OK), 0, "node%d left its socket", k);
    }
}

/* CLUSTER for node k: every node of the cluster, with `secret`. */
static int send_cluster(int k, int count, const char *secret_fill, char *detail,
                        size_t detail_len)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + (size_t)count * sizeof(ivm_msg_cluster_node_t);
    ivm_msg_cluster_req_t *req = calloc(1, len);
    ivm_msg_cluster_node_t *ent = (ivm_msg_cluster_node_t *)(req + 1);
    int status;

    memset(req->secret, secret_fill[0], sizeof(req->secret));
    req->n = (uint32_t)count;
    for (int j = 0; j < count; ++j) {
        snprintf(ent[j].node, sizeof(ent[j].node), "node%d", j);
        snprintf(ent[j].addr, sizeof(ent[j].addr), "127.0.0.1");
        ent[j].port = j < nnodes ? nodes[j].port : 1;
    }
    status = ivmt_unix_call(nodes[k].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, detail,
                       detail_len);
    free(req);
    return status;
}

static ivm_msg_info_rep_t node_info(int k)
{
    ivm_msg_info_rep_t info;
    const char *why = "";

    cr_assert_eq(ivmt_info(nodes[k].sock, &info, &why), 0, "node%d INFO: %s", k, why);
    return info;
}

/* Wait until node k sees `up` authenticated peers; returns the last count. */
static uint32_t wait_peers_up(int k, uint32_t up, double timeout_s)
{
    double end = ivmt_now() + timeout_s;
    ivm_msg_info_rep_t info;

    do {
        info = node_info(k);
        if (info.peers_up == up) {
            break;
        }
        ivmt_sleep_ms(20);
    } while (ivmt_now() < end);
    return info.peers_up;
}

static int log_contains(int k, const char *text)
{
    char buf[65536];
    ssize_t n;
    int fd = open(nodes[k].log, O_RDONLY);

    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, text) != NULL;
}

TestSuite(cluster, .fini = cluster_teardown, .timeout = 60);

Test(cluster, three_daemons_authenticate_each_other)
{
    char detail[256];

    cluster_setup(3);
    for (int k = 0; k < 3; ++k) {
        cr_assert_eq(send_cluster(k, 3, "s", detail, sizeof(detail)), IVM_SUCCESS,
                     "node%d: %s", k, detail);
    }
    for (int k = 0; k < 3; ++k) {
        cr_assert_eq(wait_peers_up(k, 2, 10), 2, "node%d does not see both peers", k);
        cr_assert_eq(node_info(k).peers, 2);
    }
    /* The same table again is accepted; another one is refused. */
    cr_assert_eq(send_cluster(1, 3, "s", detail, sizeof(detail)), IVM_SUCCESS);
    cr_assert_eq(send_cluster(1, 3, "t", detail, sizeof(detail)), IVM_ERROR_EXISTS);
    cluster_stop_clean();
}

Test(cluster, peer_with_wrong_secret_is_refused_and_logged)
{
    cluster_setup(2);
    cr_assert_eq(send_cluster(0, 2, "s", NULL, 0), IVM_SUCCESS);
    cr_assert_eq(send_cluster(1, 2, "x", NULL, 0), IVM_SUCCESS);
    ivmt_sleep_ms(1500); /* several dial attempts */
    cr_assert_eq(node_info(0).peers_up, 0);
    cr_assert_eq(node_info(1).peers_up, 0);
    cr_assert(log_contains(0, "failed authentication") || log_contains(1, "failed authentication"),
              "no daemon logged the refused peer");
    cluster_stop_clean();
}

Test(cluster, killed_peer_is_detected_as_lost)
{
    cluster_setup(2);
    cr_assert_eq(send_cluster(0, 2, "s", NULL, 0), IVM_SUCCESS);
    cr_assert_eq(send_cluster(1, 2, "s", NULL, 0), IVM_SUCCESS);
    cr_assert_eq(wait_peers_up(0, 1, 10), 1);
    kill(nodes[1].pid, SIGKILL);
    waitpid(nodes[1].pid, NULL, 0);
    nodes[1].pid = 0;
    cr_assert_eq(wait_peers_up(0, 0, 10), 0, "node0 still counts the dead peer");
    cr_assert(log_contains(0, "peer node1 lost") || log_contains(0, "silent"));
    cluster_stop_clean();
}

Test(cluster, cluster_table_is_validated)
{
    char detail[256];
    ivm_msg_cluster_req_t *req;
    ivm_msg_cluster_node_t *ent;
    size_t len = sizeof(*req) + sizeof(*ent);

    cluster_setup(1);
    /* A table that does not name this node. */
    req = calloc(1, len);
    ent = (ivm_msg_cluster_node_t *)(req + 1);
    req->n = 1;
    snprintf(ent->node, sizeof(ent->node), "elsewhere");
    snprintf(ent->addr, sizeof(ent->addr), "127.0.0.1");
    ent->port = nodes[0].port;
    cr_assert_eq(ivmt_unix_call(nodes[0].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, detail,
                           sizeof(detail)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(detail, "does not name this node") != NULL, "detail: %s", detail);
    /* A non-numeric address. */
    snprintf(ent->node, sizeof(ent->node), "node0");
    snprintf(ent->addr, sizeof(ent->addr), "localhost");
    cr_assert_eq(ivmt_unix_call(nodes[0].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, NULL, 0),
                 IVM_ERROR_INVALID_VALUE);
    /* The wrong port for this node. */
    snprintf(ent->addr, sizeof(ent->addr), "127.0.0.1");
    ent->port = (uint16_t)(nodes[0].port + 1);
    cr_assert_eq(ivmt_unix_call(nodes[0].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, NULL, 0),
                 IVM_ERROR_INVALID_VALUE);
    free(req);
    cr_assert_eq(node_info(0).peers, 0);
    cluster_stop_clean();
}

/* Connect to node0's TCP port, send bytes, expect the daemon to close. */
static void expect_dropped(const void *bytes, size_t len, const char *what)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(nodes[0].port)};
    char buf[512];
    struct pollfd pfd;
    int fd = socket(AF_INET, SOCK_STREAM, 0), closed = 0;
    double end = ivmt_now() + 8;

    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    if (len > 0) {
        cr_assert_eq(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len, "%s", what);
    }
    while (!closed && ivmt_now() < end) {
        pfd = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) == 1) {
            ssize_t n = recv(fd, buf, sizeof(buf), 0);
            closed = (n == 0 || (n < 0 && errno == ECONNRESET));
        }
    }
    close(fd);
    cr_assert(closed, "the daemon kept a peer connection open after %s", what);
    (void)node_info(0); /* and it still answers */
}

Test(cluster, malformed_peer_messages_drop_the_connection_only)
{
    struct {
        ivm_msg_hdr_t h;
        char body[200];
    } m;
    static char big[8192];

    cluster_setup(1);
    cr_assert_eq(send_cluster(0, 2, "s", NULL, 0), IVM_SUCCESS); /* node1: port 1, dead */

    memset(&m, 0, sizeof(m));
    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, sizeof(ivm_peer_hello_t), 0);
    m.h.magic = 0xdeadbeef;
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_peer_hello_t), "a wrong magic");

    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, sizeof(ivm_peer_hello_t), 0);
    m.h.version = 9;
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_peer_hello_t), "a wrong version");

    ivm_proto_hdr_init(&m.h, IVM_MSG_INFO, sizeof(ivm_msg_empty_t), 0);
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_msg_empty_t), "a PE message type");

    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, 17, 0);
    expect_dropped(&m, sizeof(m.h) + 17, "a wrong length");

    ivm_proto_hdr_init(&m.h, IVM_PEER_PING, sizeof(ivm_peer_ping_t), 0);
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_peer_ping_t), "a PING before AUTH");

    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, sizeof(ivm_peer_hello_t), 0);
    snprintf(m.body, sizeof(m.body), "intruder");
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_peer_hello_t), "a HELLO from an unknown node");

    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, sizeof(ivm_peer_hello_t), 0);
    memset(m.body, 'n', sizeof(m.body)); /* unterminated name */
    expect_dropped(&m, sizeof(m.h) + sizeof(ivm_peer_hello_t), "an unterminated name");

    for (size_t i = 0; i < sizeof(big); ++i) {
        big[i] = (char)(i * 7919u >> 3);
    }
    expect_dropped(big, sizeof(big), "random bytes");

    ivm_proto_hdr_init(&m.h, IVM_PEER_HELLO, sizeof(ivm_peer_hello_t), 0);
    expect_dropped(&m, 10, "half a header then nothing (authentication timeout)");

    cr_assert(log_contains(0, "malformed") || log_contains(0, "refused"));
    cluster_stop_clean();
}
