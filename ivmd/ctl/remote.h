/*
 * ctl/remote: the control messages between daemons. The root daemon of a job
 * (the root PE's node) holds its registry; a node daemon holds a proxy job
 * with its own PEs.
 *  - PE requests that need the registry (WAIT, SIGNAL, NUM_PES, SET_MAX_ID,
 *    CREATE_PES, KILL_PES, NODE_DEVS, BARRIER) travel as FWD to the root
 *    daemon, which runs the same handlers on a virtual connection whose
 *    replies go back as FWD_REP.
 *  - Addressed signals take one daemon hop: the pair (sender, receiver) is
 *    kept by the receiver's daemon; the sender's daemon sends SIGNAL there.
 *    The root tells every peer where the job's PEs are (PLACED, and the whole
 *    table after a node's SPAWNs until one started a PE there); the daemon
 *    that ends a PE tells every peer (PE_ENDED, after the PE's SIGNALs on
 *    each link). A node daemon that does not know a PE forwards the
 *    SIGNAL_TO / WAIT_FROM / PUT_SIGNAL to the root, which sends the place
 *    and then the request back (bounce).
 *  - CREATE_PES on another node: the root daemon takes the ids and sends
 *    SPAWN; the node daemon spawns and reports PE_STATE changes; the root
 *    daemon ends the job there with JOB_END; PE output travels as OUTPUT.
 * State: the spawns waiting for their SPAWN_REP, by id (ivmd_remote_t, hung
 * off ivmd_t).
 */
#ifndef IVMD_CTL_REMOTE_H
#define IVMD_CTL_REMOTE_H

#include <stdint.h>

#include "ctl/job.h"
#include "ctl/jobdata.h"
#include "devspec.h"
#include "proto.h"
#include "status.h"
#include "transport/conn.h"
#include "transport/link.h"

/* Results of the PE-facing calls besides an ivmError_t (as in ivmd.h). */
#ifndef IVMD_DEFERRED
#define IVMD_DEFERRED 1 /* the reply comes later */
#define IVMD_LOCAL    2 /* the object is here, answer as usual */
#endif

/* Job ids carry their root daemon's node index in the top bits. */
#define IVMD_JOB_NODE_SHIFT 20

typedef struct ivmd ivmd_t;
typedef struct ivmd_conn ivmd_conn_t;
typedef struct ivmd_peer ivmd_peer_t;
struct ivmd_remote_spawn;

/* What the service layer does for the remote module (the PE protocol, the
 * job's teardown, spawning, the warm pool, output: still at the top level). */
typedef struct ivmd_remote_ops {
    /* Serve a PE request on a virtual connection. */
    void (*dispatch)(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, const void *payload);
    uint32_t (*reply_size)(uint16_t type);
    ivmError_t (*job_data_unpack)(ivmd_job_data_t *jd, const char *blob, uint32_t len,
                                  uint32_t argc, uint32_t envc);
    void (*job_data_free)(ivmd_job_data_t *jd);
    void (*job_terminate)(ivmd_t *d, ivmd_job_t *job, const char *why);
    void (*job_collect)(ivmd_t *d, ivmd_job_t *job);
    ivmError_t (*spawn_pe)(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t *pe, char *detail,
                           size_t detail_len);
    int (*spawn_kill)(ivmd_t *d, ivmd_pe_t *pe);
    int (*pool_take)(ivmd_t *d, ivmd_job_t *job, ivmd_pe_t *pe, int more);
    void (*output_write)(ivmd_t *d, ivmd_job_t *job, int pe_id, int fd, const char *bytes,
                         size_t len);
    /* GPU devices of this node (a SPAWN's device is checked against them). */
    uint32_t (*gpu_count)(const ivmd_t *d);
    /* Serve again a SIGNAL_TO, WAIT_FROM or PUT_SIGNAL (its signal only) of
     * the PE of connection c that the root sent back with the place. */
    void (*bounced)(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, const void *payload);
} ivmd_remote_ops_t;

/* A PE_ENDED for a job this daemon did not have (yet), from node `from`. */
#define IVMD_REMOTE_EARLY 64
typedef struct ivmd_remote_early {
    ivm_peer_pe_ended_t m;
    int                 from;
} ivmd_remote_early_t;

typedef struct ivmd_remote {
    ivmd_t                   *d;       /* the daemon, for callbacks (opaque) */
    ivmd_registry_t          *reg;
    ivmd_link_t              *link;
    ivmd_conn_table_t        *conns;   /* virtual connections are made there */
    const ivm_cpu_device_t   *devs;    /* this node's CPU devices ... */
    const int                *ndevs;   /* ... and how many */
    const char               *node;    /* this node's name */
    const ivmd_remote_ops_t  *ops;
    struct ivmd_remote_spawn *spawns;  /* CREATE_PES waiting for SPAWN_REP, by id (uthash) */
    uint64_t                  next_id;
    int                       places;  /* root: send PLACED (ivmd --psync-places) */
    uint32_t                  relayed; /* addressed-signal requests sent back (bounced) */
    uint64_t                  told;    /* PEs described in job tables sent to nodes */
    ivmd_remote_early_t       early[IVMD_REMOTE_EARLY]; /* the last PE_ENDEDs of jobs
                                                           not here, a ring */
    uint32_t                  nearly;  /* PE_ENDEDs put in it */
} ivmd_remote_t;

void ivmd_remote_init(ivmd_remote_t *rm, ivmd_t *d, ivmd_registry_t *reg, ivmd_link_t *link,
                      ivmd_conn_table_t *conns, const ivm_cpu_device_t *devs,
                      const int *ndevs, const char *node, const ivmd_remote_ops_t *ops);

/* This daemon's node index (0 without a cluster). */
int ivmd_remote_self(const ivmd_remote_t *rm);
/* Node `node` of the cluster, NULL for this daemon or an index out of range. */
ivmd_peer_t *ivmd_remote_peer(ivmd_remote_t *rm, int node);
/* The node index of a job's root daemon. */
int ivmd_remote_root_node(const ivmd_remote_t *rm, uint32_t job_id);
/* Whether the job is rooted on another node (a proxy job). */
int ivmd_remote_is_proxy(const ivmd_job_t *job);
/* Send fixed part + tail to a peer: IVM_ERROR_DAEMON_LOST if it is not up. */
ivmError_t ivmd_remote_post(ivmd_remote_t *rm, ivmd_peer_t *p, uint16_t type, const void *a,
                            uint32_t alen, const void *b, uint32_t blen);
/* 1 if spawns wait for a reply (the loop polls while they do). */
int ivmd_remote_busy(const ivmd_remote_t *rm);
/* Teardown: drop the spawns in flight. */
void ivmd_remote_close_all(ivmd_remote_t *rm);

/* NODEINFO to a peer that came up: our CPU devices and ngpus GPU devices
 * (gpu_share[k]: GPU device k's share of its GPU, percent). */
void ivmd_remote_send_nodeinfo(ivmd_remote_t *rm, ivmd_peer_t *p, uint32_t ngpus,
                               const uint8_t *gpu_share);
void ivmd_remote_on_nodeinfo(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload);

/* Forwarding (node daemon -> root daemon). */
int ivmd_remote_forwards(uint16_t type);
void ivmd_remote_forward(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload);
/* A reply on a virtual connection: wrapped for the PE's node. */
void ivmd_remote_vconn_reply(ivmd_t *d, ivmd_conn_t *c, const void *msg, uint32_t len);
void ivmd_remote_on_fwd(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                        const void *payload);
void ivmd_remote_on_fwd_rep(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                            const void *payload);

/* Addressed signals. Root daemon: the PEs (all of one node) are placed;
 * every peer but theirs is told (PLACED). */
void ivmd_remote_placed(ivmd_remote_t *rm, ivmd_job_t *job, ivmd_pe_t **pes, int n);
/* A signal of PE from (here) to PE to of node `node`, whose daemon keeps
 * the pair (SIGNAL; lost without an error if that node is). */
void ivmd_remote_signal(ivmd_remote_t *rm, ivmd_job_t *job, int from, int to, int node);
/* Root daemon: the addressed-signal request on virtual connection c names
 * PE id, which c's node did not know: send that node id's place, then the
 * request back (IVMD_DEFERRED: the node answers), or an ivmError_t. */
int ivmd_remote_bounce(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                       const void *payload, int id);
/* Root daemon: tell c's node where PE id is (PLACED), if it is alive. */
void ivmd_remote_teach(ivmd_remote_t *rm, ivmd_conn_t *c, int id);
/* The job when a signal from -> to of job_id, from a PE of node from_node,
 * is this daemon's to post (the receiver is a PE of this node, the sender
 * placed on from_node, learning the place if this is a proxy); NULL if not
 * (or the job ended here). */
struct ivmd_job *ivmd_remote_signal_here(ivmd_remote_t *rm, uint32_t job_id, int from, int to,
                                         int from_node);
/* Post a signal that ivmd_remote_signal_here gave job for. */
void ivmd_remote_signal_post(ivmd_remote_t *rm, struct ivmd_job *job, int from, int to);
/* A signal of PE from, of node from_node, to PE to of this daemon (SIGNAL,
 * or a put's last DATA): posted; dropped (logged) if `to` is not ours or
 * `from` is known elsewhere. */
void ivmd_remote_post_signal(ivmd_remote_t *rm, uint32_t job_id, int from, int to,
                             int from_node);
void ivmd_remote_on_signal(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload);
void ivmd_remote_on_placed(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload);
void ivmd_remote_on_pe_ended(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload);

/* PE states (registry callbacks) and job ends. */
void ivmd_remote_pe_ended(ivmd_remote_t *rm, ivmd_pe_t *pe, int failed);
void ivmd_remote_pe_entered(ivmd_remote_t *rm, ivmd_pe_t *pe);
void ivmd_remote_pe_reaped(ivmd_remote_t *rm, ivmd_pe_t *pe);
/* Root daemon: kill a PE of another node. */
void ivmd_remote_kill(ivmd_remote_t *rm, ivmd_pe_t *pe);
/* The root daemon ends a job: remote PEs end, their nodes are told. */
void ivmd_remote_job_ending(ivmd_remote_t *rm, ivmd_job_t *job);
void ivmd_remote_on_pe_state(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload);
void ivmd_remote_on_job_end(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                            const void *payload);

/* Spawning on another node: IVMD_DEFERRED (the reply comes with SPAWN_REP) or
 * an ivmError_t with detail. */
int ivmd_remote_spawn(ivmd_remote_t *rm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, int node,
                      int devtype, ivmd_pe_t **pes, int n, ivm_msg_create_pes_rep_t *rep,
                      char *detail, size_t detail_len);
void ivmd_remote_on_spawn(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                          const void *payload);
void ivmd_remote_on_spawn_rep(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                              const void *payload);

/* Output of a proxy job's PE, for the root daemon. */
void ivmd_remote_output(ivmd_remote_t *rm, ivmd_job_t *job, int pe_id, int stream, const char *bytes,
                        size_t len);
void ivmd_remote_on_output(ivmd_remote_t *rm, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                           const void *payload);

/* Connections and peers. */
void ivmd_remote_conn_gone(ivmd_remote_t *rm, ivmd_conn_t *c);
/* A peer was lost: its spawns fail, its PEs fail, the proxy jobs it was root
 * of end. */
void ivmd_remote_peer_lost(ivmd_remote_t *rm, ivmd_peer_t *p);

#endif /* IVMD_CTL_REMOTE_H */
