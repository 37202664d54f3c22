/*
 * Quotas (control plane): the limits on jobs' objects, bytes, PEs and
 * connections, and the memory an object takes (its limits checked, its
 * pages placed and reserved when it is made). Every refusal names its
 * setting.
 */
#ifndef IVMD_CTL_QUOTA_H
#define IVMD_CTL_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "ctl/job.h"
#include "transport/conn.h"
#include "transport/netlimits.h"

typedef struct ivmd_quota_cfg {
    const char *node;                /* this node's name, in refusals */
    long        max_objects_per_job; /* --max-objects-per-job */
    long        max_objects;         /* --max-objects */
    long        max_bytes_per_job;   /* --max-bytes-per-job */
    long        max_bytes;           /* --max-bytes */
    long        max_pes_per_job;     /* --max-pes-per-job */
    long        max_pes;             /* --max-pes */
    long        max_conns;           /* --max-conns */
    int         reserve_memory;      /* --reserve-memory */
} ivmd_quota_cfg_t;

/* What the data plane does to a new copy's memory: place sets where its pages
 * go (NUMA node numa, -1: any) before they exist; reserve, with
 * --reserve-memory, makes every page of [0, size) exist (0, or an errno value
 * as posix_fallocate returns; NULL: posix_fallocate itself), in 2 MiB pages
 * where it can. Either may be NULL. */
typedef struct ivmd_quota_mem_ops {
    void (*place)(int fd, uint64_t size, int numa);
    int (*reserve)(void *arg, int fd, uint64_t size);
    void *arg; /* reserve's */
} ivmd_quota_mem_ops_t;

typedef struct ivmd_quota {
    ivmd_quota_cfg_t         cfg;
    const ivmd_registry_t   *reg;
    const ivmd_conn_table_t *conns;
    const ivmd_netlimits_t  *net;
    ivmd_quota_mem_ops_t     mem;
    uint64_t                 room;      /* memory room read at room_ns ... */
    uint64_t                 room_ns;   /* ... (0: never) ... */
    uint64_t                 room_used; /* ... when the node's objects held this many bytes */
    const char              *room_what; /* what bound it */
} ivmd_quota_t;

void ivmd_quota_init(ivmd_quota_t *q, const ivmd_quota_cfg_t *cfg, const ivmd_registry_t *reg,
                     const ivmd_conn_table_t *conns, const ivmd_netlimits_t *net,
                     const ivmd_quota_mem_ops_t *mem);
/* One more client connection (--max-conns): IVM_SUCCESS or IVM_ERROR_LIMIT. */
ivmError_t ivmd_quota_conn_admit(const ivmd_quota_t *q, char *detail, size_t detail_len);
/* n more PEs for job: IVM_SUCCESS or IVM_ERROR_LIMIT (detail). */
ivmError_t ivmd_quota_pes_admit(const ivmd_quota_t *q, const ivmd_job_t *job, int n,
                                char *detail, size_t detail_len);
/* Memory for an object of size bytes for job: the limits on objects and
 * bytes checked, a memfd made, its pages on NUMA node numa (-1: any) and its
 * memory reserved (fallocate, or 2 MiB pages). counted: the object is already in the job's
 * and node's counts (a mirror). Returns IVM_SUCCESS and the fd, or an error
 * with a message in detail. */
ivmError_t ivmd_quota_obj_mem(ivmd_quota_t *q, const ivmd_job_t *job, const char *name,
                              uint64_t size, int counted, int numa, int *fd_p, char *detail,
                              size_t detail_len);

#endif /* IVMD_CTL_QUOTA_H */
