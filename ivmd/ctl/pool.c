/*
 * The warm PE pool: per job and device (each CPU device of the job and each
 * GPU device of the node: a GPU or a --gpu-shares share), jd->pe_pool
 * processes of the job's executable, started like a PE of that device (argv,
 * env, cwd, affinity, output wiring; for a GPU device IVM_GPU, IVM_GPU_BACKEND,
 * IVM_GPU_SHARE and CUDA_VISIBLE_DEVICES) but with a negative pool
 * slot as IVM_PE_ID. A parked GPU process on the cuda backend made its
 * device's primary context current before its ENTER (libivm,
 * ivm_pool_park_prepare), so the context creation is off the caller's path. Each connects and
 * sends ENTER with IVM_ENTER_POOL and its token; the daemon holds the reply.
 * CREATE_PES hands a parked process the identity of a reserved PE by answering
 * that ENTER, so no exec, dynamic linking or library start-up is on the
 * caller's path. Parked processes are no PEs: they are not in the registry,
 * not counted by NUM_PES, and never handed out once they died or were killed.
 * The loop refills a short pool only after it was idle for IVMD_POOL_IDLE_US,
 * an empty one as soon as no event is pending (ivmd_pool_wanted, loop.c).
 *
 * A parked process that can fork (one thread, no CUDA context: its ENTER says
 * IVM_ENTER_FORKABLE) is not handed out itself: CREATE_PES answers its ENTER
 * with "fork PE n" (IVM_ENTER_REP_FORK, the PE's token, its stdout and stderr
 * fds), the fork child connects and enters as that PE, and the parked
 * process parks again at once, reporting the child's pid. A PE then costs a
 * fork instead of an exec, dynamic linking and the program's start-up, and
 * the pool needs no refill. The child is not the daemon's child: its pid is
 * watched with a pidfd (spawn.c). Its parent reaps it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/pool.h"
#include "crypto.h"
#include "ctl/board.h"
#include "ctl/output.h"
#include "ctl/remote.h"
#include "ctl/spawn.h"
#include "log.h"
#include "status.h"

/* Consecutive parked processes that may die before their ivmEnter before the
 * job's pool is switched off (a program that exits before ivmEnter). */
#define IVMD_POOL_MAX_EARLY_DEATHS 3


/* At pool fill (off the callers' path): the job's executable as its name
 * resolves now into *st (zeroed if it cannot be read), and the pool's open
 * file moved to it if the name now resolves to another file. */
static void ivmd_pool_exe_track(ivmd_job_data_t *jd, struct stat *st)
{
    struct stat held;
    int fd;

    if (stat(jd->exe, st) != 0) {
        memset(st, 0, sizeof(*st));
        return;
    }
    if (jd->pool_exe_open && fstat(jd->pool_exe_fd, &held) == 0 &&
        held.st_dev == st->st_dev && held.st_ino == st->st_ino) {
        return;
    }
    fd = open(jd->exe, O_PATH | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &held) != 0 || held.st_dev != st->st_dev ||
        held.st_ino != st->st_ino) {
        /* Gone or replaced between the two calls: no process matches. */
        if (fd >= 0) {
            close(fd);
        }
        memset(st, 0, sizeof(*st));
        return;
    }
    if (jd->pool_exe_open) {
        close(jd->pool_exe_fd);
    }
    jd->pool_exe_fd   = fd;
    jd->pool_exe_open = 1;
}

static int ivmd_pool_active(const ivmd_job_t *job)
{
    const ivmd_job_data_t *jd = job->data;

    return jd != NULL && !job->ending && jd->pe_pool > 0;
}

/* Live parked (or starting) processes of job on device dev (CPU or GPU). */
static uint32_t ivmd_pool_live(const ivmd_job_data_t *jd, int dev)
{
    const ivmd_parked_t *p;
    uint32_t n = 0;

    for (p = jd->parked; p != NULL; p = p->next) {
        n += (!p->dead && p->slot.devtype == dev);
    }
    return n;
}

/* The (job, device) whose pool is shortest: IVMD_POOL_EMPTY if one has no
 * process left, IVMD_POOL_SHORT if one has fewer than wanted, else 0. */
static int ivmd_pool_short(const ivmd_pool_t *pl, ivmd_job_t **job_p, int *dev_p)
{
    /* GPUs only while ivm-gpud lives: a GPU PE cannot start without it. */
    int ngpus = ivmd_ctl_gpu_alive(pl->env) ? (int)ivmd_ctl_gpu_count(pl->env) : 0;
    ivmd_job_t *job;
    int k, best = 0;

    for (job = pl->env->reg->jobs; job != NULL; job = job->next) {
        if (!ivmd_pool_active(job)) {
            continue;
        }
        for (k = 0; k < job->ndevs + ngpus; ++k) {
            int dev = k < job->ndevs ? k : IVM_GPU_N(k - job->ndevs);
            uint32_t live = ivmd_pool_live(job->data, dev);
            int level = live == 0 ? IVMD_POOL_EMPTY : IVMD_POOL_SHORT;
            if (live < ((ivmd_job_data_t *)job->data)->pe_pool && level > best) {
                best   = level;
                *job_p = job;
                *dev_p = dev;
            }
        }
    }
    return best;
}

int ivmd_pool_wanted(const ivmd_pool_t *pl)
{
    ivmd_job_t *job;
    int dev;

    return ivmd_pool_short(pl, &job, &dev);
}

/* Parked processes start with every symbol bound (LD_BIND_NOW=1, with
 * IVM_POOL_BIND_NOW=1 so that libivm takes both out of the environment once
 * parked): a forkable one binds them once for all its children, which
 * otherwise each resolved on first call every function they used (the
 * dynamic linker's lookups and a copy-on-write fault per GOT page; about 2 %
 * of a DS-LB PE's time on our 2-vCPU VM, and 20 us of a warm single PE's
 * 240). Not where the job's environment sets LD_BIND_NOW itself or
 * IVM_POOL_BIND_NOW=0, and no longer once a parked process started that way
 * died before its ENTER (a program with a symbol that only lazy binding
 * lets it start without: ivmd_pool_reaped). */
static int ivmd_pool_bind_now(ivmd_job_data_t *jd)
{
    char *const *e;

    if (jd->pool_bind_now == 0) {
        jd->pool_bind_now = 1;
        for (e = jd->envp; e != NULL && *e != NULL; ++e) {
            if (strncmp(*e, "LD_BIND_NOW=", 12) == 0 || strcmp(*e, "IVM_POOL_BIND_NOW=0") == 0) {
                jd->pool_bind_now = -1;
                break;
            }
        }
    }
    return jd->pool_bind_now > 0;
}

void ivmd_pool_fill(ivmd_pool_t *pl)
{
    ivmd_reply_t rep;
    ivmd_job_data_t *jd;
    ivmd_parked_t *p;
    ivmd_job_t *job;
    int dev;

    if (!ivmd_pool_short(pl, &job, &dev)) {
        return;
    }
    jd = job->data;
    p  = calloc(1, sizeof(*p));
    if (p == NULL) {
        ivm_error("job %u: out of memory for a parked process; pool off", job->id);
        jd->pe_pool = 0;
        return;
    }
    p->slot.id      = -2 - (int)(jd->pool_slots++ % 0x40000000u);
    p->slot.devtype = dev;
    p->slot.node    = -1;
    p->slot.state   = IVMD_PE_SPAWNED;
    p->slot.job     = job;
    p->bind_now     = ivmd_pool_bind_now(jd);
    ivmd_pool_exe_track(jd, &p->exe);
    ivmd_reply_init(&rep);
    if (ivmd_spawn_pe(pl->spawn, job, &p->slot, &rep) != IVM_SUCCESS) {
        ivm_warn("job %u: cannot start a parked process (%s); pool off", job->id, rep.detail);
        jd->pe_pool = 0;
        free(p);
        return;
    }
    p->next    = jd->parked;
    jd->parked = p;
    ivm_debug("job %u: parked process pid %d started for %s %d (slot %d)", job->id,
              (int)p->slot.pid, IVM_DEV_IS_GPU(dev) ? "GPU" : "CPU device",
              IVM_DEV_INDEX(dev), p->slot.id);
}

/* Whether a forkable parked process of job's device dev is busy forking
 * and will park again: a PE of a burst may wait for it. */
static int ivmd_pool_will_repark(const ivmd_job_data_t *jd, int dev)
{
    const ivmd_parked_t *p;

    for (p = jd->parked; p != NULL; p = p->next) {
        if (!p->dead && p->forkable && p->forking != NULL && p->slot.devtype == dev) {
            return 1;
        }
    }
    return 0;
}

/* Queue pe for the next forkable parked process of its device that parks
 * again (ivmd_pool_repark). It stays SPAWNED, with no token (it never
 * enters) and no pid yet, like a PE being forked. Returns 0 when it cannot
 * wait (no memory: the caller spawns it). */
static int ivmd_pool_enqueue(ivmd_job_data_t *jd, ivmd_pe_t *pe)
{
    if (jd->pool_queued == jd->pool_queue_cap) {
        uint32_t cap = jd->pool_queue_cap ? 2 * jd->pool_queue_cap : 64;
        ivmd_pe_t **q = realloc(jd->pool_queue, cap * sizeof(*q));
        if (q == NULL) {
            return 0;
        }
        jd->pool_queue     = q;
        jd->pool_queue_cap = cap;
    }
    pe->token  = 0;
    pe->pid    = 0;
    pe->forked = 1;
    jd->pool_queue[jd->pool_queued++] = pe;
    return 1;
}

/* The first queued PE of device dev still waiting (killed ones dropped). */
static ivmd_pe_t *ivmd_pool_dequeue(ivmd_job_data_t *jd, int dev)
{
    ivmd_pe_t *pe = NULL;
    uint32_t i, k = 0;

    for (i = 0; i < jd->pool_queued; ++i) {
        ivmd_pe_t *q = jd->pool_queue[i];
        if (q->state != IVMD_PE_SPAWNED || q->pid != 0) {
            continue; /* killed, or its job ends: nothing to start */
        }
        if (pe == NULL && q->devtype == dev) {
            pe = q;
            continue;
        }
        jd->pool_queue[k++] = q;
    }
    jd->pool_queued = k;
    return pe;
}

/* Queued PEs whose device has no forkable parked process left to fork them
 * are spawned (or fail, said once each). */
static void ivmd_pool_drain(ivmd_pool_t *pl, ivmd_job_t *job)
{
    ivmd_job_data_t *jd = job->data;
    ivmd_reply_t rep;
    uint32_t i, k = 0;

    for (i = 0; i < jd->pool_queued; ++i) {
        ivmd_pe_t *pe = jd->pool_queue[i];
        if (pe->state == IVMD_PE_SPAWNED && pe->pid == 0 &&
            ivmd_pool_will_repark(jd, pe->devtype)) {
            jd->pool_queue[k++] = pe;
            continue;
        }
        if (pe->state != IVMD_PE_SPAWNED || pe->pid != 0 || job->ending) {
            continue;
        }
        pe->forked = 0;
        ivmd_reply_init(&rep);
        if (ivmd_spawn_pe(pl->spawn, job, pe, &rep) != IVM_SUCCESS) {
            ivm_warn("job %u: pe %d, queued for the pool, cannot start: %s", job->id, pe->id,
                     rep.detail);
            pe->reaped = 1;
            ivmd_pe_end(pl->env->reg, pe, 1);
        }
    }
    jd->pool_queued = k;
}

/* The parked process p reports the pid of its fork child p->forking (0: the
 * fork failed, or p died first). That PE has run since it was handed out,
 * on what was p's connection (ivmd_pool_fork); from now on its pid is known
 * and watched with a pidfd, which also tells the end of one that ended
 * already (ivmExit before this report). One killed meanwhile is killed now. */
static void ivmd_pool_forked(ivmd_pool_t *pl, ivmd_parked_t *p, pid_t pid)
{
    ivmd_pe_t *pe = p->forking;
    int alive = pe->state == IVMD_PE_RUNNING || pe->state == IVMD_PE_SPAWNED;

    p->forking = NULL;
    if (pe->pid != 0) {
        return;
    }
    if (pid > 0) {
        pe->pid    = pid;
        pe->reaped = 0;
        if (ivmd_spawn_watch(pl->spawn, pe) == IVM_SUCCESS && pe->kill_due && !pe->reaped) {
            ivmd_spawn_signal(pe, SIGKILL);
        }
        return;
    }
    ivm_warn("job %u: pe %d: parked process pid %d could not fork it, or died first",
             pe->job->id, pe->id, (int)p->slot.pid);
    if (alive && pe->conn != NULL) {
        /* A child that runs loses its connection: that ends the PE as failed. */
        ivmd_conn_close(pl->env->d, pe->conn, "its parked parent did not report it");
        return;
    }
    pe->reaped = 1;
    if (alive) {
        ivmd_pe_end(pl->env->reg, pe, 1);
    }
    pl->env->job_collect(pl->env->d, pe->job);
}

static void ivmd_pool_kill(ivmd_parked_t *p);
static int ivmd_pool_exe_same(const ivmd_job_data_t *jd, const ivmd_parked_t *p);
static int ivmd_pool_fork(ivmd_pool_t *pl, ivmd_job_t *job, ivmd_parked_t *p, ivmd_pe_t *pe);

/* A forkable parked process parks again on a new connection after a fork,
 * naming its child. */
static ivmError_t ivmd_pool_repark(ivmd_pool_t *pl, ivmd_parked_t *p, ivmd_conn_t *c,
                                   const ivm_msg_hdr_t *hdr, const ivm_msg_enter_req_t *req)
{
    ivmd_job_data_t *jd = p->slot.job->data;
    ivmd_pe_t *next;

    if (p->forking != NULL) {
        ivmd_pool_forked(pl, p, (pid_t)req->forked_pid);
    }
    p->conn   = c;
    p->seq    = hdr->seq;
    c->parked = p;
    /* A burst larger than the pool: the next PE waiting for this device is
     * forked at once, while the rest of the pool forks the others. */
    if (jd->pool_queued > 0 && !ivmd_pool_exe_same(jd, p)) {
        ivmd_pool_kill(p); /* the program changed: the queue drains when it is reaped */
    } else if (jd->pool_queued > 0 && (next = ivmd_pool_dequeue(jd, p->slot.devtype)) != NULL) {
        ivmd_pool_fork(pl, p->slot.job, p, next);
    }
    return IVMD_DEFERRED;
}

static void ivmd_pool_on_parked(const ivmd_pool_t *pl, ivmd_job_t *job, ivmd_parked_t *p)
{
    /* Nothing to set up here for either kind of device: a parked GPU process
     * made its CUDA primary context (cuda backend) in libivm before its
     * ENTER (ivm_pool_park_prepare); it maps nothing until it is a PE, so
     * ivm-gpud sees it only then. */
    (void)pl;
    if (IVM_DEV_IS_GPU(p->slot.devtype)) {
        ivm_debug("job %u: pid %d parked for GPU %d (%s backend)", job->id,
                  (int)p->slot.pid, IVM_DEV_INDEX(p->slot.devtype), ivmd_ctl_gpu_backend(pl->env));
    }
}

/* The parked process of job req->job_id, slot req->pe_id that may send a
 * pool ENTER on c now (its token and pid shown, not parked on another
 * connection), or NULL with the refusal in rep. */
static ivmd_parked_t *ivmd_pool_caller(ivmd_pool_t *pl, ivmd_conn_t *c,
                                       const ivm_msg_enter_req_t *req, ivmd_reply_t *rep)
{
    ivmd_job_t *job = ivmd_job_find(pl->env->reg, req->job_id);
    ivmd_parked_t *p = NULL;

    if (c->parked != NULL) {
        ivmd_reply_set(rep, IVM_ERROR_INVALID_VALUE, "this connection is already parked");
        return NULL;
    }
    if (req->blob_len != 0 || req->pe_id >= -1 || req->pe_pool != 0) {
        ivmd_reply_set(rep, IVM_ERROR_INVALID_VALUE, "a pool ENTER names a pool slot "
                       "(< -1) and carries no blob and no pool size");
        return NULL;
    }
    if (job != NULL && job->data != NULL) {
        for (p = ((ivmd_job_data_t *)job->data)->parked; p != NULL; p = p->next) {
            if (p->slot.id == req->pe_id) {
                break;
            }
        }
    }
    if (p == NULL || p->dead || p->conn != NULL ||
        !ivm_crypto_equal(&p->slot.token, &req->token, sizeof(req->token)) ||
        p->slot.pid != c->peer_pid || job->ending) {
        ivmd_reply_set(rep, IVM_ERROR_PERMISSION, "no parked process %d awaits ivmEnter in job "
                       "%u with this token and pid", req->pe_id, req->job_id);
        ivm_warn("pid %d: pool ENTER as job %u slot %d refused (unknown slot, bad token "
                 "or pid)", (int)c->peer_pid, req->job_id, req->pe_id);
        return NULL;
    }
    return p;
}

ivmd_job_t *ivmd_pool_caller_job(ivmd_pool_t *pl, ivmd_conn_t *c, const ivm_msg_enter_req_t *req,
                                 ivmd_reply_t *rep)
{
    ivmd_parked_t *p = ivmd_pool_caller(pl, c, req, rep);

    return p != NULL ? p->slot.job : NULL;
}

ivmError_t ivmd_pool_enter(ivmd_pool_t *pl, ivmd_conn_t *c, const ivm_msg_hdr_t *hdr,
                           const ivm_msg_enter_req_t *req, ivmd_reply_t *rep)
{
    ivmd_parked_t *p = ivmd_pool_caller(pl, c, req, rep);
    ivmd_job_t *job;

    if (p == NULL) {
        return rep->status;
    }
    job = p->slot.job;
    if (p->forkable) {
        return ivmd_pool_repark(pl, p, c, hdr, req);
    }
    p->conn     = c;
    p->seq      = hdr->seq;
    p->forkable = (req->flags & IVM_ENTER_FORKABLE) != 0;
    c->parked   = p;
    ((ivmd_job_data_t *)job->data)->pool_early_deaths = 0;
    ivmd_pool_on_parked(pl, job, p);
    ivm_debug("job %u: pid %d parked for device %d", job->id, (int)c->peer_pid,
              p->slot.devtype);
    return IVMD_DEFERRED;
}


static void ivmd_pool_unlink(ivmd_job_data_t *jd, ivmd_parked_t *p)
{
    ivmd_parked_t **link;

    for (link = &jd->parked; *link != NULL; link = &(*link)->next) {
        if (*link == p) {
            *link = p->next;
            return;
        }
    }
}

static void ivmd_pool_kill(ivmd_parked_t *p)
{
    if (!p->dead) {
        p->dead = 1;
        kill(p->slot.pid, SIGKILL);
    }
}

/* A parked connection that shows EOF or an error belongs to a process that
 * is gone (or going): a parked process never sends after its ENTER. */
static int ivmd_pool_gone(const ivmd_parked_t *p)
{
    struct pollfd pfd = {.fd = p->conn->h.fd, .events = POLLIN | POLLRDHUP};

    return p->conn->closed || p->conn->doomed != NULL || poll(&pfd, 1, 0) != 0;
}

/* Whether the job's executable is still the file p was started from: a
 * parked process of a program deleted or rebuilt since is never handed out
 * (a cold spawn would fail, or run the new program). The check runs on the
 * caller's path, so it is an fstat of the file the pool holds open, not a
 * path lookup (13 us median measured on the warm path after the daemon
 * slept; fstat is about 1 us): a file replaced under its name (new inode:
 * what linkers, install and mv do) has no link left, one rewritten in place
 * has a new size or mtime, one made not executable (chmod -x) no x bit: a
 * cold spawn would fail, so the pool does not go on forking it. Not caught:
 * a replaced file that keeps another hard link elsewhere. */
static int ivmd_pool_exe_same(const ivmd_job_data_t *jd, const ivmd_parked_t *p)
{
    struct stat st;

    return jd->pool_exe_open && fstat(jd->pool_exe_fd, &st) == 0 && st.st_nlink > 0 &&
           (st.st_mode & 0111) != 0 &&
           st.st_dev == p->exe.st_dev && st.st_ino == p->exe.st_ino &&
           st.st_size == p->exe.st_size && st.st_mtim.tv_sec == p->exe.st_mtim.tv_sec &&
           st.st_mtim.tv_nsec == p->exe.st_mtim.tv_nsec;
}

/* The ENTER reply that makes a parked process PE pe (flags: IVM_ENTER_REP_*). */
static void ivmd_pool_enter_rep(const ivmd_pool_t *pl, const ivmd_job_t *job,
                                const ivmd_pe_t *pe, uint32_t flags, ivm_msg_enter_rep_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->job_id  = job->id;
    rep->pe_id   = pe->id;
    rep->devtype = pe->devtype;
    rep->ncores  = IVM_DEV_IS_GPU(pe->devtype) ? 0 : (uint32_t)job->devs[pe->devtype].ncores;
    rep->flags   = flags;
    ivm_proto_strset(rep->node, sizeof(rep->node), pl->env->node);
}

/* Parked connection c is PE pe's from now on (it entered). On the signal
 * board before its ENTER reply leaves, as a PE's id is before it leaves the
 * daemon: the two ends of a pair must agree on the board. */
static void ivmd_pool_conn_to_pe(ivmd_pool_t *pl, ivmd_job_t *job, ivmd_conn_t *c,
                                 ivmd_pe_t *pe)
{
    c->parked = NULL;
    ivmd_board_pe_added(job, pe);
    ivmd_pe_enter(pe, c);
    c->job = job;
    c->pe  = pe;
    ++((ivmd_job_data_t *)job->data)->nconns;
    ivmd_remote_pe_entered(pl->env->remote, pe);
}

/* Tell forkable parked process p to fork PE pe: the reply to its ENTER
 * names the PE and carries its stdout and stderr (forwarded and tagged as
 * the spawner's, else the job's). The connection becomes the PE's at once,
 * before the fork: the child runs as that PE with no ENTER of its own (one
 * wake-up, the parked process's, between the creator's call and the PE
 * running), and its pid comes when the parent parks again on a new
 * connection (ivmd_pool_repark). p is busy until then. Returns 1, or 0 when
 * the output could not be set up (the cold path takes over). */
static int ivmd_pool_fork(ivmd_pool_t *pl, ivmd_job_t *job, ivmd_parked_t *p, ivmd_pe_t *pe)
{
    ivmd_job_data_t *jd = job->data;
    ivm_msg_enter_rep_t rep;
    int fds[2] = {jd->out_fd, jd->err_fd}, fwd[2] = {-1, -1};
    ivmd_conn_t *c = p->conn;

    if ((jd->proxy || (jd->tag_output && jd->out_fd >= 0)) &&
        ivmd_output_open(pl->output, job, pe->id, &fwd[0], &fwd[1]) == IVM_SUCCESS) {
        fds[0] = fwd[0];
        fds[1] = fwd[1];
    }
    for (int i = 0; i < 2; ++i) {
        fds[i] = fds[i] >= 0 ? fds[i] : *pl->env->devnull;
    }
    pe->token  = 0; /* it never enters: no token to show */
    pe->pid    = 0;
    pe->forked = 1;
    p->conn    = NULL;
    p->forking = pe;
    ivmd_pool_conn_to_pe(pl, job, c, pe);
    ivmd_pool_enter_rep(pl, job, pe, IVM_ENTER_REP_FORK, &rep);
    ivmd_conn_reply(pl->env->d, c, IVM_MSG_ENTER, p->seq, &rep, sizeof(rep), NULL, fds, 2);
    for (int i = 0; i < 2; ++i) {
        if (fwd[i] >= 0) {
            close(fwd[i]);
        }
    }
    ++pl->pooled;
    ivm_debug("job %u: pe %d forked by parked process pid %d (warm)", job->id, pe->id,
              (int)p->slot.pid);
    return 1;
}

/* Whether forkable parked process p is handed out itself rather than told
 * to fork the PE: when this request's PEs (p's and more after it) fit the
 * idle parked processes of its device and one of them is left to fork
 * those that come before the pool refills. A fork is not free: 0.1-0.3 ms
 * on one machine, 1-2.5 ms on a virtual machine whose page tables the
 * hypervisor keeps (docs/BENCHMARKS.md), all on the creator's path, where
 * handing out a process that waits already costs one message. A burst
 * larger than the idle pool forks from every parked process at once, as
 * before; a pool of one (what the DS-LB drivers ask for) keeps forking: its
 * refill, an exec and the program's start-up, would cost the job more CPU
 * than the fork. */
static int ivmd_pool_direct(const ivmd_job_data_t *jd, const ivmd_parked_t *p, int more)
{
    const ivmd_parked_t *q;
    int idle = 0;

    for (q = jd->parked; q != NULL; q = q->next) {
        idle += !q->dead && q->conn != NULL && q->forking == NULL &&
                q->slot.devtype == p->slot.devtype;
    }
    return idle >= 2 && more + 1 <= idle;
}

int ivmd_pool_take(ivmd_pool_t *pl, ivmd_job_t *job, ivmd_pe_t *pe, int more)
{
    ivmd_job_data_t *jd = job->data;
    ivm_msg_enter_rep_t rep;
    ivmd_parked_t *p;
    ivmd_conn_t *c;

    if (jd == NULL || pe->node >= 0) {
        return 0;
    }
    for (p = jd->parked; p != NULL; p = p->next) {
        if (p->dead || p->conn == NULL || p->forking != NULL || p->slot.devtype != pe->devtype) {
            continue;
        }
        if (IVM_DEV_IS_GPU(p->slot.devtype) && !ivmd_ctl_gpu_alive(pl->env)) {
            /* ivm-gpud is gone: the cold path reports it (spawn). */
            ivmd_pool_kill(p);
            continue;
        }
        if (!ivmd_pool_exe_same(jd, p)) {
            ivm_info("job %u: %s changed or vanished since parked process pid %d started: "
                     "not handed out", job->id, jd->exe, (int)p->slot.pid);
            ivmd_pool_kill(p);
            continue;
        }
        if (ivmd_pool_gone(p)) {
            ivmd_pool_kill(p);
            continue;
        }
        break;
    }
    if (p == NULL) {
        /* All busy forking: the PE waits for the first to park again (a
         * fork, ~0.1-0.3 ms) rather than an exec of its own (~1 ms of CPU). */
        return !job->ending && ivmd_pool_will_repark(jd, pe->devtype) &&
               ivmd_pool_enqueue(jd, pe);
    }
    if (p->forkable && jd->bind == IVM_BIND_DEVICE && !ivmd_pool_direct(jd, p, more)) {
        return ivmd_pool_fork(pl, job, p, pe);
    }
    /* Handed out itself: where the request fits the idle pool
     * (ivmd_pool_direct), and a forkable one when the job binds its PEs
     * otherwise than to their device (--bind-to core, numa, none), so that
     * the PE is bound before its ivmEnter returns (a fork child runs before
     * its pid is known). */
    c = p->conn;
    ivmd_pool_unlink(jd, p);
    pe->pid   = p->slot.pid;
    pe->token = p->slot.token;
    ivmd_spawn_bind(pl->spawn, job, pe, pe->pid);
    ivmd_pool_conn_to_pe(pl, job, c, pe);
    ivmd_output_retag(pl->output, job->id, p->slot.id, pe->id);
    ivmd_pool_enter_rep(pl, job, pe, 0, &rep);
    ivmd_conn_reply(pl->env->d, c, IVM_MSG_ENTER, p->seq, &rep, sizeof(rep), NULL, NULL, 0);
    ++pl->pooled;
    ivm_debug("job %u: pe %d is parked process pid %d (warm)", job->id, pe->id,
              (int)pe->pid);
    free(p);
    return 1;
}

void ivmd_pool_disconnect(ivmd_pool_t *pl, ivmd_conn_t *c)
{
    ivmd_parked_t *p = c->parked;

    c->parked = NULL;
    p->conn   = NULL;
    if (!p->dead) {
        ivm_info("job %u: parked process pid %d disconnected; it is replaced",
                 p->slot.job->id, (int)p->slot.pid);
    }
    ivmd_pool_kill(p);
}

int ivmd_pool_reaped(ivmd_pool_t *pl, pid_t pid, int wstatus)
{
    ivmd_job_data_t *jd;
    ivmd_parked_t *p = NULL;
    ivmd_job_t *job;
    int early;

    for (job = pl->env->reg->jobs; job != NULL && p == NULL; job = job->next) {
        jd = job->data;
        for (p = (jd != NULL) ? jd->parked : NULL; p != NULL; p = p->next) {
            if (p->slot.pid == pid) {
                break;
            }
        }
        if (p != NULL) {
            break;
        }
    }
    if (p == NULL) {
        return 0;
    }
    jd = job->data;
    if (p->forking != NULL) {
        /* Gone between a fork and its report: its child is not known. */
        ivmd_pool_forked(pl, p, 0);
    }
    early = !p->dead && p->conn == NULL && !p->forkable && !job->ending;
    if (early && p->bind_now) {
        /* Not counted as the program's: those started bound may all die so. */
        if (jd->pool_bind_now > 0) {
            ivm_warn("job %u: a parked process started with LD_BIND_NOW=1 ended before "
                     "ivmEnter (status 0x%x): parked processes start without it from now on",
                     job->id, wstatus);
            jd->pool_bind_now = -1;
        }
    } else if (early) {
        if (++jd->pool_early_deaths >= IVMD_POOL_MAX_EARLY_DEATHS && jd->pe_pool > 0) {
            ivm_warn("job %u: %d parked processes ended before ivmEnter (last status "
                     "0x%x): the program does not park; warm pool off for this job",
                     job->id, jd->pool_early_deaths, wstatus);
            jd->pe_pool = 0;
        }
    } else if (!p->dead) {
        ivm_info("job %u: parked process pid %d died; it is replaced", job->id, (int)pid);
    }
    if (p->conn != NULL) {
        ivmd_conn_t *c = p->conn;
        c->parked = NULL;
        p->conn   = NULL;
        ivmd_conn_close(pl->env->d, c, "parked process ended");
    }
    ivmd_pool_unlink(jd, p);
    free(p);
    ivmd_pool_drain(pl, job);
    pl->env->job_collect(pl->env->d, job);
    return 1;
}

void ivmd_pool_gpus_lost(ivmd_pool_t *pl)
{
    ivmd_job_data_t *jd;
    ivmd_parked_t *p;
    ivmd_job_t *job;

    for (job = pl->env->reg->jobs; job != NULL; job = job->next) {
        jd = job->data;
        for (p = (jd != NULL) ? jd->parked : NULL; p != NULL; p = p->next) {
            if (IVM_DEV_IS_GPU(p->slot.devtype) && !p->dead) {
                ivm_info("job %u: parked GPU process pid %d killed: ivm-gpud is gone",
                         job->id, (int)p->slot.pid);
                ivmd_pool_kill(p);
            }
        }
    }
}

void ivmd_pool_job_end(ivmd_pool_t *pl, ivmd_job_t *job)
{
    ivmd_job_data_t *jd = job->data;
    ivmd_parked_t *p;

    for (p = (jd != NULL) ? jd->parked : NULL; p != NULL; p = p->next) {
        /* Its process group too (a parked process leads its own): the PEs it
         * forked, one among them whose pid it could not report before it
         * died; the job's live PEs are killed now anyway. */
        kill(-p->slot.pid, SIGKILL);
        ivmd_pool_kill(p);
    }
}

int ivmd_pool_busy(const ivmd_job_t *job)
{
    const ivmd_job_data_t *jd = job->data;

    return jd != NULL && jd->parked != NULL;
}

uint32_t ivmd_pool_count(const ivmd_pool_t *pl)
{
    const ivmd_job_t *job;
    const ivmd_parked_t *p;
    uint32_t n = 0;

    for (job = pl->env->reg->jobs; job != NULL; job = job->next) {
        const ivmd_job_data_t *jd = job->data;
        for (p = (jd != NULL) ? jd->parked : NULL; p != NULL; p = p->next) {
            n += (!p->dead && p->conn != NULL);
        }
    }
    return n;
}

void ivmd_pool_init(ivmd_pool_t *pl, const ivmd_ctl_env_t *env, struct ivmd_spawn *spawn,
                    struct ivmd_output *output)
{
    pl->env    = env;
    pl->spawn  = spawn;
    pl->output = output;
    pl->pooled = 0;
}
