/*
 * data/transport: how the data plane reaches the other nodes. The data plane
 * calls the links only through this table, so that another transport can
 * carry its bytes. The TCP peer link (data/tcp.c) is the first
 * implementation; the UCX one (data/ucx.c) implements put as a one-sided
 * write of the local copy's registered memory into the peer's copy, with the
 * message that follows it (DATA flagged IVM_XFER_PLACED | IVM_XFER_LAST, no
 * bytes) telling the receiver that the range landed, and get as a one-sided
 * read that needs no message at all.
 */
#ifndef IVMD_DATA_TRANSPORT_H
#define IVMD_DATA_TRANSPORT_H

#include <stdint.h>

#include "data/data.h"

/* A byte range of a copy to write into the same range of a peer's copy. */
typedef struct ivmd_xfer_range {
    uint32_t job;
    uint64_t op;    /* the operation it serves (ours, or the peer's for a reply) */
    uint32_t flags; /* IVM_XFER_* the receiver sees (REPLY, ...) */
    int      fd;    /* the local copy's memory (a memfd; the transport dups it to keep it) */
    uint64_t src;   /* the local copy's object id (its statistics) */
    uint64_t dst;   /* the peer's copy, by its object id there */
    uint64_t off, len;
    int32_t  sig_from, sig_to; /* flags IVM_XFER_SIGNAL: the put's signal (in its DATA) */
} ivmd_xfer_range_t;

typedef struct ivmd_transport_ops {
    const char *name;
    /* 1: a large PutGroup goes down a pipelined route of mirrors, each
     * forwarding the pieces it gets (data/group.c): TCP, where the master's
     * one thread moves every byte it sends. 0: the master puts to every
     * mirror itself: UCX, where the chain measured about 2x slower than the
     * direct puts over shared memory at 8 nodes (docs/BENCHMARKS.md, "Group
     * operations against MPI_Bcast"). */
    int         relay;
    /* A message of the peer protocol (fixed part a, tail b) to node:
     * IVM_ERROR_DAEMON_LOST if the node is not reachable. */
    ivmError_t (*send_msg)(ivmd_data_t *dp, int node, uint16_t type, const void *a, uint32_t alen,
                           const void *b, uint32_t blen);
    /* Write r into node's copy r->dst at r->off, after every earlier put to
     * node. The receiver's on_data sees the bytes land in pieces carrying
     * r->op and r->flags, the last one flagged IVM_XFER_LAST (one piece for
     * a 0-byte range). Returns once the range is accepted: the transport
     * keeps at most window(node) bytes queued and sends the rest as the link
     * drains; IVM_ERROR_NO_MEMORY or IVM_ERROR_LIMIT if it cannot hold it. */
    ivmError_t (*put)(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r);
    /* Read node's copy r->dst [r->off, +r->len) into our copy r->src (r->fd),
     * for our operation r->op, which then gets one ivmd_op_step (never from
     * within this call): TCP sends READ and the step comes with the last
     * DATA of the answer; UCX reads one-sided. IVM_ERROR_DAEMON_LOST if node
     * is not reachable. */
    ivmError_t (*get)(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r);
    /* Our copy obj of job is to be reached by node's one-sided operations
     * (node keeps a mirror of it, or holds its master): UCX sends its remote
     * key once per (copy, node); TCP does nothing. */
    void (*offer)(ivmd_data_t *dp, int node, uint32_t job, const ivmd_obj_t *obj);
    /* A copy was made here (its memory exists) / is about to lose its
     * memory: UCX registers it / withdraws and deregisters it. */
    void (*copy_made)(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj);
    void (*copy_gone)(ivmd_data_t *dp, const ivmd_obj_t *obj);
    /* node's link came up / a peer message of the transport's own from node
     * (UCX_ADDR, UCX_RKEY: a transport that has no use for it ignores it;
     * IVM_ERROR_PROTOCOL: malformed). */
    void (*peer_up)(ivmd_data_t *dp, int node);
    ivmError_t (*on_msg)(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr, const void *payload);
    /* Push what waits for node as far as the link takes it now. */
    void (*flush)(ivmd_data_t *dp, int node);
    /* Bytes the transport keeps queued for node before puts wait for the
     * link to drain. */
    uint64_t (*window)(const ivmd_data_t *dp, int node);
    /* node lost (-1: every node, at teardown): drop what waits for it; the
     * operations waiting on it fail with the node. */
    void (*drop)(ivmd_data_t *dp, int node);
} ivmd_transport_ops_t;

/* The TCP peer link (data/tcp.c). */
extern const ivmd_transport_ops_t ivmd_tcp_transport_ops;
/* A READ of r for our operation r->op (TCP's get; UCX's when it cannot read
 * one-sided). */
ivmError_t ivmd_tcp_read(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r);
/* 1 if puts to node wait in TCP's queue (a later one-sided put would pass them). */
int ivmd_tcp_waiting(ivmd_data_t *dp, int node);

/* The transport of this daemon's data plane. */
const ivmd_transport_ops_t *ivmd_data_transport(const ivmd_data_t *dp);

#endif /* IVMD_DATA_TRANSPORT_H */
