/*
 * The job registry: jobs, their PEs, objects, signal counters and max PE id
 * (the types in ctl/jobtypes.h). Pure bookkeeping: no I/O. What the registry decides that needs I/O (answer
 * a deferred WAIT, release an object's memory) goes through ivmd_job_ops_t.
 */
#ifndef IVMD_CTL_JOB_H
#define IVMD_CTL_JOB_H

#include "ctl/jobtypes.h"

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
