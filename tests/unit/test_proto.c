/* Unit tests of the wire-protocol validators (common/proto.c): every message
 * type is accepted in its well-formed shape and every malformed header or
 * payload is refused with a reason. */
#include <criterion/criterion.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "wire.h"

typedef struct msg_type_desc {
    const char *name;
    uint16_t    type;
    uint32_t    req_size;
    uint32_t    rep_size;
    int         variable;
    int         polled;
} msg_type_desc_t;

#define TYPE_DESC(name, value, req, rep, var, poll) {#name, value, sizeof(req), sizeof(rep), var, poll},
static const msg_type_desc_t all_types[] = {IVM_MSG_TABLE(TYPE_DESC)};
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))

/* Large enough for any fixed request plus a tail. */
typedef union payload_buf {
    ivm_msg_enter_req_t    enter;
    ivm_msg_kill_pes_req_t kill;
    ivm_msg_cluster_req_t  cluster;
    uint64_t               align;
    char                   bytes[sizeof(ivm_msg_create_pes_rep_t) + 8192];
} payload_buf_t;

static ivm_msg_hdr_t make_hdr(uint16_t type, uint32_t length)
{
    ivm_msg_hdr_t hdr;

    memset(&hdr, 0xa5, sizeof(hdr));
    ivm_proto_hdr_init(&hdr, type, length, 77);
    return hdr;
}

/* A well-formed request payload of the given type; returns its length. */
static uint32_t good_request(const msg_type_desc_t *t, payload_buf_t *buf)
{
    memset(buf, 0, sizeof(*buf));
    if (t->type == IVM_MSG_KILL_PES) {
        int32_t ids[2] = {3, 4};
        buf->kill.n = 2;
        memcpy(buf->bytes + sizeof(ivm_msg_kill_pes_req_t), ids, sizeof(ids));
        return (uint32_t)(sizeof(ivm_msg_kill_pes_req_t) + sizeof(ids));
    }
    if (t->type == IVM_MSG_CLUSTER) {
        ivm_msg_cluster_node_t nodes[2];
        memset(nodes, 0, sizeof(nodes));
        strcpy(nodes[0].node, "node0");
        strcpy(nodes[0].addr, "127.0.0.1");
        nodes[0].port = 7000;
        strcpy(nodes[1].node, "node1");
        strcpy(nodes[1].addr, "::1");
        nodes[1].port = 7001;
        buf->cluster.n = 2;
        memcpy(buf->bytes + sizeof(ivm_msg_cluster_req_t), nodes, sizeof(nodes));
        return (uint32_t)(sizeof(ivm_msg_cluster_req_t) + sizeof(nodes));
    }
    if (t->type == IVM_MSG_ENTER) {
        static const char blob[] = "/bin/prog\0/tmp\0prog\0A=1";
        buf->enter.flags    = IVM_ENTER_ROOT;
        buf->enter.argc     = 1;
        buf->enter.envc     = 1;
        buf->enter.blob_len = sizeof(blob);
        memcpy(buf->bytes + sizeof(ivm_msg_enter_req_t), blob, sizeof(blob));
        strcpy(buf->enter.cpu_devices, "0-1");
        return (uint32_t)(sizeof(ivm_msg_enter_req_t) + sizeof(blob));
    }
    return t->req_size;
}

Test(proto, table_is_complete)
{
    /* Every value between NONE and LAST is a listed type. */
    cr_assert_eq(NTYPES, (size_t)(IVM_MSG_LAST - 1));
    for (size_t i = 0; i < NTYPES; ++i) {
        cr_assert_str_eq(ivm_proto_type_name(all_types[i].type), all_types[i].name);
        cr_assert_str_eq(ivm_proto_type_name(all_types[i].type | IVM_MSG_REPLY),
                         all_types[i].name);
    }
    cr_assert_str_eq(ivm_proto_type_name(IVM_MSG_CREATE_PES), "CREATE_PES");
    cr_assert_str_eq(ivm_proto_type_name(IVM_MSG_NONE), "?");
    cr_assert_str_eq(ivm_proto_type_name(IVM_MSG_LAST), "?");
    cr_assert_str_eq(ivm_proto_type_name(0x7fff), "?");
}

/* The calls that wake another process, whose reply may take any time, or
 * that cross to another node (SYNC) do not poll for their reply; every other
 * call does. */
Test(proto, reply_polling_rule)
{
    for (size_t i = 0; i < NTYPES; ++i) {
        const msg_type_desc_t *t = &all_types[i];
        int wakes = t->type == IVM_MSG_WAIT || t->type == IVM_MSG_SIGNAL ||
                    t->type == IVM_MSG_CREATE_PES || t->type == IVM_MSG_SIGNAL_TO ||
                    t->type == IVM_MSG_WAIT_FROM || t->type == IVM_MSG_BARRIER ||
                    t->type == IVM_MSG_PUT_SIGNAL || t->type == IVM_MSG_SYNC ||
                    t->type == IVM_MSG_SIGNAL_POKE;
        cr_assert_eq(ivm_proto_reply_polled(t->type), !wakes, "%s", t->name);
        cr_assert_eq(t->polled, !wakes, "%s", t->name);
    }
    cr_assert_eq(ivm_proto_reply_polled(0), 0);
    cr_assert_eq(ivm_proto_reply_polled(IVM_MSG_LAST), 0);
    cr_assert_eq(ivm_proto_reply_polled(IVM_MSG_SYNC | IVM_MSG_REPLY), 0);
}

Test(proto, wire_sizes)
{
    /* The layout is a contract between separately built programs. */
    cr_assert_eq(sizeof(ivm_msg_hdr_t), 16);
    cr_assert_eq(sizeof(ivm_msg_enter_req_t), 176);
    cr_assert_eq(sizeof(ivm_msg_status_t), 8);
    cr_assert_eq(sizeof(ivm_msg_kill_pes_req_t), 8);
    cr_assert_eq(sizeof(ivm_msg_cpu_info_req_t), 8);
    cr_assert_eq(sizeof(ivm_msg_cpu_info_rep_t), 176);
    cr_assert_eq(sizeof(ivm_msg_list_rep_t), 384);
    cr_assert_eq(sizeof(ivm_msg_set_share_req_t), 8);
    cr_assert_eq(sizeof(ivm_msg_barrier_req_t), 8);
    cr_assert_eq(sizeof(ivm_msg_node_req_t), 8);
    cr_assert_eq(sizeof(ivm_msg_node_devs_rep_t), 88 + 20 * 128);
    cr_assert_eq(offsetof(ivm_msg_node_devs_rep_t, devs), 88);
    cr_assert_eq(offsetof(ivm_msg_cpu_info_rep_t, status), 0);
    /* every reply starts with its status */
    cr_assert_eq(offsetof(ivm_msg_info_rep_t, status), 0);
    cr_assert_eq(offsetof(ivm_msg_map_rep_t, status), 0);
    cr_assert_eq(offsetof(ivm_msg_enter_rep_t, status), 0);
    cr_assert_eq(offsetof(ivm_msg_create_pes_rep_t, status), 0);
}

Test(proto, hdr_init)
{
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_MAP, 123);

    cr_assert_eq(hdr.magic, IVM_PROTO_MAGIC);
    cr_assert_eq(hdr.version, IVM_PROTO_VERSION);
    cr_assert_eq(hdr.type, IVM_MSG_MAP);
    cr_assert_eq(hdr.length, 123);
    cr_assert_eq(hdr.seq, 77);
    cr_assert_eq(memcmp(&hdr.magic, "IVM1", 4), 0, "magic is \"IVM1\" in memory order");
}

Test(proto, accepts_every_good_request)
{
    payload_buf_t buf;
    const char *why;

    for (size_t i = 0; i < NTYPES; ++i) {
        uint32_t len = good_request(&all_types[i], &buf);
        ivm_msg_hdr_t hdr = make_hdr(all_types[i].type, len);
        why = NULL;
        cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_SUCCESS, "%s header: %s",
                     all_types[i].name, why ? why : "");
        cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_SUCCESS,
                     "%s request of %u bytes: %s", all_types[i].name, len, why ? why : "");
    }
}

Test(proto, accepts_variable_requests_at_their_bounds)
{
    const size_t cap = sizeof(ivm_msg_enter_req_t) +
                       sizeof(ivm_msg_kill_pes_req_t) + IVM_KILL_PES_MAX * sizeof(int32_t);
    char *buf = calloc(1, cap);
    ivm_msg_kill_pes_req_t *kill = (ivm_msg_kill_pes_req_t *)buf;
    const char *why = NULL;
    ivm_msg_hdr_t hdr;

    cr_assert_not_null(buf);
    /* KILL_PES with one id and with the most ids allowed */
    kill->n = 1;
    hdr = make_hdr(IVM_MSG_KILL_PES, sizeof(ivm_msg_kill_pes_req_t) + 4);
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_SUCCESS, "%s", why);
    kill->n = IVM_KILL_PES_MAX;
    hdr = make_hdr(IVM_MSG_KILL_PES,
                   sizeof(ivm_msg_kill_pes_req_t) + IVM_KILL_PES_MAX * sizeof(int32_t));
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_SUCCESS, "%s", why);
    /* ENTER of a child PE: no blob */
    memset(buf, 0, cap);
    hdr = make_hdr(IVM_MSG_ENTER, sizeof(ivm_msg_enter_req_t));
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_SUCCESS, "%s", why);
    free(buf);
}

Test(proto, accepts_every_good_reply)
{
    const char *why = NULL;

    for (size_t i = 0; i < NTYPES; ++i) {
        uint16_t type = (uint16_t)(all_types[i].type | IVM_MSG_REPLY);
        ivm_msg_hdr_t hdr = make_hdr(type, all_types[i].rep_size);
        cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_SUCCESS, "%s", all_types[i].name);
        cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_SUCCESS, "%s reply: %s",
                     all_types[i].name, why);
        /* with the longest detail text */
        hdr.length = all_types[i].rep_size + IVM_MSG_DETAIL_MAX;
        cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_SUCCESS,
                     "%s reply with detail: %s", all_types[i].name, why);
    }
}

Test(proto, rejects_bad_magic)
{
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_INFO, sizeof(ivm_msg_empty_t));
    const char *why = NULL;

    hdr.magic = 0x324d5649u; /* "IVM2" */
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.magic = 0;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
    hdr.magic = __builtin_bswap32(IVM_PROTO_MAGIC);
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
}

Test(proto, rejects_wrong_version)
{
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_INFO, sizeof(ivm_msg_empty_t));
    const char *why = NULL;

    hdr.version = IVM_PROTO_VERSION + 1;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.version = 0;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
    hdr.version = 0xffff;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
}

Test(proto, rejects_unknown_type)
{
    static const uint16_t bad[] = {
        IVM_MSG_NONE, IVM_MSG_LAST, IVM_MSG_LAST + 1, 0x7fff, IVM_MSG_REPLY,
        IVM_MSG_REPLY | IVM_MSG_LAST, 0xffff};
    const char *why;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        ivm_msg_hdr_t hdr = make_hdr(bad[i], 8);
        why = NULL;
        cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL, "type 0x%x",
                     bad[i]);
        cr_assert_not_null(why);
    }
}

Test(proto, rejects_oversize_length)
{
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_ENTER, IVM_MSG_MAX_PAYLOAD);
    const char *why = NULL;

    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_SUCCESS, "the maximum itself is fine");
    hdr.length = IVM_MSG_MAX_PAYLOAD + 1;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.length = UINT32_MAX;
    cr_assert_eq(ivm_proto_check_hdr(&hdr, &why), IVM_ERROR_PROTOCOL);
}

Test(proto, rejects_wrong_fixed_length)
{
    payload_buf_t buf;
    const char *why;

    memset(&buf, 0, sizeof(buf));
    for (size_t i = 0; i < NTYPES; ++i) {
        const msg_type_desc_t *t = &all_types[i];
        ivm_msg_hdr_t hdr;
        if (!t->variable) {
            hdr = make_hdr(t->type, t->req_size + 1);
            why = NULL;
            cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                         "%s request one byte long", t->name);
            cr_assert_not_null(why);
            hdr.length = t->req_size + 8;
            cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                         "%s request 8 bytes long", t->name);
        }
        /* every type: shorter than its fixed part */
        hdr = make_hdr(t->type, t->req_size - 1);
        cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                     "%s request one byte short", t->name);
        hdr.length = 0;
        cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                     "%s request empty", t->name);
        /* replies: below the fixed size, beyond the detail allowance */
        hdr = make_hdr((uint16_t)(t->type | IVM_MSG_REPLY), t->rep_size - 1);
        if (t->type == IVM_MSG_CREATE_PES) {
            /* may be short, but then it must hold exactly its n ids */
            cr_assert_eq(ivm_proto_check_rep_body(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                         "%s reply one byte short", t->name);
        } else {
            cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_ERROR_PROTOCOL,
                         "%s reply one byte short", t->name);
        }
        hdr.length = t->rep_size + IVM_MSG_DETAIL_MAX + 1;
        cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_ERROR_PROTOCOL,
                     "%s reply too long", t->name);
    }
}

/* A successful CREATE_PES reply ends after its n-th id; anything else short is
 * malformed. */
Test(proto, short_create_pes_reply)
{
    const uint32_t fixed = (uint32_t)offsetof(ivm_msg_create_pes_rep_t, pes);
    ivm_msg_create_pes_rep_t rep;
    ivm_msg_hdr_t hdr;
    const char *why = NULL;

    memset(&rep, 0, sizeof(rep));
    rep.n      = 3;
    rep.pes[0] = 1;
    hdr = make_hdr((uint16_t)(IVM_MSG_CREATE_PES | IVM_MSG_REPLY), fixed + 3 * 4);
    cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_SUCCESS);
    cr_assert_eq(ivm_proto_check_rep_body(&hdr, &rep, &why), IVM_SUCCESS);
    hdr.length = fixed + 2 * 4; /* one id missing */
    cr_assert_eq(ivm_proto_check_rep_body(&hdr, &rep, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.length = fixed + 3 * 4;
    rep.status = IVM_ERROR_SPAWN; /* a failure carries the whole struct */
    cr_assert_eq(ivm_proto_check_rep_body(&hdr, &rep, &why), IVM_ERROR_PROTOCOL);
    rep.status = IVM_SUCCESS;
    rep.n      = -1;
    hdr.length = fixed;
    cr_assert_eq(ivm_proto_check_rep_body(&hdr, &rep, &why), IVM_ERROR_PROTOCOL);
    hdr.length = fixed - 1; /* not even status and n */
    cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_ERROR_PROTOCOL);
    hdr.length = sizeof(rep); /* the whole struct: always fine */
    rep.status = IVM_ERROR_SPAWN;
    cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_SUCCESS);
    cr_assert_eq(ivm_proto_check_rep_body(&hdr, &rep, &why), IVM_SUCCESS);
}

Test(proto, rejects_kill_pes_count_mismatch)
{
    payload_buf_t buf;
    const char *why;
    const uint32_t fixed = sizeof(ivm_msg_kill_pes_req_t);
    ivm_msg_hdr_t hdr;

    memset(&buf, 0, sizeof(buf));
    buf.kill.n = 2; /* says two ids, carries one */
    hdr = make_hdr(IVM_MSG_KILL_PES, fixed + 4);
    why = NULL;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    buf.kill.n = 1; /* says one id, carries three */
    hdr.length = fixed + 12;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    buf.kill.n = 1; /* an id cut in half */
    hdr.length = fixed + 2;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    buf.kill.n = 0;
    hdr.length = fixed;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "n = 0");
    buf.kill.n = -1;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "n = -1");
    buf.kill.n = INT32_MIN;
    hdr.length = fixed; /* n * 4 wraps to 0 in 32 bits */
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "n = INT32_MIN");
    buf.kill.n = 0x40000000; /* n * 4 wraps to 0 in 32 bits */
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "n = 2^30");
    buf.kill.n = IVM_KILL_PES_MAX + 1;
    hdr.length = fixed + (IVM_KILL_PES_MAX + 1) * 4;
    {
        char *big = calloc(1, hdr.length);
        cr_assert_not_null(big);
        memcpy(big, &buf.kill, sizeof(buf.kill));
        cr_assert_eq(ivm_proto_check_req(&hdr, big, &why), IVM_ERROR_PROTOCOL,
                     "more than IVM_KILL_PES_MAX ids");
        free(big);
    }
}

Test(proto, rejects_cluster_count_mismatch)
{
    payload_buf_t buf;
    const msg_type_desc_t cl = {"CLUSTER", IVM_MSG_CLUSTER, sizeof(ivm_msg_cluster_req_t), 0, 1, 1};
    const uint32_t node = sizeof(ivm_msg_cluster_node_t);
    const char *why;
    uint32_t len = good_request(&cl, &buf);
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_CLUSTER, len);

    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_SUCCESS);
    hdr.length = len - node; /* says 2 nodes, carries 1 */
    why = NULL;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.length = len + 1;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    hdr.length = sizeof(ivm_msg_cluster_req_t);
    buf.cluster.n = 0;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "no node");
    buf.cluster.n = 0x80000000u / node * 2; /* n * node wraps in 32 bits */
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL, "huge n");
}

Test(proto, rejects_enter_blob_mismatch)
{
    payload_buf_t buf;
    const msg_type_desc_t enter = {"ENTER", IVM_MSG_ENTER, sizeof(ivm_msg_enter_req_t), 0, 1, 1};
    const char *why;
    uint32_t len = good_request(&enter, &buf);
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_ENTER, len);

    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_SUCCESS);
    hdr.length = len + 1; /* a byte more than the blob says */
    why = NULL;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
    hdr.length = len - 1; /* a byte less */
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    hdr.length = len;
    buf.enter.blob_len = UINT32_MAX;
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    buf.enter.blob_len = 0; /* no blob announced, bytes follow */
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
}

Test(proto, rejects_enter_unterminated_cpu_devices)
{
    payload_buf_t buf;
    const char *why = NULL;
    ivm_msg_hdr_t hdr = make_hdr(IVM_MSG_ENTER, sizeof(ivm_msg_enter_req_t));

    memset(&buf, 0, sizeof(buf));
    memset(buf.enter.cpu_devices, '1', sizeof(buf.enter.cpu_devices));
    cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL);
    cr_assert_not_null(why);
}

Test(proto, rejects_reply_request_confusion)
{
    payload_buf_t buf;
    const char *why;

    for (size_t i = 0; i < NTYPES; ++i) {
        const msg_type_desc_t *t = &all_types[i];
        uint32_t len = good_request(t, &buf);
        /* a reply arriving where a request is expected */
        ivm_msg_hdr_t hdr = make_hdr((uint16_t)(t->type | IVM_MSG_REPLY), len);
        why = NULL;
        cr_assert_eq(ivm_proto_check_req(&hdr, &buf, &why), IVM_ERROR_PROTOCOL,
                     "%s reply taken as a request", t->name);
        cr_assert_not_null(why);
        /* a request arriving where a reply is expected */
        hdr = make_hdr(t->type, t->rep_size);
        why = NULL;
        cr_assert_eq(ivm_proto_check_rep(&hdr, &why), IVM_ERROR_PROTOCOL,
                     "%s request taken as a reply", t->name);
        cr_assert_not_null(why);
    }
}

Test(proto, strset_and_strok)
{
    char field[8];

    cr_assert_eq(ivm_proto_strset(field, sizeof(field), "1234567"), 0);
    cr_assert_str_eq(field, "1234567");
    cr_assert(ivm_proto_strok(field, sizeof(field)));
    cr_assert_eq(ivm_proto_strset(field, sizeof(field), ""), 0);
    cr_assert_str_eq(field, "");
    for (size_t i = 0; i < sizeof(field); ++i) {
        cr_assert_eq(field[i], 0, "strset clears the whole field (no stale bytes on the wire)");
    }
    cr_assert_neq(ivm_proto_strset(field, sizeof(field), "12345678"), 0,
                  "8 characters do not fit in 8 bytes with the NUL");
    memset(field, 'x', sizeof(field));
    cr_assert_not(ivm_proto_strok(field, sizeof(field)));
    field[7] = '\0';
    cr_assert(ivm_proto_strok(field, sizeof(field)));
}

/* ------------------------------------------------ peer wire byte order */

Test(proto, wire_helpers_are_little_endian)
{
    uint8_t b[8];

    ivm_put_le16(b, 0x0102);
    cr_assert(b[0] == 0x02 && b[1] == 0x01);
    ivm_put_le32(b, 0x01020304u);
    cr_assert(b[0] == 0x04 && b[1] == 0x03 && b[2] == 0x02 && b[3] == 0x01);
    ivm_put_le64(b, 0x0102030405060708ull);
    cr_assert(b[0] == 0x08 && b[7] == 0x01);
    cr_assert_eq(ivm_get_le16(b), 0x0708);
    cr_assert_eq(ivm_get_le32(b), 0x05060708u);
    cr_assert_eq(ivm_get_le64(b), 0x0102030405060708ull);
}

/* A packed peer message holds each field little-endian at its offset, and
 * unpacks to what was packed; SPAWN's PE ids go along, its blob does not. */
Test(proto, peer_messages_pack_little_endian_and_back)
{
    struct {
        ivm_peer_spawn_t sp;
        int32_t          ids[2];
        char             blob[4];
    } m, orig;
    ivm_peer_xfer_t x = {.op = 0x1122334455667788ull, .job = 7, .off = 0x0a0b0c0d0e0f1011ull};
    ivm_msg_hdr_t h;
    uint8_t *p = (uint8_t *)&x;

    ivm_peer_pack(IVM_PEER_DATA, &x, sizeof(x));
    cr_assert_eq(ivm_get_le64(p + offsetof(ivm_peer_xfer_t, op)), 0x1122334455667788ull);
    cr_assert_eq(ivm_get_le32(p + offsetof(ivm_peer_xfer_t, job)), 7u);
    cr_assert_eq(ivm_get_le64(p + offsetof(ivm_peer_xfer_t, off)), 0x0a0b0c0d0e0f1011ull);
    ivm_peer_unpack(IVM_PEER_DATA, &x, sizeof(x));
    cr_assert(x.op == 0x1122334455667788ull && x.job == 7 && x.off == 0x0a0b0c0d0e0f1011ull);

    memset(&m, 0, sizeof(m));
    m.sp.n      = 2;
    m.sp.op     = 99;
    m.ids[0]    = 0x01020304;
    m.ids[1]    = -5;
    memcpy(m.blob, "abc", 4);
    orig = m;
    ivm_peer_pack(IVM_PEER_SPAWN, &m, sizeof(m));
    cr_assert_eq(ivm_get_le32((uint8_t *)&m.ids[0]), 0x01020304u);
    cr_assert_eq((int32_t)ivm_get_le32((uint8_t *)&m.ids[1]), -5);
    cr_assert_str_eq(m.blob, "abc");
    ivm_peer_unpack(IVM_PEER_SPAWN, &m, sizeof(m));
    cr_assert_eq(memcmp(&m, &orig, sizeof(m)), 0);

    {
        struct {
            ivm_peer_placed_t pl;
            int32_t           ids[2];
        } q, qorig;
        memset(&q, 0, sizeof(q));
        q.pl.job  = 0x00100001;
        q.pl.node = 2;
        q.pl.n    = 2;
        q.ids[0]  = 0x0a0b0c0d;
        q.ids[1]  = 7;
        qorig     = q;
        ivm_peer_pack(IVM_PEER_PLACED, &q, sizeof(q));
        cr_assert_eq(ivm_get_le32((uint8_t *)&q.pl.n), 2u);
        cr_assert_eq(ivm_get_le32((uint8_t *)&q.ids[0]), 0x0a0b0c0du);
        ivm_peer_unpack(IVM_PEER_PLACED, &q, sizeof(q));
        cr_assert_eq(memcmp(&q, &qorig, sizeof(q)), 0);
    }

    ivm_proto_hdr_init(&h, IVM_PEER_PING, 8, 3);
    ivm_peer_hdr_pack(&h);
    cr_assert_eq(ivm_get_le32((uint8_t *)&h), IVM_PROTO_MAGIC);
    cr_assert_eq(ivm_get_le16((uint8_t *)&h + offsetof(ivm_msg_hdr_t, type)), IVM_PEER_PING);
    ivm_peer_hdr_unpack(&h);
    cr_assert(h.type == IVM_PEER_PING && h.length == 8 && h.seq == 3);
}

/* The addressed-signal peer messages (issue 16): fixed sizes, PLACED's ids
 * in its tail, nothing else admitted. */
Test(proto, peer_psync_messages_checked)
{
    ivm_msg_hdr_t h;
    const char *why = NULL;

    ivm_proto_hdr_init(&h, IVM_PEER_SIGNAL, sizeof(ivm_peer_signal_t), 0);
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_SUCCESS);
    h.length = sizeof(ivm_peer_signal_t) + 4;
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_ERROR_PROTOCOL);
    ivm_proto_hdr_init(&h, IVM_PEER_PE_ENDED, sizeof(ivm_peer_pe_ended_t), 0);
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_SUCCESS);
    h.length = 16;
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_ERROR_PROTOCOL);
    ivm_proto_hdr_init(&h, IVM_PEER_PLACED, sizeof(ivm_peer_placed_t) + 4 * IVM_PEER_PLACED_MAX,
                       0);
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_SUCCESS);
    h.length += 4;
    cr_assert_eq(ivm_proto_check_peer(&h, &why), IVM_ERROR_PROTOCOL);
    cr_assert_str_eq(ivm_proto_type_name(IVM_PEER_PLACED), "PLACED");
    cr_assert_geq(IVM_PEER_LAYOUT, 5u);
}

/* HELLO and CHALLENGE carry the peer message layout where a reserved word was. */
Test(proto, hello_and_challenge_carry_the_layout)
{
    cr_assert_eq(offsetof(ivm_peer_hello_t, layout), 116u);
    cr_assert_eq(offsetof(ivm_peer_challenge_t, layout), 116u);
    cr_assert_geq(IVM_PEER_LAYOUT, 1u);
}

Test(proto, barrier_count_must_match_the_payload)
{
    const uint32_t fixed = sizeof(ivm_msg_barrier_req_t);
    char *buf = calloc(1, fixed + (IVM_BARRIER_PES_MAX + 1) * 4);
    ivm_msg_barrier_req_t *req = (ivm_msg_barrier_req_t *)buf;
    const char *why = NULL;
    ivm_msg_hdr_t hdr;

    cr_assert_not_null(buf);
    req->n = 0; /* the whole job */
    hdr = make_hdr(IVM_MSG_BARRIER, fixed);
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_SUCCESS, "%s", why);
    req->n = IVM_BARRIER_PES_MAX;
    hdr.length = fixed + IVM_BARRIER_PES_MAX * 4;
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_SUCCESS, "%s", why);
    req->n = 2; /* says two, carries one */
    hdr.length = fixed + 4;
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_ERROR_PROTOCOL);
    req->n = -1;
    hdr.length = fixed;
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_ERROR_PROTOCOL, "n = -1");
    req->n = 0x40000000; /* n * 4 wraps to 0 in 32 bits */
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_ERROR_PROTOCOL, "n = 2^30");
    req->n = IVM_BARRIER_PES_MAX + 1;
    hdr.length = fixed + (IVM_BARRIER_PES_MAX + 1) * 4;
    cr_assert_eq(ivm_proto_check_req(&hdr, buf, &why), IVM_ERROR_PROTOCOL, "too many ids");
    free(buf);
}
