/* NODE_DEVS (nodes.h). Cluster indices are those of the CLUSTER table, which
 * every daemon of the cluster holds in the same order; node 0 runs the root
 * PE (ivmrun puts it first). Without a cluster the daemon is node 0. */
#include "nodes.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ivmd.h"

/* The job's PEs started on device devtype of node `node` (-1: this daemon's)
 * and not ended. */
static uint32_t ivmd_nodes_count_pes(const ivmd_job_t *job, int node, int devtype)
{
    uint32_t n = 0;
    int i;

    for (i = 0; i < job->next_pe_id; ++i) {
        const ivmd_pe_t *pe = job->pes[i];
        if (pe != NULL && pe->node == node && pe->devtype == devtype &&
            (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING)) {
            ++n;
        }
    }
    return n;
}

/* The job's PEs on node `node` (-1: this daemon's), any device, not ended. */
static uint32_t ivmd_nodes_count_node(const ivmd_job_t *job, int node)
{
    uint32_t n = 0;
    int i;

    for (i = 0; i < job->next_pe_id; ++i) {
        const ivmd_pe_t *pe = job->pes[i];
        if (pe != NULL && pe->node == node &&
            (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING)) {
            ++n;
        }
    }
    return n;
}

ivmError_t ivmd_nodes_admit(ivmd_t *d, const ivmd_job_t *job, int node, int n, char *detail,
                            size_t detail_len)
{
    int index = node >= 0 ? node : ivmd_remote_self(&d->remote);
    const ivmd_peer_t *p;
    uint32_t alive;

    if (d->link.npeers == 0 || index < 0 || (uint32_t)index >= d->link.npeers) {
        return IVM_SUCCESS; /* no cluster table, no slots */
    }
    p = &d->link.peers[index];
    /* Past the max PE id a create starts nothing (its slots come back
     * IVM_PE_NULL): only the PEs it would start count. */
    if ((int64_t)n > (int64_t)job->max_pe_id - job->next_pe_id + 1) {
        n = job->next_pe_id > job->max_pe_id ? 0 : job->max_pe_id - job->next_pe_id + 1;
    }
    if (p->max_slots == 0 || n == 0) {
        return IVM_SUCCESS;
    }
    alive = ivmd_nodes_count_node(job, node);
    if (alive + (uint32_t)n > p->max_slots) {
        snprintf(detail, detail_len, "node %s runs %u PE%s of job %u; %d more would exceed "
                 "its max_slots %u", p->node, alive, alive == 1 ? "" : "s", job->id, n,
                 (unsigned)p->max_slots);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

static void ivmd_nodes_add(ivm_msg_node_devs_rep_t *out, const ivmd_job_t *job, int node,
                           int devtype, uint32_t ncores, uint32_t share, int numa)
{
    ivm_msg_devinfo_t *e;

    if (out->ndevs >= IVM_NODE_DEVICES_MAX) {
        return;
    }
    e          = &out->devs[out->ndevs++];
    e->devtype = devtype;
    e->ncores  = ncores;
    e->share   = share;
    e->numa    = numa;
    e->npes    = ivmd_nodes_count_pes(job, node, devtype);
}

static void ivmd_nodes_local(ivmd_t *d, const ivmd_job_t *job, ivm_msg_node_devs_rep_t *out)
{
    uint32_t ngpus = ivmd_gpu_alive(&d->gpu) ? ivmd_gpu_count(&d->gpu) : 0, k;
    int i;

    for (i = 0; i < job->ndevs; ++i) {
        ivmd_nodes_add(out, job, -1, IVM_CPU_N(i), (uint32_t)job->devs[i].ncores,
                       (uint32_t)job->devs[i].percent, job->devs[i].numa);
    }
    for (k = 0; k < ngpus; ++k) {
        ivmd_nodes_add(out, job, -1, IVM_GPU_N((int)k), 0,
                       (uint32_t)ivmd_gpu_share(&d->gpu, (int)k), -1);
    }
}

static void ivmd_nodes_peer(const ivmd_peer_t *p, const ivmd_job_t *job, int node,
                            ivm_msg_node_devs_rep_t *out)
{
    int i;

    for (i = 0; i < p->ndevs; ++i) {
        ivmd_nodes_add(out, job, node, IVM_CPU_N(i), p->ncores[i],
                       p->share[i] ? p->share[i] : 100, p->numa[i]);
    }
    for (i = 0; i < p->ngpus; ++i) {
        ivmd_nodes_add(out, job, node, IVM_GPU_N(i), 0, p->gpu_share[i] ? p->gpu_share[i] : 100,
                       -1);
    }
}

ivmError_t ivmd_nodes_describe(ivmd_t *d, ivmd_job_t *job, const ivmd_pe_t *caller, int node,
                               ivm_msg_node_devs_rep_t *out, char *detail, size_t detail_len)
{
    int self   = ivmd_remote_self(&d->remote);
    int nnodes = d->link.npeers > 0 ? (int)d->link.npeers : 1;

    /* A PE of this node has node -1 in the registry; one of another node its index. */
    out->self = caller->node >= 0 ? caller->node : self;
    if (node == IVM_THIS_NODE) {
        node = out->self;
    }
    if (node < 0 || node >= nnodes) {
        snprintf(detail, detail_len, "no node %d (the job has %d node%s)", node, nnodes,
                 nnodes > 1 ? "s" : "");
        return IVM_ERROR_NOT_FOUND;
    }
    out->nnodes = (uint32_t)nnodes;
    out->node   = node;
    if (d->link.npeers > 0) {
        out->slots     = d->link.peers[node].slots;
        out->max_slots = d->link.peers[node].max_slots;
    }
    if (node == self) {
        snprintf(out->name, sizeof(out->name), "%s", d->cfg.node);
        ivmd_nodes_local(d, job, out);
        return IVM_SUCCESS;
    }
    snprintf(out->name, sizeof(out->name), "%s", d->link.peers[node].node);
    if (!d->link.peers[node].up) {
        snprintf(detail, detail_len, "node %s is unreachable", d->link.peers[node].node);
        return IVM_ERROR_DAEMON_LOST;
    }
    ivmd_nodes_peer(&d->link.peers[node], job, node, out);
    return IVM_SUCCESS;
}
