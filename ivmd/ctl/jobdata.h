/*
 * ctl/jobdata: what the daemon keeps per job beside the registry
 * (ivmd_job_t.data): the job's executable, arguments, environment and
 * streams, how its PEs are bound, its warm pool.
 */
#ifndef IVMD_CTL_JOBDATA_H
#define IVMD_CTL_JOBDATA_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ctl/job.h"
#include "status.h"
#include "transport/conn.h"

struct ivmd_peer;
struct ivmd_board;

/* A process of the job's warm pool (ctl/pool.c parks, hands out and kills
 * them; the list is the job's data). */
typedef struct ivmd_parked {
    struct ivmd_parked *next;
    ivmd_pe_t           slot;  /* what the spawner sees: id = pool slot (< -1), devtype,
                                  pid, token */
    ivmd_conn_t        *conn;  /* its connection once its ENTER arrived */
    uint32_t            seq;   /* that ENTER's sequence number */
    int                 dead;  /* killed or disconnected: awaits reaping, never handed out */
    int                 forkable; /* its ENTER said IVM_ENTER_FORKABLE */
    int                 bind_now; /* started with LD_BIND_NOW=1 (ivmd_pool_bind_now) */
    ivmd_pe_t          *forking;  /* told to fork this PE; its next pool ENTER reports it */
    struct stat         exe;   /* the job's executable when this process was started */
} ivmd_parked_t;


typedef struct ivmd_job_data {
    char    *exe;
    char    *cwd;
    char   **argv;      /* NULL-terminated */
    char   **envp;      /* NULL-terminated, without IVM identity variables */
    char    *blob;      /* the strings argv and envp point into */
    char    *spawn_blob;/* exe, cwd, argv, envp as sent to other nodes */
    uint32_t blob_len, argc, envc;
    int      proxy;     /* the root daemon is elsewhere */
    struct ivmd_peer *root_peer; /* proxy: the root daemon's node */
    int      out_fd;    /* root PE's stdout, -1 once the job ended */
    int      err_fd;    /* root PE's stderr */
    int      tag_output;
    unsigned bind;      /* IVM_BIND_*: how its CPU PEs are bound (ivmrun --bind-to) */
    uint32_t nconns;    /* connections bound to the job */
    pid_t    root_pid;
    uint32_t pe_pool;   /* parked processes wanted per CPU device and GPU (ctl/pool.c) */
    struct ivmd_parked *parked; /* the job's warm-pool processes */
    uint32_t pool_slots;        /* pool slots used (negative IVM_PE_IDs) */
    int      pool_exe_fd;       /* O_PATH fd of exe, if pool_exe_open (ctl/pool.c) */
    int      pool_exe_open;
    int      pool_early_deaths; /* parked processes in a row that died before ENTER */
    int      pool_bind_now;     /* parked processes start with LD_BIND_NOW=1: 1 yes,
                                   -1 no, 0 not decided yet (ctl/pool.c) */
    struct ivmd_pe **pool_queue; /* PEs of a burst waiting for a forkable parked
                                    process of their device (ctl/pool.c) */
    uint32_t pool_queued, pool_queue_cap;
    int      own_devs;  /* the root brought its CPU device table (IVM_CPU_DEVICES) */
    struct ivmd_board *board;   /* the job's signal board here, once asked for (ctl/board.c) */
    uint8_t *told;      /* root: by node index, 1 once that node holds the job's table
                           of places (a SPAWN there started a PE; ctl/remote.c) */
    uint32_t ntold;
} ivmd_job_data_t;

/* Split a spawn blob (exe, cwd, argc args, envc env strings) into jd, keeping
 * a copy to send to other nodes; IVM's identity variables are dropped from
 * the environment. IVM_ERROR_PROTOCOL for a malformed blob. */
ivmError_t ivmd_job_data_unpack(ivmd_job_data_t *jd, const char *blob, uint32_t len,
                                uint32_t argc, uint32_t envc);
/* Close its streams, free it and its warm pool's bookkeeping. */
void ivmd_job_data_free(ivmd_job_data_t *jd);
/* The pids of job's live parked (or starting) processes on device dev, at
 * most max; returns how many. */
int ivmd_job_data_parked_pids(const ivmd_job_t *job, int dev, pid_t *pids, int max);

#endif /* IVMD_CTL_JOBDATA_H */
