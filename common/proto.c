#include "proto.h"

#include <stddef.h>
#include <string.h>

#include "wire.h"

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

/* A multi-byte field of a peer message: count elements of width bytes. */
typedef struct ivm_peer_field {
    uint16_t off;
    uint8_t  width;
    uint8_t  count;
} ivm_peer_field_t;

#define IVM_PEER_FIELD(T, f) {offsetof(T, f), sizeof(((T *)0)->f), 1},
#define IVM_PEER_ARRAY(T, f)                                                   \
    {offsetof(T, f), sizeof(((T *)0)->f[0]),                                   \
     sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0])},
#define IVM_PEER_FIELD_LIST(list)                                              \
    static const ivm_peer_field_t ivm_peer_fields_##list[] = {                 \
        IVM_PEER_FIELDS_##list(IVM_PEER_FIELD, IVM_PEER_ARRAY){0, 0, 0}};
IVM_PEER_FIELD_LIST(NONE)
IVM_PEER_FIELD_LIST(HELLO)
IVM_PEER_FIELD_LIST(CHALLENGE)
IVM_PEER_FIELD_LIST(PING)
IVM_PEER_FIELD_LIST(NODEINFO)
IVM_PEER_FIELD_LIST(FWD)
IVM_PEER_FIELD_LIST(PE_STATE)
IVM_PEER_FIELD_LIST(SPAWN)
IVM_PEER_FIELD_LIST(SPAWN_REP)
IVM_PEER_FIELD_LIST(JOB)
IVM_PEER_FIELD_LIST(OUTPUT)
IVM_PEER_FIELD_LIST(OBJ)
IVM_PEER_FIELD_LIST(XFER)
IVM_PEER_FIELD_LIST(UCX_ADDR)
IVM_PEER_FIELD_LIST(UCX_RKEY)
IVM_PEER_FIELD_LIST(ROUTE)
IVM_PEER_FIELD_LIST(SIGNAL)
IVM_PEER_FIELD_LIST(PLACED)
IVM_PEER_FIELD_LIST(PE_ENDED)
IVM_PEER_FIELD_LIST(EP_HELLO)
IVM_PEER_FIELD_LIST(EP_WELCOME)

typedef struct ivm_peer_type_info {
    const char             *name;
    uint32_t                size;   /* fixed part */
    uint32_t                tail;   /* largest variable part after it */
    const ivm_peer_field_t *fields; /* its multi-byte fields, ending in width 0 */
} ivm_peer_type_info_t;

#define IVM_PEER_INFO_ENTRY(name, value, type, tail, fields) \
    [value - IVM_PEER_FIRST] = {#name, sizeof(type), tail, ivm_peer_fields_##fields},
static const ivm_peer_type_info_t ivm_peer_types[IVM_PEER_LAST - IVM_PEER_FIRST] = {
    IVM_PEER_TABLE(IVM_PEER_INFO_ENTRY)
};

/* One field element at p: host order to little-endian (pack) or back. */
static void ivm_peer_swap(uint8_t *p, unsigned width, int pack)
{
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;

    switch (width) {
    case 2:
        if (pack) {
            memcpy(&v16, p, 2);
            ivm_put_le16(p, v16);
        } else {
            v16 = ivm_get_le16(p);
            memcpy(p, &v16, 2);
        }
        break;
    case 4:
        if (pack) {
            memcpy(&v32, p, 4);
            ivm_put_le32(p, v32);
        } else {
            v32 = ivm_get_le32(p);
            memcpy(p, &v32, 4);
        }
        break;
    case 8:
        if (pack) {
            memcpy(&v64, p, 8);
            ivm_put_le64(p, v64);
        } else {
            v64 = ivm_get_le64(p);
            memcpy(p, &v64, 8);
        }
        break;
    default:
        break;
    }
}

static void ivm_peer_swap_fields(const ivm_peer_field_t *f, uint8_t *base, int pack)
{
    unsigned k;

    for (; f->width != 0; ++f) {
        for (k = 0; k < f->count; ++k) {
            ivm_peer_swap(base + f->off + (size_t)k * f->width, f->width, pack);
        }
    }
}

/* n int32 PE ids at byte `at` of the payload, when they fit in len. */
static void ivm_peer_swap_ids(uint8_t *payload, uint32_t len, size_t at, int32_t n, int pack)
{
    int32_t k;

    if (n < 0 || (uint64_t)n * sizeof(int32_t) > len - at) {
        return; /* refused by the receiver's checks */
    }
    for (k = 0; k < n; ++k) {
        ivm_peer_swap(payload + at + (size_t)k * sizeof(int32_t), 4, pack);
    }
}

/* Where a message's tail of int32 PE ids starts and its count field, for
 * the types that have one (SPAWN, PLACED); 0 otherwise. */
static size_t ivm_peer_ids_at(uint16_t type, size_t *count_off_p)
{
    if (type == IVM_PEER_SPAWN) {
        *count_off_p = offsetof(ivm_peer_spawn_t, n);
        return sizeof(ivm_peer_spawn_t);
    }
    if (type == IVM_PEER_PLACED) {
        *count_off_p = offsetof(ivm_peer_placed_t, n);
        return sizeof(ivm_peer_placed_t);
    }
    return 0;
}

static void ivm_peer_convert(uint16_t type, void *payload, uint32_t len, int pack)
{
    const ivm_peer_type_info_t *info;
    size_t count_off = 0, ids_at;
    int32_t n = 0;

    if (type < IVM_PEER_FIRST || type >= IVM_PEER_LAST) {
        return;
    }
    info = &ivm_peer_types[type - IVM_PEER_FIRST];
    if (info->name == NULL || len < info->size) {
        return;
    }
    ids_at = ivm_peer_ids_at(type, &count_off);
    if (ids_at != 0 && pack) {
        memcpy(&n, (uint8_t *)payload + count_off, sizeof(n));
    }
    ivm_peer_swap_fields(info->fields, payload, pack);
    if (ids_at != 0) {
        if (!pack) {
            memcpy(&n, (uint8_t *)payload + count_off, sizeof(n));
        }
        ivm_peer_swap_ids((uint8_t *)payload, len, ids_at, n, pack);
    }
}

void ivm_peer_pack(uint16_t type, void *payload, uint32_t len)
{
    ivm_peer_convert(type, payload, len, 1);
}

void ivm_peer_unpack(uint16_t type, void *payload, uint32_t len)
{
    ivm_peer_convert(type, payload, len, 0);
}

static const ivm_peer_field_t ivm_peer_hdr_fields[] = {
    IVM_PEER_FIELD(ivm_msg_hdr_t, magic) IVM_PEER_FIELD(ivm_msg_hdr_t, version)
    IVM_PEER_FIELD(ivm_msg_hdr_t, type) IVM_PEER_FIELD(ivm_msg_hdr_t, length)
    IVM_PEER_FIELD(ivm_msg_hdr_t, seq) {0, 0, 0}};

void ivm_peer_hdr_pack(ivm_msg_hdr_t *hdr)
{
    ivm_peer_swap_fields(ivm_peer_hdr_fields, (uint8_t *)hdr, 1);
}

void ivm_peer_hdr_unpack(ivm_msg_hdr_t *hdr)
{
    ivm_peer_swap_fields(ivm_peer_hdr_fields, (uint8_t *)hdr, 0);
}

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
    case IVM_MSG_BARRIER: {
        const ivm_msg_barrier_req_t *req = payload;
        if (req->n < 0 || req->n > IVM_BARRIER_PES_MAX ||
            hdr->length != info->req_size + (uint32_t)req->n * sizeof(int32_t)) {
            *why_p = "BARRIER count disagrees with the payload length";
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
