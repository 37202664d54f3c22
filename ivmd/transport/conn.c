/* Client connections: accept with a uid check, framed non-blocking reads with
 * validation before allocation, queued non-blocking writes with fds. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/conn.h"
#include "transport/netlimits.h"
#include "log.h"
#include "sock.h"

static void ivmd_conn_on_event(ivmd_t *d, void *arg, uint32_t events);

/* Accept Unix connections of the one user served, each through admit. */
static void ivmd_conn_accept(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_conn_table_t *t = arg;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    char why[160];
    ivmd_conn_t *c;
    int fd;

    for (;;) {
        fd = accept4(t->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                ivmd_netlimits_accept_pause(t->net, &t->listen_h, "PE connections");
            } else if (errno != EAGAIN && errno != EINTR) {
                ivm_warn_limited("accept: %m");
            }
            return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            ivm_warn_limited("SO_PEERCRED: %m; connection refused");
            close(fd);
            continue;
        }
        if (cred.uid != t->uid) {
            ivm_warn_limited("connection from pid %d of uid %u refused: this daemon serves "
                             "uid %u only", (int)cred.pid, (unsigned)cred.uid,
                             (unsigned)t->uid);
            close(fd);
            continue;
        }
        why[0] = '\0';
        if (t->admit != NULL && t->admit(d, fd, cred.pid, why, sizeof(why)) != IVM_SUCCESS) {
            ivm_warn_limited("connection from pid %d refused: %s", (int)cred.pid, why);
            close(fd);
            continue;
        }
        c = ivmd_conn_create(t, fd, IVMD_CONN_PE, EPOLLIN | EPOLLRDHUP);
        if (c == NULL) {
            continue;
        }
        c->peer_pid = cred.pid;
        ivm_debug("connection from pid %d (fd %d)", (int)cred.pid, fd);
    }
}

ivmError_t ivmd_conn_listen(ivmd_conn_table_t *t, int fd, uid_t uid, ivmd_conn_admit_t admit)
{
    t->listen_fd = fd;
    t->uid       = uid;
    t->admit     = admit;
    t->listen_h  = (ivmd_handler_t){.fd = fd, .cb = ivmd_conn_accept, .arg = t};
    return ivmd_loop_watch(t->loop, &t->listen_h, EPOLLIN);
}

static unsigned ivmd_conn_flags(const ivmd_conn_t *c)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];

    return ops != NULL ? ops->flags : 0;
}

ivmd_conn_t *ivmd_conn_create(ivmd_conn_table_t *t, int fd, ivmd_conn_kind_t kind,
                              uint32_t events)
{
    ivmd_conn_t *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        ivm_error("out of memory for a connection");
        if (fd >= 0) {
            close(fd);
        }
        return NULL;
    }
    c->h          = (ivmd_handler_t){.fd = fd, .cb = ivmd_conn_on_event, .arg = c};
    c->table      = t;
    c->kind       = kind;
    c->opened_ns  = ivmd_now_ns();
    c->last_rx_ns = c->last_tx_ns = c->opened_ns;
    c->out_limit  = t->ops[kind] != NULL ? t->ops[kind]->out_limit : 0;
    if (fd >= 0 && ivmd_loop_watch(t->loop, &c->h, events) != IVM_SUCCESS) {
        close(fd);
        free(c);
        return NULL;
    }
    c->next = t->head;
    if (t->head != NULL) {
        t->head->prev = c;
    }
    t->head = c;
    if (ivmd_conn_flags(c) & IVMD_CONN_F_COUNTED) {
        ++t->nclients;
        t->had_client = 1;
    }
    return c;
}

static void ivmd_conn_drop_fds(ivmd_conn_t *c)
{
    ivm_sock_close_fds(c->fds, c->nfds);
    c->nfds = 0;
}

static void ivmd_conn_unlink(ivmd_conn_t *c)
{
    ivmd_conn_table_t *t = c->table;

    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        t->head = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    if (ivmd_conn_flags(c) & IVMD_CONN_F_COUNTED) {
        --t->nclients;
    }
    c->next = t->dead;
    t->dead = c;
}

void ivmd_conn_close(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivmd_conn_table_t *t = c->table;
    const ivmd_conn_ops_t *ops = t->ops[c->kind];
    ivmd_outbuf_t *b;
    int i;

    if (c->closed) {
        return;
    }
    c->closed = 1;
    if (ops != NULL && ops->on_close != NULL) {
        ops->on_close(d, c, why);
    }
    for (i = 0; i < t->ngone; ++i) {
        t->gone[i](d, c);
    }
    if (c->h.fd >= 0) {
        ivmd_loop_unwatch(t->loop, &c->h);
        close(c->h.fd);
        c->h.fd = -1;
    }
    ivmd_conn_drop_fds(c);
    while ((b = c->out_head) != NULL) {
        c->out_head = b->next;
        ivm_sock_close_fds(b->fds, b->nfds);
        free(b);
    }
    c->out_tail  = NULL;
    c->out_bytes = 0;
    if (c->sealed) {
        ivm_aead_free(&c->tx_aead);
        ivm_aead_free(&c->rx_aead);
        c->sealed = 0;
    }
    ivmd_conn_unlink(c);
}

static void ivmd_conn_reap(ivmd_conn_table_t *t)
{
    ivmd_conn_t *c;

    while ((c = t->dead) != NULL) {
        t->dead = c->next;
        free(c->payload);
        free(c->rbuf);
        free(c);
    }
}

static void ivmd_conn_close_doomed(ivmd_t *d, ivmd_conn_table_t *t)
{
    ivmd_conn_t *c, *next;

    for (c = t->head; c != NULL; c = next) {
        next = c->next;
        if (c->doomed != NULL) {
            ivmd_conn_close(d, c, c->doomed);
            next = t->head; /* closing may have closed others */
        }
    }
}

/* Before each sleep: close the doomed connections, free the closed ones. */
static void ivmd_conn_before_sleep(ivmd_t *d, void *arg)
{
    ivmd_conn_close_doomed(d, arg);
    ivmd_conn_reap(arg);
}

ivmError_t ivmd_conn_table_init(ivmd_conn_table_t *t, ivmd_loop_t *loop,
                                struct ivmd_netlimits *net)
{
    *t = (ivmd_conn_table_t){.loop = loop, .net = net, .listen_fd = -1};
    return ivmd_loop_on_before_sleep(loop, ivmd_conn_before_sleep, t);
}

void ivmd_conn_table_fini(ivmd_conn_table_t *t, ivmd_t *d)
{
    while (t->head != NULL) {
        ivmd_conn_close(d, t->head, "daemon shutdown");
    }
    ivmd_conn_reap(t);
}

void ivmd_conn_register(ivmd_conn_table_t *t, ivmd_conn_kind_t kind,
                        const ivmd_conn_ops_t *ops, void *owner)
{
    t->ops[kind]   = ops;
    t->owner[kind] = owner;
}

void *ivmd_conn_owner(const ivmd_conn_t *c)
{
    return c->table->owner[c->kind];
}

ivmError_t ivmd_conn_on_gone(ivmd_conn_table_t *t, ivmd_conn_gone_t fn)
{
    if (t->ngone == IVMD_CONN_GONE_MAX) {
        ivm_error("too many connection listeners (at most %d)", IVMD_CONN_GONE_MAX);
        return IVM_ERROR_INTERNAL;
    }
    t->gone[t->ngone++] = fn;
    return IVM_SUCCESS;
}

/* Not authenticated yet: a peer link before its handshake ended, a PE's
 * endpoint before its first sealed message checked. */
static int ivmd_conn_preauth(const ivmd_conn_t *c)
{
    return c->kind == IVMD_CONN_PEER && c->pstate != IVMD_PEER_UP &&
           !(c->pstate == IVMD_PEER_ENDPOINT && c->ep_proved);
}

/* Types a connection not authenticated yet may send: the handshakes'. */
static int ivmd_conn_preauth_type(const ivmd_conn_t *c, uint16_t type)
{
    if (c->pstate == IVMD_PEER_ENDPOINT) {
        return type == IVM_PEER_EP_PUT || type == IVM_PEER_EP_GET; /* checked by its tag */
    }
    return type <= IVM_PEER_AUTH || type == IVM_PEER_EP_HELLO;
}

/* n bytes landed at the read position: advance it, and once the header is
 * complete check it and make room for the payload. Returns 0, or -1 (*why_p). */
static int ivmd_conn_advance(ivmd_conn_t *c, size_t n, const char **why_p)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];

    if (c->hdr_got >= sizeof(c->hdr)) {
        c->payload_got += n;
        return 0;
    }
    c->hdr_got += n;
    if (c->hdr_got < sizeof(c->hdr)) {
        return 0;
    }
    if (ops == NULL || ops->check_hdr == NULL) {
        *why_p = "no reader for this connection";
        return -1;
    }
    if (ops->hdr_unpack != NULL) {
        ops->hdr_unpack(&c->hdr);
    }
    if (ops->check_hdr(&c->hdr, why_p) != IVM_SUCCESS) {
        return -1;
    }
    if (ivmd_conn_preauth(c) && !ivmd_conn_preauth_type(c, c->hdr.type)) {
        *why_p = "message before authentication";
        return -1;
    }
    c->payload_want = c->hdr.length + (c->sealed ? IVM_CRYPTO_TAG_LEN : 0);
    if (c->payload_want > c->payload_cap) {
        char *p = realloc(c->payload, c->payload_want);
        if (p == NULL) {
            *why_p = "out of memory for the payload";
            return -1;
        }
        c->payload     = p;
        c->payload_cap = c->payload_want;
    }
    c->payload_got = 0;
    return 0;
}

/* n > 0 bytes arrived: count them; too many before authentication is an error. */
static int ivmd_conn_count_rx(ivmd_conn_t *c, ssize_t n, const char **why_p)
{
    c->rx_bytes  += (uint64_t)n;
    c->last_rx_ns = ivmd_now_ns();
    /* (An endpoint's first put may be a whole chunk: its tag decides.) */
    if (ivmd_conn_preauth(c) && c->pstate != IVMD_PEER_ENDPOINT &&
        c->rx_bytes > IVM_PEER_PREAUTH_MAX) {
        *why_p = "too many bytes before authentication";
        return -1;
    }
    return 0;
}

/* recv/recvmsg returned n <= 0: 0 to wait for more (EAGAIN), -1 to close. */
static int ivmd_conn_read_failed(const ivmd_conn_t *c, ssize_t n, const char **why_p)
{
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (n < 0) {
        *why_p = "read error";
    } else {
        *why_p = (c->hdr_got == 0) ? "end of stream" : "end of stream inside a message";
    }
    return -1;
}

/* Peer links carry no fds, so they are read in bulk: one recv stages as many
 * messages as have arrived, and headers and small payloads are taken from
 * the staging buffer (a large payload is read straight into place once the
 * staged bytes are used up). Returns 1 when bytes were staged, else as
 * ivmd_conn_read_failed. */
static int ivmd_conn_stage(ivmd_conn_t *c, const char **why_p)
{
    ssize_t n;

    if (c->rbuf == NULL && (c->rbuf = malloc(IVMD_CONN_RBUF)) == NULL) {
        *why_p = "out of memory for the receive buffer";
        return -1;
    }
    c->rbuf_off = 0;
    c->rbuf_len = 0;
    n = recv(c->h.fd, c->rbuf, IVMD_CONN_RBUF, MSG_DONTWAIT);
    if (n <= 0) {
        return ivmd_conn_read_failed(c, n, why_p);
    }
    c->rbuf_len   = (size_t)n;
    c->rbuf_short = (size_t)n < IVMD_CONN_RBUF;
    return ivmd_conn_count_rx(c, n, why_p) < 0 ? -1 : 1;
}

/* Bulk read of want bytes into dst: from the staged bytes (staging more
 * when small), 1 when some were taken; 2 when dst should be read straight
 * from the socket; 0 to wait for epoll; -1 to close. */
static int ivmd_conn_read_staged(ivmd_conn_t *c, char *dst, size_t want, const char **why_p)
{
    size_t take;
    int rc;

    if (c->rbuf_off == c->rbuf_len && c->hdr_got == 0 && c->rbuf_short) {
        /* The last recv drained the socket: let epoll say when more comes. */
        c->rbuf_short = 0;
        return 0;
    }
    if (c->rbuf_off == c->rbuf_len && want <= IVMD_CONN_RBUF / 2 &&
        (rc = ivmd_conn_stage(c, why_p)) <= 0) {
        return rc;
    }
    if (c->rbuf_off == c->rbuf_len) {
        return 2;
    }
    take = c->rbuf_len - c->rbuf_off;
    if (take > want) {
        take = want;
    }
    memcpy(dst, c->rbuf + c->rbuf_off, take);
    c->rbuf_off += take;
    return ivmd_conn_advance(c, take, why_p) < 0 ? -1 : 1;
}

/* Keep the fds that came with a message (beyond IVM_MSG_MAX_FDS: closed). */
static void ivmd_conn_take_fds(ivmd_conn_t *c, struct msghdr *msg)
{
    struct cmsghdr *cmsg;
    int k, count, one;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (k = 0; k < count; ++k) {
            memcpy(&one, CMSG_DATA(cmsg) + k * sizeof(int), sizeof(int));
            if (c->nfds < IVM_MSG_MAX_FDS) {
                c->fds[c->nfds++] = one;
            } else {
                close(one);
            }
        }
    }
}

/* recvmsg of want bytes into dst, with fds: 1 when some came, else as
 * ivmd_conn_read_failed. */
static int ivmd_conn_read_msg(ivmd_conn_t *c, char *dst, size_t want, const char **why_p)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * IVM_MSG_MAX_FDS)];
    } ctrl;
    struct iovec iov = {.iov_base = dst, .iov_len = want};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf,
                         .msg_controllen = sizeof(ctrl.buf)};
    ssize_t n = recvmsg(c->h.fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

    if (n <= 0) {
        return ivmd_conn_read_failed(c, n, why_p);
    }
    if (ivmd_conn_count_rx(c, n, why_p) < 0) {
        return -1;
    }
    ivmd_conn_take_fds(c, &msg);
    if (msg.msg_flags & MSG_CTRUNC) {
        *why_p = "too many file descriptors in one message";
        return -1;
    }
    return ivmd_conn_advance(c, (size_t)n, why_p) < 0 ? -1 : 1;
}

/* Read what is available; returns 1 when a whole message is buffered, 0 when
 * more is needed (EAGAIN), -1 when the connection must close (*why_p). */
static int ivmd_conn_read_some(ivmd_conn_t *c, const char **why_p)
{
    int bulk = (ivmd_conn_flags(c) & IVMD_CONN_F_BULK_READ) != 0;
    char *dst;
    size_t want;
    int rc;

    for (;;) {
        if (c->hdr_got < sizeof(c->hdr)) {
            dst  = (char *)&c->hdr + c->hdr_got;
            want = sizeof(c->hdr) - c->hdr_got;
        } else if (c->payload_got < c->payload_want) {
            dst  = c->payload + c->payload_got;
            want = c->payload_want - c->payload_got;
        } else {
            return 1;
        }
        rc = bulk ? ivmd_conn_read_staged(c, dst, want, why_p) : 2;
        if (rc == 2) {
            rc = ivmd_conn_read_msg(c, dst, want, why_p);
        }
        if (rc <= 0) {
            return rc;
        }
    }
}

static void ivmd_conn_write(ivmd_t *d, ivmd_conn_t *c);

/* Write what the socket takes; then, below the low-water mark, let the
 * connection's producer add more (once: a push from it writes, not drains). */
static void ivmd_conn_flush(ivmd_t *d, ivmd_conn_t *c)
{
    int more = 0;

    ivmd_conn_write(d, c);
    if (c->on_drain != NULL && !c->draining && !c->closed && c->doomed == NULL &&
        c->out_bytes < c->drain_low) {
        c->draining = 1;
        more = c->on_drain(d, c, c->drain_arg);
        c->draining = 0;
    }
    if (c->closed || c->doomed != NULL) {
        return;
    }
    if (more) {
        /* The producer stopped at its share of this turn: the loop calls
         * back once the socket takes more (at once if it does now). */
        ivmd_conn_want_drain(d, c);
    } else if (c->out_head == NULL && c->out_armed) {
        ivmd_loop_rewatch(c->table->loop, &c->h, EPOLLIN | EPOLLRDHUP);
        c->out_armed = 0;
    }
}

size_t ivmd_conn_queued(const ivmd_conn_t *c)
{
    return c->out_bytes;
}

void ivmd_conn_on_drain(ivmd_conn_t *c, ivmd_conn_drain_cb_t cb, void *arg, size_t low_water)
{
    c->on_drain  = cb;
    c->drain_arg = arg;
    c->drain_low = low_water;
}

void ivmd_conn_set_out_limit(ivmd_conn_t *c, size_t limit)
{
    c->out_limit = limit;
}

/* b would take c's queue beyond its limit: the other end does not read.
 * Refuse b and close the connection (not at once: the caller may hold
 * state of it), saying so. */
static int ivmd_conn_over_limit(ivmd_conn_t *c, const ivmd_outbuf_t *b)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];

    if (c->out_limit == 0 || c->out_bytes + b->len <= c->out_limit) {
        return 0;
    }
    if (c->doomed == NULL) {
        ivm_warn_limited("%s connection (pid %d) does not read: %zu bytes queued, limit %zu; "
                         "closing it", ops != NULL && ops->name != NULL ? ops->name : "a",
                         (int)c->peer_pid, c->out_bytes, c->out_limit);
    }
    ivmd_conn_doom(c, "output queue over its limit");
    return 1;
}

void ivmd_conn_want_drain(ivmd_t *d, ivmd_conn_t *c)
{
    if (!c->out_armed && !c->closed && c->doomed == NULL) {
        ivmd_loop_rewatch(c->table->loop, &c->h, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
        c->out_armed = 1;
    }
}

/* sendmsg of b's unsent bytes, its fds with byte 0. */
static ssize_t ivmd_conn_send_buf(ivmd_conn_t *c, ivmd_outbuf_t *b)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * IVM_MSG_MAX_FDS)];
    } ctrl;
    struct iovec iov = {.iov_base = b->data + b->off, .iov_len = b->len - b->off};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cmsg;

    if (b->off == 0 && b->nfds > 0) {
        memset(&ctrl, 0, sizeof(ctrl));
        msg.msg_control    = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)b->nfds);
        cmsg               = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level   = SOL_SOCKET;
        cmsg->cmsg_type    = SCM_RIGHTS;
        cmsg->cmsg_len     = CMSG_LEN(sizeof(int) * (size_t)b->nfds);
        memcpy(CMSG_DATA(cmsg), b->fds, sizeof(int) * (size_t)b->nfds);
    }
    return sendmsg(c->h.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void ivmd_conn_write(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_loop_t *loop = c->table->loop;
    ivmd_outbuf_t *b;
    ssize_t n;

    while ((b = c->out_head) != NULL) {
        n = ivmd_conn_send_buf(c, b);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                if (!c->out_armed) {
                    ivmd_loop_rewatch(loop, &c->h, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
                    c->out_armed = 1;
                }
                return;
            }
            ivmd_conn_doom(c, "write error");
            return;
        }
        if (b->off == 0 && b->nfds > 0) {
            ivm_sock_close_fds(b->fds, b->nfds);
            b->nfds = 0;
        }
        b->off += (size_t)n;
        if (b->off < b->len) {
            continue;
        }
        c->out_bytes -= b->len;
        c->out_head   = b->next;
        if (c->out_head == NULL) {
            c->out_tail = NULL;
            if (c->out_armed) {
                ivmd_loop_rewatch(loop, &c->h, EPOLLIN | EPOLLRDHUP);
                c->out_armed = 0;
            }
        }
        free(b);
    }
}

static ivmError_t ivmd_conn_queue(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                  const void *rep, uint32_t len, const char *detail,
                                  const int *fds, int nfds);

ivmError_t ivmd_conn_reply(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                           const void *rep, uint32_t len, const char *detail,
                           const int *fds, int nfds)
{
    ivmError_t status;
    char *failed;

    if (ivmd_conn_flags(c) & IVMD_CONN_F_POLL_AFTER) {
        ivmd_loop_poll_after(c->table->loop);
    }
    status = ivmd_conn_queue(d, c, (uint16_t)(type | IVM_MSG_REPLY), seq, rep, len, detail,
                             fds, nfds);
    if (status == IVM_SUCCESS || nfds == 0 || len < sizeof(int32_t) ||
        (failed = calloc(1, len)) == NULL) {
        return status;
    }
    /* A reply whose fds cannot go along is an error reply (every reply starts
     * with its status); the caller rolls back what it would have handed over. */
    memcpy(failed, &(int32_t){status}, sizeof(int32_t));
    ivmd_conn_queue(d, c, (uint16_t)(type | IVM_MSG_REPLY), seq, failed, len,
                    status == IVM_ERROR_LIMIT
                        ? "the daemon has no file descriptor left to hand the memory over "
                          "(its open-file limit; see --max-fds, --fd-reserve)"
                        : "the daemon could not hand the memory over (out of memory)",
                    NULL, 0);
    free(failed);
    return status;
}

void ivmd_conn_send(ivmd_t *d, ivmd_conn_t *c, uint16_t type, const void *payload,
                    uint32_t len)
{
    ivmd_conn_send_parts(d, c, type, 0, payload, len, NULL, 0);
}

void ivmd_conn_send_parts(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                          const void *a, uint32_t alen, const void *b, uint32_t blen)
{
    ivmd_outbuf_t *out;

    c->last_tx_ns = ivmd_now_ns();
    out = ivmd_conn_out_alloc(d, c, type, seq, alen + blen);
    if (out == NULL) {
        return;
    }
    memcpy(IVMD_OUTBUF_PAYLOAD(out), a, alen);
    if (blen > 0) {
        memcpy(IVMD_OUTBUF_PAYLOAD(out) + alen, b, blen);
    }
    ivmd_conn_out_push(d, c, out, NULL, 0);
}

void ivmd_conn_doom(ivmd_conn_t *c, const char *why)
{
    if (c->doomed == NULL) {
        c->doomed = why;
    }
}

ivmd_outbuf_t *ivmd_conn_out_alloc(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                   uint32_t payload_len)
{
    ivm_msg_hdr_t hdr;
    ivmd_outbuf_t *b;
    size_t tag;

    if (c->closed || c->doomed != NULL) {
        return NULL;
    }
    tag = c->sealed ? IVM_CRYPTO_TAG_LEN : 0;
    b = malloc(sizeof(*b) + sizeof(hdr) + payload_len + tag);
    if (b == NULL) {
        ivmd_conn_doom(c, "out of memory for a message");
        return NULL;
    }
    ivm_proto_hdr_init(&hdr, type, payload_len, seq);
    memcpy(b->data, &hdr, sizeof(hdr));
    b->len    = sizeof(hdr) + payload_len + tag;
    b->off    = 0;
    b->next   = NULL;
    b->nfds   = 0;
    b->tagged = tag != 0;
    return b;
}

/* Duplicates fds into b; on failure none is kept. */
static ivmError_t ivmd_conn_out_fds(ivmd_outbuf_t *b, const int *fds, int nfds)
{
    int i;

    for (i = 0; i < nfds; ++i) {
        int dup_fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        if (dup_fd < 0) {
            int err = errno;
            ivm_warn_limited("cannot duplicate fd %d for a reply: %m", fds[i]);
            ivm_sock_close_fds(b->fds, b->nfds);
            b->nfds = 0;
            return (err == EMFILE || err == ENFILE) ? IVM_ERROR_LIMIT : IVM_ERROR_NO_MEMORY;
        }
        b->fds[b->nfds++] = dup_fd;
    }
    return IVM_SUCCESS;
}

/* b's header and payload in the wire's byte order. */
static void ivmd_conn_pack(const ivmd_conn_ops_t *ops, ivmd_outbuf_t *b)
{
    ivm_msg_hdr_t *hdr = (ivm_msg_hdr_t *)b->data;

    if (ops->msg_pack != NULL) {
        ops->msg_pack(hdr->type, IVMD_OUTBUF_PAYLOAD(b), hdr->length);
    }
    ops->hdr_pack(hdr);
}

/* Sealed in push order, which is the order on the wire. */
static ivmError_t ivmd_conn_seal(ivmd_conn_t *c, ivmd_outbuf_t *b)
{
    size_t len = b->len - sizeof(ivm_msg_hdr_t) - IVM_CRYPTO_TAG_LEN;
    ivmError_t status;

    status = ivm_aead_seal(&c->tx_aead, b->data, sizeof(ivm_msg_hdr_t),
                           b->data + sizeof(ivm_msg_hdr_t), len,
                           (uint8_t *)b->data + b->len - IVM_CRYPTO_TAG_LEN);
    if (status != IVM_SUCCESS) {
        ivmd_conn_doom(c, status == IVM_ERROR_LIMIT ? "message counter spent"
                                                    : "cannot seal a message");
    }
    return status;
}

ivmError_t ivmd_conn_out_push(ivmd_t *d, ivmd_conn_t *c, ivmd_outbuf_t *b, const int *fds,
                              int nfds)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];
    ivmError_t status;

    if (c->h.fd < 0) {
        /* Socketless (a PE of another node): its owner carries the message. */
        if (ops != NULL && ops->on_output != NULL) {
            ops->on_output(d, c, b->data, (uint32_t)b->len);
        }
        free(b);
        return IVM_SUCCESS;
    }
    if (ivmd_conn_over_limit(c, b)) {
        free(b);
        return IVM_ERROR_NO_MEMORY;
    }
    status = ivmd_conn_out_fds(b, fds, nfds);
    if (status == IVM_SUCCESS && ops != NULL && ops->hdr_pack != NULL) {
        ivmd_conn_pack(ops, b);
    }
    if (status == IVM_SUCCESS && b->tagged) {
        status = ivmd_conn_seal(c, b);
    }
    if (status != IVM_SUCCESS) {
        free(b);
        return status;
    }
    if (c->out_tail != NULL) {
        c->out_tail->next = b;
    } else {
        c->out_head = b;
    }
    c->out_tail   = b;
    c->out_bytes += b->len;
    ivmd_conn_flush(d, c);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_conn_queue(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                  const void *rep, uint32_t len, const char *detail,
                                  const int *fds, int nfds)
{
    size_t dlen = (detail != NULL && *detail != '\0') ? strlen(detail) + 1 : 0;
    ivmd_outbuf_t *b;
    char *p;

    if (dlen > IVM_MSG_DETAIL_MAX) {
        dlen = IVM_MSG_DETAIL_MAX;
    }
    b = ivmd_conn_out_alloc(d, c, type, seq, (uint32_t)(len + dlen));
    if (b == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    p = IVMD_OUTBUF_PAYLOAD(b);
    memcpy(p, rep, len);
    if (dlen > 0) {
        memcpy(p + len, detail, dlen - 1);
        p[len + dlen - 1] = '\0';
    }
    return ivmd_conn_out_push(d, c, b, fds, nfds);
}

/* A sealed message's tag: 0 if it checks; else the link is closed and the
 * peer counts as lost, as when a link drops (nothing of it is acted on). */
static int ivmd_conn_open_sealed(ivmd_t *d, ivmd_conn_t *c)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];
    ivm_msg_hdr_t wire = c->hdr; /* the tag covers the header as it came */
    ivmError_t status;

    if (c->payload_want <= c->hdr.length) {
        return 0;
    }
    if (ops->hdr_pack != NULL) {
        ops->hdr_pack(&wire);
    }
    status = ivm_aead_open(&c->rx_aead, &wire, sizeof(wire), c->payload, c->hdr.length,
                           (uint8_t *)c->payload + c->hdr.length);
    if (status == IVM_SUCCESS) {
        return 0;
    }
    if (c->table->ops[c->kind]->on_bad_seal != NULL) {
        c->table->ops[c->kind]->on_bad_seal(d, c, status);
    }
    ivmd_conn_close(d, c, "message failed authentication");
    return -1;
}

/* A whole message is buffered: check it, hand it to the kind's owner, get
 * ready for the next. Returns 0 to read on, 1 to stop (closed, or one
 * message per wakeup). */
static int ivmd_conn_deliver(ivmd_t *d, ivmd_conn_t *c)
{
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];
    const char *why;

    if (ivmd_conn_open_sealed(d, c) != 0) {
        return 1;
    }
    if (ops->msg_unpack != NULL) {
        ops->msg_unpack(c->hdr.type, c->payload, c->hdr.length);
    }
    if (ops->check_msg != NULL && ops->check_msg(d, c, &why) != IVM_SUCCESS) {
        ivmd_conn_close(d, c, why);
        return 1;
    }
    ops->on_msg(d, c, &c->hdr, c->payload);
    ivmd_conn_drop_fds(c);
    if (c->closed) {
        return 1;
    }
    c->hdr_got     = 0;
    c->payload_got = 0;
    return (ops->flags & IVMD_CONN_F_ONE_PER_WAKE) ? 1 : 0;
}

static void ivmd_conn_on_event(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_conn_t *c = arg;
    const ivmd_conn_ops_t *ops = c->table->ops[c->kind];
    const char *why = NULL;
    size_t consumed = 0;
    int rc;

    if (c->closed) {
        return;
    }
    if (c->pstate == IVMD_PEER_CONNECTING) {
        if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && ops->on_connected != NULL) {
            ops->on_connected(d, c);
        }
        return;
    }
    if (events & EPOLLOUT) {
        ivmd_conn_flush(d, c);
        if (c->closed) {
            return;
        }
    }
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        return;
    }
    do {
        rc = ivmd_conn_read_some(c, &why);
        if (rc < 0) {
            if (strcmp(why, "end of stream") != 0 && strcmp(why, "read error") != 0 &&
                ops->on_malformed != NULL) {
                ops->on_malformed(d, c, why);
            }
            ivmd_conn_close(d, c, why);
            return;
        }
        if (rc == 0 || ivmd_conn_deliver(d, c) != 0) {
            return;
        }
        /* A peer streaming a transfer: after IVMD_CONN_OUT_HIGH bytes, let the
         * other connections and the heartbeat tick have a turn (nothing may
         * stay staged: epoll only reports what is still in the socket). */
        consumed += sizeof(c->hdr) + c->hdr.length;
    } while (consumed < IVMD_CONN_OUT_HIGH || c->rbuf_off != c->rbuf_len);
}
