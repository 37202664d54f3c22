/* --hosts/--hostfile: the real cluster's bring-up through Open MPI. ivmrun
 * runs `mpirun ... ivm-boot` with one rank per host; ivm-boot starts the
 * hosts' daemons, joins them into one cluster and prints node0's socket path
 * (IVMRUN_BOOT_READY); node0 is this machine (the first host), where the
 * root PE runs. At the end ivmrun writes IVMRUN_BOOT_STOP and closes
 * ivm-boot's stdin, which stops it. */
#include "bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Open MPI (4.x): seconds mpirun waits from SIGTERM to SIGKILL of a rank. */
#define IVMRUN_MPIRUN_SIGKILL_VAR "OMPI_MCA_odls_base_sigkill_timeout"

static ivmError_t ivmrun_mpirun_start(ivmrun_cluster_t *c)
{
    const ivmrun_config_t *cfg = c->cfg;
    ivmrun_boot_t *b = &c->boot;
    char *mpirun_env[] = {IVMRUN_MPIRUN_SIGKILL_VAR "=0", NULL};
    char *args[16], np[16];
    ivmrun_boot_args_t *a;
    ivmError_t status = IVM_ERROR_INTERNAL;
    int argc = 0;

    b->stop_line = 1;
    b->deadline  = ivmrun_time_now() + cfg->boot_wait;
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        ivm_error("out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    if (ivmrun_boot_find(cfg, "ivm-boot", a->exe, sizeof(a->exe)) != 0) {
        status = IVM_ERROR_NO_DAEMON;
        goto out;
    }
    snprintf(np, sizeof(np), "%d", b->nhosts);
    args[argc++] = cfg->mpirun;
    if (geteuid() == 0) {
        args[argc++] = "--allow-run-as-root";
    }
    /* One rank per entry: --map-by node places rank k on the k-th host, and
     * a host named n times holds n ranks; no binding, as ivmd pins PEs itself. */
    args[argc++] = "-np";
    args[argc++] = np;
    args[argc++] = "--host";
    args[argc++] = b->host_list;
    args[argc++] = "--map-by";
    args[argc++] = "node";
    args[argc++] = "--bind-to";
    args[argc++] = "none";
    if (getenv("IVM_SOCKET_DIR") != NULL) {
        args[argc++] = "-x";
        args[argc++] = "IVM_SOCKET_DIR";
    }
    args[argc] = NULL;
    if (ivmrun_boot_argv(c, a, args, cfg->mpirun_args, "--mpirun-args") != 0) {
        goto out;
    }
    /* When a rank dies, mpirun ends the others: SIGTERM, and SIGKILL a second
     * later by default, and it exits only then. With no wait it is all over
     * at once: what matters was done by then or is done anyway (each ivmd
     * stops when its ivm-boot dies, and removes its run directory), and
     * mpirun still removes MPI's shared-memory segments. */
    if (getenv(IVMRUN_MPIRUN_SIGKILL_VAR) != NULL) {
        mpirun_env[0] = NULL; /* the user's setting holds */
    }
    if (ivmrun_boot_launch(b, a->argv, mpirun_env, c->child_mask,
                           " (install Open MPI, or name it with --mpirun)") != 0) {
        goto out;
    }
    ivm_info("started %s (pid %d): ivm-boot '%s' on %d host%s (%s)", cfg->mpirun,
             (int)b->pid, a->exe, b->nhosts, b->nhosts == 1 ? "" : "s", b->host_list);
    status = IVM_SUCCESS;
out:
    ivmrun_boot_args_release(a);
    free(a);
    return status;
}

/* Until ivm-boot's ready line names node0's socket. */
static ivmError_t ivmrun_mpirun_wait_ready(ivmrun_cluster_t *c)
{
    size_t rlen = strlen(IVMRUN_BOOT_READY);
    double started = c->boot.deadline - c->cfg->boot_wait;
    ivmrun_daemon_t *d = &c->nodes[0];
    char line[IVMRUN_BOOT_OUT_MAX];
    ivmError_t status;

    for (;;) {
        status = ivmrun_boot_line(c, line, sizeof(line));
        if (status != IVM_SUCCESS) {
            return status;
        }
        if (strncmp(line, IVMRUN_BOOT_READY, rlen) == 0) {
            break;
        }
        /* Not ours: somebody's output, passed on. */
        (void)ivmrun_fd_write_all(STDOUT_FILENO, line, strlen(line));
        (void)ivmrun_fd_write_all(STDOUT_FILENO, "\n", 1);
    }
    if (strlen(line + rlen) >= sizeof(d->path)) {
        ivm_error("ivm-boot reported a socket path that is too long: %s", line + rlen);
        return IVM_ERROR_INTERNAL;
    }
    snprintf(d->path, sizeof(d->path), "%s", line + rlen);
    return ivmrun_boot_ready(c, started);
}

static void ivmrun_mpirun_stop(ivmrun_cluster_t *c)
{
    ivmrun_boot_close(&c->boot, c->sigfd);
}

const ivmrun_boot_ops_t ivmrun_boot_mpirun = {
    .name       = "mpirun",
    .check      = ivmrun_hosts_check,
    .start      = ivmrun_mpirun_start,
    .wait_ready = ivmrun_mpirun_wait_ready,
    .reap       = ivmrun_hosts_reap,
    .stop       = ivmrun_mpirun_stop,
};
