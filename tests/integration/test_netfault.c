/*
 * Network faults on the link between two daemons, injected by ivm-faultproxy
 * (a user-space TCP proxy: this kernel has no netem). node0 and node1 listen
 * on loopback; node0, which dials (its name sorts lower), gets a CLUSTER table
 * that gives node1 the proxy's port, node1 the real one. A root PE of
 * pe_faults on node0 works with a PE on node1 and sends the proxy its fault:
 *  - delay:   every byte held 50 ms each way: the job completes, data right;
 *  - stall:   no byte passes: the peer is lost after the heartbeat timeout
 *             (5 s of silence, checked every second), the wait on the PE of
 *             node1 fails with IVM_ERROR_PE_FAILED, syncs of its object with
 *             IVM_ERROR_DAEMON_LOST, and node1 ends its part of the job;
 *  - drop:    the connection closed: the same failures at once, then node0
 *             redials, the link is back and a new PE runs on node1;
 *  - corrupt: one byte of a DATA message inverted: the receiving daemon must
 *             notice (per-message MAC) and drop the link; never wrong data.
 * At the end both daemons exit 0 on SIGTERM and no process of the run is left.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proto.h"

#define NF_NODES 2

typedef struct nf_node {
    pid_t    pid;
    uint16_t port;
    char     sock[IVMT_PATH_MAX + 32];
    char     log[IVMT_PATH_MAX + 32];
    char     env[IVMT_PATH_MAX + 48]; /* IVM_SOCKET=<sock> */
} nf_node_t;

static char nf_dir[IVMT_PATH_MAX];
static nf_node_t nf_nodes[NF_NODES];
static pid_t nf_proxy;
static uint16_t nf_proxy_port;
static char nf_ctl[IVMT_PATH_MAX + 32];
static char nf_proxy_log[IVMT_PATH_MAX + 32];

static char *nf_file(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    FILE *in = fopen(path, "r");
    char buf[4096];
    size_t n;

    cr_assert_not_null(out);
    while (in != NULL && (n = fread(buf, 1, sizeof(buf), in)) > 0) {
        fwrite(buf, 1, n, out);
    }
    if (in != NULL) {
        fclose(in);
    }
    fclose(out);
    return text;
}

/* Every log of the run, for assertion messages (malloc'd). */
static char *nf_logs(void)
{
    char *text = NULL, *part;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    for (int k = 0; k < NF_NODES; ++k) {
        part = nf_file(nf_nodes[k].log);
        fprintf(out, "--- node%d log:\n%s", k, part);
        free(part);
    }
    part = nf_file(nf_proxy_log);
    fprintf(out, "--- proxy log:\n%s", part);
    free(part);
    fclose(out);
    return text;
}

/* One command to the proxy's control socket; returns its answer (malloc'd). */
static char *nf_proxy_cmd(const char *cmd)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    char reply[256];
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert_geq(fd, 0);
    cr_assert_lt(strlen(nf_ctl), sizeof(un.sun_path), "control socket path too long");
    memcpy(un.sun_path, nf_ctl, strlen(nf_ctl) + 1);
    cr_assert_eq(connect(fd, (struct sockaddr *)&un, sizeof(un)), 0, "connect %s: %s", nf_ctl,
                 strerror(errno));
    cr_assert_eq(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    cr_assert_eq(write(fd, "\n", 1), 1);
    while (got < sizeof(reply) - 1 && memchr(reply, '\n', got) == NULL) {
        n = read(fd, reply + got, sizeof(reply) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    reply[got] = '\0';
    reply[strcspn(reply, "\n")] = '\0';
    return strdup(reply);
}

static void nf_proxy_start(void)
{
    char to[32], fdarg[16];
    int ready[2], logfd;

    snprintf(nf_ctl, sizeof(nf_ctl), "%s/proxy.sock", nf_dir);
    snprintf(nf_proxy_log, sizeof(nf_proxy_log), "%s/proxy.log", nf_dir);
    snprintf(to, sizeof(to), "127.0.0.1:%u", (unsigned)nf_nodes[1].port);
    cr_assert_eq(pipe(ready), 0);
    nf_proxy = fork();
    cr_assert_geq(nf_proxy, 0);
    if (nf_proxy == 0) {
        close(ready[0]);
        logfd = open(nf_proxy_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(logfd, 1);
        dup2(logfd, 2);
        snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
        execl(IVMT_FAULTPROXY, "ivm-faultproxy", "--accept", "127.0.0.1:0", "--to", to,
              "--control", nf_ctl, "--ready-fd", fdarg, "--log-level", "info", (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    nf_proxy_port = ivmt_ready_port(ready[0], "ivm-faultproxy", NULL, NULL);
}

/* CLUSTER to node k: node1 at the proxy's port in node0's table. */
static void nf_cluster_send(int k)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + NF_NODES * sizeof(ivm_msg_cluster_node_t);
    ivm_msg_cluster_req_t *req = calloc(1, len);
    ivm_msg_cluster_node_t *ent = (ivm_msg_cluster_node_t *)(req + 1);
    char detail[256];
    int status;

    memset(req->secret, 'f', sizeof(req->secret));
    req->n = NF_NODES;
    for (int j = 0; j < NF_NODES; ++j) {
        snprintf(ent[j].node, sizeof(ent[j].node), "node%d", j);
        snprintf(ent[j].addr, sizeof(ent[j].addr), "127.0.0.1");
        ent[j].port = (k == 0 && j == 1) ? nf_proxy_port : nf_nodes[j].port;
    }
    status = ivmt_unix_call(nf_nodes[k].sock, IVM_MSG_CLUSTER, req, (uint32_t)len, detail,
                            sizeof(detail));
    free(req);
    cr_assert_eq(status, IVM_SUCCESS, "node%d refused CLUSTER: %s", k, detail);
}

static ivm_msg_info_rep_t nf_info(int k)
{
    ivm_msg_info_rep_t info;
    const char *why = "";

    cr_assert_eq(ivmt_info(nf_nodes[k].sock, &info, &why), 0, "node%d INFO: %s", k, why);
    return info;
}

/* Wait until node k sees `up` peers (10 s at most). */
static void nf_wait_peers(int k, uint32_t up, double limit)
{
    double end = ivmt_now() + limit;

    while (nf_info(k).peers_up != up) {
        if (ivmt_now() > end) {
            char *logs = nf_logs();
            cr_assert_fail("node%d does not see %u peer(s) up within %g s\n%s", k, up, limit,
                           logs);
        }
        ivmt_sleep_ms(10);
    }
}

static void nf_setup(void)
{
    ivmt_make_tmpdir(nf_dir, sizeof(nf_dir));
    for (int k = 0; k < NF_NODES; ++k) {
        nf_node_t *n = &nf_nodes[k];
        char name[16];
        snprintf(name, sizeof(name), "node%d", k);
        snprintf(n->sock, sizeof(n->sock), "%s/%s.sock", nf_dir, name);
        snprintf(n->log, sizeof(n->log), "%s/%s.log", nf_dir, name);
        snprintf(n->env, sizeof(n->env), "IVM_SOCKET=%s", n->sock);
        n->pid = ivmt_peer_daemon_start(NULL, name, n->sock, n->log, "127.0.0.1:0", &n->port);
    }
    nf_proxy_start();
    nf_cluster_send(1); /* the acceptor first: no first dial is refused */
    nf_cluster_send(0);
    nf_wait_peers(0, 1, 10);
    nf_wait_peers(1, 1, 10);
}

/* Failed half-way: kill what is left without checks. */
static void nf_teardown(void)
{
    for (int k = 0; k < NF_NODES; ++k) {
        if (nf_nodes[k].pid > 0) {
            kill(nf_nodes[k].pid, SIGKILL);
            waitpid(nf_nodes[k].pid, NULL, 0);
            nf_nodes[k].pid = 0;
        }
    }
    if (nf_proxy > 0) {
        kill(nf_proxy, SIGKILL);
        waitpid(nf_proxy, NULL, 0);
        nf_proxy = 0;
    }
    if (nf_dir[0] != '\0') {
        const char *entries[] = {nf_nodes[0].env, nf_nodes[1].env, NULL};
        pid_t pids[64];
        int n = ivmt_find_procs(0, 0, entries, NULL, pids, 64);
        for (int i = 0; i < n; ++i) {
            kill(pids[i], SIGKILL);
        }
        ivmt_remove_dir(nf_dir);
        nf_dir[0] = '\0';
    }
}

/* The orderly end: node1 holds no job any more (it ended its part itself),
 * both daemons exit 0 on SIGTERM, no PE of the run is left, the proxy goes. */
static void nf_finish(void)
{
    const char *entries[] = {nf_nodes[0].env, nf_nodes[1].env, NULL};
    double end = ivmt_now() + 10;
    pid_t pids[64];
    int n, status;

    while (nf_info(1).jobs != 0 || nf_info(1).pes != 0) {
        if (ivmt_now() > end) {
            char *logs = nf_logs();
            cr_assert_fail("node1 still holds %u job(s), %u PE(s) 10 s after the root's "
                           "end\n%s", nf_info(1).jobs, nf_info(1).pes, logs);
        }
        ivmt_sleep_ms(10);
    }
    for (int k = 0; k < NF_NODES; ++k) {
        kill(nf_nodes[k].pid, SIGTERM);
    }
    for (int k = 0; k < NF_NODES; ++k) {
        cr_assert_eq(waitpid(nf_nodes[k].pid, &status, 0), nf_nodes[k].pid);
        nf_nodes[k].pid = 0;
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "node%d exit status 0x%x",
                  k, status);
    }
    n = ivmt_find_procs(0, 0, entries, NULL, pids, 64);
    cr_expect_eq(n, 0, "process(es) of the run left: %s", ivmt_describe_procs(pids, n));
    kill(nf_proxy, SIGTERM);
    cr_assert_eq(waitpid(nf_proxy, &status, 0), nf_proxy);
    nf_proxy = 0;
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "proxy exit status 0x%x", status);
}

/* Run pe_faults SCENARIO ARGS... as the root PE on node0. */
static void nf_run(const char *scenario, const char *arg1, const char *arg2, double timeout,
                   ivmt_result_t *r)
{
    const char *argv[] = {IVMT_PE_FAULTS, scenario, arg1, arg2, NULL};
    const char *env[] = {nf_nodes[0].env, "IVM_AUTOSTART=0", NULL};
    char *desc, *logs;

    ivmt_run(argv, env, timeout, r);
    if (r->timed_out || !r->exited || r->code != 0 || strstr(r->out, "FAIL ") != NULL) {
        desc = ivmt_describe(NULL, r);
        logs = nf_logs();
        cr_assert_fail("%s: %s\n%s", scenario, desc, logs);
    }
}

/* The number after "KEY " in the output; fails if there is none. */
static double nf_number(const ivmt_result_t *r, const char *key)
{
    const char *p = strstr(r->out, key);

    cr_assert_not_null(p, "no '%s' in the output: %s", key, r->out);
    return strtod(p + strlen(key), NULL);
}

/* Each test calls nf_setup itself: a skipped test's .fini does not run, so
 * it must start nothing. */
TestSuite(netfault, .fini = nf_teardown, .timeout = 60);

Test(netfault, delay)
{
    ivmt_result_t r;
    unsigned long long up = 0, down = 0;
    char *stats, *reply;

    nf_setup();
    reply = nf_proxy_cmd("delay both 50");

    cr_assert_str_eq(reply, "OK");
    free(reply);
    nf_run("net_xfer", "1048576", NULL, 40, &r);
    cr_log_info("delay 50 ms each way: %s", strstr(r.out, "XFER"));
    /* every round trip costs 100 ms: spawn, map, put, two waits at least */
    cr_expect_geq(nf_number(&r, "each way in "), 0.3, "the delay did not hold: %s", r.out);
    stats = nf_proxy_cmd("stats");
    cr_assert(sscanf(stats, "OK conns=%*d up=%llu down=%llu", &up, &down) == 2, "%s", stats);
    cr_expect(up >= 512 * 1024 && down >= 1024 * 1024,
              "the data did not go through the proxy: %s", stats);
    free(stats);
    ivmt_result_free(&r);
    nf_finish();
}

Test(netfault, stall)
{
    ivmt_result_t r;
    double lost;
    char *log;

    nf_setup();

    nf_run("net_stall", nf_ctl, NULL, 40, &r);
    lost = nf_number(&r, "LOST ");
    cr_log_info("stall: the peer was lost %.2f s after the link went silent", lost);
    /* 5 s of silence, noticed by a tick that runs every second */
    cr_expect(lost >= 4.0 && lost <= 7.5, "peer lost after %.2f s, expected 5 to 6", lost);
    log = nf_file(nf_nodes[0].log);
    cr_expect(strstr(log, "silent for 5 s") != NULL, "node0 never said why:\n%s", log);
    free(log);
    ivmt_result_free(&r);
    nf_finish();
}

Test(netfault, drop)
{
    ivmt_result_t r;
    double lost, back;

    nf_setup();

    nf_run("net_drop", nf_ctl, NULL, 40, &r);
    lost = nf_number(&r, "LOST ");
    back = nf_number(&r, "BACK ");
    cr_log_info("drop: peer lost after %.3f s, link back after %.3f s", lost, back);
    cr_expect_leq(lost, 1.0, "a closed connection took %.2f s to notice", lost);
    cr_expect_leq(back, 5.0, "the link came back only after %.2f s", back);
    ivmt_result_free(&r);
    nf_finish();
}

/* A byte of a DATA message changed on the wire: the AEAD tag of the peer
 * link refuses it before anything is written to an object, the link closes
 * and the peer counts as lost (the PE's Get fails, it never sees a wrong
 * byte). */
Test(netfault, corrupt)
{
    ivmt_result_t r;
    char *log, *logs;

    nf_setup();
    nf_run("net_corrupt", nf_ctl, "1048576", 40, &r);
    cr_log_info("corrupt: %s", strstr(r.out, "CORRUPT"));
    log  = nf_file(nf_nodes[0].log);
    logs = nf_logs();
    cr_expect(strstr(r.out, "CORRUPT IVM_ERROR_DAEMON_LOST") != NULL,
              "the corrupted message was not refused: %s\n%s", r.out, logs);
    cr_expect(strcasestr(log, "authenticat") != NULL || strstr(log, "MAC") != NULL,
              "node0 logged no authentication failure:\n%s", logs);
    cr_expect(strstr(log, "peer node1 lost") != NULL, "node0 did not drop the link:\n%s",
              logs);
    free(log);
    free(logs);
    ivmt_result_free(&r);
    nf_finish();
}
