/*
 * Jobs across nodes, the service's wiring: the peer messages dispatched
 * through one table to the module that serves them (ctl/remote for the
 * control messages, data/ for objects and transfers), and the events of a
 * peer or a connection handed to both.
 */
#include "ctl/remote.h"
#include "data/data.h"
#include "ivmd.h"

typedef void (*ivmd_peer_msg_fn_t)(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                                   const void *payload);

/* The cluster's peer messages (the link's own, HELLO to PONG, stay in peer.c). */
static const ivmd_peer_msg_fn_t ivmd_cluster_msgs[IVM_PEER_LAST - IVM_PEER_FIRST] = {
    [IVM_PEER_NODEINFO - IVM_PEER_FIRST]   = ivmd_remote_on_nodeinfo,
    [IVM_PEER_FWD - IVM_PEER_FIRST]        = ivmd_remote_on_fwd,
    [IVM_PEER_FWD_REP - IVM_PEER_FIRST]    = ivmd_remote_on_fwd_rep,
    [IVM_PEER_PE_STATE - IVM_PEER_FIRST]   = ivmd_remote_on_pe_state,
    [IVM_PEER_SPAWN - IVM_PEER_FIRST]      = ivmd_remote_on_spawn,
    [IVM_PEER_SPAWN_REP - IVM_PEER_FIRST]  = ivmd_remote_on_spawn_rep,
    [IVM_PEER_JOB_END - IVM_PEER_FIRST]    = ivmd_remote_on_job_end,
    [IVM_PEER_OUTPUT - IVM_PEER_FIRST]     = ivmd_remote_on_output,
    [IVM_PEER_OBJ_REG - IVM_PEER_FIRST]    = ivmd_data_on_obj,
    [IVM_PEER_OBJ_LOOKUP - IVM_PEER_FIRST] = ivmd_data_on_obj,
    [IVM_PEER_OBJ_REP - IVM_PEER_FIRST]    = ivmd_data_on_obj_rep,
    [IVM_PEER_READ - IVM_PEER_FIRST]       = ivmd_data_on_read,
    [IVM_PEER_DATA - IVM_PEER_FIRST]       = ivmd_data_on_data,
    [IVM_PEER_ACK - IVM_PEER_FIRST]        = ivmd_data_on_ack,
    [IVM_PEER_GROUP - IVM_PEER_FIRST]      = ivmd_data_on_group,
};

void ivmd_cluster_handle_msg(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    ivmd_peer_msg_fn_t fn = NULL;

    if (hdr->type >= IVM_PEER_FIRST && hdr->type < IVM_PEER_LAST) {
        fn = ivmd_cluster_msgs[hdr->type - IVM_PEER_FIRST];
    }
    if (fn == NULL) {
        ivmd_conn_close(d, pc, "unexpected peer message");
        return;
    }
    fn(d, pc, hdr, payload);
}

int ivmd_cluster_busy(const ivmd_t *d)
{
    return ivmd_data_busy(d) || ivmd_remote_busy(d);
}

void ivmd_cluster_close_all(ivmd_t *d)
{
    ivmd_data_close_all(d);
    ivmd_remote_close_all(d);
}

void ivmd_cluster_conn_gone(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_data_conn_gone(d, c);
    ivmd_remote_conn_gone(d, c);
}

void ivmd_cluster_peer_up(ivmd_t *d, ivmd_peer_t *p)
{
    ivmd_remote_send_nodeinfo(d, p, ivmd_gpu_alive(d) ? ivmd_gpu_count(d) : 0);
}

/* A lost peer fails the operations waiting on it first, then the control
 * plane ends what it hosted and the proxy jobs it was root of. */
void ivmd_cluster_peer_lost(ivmd_t *d, ivmd_peer_t *p)
{
    ivmd_data_peer_lost(d, p);
    ivmd_remote_peer_lost(d, p);
}
