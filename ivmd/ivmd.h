/*
 * ivmd: the node daemon. One epoll loop; all state in one ivmd_t passed
 * explicitly. Modules: transport/loop (epoll, hooks, idle task),
 * transport/conn (framing, validation, replies, per-kind callbacks), handlers
 * (one per message type), the control plane's ctl/job (the registry, pure
 * bookkeeping), ctl/spawn (PE processes), ctl/pool (the warm pool),
 * ctl/output (tagged forwarding of PE output), ctl/devcg (CPU share devices
 * in cgroups), ctl/teardown (the end of a job).
 */
#ifndef IVMD_IVMD_H
#define IVMD_IVMD_H

#include <stdint.h>
#include <spawn.h>
#include <sys/types.h>

#include "config.h"
#include "ctl/jobdata.h"
#include "ctl/remote.h"
#include "data/copies.h"
#include "data/data.h"
#include "crypto.h"
#include "ctl/ctl.h"
#include "ctl/devcg.h"
#include "ctl/jobdata.h"
#include "ctl/output.h"
#include "ctl/pool.h"
#include "ctl/spawn.h"
#include "ctl/teardown.h"
#include "devspec.h"
#include "ctl/job.h"
#include "ctl/board.h"
#include "ctl/psync.h"
#include "gpu/gpu.h"
#include "svc.h"
#include "proto.h"
#include "ctl/quota.h"
#include "transport/conn.h"
#include "transport/link.h"
#include "transport/loop.h"

/* The peer links' TCP congestion control unless told otherwise (--tcp-congestion). */
#define IVMD_TCP_CONGESTION_DEFAULT "cubic"

#define IVMD_CONFIG_TABLE(X)                                                        \
    X(socket, "socket", STRING, "",                                                 \
      "Unix socket to listen on (default: <socket dir>/ivmd.sock)")                 \
    X(node, "node", STRING, "node0", "this node's name")                            \
    X(cpu_devices, "cpu-devices", STRING, "",                                       \
      "default CPU device table of jobs, e.g. 0-7,8-11,12 (default: all cores); "   \
      "CORES:PCT is a share of the cores' time, e.g. 0,1:50,1:25, enforced with "  \
      "a cgroup CPU limit (needs root or a delegated cgroup)")                      \
    X(ready_fd, "ready-fd", INT, "-1",                                              \
      "once listening, write 'R' (and ' PORT' when --listen is set) and a newline") \
    X(listen, "listen", STRING, "",                                                 \
      "HOST:PORT to accept peer daemons on over TCP (port 0: any); empty: none")     \
    X(exit_when_idle, "exit-when-idle", BOOL, "0",                                  \
      "exit once the last job ended and no client is connected")                   \
    X(remove_dir, "remove-dir", BOOL, "0",                                          \
      "at exit, also remove the socket's directory once it is empty (a run "        \
      "directory that the daemon's launcher made for it)")                          \
    X(log_level, "log-level", STRING, "warn", "error, warn, info, debug or trace")    \
    X(emu_gpus, "emu-gpus", STRING, "",                                             \
      "emulate N GPUs of MEM bytes each (N[:MEM], e.g. 2:256M) with ivm-gpud's emu "  \
      "backend (host memory)")                                                      \
    X(gpus, "gpus", STRING, "all",                                                  \
      "real GPUs for GPU PEs: all, none, or CUDA indices 0,2 (GPU k = k-th listed)") \
    X(gpu_shares, "gpu-shares", STRING, "",                                         \
      "GPU devices as shares of the GPUs' SMs, e.g. 0:50,0:50,1 (G or G:PERCENT; "   \
      "default: one device per GPU)")                                               \
    X(gpud, "gpud", STRING, "", "ivm-gpud to start (default: beside ivmd, else PATH)") \
    X(gpu_admit_timeout, "gpu-admit-timeout", STRING, "",                           \
      "seconds a GPU map may wait for device memory (default: ivm-gpud's, 60)")     \
    X(peer_encrypt, "peer-encrypt", BOOL, "0",                                     \
      "encrypt the links to peer daemons (ChaCha20-Poly1305); without it they are "  \
      "authenticated only; every daemon of a cluster must say the same")            \
    X(transport, "transport", STRING, "auto",                                       \
      "how object bytes move between nodes: tcp (the peer links), ucx (one-sided "   \
      "put and get through UCX; UCX_* variables choose its transports) or auto "     \
      "(ucx when built with it, an RDMA device is present and links are not "         \
      "encrypted; else tcp)")                                                      \
    X(tcp_congestion, "tcp-congestion", STRING, IVMD_TCP_CONGESTION_DEFAULT,       \
      "TCP congestion control of the links to peer daemons: an algorithm the "       \
      "kernel lets any user pick (net.ipv4.tcp_allowed_congestion_control), or "     \
      "system for the system's default (BBR's pacing holds transfers that go as "    \
      "request and reply, ivmSyncGet's, well below the link's rate)")               \
    X(poll_us, "poll-us", INT, "0",                                                 \
      "microseconds to poll for the next message before sleeping, after answering "  \
      "a PE and while a peer transfer is in flight (0: never poll; max 1000000)")   \
    X(psync_places, "psync-places", BOOL, "1",                                      \
      "as a job's root, tell the other daemons where the job's PEs are (PLACED), so "  \
      "that an addressed signal takes one daemon hop; off (a test of the fallback): "  \
      "a node daemon learns each PE's place by asking this daemon")                  \
    X(max_fds, "max-fds", INT, "0",                                                 \
      "open-file limit to run with (0: the soft RLIMIT_NOFILE raised to the hard one)") \
    X(fd_reserve, "fd-reserve", INT, "64",                                          \
      "file descriptors kept for the daemon's own work: jobs' objects stop at the "   \
      "open-file limit minus this, connections and new PEs at minus half of it")     \
    X(max_objects_per_job, "max-objects-per-job", INT, "100000",                    \
      "objects (masters and mirrors) one job may hold on this node")                \
    X(max_objects, "max-objects", INT, "0",                                         \
      "objects of all jobs on this node (0: as many as the fd budget allows)")      \
    X(max_bytes_per_job, "max-bytes-per-job", INT, "0",                             \
      "bytes of objects one job may hold on this node (0: no limit but memory)")     \
    X(max_bytes, "max-bytes", INT, "0",                                             \
      "bytes of objects of all jobs on this node (0: the node's memory, or the "      \
      "daemon's cgroup memory limit where lower)")                                  \
    X(max_pes_per_job, "max-pes-per-job", INT, "65536",                             \
      "live PEs of one job (counted by its root daemon)")                            \
    X(max_pes, "max-pes", INT, "0",                                                 \
      "live PEs of all jobs this daemon is root of (0: no limit but the fd budget)") \
    X(max_conns_per_job, "max-conns-per-job", INT, "65536",                         \
      "PE connections bound to one job on this node")                               \
    X(max_conns, "max-conns", INT, "0",                                             \
      "PE and tool connections to this daemon (0: as many as the fd budget allows)") \
    X(reserve_memory, "reserve-memory", BOOL, "1",                                 \
      "reserve an object's memory when it is made (fallocate: ivmMalloc zeroes its " \
      "pages, a later touch cannot fail); off: sparse objects, checked against "     \
      "available memory only")                                                      \
    X(huge_pages, "huge-pages", STRING, "auto",                                     \
      "put objects' memory in 2 MiB pages (whole ones; needs --reserve-memory): on, "  \
      "off, or auto (where the kernel can: Linux 6.1 or later; a fresh PE then "       \
      "maps an object 512 pages to a page table entry)")                            \
    X(preauth_per_source, "preauth-per-source", INT, "32",                          \
      "unauthenticated peer connections one source address may hold open; beyond, " \
      "new ones are closed at once")                                                \
    X(preauth_rate, "preauth-rate", INT, "20",                                     \
      "peer connections per second one source address may open (burst: 4 times "    \
      "this); beyond, they are closed at once")

IVM_CONFIG_STRUCT(ivmd_config, IVMD_CONFIG_TABLE);

#define IVMD_POLL_US_MAX 1000000 /* --poll-us: at most one second */

typedef struct ivmd ivmd_t;

struct ivmd_peer;

struct ivmd {
    ivmd_config_t    cfg;
    char             socket_path[108];
    ivmd_loop_t      loop;         /* the event loop (transport/loop.h) */
    ivmd_conn_table_t conns;       /* connections (transport/conn.h) */
    int              signal_fd;
    int              timer_fd;     /* grace period of PEs that called ivmExit */
    ivmd_handler_t   signal_h;
    ivmd_handler_t   timer_h;
    ivmd_netlimits_t net;          /* fd budget, accept pauses, sources (transport/netlimits.h) */
    ivmd_quota_t     quota;        /* objects, bytes, PEs, connections (ctl/quota.h) */
    int              stopping;
    int              had_client;
    uid_t            uid;
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    int              ndevs;
    cpu_set_t        own_affinity;
    ivmd_registry_t  reg;
    ivmd_ctl_env_t   ctl;          /* what the control plane's modules are given (ctl/ctl.h) */
    ivmd_output_t    output;       /* output forwarders (ctl/output.h) */
    ivmd_spawn_t     spawn;        /* the spawner (ctl/spawn.h) */
    ivmd_pool_t      pool;         /* the warm pool (ctl/pool.h) */
    ivmd_teardown_t  teardown;     /* the end of jobs (ctl/teardown.h) */
    int              devnull;
    ivmd_link_t      link;         /* peer links, the cluster table (transport/link.h) */
    ivmd_data_t      data;         /* the data plane: operations in flight (data/) */
    ivmd_remote_t    remote;       /* spawns on other nodes in flight (ctl/remote.c) */
    ivmd_gpu_t       gpu;          /* GPU coherence, the ivm-gpud client (gpu/) */
    ivmd_handlers_t  svc;          /* the PE protocol's reply in the making (handlers.h) */
    ivmd_devcg_t     devcg;        /* CPU share devices' cgroups (ctl/devcg.h) */
};

/* Until every module takes the transport's own state: the loop and the
 * connection table of the daemon context. */
static inline ivmError_t ivmd_loop_add(ivmd_t *d, ivmd_handler_t *h, uint32_t events)
{
    return ivmd_loop_watch(&d->loop, h, events);
}
static inline void ivmd_loop_mod(ivmd_t *d, ivmd_handler_t *h, uint32_t events)
{
    ivmd_loop_rewatch(&d->loop, h, events);
}
static inline void ivmd_loop_del(ivmd_t *d, ivmd_handler_t *h)
{
    ivmd_loop_unwatch(&d->loop, h);
}
/* A new connection on fd of the given kind, registered with the loop. */
static inline ivmd_conn_t *ivmd_conn_open(ivmd_t *d, int fd, ivmd_conn_kind_t kind,
                                          uint32_t events)
{
    return ivmd_conn_create(&d->conns, fd, kind, events);
}

/* Limits, until every caller takes the modules' own state: the fd budget
 * (transport/netlimits.h) and the quotas (ctl/quota.h). */
static inline int ivmd_limits_conn_fd_ok(ivmd_t *d, int fd)
{
    return ivmd_netlimits_fd_ok(&d->net, fd);
}
static inline ivmError_t ivmd_limits_conn_admit(ivmd_t *d, char *detail, size_t detail_len)
{
    return ivmd_quota_conn_admit(&d->quota, detail, detail_len);
}
static inline ivmError_t ivmd_limits_obj_mem(ivmd_t *d, const ivmd_job_t *job, const char *name,
                                             uint64_t size, int counted, int numa, int *fd_p,
                                             char *detail, size_t detail_len)
{
    return ivmd_quota_obj_mem(&d->quota, job, name, size, counted, numa, fd_p, detail,
                              detail_len);
}
static inline ivmError_t ivmd_limits_pes_admit(ivmd_t *d, const ivmd_job_t *job, int n,
                                               char *detail, size_t detail_len)
{
    return ivmd_quota_pes_admit(&d->quota, job, n, detail, detail_len);
}

/* Peers (transport/link.c), until every caller takes the link's state. */
static inline ivmError_t ivmd_peer_set_cluster(ivmd_t *d, const ivm_msg_cluster_req_t *req,
                                               char *detail, size_t detail_len)
{
    return ivmd_link_set_cluster(&d->link, d, req, detail, detail_len);
}
static inline uint32_t ivmd_peer_count_up(const ivmd_t *d)
{
    return ivmd_link_count_up(&d->link);
}

/* Jobs across nodes (cluster.c): the peer messages' dispatch and the events
 * of peers and connections, handed to ctl/remote.h and data/data.h. */
void ivmd_cluster_handle_msg(ivmd_t *d, ivmd_conn_t *pc, const ivm_msg_hdr_t *hdr,
                             const void *payload);
/* Wire the cluster's modules to the daemon's state (after the registry). */
void ivmd_cluster_init(ivmd_t *d);
/* 1 if an operation or a spawn waits for a peer (the loop polls). */
int ivmd_cluster_busy(const ivmd_t *d);
/* Teardown: drop the operations still in flight. */
void ivmd_cluster_close_all(ivmd_t *d);
void ivmd_cluster_conn_gone(ivmd_t *d, ivmd_conn_t *c);
void ivmd_cluster_peer_up(ivmd_t *d, ivmd_peer_t *p);
void ivmd_cluster_peer_lost(ivmd_t *d, ivmd_peer_t *p);
/* A connection closed: the GPU module's requests and syncs of it answer
 * nobody (cluster.c). */
void ivmd_gpu_conn_gone(ivmd_t *d, ivmd_conn_t *c);
#endif /* IVMD_IVMD_H */
