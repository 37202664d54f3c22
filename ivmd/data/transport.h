/*
 * data/transport: how the data plane reaches the other nodes. The data plane
 * calls the links only through this table, so that another transport can
 * carry its bytes. The TCP peer link (data/tcp.c) is the first
 * implementation; an RDMA one (UCX) is meant to implement put as a one-sided
 * write of the local copy's registered memory into the peer's copy, with the
 * message that follows it (the peer's on_data of a 0-byte piece flagged
 * IVM_XFER_LAST) telling the receiver that the range landed.
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
} ivmd_xfer_range_t;

typedef struct ivmd_transport_ops {
    const char *name;
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

/* The transport of this daemon's data plane. */
const ivmd_transport_ops_t *ivmd_data_transport(const ivmd_data_t *dp);

#endif /* IVMD_DATA_TRANSPORT_H */
