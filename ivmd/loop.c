#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

#include "ivmd.h"
#include "log.h"

ivmError_t ivmd_loop_add(ivmd_t *d, ivmd_handler_t *h, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = h};

    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, h->fd, &ev) != 0) {
        ivm_error("epoll_ctl(ADD, fd %d): %m", h->fd);
        return IVM_ERROR_INTERNAL;
    }
    return IVM_SUCCESS;
}

void ivmd_loop_mod(ivmd_t *d, ivmd_handler_t *h, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = h};

    if (epoll_ctl(d->epfd, EPOLL_CTL_MOD, h->fd, &ev) != 0) {
        ivm_error("epoll_ctl(MOD, fd %d): %m", h->fd);
    }
}

void ivmd_loop_del(ivmd_t *d, ivmd_handler_t *h)
{
    if (epoll_ctl(d->epfd, EPOLL_CTL_DEL, h->fd, NULL) != 0 && errno != EBADF) {
        ivm_debug("epoll_ctl(DEL, fd %d): %m", h->fd);
    }
}

/* Closed connections and forwarders are freed here, between two epoll_wait
 * batches, so that no event of the current batch points at freed memory. */
static void ivmd_loop_before_sleep(ivmd_t *d)
{
    ivmd_conn_close_doomed(d);
    ivmd_conn_reap(d);
    ivmd_output_reap(d);
}

void ivmd_loop_poll_after_reply(ivmd_t *d)
{
    if (d->cfg.poll_us > 0) {
        d->poll_until_ns = ivmd_now_ns() + (uint64_t)d->cfg.poll_us * 1000u;
    }
}

/* --poll-us: the daemon answered a PE a moment ago (its next request tends to
 * follow at once: a sync loop), or waits for a peer's answer to a transfer it
 * started. Poll the loop's descriptors until an event comes or the window
 * closes, instead of sleeping: the wake-up of a sleeping daemon (several us,
 * tens of us on a virtual machine with idle vCPUs) leaves the path of the
 * next request. Off (0) by default: a polling daemon takes a core from the
 * PEs of its node for up to poll_us after each reply. */
static int ivmd_loop_poll(ivmd_t *d, struct epoll_event *events, int max)
{
    uint64_t now, until;
    int n;

    if (d->cfg.poll_us <= 0) {
        return 0;
    }
    now   = ivmd_now_ns();
    until = d->poll_until_ns;
    if (ivmd_cluster_busy(d) && until < now + (uint64_t)d->cfg.poll_us * 1000u) {
        until = now + (uint64_t)d->cfg.poll_us * 1000u;
    }
    while (now < until) {
        n = epoll_wait(d->epfd, events, max, 0);
        if (n != 0) {
            d->polled += n > 0;
            return n;
        }
        now = ivmd_now_ns();
    }
    return 0;
}

/* epoll_wait: for ever, or (pool short) for at most IVMD_POOL_IDLE_US, or
 * (pool empty) only for what is pending now; first, with --poll-us, polling
 * (ivmd_loop_poll). */
static int ivmd_loop_wait(ivmd_t *d, struct epoll_event *events, int max, int pool)
{
    int n = ivmd_loop_poll(d, events, max);

    if (n != 0) {
        return n;
    }
    if (pool == IVMD_POOL_EMPTY) {
        return epoll_wait(d->epfd, events, max, 0);
    }
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
    if (pool == IVMD_POOL_SHORT) {
        static const struct timespec idle = {0, IVMD_POOL_IDLE_US * 1000L};
        int n = epoll_pwait2(d->epfd, events, max, &idle, NULL);
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
    }
#endif
    return epoll_wait(d->epfd, events, max, pool ? 1 : -1);
}

int ivmd_loop_run(ivmd_t *d)
{
    struct epoll_event events[64];
    int i, n;

    while (!d->stopping) {
        ivmd_loop_before_sleep(d);
        if (d->cfg.exit_when_idle && d->had_client && d->reg.njobs == 0 &&
            d->nconns == 0) {
            ivm_info("idle: no job and no client left, exiting");
            break;
        }
        /* Pools are filled only once the daemon was idle a while: never on
         * the path of a request or of a PE that was just handed out. */
        n = ivmd_loop_wait(d, events, 64, ivmd_pool_wanted(d));
        if (n == 0) {
            ivmd_pool_fill(d);
            continue;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("epoll_wait: %m");
            return -1;
        }
        for (i = 0; i < n; ++i) {
            ivmd_handler_t *h = events[i].data.ptr;
            h->cb(d, h->arg, events[i].events);
        }
    }
    ivmd_loop_before_sleep(d);
    return 0;
}
