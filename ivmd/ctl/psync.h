/*
 * ctl/psync: the registry's PE synchronisation beyond ivmWait/ivmSignal:
 * signals addressed to one PE (SIGNAL_TO / WAIT_FROM: a counting semaphore
 * per (sender, receiver) pair) and barriers over a list of PEs or the whole
 * job. Pure bookkeeping like ctl/job: deferred requests are answered through
 * the registry's ops->wait_done. Served by the job's root daemon only (node
 * daemons forward these requests, see ctl/remote.h).
 */
#ifndef IVMD_CTL_PSYNC_H
#define IVMD_CTL_PSYNC_H

#include <stdint.h>

#include "ctl/job.h"
#include "ivm.h"

/* Post one signal from `sender` to PE `to`: wakes the oldest WAIT_FROM of
 * `to` on `sender`, or is counted. IVM_ERROR_NOT_FOUND: the job never had
 * `to`; IVM_ERROR_NO_MEMORY. */
ivmError_t ivmd_psync_signal_to(ivmd_registry_t *reg, ivmd_job_t *job, const ivmd_pe_t *sender,
                                int to);

/* WAIT_FROM by `receiver` on PE `from`: IVM_SUCCESS (a signal consumed, or
 * `from` exited), IVM_ERROR_PE_FAILED, IVM_ERROR_NOT_FOUND at once
 * (*queued_p = 0), or queued (*queued_p = 1; answered with type through
 * ops->wait_done). */
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

/* Free the job's pairs and barriers without answering anyone. */
void ivmd_psync_job_destroy(ivmd_job_t *job);

#endif /* IVMD_CTL_PSYNC_H */
