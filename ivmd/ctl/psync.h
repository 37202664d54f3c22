/*
 * ctl/psync: the registry's PE synchronisation beyond ivmWait/ivmSignal:
 * signals addressed to one PE (SIGNAL_TO / WAIT_FROM: a counting semaphore
 * per (sender, receiver) pair) and barriers over a list of PEs or the whole
 * job. Pure bookkeeping like ctl/job: deferred requests are answered through
 * the registry's ops->wait_done. A pair (sender, receiver) is kept by the
 * receiver's daemon (the root's registry or a node daemon's proxy job), which
 * learns the other nodes' PEs as places (where, whether alive: PLACED,
 * SIGNAL and PE_ENDED, see ctl/remote.h). Barriers are the root daemon's
 * only (node daemons forward them).
 */
#ifndef IVMD_CTL_PSYNC_H
#define IVMD_CTL_PSYNC_H

#include <stdint.h>

#include "ctl/jobtypes.h"
#include "ivm.h"

/* What this daemon knows of a PE: IVMD_PLACE_UNKNOWN (neither one of the
 * job's PEs here nor a place), else its state, and its node in *node_p (-1:
 * this daemon's). */
#define IVMD_PLACE_UNKNOWN 0
#define IVMD_PLACE_RUNNING 1 /* spawned or running, as far as this daemon knows */
#define IVMD_PLACE_EXITED  2
#define IVMD_PLACE_FAILED  3
int ivmd_psync_where(const ivmd_job_t *job, int id, int *node_p);

/* PE id of another node, on node `node` (PLACED, or the sender of a SIGNAL):
 * remembered as running unless already known. IVM_ERROR_NO_MEMORY. */
ivmError_t ivmd_psync_place(ivmd_job_t *job, int id, int node);

/* PE id of node `node` ended (PE_ENDED). Applied to a place this daemon did
 * not know, or, if `final` (sent by the PE's own daemon after every signal
 * of the PE, or for a PE that never ran), to a running one: the waiters of
 * its pairs are answered (IVM_ERROR_PE_FAILED if failed). */
void ivmd_psync_place_ended(ivmd_registry_t *reg, ivmd_job_t *job, int id, int node, int failed,
                            int final);

/* Node `node` was lost: its PEs the job's places list as running failed. */
void ivmd_psync_node_lost(ivmd_registry_t *reg, ivmd_job_t *job, int node);

/* Post one signal from PE `from` to PE `to` of this daemon's registry: wakes
 * the oldest WAIT_FROM of `to` on `from`, or is counted.
 * IVM_ERROR_NOT_FOUND: the job has no PE `to` here; IVM_ERROR_NO_MEMORY. */
ivmError_t ivmd_psync_signal_to(ivmd_registry_t *reg, ivmd_job_t *job, int from, int to);

/* WAIT_FROM by `receiver` on PE `from`: IVM_SUCCESS (a signal consumed, or
 * `from` exited), IVM_ERROR_PE_FAILED, IVM_ERROR_NOT_FOUND at once (neither
 * a PE here nor a place: *queued_p = 0), or queued (*queued_p = 1; answered
 * with type through ops->wait_done). */
ivmError_t ivmd_psync_wait_from(ivmd_registry_t *reg, ivmd_job_t *job,
                                const ivmd_pe_t *receiver, int from, void *owner, uint32_t seq,
                                uint16_t type, int *queued_p);

/* BARRIER by `pe` over ids[0..n) (any order, repeats allowed; n = 0: the
 * whole job). At once: IVM_SUCCESS (the caller completed it; the others
 * were answered), IVM_ERROR_INVALID_VALUE (the caller not listed),
 * IVM_ERROR_NOT_FOUND / IVM_ERROR_PE_FAILED (*bad_p names the PE). Else
 * queued (*queued_p = 1). */
ivmError_t ivmd_psync_barrier(ivmd_registry_t *reg, ivmd_job_t *job, const ivmd_pe_t *pe,
                              const int32_t *ids, int n, void *owner, uint32_t seq,
                              uint16_t type, int *queued_p, int *bad_p);

/* PE pe ended (failed or exited): its pairs' waiters are answered, the
 * barriers it belongs to fail (or, for a whole-job barrier it exited from,
 * may complete). Called by ivmd_pe_end. */
void ivmd_psync_pe_ended(ivmd_registry_t *reg, ivmd_pe_t *pe, int failed);

/* Forget every queued request of owner (its connection closed). */
void ivmd_psync_cancel(ivmd_registry_t *reg, void *owner);

/* Free the job's pairs, places and barriers without answering anyone. */
void ivmd_psync_job_destroy(ivmd_job_t *job);

#endif /* IVMD_CTL_PSYNC_H */
