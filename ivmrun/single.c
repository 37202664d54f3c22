/* --nodes 1: the node daemon that serves this user on this machine, at
 * --socket (or IVM_SOCKET, or <socket dir>/ivmd.sock); else one started for
 * the run, and stopped at its end (and if ivmrun dies: it gets SIGTERM,
 * PR_SET_PDEATHSIG).
 *
 * A daemon started for the run is the run's own: unless the user named its
 * socket (then it is shared, ivmrun_daemon_close), it listens in a private
 * run directory, not on the default path. On
 * the default path, a second ivmrun starting meanwhile took it for the
 * node's daemon and ran its job there, and the first run's end stopped it:
 * the second job lost its PEs (tests/integration/test_ivmrun.c, two
 * overlapping runs). Now each run that finds no daemon has its own. */
#include "bootstrap.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
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
    ivmrun_daemon_t *d = &c->nodes[0];
    ivmError_t status;

    if (c->cfg->socket[0] != '\0' || ivm_client_probe(d->path) != IVM_ERROR_NO_DAEMON) {
        /* The path the user named, or a daemon that serves the default one
         * (or a path that cannot be used: ivmrun_daemon_open says why). A
         * daemon started there is shared: another run may take it for the
         * node's daemon, so it must outlive this one while it serves that
         * run's job, and it ends by itself once idle (--exit-when-idle),
         * also when ivmrun is killed (its guard ends the root PE). */
        d->shared = 1;
        return ivmrun_daemon_open(d, c->opts, c->sigfd, c->child_mask, &c->signo);
    }
    /* A daemon started for this run alone stops when ivmrun dies, even by
     * SIGKILL. */
    d->pdeathsig = SIGTERM;
    status = ivmrun_run_dir_make(c, sizeof("/ivmd.sock"));
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (snprintf(d->path, sizeof(d->path), "%s/ivmd.sock", c->dir) >= (int)sizeof(d->path)) {
        ivmrun_run_dir_remove(c); /* not reached: the room was checked */
        return IVM_ERROR_INVALID_VALUE;
    }
    /* The last daemon in it removes the directory, also when ivmrun died. */
    d->remove_dir = 1;
    status = ivmrun_daemon_start(d, c->opts, c->sigfd, c->child_mask, &c->signo);
    if (status != IVM_SUCCESS) {
        ivmrun_run_dir_remove(c);
    }
    return status;
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
    ivmrun_run_dir_remove(c);
}

const ivmrun_boot_ops_t ivmrun_boot_daemon = {
    .name  = "daemon",
    .check = ivmrun_single_check,
    .start = ivmrun_single_start,
    .reap  = ivmrun_single_reap,
    .stop  = ivmrun_single_stop,
};
