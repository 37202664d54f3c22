/* Unit tests of common/crypto.c against published vectors: HMAC-SHA-256
 * (RFC 4231), HKDF-SHA-256 (RFC 5869), ChaCha20-Poly1305 (RFC 8439, 2.8.2:
 * its nonce is a link's first nonce when the IV is the vector's), and the link
 * properties: a changed byte, a replay, a reordering or a cut fails
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

Test(crypto, chacha20_poly1305_rfc8439_section_2_8_2)
{
    const char *pt = "Ladies and Gentlemen of the class of '99: If I could offer you only one "
                     "tip for the future, sunscreen would be it.";
    uint8_t key[32], iv[12], aad[12], buf[114], want[114], tag[16], want_tag[16];
    ivm_aead_t tx, rx;

    for (int i = 0; i < 32; ++i) {
        key[i] = (uint8_t)(0x80 + i);
    }
    unhex("070000004041424344454647", iv, 12);
    unhex("50515253c0c1c2c3c4c5c6c7", aad, 12);
    cr_assert_eq(strlen(pt), sizeof(buf));
    memcpy(buf, pt, sizeof(buf));
    /* Message 0: its nonce is the IV itself. */
    cr_assert_eq(ivm_aead_init(&tx, key, iv, 1), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_seal(&tx, aad, sizeof(aad), buf, sizeof(buf), tag), IVM_SUCCESS);
    unhex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca967"
          "1282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b"
          "58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116", want, 114);
    unhex("1ae10b594f09e26a7e902ecbd0600691", want_tag, 16);
    cr_assert(memcmp(buf, want, sizeof(buf)) == 0, "ciphertext");
    cr_assert(memcmp(tag, want_tag, 16) == 0, "tag");
    cr_assert_eq(ivm_aead_init(&rx, key, iv, 1), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_open(&rx, aad, sizeof(aad), buf, sizeof(buf), tag), IVM_SUCCESS);
    cr_assert(memcmp(buf, pt, sizeof(buf)) == 0, "and back");
    ivm_aead_free(&tx);
    ivm_aead_free(&rx);
}

/* A link's properties, authenticated only and encrypted. */
static void link_properties(int encrypt)
{
    uint8_t key[32], iv[12], hdr[16] = "header-of-msg-0", msg[3][64], tag[3][16], copy[64];
    ivm_aead_t tx, rx;

    cr_assert_eq(ivm_crypto_random(key, sizeof(key)), IVM_SUCCESS);
    cr_assert_eq(ivm_crypto_random(iv, sizeof(iv)), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_init(&tx, key, iv, encrypt), IVM_SUCCESS);
    cr_assert_eq(ivm_aead_init(&rx, key, iv, encrypt), IVM_SUCCESS);
    for (int i = 0; i < 3; ++i) {
        memset(msg[i], 'a' + i, sizeof(msg[i]));
        cr_assert_eq(ivm_aead_seal(&tx, hdr, sizeof(hdr), msg[i], sizeof(msg[i]), tag[i]),
                     IVM_SUCCESS);
        /* A whole message (not one byte, which a keystream leaves as it was
         * once in 256 runs) tells whether the payload was encrypted. */
        uint8_t plain[64];
        memset(plain, 'a' + i, sizeof(plain));
        cr_assert_eq(memcmp(msg[i], plain, sizeof(plain)) != 0, encrypt,
                     "payload encrypted iff encrypt");
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
