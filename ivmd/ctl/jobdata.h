/*
 * ctl/jobdata: what the daemon keeps per job beside the registry (the
 * registry's ivmd_job_t.data): the root PE's program, streams and the job's
 * settings; the warm pool's and the remote module's parts.
 */
#ifndef IVMD_CTL_JOBDATA_H
#define IVMD_CTL_JOBDATA_H

#include <stdint.h>
#include <sys/types.h>

struct ivmd_peer;
struct ivmd_parked;

/* What the daemon keeps per job beside the registry (ivmd_job_t.data). */
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
    uint32_t pe_pool;   /* parked processes wanted per CPU device and GPU (pool.c) */
    struct ivmd_parked *parked; /* the job's warm-pool processes */
    uint32_t pool_slots;        /* pool slots used (negative IVM_PE_IDs) */
    int      pool_exe_fd;       /* O_PATH fd of exe, if pool_exe_open (pool.c) */
    int      pool_exe_open;
    int      pool_early_deaths; /* parked processes in a row that died before ENTER */
    int      own_devs;  /* the root brought its CPU device table (IVM_CPU_DEVICES) */
} ivmd_job_data_t;

#endif /* IVMD_CTL_JOBDATA_H */
