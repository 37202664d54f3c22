/*
 * The job registry's types: jobs, their PEs and objects, the psync tables,
 * the registry and its callbacks. Apart from ctl/job.h (the registry's
 * functions) so that ctl/psync, which ctl/job calls, stands on the types
 * alone.
 */
#ifndef IVMD_CTL_JOBTYPES_H
#define IVMD_CTL_JOBTYPES_H

#include <stdint.h>
#include <sys/types.h>
#include <uthash.h>

#include "devspec.h"
#include "ivm.h"

#define IVMD_ROOT_PE 0 /* the root PE's id: the job lives as long as it does */

typedef enum ivmd_pe_state {
    IVMD_PE_SPAWNED, /* process started, ivmEnter not yet seen */
    IVMD_PE_RUNNING, /* entered */
    IVMD_PE_EXITED,  /* called ivmExit */
    IVMD_PE_FAILED   /* died or was killed without ivmExit */
} ivmd_pe_state_t;

typedef struct ivmd_obj ivmd_obj_t;
typedef struct ivmd_job ivmd_job_t;

/* A WAIT (or WAIT_FROM) that could not be answered at once. */
typedef struct ivmd_waiter {
    struct ivmd_waiter *next;
    void               *owner; /* the waiting connection */
    uint32_t            seq;   /* its request's sequence number */
    uint16_t            type;  /* its request's type (IVM_MSG_WAIT, ...) */
} ivmd_waiter_t;

/* The psync tables of a job (ctl/psync.c keeps them): addressed signals by
 * (sender, receiver), other nodes' PEs, barriers waiting for members. */
/* An addressed-signal pair: its count and the receiver's WAIT_FROMs. */
typedef struct ivmd_pair {
    UT_hash_handle hh;
    int            hash_oom;
    uint64_t       key;     /* sender id << 32 | receiver id */
    uint64_t       count;   /* posted, not yet consumed */
    ivmd_waiter_t *waiters; /* FIFO of the receiver's WAIT_FROMs */
} ivmd_pair_t;

/* A PE of another node, as this daemon learnt it (PLACED, SIGNAL, PE_ENDED). */
typedef struct ivmd_place {
    UT_hash_handle hh;
    int            hash_oom;
    int            id;    /* key: PE id */
    int            node;  /* its node's cluster index */
    int            state; /* IVMD_PLACE_* */
} ivmd_place_t;

/* A member waiting in a barrier. */
typedef struct ivmd_arrival {
    int      pe;
    void    *owner;
    uint32_t seq;
    uint16_t type;
} ivmd_arrival_t;

typedef struct ivmd_barrier {
    struct ivmd_barrier *next;
    int                  all;     /* the whole job: members are the PEs alive */
    int                  n;       /* list barrier: members, sorted, distinct */
    int32_t             *members;
    ivmd_arrival_t      *arr;     /* arrivals so far */
    int                  narr, cap;
} ivmd_barrier_t;

/* One PE's mappings of one object: an entry of the PE's table by object id,
 * so that a map or unmap costs the same with 10 or 100,000 objects mapped. */
typedef struct ivmd_pe_map {
    UT_hash_handle hh;
    uint64_t       obj_id;   /* key: obj->id */
    ivmd_obj_t    *obj;
    uint32_t       count;
    int            hash_oom; /* the table could not grow for it (job.c) */
} ivmd_pe_map_t;

typedef struct ivmd_pe {
    int              id;
    ivmd_pe_state_t  state;
    int              devtype;   /* IVM_CPU_N / IVM_GPU_N */
    int              node;      /* cluster index of its node, -1: this one */
    pid_t            pid;       /* 0 for the root PE (not our child) */
    int              reaped;    /* our child and waitpid'ed (or never ours) */
    int              forked;    /* forked by a parked process (pool.c), not our child:
                                   its pid comes with its parent's report */
    int              kill_due;  /* forked, killed before its pid was known: killed
                                   when its parent reports it */
    void            *watch;     /* forked: the pidfd that tells its end (spawn.c) */
    uint64_t         token;     /* secret of its ivmEnter */
    uint64_t         signals;   /* posted, not yet consumed */
    void            *conn;      /* its connection while entered */
    ivmd_waiter_t   *waiters;   /* FIFO of WAITs on this PE */
    struct ivmd_pe  *wnext;     /* registry's list of PEs with waiters */
    struct ivmd_pe **wlink;     /* the pointer to this PE in it; NULL: not listed */
    ivmd_pe_map_t   *maps;      /* its mappings by object id (uthash) */
    uint32_t         nmaps;     /* objects it maps (entries of maps) */
    ivmd_job_t      *job;
} ivmd_pe_t;

/* A byte range of an object; with the node and object id of a mirror. */
typedef struct ivmd_range {
    uint64_t off, len;
    int      node;         /* holders: the mirror's node */
    uint64_t obj;          /* holders: the mirror's object id there */
} ivmd_range_t;

struct ivmd_obj {
    ivmd_obj_t   *next;      /* the job's objects, newest first */
    ivmd_obj_t  **pprev;     /* the pointer to this object in that list */
    UT_hash_handle hh_id;    /* the job's objects by id */
    UT_hash_handle hh_name;  /* the job's named objects by name (while named) */
    int           hash_oom;  /* a hash table could not grow for it (job.c) */
    uint64_t      id;        /* unique per daemon */
    char         *name;      /* NULL once freed */
    uint64_t      size;      /* bytes */
    int           fd;        /* memory (memfd), -1 if none yet; owned by the user */
    int           owner_pe;  /* allocating PE */
    uint32_t      nmaps;     /* live mappings, all PEs */
    int           master_node; /* -1: the master is here; else its node's index */
    uint64_t      master_id; /* object id at the master's daemon */
    ivmd_range_t *regions;   /* mirror: ranges held here, sorted, disjoint */
    uint32_t      nregions, regions_cap;
    ivmd_range_t *holders;   /* master: mirrors elsewhere */
    uint32_t      nholders, holders_cap;
    uint32_t      fills;     /* mirror: fills from the master in flight */
    uint32_t      gpu_acquires; /* device copies asked for it here (gpu.c); 0: none exists */
    uint64_t      tx_bytes;  /* bytes of it sent to other nodes */
    uint64_t      rx_bytes;  /* bytes of it received from other nodes */
};

struct ivmd_job {
    ivmd_job_t       *next;
    UT_hash_handle    hh;          /* the registry's jobs by id */
    int               hash_oom;    /* a hash table could not grow for it (job.c) */
    uint32_t          id;          /* job id = group id */
    int               ending;      /* root gone: no new PEs, objects released */
    int               max_pe_id;   /* ivmSetMaxPesId */
    int               next_pe_id;
    ivmd_pe_t       **pes;         /* indexed by PE id, [0, next_pe_id) */
    int               pes_cap;
    int               alive;       /* PEs SPAWNED or RUNNING */
    ivmd_obj_t       *objs;        /* newest first */
    ivmd_obj_t       *objs_by_id;  /* the same, by id (uthash, hh_id) */
    ivmd_obj_t       *objs_by_name; /* the named ones, by name (uthash, hh_name) */
    uint32_t          nobjs;
    uint64_t          obj_bytes;   /* bytes of its objects here (masters, mirrors) */
    ivm_cpu_device_t *devs;        /* CPU device table */
    int               ndevs;
    void             *data;        /* the daemon's per-job data (spawn info) */
    struct ivmd_pair *pairs;       /* addressed signals by (sender, receiver) (psync.c) */
    struct ivmd_place *places;     /* other nodes' PEs, where and whether alive (psync.c) */
    struct ivmd_barrier *barriers; /* barriers waiting for members (psync.c) */
    uint32_t          psync_waiting; /* WAIT_FROMs and barrier arrivals queued */
};

/* PE id of job, NULL if it has none. */
static inline ivmd_pe_t *ivmd_pe_find(ivmd_job_t *job, int id)
{
    return id < 0 || id >= job->next_pe_id ? NULL : job->pes[id];
}

typedef struct ivmd_job_ops {
    /* A deferred request (WAIT, WAIT_FROM, BARRIER: type) completes with
     * status; why, if not NULL, says why it failed. */
    void (*wait_done)(void *ctx, void *owner, uint32_t seq, uint16_t type, ivmError_t status,
                      const char *why);
    /* An object's memory is no longer needed (freed and unmapped, or job gone). */
    void (*obj_release)(void *ctx, ivmd_obj_t *obj);
    /* A PE ended (called once, when its state becomes EXITED or FAILED). */
    void (*pe_ended)(void *ctx, ivmd_pe_t *pe, int failed);
} ivmd_job_ops_t;

typedef struct ivmd_registry {
    ivmd_job_t           *jobs;
    ivmd_job_t           *jobs_by_id;  /* the same, by id (uthash, hh) */
    ivmd_pe_t            *waited;      /* PEs with waiters (ivmd_waiter_cancel) */
    uint32_t              njobs;
    uint32_t              next_job_id;
    uint64_t              next_obj_id;
    uint64_t              obj_bytes;   /* bytes of live objects */
    uint32_t              nobjs;
    const ivmd_job_ops_t *ops;
    void                 *ctx;
} ivmd_registry_t;

#endif /* IVMD_CTL_JOBTYPES_H */
