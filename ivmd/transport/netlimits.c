/* Network limits: the fd budget, accept pauses, pre-auth peer sources. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "transport/netlimits.h"
#include "log.h"

#define IVMD_NETLIMITS_PAUSE_NS 100000000u /* a listener out of fds rests 100 ms */
#define IVMD_NETLIMITS_FD_MIN   16         /* fds a budget must leave to jobs */

static void ivmd_netlimits_resume(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_netlimits_t *n = arg;
    uint64_t ticks;
    int i;

    if (read(n->timer_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
        return;
    }
    for (i = 0; i < n->npaused; ++i) {
        ivmd_handler_t *h = n->paused[i];
        if (h->fd >= 0 && ivmd_loop_watch(n->loop, h, EPOLLIN) == IVM_SUCCESS) {
            /* Pending connections are taken by the next loop turn. */
            ivm_debug("accepting again on fd %d", h->fd);
        }
    }
    n->npaused = 0;
}

/* The open-file limit to run with: the hard one, or --max-fds below it. */
static ivmError_t ivmd_netlimits_raise(const ivmd_netlimits_cfg_t *cfg, struct rlimit *rl)
{
    if (getrlimit(RLIMIT_NOFILE, rl) != 0) {
        ivm_error("getrlimit(RLIMIT_NOFILE): %m");
        return IVM_ERROR_INTERNAL;
    }
    rl->rlim_cur = rl->rlim_max;
    if (cfg->max_fds > 0 && (rlim_t)cfg->max_fds < rl->rlim_cur) {
        rl->rlim_cur = (rlim_t)cfg->max_fds;
    }
    if (setrlimit(RLIMIT_NOFILE, rl) != 0) {
        ivm_warn("cannot raise the open-file limit to %llu: %m",
                 (unsigned long long)rl->rlim_cur);
        getrlimit(RLIMIT_NOFILE, rl);
    }
    if (rl->rlim_cur < (rlim_t)(cfg->fd_reserve + IVMD_NETLIMITS_FD_MIN)) {
        ivm_error("the open-file limit %llu leaves no fd to jobs beyond --fd-reserve %ld",
                  (unsigned long long)rl->rlim_cur, cfg->fd_reserve);
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_netlimits_open(ivmd_netlimits_t *n, ivmd_loop_t *loop,
                               const ivmd_conn_table_t *conns, const ivmd_netlimits_cfg_t *cfg)
{
    struct rlimit rl;
    ivmError_t status;

    memset(n, 0, sizeof(*n));
    n->loop     = loop;
    n->conns    = conns;
    n->cfg      = *cfg;
    n->timer_fd = -1;
    if (cfg->fd_reserve < 8) {
        ivm_error("--fd-reserve %ld: the daemon needs at least 8 fds for its own work",
                  cfg->fd_reserve);
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivmd_netlimits_raise(cfg, &rl);
    if (status != IVM_SUCCESS) {
        return status;
    }
    n->fd_limit  = rl.rlim_cur > (rlim_t)INT32_MAX ? INT32_MAX : (long)rl.rlim_cur;
    n->obj_line  = n->fd_limit - cfg->fd_reserve;
    n->conn_line = n->fd_limit - cfg->fd_reserve / 2;
    n->timer_fd  = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (n->timer_fd < 0) {
        ivm_error("timerfd_create: %m");
        return IVM_ERROR_INTERNAL;
    }
    n->timer_h = (ivmd_handler_t){.fd = n->timer_fd, .cb = ivmd_netlimits_resume, .arg = n};
    ivm_info("open-file limit %ld: objects below fd %ld, connections below fd %ld",
             n->fd_limit, n->obj_line, n->conn_line);
    return ivmd_loop_watch(loop, &n->timer_h, EPOLLIN);
}

void ivmd_netlimits_close(ivmd_netlimits_t *n)
{
    if (n->timer_fd >= 0) {
        close(n->timer_fd);
        n->timer_fd = -1;
    }
}

void ivmd_netlimits_accept_pause(ivmd_netlimits_t *n, ivmd_handler_t *h, const char *what)
{
    struct itimerspec once = {.it_value = {.tv_nsec = IVMD_NETLIMITS_PAUSE_NS}};
    int i;

    for (i = 0; i < n->npaused; ++i) {
        if (n->paused[i] == h) {
            return;
        }
    }
    ivm_warn_limited("cannot accept %s (%m): not accepting for %u ms", what,
                     IVMD_NETLIMITS_PAUSE_NS / 1000000u);
    ivmd_loop_unwatch(n->loop, h);
    if (n->npaused < IVMD_NETLIMITS_MAX_PAUSED) {
        n->paused[n->npaused++] = h;
    }
    if (timerfd_settime(n->timer_fd, 0, &once, NULL) != 0) {
        ivm_error("timerfd_settime: %m");
    }
}

int ivmd_netlimits_fd_ok(const ivmd_netlimits_t *n, int fd)
{
    int probe = fd;

    if (fd < 0) {
        probe = fcntl(n->timer_fd, F_DUPFD_CLOEXEC, 0);
        if (probe < 0) {
            return 0;
        }
        close(probe);
    }
    return probe < n->conn_line;
}

/* The source address of ss, IPv4 mapped into IPv6. */
static void ivmd_netlimits_src_of(const struct sockaddr_storage *ss, uint8_t src[16])
{
    memset(src, 0, 16);
    if (ss->ss_family == AF_INET) {
        src[10] = src[11] = 0xff;
        memcpy(src + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(src, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

/* Accepted peer connections from src not authenticated yet. */
static long ivmd_netlimits_unauth_from(const ivmd_netlimits_t *n, const uint8_t src[16])
{
    const ivmd_conn_t *c;
    long unauth = 0;

    for (c = n->conns->head; c != NULL; c = c->next) {
        if (c->kind == IVMD_CONN_PEER && !c->closed && c->pstate != IVMD_PEER_UP &&
            !(c->pstate == IVMD_PEER_ENDPOINT && c->ep_proved) &&
            c->pstate != IVMD_PEER_CONNECTING && c->pstate != IVMD_PEER_HELLO_SENT &&
            memcmp(c->src, src, 16) == 0) {
            ++unauth;
        }
    }
    return unauth;
}

/* src's token bucket (the oldest slot taken over for a new source). */
static ivmd_netlimits_src_t *ivmd_netlimits_bucket(ivmd_netlimits_t *n, const uint8_t src[16],
                                                   uint64_t now, double burst)
{
    ivmd_netlimits_src_t *oldest = &n->src[0];
    int i;

    for (i = 0; i < IVMD_NETLIMITS_NSRC; ++i) {
        if (n->src[i].last_ns != 0 && memcmp(n->src[i].addr, src, 16) == 0) {
            return &n->src[i];
        }
        if (n->src[i].last_ns < oldest->last_ns) {
            oldest = &n->src[i];
        }
    }
    memcpy(oldest->addr, src, 16);
    oldest->tokens  = burst;
    oldest->last_ns = now;
    return oldest;
}

int ivmd_netlimits_peer_admit(ivmd_netlimits_t *n, const void *ss, uint8_t src[16])
{
    double burst = 4.0 * (double)n->cfg.preauth_rate;
    uint64_t now = ivmd_now_ns();
    ivmd_netlimits_src_t *s;

    ivmd_netlimits_src_of(ss, src);
    if (n->cfg.preauth_per_source > 0 &&
        ivmd_netlimits_unauth_from(n, src) >= n->cfg.preauth_per_source) {
        ++n->refused_sources;
        return 0;
    }
    if (n->cfg.preauth_rate <= 0) {
        return 1;
    }
    s = ivmd_netlimits_bucket(n, src, now, burst);
    s->tokens += (double)(now - s->last_ns) * 1e-9 * (double)n->cfg.preauth_rate;
    if (s->tokens > burst) {
        s->tokens = burst;
    }
    s->last_ns = now;
    if (s->tokens < 1.0) {
        ++n->refused_sources;
        return 0;
    }
    s->tokens -= 1.0;
    return 1;
}
