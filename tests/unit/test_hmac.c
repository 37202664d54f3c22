/* SHA-256 and HMAC-SHA-256 against FIPS 180-4 and RFC 4231 test vectors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

/* More cases: padding boundaries, hashing in uneven pieces, RFC 4231 cases 3
 * and 7, a key of exactly one block. */
Test(sha256, padding_boundaries)
{
    char x[64];

    memset(x, 'x', sizeof(x));
    /* 55 bytes: the length fits in the block; 56: it needs one more; 64: a full block */
    check_sha(x, 55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    check_sha(x, 56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    check_sha(x, 64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
}

Test(sha256, million_a_in_uneven_pieces, .timeout = 20)
{
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char *a = malloc(1000000);
    ivm_sha256_t s;
    uint8_t d[IVM_SHA256_LEN];
    char got[2 * IVM_SHA256_LEN + 1];
    size_t off = 0, step = 1;

    cr_assert_not_null(a);
    memset(a, 'a', 1000000);
    check_sha(a, 1000000, want);
    ivm_sha256_init(&s);
    while (off < 1000000) {
        size_t n = step < 1000000 - off ? step : 1000000 - off;
        ivm_sha256_update(&s, a + off, n);
        off += n;
        step = step * 3 % 1021 + 1; /* 1, 4, 13, 40, ... crossing block edges */
    }
    ivm_sha256_final(&s, d);
    to_hex(d, got);
    cr_assert_str_eq(got, want, "hashing in pieces gives the one-shot digest");
    free(a);
}

static void assert_hmac(const void *key, size_t klen, const void *msg, size_t mlen,
                        const char *want, const char *what)
{
    uint8_t d[IVM_SHA256_LEN];
    char got[2 * IVM_SHA256_LEN + 1];

    ivm_hmac_sha256(key, klen, msg, mlen, d);
    to_hex(d, got);
    cr_assert_str_eq(got, want, "%s", what);
}

Test(hmac, rfc4231_cases_3_and_7)
{
    uint8_t kaa20[20], dd50[50], kaa131[131];
    static const char big_both[] =
        "This is a test using a larger than block-size key and a larger than block-size data. "
        "The key needs to be hashed before being used by the HMAC algorithm.";

    memset(kaa20, 0xaa, sizeof(kaa20));
    memset(dd50, 0xdd, sizeof(dd50));
    memset(kaa131, 0xaa, sizeof(kaa131));
    assert_hmac(kaa20, 20, dd50, 50,
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", "case 3");
    assert_hmac(kaa131, 131, big_both, strlen(big_both),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", "case 7");
}

Test(hmac, key_of_exactly_one_block)
{
    char k[64];

    memset(k, 'k', sizeof(k));
    assert_hmac(k, 64, "exactly one block key", 21,
                "e73e6474ed2f863bbf5500617c3b577e141d3c1543e1563f3630b762d038f14c",
                "64-byte key (used as is, not hashed)");
}

