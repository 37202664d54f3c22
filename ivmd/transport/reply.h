/*
 * ivmd's status convention, for every module of the daemon:
 *  - a function returns ivmError_t (IVM_SUCCESS or a negative IVM error);
 *  - two internal values, positive so never an IVM error, say how a request
 *    goes on instead of a result: IVMD_DEFERRED (the reply comes later, from
 *    whoever completes it) and IVMD_LOCAL (the data plane: the object is
 *    here, the service answers as usual). A function returning ivmError_t
 *    may return them; they never leave the daemon;
 *  - the detail of an error (the text a PE's caller gets) always travels in
 *    an ivmd_reply_t passed down, never as a char *, size_t pair;
 *  - no value is an fd or a status: an fd is an output parameter.
 * In the transport's directory, the lowest layer, so that every layer may
 * include it; it depends on common/ only and the transport need not use it.
 */
#ifndef IVMD_TRANSPORT_REPLY_H
#define IVMD_TRANSPORT_REPLY_H

#include <stdarg.h>
#include <stdio.h>

#include "ivm.h"
#include "proto.h"

/* The internal status values beside ivmError_t. */
typedef enum ivmd_status {
    IVMD_STATUS_DEFERRED = 1, /* the reply comes later */
    IVMD_STATUS_LOCAL    = 2  /* the object is here: answer as usual */
} ivmd_status_t;

/* Their names as returned (ivmError_t converts from them; the same tokens
 * as data/data.h's until the merge, so both headers may be included). */
#define IVMD_DEFERRED 1 /* the reply comes later */
#define IVMD_LOCAL    2 /* the object is here, answer as usual */
_Static_assert(IVMD_DEFERRED == IVMD_STATUS_DEFERRED && IVMD_LOCAL == IVMD_STATUS_LOCAL,
               "internal status values");

/* Whether st is one of the internal values (no IVM status). */
static inline int ivmd_status_internal(ivmError_t st)
{
    return (int)st > 0;
}

/* A result and its detail. */
typedef struct ivmd_reply {
    ivmError_t status;
    char       detail[IVM_MSG_DETAIL_MAX]; /* why, when status is an error ("" if none) */
} ivmd_reply_t;

static inline void ivmd_reply_init(ivmd_reply_t *rep)
{
    rep->status    = IVM_SUCCESS;
    rep->detail[0] = '\0';
}

/* Set rep's status and its detail (printf format); returns the status. */
static inline ivmError_t ivmd_reply_set(ivmd_reply_t *rep, ivmError_t status, const char *fmt,
                                        ...) __attribute__((format(printf, 3, 4)));
static inline ivmError_t ivmd_reply_set(ivmd_reply_t *rep, ivmError_t status, const char *fmt,
                                        ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rep->detail, sizeof(rep->detail), fmt, ap);
    va_end(ap);
    rep->status = status;
    return status;
}

#endif /* IVMD_TRANSPORT_REPLY_H */
