/* A PE's own endpoints to the daemons of other nodes (common/proto.h,
 * EP_HELLO). A small ivmSyncPut or ivmSyncGet of a node copy goes straight
 * to the daemon that holds the master: one round trip to one daemon, where the
 * daemon path is the PE's daemon, the peer link, the master's daemon and
 * back (two daemons, four process wake-ups). One endpoint per node, opened
 * by the first such put; the calling thread holds it for its round trip.
 * The PE gets where to dial and the job's endpoint key from its own daemon
 * (ENDPOINT), over its private socket; every message after the handshake
 * is sealed with the keys both ends derive from it, as the peer links are.
 * Anything the endpoint cannot take (a node that refuses endpoints, a
 * master with device copies, a connection that cannot be made) goes the
 * daemon path, which decides; a node lost mid-put fails the put with
 * IVM_ERROR_DAEMON_LOST, as the daemon path does. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto.h"
#include "ep.h"
#include "libivm.h"
#include "log.h"
#include "sock.h"

enum { IVM_EP_NEW = 0, IVM_EP_OPEN = 1, IVM_EP_REFUSED = -1 };

/* The most the connection and handshake of an endpoint may take (it takes
 * well under 10 ms here): a daemon that does not answer by then (its fd
 * table full, its accepts paused) leaves the PE on the daemon path to that
 * node, which still works, instead of holding the sync up to the node's
 * whole timeout (tests/integration/test_multinode.c, a full fd table). */
#define IVM_EP_HELLO_MS 2000

/* A posted put (ivmSyncPutNbi) sent on the endpoint whose answer is still
 * owed: what a daemon-path redo needs when the master's daemon sends it back
 * (IVM_ERROR_UNSUPPORTED: the master has device copies). */
typedef struct ivm_ep_owed {
    uint32_t seq;
    uint64_t obj_id, offset, size;
} ivm_ep_owed_t;

#define IVM_EP_OWED_MAX 16 /* posted puts in flight on one endpoint */

typedef struct ivm_ep {
    pthread_mutex_t lock;
    int             state;      /* IVM_EP_* */
    int             fd;
    ivm_aead_t      tx, rx;
    uint32_t        seq;        /* the last put's number */
    int             timeout_ms; /* a reply not there by then: the node is lost */
    unsigned        before;     /* small syncs to the node that went through the daemon */
    char           *buf;        /* the message being sealed */
    size_t          cap;
    ivm_ep_owed_t   owed[IVM_EP_OWED_MAX]; /* a ring, oldest at owed_head */
    unsigned        owed_head, owed_n;
} ivm_ep_t;

static pthread_mutex_t ivm_eps_lock = PTHREAD_MUTEX_INITIALIZER;
static ivm_ep_t       *ivm_eps[IVM_CLUSTER_MAX_NODES];
static size_t          ivm_ep_put_max = IVM_EP_PUT_MAX_DEFAULT;
static int             ivm_ep_off;

void ivm_ep_configure(void)
{
    const char *off = getenv("IVM_PE_ENDPOINTS");
    const char *max = getenv("IVM_PE_ENDPOINT_MAX");
    char *end;

    ivm_ep_off = off != NULL && strcmp(off, "0") == 0;
    ivm_ep_put_max = IVM_EP_PUT_MAX_DEFAULT;
    if (max != NULL && *max != '\0') {
        unsigned long long v = strtoull(max, &end, 10);
        if (*end == '\0') {
            ivm_ep_put_max = v > IVM_PEER_CHUNK ? IVM_PEER_CHUNK : (size_t)v;
        }
    }
}

static ivm_ep_t *ivm_ep_of(uint32_t node)
{
    ivm_ep_t *ep;

    if (node >= IVM_CLUSTER_MAX_NODES) {
        return NULL;
    }
    pthread_mutex_lock(&ivm_eps_lock);
    ep = ivm_eps[node];
    if (ep == NULL && (ep = calloc(1, sizeof(*ep))) != NULL) {
        pthread_mutex_init(&ep->lock, NULL);
        ep->fd        = -1;
        ivm_eps[node] = ep;
    }
    pthread_mutex_unlock(&ivm_eps_lock);
    return ep;
}

static void ivm_ep_shut(ivm_ep_t *ep, int state)
{
    if (ep->fd >= 0) {
        close(ep->fd);
        ep->fd = -1;
        ivm_aead_free(&ep->tx);
        ivm_aead_free(&ep->rx);
    }
    ep->state = state;
}

void ivm_ep_close_all(void)
{
    uint32_t i;

    pthread_mutex_lock(&ivm_eps_lock);
    for (i = 0; i < IVM_CLUSTER_MAX_NODES; ++i) {
        ivm_ep_t *ep = ivm_eps[i];
        if (ep != NULL) {
            ivm_ep_shut(ep, IVM_EP_NEW);
            free(ep->buf);
            pthread_mutex_destroy(&ep->lock);
            free(ep);
            ivm_eps[i] = NULL;
        }
    }
    pthread_mutex_unlock(&ivm_eps_lock);
}

/* Milliseconds left until deadline (ivm_now_ns); 0 once past. */
static int ivm_ep_left_ms(uint64_t deadline)
{
    uint64_t now = ivm_now_ns();

    return now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
}

/* Send or receive len bytes whole before deadline (ivm_now_ns): 0, or -1
 * (errno; ETIMEDOUT past it, ECONNRESET at the other end's close). */
static int ivm_ep_io(int fd, void *buf, size_t len, int out, uint64_t deadline)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int left = ivm_ep_left_ms(deadline);
        if (left == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (poll(&pfd, 1, left) < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

/* What ivm_ep_io's failure was, for the message. */
static const char *ivm_ep_io_why(void)
{
    return errno == ETIMEDOUT ? "no answer in time" : "the connection broke";
}

/* A non-blocking TCP connection to addr:port, made before deadline. */
static int ivm_ep_dial(const char *addr, uint16_t port, uint64_t deadline)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd, one = 1, err = 0;
    socklen_t elen = sizeof(err);
    struct pollfd pfd;

    if (ivm_sock_inet_addr(addr, port, &ss, &len) != 0) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return -1;
        }
        pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
        if (poll(&pfd, 1, ivm_ep_left_ms(deadline)) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
            close(fd);
            errno = err != 0 ? err : ETIMEDOUT;
            return -1;
        }
    }
    return fd;
}

/* Ask the own daemon for the way to node, dial it and seal. 1: open;
 * 0: this node takes no endpoint from us (the daemon path goes on);
 * -1: *status_p (the node is lost). */
static int ivm_ep_open(ivm_ep_t *ep, uint32_t node, ivmError_t *status_p)
{
    ivm_msg_endpoint_req_t req = {.node = node};
    ivm_msg_endpoint_rep_t rep;
    struct {
        ivm_msg_hdr_t       hdr;
        ivm_peer_ep_hello_t hello;
    } out;
    struct {
        ivm_msg_hdr_t         hdr;
        ivm_peer_ep_welcome_t welcome;
    } in;
    uint64_t deadline;
    ivmError_t status;
    int fd;

    /* libcrypto, loaded now (not at the process's start): without it, the
     * daemon path. */
    if (ivm_crypto_load() != IVM_SUCCESS) {
        ivm_ep_shut(ep, IVM_EP_REFUSED);
        return 0;
    }
    memset(&rep, 0, sizeof(rep));
    status = ivm_call(IVM_MSG_ENDPOINT, &req, sizeof(req), &rep, sizeof(rep), NULL);
    if (status == IVM_ERROR_DAEMON_LOST || status == IVM_ERROR_NOT_ENTERED) {
        *status_p = status;
        return -1;
    }
    if (status != IVM_SUCCESS || !ivm_proto_strok(rep.addr, sizeof(rep.addr))) {
        ivm_clear_error();
        ivm_ep_shut(ep, IVM_EP_REFUSED);
        return 0;
    }
    ep->timeout_ms = rep.timeout_ms > 0 ? (int)rep.timeout_ms : 10000;
    deadline       = ivm_now_ns() +
               (uint64_t)(ep->timeout_ms < IVM_EP_HELLO_MS ? ep->timeout_ms : IVM_EP_HELLO_MS) *
                   1000000u;
    fd             = ivm_ep_dial(rep.addr, rep.port, deadline);
    memset(&out, 0, sizeof(out));
    ivm_proto_hdr_init(&out.hdr, IVM_PEER_EP_HELLO, sizeof(out.hello), 0);
    out.hello.job    = ivm_ctx.job_id;
    out.hello.pe     = ivm_ctx.pe_id;
    out.hello.node   = rep.self;
    out.hello.layout = IVM_PEER_LAYOUT;
    if (fd < 0 || ivm_crypto_random(out.hello.nonce, sizeof(out.hello.nonce)) != IVM_SUCCESS) {
        goto refused;
    }
    {
        uint8_t nonce_p[IVM_PEER_NONCE_LEN];
        memcpy(nonce_p, out.hello.nonce, sizeof(nonce_p));
        ivm_peer_pack(IVM_PEER_EP_HELLO, &out.hello, sizeof(out.hello));
        ivm_peer_hdr_pack(&out.hdr);
        if (ivm_ep_io(fd, &out, sizeof(out), 1, deadline) != 0 ||
            ivm_ep_io(fd, &in, sizeof(in), 0, deadline) != 0) {
            goto refused;
        }
        ivm_peer_hdr_unpack(&in.hdr);
        ivm_peer_unpack(IVM_PEER_EP_WELCOME, &in.welcome, sizeof(in.welcome));
        if (in.hdr.magic != IVM_PROTO_MAGIC || in.hdr.type != IVM_PEER_EP_WELCOME ||
            in.hdr.length != sizeof(in.welcome) || in.welcome.status != IVM_SUCCESS ||
            (in.welcome.flags & IVM_PEER_ENCRYPT) != (rep.flags & IVM_PEER_ENCRYPT) ||
            ivm_aead_ep_init(rep.key, nonce_p, in.welcome.nonce, IVM_PEER_NONCE_LEN,
                             ivm_ctx.job_id, ivm_ctx.pe_id, 1,
                             (rep.flags & IVM_PEER_ENCRYPT) != 0, &ep->tx,
                             &ep->rx) != IVM_SUCCESS) {
            goto refused;
        }
    }
    explicit_bzero(rep.key, sizeof(rep.key));
    ep->fd    = fd;
    ep->state = IVM_EP_OPEN;
    return 1;

refused:
    /* Not reachable this way (a firewall, another address): the daemon
     * path, which knows whether the node is there. */
    explicit_bzero(rep.key, sizeof(rep.key));
    if (fd >= 0) {
        close(fd);
    }
    ivm_ep_shut(ep, IVM_EP_REFUSED);
    return 0;
}

/* Make room for len bytes of message. */
static int ivm_ep_room(ivm_ep_t *ep, size_t len)
{
    if (len > ep->cap) {
        char *b = realloc(ep->buf, len);
        if (b == NULL) {
            return -1;
        }
        ep->buf = b;
        ep->cap = len;
    }
    return 0;
}

/* When a request sent now must have its answer. */
static uint64_t ivm_ep_deadline(const ivm_ep_t *ep)
{
    return ivm_now_ns() + (uint64_t)ep->timeout_ms * 1000000u;
}

/* The endpoint is lost (why): closed, to be opened again later; the error
 * of fn's caller. Called with ep->lock. */
static ivmError_t ivm_ep_lost(ivm_ep_t *ep, const char *fn, const char *why)
{
    ivm_ep_shut(ep, IVM_EP_NEW);
    IVM_FAIL(IVM_ERROR_DAEMON_LOST,
             "%s: the node holding the object's master is unreachable (its endpoint: %s)", fn,
             why);
}

/* Seal and send a request on an open endpoint: EP_PUT of [addr, +size) (a
 * copy: the tag is over the bytes that go, whatever the caller's other
 * threads write meanwhile), or EP_GET; its number in ep->seq. NULL, or why
 * the endpoint is lost. */
static const char *ivm_ep_send(ivm_ep_t *ep, int get, uint64_t obj, uint64_t offset,
                               const void *addr, size_t size, int sig_to, uint64_t deadline)
{
    size_t carried = get ? 0 : size;
    size_t len = sizeof(ivm_msg_hdr_t) + sizeof(ivm_peer_xfer_t) + carried + IVM_CRYPTO_TAG_LEN;
    ivm_msg_hdr_t *hdr = (ivm_msg_hdr_t *)ep->buf;
    ivm_peer_xfer_t *x = (ivm_peer_xfer_t *)(hdr + 1);

    ivm_proto_hdr_init(hdr, get ? IVM_PEER_EP_GET : IVM_PEER_EP_PUT,
                       (uint32_t)(sizeof(*x) + carried), ++ep->seq);
    memset(x, 0, sizeof(*x));
    x->op  = ep->seq;
    x->job = ivm_ctx.job_id;
    x->obj = obj;
    x->off = offset;
    x->len = size;
    if (sig_to >= 0) {
        x->flags    = IVM_XFER_SIGNAL;
        x->sig_from = ivm_ctx.pe_id;
        x->sig_to   = sig_to;
    }
    if (carried > 0) {
        memcpy(x + 1, addr, carried);
    }
    ivm_peer_pack(hdr->type, x, (uint32_t)(sizeof(*x) + carried));
    ivm_peer_hdr_pack(hdr);
    if (ivm_aead_seal(&ep->tx, hdr, sizeof(*hdr), x, sizeof(*x) + carried,
                      (uint8_t *)ep->buf + len - IVM_CRYPTO_TAG_LEN) != IVM_SUCCESS) {
        return "cannot seal the request";
    }
    return ivm_ep_io(ep->fd, ep->buf, len, 1, deadline) != 0 ? ivm_ep_io_why() : NULL;
}

/* Read and check the answer to request `seq` (EP_ACK, or a Get's EP_DATA
 * whose bytes go to addr). NULL with *status_p the master daemon's status,
 * or why the endpoint is lost. */
static const char *ivm_ep_answer(ivm_ep_t *ep, int get, uint32_t seq, void *addr, size_t size,
                                 uint64_t deadline, ivmError_t *status_p)
{
    size_t back = sizeof(ivm_msg_hdr_t) + sizeof(ivm_peer_xfer_t) + (get ? size : 0) +
                  IVM_CRYPTO_TAG_LEN;
    size_t least = sizeof(ivm_msg_hdr_t) + sizeof(ivm_peer_xfer_t) + IVM_CRYPTO_TAG_LEN;
    ivm_msg_hdr_t wire, in;
    ivm_peer_xfer_t rep;
    char *body;

    /* Every answer holds at least a header, its fields and a tag: polled for
     * before the thread sleeps (the master's daemon, on another CPU, often
     * answers within IVM_SPIN_US), read at once, then what a Get's bytes add. */
    if (ivm_ctx.spin_ns > 0) {
        (void)ivm_spin_readable(ep->fd, ivm_ctx.spin_ns);
    }
    if (ivm_ep_io(ep->fd, ep->buf, least, 0, deadline) != 0) {
        return ivm_ep_io_why();
    }
    memcpy(&wire, ep->buf, sizeof(wire));
    in = wire;
    ivm_peer_hdr_unpack(&in);
    if (in.magic != IVM_PROTO_MAGIC || in.type != (get ? IVM_PEER_EP_DATA : IVM_PEER_EP_ACK) ||
        in.length < sizeof(rep) || sizeof(in) + in.length + IVM_CRYPTO_TAG_LEN > back) {
        return "a malformed answer";
    }
    if (sizeof(in) + in.length + IVM_CRYPTO_TAG_LEN > least &&
        ivm_ep_io(ep->fd, ep->buf + least, sizeof(in) + in.length + IVM_CRYPTO_TAG_LEN - least,
                  0, deadline) != 0) {
        return ivm_ep_io_why();
    }
    body = ep->buf + sizeof(in);
    if (ivm_aead_open(&ep->rx, &wire, sizeof(wire), body, in.length, (uint8_t *)body + in.length) !=
        IVM_SUCCESS) {
        return "an answer that failed its check";
    }
    ivm_peer_unpack(in.type, body, in.length);
    memcpy(&rep, body, sizeof(rep));
    if (rep.op != seq ||
        (rep.status == IVM_SUCCESS && get && (rep.len != size || in.length != sizeof(rep) + size))) {
        return "an answer to another request";
    }
    if (rep.status == IVM_SUCCESS && get) {
        memcpy(addr, body + sizeof(rep), size);
    }
    *status_p = (ivmError_t)rep.status;
    return NULL;
}

/* The oldest posted put's answer: read, and a put the master's daemon sent
 * back redone through the PE's daemon (blocking; the daemon reads the node
 * copy's bytes, which the caller leaves alone until the quiet). A failure is
 * kept for the next quiet (ivm_rpc_keep_failure). Called with ep->lock. */
static void ivm_ep_settle_oldest(ivm_ep_t *ep)
{
    ivm_ep_owed_t o = ep->owed[ep->owed_head];
    ivmError_t status = IVM_SUCCESS;
    const char *why = NULL;

    ep->owed_head = (ep->owed_head + 1) % IVM_EP_OWED_MAX;
    ep->owed_n--;
    if (ep->state != IVM_EP_OPEN) {
        why = "the connection broke";
    } else {
        why = ivm_ep_answer(ep, 0, o.seq, NULL, 0, ivm_ep_deadline(ep), &status);
    }
    if (why != NULL) {
        status = ivm_ep_lost(ep, "ivmSyncPutNbi (posted)", why);
    } else if (status == IVM_ERROR_UNSUPPORTED) {
        /* The master has device copies: the daemon's way, which knows. */
        ivm_msg_sync_req_t req = {.obj_id = o.obj_id, .offset = o.offset, .size = o.size,
                                  .op = IVM_SYNC_PUT};
        ivm_msg_status_t rep;
        status = ivm_call(IVM_MSG_SYNC, &req, sizeof(req), &rep, sizeof(rep), NULL);
    } else if (status != IVM_SUCCESS) {
        ivm_set_error("ivmSyncPutNbi (posted): the master's daemon refused it: %s",
                      ivmGetErrorString(status));
    }
    ivm_rpc_keep_failure(status);
}

/* Settle every posted put of ep. Called with ep->lock. */
static void ivm_ep_settle_all(ivm_ep_t *ep)
{
    while (ep->owed_n > 0) {
        ivm_ep_settle_oldest(ep);
    }
}

/* One round trip on an open endpoint, after the answers still owed to
 * posted puts: EP_PUT of [addr, +size) and its EP_ACK, or (get) EP_GET and
 * its EP_DATA, whose bytes go to addr. */
static ivmError_t ivm_ep_round_trip(ivm_ep_t *ep, int get, const ivm_map_t *map,
                                    uint64_t offset, void *addr, size_t size, int sig_to)
{
    const char *fn = get ? "ivmSyncGet" : "ivmSyncPut";
    size_t len = sizeof(ivm_msg_hdr_t) + sizeof(ivm_peer_xfer_t) + size + IVM_CRYPTO_TAG_LEN;
    ivmError_t status = IVM_SUCCESS;
    uint64_t deadline;
    const char *why;

    ivm_ep_settle_all(ep);
    if (ep->state != IVM_EP_OPEN) {
        return ivm_ep_lost(ep, fn, "the connection broke");
    }
    if (ivm_ep_room(ep, len) != 0) {
        IVM_FAIL(IVM_ERROR_NO_MEMORY, "%s: out of memory for %zu bytes", fn, size);
    }
    deadline = ivm_ep_deadline(ep);
    why = ivm_ep_send(ep, get, map->master_id, offset, addr, size, sig_to, deadline);
    if (why == NULL) {
        why = ivm_ep_answer(ep, get, ep->seq, addr, size, deadline, &status);
    }
    if (why != NULL) {
        return ivm_ep_lost(ep, fn, why);
    }
    if (status != IVM_SUCCESS && status != IVM_ERROR_UNSUPPORTED) {
        IVM_FAIL(status, "%s: the master's daemon refused it", fn);
    }
    return status;
}

/* The endpoint a sync of `size` bytes of map may take, locked and open
 * (*taken_p 1), or none (NULL: *taken_p 0, the daemon path; or 1 with
 * *status_p set, the node lost while opening). */
static ivm_ep_t *ivm_ep_take(const ivm_map_t *map, size_t size, size_t max, int *taken_p,
                             ivmError_t *status_p)
{
    ivm_ep_t *ep;
    int taken = 1;

    *taken_p = 0;
    if (ivm_ep_off || size > max || !(map->flags & IVM_MAP_DIRECT) ||
        (map->flags & (IVM_MAP_MASTER | IVM_MAP_GPU)) || map->master_node < 0 ||
        (ep = ivm_ep_of((uint32_t)map->master_node)) == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&ep->lock);
    if (ep->state == IVM_EP_NEW && ep->before < IVM_EP_AFTER) {
        /* A process that makes a few syncs to a node (a DS-LB portion's
         * records) does not pay for an endpoint (common/ep_defaults.h). */
        ++ep->before;
        taken = 0;
    } else if (ep->state == IVM_EP_NEW) {
        int r = ivm_ep_open(ep, (uint32_t)map->master_node, status_p);
        taken = r != 0;
    } else if (ep->state == IVM_EP_REFUSED) {
        taken = 0;
    }
    *taken_p = taken;
    if (!taken || ep->state != IVM_EP_OPEN) {
        pthread_mutex_unlock(&ep->lock);
        return NULL;
    }
    return ep;
}

int ivm_ep_post_put(const ivm_map_t *map, uint64_t offset, const void *addr, size_t size,
                    ivmError_t *status_p)
{
    size_t len = sizeof(ivm_msg_hdr_t) + sizeof(ivm_peer_xfer_t) + size + IVM_CRYPTO_TAG_LEN;
    const char *why;
    ivm_ep_t *ep;
    int taken;

    ep = ivm_ep_take(map, size, IVM_PEER_CHUNK, &taken, status_p);
    if (ep == NULL) {
        return taken;
    }
    while (ep->owed_n >= IVM_EP_OWED_MAX) {
        ivm_ep_settle_oldest(ep);
    }
    if (ep->state != IVM_EP_OPEN || ivm_ep_room(ep, len) != 0) {
        /* Lost while settling, or no memory: the daemon path. */
        pthread_mutex_unlock(&ep->lock);
        return 0;
    }
    why = ivm_ep_send(ep, 0, map->master_id, offset, addr, size, -1, ivm_ep_deadline(ep));
    if (why != NULL) {
        *status_p = ivm_ep_lost(ep, "ivmSyncPutNbi", why);
        pthread_mutex_unlock(&ep->lock);
        return 1;
    }
    ep->owed[(ep->owed_head + ep->owed_n) % IVM_EP_OWED_MAX] =
        (ivm_ep_owed_t){.seq = ep->seq, .obj_id = map->obj_id, .offset = offset, .size = size};
    ep->owed_n++;
    pthread_mutex_unlock(&ep->lock);
    *status_p = IVM_SUCCESS;
    return 1;
}

void ivm_ep_settle(void)
{
    pthread_mutex_lock(&ivm_eps_lock);
    for (uint32_t i = 0; i < IVM_CLUSTER_MAX_NODES; ++i) {
        ivm_ep_t *ep = ivm_eps[i];
        if (ep != NULL && ep->owed_n > 0) {
            pthread_mutex_lock(&ep->lock);
            ivm_ep_settle_all(ep);
            pthread_mutex_unlock(&ep->lock);
        }
    }
    pthread_mutex_unlock(&ivm_eps_lock);
}

int ivm_ep_sync(uint32_t op, const ivm_map_t *map, uint64_t offset, void *addr, size_t size,
                int sig_to, ivmError_t *status_p)
{
    ivm_ep_t *ep;
    int taken;

    if (op != IVM_SYNC_PUT && op != IVM_SYNC_GET) {
        return 0;
    }
    ep = ivm_ep_take(map, size, ivm_ep_put_max, &taken, status_p);
    if (ep == NULL) {
        return taken;
    }
    *status_p = ivm_ep_round_trip(ep, op == IVM_SYNC_GET, map, offset, addr, size, sig_to);
    /* The master has device copies, or is no longer there: the daemon's
     * way, which knows. */
    taken = *status_p != IVM_ERROR_UNSUPPORTED;
    pthread_mutex_unlock(&ep->lock);
    return taken;
}
