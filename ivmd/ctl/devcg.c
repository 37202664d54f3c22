/* CPU share devices in cgroups: see devcg.h for the layout and semantics. */
#include "ctl/devcg.h"
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/jobdata.h"
#include "log.h"

#define IVMD_DEVCG_PREFIX  "ivmd" /* owner directories: ivm/ivmd-<pid>-<starttime> */
#define IVMD_DEVCG_DEV_MAX 96  /* "<own>/dev<K>" */
#define IVMD_DEVCG_REL_MAX 192 /* "<own>/dev<K>/job<J>", "<own>/job<J>-dev<K>" */

/* The group of one job on one device. */
typedef struct ivmd_devcg_group {
    struct ivmd_devcg_group *next;
    uint32_t job;      /* its job */
    int      dev;      /* the CPU device, an index into the job's table */
    int      shared;   /* a device of the daemon's table: job<J> under dev<K> */
    int      ended;    /* the job was collected; the removal is (re)tried */
    int      warned;   /* a failed removal was logged */
    char     rel[IVMD_DEVCG_REL_MAX]; /* relative to the parent */
} ivmd_devcg_group_t;


/* A device's limit: its share of each of its cores (0: none). */
static uint32_t ivmd_devcg_limit(const ivm_cpu_device_t *dev)
{
    return dev->percent < 100 ? (uint32_t)dev->percent * (uint32_t)dev->ncores : 0;
}

/* Whether job uses the daemon's table (no IVM_CPU_DEVICES of its own). */
static int ivmd_devcg_shared(const ivmd_job_t *job)
{
    const ivmd_job_data_t *jd = job->data;

    return jd == NULL || !jd->own_devs;
}

ivmError_t ivmd_devcg_open(ivmd_devcg_t *cg, ivmd_reply_t *rep)
{
    char why[320];
    int removed = 0;
    ivmError_t status;

    if (ivm_cgroup_root_find(&cg->root, why, sizeof(why)) == IVM_SUCCESS) {
        cg->found = 1;
        status = ivm_cgroup_sweep(&cg->root, IVMD_DEVCG_PREFIX, &removed, why, sizeof(why));
        if (status != IVM_SUCCESS) {
            IVM_LOG(status == IVM_ERROR_PERMISSION ? IVM_LOG_INFO : IVM_LOG_WARN,
                    "cannot remove the cgroups of a daemon that is gone: %s", why);
        }
        if (removed > 0) {
            ivm_info("removed the cgroups of %d daemon%s that %s gone", removed,
                     removed == 1 ? "" : "s", removed == 1 ? "is" : "are");
        }
    }
    if (!ivm_devspec_has_shares(cg->devs, cg->ndevs)) {
        return IVM_SUCCESS;
    }
    return ivmd_devcg_require(cg, rep);
}

ivmError_t ivmd_devcg_require(ivmd_devcg_t *cg, ivmd_reply_t *rep)
{
    ivmError_t status;
    size_t used;

    if (cg->ready) {
        return IVM_SUCCESS;
    }
    if (!cg->found) {
        status = ivm_cgroup_root_find(&cg->root, rep->detail, sizeof(rep->detail));
        if (status != IVM_SUCCESS) {
            return status;
        }
        cg->found = 1;
    }
    if (ivm_cgroup_owner_dir(IVMD_DEVCG_PREFIX, 0, cg->own, sizeof(cg->own)) != IVM_SUCCESS) {
        return ivmd_reply_set(rep, IVM_ERROR_INTERNAL,
                              "cannot read this daemon's start time (/proc/self/stat)");
    }
    status = ivm_cgroup_create(&cg->root, cg->own, 0, rep->detail, sizeof(rep->detail));
    if (status == IVM_ERROR_PERMISSION && (used = strlen(rep->detail)) < sizeof(rep->detail)) {
        snprintf(rep->detail + used, sizeof(rep->detail) - used,
                 " (CPU shares need root, or a cgroup of the cpu "
                 "controller delegated to this user)");
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    cg->ready = 1;
    ivm_info("CPU shares: cgroups in %s/%s (cgroup v%d)", cg->root.parent, cg->own,
             cg->root.version);
    return IVM_SUCCESS;
}

static ivmd_devcg_group_t *ivmd_devcg_find(ivmd_devcg_t *cg, uint32_t job, int dev)
{
    ivmd_devcg_group_t *g;

    for (g = cg->groups; g != NULL; g = g->next) {
        if (g->job == job && g->dev == dev && !g->ended) {
            return g;
        }
    }
    return NULL;
}

/* The group of job on dev, made now: dev<K>/job<J> (made with dev<K> if it
 * is the device's first) or job<J>-dev<K>. */
static ivmError_t ivmd_devcg_group_make(ivmd_devcg_t *cg, ivmd_job_t *job, int dev,
                                        ivmd_devcg_group_t **g_p, ivmd_reply_t *rep)
{
    char devrel[IVMD_DEVCG_DEV_MAX], scratch[128];
    ivmd_devcg_group_t *g;
    ivmError_t status;

    status = ivmd_devcg_require(cg, rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        ivmd_reply_set(rep, IVM_ERROR_NO_MEMORY, "out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    g->job    = job->id;
    g->dev    = dev;
    g->shared = ivmd_devcg_shared(job) && dev < cg->ndevs;
    snprintf(devrel, sizeof(devrel), "%s/dev%d", cg->own, dev);
    if (!g->shared) {
        snprintf(g->rel, sizeof(g->rel), "%s/job%u-dev%d", cg->own, job->id, dev);
        status = ivm_cgroup_create(&cg->root, g->rel, ivmd_devcg_limit(&job->devs[dev]),
                                   rep->detail, sizeof(rep->detail));
    } else {
        snprintf(g->rel, sizeof(g->rel), "%s/job%u", devrel, job->id);
        status = cg->dev_jobs[dev] > 0 ? IVM_SUCCESS
                 : ivm_cgroup_create(&cg->root, devrel, ivmd_devcg_limit(&cg->devs[dev]),
                                     rep->detail, sizeof(rep->detail));
        if (status == IVM_SUCCESS) {
            status = ivm_cgroup_create(&cg->root, g->rel, 0, rep->detail, sizeof(rep->detail));
            if (status != IVM_SUCCESS && cg->dev_jobs[dev] == 0) {
                ivm_cgroup_destroy(&cg->root, devrel, scratch, sizeof(scratch));
            }
        }
        cg->dev_jobs[dev] += status == IVM_SUCCESS;
    }
    if (status != IVM_SUCCESS) {
        free(g);
        return status;
    }
    g->next    = cg->groups;
    cg->groups = g;
    *g_p       = g;
    ivm_debug("job %u: CPU device %d's processes go to cgroup %s", job->id, dev, g->rel);
    return IVM_SUCCESS;
}

ivmError_t ivmd_devcg_place(ivmd_devcg_t *cg, ivmd_job_t *job, int dev, ivmd_devcg_place_t *pl,
                            ivmd_reply_t *rep)
{
    ivmd_devcg_group_t *g;
    ivmError_t status;

    pl->rel[0] = pl->procs[0] = '\0';
    if (cg == NULL || dev < 0 || dev >= job->ndevs) {
        return IVM_SUCCESS;
    }
    g = ivmd_devcg_find(cg, job->id, dev);
    if (g == NULL) {
        if (job->devs[dev].percent >= 100) {
            return IVM_SUCCESS;
        }
        status = ivmd_devcg_group_make(cg, job, dev, &g, rep);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    snprintf(pl->rel, sizeof(pl->rel), "%s", g->rel);
    if (ivm_cgroup_path(&cg->root, g->rel, "cgroup.procs", pl->procs, sizeof(pl->procs)) !=
        IVM_SUCCESS) {
        snprintf(rep->detail, sizeof(rep->detail), "the path of cgroup %.120s/%.100s is too long",
                 cg->root.parent, g->rel);
        pl->rel[0] = '\0';
        return IVM_ERROR_INVALID_VALUE;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_devcg_attach(ivmd_devcg_t *cg, const ivmd_devcg_place_t *pl, pid_t pid,
                             ivmd_reply_t *rep)
{
    if (pl->rel[0] == '\0') {
        return IVM_SUCCESS;
    }
    return ivm_cgroup_attach(&cg->root, pl->rel, pid, rep->detail, sizeof(rep->detail));
}

/* Remove g's directory (and dev<K> after its last job). */
static ivmError_t ivmd_devcg_group_remove(ivmd_devcg_t *cg, ivmd_devcg_group_t *g)
{
    char why[320], devrel[IVMD_DEVCG_DEV_MAX];
    ivmError_t status = ivm_cgroup_destroy(&cg->root, g->rel, why, sizeof(why));

    if (status != IVM_SUCCESS) {
        if (!g->warned) {
            ivm_warn("job %u: %s (retried when a process is reaped, and at exit)", g->job, why);
            g->warned = 1;
        }
        return status;
    }
    if (g->shared && --cg->dev_jobs[g->dev] == 0) {
        snprintf(devrel, sizeof(devrel), "%s/dev%d", cg->own, g->dev);
        if (ivm_cgroup_destroy(&cg->root, devrel, why, sizeof(why)) != IVM_SUCCESS) {
            ivm_warn("%s (it goes at exit)", why);
        }
    }
    return IVM_SUCCESS;
}

void ivmd_devcg_retry(ivmd_devcg_t *cg)
{
    ivmd_devcg_group_t **link, *g;

    if (cg == NULL || cg->ended == 0) {
        return;
    }
    for (link = &cg->groups; (g = *link) != NULL;) {
        if (!g->ended || ivmd_devcg_group_remove(cg, g) != IVM_SUCCESS) {
            link = &g->next;
            continue;
        }
        *link = g->next;
        --cg->ended;
        free(g);
    }
}

void ivmd_devcg_job_end(ivmd_devcg_t *cg, ivmd_job_t *job)
{
    ivmd_devcg_group_t *g;

    if (cg == NULL) {
        return;
    }
    for (g = cg->groups; g != NULL; g = g->next) {
        if (g->job == job->id && !g->ended) {
            g->ended = 1;
            ++cg->ended;
        }
    }
    ivmd_devcg_retry(cg);
}

void ivmd_devcg_close(ivmd_devcg_t *cg)
{
    ivmd_devcg_group_t *g;
    char why[320];

    while ((g = cg->groups) != NULL) {
        cg->groups = g->next;
        free(g);
    }
    if (cg->ready) {
        if (ivm_cgroup_destroy(&cg->root, cg->own, why, sizeof(why)) != IVM_SUCCESS) {
            ivm_warn("%s", why);
        }
        ivm_cgroup_top_remove(&cg->root);
    }
    cg->ready = cg->found = 0;
    cg->ended = 0;
}

/* Whether pe is a live process of this node the daemon started. */
static int ivmd_devcg_pe_live(const ivmd_pe_t *pe)
{
    return pe != NULL && pe->node < 0 && pe->pid > 0 && !pe->reaped &&
           (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING);
}

/* Whether job has a live PE on CPU device dev. */
static int ivmd_devcg_job_on(const ivmd_job_t *job, int dev)
{
    int i;

    for (i = 1; i < job->next_pe_id; ++i) {
        if (ivmd_devcg_pe_live(job->pes[i]) && job->pes[i]->devtype == dev) {
            return 1;
        }
    }
    return 0;
}

/* Device dev of the daemon's table has a share: every process already on it
 * (PEs and parked processes of the jobs that use the table) joins its job's
 * group; one that is there already stays. */
static ivmError_t ivmd_devcg_adopt(ivmd_devcg_t *cg, int dev, ivmd_reply_t *rep)
{
    pid_t pids[IVM_PE_POOL_MAX];
    ivmd_devcg_place_t pl;
    ivmError_t status;
    ivmd_job_t *job;
    int i, n;

    for (job = cg->reg->jobs; job != NULL; job = job->next) {
        if (!ivmd_devcg_shared(job) || job->ending || dev >= job->ndevs) {
            continue;
        }
        n = ivmd_job_data_parked_pids(job, dev, pids, IVM_PE_POOL_MAX);
        if (n == 0 && !ivmd_devcg_job_on(job, dev)) {
            continue; /* no process of this job on dev: no group */
        }
        status = ivmd_devcg_place(cg, job, dev, &pl, rep);
        for (i = 0; status == IVM_SUCCESS && i < n; ++i) {
            status = ivmd_devcg_attach(cg, &pl, pids[i], rep);
        }
        for (i = 1; status == IVM_SUCCESS && i < job->next_pe_id; ++i) {
            if (ivmd_devcg_pe_live(job->pes[i]) && job->pes[i]->devtype == dev) {
                status = ivmd_devcg_attach(cg, &pl, job->pes[i]->pid, rep);
            }
        }
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    return IVM_SUCCESS;
}

/* Give device dev of the daemon's table percent, in the table and in the
 * copies of the jobs that use it. */
static void ivmd_devcg_table_set(ivmd_devcg_t *cg, int dev, int percent)
{
    ivmd_job_t *job;

    cg->devs[dev].percent = percent;
    for (job = cg->reg->jobs; job != NULL; job = job->next) {
        if (ivmd_devcg_shared(job) && dev < job->ndevs) {
            job->devs[dev].percent = percent;
        }
    }
}

ivmError_t ivmd_devcg_set_share(ivmd_devcg_t *cg, const ivm_msg_set_share_req_t *req,
                                ivmd_reply_t *rep)
{
    int dev = (int)req->dev, old;
    char devrel[IVMD_DEVCG_DEV_MAX];
    ivmd_reply_t why;
    ivmError_t status;

    ivmd_reply_init(&why);

    if (req->dev >= (uint32_t)cg->ndevs) {
        return ivmd_reply_set(rep, IVM_ERROR_NOT_FOUND, "%s has no CPU device %u (it has %d)",
                              cg->node, req->dev, cg->ndevs);
    }
    if (req->percent < 1 || req->percent > 100) {
        return ivmd_reply_set(rep, IVM_ERROR_INVALID_VALUE,
                              "share %u is not a percentage of 1..100", req->percent);
    }
    status = ivm_devspec_share_check(cg->devs, cg->ndevs, dev, (int)req->percent, why.detail,
                                     sizeof(why.detail));
    if (status == IVM_SUCCESS && req->percent < 100) {
        status = ivmd_devcg_require(cg, &why);
    }
    if (status != IVM_SUCCESS) {
        snprintf(rep->detail, sizeof(rep->detail), "%s: %s", cg->node, why.detail);
        return status;
    }
    old = cg->devs[dev].percent;
    ivmd_devcg_table_set(cg, dev, (int)req->percent);
    snprintf(devrel, sizeof(devrel), "%s/dev%d", cg->own, dev);
    status = cg->dev_jobs[dev] == 0 ? IVM_SUCCESS
             : ivm_cgroup_set_limit(&cg->root, devrel, ivmd_devcg_limit(&cg->devs[dev]),
                                    why.detail, sizeof(why.detail));
    if (status == IVM_SUCCESS && req->percent < 100) {
        status = ivmd_devcg_adopt(cg, dev, &why);
    }
    if (status != IVM_SUCCESS) {
        ivmd_devcg_table_set(cg, dev, old);
        if (cg->dev_jobs[dev] > 0) {
            char scratch[320];
            ivm_cgroup_set_limit(&cg->root, devrel, ivmd_devcg_limit(&cg->devs[dev]), scratch,
                                 sizeof(scratch));
        }
        snprintf(rep->detail, sizeof(rep->detail), "%s: CPU device %d: %s", cg->node, dev,
                 why.detail);
        ivm_warn("SET_SHARE of CPU device %d to %u%%: %s", dev, req->percent, why.detail);
        return status;
    }
    ivm_info("CPU device %d: share %d%% -> %u%%", dev, old, req->percent);
    return IVM_SUCCESS;
}

ivmError_t ivmd_devcg_info(ivmd_devcg_t *cg, const ivm_msg_cpu_info_req_t *req,
                           ivm_msg_cpu_info_rep_t *out, ivmd_reply_t *rep)
{
    const ivmd_devcg_group_t *g;
    ivm_cpu_device_t whole;
    const ivmd_job_t *job;
    int dev = (int)req->dev, i;

    if (req->reserved != 0) {
        return ivmd_reply_set(rep, IVM_ERROR_INVALID_VALUE,
                              "CPU_INFO: the reserved field is not zero");
    }
    if (req->dev >= (uint32_t)cg->ndevs) {
        return ivmd_reply_set(rep, IVM_ERROR_NOT_FOUND, "%s has no CPU device %u (it has %d)",
                              cg->node, req->dev, cg->ndevs);
    }
    out->ndevs  = (uint32_t)cg->ndevs;
    out->ncores = (uint32_t)cg->devs[dev].ncores;
    out->share  = (uint32_t)cg->devs[dev].percent;
    out->numa   = cg->devs[dev].numa;
    out->numa_nodes = (uint32_t)ivm_topo_numa_count();
    for (job = cg->reg->jobs; job != NULL; job = job->next) {
        if (!ivmd_devcg_shared(job)) {
            continue; /* its devices are its own table's */
        }
        for (i = 1; i < job->next_pe_id; ++i) {
            out->pes += ivmd_devcg_pe_live(job->pes[i]) && job->pes[i]->devtype == dev;
        }
    }
    for (g = cg->groups; g != NULL; g = g->next) {
        out->groups += g->shared && g->dev == dev && !g->ended;
    }
    ivm_cgroup_period(ivmd_devcg_limit(&cg->devs[dev]), &out->period_us, &out->quota_us);
    whole         = cg->devs[dev];
    whole.percent = 100;
    ivm_devspec_format(&whole, out->cores, sizeof(out->cores));
    return IVM_SUCCESS;
}

void ivmd_devcg_init(ivmd_devcg_t *cg, const char *node, ivm_cpu_device_t *devs, int ndevs,
                     const ivmd_registry_t *reg)
{
    memset(cg, 0, sizeof(*cg));
    cg->node  = node;
    cg->devs  = devs;
    cg->ndevs = ndevs;
    cg->reg   = reg;
}
