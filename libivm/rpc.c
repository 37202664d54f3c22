/* The daemon connection. Requests are numbered; replies may come in any
 * order (a WAIT is answered late). Whichever waiting thread finds no reader
 * becomes the reader, reads one reply, hands it to its owner and steps down,
 * so a thread blocked in ivmWait never holds up the others. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libivm.h"
#include "sock.h"

struct ivm_pending {
    ivm_pending_t   *next;
    uint32_t         seq;
    uint16_t         type;
    int              done;
    ivmError_t       transport;
    ivm_rpc_reply_t *rep;
    char             detail[IVM_MSG_DETAIL_MAX]; /* text of a failed call */
};

static __thread char ivm_err_msg[IVM_MSG_DETAIL_MAX + 64];

void ivm_set_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ivm_err_msg, sizeof(ivm_err_msg), fmt, ap);
    va_end(ap);
}

void ivm_clear_error(void)
{
    ivm_err_msg[0] = '\0';
}

IVM_API const char *ivmGetLastErrorMessage(void)
{
    return ivm_err_msg;
}

ivmError_t ivm_rpc_open(const char *path)
{
    int fd = ivm_sock_connect(path);

    if (fd < 0) {
        return (ivmError_t)fd;
    }
    ivm_ctx.fd   = fd;
    ivm_ctx.lost = 0;
    return IVM_SUCCESS;
}

void ivm_rpc_close(void)
{
    if (ivm_ctx.fd >= 0) {
        close(ivm_ctx.fd);
        ivm_ctx.fd = -1;
    }
}

static ivm_pending_t *ivm_rpc_find(uint32_t seq)
{
    ivm_pending_t *p;

    for (p = ivm_ctx.pending; p != NULL; p = p->next) {
        if (p->seq == seq && !p->done) {
            return p;
        }
    }
    return NULL;
}

static void ivm_rpc_unlink(ivm_pending_t *me)
{
    ivm_pending_t **link;

    for (link = &ivm_ctx.pending; *link != NULL; link = &(*link)->next) {
        if (*link == me) {
            *link = me->next;
            return;
        }
    }
}

uint64_t ivm_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Poll fd for up to spin_ns before a read blocks: a reply that comes within
 * that time costs no sleeping wake-up of this thread. Returns 1 when fd is
 * readable (or failed: the read reports it).
 * Each empty poll yields the CPU: our request woke the daemon with a "sync"
 * wake-up, which the scheduler tends to place on this very CPU, expecting
 * us to sleep; a spin that does not yield keeps the daemon waiting for the
 * whole spin (measured: 8 B remote Put 35 us, 90 us when the PE and its
 * daemon share a CPU and the PE spins its 50 us; docs/BENCHMARKS.md, issue
 * 17). With nothing else runnable, the yield returns at once. */
int ivm_spin_readable(int fd, uint64_t spin_ns)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    uint64_t end = ivm_now_ns() + spin_ns;

    do {
        if (poll(&pfd, 1, 0) != 0) {
            return 1;
        }
        sched_yield();
    } while (ivm_now_ns() < end);
    return 0;
}

/* Sleep in poll until a reply is there, not in recvmsg: the daemon's read
 * of our last request frees socket space, and that write-space wake-up would
 * wake a thread sleeping in recvmsg for nothing (two context switches on the
 * daemon's CPU, on the path of every call); poll's wait is for POLLIN only. */
static void ivm_rpc_wait_readable(void)
{
    struct pollfd pfd = {.fd = ivm_ctx.fd, .events = POLLIN};

    while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
    }
}

/* Read one message and deliver it; called without the lock held. Returns
 * IVM_SUCCESS or IVM_ERROR_DAEMON_LOST / IVM_ERROR_PROTOCOL. */
static ivmError_t ivm_rpc_read_one(uint64_t spin_ns)
{
    /* Every reply is a header and at least a status: read that much at once
     * (one system call for most replies; never a byte of the next message). */
    char first[sizeof(ivm_msg_hdr_t) + sizeof(ivm_msg_status_t)];
    char payload[sizeof(ivm_msg_create_pes_rep_t) + IVM_MSG_DETAIL_MAX];
    ivm_msg_hdr_t hdr;
    ivm_pending_t *p;
    const char *why;
    ivmError_t status;
    int fds[IVM_MSG_MAX_FDS];
    int nfds = 0;

    if (spin_ns == 0 || !ivm_spin_readable(ivm_ctx.fd, spin_ns)) {
        ivm_rpc_wait_readable();
    }
    status = ivm_sock_recv(ivm_ctx.fd, first, sizeof(first), fds, &nfds, IVM_MSG_MAX_FDS);
    if (status != IVM_SUCCESS) {
        return status;
    }
    memcpy(&hdr, first, sizeof(hdr));
    if (ivm_proto_check_hdr(&hdr, &why) != IVM_SUCCESS ||
        ivm_proto_check_rep(&hdr, &why) != IVM_SUCCESS || hdr.length > sizeof(payload) ||
        hdr.length < sizeof(ivm_msg_status_t)) {
        ivm_sock_close_fds(fds, nfds);
        return IVM_ERROR_PROTOCOL;
    }
    memcpy(payload, first + sizeof(hdr), sizeof(ivm_msg_status_t));
    if (hdr.length > sizeof(ivm_msg_status_t)) {
        status = ivm_sock_recv(ivm_ctx.fd, payload + sizeof(ivm_msg_status_t),
                               hdr.length - sizeof(ivm_msg_status_t), fds, &nfds,
                               IVM_MSG_MAX_FDS);
        if (status != IVM_SUCCESS) {
            ivm_sock_close_fds(fds, nfds);
            return status;
        }
    }
    if (ivm_proto_check_rep_body(&hdr, payload, &why) != IVM_SUCCESS) {
        ivm_sock_close_fds(fds, nfds);
        return IVM_ERROR_PROTOCOL;
    }
    pthread_mutex_lock(&ivm_ctx.lock);
    p = ivm_rpc_find(hdr.seq);
    if (p == NULL || (p->type | IVM_MSG_REPLY) != hdr.type) {
        pthread_mutex_unlock(&ivm_ctx.lock);
        ivm_sock_close_fds(fds, nfds);
        return IVM_ERROR_PROTOCOL;
    }
    {
        size_t fixed = p->rep->len < hdr.length ? p->rep->len : hdr.length;
        memcpy(p->rep->buf, payload, fixed);
        if (fixed < p->rep->len) { /* a short reply (CREATE_PES): the rest is zero */
            memset((char *)p->rep->buf + fixed, 0, p->rep->len - fixed);
        }
        if (hdr.length > p->rep->len) {
            size_t dlen = hdr.length - p->rep->len;
            if (dlen > sizeof(p->detail)) {
                dlen = sizeof(p->detail);
            }
            memcpy(p->detail, payload + p->rep->len, dlen);
            p->detail[dlen - 1] = '\0';
        }
    }
    if (nfds > 0) {
        p->rep->fd = fds[0];
    }
    if (nfds > 1) {
        p->rep->fd2 = fds[1];
    }
    if (nfds > 2) {
        ivm_sock_close_fds(fds + 2, nfds - 2);
    }
    p->transport = IVM_SUCCESS;
    p->done      = 1;
    pthread_cond_broadcast(&ivm_ctx.cond);
    pthread_mutex_unlock(&ivm_ctx.lock);
    return IVM_SUCCESS;
}

/* Every pending call fails: the connection is gone. Called with the lock. */
static void ivm_rpc_fail_all(ivmError_t status)
{
    ivm_pending_t *p;

    ivm_ctx.lost = 1;
    for (p = ivm_ctx.pending; p != NULL; p = p->next) {
        if (!p->done) {
            p->done      = 1;
            p->transport = status;
        }
    }
}

/* Number me, list it as pending and send its request. IVM_SUCCESS or
 * IVM_ERROR_DAEMON_LOST (then me is done, its transport failed). */
static ivmError_t ivm_rpc_send(ivm_pending_t *me, uint16_t type, const void *req,
                               uint32_t req_len, const int *fds, int nfds, ivm_rpc_reply_t *rep)
{
    ivm_msg_hdr_t hdr;
    ivmError_t status;

    memset(me, 0, sizeof(*me));
    me->type = type;
    me->rep  = rep;
    rep->fd  = -1;
    rep->fd2 = -1;
    pthread_mutex_lock(&ivm_ctx.lock);
    if (ivm_ctx.lost || ivm_ctx.fd < 0) {
        pthread_mutex_unlock(&ivm_ctx.lock);
        me->done      = 1;
        me->transport = IVM_ERROR_DAEMON_LOST;
        return IVM_ERROR_DAEMON_LOST;
    }
    me->seq  = ++ivm_ctx.next_seq;
    me->next = ivm_ctx.pending;
    ivm_ctx.pending = me;
    pthread_mutex_unlock(&ivm_ctx.lock);

    ivm_proto_hdr_init(&hdr, type, req_len, me->seq);
    pthread_mutex_lock(&ivm_ctx.send_lock);
    status = ivm_sock_send(ivm_ctx.fd, &hdr, req, fds, nfds);
    pthread_mutex_unlock(&ivm_ctx.send_lock);
    if (status != IVM_SUCCESS) {
        pthread_mutex_lock(&ivm_ctx.lock);
        ivm_rpc_fail_all(IVM_ERROR_DAEMON_LOST);
        pthread_cond_broadcast(&ivm_ctx.cond);
        pthread_mutex_unlock(&ivm_ctx.lock);
    }
    return IVM_SUCCESS;
}

/* Wait for me's reply (reading replies, its own or others', when no other
 * thread does), unlist it and return the transport status, the reply's
 * detail text as the thread's error message. */
static ivmError_t ivm_rpc_wait(ivm_pending_t *me)
{
    ivmError_t status;

    pthread_mutex_lock(&ivm_ctx.lock);
    while (!me->done) {
        if (ivm_ctx.reading) {
            pthread_cond_wait(&ivm_ctx.cond, &ivm_ctx.lock);
            continue;
        }
        ivm_ctx.reading = 1;
        pthread_mutex_unlock(&ivm_ctx.lock);
        /* Which calls poll is the message table's (proto.h). */
        status = ivm_rpc_read_one(ivm_proto_reply_polled(me->type) ? ivm_ctx.spin_ns : 0);
        pthread_mutex_lock(&ivm_ctx.lock);
        ivm_ctx.reading = 0;
        if (status != IVM_SUCCESS) {
            ivm_rpc_fail_all(status == IVM_ERROR_PROTOCOL ? IVM_ERROR_PROTOCOL
                                                          : IVM_ERROR_DAEMON_LOST);
        }
        pthread_cond_broadcast(&ivm_ctx.cond);
    }
    ivm_rpc_unlink(me);
    pthread_mutex_unlock(&ivm_ctx.lock);

    if (me->transport != IVM_SUCCESS) {
        ivm_set_error(me->transport == IVM_ERROR_PROTOCOL
                          ? "the IVM daemon sent a malformed reply"
                          : "the connection to the IVM daemon is lost");
        return me->transport;
    }
    if (me->detail[0] != '\0') {
        ivm_set_error("%s", me->detail);
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_rpc_call(uint16_t type, const void *req, uint32_t req_len,
                        const int *fds, int nfds, ivm_rpc_reply_t *rep)
{
    ivm_pending_t me;

    if (ivm_rpc_send(&me, type, req, req_len, fds, nfds, rep) != IVM_SUCCESS) {
        ivm_set_error("the connection to the IVM daemon is lost");
        return IVM_ERROR_DAEMON_LOST;
    }
    return ivm_rpc_wait(&me);
}

/* A posted call: its pending entry and the status-only reply it gets. The
 * posted calls wait in a FIFO (under posted_lock, held through a quiet so
 * that a quiet covers every call posted before it). The first failure of a
 * posted call settled without a quiet, here or on an endpoint (ep.c), is
 * kept for the next quiet (ivm_posted_failure). */
typedef struct ivm_rpc_posted ivm_rpc_posted_t;
struct ivm_rpc_posted {
    ivm_rpc_posted_t *next;
    ivm_pending_t     me;
    ivm_rpc_reply_t   reply;
    ivm_msg_status_t  rep;
    const char       *what; /* the API call, for its error message */
};

static struct {
    pthread_mutex_t   lock;
    ivm_rpc_posted_t *head, *tail;
    unsigned          count;
} ivm_posted = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct {
    pthread_mutex_t lock;
    ivmError_t      status;
    char            detail[IVM_MSG_DETAIL_MAX + 128];
} ivm_posted_failure = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Wait for the oldest posted call, unlist and free it; its status. */
static ivmError_t ivm_rpc_complete_oldest(void)
{
    ivm_rpc_posted_t *c = ivm_posted.head;
    ivmError_t status;

    ivm_posted.head = c->next;
    if (ivm_posted.head == NULL) {
        ivm_posted.tail = NULL;
    }
    ivm_posted.count--;
    status = ivm_rpc_wait(&c->me);
    if (status != IVM_SUCCESS) {
        /* The transport failed: ivm_rpc_wait said how. */
        char text[IVM_MSG_DETAIL_MAX + 64];
        snprintf(text, sizeof(text), "%s", ivmGetLastErrorMessage());
        ivm_set_error("%s (posted): %s", c->what, text);
    } else if ((status = (ivmError_t)c->rep.status) != IVM_SUCCESS) {
        ivm_set_error("%s (posted): %s", c->what,
                      c->me.detail[0] != '\0' ? c->me.detail : ivmGetErrorString(status));
    }
    if (c->reply.fd >= 0) {
        close(c->reply.fd);
    }
    if (c->reply.fd2 >= 0) {
        close(c->reply.fd2);
    }
    free(c);
    return status;
}

void ivm_rpc_keep_failure(ivmError_t status)
{
    pthread_mutex_lock(&ivm_posted_failure.lock);
    if (status != IVM_SUCCESS && ivm_posted_failure.status == IVM_SUCCESS) {
        ivm_posted_failure.status = status;
        snprintf(ivm_posted_failure.detail, sizeof(ivm_posted_failure.detail), "%s",
                 ivmGetLastErrorMessage());
    }
    pthread_mutex_unlock(&ivm_posted_failure.lock);
}

ivmError_t ivm_rpc_post(uint16_t type, const void *req, uint32_t req_len, const char *what)
{
    ivm_rpc_posted_t *c;

    pthread_mutex_lock(&ivm_posted.lock);
    while (ivm_posted.count >= IVM_POSTED_MAX) {
        ivm_rpc_keep_failure(ivm_rpc_complete_oldest());
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        pthread_mutex_unlock(&ivm_posted.lock);
        ivm_set_error("%s: out of memory for a posted request", what);
        return IVM_ERROR_NO_MEMORY;
    }
    c->what      = what;
    c->reply.buf = &c->rep;
    c->reply.len = sizeof(c->rep);
    if (ivm_rpc_send(&c->me, type, req, req_len, NULL, 0, &c->reply) != IVM_SUCCESS) {
        pthread_mutex_unlock(&ivm_posted.lock);
        free(c);
        ivm_set_error("the connection to the IVM daemon is lost");
        return IVM_ERROR_DAEMON_LOST;
    }
    if (ivm_posted.tail != NULL) {
        ivm_posted.tail->next = c;
    } else {
        ivm_posted.head = c;
    }
    ivm_posted.tail = c;
    ivm_posted.count++;
    pthread_mutex_unlock(&ivm_posted.lock);
    return IVM_SUCCESS;
}

void ivm_rpc_drain(void)
{
    pthread_mutex_lock(&ivm_posted.lock);
    while (ivm_posted.head != NULL) {
        ivm_rpc_keep_failure(ivm_rpc_complete_oldest());
    }
    pthread_mutex_unlock(&ivm_posted.lock);
}

ivmError_t ivm_rpc_quiet(void)
{
    ivmError_t first;

    ivm_rpc_drain();
    pthread_mutex_lock(&ivm_posted_failure.lock);
    first                     = ivm_posted_failure.status;
    ivm_posted_failure.status = IVM_SUCCESS;
    if (first != IVM_SUCCESS) {
        ivm_set_error("%s", ivm_posted_failure.detail);
    }
    pthread_mutex_unlock(&ivm_posted_failure.lock);
    return first;
}
