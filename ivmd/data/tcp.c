/*
 * The TCP peer link as the data plane's transport (data/transport.h). A put
 * goes as DATA chunks of IVM_PEER_CHUNK bytes, read from the copy straight
 * into the link's queued messages. Flow control: chunks go out while the
 * link holds less than IVMD_TCP_WINDOW bytes; the rest waits in the node's
 * queue of senders, in order, until the link drains below IVMD_TCP_REFILL
 * (the connection's drain callback). A waiting sender reads through its own descriptor of
 * the copy, so an object freed meanwhile still sends what the receiver waits
 * for. State: the queues by node (ivmd_tcp_t, off the data plane's state).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/transport.h"
#include "log.h"

/* Bytes a link may hold queued before a put waits for it to drain, and the
 * level under which it is refilled. 1, 4 and 16 MiB measured alike for
 * 64 MiB Put/Get between two local daemons (bench/run-ab-remote.sh, within
 * the run-to-run noise of a loaded 2-core host): 4 MiB, the link's own high
 * mark, bounds each daemon's queued bytes for any transfer size. */
#ifndef IVMD_TCP_WINDOW
#define IVMD_TCP_WINDOW IVMD_CONN_OUT_HIGH
#endif
#define IVMD_TCP_REFILL (IVMD_TCP_WINDOW / 2)

typedef struct ivmd_tcp_sender {
    struct ivmd_tcp_sender *next;
    ivmd_xfer_range_t       r;
    int                     sent; /* a chunk went (a 0-byte range sends one) */
    uint64_t                done;
} ivmd_tcp_sender_t;

typedef struct ivmd_tcp_queue {
    ivmd_tcp_sender_t *head, *tail;
} ivmd_tcp_queue_t;

typedef struct ivmd_tcp {
    ivmd_tcp_queue_t *queues; /* by node */
    uint32_t          nqueues;
} ivmd_tcp_t;

/* The authenticated link to node, NULL if it is not up. */
static ivmd_conn_t *ivmd_tcp_link(const ivmd_data_t *dp, int node)
{
    const ivmd_peer_t *p;

    if (node < 0 || (uint32_t)node >= dp->link->npeers) {
        return NULL;
    }
    p = &dp->link->peers[node];
    return (p->self || !p->up) ? NULL : p->conn;
}

/* node's queue, made on first use (NULL: out of memory, or create == 0). */
static ivmd_tcp_queue_t *ivmd_tcp_queue(ivmd_data_t *dp, int node, int create)
{
    ivmd_tcp_t *t = dp->transport_state;
    ivmd_tcp_queue_t *q;

    if (t == NULL && create) {
        t = dp->transport_state = calloc(1, sizeof(*t));
    }
    if (t == NULL || node < 0) {
        return NULL;
    }
    if ((uint32_t)node >= t->nqueues && create) {
        uint32_t n = dp->link->npeers > (uint32_t)node ? dp->link->npeers : (uint32_t)node + 1;
        q = realloc(t->queues, n * sizeof(*q));
        if (q == NULL) {
            return NULL;
        }
        memset(q + t->nqueues, 0, (n - t->nqueues) * sizeof(*q));
        t->queues  = q;
        t->nqueues = n;
    }
    return (uint32_t)node < t->nqueues ? &t->queues[node] : NULL;
}

static ivmError_t ivmd_tcp_send_msg(ivmd_data_t *dp, int node, uint16_t type, const void *a,
                                    uint32_t alen, const void *b, uint32_t blen)
{
    ivmd_conn_t *c = ivmd_tcp_link(dp, node);

    if (c == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_send_parts(dp->d, c, type, 0, a, alen, b, blen);
    return IVM_SUCCESS;
}

static uint64_t ivmd_tcp_window(const ivmd_data_t *dp, int node)
{
    (void)dp;
    (void)node;
    return IVMD_TCP_WINDOW;
}

static int ivmd_tcp_full(const ivmd_conn_t *c)
{
    return c == NULL || ivmd_conn_queued(c) >= IVMD_TCP_WINDOW;
}

/* The next chunk of s on link c. obj: the copy, for its statistics (NULL:
 * looked up). */
static ivmError_t ivmd_tcp_chunk(ivmd_data_t *dp, ivmd_conn_t *c, ivmd_tcp_sender_t *s,
                                 ivmd_obj_t *obj)
{
    const ivmd_xfer_range_t *r = &s->r;
    uint64_t n = r->len - s->done < IVM_PEER_CHUNK ? r->len - s->done : IVM_PEER_CHUNK;
    ivmd_outbuf_t *b = ivmd_conn_out_alloc(dp->d, c, IVM_PEER_DATA, 0, (uint32_t)(sizeof(ivm_peer_xfer_t) + n));
    ivm_peer_xfer_t x;
    char *payload;

    if (b == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    payload = IVMD_OUTBUF_PAYLOAD(b);
    /* The bytes go from the object's memory straight into the message. */
    if (n > 0 && pread(r->fd, payload + sizeof(x), n, (off_t)(r->off + s->done)) != (ssize_t)n) {
        free(b);
        return IVM_ERROR_INTERNAL;
    }
    memset(&x, 0, sizeof(x));
    x.op    = r->op;
    x.job   = r->job;
    x.flags = r->flags | (s->done + n == r->len ? IVM_XFER_LAST : 0);
    x.obj   = r->dst;
    x.off   = r->off + s->done;
    x.len   = n;
    x.sig_from = r->sig_from;
    x.sig_to   = r->sig_to;
    memcpy(payload, &x, sizeof(x));
    c->last_tx_ns = ivmd_now_ns();
    ivmd_conn_out_push(dp->d, c, b, NULL, 0);
    if (obj == NULL) {
        ivmd_job_t *job = ivmd_job_find(dp->reg, r->job);
        obj = job != NULL ? ivmd_obj_find_id(job, r->src) : NULL;
    }
    if (obj != NULL) {
        obj->tx_bytes += n;
    }
    dp->tx_bytes += n;
    dp->buf_bytes += n;
    s->done += n;
    s->sent = 1;
    return IVM_SUCCESS;
}

static void ivmd_tcp_sender_free(ivmd_tcp_sender_t *s)
{
    close(s->r.fd);
    free(s);
}

static void ivmd_tcp_drop_queue(ivmd_tcp_queue_t *q)
{
    ivmd_tcp_sender_t *s;

    while ((s = q->head) != NULL) {
        q->head = s->next;
        ivmd_tcp_sender_free(s);
    }
    q->tail = NULL;
}

static void ivmd_tcp_drop(ivmd_data_t *dp, int node)
{
    ivmd_tcp_t *t = dp->transport_state;
    uint32_t i;

    if (t == NULL) {
        return;
    }
    if (node >= 0) {
        if ((uint32_t)node < t->nqueues) {
            ivmd_tcp_drop_queue(&t->queues[node]);
        }
        return;
    }
    for (i = 0; i < t->nqueues; ++i) {
        ivmd_tcp_drop_queue(&t->queues[i]);
    }
    free(t->queues);
    free(t);
    dp->transport_state = NULL;
}

/* The link to a peer drained: send the waiting senders' next chunks, at most
 * IVMD_TCP_WINDOW bytes in one turn of the loop (a fast link must not
 * keep the daemon from its other connections and its heartbeats). Returns 1
 * if chunks wait that the link could take now. A chunk that cannot be read
 * ends the link: the operations on both sides then fail as with a lost
 * peer, none waits forever. */
static int ivmd_tcp_on_drain(ivmd_t *d, ivmd_conn_t *c, void *arg)
{
    ivmd_data_t *dp = arg;
    int node = c->peer != NULL ? (int)(c->peer - dp->link->peers) : -1;
    ivmd_tcp_queue_t *q = ivmd_tcp_queue(dp, node, 0);
    uint64_t budget = IVMD_TCP_WINDOW;
    ivmd_tcp_sender_t *s;

    (void)d;
    while (q != NULL && ivmd_tcp_link(dp, node) == c && (s = q->head) != NULL &&
           !ivmd_tcp_full(c)) {
        uint64_t before = s->done;
        ivmError_t status;

        if (budget == 0) {
            return 1;
        }
        status = ivmd_tcp_chunk(dp, c, s, NULL);
        if (status != IVM_SUCCESS) {
            if (status == IVM_ERROR_INTERNAL) {
                ivm_warn_limited("cannot read an object's copy for node %s: %m", c->peer->node);
                ivmd_conn_doom(c, "cannot read an object's copy");
            }
            return 0;
        }
        budget -= s->done - before < budget ? s->done - before : budget;
        if (s->done == s->r.len) {
            q->head = s->next;
            if (q->head == NULL) {
                q->tail = NULL;
            }
            ivmd_tcp_sender_free(s);
        }
    }
    return 0;
}

static void ivmd_tcp_flush(ivmd_data_t *dp, int node)
{
    ivmd_conn_t *c = ivmd_tcp_link(dp, node);

    if (c != NULL) {
        ivmd_conn_want_drain(dp->d, c);
    }
}

/* Queue what s has left behind node's waiting senders, with its own fd. */
static ivmError_t ivmd_tcp_enqueue(ivmd_data_t *dp, int node, const ivmd_tcp_sender_t *s)
{
    ivmd_tcp_queue_t *q = ivmd_tcp_queue(dp, node, 1);
    ivmd_tcp_sender_t *w = q != NULL ? malloc(sizeof(*w)) : NULL;

    if (w == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *w      = *s;
    w->next = NULL;
    w->r.fd = fcntl(s->r.fd, F_DUPFD_CLOEXEC, 0);
    if (w->r.fd < 0) {
        free(w);
        return errno == EMFILE || errno == ENFILE ? IVM_ERROR_LIMIT : IVM_ERROR_NO_MEMORY;
    }
    if (q->tail != NULL) {
        q->tail->next = w;
    } else {
        q->head = w;
    }
    q->tail = w;
    ivmd_tcp_flush(dp, node);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_tcp_put(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r)
{
    ivmd_conn_t *c = ivmd_tcp_link(dp, node);
    ivmd_tcp_queue_t *q = ivmd_tcp_queue(dp, node, 0);
    ivmd_tcp_sender_t s = {.r = *r};
    ivmd_job_t *job = ivmd_job_find(dp->reg, r->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, r->src) : NULL;
    ivmError_t status;

    if (c == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_on_drain(c, ivmd_tcp_on_drain, dp, IVMD_TCP_REFILL);
    while ((q == NULL || q->head == NULL) && !ivmd_tcp_full(c) &&
           (!s.sent || s.done < r->len) && s.done < IVMD_TCP_WINDOW) {
        status = ivmd_tcp_chunk(dp, c, &s, obj);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    if (s.sent && s.done == r->len) {
        return IVM_SUCCESS;
    }
    if (ivmd_tcp_link(dp, node) != c) {
        return IVM_ERROR_DAEMON_LOST;
    }
    return ivmd_tcp_enqueue(dp, node, &s);
}

int ivmd_tcp_waiting(ivmd_data_t *dp, int node)
{
    ivmd_tcp_queue_t *q = ivmd_tcp_queue(dp, node, 0);

    return q != NULL && q->head != NULL;
}

ivmError_t ivmd_tcp_read(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r)
{
    ivm_peer_xfer_t x;

    memset(&x, 0, sizeof(x));
    x.op    = r->op;
    x.job   = r->job;
    x.flags = r->flags;
    x.obj   = r->dst;
    x.dst   = r->src;
    x.off   = r->off;
    x.len   = r->len;
    return ivmd_tcp_send_msg(dp, node, IVM_PEER_READ, &x, sizeof(x), NULL, 0);
}

/* One-sided access needs nothing on TCP. */
static void ivmd_tcp_offer(ivmd_data_t *dp, int node, uint32_t job, const ivmd_obj_t *obj)
{
    (void)dp;
    (void)node;
    (void)job;
    (void)obj;
}

static void ivmd_tcp_copy_made(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj)
{
    (void)dp;
    (void)job;
    (void)obj;
}

static void ivmd_tcp_copy_gone(ivmd_data_t *dp, const ivmd_obj_t *obj)
{
    (void)dp;
    (void)obj;
}

static void ivmd_tcp_peer_up(ivmd_data_t *dp, int node)
{
    (void)dp;
    (void)node;
}

/* Another transport's messages (a peer on UCX): nothing to do with them. */
static ivmError_t ivmd_tcp_on_msg(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                  const void *payload)
{
    (void)dp;
    (void)node;
    (void)hdr;
    (void)payload;
    return IVM_SUCCESS;
}

const ivmd_transport_ops_t ivmd_tcp_transport_ops = {
    .name     = "tcp",
    .relay     = 1,
    .send_msg = ivmd_tcp_send_msg,
    .put      = ivmd_tcp_put,
    .get      = ivmd_tcp_read,
    .offer    = ivmd_tcp_offer,
    .copy_made = ivmd_tcp_copy_made,
    .copy_gone = ivmd_tcp_copy_gone,
    .peer_up  = ivmd_tcp_peer_up,
    .on_msg   = ivmd_tcp_on_msg,
    .flush    = ivmd_tcp_flush,
    .window   = ivmd_tcp_window,
    .drop     = ivmd_tcp_drop,
};
