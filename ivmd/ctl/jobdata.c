/* ctl/jobdata: a job's executable, arguments, environment and streams. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/jobdata.h"
#include "ctl/board.h"

/* The warm pool's part: its executable's fd, its queue, its parked list. */
static void ivmd_job_data_pool_free(ivmd_job_data_t *jd)
{
    ivmd_parked_t *p;

    if (jd->pool_exe_open) {
        close(jd->pool_exe_fd);
        jd->pool_exe_open = 0;
    }
    free(jd->pool_queue);
    jd->pool_queue  = NULL;
    jd->pool_queued = jd->pool_queue_cap = 0;
    while ((p = jd->parked) != NULL) {
        jd->parked = p->next;
        if (p->conn != NULL) {
            p->conn->parked = NULL;
        }
        free(p);
    }
}

void ivmd_job_data_free(ivmd_job_data_t *jd)
{
    if (jd == NULL) {
        return;
    }
    if (jd->out_fd >= 0) {
        close(jd->out_fd);
    }
    if (jd->err_fd >= 0) {
        close(jd->err_fd);
    }
    free(jd->exe);
    free(jd->cwd);
    free(jd->argv);
    free(jd->envp);
    free(jd->blob);
    free(jd->spawn_blob);
    ivmd_job_data_pool_free(jd);
    ivmd_board_destroy(jd->board);
    free(jd->told);
    free(jd);
}

/* Whether env is one of IVM's identity variables (a PE gets its own). */
static int ivmd_job_data_own_var(const char *env)
{
    static const char *const own[] = {"IVM_JOB_ID=", "IVM_PE_ID=", "IVM_PE_TOKEN=",
                                      "IVM_SOCKET=", "IVM_NODE=", "OMP_NUM_THREADS=",
                                      "IVM_DEVICE_CORES=", "IVM_GPU=", "IVM_GPU_BACKEND=",
                                      "IVM_GPU_SHARE=", NULL};
    int k;

    for (k = 0; own[k] != NULL; ++k) {
        if (strncmp(env, own[k], strlen(own[k])) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The nstr NUL-terminated strings of blob into strs: IVM_ERROR_PROTOCOL if
 * it holds fewer. */
static ivmError_t ivmd_job_data_split(const char *blob, uint32_t len, const char **strs,
                                      uint32_t nstr)
{
    const char *p = blob, *end = blob + len;
    uint32_t i;

    for (i = 0; i < nstr; ++i) {
        const char *nul = (p < end) ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        if (nul == NULL) {
            return IVM_ERROR_PROTOCOL;
        }
        strs[i] = p;
        p       = nul + 1;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_job_data_unpack(ivmd_job_data_t *jd, const char *blob, uint32_t len,
                                uint32_t argc, uint32_t envc)
{
    uint32_t i, n = 0, nstr = 2 + argc + envc;
    ivmError_t status;
    const char **strs;
    char *copy;

    if (argc < 1 || argc > 65536 || envc > 65536) {
        return IVM_ERROR_PROTOCOL;
    }
    strs = calloc(nstr, sizeof(*strs));
    if (strs == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    status = ivmd_job_data_split(blob, len, strs, nstr);
    if (status != IVM_SUCCESS) {
        goto out_free_strs;
    }
    status         = IVM_ERROR_NO_MEMORY;
    copy           = malloc(len);
    jd->spawn_blob = malloc(len);
    jd->argv       = calloc(argc + 1, sizeof(char *));
    jd->envp       = calloc(envc + 1, sizeof(char *));
    jd->blob       = copy;
    if (copy == NULL || jd->spawn_blob == NULL || jd->argv == NULL || jd->envp == NULL) {
        goto out_free_strs; /* what was allocated goes with jd */
    }
    memcpy(copy, blob, len);
    memcpy(jd->spawn_blob, blob, len);
    jd->blob_len = len;
    jd->argc     = argc;
    jd->envc     = envc;
    jd->exe      = strdup(strs[0]);
    jd->cwd      = strdup(strs[1]);
    for (i = 0; i < argc; ++i) {
        jd->argv[i] = copy + (strs[2 + i] - blob);
    }
    for (i = 0; i < envc; ++i) {
        const char *e = strs[2 + argc + i];
        if (!ivmd_job_data_own_var(e)) {
            jd->envp[n++] = copy + (e - blob);
        }
    }
    status = (jd->exe != NULL && jd->cwd != NULL) ? IVM_SUCCESS : IVM_ERROR_NO_MEMORY;

out_free_strs:
    free(strs);
    return status;
}

int ivmd_job_data_parked_pids(const ivmd_job_t *job, int dev, pid_t *pids, int max)
{
    const ivmd_job_data_t *jd = job->data;
    const ivmd_parked_t *p;
    int n = 0;

    for (p = (jd != NULL) ? jd->parked : NULL; p != NULL && n < max; p = p->next) {
        if (!p->dead && p->slot.devtype == dev) {
            pids[n++] = p->slot.pid;
        }
    }
    return n;
}
