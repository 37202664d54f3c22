/* The synchronous request client and the readiness wait (client.h). */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"
#include "status.h"

/* The sequence number of the one request on a connection. */
#define IVM_CLIENT_SEQ 1u

static void ivm_client_say(ivm_client_result_t *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ivm_client_say(ivm_client_result_t *res, const char *fmt, ...)
{
    va_list ap;

    if (res == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
    va_end(ap);
}

/* Connect to path, with timeout_ms on each send and receive. */
static ivmError_t ivm_client_open(const char *path, int timeout_ms, int *fd_p,
                                  ivm_client_result_t *res)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    int fd = ivm_sock_connect(path);

    if (fd < 0) {
        ivm_client_say(res, "cannot connect to %s", path);
        return (ivmError_t)fd;
    }
    if (timeout_ms > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    *fd_p = fd;
    return IVM_SUCCESS;
}

/* Read the reply to the request of `type` into buf (len bytes at most, the
 * last kept for a terminating NUL); *len_p its payload length. */
static ivmError_t ivm_client_read_reply(int fd, uint16_t type, int timeout_ms, char *buf,
                                        size_t len, uint32_t *len_p, ivm_client_result_t *res)
{
    const char *name = ivm_proto_type_name(type);
    const char *why  = NULL;
    ivm_msg_hdr_t hdr;

    if (ivm_sock_recv(fd, &hdr, sizeof(hdr), NULL, NULL, 0) != IVM_SUCCESS) {
        if (timeout_ms > 0) {
            ivm_client_say(res, "no reply to %s within %d ms", name, timeout_ms);
        } else {
            ivm_client_say(res, "no reply to %s: the connection was closed", name);
        }
        return IVM_ERROR_DAEMON_LOST;
    }
    if (ivm_proto_check_hdr(&hdr, &why) != IVM_SUCCESS ||
        ivm_proto_check_rep(&hdr, &why) != IVM_SUCCESS || hdr.type != (type | IVM_MSG_REPLY) ||
        hdr.seq != IVM_CLIENT_SEQ || hdr.length >= len) {
        ivm_client_say(res, "bad reply to %s: %s", name,
                       why != NULL ? why : "not the reply to the request");
        return IVM_ERROR_PROTOCOL;
    }
    if (ivm_sock_recv(fd, buf, hdr.length, NULL, NULL, 0) != IVM_SUCCESS) {
        ivm_client_say(res, "the reply to %s was cut short", name);
        return IVM_ERROR_DAEMON_LOST;
    }
    buf[hdr.length] = '\0';
    *len_p          = hdr.length;
    return IVM_SUCCESS;
}

ivmError_t ivm_client_request(const char *path, int timeout_ms, uint16_t type,
                              const void *req, uint32_t req_len, void *rep, uint32_t rep_len,
                              ivm_client_result_t *res)
{
    char buf[sizeof(ivm_msg_any_rep_t) + IVM_MSG_DETAIL_MAX + 1];
    uint32_t fixed = ivm_proto_rep_size(type);
    ivm_msg_hdr_t hdr;
    ivmError_t status;
    uint32_t len = 0;
    int32_t answer;
    int fd = -1;

    if (res != NULL) {
        res->answered  = 0;
        res->detail[0] = '\0';
    }
    status = ivm_client_open(path, timeout_ms, &fd, res);
    if (status != IVM_SUCCESS) {
        return status;
    }
    ivm_proto_hdr_init(&hdr, type, req_len, IVM_CLIENT_SEQ);
    if (ivm_sock_send(fd, &hdr, req, NULL, 0) != IVM_SUCCESS) {
        ivm_client_say(res, "cannot send %s to %s", ivm_proto_type_name(type), path);
        status = IVM_ERROR_DAEMON_LOST;
        goto out;
    }
    status = ivm_client_read_reply(fd, type, timeout_ms, buf, sizeof(buf), &len, res);
    if (status != IVM_SUCCESS) {
        goto out;
    }
    if (len < rep_len || len < sizeof(answer)) {
        ivm_client_say(res, "bad reply to %s: %u bytes, expected %u",
                       ivm_proto_type_name(type), (unsigned)len, (unsigned)rep_len);
        status = IVM_ERROR_PROTOCOL;
        goto out;
    }
    memcpy(&answer, buf, sizeof(answer));
    status = (ivmError_t)answer;
    if (status == IVM_SUCCESS && rep_len > 0) {
        memcpy(rep, buf, rep_len);
    }
    if (res != NULL) {
        res->answered = 1;
        ivm_client_say(res, "%s", len > fixed ? buf + fixed : "");
    }
out:
    close(fd);
    return status;
}

ivmError_t ivm_client_info(const char *path, int timeout_ms, ivm_msg_info_rep_t *info,
                           ivm_client_result_t *res)
{
    ivm_msg_empty_t req = {0};
    ivmError_t status   = ivm_client_request(path, timeout_ms, IVM_MSG_INFO, &req, sizeof(req),
                                             info, sizeof(*info), res);

    if (status == IVM_SUCCESS) {
        info->node[sizeof(info->node) - 1] = '\0';
    }
    return status;
}

ivmError_t ivm_client_probe(const char *path)
{
    int fd = ivm_sock_connect(path);

    if (fd < 0) {
        return (ivmError_t)fd;
    }
    close(fd);
    return IVM_SUCCESS;
}

/* Milliseconds on the monotonic clock. */
static int64_t ivm_ready_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left before deadline (-1: none), for poll. */
static int ivm_ready_left(int64_t deadline)
{
    int64_t left;

    if (deadline < 0) {
        return -1;
    }
    left = deadline - ivm_ready_now_ms();
    return left > 0 ? (int)left : 0;
}

void ivm_ready_init(ivm_ready_t *r, int fd)
{
    memset(r, 0, sizeof(*r));
    r->fd = fd;
}

/* Whether the line is whole: a newline came (and was cut), the buffer is
 * full, or EOF after a byte. */
static int ivm_ready_whole(const ivm_ready_t *r)
{
    return (r->got > 0 && (r->eof || strlen(r->line) < r->got)) ||
           r->got >= sizeof(r->line) - 1;
}

/* One read of what the pipe holds. */
static ivmError_t ivm_ready_read(ivm_ready_t *r)
{
    ssize_t n = read(r->fd, r->line + r->got, sizeof(r->line) - 1 - r->got);
    char *nl;

    if (n < 0) {
        return (errno == EINTR || errno == EAGAIN) ? IVM_SUCCESS : IVM_ERROR_INTERNAL;
    }
    if (n == 0) {
        r->eof = 1;
        return IVM_SUCCESS;
    }
    r->got += (size_t)n;
    r->line[r->got] = '\0';
    nl = strchr(r->line, '\n');
    if (nl != NULL) {
        *nl = '\0'; /* what follows the newline is dropped; got stays, as the mark */
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_ready_wait(ivm_ready_t *r, int timeout_ms, int wake_fd)
{
    int64_t deadline = timeout_ms < 0 ? -1 : ivm_ready_now_ms() + timeout_ms;
    struct pollfd pfd[2] = {{.fd = r->fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    int n;

    for (;;) {
        if (ivm_ready_whole(r)) {
            return IVM_SUCCESS;
        }
        if (r->eof) {
            return IVM_ERROR_NO_DAEMON;
        }
        n = poll(pfd, wake_fd >= 0 ? 2 : 1, ivm_ready_left(deadline));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return IVM_ERROR_INTERNAL;
        }
        if (n == 0) {
            return IVM_ERROR_TIMEOUT;
        }
        if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
            ivm_ready_read(r) != IVM_SUCCESS) {
            return IVM_ERROR_INTERNAL;
        }
        if (wake_fd >= 0 && (pfd[1].revents & POLLIN) && !ivm_ready_whole(r) && !r->eof) {
            return IVM_ERROR_TIMEOUT;
        }
    }
}

ivmError_t ivm_ready_wait_eof(ivm_ready_t *r, int timeout_ms)
{
    int64_t deadline   = timeout_ms < 0 ? -1 : ivm_ready_now_ms() + timeout_ms;
    struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
    char scrap[64];
    ssize_t got;
    int n;

    while (!r->eof) {
        n = poll(&pfd, 1, ivm_ready_left(deadline));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n == 0 ? IVM_ERROR_TIMEOUT : IVM_ERROR_INTERNAL;
        }
        got = read(r->fd, scrap, sizeof(scrap));
        if (got == 0) {
            r->eof = 1;
        } else if (got < 0 && errno != EINTR && errno != EAGAIN) {
            return IVM_ERROR_INTERNAL;
        }
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_ready_port(const ivm_ready_t *r, unsigned *port_p)
{
    unsigned long port;
    char *end;

    if (r->line[0] != 'R' || r->line[1] != ' ' || r->line[2] < '0' || r->line[2] > '9') {
        return IVM_ERROR_PROTOCOL;
    }
    errno = 0;
    port  = strtoul(r->line + 2, &end, 10);
    if (errno != 0 || *end != '\0' || port == 0 || port > 65535) {
        return IVM_ERROR_PROTOCOL;
    }
    *port_p = (unsigned)port;
    return IVM_SUCCESS;
}
