/* ivm-gpud's process: start with GHELLO, loss, reaping, stop (gpu/gpu.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpud.h"
#include "log.h"
#include "sock.h"

#define IVMD_GPU_HELLO_TIMEOUT_MS 10000
#define IVMD_GPU_CTL_FD           100 /* the socket's number in ivm-gpud */
#define IVMD_GPU_ARGV_MAX         16

/* --gpus as parsed: the listed CUDA indices. */
typedef struct ivmd_gpu_list {
    int  n;                                  /* listed GPUs; 0: all; -1: none */
    char csv[IVM_GPUD_MAX_GPUS * 4 + 1];     /* them, comma-separated */
} ivmd_gpu_list_t;

/* --gpus: "all", "none" or a list of CUDA device indices. IVM_SUCCESS (l->n
 * listed, 0 for all, -1 for none) or IVM_ERROR_INVALID_VALUE. */
static ivmError_t ivmd_gpu_parse_list(const char *spec, ivmd_gpu_list_t *l)
{
    char *copy, *tok, *save = NULL;

    memset(l, 0, sizeof(*l));
    if (spec[0] == '\0' || strcmp(spec, "all") == 0) {
        return IVM_SUCCESS;
    }
    l->n = -1;
    if (strcmp(spec, "none") == 0 || (copy = strdup(spec)) == NULL) {
        return IVM_SUCCESS;
    }
    l->n = 0;
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*tok == '\0' || *end != '\0' || v < 0 || v > 255 || l->n >= IVM_GPUD_MAX_GPUS) {
            ivm_error("--gpus '%s': '%s' is not a GPU index (0..255; at most %d)", spec, tok,
                      IVM_GPUD_MAX_GPUS);
            free(copy);
            return IVM_ERROR_INVALID_VALUE;
        }
        snprintf(l->csv + strlen(l->csv), sizeof(l->csv) - strlen(l->csv), "%s%ld",
                 l->n ? "," : "", v);
        ++l->n;
    }
    free(copy);
    return IVM_SUCCESS;
}

/* ivm-gpud beside ivmd, else the name for PATH. */
static void ivmd_gpu_find_exe(const ivmd_gpu_t *gm, char *buf, size_t len)
{
    char self[4096];
    ssize_t n;
    char *slash;

    if (gm->cfg.gpud[0] != '\0') {
        snprintf(buf, len, "%s", gm->cfg.gpud);
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(buf, len, "%s/ivm-gpud", self);
            if (access(buf, X_OK) == 0) {
                return;
            }
        }
    }
    snprintf(buf, len, "ivm-gpud");
}

/* The GHELLO reply read from fd, checked. */
static ivmError_t ivmd_gpu_hello_read(int fd, ivm_gpud_hello_rep_t *rep, char *detail,
                                      size_t dlen)
{
    char buf[sizeof(ivm_gpud_hello_rep_t) + IVM_MSG_DETAIL_MAX];
    int fds[IVM_MSG_MAX_FDS], nfds = 0;
    ivm_msg_hdr_t hdr;
    const char *why;

    if (ivm_sock_recv(fd, &hdr, sizeof(hdr), fds, &nfds, IVM_MSG_MAX_FDS) != IVM_SUCCESS ||
        ivm_gpud_check_hdr(&hdr, &why) != IVM_SUCCESS ||
        hdr.type != (IVM_GPUD_GHELLO | IVM_MSG_REPLY) ||
        ivm_gpud_check_rep(&hdr, &why) != IVM_SUCCESS || hdr.length > sizeof(buf) ||
        ivm_sock_recv(fd, buf, hdr.length, fds, &nfds, IVM_MSG_MAX_FDS) != IVM_SUCCESS) {
        ivm_sock_close_fds(fds, nfds);
        snprintf(detail, dlen, "ivm-gpud ended or sent no valid GHELLO reply (see its log)");
        return IVM_ERROR_DAEMON_LOST;
    }
    ivm_sock_close_fds(fds, nfds);
    memcpy(rep, buf, sizeof(*rep));
    if (rep->status != IVM_SUCCESS) {
        buf[sizeof(buf) - 1] = '\0';
        snprintf(detail, dlen, "%s", hdr.length > sizeof(*rep) ? buf + sizeof(*rep)
                                                               : "GHELLO failed");
        return (ivmError_t)rep->status;
    }
    if (rep->ngpus > IVM_GPUD_MAX_GPUS) {
        snprintf(detail, dlen, "ivm-gpud reports %u GPUs (at most %d)", rep->ngpus,
                 IVM_GPUD_MAX_GPUS);
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

/* One blocking request/reply on the fresh socket, before the loop owns it. */
static ivmError_t ivmd_gpu_hello(int fd, ivm_gpud_hello_rep_t *rep, char *detail, size_t dlen)
{
    ivm_gpud_empty_t req = {0};
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ivm_msg_hdr_t hdr;

    ivm_proto_hdr_init(&hdr, IVM_GPUD_GHELLO, sizeof(req), 1);
    if (ivm_sock_send(fd, &hdr, &req, NULL, 0) != IVM_SUCCESS) {
        snprintf(detail, dlen, "ivm-gpud closed its control socket at once");
        return IVM_ERROR_DAEMON_LOST;
    }
    if (poll(&pfd, 1, IVMD_GPU_HELLO_TIMEOUT_MS) != 1) {
        snprintf(detail, dlen, "ivm-gpud did not answer GHELLO within %d s",
                 IVMD_GPU_HELLO_TIMEOUT_MS / 1000);
        return IVM_ERROR_TIMEOUT;
    }
    return ivmd_gpu_hello_read(fd, rep, detail, dlen);
}

/* The device table: one device per GPU of ivm-gpud, or --gpu-shares (whose
 * GPU numbers are checked against ngpus here). */
static ivmError_t ivmd_gpu_devs_init(ivmd_gpu_t *gm, ivmd_gpud_t *g, uint32_t ngpus)
{
    char err[256];
    int n;

    if (gm->cfg.gpu_shares[0] == '\0') {
        for (g->ndevs = 0; g->ndevs < ngpus; ++g->ndevs) {
            g->devs[g->ndevs].phys    = (int)g->ndevs;
            g->devs[g->ndevs].percent = 100;
        }
        return IVM_SUCCESS;
    }
    if (ivm_devspec_gpu_shares_parse(gm->cfg.gpu_shares, (int)ngpus, g->devs,
                                     IVM_DEVSPEC_MAX_GPU_DEVICES, &n, err,
                                     sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return IVM_ERROR_INVALID_VALUE;
    }
    g->ndevs = (uint32_t)n;
    return IVM_SUCCESS;
}

/* Which backend this node needs: "emu", "cuda", or NULL for none (status
 * says whether that is an error). */
static const char *ivmd_gpu_backend_pick(const ivmd_gpu_t *gm, const ivmd_gpu_list_t *l,
                                         ivmError_t *status_p)
{
    *status_p = IVM_SUCCESS;
    if (gm->cfg.emu_gpus[0] != '\0') {
        return "emu";
    }
    if (l->n >= 0 && access("/dev/nvidiactl", F_OK) == 0) {
        return "cuda";
    }
    if (gm->cfg.gpu_shares[0] != '\0') {
        ivm_error("--gpu-shares '%s' but this node has no GPU (no --emu-gpus; %s)",
                  gm->cfg.gpu_shares, l->n < 0 ? "--gpus none" : "no NVIDIA driver");
        *status_p = IVM_ERROR_INVALID_VALUE;
    } else if (l->n > 0) {
        ivm_warn("--gpus %s: this node has no NVIDIA driver (/dev/nvidiactl), so no GPU "
                 "PE can run here", gm->cfg.gpus);
    }
    return NULL;
}

/* ivm-gpud's command line. */
static void ivmd_gpu_argv(const ivmd_gpu_t *gm, char *exe, char *ctl, const char *backend,
                          const ivmd_gpu_list_t *l, char *argv[IVMD_GPU_ARGV_MAX])
{
    int argc = 0;

    argv[argc++] = exe;
    argv[argc++] = "--ctl-fd";
    argv[argc++] = ctl;
    argv[argc++] = "--backend";
    argv[argc++] = (char *)backend;
    if (gm->cfg.emu_gpus[0] != '\0') {
        argv[argc++] = "--emu-gpus";
        argv[argc++] = (char *)gm->cfg.emu_gpus;
    }
    if (gm->cfg.gpu_admit_timeout[0] != '\0') {
        argv[argc++] = "--admit-timeout";
        argv[argc++] = (char *)gm->cfg.gpu_admit_timeout;
    }
    if (l->n > 0 && strcmp(backend, "cuda") == 0) {
        argv[argc++] = "--gpus"; /* it sees those GPUs only, numbered from 0 */
        argv[argc++] = (char *)l->csv;
    }
    argv[argc++] = "--node";
    argv[argc++] = (char *)gm->cfg.node;
    argv[argc++] = "--log-level";
    argv[argc++] = (char *)gm->cfg.log_level;
    argv[argc]   = NULL;
}

/* posix_spawn ivm-gpud with sv_child as its control socket: 0 or an errno. */
static int ivmd_gpu_spawn(ivmd_gpu_t *gm, const char *backend, const ivmd_gpu_list_t *l,
                          int sv_child, char *exe, size_t exe_len, pid_t *pid_p)
{
    extern char **environ;
    char ctl[16];
    char *argv[IVMD_GPU_ARGV_MAX];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc;

    ivmd_gpu_find_exe(gm, exe, exe_len);
    snprintf(ctl, sizeof(ctl), "%d", IVMD_GPU_CTL_FD);
    ivmd_gpu_argv(gm, exe, ctl, backend, l, argv);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, *gm->devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, sv_child, IVMD_GPU_CTL_FD);
    if (gm->cfg.ready_fd >= 0 && gm->cfg.ready_fd != IVMD_GPU_CTL_FD) {
        /* Whoever waits for ivmd's readiness waits for the fd's EOF too. */
        posix_spawn_file_actions_addclose(&fa, (int)gm->cfg.ready_fd);
    }
    gm->up->spawn_attr_init(&attr);
    rc = posix_spawnp(pid_p, exe, &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

/* GHELLO failed or found no GPU: the node has none (an error only where
 * GPUs were asked for). */
static ivmError_t ivmd_gpu_none(ivmd_gpu_t *gm, ivmd_gpud_t *g, ivmError_t status,
                                const char *backend, const char *detail, int fd)
{
    if (status != IVM_SUCCESS) {
        ivm_error("ivm-gpud (pid %d, %s backend): %s; %s", (int)g->pid, backend, detail,
                  gm->cfg.emu_gpus[0] != '\0' ? "the emulated GPUs asked for are missing"
                                              : "this node has no GPU device");
        kill(g->pid, SIGKILL);
    } else {
        ivm_info("ivm-gpud (%s backend) found no GPU; this node has none", backend);
    }
    close(fd); /* it exits on EOF */
    g->ngpus = 0;
    if (gm->cfg.gpu_shares[0] != '\0') {
        ivm_error("--gpu-shares '%s' but this node has no GPU", gm->cfg.gpu_shares);
        return status != IVM_SUCCESS ? status : IVM_ERROR_INVALID_VALUE;
    }
    return status == IVM_SUCCESS || gm->cfg.emu_gpus[0] == '\0' ? IVM_SUCCESS : status;
}

/* Take GHELLO's GPUs and serve the socket in the loop. */
static ivmError_t ivmd_gpu_adopt(ivmd_gpu_t *gm, ivmd_gpud_t *g, const ivm_gpud_hello_rep_t *h,
                                 const ivmd_gpu_list_t *l, int fd)
{
    uint32_t i;

    g->alive   = 1;
    g->backend = h->backend;
    memcpy(g->backend_name, h->backend_name, sizeof(g->backend_name));
    g->backend_name[sizeof(g->backend_name) - 1] = '\0';
    g->ngpus = h->ngpus;
    memcpy(g->gpus, h->gpus, sizeof(g->gpus));
    for (i = 0; i < g->ngpus; ++i) {
        ivm_gpud_gpu_info_t *gi = &g->gpus[i];
        gi->name[sizeof(gi->name) - 1]           = '\0';
        gi->env[sizeof(gi->env) - 1]             = '\0';
        gi->share_env[sizeof(gi->share_env) - 1] = '\0';
        if (gi->env[0] != '\0' && strchr(gi->env, '=') == NULL) {
            gi->env[0] = '\0'; /* no NAME=value */
        }
    }
    if (g->backend != IVM_GPUD_BACKEND_EMU && l->n > (int)g->ngpus) {
        ivm_warn("--gpus %s names %d GPUs, but only %u of them exist on %s (the driver "
                 "stops at the first index it does not have): GPU PEs can use "
                 "IVM_GPU_N(0..%u)",
                 gm->cfg.gpus, l->n, g->ngpus, gm->cfg.node, g->ngpus > 0 ? g->ngpus - 1 : 0);
    }
    g->next_seq = 2;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    g->conn = ivmd_conn_create(gm->conns, fd, IVMD_CONN_GPUD, EPOLLIN | EPOLLRDHUP);
    if (g->conn == NULL) {
        g->alive = 0;
        return IVM_ERROR_INTERNAL;
    }
    g->conn->peer_pid = g->pid;
    ivmd_data_set_target(gm->data, &ivmd_gpu_target_ops, gm);
    ivm_info("ivm-gpud pid %d: %s backend%s, %u GPU%s (GPU 0: %s, %llu MiB), %u GPU "
             "device%s%s%s", (int)g->pid, g->backend_name, g->backend == IVM_GPUD_BACKEND_EMU
                                  ? " (emulated GPUs, host memory)" : "",
             g->ngpus, g->ngpus == 1 ? "" : "s", g->gpus[0].name,
             (unsigned long long)(g->gpus[0].capacity >> 20), g->ndevs,
             g->ndevs == 1 ? "" : "s", gm->cfg.gpu_shares[0] != '\0' ? " from --gpu-shares "
                                                                      : "",
             gm->cfg.gpu_shares);
    return IVM_SUCCESS;
}

/* ivm-gpud could not be started: an error only where GPUs were asked for. */
static ivmError_t ivmd_gpu_spawn_failed(const ivmd_gpu_t *gm, const char *exe, int rc)
{
    if (gm->cfg.emu_gpus[0] != '\0') {
        ivm_error("cannot start %s for --emu-gpus: %s", exe, strerror(rc));
        return IVM_ERROR_SPAWN;
    }
    ivm_error("cannot start %s: %s; this node has no GPU device", exe, strerror(rc));
    return gm->cfg.gpu_shares[0] != '\0' ? IVM_ERROR_SPAWN : IVM_SUCCESS;
}

ivmError_t ivmd_gpu_start(ivmd_gpu_t *gm)
{
    char exe[4200], detail[IVM_MSG_DETAIL_MAX];
    ivm_gpud_hello_rep_t hello;
    ivmd_gpu_list_t list;
    ivmd_gpud_t *g;
    const char *backend;
    ivmError_t status;
    int sv[2], rc;

    if (ivmd_gpu_parse_list(gm->cfg.gpus, &list) != IVM_SUCCESS) {
        return IVM_ERROR_INVALID_VALUE;
    }
    backend = ivmd_gpu_backend_pick(gm, &list, &status);
    if (backend == NULL) {
        return status; /* no GPU on this node */
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        ivm_error("socketpair for ivm-gpud: %m");
        status = IVM_ERROR_INTERNAL;
        goto free_g;
    }
    rc = ivmd_gpu_spawn(gm, backend, &list, sv[1], exe, sizeof(exe), &g->pid);
    close(sv[1]);
    if (rc != 0) {
        status = ivmd_gpu_spawn_failed(gm, exe, rc);
        goto close_sock;
    }
    gm->g = g;
    status = ivmd_gpu_hello(sv[0], &hello, detail, sizeof(detail));
    if (status != IVM_SUCCESS || hello.ngpus == 0) {
        return ivmd_gpu_none(gm, g, status, backend, detail, sv[0]);
    }
    if (ivmd_gpu_devs_init(gm, g, hello.ngpus) != IVM_SUCCESS) {
        kill(g->pid, SIGKILL);
        close(sv[0]);
        return IVM_ERROR_INVALID_VALUE;
    }
    return ivmd_gpu_adopt(gm, g, &hello, &list, sv[0]);

close_sock:
    close(sv[0]);
free_g:
    free(g);
    return status;
}

void ivmd_gpu_init(ivmd_gpu_t *gm, ivmd_t *d, const ivmd_gpu_cfg_t *cfg, const int *devnull,
                   const int *stopping, ivmd_registry_t *reg, ivmd_conn_table_t *conns,
                   ivmd_data_t *data, const ivmd_gpu_up_t *up)
{
    gm->conns    = conns;
    gm->d        = d;
    gm->cfg      = *cfg;
    gm->devnull  = devnull;
    gm->stopping = stopping;
    gm->reg      = reg;
    gm->data     = data;
    gm->up       = up;
}

uint32_t ivmd_gpu_count(const ivmd_gpu_t *gm)
{
    return gm->g != NULL ? gm->g->ndevs : 0;
}

int ivmd_gpu_share(const ivmd_gpu_t *gm, int dev)
{
    if (gm->g == NULL || dev < 0 || (uint32_t)dev >= gm->g->ndevs) {
        return 0;
    }
    return gm->g->devs[dev].percent;
}

const char *ivmd_gpu_backend_name(const ivmd_gpu_t *gm)
{
    return gm->g != NULL ? gm->g->backend_name : "none";
}

/* The GPU info of device dev, NULL if there is none. */
static const ivm_gpud_gpu_info_t *ivmd_gpu_dev_info(const ivmd_gpu_t *gm, int dev)
{
    if (gm->g == NULL || dev < 0 || (uint32_t)dev >= gm->g->ndevs) {
        return NULL;
    }
    return &gm->g->gpus[ivmd_gpu_phys(gm->g, dev)];
}

int ivmd_gpu_env(const ivmd_gpu_t *gm, int dev, char (*env)[160], int max)
{
    const ivm_gpud_gpu_info_t *gi = ivmd_gpu_dev_info(gm, dev);
    int share = ivmd_gpu_share(gm, dev), n = 0;

    if (gi == NULL) {
        return 0;
    }
    if (gi->env[0] != '\0' && n < max) {
        snprintf(env[n++], sizeof(env[0]), "%s", gi->env);
    }
    if (gi->share_env[0] != '\0' && share < 100 && n < max) {
        snprintf(env[n++], sizeof(env[0]), "%s=%d", gi->share_env, share);
    }
    return n;
}

/* var ("NAME=value") names the variable name[0, len). */
static int ivmd_gpu_env_names(const char *var, const char *name, size_t len)
{
    return len > 0 && strncmp(var, name, len) == 0 && var[len] == '=';
}

int ivmd_gpu_env_overrides(const ivmd_gpu_t *gm, int dev, const char *var)
{
    const ivm_gpud_gpu_info_t *gi = ivmd_gpu_dev_info(gm, dev);

    if (gi == NULL) {
        return 0;
    }
    if (gi->env[0] != '\0' && ivmd_gpu_env_names(var, gi->env, strcspn(gi->env, "="))) {
        return 1;
    }
    return ivmd_gpu_share(gm, dev) < 100 &&
           ivmd_gpu_env_names(var, gi->share_env, strlen(gi->share_env));
}

int ivmd_gpu_reaped(ivmd_gpu_t *gm, pid_t pid, int wstatus)
{
    if (gm->g == NULL || gm->g->pid != pid || pid <= 0) {
        return 0;
    }
    gm->g->pid = 0;
    if (!*gm->stopping && !gm->g->closing) {
        if (WIFSIGNALED(wstatus)) {
            ivm_warn("ivm-gpud (pid %d) was killed by signal %d", (int)pid, WTERMSIG(wstatus));
        } else {
            ivm_warn("ivm-gpud (pid %d) exited with status %d", (int)pid,
                     WEXITSTATUS(wstatus));
        }
    }
    return 1;
}

void ivmd_gpu_lost(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivmd_gpu_t *gm = ivmd_conn_owner(c);
    ivmd_gpud_t *g = gm->g;

    if (g == NULL || g->conn != c) {
        return;
    }
    g->conn  = NULL;
    g->alive = 0;
    if (!*gm->stopping && !g->closing) {
        ivm_warn("ivm-gpud (pid %d) is gone (%s): GPU maps, syncs and GPU PEs now fail "
                 "with IVM_ERROR_DAEMON_LOST; CPU PEs are served as before",
                 (int)g->pid, why);
    }
    if (g->pid > 0 && !*gm->stopping && !g->closing) {
        kill(g->pid, SIGKILL); /* if it still runs (a malformed message) */
    }
    gm->up->gpus_lost(gm->d); /* parked GPU processes could never become PEs now */
    ivmd_gpu_reqs_fail(gm);
    ivmd_gpu_refs_clear(gm);
}

/* Let ivm-gpud answer what it was sent (JOB_END of the jobs just ended),
 * then see its EOF: it exits without a broken pipe. */
static void ivmd_gpu_drain_close(ivmd_gpu_t *gm, ivmd_gpud_t *g)
{
    struct pollfd pfd = {.fd = g->conn->h.fd, .events = POLLIN};
    char scratch[4096];
    double left_ms = 2000;
    uint64_t t0 = ivmd_now_ns();

    shutdown(g->conn->h.fd, SHUT_WR);
    while (left_ms > 0 && poll(&pfd, 1, (int)left_ms) == 1 &&
           read(g->conn->h.fd, scratch, sizeof(scratch)) > 0) {
        left_ms = 2000 - (double)(ivmd_now_ns() - t0) / 1e6;
    }
    ivmd_conn_close(gm->d, g->conn, "daemon shutdown");
}

void ivmd_gpu_stop(ivmd_gpu_t *gm)
{
    ivmd_gpud_t *g = gm->g;
    int wstatus, tries;

    if (g == NULL) {
        return;
    }
    g->closing = 1;
    if (g->conn != NULL) {
        ivmd_gpu_drain_close(gm, g);
    }
    /* ivm-gpud exits on EOF of its socket. */
    for (tries = 0; g->pid > 0 && tries < 300; ++tries) {
        if (waitpid(g->pid, &wstatus, WNOHANG) == g->pid) {
            g->pid = 0;
            break;
        }
        usleep(10000);
    }
    if (g->pid > 0) {
        ivm_warn("ivm-gpud (pid %d) did not exit 3 s after its socket closed: killed",
                 (int)g->pid);
        kill(g->pid, SIGKILL);
        waitpid(g->pid, &wstatus, 0);
    }
    ivmd_data_set_target(gm->data, NULL, NULL);
    ivmd_gpu_syncs_clear(gm);
    ivmd_gpu_refs_clear(gm);
    ivmd_gpu_reqs_fail(gm);
    free(g);
    gm->g = NULL;
}
