/* --nodes 1: the node daemon that serves this user on this machine, at
 * --socket (or IVM_SOCKET, or <socket dir>/ivmd.sock); started for the run if
 * none answers there, and then stopped at its end (and if ivmrun dies: it
 * gets SIGTERM, PR_SET_PDEATHSIG). */
#include "bootstrap.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "sock.h"

#define IVMRUN_EXIT_USAGE 2

/* The socket: --socket, else the default path. */
static int ivmrun_single_check(ivmrun_cluster_t *c)
{
    const char *socket = c->cfg->socket;
    ivmrun_daemon_t *d = &c->nodes[0];

    c->n = 1;
    if (socket[0] != '\0') {
        if (strlen(socket) >= sizeof(d->path)) {
            ivm_error("daemon socket path '%s' (--socket or IVM_SOCKET) is too long for "
                      "a Unix socket", socket);
            return IVMRUN_EXIT_USAGE;
        }
        snprintf(d->path, sizeof(d->path), "%s", socket);
    } else if (ivm_sock_path(d->path, sizeof(d->path)) != IVM_SUCCESS) {
        ivm_error("the daemon socket path (from IVM_SOCKET_DIR or XDG_RUNTIME_DIR) "
                  "is too long for a Unix socket");
        return IVMRUN_EXIT_USAGE;
    }
    return 0;
}

static ivmError_t ivmrun_single_start(ivmrun_cluster_t *c)
{
    /* A daemon started for this run stops when ivmrun dies, even by SIGKILL. */
    c->nodes[0].pdeathsig = SIGTERM;
    return ivmrun_daemon_open(&c->nodes[0], c->opts, c->sigfd, c->child_mask, &c->signo);
}

static int ivmrun_single_reap(ivmrun_cluster_t *c)
{
    char why[64];

    if (ivmrun_daemon_reap(&c->nodes[0])) {
        ivmrun_proc_status_text(c->nodes[0].status, why, sizeof(why));
        ivm_warn("the ivmd started for this job exited early (%s)", why);
    }
    return 0;
}

static void ivmrun_single_stop(ivmrun_cluster_t *c)
{
    ivmrun_daemon_close(&c->nodes[0], c->sigfd);
}

const ivmrun_boot_ops_t ivmrun_boot_daemon = {
    .name  = "daemon",
    .check = ivmrun_single_check,
    .start = ivmrun_single_start,
    .reap  = ivmrun_single_reap,
    .stop  = ivmrun_single_stop,
};
