/*
 * The data plane: objects' copies across nodes and the transfers between
 * them. A master lives where it was allocated and is registered at the root
 * daemon by name; a map elsewhere makes a node mirror (a memfd of the
 * object's size holding the mapped regions), filled by READ/DATA from the
 * master, which records the mirror for the group calls. Every request that
 * waits on a peer is an operation (data/op.h) answered when its last DATA or
 * ACK arrives; a lost peer fails the operations that wait on it.
 * State: ivmd_data_t (hung off the daemon's context): the operations in
 * flight by id, the transport, the copy target, and the lower layers' state
 * it works with, given at init. The daemon itself is opaque here: it is only
 * passed on to the lower layers' functions and to callbacks.
 */
#ifndef IVMD_DATA_DATA_H
#define IVMD_DATA_DATA_H

#include <stdint.h>

#include "ctl/job.h"
#include "ctl/quota.h"
#include "ctl/remote.h"
#include "proto.h"
#include "status.h"
#include "transport/link.h"

/* Results of the PE-facing calls besides an ivmError_t (as in ivmd.h). */
#ifndef IVMD_DEFERRED
#define IVMD_DEFERRED 1 /* the reply comes later */
#define IVMD_LOCAL    2 /* the object is here, answer as usual */
#endif

typedef struct ivmd ivmd_t;
typedef struct ivmd_conn ivmd_conn_t;
typedef struct ivmd_peer ivmd_peer_t;
struct ivmd_op;

struct ivmd_transport_ops;
struct ivmd_target_ops;

/* A sync made for another module (the GPU's) ends with status; arg and tag
 * are the caller's. */
typedef void (*ivmd_data_done_t)(void *arg, uint64_t tag, int status);

/* What the service layer answers for the data plane (the PE protocol). */
typedef struct ivmd_data_ops {
    /* Bytes of the reply to a PE request of this type (a status-only reply
     * has its type's full size). */
    uint32_t (*reply_size)(uint16_t type);
    /* Answer a MAP or MALLOC with [off, off+size) of obj's copy here. */
    void (*reply_map)(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq, ivmd_obj_t *obj,
                      uint64_t off, uint64_t size);
} ivmd_data_ops_t;

typedef struct ivmd_data {
    ivmd_t                          *d;         /* the daemon, for callbacks (opaque) */
    ivmd_registry_t                 *reg;       /* the jobs and their objects */
    ivmd_link_t                     *link;      /* the peers, by node index */
    ivmd_quota_t                    *quota;     /* mirrors' memory */
    ivmd_remote_t                   *remote;    /* the job's root daemon, the proxies */
    const ivmd_data_ops_t           *svc;
    uint64_t                         tx_bytes, rx_bytes; /* object bytes sent to / got from peers */
    uint64_t                         buf_bytes;  /* of those, copied through our buffers */
    uint64_t                         rdma_bytes; /* object bytes we moved one-sided (UCX) */
    uint64_t                         ep_puts;    /* puts PEs of other nodes made into masters
                                                    here through their endpoints */
    uint64_t                         ep_gets;    /* and gets from masters here */
    uint32_t                         map_flags; /* IVM_MAP_READ_FIRST or 0: for every map
                                                   reply (data/copies.h, the probe) */
    uint32_t                         touch_ns[4]; /* the probe's figures, ns, by
                                                     ivmd_touch_kind_t (data/copies.h) */
    int                              huge;      /* 1: copies are put in 2 MiB pages
                                                   (--huge-pages; data/copies.h) */
    uint64_t                         huge_bytes;  /* bytes of copies reserved in 2 MiB pages */
    uint64_t                         huge_failed; /* copies left partly in 4 KiB pages */
    struct ivmd_op                  *ops;       /* operations in flight, by id (uthash) */
    uint64_t                         next_op;   /* the last id given */
    const struct ivmd_transport_ops *transport; /* NULL: TCP (data/transport.h) */
    void                            *transport_state; /* TCP's queues */
    void                            *ucx;       /* UCX's state (data/ucx.h), or NULL */
    const struct ivmd_target_ops    *target;    /* copies beside the node copy, or NULL */
    void                            *target_ctx;
    void                            *group;     /* the pipelined scatters we are on (data/group.c) */
} ivmd_data_t;

void ivmd_data_init(ivmd_data_t *dp, ivmd_t *d, ivmd_registry_t *reg, ivmd_link_t *link,
                    ivmd_quota_t *quota, ivmd_remote_t *remote, const ivmd_data_ops_t *svc);
/* 1 if operations wait for a peer (the loop polls while they do). */
int ivmd_data_busy(const ivmd_data_t *dp);
/* Teardown: drop the operations in flight and the transfers waiting to send. */
void ivmd_data_close_all(ivmd_data_t *dp);
/* A connection closed: its operations answer nobody. */
void ivmd_data_conn_gone(ivmd_data_t *dp, ivmd_conn_t *c);
/* Node `node` was lost: the operations waiting on it fail (IVM_ERROR_DAEMON_LOST). */
void ivmd_data_peer_lost(ivmd_data_t *dp, int node);
/* Node `node`'s link is up (UCX: our worker address goes to it). */
void ivmd_data_peer_up(ivmd_data_t *dp, int node);
/* UCX_ADDR, UCX_RKEY from node: the transport's own messages. */
ivmError_t ivmd_data_on_transport(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                  const void *payload);
/* A copy of job was made here with its memory / loses its memory now (the
 * transport registers and deregisters it). */
void ivmd_data_copy_made(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj);
void ivmd_data_copy_gone(ivmd_data_t *dp, const ivmd_obj_t *obj);

/* Objects (data/objects.c). The PE-facing calls return IVM_SUCCESS,
 * IVMD_DEFERRED (the reply comes later), IVMD_LOCAL (map: the copy here
 * serves, answer as usual) or an ivmError_t. */
/* Node daemon: a master made here is registered at the root daemon. */
int ivmd_data_register(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj);
/* Node daemon: a master made here was freed; the root daemon drops the name. */
void ivmd_data_unregister(ivmd_data_t *dp, ivmd_job_t *job, ivmd_obj_t *obj);
/* Node daemon: the master's daemon is unknown here; ask the root daemon. */
int ivmd_data_lookup(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const ivm_msg_map_req_t *req);
/* MAP of obj on this node: the master or a mirror holding the range
 * (IVMD_LOCAL), or a mirror whose missing regions are fetched first. */
int ivmd_data_map(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_map_req_t *req, ivmd_obj_t *obj);
ivmError_t ivmd_data_on_obj(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_obj_rep(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);

/* Transfers (data/xfer.c). The peer messages of the data plane come from
 * node; IVM_ERROR_PROTOCOL: the message is malformed (the caller drops the
 * link). */
/* SYNC request of a PE on this node. */
int ivmd_data_sync(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                   const ivm_msg_sync_req_t *req);
/* The sync of the node copy for a PE (c, hdr), or for another module
 * (c == NULL, done != NULL: done(arg, tag, status) is called once if it
 * returns IVMD_DEFERRED). */
int ivmd_data_sync_op(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                      ivmd_obj_t *obj, uint32_t op, uint64_t off, uint64_t len,
                      ivmd_data_done_t done, void *arg, uint64_t tag);
/* ivmSyncPutSignal on a mirror: a put of [off, off+len) of obj (not the
 * master, len > 0) like ivmd_data_sync_op's, whose last DATA carries the
 * signal from -> to: the master's daemon posts it once the bytes are in the
 * master, before its ACK, and not if the put fails there. For a receiver on
 * the master's node (the pair is kept there): the signal follows the data. */
int ivmd_data_put_signal(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                         ivmd_obj_t *obj, uint64_t off, uint64_t len, int from, int to,
                         ivmd_data_done_t done, void *arg, uint64_t tag);
ivmError_t ivmd_data_on_read(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_data(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_ack(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
/* EP_PUT on a PE's endpoint (common/proto.h): into a master here, EP_ACK. */
ivmError_t ivmd_data_on_ep_put(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                               const void *payload);
/* EP_GET on a PE's endpoint: from a master here, EP_DATA. */
ivmError_t ivmd_data_on_ep_get(ivmd_data_t *dp, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                               const void *payload);
/* ROUTE: this node is on a pipelined scatter (data/group.c). */
ivmError_t ivmd_data_on_route(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                              const void *payload);
ivmError_t ivmd_data_on_group(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);

#endif /* IVMD_DATA_DATA_H */
