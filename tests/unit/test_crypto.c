/* Unit tests of common/crypto.c against published vectors: HMAC-SHA-256
 * (RFC 4231), HKDF-SHA-256 (RFC 5869), AES-256-GCM (the GCM specification's
 * test cases 13 and 14, whose all-zero nonce is a link's first message), and
 * the link properties: a changed byte, a replay, a reordering or a cut fails
 * the tag. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "crypto.h"

static void unhex(const char *hex, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

TestSuite(crypto, .timeout = 10);

Test(crypto, hmac_sha256_rfc4231_case_2)
{
    uint8_t mac[IVM_CRYPTO_MAC_LEN], want[IVM_CRYPTO_MAC_LEN];
    const char *msg = "what do ya want for nothing?";

    cr_assert_eq(ivm_crypto_hmac("Jefe", 4, msg, strlen(msg), mac), IVM_SUCCESS);
    unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, 32);
    cr_assert(memcmp(mac, want, 32) == 0);
}

Test(crypto, hkdf_sha256_rfc5869_case_1)
{
    uint8_t ikm[22], salt[13], info[10], okm[42], want[42];

    memset(ikm, 0x0b, sizeof(ikm));
    for (int i = 0; i < 13; ++i) {
        salt[i] = (uint8_t)i;
    }
    for (int i = 0; i < 10; ++i) {
        info[i] = (uint8_t)(0xf0 + i);
    }
    cr_assert_eq(ivm_crypto_hkdf(ikm, sizeof(ikm), salt, sizeof(salt), info, sizeof(info), okm,
                                 sizeof(okm)), IVM_SUCCESS);
    unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
          want, 42);
    cr_assert(memcmp(okm, want, 42) == 0);
}

Test(crypto, equal_and_random)
{
    uint8_t a[32], b[32];

    cr_assert_eq(ivm_crypto_random(a, sizeof(a)), IVM_SUCCESS);
    memcpy(b, a, sizeof(a));
    cr_assert(ivm_crypto_equal(a, b, sizeof(a)));
    b[31] ^= 1;
    cr_assert(!ivm_crypto_equal(a, b, sizeof(a)));
    cr_assert_eq(ivm_crypto_random(b, sizeof(b)), IVM_SUCCESS);
    cr_assert(!ivm_crypto_equal(a, b, sizeof(a)), "two draws of 32 random bytes agree");
}

Test(crypto, aes256_gcm_spec_cases_13_and_14)
{
    uint8_t key[32] = {0}, tag[16], want[16], p[16] = {0}, c[16];
    ivm_aead_t tx, rx;

    /* Case 13: empty message, the tag alone. */
    cr_assert_eq(ivm_aead_init(&tx, key, 1), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_seal(&tx, NULL, 0, NULL, 0, tag), IVM_SUCCESS);
    unhex("530f8afbc74536b9a963b4f1c4cb738b", want, 16);
    cr_assert(memcmp(tag, want, 16) == 0, "case 13 tag");
    ivm_aead_free(&tx);
    /* Case 14: 16 zero bytes encrypted with nonce 0. */
    cr_assert_eq(ivm_aead_init(&tx, key, 1), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_seal(&tx, NULL, 0, p, sizeof(p), tag), IVM_SUCCESS);
    unhex("cea7403d4d606b6e074ec5d3baf39d18", c, 16);
    cr_assert(memcmp(p, c, 16) == 0, "case 14 ciphertext");
    unhex("d0d1c8a799996bf0265b98b5d48ab919", want, 16);
    cr_assert(memcmp(tag, want, 16) == 0, "case 14 tag");
    /* And back. */
    cr_assert_eq(ivm_aead_init(&rx, key, 1), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_open(&rx, NULL, 0, p, sizeof(p), tag), IVM_SUCCESS);
    cr_assert(memcmp(p, (uint8_t[16]){0}, 16) == 0);
    ivm_aead_free(&tx);
    ivm_aead_free(&rx);
}

/* A link's properties, authenticated only and encrypted. */
static void link_properties(int encrypt)
{
    uint8_t key[32], hdr[16] = "header-of-msg-0", msg[3][64], tag[3][16], copy[64];
    ivm_aead_t tx, rx;

    cr_assert_eq(ivm_crypto_random(key, sizeof(key)), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_init(&tx, key, encrypt), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_init(&rx, key, encrypt), IVM_SUCCESS);
    for (int i = 0; i < 3; ++i) {
        memset(msg[i], 'a' + i, sizeof(msg[i]));
        cr_assert_eq(ivm_aead_seal(&tx, hdr, sizeof(hdr), msg[i], sizeof(msg[i]), tag[i]),
                     IVM_SUCCESS);
        cr_assert_eq(msg[i][0] != 'a' + i, encrypt, "payload encrypted iff encrypt");
    }
    /* Message 1 before message 0: reordered. */
    memcpy(copy, msg[1], sizeof(copy));
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[1]),
                 IVM_ERROR_PERMISSION);
    /* A changed payload byte, a changed header byte, a cut message. */
    memcpy(copy, msg[0], sizeof(copy));
    copy[10] ^= 0x40;
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[0]),
                 IVM_ERROR_PERMISSION);
    memcpy(copy, msg[0], sizeof(copy));
    hdr[3] ^= 1;
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[0]),
                 IVM_ERROR_PERMISSION);
    hdr[3] ^= 1;
    memcpy(copy, msg[0], sizeof(copy));
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy) - 1, tag[0]),
                 IVM_ERROR_PERMISSION);
    /* In order: accepted, and the payload is back (a failed open may have
     * decrypted in place: the link is closed then, the bytes never used). */
    memcpy(copy, msg[0], sizeof(copy));
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[0]),
                 IVM_SUCCESS);
    cr_assert_eq(copy[5], 'a');
    /* Message 0 again: a replay. */
    memcpy(copy, msg[0], sizeof(copy));
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[0]),
                 IVM_ERROR_PERMISSION);
    memcpy(copy, msg[1], sizeof(copy));
    cr_assert_eq(ivm_aead_open(&rx, hdr, sizeof(hdr), copy, sizeof(copy), tag[1]),
                 IVM_SUCCESS);
    /* A spent counter refuses rather than reuse a nonce. */
    tx.seq = UINT64_MAX;
    cr_assert_eq(ivm_aead_seal(&tx, hdr, sizeof(hdr), copy, sizeof(copy), tag[2]),
                 IVM_ERROR_LIMIT);
    ivm_aead_free(&tx);
    ivm_aead_free(&rx);
}

Test(crypto, link_authenticated)
{
    link_properties(0);
}

Test(crypto, link_encrypted)
{
    link_properties(1);
}
