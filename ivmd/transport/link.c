/* Peer links: the TCP listener, the cluster table (CLUSTER), dialing with
 * backoff, mutual HMAC-SHA-256 authentication over the cluster secret with
 * the AEAD keys of the link, heartbeats and BYE. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "transport/link.h"
#include "transport/netlimits.h"
#include "crypto.h"
#include "log.h"
#include "sock.h"
#include "version.h"
#include "wire.h"

#define IVMD_PEER_AUTH_TIMEOUT_NS (5ull * 1000000000ull) /* to finish authenticating */
#define IVMD_PEER_PING_NS         (1ull * 1000000000ull) /* idle time before a PING */
#define IVMD_PEER_LOST_NS         (5ull * 1000000000ull) /* silence = peer lost */
#define IVMD_PEER_REDIAL_NS       (200ull * 1000000ull)  /* first redial delay */
#define IVMD_PEER_REDIAL_MAX_NS   (2ull * 1000000000ull)

uint32_t ivmd_link_count_up(const ivmd_link_t *l)
{
    uint32_t i, up = 0;

    for (i = 0; i < l->npeers; ++i) {
        up += (uint32_t)l->peers[i].up;
    }
    return up;
}

/* "host:port", "[v6]:port". */
static int ivmd_link_parse_addr(const char *text, struct sockaddr_storage *ss,
                                socklen_t *len_p)
{
    char host[80];
    const char *colon;
    char *end;
    long port;

    colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof(host)) {
        return -1;
    }
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535 || colon[1] == '\0') {
        return -1;
    }
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = '\0';
        return ivm_sock_inet_addr(host + 1, (uint16_t)port, ss, len_p) == 0 &&
                       ss->ss_family == AF_INET6
                   ? 0
                   : -1;
    }
    return ivm_sock_inet_addr(host, (uint16_t)port, ss, len_p) == 0 && ss->ss_family == AF_INET
               ? 0
               : -1;
}

static void ivmd_link_tick(ivmd_t *d, void *arg, uint32_t events);
static void ivmd_link_accept(ivmd_t *d, void *arg, uint32_t events);
static const ivmd_conn_ops_t ivmd_link_conn_ops;

ivmError_t ivmd_link_congestion_check(const char *algo, char *err, size_t errlen)
{
    int fd, e = 0;

    if (strcmp(algo, IVMD_LINK_CONGESTION_SYSTEM) == 0) {
        return IVM_SUCCESS;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return IVM_ERROR_INTERNAL;
    }
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algo, (socklen_t)strlen(algo)) != 0) {
        e = errno;
    }
    close(fd);
    if (e == 0) {
        return IVM_SUCCESS;
    }
    snprintf(err, errlen, "TCP congestion control '%s': %s", algo,
             e == ENOENT ? "not available in this kernel (see "
                           "net.ipv4.tcp_available_congestion_control)"
             : e == EPERM ? "not allowed to unprivileged users (see "
                            "net.ipv4.tcp_allowed_congestion_control)"
                          : strerror(e));
    return e == EPERM ? IVM_ERROR_PERMISSION : IVM_ERROR_INVALID_VALUE;
}

/* A peer link's socket: no Nagle delay (messages go as they are written),
 * and the congestion control the daemon was given. */
static void ivmd_link_tune(const ivmd_link_t *l, int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (strcmp(l->cfg.congestion, IVMD_LINK_CONGESTION_SYSTEM) != 0 &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, l->cfg.congestion,
                   (socklen_t)strlen(l->cfg.congestion)) != 0) {
        ivm_warn_limited("TCP congestion control %s on a peer link: %m", l->cfg.congestion);
    }
}

void ivmd_link_init(ivmd_link_t *l, ivmd_loop_t *loop, ivmd_conn_table_t *conns,
                    ivmd_netlimits_t *net, const ivmd_link_cfg_t *cfg, const int *stopping,
                    const ivmd_link_ops_t *ops)
{
    *l = (ivmd_link_t){.loop = loop, .conns = conns, .net = net, .ops = ops, .cfg = *cfg,
                       .stopping = stopping, .tcp_fd = -1, .tick_fd = -1};
    ivmd_conn_register(conns, IVMD_CONN_PEER, &ivmd_link_conn_ops, l);
}

ivmError_t ivmd_link_listen(ivmd_link_t *l)
{
    struct itimerspec every = {.it_interval = {.tv_nsec = 250000000},
                               .it_value    = {.tv_nsec = 250000000}};
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;

    if (*l->cfg.listen == '\0') {
        return IVM_SUCCESS;
    }
    if (ivmd_link_parse_addr(l->cfg.listen, &ss, &len) != 0) {
        ivm_error("--listen %s: expected a numeric HOST:PORT (e.g. 127.0.0.1:0)",
                  l->cfg.listen);
        return IVM_ERROR_INVALID_VALUE;
    }
    l->tcp_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->tcp_fd < 0) {
        ivm_error("socket: %m");
        return IVM_ERROR_INTERNAL;
    }
    setsockopt(l->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l->tcp_fd, (struct sockaddr *)&ss, len) != 0 || listen(l->tcp_fd, 64) != 0) {
        ivm_error("cannot listen on %s: %m", l->cfg.listen);
        return IVM_ERROR_PERMISSION;
    }
    len = sizeof(ss);
    getsockname(l->tcp_fd, (struct sockaddr *)&ss, &len);
    l->tcp_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
    l->tcp_h = (ivmd_handler_t){.fd = l->tcp_fd, .cb = ivmd_link_accept, .arg = l};
    if (ivmd_loop_watch(l->loop, &l->tcp_h, EPOLLIN) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    l->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->tick_fd < 0 || timerfd_settime(l->tick_fd, 0, &every, NULL) != 0) {
        ivm_error("timerfd: %m");
        return IVM_ERROR_INTERNAL;
    }
    l->tick_h = (ivmd_handler_t){.fd = l->tick_fd, .cb = ivmd_link_tick, .arg = l};
    ivm_info("accepting peer daemons on port %u", (unsigned)l->tcp_port);
    return ivmd_loop_watch(l->loop, &l->tick_h, EPOLLIN);
}

void ivmd_link_say_bye(ivmd_link_t *l, ivmd_t *d)
{
    ivm_peer_job_t bye = {0};
    uint32_t i;

    for (i = 0; i < l->npeers; ++i) {
        if (l->peers[i].up && l->peers[i].conn != NULL) {
            ivmd_conn_send(d, l->peers[i].conn, IVM_PEER_BYE, &bye, sizeof(bye));
        }
    }
}

void ivmd_link_close(ivmd_link_t *l)
{
    if (l->tcp_fd >= 0) {
        close(l->tcp_fd);
        l->tcp_fd = -1;
    }
    if (l->tick_fd >= 0) {
        close(l->tick_fd);
        l->tick_fd = -1;
    }
    free(l->peers);
    l->peers  = NULL;
    l->npeers = 0;
}

static void ivmd_link_accept(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_link_t *l = arg;
    struct sockaddr_storage ss;
    socklen_t len;
    uint8_t src[16];
    ivmd_conn_t *c;
    int fd;

    for (;;) {
        len = sizeof(ss);
        fd  = accept4(l->tcp_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                ivmd_netlimits_accept_pause(l->net, &l->tcp_h, "peer connections");
            } else if (errno != EAGAIN && errno != EINTR) {
                ivm_warn_limited("accept (peers): %m");
            }
            return;
        }
        if (!ivmd_netlimits_peer_admit(l->net, &ss, src) || !ivmd_netlimits_fd_ok(l->net, fd)) {
            /* Over the per-source limits: closed at once, no line of its own. */
            ivm_warn_limited("peer connections closed at once: a source over its limits "
                             "(--preauth-per-source %ld, --preauth-rate %ld) or no fd left",
                             l->net->cfg.preauth_per_source, l->net->cfg.preauth_rate);
            close(fd);
            continue;
        }
        ivmd_link_tune(l, fd);
        c = ivmd_conn_create(l->conns, fd, IVMD_CONN_PEER, EPOLLIN | EPOLLRDHUP);
        if (c != NULL) {
            c->pstate = IVMD_PEER_AWAIT_HELLO;
            memcpy(c->src, src, sizeof(c->src));
        }
    }
}

static ivmd_peer_t *ivmd_link_find(ivmd_link_t *l, const char *node)
{
    uint32_t i;

    for (i = 0; i < l->npeers; ++i) {
        if (strcmp(l->peers[i].node, node) == 0) {
            return &l->peers[i];
        }
    }
    return NULL;
}

/* This daemon's link flags (IVM_PEER_ENCRYPT). */
static uint32_t ivmd_link_flags(const ivmd_link_t *l)
{
    return l->cfg.encrypt ? IVM_PEER_ENCRYPT : 0;
}

/* HMAC over tag, two nonces, both names (dialer's first), the link's flags,
 * the IVM version and the peer layout (little-endian), so that nobody
 * between the daemons can turn encryption off or pass one version for
 * another. */
static int ivmd_link_mac(const ivmd_link_t *l, char tag, const uint8_t *n1, const uint8_t *n2,
                         const char *dialer, const char *acceptor, uint8_t *out)
{
    uint8_t msg[1 + 2 * IVM_PEER_NONCE_LEN + 2 * (IVM_HOST_MAX + 1) + 1 +
                IVM_PEER_VERSION_LEN + 4];
    uint8_t *tail = msg + 1 + 2 * IVM_PEER_NONCE_LEN + 2 * (IVM_HOST_MAX + 1);

    memset(msg, 0, sizeof(msg));
    msg[0] = (uint8_t)tag;
    memcpy(msg + 1, n1, IVM_PEER_NONCE_LEN);
    memcpy(msg + 1 + IVM_PEER_NONCE_LEN, n2, IVM_PEER_NONCE_LEN);
    strncpy((char *)msg + 1 + 2 * IVM_PEER_NONCE_LEN, dialer, IVM_HOST_MAX);
    strncpy((char *)msg + 1 + 2 * IVM_PEER_NONCE_LEN + IVM_HOST_MAX + 1, acceptor,
            IVM_HOST_MAX);
    tail[0] = (uint8_t)ivmd_link_flags(l);
    strncpy((char *)tail + 1, ivm_version_string(), IVM_PEER_VERSION_LEN);
    ivm_put_le32(tail + 1 + IVM_PEER_VERSION_LEN, IVM_PEER_LAYOUT);
    return ivm_crypto_hmac(l->secret, sizeof(l->secret), msg, sizeof(msg), out) ==
                   IVM_SUCCESS ? 0 : -1;
}

static int ivmd_link_random(uint8_t *buf, size_t len)
{
    return ivm_crypto_random(buf, len) == IVM_SUCCESS ? 0 : -1;
}

/* After the handshake: one key per direction, HKDF-SHA-256 of the cluster
 * secret salted with both nonces and bound to both names; from now on every
 * message of the link is sealed (conn.c). */
static int ivmd_link_seal(ivmd_link_t *l, ivmd_conn_t *c, const char *dialer,
                          const char *acceptor, int we_dial)
{
    uint8_t salt[2 * IVM_PEER_NONCE_LEN], keys[2][IVM_CRYPTO_KEY_LEN + IVM_CRYPTO_IV_LEN];
    char info[2][2 * (IVM_HOST_MAX + 1) + 32];
    int rc = 0, k, n[2];

    memcpy(salt, c->nonce_a, IVM_PEER_NONCE_LEN);
    memcpy(salt + IVM_PEER_NONCE_LEN, c->nonce_b, IVM_PEER_NONCE_LEN);
    for (k = 0; k < 2; ++k) {
        /* k = 0: dialer to acceptor; 1: acceptor to dialer. */
        n[k] = snprintf(info[k], sizeof(info[k]), "ivm peer link %s %s%c%s",
                        k == 0 ? "d2a" : "a2d", dialer, 0, acceptor);
        if (ivm_crypto_hkdf(l->secret, sizeof(l->secret), salt, sizeof(salt), info[k],
                            (size_t)n[k], keys[k], sizeof(keys[k])) != IVM_SUCCESS) {
            rc = -1;
        }
    }
    /* Each direction's 44 bytes: its key, then its IV. */
    if (rc == 0 && ivm_aead_init(&c->tx_aead, keys[we_dial ? 0 : 1],
                                 keys[we_dial ? 0 : 1] + IVM_CRYPTO_KEY_LEN,
                                 l->cfg.encrypt) == IVM_SUCCESS) {
        if (ivm_aead_init(&c->rx_aead, keys[we_dial ? 1 : 0],
                          keys[we_dial ? 1 : 0] + IVM_CRYPTO_KEY_LEN,
                          l->cfg.encrypt) == IVM_SUCCESS) {
            c->sealed = 1;
        } else {
            ivm_aead_free(&c->tx_aead);
        }
    }
    explicit_bzero(keys, sizeof(keys));
    return c->sealed ? 0 : -1;
}

/* Refuse a daemon of another IVM version, naming both; or one that does not
 * agree on encryption. Returns 0 when the link may go on. */
static int ivmd_link_agree(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c, const char *node,
                           const char *version, uint32_t flags)
{
    char theirs[IVM_PEER_VERSION_LEN + 1];

    memcpy(theirs, version, IVM_PEER_VERSION_LEN);
    theirs[IVM_PEER_VERSION_LEN] = '\0';
    if (strcmp(theirs, ivm_version_string()) != 0) {
        ivm_warn_limited("peer connection refused: %s runs IVM %s, this daemon IVM %s (every "
                         "daemon of a cluster must be of one version)", node,
                         ivm_proto_strok(theirs, sizeof(theirs)) ? theirs : "?",
                         ivm_version_string());
        ivmd_conn_close(d, c, "other IVM version");
        return -1;
    }
    if ((flags & IVM_PEER_ENCRYPT) != ivmd_link_flags(l)) {
        ivm_warn_limited("peer connection refused: %s %s its links, this daemon %s "
                         "(give every daemon the same --peer-encrypt)", node,
                         (flags & IVM_PEER_ENCRYPT) ? "encrypts" : "does not encrypt",
                         l->cfg.encrypt ? "does" : "does not");
        ivmd_conn_close(d, c, "encryption setting differs");
        return -1;
    }
    return 0;
}

/* Refuse a daemon of another peer message layout (a build of the same
 * version with other peer structs), naming both. Returns 0 when they agree. */
static int ivmd_link_same_layout(ivmd_t *d, ivmd_conn_t *c, const char *node, uint32_t layout)
{
    if (layout == IVM_PEER_LAYOUT) {
        return 0;
    }
    ivm_warn_limited("peer connection refused: %s speaks peer message layout %u, this daemon "
                     "layout %u (every daemon of a cluster must be of one build)", node,
                     (unsigned)layout, (unsigned)IVM_PEER_LAYOUT);
    ivmd_conn_close(d, c, "other peer message layout");
    return -1;
}

static void ivmd_link_dial(ivmd_link_t *l, ivmd_peer_t *p)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ivmd_conn_t *c;
    int fd;

    if (ivm_sock_inet_addr(p->addr, p->port, &ss, &len) != 0) {
        return; /* checked when the cluster was set */
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ivm_warn("socket for peer %s: %m", p->node);
        return;
    }
    ivmd_link_tune(l, fd);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        ivm_debug("connect to peer %s (%s port %u): %m", p->node, p->addr, (unsigned)p->port);
        close(fd);
        return;
    }
    c = ivmd_conn_create(l->conns, fd, IVMD_CONN_PEER, EPOLLOUT | EPOLLRDHUP);
    if (c == NULL) {
        return;
    }
    c->pstate = IVMD_PEER_CONNECTING;
    c->peer   = p;
    p->conn   = c;
}

/* The dial of a peer connection completed (or failed): say HELLO. */
static void ivmd_link_connected(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_link_t *l = ivmd_conn_owner(c);
    ivm_peer_hello_t hello;
    socklen_t len = sizeof(int);
    int err = 0;

    if (getsockopt(c->h.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        errno = err;
        ivm_debug("connect to peer %s failed: %m", c->peer->node);
        ivmd_conn_close(d, c, "connect failed");
        return;
    }
    ivmd_loop_rewatch(l->loop, &c->h, EPOLLIN | EPOLLRDHUP);
    c->out_armed = 0;
    memset(&hello, 0, sizeof(hello));
    ivm_proto_strset(hello.version, sizeof(hello.version), ivm_version_string());
    ivm_proto_strset(hello.node, sizeof(hello.node), l->cfg.node);
    hello.flags  = ivmd_link_flags(l);
    hello.layout = IVM_PEER_LAYOUT;
    if (ivmd_link_random(c->nonce_a, sizeof(c->nonce_a)) != 0) {
        ivmd_conn_close(d, c, "no random nonce");
        return;
    }
    memcpy(hello.nonce, c->nonce_a, sizeof(hello.nonce));
    c->pstate = IVMD_PEER_HELLO_SENT;
    ivmd_conn_send(d, c, IVM_PEER_HELLO, &hello, sizeof(hello));
}

static void ivmd_link_up(ivmd_link_t *l, ivmd_t *d, ivmd_peer_t *p, ivmd_conn_t *c)
{
    if (p->conn != NULL && p->conn != c) {
        ivmd_conn_close(d, p->conn, "replaced by a newer connection");
    }
    c->pstate   = IVMD_PEER_UP;
    c->peer     = p;
    p->conn     = c;
    p->up       = 1;
    p->failures = 0;
    ivm_info("peer %s is up (link %s)", p->node,
             l->cfg.encrypt ? "encrypted and authenticated" : "authenticated");
    if (l->ops->peer_up != NULL) {
        l->ops->peer_up(d, p);
    }
}

static void ivmd_link_refuse(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_warn_limited("peer connection refused: %s", why);
    ivmd_conn_close(d, c, why);
}

/* HELLO at the acceptor: the dialer's version, name and nonce; answered by
 * CHALLENGE (our nonce and a MAC proving the secret). */
static void ivmd_link_on_hello(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c,
                               const ivm_msg_hdr_t *hdr, const ivm_peer_hello_t *m)
{
    int named = ivm_proto_strok(m->node, sizeof(m->node));
    const char *node = named ? m->node : "?";
    ivm_peer_challenge_t ch;
    ivmd_peer_t *p;

    if (c->pstate != IVMD_PEER_AWAIT_HELLO) {
        ivmd_link_refuse(d, c, "HELLO out of turn");
        return;
    }
    if (!l->have_cluster) {
        /* Launchers configure daemons one by one: the dialer retries. */
        ivm_info("peer connection refused: HELLO before this daemon joined a cluster");
        ivmd_conn_close(d, c, "not in a cluster yet");
        return;
    }
    /* The version first: a daemon of another IVM is named as such. */
    if (ivmd_link_agree(l, d, c, node, m->version, m->flags) != 0) {
        return;
    }
    p = named ? ivmd_link_find(l, m->node) : NULL;
    if (p == NULL || p->self || p->dialer) {
        ivm_warn_limited("peer connection refused: HELLO from '%.64s', which is not a node "
                         "that dials this one", node);
        ivmd_conn_close(d, c, "unknown node");
        return;
    }
    if (ivmd_link_same_layout(d, c, node, m->layout) != 0) {
        return;
    }
    if (hdr->length != sizeof(*m)) {
        ivmd_link_refuse(d, c, "HELLO of the wrong length");
        return;
    }
    c->peer = p; /* not bound to p->conn until authenticated */
    memcpy(c->nonce_a, m->nonce, sizeof(c->nonce_a));
    if (ivmd_link_random(c->nonce_b, sizeof(c->nonce_b)) != 0) {
        ivmd_conn_close(d, c, "no random nonce");
        return;
    }
    memset(&ch, 0, sizeof(ch));
    ivm_proto_strset(ch.version, sizeof(ch.version), ivm_version_string());
    ivm_proto_strset(ch.node, sizeof(ch.node), l->cfg.node);
    memcpy(ch.nonce, c->nonce_b, sizeof(ch.nonce));
    ch.flags  = ivmd_link_flags(l);
    ch.layout = IVM_PEER_LAYOUT;
    if (ivmd_link_mac(l, 'B', c->nonce_a, c->nonce_b, p->node, l->cfg.node, ch.mac) != 0) {
        ivmd_conn_close(d, c, "no MAC");
        return;
    }
    c->pstate = IVMD_PEER_AWAIT_AUTH;
    ivmd_conn_send(d, c, IVM_PEER_CHALLENGE, &ch, sizeof(ch));
}

/* EP_HELLO at the acceptor: a PE of another node opens its endpoint
 * (common/proto.h). Answered in clear by EP_WELCOME with our nonce; every
 * later message either way is sealed with the keys both ends derive from
 * the job's endpoint key, which only the cluster's daemons and the job's
 * PEs have: a forged or replayed endpoint fails its first message. */
static void ivmd_link_on_ep_hello(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c,
                                  const ivm_msg_hdr_t *hdr, const ivm_peer_ep_hello_t *m)
{
    uint8_t key[IVM_CRYPTO_EP_KEY_LEN];
    ivm_peer_ep_welcome_t w;
    int ok;

    if (c->pstate != IVMD_PEER_AWAIT_HELLO) {
        ivmd_link_refuse(d, c, "EP_HELLO out of turn");
        return;
    }
    if (!l->have_cluster || hdr->length != sizeof(*m) || m->layout != IVM_PEER_LAYOUT ||
        m->node >= l->npeers || m->node == l->self_idx || m->pe < 0) {
        ivmd_link_refuse(d, c, !l->have_cluster ? "endpoint before this daemon joined a cluster"
                                                : "malformed EP_HELLO");
        return;
    }
    memcpy(c->nonce_a, m->nonce, sizeof(c->nonce_a));
    if (ivmd_link_random(c->nonce_b, sizeof(c->nonce_b)) != 0) {
        ivmd_conn_close(d, c, "no random nonce");
        return;
    }
    memset(&w, 0, sizeof(w));
    w.flags = ivmd_link_flags(l);
    memcpy(w.nonce, c->nonce_b, sizeof(w.nonce));
    /* In clear: queued before the link is sealed. */
    ivmd_conn_send(d, c, IVM_PEER_EP_WELCOME, &w, sizeof(w));
    ok = ivmd_link_ep_key(l, m->job, key) == IVM_SUCCESS &&
         ivm_aead_ep_init(key, c->nonce_a, c->nonce_b, IVM_PEER_NONCE_LEN, m->job, m->pe, 0,
                          l->cfg.encrypt, &c->tx_aead, &c->rx_aead) == IVM_SUCCESS;
    explicit_bzero(key, sizeof(key));
    if (!ok) {
        ivmd_conn_close(d, c, "no endpoint keys");
        return;
    }
    c->sealed  = 1;
    c->pstate  = IVMD_PEER_ENDPOINT;
    c->ep_job  = m->job;
    c->ep_pe   = m->pe;
    c->ep_node = m->node;
    ivm_debug("endpoint of job %u pe %d (node %s) opened", (unsigned)m->job, (int)m->pe,
              l->peers[m->node].node);
}

ivmError_t ivmd_link_ep_key(const ivmd_link_t *l, uint32_t job,
                            uint8_t key[IVM_CRYPTO_EP_KEY_LEN])
{
    if (!l->have_cluster) {
        return IVM_ERROR_UNSUPPORTED;
    }
    return ivm_crypto_ep_key(l->secret, sizeof(l->secret), job, key);
}

/* mac (received) is the MAC of tag over the nonces and names: else the
 * link is refused (another secret). */
static int ivmd_link_check_mac(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c, char tag,
                               const uint8_t *n1, const uint8_t *n2, const char *dialer,
                               const char *acceptor, const uint8_t *mac)
{
    uint8_t want[32];

    if (ivmd_link_mac(l, tag, n1, n2, dialer, acceptor, want) != 0 ||
        !ivm_crypto_equal(want, mac, sizeof(want))) {
        ivm_warn_limited("peer connection refused: %s failed authentication (wrong cluster "
                         "secret?)", c->peer->node);
        ivmd_conn_close(d, c, "authentication failed");
        return -1;
    }
    return 0;
}

/* CHALLENGE at the dialer: check the acceptor's MAC, answer AUTH, seal. */
static void ivmd_link_on_challenge(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c,
                                   const ivm_peer_challenge_t *m)
{
    const char *self = l->cfg.node;
    ivm_peer_auth_t auth;

    if (c->pstate != IVMD_PEER_HELLO_SENT) {
        ivmd_link_refuse(d, c, "CHALLENGE out of turn");
        return;
    }
    if (!ivm_proto_strok(m->node, sizeof(m->node)) || strcmp(m->node, c->peer->node)) {
        ivm_warn_limited("peer connection refused: %s answered as another node", c->peer->node);
        ivmd_conn_close(d, c, "wrong node");
        return;
    }
    if (ivmd_link_agree(l, d, c, c->peer->node, m->version, m->flags) != 0 ||
        ivmd_link_same_layout(d, c, c->peer->node, m->layout) != 0) {
        return;
    }
    memcpy(c->nonce_b, m->nonce, sizeof(c->nonce_b));
    if (ivmd_link_check_mac(l, d, c, 'B', c->nonce_a, c->nonce_b, self, c->peer->node,
                            m->mac) != 0) {
        return;
    }
    if (ivmd_link_mac(l, 'A', c->nonce_b, c->nonce_a, self, c->peer->node, auth.mac) != 0) {
        ivmd_conn_close(d, c, "no MAC");
        return;
    }
    ivmd_conn_send(d, c, IVM_PEER_AUTH, &auth, sizeof(auth));
    if (ivmd_link_seal(l, c, self, c->peer->node, 1) != 0) {
        ivmd_conn_close(d, c, "no link keys");
        return;
    }
    ivmd_link_up(l, d, c->peer, c);
}

/* AUTH at the acceptor: check the dialer's MAC, seal. */
static void ivmd_link_on_auth(ivmd_link_t *l, ivmd_t *d, ivmd_conn_t *c,
                              const ivm_peer_auth_t *m)
{
    if (c->pstate != IVMD_PEER_AWAIT_AUTH) {
        ivmd_link_refuse(d, c, "AUTH out of turn");
        return;
    }
    if (ivmd_link_check_mac(l, d, c, 'A', c->nonce_b, c->nonce_a, c->peer->node, l->cfg.node,
                            m->mac) != 0) {
        return;
    }
    if (ivmd_link_seal(l, c, c->peer->node, l->cfg.node, 0) != 0) {
        ivmd_conn_close(d, c, "no link keys");
        return;
    }
    ivmd_link_up(l, d, c->peer, c);
}

static void ivmd_link_on_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                             const void *payload)
{
    ivmd_link_t *l = ivmd_conn_owner(c);

    switch (hdr->type) {
    case IVM_PEER_HELLO:
        ivmd_link_on_hello(l, d, c, hdr, payload);
        return;
    case IVM_PEER_EP_HELLO:
        ivmd_link_on_ep_hello(l, d, c, hdr, payload);
        return;
    case IVM_PEER_CHALLENGE:
        ivmd_link_on_challenge(l, d, c, payload);
        return;
    case IVM_PEER_AUTH:
        ivmd_link_on_auth(l, d, c, payload);
        return;
    case IVM_PEER_BYE:
        if (c->pstate == IVMD_PEER_UP) {
            ivm_info("peer %s is shutting down", c->peer->node);
            c->peer->leaving = 1;
        }
        return;
    default:
        break;
    }
    if (c->pstate == IVMD_PEER_ENDPOINT) {
        /* A PE's endpoint: its puts and gets, for the layers above (nothing
         * else). */
        if ((hdr->type == IVM_PEER_EP_PUT || hdr->type == IVM_PEER_EP_GET) &&
            l->ops->on_msg != NULL) {
            c->ep_proved = 1; /* its tag checked */
            l->ops->on_msg(d, c, hdr, payload);
        } else {
            ivmd_link_refuse(d, c, "unexpected message on a PE's endpoint");
        }
    } else if (c->pstate != IVMD_PEER_UP) {
        ivmd_link_refuse(d, c, "message before authentication");
    } else if (hdr->type == IVM_PEER_PING) {
        ivmd_conn_send(d, c, IVM_PEER_PONG, payload, sizeof(ivm_peer_ping_t));
    } else if (hdr->type != IVM_PEER_PONG && l->ops->on_msg != NULL) {
        l->ops->on_msg(d, c, hdr, payload);
    }
}

static void ivmd_link_malformed(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_warn_limited("peer %s sent a malformed message (%s, type %u, length %u): "
                     "connection dropped", c->peer ? c->peer->node : "(unknown)", why,
                     (unsigned)c->hdr.type, (unsigned)c->hdr.length);
}

static void ivmd_link_bad_seal(ivmd_t *d, ivmd_conn_t *c, ivmError_t status)
{
    ivm_warn_limited("peer %s: message %llu (type %u, length %u) failed authentication (%s): "
                     "closing the link", c->peer ? c->peer->node : "(unknown)",
                     (unsigned long long)c->rx_aead.seq, (unsigned)c->hdr.type,
                     (unsigned)c->hdr.length,
                     status == IVM_ERROR_LIMIT
                         ? "message counter spent"
                         : "bad MAC: changed, forged, replayed, reordered or cut");
}

/* A peer connection closed: the peer is lost (if it was up), and redialed
 * with backoff. */
static void ivmd_link_on_close(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivmd_link_t *l = ivmd_conn_owner(c);
    ivmd_peer_t *p = c->peer;
    uint64_t delay;

    if (p == NULL || p->conn != c) {
        return;
    }
    p->conn = NULL;
    if (p->up) {
        if (*l->stopping || p->leaving) {
            ivm_info("peer %s closed", p->node);
        } else {
            ivm_warn("peer %s lost", p->node);
        }
        p->up       = 0;
        p->failures = 0;
        if (l->ops->peer_lost != NULL) {
            l->ops->peer_lost(d, p);
        }
    } else {
        ++p->failures;
    }
    delay = IVMD_PEER_REDIAL_NS << (p->failures < 4 ? p->failures : 4);
    p->next_dial_ns = ivmd_now_ns() + (delay < IVMD_PEER_REDIAL_MAX_NS ? delay
                                                                       : IVMD_PEER_REDIAL_MAX_NS);
}

static const ivmd_conn_ops_t ivmd_link_conn_ops = {
    .name         = "peer link",
    .flags        = IVMD_CONN_F_BULK_READ,
    .out_limit    = IVMD_CONN_PEER_OUT_LIMIT,
    .check_hdr    = ivm_proto_check_peer,
    .on_msg       = ivmd_link_on_msg,
    .on_close     = ivmd_link_on_close,
    .on_malformed = ivmd_link_malformed,
    .on_bad_seal  = ivmd_link_bad_seal,
    .on_connected = ivmd_link_connected,
    .hdr_pack     = ivm_peer_hdr_pack,
    .hdr_unpack   = ivm_peer_hdr_unpack,
    .msg_pack     = ivm_peer_pack,
    .msg_unpack   = ivm_peer_unpack,
};

/* One peer connection's deadlines: authentication, silence, ping. */
static void ivmd_link_check_conn(ivmd_t *d, ivmd_conn_t *c, uint64_t now)
{
    if (c->pstate == IVMD_PEER_ENDPOINT && c->ep_proved) {
        return; /* a PE's: it may stay quiet; its PE's end closes it */
    }
    if (c->pstate != IVMD_PEER_UP) {
        if (now - c->opened_ns > IVMD_PEER_AUTH_TIMEOUT_NS) {
            ivm_warn_limited("peer connection from %s dropped: not authenticated within 5 s",
                             c->peer ? c->peer->node : "an unknown node");
            ivmd_conn_close(d, c, "authentication timeout");
        }
        return;
    }
    if (now - c->last_rx_ns > IVMD_PEER_LOST_NS) {
        ivm_warn("peer %s silent for 5 s", c->peer->node);
        ivmd_conn_close(d, c, "heartbeat timeout");
        return;
    }
    if (now - c->last_tx_ns > IVMD_PEER_PING_NS) {
        ivm_peer_ping_t ping = {.sent_ns = now};
        ivmd_conn_send(d, c, IVM_PEER_PING, &ping, sizeof(ping));
    }
}

/* Heartbeats, authentication deadlines, dials. */
static void ivmd_link_tick(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_link_t *l = arg;
    uint64_t ticks, now = ivmd_now_ns();
    ivmd_conn_t *c, *next;
    uint32_t i;

    if (read(l->tick_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
        return;
    }
    for (c = l->conns->head; c != NULL; c = next) {
        next = c->next;
        if (c->kind == IVMD_CONN_PEER && !c->closed) {
            ivmd_link_check_conn(d, c, now);
        }
    }
    for (i = 0; i < l->npeers; ++i) {
        ivmd_peer_t *p = &l->peers[i];
        if (p->dialer && p->conn == NULL && now >= p->next_dial_ns) {
            ivmd_link_dial(l, p);
        }
    }
}

/* The CLUSTER table: names and addresses well formed, no name twice, this
 * node named (its index in *self_p) with the port it listens on. */
static ivmError_t ivmd_link_check_nodes(const ivmd_link_t *l, const ivm_msg_cluster_req_t *req,
                                        int *self_p, char *detail, size_t detail_len)
{
    const ivm_msg_cluster_node_t *nodes = (const ivm_msg_cluster_node_t *)(req + 1);
    struct sockaddr_storage ss;
    socklen_t len;
    uint32_t i, j;

    *self_p = -1;
    for (i = 0; i < req->n; ++i) {
        if (!ivm_proto_strok(nodes[i].node, sizeof(nodes[i].node)) || !nodes[i].node[0] ||
            !ivm_proto_strok(nodes[i].addr, sizeof(nodes[i].addr))) {
            snprintf(detail, detail_len, "cluster node %u: bad name or address", i);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (ivm_sock_inet_addr(nodes[i].addr, nodes[i].port, &ss, &len) != 0 ||
            nodes[i].port == 0) {
            snprintf(detail, detail_len, "cluster node %s: '%s' port %u is not a numeric "
                     "address with a port", nodes[i].node, nodes[i].addr,
                     (unsigned)nodes[i].port);
            return IVM_ERROR_INVALID_VALUE;
        }
        if (nodes[i].max_slots != 0 && nodes[i].slots > nodes[i].max_slots) {
            snprintf(detail, detail_len, "cluster node %s: slots %u above max_slots %u",
                     nodes[i].node, (unsigned)nodes[i].slots, (unsigned)nodes[i].max_slots);
            return IVM_ERROR_INVALID_VALUE;
        }
        for (j = 0; j < i; ++j) {
            if (strcmp(nodes[i].node, nodes[j].node) == 0) {
                snprintf(detail, detail_len, "node %s appears twice", nodes[i].node);
                return IVM_ERROR_INVALID_VALUE;
            }
        }
        if (strcmp(nodes[i].node, l->cfg.node) == 0) {
            *self_p = (int)i;
        }
    }
    if (*self_p < 0) {
        snprintf(detail, detail_len, "the cluster does not name this node (%s)", l->cfg.node);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (nodes[*self_p].port != l->tcp_port) {
        snprintf(detail, detail_len, "the cluster gives %s port %u, but it listens on %u",
                 l->cfg.node, (unsigned)nodes[*self_p].port, (unsigned)l->tcp_port);
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

/* A second CLUSTER: the same table and secret again, or another cluster. */
static int ivmd_link_same_cluster(const ivmd_link_t *l, const ivm_msg_cluster_req_t *req)
{
    const ivm_msg_cluster_node_t *nodes = (const ivm_msg_cluster_node_t *)(req + 1);
    int same = (req->n == l->npeers) &&
               ivm_crypto_equal(req->secret, l->secret, sizeof(l->secret));
    uint32_t i;

    for (i = 0; same && i < req->n; ++i) {
        same = strcmp(nodes[i].node, l->peers[i].node) == 0 &&
               strcmp(nodes[i].addr, l->peers[i].addr) == 0 && nodes[i].port == l->peers[i].port &&
               nodes[i].slots == l->peers[i].slots && nodes[i].max_slots == l->peers[i].max_slots;
    }
    return same;
}

ivmError_t ivmd_link_set_cluster(ivmd_link_t *l, ivmd_t *d, const ivm_msg_cluster_req_t *req,
                                 char *detail, size_t detail_len)
{
    const ivm_msg_cluster_node_t *nodes = (const ivm_msg_cluster_node_t *)(req + 1);
    ivmd_peer_t *peers;
    ivmError_t status;
    uint32_t i;
    int self;

    if (l->tcp_fd < 0) {
        snprintf(detail, detail_len, "this daemon does not accept peers (start it with "
                                     "--listen HOST:PORT)");
        return IVM_ERROR_UNSUPPORTED;
    }
    status = ivmd_link_check_nodes(l, req, &self, detail, detail_len);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (l->have_cluster) {
        if (ivmd_link_same_cluster(l, req)) {
            return IVM_SUCCESS;
        }
        snprintf(detail, detail_len, "this daemon is already part of another cluster");
        return IVM_ERROR_EXISTS;
    }
    peers = calloc(req->n, sizeof(*peers));
    if (peers == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    for (i = 0; i < req->n; ++i) {
        memcpy(peers[i].node, nodes[i].node, sizeof(peers[i].node));
        memcpy(peers[i].addr, nodes[i].addr, sizeof(peers[i].addr));
        peers[i].port      = nodes[i].port;
        peers[i].slots     = nodes[i].slots;
        peers[i].max_slots = nodes[i].max_slots;
        peers[i].self      = ((int)i == self);
        peers[i].dialer    = !peers[i].self && strcmp(l->cfg.node, nodes[i].node) < 0;
    }
    memcpy(l->secret, req->secret, sizeof(l->secret));
    l->peers        = peers;
    l->npeers       = req->n;
    l->self_idx     = (uint32_t)self;
    l->have_cluster = 1;
    if (l->ops->joined != NULL) {
        l->ops->joined(d, (uint32_t)self);
    }
    ivm_info("joined a cluster of %u nodes", req->n);
    for (i = 0; i < l->npeers; ++i) {
        if (l->peers[i].dialer) {
            ivmd_link_dial(l, &l->peers[i]);
        }
    }
    return IVM_SUCCESS;
}
