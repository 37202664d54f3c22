/*
 * svc: the PE protocol's state that the daemon's context holds (ivmd.h),
 * apart from its handlers (handlers.h), so that the context does not stand
 * on the layer that serves the requests: the reply being built, and what
 * the handlers keep between requests.
 */
#ifndef IVMD_SVC_H
#define IVMD_SVC_H

#include <stdint.h>

#include "proto.h"
#include "transport/reply.h"

/* The body of every reply a handler may send. */
typedef union ivmd_reply_body {
    ivm_msg_status_t         status;
    ivm_msg_enter_rep_t      enter;
    ivm_msg_create_dev_rep_t create_dev;
    ivm_msg_create_pes_rep_t create_pes;
    ivm_msg_value_rep_t      value;
    ivm_msg_map_rep_t        map;
    ivm_msg_info_rep_t       info;
    ivm_msg_obj_info_rep_t   obj_info;
    ivm_msg_gpu_info_rep_t   gpu_info;
    ivm_msg_cpu_info_rep_t   cpu_info;
    ivm_msg_list_rep_t       list;
    ivm_msg_node_devs_rep_t  node_devs;
    ivm_msg_endpoint_rep_t   endpoint;
} ivmd_reply_body_t;

/* A PE request's reply being built: the result and detail, the body. */
typedef struct ivmd_pe_reply {
    ivmd_reply_t      r;
    ivmd_reply_body_t body;
    uint32_t          len;     /* bytes of body to send */
    int               fd;      /* fd to pass, -1 if none */
} ivmd_pe_reply_t;

/* The service's state, hung off the daemon's context. */
struct ivmd_putsig;

typedef struct ivmd_handlers {
    ivmd_pe_reply_t     rep;         /* the reply of the request being served */
    struct ivmd_putsig *putsigs;     /* PUT_SIGNALs whose put is in flight */
    uint64_t            next_putsig; /* their ids */
    int                 bounced;     /* serving a request the root sent back: a PE still
                                        unknown is not forwarded again */
    uint64_t            signals;     /* SIGNAL requests of this node's PEs (INFO) */
} ivmd_handlers_t;

#endif /* IVMD_SVC_H */
