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
#include <stdlib.h>

#include "log.h"

#ifndef IVM_LIBCRYPTO_SONAME
#error "IVM_LIBCRYPTO_SONAME (libcrypto's soname, from the build) is not defined"
#endif

ivm_ossl_t ivm_ossl;

static pthread_once_t ivm_ossl_once = PTHREAD_ONCE_INIT;
static int            ivm_ossl_ok;

/* IVM_LIBCRYPTO names another libcrypto (a path, or a soname the loader
 * finds) than the one IVM was built with. */
static void ivm_ossl_open(void)
{
    const char *name = getenv("IVM_LIBCRYPTO");
    const char *missing = NULL;
    void *h;

    if (name == NULL || *name == '\0') {
        name = IVM_LIBCRYPTO_SONAME;
    }
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        ivm_warn("cannot load %s (%s): syncs to other nodes take the daemons' path", name,
                 dlerror());
        return;
    }
#define IVM_OSSL_RESOLVE(f)                                                                   \
    if (missing == NULL && (*(void **)&ivm_ossl.f = dlsym(h, #f)) == NULL) {                  \
        missing = #f;                                                                         \
    }
    IVM_OSSL_FUNCS(IVM_OSSL_RESOLVE)
#undef IVM_OSSL_RESOLVE
    if (missing != NULL) {
        ivm_warn("%s has no %s: syncs to other nodes take the daemons' path", name, missing);
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
