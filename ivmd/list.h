/*
 * list (service layer): LIST, the daemon's jobs, a job's PEs and objects, and
 * the cluster's peers, one entry per request (ivm-info walks them by index).
 */
#ifndef IVMD_LIST_H
#define IVMD_LIST_H

#include "proto.h"
#include "transport/reply.h"
#include "transport/loop.h"

/* Entry req->index of req->kind into out: IVM_SUCCESS, IVM_ERROR_NOT_FOUND
 * past the last one, or an error with its detail in rep. */
ivmError_t ivmd_list(ivmd_t *d, const ivm_msg_list_req_t *req, ivm_msg_list_rep_t *out,
                     ivmd_reply_t *rep);

#endif /* IVMD_LIST_H */
