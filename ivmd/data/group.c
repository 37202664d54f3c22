/*
 * The pipelined scatter of PutGroup (data/group.h). A route lists the nodes
 * that hold one range; a node splits the rest of its route into
 * IVMD_GROUP_FANOUT subtrees, sends each subtree's first node its part of
 * the route (ROUTE), then each piece it gets (or, at the master, reads)
 * to those first nodes. ROUTE goes on the same link before the pieces, so a
 * node always knows a route before its first piece. State: the routes this
 * node forwards, in a list off the data plane's state (a handful at a time).
 */
#include <stdlib.h>
#include <string.h>

#include "data/copies.h"
#include "data/group.h"
#include "data/target.h"
#include "data/transport.h"
#include "log.h"

/* Subtrees per node: 1 is a chain, Open MPI's pipelined broadcast for large
 * messages; on a loaded 2-core host with 8 simulated nodes a chain measured
 * best (docs/BENCHMARKS.md, issue 17). */
#ifndef IVMD_GROUP_FANOUT
#define IVMD_GROUP_FANOUT 1u
#endif
/* Bytes of one piece: each node forwards a piece as soon as it has it. */
#ifndef IVMD_GROUP_PIECE
#define IVMD_GROUP_PIECE IVM_PEER_CHUNK
#endif
/* Below this, a scatter goes straight from the master to every mirror: a
 * route's extra hops cost more than the pipeline saves. */
#ifndef IVMD_GROUP_PIPE_MIN
#define IVMD_GROUP_PIPE_MIN (4u * IVM_PEER_CHUNK)
#endif
#define IVMD_GROUP_FANOUT_MAX 8u

_Static_assert(IVMD_GROUP_FANOUT >= 1 && IVMD_GROUP_FANOUT <= IVMD_GROUP_FANOUT_MAX,
               "IVMD_GROUP_FANOUT out of range");

typedef struct ivmd_group_child {
    int      node;  /* -1: failed (its subtree was ACKed with the error) */
    uint64_t obj;   /* its copy */
    uint32_t size;  /* nodes of its subtree, itself included */
} ivmd_group_child_t;

/* A route this node is on: where its pieces come from and go. */
typedef struct ivmd_group_fwd {
    struct ivmd_group_fwd *next;
    int                    from;   /* the node that sends the pieces */
    int                    master; /* the node to ACK */
    uint64_t               op;     /* the master's operation */
    uint32_t               job;
    uint64_t               obj;    /* our copy */
    uint64_t               off, len, got;
    int                    status;
    uint32_t               nchildren;
    ivmd_group_child_t     children[IVMD_GROUP_FANOUT_MAX];
} ivmd_group_fwd_t;

/* An ACK to the master that waits for this node's device copies. */
typedef struct ivmd_group_later {
    ivmd_data_t *dp;
    int          master;
    uint64_t     op;
    uint32_t     job;
} ivmd_group_later_t;

static void ivmd_group_ack(ivmd_data_t *dp, int master, uint64_t op, uint32_t job, int status,
                           uint32_t times)
{
    ivm_peer_xfer_t ack = {.op = op, .job = job, .status = status};

    while (times-- > 0) {
        ivmd_data_transport(dp)->send_msg(dp, master, IVM_PEER_ACK, &ack, sizeof(ack), NULL, 0);
    }
}

/* Split r's nodes after the first into subtrees, send each subtree's first
 * node its ROUTE and fill kids. A subtree whose ROUTE cannot go is marked
 * failed (node -1). Returns the number of subtrees. */
static uint32_t ivmd_group_split(ivmd_data_t *dp, const ivm_peer_route_t *r,
                                 ivmd_group_child_t *kids)
{
    uint32_t rest = r->count - 1;
    uint32_t n = r->fanout < rest ? r->fanout : rest;
    ivm_peer_route_t sub;
    uint32_t k;

    for (k = 0; k < n; ++k) {
        uint32_t lo = 1 + k * rest / n, hi = 1 + (k + 1) * rest / n;

        sub = *r;
        sub.count = hi - lo;
        memset(sub.nodes, 0, sizeof(sub.nodes));
        memset(sub.objs, 0, sizeof(sub.objs));
        memcpy(sub.nodes, &r->nodes[lo], sub.count * sizeof(sub.nodes[0]));
        memcpy(sub.objs, &r->objs[lo], sub.count * sizeof(sub.objs[0]));
        kids[k].node = (int)r->nodes[lo];
        kids[k].obj  = r->objs[lo];
        kids[k].size = sub.count;
        if (ivmd_data_transport(dp)->send_msg(dp, kids[k].node, IVM_PEER_ROUTE, &sub, sizeof(sub),
                                              NULL, 0) != IVM_SUCCESS) {
            kids[k].node = -1;
        }
    }
    return n;
}

/* Put [off, off+len) of our copy (fd, id src) into kid's copy in pieces
 * flagged IVM_XFER_CHAIN. */
static ivmError_t ivmd_group_pieces(ivmd_data_t *dp, uint32_t job, uint64_t op, int fd,
                                    uint64_t src, const ivmd_group_child_t *kid, uint64_t off,
                                    uint64_t len)
{
    ivmd_xfer_range_t r = {.job = job, .op = op, .flags = IVM_XFER_CHAIN, .fd = fd,
                           .src = src, .dst = kid->obj};
    uint64_t done;
    ivmError_t status;

    for (done = 0; done < len; done += r.len) {
        r.off = off + done;
        r.len = len - done < IVMD_GROUP_PIECE ? len - done : IVMD_GROUP_PIECE;
        status = ivmd_data_transport(dp)->put(dp, kid->node, &r);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------ the master */

/* [*lo_p, *hi_p): what holder h needs of op's range (empty: lo >= hi). */
static void ivmd_group_clip(const ivmd_range_t *h, const ivmd_op_t *op, uint64_t *lo_p,
                            uint64_t *hi_p)
{
    uint64_t end = op->off + op->len;

    *lo_p = h->off > op->off ? h->off : op->off;
    *hi_p = (h->off + h->len) < end ? (h->off + h->len) : end;
}

/* 1 if node is on r already (its copy holds two ranges: the second goes
 * straight, a node never forwards to itself). */
static int ivmd_group_on_route(const ivm_peer_route_t *r, int node)
{
    uint32_t i;

    for (i = 1; i < r->count; ++i) {
        if (r->nodes[i] == (uint32_t)node) {
            return 1;
        }
    }
    return 0;
}

/* A route of the master (nodes[0]) and holder `first` with every later
 * holder not yet taken that needs the same [lo, hi); marks them taken. */
static void ivmd_group_collect(const ivmd_data_t *dp, const ivmd_op_t *op, const ivmd_obj_t *obj,
                               uint32_t first, int skip, uint8_t *taken, ivm_peer_route_t *r)
{
    uint64_t lo, hi, l2, h2;
    uint32_t i;

    memset(r, 0, sizeof(*r));
    ivmd_group_clip(&obj->holders[first], op, &lo, &hi);
    r->op       = op->id;
    r->job      = op->job;
    r->master   = dp->link->self_idx;
    r->off      = lo;
    r->len      = hi - lo;
    r->fanout   = IVMD_GROUP_FANOUT;
    r->nodes[0] = dp->link->self_idx;
    r->objs[0]  = obj->id;
    r->count    = 1;
    for (i = first; i < obj->nholders && r->count < IVM_PEER_ROUTE_MAX; ++i) {
        const ivmd_range_t *h = &obj->holders[i];

        ivmd_group_clip(h, op, &l2, &h2);
        if (taken[i] || h->node == skip || h->node < 0 || h->node >= 64 || l2 != lo ||
            h2 != hi || ivmd_group_on_route(r, h->node)) {
            continue;
        }
        taken[i]               = 1;
        r->nodes[r->count]     = (uint32_t)h->node;
        r->objs[r->count++]    = h->obj;
    }
}

/* Start route r of op: ROUTEs, then the pieces to each subtree; the ACKs of
 * the subtrees that started are awaited. */
static void ivmd_group_route_start(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj,
                                   const ivm_peer_route_t *r)
{
    ivmd_group_child_t kids[IVMD_GROUP_FANOUT_MAX];
    uint32_t n = ivmd_group_split(dp, r, kids), k, i;
    ivmError_t status;

    for (i = 1; i < r->count; ++i) {
        ivmd_op_wait_on(op, (int)r->nodes[i]);
    }
    for (k = 0; k < n; ++k) {
        status = kids[k].node < 0 ? IVM_ERROR_DAEMON_LOST
                                  : ivmd_group_pieces(dp, op->job, op->id, obj->fd, obj->id,
                                                      &kids[k], r->off, r->len);
        if (status != IVM_SUCCESS) {
            op->status = status; /* that subtree will never have the range */
            continue;
        }
        op->pending += (int)kids[k].size;
    }
}

static void ivmd_group_direct(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj,
                              const ivmd_range_t *h, uint64_t lo, uint64_t hi)
{
    ivmd_xfer_range_t r = {.job = op->job, .op = op->id, .fd = obj->fd, .src = obj->id,
                           .dst = h->obj, .off = lo, .len = hi - lo};
    ivmError_t status = ivmd_data_transport(dp)->put(dp, h->node, &r);

    if (status != IVM_SUCCESS) {
        op->status = status;
        return;
    }
    ivmd_op_wait_on(op, h->node);
    ++op->pending;
}

void ivmd_group_scatter(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj, int skip)
{
    uint8_t *taken = ivmd_data_transport(dp)->relay
                         ? calloc(obj->nholders > 0 ? obj->nholders : 1, 1)
                         : NULL; /* NULL: every mirror gets a direct put */
    ivm_peer_route_t r;
    uint64_t lo, hi;
    uint32_t i;

    for (i = 0; i < obj->nholders; ++i) {
        const ivmd_range_t *h = &obj->holders[i];

        ivmd_group_clip(h, op, &lo, &hi);
        if (lo >= hi || h->node == skip || (taken != NULL && taken[i])) {
            continue;
        }
        if (taken != NULL && hi - lo >= IVMD_GROUP_PIPE_MIN) {
            ivmd_group_collect(dp, op, obj, i, skip, taken, &r);
            if (r.count > 2) {
                ivmd_group_route_start(dp, op, obj, &r);
                continue;
            }
        }
        ivmd_group_direct(dp, op, obj, h, lo, hi);
    }
    free(taken);
}

/* ------------------------------------------------------------ the route's nodes */

static ivmd_group_fwd_t **ivmd_group_head(ivmd_data_t *dp)
{
    return (ivmd_group_fwd_t **)&dp->group;
}

static ivmd_group_fwd_t *ivmd_group_find(ivmd_data_t *dp, int from, uint64_t op, uint64_t obj)
{
    ivmd_group_fwd_t *f;

    for (f = *ivmd_group_head(dp); f != NULL; f = f->next) {
        if (f->from == from && f->op == op && f->obj == obj) {
            return f;
        }
    }
    return NULL;
}

static void ivmd_group_unlink(ivmd_data_t *dp, ivmd_group_fwd_t *f)
{
    ivmd_group_fwd_t **pp = ivmd_group_head(dp);

    while (*pp != f) {
        pp = &(*pp)->next;
    }
    *pp = f->next;
    free(f);
}

/* A ROUTE from node is well formed and names copies this node has. */
static int ivmd_group_route_ok(const ivmd_data_t *dp, const ivm_peer_route_t *r)
{
    uint32_t i;

    if (r->count < 1 || r->count > IVM_PEER_ROUTE_MAX || r->fanout < 1 ||
        r->fanout > IVMD_GROUP_FANOUT_MAX || r->master >= dp->link->npeers ||
        r->len == 0) {
        return 0;
    }
    for (i = 0; i < r->count; ++i) {
        if (r->nodes[i] >= dp->link->npeers) {
            return 0;
        }
    }
    return 1;
}

ivmError_t ivmd_data_on_route(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                              const void *payload)
{
    const ivm_peer_route_t *r = payload;
    ivm_peer_xfer_t x = {.job = r->job, .obj = r->objs[0], .off = r->off, .len = r->len};
    ivmd_obj_t *obj;
    ivmd_group_fwd_t *f;
    uint32_t k;

    if (hdr->length != sizeof(*r) || !ivmd_group_route_ok(dp, r)) {
        return IVM_ERROR_PROTOCOL;
    }
    obj = ivmd_copies_xfer_obj(dp, &x);
    f   = obj != NULL ? calloc(1, sizeof(*f)) : NULL;
    if (f == NULL) {
        /* Nobody on this route will have the range: the master hears it. */
        ivmd_group_ack(dp, (int)r->master, r->op, r->job,
                       obj == NULL ? IVM_ERROR_NOT_FOUND : IVM_ERROR_NO_MEMORY, r->count);
        return IVM_SUCCESS;
    }
    *f = (ivmd_group_fwd_t){.from = node, .master = (int)r->master, .op = r->op, .job = r->job,
                            .obj = obj->id, .off = r->off, .len = r->len};
    f->nchildren = ivmd_group_split(dp, r, f->children);
    for (k = 0; k < f->nchildren; ++k) {
        if (f->children[k].node < 0) {
            ivmd_group_ack(dp, f->master, f->op, f->job, IVM_ERROR_DAEMON_LOST,
                           f->children[k].size);
        }
    }
    f->next = *ivmd_group_head(dp);
    *ivmd_group_head(dp) = f;
    /* The sender may write the pieces into our copy one-sided (UCX). */
    ivmd_data_transport(dp)->offer(dp, node, r->job, obj);
    return IVM_SUCCESS;
}

/* The piece to every subtree (obj NULL: it could not be written here); a
 * subtree that cannot take it is ACKed to the master with the error (its
 * nodes will never have the range). */
static void ivmd_group_forward(ivmd_data_t *dp, ivmd_group_fwd_t *f, const ivmd_obj_t *obj,
                               const ivm_peer_xfer_t *x)
{
    ivmError_t status;
    uint32_t k;

    for (k = 0; k < f->nchildren; ++k) {
        ivmd_group_child_t *kid = &f->children[k];

        if (kid->node < 0) {
            continue;
        }
        status = obj == NULL ? IVM_ERROR_INTERNAL
                             : ivmd_group_pieces(dp, f->job, f->op, obj->fd, obj->id, kid,
                                                 x->off, x->len);
        if (status != IVM_SUCCESS) {
            ivmd_group_ack(dp, f->master, f->op, f->job, status, kid->size);
            kid->node = -1;
        }
    }
}

static void ivmd_group_later_ack(ivmd_t *d, void *arg, int status)
{
    ivmd_group_later_t *l = arg;

    (void)d;
    ivmd_group_ack(l->dp, l->master, l->op, l->job, status, 1);
    free(l);
}

/* The route's range is whole here: ACK the master, once this node's device
 * copies have it too. */
static void ivmd_group_done(ivmd_data_t *dp, ivmd_group_fwd_t *f)
{
    ivmd_group_later_t *l = malloc(sizeof(*l));

    if (l != NULL && f->status == IVM_SUCCESS) {
        *l = (ivmd_group_later_t){.dp = dp, .master = f->master, .op = f->op, .job = f->job};
        if (ivmd_target_refresh(dp, f->job, f->obj, f->off, f->len, 0, 1, ivmd_group_later_ack,
                                l)) {
            return;
        }
    }
    free(l);
    ivmd_group_ack(dp, f->master, f->op, f->job, f->status, 1);
}

void ivmd_group_on_piece(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x, ivmd_obj_t *obj)
{
    ivmd_group_fwd_t *f = ivmd_group_find(dp, node, x->op, x->obj);

    if (f == NULL) {
        return; /* a route given up (its master or sender was lost) */
    }
    if (obj == NULL || x->off < f->off || x->off + x->len > f->off + f->len) {
        f->status = IVM_ERROR_INTERNAL;
        obj       = NULL;
    }
    ivmd_group_forward(dp, f, obj, x);
    if (obj != NULL) {
        /* Device copies of this mirror follow piece by piece. */
        ivmd_target_refresh(dp, x->job, obj->id, x->off, x->len, 0, 0, NULL, NULL);
    }
    f->got += x->len;
    if (f->got >= f->len) {
        ivmd_group_done(dp, f);
        ivmd_group_unlink(dp, f);
    }
}

void ivmd_group_piece_lost(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r)
{
    ivmd_group_fwd_t *f;
    ivmd_op_t *op;
    uint32_t k;

    for (f = *ivmd_group_head(dp); f != NULL; f = f->next) {
        for (k = 0; k < f->nchildren && f->op == r->op && f->obj == r->src; ++k) {
            if (f->children[k].node == node) {
                ivmd_group_ack(dp, f->master, f->op, f->job, IVM_ERROR_DAEMON_LOST,
                               f->children[k].size);
                f->children[k].node = -1;
                return;
            }
        }
    }
    /* The master's own piece: a group operation here scatters a master copy,
     * never a mirror, so r->src tells it from another node's op id. */
    op = ivmd_op_find(dp, r->op);
    if (op != NULL && op->kind == IVMD_OP_GROUP && op->obj == r->src) {
        op->status  = IVM_ERROR_DAEMON_LOST;
        op->pending = 0;
        ivmd_op_done(dp, op);
    }
}

/* Forget the routes that feed copy obj, or (node >= 0) are fed from node
 * or ACK it, or (node < 0 and obj 0) all. */
static void ivmd_group_forget(ivmd_data_t *dp, int node, uint64_t obj)
{
    ivmd_group_fwd_t **pp = ivmd_group_head(dp), *f;

    while ((f = *pp) != NULL) {
        if ((obj != 0 && f->obj == obj) ||
            (obj == 0 && (node < 0 || f->from == node || f->master == node))) {
            *pp = f->next;
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

void ivmd_group_peer_lost(ivmd_data_t *dp, int node)
{
    ivmd_group_forget(dp, node, 0);
}

void ivmd_group_copy_gone(ivmd_data_t *dp, uint64_t obj)
{
    ivmd_group_forget(dp, 0, obj);
}
