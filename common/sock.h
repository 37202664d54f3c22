/* Unix-socket helpers shared by libivm, ivmd and ivmrun: the per-user socket
 * directory, and whole-message send/receive with SCM_RIGHTS fds. */
#ifndef IVM_COMMON_SOCK_H
#define IVM_COMMON_SOCK_H

#include <sys/socket.h>

#include <stddef.h>
#include <sys/types.h>

#include "ivm.h"
#include "proto.h"

#define IVM_SOCKET_NAME "ivmd.sock"

/* The per-user socket directory: $IVM_SOCKET_DIR, else $XDG_RUNTIME_DIR/ivm,
 * else /tmp/ivm-$UID. Writes at most len bytes. */
ivmError_t ivm_sock_dir(char *buf, size_t len);

/* The daemon socket path: $IVM_SOCKET, else <dir>/ivmd.sock. */
ivmError_t ivm_sock_path(char *buf, size_t len);

/* Create dir (0700) if missing; fail with IVM_ERROR_PERMISSION if it exists
 * but is not a directory owned by the caller with mode 0700 or stricter. */
ivmError_t ivm_sock_dir_prepare(const char *dir);

/* Connect to a Unix stream socket (blocking, close-on-exec). Returns the fd or
 * a negative ivmError_t (IVM_ERROR_NO_DAEMON if nobody listens). */
int ivm_sock_connect(const char *path);

/* Send header + payload (+ fds on the first byte) completely; blocking.
 * Returns IVM_SUCCESS or IVM_ERROR_DAEMON_LOST. */
ivmError_t ivm_sock_send(int fd, const ivm_msg_hdr_t *hdr, const void *payload,
                         const int *fds, int nfds);

/* Receive exactly len bytes; fds that arrive are appended to fds[*nfds_p..max)
 * (extra ones are closed). Returns IVM_SUCCESS, IVM_ERROR_DAEMON_LOST on EOF
 * or error. */
ivmError_t ivm_sock_recv(int fd, void *buf, size_t len, int *fds, int *nfds_p,
                         int max_fds);

/* A numeric IPv4 or IPv6 address (no brackets) and a port as a socket
 * address: 0, or -1 when host is neither. */
int ivm_sock_inet_addr(const char *host, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *len_p);

/* Close every fd in fds[0..n). */
void ivm_sock_close_fds(const int *fds, int n);

#endif /* IVM_COMMON_SOCK_H */
