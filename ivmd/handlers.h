/*
 * handlers (service layer): the PE protocol. A table maps each validated
 * request type to the handler that serves it, which calls down into the
 * control plane (ctl/), the data plane (data/) and GPU coherence (gpu/). A
 * handler fills the reply and returns its status (transport/reply.h), IVMD_DEFERRED
 * when the reply comes later.
 */
#ifndef IVMD_HANDLERS_H
#define IVMD_HANDLERS_H

#include <stdint.h>

#include "ctl/job.h"
#include "proto.h"
#include "svc.h"
#include "transport/conn.h"

/* A PE's request (a connection kind's on_msg). */
void ivmd_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                     const void *payload);
/* A SIGNAL_TO, WAIT_FROM or PUT_SIGNAL of c's PE that this node daemon had
 * forwarded for want of a PE's place, sent back by the root with it (the
 * remote module's `bounced`): served here; PUT_SIGNAL's put is done. */
void ivmd_handle_bounced(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload);
/* A connection is gone (a listener of the connection table): its
 * PUT_SIGNALs in flight are forgotten. */
void ivmd_handlers_conn_gone(ivmd_t *d, ivmd_conn_t *c);
/* The connection of a PE closed (EOF, error, bad input). */
void ivmd_handle_disconnect(ivmd_t *d, ivmd_conn_t *c);
/* The reply's size of a request type (the remote protocol's virtual
 * connections answer with it). */
uint32_t ivmd_reply_size(uint16_t type);
/* Map [off, off+size) of obj for c's PE and answer its request (the data
 * plane's answer once the object's copy is here). */
void ivmd_reply_map(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                    ivmd_obj_t *obj, uint64_t off, uint64_t size);
/* Wire the control plane's modules to the daemon's state (before any of
 * them runs: after the options, before ivmd_devcg_open). */
void ivmd_handlers_init(ivmd_t *d);
/* Grace period over: kill what is left of ended jobs (the timer's handler). */
void ivmd_job_grace_expired(ivmd_t *d, void *arg, uint32_t events);
/* The GPU daemon is gone (GPU coherence's up-call): the warm pool's GPU
 * processes can never be PEs. */
void ivmd_handle_gpus_lost(ivmd_t *d);
/* Registry callbacks. */
extern const ivmd_job_ops_t ivmd_job_ops;

#endif /* IVMD_HANDLERS_H */
