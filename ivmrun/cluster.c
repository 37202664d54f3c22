/* The daemons of a run: the one node daemon (--nodes 1), or N fresh daemons
 * in a private run directory joined into one cluster over loopback TCP
 * (--nodes N): start each with --listen, send each the same CLUSTER table
 * with a fresh secret, wait until each sees the others; at the end stop them
 * all and remove their sockets and the directory. Each daemon ivmrun starts
 * gets SIGTERM if ivmrun dies (PR_SET_PDEATHSIG), and the last daemon of a
 * run directory removes it (ivmd --remove-dir). A real cluster (--hosts)
 * is ivm-boot's work (hosts.c). */
#include "ivmrun.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_CLUSTER_ADDR      "127.0.0.1" /* where simulated nodes listen */
#define IVMRUN_CLUSTER_REQ_WAIT  5000  /* ms a CLUSTER round trip may take */
#define IVMRUN_CLUSTER_UP_WAIT   10.0  /* s for every node to see every peer */
#define IVMRUN_CLUSTER_UP_POLL   20    /* ms between INFO rounds meanwhile */
#define IVMRUN_CLUSTER_INFO_WAIT 1000  /* ms an INFO round trip may take */
#define IVMRUN_CLUSTER_STOP_WAIT 5.0   /* s between SIGTERM and SIGKILL */

/* Read what sigfd holds; returns the first terminating signal, 0 if none.
 * SIGCHLDs are only consumed: callers reap every daemon with WNOHANG. */
static int ivmrun_cluster_signals(int sigfd)
{
    struct signalfd_siginfo si;
    int term = 0;

    while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo != SIGCHLD && term == 0) {
            term = (int)si.ssi_signo;
        }
    }
    return term;
}

/* Daemons we started that are not yet reaped. */
static int ivmrun_cluster_alive(const ivmrun_cluster_t *c)
{
    int k, alive = 0;

    for (k = 0; k < c->n; ++k) {
        alive += (c->nodes[k].started && c->nodes[k].pid > 0);
    }
    return alive;
}

int ivmrun_cluster_reap(ivmrun_cluster_t *c)
{
    char why[64];
    int k, gone = 0;

    if (c->boot.nhosts > 0 && ivmrun_boot_reap(&c->boot)) {
        ivmrun_proc_status_text(c->boot.status, why, sizeof(why));
        ivm_warn("%s, which keeps the cluster's daemons, exited early (%s)",
                 c->boot.launcher, why);
        gone = 1;
    }
    for (k = 0; k < c->n; ++k) {
        if (ivmrun_daemon_reap(&c->nodes[k])) {
            ivmrun_proc_status_text(c->nodes[k].status, why, sizeof(why));
            if (c->multi) {
                ivm_warn("the ivmd of %s exited early (%s)", c->nodes[k].node, why);
            } else {
                ivm_warn("the ivmd started for this job exited early (%s)", why);
            }
        }
    }
    return gone;
}

/* Remove the run directory: the sockets left in it (it is ours alone), then
 * the directory itself. */
static void ivmrun_cluster_rmdir(ivmrun_cluster_t *c)
{
    char path[sizeof(c->dir) + 256];
    struct dirent *ent;
    struct stat st;
    DIR *dir;

    if (c->dir[0] == '\0') {
        return;
    }
    dir = opendir(c->dir);
    if (dir != NULL) {
        while ((ent = readdir(dir)) != NULL) {
            if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) {
                continue;
            }
            snprintf(path, sizeof(path), "%s/%s", c->dir, ent->d_name);
            if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && unlink(path) == 0) {
                ivm_info("removed the leftover socket %s", path);
            }
        }
        closedir(dir);
    }
    if (rmdir(c->dir) != 0 && errno != ENOENT) {
        ivm_warn("cannot remove the run directory %s: %m", c->dir);
    } else {
        ivm_debug("removed the run directory %s", c->dir);
    }
    c->dir[0] = '\0';
}

int ivmrun_cluster_watch_ended(ivmrun_cluster_t *c)
{
    char buf[256];
    ssize_t n;

    if (c->watch_fd < 0) {
        return 0;
    }
    n = recv(c->watch_fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        return 0; /* nothing is ever sent on it: ignored */
    }
    close(c->watch_fd);
    c->watch_fd = -1;
    return 1;
}

void ivmrun_cluster_close(ivmrun_cluster_t *c, int sigfd)
{
    struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
    ivmrun_daemon_t *d;
    double deadline, left;
    char why[64];
    int k;

    if (c->watch_fd >= 0) {
        close(c->watch_fd);
        c->watch_fd = -1;
    }
    if (c->boot.nhosts > 0) {
        ivmrun_boot_close(&c->boot, sigfd);
        return;
    }
    if (!c->multi) {
        ivmrun_daemon_close(&c->nodes[0], sigfd);
        return;
    }
    for (k = 0; k < c->n; ++k) {
        d = &c->nodes[k];
        ivmrun_daemon_reap(d);
        if (d->started && d->pid > 0) {
            ivm_info("stopping the ivmd of %s (pid %d)", d->node, (int)d->pid);
            kill(d->pid, SIGTERM);
        }
    }
    /* Terminating signals read here are dropped: teardown is under way. */
    deadline = ivmrun_time_now() + IVMRUN_CLUSTER_STOP_WAIT;
    for (;;) {
        for (k = 0; k < c->n; ++k) {
            ivmrun_daemon_reap(&c->nodes[k]);
        }
        left = deadline - ivmrun_time_now();
        if (ivmrun_cluster_alive(c) == 0 || left <= 0) {
            break;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0) {
            ivmrun_cluster_signals(sigfd);
        }
    }
    for (k = 0; k < c->n; ++k) {
        d = &c->nodes[k];
        if (!d->started) {
            continue;
        }
        if (d->pid > 0) {
            ivm_warn("the ivmd of %s (pid %d) did not exit %g s after SIGTERM; "
                     "killing it", d->node, (int)d->pid, IVMRUN_CLUSTER_STOP_WAIT);
            ivmrun_daemon_kill(d);
        } else if (!WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0) {
            ivmrun_proc_status_text(d->status, why, sizeof(why));
            ivm_warn("the ivmd of %s ended with %s", d->node, why);
        }
        ivmrun_daemon_unlink(d);
        d->started = 0;
    }
    ivmrun_cluster_rmdir(c);
}

/* Make the private run directory <socket dir>/run-<pid>-XXXXXX (0700) and
 * name the nodes' sockets in it. */
static ivmError_t ivmrun_cluster_mkdir(ivmrun_cluster_t *c)
{
    char base[sizeof(c->dir)];
    ivmError_t status;
    int k, len;

    if (ivm_sock_dir(base, sizeof(base)) != IVM_SUCCESS) {
        ivm_error("the socket directory path (from IVM_SOCKET_DIR or XDG_RUNTIME_DIR) "
                  "is too long for a Unix socket");
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivm_sock_dir_prepare(base);
    if (status != IVM_SUCCESS) {
        ivm_error("cannot make the run directory: the socket directory is unusable "
                  "(see above)");
        return status;
    }
    len = snprintf(c->dir, sizeof(c->dir), "%s/run-%d-XXXXXX", base, (int)getpid());
    /* Room for "/node63.sock" after it. */
    if (len < 0 || (size_t)len + sizeof("/node63.sock") > sizeof(c->dir)) {
        ivm_error("the socket directory %s is too long to hold the nodes' sockets "
                  "(set IVM_SOCKET_DIR to a shorter path)", base);
        c->dir[0] = '\0';
        return IVM_ERROR_INVALID_VALUE;
    }
    if (mkdtemp(c->dir) == NULL) {
        ivm_error("cannot make a run directory in %s: %m", base);
        c->dir[0] = '\0';
        return IVM_ERROR_PERMISSION;
    }
    ivm_debug("run directory %s", c->dir);
    for (k = 0; k < c->n; ++k) {
        snprintf(c->nodes[k].node, sizeof(c->nodes[k].node), "node%d", k);
        len = snprintf(c->nodes[k].path, sizeof(c->nodes[k].path), "%s/%s.sock", c->dir,
                       c->nodes[k].node);
        if (len < 0 || (size_t)len >= sizeof(c->nodes[k].path)) {
            ivm_error("socket path %s/%s.sock is too long", c->dir, c->nodes[k].node);
            ivmrun_cluster_rmdir(c);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    return IVM_SUCCESS;
}

/* Order in which the table goes out: names from the highest down. The node
 * whose name sorts lower dials, so each daemon learns the table after every
 * daemon it will dial already has it, and no first dial is refused. */
static void ivmrun_cluster_send_order(const ivmrun_cluster_t *c, int *order)
{
    int i, j, k;

    for (i = 0; i < c->n; ++i) {
        k = i;
        for (j = i; j > 0 && strcmp(c->nodes[order[j - 1]].node, c->nodes[k].node) < 0;
             --j) {
            order[j] = order[j - 1];
        }
        order[j] = k;
    }
}

/* Send every daemon the CLUSTER table with a fresh secret. */
static ivmError_t ivmrun_cluster_join(ivmrun_cluster_t *c)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + (size_t)c->n * sizeof(ivm_msg_cluster_node_t);
    char detail[IVM_MSG_DETAIL_MAX + 64];
    ivm_msg_cluster_node_t *nodes;
    ivm_msg_cluster_req_t *req;
    int order[IVMRUN_MAX_NODES];
    ivmError_t status = IVM_SUCCESS;
    size_t got = 0;
    ssize_t n;
    int i, k;

    req = calloc(1, len);
    if (req == NULL) {
        ivm_error("out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    while (got < sizeof(req->secret)) {
        n = getrandom(req->secret + got, sizeof(req->secret) - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("cannot make the cluster secret: getrandom: %m");
            status = IVM_ERROR_INTERNAL;
            goto out;
        }
        got += (size_t)n;
    }
    req->n = (uint32_t)c->n;
    nodes  = (ivm_msg_cluster_node_t *)(req + 1);
    for (k = 0; k < c->n; ++k) {
        ivm_proto_strset(nodes[k].node, sizeof(nodes[k].node), c->nodes[k].node);
        ivm_proto_strset(nodes[k].addr, sizeof(nodes[k].addr), IVMRUN_CLUSTER_ADDR);
        nodes[k].port = (uint16_t)c->nodes[k].port;
    }
    ivmrun_cluster_send_order(c, order);
    for (i = 0; i < c->n; ++i) {
        k      = order[i];
        status = ivmrun_daemon_request(c->nodes[k].path, IVM_MSG_CLUSTER, req,
                                       (uint32_t)len, IVMRUN_CLUSTER_REQ_WAIT, detail,
                                       sizeof(detail));
        if (status != IVM_SUCCESS) {
            ivm_error("the ivmd of %s (%s) did not join the cluster: %s%s%s",
                      c->nodes[k].node, c->nodes[k].path, ivm_status_string(status),
                      detail[0] != '\0' ? ": " : "", detail);
            goto out;
        }
        ivm_debug("sent the cluster table to %s (port %u)", c->nodes[k].node,
                  c->nodes[k].port);
    }
out:
    explicit_bzero(req, len); /* the secret lives on in the daemons only */
    free(req);
    return status;
}

/* Wait until every daemon reports the n-1 others up. */
static ivmError_t ivmrun_cluster_wait_up(ivmrun_cluster_t *c, int sigfd, int *signo_p)
{
    double start = ivmrun_time_now(), deadline = start + IVMRUN_CLUSTER_UP_WAIT;
    struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
    int up[IVMRUN_MAX_NODES];
    ivm_msg_info_rep_t info;
    char why[64], text[IVMRUN_MAX_NODES * 48];
    size_t pos;
    int k, ready, term;

    for (;;) {
        ready = 1;
        for (k = 0; k < c->n; ++k) {
            if (ivmrun_daemon_reap(&c->nodes[k])) {
                ivmrun_proc_status_text(c->nodes[k].status, why, sizeof(why));
                ivm_error("the ivmd of %s exited (%s) while the cluster was forming; "
                          "see its messages above", c->nodes[k].node, why);
                return IVM_ERROR_DAEMON_LOST;
            }
            if (ivm_client_info(c->nodes[k].path, IVMRUN_CLUSTER_INFO_WAIT, &info, NULL) !=
                IVM_SUCCESS) {
                up[k] = -1;
            } else {
                up[k] = (int)info.peers_up;
            }
            ready &= (up[k] == c->n - 1);
        }
        if (ready) {
            ivm_info("cluster of %d nodes is up (%.0f ms)", c->n,
                     (ivmrun_time_now() - start) * 1000);
            return IVM_SUCCESS;
        }
        if (ivmrun_time_now() >= deadline) {
            break;
        }
        if (poll(&pfd, 1, IVMRUN_CLUSTER_UP_POLL) > 0) {
            term = ivmrun_cluster_signals(sigfd);
            if (term != 0) {
                ivm_info("got signal %d while the cluster was forming; stopping it",
                         term);
                *signo_p = term;
                return IVM_ERROR_INTERNAL;
            }
        }
    }
    pos     = 0;
    text[0] = '\0';
    for (k = 0; k < c->n && pos < sizeof(text); ++k) {
        if (up[k] < 0) {
            pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%s%s: no answer",
                                    k > 0 ? ", " : "", c->nodes[k].node);
        } else {
            pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%s%s: %d of %d",
                                    k > 0 ? ", " : "", c->nodes[k].node, up[k],
                                    c->n - 1);
        }
    }
    ivm_error("the cluster did not come up within %g s; peers up as each node sees "
              "them: %s", IVMRUN_CLUSTER_UP_WAIT, text);
    return IVM_ERROR_TIMEOUT;
}

ivmError_t ivmrun_cluster_open(ivmrun_cluster_t *c, const ivmrun_config_t *cfg,
                               char *const *specs, int sigfd,
                               const sigset_t *child_mask, int *signo_p)
{
    ivmError_t status;
    int k;

    if (c->boot.nhosts > 0) {
        status = ivmrun_boot_open(&c->boot, &c->nodes[0], cfg, specs, sigfd, child_mask,
                                  signo_p);
        if (status == IVM_SUCCESS) {
            /* ivmrun is not the parent of these daemons: it learns that they
             * are gone from the end of a connection to node0's. */
            c->watch_fd = ivm_sock_connect(c->nodes[0].path);
            if (c->watch_fd < 0) {
                ivm_debug("cannot watch node0's daemon: %s",
                          ivm_status_string((ivmError_t)c->watch_fd));
                c->watch_fd = -1;
            }
        }
        return status;
    }
    if (!c->multi) {
        /* A daemon started for this run stops when ivmrun dies, even by SIGKILL. */
        c->nodes[0].pdeathsig = SIGTERM;
        return ivmrun_daemon_open(&c->nodes[0], cfg, sigfd, child_mask, signo_p);
    }
    status = ivmrun_cluster_mkdir(c);
    if (status != IVM_SUCCESS) {
        return status;
    }
    for (k = 0; k < c->n; ++k) {
        c->nodes[k].listen      = 1;
        c->nodes[k].cpu_devices = (specs != NULL) ? specs[k] : cfg->cpu_devices;
        /* If ivmrun dies (SIGKILL included), each daemon stops (its PEs
         * killed, its cgroups removed) and the last one removes the run
         * directory. */
        c->nodes[k].pdeathsig  = SIGTERM;
        c->nodes[k].remove_dir = 1;
        status = ivmrun_daemon_start(&c->nodes[k], cfg, sigfd, child_mask, signo_p);
        if (status != IVM_SUCCESS) {
            if (*signo_p == 0) {
                ivm_error("cannot start the ivmd of %s; stopping the cluster",
                          c->nodes[k].node);
            }
            goto fail;
        }
    }
    status = ivmrun_cluster_join(c);
    if (status != IVM_SUCCESS) {
        goto fail;
    }
    status = ivmrun_cluster_wait_up(c, sigfd, signo_p);
    if (status != IVM_SUCCESS) {
        goto fail;
    }
    return IVM_SUCCESS;

fail:
    ivmrun_cluster_close(c, sigfd);
    return status;
}
