/*
 * The client of ivm-gpud (common/gpud_proto.h, docs/design-gpu.md).
 *
 * ivmd starts one ivm-gpud per node when emulated GPUs are asked for
 * (--emu-gpus) or the node has NVIDIA GPUs (and --gpus is not "none"), with
 * one end of a socketpair as its --ctl-fd, and asks it for the GPUs (GHELLO)
 * before it reports ready. The socket is then a connection of the loop
 * (IVMD_CONN_GPUD) whose replies complete requests in flight (ivmd_gpu_req_t).
 *
 *  - A GPU PE's map: the node copy is made as for a CPU PE, then ACQUIRE on
 *    the PE's GPU; the reply to the PE carries both fds. Each reference is
 *    recorded (ivmd_gpu_ref_t) and RELEASEd on UNMAP, FREE and PE death.
 *  - Syncs that involve device copies run as a list of steps (ivmd_gsync_t):
 *    COPY device -> node (D2H), the cluster sync of the node copy, COPY
 *    node -> device (H2D), one at a time; the PE is answered after the last.
 *  - ivm-gpud gone: every request in flight fails with DAEMON_LOST, later GPU
 *    maps, syncs and GPU PE creation too; CPU PEs are served as before.
 *  - GPU devices (IVM_GPU_N(k), NODEINFO) are one per physical GPU, or the
 *    --gpu-shares table: several devices may be shares of one GPU. ivm-gpud
 *    knows physical GPUs only: ACQUIRE and GSTATS name the device's physical
 *    GPU, so PEs of two shares of one GPU share its device copies and its
 *    capacity; GPU_INFO describes physical GPUs.
 */
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

#include "devspec.h"
#include "gpud_proto.h"
#include "ivmd.h"
#include "log.h"
#include "sock.h"

#define IVMD_GPU_HELLO_TIMEOUT_MS 10000
#define IVMD_GPU_CTL_FD           100 /* the socket's number in ivm-gpud */

typedef struct ivmd_gpu_req ivmd_gpu_req_t;
typedef void (*ivmd_gpu_cb_t)(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *rep,
                              int *fds, int nfds, const char *detail);

/* A request to ivm-gpud in flight. */
struct ivmd_gpu_req {
    ivmd_gpu_req_t *next;
    uint32_t        seq;
    uint16_t        type;     /* IVM_GPUD_* */
    ivmd_gpu_cb_t   cb;
    ivmd_conn_t    *conn;     /* the PE (or tool) to answer; NULL once it is gone */
    uint32_t        pe_seq;   /* its request */
    uint16_t        pe_type;
    uint32_t        job;
    uint64_t        obj;      /* ACQUIRE: object id */
    uint64_t        off, len; /* ACQUIRE: the range the PE maps */
    uint64_t        gsync;    /* COPY: the sync it is a step of */
    uint32_t        gpu;      /* GSTATS: the GPU asked about */
    ivmd_gsync_done_t done;   /* FILLED: called with the status (may be NULL) */
    void           *done_arg;
};

/* One GPU PE mapping: a reference on a device copy. */
typedef struct ivmd_gpu_ref {
    struct ivmd_gpu_ref *next;
    uint64_t             id;        /* the PE's gpu_ref */
    uint32_t             job;
    int                  pe;
    uint64_t             obj;
    uint64_t             copy;      /* ivm-gpud's copy id */
    uint64_t             copy_off;  /* object bytes the copy holds */
    uint64_t             copy_size;
    uint32_t             gpu;
} ivmd_gpu_ref_t;

typedef enum ivmd_gstep_kind {
    IVMD_GSTEP_D2H,     /* device copy -> node copy */
    IVMD_GSTEP_H2D,     /* node copy -> device copy */
    IVMD_GSTEP_CLUSTER, /* the node copy's sync with the master (cluster.c) */
    IVMD_GSTEP_FENCE    /* wait until ivm-gpud answered everything sent before */
} ivmd_gstep_kind_t;

typedef struct ivmd_gstep {
    ivmd_gstep_kind_t kind;
    uint64_t          copy;     /* COPY steps */
    uint64_t          off, len; /* object bytes */
    uint32_t          op;       /* CLUSTER: IVM_SYNC_* */
} ivmd_gstep_t;

/* A sync that involves device copies: steps run one after the other. */
struct ivmd_gsync {
    ivmd_gsync_t   *next;
    uint64_t        id;
    ivmd_conn_t    *conn;       /* PE to answer (NULL: a peer's, see done) */
    uint32_t        seq;
    uint16_t        type;
    uint32_t        job;
    uint64_t        obj;
    ivmd_gstep_t   *steps;
    int             nsteps, at;
    ivmd_gsync_done_t done;     /* instead of answering a PE */
    void           *arg;        /* for done */
};

struct ivmd_gpu {
    pid_t           pid;        /* ivm-gpud, 0 once reaped */
    ivmd_conn_t    *conn;       /* the control socket, NULL once lost */
    int             alive;
    uint32_t        backend;    /* IVM_GPUD_BACKEND_* */
    char            backend_name[IVM_GPUD_BACKEND_MAX];
    uint32_t        ngpus;
    ivm_gpud_gpu_info_t gpus[IVM_GPUD_MAX_GPUS];
    char            visible[IVM_GPUD_MAX_GPUS][16]; /* cuda: CUDA_VISIBLE_DEVICES of GPU k */
    uint32_t        ndevs;      /* GPU devices: ngpus, or --gpu-shares's entries */
    ivm_gpu_share_t devs[IVM_DEVSPEC_MAX_GPU_DEVICES]; /* device k: a share of a GPU */
    uint32_t        next_seq;
    ivmd_gpu_req_t *reqs;
    ivmd_gpu_ref_t *refs;
    uint64_t        next_ref;
    ivmd_gsync_t   *syncs;
    uint64_t        next_sync;
    int             closing;    /* ivmd_gpu_stop closes the socket: no failure */
};

/* ------------------------------------------------------------ start, stop */

/* --gpus: "all", "none" or a list of CUDA device indices. Fills visible[]
 * when a list is given. Returns the count of listed GPUs, 0 for all, -1 for
 * none or a bad list. */
static int ivmd_gpu_parse_list(const char *spec, char list[][16], char *csv, size_t csv_len)
{
    char *copy, *tok, *save = NULL;
    int n = 0;

    if (spec[0] == '\0' || strcmp(spec, "all") == 0) {
        return 0;
    }
    if (strcmp(spec, "none") == 0) {
        return -1;
    }
    copy = strdup(spec);
    if (copy == NULL) {
        return -1;
    }
    csv[0] = '\0';
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*tok == '\0' || *end != '\0' || v < 0 || v > 255 || n >= IVM_GPUD_MAX_GPUS) {
            ivm_error("--gpus '%s': '%s' is not a GPU index (0..255; at most %d)", spec, tok,
                      IVM_GPUD_MAX_GPUS);
            free(copy);
            return -2;
        }
        snprintf(list[n], 16, "%ld", v);
        snprintf(csv + strlen(csv), csv_len - strlen(csv), "%s%ld", n ? "," : "", v);
        ++n;
    }
    free(copy);
    return n;
}

/* ivm-gpud beside ivmd, else the name for PATH. */
static void ivmd_gpu_find_exe(const ivmd_t *d, char *buf, size_t len)
{
    char self[4096];
    ssize_t n;
    char *slash;

    if (d->cfg.gpud[0] != '\0') {
        snprintf(buf, len, "%s", d->cfg.gpud);
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

/* One blocking request/reply on the fresh socket, before the loop owns it. */
static ivmError_t ivmd_gpu_hello(int fd, ivm_gpud_hello_rep_t *rep, char *detail, size_t dlen)
{
    ivm_gpud_empty_t req = {0};
    ivm_msg_hdr_t hdr;
    char buf[sizeof(ivm_gpud_hello_rep_t) + IVM_MSG_DETAIL_MAX];
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    const char *why;
    int fds[IVM_MSG_MAX_FDS], nfds = 0;

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

/* The device table: one device per GPU of ivm-gpud, or --gpu-shares (whose
 * GPU numbers are checked against ngpus here). */
static ivmError_t ivmd_gpu_devs_init(ivmd_t *d, struct ivmd_gpu *g, uint32_t ngpus)
{
    char err[256];
    int n;

    if (d->cfg.gpu_shares[0] == '\0') {
        for (g->ndevs = 0; g->ndevs < ngpus; ++g->ndevs) {
            g->devs[g->ndevs].phys    = (int)g->ndevs;
            g->devs[g->ndevs].percent = 100;
        }
        return IVM_SUCCESS;
    }
    if (ivm_devspec_gpu_shares_parse(d->cfg.gpu_shares, (int)ngpus, g->devs,
                                     IVM_DEVSPEC_MAX_GPU_DEVICES, &n, err,
                                     sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return IVM_ERROR_INVALID_VALUE;
    }
    g->ndevs = (uint32_t)n;
    return IVM_SUCCESS;
}

ivmError_t ivmd_gpu_start(ivmd_t *d)
{
    char exe[4200], ctl[16], csv[IVM_GPUD_MAX_GPUS * 4 + 1], env_visible[64 + sizeof(csv)];
    char visible[IVM_GPUD_MAX_GPUS][16], detail[IVM_MSG_DETAIL_MAX];
    const char *backend;
    char *argv[16];
    char **envp = NULL;
    extern char **environ;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ivm_gpud_hello_rep_t hello;
    struct ivmd_gpu *g;
    int sv[2], argc = 0, nlisted, rc, nenv = 0, i;
    ivmError_t status;
    pid_t pid;

    nlisted = ivmd_gpu_parse_list(d->cfg.gpus, visible, csv, sizeof(csv));
    if (nlisted == -2) {
        return IVM_ERROR_INVALID_VALUE;
    }
    if (d->cfg.emu_gpus[0] != '\0') {
        backend = "emu";
    } else if (nlisted >= 0 && access("/dev/nvidiactl", F_OK) == 0) {
        backend = "cuda";
    } else if (d->cfg.gpu_shares[0] != '\0') {
        ivm_error("--gpu-shares '%s' but this node has no GPU (no --emu-gpus; %s)",
                  d->cfg.gpu_shares, nlisted < 0 ? "--gpus none" : "no NVIDIA driver");
        return IVM_ERROR_INVALID_VALUE;
    } else {
        if (nlisted > 0) {
            ivm_warn("--gpus %s: this node has no NVIDIA driver (/dev/nvidiactl), so no GPU "
                     "PE can run here", d->cfg.gpus);
        }
        return IVM_SUCCESS; /* no GPU on this node */
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        ivm_error("socketpair for ivm-gpud: %m");
        free(g);
        return IVM_ERROR_INTERNAL;
    }
    ivmd_gpu_find_exe(d, exe, sizeof(exe));
    snprintf(ctl, sizeof(ctl), "%d", IVMD_GPU_CTL_FD);
    argv[argc++] = exe;
    argv[argc++] = "--ctl-fd";
    argv[argc++] = ctl;
    argv[argc++] = "--backend";
    argv[argc++] = (char *)backend;
    if (d->cfg.emu_gpus[0] != '\0') {
        argv[argc++] = "--emu-gpus";
        argv[argc++] = d->cfg.emu_gpus;
    }
    if (d->cfg.gpu_admit_timeout[0] != '\0') {
        argv[argc++] = "--admit-timeout";
        argv[argc++] = d->cfg.gpu_admit_timeout;
    }
    argv[argc++] = "--node";
    argv[argc++] = d->cfg.node;
    argv[argc++] = "--log-level";
    argv[argc++] = d->cfg.log_level;
    argv[argc]   = NULL;

    /* A --gpus list: ivm-gpud sees those GPUs only, numbered from 0. */
    while (environ[nenv] != NULL) {
        ++nenv;
    }
    envp = calloc((size_t)nenv + 2, sizeof(char *));
    if (envp == NULL) {
        close(sv[0]);
        close(sv[1]);
        free(g);
        return IVM_ERROR_NO_MEMORY;
    }
    for (i = 0, nenv = 0; environ[i] != NULL; ++i) {
        if (nlisted <= 0 || strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0) {
            envp[nenv++] = environ[i];
        }
    }
    if (nlisted > 0 && strcmp(backend, "cuda") == 0) {
        snprintf(env_visible, sizeof(env_visible), "CUDA_VISIBLE_DEVICES=%s", csv);
        envp[nenv++] = env_visible;
    }

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, d->devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], IVMD_GPU_CTL_FD);
    if (d->cfg.ready_fd >= 0 && d->cfg.ready_fd != IVMD_GPU_CTL_FD) {
        /* Whoever waits for ivmd's readiness waits for the fd's EOF too. */
        posix_spawn_file_actions_addclose(&fa, (int)d->cfg.ready_fd);
    }
    ivmd_spawn_attr_init(&attr);
    rc = posix_spawnp(&pid, exe, &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        free(g);
        if (d->cfg.emu_gpus[0] != '\0') {
            ivm_error("cannot start %s for --emu-gpus: %s", exe, strerror(rc));
            return IVM_ERROR_SPAWN;
        }
        ivm_error("cannot start %s: %s; this node has no GPU device", exe, strerror(rc));
        return d->cfg.gpu_shares[0] != '\0' ? IVM_ERROR_SPAWN : IVM_SUCCESS;
    }
    g->pid = pid;
    d->gpu = g;
    status = ivmd_gpu_hello(sv[0], &hello, detail, sizeof(detail));
    if (status != IVM_SUCCESS || hello.ngpus == 0) {
        if (status != IVM_SUCCESS) {
            ivm_error("ivm-gpud (pid %d, %s backend): %s; %s", (int)pid, backend, detail,
                      d->cfg.emu_gpus[0] != '\0' ? "the emulated GPUs asked for are missing"
                                                  : "this node has no GPU device");
            kill(pid, SIGKILL);
        } else {
            ivm_info("ivm-gpud (%s backend) found no GPU; this node has none", backend);
        }
        close(sv[0]); /* it exits on EOF */
        g->ngpus = 0;
        if (d->cfg.gpu_shares[0] != '\0') {
            ivm_error("--gpu-shares '%s' but this node has no GPU", d->cfg.gpu_shares);
            return status != IVM_SUCCESS ? status : IVM_ERROR_INVALID_VALUE;
        }
        return status == IVM_SUCCESS || d->cfg.emu_gpus[0] == '\0' ? IVM_SUCCESS : status;
    }
    if (ivmd_gpu_devs_init(d, g, hello.ngpus) != IVM_SUCCESS) {
        kill(pid, SIGKILL);
        close(sv[0]);
        g->ngpus = 0;
        return IVM_ERROR_INVALID_VALUE;
    }
    g->alive   = 1;
    g->backend = hello.backend;
    memcpy(g->backend_name, hello.backend_name, sizeof(g->backend_name));
    g->backend_name[sizeof(g->backend_name) - 1] = '\0';
    g->ngpus = hello.ngpus;
    memcpy(g->gpus, hello.gpus, sizeof(g->gpus));
    for (i = 0; i < (int)g->ngpus; ++i) {
        g->gpus[i].name[sizeof(g->gpus[i].name) - 1] = '\0';
        if (nlisted > 0 && i < nlisted) {
            memcpy(g->visible[i], visible[i], sizeof(g->visible[i]));
        } else {
            snprintf(g->visible[i], sizeof(g->visible[i]), "%d", i);
        }
    }
    if (g->backend != IVM_GPUD_BACKEND_EMU && nlisted > (int)g->ngpus) {
        ivm_warn("--gpus %s names %d GPUs, but only %u of them exist on %s (CUDA stops at "
                 "the first index it does not have): GPU PEs can use IVM_GPU_N(0..%u)",
                 d->cfg.gpus, nlisted, g->ngpus, d->cfg.node, g->ngpus > 0 ? g->ngpus - 1 : 0);
    }
    g->next_seq = 2;
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    g->conn = ivmd_conn_open(d, sv[0], IVMD_CONN_GPUD, EPOLLIN | EPOLLRDHUP);
    if (g->conn == NULL) {
        g->alive = 0;
        return IVM_ERROR_INTERNAL;
    }
    g->conn->peer_pid = pid;
    ivm_info("ivm-gpud pid %d: %s backend%s, %u GPU%s (GPU 0: %s, %llu MiB), %u GPU "
             "device%s%s%s", (int)pid, g->backend_name, g->backend == IVM_GPUD_BACKEND_EMU
                                  ? " (emulated GPUs, host memory)" : "",
             g->ngpus, g->ngpus == 1 ? "" : "s", g->gpus[0].name,
             (unsigned long long)(g->gpus[0].capacity >> 20), g->ndevs,
             g->ndevs == 1 ? "" : "s", d->cfg.gpu_shares[0] != '\0' ? " from --gpu-shares "
                                                                      : "",
             d->cfg.gpu_shares);
    return IVM_SUCCESS;
}

uint32_t ivmd_gpu_count(const ivmd_t *d)
{
    return d->gpu != NULL ? d->gpu->ndevs : 0;
}

/* The physical GPU of device dev (< ndevs). */
static uint32_t ivmd_gpu_phys(const struct ivmd_gpu *g, int dev)
{
    return (uint32_t)g->devs[dev].phys;
}

int ivmd_gpu_share(const ivmd_t *d, int dev)
{
    if (d->gpu == NULL || dev < 0 || (uint32_t)dev >= d->gpu->ndevs) {
        return 0;
    }
    return d->gpu->devs[dev].percent;
}

int ivmd_gpu_alive(const ivmd_t *d)
{
    return d->gpu != NULL && d->gpu->alive;
}

const char *ivmd_gpu_backend_name(const ivmd_t *d)
{
    return d->gpu != NULL ? d->gpu->backend_name : "none";
}

const char *ivmd_gpu_visible(const ivmd_t *d, int dev)
{
    if (d->gpu == NULL || d->gpu->backend != IVM_GPUD_BACKEND_CUDA || dev < 0 ||
        (uint32_t)dev >= d->gpu->ndevs) {
        return NULL;
    }
    return d->gpu->visible[ivmd_gpu_phys(d->gpu, dev)];
}

int ivmd_gpu_reaped(ivmd_t *d, pid_t pid, int wstatus)
{
    if (d->gpu == NULL || d->gpu->pid != pid || pid <= 0) {
        return 0;
    }
    d->gpu->pid = 0;
    if (!d->stopping && !d->gpu->closing) {
        if (WIFSIGNALED(wstatus)) {
            ivm_warn("ivm-gpud (pid %d) was killed by signal %d", (int)pid, WTERMSIG(wstatus));
        } else {
            ivm_warn("ivm-gpud (pid %d) exited with status %d", (int)pid,
                     WEXITSTATUS(wstatus));
        }
    }
    return 1;
}

static void ivmd_gsync_finish(ivmd_t *d, ivmd_gsync_t *gs, int status, const char *detail);

/* The control socket closed (ivm-gpud died, or ivmd shuts down). */
void ivmd_gpu_lost(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    struct ivmd_gpu *g = d->gpu;
    ivmd_gpu_req_t *r;
    ivmd_gpu_ref_t *ref;

    if (g == NULL || g->conn != c) {
        return;
    }
    g->conn  = NULL;
    g->alive = 0;
    if (!d->stopping && !g->closing) {
        ivm_warn("ivm-gpud (pid %d) is gone (%s): GPU maps, syncs and GPU PEs now fail "
                 "with IVM_ERROR_DAEMON_LOST; CPU PEs are served as before",
                 (int)g->pid, why);
    }
    if (g->pid > 0 && !d->stopping && !g->closing) {
        kill(g->pid, SIGKILL); /* if it still runs (a malformed message) */
    }
    ivmd_pool_gpus_lost(d); /* parked GPU processes could never become PEs now */
    while ((r = g->reqs) != NULL) {
        g->reqs = r->next;
        r->cb(d, r, IVM_ERROR_DAEMON_LOST, NULL, NULL, 0, "the GPU daemon (ivm-gpud) is gone");
        free(r);
    }
    while ((ref = g->refs) != NULL) {
        g->refs = ref->next;
        free(ref);
    }
}

void ivmd_gpu_stop(ivmd_t *d)
{
    struct ivmd_gpu *g = d->gpu;
    int wstatus, tries;

    if (g == NULL) {
        return;
    }
    g->closing = 1;
    if (g->conn != NULL) {
        /* Let ivm-gpud answer what it was sent (JOB_END of the jobs just
         * ended), then see its EOF: it exits without a broken pipe. */
        struct pollfd pfd = {.fd = g->conn->h.fd, .events = POLLIN};
        char scratch[4096];
        double left_ms = 2000;
        uint64_t t0 = ivmd_now_ns();
        shutdown(g->conn->h.fd, SHUT_WR);
        while (left_ms > 0 && poll(&pfd, 1, (int)left_ms) == 1 &&
               read(g->conn->h.fd, scratch, sizeof(scratch)) > 0) {
            left_ms = 2000 - (double)(ivmd_now_ns() - t0) / 1e6;
        }
        ivmd_conn_close(d, g->conn, "daemon shutdown");
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
    while (g->syncs != NULL) {
        ivmd_gsync_t *gs = g->syncs;
        g->syncs = gs->next;
        free(gs->steps);
        free(gs);
    }
    free(g);
    d->gpu = NULL;
}

/* ------------------------------------------------------------ requests */

static ivmd_gpu_req_t *ivmd_gpu_req_new(ivmd_t *d, uint16_t type, ivmd_gpu_cb_t cb)
{
    ivmd_gpu_req_t *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->type = type;
    r->cb   = cb;
    return r;
}

/* Send r's request; r is then in flight (its cb runs exactly once, with the
 * reply or DAEMON_LOST). Returns IVM_ERROR_DAEMON_LOST (r freed) if
 * ivm-gpud is gone, or the error of fds that could not go along (r freed). */
static ivmError_t ivmd_gpu_send(ivmd_t *d, ivmd_gpu_req_t *r, const void *payload,
                                uint32_t len, const int *fds, int nfds)
{
    struct ivmd_gpu *g = d->gpu;
    ivmd_outbuf_t *b;
    ivmError_t status;

    if (g == NULL || !g->alive || g->conn == NULL) {
        free(r);
        return IVM_ERROR_DAEMON_LOST;
    }
    r->seq = g->next_seq++;
    b = ivmd_conn_out_alloc(d, g->conn, r->type, r->seq, len);
    if (b == NULL) {
        free(r);
        return IVM_ERROR_DAEMON_LOST;
    }
    memcpy(IVMD_OUTBUF_PAYLOAD(b), payload, len);
    status = ivmd_conn_out_push(d, g->conn, b, fds, nfds);
    if (status != IVM_SUCCESS) {
        free(r);
        return status;
    }
    r->next = g->reqs;
    g->reqs = r;
    return IVM_SUCCESS;
}

static void ivmd_gpu_ignore(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *rep,
                            int *fds, int nfds, const char *detail)
{
    if (status != IVM_SUCCESS && status != IVM_ERROR_DAEMON_LOST) {
        ivm_debug("ivm-gpud: %s failed: %s", ivm_gpud_type_name(r->type), detail);
    }
}

static void ivmd_gpu_release(ivmd_t *d, uint64_t copy)
{
    ivm_gpud_copy_ref_t req = {.copy_id = copy};
    ivmd_gpu_req_t *r = ivmd_gpu_req_new(d, IVM_GPUD_RELEASE, ivmd_gpu_ignore);

    if (r != NULL) {
        ivmd_gpu_send(d, r, &req, sizeof(req), NULL, 0);
    }
}

static void ivmd_gpu_cancel(ivmd_t *d, uint32_t acquire_seq)
{
    ivm_gpud_cancel_req_t req = {.seq = acquire_seq};
    ivmd_gpu_req_t *r = ivmd_gpu_req_new(d, IVM_GPUD_CANCEL, ivmd_gpu_ignore);

    if (r != NULL) {
        ivmd_gpu_send(d, r, &req, sizeof(req), NULL, 0);
    }
}

void ivmd_gpu_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload)
{
    struct ivmd_gpu *g = d->gpu;
    ivmd_gpu_req_t **link, *r;
    const char *why = NULL, *detail = "";
    uint32_t fixed;
    int status;

    if (!(hdr->type & IVM_MSG_REPLY) || ivm_gpud_check_rep(hdr, &why) != IVM_SUCCESS) {
        ivm_error("ivm-gpud sent a malformed message (%s, type %s): its socket is closed",
                  why != NULL ? why : "not a reply", ivm_gpud_type_name(hdr->type));
        ivmd_conn_doom(c, "malformed message from ivm-gpud");
        return;
    }
    for (link = &g->reqs; *link != NULL; link = &(*link)->next) {
        if ((*link)->seq == hdr->seq && ((*link)->type | IVM_MSG_REPLY) == hdr->type) {
            break;
        }
    }
    r = *link;
    if (r == NULL) {
        ivm_error("ivm-gpud answered request %u (%s) that is not in flight: its socket is "
                  "closed", hdr->seq, ivm_gpud_type_name(hdr->type));
        ivmd_conn_doom(c, "reply to no request from ivm-gpud");
        return;
    }
    *link = r->next;
    fixed = ivm_gpud_rep_size(r->type);
    memcpy(&status, payload, sizeof(status));
    if (hdr->length > fixed) {
        char *text = (char *)payload + fixed;
        text[hdr->length - fixed - 1] = '\0';
        detail = text;
    }
    r->cb(d, r, status, payload, c->fds, c->nfds, detail);
    free(r);
}

/* ------------------------------------------------------------ references */

static ivmd_gpu_ref_t *ivmd_gpu_ref_find(ivmd_t *d, uint64_t id)
{
    ivmd_gpu_ref_t *ref;

    for (ref = d->gpu != NULL ? d->gpu->refs : NULL; ref != NULL; ref = ref->next) {
        if (ref->id == id) {
            return ref;
        }
    }
    return NULL;
}

static void ivmd_gpu_ref_unlink(ivmd_t *d, ivmd_gpu_ref_t *ref)
{
    ivmd_gpu_ref_t **link;

    for (link = &d->gpu->refs; *link != NULL; link = &(*link)->next) {
        if (*link == ref) {
            *link = ref->next;
            return;
        }
    }
}

ivmError_t ivmd_gpu_unref(ivmd_t *d, ivmd_pe_t *pe, uint64_t gpu_ref, uint64_t obj_id)
{
    ivmd_gpu_ref_t *ref;

    if (gpu_ref == 0) {
        return IVM_SUCCESS;
    }
    if (d->gpu == NULL) {
        return IVM_ERROR_INVALID_VALUE;
    }
    if (!d->gpu->alive) {
        return IVM_SUCCESS; /* the copies went with ivm-gpud */
    }
    ref = ivmd_gpu_ref_find(d, gpu_ref);
    if (ref == NULL || ref->job != pe->job->id || ref->pe != pe->id || ref->obj != obj_id) {
        return IVM_ERROR_INVALID_VALUE;
    }
    ivmd_gpu_release(d, ref->copy);
    ivmd_gpu_ref_unlink(d, ref);
    free(ref);
    return IVM_SUCCESS;
}

void ivmd_gpu_pe_ended(ivmd_t *d, ivmd_pe_t *pe)
{
    ivmd_gpu_ref_t **link, *ref;

    if (d->gpu == NULL) {
        return;
    }
    for (link = &d->gpu->refs; (ref = *link) != NULL;) {
        if (ref->job == pe->job->id && ref->pe == pe->id) {
            *link = ref->next;
            ivm_debug("job %u: pe %d ended: its reference on GPU copy %llu released",
                      ref->job, ref->pe, (unsigned long long)ref->copy);
            ivmd_gpu_release(d, ref->copy);
            free(ref);
        } else {
            link = &ref->next;
        }
    }
}

void ivmd_gpu_job_end(ivmd_t *d, ivmd_job_t *job)
{
    ivm_gpud_job_req_t req = {.job = job->id};
    ivmd_gpu_ref_t **link, *ref;
    ivmd_gpu_req_t *r;
    int had = 0;

    if (d->gpu == NULL || !d->gpu->alive) {
        return;
    }
    for (link = &d->gpu->refs; (ref = *link) != NULL;) {
        if (ref->job == job->id) {
            *link = ref->next;
            free(ref);
            had = 1;
        } else {
            link = &ref->next;
        }
    }
    (void)had;
    r = ivmd_gpu_req_new(d, IVM_GPUD_JOB_END, ivmd_gpu_ignore);
    if (r != NULL) {
        ivmd_gpu_send(d, r, &req, sizeof(req), NULL, 0);
    }
}

void ivmd_gpu_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_gpu_req_t *r;
    ivmd_gsync_t *gs;

    if (d->gpu == NULL) {
        return;
    }
    for (r = d->gpu->reqs; r != NULL; r = r->next) {
        if (r->conn == c) {
            r->conn = NULL;
            if (r->type == IVM_GPUD_ACQUIRE) {
                /* It may wait for device memory, ahead of other PEs' maps:
                 * withdraw it. If it was granted meanwhile, its reply
                 * comes first and the copy is released (on_acquire). */
                ivmd_gpu_cancel(d, r->seq);
            }
        }
    }
    for (gs = d->gpu->syncs; gs != NULL; gs = gs->next) {
        if (gs->conn == c) {
            gs->conn = NULL;
        }
    }
}

/* ------------------------------------------------------------ maps */

static void ivmd_gpu_map_reply_error(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                     int status, const char *detail)
{
    ivm_msg_map_rep_t rep;

    if (c == NULL) {
        return;
    }
    memset(&rep, 0, sizeof(rep));
    rep.status = status;
    ivmd_conn_reply(d, c, type, seq, &rep, sizeof(rep), detail, NULL, 0);
}

/* A failed ivmMalloc leaves no object behind. */
static void ivmd_gpu_map_undo_malloc(ivmd_t *d, ivmd_job_t *job, ivmd_obj_t *obj,
                                     uint16_t type)
{
    if (type != IVM_MSG_MALLOC || obj == NULL || obj->name == NULL || obj->nmaps > 0) {
        return;
    }
    if (ivmd_cluster_is_proxy(job) && obj->master_node < 0) {
        ivmd_cluster_unregister(d, job, obj);
    }
    ivmd_obj_free_name(&d->reg, job, obj);
}

static void ivmd_gpu_on_acquire(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *payload,
                                int *fds, int nfds, const char *detail)
{
    const ivm_gpud_acquire_rep_t *a = payload;
    ivmd_conn_t *c = r->conn;
    ivmd_job_t *job = ivmd_job_find(&d->reg, r->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, r->obj) : NULL;
    ivmd_pe_t *pe = c != NULL ? c->pe : NULL;
    ivm_msg_map_rep_t rep;
    ivmd_gpu_ref_t *ref;
    int devfd = -1, two[2];

    if (status == IVM_SUCCESS) {
        if (nfds < 1 || a->copy_id == 0 || a->copy_offset > r->off ||
            r->off - a->copy_offset > a->copy_size ||
            r->len > a->copy_size - (r->off - a->copy_offset) || a->alloc_size < a->copy_size) {
            ivm_error("ivm-gpud's ACQUIRE reply is unusable (no fd or a copy not covering "
                      "the range)");
            if (a->copy_id != 0) {
                ivmd_gpu_release(d, a->copy_id);
            }
            status = IVM_ERROR_PROTOCOL;
            detail = "the GPU daemon sent an unusable device copy";
        } else {
            devfd = fds[0];
        }
    }
    if (status != IVM_SUCCESS) {
        ivmd_gpu_map_reply_error(d, c, r->pe_type, r->pe_seq, status,
                                 detail[0] ? detail : "the GPU daemon refused the device copy");
        if (job != NULL) {
            ivmd_gpu_map_undo_malloc(d, job, obj, r->pe_type);
        }
        return;
    }
    if (c == NULL || pe == NULL || pe->state != IVMD_PE_RUNNING || obj == NULL ||
        obj->fd < 0 || job->ending) {
        ivmd_gpu_release(d, a->copy_id);
        ivmd_gpu_map_reply_error(d, c, r->pe_type, r->pe_seq, IVM_ERROR_NOT_FOUND,
                                 "the object or the PE went away while its device copy "
                                 "was made");
        return;
    }
    ref = calloc(1, sizeof(*ref));
    if (ref == NULL || ivmd_obj_map(&d->reg, pe, obj) != IVM_SUCCESS) {
        free(ref);
        ivmd_gpu_release(d, a->copy_id);
        ivmd_gpu_map_reply_error(d, c, r->pe_type, r->pe_seq, IVM_ERROR_NO_MEMORY,
                                 "out of memory");
        ivmd_gpu_map_undo_malloc(d, job, obj, r->pe_type);
        return;
    }
    ref->id        = ++d->gpu->next_ref;
    ref->job       = job->id;
    ref->pe        = pe->id;
    ref->obj       = obj->id;
    ref->copy      = a->copy_id;
    ref->copy_off  = a->copy_offset;
    ref->copy_size = a->copy_size;
    ref->gpu       = ivmd_gpu_phys(d->gpu, IVM_DEV_INDEX(pe->devtype));
    ref->next      = d->gpu->refs;
    d->gpu->refs   = ref;

    memset(&rep, 0, sizeof(rep));
    rep.flags      = (obj->master_node < 0 ? IVM_MAP_MASTER : 0) |
                     ((a->flags & IVM_GPUD_COPY_CUDA) ? IVM_MAP_GPU_CUDA : IVM_MAP_GPU_EMU);
    rep.obj_id     = obj->id;
    rep.obj_size   = obj->size;
    rep.offset     = r->off;
    rep.size       = r->len;
    rep.gpu_ref    = ref->id;
    rep.gpu_offset = a->copy_offset;
    rep.gpu_size   = a->alloc_size;
    two[0] = obj->fd;
    two[1] = devfd;
    ivm_debug("job %u: pe %d maps [%llu, +%llu) of object %llu on GPU %u: copy %llu%s",
              job->id, pe->id, (unsigned long long)r->off, (unsigned long long)r->len,
              (unsigned long long)obj->id, ref->gpu, (unsigned long long)a->copy_id,
              (a->flags & IVM_GPUD_COPY_REUSED) ? " (reused)" : "");
    ivmd_conn_reply(d, c, r->pe_type, r->pe_seq, &rep, sizeof(rep), NULL, two, 2);
}

void ivmd_gpu_map(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq, ivmd_obj_t *obj,
                  uint64_t off, uint64_t size)
{
    ivm_gpud_acquire_req_t req;
    ivmd_gpu_req_t *r;
    int dev = IVM_DEV_INDEX(c->pe->devtype);

    if (!ivmd_gpu_alive(d) || (uint32_t)dev >= d->gpu->ndevs) {
        ivmd_gpu_map_reply_error(d, c, type, seq, IVM_ERROR_DAEMON_LOST,
                                 "the GPU daemon (ivm-gpud) of this node is gone");
        ivmd_gpu_map_undo_malloc(d, c->job, obj, type);
        return;
    }
    r = ivmd_gpu_req_new(d, IVM_GPUD_ACQUIRE, ivmd_gpu_on_acquire);
    if (r == NULL) {
        ivmd_gpu_map_reply_error(d, c, type, seq, IVM_ERROR_NO_MEMORY, "out of memory");
        ivmd_gpu_map_undo_malloc(d, c->job, obj, type);
        return;
    }
    r->conn    = c;
    r->pe_type = type;
    r->pe_seq  = seq;
    r->job     = c->job->id;
    r->obj     = obj->id;
    r->off     = off;
    r->len     = size;
    memset(&req, 0, sizeof(req));
    req.job      = c->job->id;
    req.gpu      = ivmd_gpu_phys(d->gpu, dev); /* copies are per physical GPU */
    req.obj_id   = obj->id;
    req.obj_size = obj->size;
    req.offset   = off;
    req.size     = size;
    ++obj->gpu_acquires;
    if (ivmd_gpu_send(d, r, &req, sizeof(req), &obj->fd, 1) != IVM_SUCCESS) {
        ivmd_gpu_map_reply_error(d, c, type, seq, IVM_ERROR_DAEMON_LOST,
                                 "the GPU daemon (ivm-gpud) of this node is gone");
        ivmd_gpu_map_undo_malloc(d, c->job, obj, type);
    }
}

/* ------------------------------------------------------------ syncs */

static ivmd_gsync_t *ivmd_gsync_find(ivmd_t *d, uint64_t id)
{
    ivmd_gsync_t *gs;

    for (gs = d->gpu != NULL ? d->gpu->syncs : NULL; gs != NULL; gs = gs->next) {
        if (gs->id == id) {
            return gs;
        }
    }
    return NULL;
}

static void ivmd_gsync_finish(ivmd_t *d, ivmd_gsync_t *gs, int status, const char *detail)
{
    ivmd_gsync_t **link;

    for (link = &d->gpu->syncs; *link != NULL; link = &(*link)->next) {
        if (*link == gs) {
            *link = gs->next;
            break;
        }
    }
    if (gs->done != NULL) {
        gs->done(d, gs->arg, status);
    } else if (gs->conn != NULL) {
        ivm_msg_status_t rep = {.status = status};
        ivmd_conn_reply(d, gs->conn, gs->type, gs->seq, &rep, sizeof(rep),
                        status != IVM_SUCCESS ? detail : NULL, NULL, 0);
    }
    free(gs->steps);
    free(gs);
}

static void ivmd_gsync_run(ivmd_t *d, ivmd_gsync_t *gs);

static void ivmd_gsync_on_reply(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *rep,
                                int *fds, int nfds, const char *detail)
{
    ivmd_gsync_t *gs = ivmd_gsync_find(d, r->gsync);

    if (gs == NULL) {
        return;
    }
    if (status != IVM_SUCCESS) {
        ivmd_gsync_finish(d, gs, status,
                          detail[0] ? detail : "moving bytes to or from the device copy failed");
        return;
    }
    ivmd_gsync_run(d, gs);
}

/* A cluster step of a sync ended (cluster.c). */
void ivmd_gpu_sync_resume(ivmd_t *d, uint64_t gsync, int status)
{
    ivmd_gsync_t *gs = ivmd_gsync_find(d, gsync);

    if (gs == NULL) {
        return;
    }
    if (status != IVM_SUCCESS) {
        ivmd_gsync_finish(d, gs, status,
                          status == IVM_ERROR_DAEMON_LOST
                              ? "the node holding the object's master is unreachable"
                              : "the transfer failed");
        return;
    }
    ivmd_gsync_run(d, gs);
}

/* Send a step's request to ivm-gpud: the sync goes on in its reply (or ends
 * here if it cannot be sent). */
static void ivmd_gsync_send(ivmd_t *d, ivmd_gsync_t *gs, uint16_t type, const void *req,
                            uint32_t len)
{
    ivmd_gpu_req_t *r = ivmd_gpu_req_new(d, type, ivmd_gsync_on_reply);

    if (r == NULL) {
        ivmd_gsync_finish(d, gs, IVM_ERROR_NO_MEMORY, "out of memory");
        return;
    }
    r->gsync = gs->id;
    if (ivmd_gpu_send(d, r, req, len, NULL, 0) != IVM_SUCCESS) {
        ivmd_gsync_finish(d, gs, IVM_ERROR_DAEMON_LOST,
                          "the GPU daemon (ivm-gpud) of this node is gone");
    }
}

/* Run the steps from gs->at on until one must wait. */
static void ivmd_gsync_run(ivmd_t *d, ivmd_gsync_t *gs)
{
    while (gs->at < gs->nsteps) {
        ivmd_gstep_t *s = &gs->steps[gs->at++];
        ivmd_job_t *job;
        ivmd_obj_t *obj;
        int rc;

        switch (s->kind) {
        case IVMD_GSTEP_D2H:
        case IVMD_GSTEP_H2D: {
            ivm_gpud_copy_req_t req;
            memset(&req, 0, sizeof(req));
            req.copy_id = s->copy;
            req.offset  = s->off;
            req.size    = s->len;
            req.dir     = s->kind == IVMD_GSTEP_D2H ? IVM_GPUD_COPY_D2H : IVM_GPUD_COPY_H2D;
            ivmd_gsync_send(d, gs, IVM_GPUD_COPY, &req, sizeof(req));
            return;
        }
        case IVMD_GSTEP_FENCE: {
            ivm_gpud_stats_req_t req = {.gpu = 0};
            ivmd_gsync_send(d, gs, IVM_GPUD_GSTATS, &req, sizeof(req));
            return;
        }
        case IVMD_GSTEP_CLUSTER:
            job = ivmd_job_find(&d->reg, gs->job);
            obj = job != NULL ? ivmd_obj_find_id(job, gs->obj) : NULL;
            if (obj == NULL) {
                ivmd_gsync_finish(d, gs, IVM_ERROR_INVALID_VALUE, "the object is gone");
                return;
            }
            rc = ivmd_cluster_sync_op(d, NULL, NULL, gs->job, obj, s->op, s->off, s->len,
                                      gs->id);
            if (rc == IVMD_DEFERRED) {
                return;
            }
            if (rc != IVM_SUCCESS) {
                ivmd_gsync_finish(d, gs, rc,
                                  rc == IVM_ERROR_DAEMON_LOST
                                      ? "the node holding the object's master is unreachable"
                                      : "the sync of the node copy failed");
                return;
            }
            break;
        }
    }
    ivmd_gsync_finish(d, gs, IVM_SUCCESS, NULL);
}

static ivmd_gsync_t *ivmd_gsync_new(ivmd_t *d, uint32_t job, uint64_t obj, int max_steps)
{
    ivmd_gsync_t *gs = calloc(1, sizeof(*gs));

    if (gs == NULL) {
        return NULL;
    }
    gs->steps = calloc((size_t)max_steps, sizeof(*gs->steps));
    if (gs->steps == NULL) {
        free(gs);
        return NULL;
    }
    gs->id        = ++d->gpu->next_sync;
    gs->job       = job;
    gs->obj       = obj;
    gs->next      = d->gpu->syncs;
    d->gpu->syncs = gs;
    return gs;
}

static void ivmd_gsync_add(ivmd_gsync_t *gs, ivmd_gstep_kind_t kind, uint64_t copy,
                           uint64_t off, uint64_t len, uint32_t op)
{
    ivmd_gstep_t *s = &gs->steps[gs->nsteps++];

    s->kind = kind;
    s->copy = copy;
    s->off  = off;
    s->len  = len;
    s->op   = op;
}

/* [off, off+len) clipped to a copy; 0 if they do not meet. */
static int ivmd_gpu_clip(const ivmd_gpu_ref_t *ref, uint64_t off, uint64_t len,
                         uint64_t *lo_p, uint64_t *n_p)
{
    uint64_t lo = off > ref->copy_off ? off : ref->copy_off;
    uint64_t end = off + len, cend = ref->copy_off + ref->copy_size;
    uint64_t hi = end < cend ? end : cend;

    if (lo >= hi) {
        return 0;
    }
    *lo_p = lo;
    *n_p  = hi - lo;
    return 1;
}

/* Add a COPY step for each device copy of (job, obj) on this node meeting
 * [off, off+len), once per copy, except copy `skip`. */
static void ivmd_gsync_add_copies(ivmd_t *d, ivmd_gsync_t *gs, ivmd_gstep_kind_t kind,
                                  uint64_t off, uint64_t len, uint64_t skip, int max)
{
    ivmd_gpu_ref_t *ref, *seen;
    uint64_t lo, n;

    for (ref = d->gpu->refs; ref != NULL && gs->nsteps < max; ref = ref->next) {
        if (ref->job != gs->job || ref->obj != gs->obj || ref->copy == skip ||
            !ivmd_gpu_clip(ref, off, len, &lo, &n)) {
            continue;
        }
        for (seen = d->gpu->refs; seen != ref; seen = seen->next) {
            if (seen->copy == ref->copy) {
                break;
            }
        }
        if (seen == ref) {
            ivmd_gsync_add(gs, kind, ref->copy, lo, n, 0);
        }
    }
}

static int ivmd_gpu_ncopies(const ivmd_t *d)
{
    const ivmd_gpu_ref_t *ref;
    int n = 0;

    for (ref = d->gpu->refs; ref != NULL; ref = ref->next) {
        ++n;
    }
    return n;
}

int ivmd_gpu_has_copies(const ivmd_t *d, uint32_t job, uint64_t obj, uint64_t off,
                        uint64_t len)
{
    const ivmd_gpu_ref_t *ref;
    uint64_t lo, n;

    if (d->gpu == NULL || !d->gpu->alive) {
        return 0;
    }
    for (ref = d->gpu->refs; ref != NULL; ref = ref->next) {
        if (ref->job == job && ref->obj == obj && ivmd_gpu_clip(ref, off, len, &lo, &n)) {
            return 1;
        }
    }
    return 0;
}

int ivmd_gpu_sync(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                  const ivm_msg_sync_req_t *req, char *detail, size_t detail_len)
{
    ivmd_gpu_ref_t *own = NULL;
    ivmd_gsync_t *gs;
    uint64_t off = req->offset, len = req->size;
    int max;

    if (req->gpu_ref != 0) {
        if (d->gpu == NULL || c->pe == NULL || !IVM_DEV_IS_GPU(c->pe->devtype)) {
            snprintf(detail, detail_len, "a sync names a device copy, but pe %d is no GPU PE",
                     c->pe != NULL ? c->pe->id : -1);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (!ivmd_gpu_alive(d)) {
            snprintf(detail, detail_len, "the GPU daemon (ivm-gpud) of this node is gone");
            return IVM_ERROR_DAEMON_LOST;
        }
        own = ivmd_gpu_ref_find(d, req->gpu_ref);
        /* The copy holds [off, off+len) (an empty range: off inside or at its end). */
        if (own == NULL || own->job != c->job->id || own->pe != c->pe->id ||
            own->obj != obj->id || off < own->copy_off ||
            off - own->copy_off > own->copy_size ||
            len > own->copy_size - (off - own->copy_off)) {
            snprintf(detail, detail_len, "no device copy of this PE holds the range");
            return IVM_ERROR_INVALID_VALUE;
        }
    }
    if (len == 0) {
        return IVM_SUCCESS;
    }
    max = ivmd_gpu_ncopies(d) + 3;
    gs  = ivmd_gsync_new(d, c->job->id, obj->id, max);
    if (gs == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    gs->conn = c;
    gs->seq  = hdr->seq;
    gs->type = hdr->type;
    switch (req->op) {
    case IVM_SYNC_PUT:
        ivmd_gsync_add(gs, IVMD_GSTEP_D2H, own->copy, off, len, 0);
        if (obj->master_node >= 0) {
            ivmd_gsync_add(gs, IVMD_GSTEP_CLUSTER, 0, off, len, IVM_SYNC_PUT);
        }
        break;
    case IVM_SYNC_GET:
        if (obj->master_node >= 0) {
            ivmd_gsync_add(gs, IVMD_GSTEP_CLUSTER, 0, off, len, IVM_SYNC_GET);
        }
        ivmd_gsync_add(gs, IVMD_GSTEP_H2D, own->copy, off, len, 0);
        break;
    case IVM_SYNC_PUT_GROUP:
        /* Caller's copy -> node copy -> master -> other nodes; then this
         * node's other device copies. */
        if (own != NULL) {
            ivmd_gsync_add(gs, IVMD_GSTEP_D2H, own->copy, off, len, 0);
        }
        ivmd_gsync_add(gs, IVMD_GSTEP_CLUSTER, 0, off, len, IVM_SYNC_PUT_GROUP);
        ivmd_gsync_add_copies(d, gs, IVMD_GSTEP_H2D, off, len, own != NULL ? own->copy : 0,
                              max);
        break;
    default:
        /* GET_GROUP: every device copy of this node into the node copy, then
         * the master gathers from the nodes. */
        ivmd_gsync_add_copies(d, gs, IVMD_GSTEP_D2H, off, len, 0, max);
        ivmd_gsync_add(gs, IVMD_GSTEP_CLUSTER, 0, off, len, IVM_SYNC_GET_GROUP);
        break;
    }
    ivmd_gsync_run(d, gs);
    return IVMD_DEFERRED;
}

/* ------------------------------------------------------------ peers' group calls */

/* Bytes of (job, obj) at [off, off+len) are about to leave this node for a
 * gather (pull = D2H from this node's device copies first) or just arrived
 * from a scatter (push = H2D into them). Calls done(arg, status) when the
 * device copies are done (at once, returning 0, if there is nothing to do;
 * else returns 1). `fence`: wait for earlier copies of the object too. */
int ivmd_gpu_group_refresh(ivmd_t *d, uint32_t job, uint64_t obj, uint64_t off, uint64_t len,
                           int pull, int fence, ivmd_gsync_done_t done, void *arg)
{
    ivmd_gsync_t *gs, *other;
    int max, busy = 0;

    if (d->gpu == NULL || !d->gpu->alive) {
        return 0;
    }
    for (other = d->gpu->syncs; other != NULL; other = other->next) {
        busy |= other->job == job && other->obj == obj;
    }
    if (!ivmd_gpu_has_copies(d, job, obj, off, len) && !(fence && busy)) {
        return 0;
    }
    max = ivmd_gpu_ncopies(d) + 2;
    gs  = ivmd_gsync_new(d, job, obj, max);
    if (gs == NULL) {
        return 0;
    }
    gs->done = done;
    gs->arg  = arg;
    ivmd_gsync_add_copies(d, gs, pull ? IVMD_GSTEP_D2H : IVMD_GSTEP_H2D, off, len, 0, max);
    if (gs->nsteps == 0) {
        ivmd_gsync_add(gs, IVMD_GSTEP_FENCE, 0, 0, 0, 0);
    }
    ivmd_gsync_run(d, gs);
    return 1;
}

/* ------------------------------------------------------------ mirror fills */

static void ivmd_gpu_on_filled(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *payload,
                               int *fds, int nfds, const char *detail)
{
    (void)payload;
    (void)fds;
    (void)nfds;
    if (status != IVM_SUCCESS && status != IVM_ERROR_DAEMON_LOST) {
        ivm_error("job %u object %llu: the device copies did not get the filled bytes: %s",
                  r->job, (unsigned long long)r->obj, detail[0] ? detail : "?");
    }
    if (r->done != NULL) {
        r->done(d, r->done_arg, status);
    }
}

int ivmd_gpu_filled(ivmd_t *d, uint32_t job, const ivmd_obj_t *obj, uint64_t off,
                    uint64_t len, ivmd_gsync_done_t done, void *arg)
{
    ivm_gpud_filled_req_t req;
    ivmd_gpu_req_t *r;

    if (len == 0 || obj->gpu_acquires == 0 || !ivmd_gpu_alive(d)) {
        return 0;
    }
    r = ivmd_gpu_req_new(d, IVM_GPUD_FILLED, ivmd_gpu_on_filled);
    if (r == NULL) {
        ivm_error("job %u object %llu: out of memory: its device copies miss filled bytes",
                  job, (unsigned long long)obj->id);
        return 0;
    }
    r->job      = job;
    r->obj      = obj->id;
    r->done     = done;
    r->done_arg = arg;
    memset(&req, 0, sizeof(req));
    req.job    = job;
    req.obj_id = obj->id;
    req.offset = off;
    req.size   = len;
    /* On failure r is freed and gpud is gone: no device copy is used again. */
    return ivmd_gpu_send(d, r, &req, sizeof(req), NULL, 0) == IVM_SUCCESS;
}

/* ------------------------------------------------------------ GPU_INFO */

static void ivmd_gpu_on_stats(ivmd_t *d, ivmd_gpu_req_t *r, int status, const void *payload,
                              int *fds, int nfds, const char *detail)
{
    const ivm_gpud_stats_rep_t *s = payload;
    ivm_msg_gpu_info_rep_t rep;
    struct ivmd_gpu *g = d->gpu;

    if (r->conn == NULL) {
        return;
    }
    if (status == IVM_ERROR_DAEMON_LOST) {
        status = IVM_SUCCESS; /* the answer: it is gone (no IVM_GPU_INFO_ALIVE) */
        s      = NULL;
    }
    memset(&rep, 0, sizeof(rep));
    rep.status   = status;
    rep.ngpus    = g->ngpus;
    rep.granularity = g->gpus[r->gpu < g->ngpus ? r->gpu : 0].granularity;
    rep.gpud_pid = (uint32_t)g->pid;
    snprintf(rep.backend, sizeof(rep.backend), "%s", g->backend_name);
    if (status == IVM_SUCCESS && s != NULL) {
        rep.flags         = IVM_GPU_INFO_ALIVE;
        snprintf(rep.name, sizeof(rep.name), "%s", g->gpus[r->gpu < g->ngpus ? r->gpu : 0].name);
        rep.capacity      = s->capacity;
        rep.used          = s->used;
        rep.cached_bytes  = s->cached_bytes;
        rep.allocations   = s->allocations;
        rep.evictions     = s->evictions;
        rep.copies        = s->copies;
        rep.mapped_refs   = s->mapped_refs;
        rep.waiting       = s->waiting;
        rep.wait_timeouts = s->wait_timeouts;
    }
    ivmd_conn_reply(d, r->conn, r->pe_type, r->pe_seq, &rep, sizeof(rep),
                    status != IVM_SUCCESS ? detail : NULL, NULL, 0);
}

int ivmd_gpu_info(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_gpu_info_req_t *req, ivm_msg_gpu_info_rep_t *rep, char *detail,
                  size_t detail_len)
{
    struct ivmd_gpu *g = d->gpu;
    ivm_gpud_stats_req_t sreq;
    ivmd_gpu_req_t *r;

    if (g == NULL || g->ngpus == 0) {
        snprintf(detail, detail_len, "%s has no GPU (no GPU daemon serves it)", d->cfg.node);
        return IVM_ERROR_NOT_FOUND;
    }
    if (req->gpu >= g->ngpus) {
        snprintf(detail, detail_len, "%s has no GPU %u (it has %u)", d->cfg.node, req->gpu,
                 g->ngpus);
        return IVM_ERROR_NOT_FOUND;
    }
    rep->ngpus    = g->ngpus;
    rep->gpud_pid = (uint32_t)g->pid;
    snprintf(rep->backend, sizeof(rep->backend), "%s", g->backend_name);
    snprintf(rep->name, sizeof(rep->name), "%s", g->gpus[req->gpu].name);
    rep->granularity = g->gpus[req->gpu].granularity;
    rep->capacity    = g->gpus[req->gpu].capacity;
    if (!g->alive) {
        return IVM_SUCCESS; /* flags without IVM_GPU_INFO_ALIVE */
    }
    r = ivmd_gpu_req_new(d, IVM_GPUD_GSTATS, ivmd_gpu_on_stats);
    if (r == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    r->conn    = c;
    r->pe_type = hdr->type;
    r->pe_seq  = hdr->seq;
    r->gpu     = req->gpu;
    memset(&sreq, 0, sizeof(sreq));
    sreq.gpu = req->gpu;
    if (ivmd_gpu_send(d, r, &sreq, sizeof(sreq), NULL, 0) != IVM_SUCCESS) {
        return IVM_SUCCESS;
    }
    return IVMD_DEFERRED;
}
