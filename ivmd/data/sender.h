/*
 * data/sender: the bytes of a copy sent to a peer as DATA chunks, in order
 * after every transfer queued to that peer before. Flow control: chunks go
 * out while the link holds less than IVMD_CONN_OUT_HIGH bytes; the rest
 * waits in the peer's list of senders until the link drains. A waiting
 * sender reads through its own descriptor of the copy, so an object freed
 * meanwhile still sends what the receiver waits for.
 */
#ifndef IVMD_DATA_SENDER_H
#define IVMD_DATA_SENDER_H

#include <stdint.h>

#include "data/data.h"

/* Send [off, off+len) of obj (local fd) to peer p, for its object `dst`, as
 * part of operation op_id: at once as far as the link takes them, the rest
 * as it drains. */
ivmError_t ivmd_sender_send(ivmd_t *d, ivmd_peer_t *p, uint32_t job, uint64_t op_id,
                            uint32_t flags, ivmd_obj_t *obj, uint64_t dst, uint64_t off,
                            uint64_t len);
/* Peer lost or daemon ending: drop its waiting transfers (their operations
 * fail with the peer). */
void ivmd_sender_drop(ivmd_t *d, ivmd_peer_t *p);

#endif /* IVMD_DATA_SENDER_H */
