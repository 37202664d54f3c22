/* The event loop: epoll, before-sleep hooks, the idle task, --poll-us. */
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "transport/loop.h"
#include "log.h"

uint64_t ivmd_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ivmError_t ivmd_loop_init(ivmd_loop_t *l, ivmd_t *d, const int *stop, long poll_us)
{
    *l         = (ivmd_loop_t){.d = d, .stop = stop, .poll_us = poll_us};
    l->epfd    = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        ivm_error("epoll_create1: %m");
        return IVM_ERROR_INTERNAL;
    }
    return IVM_SUCCESS;
}

void ivmd_loop_fini(ivmd_loop_t *l)
{
    if (l->epfd >= 0) {
        close(l->epfd);
        l->epfd = -1;
    }
}

ivmError_t ivmd_loop_watch(ivmd_loop_t *l, ivmd_handler_t *h, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = h};

    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, h->fd, &ev) != 0) {
        ivm_error("epoll_ctl(ADD, fd %d): %m", h->fd);
        return IVM_ERROR_INTERNAL;
    }
    return IVM_SUCCESS;
}

void ivmd_loop_rewatch(ivmd_loop_t *l, ivmd_handler_t *h, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = h};

    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, h->fd, &ev) != 0) {
        ivm_error("epoll_ctl(MOD, fd %d): %m", h->fd);
    }
}

void ivmd_loop_unwatch(ivmd_loop_t *l, ivmd_handler_t *h)
{
    if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, h->fd, NULL) != 0 && errno != EBADF) {
        ivm_debug("epoll_ctl(DEL, fd %d): %m", h->fd);
    }
}

ivmError_t ivmd_loop_on_before_sleep(ivmd_loop_t *l, ivmd_loop_hook_t fn, void *arg)
{
    if (l->nbefore_sleep == IVMD_LOOP_HOOKS_MAX) {
        ivm_error("too many before-sleep hooks (at most %d)", IVMD_LOOP_HOOKS_MAX);
        return IVM_ERROR_INTERNAL;
    }
    l->before_sleep[l->nbefore_sleep++] = (ivmd_loop_hook_entry_t){.fn = fn, .arg = arg};
    return IVM_SUCCESS;
}

void ivmd_loop_set_idle(ivmd_loop_t *l, ivmd_loop_want_t want, ivmd_loop_hook_t run,
                        void *arg, long idle_us)
{
    l->idle_want = want;
    l->idle_run  = run;
    l->idle_arg  = arg;
    l->idle_us   = idle_us;
}

void ivmd_loop_set_busy(ivmd_loop_t *l, ivmd_loop_busy_t busy, void *arg)
{
    l->busy     = busy;
    l->busy_arg = arg;
}

void ivmd_loop_quit(ivmd_loop_t *l)
{
    l->quit = 1;
}

static void ivmd_loop_before_sleep(ivmd_loop_t *l)
{
    int i;

    for (i = 0; i < l->nbefore_sleep; ++i) {
        l->before_sleep[i].fn(l->d, l->before_sleep[i].arg);
    }
}

void ivmd_loop_poll_after(ivmd_loop_t *l)
{
    if (l->poll_us > 0) {
        l->poll_until_ns = ivmd_now_ns() + (uint64_t)l->poll_us * 1000u;
    }
}

/* --poll-us: the daemon answered a PE a moment ago (its next request tends to
 * follow at once: a sync loop), or waits for a peer's answer to a transfer it
 * started. Poll the loop's descriptors until an event comes or the window
 * closes, instead of sleeping: the wake-up of a sleeping daemon (several us,
 * tens of us on a virtual machine with idle vCPUs) leaves the path of the
 * next request. Off (0) by default: a polling daemon takes a core from the
 * PEs of its node for up to poll_us after each reply. */
static int ivmd_loop_poll(ivmd_loop_t *l, struct epoll_event *events, int max)
{
    uint64_t now, until;
    int n;

    if (l->poll_us <= 0) {
        return 0;
    }
    now   = ivmd_now_ns();
    until = l->poll_until_ns;
    if (l->busy != NULL && l->busy(l->d, l->busy_arg) &&
        until < now + (uint64_t)l->poll_us * 1000u) {
        until = now + (uint64_t)l->poll_us * 1000u;
    }
    while (now < until) {
        n = epoll_wait(l->epfd, events, max, 0);
        if (n != 0) {
            l->polled += n > 0;
            return n;
        }
        now = ivmd_now_ns();
    }
    return 0;
}

/* epoll_wait: for ever, or (idle task wanted soon) for at most its delay, or
 * (wanted now) only for what is pending now; first, with --poll-us, polling
 * (ivmd_loop_poll). */
static int ivmd_loop_wait(ivmd_loop_t *l, struct epoll_event *events, int max, int idle)
{
    int n = ivmd_loop_poll(l, events, max);

    if (n != 0) {
        return n;
    }
    if (idle == IVMD_LOOP_IDLE_NOW) {
        return epoll_wait(l->epfd, events, max, 0);
    }
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
    if (idle == IVMD_LOOP_IDLE_SOON) {
        const struct timespec delay = {0, l->idle_us * 1000L};
        n = epoll_pwait2(l->epfd, events, max, &delay, NULL);
        if (n >= 0 || errno != ENOSYS) {
            return n;
        }
    }
#endif
    return epoll_wait(l->epfd, events, max, idle ? 1 : -1);
}

int ivmd_loop_run_until_stop(ivmd_loop_t *l)
{
    struct epoll_event events[64];
    int i, n, idle;

    while (!*l->stop) {
        ivmd_loop_before_sleep(l);
        if (l->quit) {
            break;
        }
        /* The idle task runs only once the daemon was idle a while: never on
         * the path of a request or of a PE that was just handed out. */
        idle = l->idle_want != NULL ? l->idle_want(l->d, l->idle_arg) : IVMD_LOOP_IDLE_NONE;
        n    = ivmd_loop_wait(l, events, 64, idle);
        if (n == 0) {
            if (l->idle_run != NULL) {
                l->idle_run(l->d, l->idle_arg);
            }
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
            h->cb(l->d, h->arg, events[i].events);
        }
    }
    ivmd_loop_before_sleep(l);
    return 0;
}
