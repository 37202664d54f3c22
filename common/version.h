/*
 * The build's identity: version, git revision and the optional parts built
 * in. Every program's --version and ivmGetLibraryVersion() print it, and the
 * daemons compare versions at the peer handshake.
 */
#ifndef IVM_COMMON_VERSION_H
#define IVM_COMMON_VERSION_H

#include <stddef.h>
#include <stdio.h>

/* "MAJOR.MINOR.PATCH" of this build. */
const char *ivm_version_string(void);

/* The git revision the build was made from ("unknown" outside a checkout). */
const char *ivm_version_revision(void);

/* Space-separated names of the optional parts built in, and of those not. */
const char *ivm_version_features(void);
const char *ivm_version_features_off(void);

/* One line: "IVM 0.1.0 (revision R; built with: ...; without: ...)". Like
 * snprintf: returns the length the whole line needs, writes at most len bytes
 * (NUL included). */
size_t ivm_version_describe(char *buf, size_t len);

/* What a program prints for --version, as Open MPI's and UCX's tools do. */
void ivm_version_print(FILE *out, const char *prog);

#endif /* IVM_COMMON_VERSION_H */
