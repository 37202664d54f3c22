/*
 * nodes (service layer): NODE_DEVS, the discovery calls' answer. The job's
 * root daemon describes any node of the cluster: its own from the job's CPU
 * device table and its GPU daemon, the others from their NODEINFO; the PEs on
 * each device come from the job's registry, which only it holds.
 */
#ifndef IVMD_NODES_H
#define IVMD_NODES_H

#include <stddef.h>

#include "ctl/job.h"
#include "proto.h"

typedef struct ivmd ivmd_t;

/* Node `node` of the cluster (IVM_THIS_NODE: the caller's) into out:
 * IVM_SUCCESS, or IVM_ERROR_NOT_FOUND / IVM_ERROR_DAEMON_LOST with detail. */
ivmError_t ivmd_nodes_describe(ivmd_t *d, ivmd_job_t *job, const ivmd_pe_t *caller, int node,
                               ivm_msg_node_devs_rep_t *out, char *detail, size_t detail_len);

/* Whether n more PEs of job fit on node `node` (-1: this daemon's; else a
 * cluster index) under its max_slots: IVM_SUCCESS, or IVM_ERROR_LIMIT with
 * detail naming the node and the limit. Only the job's root daemon, which
 * holds the registry of all its PEs, can answer. */
ivmError_t ivmd_nodes_admit(ivmd_t *d, const ivmd_job_t *job, int node, int n, char *detail,
                            size_t detail_len);

#endif /* IVMD_NODES_H */
