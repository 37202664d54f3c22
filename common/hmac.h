/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for authenticating peer
 * daemons with the cluster secret. */
#ifndef IVM_COMMON_HMAC_H
#define IVM_COMMON_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define IVM_SHA256_LEN 32

typedef struct ivm_sha256 {
    uint32_t h[8];
    uint64_t total;     /* bytes hashed so far */
    uint8_t  block[64];
    size_t   fill;      /* bytes in block */
} ivm_sha256_t;

void ivm_sha256_init(ivm_sha256_t *s);
void ivm_sha256_update(ivm_sha256_t *s, const void *data, size_t len);
void ivm_sha256_final(ivm_sha256_t *s, uint8_t out[IVM_SHA256_LEN]);

void ivm_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                     uint8_t out[IVM_SHA256_LEN]);

/* Constant-time comparison: 0 if equal. */
int ivm_hmac_compare(const uint8_t *a, const uint8_t *b, size_t len);

#endif /* IVM_COMMON_HMAC_H */
