/*
 * Network limits (transport layer): the fd budget of the daemon (the
 * open-file limit it runs with, the lines that objects and connections stay
 * below), pauses of listeners that ran out of fds, and the admission of
 * unauthenticated peer connections per source address. Every refusal names
 * its setting.
 */
#ifndef IVMD_TRANSPORT_NETLIMITS_H
#define IVMD_TRANSPORT_NETLIMITS_H

#include <stdint.h>

#include "transport/conn.h"
#include "transport/loop.h"

#define IVMD_NETLIMITS_MAX_PAUSED 2  /* the PE listener and the peer listener */
#define IVMD_NETLIMITS_NSRC       64 /* pre-auth sources remembered */

typedef struct ivmd_netlimits_cfg {
    long max_fds;            /* --max-fds (0: the hard limit) */
    long fd_reserve;         /* --fd-reserve */
    long preauth_per_source; /* --preauth-per-source */
    long preauth_rate;       /* --preauth-rate */
} ivmd_netlimits_cfg_t;

/* One source address of pre-auth peer connections: a token bucket. */
typedef struct ivmd_netlimits_src {
    uint8_t  addr[16];
    double   tokens;
    uint64_t last_ns; /* 0: slot unused */
} ivmd_netlimits_src_t;

typedef struct ivmd_netlimits {
    ivmd_loop_t             *loop;
    const ivmd_conn_table_t *conns;
    ivmd_netlimits_cfg_t     cfg;
    long                     fd_limit;  /* RLIMIT_NOFILE we run with */
    long                     obj_line;  /* objects' fds stay below this */
    long                     conn_line; /* connections' and new PEs' fds stay below this */
    int                      timer_fd;  /* pause timer */
    ivmd_handler_t           timer_h;
    ivmd_handler_t          *paused[IVMD_NETLIMITS_MAX_PAUSED];
    int                      npaused;
    uint64_t                 refused_sources; /* pre-auth connections closed at once */
    ivmd_netlimits_src_t     src[IVMD_NETLIMITS_NSRC];
} ivmd_netlimits_t;

/* Raise the open-file limit as cfg says and draw the lines of the budget. */
ivmError_t ivmd_netlimits_open(ivmd_netlimits_t *n, ivmd_loop_t *loop,
                               const ivmd_conn_table_t *conns, const ivmd_netlimits_cfg_t *cfg);
void ivmd_netlimits_close(ivmd_netlimits_t *n);
/* The listener h could not accept (EMFILE, ENFILE, ENOBUFS, ENOMEM): take it
 * out of the loop and put it back on a timer, saying so once per pause. */
void ivmd_netlimits_accept_pause(ivmd_netlimits_t *n, ivmd_handler_t *h, const char *what);
/* 1 if a connection (or a new PE's fds) numbered fd stays within the budget
 * of connections; else 0 (the caller refuses it). fd < 0: probe the lowest
 * free fd. */
int ivmd_netlimits_fd_ok(const ivmd_netlimits_t *n, int fd);
/* A pre-auth peer connection from ss (its address, IPv4 mapped, in src):
 * 1 to keep it, 0 to close it at once. */
int ivmd_netlimits_peer_admit(ivmd_netlimits_t *n, const void *ss, uint8_t src[16]);

#endif /* IVMD_TRANSPORT_NETLIMITS_H */
