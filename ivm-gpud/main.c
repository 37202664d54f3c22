/* ivm-gpud: settings, backend choice, bring-up, the loop, teardown. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpud.h"
#include "log.h"
#include "status.h"
#include "version.h"

#define GPUD_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(gpud_config, __VA_ARGS__)
static const ivm_config_field_t gpud_config_fields[] = {
    GPUD_CONFIG_TABLE(GPUD_CONFIG_FIELD) {0}};

ivmError_t gpud_parse_size(const char *text, uint64_t *bytes_p)
{
    unsigned long long v;
    char *end;

    errno = 0;
    v = strtoull(text, &end, 10);
    if (end == text || errno != 0 || *text == '-') {
        return IVM_ERROR_INVALID_VALUE;
    }
    switch (*end) {
    case 'K': case 'k': v <<= 10; ++end; break;
    case 'M': case 'm': v <<= 20; ++end; break;
    case 'G': case 'g': v <<= 30; ++end; break;
    default: break;
    }
    if (*end != '\0' || v > (1ull << 50)) {
        return IVM_ERROR_INVALID_VALUE;
    }
    *bytes_p = v;
    return IVM_SUCCESS;
}

static void gpud_usage(FILE *out)
{
    fprintf(out, "usage: ivm-gpud --ctl-fd N [options]\n"
                 "The IVM GPU daemon of a node, started by ivmd: one device copy per\n"
                 "(job, object region, GPU), memory-safe admission, emu or cuda backend.\n\n"
                 "options:\n");
    ivm_config_print_help(gpud_config_fields, out);
}

static ivmError_t gpud_parse_env(gpud_t *g, char *err, size_t errlen)
{
    const char *timeout = getenv("IVM_GPU_ADMIT_TIMEOUT");

    if (ivm_config_load_env(gpud_config_fields, &g->cfg, err, errlen) != IVM_SUCCESS) {
        return IVM_ERROR_INVALID_VALUE;
    }
    if (timeout != NULL) {
        return ivm_config_set(gpud_config_fields, &g->cfg, "admit-timeout", timeout, err,
                              errlen);
    }
    return IVM_SUCCESS;
}

/* Returns IVM_SUCCESS, or an error after printing why; *help_p for --help. */
static ivmError_t gpud_parse(gpud_t *g, int argc, char **argv, int *help_p)
{
    char err[256];
    int first, level;

    if (ivm_config_defaults(gpud_config_fields, &g->cfg) != IVM_SUCCESS ||
        gpud_parse_env(g, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_config_parse_args(gpud_config_fields, &g->cfg, argc, argv, &first, help_p, err,
                              sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (*help_p) {
        return IVM_SUCCESS;
    }
    if (first < argc) {
        ivm_error("unexpected argument '%s' (see --help)", argv[first]);
        return IVM_ERROR_INVALID_VALUE;
    }
    level = ivm_log_level_parse(g->cfg.log_level);
    if (level < 0) {
        ivm_error("bad log level '%s'", g->cfg.log_level);
        return IVM_ERROR_INVALID_VALUE;
    }
    ivm_log_current_level = level;
    ivm_log_set_prefix("%.40s ivm-gpud", g->cfg.node);
    if (g->cfg.ctl_fd < 0 || g->cfg.ctl_fd > 1 << 20 || fcntl((int)g->cfg.ctl_fd, F_GETFD) < 0) {
        ivm_error("--ctl-fd %ld is not an open fd (see --help)",
                g->cfg.ctl_fd);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (gpud_parse_size(g->cfg.mem_limit, &g->mem_limit) != IVM_SUCCESS) {
        ivm_error("--mem-limit '%s' is not a size (K/M/G suffix)",
                g->cfg.mem_limit);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (!(g->cfg.admit_timeout >= 0 && g->cfg.admit_timeout <= 1e6)) {
        ivm_error("--admit-timeout must be 0 to 1e6 seconds");
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

/* cuda: must work; auto: cuda if it works, else no GPUs; emu: emulated. */
static ivmError_t gpud_backend_open(gpud_t *g)
{
    const char *want = g->cfg.backend;
    ivmError_t status;

    if (strcmp(want, "emu") == 0) {
        g->ops = &gpud_backend_emu;
    } else if (strcmp(want, "cuda") == 0 || strcmp(want, "auto") == 0) {
#ifdef IVM_HAVE_CUDA
        g->ops = &gpud_backend_cuda;
#else
        if (strcmp(want, "cuda") == 0) {
            ivm_error("--backend cuda: this ivm-gpud was built without CUDA support");
            return IVM_ERROR_UNSUPPORTED;
        }
        ivm_info("--backend auto: built without CUDA support: no GPUs");
        return IVM_SUCCESS;
#endif
    } else {
        ivm_error("--backend '%s': expected emu, cuda or auto", want);
        return IVM_ERROR_INVALID_VALUE;
    }
    status = g->ops->init(&g->cfg, &g->bctx, &g->ngpus);
    if (status != IVM_SUCCESS) {
        if (strcmp(want, "auto") == 0) {
            ivm_info("--backend auto: no usable CUDA driver or GPU: no GPUs");
            g->ops   = NULL;
            g->ngpus = 0;
            return IVM_SUCCESS;
        }
        ivm_error("--backend %s: %s could not start (%s); see above", want, g->ops->desc,
                  ivm_status_string(status));
        g->ops = NULL;
        return status;
    }
    return IVM_SUCCESS;
}

static ivmError_t gpud_gpus_describe(gpud_t *g)
{
    uint64_t capacity[IVM_GPUD_MAX_GPUS];
    ivmError_t status;
    uint32_t i;

    if (g->ngpus > IVM_GPUD_MAX_GPUS) {
        ivm_warn("%u GPUs: using the first %d", g->ngpus, IVM_GPUD_MAX_GPUS);
        g->ngpus = IVM_GPUD_MAX_GPUS;
    }
    for (i = 0; i < g->ngpus; ++i) {
        ivm_gpud_gpu_info_t *gi = &g->gpus[i];
        status = g->ops->gpu_info(g->bctx, i, &gi->capacity, &gi->granularity, gi->name,
                                  sizeof(gi->name));
        if (status != IVM_SUCCESS) {
            return status;
        }
        g->ops->gpu_env(g->bctx, i, gi->env, gi->share_env);
        if (g->mem_limit > 0 && g->mem_limit < gi->capacity) {
            gi->capacity = g->mem_limit;
        }
        gi->capacity -= gi->capacity % gi->granularity;
        capacity[i] = gi->capacity;
        ivm_info("GPU %u: %s, %llu bytes, granularity %llu", i, gi->name,
                 (unsigned long long)gi->capacity, (unsigned long long)gi->granularity);
    }
    return gpud_admit_create(g->ngpus, capacity, &g->admit);
}

static ivmError_t gpud_events_open(gpud_t *g)
{
    struct epoll_event ev = {.events = EPOLLIN};
    sigset_t mask;

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    g->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    g->epoll_fd  = epoll_create1(EPOLL_CLOEXEC);
    if (g->signal_fd < 0 || g->epoll_fd < 0) {
        ivm_error("signalfd/epoll_create1: %m");
        return IVM_ERROR_INTERNAL;
    }
    ev.data.fd = g->signal_fd;
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->signal_fd, &ev) != 0) {
        ivm_error("epoll_ctl: %m");
        return IVM_ERROR_INTERNAL;
    }
    ev.data.fd = g->ctl_fd;
    if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->ctl_fd, &ev) != 0) {
        ivm_error("epoll_ctl on --ctl-fd %d: %m", g->ctl_fd);
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

static ivmError_t gpud_open(gpud_t *g)
{
    ivmError_t status;

    g->ctl_fd = (int)g->cfg.ctl_fd;
    fcntl(g->ctl_fd, F_SETFD, FD_CLOEXEC);
    g->next_copy_id = 1;
    g->rx = malloc(sizeof(ivm_msg_hdr_t) + IVM_MSG_MAX_PAYLOAD);
    if (g->rx == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    status = gpud_backend_open(g);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = gpud_events_open(g);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (g->ops != NULL) {
        status = gpud_gpus_describe(g);
    } else {
        status = gpud_admit_create(0, NULL, &g->admit);
    }
    if (status == IVM_SUCCESS) {
        ivm_info("serving %u GPUs (%s) on fd %d", g->ngpus,
                 g->ops != NULL ? g->ops->desc : "none", g->ctl_fd);
    }
    return status;
}

static void gpud_close(gpud_t *g)
{
    gpud_state_clear(g);
    if (g->admit != NULL) {
        gpud_admit_destroy(g->admit);
    }
    if (g->ops != NULL) {
        g->ops->fini(g->bctx);
    }
    if (g->epoll_fd >= 0) {
        close(g->epoll_fd);
    }
    if (g->signal_fd >= 0) {
        close(g->signal_fd);
    }
    if (g->ctl_fd >= 0) {
        close(g->ctl_fd);
    }
    free(g->rx);
    ivm_config_release(gpud_config_fields, &g->cfg);
}

int main(int argc, char **argv)
{
    gpud_t g;
    int help = 0;
    ivmError_t status;

    memset(&g, 0, sizeof(g));
    g.epoll_fd = g.signal_fd = g.ctl_fd = -1;
    ivm_log_set_prefix("ivm-gpud");
    if (gpud_parse(&g, argc, argv, &help) != IVM_SUCCESS) {
        ivm_config_release(gpud_config_fields, &g.cfg);
        return 2;
    }
    if (help == IVM_CONFIG_ASK_MAN) {
        ivm_config_print_man(gpud_config_fields, stdout);
        ivm_config_release(gpud_config_fields, &g.cfg);
        return 0;
    }
    if (help == IVM_CONFIG_ASK_VERSION) {
        ivm_version_print(stdout, "ivm-gpud");
        ivm_config_release(gpud_config_fields, &g.cfg);
        return 0;
    }
    if (help) {
        gpud_usage(stdout);
        ivm_config_release(gpud_config_fields, &g.cfg);
        return 0;
    }
    status = gpud_open(&g);
    if (status == IVM_SUCCESS) {
        status = gpud_loop_run(&g);
    }
    gpud_close(&g);
    return status == IVM_SUCCESS ? 0 : 1;
}
