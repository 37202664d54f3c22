/*
 * Peer links (transport layer): the TCP listener of peer daemons, the
 * cluster's membership table (CLUSTER), dialing with backoff (the node whose
 * name sorts lower dials, so each pair has one connection), the
 * HELLO/CHALLENGE/AUTH handshake over the cluster secret with the AEAD keys
 * of the link, heartbeats and BYE. It knows no job, object or GPU: the peer
 * messages of other types go up through the callbacks the layers above
 * registered (ivmd_link_ops_t), as do a peer's coming up and being lost.
 */
#ifndef IVMD_TRANSPORT_LINK_H
#define IVMD_TRANSPORT_LINK_H

#include <stdint.h>

#include "proto.h"
#include "transport/conn.h"
#include "transport/loop.h"
#include "transport/netlimits.h"

/* A node of the cluster, as the CLUSTER message named it. */
typedef struct ivmd_peer {
    char         node[IVM_HOST_MAX + 1];
    char         addr[64];
    uint16_t     port;
    uint16_t     slots;      /* the job PEs it should run at once; 0: any (CLUSTER) */
    uint16_t     max_slots;  /* the job PEs it may run at once; 0: any (CLUSTER) */
    int          self;       /* this daemon */
    int          dialer;     /* we dial it (our name sorts lower) */
    ivmd_conn_t *conn;       /* its authenticated connection, or the dial */
    int          up;
    int          leaving;    /* said BYE: its end is no failure */
    uint64_t     next_dial_ns;
    unsigned     failures;   /* consecutive failed dials, for backoff and logs */
    /* kept for the layers above (the link never reads them) */
    int          ndevs;      /* its CPU devices (NODEINFO) */
    int          ngpus;      /* its GPU devices (NODEINFO) */
    uint16_t     ncores[64];
    uint8_t      share[64];  /* each CPU device's share of its cores, percent */
    int8_t       numa[64];   /* each CPU device's NUMA node, -1: unknown */
    uint8_t      gpu_share[64]; /* each GPU device's share of its GPU, percent */
} ivmd_peer_t;

/* What the layers above the links register. */
typedef struct ivmd_link_ops {
    /* An authenticated peer message of a type beyond the link's own. */
    void (*on_msg)(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, const void *payload);
    void (*peer_up)(ivmd_t *d, ivmd_peer_t *p);
    void (*peer_lost)(ivmd_t *d, ivmd_peer_t *p);
    /* This daemon joined a cluster as node self. */
    void (*joined)(ivmd_t *d, uint32_t self);
} ivmd_link_ops_t;

/* The settings the links run with. */
typedef struct ivmd_link_cfg {
    const char *node;               /* this daemon's name */
    const char *listen;             /* HOST:PORT, "" for none */
    int         encrypt;            /* --peer-encrypt */
    const char *congestion;         /* TCP_CONGESTION of the links, or IVMD_LINK_CONGESTION_SYSTEM */
} ivmd_link_cfg_t;

typedef struct ivmd_link {
    ivmd_loop_t           *loop;
    ivmd_conn_table_t     *conns;
    ivmd_netlimits_t      *net;
    const ivmd_link_ops_t *ops;
    ivmd_link_cfg_t        cfg;
    const int             *stopping;   /* the daemon shuts down: ends are no failure */
    int                    tcp_fd;
    uint16_t               tcp_port;
    ivmd_handler_t         tcp_h;
    int                    tick_fd;    /* heartbeat and deadline tick */
    ivmd_handler_t         tick_h;
    int                    have_cluster;
    uint8_t                secret[IVM_SECRET_LEN];
    ivmd_peer_t           *peers;
    uint32_t               npeers;
    uint32_t               self_idx;   /* our index in peers */
} ivmd_link_t;

/* The congestion control name that leaves the links the system's default. */
#define IVMD_LINK_CONGESTION_SYSTEM "system"

/* Whether this kernel lets the daemon give its links TCP congestion control
 * algo (IVMD_LINK_CONGESTION_SYSTEM: always): IVM_SUCCESS, or why not in err
 * (not available, not allowed). */
ivmError_t ivmd_link_congestion_check(const char *algo, char *err, size_t errlen);
/* The links' state; peer connections registered with conns. */
void ivmd_link_init(ivmd_link_t *l, ivmd_loop_t *loop, ivmd_conn_table_t *conns,
                    ivmd_netlimits_t *net, const ivmd_link_cfg_t *cfg, const int *stopping,
                    const ivmd_link_ops_t *ops);
/* Listen on cfg.listen (nothing without one) and start the tick. */
ivmError_t ivmd_link_listen(ivmd_link_t *l);
/* Shutdown: tell the peers, so they log our going as no failure. */
void ivmd_link_say_bye(ivmd_link_t *l, ivmd_t *d);
void ivmd_link_close(ivmd_link_t *l);
/* CLUSTER from the owner: the node table and secret; dials the nodes this
 * daemon dials. */
ivmError_t ivmd_link_set_cluster(ivmd_link_t *l, ivmd_t *d, const ivm_msg_cluster_req_t *req,
                                 char *detail, size_t detail_len);
uint32_t ivmd_link_count_up(const ivmd_link_t *l);

/* The job's endpoint key (common/crypto.h), for its PEs' endpoints to this
 * cluster's daemons; IVM_ERROR_UNSUPPORTED outside a cluster. */
ivmError_t ivmd_link_ep_key(const ivmd_link_t *l, uint32_t job,
                            uint8_t key[IVM_CRYPTO_EP_KEY_LEN]);

#endif /* IVMD_TRANSPORT_LINK_H */
