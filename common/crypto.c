/* The project's cryptography over OpenSSL's libcrypto; see crypto.h. */
#include "crypto.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "crypto_ossl.h"
#include "log.h"

/* Log OpenSSL's reason for a failed step once, and give the status. */
static ivmError_t ivm_crypto_fail(const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[160];

    ERR_error_string_n(e, buf, sizeof(buf));
    ivm_error_limited("%s failed: %s", what, e != 0 ? buf : "no reason given");
    ERR_clear_error();
    return IVM_ERROR_INTERNAL;
}

ivmError_t ivm_crypto_load(void)
{
#ifdef IVM_CRYPTO_DLOPEN
    return ivm_ossl_load() == 0 ? IVM_SUCCESS : IVM_ERROR_UNSUPPORTED;
#else
    return IVM_SUCCESS;
#endif
}

ivmError_t ivm_crypto_random(void *buf, size_t len)
{
    if (len > INT_MAX || RAND_bytes(buf, (int)len) != 1) {
        return ivm_crypto_fail("RAND_bytes");
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_crypto_hmac(const void *key, size_t key_len, const void *msg, size_t msg_len,
                           uint8_t out[IVM_CRYPTO_MAC_LEN])
{
    unsigned int len = IVM_CRYPTO_MAC_LEN;

    if (key_len > INT_MAX ||
        HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &len) == NULL ||
        len != IVM_CRYPTO_MAC_LEN) {
        return ivm_crypto_fail("HMAC-SHA-256");
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_crypto_hkdf(const void *ikm, size_t ikm_len, const void *salt, size_t salt_len,
                           const void *info, size_t info_len, uint8_t *out, size_t out_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    ivmError_t status = IVM_SUCCESS;
    size_t len = out_len;

    if (ctx == NULL || ikm_len > INT_MAX || salt_len > INT_MAX || info_len > INT_MAX ||
        EVP_PKEY_derive_init(ctx) <= 0 ||
        EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) <= 0 ||
        EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, (int)salt_len) <= 0 ||
        EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm, (int)ikm_len) <= 0 ||
        EVP_PKEY_CTX_add1_hkdf_info(ctx, info, (int)info_len) <= 0 ||
        EVP_PKEY_derive(ctx, out, &len) <= 0 || len != out_len) {
        status = ivm_crypto_fail("HKDF-SHA-256");
    }
    EVP_PKEY_CTX_free(ctx);
    return status;
}

int ivm_crypto_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}

ivmError_t ivm_aead_init(ivm_aead_t *a, const uint8_t key[IVM_CRYPTO_KEY_LEN],
                         const uint8_t iv[IVM_CRYPTO_IV_LEN], int encrypt)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

    memset(a, 0, sizeof(*a));
    /* One context per direction, for both ways of using it: the key is set
     * here, the nonce per message. */
    if (ctx == NULL ||
        EVP_CipherInit_ex(ctx, EVP_chacha20_poly1305(), NULL, key, NULL, -1) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return ivm_crypto_fail("ChaCha20-Poly1305 setup");
    }
    a->ctx = ctx;
    memcpy(a->iv, iv, sizeof(a->iv));
    a->encrypt = encrypt;
    return IVM_SUCCESS;
}

void ivm_aead_free(ivm_aead_t *a)
{
    EVP_CIPHER_CTX_free(a->ctx);
    a->ctx = NULL;
}

/* The nonce of message seq: the direction's IV XOR seq (big-endian, in the
 * last 8 bytes). */
static void ivm_aead_nonce(const ivm_aead_t *a, uint8_t nonce[IVM_CRYPTO_IV_LEN])
{
    int i;

    memcpy(nonce, a->iv, IVM_CRYPTO_IV_LEN);
    for (i = 0; i < 8; ++i) {
        nonce[4 + i] ^= (uint8_t)(a->seq >> (56 - 8 * i));
    }
}

/* Feed len bytes in chunks that fit an int. out NULL: as AAD. */
static int ivm_aead_update(EVP_CIPHER_CTX *ctx, uint8_t *out, const uint8_t *in, size_t len)
{
    int n;

    while (len > 0) {
        int step = len > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)len;
        if (EVP_CipherUpdate(ctx, out, &n, in, step) != 1) {
            return -1;
        }
        in += step;
        if (out != NULL) {
            out += step;
        }
        len -= (size_t)step;
    }
    return 0;
}

static ivmError_t ivm_aead_run(ivm_aead_t *a, int enc, const void *hdr, size_t hdr_len,
                               void *payload, size_t len, uint8_t *tag)
{
    EVP_CIPHER_CTX *ctx = a->ctx;
    uint8_t nonce[IVM_CRYPTO_IV_LEN], last[16];
    int n;

    if (a->seq == UINT64_MAX) {
        return IVM_ERROR_LIMIT;
    }
    ivm_aead_nonce(a, nonce);
    if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, enc) != 1 ||
        ivm_aead_update(ctx, NULL, hdr, hdr_len) != 0 ||
        ivm_aead_update(ctx, a->encrypt ? payload : NULL, payload, len) != 0) {
        return ivm_crypto_fail(enc ? "ChaCha20-Poly1305 seal" : "ChaCha20-Poly1305 open");
    }
    if (!enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, IVM_CRYPTO_TAG_LEN, tag) != 1) {
        return ivm_crypto_fail("ChaCha20-Poly1305 tag");
    }
    if (EVP_CipherFinal_ex(ctx, last, &n) != 1) {
        ERR_clear_error();
        return enc ? ivm_crypto_fail("ChaCha20-Poly1305 seal") : IVM_ERROR_PERMISSION;
    }
    if (enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, IVM_CRYPTO_TAG_LEN, tag) != 1) {
        return ivm_crypto_fail("ChaCha20-Poly1305 tag");
    }
    ++a->seq;
    return IVM_SUCCESS;
}

#if defined(IVM_CRYPTO_DLOPEN) && defined(__x86_64__)
/* In libivm, after each seal and open: OpenSSL's ChaCha20-Poly1305 runs
 * AVX-512 code where the CPU has it and returns with vector state of it
 * still in use. On the test VM the
 * application's own vector code on that thread then ran 3-5x slower
 * (HIMENO's kernel on the thread that sealed its reports; the same run with
 * OpenSSL's AVX-512 turned off, OPENSSL_ia32cap=:~0x10000, did not slow
 * down; docs/BENCHMARKS.md). Zeroing zmm16-31 and vzeroupper after each
 * seal and open put it back in its initial state: the slowdown went. */
__attribute__((target("avx512f"))) static void ivm_crypto_avx512_clear(void)
{
    __asm__ volatile("vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
                     "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
                     "vpxord %%zmm18, %%zmm18, %%zmm18\n\t"
                     "vpxord %%zmm19, %%zmm19, %%zmm19\n\t"
                     "vpxord %%zmm20, %%zmm20, %%zmm20\n\t"
                     "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"
                     "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"
                     "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
                     "vpxord %%zmm24, %%zmm24, %%zmm24\n\t"
                     "vpxord %%zmm25, %%zmm25, %%zmm25\n\t"
                     "vpxord %%zmm26, %%zmm26, %%zmm26\n\t"
                     "vpxord %%zmm27, %%zmm27, %%zmm27\n\t"
                     "vpxord %%zmm28, %%zmm28, %%zmm28\n\t"
                     "vpxord %%zmm29, %%zmm29, %%zmm29\n\t"
                     "vpxord %%zmm30, %%zmm30, %%zmm30\n\t"
                     "vpxord %%zmm31, %%zmm31, %%zmm31\n\t"
                     "vzeroupper" ::: "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",
                     "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29",
                     "xmm30", "xmm31", "memory");
}

static void ivm_crypto_vector_clean(void)
{
    static int have = -1;

    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx512f") != 0;
    }
    if (have) {
        ivm_crypto_avx512_clear();
    }
}
#else
static void ivm_crypto_vector_clean(void)
{
}
#endif

ivmError_t ivm_aead_seal(ivm_aead_t *a, const void *hdr, size_t hdr_len, void *payload,
                         size_t len, uint8_t tag[IVM_CRYPTO_TAG_LEN])
{
    ivmError_t status = ivm_aead_run(a, 1, hdr, hdr_len, payload, len, tag);

    ivm_crypto_vector_clean();
    return status;
}

ivmError_t ivm_aead_open(ivm_aead_t *a, const void *hdr, size_t hdr_len, void *payload,
                         size_t len, const uint8_t tag[IVM_CRYPTO_TAG_LEN])
{
    uint8_t copy[IVM_CRYPTO_TAG_LEN];
    ivmError_t status;

    memcpy(copy, tag, sizeof(copy));
    status = ivm_aead_run(a, 0, hdr, hdr_len, payload, len, copy);
    ivm_crypto_vector_clean();
    return status;
}

ivmError_t ivm_crypto_ep_key(const void *secret, size_t secret_len, uint32_t job,
                             uint8_t out[IVM_CRYPTO_EP_KEY_LEN])
{
    static const uint8_t salt[32]; /* RFC 5869's default: HashLen zeros */
    char info[64];
    int n = snprintf(info, sizeof(info), "ivm pe endpoint key, job %u", (unsigned)job);

    return ivm_crypto_hkdf(secret, secret_len, salt, sizeof(salt), info, (size_t)n, out,
                           IVM_CRYPTO_EP_KEY_LEN);
}

ivmError_t ivm_aead_ep_init(const uint8_t ep_key[IVM_CRYPTO_EP_KEY_LEN], const uint8_t *nonce_p,
                            const uint8_t *nonce_d, size_t nonce_len, uint32_t job, int32_t pe,
                            int pe_side, int encrypt, ivm_aead_t *tx, ivm_aead_t *rx)
{
    uint8_t salt[2 * 64], keys[2][IVM_CRYPTO_KEY_LEN + IVM_CRYPTO_IV_LEN];
    ivmError_t status = IVM_SUCCESS;
    char info[96];
    int k, n;

    if (nonce_len > 64) {
        return IVM_ERROR_INVALID_VALUE;
    }
    memcpy(salt, nonce_p, nonce_len);
    memcpy(salt + nonce_len, nonce_d, nonce_len);
    for (k = 0; k < 2 && status == IVM_SUCCESS; ++k) {
        /* k = 0: PE to daemon; 1: daemon to PE. */
        n = snprintf(info, sizeof(info), "ivm pe endpoint %s, job %u, pe %d",
                     k == 0 ? "p2d" : "d2p", (unsigned)job, (int)pe);
        status = ivm_crypto_hkdf(ep_key, IVM_CRYPTO_EP_KEY_LEN, salt, 2 * nonce_len, info,
                                 (size_t)n, keys[k], sizeof(keys[k]));
    }
    if (status == IVM_SUCCESS) {
        const uint8_t *t = keys[pe_side ? 0 : 1], *r = keys[pe_side ? 1 : 0];

        status = ivm_aead_init(tx, t, t + IVM_CRYPTO_KEY_LEN, encrypt);
        if (status == IVM_SUCCESS) {
            status = ivm_aead_init(rx, r, r + IVM_CRYPTO_KEY_LEN, encrypt);
            if (status != IVM_SUCCESS) {
                ivm_aead_free(tx);
            }
        }
    }
    OPENSSL_cleanse(keys, sizeof(keys));
    return status;
}
