/* Transfers of a copy's bytes to a peer, with flow control (data/sender.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/sender.h"
#include "ivmd.h"
#include "log.h"

typedef struct ivmd_sender {
    struct ivmd_sender *next;
    int                 fd;
    int                 sent;   /* a chunk went (a 0-byte transfer sends one) */
    uint32_t            job, flags;
    uint64_t            op_id, obj, dst, off, len, done;
} ivmd_sender_t;

/* The next chunk of s on p's link. obj: the copy, for its statistics (NULL:
 * looked up). */
static ivmError_t ivmd_sender_chunk(ivmd_t *d, ivmd_peer_t *p, ivmd_sender_t *s,
                                    ivmd_obj_t *obj)
{
    uint64_t n = s->len - s->done < IVM_PEER_CHUNK ? s->len - s->done : IVM_PEER_CHUNK;
    ivmd_outbuf_t *b;
    ivm_peer_xfer_t x;
    char *payload;

    b = ivmd_conn_out_alloc(d, p->conn, IVM_PEER_DATA, 0, (uint32_t)(sizeof(x) + n));
    if (b == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    payload = IVMD_OUTBUF_PAYLOAD(b);
    /* The bytes go from the object's memory straight into the message. */
    if (n > 0 && pread(s->fd, payload + sizeof(x), n, (off_t)(s->off + s->done)) != (ssize_t)n) {
        free(b);
        return IVM_ERROR_INTERNAL;
    }
    memset(&x, 0, sizeof(x));
    x.op    = s->op_id;
    x.job   = s->job;
    x.flags = s->flags | (s->done + n == s->len ? IVM_XFER_LAST : 0);
    x.obj   = s->dst;
    x.off   = s->off + s->done;
    x.len   = n;
    memcpy(payload, &x, sizeof(x));
    p->conn->last_tx_ns = ivmd_now_ns();
    ivmd_conn_out_push(d, p->conn, b, NULL, 0);
    if (obj == NULL) {
        ivmd_job_t *job = ivmd_job_find(&d->reg, s->job);
        obj = job != NULL ? ivmd_obj_find_id(job, s->obj) : NULL;
    }
    if (obj != NULL) {
        obj->tx_bytes += n;
    }
    d->tx_bytes += n;
    s->done += n;
    s->sent = 1;
    return IVM_SUCCESS;
}

static int ivmd_sender_link_full(const ivmd_peer_t *p)
{
    return !p->up || p->conn == NULL || ivmd_conn_queued(p->conn) >= IVMD_CONN_OUT_HIGH;
}

static void ivmd_sender_free(ivmd_sender_t *s)
{
    close(s->fd);
    free(s);
}

void ivmd_sender_drop(ivmd_t *d, ivmd_peer_t *p)
{
    ivmd_sender_t *s;

    (void)d;
    while ((s = p->senders) != NULL) {
        p->senders = s->next;
        ivmd_sender_free(s);
    }
    p->senders_tail = NULL;
}

/* The link to a peer drained: send the waiting transfers' next chunks, at
 * most IVMD_CONN_OUT_HIGH bytes in one turn of the loop (a fast link must
 * not keep the daemon from its other connections and its heartbeats).
 * Returns 1 if chunks wait that the link could take now. A chunk that
 * cannot be read ends the link: the operations on both sides then fail as
 * with a lost peer, none waits forever. */
static int ivmd_sender_on_drain(ivmd_t *d, ivmd_conn_t *c, void *arg)
{
    ivmd_peer_t *p = c->peer;
    ivmd_sender_t *s;
    uint64_t budget = IVMD_CONN_OUT_HIGH;

    while (p != NULL && p->conn == c && (s = p->senders) != NULL && !ivmd_sender_link_full(p)) {
        uint64_t before = s->done;
        ivmError_t status;

        if (budget == 0) {
            return 1;
        }
        status = ivmd_sender_chunk(d, p, s, NULL);
        if (status != IVM_SUCCESS) {
            if (status == IVM_ERROR_INTERNAL) {
                ivm_warn_limited("cannot read an object's copy for node %s: %m", p->node);
                ivmd_conn_doom(c, "cannot read an object's copy");
            }
            return 0;
        }
        budget -= s->done - before < budget ? s->done - before : budget;
        if (s->done == s->len) {
            p->senders = s->next;
            if (p->senders == NULL) {
                p->senders_tail = NULL;
            }
            ivmd_sender_free(s);
        }
    }
    return 0;
}

/* Queue what s has left behind p's waiting transfers, with its own fd. */
static ivmError_t ivmd_sender_queue(ivmd_t *d, ivmd_peer_t *p, const ivmd_sender_t *s,
                                    int fd)
{
    ivmd_sender_t *w = malloc(sizeof(*w));

    if (w == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    *w    = *s;
    w->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (w->fd < 0) {
        free(w);
        return errno == EMFILE || errno == ENFILE ? IVM_ERROR_LIMIT : IVM_ERROR_NO_MEMORY;
    }
    if (p->senders_tail != NULL) {
        p->senders_tail->next = w;
    } else {
        p->senders = w;
    }
    p->senders_tail = w;
    ivmd_conn_want_drain(d, p->conn);
    return IVM_SUCCESS;
}

ivmError_t ivmd_sender_send(ivmd_t *d, ivmd_peer_t *p, uint32_t job, uint64_t op_id,
                            uint32_t flags, ivmd_obj_t *obj, uint64_t dst, uint64_t off,
                            uint64_t len)
{
    ivmd_sender_t s = {.fd = obj->fd, .job = job, .flags = flags, .op_id = op_id,
                       .obj = obj->id, .dst = dst, .off = off, .len = len};
    ivmError_t status;

    if (p == NULL || !p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_conn_on_drain(p->conn, ivmd_sender_on_drain, NULL, IVMD_CONN_OUT_LOW);
    while (p->senders == NULL && !ivmd_sender_link_full(p) && (!s.sent || s.done < s.len) &&
           s.done < IVMD_CONN_OUT_HIGH) {
        status = ivmd_sender_chunk(d, p, &s, obj);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    if (s.sent && s.done == s.len) {
        return IVM_SUCCESS;
    }
    if (!p->up || p->conn == NULL) {
        return IVM_ERROR_DAEMON_LOST;
    }
    return ivmd_sender_queue(d, p, &s, obj->fd);
}
