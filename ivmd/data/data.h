/*
 * The data plane: objects' copies across nodes and the transfers between
 * them. A master lives where it was allocated and is registered at the root
 * daemon by name; a map elsewhere makes a node mirror (a memfd of the
 * object's size holding the mapped regions), filled by READ/DATA from the
 * master, which records the mirror for the group calls. Every request that
 * waits on a peer is an operation (data/op.h) answered when its last DATA or
 * ACK arrives; a lost peer fails the operations that wait on it.
 * State: the operations in flight, by id (ivmd_data_t, hung off ivmd_t).
 */
#ifndef IVMD_DATA_DATA_H
#define IVMD_DATA_DATA_H

#include <stdint.h>

#include "ctl/job.h"
#include "proto.h"
#include "status.h"

typedef struct ivmd ivmd_t;
typedef struct ivmd_conn ivmd_conn_t;
typedef struct ivmd_peer ivmd_peer_t;
struct ivmd_op;

struct ivmd_transport_ops;
struct ivmd_target_ops;

/* A sync made for another module (the GPU's) ends with status. */
typedef void (*ivmd_data_done_t)(ivmd_t *d, void *arg, int status);

typedef struct ivmd_data {
    struct ivmd_op                  *ops;       /* operations in flight, by id (uthash) */
    uint64_t                         next_op;   /* the last id given */
    const struct ivmd_transport_ops *transport; /* NULL: TCP (data/transport.h) */
    void                            *transport_state;
    const struct ivmd_target_ops    *target;    /* copies beside the node copy, or NULL */
} ivmd_data_t;

/* The peer messages of the data plane, from node; IVM_ERROR_PROTOCOL: the
 * message is malformed (the caller drops the link). */

/* 1 if operations wait for a peer (the loop polls while they do). */
int ivmd_data_busy(const ivmd_t *d);
/* Teardown: drop the operations in flight and the transfers waiting to send. */
void ivmd_data_close_all(ivmd_t *d);
/* A connection closed: its operations answer nobody. */
void ivmd_data_conn_gone(ivmd_t *d, ivmd_conn_t *c);
/* A peer was lost: the operations waiting on it fail (IVM_ERROR_DAEMON_LOST). */
void ivmd_data_peer_lost(ivmd_t *d, ivmd_peer_t *p);

/* Objects (data/objects.c). The PE-facing calls return IVM_SUCCESS,
 * IVMD_DEFERRED (the reply comes later), IVMD_LOCAL (map: the copy here
 * serves, answer as usual) or an ivmError_t. */
/* Node daemon: a master made here is registered at the root daemon. */
int ivmd_data_register(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj);
/* Node daemon: a master made here was freed; the root daemon drops the name. */
void ivmd_data_unregister(ivmd_t *d, ivmd_job_t *job, ivmd_obj_t *obj);
/* Node daemon: the master's daemon is unknown here; ask the root daemon. */
int ivmd_data_lookup(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const ivm_msg_map_req_t *req);
/* MAP of obj on this node: the master or a mirror holding the range
 * (IVMD_LOCAL), or a mirror whose missing regions are fetched first. */
int ivmd_data_map(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_map_req_t *req, ivmd_obj_t *obj);
ivmError_t ivmd_data_on_obj(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_obj_rep(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);

/* Transfers (data/xfer.c). */
/* SYNC request of a PE on this node. */
int ivmd_data_sync(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                   const ivm_msg_sync_req_t *req);
/* The sync of the node copy for a PE (c, hdr), or for another module
 * (c == NULL, done != NULL: done(d, arg, status) is called once if it returns
 * IVMD_DEFERRED). */
int ivmd_data_sync_op(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, uint32_t job,
                      ivmd_obj_t *obj, uint32_t op, uint64_t off, uint64_t len,
                      ivmd_data_done_t done, void *arg);
ivmError_t ivmd_data_on_read(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_data(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_ack(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);
ivmError_t ivmd_data_on_group(ivmd_t *d, int node, const ivm_msg_hdr_t *hdr,
                            const void *payload);

#endif /* IVMD_DATA_DATA_H */
