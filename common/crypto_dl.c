/* libcrypto loaded on first use, for libivm (crypto_ossl.h). */
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#define IVM_OSSL_TABLE_ONLY
#include "crypto_ossl.h"

#include <dlfcn.h>
#include <pthread.h>

#include "log.h"

#ifndef IVM_LIBCRYPTO_SONAME
#error "IVM_LIBCRYPTO_SONAME (libcrypto's soname, from the build) is not defined"
#endif

ivm_ossl_t ivm_ossl;

static pthread_once_t ivm_ossl_once = PTHREAD_ONCE_INIT;
static int            ivm_ossl_ok;

static void ivm_ossl_open(void)
{
    void *h = dlopen(IVM_LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
    const char *missing = NULL;

    if (h == NULL) {
        ivm_debug("cannot load %s: %s", IVM_LIBCRYPTO_SONAME, dlerror());
        return;
    }
#define IVM_OSSL_RESOLVE(f)                                                                   \
    if (missing == NULL && (*(void **)&ivm_ossl.f = dlsym(h, #f)) == NULL) {                  \
        missing = #f;                                                                         \
    }
    IVM_OSSL_FUNCS(IVM_OSSL_RESOLVE)
#undef IVM_OSSL_RESOLVE
    if (missing != NULL) {
        ivm_debug("%s has no %s", IVM_LIBCRYPTO_SONAME, missing);
        dlclose(h);
        return;
    }
    ivm_ossl_ok = 1; /* kept loaded until the process ends */
}

int ivm_ossl_load(void)
{
    pthread_once(&ivm_ossl_once, ivm_ossl_open);
    return ivm_ossl_ok ? 0 : -1;
}
