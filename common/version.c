/* The build's identity; see version.h. */
#include "version.h"

#include "ivm_features.h"
#include "ivm_revision.h"

const char *ivm_version_string(void)
{
    return IVM_BUILD_VERSION;
}

const char *ivm_version_revision(void)
{
    return IVM_BUILD_REVISION;
}

const char *ivm_version_features(void)
{
    return IVM_BUILD_FEATURES;
}

const char *ivm_version_features_off(void)
{
    return IVM_BUILD_FEATURES_OFF;
}

size_t ivm_version_describe(char *buf, size_t len)
{
    int n = snprintf(buf, len, "IVM %s (revision %s; built with: %s; without: %s)",
                     IVM_BUILD_VERSION, IVM_BUILD_REVISION, IVM_BUILD_FEATURES,
                     IVM_BUILD_FEATURES_OFF);

    return n < 0 ? 0 : (size_t)n;
}

void ivm_version_print(FILE *out, const char *prog)
{
    fprintf(out,
            "%s (IVM) %s\n"
            "revision:   %s\n"
            "built with: %s\n"
            "without:    %s\n",
            prog, IVM_BUILD_VERSION, IVM_BUILD_REVISION, IVM_BUILD_FEATURES,
            IVM_BUILD_FEATURES_OFF);
}
