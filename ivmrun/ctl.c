/* ivm-ctl: change a running node daemon's settings. Now: set-share DEV PCT,
 * the share of CPU device DEV of its table (SET_SHARE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"
#include "version.h"

static int ivm_ctl_usage(FILE *out, int rc)
{
    fprintf(out, "usage: ivm-ctl [--socket PATH] set-share DEV PCT\n"
                 "       ivm-ctl --version\n"
                 "Changes the IVM daemon on PATH (default: $IVM_SOCKET, else the per-user\n"
                 "socket) while it runs.\n\n"
                 "  set-share DEV PCT   CPU device DEV of the daemon's table becomes PCT\n"
                 "                      percent (1..100) of each of its cores' time: its\n"
                 "                      cgroup CPU limit changes at once for the PEs on it\n"
                 "                      now and later (jobs with their own IVM_CPU_DEVICES\n"
                 "                      keep theirs). Refused when a core would be shared\n"
                 "                      by devices whose shares add up to more than 100.\n"
                 "                      ivm-info shows each device's share.\n");
    return rc;
}

/* A decimal number of 0..max, or -1. */
static long ivm_ctl_number(const char *text, long max)
{
    char *end;
    long v;

    if (text[0] < '0' || text[0] > '9') {
        return -1;
    }
    v = strtol(text, &end, 10);
    return (*end == '\0' && v <= max) ? v : -1;
}

int main(int argc, char **argv)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)], detail[IVM_CLIENT_DETAIL_MAX];
    ivm_msg_set_share_req_t req;
    ivm_client_result_t res;
    ivm_msg_status_t rep;
    const char *sock = NULL;
    ivmError_t status;
    long dev, pct;
    int i = 1;

    ivm_log_set_prefix("ivm-ctl");

    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        return ivm_ctl_usage(stdout, 0);
    }
    if (argc > 1 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
        ivm_version_print(stdout, "ivm-ctl");
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "--socket")) {
        sock = argv[2];
        i    = 3;
    }
    if (argc - i != 3 || strcmp(argv[i], "set-share") != 0) {
        return ivm_ctl_usage(stderr, 2);
    }
    dev = ivm_ctl_number(argv[i + 1], 1000000);
    pct = ivm_ctl_number(argv[i + 2], 1000000);
    if (dev < 0 || pct < 0) {
        ivm_error("set-share: '%s' is not a device index or '%s' not a "
                  "percentage (give e.g. set-share 1 25)", argv[i + 1], argv[i + 2]);
        return 2;
    }
    if (sock != NULL) {
        snprintf(path, sizeof(path), "%s", sock);
    } else if (ivm_sock_path(path, sizeof(path)) != IVM_SUCCESS) {
        ivm_error("the socket path is too long");
        return 2;
    }
    req = (ivm_msg_set_share_req_t){.dev = (uint32_t)dev, .percent = (uint32_t)pct};
    status = ivm_client_request(path, 5000, IVM_MSG_SET_SHARE, &req, sizeof(req), &rep,
                                sizeof(rep), &res);
    snprintf(detail, sizeof(detail), "%s", status != IVM_SUCCESS ? res.detail : "");
    if (status != IVM_SUCCESS) {
        ivm_error("%s: set-share %ld %ld: %s%s%s", path, dev, pct,
                ivm_status_string(status), detail[0] != '\0' ? ": " : "", detail);
        return 1;
    }
    return 0;
}
