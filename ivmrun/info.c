/* ivm-info: what a node daemon holds (jobs, PEs, objects, connections, bytes)
 * and its CPU devices (cores, share, PEs on each), or, with --object JOB
 * NAME, its copy of one object and the bytes it moved, or, with --gpu K, the
 * figures of the node's GPU K (ivm-gpud). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "log.h"
#include "sock.h"
#include "status.h"
#include "version.h"

static int ivm_info_usage(FILE *out, int rc)
{
    fprintf(out, "usage: ivm-info [--object JOB NAME | --gpu K] [SOCKET]\n"
                 "       ivm-info --version\n"
                 "Prints what the IVM daemon on SOCKET (default: $IVM_SOCKET, else the\n"
                 "per-user socket) holds, as key=value lines, with one cpu_device.K line\n"
                 "per CPU device of its table (its cores, share of their time in percent,\n"
                 "PEs running on it, cgroups and CPU limit); with --object, its copy of\n"
                 "object NAME of job JOB and the bytes of it sent to / received from\n"
                 "other nodes; with --gpu, the device memory and copies of the node's\n"
                 "GPU K as its GPU daemon (ivm-gpud) counts them.\n");
    return rc;
}

/* One line per CPU device of the daemon's table: cpu_device.K=cores=... */
static void ivm_info_cpu_devices(const char *path)
{
    ivm_msg_cpu_info_req_t req = {.dev = 0};
    ivm_msg_cpu_info_rep_t rep;
    uint32_t k, n = 1;

    for (k = 0; k < n; ++k) {
        req.dev = k;
        if (ivm_sock_request(path, 2000, IVM_MSG_CPU_INFO, &req, sizeof(req), &rep,
                             sizeof(rep)) != IVM_SUCCESS) {
            return; /* a daemon without CPU_INFO */
        }
        rep.cores[sizeof(rep.cores) - 1] = '\0';
        if (k == 0) {
            n = rep.ndevs;
            printf("cpu_devices=%u\n", n);
        }
        if (k == 0) {
            printf("numa_nodes=%u\n", rep.numa_nodes);
        }
        printf("cpu_device.%u=cores=%s ncores=%u share=%u pes=%u groups=%u quota_us=%llu "
               "period_us=%llu numa=%d\n", k, rep.cores, rep.ncores, rep.share, rep.pes,
               rep.groups, (unsigned long long)rep.quota_us, (unsigned long long)rep.period_us,
               (int)rep.numa);
    }
}

int main(int argc, char **argv)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    const char *obj_job = NULL, *obj_name = NULL, *sock = NULL, *gpu = NULL;
    ivm_msg_gpu_info_req_t greq;
    ivm_msg_gpu_info_rep_t grep;
    ivmError_t status;
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return ivm_info_usage(stdout, 0);
        } else if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
            ivm_version_print(stdout, "ivm-info");
            return 0;
        } else if (!strcmp(argv[i], "--gpu") && i + 1 < argc) {
            gpu = argv[++i];
        } else if (!strcmp(argv[i], "--object") && i + 2 < argc) {
            obj_job  = argv[++i];
            obj_name = argv[++i];
        } else if (argv[i][0] != '-' && sock == NULL) {
            sock = argv[i];
        } else {
            return ivm_info_usage(stderr, 2);
        }
    }
    if (sock != NULL) {
        snprintf(path, sizeof(path), "%s", sock);
    } else if (ivm_sock_path(path, sizeof(path)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-info: the socket path is too long\n");
        return 2;
    }
    if (gpu != NULL) {
        char *end;
        unsigned long k = strtoul(gpu, &end, 10);
        if (*gpu == '\0' || *end != '\0' || k > 255) {
            fprintf(stderr, "ivm-info: --gpu '%s' is not a GPU index\n", gpu);
            return 2;
        }
        memset(&greq, 0, sizeof(greq));
        greq.gpu = (uint32_t)k;
        status = ivm_sock_request(path, 2000, IVM_MSG_GPU_INFO, &greq, sizeof(greq), &grep,
                                  sizeof(grep));
        if (status != IVM_SUCCESS) {
            fprintf(stderr, "ivm-info: %s: GPU %lu: %s\n", path, k, ivm_status_string(status));
            return 1;
        }
        printf("gpu=%lu\nname=%s\nbackend=%s\ngpus=%u\ngpud_pid=%u\ngpud_alive=%d\n"
               "capacity_bytes=%llu\nused_bytes=%llu\ncached_bytes=%llu\ncopies=%u\n"
               "mapped_refs=%u\nallocations=%llu\nevictions=%llu\nwaiting=%u\n"
               "wait_timeouts=%u\ngranularity_bytes=%llu\n",
               k, grep.name, grep.backend, grep.ngpus, grep.gpud_pid,
               (grep.flags & IVM_GPU_INFO_ALIVE) != 0, (unsigned long long)grep.capacity,
               (unsigned long long)grep.used, (unsigned long long)grep.cached_bytes,
               grep.copies, grep.mapped_refs, (unsigned long long)grep.allocations,
               (unsigned long long)grep.evictions, grep.waiting, grep.wait_timeouts,
               (unsigned long long)grep.granularity);
        return 0;
    }
    if (obj_name != NULL) {
        ivm_msg_obj_info_req_t req;
        ivm_msg_obj_info_rep_t rep;

        memset(&req, 0, sizeof(req));
        req.job = (uint32_t)strtoul(obj_job, NULL, 0);
        if (ivm_proto_strset(req.name, sizeof(req.name), obj_name) != 0) {
            fprintf(stderr, "ivm-info: object name too long\n");
            return 2;
        }
        status = ivm_sock_request(path, 2000, IVM_MSG_OBJ_INFO, &req, sizeof(req), &rep,
                                  sizeof(rep));
        if (status != IVM_SUCCESS) {
            fprintf(stderr, "ivm-info: %s: object '%s' of job %s: %s\n", path, obj_name,
                    obj_job, ivm_status_string(status));
            return 1;
        }
        printf("copy=%s\nsize=%llu\nheld_bytes=%llu\nsent_bytes=%llu\nreceived_bytes=%llu\n"
               "mirror_regions=%u\n", (rep.flags & IVM_OBJ_INFO_MASTER) ? "master" : "mirror",
               (unsigned long long)rep.size, (unsigned long long)rep.held,
               (unsigned long long)rep.tx_bytes, (unsigned long long)rep.rx_bytes,
               rep.mirrors);
        return 0;
    }
    {
        ivm_msg_info_rep_t info;
        status = ivm_sock_info(path, 2000, &info);
        if (status != IVM_SUCCESS) {
            fprintf(stderr, "ivm-info: %s: %s\n", path, ivm_status_string(status));
            return 1;
        }
        printf("node=%s\npid=%u\njobs=%u\npes=%u\nobjects=%u\nconnections=%u\n"
               "object_bytes=%llu\npeers=%u\npeers_up=%u\nsent_bytes=%llu\n"
               "received_bytes=%llu\nparked=%u\npooled=%u\npoll_us=%u\npolled=%llu\n",
               info.node, info.pid, info.jobs, info.pes, info.objects, info.conns,
               (unsigned long long)info.shm_bytes, info.peers, info.peers_up,
               (unsigned long long)info.tx_bytes, (unsigned long long)info.rx_bytes,
               info.parked, info.pooled, info.poll_us, (unsigned long long)info.polled);
        ivm_info_cpu_devices(path);
        memset(&greq, 0, sizeof(greq));
        if (ivm_sock_request(path, 2000, IVM_MSG_GPU_INFO, &greq, sizeof(greq), &grep,
                             sizeof(grep)) == IVM_SUCCESS) {
            printf("gpus=%u\ngpu_backend=%s\ngpud_alive=%d\n", grep.ngpus, grep.backend,
                   (grep.flags & IVM_GPU_INFO_ALIVE) != 0);
        } else {
            printf("gpus=0\n");
        }
    }
    return 0;
}
