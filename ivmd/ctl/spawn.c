/* The spawner: PE processes of a job's executable, with its argv, cwd and
 * environment, the PE identity in the environment, pinned to the device's
 * cores; and their reaping. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/spawn.h"
#include "cgroup.h"
#include "crypto.h"
#include "ctl/jobdata.h"
#include "ctl/output.h"
#include "ctl/remote.h"
#include "log.h"
#include "status.h"
#include "topo.h"

#define IVMD_SPAWN_ENV_OWN 14

uint64_t ivmd_spawn_new_token(void)
{
    uint64_t token = 0;
    int tries;

    /* From the CSPRNG only; 0 (never a valid token) when it fails. */
    for (tries = 0; token == 0 && tries < 4; ++tries) {
        if (ivm_crypto_random(&token, sizeof(token)) != IVM_SUCCESS) {
            return 0;
        }
    }
    return token;
}

void ivmd_spawn_attr_init(posix_spawnattr_t *attr)
{
    sigset_t none, defaults;

    posix_spawnattr_init(attr);
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGCHLD);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    posix_spawnattr_setsigmask(attr, &none);
    posix_spawnattr_setsigdefault(attr, &defaults);
    posix_spawnattr_setpgroup(attr, 0);
    posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                       POSIX_SPAWN_SETPGROUP);
}

/* Where pe runs: a CPU device (*dev_p; a share device's cgroup in *cg) or
 * a GPU (*cpu_for_gpu_p: the CPU device of its host threads, *gpu_share_p). */
static ivmError_t ivmd_spawn_where(ivmd_spawn_t *s, ivmd_job_t *job, const ivmd_pe_t *pe,
                                   const ivm_cpu_device_t **dev_p,
                                   const ivm_cpu_device_t **cpu_for_gpu_p, int *gpu_share_p,
                                   ivmd_devcg_place_t *cg, ivmd_reply_t *rep)
{
    ivmError_t status;
    int gpu, known;

    cg->rel[0] = cg->procs[0] = '\0';
    if (!IVM_DEV_IS_GPU(pe->devtype)) {
        *dev_p = &job->devs[pe->devtype];
        /* A share device's processes run in its cgroup (devcg.c). */
        status = ivmd_devcg_place(s->devcg, job, pe->devtype, cg, rep);
        if (status != IVM_SUCCESS) {
            ivm_warn("job %u: no cgroup for CPU device %d: %s", job->id, pe->devtype,
                     rep->detail);
        }
        return status;
    }
    gpu   = IVM_DEV_INDEX(pe->devtype);
    known = (uint32_t)gpu < ivmd_ctl_gpu_count(s->env);
    if (!known || !ivmd_ctl_gpu_alive(s->env)) {
        return ivmd_reply_set(rep, known ? IVM_ERROR_DAEMON_LOST : IVM_ERROR_NOT_FOUND,
                              "%s has no GPU %d%s", s->env->node, gpu,
                              known ? " (its GPU daemon is gone)" : "");
    }
    *gpu_share_p = s->env->gpu->share(s->env->gpu_ctx, gpu);
    /* Its host threads run on the job's first CPU device. */
    *cpu_for_gpu_p = &job->devs[0];
    return IVM_SUCCESS;
}

/* pe's environment: the job's, with IVM's identity variables (in own) and,
 * for a GPU PE, what ivm-gpud says a PE on that GPU needs instead of the
 * job's own. *envp_p: malloc'd, pointing into the job's strings and own. */
static ivmError_t ivmd_spawn_env(ivmd_spawn_t *s, const ivmd_job_t *job, const ivmd_pe_t *pe,
                                 const ivm_cpu_device_t *dev, int gpu_share,
                                 char own[IVMD_SPAWN_ENV_OWN][160], char ***envp_p)
{
    const ivmd_job_data_t *jd = job->data;
    size_t nenv = 0, nown = 7, i, k;
    char **envp;

    while (jd->envp[nenv] != NULL) {
        ++nenv;
    }
    envp = malloc(sizeof(char *) * (nenv + IVMD_SPAWN_ENV_OWN + 1));
    if (envp == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    memcpy(envp, jd->envp, sizeof(char *) * nenv);
    snprintf(own[0], sizeof(own[0]), "IVM_JOB_ID=%u", job->id);
    snprintf(own[1], sizeof(own[1]), "IVM_PE_ID=%d", pe->id);
    snprintf(own[2], sizeof(own[2]), "IVM_PE_TOKEN=%llu", (unsigned long long)pe->token);
    snprintf(own[3], sizeof(own[3]), "IVM_SOCKET=%s", s->env->socket_path);
    snprintf(own[4], sizeof(own[4]), "IVM_NODE=%s", s->env->node);
    snprintf(own[5], sizeof(own[5]), "OMP_NUM_THREADS=%d",
             dev != NULL && jd->bind != IVM_BIND_CORE ? dev->ncores : 1);
    snprintf(own[6], sizeof(own[6]), "IVM_DEVICE_CORES=%d", dev ? dev->ncores : 0);
    if (pe->id < -1 && jd->pool_bind_now > 0) {
        /* A parked process of the warm pool (ctl/pool.c, ivmd_pool_bind_now). */
        snprintf(own[nown++], sizeof(own[0]), "LD_BIND_NOW=1");
        snprintf(own[nown++], sizeof(own[0]), "IVM_POOL_BIND_NOW=1");
    }
    if (IVM_DEV_IS_GPU(pe->devtype)) {
        const ivmd_ctl_gpu_ops_t *gpu = s->env->gpu;
        int index = IVM_DEV_INDEX(pe->devtype);

        snprintf(own[nown++], sizeof(own[0]), "IVM_GPU=%d", index);
        snprintf(own[nown++], sizeof(own[0]), "IVM_GPU_BACKEND=%s", ivmd_ctl_gpu_backend(s->env));
        snprintf(own[nown++], sizeof(own[0]), "IVM_GPU_SHARE=%d", gpu_share);
        /* What ivm-gpud says a PE on that GPU needs (cuda: its GPU only, and
         * on a share its percent of the SMs), instead of the job's own. */
        nown += (size_t)gpu->env(s->env->gpu_ctx, index, own + nown,
                                 (int)(IVMD_SPAWN_ENV_OWN - nown));
        for (i = 0, k = 0; i < nenv; ++i) {
            if (!gpu->env_overrides(s->env->gpu_ctx, index, envp[i])) {
                envp[k++] = envp[i];
            }
        }
        nenv = k;
    }
    for (i = 0; i < nown; ++i) {
        envp[nenv + i] = own[i];
    }
    envp[nenv + nown] = NULL;
    *envp_p = envp;
    return IVM_SUCCESS;
}

/* In the vforked child: system calls only until execve (it shares the
 * daemon's memory and stack). */
static void ivmd_spawn_child_fd(int fd, int target)
{
    if (fd == target) {
        fcntl(fd, F_SETFD, 0);
    } else if (dup2(fd, target) < 0) {
        _exit(127);
    }
}

/* In the vforked child: join the device's cgroup, or say why not and exit. */
static void ivmd_spawn_child_cgroup(const char *cg_procs)
{
    static const char msg[] = "ivmd: a PE process cannot join its CPU device's cgroup\n";
    ssize_t w;

    if (cg_procs != NULL && cg_procs[0] != '\0' && ivm_cgroup_join(cg_procs) != 0) {
        w = write(2, msg, sizeof(msg) - 1);
        (void)w;
        _exit(127);
    }
}

/* Start a parked process of the warm pool: vfork, then in the child the
 * stdio, cwd, signal defaults, process group and affinity posix_spawn would
 * give a PE, its device's cgroup (cg_procs: that group's cgroup.procs, ""
 * for none; a child that cannot join it says so on its stderr and exits
 * 127), and execve. vfork, not fork: a refill runs while the daemon is
 * between requests, and a fork copied the daemon's page tables and left
 * its pages copy-on-write, 1.3-3.4 ms of the loop on a VM whose page tables
 * the hypervisor keeps (docs/BENCHMARKS.md, "The refill off the path"); the
 * child shares the daemon's memory until its execve, so it makes only
 * system calls, and the daemon resumes when the exec is done. Returns 0 or
 * an errno value. */
static int ivmd_spawn_fork_exec(const ivmd_spawn_t *s, const ivmd_job_data_t *jd,
                                char *const *envp, int out_fd, int err_fd,
                                const ivm_cpu_device_t *dev, const char *cg_procs, pid_t *pid_p)
{
    static const int defaults[] = {SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP};
    struct sigaction dfl;
    sigset_t none;
    pid_t pid;
    size_t i;

    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&none);
    if (access(jd->exe, X_OK) != 0) {
        return errno;
    }
    pid = vfork();
    if (pid < 0) {
        return errno;
    }
    if (pid == 0) {
        for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); ++i) {
            sigaction(defaults[i], &dfl, NULL);
        }
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0);
        if (dev != NULL) {
            sched_setaffinity(0, sizeof(dev->cores), &dev->cores);
        }
        ivmd_spawn_child_fd(*s->env->devnull, 0);
        ivmd_spawn_child_fd(out_fd >= 0 ? out_fd : *s->env->devnull, 1);
        ivmd_spawn_child_fd(err_fd >= 0 ? err_fd : *s->env->devnull, 2);
        ivmd_spawn_child_cgroup(cg_procs);
        if (chdir(jd->cwd) != 0) {
            _exit(127);
        }
        execve(jd->exe, jd->argv, envp);
        _exit(127);
    }
    *pid_p = pid;
    return 0;
}

/* Start pe's process (or a parked one of the warm pool, pe->id < -1) with
 * envp, its output on out_fd / err_fd, pinned to pin's cores. A PE is
 * started with posix_spawn, which waits for its exec: starting every PE of a
 * burst with fork (the daemon not waiting) measured worse under load, 1.5-3x
 * for 64 and 256 cold PEs in alternating runs (docs/BENCHMARKS.md, "PE
 * bursts"): each fork copies the daemon's page tables and makes its pages
 * copy-on-write until the child execs, and the daemon then competes with a
 * flood of starting children for the cores. A parked process is forked (it
 * is started off the callers' path, one at a time). Returns 0 or an errno
 * value. */
static int ivmd_spawn_start(ivmd_spawn_t *s, const ivmd_job_data_t *jd, const ivmd_pe_t *pe,
                            char **envp, int out_fd, int err_fd, const ivm_cpu_device_t *pin,
                            const ivmd_devcg_place_t *cg, pid_t *pid_p)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc;

    if (pe->id < -1) {
        return ivmd_spawn_fork_exec(s, jd, envp, out_fd, err_fd, pin, cg->procs, pid_p);
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, *s->env->devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : *s->env->devnull, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd >= 0 ? err_fd : *s->env->devnull, 2);
    posix_spawn_file_actions_addchdir_np(&fa, jd->cwd);
    ivmd_spawn_attr_init(&attr);
    /* The child inherits the affinity: pin ourselves, spawn, restore. The
     * daemon is single-threaded, so nothing else runs meanwhile. */
    if (pin != NULL && sched_setaffinity(0, sizeof(pin->cores), &pin->cores) != 0) {
        ivm_warn("cannot pin pe %d to its device's cores: %m", pe->id);
    }
    rc = posix_spawn(pid_p, jd->exe, &fa, &attr, jd->argv, envp);
    if (pin != NULL) {
        sched_setaffinity(0, sizeof(*s->env->own_affinity), s->env->own_affinity);
    }
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

ivmError_t ivmd_spawn_pe(ivmd_spawn_t *s, ivmd_job_t *job, ivmd_pe_t *pe, ivmd_reply_t *rep)
{
    ivmd_job_data_t *jd = job->data;
    char own[IVMD_SPAWN_ENV_OWN][160];
    ivmd_devcg_place_t cg;
    const ivm_cpu_device_t *dev = NULL, *cpu_for_gpu = NULL;
    int gpu_share = 100, out_fd = jd->out_fd, err_fd = jd->err_fd, fwd_out = -1, fwd_err = -1;
    char **envp;
    ivmError_t status;
    pid_t pid = 0;
    int rc;

    status = ivmd_spawn_where(s, job, pe, &dev, &cpu_for_gpu, &gpu_share, &cg, rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    pe->token = ivmd_spawn_new_token();
    if (pe->token == 0) {
        return ivmd_reply_set(rep, IVM_ERROR_INTERNAL, "no random bytes for pe %d's token",
                              pe->id);
    }
    status = ivmd_spawn_env(s, job, pe, dev, gpu_share, own, &envp);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if ((jd->proxy || (jd->tag_output && out_fd >= 0)) &&
        ivmd_output_open(s->output, job, pe->id, &fwd_out, &fwd_err) == IVM_SUCCESS) {
        out_fd = fwd_out;
        err_fd = fwd_err;
    }
    rc = ivmd_spawn_start(s, jd, pe, envp, out_fd, err_fd, dev != NULL ? dev : cpu_for_gpu,
                          &cg, &pid);
    if (fwd_out >= 0) {
        close(fwd_out);
        close(fwd_err);
    }
    free(envp);
    if (rc != 0) {
        ivmd_reply_set(rep, IVM_ERROR_SPAWN, "cannot start %s for pe %d: %s", jd->exe, pe->id,
                       strerror(rc));
        ivm_warn("job %u: %s", job->id, rep->detail);
        return IVM_ERROR_SPAWN;
    }
    if (pe->id >= -1) {
        /* Into its device's cgroup before it can be answered (its ENTER is
         * read once this returns); the daemon itself never joins one. */
        status = ivmd_devcg_attach(s->devcg, &cg, pid, rep);
        if (status != IVM_SUCCESS) {
            ivm_warn("job %u: pe %d killed: %s", job->id, pe->id, rep->detail);
            kill(pid, SIGKILL); /* reaped as a stranger */
            return status;
        }
    }
    pe->pid = pid;
    ivm_debug("job %u: pe %d started, pid %d, device %d%s%s", job->id, pe->id, (int)pid,
              pe->devtype, cg.rel[0] != '\0' ? ", cgroup " : "", cg.rel);
    return status;
}

/* The cores a CPU PE is bound to under the job's --bind-to; 0, or -1 when it
 * stays as started (bound to its device's cores). */
static int ivmd_spawn_bind_set(const ivmd_spawn_t *s, const ivmd_job_t *job, const ivmd_pe_t *pe,
                               cpu_set_t *set)
{
    const ivm_cpu_device_t *dev = &job->devs[pe->devtype];
    unsigned bind = ((const ivmd_job_data_t *)job->data)->bind;
    cpu_set_t one, node;
    int i, c, k = 0, numa;

    switch (bind) {
    case IVM_BIND_CORE:
        /* The k-th core of the device for its k-th live PE (round robin). */
        for (i = 1; i < job->next_pe_id; ++i) {
            const ivmd_pe_t *o = job->pes[i];
            k += o != NULL && o != pe && o->node < 0 && o->devtype == pe->devtype &&
                 !o->reaped && o->state == IVMD_PE_RUNNING;
        }
        k %= dev->ncores > 0 ? dev->ncores : 1;
        CPU_ZERO(set);
        for (c = 0; c < CPU_SETSIZE; ++c) {
            if (CPU_ISSET(c, &dev->cores) && k-- == 0) {
                CPU_SET(c, set);
                return 0;
            }
        }
        return -1;
    case IVM_BIND_NUMA:
        /* Every core of the NUMA nodes its device's cores are on. */
        CPU_ZERO(set);
        for (c = 0; c < CPU_SETSIZE; ++c) {
            if (!CPU_ISSET(c, &dev->cores)) {
                continue;
            }
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            numa = ivm_topo_numa_of(&one);
            if (numa >= 0 && ivm_topo_numa_cores(numa, &node) == 0) {
                CPU_OR(set, set, &node);
            } else {
                CPU_SET(c, set);
            }
        }
        CPU_AND(set, set, s->env->own_affinity);
        return CPU_COUNT(set) > 0 ? 0 : -1;
    case IVM_BIND_NONE:
        *set = *s->env->own_affinity;
        return 0;
    default:
        return -1;
    }
}

void ivmd_spawn_bind(const ivmd_spawn_t *s, const ivmd_job_t *job, const ivmd_pe_t *pe,
                     pid_t pid)
{
    char path[64];
    cpu_set_t set;
    struct dirent *e;
    DIR *dir;

    if (IVM_DEV_IS_GPU(pe->devtype) || job->data == NULL ||
        ivmd_spawn_bind_set(s, job, pe, &set) != 0) {
        return;
    }
    /* Every thread of it: threads started before ivmEnter (OpenMP) too. */
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    dir = opendir(path);
    if (dir == NULL) {
        sched_setaffinity(pid, sizeof(set), &set);
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] != '.' &&
            sched_setaffinity((pid_t)atoi(e->d_name), sizeof(set), &set) != 0) {
            ivm_debug("job %u: cannot bind pe %d thread %s: %m", job->id, pe->id, e->d_name);
        }
    }
    closedir(dir);
}

static ivmd_pe_t *ivmd_spawn_find_pid(ivmd_spawn_t *s, pid_t pid)
{
    ivmd_job_t *job;
    int i;

    for (job = s->env->reg->jobs; job != NULL; job = job->next) {
        for (i = job->next_pe_id - 1; i > 0; --i) {
            if (job->pes[i] != NULL && job->pes[i]->pid == pid && !job->pes[i]->reaped) {
                return job->pes[i];
            }
        }
    }
    return NULL;
}

/* PE pe's process is gone (wstatus -1: not our child, status unknown). */
static void ivmd_spawn_ended(ivmd_spawn_t *s, ivmd_pe_t *pe, int wstatus)
{
    pe->reaped = 1;
    if (pe->state == IVMD_PE_SPAWNED || pe->state == IVMD_PE_RUNNING) {
        if (wstatus == -1) {
            ivm_warn("job %u: pe %d (pid %d) ended without ivmExit", pe->job->id, pe->id,
                     (int)pe->pid);
        } else if (WIFSIGNALED(wstatus)) {
            ivm_info("job %u: pe %d (pid %d) killed by signal %d", pe->job->id, pe->id,
                     (int)pe->pid, WTERMSIG(wstatus));
        } else {
            ivm_warn("job %u: pe %d (pid %d) exited with status %d without ivmExit",
                     pe->job->id, pe->id, (int)pe->pid, WEXITSTATUS(wstatus));
        }
        ivmd_pe_end(s->env->reg, pe, 1);
    }
    ivmd_remote_pe_reaped(s->env->remote, pe);
    s->env->job_collect(s->env->d, pe->job);
}

void ivmd_spawn_reap(ivmd_spawn_t *s)
{
    ivmd_pe_t *pe;
    int wstatus;
    pid_t pid;

    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        if (s->env->gpu->reaped(s->env->gpu_ctx, pid, wstatus)) {
            continue;
        }
        pe = ivmd_spawn_find_pid(s, pid);
        if (pe == NULL) {
            (void)s->env->other_reaped(s->env->d, pid, wstatus);
            continue;
        }
        ivmd_spawn_ended(s, pe, wstatus);
    }
    ivmd_devcg_retry(s->devcg);
}

/* The pidfd of a forked PE (ivmd_spawn_watch), or -1. */
static int ivmd_spawn_pidfd(const ivmd_pe_t *pe);

int ivmd_spawn_signal(const ivmd_pe_t *pe, int sig)
{
    int fd = ivmd_spawn_pidfd(pe);

    /* A forked PE is its parked parent's child, reaped by the kernel the
       moment it exits (SA_NOCLDWAIT), so its pid may be another process's
       before the pidfd tells us: signal it through the pidfd. PEs spawned by
       this daemon stay zombies until it reaps them: their pid is theirs. */
    if (fd >= 0) {
        return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
    }
    return kill(pe->pid, sig);
}

int ivmd_spawn_kill(ivmd_pe_t *pe)
{
    if (pe->pid > 0 && !pe->reaped) {
        ivmd_spawn_signal(pe, SIGKILL);
        return 1;
    }
    if (pe->forked && pe->pid == 0) {
        /* Not forked yet, or its pid not known yet: nothing to wait for; the
           process is killed when its parent reports it. */
        pe->reaped   = 1;
        pe->kill_due = 1;
    }
    return 0;
}

/* The pidfd of a forked PE (ivmd_spawn_watch). */
typedef struct ivmd_pe_watch {
    ivmd_handler_t h;
    ivmd_spawn_t  *s;
    ivmd_pe_t     *pe;
} ivmd_pe_watch_t;

static int ivmd_spawn_pidfd(const ivmd_pe_t *pe)
{
    const ivmd_pe_watch_t *w = pe->watch;

    return w != NULL ? w->h.fd : -1;
}

static void ivmd_spawn_watch_event(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_pe_watch_t *w = arg;
    ivmd_spawn_t *s = w->s;
    ivmd_pe_t *pe = w->pe;

    (void)events;
    ivmd_spawn_unwatch(s, pe);
    ivmd_spawn_ended(s, pe, -1);
    ivmd_devcg_retry(s->devcg);
}

ivmError_t ivmd_spawn_watch(ivmd_spawn_t *s, ivmd_pe_t *pe)
{
    ivmd_pe_watch_t *w;
    int fd;

    if (pe->watch != NULL) {
        return IVM_SUCCESS;
    }
    fd = (int)syscall(SYS_pidfd_open, pe->pid, 0);
    if (fd < 0) {
        /* Gone already (ESRCH): as if the pidfd said so at once. */
        ivm_info("job %u: pe %d (pid %d): pidfd_open: %m", pe->job->id, pe->id, (int)pe->pid);
        ivmd_spawn_ended(s, pe, -1);
        return errno == ESRCH ? IVM_SUCCESS : IVM_ERROR_INTERNAL;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        close(fd);
        return IVM_ERROR_NO_MEMORY;
    }
    w->h.fd  = fd;
    w->h.cb  = ivmd_spawn_watch_event;
    w->h.arg = w;
    w->pe    = pe;
    w->s     = s;
    if (ivmd_loop_watch(s->env->loop, &w->h, EPOLLIN) != IVM_SUCCESS) {
        close(fd);
        free(w);
        return IVM_ERROR_INTERNAL;
    }
    pe->watch = w;
    return IVM_SUCCESS;
}

void ivmd_spawn_unwatch(ivmd_spawn_t *s, ivmd_pe_t *pe)
{
    ivmd_pe_watch_t *w = pe->watch;

    if (w == NULL) {
        return;
    }
    ivmd_loop_unwatch(s->env->loop, &w->h);
    close(w->h.fd);
    free(w);
    pe->watch = NULL;
}

void ivmd_spawn_init(ivmd_spawn_t *s, const ivmd_ctl_env_t *env, struct ivmd_output *output,
                     ivmd_devcg_t *devcg)
{
    s->env    = env;
    s->output = output;
    s->devcg  = devcg;
}
