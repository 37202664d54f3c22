/*
 * gpu: GPU coherence, the client of this node's ivm-gpud (common/gpud_proto.h,
 * docs/design-gpu.md). ivmd starts one ivm-gpud per node when emulated GPUs
 * are asked for (--emu-gpus) or the node has NVIDIA GPUs (and --gpus is not
 * "none"), with one end of a socketpair as its --ctl-fd, and asks it for the
 * GPUs (GHELLO) before it reports ready. The socket is then a connection of
 * the loop whose replies complete requests in flight.
 *  - A GPU PE's map: the node copy is made as for a CPU PE, then ACQUIRE on
 *    the PE's GPU; the reply to the PE carries both fds. Each reference is
 *    kept by id (gpu/refs.c) and RELEASEd on UNMAP, FREE and PE death.
 *  - Syncs that involve device copies run as a list of steps (gpu/sync.c).
 *  - The device copies are the data plane's copy target (data/target.h).
 *  - ivm-gpud gone: every request in flight fails with DAEMON_LOST, later GPU
 *    maps, syncs and GPU PE creation too; CPU PEs are served as before.
 *  - GPU devices (IVM_GPU_N(k), NODEINFO) are one per physical GPU, or the
 *    --gpu-shares table: several devices may be shares of one GPU. ivm-gpud
 *    knows physical GPUs only.
 *  - ivmd knows no CUDA: ivm-gpud's GHELLO names the environment a PE on
 *    each GPU needs, which ivmd passes on (ivmd_gpu_env).
 */
#ifndef IVMD_GPU_GPU_H
#define IVMD_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <spawn.h>

#include "ctl/job.h"
#include "data/data.h"
#include "proto.h"
#include "status.h"
#include "transport/conn.h"

typedef struct ivmd_gpud ivmd_gpud_t;

/* The settings it runs with (ivmd's, by the same names). */
typedef struct ivmd_gpu_cfg {
    const char *emu_gpus, *gpus, *gpu_shares, *gpud, *gpu_admit_timeout, *node, *log_level;
    long        ready_fd;
} ivmd_gpu_cfg_t;

/* What the layers above do for it. */
typedef struct ivmd_gpu_up {
    /* Spawn attributes of a child of the daemon. */
    void (*spawn_attr_init)(posix_spawnattr_t *attr);
    /* ivm-gpud is gone: the warm pool's GPU processes can never be PEs. */
    void (*gpus_lost)(ivmd_t *d);
} ivmd_gpu_up_t;

/* The GPU module's state, hung off the daemon's context. */
typedef struct ivmd_gpu {
    ivmd_t              *d;         /* the daemon, for callbacks (opaque) */
    ivmd_gpu_cfg_t       cfg;
    const int           *devnull;   /* the daemon's /dev/null */
    const int           *stopping;  /* the daemon shuts down */
    ivmd_registry_t     *reg;
    ivmd_conn_table_t   *conns;     /* where its socket becomes a connection */
    ivmd_data_t         *data;      /* whose copy target it is */
    const ivmd_gpu_up_t *up;
    ivmd_gpud_t         *g;         /* the ivm-gpud client, NULL without GPUs */
} ivmd_gpu_t;

void ivmd_gpu_init(ivmd_gpu_t *gm, ivmd_t *d, const ivmd_gpu_cfg_t *cfg, const int *devnull,
                   const int *stopping, ivmd_registry_t *reg, ivmd_conn_table_t *conns,
                   ivmd_data_t *data, const ivmd_gpu_up_t *up);

/* Start ivm-gpud if this node has GPUs (or --emu-gpus); learn them. */
ivmError_t ivmd_gpu_start(ivmd_gpu_t *gm);
/* Close its socket, wait for it to exit. */
void ivmd_gpu_stop(ivmd_gpu_t *gm);
/* GPU devices of the node (NODEINFO, IVM_GPU_N(k)): its GPUs, or the shares. */
uint32_t ivmd_gpu_count(const ivmd_gpu_t *gm);
int ivmd_gpu_alive(const ivmd_gpu_t *gm);
/* The GPU backend's name ("emu", "cuda"), "none" without ivm-gpud. */
const char *ivmd_gpu_backend_name(const ivmd_gpu_t *gm);
/* GPU device dev's percent of its GPU's SMs (100: all). */
int ivmd_gpu_share(const ivmd_gpu_t *gm, int dev);
/* The environment a PE on GPU device dev needs beside IVM's own variables,
 * as ivm-gpud named it: up to max "NAME=value" strings written to env (each
 * env_len bytes); returns how many. */
int ivmd_gpu_env(const ivmd_gpu_t *gm, int dev, char (*env)[160], int max);
/* 1 if the variable (a "NAME=value" string) is one that ivmd_gpu_env sets
 * for device dev, so the job's own value of it is dropped. */
int ivmd_gpu_env_overrides(const ivmd_gpu_t *gm, int dev, const char *var);
/* SIGCHLD: 1 if pid was ivm-gpud. */
int ivmd_gpu_reaped(ivmd_gpu_t *gm, pid_t pid, int wstatus);
/* The ivm-gpud connection's callbacks (its owner state is the ivmd_gpu_t):
 * its socket closed or sent garbage (everything GPU fails from now on), and
 * a reply. */
void ivmd_gpu_lost(ivmd_t *d, ivmd_conn_t *c, const char *why);
void ivmd_gpu_handle_msg(ivmd_t *d, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                         const void *payload);
/* A connection closed: its requests and syncs answer nobody. */
void ivmd_gpu_forget_conn(ivmd_gpu_t *gm, ivmd_conn_t *c);
/* A GPU PE's map of [off, off+size) of obj, whose node copy is ready:
 * ACQUIRE, then the reply with both fds (or the error). */
void ivmd_gpu_map(ivmd_gpu_t *gm, ivmd_conn_t *c, uint16_t type, uint32_t seq, ivmd_obj_t *obj,
                  uint64_t off, uint64_t size);
/* UNMAP/FREE of a GPU mapping: release its reference. */
ivmError_t ivmd_gpu_unref(ivmd_gpu_t *gm, ivmd_pe_t *pe, uint64_t gpu_ref, uint64_t obj_id);
void ivmd_gpu_pe_ended(ivmd_gpu_t *gm, ivmd_pe_t *pe);
void ivmd_gpu_job_end(ivmd_gpu_t *gm, ivmd_job_t *job);
/* Whether device copies of this node meet [off, off+len) of (job, obj). */
int ivmd_gpu_has_copies(const ivmd_gpu_t *gm, uint32_t job, uint64_t obj, uint64_t off,
                        uint64_t len);
/* SYNC of a GPU mapping, or a group call meeting device copies of this node:
 * IVMD_DEFERRED, or an ivmError_t with detail. */
int ivmd_gpu_sync(ivmd_gpu_t *gm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr, ivmd_obj_t *obj,
                  const ivm_msg_sync_req_t *req, char *detail, size_t detail_len);
/* GPU_INFO: IVMD_DEFERRED (GSTATS asked), or answered now in rep/detail. */
int ivmd_gpu_info(ivmd_gpu_t *gm, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                  const ivm_msg_gpu_info_req_t *req, ivm_msg_gpu_info_rep_t *rep, char *detail,
                  size_t detail_len);

#endif /* IVMD_GPU_GPU_H */
