/* ivmd: bring-up (settings, socket, signals), the loop, and teardown. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ivmd.h"
#include "log.h"
#include "sock.h"
#include "status.h"
#include "topo.h"
#include "version.h"

#define IVMD_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmd_config, __VA_ARGS__)
static const ivm_config_field_t ivmd_config_fields[] = {
    IVMD_CONFIG_TABLE(IVMD_CONFIG_FIELD) {0}};

static void ivmd_usage(FILE *out)
{
    fprintf(out, "usage: ivmd [options]\n"
                 "The IVM node daemon: serves the PEs of this node on a Unix socket.\n\n"
                 "options:\n");
    ivm_config_print_help(ivmd_config_fields, out);
}

static ivmError_t ivmd_parse(ivmd_t *d, int argc, char **argv)
{
    char err[256];
    int first, help, level;

    if (ivm_config_defaults(ivmd_config_fields, &d->cfg) != IVM_SUCCESS ||
        ivm_config_load_env(ivmd_config_fields, &d->cfg, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_config_parse_args(ivmd_config_fields, &d->cfg, argc, argv, &first, &help, err,
                              sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (help == IVM_CONFIG_ASK_MAN) {
        ivm_config_print_man(ivmd_config_fields, stdout);
        exit(0);
    }
    if (help == IVM_CONFIG_ASK_VERSION) {
        ivm_version_print(stdout, "ivmd");
        exit(0);
    }
    if (help) {
        ivmd_usage(stdout);
        exit(0);
    }
    if (first < argc) {
        ivm_error("unexpected argument '%s' (see --help)", argv[first]);
        return IVM_ERROR_INVALID_VALUE;
    }
    level = ivm_log_level_parse(d->cfg.log_level);
    if (level < 0) {
        ivm_error("bad log level '%s'", d->cfg.log_level);
        return IVM_ERROR_INVALID_VALUE;
    }
    ivm_log_current_level = level;
    if (strlen(d->cfg.node) == 0 || strlen(d->cfg.node) > IVM_HOST_MAX) {
        ivm_error("node name must have 1 to %d characters", IVM_HOST_MAX);
        return IVM_ERROR_INVALID_VALUE;
    }
    ivm_log_set_prefix("%s ivmd", d->cfg.node);
    if (d->cfg.poll_us < 0 || d->cfg.poll_us > IVMD_POLL_US_MAX) {
        ivm_error("--poll-us %ld is outside 0..%d", d->cfg.poll_us,
                IVMD_POLL_US_MAX);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (*d->cfg.cpu_devices != '\0') {
        if (ivm_topo_devspec_parse(d->cfg.cpu_devices, (int)sysconf(_SC_NPROCESSORS_CONF),
                              d->devs, IVM_DEVSPEC_MAX_DEVICES, &d->ndevs, err,
                              sizeof(err)) != IVM_SUCCESS) {
            ivm_error("--cpu-devices: %s", err);
            return IVM_ERROR_INVALID_VALUE;
        }
    } else {
        ivm_devspec_default(&d->devs[0]);
        d->devs[0].numa = ivm_topo_numa_of(&d->devs[0].cores);
        d->ndevs = 1;
    }
    if (*d->cfg.gpu_shares != '\0') {
        /* The syntax now; the GPU numbers once ivm-gpud reported its GPUs. */
        ivm_gpu_share_t shares[IVM_DEVSPEC_MAX_GPU_DEVICES];
        int nshares;
        if (ivm_devspec_gpu_shares_parse(d->cfg.gpu_shares, 0, shares,
                                         IVM_DEVSPEC_MAX_GPU_DEVICES, &nshares, err,
                                         sizeof(err)) != IVM_SUCCESS) {
            ivm_error("%s", err);
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_listen(ivmd_t *d)
{
    struct sockaddr_un addr;
    char dir[sizeof(addr.sun_path)];
    char *slash;
    ivmError_t status;
    int fd;

    if (*d->cfg.socket != '\0') {
        if (strlen(d->cfg.socket) >= sizeof(d->socket_path)) {
            ivm_error("socket path %s is too long (max %zu)", d->cfg.socket,
                      sizeof(d->socket_path) - 1);
            return IVM_ERROR_INVALID_VALUE;
        }
        strcpy(d->socket_path, d->cfg.socket);
    } else {
        status = ivm_sock_dir(dir, sizeof(dir));
        if (status != IVM_SUCCESS ||
            snprintf(d->socket_path, sizeof(d->socket_path), "%s/%s", dir,
                     IVM_SOCKET_NAME) >= (int)sizeof(d->socket_path)) {
            ivm_error("socket directory path is too long");
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    strcpy(dir, d->socket_path);
    slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        status = ivm_sock_dir_prepare(dir);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    /* A live daemon on the path keeps it; a stale socket file is replaced. */
    fd = ivm_sock_connect(d->socket_path);
    if (fd >= 0) {
        close(fd);
        ivm_error("another ivmd already serves %s", d->socket_path);
        return IVM_ERROR_EXISTS;
    }
    unlink(d->socket_path);

    d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->listen_fd < 0) {
        ivm_error("socket: %m");
        return IVM_ERROR_INTERNAL;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, d->socket_path);
    if (bind(d->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        ivm_error("bind %s: %m", d->socket_path);
        return IVM_ERROR_PERMISSION;
    }
    chmod(d->socket_path, 0600);
    if (listen(d->listen_fd, 512) != 0) {
        ivm_error("listen %s: %m", d->socket_path);
        return IVM_ERROR_INTERNAL;
    }
    d->listen_h = (ivmd_handler_t){.fd = d->listen_fd, .cb = ivmd_conn_accept, .arg = NULL};
    return ivmd_loop_add(d, &d->listen_h, EPOLLIN);
}

static void ivmd_on_signal(ivmd_t *d, void *arg, uint32_t events)
{
    struct signalfd_siginfo si;

    while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            ivmd_spawn_reap(d);
        } else {
            ivm_info("signal %d: shutting down", (int)si.ssi_signo);
            d->stopping = 1;
        }
    }
}

static ivmError_t ivmd_signals_open(ivmd_t *d)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
        ivm_error("sigprocmask: %m");
        return IVM_ERROR_INTERNAL;
    }
    signal(SIGPIPE, SIG_IGN);
    d->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (d->signal_fd < 0) {
        ivm_error("signalfd: %m");
        return IVM_ERROR_INTERNAL;
    }
    d->signal_h = (ivmd_handler_t){.fd = d->signal_fd, .cb = ivmd_on_signal, .arg = NULL};
    if (ivmd_loop_add(d, &d->signal_h, EPOLLIN) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (d->timer_fd < 0) {
        ivm_error("timerfd_create: %m");
        return IVM_ERROR_INTERNAL;
    }
    d->timer_h = (ivmd_handler_t){.fd = d->timer_fd, .cb = ivmd_job_grace_expired};
    return ivmd_loop_add(d, &d->timer_h, EPOLLIN);
}

static void ivmd_ready(ivmd_t *d)
{
    int fd = (int)d->cfg.ready_fd;
    char line[32];
    int len;

    if (fd < 0) {
        return;
    }
    len = (d->tcp_fd >= 0) ? snprintf(line, sizeof(line), "R %u\n", (unsigned)d->tcp_port)
                           : snprintf(line, sizeof(line), "R\n");
    if (write(fd, line, (size_t)len) != len) {
        ivm_warn("cannot write the readiness byte to fd %d: %m", fd);
    }
    close(fd);
}

/* --remove-dir: the socket's directory goes with the last daemon in it. A
 * launcher that died cannot remove the run directory it made; the daemons
 * it started (stopped by PR_SET_PDEATHSIG) do, the last one to leave. */
static void ivmd_remove_run_dir(const ivmd_t *d)
{
    char dir[sizeof(d->socket_path)];
    char *slash;

    snprintf(dir, sizeof(dir), "%s", d->socket_path);
    slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) {
        return;
    }
    *slash = '\0';
    if (rmdir(dir) == 0) {
        ivm_debug("removed the run directory %s", dir);
    } else if (errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
        ivm_warn("cannot remove the run directory %s: %m", dir);
    }
}

/* Teardown, in reverse of bring-up: jobs (their PEs killed), connections,
 * forwarders, signals, socket. */
static void ivmd_teardown(ivmd_t *d)
{
    ivmd_job_t *job, *next;

    ivmd_peer_say_bye(d);
    for (job = d->reg.jobs; job != NULL; job = next) {
        next = job->next;
        ivmd_job_terminate(d, job, "the daemon is shutting down");
    }
    ivmd_gpu_stop(d);
    while (d->conns != NULL) {
        ivmd_conn_close(d, d->conns, "daemon shutdown");
    }
    ivmd_conn_reap(d);
    ivmd_output_close_all(d);
    /* Reap the PEs we killed, briefly, so none is left a zombie. */
    for (int tries = 0; tries < 100 && d->reg.njobs > 0; ++tries) {
        ivmd_spawn_reap(d);
        if (d->reg.njobs > 0) {
            usleep(10000);
        }
    }
    while (d->reg.jobs != NULL) {
        /* A PE forked by a parked process may still be watched (its pidfd
         * not yet readable): drop the watch with the PE. */
        for (int i = 0; i < d->reg.jobs->next_pe_id; ++i) {
            if (d->reg.jobs->pes[i] != NULL) {
                ivmd_spawn_unwatch(d, d->reg.jobs->pes[i]);
            }
        }
        ivmd_job_data_free(d->reg.jobs->data);
        ivmd_job_destroy(&d->reg, d->reg.jobs);
    }
    ivmd_devcg_close(d);
    ivmd_cluster_close_all(d);
    ivmd_peer_close_all(d);
    if (d->signal_fd >= 0) {
        close(d->signal_fd);
    }
    if (d->timer_fd >= 0) {
        close(d->timer_fd);
    }
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        unlink(d->socket_path);
        if (d->cfg.remove_dir) {
            ivmd_remove_run_dir(d);
        }
    }
    if (d->devnull >= 0) {
        close(d->devnull);
    }
    ivmd_limits_close(d);
    close(d->epfd);
    ivm_config_release(ivmd_config_fields, &d->cfg);
}

int main(int argc, char **argv)
{
    static ivmd_t daemon_state;
    ivmd_t *d = &daemon_state;
    char err[512];
    int rc;

    memset(d, 0, sizeof(*d));
    d->listen_fd = d->signal_fd = d->timer_fd = d->devnull = -1;
    d->tcp_fd = d->tick_fd = -1;
    d->uid = getuid();
    ivm_log_set_prefix("ivmd");
    if (ivmd_parse(d, argc, argv) != IVM_SUCCESS) {
        return 2;
    }
    sched_getaffinity(0, sizeof(d->own_affinity), &d->own_affinity);
    if (ivmd_devcg_open(d, err, sizeof(err)) != IVM_SUCCESS) {
        ivm_error("--cpu-devices '%s' has shares of cores, enforced with a cgroup CPU "
                  "bandwidth limit, which this daemon cannot set up: %s", d->cfg.cpu_devices,
                  err);
        ivmd_devcg_close(d);
        return 1;
    }
    ivmd_registry_init(&d->reg, &ivmd_job_ops, d);
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (d->epfd < 0 || d->devnull < 0) {
        ivm_error("epoll_create1 or /dev/null: %m");
        return 1;
    }
    if (ivmd_limits_open(d) != IVM_SUCCESS || ivmd_signals_open(d) != IVM_SUCCESS ||
        ivmd_listen(d) != IVM_SUCCESS ||
        ivmd_peer_listen(d) != IVM_SUCCESS || ivmd_gpu_start(d) != IVM_SUCCESS) {
        ivmd_teardown(d);
        return 1;
    }
    ivm_info("listening on %s (%d CPU device%s, %u GPU device%s)", d->socket_path, d->ndevs,
             d->ndevs == 1 ? "" : "s", ivmd_gpu_count(d), ivmd_gpu_count(d) == 1 ? "" : "s");
    ivmd_ready(d);
    rc = ivmd_loop_run(d);
    ivmd_teardown(d);
    return rc == 0 ? 0 : 1;
}
