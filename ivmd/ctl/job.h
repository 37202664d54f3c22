/*
 * The job registry: jobs, their PEs, objects, signal counters and max PE id.
 * Pure bookkeeping: no I/O. What the registry decides that needs I/O (answer
 * a deferred WAIT, release an object's memory) goes through ivmd_job_ops_t.
 */
#ifndef IVMD_CTL_JOB_H
#define IVMD_CTL_JOB_H

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
struct ivmd_pair;
struct ivmd_place;
struct ivmd_barrier;

/* A WAIT (or WAIT_FROM) that could not be answered at once. */
typedef struct ivmd_waiter {
    struct ivmd_waiter *next;
    void               *owner; /* the waiting connection */
    uint32_t            seq;   /* its request's sequence number */
    uint16_t            type;  /* its request's type (IVM_MSG_WAIT, ...) */
} ivmd_waiter_t;

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

void ivmd_registry_init(ivmd_registry_t *reg, const ivmd_job_ops_t *ops, void *ctx);

/* Destroy every job (objects released, PEs forgotten). */
void ivmd_registry_cleanup(ivmd_registry_t *reg);

/* New job with its root PE (id 0, RUNNING, devtype CPU 0). devs is copied. */
ivmError_t ivmd_job_create(ivmd_registry_t *reg, const ivm_cpu_device_t *devs,
                           int ndevs, ivmd_job_t **job_p);

/* A job whose root daemon is elsewhere, holding this node's PEs of it: no
 * root PE here; PEs are added with their ids (ivmd_pe_add_at). */
ivmError_t ivmd_job_create_proxy(ivmd_registry_t *reg, uint32_t id,
                                 const ivm_cpu_device_t *devs, int ndevs,
                                 ivmd_job_t **job_p);
ivmd_pe_t *ivmd_pe_add_at(ivmd_job_t *job, int id, int devtype);

/* Mirror regions: the gaps of [off, off+len) not held (at most max of them;
 * returns the count), and recording a held range. */
int ivmd_obj_gaps(const ivmd_obj_t *obj, uint64_t off, uint64_t len, ivmd_range_t *gaps,
                  int max);
ivmError_t ivmd_obj_hold(ivmd_obj_t *obj, uint64_t off, uint64_t len);
/* Master: remember that node holds [off, off+len) in its object mirror_id. */
ivmError_t ivmd_obj_add_holder(ivmd_obj_t *obj, int node, uint64_t mirror_id, uint64_t off,
                               uint64_t len);

ivmd_job_t *ivmd_job_find(ivmd_registry_t *reg, uint32_t id);

/* Root gone: mark the job ending, release its objects. PEs still alive are
 * for the caller to kill. */
void ivmd_job_end(ivmd_registry_t *reg, ivmd_job_t *job);

/* Forget the job entirely (after its processes are gone). */
void ivmd_job_destroy(ivmd_registry_t *reg, ivmd_job_t *job);

/* Number of PEs in the job (ever created). */
static inline int ivmd_job_npes(const ivmd_job_t *job) { return job->next_pe_id; }

ivmd_pe_t *ivmd_pe_find(ivmd_job_t *job, int id);

/* Resolve a device type for a PE (IVM_THIS_DEV -> the PE's own) and check the
 * job has it. IVM_ERROR_NOT_FOUND if not. */
ivmError_t ivmd_job_resolve_dev(const ivmd_job_t *job, const ivmd_pe_t *caller,
                                int devtype, int *resolved_p);

/* Take the next PE id for a new PE on devtype. *pe_p is NULL (and the call
 * succeeds) when the id would exceed the job's max PE id. */
ivmError_t ivmd_pe_reserve(ivmd_registry_t *reg, ivmd_job_t *job, int devtype,
                           ivmd_pe_t **pe_p);

/* Undo the last ivmd_pe_reserve (its process could not be started). */
void ivmd_pe_unreserve(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_pe_t *pe);

/* ivmEnter seen. */
void ivmd_pe_enter(ivmd_pe_t *pe, void *conn);

/* Post one signal: wakes the oldest waiter or is counted. */
void ivmd_pe_signal(ivmd_registry_t *reg, ivmd_pe_t *pe);

/* WAIT on PE id: IVM_SUCCESS / IVM_ERROR_PE_FAILED / IVM_ERROR_NOT_FOUND at
 * once (*queued_p = 0), or queued (*queued_p = 1, answered through
 * ops->wait_done). */
ivmError_t ivmd_pe_wait(ivmd_registry_t *reg, ivmd_job_t *job, int pe_id, void *owner,
                        uint32_t seq, int *queued_p);

/* Forget every queued WAIT of owner (its connection closed). */
void ivmd_waiter_cancel(ivmd_registry_t *reg, void *owner);

/* PE ended: EXITED (failed = 0) or FAILED. Waiters are answered, mappings
 * dropped. No effect on a PE that already ended. */
void ivmd_pe_end(ivmd_registry_t *reg, ivmd_pe_t *pe, int failed);

/* Largest PE id the job may create (>= 0). */
ivmError_t ivmd_job_set_max_id(ivmd_job_t *job, int max_id);

/* Objects. fd becomes the registry's (released through ops->obj_release). */
ivmError_t ivmd_obj_create(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_pe_t *pe,
                           const char *name, uint64_t size, int fd,
                           ivmd_obj_t **obj_p);
ivmd_obj_t *ivmd_obj_find_name(ivmd_job_t *job, const char *name);
ivmd_obj_t *ivmd_obj_find_id(ivmd_job_t *job, uint64_t id);

/* Remove an object's name; its memory goes with its last mapping. */
void ivmd_obj_free_name(ivmd_registry_t *reg, ivmd_job_t *job, ivmd_obj_t *obj);

/* Count one more mapping of obj by pe. */
ivmError_t ivmd_obj_map(ivmd_registry_t *reg, ivmd_pe_t *pe, ivmd_obj_t *obj);

/* Drop one mapping of object id by pe: IVM_ERROR_INVALID_VALUE if it has none. */
ivmError_t ivmd_obj_unmap(ivmd_registry_t *reg, ivmd_pe_t *pe, uint64_t obj_id);

/* Remove the name (allocating PE only: IVM_ERROR_PERMISSION) and drop one
 * mapping of pe; memory goes when the last mapping does. */
ivmError_t ivmd_obj_free(ivmd_registry_t *reg, ivmd_pe_t *pe, uint64_t obj_id);

#endif /* IVMD_CTL_JOB_H */
