/*
 * data/ucx: UCX (UCP) as the data plane's transport, for RDMA between the
 * copies of objects (InfiniBand, RoCE through rdma-core; shared memory and
 * TCP where UCX finds nothing better). One UCP context and worker per daemon,
 * the worker's event fd in the daemon's loop; endpoints made from the worker
 * addresses the daemons exchange over their authenticated peer links
 * (UCX_ADDR), which stay the control channel. Copies (masters and node
 * mirrors) are registered when they are made (ucp_mem_map of the daemon's
 * mapping of their memfd), and their packed keys go once per (copy, node)
 * (UCX_RKEY). A put is ucp_put_nbx from our copy into the peer's, a flush,
 * then DATA flagged IVM_XFER_PLACED over the link; a get is ucp_get_nbx and a
 * flush. Whatever cannot go one-sided (no endpoint, no key yet, a failed
 * endpoint, a 0-byte range) goes over TCP, the fallback.
 */
#ifndef IVMD_DATA_UCX_H
#define IVMD_DATA_UCX_H

#include <stddef.h>

#include "data/transport.h"
#include "transport/loop.h"

/* Choose the data transport for mode "tcp", "ucx" or "auto" (NULL or "":
 * auto). auto takes UCX when IVM was built with it, the links are not
 * encrypted (a one-sided write bypasses the links' sealing) and UCX finds a
 * network transport other than TCP (an RDMA device); else TCP. On UCX, its
 * worker is watched by loop. Fails (why says it) for an unknown mode, for
 * "ucx" without UCX or with encrypt, or when UCX cannot start. */
ivmError_t ivmd_ucx_select(ivmd_data_t *dp, ivmd_loop_t *loop, const char *mode, int encrypt,
                           char *why, size_t why_len);
/* Teardown (after ivmd_data_close_all): deregister, close the worker. */
void ivmd_ucx_close(ivmd_data_t *dp);
/* The transports/devices UCX found ("" on TCP). */
const char *ivmd_ucx_tls(const ivmd_data_t *dp);

#endif /* IVMD_DATA_UCX_H */
