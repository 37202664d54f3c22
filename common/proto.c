#include "proto.h"

#include <string.h>

typedef struct ivm_proto_type_info {
    const char *name;
    uint32_t req_size;  /* fixed request payload bytes */
    uint32_t rep_size;  /* fixed reply payload bytes */
    int variable;       /* request carries a tail after the fixed part */
    int polled;         /* the caller polls for the reply */
} ivm_proto_type_info_t;

#define IVM_PROTO_INFO_ENTRY(name, value, req, rep, var, poll) \
    [value] = {#name, sizeof(req), sizeof(rep), var, poll},

static const ivm_proto_type_info_t ivm_proto_types[IVM_MSG_LAST] = {
    IVM_MSG_TABLE(IVM_PROTO_INFO_ENTRY)
};

typedef struct ivm_peer_type_info {
    const char *name;
    uint32_t    size;  /* fixed part */
    uint32_t    tail;  /* largest variable part after it */
} ivm_peer_type_info_t;

#define IVM_PEER_INFO_ENTRY(name, value, type, tail) \
    [value - IVM_PEER_FIRST] = {#name, sizeof(type), tail},
static const ivm_peer_type_info_t ivm_peer_types[IVM_PEER_LAST - IVM_PEER_FIRST] = {
    IVM_PEER_TABLE(IVM_PEER_INFO_ENTRY)
};

ivmError_t ivm_proto_check_peer(const ivm_msg_hdr_t *hdr, const char **why_p)
{
    if (hdr->magic != IVM_PROTO_MAGIC) {
        *why_p = "bad magic";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->version != IVM_PROTO_VERSION) {
        *why_p = "unsupported protocol version";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->type < IVM_PEER_FIRST || hdr->type >= IVM_PEER_LAST ||
        ivm_peer_types[hdr->type - IVM_PEER_FIRST].name == NULL) {
        *why_p = "not a peer message type";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->length < ivm_peer_types[hdr->type - IVM_PEER_FIRST].size ||
        hdr->length > ivm_peer_types[hdr->type - IVM_PEER_FIRST].size +
                          ivm_peer_types[hdr->type - IVM_PEER_FIRST].tail) {
        *why_p = "wrong payload length for the peer message type";
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

const char *ivm_proto_type_name(uint32_t type)
{
    if (type >= IVM_PEER_FIRST && type < IVM_PEER_LAST &&
        ivm_peer_types[type - IVM_PEER_FIRST].name != NULL) {
        return ivm_peer_types[type - IVM_PEER_FIRST].name;
    }
    type &= ~IVM_MSG_REPLY;
    if (type == IVM_MSG_NONE || type >= IVM_MSG_LAST) {
        return "?";
    }
    return ivm_proto_types[type].name;
}

void ivm_proto_hdr_init(ivm_msg_hdr_t *hdr, uint16_t type, uint32_t length,
                        uint32_t seq)
{
    hdr->magic   = IVM_PROTO_MAGIC;
    hdr->version = IVM_PROTO_VERSION;
    hdr->type    = type;
    hdr->length  = length;
    hdr->seq     = seq;
}

ivmError_t ivm_proto_check_hdr(const ivm_msg_hdr_t *hdr, const char **why_p)
{
    uint32_t type = hdr->type & ~IVM_MSG_REPLY;

    if (hdr->magic != IVM_PROTO_MAGIC) {
        *why_p = "bad magic";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->version != IVM_PROTO_VERSION) {
        *why_p = "unsupported protocol version";
        return IVM_ERROR_PROTOCOL;
    }
    if (type == IVM_MSG_NONE || type >= IVM_MSG_LAST) {
        *why_p = "unknown message type";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->length > IVM_MSG_MAX_PAYLOAD) {
        *why_p = "payload longer than the protocol allows";
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_proto_check_req(const ivm_msg_hdr_t *hdr, const void *payload,
                               const char **why_p)
{
    const ivm_proto_type_info_t *info;
    uint32_t type = hdr->type;

    if (type & IVM_MSG_REPLY) {
        *why_p = "reply where a request was expected";
        return IVM_ERROR_PROTOCOL;
    }
    info = &ivm_proto_types[type];
    if (!info->variable) {
        if (hdr->length != info->req_size) {
            *why_p = "wrong payload length for the message type";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    }
    if (hdr->length < info->req_size) {
        *why_p = "payload shorter than the message type's fixed part";
        return IVM_ERROR_PROTOCOL;
    }
    switch (type) {
    case IVM_MSG_ENTER: {
        const ivm_msg_enter_req_t *req = payload;
        if (req->blob_len != hdr->length - info->req_size) {
            *why_p = "ENTER blob length disagrees with the payload length";
            return IVM_ERROR_PROTOCOL;
        }
        if (!ivm_proto_strok(req->cpu_devices, sizeof(req->cpu_devices))) {
            *why_p = "ENTER cpu_devices not terminated";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    }
    case IVM_MSG_CLUSTER: {
        const ivm_msg_cluster_req_t *req = payload;
        if (req->n < 1 || req->n > IVM_CLUSTER_MAX_NODES ||
            hdr->length != info->req_size + req->n * sizeof(ivm_msg_cluster_node_t)) {
            *why_p = "CLUSTER node count disagrees with the payload length";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    }
    case IVM_MSG_KILL_PES: {
        const ivm_msg_kill_pes_req_t *req = payload;
        if (req->n < 1 || req->n > IVM_KILL_PES_MAX ||
            hdr->length != info->req_size + (uint32_t)req->n * sizeof(int32_t)) {
            *why_p = "KILL_PES count disagrees with the payload length";
            return IVM_ERROR_PROTOCOL;
        }
        return IVM_SUCCESS;
    }
    default:
        *why_p = "variable-length type without a check";
        return IVM_ERROR_PROTOCOL;
    }
}

int ivm_proto_reply_polled(uint16_t type)
{
    return (type > IVM_MSG_NONE && type < IVM_MSG_LAST) ? ivm_proto_types[type].polled : 0;
}

uint32_t ivm_proto_rep_size(uint16_t type)
{
    if (type > IVM_MSG_NONE && type < IVM_MSG_LAST && ivm_proto_types[type].rep_size > 0) {
        return ivm_proto_types[type].rep_size;
    }
    return (uint32_t)sizeof(ivm_msg_status_t);
}

/* Shortest reply payload of a type: its fixed struct, except CREATE_PES,
 * whose successful reply ends after its n-th PE id (see proto.h). */
static uint32_t ivm_proto_rep_min(uint32_t type)
{
    if (type == IVM_MSG_CREATE_PES) {
        return (uint32_t)offsetof(ivm_msg_create_pes_rep_t, pes);
    }
    return ivm_proto_types[type].rep_size;
}

ivmError_t ivm_proto_check_rep(const ivm_msg_hdr_t *hdr, const char **why_p)
{
    uint32_t type = hdr->type & ~IVM_MSG_REPLY;

    if (!(hdr->type & IVM_MSG_REPLY)) {
        *why_p = "request where a reply was expected";
        return IVM_ERROR_PROTOCOL;
    }
    if (hdr->length < ivm_proto_rep_min(type) ||
        hdr->length > ivm_proto_types[type].rep_size + IVM_MSG_DETAIL_MAX) {
        *why_p = "wrong reply length for the message type";
        return IVM_ERROR_PROTOCOL;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_proto_check_rep_body(const ivm_msg_hdr_t *hdr, const void *payload,
                                    const char **why_p)
{
    uint32_t type = hdr->type & ~IVM_MSG_REPLY;

    if (type == IVM_MSG_CREATE_PES && hdr->length < ivm_proto_types[type].rep_size) {
        const ivm_msg_create_pes_rep_t *rep = payload;
        if (rep->status != IVM_SUCCESS || rep->n < 0 || rep->n > IVM_CREATE_PES_MAX ||
            hdr->length != ivm_proto_rep_min(type) + (uint32_t)rep->n * sizeof(int32_t)) {
            *why_p = "short CREATE_PES reply disagrees with its PE count";
            return IVM_ERROR_PROTOCOL;
        }
    }
    return IVM_SUCCESS;
}

int ivm_proto_strset(char *dst, size_t dst_size, const char *src)
{
    size_t len = strlen(src);

    if (len >= dst_size) {
        return -1;
    }
    memset(dst, 0, dst_size);
    memcpy(dst, src, len);
    return 0;
}

int ivm_proto_strok(const char *field, size_t size)
{
    return memchr(field, '\0', size) != NULL;
}
