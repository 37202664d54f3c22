/* libFuzzer target: the GPU daemon protocol checks of common/gpud_proto.c, as
 * ivm-gpud runs them on ivmd's requests and ivmd on ivm-gpud's replies.
 * Input: byte 0 (bit 0: keep the header's length field, else the length is
 * what follows the header), an ivm_msg_hdr_t, the payload. The payload buffer
 * holds exactly `length` bytes, zero-padded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud_proto.h"

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
    (void)ivm_gpud_type_name(hdr.type);
    (void)ivm_gpud_req_size(hdr.type);
    (void)ivm_gpud_rep_size(hdr.type);
    if (ivm_gpud_check_hdr(&hdr, &why) != IVM_SUCCESS) {
        if (why == NULL) {
            abort();
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
        if (ivm_gpud_check_rep(&hdr, &why) != IVM_SUCCESS && why == NULL) {
            abort();
        }
    } else if (ivm_gpud_check_req(&hdr, payload, &why) != IVM_SUCCESS && why == NULL) {
        abort();
    }
    free(payload);
    return 0;
}
