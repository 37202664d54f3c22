/*
 * Network limits (transport layer): the fd budget of connections, pauses of
 * listeners that ran out of fds, and the admission of unauthenticated peer
 * connections per source address. Every refusal names its setting.
 */
#ifndef IVMD_TRANSPORT_NETLIMITS_H
#define IVMD_TRANSPORT_NETLIMITS_H

#include <stdint.h>

#include "transport/loop.h"

/* The listener h could not accept (EMFILE, ENFILE, ENOBUFS, ENOMEM): take it
 * out of the loop and put it back on a timer, saying so once per pause. */
void ivmd_limits_accept_pause(ivmd_t *d, ivmd_handler_t *h, const char *what);
/* 1 if a connection (or a new PE's fds) numbered fd stays within the budget
 * of connections; else 0 (the caller refuses it). fd < 0: probe the lowest
 * free fd. */
int ivmd_limits_conn_fd_ok(ivmd_t *d, int fd);
/* A pre-auth peer connection from ss: 1 to keep it, 0 to close it at once. */
int ivmd_limits_peer_admit(ivmd_t *d, const void *ss, uint8_t src[16]);

#endif /* IVMD_TRANSPORT_NETLIMITS_H */
