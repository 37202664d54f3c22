/* libcrypto's functions as crypto.c calls them. In the daemons and tools
 * (linked with libcrypto) they are OpenSSL's own. In libivm
 * (IVM_CRYPTO_DLOPEN) each name stands for a pointer that crypto_dl.c fills
 * from dlopen of libcrypto on first use: a process that links libivm does
 * not load libcrypto at its start (3.4 ms per process on the 2-vCPU test VM,
 * which every PE paid; docs/BENCHMARKS.md, "libcrypto loaded on first
 * use"), only a PE that opens an endpoint to another node's daemon does.
 * Include after OpenSSL's headers. */
#ifndef IVM_COMMON_CRYPTO_OSSL_H
#define IVM_COMMON_CRYPTO_OSSL_H

#ifdef IVM_CRYPTO_DLOPEN

#define IVM_OSSL_FUNCS(X)                                                                     \
    X(ERR_get_error) X(ERR_error_string_n) X(ERR_clear_error) X(RAND_bytes) X(HMAC)           \
    X(EVP_sha256) X(EVP_PKEY_CTX_new_id) X(EVP_PKEY_derive_init) X(EVP_PKEY_CTX_set_hkdf_md)  \
    X(EVP_PKEY_CTX_set1_hkdf_salt) X(EVP_PKEY_CTX_set1_hkdf_key)                              \
    X(EVP_PKEY_CTX_add1_hkdf_info) X(EVP_PKEY_derive) X(EVP_PKEY_CTX_free) X(CRYPTO_memcmp)   \
    X(EVP_CIPHER_CTX_new) X(EVP_CipherInit_ex) X(EVP_chacha20_poly1305)                       \
    X(EVP_CIPHER_CTX_free) X(EVP_CipherUpdate) X(EVP_CIPHER_CTX_ctrl) X(EVP_CipherFinal_ex)   \
    X(OPENSSL_cleanse)

/* The pointers, typed from OpenSSL's own declarations. */
#define IVM_OSSL_MEMBER(f) __typeof__(&f) f;
typedef struct ivm_ossl {
    IVM_OSSL_FUNCS(IVM_OSSL_MEMBER)
} ivm_ossl_t;
#undef IVM_OSSL_MEMBER

extern ivm_ossl_t ivm_ossl;

/* Load libcrypto (IVM_LIBCRYPTO, else the build's soname) and fill
 * ivm_ossl, once: 0, or -1 (the reason logged as a warning; every later
 * call says -1 at once). */
int ivm_ossl_load(void);

/* The names, for crypto.c (crypto_dl.c, which fills the table, keeps
 * OpenSSL's). */
#ifndef IVM_OSSL_TABLE_ONLY
#define ERR_get_error                (ivm_ossl.ERR_get_error)
#define ERR_error_string_n           (ivm_ossl.ERR_error_string_n)
#define ERR_clear_error              (ivm_ossl.ERR_clear_error)
#define RAND_bytes                   (ivm_ossl.RAND_bytes)
#define HMAC                         (ivm_ossl.HMAC)
#define EVP_sha256                   (ivm_ossl.EVP_sha256)
#define EVP_PKEY_CTX_new_id          (ivm_ossl.EVP_PKEY_CTX_new_id)
#define EVP_PKEY_derive_init         (ivm_ossl.EVP_PKEY_derive_init)
#define EVP_PKEY_CTX_set_hkdf_md     (ivm_ossl.EVP_PKEY_CTX_set_hkdf_md)
#define EVP_PKEY_CTX_set1_hkdf_salt  (ivm_ossl.EVP_PKEY_CTX_set1_hkdf_salt)
#define EVP_PKEY_CTX_set1_hkdf_key   (ivm_ossl.EVP_PKEY_CTX_set1_hkdf_key)
#define EVP_PKEY_CTX_add1_hkdf_info  (ivm_ossl.EVP_PKEY_CTX_add1_hkdf_info)
#define EVP_PKEY_derive              (ivm_ossl.EVP_PKEY_derive)
#define EVP_PKEY_CTX_free            (ivm_ossl.EVP_PKEY_CTX_free)
#define CRYPTO_memcmp                (ivm_ossl.CRYPTO_memcmp)
#define EVP_CIPHER_CTX_new           (ivm_ossl.EVP_CIPHER_CTX_new)
#define EVP_CipherInit_ex            (ivm_ossl.EVP_CipherInit_ex)
#define EVP_chacha20_poly1305        (ivm_ossl.EVP_chacha20_poly1305)
#define EVP_CIPHER_CTX_free          (ivm_ossl.EVP_CIPHER_CTX_free)
#define EVP_CipherUpdate             (ivm_ossl.EVP_CipherUpdate)
#define EVP_CIPHER_CTX_ctrl          (ivm_ossl.EVP_CIPHER_CTX_ctrl)
#define EVP_CipherFinal_ex           (ivm_ossl.EVP_CipherFinal_ex)
#define OPENSSL_cleanse              (ivm_ossl.OPENSSL_cleanse)
#endif

#endif /* IVM_CRYPTO_DLOPEN */

#endif /* IVM_COMMON_CRYPTO_OSSL_H */
