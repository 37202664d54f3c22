/*
 * dmm_probe: the hook of the test build of dmm (ivmt_dmm_probe, dmm.c built
 * with DMM_OBJ_PROBE): bytes of an object of this PE's job that this node's
 * daemon has received (OBJ_INFO rx_bytes), so the test can see that a second
 * map of a strip already on a node moves none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#include "client.h"
#include "proto.h"
#include "sock.h"

uint64_t dmm_probe_rx(const char *name);

uint64_t dmm_probe_rx(const char *name)
{
    ivm_msg_obj_info_req_t req;
    ivm_msg_obj_info_rep_t rep;
    const char *sock = getenv("IVM_SOCKET");
    ivmError_t rc;
    int gid;

    if (sock == NULL || ivmGetMyGroupId(&gid) != IVM_SUCCESS) {
        fprintf(stderr, "dmm_probe: no IVM_SOCKET or group id\n");
        exit(1);
    }
    memset(&req, 0, sizeof(req));
    req.job = (uint32_t)gid;
    snprintf(req.name, sizeof(req.name), "%s", name);
    memset(&rep, 0, sizeof(rep));
    rc = ivm_client_request(sock, 5000, IVM_MSG_OBJ_INFO, &req, sizeof(req), &rep, sizeof(rep),
                            NULL);
    if (rc == IVM_ERROR_NOT_FOUND)
        return 0;       /* no copy of the object on this node yet */
    if (rc != IVM_SUCCESS) {
        fprintf(stderr, "dmm_probe: OBJ_INFO %s: %s\n", name, ivmGetErrorString(rc));
        exit(1);
    }
    return rep.rx_bytes;
}
