/* Requests to ivm-gpud in flight, by sequence number; GPU_INFO (gpu/gpud.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpud.h"
#include "log.h"

ivmd_gpu_req_t *ivmd_gpu_req_new(ivmd_gpu_t *gm, uint16_t type, ivmd_gpu_cb_t cb)
{
    ivmd_gpu_req_t *r = calloc(1, sizeof(*r));

    (void)gm;
    if (r == NULL) {
        return NULL;
    }
    r->type = type;
    r->cb   = cb;
    return r;
}

ivmError_t ivmd_gpu_send(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, const void *payload, uint32_t len,
                         const int *fds, int nfds)
{
    ivmd_gpud_t *g = gm->g;
    ivmd_outbuf_t *b;
    ivmError_t status;

    if (g == NULL || !g->alive || g->conn == NULL) {
        free(r);
        return IVM_ERROR_DAEMON_LOST;
    }
    r->seq = g->next_seq++;
    b = ivmd_conn_out_alloc(gm->d, g->conn, r->type, r->seq, len);
    if (b == NULL) {
        free(r);
        return IVM_ERROR_DAEMON_LOST;
    }
    memcpy(IVMD_OUTBUF_PAYLOAD(b), payload, len);
    status = ivmd_conn_out_push(gm->d, g->conn, b, fds, nfds);
    if (status != IVM_SUCCESS) {
        free(r);
        return status;
    }
    HASH_ADD(hh, g->reqs, seq, sizeof(r->seq), r);
    return IVM_SUCCESS;
}

void ivmd_gpu_reqs_fail(ivmd_gpu_t *gm)
{
    ivmd_gpud_t *g = gm->g;
    ivmd_gpu_req_t *r;

    while (g != NULL && (r = g->reqs) != NULL) {
        HASH_DEL(g->reqs, r);
        r->cb(gm, r, IVM_ERROR_DAEMON_LOST, NULL, NULL, 0, "the GPU daemon (ivm-gpud) is gone");
        free(r);
    }
}

static void ivmd_gpu_ignore(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *rep,
                            int *fds, int nfds, const char *detail)
{
    (void)gm;
    (void)rep;
    (void)fds;
    (void)nfds;
    if (status != IVM_SUCCESS && status != IVM_ERROR_DAEMON_LOST) {
        ivm_debug("ivm-gpud: %s failed: %s", ivm_gpud_type_name(r->type), detail);
    }
}

void ivmd_gpu_tell(ivmd_gpu_t *gm, uint16_t type, const void *req, uint32_t len)
{
    ivmd_gpu_req_t *r = ivmd_gpu_req_new(gm, type, ivmd_gpu_ignore);

    if (r != NULL) {
        ivmd_gpu_send(gm, r, req, len, NULL, 0);
    }
}

void ivmd_gpu_release(ivmd_gpu_t *gm, uint64_t copy)
{
    ivm_gpud_copy_ref_t req = {.copy_id = copy};

    ivmd_gpu_tell(gm, IVM_GPUD_RELEASE, &req, sizeof(req));
}

void ivmd_gpu_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload)
{
    ivmd_gpu_t *gm = ivmd_conn_owner(c);
    ivmd_gpud_t *g = gm->g;
    const char *why = NULL, *detail = "";
    ivmd_gpu_req_t *r;
    uint32_t fixed;
    int status;

    if (!(hdr->type & IVM_MSG_REPLY) || ivm_gpud_check_rep(hdr, &why) != IVM_SUCCESS) {
        ivm_error("ivm-gpud sent a malformed message (%s, type %s): its socket is closed",
                  why != NULL ? why : "not a reply", ivm_gpud_type_name(hdr->type));
        ivmd_conn_doom(c, "malformed message from ivm-gpud");
        return;
    }
    HASH_FIND(hh, g->reqs, &hdr->seq, sizeof(hdr->seq), r);
    if (r == NULL || (r->type | IVM_MSG_REPLY) != hdr->type) {
        ivm_error("ivm-gpud answered request %u (%s) that is not in flight: its socket is "
                  "closed", hdr->seq, ivm_gpud_type_name(hdr->type));
        ivmd_conn_doom(c, "reply to no request from ivm-gpud");
        return;
    }
    HASH_DEL(g->reqs, r);
    fixed = ivm_gpud_rep_size(r->type);
    memcpy(&status, payload, sizeof(status));
    if (hdr->length > fixed) {
        char *text = (char *)payload + fixed;
        text[hdr->length - fixed - 1] = '\0';
        detail = text;
    }
    r->cb(gm, r, status, payload, c->fds, c->nfds, detail);
    free(r);
}

int ivmd_gpu_alive(const ivmd_gpu_t *gm)
{
    return gm->g != NULL && gm->g->alive;
}

/* ------------------------------------------------------------ GPU_INFO */

/* The GSTATS counters into a GPU_INFO reply. */
static void ivmd_gpu_stats_copy(ivm_msg_gpu_info_rep_t *rep, const ivmd_gpud_t *g,
                                uint32_t gpu, const ivm_gpud_stats_rep_t *s)
{
    rep->flags         = IVM_GPU_INFO_ALIVE;
    snprintf(rep->name, sizeof(rep->name), "%s", g->gpus[gpu].name);
    rep->capacity      = s->capacity;
    rep->used          = s->used;
    rep->cached_bytes  = s->cached_bytes;
    rep->allocations   = s->allocations;
    rep->evictions     = s->evictions;
    rep->copies        = s->copies;
    rep->mapped_refs   = s->mapped_refs;
    rep->waiting       = s->waiting;
    rep->wait_timeouts = s->wait_timeouts;
}

static void ivmd_gpu_on_stats(ivmd_gpu_t *gm, ivmd_gpu_req_t *r, int status, const void *payload,
                              int *fds, int nfds, const char *detail)
{
    const ivm_gpud_stats_rep_t *s = payload;
    ivmd_gpud_t *g = gm->g;
    uint32_t gpu = r->gpu < g->ngpus ? r->gpu : 0;
    ivm_msg_gpu_info_rep_t rep;

    (void)fds;
    (void)nfds;
    if (r->conn == NULL) {
        return;
    }
    if (status == IVM_ERROR_DAEMON_LOST) {
        status = IVM_SUCCESS; /* the answer: it is gone (no IVM_GPU_INFO_ALIVE) */
        s      = NULL;
    }
    memset(&rep, 0, sizeof(rep));
    rep.status      = status;
    rep.ngpus       = g->ngpus;
    rep.granularity = g->gpus[gpu].granularity;
    rep.gpud_pid    = (uint32_t)g->pid;
    snprintf(rep.backend, sizeof(rep.backend), "%s", g->backend_name);
    if (status == IVM_SUCCESS && s != NULL) {
        ivmd_gpu_stats_copy(&rep, g, gpu, s);
    }
    ivmd_conn_reply(gm->d, r->conn, r->pe_type, r->pe_seq, &rep, sizeof(rep),
                    status != IVM_SUCCESS ? detail : NULL, NULL, 0);
}

int ivmd_gpu_info(ivmd_gpu_t *gm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_gpu_info_req_t *req, ivm_msg_gpu_info_rep_t *rep, char *detail,
                  size_t detail_len)
{
    ivmd_gpud_t *g = gm->g;
    ivm_gpud_stats_req_t sreq;
    ivmd_gpu_req_t *r;

    if (g == NULL || g->ngpus == 0) {
        snprintf(detail, detail_len, "%s has no GPU (no GPU daemon serves it)", gm->cfg.node);
        return IVM_ERROR_NOT_FOUND;
    }
    if (req->gpu >= g->ngpus) {
        snprintf(detail, detail_len, "%s has no GPU %u (it has %u)", gm->cfg.node, req->gpu,
                 g->ngpus);
        return IVM_ERROR_NOT_FOUND;
    }
    rep->ngpus    = g->ngpus;
    rep->gpud_pid = (uint32_t)g->pid;
    snprintf(rep->backend, sizeof(rep->backend), "%s", g->backend_name);
    snprintf(rep->name, sizeof(rep->name), "%s", g->gpus[req->gpu].name);
    rep->granularity = g->gpus[req->gpu].granularity;
    rep->capacity    = g->gpus[req->gpu].capacity;
    if (!g->alive) {
        return IVM_SUCCESS; /* flags without IVM_GPU_INFO_ALIVE */
    }
    r = ivmd_gpu_req_new(gm, IVM_GPUD_GSTATS, ivmd_gpu_on_stats);
    if (r == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    r->conn    = c;
    r->pe_type = hdr->type;
    r->pe_seq  = hdr->seq;
    r->gpu     = req->gpu;
    memset(&sreq, 0, sizeof(sreq));
    sreq.gpu = req->gpu;
    if (ivmd_gpu_send(gm, r, &sreq, sizeof(sreq), NULL, 0) != IVM_SUCCESS) {
        return IVM_SUCCESS;
    }
    return IVMD_DEFERRED;
}
