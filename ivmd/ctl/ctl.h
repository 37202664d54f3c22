/*
 * ctl/ctl: what every module of the control plane is given at bring-up (the
 * service layer wires it, ivmd/handlers.c): the daemon's context as an
 * opaque pointer for the transport and ctl/remote, the registry, the node's
 * identity, GPU coherence as a table of callbacks (the GPU module sits
 * above the control plane: it is never called by name from here), and the
 * job's collection and the pool's reaping as up-calls for spawn and pool.
 */
#ifndef IVMD_CTL_CTL_H
#define IVMD_CTL_CTL_H

#include <sched.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl/job.h"
#include "transport/reply.h"
#include "transport/loop.h"

/* The GPUs a PE may run on, as GPU coherence tells (ctx: its state). */
typedef struct ivmd_ctl_gpu_ops {
    /* GPU devices of the node, and whether its GPU daemon lives. */
    uint32_t (*count)(const void *ctx);
    int (*alive)(const void *ctx);
    /* The GPU backend's name ("none" without one). */
    const char *(*backend_name)(const void *ctx);
    /* GPU device dev's percent of its GPU. */
    int (*share)(const void *ctx, int dev);
    /* The environment a PE on dev needs: up to max "NAME=value" strings in
     * env; returns how many. */
    int (*env)(const void *ctx, int dev, char (*env)[160], int max);
    /* 1 if the job's own "NAME=value" var is replaced by env's. */
    int (*env_overrides)(const void *ctx, int dev, const char *var);
    /* SIGCHLD: 1 if pid was the GPU daemon. */
    int (*reaped)(void *ctx, pid_t pid, int wstatus);
} ivmd_ctl_gpu_ops_t;

struct ivmd_remote;

typedef struct ivmd_ctl_env {
    ivmd_t                   *d;            /* opaque: for the transport */
    struct ivmd_remote       *remote;       /* the control messages between daemons */
    ivmd_loop_t              *loop;
    ivmd_registry_t          *reg;
    const char               *node;         /* this node's name */
    const char               *socket_path;  /* where PEs connect (IVM_SOCKET) */
    const int                *devnull;      /* the daemon's /dev/null */
    const cpu_set_t          *own_affinity; /* the daemon's cores */
    const ivmd_ctl_gpu_ops_t *gpu;
    void                     *gpu_ctx;
    /* The service's up-calls (ivmd/handlers.c wires them), so that the
     * modules that start and reap processes stand below those that end
     * jobs: a job one of whose processes ended may now be collected
     * (ctl/teardown); a reaped child that was no PE may be a parked
     * process of the warm pool (ctl/pool; 1 if it was). */
    void (*job_collect)(ivmd_t *d, ivmd_job_t *job);
    int (*other_reaped)(ivmd_t *d, pid_t pid, int wstatus);
} ivmd_ctl_env_t;

/* GPU coherence's answers. */
static inline uint32_t ivmd_ctl_gpu_count(const ivmd_ctl_env_t *env)
{
    return env->gpu->count(env->gpu_ctx);
}
static inline int ivmd_ctl_gpu_alive(const ivmd_ctl_env_t *env)
{
    return env->gpu->alive(env->gpu_ctx);
}
static inline const char *ivmd_ctl_gpu_backend(const ivmd_ctl_env_t *env)
{
    return env->gpu->backend_name(env->gpu_ctx);
}

#endif /* IVMD_CTL_CTL_H */
