/* Defaults of a PE's endpoints (libivm/ep.c), shared with ivm-perftest, whose
 * rows of small syncs warm up past the daemon path and stay within them. */
#ifndef IVM_COMMON_EP_DEFAULTS_H
#define IVM_COMMON_EP_DEFAULTS_H

/* Small syncs to a node that go through the daemon before its endpoint is
 * opened: rent, then buy. Opening one takes two round trips to daemons (the
 * PE's own for the way and the key, the node's for the handshake), loading
 * libcrypto and the keys: 5-8 ms of a DS-LB portion's PE on the test VM with
 * both cores computing (five times that in wall time on a device of 20 % of
 * a core, whose quota pays it), where a small sync through the endpoint
 * saves about 47 us (8 B remote put: 72.6 us through the daemons, 25.4 us
 * over the endpoint). So an endpoint pays off only past 100-170 small syncs
 * to its node; opening it when the syncs made so far would have paid for it
 * (the ski-rental rule) costs a PE that makes many at most twice the best
 * choice, and a short-lived one nothing. DS-LB PEs make 5 to 16 small syncs
 * to the root's node: with 8 here NBODY on hetero-quota at 48 portions took
 * 7.0-7.7 s, with 16 or more 6.3-6.5 s (docs/BENCHMARKS.md). (Readying
 * OpenSSL in the parked process instead, so that forked PEs inherit it, made
 * every forked PE dearer: DMM 5.0 -> 5.6 s.) */
#define IVM_EP_AFTER 128u

/* Bytes up to which a put or get of a node copy takes the PE's endpoint
 * (IVM_PE_ENDPOINT_MAX, at most IVM_PEER_CHUNK; larger ones pipeline through
 * the daemons, whose chunks overlap on the link). 64 KiB: with 256 KiB the
 * endpoint was faster up to 256 KiB, but the 1 MiB Puts through the daemons
 * that followed in the same run fell to 0.78x (docs/BENCHMARKS.md). */
#define IVM_EP_PUT_MAX_DEFAULT (64u * 1024u)

#endif /* IVM_COMMON_EP_DEFAULTS_H */
