/*
 * data/group: the master's scatter of a PutGroup. Mirrors that hold the same
 * range of a large scatter form a route: the master sends the first node of
 * each subtree a ROUTE and then the range in pieces (DATA flagged
 * IVM_XFER_CHAIN); each node writes a piece into its copy and forwards it at
 * once to its own subtrees, so that the transfers run in a pipeline instead
 * of one after the other from the master. Every node of a route ACKs the
 * master once it holds the whole range; the master's operation waits on
 * every one of them, so a lost node anywhere in a route fails it
 * (IVM_ERROR_DAEMON_LOST). Mirrors with a range of their own, and small
 * scatters, get a direct put from the master as before.
 */
#ifndef IVMD_DATA_GROUP_H
#define IVMD_DATA_GROUP_H

#include "data/op.h"
#include "data/transport.h"

/* Master: scatter [op->off, +op->len) of obj to its mirrors except those on
 * node skip; op->pending counts the ACKs awaited (the caller holds one). */
void ivmd_group_scatter(ivmd_data_t *dp, ivmd_op_t *op, const ivmd_obj_t *obj, int skip);
/* A DATA piece of a route (IVM_XFER_CHAIN) from node, written into obj
 * (NULL: it could not be): forward it, and ACK once the range is whole. */
void ivmd_group_on_piece(ivmd_data_t *dp, int node, const ivm_peer_xfer_t *x, ivmd_obj_t *obj);
/* A piece r of a route could not be written into node's copy (a one-sided
 * put that failed): the master's operation fails, or, at a node of the
 * route, the master hears that node's subtree will not have the range. */
void ivmd_group_piece_lost(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r);
/* node lost (-1: every node, at teardown): forget the routes it fed or
 * would have been ACKed by. */
void ivmd_group_peer_lost(ivmd_data_t *dp, int node);

/* Copy obj loses its memory (its job ended, it was freed): the routes
 * that feed it go (a node whose feeder was lost keeps waiting otherwise). */
void ivmd_group_copy_gone(ivmd_data_t *dp, uint64_t obj);

#endif /* IVMD_DATA_GROUP_H */
