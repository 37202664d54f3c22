/*
 * LIST: the daemon's jobs, a job's PEs and objects, and the cluster's peers,
 * one entry per request (ivm-info walks them by index). Read-only: it looks
 * at the registry and the peer table and changes nothing.
 */
#include <stdio.h>
#include <string.h>

#include "list.h"
#include "ivmd.h"
#include "proto.h"

/* The name of cluster node `node` (-1: this one). */
static const char *ivmd_list_node_name(ivmd_t *d, int node)
{
    const ivmd_peer_t *p = ivmd_remote_peer(&d->remote, node);

    return p != NULL ? p->node : d->cfg.node;
}

static uint32_t ivmd_list_pe_state(const ivmd_pe_t *pe)
{
    switch (pe->state) {
    case IVMD_PE_RUNNING: return IVM_LIST_PE_RUNNING;
    case IVMD_PE_EXITED: return IVM_LIST_PE_EXITED;
    case IVMD_PE_FAILED: return IVM_LIST_PE_FAILED;
    default: return IVM_LIST_PE_STARTED;
    }
}

static ivmError_t ivmd_list_job(ivmd_t *d, uint32_t index, ivm_msg_list_rep_t *rep)
{
    const ivmd_job_data_t *jd;
    ivmd_job_t *job;
    ivmd_obj_t *obj;
    uint32_t k = 0;

    rep->total = d->reg.njobs;
    for (job = d->reg.jobs; job != NULL && k < index; job = job->next) {
        ++k;
    }
    if (job == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    jd         = job->data;
    rep->id    = job->id;
    rep->count = (uint32_t)job->alive;
    for (obj = job->objs; obj != NULL; obj = obj->next) {
        if (obj->name != NULL) {
            ++rep->count2;
            rep->size += obj->size;
        }
    }
    rep->state = !ivmd_remote_is_proxy(job);
    if (rep->state && job->pes != NULL && job->pes[0] != NULL && job->pes[0]->conn != NULL) {
        rep->pid = (int32_t)((const ivmd_conn_t *)job->pes[0]->conn)->peer_pid;
    }
    ivm_proto_strset(rep->node, sizeof(rep->node),
                     ivmd_list_node_name(d, ivmd_remote_is_proxy(job)
                                                ? ivmd_remote_root_node(&d->remote, job->id) : -1));
    if (jd != NULL && jd->exe != NULL) {
        ivm_proto_strset(rep->name, sizeof(rep->name), jd->exe);
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_list_pe(ivmd_t *d, ivmd_job_t *job, uint32_t index,
                               ivm_msg_list_rep_t *rep)
{
    const ivmd_pe_t *pe = NULL;
    uint32_t k = 0;
    int i;

    for (i = 0; i < job->next_pe_id; ++i) {
        if (job->pes[i] == NULL) {
            continue;
        }
        if (k++ == index) {
            pe = job->pes[i];
        }
    }
    rep->total = k;
    if (pe == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    rep->id      = (uint64_t)pe->id;
    rep->pid     = (int32_t)pe->pid;
    if (rep->pid == 0 && pe->conn != NULL) {
        rep->pid = (int32_t)((const ivmd_conn_t *)pe->conn)->peer_pid; /* the root */
    }
    rep->devtype = pe->devtype;
    rep->state   = ivmd_list_pe_state(pe);
    rep->count   = pe->nmaps;
    ivm_proto_strset(rep->node, sizeof(rep->node), ivmd_list_node_name(d, pe->node));
    return IVM_SUCCESS;
}

static ivmError_t ivmd_list_obj(ivmd_t *d, ivmd_job_t *job, uint32_t index,
                                ivm_msg_list_rep_t *rep)
{
    const ivmd_obj_t *obj, *found = NULL;
    uint32_t k = 0;

    for (obj = job->objs; obj != NULL; obj = obj->next) {
        if (obj->name == NULL) {
            continue; /* freed, waiting for its last unmap */
        }
        if (k++ == index) {
            found = obj;
        }
    }
    rep->total = k;
    if (found == NULL) {
        return IVM_ERROR_NOT_FOUND;
    }
    rep->id       = found->id;
    rep->size     = found->size;
    rep->count    = found->nmaps;
    rep->state    = found->master_node < 0;
    rep->count2   = found->master_node < 0 ? found->nholders : found->nregions;
    rep->tx_bytes = found->tx_bytes;
    rep->rx_bytes = found->rx_bytes;
    ivm_proto_strset(rep->node, sizeof(rep->node), ivmd_list_node_name(d, found->master_node));
    ivm_proto_strset(rep->name, sizeof(rep->name), found->name);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_list_peer(ivmd_t *d, uint32_t index, ivm_msg_list_rep_t *rep)
{
    const ivmd_peer_t *p;

    rep->total = d->link.npeers;
    if (index >= d->link.npeers) {
        return IVM_ERROR_NOT_FOUND;
    }
    p          = &d->link.peers[index];
    rep->id     = index;
    rep->state  = p->self || p->up;
    rep->count  = p->self;
    rep->count2 = p->slots;
    rep->size   = p->max_slots;
    ivm_proto_strset(rep->node, sizeof(rep->node), p->node);
    snprintf(rep->name, sizeof(rep->name), "%s:%u", p->addr, (unsigned)p->port);
    return IVM_SUCCESS;
}

ivmError_t ivmd_list(ivmd_t *d, const ivm_msg_list_req_t *req, ivm_msg_list_rep_t *out,
                     ivmd_reply_t *rep)
{
    ivmd_job_t *job;
    ivmError_t status;

    switch (req->kind) {
    case IVM_LIST_JOBS:
        return ivmd_list_job(d, req->index, out);
    case IVM_LIST_PEERS:
        return ivmd_list_peer(d, req->index, out);
    case IVM_LIST_PES:
    case IVM_LIST_OBJECTS:
        job = ivmd_job_find(&d->reg, req->job);
        if (job == NULL) {
            return ivmd_reply_set(rep, IVM_ERROR_NOT_FOUND, "%s has no job %u", d->cfg.node,
                                  req->job);
        }
        status = req->kind == IVM_LIST_PES ? ivmd_list_pe(d, job, req->index, out)
                                           : ivmd_list_obj(d, job, req->index, out);
        return status;
    default:
        return ivmd_reply_set(rep, IVM_ERROR_INVALID_VALUE, "LIST of kind %u: not one of jobs "
                              "(1), PEs (2), objects (3), peers (4)", req->kind);
    }
}
