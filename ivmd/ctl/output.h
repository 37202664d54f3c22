/*
 * ctl/output: forwarding of PEs' stdout and stderr to the root PE's streams,
 * each line prefixed "[NODE,N] " when the job asks (ivmrun --tag-output); a
 * PE of a job rooted elsewhere sends its lines to the root daemon (OUTPUT,
 * ctl/remote.h). State: the forwarders, live and closed (freed before the
 * loop sleeps), in ivmd_output_t hung off the daemon's context.
 */
#ifndef IVMD_CTL_OUTPUT_H
#define IVMD_CTL_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "ctl/job.h"
#include "status.h"
#include "transport/loop.h"

/* Forwarding of one PE stream. */
typedef struct ivmd_fwd {
    ivmd_handler_t      h;
    struct ivmd_fwd    *next;
    struct ivmd_output *out;     /* the module's state */
    int                 target;  /* dup of the job's stdout or stderr; -1: remote */
    int                 pe_id;
    uint32_t            job_id;  /* remote: the job, to send OUTPUT to its root */
    int                 stream;  /* 1 stdout, 2 stderr */
    size_t              len;
    char                line[4096];
} ivmd_fwd_t;

typedef struct ivmd_output {
    struct ivmd_remote *remote; /* ctl/remote: OUTPUT to a job's root daemon */
    ivmd_loop_t     *loop;
    ivmd_registry_t *reg;
    const char      *node;  /* this node's name, in prefixes */
    ivmd_fwd_t      *fwds;  /* live forwarders */
    ivmd_fwd_t      *dead;  /* closed, freed by ivmd_output_reap */
} ivmd_output_t;

void ivmd_output_init(ivmd_output_t *o, struct ivmd_remote *remote, ivmd_loop_t *loop,
                      ivmd_registry_t *reg, const char *node);
/* Pipes for pe_id's stdout and stderr, read by the loop: the write ends in
 * *out_p / *err_p (the caller closes them once the PE has them). */
ivmError_t ivmd_output_open(ivmd_output_t *o, ivmd_job_t *job, int pe_id, int *out_p,
                            int *err_p);
/* Write a PE's output bytes to the job's stream fd, tagged if the job asks. */
void ivmd_output_write_job(ivmd_output_t *o, ivmd_job_t *job, int pe_id, int fd,
                           const char *bytes, size_t len);
/* Free the closed forwarders (before the loop sleeps). */
void ivmd_output_reap(ivmd_output_t *o);
/* Teardown: flush and close every forwarder. */
void ivmd_output_close_all(ivmd_output_t *o);
/* The forwarders of job's pe `from` (a pool slot) now speak for pe `to`. */
void ivmd_output_retag(ivmd_output_t *o, uint32_t job_id, int from, int to);

#endif /* IVMD_CTL_OUTPUT_H */
