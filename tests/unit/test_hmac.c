/* SHA-256 and HMAC-SHA-256 against FIPS 180-4 and RFC 4231 test vectors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "hmac.h"

static void to_hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < IVM_SHA256_LEN; ++i) {
        sprintf(out + 2 * i, "%02x", d[i]);
    }
}

static void check_sha(const void *msg, size_t len, const char *want)
{
    uint8_t out[IVM_SHA256_LEN];
    char hex[2 * IVM_SHA256_LEN + 1];
    ivm_sha256_t s;

    ivm_sha256_init(&s);
    ivm_sha256_update(&s, msg, len);
    ivm_sha256_final(&s, out);
    to_hex(out, hex);
    cr_assert_str_eq(hex, want);
}

Test(sha256, fips_vectors)
{
    check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(sha256, incremental_equals_whole)
{
    static char big[1000];
    uint8_t a[IVM_SHA256_LEN], b[IVM_SHA256_LEN];
    ivm_sha256_t s;

    memset(big, 'a', sizeof(big));
    ivm_sha256_init(&s);
    ivm_sha256_update(&s, big, sizeof(big));
    ivm_sha256_final(&s, a);
    ivm_sha256_init(&s);
    for (size_t i = 0; i < sizeof(big); i += 7) {
        ivm_sha256_update(&s, big + i, sizeof(big) - i < 7 ? sizeof(big) - i : 7);
    }
    ivm_sha256_final(&s, b);
    cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
}

static void check_hmac(const void *key, size_t klen, const void *msg, size_t mlen,
                       const char *want)
{
    uint8_t out[IVM_SHA256_LEN];
    char hex[2 * IVM_SHA256_LEN + 1];

    ivm_hmac_sha256(key, klen, msg, mlen, out);
    to_hex(out, hex);
    cr_assert_str_eq(hex, want);
}

Test(hmac, rfc4231_vectors)
{
    uint8_t k20[20], k131[131];
    const char *big = "Test Using Larger Than Block-Size Key - Hash Key First";

    memset(k20, 0x0b, sizeof(k20));
    memset(k131, 0xaa, sizeof(k131));
    check_hmac(k20, sizeof(k20), "Hi There", 8,
               "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    check_hmac(k131, sizeof(k131), big, strlen(big),
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

Test(hmac, compare)
{
    uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};

    cr_assert_eq(ivm_hmac_compare(a, b, 4), 0);
    cr_assert_neq(ivm_hmac_compare(a, c, 4), 0);
}
