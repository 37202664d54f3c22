/*
 * data/xfer: the transfers between copies (READ/DATA/ACK/GROUP): the sync
 * operations of PEs on mirrors, the master's scatter and gather, and the
 * requests of mirror fills.
 */
#ifndef IVMD_DATA_XFER_H
#define IVMD_DATA_XFER_H

#include <stdint.h>

#include "data/op.h"

/* Ask node for [off, off+len) of its copy obj_there, into our copy dst, as
 * part of op (one more reply awaited). */
ivmError_t ivmd_xfer_read(ivmd_data_t *dp, ivmd_op_t *op, int node, uint64_t obj_there, uint64_t dst,
                          uint64_t off, uint64_t len, uint32_t flags);

#endif /* IVMD_DATA_XFER_H */
