/*
 * data/op: the data plane's operations in flight, by id. An operation waits
 * for `pending` replies (DATA, ACK) from peers; ivmd_op_step counts one in,
 * and when none is left calls its kind's step function, which either starts
 * its next phase (new replies awaited) or answers and frees it. A lost peer
 * fails every operation waiting on it the same way.
 */
#ifndef IVMD_DATA_OP_H
#define IVMD_DATA_OP_H

#include <stdint.h>
#include <uthash.h>

#include "data/data.h"

typedef enum ivmd_op_kind {
    IVMD_OP_MALLOC,    /* MALLOC waiting for OBJ_REP of its registration */
    IVMD_OP_LOOKUP,    /* MAP waiting for OBJ_REP */
    IVMD_OP_FILL,      /* MAP waiting for the mirror's missing regions */
    IVMD_OP_FILL_WAIT, /* MAP waiting for another MAP's fill of the same object */
    IVMD_OP_SYNC,      /* SYNC waiting for DATA or ACK */
    IVMD_OP_GROUP,     /* scatter/gather at the master */
    IVMD_OP_KINDS
} ivmd_op_kind_t;

typedef enum ivmd_op_phase {
    IVMD_OP_MOVE,    /* the operation's transfer */
    IVMD_OP_SCATTER  /* SYNC PUT_GROUP from a mirror: the master's scatter after the put */
} ivmd_op_phase_t;

typedef struct ivmd_op {
    UT_hash_handle    hh;
    uint64_t          id;
    ivmd_op_kind_t    kind;
    ivmd_op_phase_t   phase;
    ivmd_conn_t      *conn;      /* whom to answer (PE or virtual), NULL if gone */
    uint32_t          seq;
    uint16_t          type;      /* PE message type answered */
    uint32_t          job;
    int               pending;   /* DATA/ACK still awaited */
    int               status;
    uint64_t          peers;     /* bit i: waits on node i (nodes < 64) */
    int               reply_node;/* GROUP for a mirror: ACK this node (-1: none) ... */
    uint64_t          reply_op;  /* ... with this operation id */
    int               then_group;/* SYNC PUT_GROUP: scatter after the put */
    int               signal;    /* SYNC PUT: the master's node posts sig_from -> sig_to */
    int32_t           sig_from, sig_to;
    uint64_t          obj;       /* object id here */
    uint64_t          off, len;
    ivm_msg_map_req_t map;       /* LOOKUP/FILL: the request */
    ivmd_data_done_t  done;      /* SYNC/GROUP for another module: call it, answer nobody */
    void             *done_arg;
    uint64_t          done_tag;
} ivmd_op_t;

/* A new operation answering hdr on c (both may be NULL). */
ivmd_op_t *ivmd_op_new(ivmd_data_t *dp, ivmd_op_kind_t kind, ivmd_conn_t *c,
                       const ivm_msg_hdr_t *hdr);
ivmd_op_t *ivmd_op_find(ivmd_data_t *dp, uint64_t id);
void ivmd_op_free(ivmd_data_t *dp, ivmd_op_t *op);
/* The operation waits on node `node`: it fails if that peer is lost. */
void ivmd_op_wait_on(ivmd_op_t *op, int node);
/* Answer the PE request (or resume the GPU sync) with a plain status. */
void ivmd_op_answer(ivmd_data_t *dp, ivmd_op_t *op, int status, const char *detail);
/* One awaited reply arrived with status. */
void ivmd_op_step(ivmd_data_t *dp, ivmd_op_t *op, int status);
/* Nothing is awaited any more: run the kind's step function. */
void ivmd_op_done(ivmd_data_t *dp, ivmd_op_t *op);

/* The step functions of the kinds (data/objects.c, data/xfer.c). */
void ivmd_objects_fill_step(ivmd_data_t *dp, ivmd_op_t *op);
void ivmd_xfer_sync_step(ivmd_data_t *dp, ivmd_op_t *op);
void ivmd_xfer_group_step(ivmd_data_t *dp, ivmd_op_t *op);

#endif /* IVMD_DATA_OP_H */
