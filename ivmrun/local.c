/* --nodes N > 1: N fresh daemons in a private run directory joined into one
 * cluster over loopback TCP: start each with --listen, send each the same
 * CLUSTER table with a fresh secret, wait until each sees the others; at the
 * end stop them all and remove their sockets and the directory. Each daemon
 * gets SIGTERM if ivmrun dies (PR_SET_PDEATHSIG), and the last daemon of the
 * run directory removes it (ivmd --remove-dir). */
#include "bootstrap.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_LOCAL_ADDR      "127.0.0.1" /* where simulated nodes listen */
#define IVMRUN_LOCAL_UP_WAIT   10.0  /* s for every node to see every peer */
#define IVMRUN_LOCAL_UP_POLL   20    /* ms between INFO rounds meanwhile */
#define IVMRUN_LOCAL_INFO_WAIT 1000  /* ms an INFO round trip may take */
#define IVMRUN_LOCAL_STOP_WAIT 5.0   /* s between SIGTERM and SIGKILL */

static int ivmrun_local_check(ivmrun_cluster_t *c)
{
    c->n = (int)c->cfg->nodes;
    return 0;
}

/* Daemons we started that are not yet reaped. */
static int ivmrun_local_alive(const ivmrun_cluster_t *c)
{
    int k, alive = 0;

    for (k = 0; k < c->n; ++k) {
        alive += (c->nodes[k].started && c->nodes[k].pid > 0);
    }
    return alive;
}

static int ivmrun_local_reap(ivmrun_cluster_t *c)
{
    char why[64];
    int k;

    for (k = 0; k < c->n; ++k) {
        if (ivmrun_daemon_reap(&c->nodes[k])) {
            ivmrun_proc_status_text(c->nodes[k].status, why, sizeof(why));
            ivm_warn("the ivmd of %s exited early (%s)", c->nodes[k].node, why);
        }
    }
    return 0;
}

void ivmrun_run_dir_remove(ivmrun_cluster_t *c)
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

ivmError_t ivmrun_run_dir_make(ivmrun_cluster_t *c, size_t room)
{
    char base[sizeof(c->dir)];
    ivmError_t status;
    int len;

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
    if (len < 0 || (size_t)len + room > sizeof(c->dir)) {
        ivm_error("the socket directory %s is too long to hold the daemons' sockets "
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
    return IVM_SUCCESS;
}

/* Make the run directory and name the nodes' sockets in it. */
static ivmError_t ivmrun_local_mkdir(ivmrun_cluster_t *c)
{
    ivmError_t status = ivmrun_run_dir_make(c, sizeof("/node63.sock"));
    int k, len;

    if (status != IVM_SUCCESS) {
        return status;
    }
    for (k = 0; k < c->n; ++k) {
        snprintf(c->nodes[k].node, sizeof(c->nodes[k].node), "node%d", k);
        len = snprintf(c->nodes[k].path, sizeof(c->nodes[k].path), "%s/%s.sock", c->dir,
                       c->nodes[k].node);
        if (len < 0 || (size_t)len >= sizeof(c->nodes[k].path)) {
            ivm_error("socket path %s/%s.sock is too long", c->dir, c->nodes[k].node);
            ivmrun_run_dir_remove(c);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    return IVM_SUCCESS;
}

/* Send every daemon the CLUSTER table with a fresh secret. */
static ivmError_t ivmrun_local_table(ivmrun_cluster_t *c)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + (size_t)c->n * sizeof(ivm_msg_cluster_node_t);
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
        ivm_proto_strset(nodes[k].addr, sizeof(nodes[k].addr), IVMRUN_LOCAL_ADDR);
        nodes[k].port      = (uint16_t)c->nodes[k].port;
        nodes[k].slots     = c->slots[k].slots;
        nodes[k].max_slots = c->slots[k].max_slots;
    }
    ivmrun_join_order(c->n, order);
    for (i = 0; i < c->n; ++i) {
        k      = order[i];
        status = ivmrun_daemon_join(&c->nodes[k], req, len);
        if (status != IVM_SUCCESS) {
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


/* Start the daemons, node0..node<n-1>, in the run directory. */
static ivmError_t ivmrun_local_start(ivmrun_cluster_t *c)
{
    ivmError_t status = ivmrun_local_mkdir(c);
    int k;

    for (k = 0; k < c->n && status == IVM_SUCCESS; ++k) {
        c->nodes[k].listen      = 1;
        c->nodes[k].cpu_devices = (c->specs != NULL) ? c->specs[k] : c->cfg->cpu_devices;
        /* If ivmrun dies (SIGKILL included), each daemon stops (its PEs
         * killed, its cgroups removed) and the last one removes the run
         * directory. */
        c->nodes[k].pdeathsig  = SIGTERM;
        c->nodes[k].remove_dir = 1;
        status = ivmrun_daemon_start(&c->nodes[k], c->opts, c->sigfd, c->child_mask,
                                     &c->signo);
        if (status != IVM_SUCCESS && c->signo == 0) {
            ivm_error("cannot start the ivmd of %s; stopping the cluster",
                      c->nodes[k].node);
        }
    }
    return status;
}

/* Peers up as each node sees them (up[k] < 0: no answer), in text. */
static void ivmrun_local_up_text(const ivmrun_cluster_t *c, const int *up, char *text,
                                 size_t len)
{
    size_t pos = 0;
    int k;

    text[0] = '\0';
    for (k = 0; k < c->n && pos < len; ++k) {
        if (up[k] < 0) {
            pos += (size_t)snprintf(text + pos, len - pos, "%s%s: no answer",
                                    k > 0 ? ", " : "", c->nodes[k].node);
        } else {
            pos += (size_t)snprintf(text + pos, len - pos, "%s%s: %d of %d",
                                    k > 0 ? ", " : "", c->nodes[k].node, up[k], c->n - 1);
        }
    }
}

/* One round: each daemon's peers up into up[]. 1 when all see all, 0 if
 * not yet, or an error status (a daemon exited). */
static int ivmrun_local_up_round(ivmrun_cluster_t *c, int *up, ivmError_t *status_p)
{
    ivm_msg_info_rep_t info;
    char why[64];
    int k, ready = 1;

    for (k = 0; k < c->n; ++k) {
        if (ivmrun_daemon_reap(&c->nodes[k])) {
            ivmrun_proc_status_text(c->nodes[k].status, why, sizeof(why));
            ivm_error("the ivmd of %s exited (%s) while the cluster was forming; "
                      "see its messages above", c->nodes[k].node, why);
            *status_p = IVM_ERROR_DAEMON_LOST;
            return -1;
        }
        if (ivm_client_info(c->nodes[k].path, IVMRUN_LOCAL_INFO_WAIT, &info, NULL) !=
            IVM_SUCCESS) {
            up[k] = -1;
        } else {
            up[k] = (int)info.peers_up;
        }
        ready &= (up[k] == c->n - 1);
    }
    return ready;
}

/* Wait until every daemon reports the n-1 others up. */
static ivmError_t ivmrun_local_wait_ready(ivmrun_cluster_t *c)
{
    double start = ivmrun_time_now(), deadline = start + IVMRUN_LOCAL_UP_WAIT;
    struct pollfd pfd = {.fd = c->sigfd, .events = POLLIN};
    char text[IVMRUN_MAX_NODES * 48];
    int up[IVMRUN_MAX_NODES], ready;
    ivmError_t status = IVM_SUCCESS;

    for (;;) {
        ready = ivmrun_local_up_round(c, up, &status);
        if (ready < 0) {
            return status;
        }
        if (ready) {
            ivm_info("cluster of %d nodes is up (%.0f ms)", c->n,
                     (ivmrun_time_now() - start) * 1000);
            return IVM_SUCCESS;
        }
        if (ivmrun_time_now() >= deadline) {
            break;
        }
        if (poll(&pfd, 1, IVMRUN_LOCAL_UP_POLL) > 0) {
            c->signo = ivmrun_proc_signals(c->sigfd, NULL, NULL);
            if (c->signo != 0) {
                ivm_info("got signal %d while the cluster was forming; stopping it",
                         c->signo);
                return IVM_ERROR_INTERNAL;
            }
        }
    }
    ivmrun_local_up_text(c, up, text, sizeof(text));
    ivm_error("the cluster did not come up within %g s; peers up as each node sees "
              "them: %s", IVMRUN_LOCAL_UP_WAIT, text);
    return IVM_ERROR_TIMEOUT;
}

/* SIGTERM to every daemon, and wait at most IVMRUN_LOCAL_STOP_WAIT for them
 * to exit. */
static void ivmrun_local_term(ivmrun_cluster_t *c)
{
    struct pollfd pfd = {.fd = c->sigfd, .events = POLLIN};
    double deadline, left;
    ivmrun_daemon_t *d;
    int k;

    for (k = 0; k < c->n; ++k) {
        d = &c->nodes[k];
        ivmrun_daemon_reap(d);
        if (d->started && d->pid > 0) {
            ivm_info("stopping the ivmd of %s (pid %d)", d->node, (int)d->pid);
            kill(d->pid, SIGTERM);
        }
    }
    /* Terminating signals read here are dropped: teardown is under way. */
    deadline = ivmrun_time_now() + IVMRUN_LOCAL_STOP_WAIT;
    for (;;) {
        for (k = 0; k < c->n; ++k) {
            ivmrun_daemon_reap(&c->nodes[k]);
        }
        left = deadline - ivmrun_time_now();
        if (ivmrun_local_alive(c) == 0 || left <= 0) {
            break;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0) {
            ivmrun_proc_signals(c->sigfd, NULL, NULL);
        }
    }
}

/* Stop the daemons (SIGTERM to all, SIGKILL after 5 s), remove their
 * sockets and the run directory. */
static void ivmrun_local_stop(ivmrun_cluster_t *c)
{
    ivmrun_daemon_t *d;
    char why[64];
    int k;

    ivmrun_local_term(c);
    for (k = 0; k < c->n; ++k) {
        d = &c->nodes[k];
        if (!d->started) {
            continue;
        }
        if (d->pid > 0) {
            ivm_warn("the ivmd of %s (pid %d) did not exit %g s after SIGTERM; "
                     "killing it", d->node, (int)d->pid, IVMRUN_LOCAL_STOP_WAIT);
            ivmrun_daemon_kill(d);
        } else if (!WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0) {
            ivmrun_proc_status_text(d->status, why, sizeof(why));
            ivm_warn("the ivmd of %s ended with %s", d->node, why);
        }
        ivmrun_daemon_unlink(d);
        d->started = 0;
    }
    ivmrun_run_dir_remove(c);
}

const ivmrun_boot_ops_t ivmrun_boot_local = {
    .name       = "local",
    .check      = ivmrun_local_check,
    .start      = ivmrun_local_start,
    .table      = ivmrun_local_table,
    .wait_ready = ivmrun_local_wait_ready,
    .reap       = ivmrun_local_reap,
    .stop       = ivmrun_local_stop,
};
