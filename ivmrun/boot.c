/*
 * ivm-boot: brings up the daemons of a real cluster. ivmrun starts it with
 * mpirun, one rank per host:
 *   mpirun -np N --host a,b,c --map-by node --bind-to none ivm-boot --hosts a,b,c
 * Rank k is node<k>: it makes a private run directory (0700) in the socket
 * directory of its host, starts `ivmd --node node<k> --listen ADDR:0` there
 * (ADDR: the address of the entry of --hosts that is its machine), reads the
 * port from the readiness line, and then all ranks exchange (node, address,
 * port) in one MPI_Allgather (after a first one of the host names); rank 0
 * draws the 32-byte cluster secret and broadcasts it; each rank sends the
 * table to its own daemon (CLUSTER; in the order of a token passed from rank
 * to rank, so that no daemon is dialed before it has the table) and waits
 * until the daemon sees every peer. Then rank 0 prints
 *   IVM-BOOT READY <node0's socket path>
 * on stdout, and every rank keeps its daemon until rank 0's stdin ends (or
 * rank 0 gets SIGTERM, SIGINT or SIGHUP), which rank 0 broadcasts; then each
 * stops its daemon, removes its run directory and ends. MPI carries nothing
 * but that: the daemons talk to each other over their own TCP connections.
 * All MPI calls are non-blocking ones completed with MPI_Test while the
 * signals are watched.
 *
 * A rank that gets a terminating signal itself (mpirun forwards SIGTERM when
 * it is killed) stops its daemon and leaves without MPI. The daemons get
 * SIGTERM if their ivm-boot dies (PR_SET_PDEATHSIG), which makes them clean up.
 */
#include "ivmrun.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

/* X(field, "option-name", TYPE, "default", "help text") */
#define IVMBOOT_CONFIG_TABLE(X)                                                        \
    X(hosts,       "hosts",       STRING, "",                                          \
      "the hosts as given to mpirun, ','-separated: each rank listens on the address " \
      "of the entry that is its machine (default: this host's name)")                  \
    X(addr,        "addr",        STRING, "",                                          \
      "numeric address for every rank's daemon to listen on (instead of --hosts)")     \
    X(daemon,      "daemon",      STRING, "",                                          \
      "ivmd to start (default: ivmd beside ivm-boot, else PATH)")                      \
    X(daemon_wait, "daemon-wait", DOUBLE, "10",                                        \
      "seconds to wait for ivmd to become ready")                                      \
    X(up_wait,     "up-wait",     DOUBLE, "60",                                        \
      "seconds to wait until every daemon sees all the others")                        \
    X(cpu_devices, "cpu-devices", STRING, "",                                          \
      "CPU devices of every node's daemon (default: ivmd's)")                          \
    X(node_cpu_devices, "node-cpu-devices", STRING, "",                                \
      "one CPU device spec per node, ';'-separated: node<k> gets the k-th")            \
    X(emu_gpus,    "emu-gpus",    STRING, "",                                          \
      "N[:MEM] emulated GPUs for every node's daemon (ivmd --emu-gpus)")               \
    X(gpus,        "gpus",        STRING, "",                                          \
      "real GPUs of every node's daemon: all, none or CUDA indices (ivmd --gpus)")    \
    X(log_level,   "log-level",   STRING, "",                                          \
      "error|warn|info|debug|trace, also given to ivmd")

IVM_CONFIG_STRUCT(ivmboot_config, IVMBOOT_CONFIG_TABLE);

#define IVMBOOT_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmboot_config, __VA_ARGS__)
static const ivm_config_field_t ivmboot_config_fields[] = {
    IVMBOOT_CONFIG_TABLE(IVMBOOT_CONFIG_FIELD) {0}};

#define IVMBOOT_REQ_WAIT  5000 /* ms a CLUSTER round trip may take */
#define IVMBOOT_INFO_WAIT 1000 /* ms an INFO round trip may take */
#define IVMBOOT_UP_POLL   20   /* ms between INFO rounds while the cluster forms */
#define IVMBOOT_MPI_POLL  50   /* ms between MPI_Test calls, at most */
#define IVMBOOT_NAME_MAX  256  /* bytes of a host name, NUL included */

/* What each rank tells the others. */
typedef struct ivmboot_entry {
    char     node[IVM_HOST_MAX + 1]; /* node<rank> */
    char     addr[64];   /* where its daemon listens */
    char     host[IVMBOOT_NAME_MAX]; /* its host name, for messages */
    uint16_t port;       /* its daemon's TCP port */
    uint16_t ok;         /* 1: the daemon is up */
    uint32_t reserved;
} ivmboot_entry_t;

typedef struct ivmboot {
    ivmboot_config_t cfg;
    ivmrun_config_t  dcfg;     /* what ivmrun_daemon_start reads */
    int              rank, size;
    int              sigfd;    /* SIGCHLD, SIGINT, SIGTERM, SIGHUP */
    sigset_t         child_mask; /* the signal mask to give ivmd */
    char             host[IVMBOOT_NAME_MAX];
    char             dir[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* run dir */
    char           **env;      /* variables ivmd must not inherit */
    char            *specs;    /* --node-cpu-devices, split at ';' */
    ivmrun_daemon_t  daemon;
    ivmboot_entry_t *table;    /* every rank's entry */
    int              daemon_lost; /* its exit was reported */
} ivmboot_t;

/* Read what sigfd holds; reap the daemon on SIGCHLD (and say so once).
 * Returns the first terminating signal, 0 if none. */
static int ivmboot_signals(ivmboot_t *b)
{
    struct signalfd_siginfo si;
    char why[64];
    int term = 0;

    while (read(b->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo != SIGCHLD) {
            term = (term != 0) ? term : (int)si.ssi_signo;
        }
    }
    if (b->daemon.started && ivmrun_daemon_reap(&b->daemon) && !b->daemon_lost) {
        b->daemon_lost = 1;
        ivmrun_proc_status_text(b->daemon.status, why, sizeof(why));
        ivm_warn("the ivmd of node%d exited (%s)", b->rank, why);
    }
    return term;
}

/* Wait for a non-blocking MPI operation, watching the signals meanwhile.
 * Returns 0 when it completed, or the terminating signal that came first. */
static int ivmboot_mpi_wait(ivmboot_t *b, MPI_Request *req)
{
    struct pollfd pfd = {.fd = b->sigfd, .events = POLLIN};
    int done = 0, term, wait_ms = 1;

    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) {
            return 0;
        }
        if (poll(&pfd, 1, wait_ms) > 0) {
            term = ivmboot_signals(b);
            if (term != 0) {
                return term;
            }
        }
        wait_ms = (wait_ms * 2 > IVMBOOT_MPI_POLL) ? IVMBOOT_MPI_POLL : wait_ms * 2;
    }
}

/* Stop the daemon (SIGTERM, SIGKILL after 5 s) and remove the run directory. */
static void ivmboot_cleanup(ivmboot_t *b)
{
    ivmrun_daemon_close(&b->daemon, b->sigfd);
    if (b->dir[0] != '\0') {
        if (rmdir(b->dir) != 0 && errno != ENOENT) {
            ivm_warn("cannot remove the run directory %s: %m", b->dir);
        }
        b->dir[0] = '\0';
    }
}

/* Which entry of --hosts is this machine (copied to buf; 0 if none), and
 * are some entries other machines (then loopback addresses will not do)? */
static int ivmboot_my_host(const ivmboot_t *b, char *buf, size_t len, int *external_p)
{
    const char *p = b->cfg.hosts, *comma;
    char entry[IVMBOOT_NAME_MAX];
    int mine = 0;
    size_t n;

    *external_p = 0;
    for (;; p = comma + 1) {
        comma = strchr(p, ',');
        n     = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        if (n > 0 && n < sizeof(entry) && n < len) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            if (ivmrun_host_is_local(entry)) {
                if (!mine) {
                    memcpy(buf, entry, n + 1);
                    mine = 1;
                }
            } else {
                *external_p = 1;
            }
        }
        if (comma == NULL || (mine && *external_p)) {
            return mine;
        }
    }
}

/* The address peers reach this node's daemon at. 0 or -1 (logged). */
static int ivmboot_addr(ivmboot_t *b, char *addr, size_t len)
{
    char name[IVMBOOT_NAME_MAX];
    int external = 0, k;

    if (b->cfg.addr[0] != '\0') {
        snprintf(addr, len, "%s", b->cfg.addr);
        return 0;
    }
    if (b->cfg.hosts[0] != '\0') {
        if (ivmboot_my_host(b, name, sizeof(name), &external)) {
            ivm_debug("this machine is '%s' of the host list", name);
            return ivmrun_host_addr(name, external, addr, len);
        }
        ivm_info("no entry of the host list %s is this machine (%s); using its name",
                 b->cfg.hosts, b->host);
        return ivmrun_host_addr(NULL, 1, addr, len);
    }
    /* No list: the ranks' host names say whether they share a machine. */
    for (k = 0; k < b->size; ++k) {
        external |= strcmp(b->table[k].host, b->host) != 0;
    }
    return ivmrun_host_addr(NULL, external, addr, len);
}

/* Make <socket dir>/boot-node<rank>-XXXXXX (0700) and name the socket in it. */
static int ivmboot_mkdir(ivmboot_t *b)
{
    char base[sizeof(b->dir)];
    int len;

    if (ivm_sock_dir(base, sizeof(base)) != IVM_SUCCESS) {
        ivm_error("the socket directory path (from IVM_SOCKET_DIR or XDG_RUNTIME_DIR) "
                  "is too long for a Unix socket");
        return -1;
    }
    if (ivm_sock_dir_prepare(base) != IVM_SUCCESS) {
        ivm_error("cannot make the run directory: the socket directory %s is unusable "
                  "(see above)", base);
        return -1;
    }
    len = snprintf(b->dir, sizeof(b->dir), "%s/boot-node%d-XXXXXX", base, b->rank);
    if (len < 0 || (size_t)len + strlen("/node.sock") + 12 > sizeof(b->dir)) {
        ivm_error("the socket directory %s is too long to hold the node's socket "
                  "(set IVM_SOCKET_DIR to a shorter path)", base);
        b->dir[0] = '\0';
        return -1;
    }
    if (mkdtemp(b->dir) == NULL) {
        ivm_error("cannot make a run directory in %s: %m", base);
        b->dir[0] = '\0';
        return -1;
    }
    len = snprintf(b->daemon.path, sizeof(b->daemon.path), "%s/node%d.sock", b->dir,
                   b->rank);
    if (len < 0 || (size_t)len >= sizeof(b->daemon.path)) {
        ivm_error("the socket path %s/node%d.sock is too long", b->dir, b->rank);
        return -1;
    }
    return 0;
}

/* ivmd gets ivm-boot's environment without MPI's: a PE that is itself an MPI
 * program must not find this job's launcher. */
static int ivmboot_env(ivmboot_t *b)
{
    static const char *const prefixes[] = {"OMPI_", "PMIX_", "OPAL_", "ORTE_", "PRTE_"};
    extern char **environ;
    size_t n = 0, k, p, len;
    char **e;

    for (e = environ; *e != NULL; ++e) {
        ++n;
    }
    b->env = calloc(n + 1, sizeof(*b->env));
    if (b->env == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    for (e = environ, k = 0; *e != NULL; ++e) {
        for (p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); ++p) {
            if (strncmp(*e, prefixes[p], strlen(prefixes[p])) == 0) {
                len = strcspn(*e, "=");
                b->env[k] = strndup(*e, len);
                if (b->env[k] == NULL) {
                    ivm_error("out of memory");
                    return -1;
                }
                ++k;
                break;
            }
        }
    }
    return 0;
}

/* This node's --cpu-devices: the rank's spec of --node-cpu-devices, else
 * --cpu-devices. 0, or -1 if there is no spec for this rank. */
static int ivmboot_cpu_devices(ivmboot_t *b)
{
    char *p, *semi;
    int k;

    b->daemon.cpu_devices = b->cfg.cpu_devices;
    if (b->cfg.node_cpu_devices[0] == '\0') {
        return 0;
    }
    b->specs = strdup(b->cfg.node_cpu_devices);
    if (b->specs == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    for (p = b->specs, k = 0;; p = semi + 1, ++k) {
        semi = strchr(p, ';');
        if (semi != NULL) {
            *semi = '\0';
        }
        if (k == b->rank) {
            b->daemon.cpu_devices = p;
            return 0;
        }
        if (semi == NULL) {
            break;
        }
    }
    ivm_error("--node-cpu-devices has no spec for node%d", b->rank);
    return -1;
}

/* Local phase: run directory, ivmd. 0, -1 on failure, or a signal number. */
static int ivmboot_start(ivmboot_t *b, ivmboot_entry_t *me)
{
    int signo = 0;

    if (ivmboot_addr(b, me->addr, sizeof(me->addr)) != 0 || ivmboot_env(b) != 0 ||
        ivmboot_cpu_devices(b) != 0 || ivmboot_mkdir(b) != 0) {
        return -1;
    }
    snprintf(b->daemon.node, sizeof(b->daemon.node), "node%d", b->rank);
    b->daemon.listen      = 1;
    b->daemon.listen_addr = me->addr;
    b->daemon.pdeathsig   = SIGTERM;
    b->daemon.env         = b->env;
    if (ivmrun_daemon_start(&b->daemon, &b->dcfg, b->sigfd, &b->child_mask, &signo) !=
        IVM_SUCCESS) {
        return signo != 0 ? signo : -1;
    }
    me->port = (uint16_t)b->daemon.port;
    ivm_info("ivmd (pid %d) listens on %s port %u", (int)b->daemon.pid, me->addr,
             me->port);
    return 0;
}

/* Send the table to this rank's daemon and wait until it sees every peer.
 * 0, -1 on failure, or a signal number. */
static int ivmboot_join(ivmboot_t *b, const uint8_t *secret)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + (size_t)b->size * sizeof(ivm_msg_cluster_node_t);
    double start = ivmrun_time_now(), deadline = start + b->cfg.up_wait;
    struct pollfd pfd = {.fd = b->sigfd, .events = POLLIN};
    char detail[IVM_MSG_DETAIL_MAX + 64];
    ivm_msg_cluster_node_t *nodes;
    ivm_msg_cluster_req_t *req;
    ivm_msg_info_rep_t info;
    ivmError_t status;
    int k, up = -1, term, pos, prev = -1, next = -1, token = 1, *order;
    MPI_Request mreq;

    /* The order in which the daemons get the table: names from the highest
     * down. The node whose name sorts lower dials, so every daemon learns the
     * table after each daemon it will dial has it, and no first dial is
     * refused (a refused dial is retried, but only after 200 ms or more).
     * A token passed from rank to rank keeps that order. */
    order = calloc((size_t)b->size, sizeof(*order));
    if (order == NULL) {
        ivm_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (k = 0; k < b->size; ++k) {
        for (pos = k; pos > 0 && strcmp(b->table[order[pos - 1]].node, b->table[k].node) < 0;
             --pos) {
            order[pos] = order[pos - 1];
        }
        order[pos] = k;
    }
    for (pos = 0; pos < b->size; ++pos) {
        if (order[pos] == b->rank) {
            prev = (pos > 0) ? order[pos - 1] : -1;
            next = (pos + 1 < b->size) ? order[pos + 1] : -1;
        }
    }
    free(order);
    if (prev >= 0) {
        MPI_Irecv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &mreq);
        if ((term = ivmboot_mpi_wait(b, &mreq)) != 0) {
            return term;
        }
    }

    req = calloc(1, len);
    if (req == NULL) {
        ivm_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memcpy(req->secret, secret, sizeof(req->secret));
    req->n = (uint32_t)b->size;
    nodes  = (ivm_msg_cluster_node_t *)(req + 1);
    for (k = 0; k < b->size; ++k) {
        ivm_proto_strset(nodes[k].node, sizeof(nodes[k].node), b->table[k].node);
        ivm_proto_strset(nodes[k].addr, sizeof(nodes[k].addr), b->table[k].addr);
        nodes[k].port = b->table[k].port;
    }
    status = ivmrun_daemon_request(b->daemon.path, IVM_MSG_CLUSTER, req, (uint32_t)len,
                                   IVMBOOT_REQ_WAIT, detail, sizeof(detail));
    explicit_bzero(req, len); /* the secret lives on in the daemon only */
    free(req);
    if (next >= 0) { /* the next node's turn, whatever happened here */
        MPI_Isend(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD, &mreq);
        if ((term = ivmboot_mpi_wait(b, &mreq)) != 0) {
            return term;
        }
    }
    if (status != IVM_SUCCESS) {
        ivm_error("the ivmd of node%d did not join the cluster: %s%s%s", b->rank,
                  ivm_status_string(status), detail[0] != '\0' ? ": " : "", detail);
        return -1;
    }
    for (;;) {
        if (ivm_sock_info(b->daemon.path, IVMBOOT_INFO_WAIT, &info) == IVM_SUCCESS) {
            up = (int)info.peers_up;
            if (up == b->size - 1) {
                ivm_info("node%d sees its %d peer%s (%.0f ms)", b->rank, up,
                         up == 1 ? "" : "s", (ivmrun_time_now() - start) * 1000);
                return 0;
            }
        }
        if (ivmrun_time_now() >= deadline) {
            break;
        }
        if (poll(&pfd, 1, IVMBOOT_UP_POLL) > 0) {
            term = ivmboot_signals(b);
            if (term != 0) {
                return term;
            }
            if (b->daemon_lost) {
                return -1;
            }
        }
    }
    ivm_error("node%d (%s, %s port %u) sees %d of its %d peers after %g s (is TCP to "
              "the other hosts' addresses open? see --log-level debug)", b->rank,
              b->host, b->table[b->rank].addr, b->table[b->rank].port, up < 0 ? 0 : up,
              b->size - 1, b->cfg.up_wait);
    return -1;
}

/* Rank 0: wait until stdin ends (or a line arrives) or a terminating signal. */
static void ivmboot_wait_stop(ivmboot_t *b)
{
    struct pollfd pfds[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                             {.fd = b->sigfd, .events = POLLIN}};
    char buf[256];
    ssize_t n;
    int term;

    for (;;) {
        if (poll(pfds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("poll failed: %m");
            return;
        }
        if (pfds[1].revents & POLLIN) {
            term = ivmboot_signals(b);
            if (term != 0) {
                ivm_info("got signal %d; stopping the cluster", term);
                return;
            }
        }
        if (pfds[0].revents != 0) {
            n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            ivm_info("%s; stopping the cluster", n == 0 ? "end of input" : "told to stop");
            return;
        }
    }
}

/* A terminating signal outside the orderly path: clean up here and leave
 * without MPI (mpirun ends the other ranks). */
static int ivmboot_abandon(ivmboot_t *b, int signo)
{
    ivm_info("got signal %d; stopping node%d's daemon", signo, b->rank);
    ivmboot_cleanup(b);
    return 128 + signo;
}

static int ivmboot_args(ivmboot_t *b, int argc, char **argv)
{
    int first = 0, help = 0, level;
    char err[256];

    err[0] = '\0';
    if (ivm_config_defaults(ivmboot_config_fields, &b->cfg) != IVM_SUCCESS ||
        ivm_config_load_env(ivmboot_config_fields, &b->cfg, err, sizeof(err)) !=
            IVM_SUCCESS ||
        ivm_config_parse_args(ivmboot_config_fields, &b->cfg, argc, argv, &first, &help,
                              err, sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return 2;
    }
    if (help) {
        if (b->rank == 0) {
            printf("usage: mpirun -np N --host H0,H1,... --map-by node --bind-to none "
                   "ivm-boot [options]\n"
                   "Started by ivmrun --hosts/--hostfile/--slurm: one rank per host "
                   "starts that host's ivmd\n(node<rank>) and joins the daemons into "
                   "one cluster. Rank 0 prints\n\"" IVMRUN_BOOT_READY "<socket>\" and "
                   "keeps the cluster until its stdin ends.\n\nOptions:\n");
            ivm_config_print_help(ivmboot_config_fields, stdout);
        }
        return -1;
    }
    if (first < argc) {
        ivm_error("unexpected argument '%s' (see --help)", argv[first]);
        return 2;
    }
    if (b->cfg.log_level[0] != '\0') {
        level = ivm_log_level_parse(b->cfg.log_level);
        if (level < 0) {
            ivm_error("--log-level '%s' is not one of error, warn, info, debug, trace",
                      b->cfg.log_level);
            return 2;
        }
        ivm_log_current_level = level;
    }
    if (!(b->cfg.daemon_wait > 0) || isinf(b->cfg.daemon_wait) ||
        !(b->cfg.up_wait > 0) || isinf(b->cfg.up_wait)) {
        ivm_error("--daemon-wait and --up-wait must be numbers of seconds > 0");
        return 2;
    }
    b->dcfg.daemon      = b->cfg.daemon;
    b->dcfg.daemon_wait = b->cfg.daemon_wait;
    b->dcfg.log_level   = b->cfg.log_level;
    b->dcfg.emu_gpus    = b->cfg.emu_gpus;
    b->dcfg.gpus        = b->cfg.gpus;
    return 0;
}

static int ivmboot_run(ivmboot_t *b, int argc, char **argv)
{
    uint8_t secret[IVM_SECRET_LEN + 1]; /* the last byte: 1 = rank 0 made one */
    ivmboot_entry_t me;
    MPI_Request req;
    int code, ok, all_ok, k, stop = 0, term;

    code = ivmboot_args(b, argc, argv);
    if (code != 0) {
        return code < 0 ? 0 : code; /* the same on every rank */
    }
    if (b->size > IVM_CLUSTER_MAX_NODES) {
        ivm_error("%d ranks: a cluster has at most %d nodes", b->size,
                  IVM_CLUSTER_MAX_NODES);
        return 2;
    }
    b->table = calloc((size_t)b->size, sizeof(*b->table));
    if (b->table == NULL) {
        ivm_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Host names first: without --hosts they tell whether the ranks share a
     * machine, and they name the nodes in messages. */
    memset(&me, 0, sizeof(me));
    snprintf(me.host, sizeof(me.host), "%s", b->host);
    MPI_Iallgather(&me, (int)sizeof(me), MPI_BYTE, b->table, (int)sizeof(me), MPI_BYTE,
                   MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }

    /* Local phase, then one exchange of every node's (name, address, port). */
    code = ivmboot_start(b, &me);
    if (code > 0) {
        return ivmboot_abandon(b, code);
    }
    snprintf(me.node, sizeof(me.node), "node%d", b->rank);
    me.ok = (code == 0);
    MPI_Iallgather(&me, (int)sizeof(me), MPI_BYTE, b->table, (int)sizeof(me), MPI_BYTE,
                   MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }
    ok = 1;
    for (k = 0; k < b->size; ++k) {
        if (!b->table[k].ok) {
            ok = 0;
            if (b->rank == 0) {
                ivm_error("node%d (host %s) could not start its daemon (see its "
                          "messages above)", k, b->table[k].host);
            }
        }
    }
    if (!ok) {
        ivmboot_cleanup(b);
        return 1;
    }

    /* The secret: from rank 0, to every rank. */
    memset(secret, 0, sizeof(secret));
    if (b->rank == 0) {
        secret[IVM_SECRET_LEN] =
            getrandom(secret, IVM_SECRET_LEN, 0) == (ssize_t)IVM_SECRET_LEN;
        if (!secret[IVM_SECRET_LEN]) {
            ivm_error("cannot make the cluster secret: getrandom: %m");
        }
    }
    MPI_Ibcast(secret, (int)sizeof(secret), MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        explicit_bzero(secret, sizeof(secret));
        return ivmboot_abandon(b, term);
    }
    code = secret[IVM_SECRET_LEN] ? ivmboot_join(b, secret) : -1;
    explicit_bzero(secret, sizeof(secret));
    if (code > 0) {
        return ivmboot_abandon(b, code);
    }

    /* Everyone up everywhere? */
    ok = (code == 0);
    MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }
    if (!all_ok) {
        if (b->rank == 0) {
            ivm_error("the cluster did not form (see the messages above)");
        }
        ivmboot_cleanup(b);
        return 1;
    }
    if (b->rank == 0) {
        printf(IVMRUN_BOOT_READY "%s\n", b->daemon.path);
        fflush(stdout);
        ivmboot_wait_stop(b);
        stop = 1;
    }
    /* Until rank 0 says stop. Another rank's own signal ends it alone. */
    MPI_Ibcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }
    ivm_debug("stopping node%d's daemon", b->rank);
    ivmboot_cleanup(b);
    return 0;
}

int main(int argc, char **argv)
{
    ivmboot_t *b;
    sigset_t mask;
    int code, k;

    ivm_log_set_prefix("ivm-boot");
    ivm_log_init_from_env();
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        ivm_error("out of memory");
        return 1;
    }
    b->sigfd = -1;
    /* Blocked before MPI_Init, so that MPI's threads inherit the mask and the
     * signals reach the signalfd. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &b->child_mask) != 0 ||
        (b->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        ivm_error("cannot set up the signals: %m");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (gethostname(b->host, sizeof(b->host)) != 0) {
        snprintf(b->host, sizeof(b->host), "?");
    }
    b->host[sizeof(b->host) - 1] = '\0';

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        ivm_error("MPI_Init failed (ivm-boot runs under mpirun, or srun with PMI)");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    ivm_log_set_prefix("node%d ivm-boot", b->rank);

    code = ivmboot_run(b, argc, argv);
    if (code < 128) {
        MPI_Finalize(); /* every rank took the same path here */
    }

    if (b->env != NULL) {
        for (k = 0; b->env[k] != NULL; ++k) {
            free(b->env[k]);
        }
        free(b->env);
    }
    free(b->specs);
    free(b->table);
    ivm_config_release(ivmboot_config_fields, &b->cfg);
    close(b->sigfd);
    free(b);
    return code;
}
