/* The synchronous request client and the readiness wait, written once for
 * libivm, ivmrun, the tools and the tests:
 *   - ivm_client_probe: whether a daemon serves a socket path.
 *   - ivm_client_request: one request on a fresh connection to a daemon's
 *     Unix socket, its reply read under a time-out (INFO, CLUSTER, OBJ_INFO,
 *     SET_SHARE...: requests that need no ivmEnter). A PE's own connection,
 *     where replies come in any order, is libivm/rpc.c.
 *   - ivm_ready_*: the readiness line a daemon (ivmd, ivm-faultproxy) writes
 *     on its --ready-fd pipe, "R\n" or "R PORT\n", before closing it. */
#ifndef IVM_COMMON_CLIENT_H
#define IVM_COMMON_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "ivm.h"
#include "proto.h"

/* Bytes of a result's detail: the daemon's text or what failed on the way. */
#define IVM_CLIENT_DETAIL_MAX (IVM_MSG_DETAIL_MAX + 128)

/* What a request gave besides its status. */
typedef struct ivm_client_result {
    /* 1: the status is the daemon's answer; 0: the request failed on the way
     * (no connection, no reply in time, a malformed reply). */
    int  answered;
    /* The text that follows the type's reply struct when the daemon sent one
     * (its reason for a failure), or what failed on the way; "" if neither. */
    char detail[IVM_CLIENT_DETAIL_MAX];
} ivm_client_result_t;

/* Send one request of `type` (req_len bytes of req) to the daemon at path on
 * a fresh connection and read its reply, each send and receive bounded by
 * timeout_ms (0: no limit). Returns
 *   - the daemon's status when it answered; when that is IVM_SUCCESS, rep
 *     receives the reply's first rep_len bytes (the type's reply struct, or a
 *     prefix of it such as an ivm_msg_status_t);
 *   - IVM_ERROR_NO_DAEMON, IVM_ERROR_PERMISSION, IVM_ERROR_INVALID_VALUE: no
 *     connection (see ivm_sock_connect);
 *   - IVM_ERROR_DAEMON_LOST: no reply within the time, or one cut short;
 *   - IVM_ERROR_PROTOCOL: a reply that is not the one to this request, or
 *     shorter than rep_len.
 * res (may be NULL) tells which of these it was, with a detail. */
ivmError_t ivm_client_request(const char *path, int timeout_ms, uint16_t type,
                              const void *req, uint32_t req_len, void *rep, uint32_t rep_len,
                              ivm_client_result_t *res);

/* The daemon's INFO (ivm_client_request of IVM_MSG_INFO; the node name is
 * terminated). res may be NULL. */
ivmError_t ivm_client_info(const char *path, int timeout_ms, ivm_msg_info_rep_t *info,
                           ivm_client_result_t *res);

/* Whether a daemon serves path: IVM_SUCCESS when something accepts a
 * connection there (closed at once), else ivm_sock_connect's status
 * (IVM_ERROR_NO_DAEMON for a missing or stale socket, IVM_ERROR_PERMISSION,
 * IVM_ERROR_INVALID_VALUE for a path too long). */
ivmError_t ivm_client_probe(const char *path);

/* Bytes of a readiness line ("R 65535\n" and room to spare). */
#define IVM_READY_LINE_MAX 32

/* A readiness line being read from the read end of a daemon's --ready-fd
 * pipe. The caller owns fd (ivm_ready_* never close it). */
typedef struct ivm_ready {
    int    fd;
    size_t got;                      /* bytes in line */
    int    eof;                      /* the writer closed its end */
    char   line[IVM_READY_LINE_MAX]; /* what came, without the newline */
} ivm_ready_t;

void ivm_ready_init(ivm_ready_t *r, int fd);

/* Read the readiness line. Returns
 *   - IVM_SUCCESS once it is whole (a newline, a full buffer, or EOF after a
 *     byte): r->line holds it, terminated, without the newline;
 *   - IVM_ERROR_NO_DAEMON on EOF before any byte (the daemon exited, almost
 *     always);
 *   - IVM_ERROR_TIMEOUT while it is not whole: timeout_ms passed (-1: no
 *     limit), or wake_fd (-1: none) became readable; the caller deals with
 *     wake_fd (e.g. a signalfd) and may call again, r keeps what came;
 *   - IVM_ERROR_INTERNAL when poll or read failed. */
ivmError_t ivm_ready_wait(ivm_ready_t *r, int timeout_ms, int wake_fd);

/* After the line: wait at most timeout_ms for EOF (a ready daemon closes its
 * end), discarding anything more. IVM_SUCCESS, IVM_ERROR_TIMEOUT, or
 * IVM_ERROR_INTERNAL. */
ivmError_t ivm_ready_wait_eof(ivm_ready_t *r, int timeout_ms);

/* The TCP port of an "R PORT" line (1..65535); IVM_ERROR_PROTOCOL for any
 * other line. */
ivmError_t ivm_ready_port(const ivm_ready_t *r, unsigned *port_p);

#endif /* IVM_COMMON_CLIENT_H */
