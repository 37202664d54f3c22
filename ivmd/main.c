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

#include "gpud_proto.h"
#include "data/copies.h"
#include "data/ucx.h"
#include "handlers.h"
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
    char err[512];
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
    if (ivmd_link_congestion_check(d->cfg.tcp_congestion, err, sizeof(err)) != IVM_SUCCESS) {
        /* The default (cubic) is in nearly every kernel: where it is not,
         * the links keep the system's; a choice of the user's must hold. */
        if (strcmp(d->cfg.tcp_congestion, IVMD_TCP_CONGESTION_DEFAULT) != 0 ||
            ivm_config_set(ivmd_config_fields, &d->cfg, "tcp-congestion",
                           IVMD_LINK_CONGESTION_SYSTEM, err, sizeof(err)) != IVM_SUCCESS) {
            ivm_error("--tcp-congestion %s: %s (system: the system's default)",
                      d->cfg.tcp_congestion, err);
            return IVM_ERROR_INVALID_VALUE;
        }
        ivm_warn("--tcp-congestion %s unavailable: the peer links keep the system's "
                 "default", IVMD_TCP_CONGESTION_DEFAULT);
    }
    if (strcmp(d->cfg.transport, "tcp") != 0 && strcmp(d->cfg.transport, "ucx") != 0 &&
        strcmp(d->cfg.transport, "auto") != 0) {
        ivm_error("--transport %s: expected tcp, ucx or auto", d->cfg.transport);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (ivmd_copies_huge_open(&d->data, d->cfg.huge_pages, (int)d->cfg.reserve_memory, err,
                              sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
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

/* ------------------------------------------------ wiring of the layers */

/* A PE connection: within the fd budget and the connection limits. */
static ivmError_t ivmd_pe_admit(ivmd_t *d, int fd, pid_t pid, char *why, size_t why_len)
{
    if (!ivmd_limits_conn_fd_ok(d, fd)) {
        snprintf(why, why_len, "fd %d is in the daemon's reserve (--fd-reserve %ld)", fd,
                 d->cfg.fd_reserve);
        return IVM_ERROR_LIMIT;
    }
    return ivmd_limits_conn_admit(d, why, why_len);
}

static ivmError_t ivmd_pe_check_msg(ivmd_t *d, ivmd_conn_t *c, const char **why_p)
{
    ivmError_t status = ivm_proto_check_req(&c->hdr, c->payload, why_p);

    if (status != IVM_SUCCESS) {
        ivm_warn_limited("pid %d sent a malformed %s request (%s): connection dropped",
                         (int)c->peer_pid, ivm_proto_type_name(c->hdr.type), *why_p);
    }
    return status;
}

static void ivmd_pe_malformed(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_warn_limited("pid %d sent a malformed message (%s, type %s, length %u): "
                     "connection dropped", (int)c->peer_pid, why,
                     ivm_proto_type_name(c->hdr.type), (unsigned)c->hdr.length);
}

/* A PE's connection (or a remote PE's virtual one) closed. */
static void ivmd_pe_on_close(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_debug("closing connection of pid %d: %s", (int)c->peer_pid, why);
    ivmd_handle_disconnect(d, c);
}

static void ivmd_gpud_malformed(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_error("ivm-gpud sent a malformed message (%s, type %u, length %u): its socket is "
              "closed", why, (unsigned)c->hdr.type, (unsigned)c->hdr.length);
}

static const ivmd_conn_ops_t ivmd_pe_conn_ops = {
    .name         = "PE",
    .out_limit    = IVMD_CONN_PE_OUT_LIMIT,
    .flags        = IVMD_CONN_F_COUNTED | IVMD_CONN_F_ONE_PER_WAKE | IVMD_CONN_F_POLL_AFTER,
    .check_hdr    = ivm_proto_check_hdr,
    .check_msg    = ivmd_pe_check_msg,
    .on_msg       = ivmd_handle_msg,
    .on_close     = ivmd_pe_on_close,
    .on_malformed = ivmd_pe_malformed,
};

static const ivmd_conn_ops_t ivmd_remote_conn_ops = {
    .name      = "remote PE",
    .on_close  = ivmd_pe_on_close,
    .on_output = ivmd_remote_vconn_reply,
};

static const ivmd_conn_ops_t ivmd_gpud_conn_ops = {
    .name         = "ivm-gpud",
    .check_hdr    = ivm_gpud_check_hdr,
    .on_msg       = ivmd_gpu_handle_msg,
    .on_close     = ivmd_gpu_lost,
    .on_malformed = ivmd_gpud_malformed,
};

static void ivmd_output_before_sleep(ivmd_t *d, void *arg)
{
    ivmd_output_reap(&d->output);
}

/* --exit-when-idle: once the last job ended and no client is connected. */
static void ivmd_idle_exit(ivmd_t *d, void *arg)
{
    if (d->cfg.exit_when_idle && !d->loop.quit && d->conns.had_client &&
        d->reg.njobs == 0 && d->conns.nclients == 0) {
        ivm_info("idle: no job and no client left, exiting");
        ivmd_loop_quit(&d->loop);
    }
}

static int ivmd_pool_idle_want(ivmd_t *d, void *arg)
{
    switch (ivmd_pool_wanted(&d->pool)) {
    case IVMD_POOL_EMPTY:
        return IVMD_LOOP_IDLE_NOW;
    case IVMD_POOL_SHORT:
        return IVMD_LOOP_IDLE_SOON;
    default:
        return IVMD_LOOP_IDLE_NONE;
    }
}

static void ivmd_pool_idle_run(ivmd_t *d, void *arg)
{
    ivmd_pool_fill(&d->pool);
}

/* Cluster operations in flight: --poll-us keeps polling for their answers. */
static int ivmd_ops_busy(ivmd_t *d, void *arg)
{
    return ivmd_cluster_busy(d);
}

/* The fd budget, then the quotas drawn on it. */
static ivmError_t ivmd_limits_open(ivmd_t *d)
{
    const ivmd_netlimits_cfg_t net_cfg = {.max_fds            = d->cfg.max_fds,
                                          .fd_reserve         = d->cfg.fd_reserve,
                                          .preauth_per_source = d->cfg.preauth_per_source,
                                          .preauth_rate       = d->cfg.preauth_rate};
    const ivmd_quota_cfg_t quota_cfg = {.node                = d->cfg.node,
                                        .max_objects_per_job = d->cfg.max_objects_per_job,
                                        .max_objects         = d->cfg.max_objects,
                                        .max_bytes_per_job   = d->cfg.max_bytes_per_job,
                                        .max_bytes           = d->cfg.max_bytes,
                                        .max_pes_per_job     = d->cfg.max_pes_per_job,
                                        .max_pes             = d->cfg.max_pes,
                                        .max_conns           = d->cfg.max_conns,
                                        .reserve_memory      = (int)d->cfg.reserve_memory};

    const ivmd_quota_mem_ops_t mem = {.place  = ivmd_numa_place,
                                       .reserve = ivmd_copies_reserve,
                                       .arg    = &d->data};

    ivmd_quota_init(&d->quota, &quota_cfg, &d->reg, &d->conns, &d->net, &mem);
    return ivmd_netlimits_open(&d->net, &d->loop, &d->conns, &net_cfg);
}

/* Joined a cluster as node self: job ids name their root daemon's node,
 * unique in the cluster. */
static void ivmd_joined(ivmd_t *d, uint32_t self)
{
    if (d->reg.njobs == 0) {
        d->reg.next_job_id = (self << IVMD_JOB_NODE_SHIFT) + 1;
    }
}

static const ivmd_link_ops_t ivmd_link_ops = {
    .on_msg    = ivmd_cluster_handle_msg,
    .peer_up   = ivmd_cluster_peer_up,
    .peer_lost = ivmd_cluster_peer_lost,
    .joined    = ivmd_joined,
};

/* The transport below, and the callbacks of the layers above it. */
static ivmError_t ivmd_wire(ivmd_t *d)
{
    const ivmd_link_cfg_t link_cfg = {.node    = d->cfg.node,
                                      .listen  = d->cfg.listen,
                                      .encrypt = (int)d->cfg.peer_encrypt,
                                      .congestion = d->cfg.tcp_congestion};
    ivmd_conn_table_t *t = &d->conns;

    if (ivmd_loop_init(&d->loop, d, &d->stopping, d->cfg.poll_us) != IVM_SUCCESS ||
        ivmd_conn_table_init(t, &d->loop, &d->net) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    ivmd_conn_register(t, IVMD_CONN_PE, &ivmd_pe_conn_ops, NULL);
    ivmd_conn_register(t, IVMD_CONN_REMOTE, &ivmd_remote_conn_ops, &d->remote);
    ivmd_conn_register(t, IVMD_CONN_GPUD, &ivmd_gpud_conn_ops, &d->gpu);
    ivmd_link_init(&d->link, &d->loop, t, &d->net, &link_cfg, &d->stopping, &ivmd_link_ops);
    if (ivmd_conn_on_gone(t, ivmd_cluster_conn_gone) != IVM_SUCCESS ||
        ivmd_conn_on_gone(t, ivmd_gpu_conn_gone) != IVM_SUCCESS ||
        ivmd_conn_on_gone(t, ivmd_handlers_conn_gone) != IVM_SUCCESS ||
        ivmd_loop_on_before_sleep(&d->loop, ivmd_output_before_sleep, NULL) != IVM_SUCCESS ||
        ivmd_loop_on_before_sleep(&d->loop, ivmd_idle_exit, NULL) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    ivmd_loop_set_idle(&d->loop, ivmd_pool_idle_want, ivmd_pool_idle_run, NULL,
                       IVMD_POOL_IDLE_US);
    ivmd_loop_set_busy(&d->loop, ivmd_ops_busy, NULL);
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

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ivm_error("socket: %m");
        return IVM_ERROR_INTERNAL;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, d->socket_path);
    d->conns.listen_fd = fd; /* closed and unlinked at teardown */
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        ivm_error("bind %s: %m", d->socket_path);
        return IVM_ERROR_PERMISSION;
    }
    chmod(d->socket_path, 0600);
    if (listen(fd, 512) != 0) {
        ivm_error("listen %s: %m", d->socket_path);
        return IVM_ERROR_INTERNAL;
    }
    return ivmd_conn_listen(&d->conns, fd, d->uid, ivmd_pe_admit);
}

static void ivmd_on_signal(ivmd_t *d, void *arg, uint32_t events)
{
    struct signalfd_siginfo si;

    while (read(d->signal_fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            ivmd_spawn_reap(&d->spawn);
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
    len = (d->link.tcp_fd >= 0)
              ? snprintf(line, sizeof(line), "R %u\n", (unsigned)d->link.tcp_port)
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

    ivmd_link_say_bye(&d->link, d);
    for (job = d->reg.jobs; job != NULL; job = next) {
        next = job->next;
        ivmd_teardown_terminate(&d->teardown, job, "the daemon is shutting down");
    }
    ivmd_gpu_stop(&d->gpu);
    ivmd_conn_table_fini(&d->conns, d);
    ivmd_output_close_all(&d->output);
    /* Reap the PEs we killed, briefly, so none is left a zombie. */
    for (int tries = 0; tries < 100 && d->reg.njobs > 0; ++tries) {
        ivmd_spawn_reap(&d->spawn);
        if (d->reg.njobs > 0) {
            usleep(10000);
        }
    }
    while (d->reg.jobs != NULL) {
        /* A PE forked by a parked process may still be watched (its pidfd
         * not yet readable): drop the watch with the PE. */
        for (int i = 0; i < d->reg.jobs->next_pe_id; ++i) {
            if (d->reg.jobs->pes[i] != NULL) {
                ivmd_spawn_unwatch(&d->spawn, d->reg.jobs->pes[i]);
            }
        }
        ivmd_job_data_free(d->reg.jobs->data);
        ivmd_job_destroy(&d->reg, d->reg.jobs);
    }
    ivmd_devcg_close(&d->devcg);
    ivmd_cluster_close_all(d);
    ivmd_ucx_close(&d->data);
    ivmd_link_close(&d->link);
    if (d->signal_fd >= 0) {
        close(d->signal_fd);
    }
    if (d->timer_fd >= 0) {
        close(d->timer_fd);
    }
    if (d->conns.listen_fd >= 0) {
        close(d->conns.listen_fd);
        unlink(d->socket_path);
        if (d->cfg.remove_dir) {
            ivmd_remove_run_dir(d);
        }
    }
    if (d->devnull >= 0) {
        close(d->devnull);
    }
    ivmd_netlimits_close(&d->net);
    ivmd_loop_fini(&d->loop);
    ivm_config_release(ivmd_config_fields, &d->cfg);
}

int main(int argc, char **argv)
{
    static ivmd_t daemon_state;
    ivmd_t *d = &daemon_state;
    ivmd_reply_t rep;
    int rc;

    memset(d, 0, sizeof(*d));
    d->signal_fd = d->timer_fd = d->devnull = -1;
    d->loop.epfd = d->conns.listen_fd = d->net.timer_fd = -1;
    d->uid = getuid();
    ivm_log_set_prefix("ivmd");
    if (ivmd_parse(d, argc, argv) != IVM_SUCCESS) {
        return 2;
    }
    sched_getaffinity(0, sizeof(d->own_affinity), &d->own_affinity);
    ivmd_handlers_init(d);
    ivmd_reply_init(&rep);
    if (ivmd_devcg_open(&d->devcg, &rep) != IVM_SUCCESS) {
        ivm_error("--cpu-devices '%s' has shares of cores, enforced with a cgroup CPU "
                  "bandwidth limit, which this daemon cannot set up: %s", d->cfg.cpu_devices,
                  rep.detail);
        ivmd_devcg_close(&d->devcg);
        return 1;
    }
    ivmd_registry_init(&d->reg, &ivmd_job_ops, d);
    ivmd_cluster_init(d);
    if (ivmd_wire(d) != IVM_SUCCESS) {
        return 1;
    }

    d->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (d->devnull < 0) {
        ivm_error("/dev/null: %m");
        return 1;
    }
    if (ivmd_limits_open(d) != IVM_SUCCESS || ivmd_signals_open(d) != IVM_SUCCESS ||
        ivmd_listen(d) != IVM_SUCCESS ||
        ivmd_link_listen(&d->link) != IVM_SUCCESS || ivmd_gpu_start(&d->gpu) != IVM_SUCCESS) {
        ivmd_teardown(d);
        return 1;
    }
    /* After the signals are blocked: UCX's threads inherit the mask, so
     * SIGTERM still reaches the signalfd. */
    ivmd_reply_init(&rep);
    if (ivmd_ucx_select(&d->data, &d->loop, d->cfg.transport, (int)d->cfg.peer_encrypt,
                        rep.detail, sizeof(rep.detail)) != IVM_SUCCESS) {
        ivm_error("%s", rep.detail);
        ivmd_teardown(d);
        return 1;
    }
    ivmd_copies_probe_touch(&d->data);
    ivm_info("first touch of a mapped page: read %u ns writable, %u ns read-only first; "
             "write %u / %u ns: maps populated %s",
             d->data.touch_ns[IVMD_TOUCH_RW_READ], d->data.touch_ns[IVMD_TOUCH_RO_READ],
             d->data.touch_ns[IVMD_TOUCH_RW_WRITE], d->data.touch_ns[IVMD_TOUCH_RO_WRITE],
             (d->data.map_flags & IVM_MAP_READ_FIRST) ? "read-only first" : "writable");
    ivm_info("objects' memory in %s pages", d->data.huge ? "2 MiB" : "4 KiB");
    ivm_info("data transport %s%s%s", ivmd_data_transport(&d->data)->name,
             d->data.ucx != NULL ? " over " : "", ivmd_ucx_tls(&d->data));
    ivm_info("listening on %s (%d CPU device%s, %u GPU device%s)", d->socket_path, d->ndevs,
             d->ndevs == 1 ? "" : "s", ivmd_gpu_count(&d->gpu),
             ivmd_gpu_count(&d->gpu) == 1 ? "" : "s");
    ivmd_ready(d);
    rc = ivmd_loop_run_until_stop(&d->loop);
    ivmd_teardown(d);
    return rc == 0 ? 0 : 1;
}
