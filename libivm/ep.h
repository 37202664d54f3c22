/* A PE's own endpoints to other nodes' daemons, for its small puts (ep.c). */
#ifndef LIBIVM_EP_H
#define LIBIVM_EP_H

#include <stddef.h>
#include <stdint.h>

#include "ep_defaults.h"
#include "libivm.h"

/* Read IVM_PE_ENDPOINTS (0: every put through the daemon) and
 * IVM_PE_ENDPOINT_MAX; at ivmEnter. */
void ivm_ep_configure(void);

/* Put [addr, +size), byte `offset` of map's object, into its master (op
 * IVM_SYNC_PUT; with sig_to >= 0 the master's daemon then posts the
 * caller's signal to PE sig_to, ivmSyncPutSignal, or sends it back when
 * that PE is not of its node), or get it from there (IVM_SYNC_GET), through
 * the endpoint to the master's node. 1: taken, its result in *status_p (an error with
 * its message set); 0: not taken, nothing was moved (another op, no
 * endpoint for this map or node, or the master's daemon sent it back): the
 * caller goes through its daemon. */
int ivm_ep_sync(uint32_t op, const ivm_map_t *map, uint64_t offset, void *addr, size_t size,
                int sig_to, ivmError_t *status_p);

/* Post a put of [addr, +size) (ivmSyncPutNbi), as ivm_ep_sync's put but
 * without waiting for its answer, up to IVM_PEER_CHUNK bytes: the bytes are
 * sent (a copy) before it returns, the answer read by a later round trip on
 * the endpoint or ivm_ep_settle (a put the master's daemon sends back then
 * goes through the PE's daemon, which reads the node copy). 1: taken,
 * *status_p IVM_SUCCESS or the failure to send; 0: the daemon path. */
int ivm_ep_post_put(const ivm_map_t *map, uint64_t offset, const void *addr, size_t size,
                    ivmError_t *status_p);

/* Read every posted put's answer; a failure is kept for the next quiet
 * (ivm_rpc_keep_failure). */
void ivm_ep_settle(void);

/* Close every endpoint (ivmExit). */
void ivm_ep_close_all(void);

#endif /* LIBIVM_EP_H */
