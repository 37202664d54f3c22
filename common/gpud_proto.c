#include "gpud_proto.h"

typedef struct ivm_gpud_type_info {
    const char *name;
    uint32_t    req_size; /* request payload bytes */
    uint32_t    rep_size; /* fixed reply payload bytes */
} ivm_gpud_type_info_t;

#define IVM_GPUD_INFO_ENTRY(name, value, req, rep) \
    [(value) - IVM_GPUD_FIRST] = {#name, sizeof(req), sizeof(rep)},
static const ivm_gpud_type_info_t ivm_gpud_types[IVM_GPUD_LAST - IVM_GPUD_FIRST] = {
    IVM_GPUD_TABLE(IVM_GPUD_INFO_ENTRY)
};

static const ivm_gpud_type_info_t *ivm_gpud_info(uint32_t type)
{
    type &= ~IVM_MSG_REPLY;
    if (type < IVM_GPUD_FIRST || type >= IVM_GPUD_LAST ||
        ivm_gpud_types[type - IVM_GPUD_FIRST].name == NULL) {
        return NULL;
    }
    return &ivm_gpud_types[type - IVM_GPUD_FIRST];
}

ivmError_t ivm_gpud_check_hdr(const ivm_msg_hdr_t *hdr, const char **why_p)
{
    if (hdr->magic != IVM_PROTO_MAGIC) {
        *why_p = "bad magic";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->version != IVM_PROTO_VERSION) {
        *why_p = "unsupported protocol version";
        return IVM_ERROR_PROTOCOL;
    }
    if (ivm_gpud_info(hdr->type) == NULL) {
        *why_p = "not a gpud message type";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->length > IVM_MSG_MAX_PAYLOAD) {
        *why_p = "payload longer than the protocol allows";
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivm_gpud_check_acquire(const ivm_gpud_acquire_req_t *req,
                                         const char **why_p)
{
    if (req->flags != 0 || req->reserved != 0) {
        *why_p = "ACQUIRE flags/reserved not zero";
        return IVM_ERROR_PROTOCOL;
    }
    if (req->size == 0 || req->offset > req->obj_size ||
        req->size > req->obj_size - req->offset) {
        *why_p = "ACQUIRE range empty or outside the object";
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivm_gpud_check_copy(const ivm_gpud_copy_req_t *req, const char **why_p)
{
    if (req->reserved != 0) {
        *why_p = "COPY reserved not zero";
        return IVM_ERROR_PROTOCOL;
    }
    if (req->dir != IVM_GPUD_COPY_H2D && req->dir != IVM_GPUD_COPY_D2H) {
        *why_p = "COPY direction is neither H2D nor D2H";
        return IVM_ERROR_INVALID_VALUE;
    }
    if (req->size == 0 || req->offset + req->size < req->offset) {
        *why_p = "COPY range empty or overflowing";
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_gpud_check_req(const ivm_msg_hdr_t *hdr, const void *payload,
                              const char **why_p)
{
    const ivm_gpud_type_info_t *info = ivm_gpud_info(hdr->type);

    if (hdr->type & IVM_MSG_REPLY) {
        *why_p = "reply where a request was expected";
        return IVM_ERROR_PROTOCOL;
    }
    if (info == NULL || hdr->length != info->req_size) {
        *why_p = "wrong payload length for the gpud message type";
        return IVM_ERROR_PROTOCOL;
    }
    switch (hdr->type) {
    case IVM_GPUD_ACQUIRE:
        return ivm_gpud_check_acquire(payload, why_p);
    case IVM_GPUD_COPY:
        return ivm_gpud_check_copy(payload, why_p);
    case IVM_GPUD_JOB_END:
        if (((const ivm_gpud_job_req_t *)payload)->reserved != 0) {
            *why_p = "JOB_END reserved not zero";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    case IVM_GPUD_CANCEL:
        if (((const ivm_gpud_cancel_req_t *)payload)->reserved != 0) {
            *why_p = "CANCEL reserved not zero";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    case IVM_GPUD_GSTATS:
        if (((const ivm_gpud_stats_req_t *)payload)->reserved != 0) {
            *why_p = "GSTATS reserved not zero";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    case IVM_GPUD_FILLED: {
        const ivm_gpud_filled_req_t *f = payload;
        if (f->reserved != 0) {
            *why_p = "FILLED reserved not zero";
            return IVM_ERROR_PROTOCOL;
        }
        if (f->size == 0 || f->offset + f->size < f->offset) {
            *why_p = "FILLED range empty or overflowing";
            return IVM_ERROR_INVALID_VALUE;
        }
        return IVM_SUCCESS;
    }
    default:
        return IVM_SUCCESS;
    }
}

ivmError_t ivm_gpud_check_rep(const ivm_msg_hdr_t *hdr, const char **why_p)
{
    const ivm_gpud_type_info_t *info = ivm_gpud_info(hdr->type);

    if (!(hdr->type & IVM_MSG_REPLY)) {
        *why_p = "request where a reply was expected";
        return IVM_ERROR_PROTOCOL;
    }
    if (info == NULL || hdr->length < info->rep_size ||
        hdr->length > info->rep_size + IVM_MSG_DETAIL_MAX) {
        *why_p = "wrong reply length for the gpud message type";
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

uint32_t ivm_gpud_req_size(uint32_t type)
{
    const ivm_gpud_type_info_t *info = ivm_gpud_info(type);
    return info != NULL ? info->req_size : 0;
}

uint32_t ivm_gpud_rep_size(uint32_t type)
{
    const ivm_gpud_type_info_t *info = ivm_gpud_info(type);
    return info != NULL ? info->rep_size : 0;
}

const char *ivm_gpud_type_name(uint32_t type)
{
    const ivm_gpud_type_info_t *info = ivm_gpud_info(type);
    return info != NULL ? info->name : "?";
}
