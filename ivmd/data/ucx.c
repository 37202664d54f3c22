/*
 * UCX as the data plane's transport (data/ucx.h). State: ivmd_ucx_t (off
 * dp->ucx): the context and worker, an endpoint per node, our registered
 * copies by object id, the peers' keys by (node, object), and the one-sided
 * operations in flight. UCX's callbacks only mark an operation done; what it
 * means for the data plane (a message, an operation's step) runs after
 * ucp_worker_progress returns, so no UCX call is made from inside UCX.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/group.h"
#include "data/op.h"
#include "data/ucx.h"
#include "log.h"

#ifdef IVM_HAVE_UCX

#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>
#include <uthash.h>

/* One of our copies, registered. */
typedef struct ivmd_ucx_reg {
    UT_hash_handle hh;
    uint64_t       obj;      /* object id here */
    uint32_t       job;
    void          *addr;     /* our MAP_SHARED mapping of its memfd */
    size_t         size;
    ucp_mem_h      memh;
    void          *rkey_buf; /* packed once, sent to each node that needs it */
    size_t         rkey_len;
    uint64_t       offered;  /* bit n: node n has the key (nodes < 64) */
    unsigned       inflight; /* one-sided operations using it */
    int            gone;     /* the copy is gone: freed with the last operation */
} ivmd_ucx_reg_t;

/* A peer's copy: where it is, its key (unpacked at first use). */
typedef struct ivmd_ucx_rkey_id {
    uint64_t obj;  /* object id at the peer */
    uint32_t node;
    uint32_t zero;
} ivmd_ucx_rkey_id_t;

typedef struct ivmd_ucx_rkey {
    UT_hash_handle     hh;
    ivmd_ucx_rkey_id_t id;
    uint64_t           base, size;
    void              *packed;
    uint32_t           len;
    ucp_rkey_h         rkey;
} ivmd_ucx_rkey_t;

typedef struct ivmd_ucx_peer {
    ucp_ep_h ep;
    int      failed; /* the endpoint reported an error: closed at the next progress */
} ivmd_ucx_peer_t;

/* A put or get in flight (UCX's user_data of its flush). */
typedef struct ivmd_ucx_req {
    struct ivmd_ucx_req *next, **pprev; /* in flight, or done */
    struct ivmd_ucx     *u;
    ivmd_xfer_range_t    r;
    int                  node;
    int                  get;
    ivmd_ucx_reg_t      *reg;
    ucs_status_t         status;
} ivmd_ucx_req_t;

/* A copy's former address range: a key a peer still holds may write there
 * late (scatter racing a free), so it stays mapped, as throwaway memory,
 * until the daemon ends. */
typedef struct ivmd_ucx_husk {
    struct ivmd_ucx_husk *next;
    void                 *addr;
    size_t                size;
} ivmd_ucx_husk_t;

typedef struct ivmd_ucx {
    ucp_context_h    ctx;
    ucp_worker_h     worker;
    ivmd_loop_t     *loop;
    ivmd_handler_t   h;
    ivmd_handler_t   wake;      /* an eventfd: the progress was cut short, more to do */
    ucp_address_t   *addr;
    size_t           addr_len;
    ivmd_ucx_peer_t *peers;
    uint32_t         npeers;
    ivmd_ucx_reg_t  *regs;
    ivmd_ucx_rkey_t *rkeys;
    ivmd_ucx_req_t  *inflight; /* issued, not completed */
    ivmd_ucx_req_t  *done;     /* completed, not yet acted on */
    ivmd_ucx_husk_t *husks;
    size_t           put_inline; /* puts up to this many bytes go over the peer link */
    int              closing;
    char             tls[64];
} ivmd_ucx_t;

static void ivmd_ucx_req_link(ivmd_ucx_req_t **head, ivmd_ucx_req_t *q)
{
    q->next = *head;
    if (*head != NULL) {
        (*head)->pprev = &q->next;
    }
    *head    = q;
    q->pprev = head;
}

static void ivmd_ucx_req_unlink(ivmd_ucx_req_t *q)
{
    *q->pprev = q->next;
    if (q->next != NULL) {
        q->next->pprev = q->pprev;
    }
}

/* UCX opens descriptors (its event fd, pipes, sockets, shared memory)
 * without close-on-exec; the PEs this daemon spawns must not inherit them.
 * Run after each UCX call that may open some (start, endpoint, key unpack). */
static void ivmd_ucx_cloexec(void)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;

    if (dir == NULL) {
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        int fd = atoi(e->d_name);
        int fl;

        if (fd > 2 && fd != dirfd(dir) && (fl = fcntl(fd, F_GETFD)) >= 0 && !(fl & FD_CLOEXEC)) {
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
        }
    }
    closedir(dir);
}

/* ------------------------------------------------------------ registration */

static void ivmd_ucx_reg_free(ivmd_ucx_t *u, ivmd_ucx_reg_t *g)
{
    ivmd_ucx_husk_t *k = g->offered != 0 ? malloc(sizeof(*k)) : NULL;

    ucp_rkey_buffer_release(g->rkey_buf);
    ucp_mem_unmap(u->ctx, g->memh);
    /* Peers that had the key may still write: leave throwaway memory there
     * (the memfd's pages go now; late bytes land in anonymous pages). */
    if (k != NULL && mmap(g->addr, g->size, PROT_READ | PROT_WRITE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) !=
                         MAP_FAILED) {
        k->addr = g->addr;
        k->size = g->size;
        k->next = u->husks;
        u->husks = k;
    } else {
        free(k);
        munmap(g->addr, g->size);
    }
    free(g);
}

/* Our copy obj (memory fd) registered, made on first use; NULL if it
 * cannot be (logged). */
static ivmd_ucx_reg_t *ivmd_ucx_reg_get(ivmd_ucx_t *u, uint32_t job, uint64_t obj, int fd)
{
    ucp_mem_map_params_t mp;
    ivmd_ucx_reg_t *g;
    struct stat st;
    ucs_status_t s;

    HASH_FIND(hh, u->regs, &obj, sizeof(obj), g);
    if (g != NULL || fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 ||
        (g = calloc(1, sizeof(*g))) == NULL) {
        return g;
    }
    g->obj  = obj;
    g->job  = job;
    g->size = (size_t)st.st_size;
    g->addr = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g->addr == MAP_FAILED) {
        ivm_warn_limited("cannot map a copy of %zu bytes for UCX: %m", g->size);
        free(g);
        return NULL;
    }
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = g->addr;
    mp.length     = g->size;
    s = ucp_mem_map(u->ctx, &mp, &g->memh);
    if (s == UCS_OK && (s = ucp_rkey_pack(u->ctx, g->memh, &g->rkey_buf, &g->rkey_len)) != UCS_OK) {
        ucp_mem_unmap(u->ctx, g->memh);
    }
    if (s != UCS_OK) {
        ivm_warn_limited("ucp_mem_map/ucp_rkey_pack of %zu bytes: %s (this copy goes over TCP)",
                         g->size, ucs_status_string(s));
        munmap(g->addr, g->size);
        free(g);
        return NULL;
    }
    HASH_ADD(hh, u->regs, obj, sizeof(g->obj), g);
    return g;
}

/* ------------------------------------------------------------ peers' keys */

static void ivmd_ucx_rkey_free(ivmd_ucx_t *u, ivmd_ucx_rkey_t *k)
{
    HASH_DEL(u->rkeys, k);
    if (k->rkey != NULL) {
        ucp_rkey_destroy(k->rkey);
    }
    free(k->packed);
    free(k);
}

/* Forget node's keys (node -1: all), before its endpoint goes. */
static void ivmd_ucx_rkeys_drop(ivmd_ucx_t *u, int node)
{
    ivmd_ucx_rkey_t *k, *tmp;

    HASH_ITER(hh, u->rkeys, k, tmp) {
        if (node < 0 || k->id.node == (uint32_t)node) {
            ivmd_ucx_rkey_free(u, k);
        }
    }
}

static ivmd_ucx_rkey_t *ivmd_ucx_rkey_find(ivmd_ucx_t *u, int node, uint64_t obj)
{
    ivmd_ucx_rkey_id_t id = {.obj = obj, .node = (uint32_t)node};
    ivmd_ucx_rkey_t *k;

    HASH_FIND(hh, u->rkeys, &id, sizeof(id), k);
    return k;
}

/* ------------------------------------------------------------ endpoints */

static ivmd_ucx_peer_t *ivmd_ucx_peer(ivmd_ucx_t *u, int node)
{
    return node >= 0 && (uint32_t)node < u->npeers ? &u->peers[node] : NULL;
}

static void ivmd_ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ivmd_ucx_t *u = arg;
    uint32_t i;

    for (i = 0; i < u->npeers; ++i) {
        if (u->peers[i].ep == ep && !u->peers[i].failed) {
            u->peers[i].failed = 1;
            ivm_warn_limited("UCX endpoint to node %u failed: %s (its transfers fail, later ones "
                             "go over TCP)", i, ucs_status_string(status));
        }
    }
}

/* Close node's endpoint at once: its operations in flight complete with an
 * error (their operations fail), its keys go with it. */
static void ivmd_ucx_ep_close(ivmd_ucx_t *u, int node)
{
    ivmd_ucx_peer_t *p = ivmd_ucx_peer(u, node);
    ucp_request_param_t cp;
    ucs_status_ptr_t sp;

    if (p == NULL || p->ep == NULL) {
        return;
    }
    ivmd_ucx_rkeys_drop(u, node);
    memset(&cp, 0, sizeof(cp));
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    sp = ucp_ep_close_nbx(p->ep, &cp);
    if (sp != NULL && !UCS_PTR_IS_ERR(sp)) {
        ucp_request_free(sp);
    }
    p->ep     = NULL;
    p->failed = 0;
}

/* UCX's own log while an endpoint is tried that may not be possible: the
 * failure is ours to report. */
static ucs_log_func_rc_t ivmd_ucx_log_quiet(const char *file, unsigned line, const char *function,
                                            ucs_log_level_t level,
                                            const ucs_log_component_config_t *comp_conf,
                                            const char *message, va_list ap)
{
    (void)file;
    (void)line;
    (void)function;
    (void)comp_conf;
    (void)message;
    (void)ap;
    return level <= UCS_LOG_LEVEL_ERROR ? UCS_LOG_FUNC_RC_STOP : UCS_LOG_FUNC_RC_CONTINUE;
}

static ucs_status_t ivmd_ucx_ep_try(ivmd_ucx_t *u, const void *addr, ucp_err_handling_mode_t mode,
                                    ucp_ep_h *ep_p)
{
    ucp_ep_params_t ep;
    ucs_status_t s;

    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address         = addr;
    ep.err_mode        = mode;
    ep.err_handler.cb  = ivmd_ucx_ep_error;
    ep.err_handler.arg = u;
    if (mode == UCP_ERR_HANDLING_MODE_PEER) {
        ucs_log_push_handler(ivmd_ucx_log_quiet);
    }
    s = ucp_ep_create(u->worker, &ep, ep_p);
    if (mode == UCP_ERR_HANDLING_MODE_PEER) {
        ucs_log_pop_handler();
    }
    return s;
}

/* An endpoint to node's worker at addr. Peer failure handling where UCX
 * has it for the transports it chose; without it (UCX 1.13's shared-memory
 * transports) the link's heartbeat notices a lost node, and drop() closes
 * the endpoint, which fails what is in flight on it. */
static ivmError_t ivmd_ucx_ep_open(ivmd_data_t *dp, int node, const void *addr)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_peer_t *p;
    ucs_status_t s;
    int peer_mode = 1;

    if (u->peers == NULL && dp->link->npeers > 0) {
        u->peers = calloc(dp->link->npeers, sizeof(*u->peers));
        u->npeers = u->peers != NULL ? dp->link->npeers : 0;
    }
    if ((p = ivmd_ucx_peer(u, node)) == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    ivmd_ucx_ep_close(u, node);
    s = ivmd_ucx_ep_try(u, addr, UCP_ERR_HANDLING_MODE_PEER, &p->ep);
    if (s != UCS_OK) {
        peer_mode = 0;
        s = ivmd_ucx_ep_try(u, addr, UCP_ERR_HANDLING_MODE_NONE, &p->ep);
    }
    if (s != UCS_OK) {
        p->ep = NULL;
        ivm_warn_limited("no UCX endpoint to node %s: %s (transfers to it go over TCP)",
                         dp->link->peers[node].node, ucs_status_string(s));
        return IVM_ERROR_UNSUPPORTED;
    }
    ivmd_ucx_cloexec();
    ivm_info("UCX endpoint to node %s (%s)", dp->link->peers[node].node,
             peer_mode ? "peer failure handling" : "its loss found by the link's heartbeat");
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------ completion */

static void ivmd_ucx_flushed(void *request, ucs_status_t status, void *user_data)
{
    ivmd_ucx_req_t *q = user_data;

    q->status = status;
    ucp_request_free(request);
    ivmd_ucx_req_unlink(q);
    ivmd_ucx_req_link(&q->u->done, q);
}

static void ivmd_ucx_reg_put_back(ivmd_ucx_t *u, ivmd_ucx_reg_t *g)
{
    if (--g->inflight == 0 && g->gone) {
        ivmd_ucx_reg_free(u, g);
    }
}

static void ivmd_ucx_count(ivmd_data_t *dp, const ivmd_xfer_range_t *r, int get)
{
    ivmd_job_t *job = ivmd_job_find(dp->reg, r->job);
    ivmd_obj_t *obj = job != NULL ? ivmd_obj_find_id(job, r->src) : NULL;

    dp->rdma_bytes += r->len;
    if (get) {
        dp->rx_bytes += r->len;
    } else {
        dp->tx_bytes += r->len;
    }
    if (obj != NULL && get) {
        obj->rx_bytes += r->len;
    } else if (obj != NULL) {
        obj->tx_bytes += r->len;
    }
}

/* A one-sided operation completed (UCX said so, or it completed at once):
 * a put tells the receiver its range landed (DATA PLACED); a get steps our
 * operation. A failed one fails the operation it served: ours, or for a
 * REPLY the peer's, with an ACK. */
static void ivmd_ucx_finish(ivmd_data_t *dp, ivmd_ucx_req_t *q)
{
    const ivmd_xfer_range_t *r = &q->r;
    int ok = q->status == UCS_OK;
    ivmd_op_t *op;

    if (ok) {
        ivmd_ucx_count(dp, r, q->get);
    }
    if (!q->get && ok) {
        ivm_peer_xfer_t x = {.op = r->op, .job = r->job, .obj = r->dst, .off = r->off,
                             .len = r->len,
                             .flags = r->flags | IVM_XFER_LAST | IVM_XFER_PLACED,
                             .sig_from = r->sig_from, .sig_to = r->sig_to};

        ivmd_tcp_transport_ops.send_msg(dp, q->node, IVM_PEER_DATA, &x, sizeof(x), NULL, 0);
    } else if (!q->get && (r->flags & IVM_XFER_REPLY)) {
        ivm_peer_xfer_t ack = {.op = r->op, .job = r->job, .status = IVM_ERROR_DAEMON_LOST};

        ivmd_tcp_transport_ops.send_msg(dp, q->node, IVM_PEER_ACK, &ack, sizeof(ack), NULL, 0);
    } else if (!q->get && (r->flags & IVM_XFER_CHAIN)) {
        /* A piece of a route: its op is the master's, not ours. */
        ivmd_group_piece_lost(dp, q->node, r);
    } else if ((op = ivmd_op_find(dp, r->op)) != NULL && (q->get || !ok)) {
        ivmd_op_step(dp, op, ok ? IVM_SUCCESS : IVM_ERROR_DAEMON_LOST);
    }
    ivmd_ucx_reg_put_back(dp->ucx, q->reg);
    free(q);
}

/* Close the endpoints that failed, then act on what completed. */
static int ivmd_ucx_reap(ivmd_data_t *dp)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_req_t *q;
    int n = 0;
    uint32_t i;

    for (i = 0; i < u->npeers; ++i) {
        if (u->peers[i].failed) {
            ivmd_ucx_ep_close(u, (int)i);
        }
    }
    while ((q = u->done) != NULL) {
        ivmd_ucx_req_unlink(q);
        ivmd_ucx_finish(dp, q);
        ++n;
    }
    return n;
}

/* Progress the worker until it can sleep: ucp_worker_arm says UCS_OK only
 * when nothing is left to progress (UCS_ERR_BUSY: progress again), so the
 * event fd will tell of anything new. At most IVMD_UCX_PROGRESS_NS at a
 * time: a put over shared memory to a daemon that was killed stays busy for
 * good, and only the loop, by the peer link's end, learns that the peer is
 * lost and closes its endpoint; so the loop gets its turn, woken at once
 * through the wake descriptor, and the progress goes on after it. */
#define IVMD_UCX_PROGRESS_NS 2000000ull

static void ivmd_ucx_progress(ivmd_data_t *dp)
{
    ivmd_ucx_t *u = dp->ucx;
    uint64_t until = ivmd_now_ns() + IVMD_UCX_PROGRESS_NS;
    uint64_t one = 1;
    ucs_status_t s;

    do {
        while (ucp_worker_progress(u->worker) != 0 && ivmd_now_ns() < until) {
        }
        if (ivmd_ucx_reap(dp) > 0) {
            s = UCS_ERR_BUSY; /* what it did may have started more */
            continue;
        }
        s = ucp_worker_arm(u->worker);
    } while (s == UCS_ERR_BUSY && ivmd_now_ns() < until);
    if (s == UCS_ERR_BUSY) {
        if (write(u->wake.fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
            /* an eventfd only refuses at its counter's limit: it is set */
        }
    } else if (s != UCS_OK) {
        ivm_warn_limited("ucp_worker_arm: %s", ucs_status_string(s));
    }
}

static void ivmd_ucx_on_wake(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_data_t *dp = arg;
    uint64_t n;

    (void)d;
    (void)events;
    if (read(((ivmd_ucx_t *)dp->ucx)->wake.fd, &n, sizeof(n)) < 0) {
        /* nothing to read: a wake taken already */
    }
    ivmd_ucx_progress(dp);
}

static void ivmd_ucx_on_event(ivmd_t *d, void *arg, uint32_t events)
{
    (void)d;
    (void)events;
    ivmd_ucx_progress(arg);
}

static void ivmd_ucx_before_sleep(ivmd_t *d, void *arg)
{
    ivmd_data_t *dp = arg;

    (void)d;
    if (dp->ucx != NULL) {
        ivmd_ucx_progress(dp);
    }
}

/* ------------------------------------------------------------ operations */

/* The endpoint, the peer's key and our registration r needs, each checked
 * against r's range; NULL if r cannot go one-sided. */
static ivmd_ucx_peer_t *ivmd_ucx_route(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r,
                                       int get, ivmd_ucx_rkey_t **k_p, ivmd_ucx_reg_t **g_p)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_peer_t *p = ivmd_ucx_peer(u, node);
    ivmd_ucx_rkey_t *k;
    ivmd_ucx_reg_t *g;

    if (p == NULL || p->ep == NULL || p->failed || r->len == 0 ||
        (k = ivmd_ucx_rkey_find(u, node, r->dst)) == NULL ||
        (g = ivmd_ucx_reg_get(u, r->job, r->src, r->fd)) == NULL) {
        return NULL;
    }
    if (r->off > g->size || r->len > g->size - r->off || r->off > k->size ||
        r->len > k->size - r->off || (!get && ivmd_tcp_waiting(dp, node))) {
        return NULL;
    }
    if (k->rkey == NULL) {
        if (ucp_ep_rkey_unpack(p->ep, k->packed, &k->rkey) != UCS_OK) {
            k->rkey = NULL;
            return NULL;
        }
        ivmd_ucx_cloexec();
    }
    *k_p = k;
    *g_p = g;
    return p;
}

/* Start r one-sided: IVM_ERROR_UNSUPPORTED if it cannot go that way (the
 * caller sends it over TCP). Completion comes later, never within. */
static ivmError_t ivmd_ucx_issue(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r, int get)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_rkey_t *k = NULL;
    ivmd_ucx_reg_t *g = NULL;
    ivmd_ucx_peer_t *p = ivmd_ucx_route(dp, node, r, get, &k, &g);
    ucp_request_param_t rp;
    ivmd_ucx_req_t *q;
    ucs_status_ptr_t sp;
    void *local;

    if (p == NULL) {
        return IVM_ERROR_UNSUPPORTED;
    }
    if ((q = calloc(1, sizeof(*q))) == NULL) {
        return IVM_ERROR_UNSUPPORTED;
    }
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    rp.memh         = g->memh;
    local           = (char *)g->addr + r->off;
    sp = get ? ucp_get_nbx(p->ep, local, r->len, k->base + r->off, k->rkey, &rp)
             : ucp_put_nbx(p->ep, local, r->len, k->base + r->off, k->rkey, &rp);
    if (UCS_PTR_IS_ERR(sp)) {
        free(q);
        return IVM_ERROR_UNSUPPORTED;
    }
    if (sp != NULL) {
        ucp_request_free(sp); /* the flush tells when it is done */
    }
    q->u    = u;
    q->r    = *r;
    q->r.fd = -1;
    q->node = node;
    q->get  = get;
    q->reg  = g;
    ++g->inflight;
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.send      = ivmd_ucx_flushed;
    rp.user_data    = q;
    sp = ucp_ep_flush_nbx(p->ep, &rp);
    if (sp == NULL || UCS_PTR_IS_ERR(sp)) {
        q->status = sp == NULL ? UCS_OK : UCS_PTR_STATUS(sp);
        ivmd_ucx_req_link(&u->done, q);
    } else {
        ivmd_ucx_req_link(&u->inflight, q);
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmd_ucx_put(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r)
{
    const ivmd_ucx_t *u = dp->ucx;

    if (r->len > u->put_inline && ivmd_ucx_issue(dp, node, r, 0) == IVM_SUCCESS) {
        return IVM_SUCCESS;
    }
    return ivmd_tcp_transport_ops.put(dp, node, r);
}

static ivmError_t ivmd_ucx_get(ivmd_data_t *dp, int node, const ivmd_xfer_range_t *r)
{
    if (ivmd_ucx_issue(dp, node, r, 1) == IVM_SUCCESS) {
        return IVM_SUCCESS;
    }
    return ivmd_tcp_read(dp, node, r);
}

static void ivmd_ucx_send_rkey(ivmd_data_t *dp, int node, const ivmd_ucx_reg_t *g, int withdraw)
{
    ivm_peer_ucx_rkey_t m = {.obj = g->obj, .base = (uint64_t)(uintptr_t)g->addr,
                             .size = g->size, .job = g->job,
                             .len = withdraw ? 0 : (uint32_t)g->rkey_len};

    ivmd_tcp_transport_ops.send_msg(dp, node, IVM_PEER_UCX_RKEY, &m, sizeof(m), g->rkey_buf,
                                    m.len);
}

static void ivmd_ucx_offer(ivmd_data_t *dp, int node, uint32_t job, const ivmd_obj_t *obj)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_peer_t *p = ivmd_ucx_peer(u, node);
    ivmd_ucx_reg_t *g;

    /* A node without an endpoint runs TCP (or lost UCX): it has no use for keys. */
    if (p == NULL || p->ep == NULL || node >= 64 ||
        (g = ivmd_ucx_reg_get(u, job, obj->id, obj->fd)) == NULL || (g->offered & (1ull << node))) {
        return;
    }
    if (g->rkey_len > IVM_PEER_UCX_RKEY_MAX) {
        ivm_warn_limited("a UCX key of %zu bytes is too long to send", g->rkey_len);
        return;
    }
    ivmd_ucx_send_rkey(dp, node, g, 0);
    g->offered |= 1ull << node;
}

static void ivmd_ucx_copy_made(ivmd_data_t *dp, uint32_t job, const ivmd_obj_t *obj)
{
    ivmd_ucx_reg_get(dp->ucx, job, obj->id, obj->fd);
}

/* Withdraw the copy's key from the nodes that have it; the registration
 * goes with the last operation using it. */
static void ivmd_ucx_copy_gone(ivmd_data_t *dp, const ivmd_obj_t *obj)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_reg_t *g;
    uint32_t i;

    HASH_FIND(hh, u->regs, &obj->id, sizeof(obj->id), g);
    if (g == NULL) {
        return;
    }
    for (i = 0; i < 64 && i < u->npeers; ++i) {
        if (g->offered & (1ull << i)) {
            ivmd_ucx_send_rkey(dp, (int)i, g, 1);
        }
    }
    HASH_DEL(u->regs, g);
    g->gone = 1;
    if (g->inflight == 0) {
        ivmd_ucx_reg_free(u, g);
    }
}

static void ivmd_ucx_peer_up(ivmd_data_t *dp, int node)
{
    ivmd_ucx_t *u = dp->ucx;
    ivm_peer_ucx_addr_t m = {.len = (uint32_t)u->addr_len};

    ivmd_tcp_transport_ops.send_msg(dp, node, IVM_PEER_UCX_ADDR, &m, sizeof(m), u->addr, m.len);
}

static ivmError_t ivmd_ucx_on_rkey(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                   const ivm_peer_ucx_rkey_t *m)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_rkey_t *k;

    if (hdr->length != sizeof(*m) + m->len || m->len > IVM_PEER_UCX_RKEY_MAX) {
        return IVM_ERROR_PROTOCOL;
    }
    if ((k = ivmd_ucx_rkey_find(u, node, m->obj)) != NULL) {
        ivmd_ucx_rkey_free(u, k);
    }
    if (m->len == 0 || (k = calloc(1, sizeof(*k))) == NULL) {
        return IVM_SUCCESS;
    }
    if ((k->packed = malloc(m->len)) == NULL) {
        free(k);
        return IVM_SUCCESS;
    }
    memcpy(k->packed, m + 1, m->len);
    k->len     = m->len;
    k->id.obj  = m->obj;
    k->id.node = (uint32_t)node;
    k->base    = m->base;
    k->size    = m->size;
    HASH_ADD(hh, u->rkeys, id, sizeof(k->id), k);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_ucx_on_msg(ivmd_data_t *dp, int node, const ivm_msg_hdr_t *hdr,
                                  const void *payload)
{
    const ivm_peer_ucx_addr_t *a = payload;

    if (hdr->type == IVM_PEER_UCX_RKEY) {
        return ivmd_ucx_on_rkey(dp, node, hdr, payload);
    }
    if (hdr->type != IVM_PEER_UCX_ADDR || hdr->length != sizeof(*a) + a->len || a->len == 0 ||
        a->len > IVM_PEER_UCX_ADDR_MAX) {
        return IVM_ERROR_PROTOCOL;
    }
    ivmd_ucx_ep_open(dp, node, a + 1);
    return IVM_SUCCESS;
}

static ivmError_t ivmd_ucx_send_msg(ivmd_data_t *dp, int node, uint16_t type, const void *a,
                                    uint32_t alen, const void *b, uint32_t blen)
{
    return ivmd_tcp_transport_ops.send_msg(dp, node, type, a, alen, b, blen);
}

static void ivmd_ucx_flush(ivmd_data_t *dp, int node)
{
    ivmd_tcp_transport_ops.flush(dp, node);
}

static uint64_t ivmd_ucx_window(const ivmd_data_t *dp, int node)
{
    return ivmd_tcp_transport_ops.window(dp, node);
}

/* node lost: its endpoint closes (its operations in flight fail when the
 * worker next progresses), its keys go, our copies' keys are offered again
 * if it comes back. */
static void ivmd_ucx_drop(ivmd_data_t *dp, int node)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_reg_t *g, *tmp;
    uint32_t i;

    ivmd_tcp_transport_ops.drop(dp, node);
    for (i = 0; i < u->npeers; ++i) {
        if (node < 0 || (uint32_t)node == i) {
            ivmd_ucx_ep_close(u, (int)i);
        }
    }
    HASH_ITER(hh, u->regs, g, tmp) {
        g->offered &= node < 0 ? 0 : ~(node < 64 ? 1ull << node : 0);
    }
}

const ivmd_transport_ops_t ivmd_ucx_transport_ops = {
    .name      = "ucx",
    .relay     = 0,
    .send_msg  = ivmd_ucx_send_msg,
    .put       = ivmd_ucx_put,
    .get       = ivmd_ucx_get,
    .offer     = ivmd_ucx_offer,
    .copy_made = ivmd_ucx_copy_made,
    .copy_gone = ivmd_ucx_copy_gone,
    .peer_up   = ivmd_ucx_peer_up,
    .on_msg    = ivmd_ucx_on_msg,
    .flush     = ivmd_ucx_flush,
    .window    = ivmd_ucx_window,
    .drop      = ivmd_ucx_drop,
};

/* ------------------------------------------------------------ bring-up */

/* The transports UCX found, "tl/dev" each, from ucp_context_print_info's
 * resource lines; *net: one is a network transport other than TCP. */
static void ivmd_ucx_list_tls(ivmd_ucx_t *u, int *net_p)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    *net_p = 0;
    if (f == NULL) {
        return;
    }
    ucp_context_print_info(u->ctx, f);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *tl = strstr(line, "resource") != NULL ? strrchr(line, ' ') : NULL;
        size_t used = strlen(u->tls);

        if (tl == NULL || strchr(tl, '/') == NULL) {
            continue;
        }
        ++tl;
        if (strncmp(tl, "tcp/", 4) != 0 && strncmp(tl, "self/", 5) != 0 &&
            strncmp(tl, "posix/", 6) != 0 && strncmp(tl, "sysv/", 5) != 0 &&
            strncmp(tl, "cma/", 4) != 0 && strncmp(tl, "knem/", 5) != 0 &&
            strncmp(tl, "xpmem/", 6) != 0 && strncmp(tl, "cuda", 4) != 0 &&
            strncmp(tl, "gdr", 3) != 0 && strncmp(tl, "rocm", 4) != 0) {
            *net_p = 1;
        }
        if (used + strlen(tl) + 2 < sizeof(u->tls)) {
            snprintf(u->tls + used, sizeof(u->tls) - used, "%s%s", used ? "," : "", tl);
        }
    }
    free(text);
}

static void ivmd_ucx_fini(ivmd_ucx_t *u)
{
    if (u->addr != NULL) {
        ucp_worker_release_address(u->worker, u->addr);
    }
    if (u->worker != NULL) {
        ucp_worker_destroy(u->worker);
    }
    if (u->ctx != NULL) {
        ucp_cleanup(u->ctx);
    }
    if (u->wake.fd >= 0) {
        close(u->wake.fd);
    }
    free(u);
}

/* UCX 1.13 has no one-sided lane between two processes of one host for
 * memory it did not allocate (cma serves only rendezvous; the mm transports
 * reach only their own allocations): a put or get over shared memory is
 * emulated with active messages through the mm transport's FIFO, into it by
 * one daemon and out of it by the other. Its defaults, 64 elements of 8 KiB,
 * make 8192 fragments of a 64 MiB put; 256 of 32 KiB (below the element's
 * 16-bit length: UCX 1.13 asserts in a get at 64 KiB) took it from 0.55-0.6x
 * to 0.7-0.85x of a memcpy on our 2-vCPU machine (docs/BENCHMARKS.md). The
 * user's UCX_MM_* variables win. */
static const struct {
    const char *name, *value;
} ivmd_ucx_defaults[] = {
    {"MM_SEG_SIZE", "32832"},
    {"MM_FIFO_SIZE", "256"},
};

static void ivmd_ucx_config_defaults(ucp_config_t *cfg)
{
    char env[64];
    size_t i;

    for (i = 0; i < sizeof(ivmd_ucx_defaults) / sizeof(ivmd_ucx_defaults[0]); ++i) {
        snprintf(env, sizeof(env), "UCX_%s", ivmd_ucx_defaults[i].name);
        if (getenv(env) == NULL &&
            ucp_config_modify(cfg, ivmd_ucx_defaults[i].name, ivmd_ucx_defaults[i].value) !=
                UCS_OK) {
            ivm_warn("UCX refused %s=%s: left at its default", env, ivmd_ucx_defaults[i].value);
        }
    }
}

/* The context (RMA, with wakeup) and the worker with its address and event
 * fd. */
static ivmError_t ivmd_ucx_init(ivmd_ucx_t *u, char *why, size_t why_len)
{
    ucp_params_t cp = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features   = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP};
    ucp_worker_params_t wp = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_config_t *cfg;
    ucs_status_t s;
    const char *what = "ucp_config_read";

    s = ucp_config_read(NULL, NULL, &cfg);
    if (s == UCS_OK) {
        ivmd_ucx_config_defaults(cfg);
        what = "ucp_init";
        s = ucp_init(&cp, cfg, &u->ctx);
        ucp_config_release(cfg);
    }
    if (s == UCS_OK) {
        what = "ucp_worker_create";
        s = ucp_worker_create(u->ctx, &wp, &u->worker);
    }
    if (s == UCS_OK) {
        what = "ucp_worker_get_address";
        s = ucp_worker_get_address(u->worker, &u->addr, &u->addr_len);
    }
    if (s == UCS_OK) {
        what = "ucp_worker_get_efd";
        s = ucp_worker_get_efd(u->worker, &u->h.fd);
    }
    if (s != UCS_OK) {
        snprintf(why, why_len, "UCX cannot start: %s: %s", what, ucs_status_string(s));
        return IVM_ERROR_UNSUPPORTED;
    }
    if (u->addr_len > IVM_PEER_UCX_ADDR_MAX) {
        snprintf(why, why_len, "UCX's worker address has %zu bytes (at most %u fit a message)",
                 u->addr_len, IVM_PEER_UCX_ADDR_MAX);
        return IVM_ERROR_UNSUPPORTED;
    }
    return IVM_SUCCESS;
}

/* Without a network transport (UCX over shared memory or TCP) a small put
 * is an active message that the master's daemon must wake up for and
 * acknowledge before the flush completes, and only then does DATA PLACED go
 * out on the peer link: two wake-ups of each daemon where the link's own
 * DATA message, with the bytes inline, takes one. So below this size puts
 * take the link (IVM_UCX_PUT_INLINE overrides; 0: every put one-sided). Over
 * a network transport (rc/dc/ud verbs) a put is an RDMA write that no
 * daemon sees: all go one-sided. */
#define IVMD_UCX_PUT_INLINE_SM (64 * 1024)

static size_t ivmd_ucx_put_inline(int net)
{
    const char *e = getenv("IVM_UCX_PUT_INLINE");
    char *end;
    unsigned long long v;

    if (e != NULL && *e != '\0') {
        errno = 0;
        v     = strtoull(e, &end, 10);
        if (errno == 0 && *end == '\0') {
            return (size_t)v;
        }
        ivm_warn("IVM_UCX_PUT_INLINE=%s is not a byte count: ignored", e);
    }
    return net ? 0 : IVMD_UCX_PUT_INLINE_SM;
}

/* Start UCX; want_net: only if it finds a network transport besides TCP. */
static ivmError_t ivmd_ucx_open(ivmd_data_t *dp, ivmd_loop_t *loop, int want_net, char *why,
                                size_t why_len)
{
    ivmd_ucx_t *u = calloc(1, sizeof(*u));
    ivmError_t status;
    int net;

    if (u == NULL) {
        snprintf(why, why_len, "out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    u->h.fd    = -1;
    u->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    status = u->wake.fd >= 0 ? ivmd_ucx_init(u, why, why_len) : IVM_ERROR_NO_MEMORY;
    if (u->wake.fd < 0) {
        snprintf(why, why_len, "eventfd: %s", strerror(errno));
    }
    if (status == IVM_SUCCESS) {
        ivmd_ucx_list_tls(u, &net);
        u->put_inline = ivmd_ucx_put_inline(net);
        if (want_net && !net) {
            snprintf(why, why_len, "UCX finds no network transport but TCP (%s)", u->tls);
            status = IVM_ERROR_UNSUPPORTED;
        }
    }
    if (status == IVM_SUCCESS) {
        u->loop  = loop;
        u->h.cb  = ivmd_ucx_on_event;
        u->h.arg = dp;
        u->wake.cb  = ivmd_ucx_on_wake;
        u->wake.arg = dp;
        status = ivmd_loop_watch(loop, &u->h, EPOLLIN);
        if (status == IVM_SUCCESS && ivmd_loop_watch(loop, &u->wake, EPOLLIN) != IVM_SUCCESS) {
            ivmd_loop_unwatch(loop, &u->h);
            status = IVM_ERROR_NO_MEMORY;
        }
        if (status == IVM_SUCCESS) {
            status = ivmd_loop_on_before_sleep(loop, ivmd_ucx_before_sleep, dp);
            if (status != IVM_SUCCESS) {
                ivmd_loop_unwatch(loop, &u->wake);
                ivmd_loop_unwatch(loop, &u->h);
            }
        }
        if (status != IVM_SUCCESS) {
            snprintf(why, why_len, "cannot watch UCX's worker in the loop");
        }
    }
    if (status != IVM_SUCCESS) {
        ivmd_ucx_fini(u);
        return status;
    }
    dp->ucx       = u;
    dp->transport = &ivmd_ucx_transport_ops;
    ivmd_ucx_cloexec();
    ucp_worker_arm(u->worker);
    return IVM_SUCCESS;
}

void ivmd_ucx_close(ivmd_data_t *dp)
{
    ivmd_ucx_t *u = dp->ucx;
    ivmd_ucx_reg_t *g, *tmp;
    ivmd_ucx_husk_t *k;
    ivmd_ucx_req_t *q;
    int i;

    if (u == NULL) {
        return;
    }
    u->closing = 1;
    ivmd_ucx_drop(dp, -1);
    for (i = 0; i < 100 && u->inflight != NULL; ++i) {
        ucp_worker_progress(u->worker);
    }
    /* Requests still pending towards a peer that died mid-transfer are
     * called back when the worker goes (UCX purges their queues there):
     * their state must outlive it. */
    ivmd_loop_unwatch(u->loop, &u->wake);
    ivmd_loop_unwatch(u->loop, &u->h);
    if (u->addr != NULL) {
        ucp_worker_release_address(u->worker, u->addr);
        u->addr = NULL;
    }
    ucp_worker_destroy(u->worker);
    u->worker = NULL;
    /* What completed now answers nobody: the operations are gone. */
    while ((q = u->done) != NULL || (q = u->inflight) != NULL) {
        ivmd_ucx_req_unlink(q);
        ivmd_ucx_reg_put_back(u, q->reg);
        free(q);
    }
    HASH_ITER(hh, u->regs, g, tmp) {
        HASH_DEL(u->regs, g);
        ivmd_ucx_reg_free(u, g);
    }
    while ((k = u->husks) != NULL) {
        u->husks = k->next;
        munmap(k->addr, k->size);
        free(k);
    }
    free(u->peers);
    dp->ucx       = NULL;
    dp->transport = NULL;
    ivmd_ucx_fini(u);
}

const char *ivmd_ucx_tls(const ivmd_data_t *dp)
{
    return dp->ucx != NULL ? ((const ivmd_ucx_t *)dp->ucx)->tls : "";
}

/* An RDMA device the kernel knows (rdma-core's sysfs class): worth starting UCX for. */
static int ivmd_ucx_rdma_present(void)
{
    struct stat st;

    return stat("/sys/class/infiniband", &st) == 0 && st.st_nlink > 2;
}

ivmError_t ivmd_ucx_select(ivmd_data_t *dp, ivmd_loop_t *loop, const char *mode, int encrypt,
                           char *why, size_t why_len)
{
    ivmError_t status;

    if (mode == NULL || mode[0] == '\0' || strcmp(mode, "auto") == 0) {
        if (encrypt || !ivmd_ucx_rdma_present()) {
            return IVM_SUCCESS;
        }
        status = ivmd_ucx_open(dp, loop, 1, why, why_len);
        if (status != IVM_SUCCESS) {
            ivm_info("transport auto: TCP (%s)", why);
        }
        return IVM_SUCCESS;
    }
    if (strcmp(mode, "tcp") == 0) {
        return IVM_SUCCESS;
    }
    if (strcmp(mode, "ucx") != 0) {
        snprintf(why, why_len, "--transport %s: expected tcp, ucx or auto", mode);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (encrypt) {
        snprintf(why, why_len, "--transport ucx cannot be encrypted: UCX writes into the peers' "
                 "memory past the links' sealing (use tcp with --peer-encrypt)");
        return IVM_ERROR_INVALID_VALUE;
    }
    return ivmd_ucx_open(dp, loop, 0, why, why_len);
}

#else /* !IVM_HAVE_UCX */

ivmError_t ivmd_ucx_select(ivmd_data_t *dp, ivmd_loop_t *loop, const char *mode, int encrypt,
                           char *why, size_t why_len)
{
    (void)dp;
    (void)loop;
    (void)encrypt;
    if (mode == NULL || mode[0] == '\0' || strcmp(mode, "auto") == 0 || strcmp(mode, "tcp") == 0) {
        return IVM_SUCCESS;
    }
    if (strcmp(mode, "ucx") == 0) {
        snprintf(why, why_len, "--transport ucx: this ivmd was built without UCX "
                 "(libucx-dev, cmake -DIVM_WITH_UCX=ON)");
        return IVM_ERROR_UNSUPPORTED;
    }
    snprintf(why, why_len, "--transport %s: expected tcp, ucx or auto", mode);
    return IVM_ERROR_INVALID_VALUE;
}

void ivmd_ucx_close(ivmd_data_t *dp)
{
    (void)dp;
}

const char *ivmd_ucx_tls(const ivmd_data_t *dp)
{
    (void)dp;
    return "";
}

#endif /* IVM_HAVE_UCX */
