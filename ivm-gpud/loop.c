/* ivm-gpud's loop: the control socket (messages read exactly, one at a time,
 * with their fds), signals, and the admission deadlines as epoll time-outs. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"
#include "log.h"
#include "sock.h"
#include "status.h"

uint64_t gpud_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void gpud_reply(gpud_t *g, uint32_t type, uint32_t seq, const void *rep,
                uint32_t rep_len, const char *detail, int fd)
{
    char buf[sizeof(ivm_gpud_hello_rep_t) + IVM_MSG_DETAIL_MAX];
    size_t dlen = (detail != NULL && *detail != '\0') ? strlen(detail) + 1 : 0;
    ivm_msg_hdr_t hdr;

    if (dlen > IVM_MSG_DETAIL_MAX) {
        dlen = IVM_MSG_DETAIL_MAX;
    }
    memcpy(buf, rep, rep_len);
    if (dlen > 0) {
        memcpy(buf + rep_len, detail, dlen - 1);
        buf[rep_len + dlen - 1] = '\0';
    }
    ivm_proto_hdr_init(&hdr, (uint16_t)(type | IVM_MSG_REPLY), rep_len + (uint32_t)dlen, seq);
    if (ivm_sock_send(g->ctl_fd, &hdr, buf, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0) !=
        IVM_SUCCESS) {
        ivm_error("sending the %s reply to ivmd: %m; stopping", ivm_gpud_type_name(type));
        g->stopping = 1;
    }
}

void gpud_reply_error(gpud_t *g, uint32_t type, uint32_t seq, ivmError_t status,
                      const char *fmt, ...)
{
    char detail[IVM_MSG_DETAIL_MAX];
    char rep[sizeof(ivm_gpud_hello_rep_t)];
    uint32_t len = ivm_gpud_rep_size(type);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (len == 0) {
        len = sizeof(ivm_gpud_status_t); /* not a gpud type: status only */
    }
    memset(rep, 0, sizeof(rep));
    memcpy(rep, &(int32_t){status}, sizeof(int32_t));
    ivm_debug("%s (seq %u) fails: %s: %s", ivm_gpud_type_name(type), seq,
              ivm_status_name(status), detail);
    gpud_reply(g, type, seq, rep, len, detail, -1);
}

static void gpud_rx_close_fds(gpud_t *g)
{
    ivm_sock_close_fds(g->rx_fds, g->rx_nfds);
    g->rx_nfds = 0;
}

static void gpud_rx_collect_fds(gpud_t *g, struct msghdr *msg)
{
    struct cmsghdr *cmsg;
    int k, count, one;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (k = 0; k < count; ++k) {
            memcpy(&one, CMSG_DATA(cmsg) + k * sizeof(int), sizeof(int));
            if (g->rx_nfds < GPUD_RX_MAX_FDS) {
                g->rx_fds[g->rx_nfds++] = one;
            } else {
                close(one);
            }
        }
    }
}

/* Read up to want bytes into rx. Returns bytes read, 0 on EOF, -1 when
 * nothing is there now, -2 on error. */
static ssize_t gpud_rx_read(gpud_t *g, size_t want)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * IVM_MSG_MAX_FDS)];
    } ctrl;
    struct msghdr msg;
    struct iovec iov;
    ssize_t n;

    memset(&msg, 0, sizeof(msg));
    iov.iov_base       = g->rx + g->rx_len;
    iov.iov_len        = want;
    msg.msg_iov        = &iov;
    msg.msg_iovlen     = 1;
    msg.msg_control    = ctrl.buf;
    msg.msg_controllen = sizeof(ctrl.buf);
    do {
        n = recvmsg(g->ctl_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return -1;
        }
        ivm_error("reading the control socket: %m");
        return -2;
    }
    gpud_rx_collect_fds(g, &msg);
    if (msg.msg_flags & MSG_CTRUNC) {
        ivm_warn("fds of a control message were cut off (more than %d)", IVM_MSG_MAX_FDS);
    }
    g->rx_len += (size_t)n;
    return n;
}

/* A whole message is in rx: validate it and hand it on. */
static void gpud_rx_dispatch(gpud_t *g)
{
    ivm_msg_hdr_t hdr;
    const char *why = NULL;
    ivmError_t status;
    int fd = -1;

    memcpy(&hdr, g->rx, sizeof(hdr));
    if (g->rx_nfds > 0) {
        fd = g->rx_fds[0];
        ivm_sock_close_fds(g->rx_fds + 1, g->rx_nfds - 1);
        g->rx_nfds = 0;
    }
    status = ivm_gpud_check_hdr(&hdr, &why);
    if (status == IVM_SUCCESS) {
        status = ivm_gpud_check_req(&hdr, g->rx + sizeof(hdr), &why);
    }
    if (status != IVM_SUCCESS) {
        ivm_warn("refusing %s (type %u, seq %u, %u bytes) from ivmd: %s",
                 ivm_gpud_type_name(hdr.type), hdr.type, hdr.seq, hdr.length, why);
        if (fd >= 0) {
            close(fd);
        }
        gpud_reply_error(g, hdr.type & ~IVM_MSG_REPLY, hdr.seq, status, "%s", why);
        return;
    }
    ivm_trace("%s seq %u", ivm_gpud_type_name(hdr.type), hdr.seq);
    gpud_handle(g, &hdr, g->rx + sizeof(hdr), fd);
}

/* Header complete: is the framing trustworthy enough to read the payload? */
static int gpud_rx_header_ok(gpud_t *g)
{
    ivm_msg_hdr_t hdr;

    memcpy(&hdr, g->rx, sizeof(hdr));
    if (hdr.magic != IVM_PROTO_MAGIC || hdr.version != IVM_PROTO_VERSION ||
        hdr.length > IVM_MSG_MAX_PAYLOAD) {
        ivm_error("control socket: bad header (magic %#x, version %u, length %u); "
                  "closing it", hdr.magic, hdr.version, hdr.length);
        return 0;
    }
    return 1;
}

/* Read and handle every message that is there; stop the daemon on EOF or on
 * a header that breaks the framing. */
static void gpud_on_ctl(gpud_t *g)
{
    ivm_msg_hdr_t hdr;
    size_t want;
    ssize_t n;

    while (!g->stopping) {
        if (g->rx_len < sizeof(hdr)) {
            want = sizeof(hdr) - g->rx_len;
        } else {
            memcpy(&hdr, g->rx, sizeof(hdr));
            want = sizeof(hdr) + hdr.length - g->rx_len;
        }
        if (want > 0) {
            n = gpud_rx_read(g, want);
            if (n == -1) {
                return;
            }
            if (n <= 0) {
                if (n == 0) {
                    ivm_info("control socket closed by ivmd: exiting");
                }
                g->stopping = 1;
                return;
            }
            if (g->rx_len == sizeof(hdr) && !gpud_rx_header_ok(g)) {
                g->stopping = 1;
                return;
            }
            continue;
        }
        gpud_rx_dispatch(g);
        g->rx_len = 0;
        gpud_rx_close_fds(g);
    }
}

static void gpud_on_signal(gpud_t *g)
{
    struct signalfd_siginfo si;

    while (read(g->signal_fd, &si, sizeof(si)) == sizeof(si)) {
        ivm_info("signal %d: exiting", (int)si.ssi_signo);
        g->stopping = 1;
    }
}

ivmError_t gpud_loop_run(gpud_t *g)
{
    struct epoll_event ev[4];
    int i, n, timeout_ms;

    while (!g->stopping) {
        timeout_ms = gpud_expire(g);
        if (g->stopping) {
            break;
        }
        n = epoll_wait(g->epoll_fd, ev, 4, timeout_ms);
        if (n < 0 && errno != EINTR) {
            ivm_error("epoll_wait: %m");
            return IVM_ERROR_INTERNAL;
        }
        for (i = 0; i < n && !g->stopping; ++i) {
            if (ev[i].data.fd == g->signal_fd) {
                gpud_on_signal(g);
            } else if (ev[i].data.fd == g->ctl_fd) {
                gpud_on_ctl(g);
            }
        }
    }
    return IVM_SUCCESS;
}
