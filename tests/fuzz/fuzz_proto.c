/* libFuzzer target: the PE protocol checks of common/proto.c, as ivmd (requests)
 * and libivm (replies) run them on what they read from a socket.
 * Input: byte 0 picks the length rule (bit 0: take the header's length field
 * as it is; else the length is what follows the header), then an
 * ivm_msg_hdr_t, then the payload. The payload buffer holds exactly `length`
 * bytes (zero-padded), as a receiver's would, so a check that reads past the
 * payload is an ASan report. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ivm_msg_hdr_t hdr;
    const char *why = NULL;
    uint8_t *payload;
    size_t avail;
    int as_is;

    if (size < 1 + sizeof(hdr)) {
        return 0;
    }
    as_is = data[0] & 1;
    memcpy(&hdr, data + 1, sizeof(hdr));
    data += 1 + sizeof(hdr);
    avail = size - 1 - sizeof(hdr);
    if (!as_is) {
        hdr.length = (uint32_t)avail;
    }
    (void)ivm_proto_type_name(hdr.type);
    (void)ivm_proto_type_name(hdr.type & ~IVM_MSG_REPLY);
    (void)ivm_proto_reply_polled(hdr.type);

    /* A receiver reads the payload only after the header passed. */
    if (ivm_proto_check_hdr(&hdr, &why) != IVM_SUCCESS) {
        if (why == NULL) {
            abort(); /* a refusal always says why */
        }
        return 0;
    }
    payload = malloc(hdr.length > 0 ? hdr.length : 1);
    if (payload == NULL) {
        return 0;
    }
    memset(payload, 0, hdr.length);
    memcpy(payload, data, avail < hdr.length ? avail : hdr.length);

    why = NULL;
    if (hdr.type & IVM_MSG_REPLY) {
        if (ivm_proto_check_rep(&hdr, &why) == IVM_SUCCESS) {
            why = NULL;
            if (ivm_proto_check_rep_body(&hdr, payload, &why) != IVM_SUCCESS && why == NULL) {
                abort();
            }
        } else if (why == NULL) {
            abort();
        }
    } else if (ivm_proto_check_req(&hdr, payload, &why) != IVM_SUCCESS && why == NULL) {
        abort();
    }
    free(payload);
    return 0;
}
