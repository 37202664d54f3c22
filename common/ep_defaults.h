/* Defaults of a PE's endpoints (libivm/ep.c), shared with ivm-perftest, whose
 * rows of small syncs warm up past the daemon path and stay within them. */
#ifndef IVM_COMMON_EP_DEFAULTS_H
#define IVM_COMMON_EP_DEFAULTS_H

/* Small syncs to a node that go through the daemon before its endpoint is
 * opened. Opening one takes two round trips to daemons (the PE's own for the
 * way and the key, the node's for the handshake) and the keys: 5-8 ms for a
 * DS-LB portion's PE on the test VM with both cores computing, where a sync
 * through the endpoint saves one daemon hop; those PEs make five small
 * syncs to the root's node, and homogeneous DMM took 7 % longer when the
 * third opened it. (Readying OpenSSL in the parked process instead, so that
 * forked PEs inherit it, made every forked PE dearer: DMM 5.0 -> 5.6 s.) */
#define IVM_EP_AFTER 8u

/* Bytes up to which a put or get of a node copy takes the PE's endpoint
 * (IVM_PE_ENDPOINT_MAX, at most IVM_PEER_CHUNK; larger ones pipeline through
 * the daemons, whose chunks overlap on the link). 64 KiB: with 256 KiB the
 * endpoint was faster up to 256 KiB, but the 1 MiB Puts through the daemons
 * that followed in the same run fell to 0.78x (docs/BENCHMARKS.md). */
#define IVM_EP_PUT_MAX_DEFAULT (64u * 1024u)

#endif /* IVM_COMMON_EP_DEFAULTS_H */
