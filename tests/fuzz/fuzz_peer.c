/* libFuzzer target: the peer protocol check of common/proto.c
 * (ivm_proto_check_peer), as ivmd runs it on every message a peer daemon
 * sends, before and after the handshake. Input: an ivm_msg_hdr_t, then the
 * payload; byte 0 bit 0 set keeps the header's length field, else the length
 * is what follows the header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ivm_msg_hdr_t hdr;
    const char *why = NULL;
    char field[64];
    size_t avail;

    if (size < 1 + sizeof(hdr)) {
        return 0;
    }
    memcpy(&hdr, data + 1, sizeof(hdr));
    avail = size - 1 - sizeof(hdr);
    if (!(data[0] & 1)) {
        hdr.length = (uint32_t)avail;
    }
    (void)ivm_proto_type_name(hdr.type);
    if (ivm_proto_check_peer(&hdr, &why) != IVM_SUCCESS) {
        if (why == NULL) {
            abort();
        }
    } else if (hdr.length > IVM_MSG_MAX_PAYLOAD) {
        abort(); /* a passed header never asks for more than a receiver allocates */
    }
    /* The fixed string fields of peer messages (node names, paths). */
    memset(field, 0, sizeof(field));
    memcpy(field, data + 1 + sizeof(hdr), avail < sizeof(field) ? avail : sizeof(field));
    (void)ivm_proto_strok(field, sizeof(field));
    return 0;
}
