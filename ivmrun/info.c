/* ivm-info: what a node daemon holds (jobs, PEs, objects, connections, bytes). */
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "log.h"
#include "sock.h"
#include "status.h"

int main(int argc, char **argv)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    ivm_msg_info_rep_t info;
    ivmError_t status;

    if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        printf("usage: ivm-info [SOCKET]\n"
               "Prints what the IVM daemon on SOCKET (default: $IVM_SOCKET, else the\n"
               "per-user socket) holds, as key=value lines.\n");
        return argc == 2 ? 0 : 2;
    }
    if (argc == 2) {
        snprintf(path, sizeof(path), "%s", argv[1]);
    } else if (ivm_sock_path(path, sizeof(path)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-info: the socket path is too long\n");
        return 2;
    }
    status = ivm_sock_info(path, 2000, &info);
    if (status != IVM_SUCCESS) {
        fprintf(stderr, "ivm-info: %s: %s\n", path, ivm_status_string(status));
        return 1;
    }
    printf("node=%s\npid=%u\njobs=%u\npes=%u\nobjects=%u\nconnections=%u\nobject_bytes=%llu\n"
           "peers=%u\npeers_up=%u\nsent_bytes=%llu\nreceived_bytes=%llu\n",
           info.node, info.pid, info.jobs, info.pes, info.objects, info.conns,
           (unsigned long long)info.shm_bytes, info.peers, info.peers_up,
           (unsigned long long)info.tx_bytes, (unsigned long long)info.rx_bytes);
    return 0;
}
