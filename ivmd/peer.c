/* Peer daemons: the TCP listener, the cluster table (CLUSTER), dialing with
 * backoff (the node whose name sorts lower dials, so each pair has one
 * connection), mutual HMAC-SHA-256 authentication over the cluster secret,
 * and heartbeats. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "version.h"
#include "ivmd.h"
#include "log.h"

#define IVMD_PEER_AUTH_TIMEOUT_NS (5ull * 1000000000ull) /* to finish authenticating */
#define IVMD_PEER_PING_NS         (1ull * 1000000000ull) /* idle time before a PING */
#define IVMD_PEER_LOST_NS         (5ull * 1000000000ull) /* silence = peer lost */
#define IVMD_PEER_REDIAL_NS       (200ull * 1000000ull)  /* first redial delay */
#define IVMD_PEER_REDIAL_MAX_NS   (2ull * 1000000000ull)

uint32_t ivmd_peer_count_up(const ivmd_t *d)
{
    uint32_t i, up = 0;

    for (i = 0; i < d->npeers; ++i) {
        up += (uint32_t)d->peers[i].up;
    }
    return up;
}

/* "host:port", "[v6]:port". */
static int ivmd_peer_parse_addr(const char *text, struct sockaddr_storage *ss,
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
    memset(ss, 0, sizeof(*ss));
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        host[strlen(host) - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1) {
            return -1;
        }
        a6->sin6_family = AF_INET6;
        a6->sin6_port   = htons((uint16_t)port);
        *len_p          = sizeof(*a6);
        return 0;
    }
    {
        struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1) {
            return -1;
        }
        a4->sin_family = AF_INET;
        a4->sin_port   = htons((uint16_t)port);
        *len_p         = sizeof(*a4);
    }
    return 0;
}

static void ivmd_peer_tick(ivmd_t *d, void *arg, uint32_t events);
static void ivmd_peer_accept(ivmd_t *d, void *arg, uint32_t events);

ivmError_t ivmd_peer_listen(ivmd_t *d)
{
    struct itimerspec every = {.it_interval = {.tv_nsec = 250000000},
                               .it_value    = {.tv_nsec = 250000000}};
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;

    if (*d->cfg.listen == '\0') {
        return IVM_SUCCESS;
    }
    if (ivmd_peer_parse_addr(d->cfg.listen, &ss, &len) != 0) {
        ivm_error("--listen %s: expected a numeric HOST:PORT (e.g. 127.0.0.1:0)",
                  d->cfg.listen);
        return IVM_ERROR_INVALID_VALUE;
    }
    d->tcp_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->tcp_fd < 0) {
        ivm_error("socket: %m");
        return IVM_ERROR_INTERNAL;
    }
    setsockopt(d->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(d->tcp_fd, (struct sockaddr *)&ss, len) != 0 || listen(d->tcp_fd, 64) != 0) {
        ivm_error("cannot listen on %s: %m", d->cfg.listen);
        return IVM_ERROR_PERMISSION;
    }
    len = sizeof(ss);
    getsockname(d->tcp_fd, (struct sockaddr *)&ss, &len);
    d->tcp_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
    d->tcp_h = (ivmd_handler_t){.fd = d->tcp_fd, .cb = ivmd_peer_accept};
    if (ivmd_loop_add(d, &d->tcp_h, EPOLLIN) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    d->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (d->tick_fd < 0 || timerfd_settime(d->tick_fd, 0, &every, NULL) != 0) {
        ivm_error("timerfd: %m");
        return IVM_ERROR_INTERNAL;
    }
    d->tick_h = (ivmd_handler_t){.fd = d->tick_fd, .cb = ivmd_peer_tick};
    ivm_info("accepting peer daemons on port %u", (unsigned)d->tcp_port);
    return ivmd_loop_add(d, &d->tick_h, EPOLLIN);
}

void ivmd_peer_say_bye(ivmd_t *d)
{
    ivm_peer_job_t bye = {0};
    uint32_t i;

    for (i = 0; i < d->npeers; ++i) {
        if (d->peers[i].up && d->peers[i].conn != NULL) {
            ivmd_conn_send(d, d->peers[i].conn, IVM_PEER_BYE, &bye, sizeof(bye));
        }
    }
}

void ivmd_peer_close_all(ivmd_t *d)
{
    if (d->tcp_fd >= 0) {
        close(d->tcp_fd);
        d->tcp_fd = -1;
    }
    if (d->tick_fd >= 0) {
        close(d->tick_fd);
        d->tick_fd = -1;
    }
    free(d->peers);
    d->peers  = NULL;
    d->npeers = 0;
}

static void ivmd_peer_accept(ivmd_t *d, void *arg, uint32_t events)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint8_t src[16];
    ivmd_conn_t *c;
    int fd, one = 1;

    for (;;) {
        len = sizeof(ss);
        fd  = accept4(d->tcp_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                ivmd_limits_accept_pause(d, &d->tcp_h, "peer connections");
            } else if (errno != EAGAIN && errno != EINTR) {
                ivm_warn_limited("accept (peers): %m");
            }
            return;
        }
        if (!ivmd_limits_peer_admit(d, &ss, src) || !ivmd_limits_conn_fd_ok(d, fd)) {
            /* Over the per-source limits: closed at once, no line of its own. */
            ivm_warn_limited("peer connections closed at once: a source over its limits "
                             "(--preauth-per-source %ld, --preauth-rate %ld) or no fd left",
                             d->cfg.preauth_per_source, d->cfg.preauth_rate);
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = ivmd_conn_open(d, fd, IVMD_CONN_PEER, EPOLLIN | EPOLLRDHUP);
        if (c != NULL) {
            c->pstate = IVMD_PEER_AWAIT_HELLO;
            memcpy(c->src, src, sizeof(c->src));
        }
    }
}

static ivmd_peer_t *ivmd_peer_find(ivmd_t *d, const char *node)
{
    uint32_t i;

    for (i = 0; i < d->npeers; ++i) {
        if (strcmp(d->peers[i].node, node) == 0) {
            return &d->peers[i];
        }
    }
    return NULL;
}

static const char *ivmd_peer_self(const ivmd_t *d)
{
    return d->cfg.node;
}

/* This daemon's link flags (IVM_PEER_ENCRYPT). */
static uint32_t ivmd_peer_flags(const ivmd_t *d)
{
    return d->cfg.peer_encrypt ? IVM_PEER_ENCRYPT : 0;
}

/* HMAC over tag, two nonces, both names (dialer's first) and the link's
 * flags, so that nobody between the daemons can turn encryption off. */
static int ivmd_peer_mac(const ivmd_t *d, char tag, const uint8_t *n1, const uint8_t *n2,
                         const char *dialer, const char *acceptor, uint8_t *out)
{
    uint8_t msg[1 + 2 * IVM_PEER_NONCE_LEN + 2 * (IVM_HOST_MAX + 1) + 1];

    memset(msg, 0, sizeof(msg));
    msg[0] = (uint8_t)tag;
    memcpy(msg + 1, n1, IVM_PEER_NONCE_LEN);
    memcpy(msg + 1 + IVM_PEER_NONCE_LEN, n2, IVM_PEER_NONCE_LEN);
    strncpy((char *)msg + 1 + 2 * IVM_PEER_NONCE_LEN, dialer, IVM_HOST_MAX);
    strncpy((char *)msg + 1 + 2 * IVM_PEER_NONCE_LEN + IVM_HOST_MAX + 1, acceptor,
            IVM_HOST_MAX);
    msg[sizeof(msg) - 1] = (uint8_t)ivmd_peer_flags(d);
    return ivm_crypto_hmac(d->secret, sizeof(d->secret), msg, sizeof(msg), out) ==
                   IVM_SUCCESS ? 0 : -1;
}

static int ivmd_peer_random(uint8_t *buf, size_t len)
{
    return ivm_crypto_random(buf, len) == IVM_SUCCESS ? 0 : -1;
}

/* After the handshake: one key per direction, HKDF-SHA-256 of the cluster
 * secret salted with both nonces and bound to both names; from now on every
 * message of the link is sealed (conn.c). */
static int ivmd_peer_seal(ivmd_t *d, ivmd_conn_t *c, const char *dialer, const char *acceptor,
                          int we_dial)
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
        if (ivm_crypto_hkdf(d->secret, sizeof(d->secret), salt, sizeof(salt), info[k],
                            (size_t)n[k], keys[k], sizeof(keys[k])) != IVM_SUCCESS) {
            rc = -1;
        }
    }
    /* Each direction's 44 bytes: its key, then its IV. */
    if (rc == 0 && ivm_aead_init(&c->tx_aead, keys[we_dial ? 0 : 1],
                                 keys[we_dial ? 0 : 1] + IVM_CRYPTO_KEY_LEN,
                                 d->cfg.peer_encrypt) == IVM_SUCCESS) {
        if (ivm_aead_init(&c->rx_aead, keys[we_dial ? 1 : 0],
                          keys[we_dial ? 1 : 0] + IVM_CRYPTO_KEY_LEN,
                          d->cfg.peer_encrypt) == IVM_SUCCESS) {
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
static int ivmd_peer_agree(ivmd_t *d, ivmd_conn_t *c, const char *node, const char *version,
                           uint32_t flags)
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
    if ((flags & IVM_PEER_ENCRYPT) != ivmd_peer_flags(d)) {
        ivm_warn_limited("peer connection refused: %s %s its links, this daemon %s "
                         "(give every daemon the same --peer-encrypt)", node,
                         (flags & IVM_PEER_ENCRYPT) ? "encrypts" : "does not encrypt",
                         d->cfg.peer_encrypt ? "does" : "does not");
        ivmd_conn_close(d, c, "encryption setting differs");
        return -1;
    }
    return 0;
}

static void ivmd_peer_dial(ivmd_t *d, ivmd_peer_t *p)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char text[96];
    ivmd_conn_t *c;
    int fd, one = 1;

    snprintf(text, sizeof(text), strchr(p->addr, ':') ? "[%s]:%u" : "%s:%u", p->addr,
             (unsigned)p->port);
    if (ivmd_peer_parse_addr(text, &ss, &len) != 0) {
        return; /* checked when the cluster was set */
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ivm_warn("socket for peer %s: %m", p->node);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        ivm_debug("connect to peer %s (%s): %m", p->node, text);
        close(fd);
        return;
    }
    c = ivmd_conn_open(d, fd, IVMD_CONN_PEER, EPOLLOUT | EPOLLRDHUP);
    if (c == NULL) {
        return;
    }
    c->pstate = IVMD_PEER_CONNECTING;
    c->peer   = p;
    p->conn   = c;
}

void ivmd_peer_connected(ivmd_t *d, ivmd_conn_t *c)
{
    ivm_peer_hello_t hello;
    socklen_t len = sizeof(int);
    int err = 0;

    if (getsockopt(c->h.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        errno = err;
        ivm_debug("connect to peer %s failed: %m", c->peer->node);
        ivmd_conn_close(d, c, "connect failed");
        return;
    }
    ivmd_loop_mod(d, &c->h, EPOLLIN | EPOLLRDHUP);
    c->out_armed = 0;
    memset(&hello, 0, sizeof(hello));
    ivm_proto_strset(hello.version, sizeof(hello.version), ivm_version_string());
    ivm_proto_strset(hello.node, sizeof(hello.node), ivmd_peer_self(d));
    hello.flags = ivmd_peer_flags(d);
    if (ivmd_peer_random(c->nonce_a, sizeof(c->nonce_a)) != 0) {
        ivmd_conn_close(d, c, "no random nonce");
        return;
    }
    memcpy(hello.nonce, c->nonce_a, sizeof(hello.nonce));
    c->pstate = IVMD_PEER_HELLO_SENT;
    ivmd_conn_send(d, c, IVM_PEER_HELLO, &hello, sizeof(hello));
}

static void ivmd_peer_up(ivmd_t *d, ivmd_peer_t *p, ivmd_conn_t *c)
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
             d->cfg.peer_encrypt ? "encrypted and authenticated" : "authenticated");
    ivmd_cluster_peer_up(d, p);
}

static void ivmd_peer_refuse(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_warn_limited("peer connection refused: %s", why);
    ivmd_conn_close(d, c, why);
}

void ivmd_peer_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                          const void *payload)
{
    uint8_t mac[32];

    switch (hdr->type) {
    case IVM_PEER_HELLO: {
        const ivm_peer_hello_t *m = payload;
        ivm_peer_challenge_t ch;
        ivmd_peer_t *p;

        if (c->pstate != IVMD_PEER_AWAIT_HELLO) {
            ivmd_peer_refuse(d, c, "HELLO out of turn");
            return;
        }
        if (!d->have_cluster) {
            /* Launchers configure daemons one by one: the dialer retries. */
            ivm_info("peer connection refused: HELLO before this daemon joined a cluster");
            ivmd_conn_close(d, c, "not in a cluster yet");
            return;
        }
        /* The version first: a daemon of another IVM is named as such. */
        if (ivmd_peer_agree(d, c, ivm_proto_strok(m->node, sizeof(m->node)) ? m->node : "?",
                            m->version, m->flags) != 0) {
            return;
        }
        if (!ivm_proto_strok(m->node, sizeof(m->node)) ||
            (p = ivmd_peer_find(d, m->node)) == NULL || p->self || p->dialer) {
            ivm_warn_limited("peer connection refused: HELLO from '%.64s', which is not a node "
                             "that dials this one", ivm_proto_strok(m->node, sizeof(m->node))
                                                         ? m->node : "?");
            ivmd_conn_close(d, c, "unknown node");
            return;
        }
        if (hdr->length != sizeof(*m)) {
            ivmd_peer_refuse(d, c, "HELLO of the wrong length");
            return;
        }
        c->peer = p; /* not bound to p->conn until authenticated */
        memcpy(c->nonce_a, m->nonce, sizeof(c->nonce_a));
        if (ivmd_peer_random(c->nonce_b, sizeof(c->nonce_b)) != 0) {
            ivmd_conn_close(d, c, "no random nonce");
            return;
        }
        memset(&ch, 0, sizeof(ch));
        ivm_proto_strset(ch.version, sizeof(ch.version), ivm_version_string());
        ivm_proto_strset(ch.node, sizeof(ch.node), ivmd_peer_self(d));
        memcpy(ch.nonce, c->nonce_b, sizeof(ch.nonce));
        ch.flags = ivmd_peer_flags(d);
        if (ivmd_peer_mac(d, 'B', c->nonce_a, c->nonce_b, p->node, ivmd_peer_self(d),
                          ch.mac) != 0) {
            ivmd_conn_close(d, c, "no MAC");
            return;
        }
        c->pstate = IVMD_PEER_AWAIT_AUTH;
        ivmd_conn_send(d, c, IVM_PEER_CHALLENGE, &ch, sizeof(ch));
        return;
    }
    case IVM_PEER_CHALLENGE: {
        const ivm_peer_challenge_t *m = payload;
        ivm_peer_auth_t auth;

        if (c->pstate != IVMD_PEER_HELLO_SENT) {
            ivmd_peer_refuse(d, c, "CHALLENGE out of turn");
            return;
        }
        if (!ivm_proto_strok(m->node, sizeof(m->node)) || strcmp(m->node, c->peer->node)) {
            ivm_warn_limited("peer connection refused: %s answered as another node", c->peer->node);
            ivmd_conn_close(d, c, "wrong node");
            return;
        }
        if (ivmd_peer_agree(d, c, c->peer->node, m->version, m->flags) != 0) {
            return;
        }
        memcpy(c->nonce_b, m->nonce, sizeof(c->nonce_b));
        if (ivmd_peer_mac(d, 'B', c->nonce_a, c->nonce_b, ivmd_peer_self(d), c->peer->node,
                          mac) != 0 ||
            !ivm_crypto_equal(mac, m->mac, sizeof(mac))) {
            ivm_warn_limited("peer connection refused: %s failed authentication (wrong cluster "
                             "secret?)", c->peer->node);
            ivmd_conn_close(d, c, "authentication failed");
            return;
        }
        if (ivmd_peer_mac(d, 'A', c->nonce_b, c->nonce_a, ivmd_peer_self(d), c->peer->node,
                          auth.mac) != 0) {
            ivmd_conn_close(d, c, "no MAC");
            return;
        }
        ivmd_conn_send(d, c, IVM_PEER_AUTH, &auth, sizeof(auth));
        if (ivmd_peer_seal(d, c, ivmd_peer_self(d), c->peer->node, 1) != 0) {
            ivmd_conn_close(d, c, "no link keys");
            return;
        }
        ivmd_peer_up(d, c->peer, c);
        return;
    }
    case IVM_PEER_AUTH: {
        const ivm_peer_auth_t *m = payload;

        if (c->pstate != IVMD_PEER_AWAIT_AUTH) {
            ivmd_peer_refuse(d, c, "AUTH out of turn");
            return;
        }
        if (ivmd_peer_mac(d, 'A', c->nonce_b, c->nonce_a, c->peer->node, ivmd_peer_self(d),
                          mac) != 0 ||
            !ivm_crypto_equal(mac, m->mac, sizeof(mac))) {
            ivm_warn_limited("peer connection refused: %s failed authentication (wrong cluster "
                             "secret?)", c->peer->node);
            ivmd_conn_close(d, c, "authentication failed");
            return;
        }
        if (ivmd_peer_seal(d, c, c->peer->node, ivmd_peer_self(d), 0) != 0) {
            ivmd_conn_close(d, c, "no link keys");
            return;
        }
        ivmd_peer_up(d, c->peer, c);
        return;
    }
    case IVM_PEER_BYE:
        if (c->pstate == IVMD_PEER_UP) {
            ivm_info("peer %s is shutting down", c->peer->node);
            c->peer->leaving = 1;
        }
        return;
    case IVM_PEER_PING:
    case IVM_PEER_PONG:
        if (c->pstate != IVMD_PEER_UP) {
            ivmd_peer_refuse(d, c, "message before authentication");
            return;
        }
        if (hdr->type == IVM_PEER_PING) {
            ivmd_conn_send(d, c, IVM_PEER_PONG, payload, sizeof(ivm_peer_ping_t));
        }
        return;
    default:
        if (c->pstate != IVMD_PEER_UP) {
            ivmd_peer_refuse(d, c, "message before authentication");
            return;
        }
        ivmd_cluster_handle_msg(d, c, hdr, payload);
    }
}

static void ivmd_peer_malformed(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivm_warn_limited("peer %s sent a malformed message (%s, type %u, length %u): "
                     "connection dropped", c->peer ? c->peer->node : "(unknown)", why,
                     (unsigned)c->hdr.type, (unsigned)c->hdr.length);
}

static void ivmd_peer_bad_seal(ivmd_t *d, ivmd_conn_t *c, ivmError_t status)
{
    ivm_warn_limited("peer %s: message %llu (type %u, length %u) failed authentication (%s): "
                     "closing the link", c->peer ? c->peer->node : "(unknown)",
                     (unsigned long long)c->rx_aead.seq, (unsigned)c->hdr.type,
                     (unsigned)c->hdr.length,
                     status == IVM_ERROR_LIMIT
                         ? "message counter spent"
                         : "bad MAC: changed, forged, replayed, reordered or cut");
}

static void ivmd_peer_on_close(ivmd_t *d, ivmd_conn_t *c, const char *why)
{
    ivmd_peer_disconnect(d, c);
}

const ivmd_conn_ops_t ivmd_peer_conn_ops = {
    .name         = "peer link",
    .flags        = IVMD_CONN_F_BULK_READ,
    .out_limit    = IVMD_CONN_PEER_OUT_LIMIT,
    .check_hdr    = ivm_proto_check_peer,
    .on_msg       = ivmd_peer_handle_msg,
    .on_close     = ivmd_peer_on_close,
    .on_malformed = ivmd_peer_malformed,
    .on_bad_seal  = ivmd_peer_bad_seal,
    .on_connected = ivmd_peer_connected,
};

void ivmd_peer_disconnect(ivmd_t *d, ivmd_conn_t *c)
{
    ivmd_peer_t *p = c->peer;
    uint64_t delay;

    if (p == NULL || p->conn != c) {
        return;
    }
    p->conn = NULL;
    if (p->up) {
        if (d->stopping || p->leaving) {
            ivm_info("peer %s closed", p->node);
        } else {
            ivm_warn("peer %s lost", p->node);
        }
        p->up       = 0;
        p->failures = 0;
        ivmd_cluster_peer_lost(d, p);
    } else {
        ++p->failures;
    }
    delay = IVMD_PEER_REDIAL_NS << (p->failures < 4 ? p->failures : 4);
    p->next_dial_ns = ivmd_now_ns() + (delay < IVMD_PEER_REDIAL_MAX_NS ? delay
                                                                       : IVMD_PEER_REDIAL_MAX_NS);
}

/* Heartbeats, authentication deadlines, dials. */
static void ivmd_peer_tick(ivmd_t *d, void *arg, uint32_t events)
{
    uint64_t ticks, now = ivmd_now_ns();
    ivmd_conn_t *c, *next;
    uint32_t i;

    if (read(d->tick_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
        return;
    }
    for (c = d->conns.head; c != NULL; c = next) {
        next = c->next;
        if (c->kind != IVMD_CONN_PEER || c->closed) {
            continue;
        }
        if (c->pstate != IVMD_PEER_UP) {
            if (now - c->opened_ns > IVMD_PEER_AUTH_TIMEOUT_NS) {
                ivm_warn_limited("peer connection from %s dropped: not authenticated within 5 s",
                                 c->peer ? c->peer->node : "an unknown node");
                ivmd_conn_close(d, c, "authentication timeout");
            }
            continue;
        }
        if (now - c->last_rx_ns > IVMD_PEER_LOST_NS) {
            ivm_warn("peer %s silent for 5 s", c->peer->node);
            ivmd_conn_close(d, c, "heartbeat timeout");
            continue;
        }
        if (now - c->last_tx_ns > IVMD_PEER_PING_NS) {
            ivm_peer_ping_t ping = {.sent_ns = now};
            ivmd_conn_send(d, c, IVM_PEER_PING, &ping, sizeof(ping));
        }
    }
    for (i = 0; i < d->npeers; ++i) {
        ivmd_peer_t *p = &d->peers[i];
        if (p->dialer && p->conn == NULL && now >= p->next_dial_ns) {
            ivmd_peer_dial(d, p);
        }
    }
}

ivmError_t ivmd_peer_set_cluster(ivmd_t *d, const ivm_msg_cluster_req_t *req,
                                 char *detail, size_t detail_len)
{
    const ivm_msg_cluster_node_t *nodes = (const ivm_msg_cluster_node_t *)(req + 1);
    ivmd_peer_t *peers;
    uint32_t i, j;
    int self = -1;

    if (d->tcp_fd < 0) {
        snprintf(detail, detail_len, "this daemon does not accept peers (start it with "
                                     "--listen HOST:PORT)");
        return IVM_ERROR_UNSUPPORTED;
    }
    for (i = 0; i < req->n; ++i) {
        struct sockaddr_storage ss;
        socklen_t len;
        char text[96];
        if (!ivm_proto_strok(nodes[i].node, sizeof(nodes[i].node)) || !nodes[i].node[0] ||
            !ivm_proto_strok(nodes[i].addr, sizeof(nodes[i].addr))) {
            snprintf(detail, detail_len, "cluster node %u: bad name or address", i);
            return IVM_ERROR_INVALID_VALUE;
        }
        snprintf(text, sizeof(text), strchr(nodes[i].addr, ':') ? "[%s]:%u" : "%s:%u",
                 nodes[i].addr, (unsigned)nodes[i].port);
        if (ivmd_peer_parse_addr(text, &ss, &len) != 0 || nodes[i].port == 0) {
            snprintf(detail, detail_len, "cluster node %s: '%s' is not a numeric address "
                     "with a port", nodes[i].node, text);
            return IVM_ERROR_INVALID_VALUE;
        }
        for (j = 0; j < i; ++j) {
            if (strcmp(nodes[i].node, nodes[j].node) == 0) {
                snprintf(detail, detail_len, "node %s appears twice", nodes[i].node);
                return IVM_ERROR_INVALID_VALUE;
            }
        }
        if (strcmp(nodes[i].node, d->cfg.node) == 0) {
            self = (int)i;
        }
    }
    if (self < 0) {
        snprintf(detail, detail_len, "the cluster does not name this node (%s)", d->cfg.node);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (nodes[self].port != d->tcp_port) {
        snprintf(detail, detail_len, "the cluster gives %s port %u, but it listens on %u",
                 d->cfg.node, (unsigned)nodes[self].port, (unsigned)d->tcp_port);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (d->have_cluster) {
        int same = (req->n == d->npeers) &&
                   ivm_crypto_equal(req->secret, d->secret, sizeof(d->secret));
        for (i = 0; same && i < req->n; ++i) {
            same = strcmp(nodes[i].node, d->peers[i].node) == 0 &&
                   strcmp(nodes[i].addr, d->peers[i].addr) == 0 &&
                   nodes[i].port == d->peers[i].port;
        }
        if (same) {
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
        peers[i].port   = nodes[i].port;
        peers[i].self   = ((int)i == self);
        peers[i].dialer = !peers[i].self && strcmp(d->cfg.node, nodes[i].node) < 0;
    }
    memcpy(d->secret, req->secret, sizeof(d->secret));
    d->peers        = peers;
    d->npeers       = req->n;
    d->self_idx     = (uint32_t)self;
    d->have_cluster = 1;
    if (d->reg.njobs == 0) {
        /* Job ids name their root daemon's node: unique in the cluster. */
        d->reg.next_job_id = ((uint32_t)self << IVMD_JOB_NODE_SHIFT) + 1;
    }
    ivm_info("joined a cluster of %u nodes", req->n);
    for (i = 0; i < d->npeers; ++i) {
        if (d->peers[i].dialer) {
            ivmd_peer_dial(d, &d->peers[i]);
        }
    }
    return IVM_SUCCESS;
}
