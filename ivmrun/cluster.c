/* The daemons of a run: the bootstrap chosen for the settings
 * (ivmrun_boot_select, the one place that chooses) and the driver that runs
 * its phases (bootstrap.h). */
#include "bootstrap.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

/* --slurm: srun; --hosts, --hostfile: mpirun; --nodes N > 1: simulated
 * nodes; else the one node daemon. */
static const ivmrun_boot_ops_t *ivmrun_boot_select(const ivmrun_config_t *cfg)
{
    if (cfg->slurm) {
        return &ivmrun_boot_srun;
    }
    if (cfg->hosts[0] != '\0' || cfg->hostfile[0] != '\0') {
        return &ivmrun_boot_mpirun;
    }
    return cfg->nodes > 1 ? &ivmrun_boot_local : &ivmrun_boot_daemon;
}

int ivmrun_cluster_plan(ivmrun_cluster_t *c)
{
    c->ops         = ivmrun_boot_select(c->cfg);
    c->watch_fd    = -1;
    c->boot.pid    = 0;
    c->boot.in_fd  = -1;
    c->boot.out_fd = -1;
    ivm_debug("bootstrap: %s", c->ops->name);
    return c->ops->check != NULL ? c->ops->check(c) : 0;
}

ivmError_t ivmrun_cluster_open(ivmrun_cluster_t *c)
{
    const ivmrun_boot_ops_t *ops = c->ops;
    ivmError_t status;

    c->signo = 0;
    status   = ops->start != NULL ? ops->start(c) : IVM_SUCCESS;
    if (status == IVM_SUCCESS && ops->table != NULL) {
        status = ops->table(c);
    }
    if (status == IVM_SUCCESS && ops->wait_ready != NULL) {
        status = ops->wait_ready(c);
    }
    if (status != IVM_SUCCESS) {
        ivmrun_cluster_close(c);
    }
    return status;
}

int ivmrun_cluster_reap(ivmrun_cluster_t *c)
{
    return c->ops->reap != NULL ? c->ops->reap(c) : 0;
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

void ivmrun_cluster_close(ivmrun_cluster_t *c)
{
    if (c->watch_fd >= 0) {
        close(c->watch_fd);
        c->watch_fd = -1;
    }
    c->ops->stop(c);
}
