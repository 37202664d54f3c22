/*
 * Connections (transport layer): framing, validation before allocation,
 * queued non-blocking writes with fds, sealing of authenticated links, and
 * flow control. A connection kind's owner registers its callbacks
 * (ivmd_conn_ops_t: on message, on close, ...) with the connection table;
 * the transport never calls into the layers above but through them.
 */
#ifndef IVMD_TRANSPORT_CONN_H
#define IVMD_TRANSPORT_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crypto.h"
#include "proto.h"
#include "transport/loop.h"

/* Owners' objects a connection points at, opaque to the transport. */
struct ivmd_peer;
struct ivmd_pe;
struct ivmd_job;
struct ivmd_parked;

/* Queued outgoing bytes of a connection. */
typedef struct ivmd_outbuf {
    struct ivmd_outbuf *next;
    size_t              len, off;
    int                 tagged; /* peer link: the last IVM_CRYPTO_TAG_LEN bytes are its tag */
    int                 fds[IVM_MSG_MAX_FDS]; /* owned; sent with byte 0 */
    int                 nfds;
    char                data[];
} ivmd_outbuf_t;

typedef enum ivmd_conn_kind {
    IVMD_CONN_PE,     /* Unix socket: a PE or a tool of the daemon's user */
    IVMD_CONN_PEER,   /* TCP: another daemon of the cluster */
    IVMD_CONN_REMOTE, /* no socket: a PE of another node, for its job's root daemon */
    IVMD_CONN_GPUD,   /* socketpair: this node's ivm-gpud */
    IVMD_CONN_NKINDS
} ivmd_conn_kind_t;

/* Flow control of a peer link: a transfer queues chunks until the link holds
 * IVMD_CONN_OUT_HIGH bytes, and adds more once it fell below
 * IVMD_CONN_OUT_LOW (so a 4 GiB Put never holds more than a few MiB). */
#define IVMD_CONN_OUT_HIGH (4u * 1024u * 1024u)
#define IVMD_CONN_OUT_LOW  (2u * 1024u * 1024u)

/* Bytes a peer connection reads at once (peer links carry no fds). */
#define IVMD_CONN_RBUF (64u * 1024u)

typedef enum ivmd_peer_state {
    IVMD_PEER_DOWN,        /* no connection */
    IVMD_PEER_CONNECTING,  /* dialing (non-blocking connect) */
    IVMD_PEER_HELLO_SENT,  /* dialer: awaiting CHALLENGE */
    IVMD_PEER_AWAIT_HELLO, /* acceptor: awaiting HELLO */
    IVMD_PEER_AWAIT_AUTH,  /* acceptor: awaiting AUTH */
    IVMD_PEER_UP,          /* authenticated */
    IVMD_PEER_ENDPOINT     /* a PE's endpoint, sealed (EP_HELLO, common/proto.h) */
} ivmd_peer_state_t;

typedef struct ivmd_conn ivmd_conn_t;
typedef struct ivmd_conn_table ivmd_conn_table_t;

/* A producer called back (not nested) when the queue fell below its mark;
 * returns 1 if it has more to send than it queued in this turn. */
typedef int (*ivmd_conn_drain_cb_t)(ivmd_t *d, ivmd_conn_t *c, void *arg);

struct ivmd_conn {
    ivmd_handler_t     h;
    ivmd_conn_table_t *table;
    struct ivmd_conn  *next, *prev;
    int                closed;
    ivmd_conn_kind_t   kind;
    pid_t              peer_pid;
    /* peer connections */
    struct ivmd_peer  *peer;        /* the cluster node, once known */
    ivmd_peer_state_t  pstate;
    uint8_t            nonce_a[IVM_PEER_NONCE_LEN];
    uint8_t            nonce_b[IVM_PEER_NONCE_LEN];
    int                sealed;      /* keys derived: every message now carries a tag */
    ivm_aead_t         tx_aead, rx_aead;
    size_t             payload_want; /* the payload's bytes and, when sealed, its tag */
    uint64_t           rx_bytes;    /* bytes received (bounded before auth) */
    uint64_t           last_rx_ns, last_tx_ns, opened_ns;
    uint8_t            src[16];     /* accepted peers: source address (IPv4 mapped) */
    uint32_t           ep_job;      /* IVMD_PEER_ENDPOINT: the PE's job, id, node */
    int32_t            ep_pe;
    uint32_t           ep_node;
    int                ep_proved;   /* a sealed message of it checked: it has the key */
    /* reading */
    ivm_msg_hdr_t      hdr;
    size_t             hdr_got;
    char              *payload;
    size_t             payload_cap, payload_got;
    char              *rbuf;        /* peer links: staged bytes (IVMD_CONN_RBUF) */
    size_t             rbuf_off, rbuf_len;
    int                rbuf_short;  /* the last recv did not fill rbuf */
    int                fds[IVM_MSG_MAX_FDS];
    int                nfds;
    /* writing */
    ivmd_outbuf_t     *out_head, *out_tail;
    size_t             out_bytes;   /* queued bytes (whole messages, sent or not) */
    size_t             out_limit;   /* most bytes it may queue (0: no limit) */
    int                out_armed;   /* EPOLLOUT is being watched */
    /* Flow control (ivmd_conn_on_drain): called (not nested) when the queue
     * fell below drain_low, so that a producer adds its next chunks (peer
     * links: the data plane's transfers). */
    ivmd_conn_drain_cb_t on_drain;
    void              *drain_arg;
    size_t             drain_low;
    int                draining;
    const char        *doomed;      /* to be closed by the loop, and why */
    /* the owner's identity of the connection (opaque here) */
    struct ivmd_pe     *pe;
    struct ivmd_job    *job;
    struct ivmd_parked *parked;     /* a warm-pool process parked in ivmEnter */
};

/* Behaviour flags of a kind. */
#define IVMD_CONN_F_COUNTED     0x1u /* counted in the table's clients (--max-conns, idle) */
#define IVMD_CONN_F_ONE_PER_WAKE 0x2u /* one message per wakeup: epoll says if another waits */
#define IVMD_CONN_F_BULK_READ   0x4u /* no fds: staged reads of IVMD_CONN_RBUF */
#define IVMD_CONN_F_POLL_AFTER  0x8u /* a reply starts --poll-us polling */

/* Output limits of connections: a PE reads its replies (each under
 * IVM_MSG_MAX_PAYLOAD), a peer link's transfers keep to
 * IVMD_CONN_OUT_HIGH; beyond these, the other end does not read. */
#define IVMD_CONN_PE_OUT_LIMIT   (16u * 1024u * 1024u)
#define IVMD_CONN_PEER_OUT_LIMIT (64u * 1024u * 1024u)

/* What the owner of a connection kind registers. */
typedef struct ivmd_conn_ops {
    const char *name;      /* in log lines: "PE", "peer link", ... */
    unsigned    flags;
    size_t      out_limit; /* a new connection's output limit (0: none) */
    /* Socket kinds: the header check (magic, version, length bounds). */
    ivmError_t (*check_hdr)(const ivm_msg_hdr_t *hdr, const char **why_p);
    /* Optional: the whole message, before on_msg; a failure closes the
     * connection with *why_p (the check logs it). */
    ivmError_t (*check_msg)(ivmd_t *d, ivmd_conn_t *c, const char **why_p);
    void (*on_msg)(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, const void *payload);
    /* The connection closes (before its fd and queue go). */
    void (*on_close)(ivmd_t *d, ivmd_conn_t *c, const char *why);
    /* A malformed message: say so (the connection is then closed). */
    void (*on_malformed)(ivmd_t *d, ivmd_conn_t *c, const char *why);
    /* A sealed message failed its check (status: IVM_ERROR_LIMIT, the
     * counter spent; else a bad tag): say so (the connection is then closed). */
    void (*on_bad_seal)(ivmd_t *d, ivmd_conn_t *c, ivmError_t status);
    /* A dial (pstate IVMD_PEER_CONNECTING) completed or failed. */
    void (*on_connected)(ivmd_t *d, ivmd_conn_t *c);
    /* The wire's byte order, where it is not the host's (peer links): a
     * header and a payload turned to the wire's order before sealing
     * (pack), and back after the check (unpack). */
    void (*hdr_pack)(ivm_msg_hdr_t *hdr);
    void (*hdr_unpack)(ivm_msg_hdr_t *hdr);
    void (*msg_pack)(uint16_t type, void *payload, uint32_t len);
    void (*msg_unpack)(uint16_t type, void *payload, uint32_t len);
    /* Socketless kinds: carry a message (header and payload, len bytes). */
    void (*on_output)(ivmd_t *d, ivmd_conn_t *c, const void *msg, uint32_t len);
} ivmd_conn_ops_t;

/* "Any connection closed" listeners (after the kind's on_close). */
typedef void (*ivmd_conn_gone_t)(ivmd_t *d, ivmd_conn_t *c);
#define IVMD_CONN_GONE_MAX 4

/* Admission of an accepted Unix connection (fd, its pid): IVM_SUCCESS, or a
 * refusal with its reason in why. */
typedef ivmError_t (*ivmd_conn_admit_t)(ivmd_t *d, int fd, pid_t pid, char *why,
                                        size_t why_len);

struct ivmd_netlimits;

struct ivmd_conn_table {
    ivmd_loop_t           *loop;
    struct ivmd_netlimits *net;        /* the fd budget (accept pauses) */
    ivmd_conn_t           *head;       /* open connections */
    uint32_t               nclients;   /* open connections of counted kinds */
    int                    had_client;
    ivmd_conn_t           *dead;       /* closed, freed before the next sleep */
    const ivmd_conn_ops_t *ops[IVMD_CONN_NKINDS];
    void                  *owner[IVMD_CONN_NKINDS]; /* the state of each kind's owner */
    ivmd_conn_gone_t       gone[IVMD_CONN_GONE_MAX];
    int                    ngone;
    /* the Unix listener of PE connections */
    uid_t                  uid;        /* the one user served */
    int                    listen_fd;
    ivmd_handler_t         listen_h;
    ivmd_conn_admit_t      admit;
};

/* The table; its closed connections are freed before each sleep of loop;
 * its listener pauses within the fd budget net. */
ivmError_t ivmd_conn_table_init(ivmd_conn_table_t *t, ivmd_loop_t *loop,
                                struct ivmd_netlimits *net);
/* Close every connection and free them. */
void ivmd_conn_table_fini(ivmd_conn_table_t *t, ivmd_t *d);
/* The owner of kind: its callbacks, and its state (ivmd_conn_owner). */
void ivmd_conn_register(ivmd_conn_table_t *t, ivmd_conn_kind_t kind,
                        const ivmd_conn_ops_t *ops, void *owner);
void *ivmd_conn_owner(const ivmd_conn_t *c);
ivmError_t ivmd_conn_on_gone(ivmd_conn_table_t *t, ivmd_conn_gone_t fn);
/* Accept PE connections of user uid on the listening socket fd (owned from
 * now on), each one through admit first. */
ivmError_t ivmd_conn_listen(ivmd_conn_table_t *t, int fd, uid_t uid, ivmd_conn_admit_t admit);

/* A new connection of kind on fd (-1: socketless), watched for events. */
ivmd_conn_t *ivmd_conn_create(ivmd_conn_table_t *t, int fd, ivmd_conn_kind_t kind,
                              uint32_t events);
/* Queue a reply: header + rep (len bytes) + optional detail text + fds
 * (duplicated; the caller keeps its own). When the fds cannot be duplicated
 * the reply goes out as an error without them, and that status is returned:
 * the caller undoes what the reply would have handed over. */
ivmError_t ivmd_conn_reply(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                           const void *rep, uint32_t len, const char *detail,
                           const int *fds, int nfds);
void ivmd_conn_close(ivmd_t *d, ivmd_conn_t *c, const char *why);
/* A send failed deep inside some operation: mark the connection, and let the
 * loop close it between two event batches (closing at once could free state
 * the caller is still using). */
void ivmd_conn_doom(ivmd_conn_t *c, const char *why);
/* Send a one-way message. */
void ivmd_conn_send(ivmd_t *d, ivmd_conn_t *c, uint16_t type, const void *payload,
                    uint32_t len);
void ivmd_conn_send_parts(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                          const void *a, uint32_t alen, const void *b, uint32_t blen);
/* Flow control. Bytes queued on c (whole messages, sent or not). */
size_t ivmd_conn_queued(const ivmd_conn_t *c);
/* The producer of c: cb(d, c, arg) is called whenever a write left fewer
 * than low_water bytes queued (never nested in cb's own pushes); cb returns
 * 1 if it stopped at its share of this loop turn with more to send (the loop
 * calls it again once the socket takes more). cb NULL: none. */
void ivmd_conn_on_drain(ivmd_conn_t *c, ivmd_conn_drain_cb_t cb, void *arg, size_t low_water);
/* Call the producer once the socket takes more bytes (it has more than it
 * sent in this turn of the loop). */
void ivmd_conn_want_drain(ivmd_t *d, ivmd_conn_t *c);
/* The most bytes c may hold queued (0: no limit; a new connection has its
 * kind's out_limit). A push beyond it is refused (IVM_ERROR_NO_MEMORY) and
 * the connection closed with a log line: its other end does not read. */
void ivmd_conn_set_out_limit(ivmd_conn_t *c, size_t limit);
/* A message built in place: alloc (header filled, payload_len bytes to
 * write at IVMD_OUTBUF_PAYLOAD), then push (queued and sent as possible). */
ivmd_outbuf_t *ivmd_conn_out_alloc(ivmd_t *d, ivmd_conn_t *c, uint16_t type, uint32_t seq,
                                   uint32_t payload_len);
/* IVM_SUCCESS, or (fds not duplicated) an error: b is freed, nothing sent. */
ivmError_t ivmd_conn_out_push(ivmd_t *d, ivmd_conn_t *c, ivmd_outbuf_t *b, const int *fds,
                              int nfds);
#define IVMD_OUTBUF_PAYLOAD(b) ((b)->data + sizeof(ivm_msg_hdr_t))

#endif /* IVMD_TRANSPORT_CONN_H */
