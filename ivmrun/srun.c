/* --slurm: the real cluster's bring-up through srun, without MPI. ivmrun runs
 *   srun --nodes=N --ntasks=N --ntasks-per-node=1 --kill-on-bad-exit
 *        --input=all --whole --overlap --mpi=none ivm-boot-srun --hosts LIST
 * and is itself the hub of the exchange (the IVMRUN_SRUN_* lines of
 * ivmrun.h): it collects every task's (node, address, port) from srun's
 * stdout, sends the fresh secret and the whole table to all tasks through
 * srun's stdin (the table phase), then gives the nodes their turns to join
 * one by one (ivmrun_join_order) and waits until every node's daemon sees
 * all its peers (wait_ready). srun's stdin stays open for the run;
 * ivmrun_boot_close closes it, which stops every task. */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_SRUN_CANCEL_WAIT 5.0 /* s scancel may take */
#define IVMRUN_SRUN_SWEEP_WAIT  1.0 /* s for the killed daemons to stop answering */
#define IVMRUN_SRUN_SWEEP_POLL_US 10000 /* between two looks meanwhile */

/* The exchange while the cluster forms (c->boot.srun). */
typedef struct ivmrun_srun {
    unsigned      *ports;    /* per node; 0 = not reported yet */
    char         (*addrs)[64];
    int           *joined;   /* per node: JOINED seen */
    int           *up;       /* per node: UP seen */
    int            nup;
} ivmrun_srun_t;

/* One kind of line from the tasks: its prefix and what takes the rest. */
typedef struct ivmrun_srun_kind {
    const char *prefix;
    ivmError_t (*take)(ivmrun_cluster_t *c, const char *arg);
} ivmrun_srun_kind_t;

static ivmError_t ivmrun_srun_malformed(const char *prefix, const char *arg)
{
    ivm_error("malformed line from ivm-boot-srun: '%.80s%.*s'", prefix,
              (int)(80 - strlen(prefix)), arg);
    return IVM_ERROR_PROTOCOL;
}

/* "NODE k ADDR PORT": node k's daemon listens there. */
static ivmError_t ivmrun_srun_take_node(ivmrun_cluster_t *c, const char *arg)
{
    ivmrun_srun_t *s = c->boot.srun;
    char addr[64];
    unsigned port;
    int k, end = 0;

    if (sscanf(arg, "%d %63s %u%n", &k, addr, &port, &end) != 3 || arg[end] != '\0' ||
        k < 0 || k >= c->boot.nhosts || port == 0 || port > 65535) {
        return ivmrun_srun_malformed(IVMRUN_SRUN_NODE, arg);
    }
    if (s->ports[k] != 0) {
        ivm_error("two tasks of srun are node%d (one task per host is needed)", k);
        return IVM_ERROR_INVALID_VALUE;
    }
    s->ports[k] = port;
    snprintf(s->addrs[k], sizeof(s->addrs[k]), "%s", addr);
    ivm_debug("node%d (%s): its ivmd listens on %s port %u", k, c->boot.hosts[k], addr,
              port);
    return IVM_SUCCESS;
}

/* "JOINED k": node k's daemon has the table. */
static ivmError_t ivmrun_srun_take_joined(ivmrun_cluster_t *c, const char *arg)
{
    int k, end = 0;

    if (sscanf(arg, "%d%n", &k, &end) != 1 || arg[end] != '\0' || k < 0 ||
        k >= c->boot.nhosts) {
        return ivmrun_srun_malformed(IVMRUN_SRUN_JOINED, arg);
    }
    c->boot.srun->joined[k] = 1;
    return IVM_SUCCESS;
}

/* "UP k SOCKET": node k's daemon sees every peer; node0's socket is the
 * root PE's. */
static ivmError_t ivmrun_srun_take_up(ivmrun_cluster_t *c, const char *arg)
{
    ivmrun_boot_t *b = &c->boot;
    const char *path;
    int k, end = 0;

    if (sscanf(arg, "%d%n", &k, &end) != 1 || k < 0 || k >= b->nhosts ||
        (arg[end] != '\0' && arg[end] != ' ') || (arg[end] == '\0' && k == 0)) {
        return ivmrun_srun_malformed(IVMRUN_SRUN_UP, arg);
    }
    path = (arg[end] == ' ') ? arg + end + 1 : "";
    if (strlen(path) >= sizeof(c->nodes[0].path)) {
        return ivmrun_srun_malformed(IVMRUN_SRUN_UP, arg);
    }
    if (path[0] != '\0' && b->sockets != NULL && b->sockets[k] == NULL) {
        b->sockets[k] = strdup(path); /* NULL: not swept */
    }
    if (k == 0) {
        snprintf(c->nodes[0].path, sizeof(c->nodes[0].path), "%s", path);
    }
    if (!b->srun->up[k]) {
        b->srun->up[k] = 1;
        ++b->srun->nup;
    }
    return IVM_SUCCESS;
}

/* "STEP JOBID.STEPID": the Slurm step of the tasks. */
static ivmError_t ivmrun_srun_take_step(ivmrun_cluster_t *c, const char *arg)
{
    char step[sizeof(c->boot.step)];
    int end = 0;

    if (sscanf(arg, "%31[0-9.]%n", step, &end) != 1 || arg[end] != '\0') {
        return ivmrun_srun_malformed(IVMRUN_SRUN_STEP, arg);
    }
    snprintf(c->boot.step, sizeof(c->boot.step), "%s", step);
    ivm_debug("the tasks are Slurm step %s", step);
    return IVM_SUCCESS;
}

/* ivm-boot's ready line: srun runs the wrong program. */
static ivmError_t ivmrun_srun_take_ready(ivmrun_cluster_t *c, const char *arg)
{
    (void)c;
    (void)arg;
    ivm_error("srun started ivm-boot, not ivm-boot-srun (see --boot)");
    return IVM_ERROR_PROTOCOL;
}

static const ivmrun_srun_kind_t ivmrun_srun_kinds[] = {
    {IVMRUN_SRUN_NODE,   ivmrun_srun_take_node},
    {IVMRUN_SRUN_JOINED, ivmrun_srun_take_joined},
    {IVMRUN_SRUN_UP,     ivmrun_srun_take_up},
    {IVMRUN_SRUN_STEP,   ivmrun_srun_take_step},
    {IVMRUN_BOOT_READY,  ivmrun_srun_take_ready},
    {NULL, NULL}};

/* The next line from a task, taken in. 0, or an error status (logged). */
static ivmError_t ivmrun_srun_next(ivmrun_cluster_t *c)
{
    const ivmrun_srun_kind_t *kind;
    char line[IVMRUN_SRUN_LINE_MAX];
    ivmError_t status;
    size_t plen;

    status = ivmrun_boot_line(c, line, sizeof(line));
    if (status != IVM_SUCCESS) {
        return status;
    }
    for (kind = ivmrun_srun_kinds; kind->prefix != NULL; ++kind) {
        plen = strlen(kind->prefix);
        if (strncmp(line, kind->prefix, plen) == 0) {
            return kind->take(c, line + plen);
        }
    }
    (void)ivmrun_fd_write_all(STDOUT_FILENO, line, strlen(line)); /* not ours */
    (void)ivmrun_fd_write_all(STDOUT_FILENO, "\n", 1);
    return IVM_SUCCESS;
}

/* Write text to srun's stdin (every task's). 0, or an error status (logged). */
static ivmError_t ivmrun_srun_send(ivmrun_boot_t *b, const char *text, size_t len)
{
    if (ivmrun_fd_write_all(b->in_fd, text, len) != 0) {
        ivm_error("cannot write to srun's input: %m");
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVM_SUCCESS;
}

/* The secret, fresh for this run, then the table: to every task. */
static ivmError_t ivmrun_srun_send_table(ivmrun_cluster_t *c)
{
    static const char hex[] = "0123456789abcdef";
    char msg[sizeof(IVMRUN_SRUN_SECRET) + 2 * IVM_SECRET_LEN + 1];
    char line[IVMRUN_SRUN_LINE_MAX];
    uint8_t secret[IVM_SECRET_LEN];
    ivmrun_srun_t *s = c->boot.srun;
    ivmError_t status;
    size_t len;
    int k;

    if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret)) {
        ivm_error("cannot make the cluster secret: getrandom: %m");
        return IVM_ERROR_INTERNAL;
    }
    len = (size_t)snprintf(msg, sizeof(msg), "%s", IVMRUN_SRUN_SECRET);
    for (k = 0; k < IVM_SECRET_LEN; ++k) {
        msg[len++] = hex[secret[k] >> 4];
        msg[len++] = hex[secret[k] & 15];
    }
    msg[len++] = '\n';
    status = ivmrun_srun_send(&c->boot, msg, len);
    explicit_bzero(secret, sizeof(secret));
    explicit_bzero(msg, sizeof(msg));
    for (k = 0; k < c->boot.nhosts && status == IVM_SUCCESS; ++k) {
        len    = (size_t)snprintf(line, sizeof(line), IVMRUN_SRUN_NODE "%d %s %u\n", k,
                                  s->addrs[k], s->ports[k]);
        status = ivmrun_srun_send(&c->boot, line, len);
    }
    return status;
}

/* Table phase: every task's address in, secret and table out, then the
 * turns: each node joins after the nodes it will dial have. */
static ivmError_t ivmrun_srun_table(ivmrun_cluster_t *c)
{
    int n = c->boot.nhosts, k, pos, nnodes = 0, order[IVM_CLUSTER_MAX_NODES];
    ivmrun_srun_t *s = c->boot.srun;
    char line[32];
    ivmError_t status = IVM_SUCCESS;
    size_t len;

    while (status == IVM_SUCCESS && nnodes < n) {
        status = ivmrun_srun_next(c);
        for (nnodes = 0, k = 0; k < n; ++k) {
            nnodes += (s->ports[k] != 0);
        }
    }
    if (status == IVM_SUCCESS) {
        status = ivmrun_srun_send_table(c);
    }
    ivmrun_join_order(n, order);
    for (pos = 0; pos < n && status == IVM_SUCCESS; ++pos) {
        k      = order[pos];
        len    = (size_t)snprintf(line, sizeof(line), IVMRUN_SRUN_JOIN "%d\n", k);
        status = ivmrun_srun_send(&c->boot, line, len);
        while (status == IVM_SUCCESS && !s->joined[k]) {
            status = ivmrun_srun_next(c);
        }
    }
    return status;
}

static void ivmrun_srun_free(ivmrun_boot_t *b)
{
    if (b->srun != NULL) {
        free(b->srun->ports);
        free(b->srun->addrs);
        free(b->srun->joined);
        free(b->srun->up);
        free(b->srun);
        b->srun = NULL;
    }
}

/* Until every node's daemon sees all its peers. */
static ivmError_t ivmrun_srun_wait_ready(ivmrun_cluster_t *c)
{
    ivmError_t status = IVM_SUCCESS;

    while (status == IVM_SUCCESS && c->boot.srun->nup < c->boot.nhosts) {
        status = ivmrun_srun_next(c);
    }
    if (status == IVM_SUCCESS) {
        status = ivmrun_boot_ready(c, c->boot.deadline - c->cfg->boot_wait);
    }
    if (status == IVM_SUCCESS) {
        ivmrun_srun_free(&c->boot);
    }
    return status;
}

static int ivmrun_srun_scancel_path(ivmrun_boot_t *b, const ivmrun_config_t *cfg)
{
    const char *slash = strrchr(cfg->srun, '/');
    size_t dir = (slash != NULL) ? (size_t)(slash - cfg->srun) + 1 : 0;

    free(b->scancel);
    b->scancel = malloc(dir + sizeof("scancel"));
    if (b->scancel == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    memcpy(b->scancel, cfg->srun, dir);
    memcpy(b->scancel + dir, "scancel", sizeof("scancel"));
    return 0;
}

/* The socket at path, if no daemon answers on it, and then its directory (a
 * run directory "boot-node<k>-XXXXXX", if empty). 1 when nothing is left
 * there, 0 while a daemon still answers. */
static int ivmrun_srun_sweep_one(const char *path)
{
    char dir[PATH_MAX], *slash;
    struct stat st;
    int fd;

    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        fd = ivm_sock_connect(path);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (unlink(path) == 0) {
            ivm_info("removed the socket %s of a daemon that srun's end killed", path);
        }
    }
    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        return 1;
    }
    *slash = '\0';
    slash  = strrchr(dir, '/');
    if (slash != NULL && strncmp(slash + 1, "boot-node", strlen("boot-node")) == 0 &&
        rmdir(dir) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
        ivm_debug("cannot remove %s: %m", dir);
    }
    return 1;
}

/* After srun's end: the sockets and run directories of this run's daemons
 * (their UP lines) that no daemon answers on, a second at most. */
static void ivmrun_srun_sweep(ivmrun_boot_t *b)
{
    double deadline = ivmrun_time_now() + IVMRUN_SRUN_SWEEP_WAIT;
    int k, left;

    for (;;) {
        left = 0;
        for (k = 0; k < b->nhosts && b->sockets != NULL; ++k) {
            if (b->sockets[k] != NULL && !ivmrun_srun_sweep_one(b->sockets[k])) {
                ++left;
            }
        }
        if (left == 0 || ivmrun_time_now() >= deadline) {
            break;
        }
        usleep(IVMRUN_SRUN_SWEEP_POLL_US);
    }
    if (left > 0) {
        ivm_warn("%d daemon%s of the cluster still answer%s %g s after srun's end", left,
                 left == 1 ? "" : "s", left == 1 ? "s" : "", IVMRUN_SRUN_SWEEP_WAIT);
    }
}

/* srun ended before its tasks were told to stop (killed). Slurm then kills
 * the step's processes, SIGKILL included (so far as seen: at once), and a
 * daemon killed so leaves its socket and run directory. Send the step
 * SIGTERM with scancel (for a Slurm that leaves the tasks running: it stops
 * each task and its daemon in order), then remove the sockets and run
 * directories of this run's daemons that no daemon answers on any more
 * (waiting a second at most for them to stop answering). Terminating
 * signals on sigfd are dropped. */
static void ivmrun_srun_cancel(ivmrun_boot_t *b, int sigfd)
{
    char *argv[] = {b->scancel, "--quiet", "--signal=TERM", b->step, NULL};
    ivmrun_spawn_t spec;
    int err = 0, status = 0;
    pid_t pid = 0;

    if (b->scancel == NULL || b->step[0] == '\0') {
        ivmrun_srun_sweep(b);
        return;
    }
    ivmrun_spawn_init(&spec, b->scancel, argv);
    if (ivmrun_proc_spawn(&spec, &pid, &err) != IVM_SUCCESS) {
        ivm_warn("srun is gone and its tasks may still run, but '%s' cannot be run to "
                 "stop them (step %s): %s", b->scancel, b->step, strerror(err));
        ivmrun_srun_sweep(b);
        return;
    }
    ivm_info("srun is gone: sending its step %s SIGTERM (%s)", b->step, b->scancel);
    if (!ivmrun_proc_wait_exit(&pid, &status, sigfd, IVMRUN_SRUN_CANCEL_WAIT)) {
        ivm_warn("%s did not return within %g s; killing it", b->scancel,
                 IVMRUN_SRUN_CANCEL_WAIT);
        ivmrun_proc_kill(&pid, &status);
        ivmrun_srun_sweep(b);
        return;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[64];
        ivmrun_proc_status_text(status, why, sizeof(why));
        ivm_warn("%s --signal=TERM %s ended with %s", b->scancel, b->step, why);
    }
    ivmrun_srun_sweep(b);
}

/* The launcher's end may have left the tasks running: stop them through
 * their Slurm step, when it is known. */
static void ivmrun_srun_orphans(ivmrun_boot_t *b, int sigfd)
{
    if (b->step[0] != '\0') {
        ivmrun_srun_cancel(b, sigfd);
    }
}

/* The exchange's state and the list of the nodes' sockets. 0 or an error. */
static ivmError_t ivmrun_srun_alloc(ivmrun_boot_t *b)
{
    size_t n = (size_t)b->nhosts;
    ivmrun_srun_t *s;

    free(b->sockets);
    b->sockets = calloc(n, sizeof(*b->sockets));
    b->srun = s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->ports  = calloc(n, sizeof(*s->ports));
        s->addrs  = calloc(n, sizeof(*s->addrs));
        s->joined = calloc(n, sizeof(*s->joined));
        s->up     = calloc(n, sizeof(*s->up));
    }
    if (s == NULL || s->ports == NULL || s->addrs == NULL || s->joined == NULL ||
        s->up == NULL || b->sockets == NULL) {
        ivm_error("out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivmrun_srun_start(ivmrun_cluster_t *c)
{
    const ivmrun_config_t *cfg = c->cfg;
    ivmrun_boot_t *b = &c->boot;
    char nodes[32], ntasks[32];
    char *args[] = {cfg->srun, nodes, ntasks, "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                    "--input=all",  /* ivmrun's lines reach every task */
                    "--whole",      /* all the job's CPUs of a node, for ivmd's PEs */
                    "--overlap",    /* and other steps of the job may share them */
                    "--mpi=none", NULL};
    ivmrun_boot_args_t *a = calloc(1, sizeof(*a));
    ivmError_t status = ivmrun_srun_alloc(b);

    b->step[0]  = '\0';
    b->orphans  = ivmrun_srun_orphans;
    b->deadline = ivmrun_time_now() + cfg->boot_wait;
    if (status == IVM_SUCCESS && a == NULL) {
        ivm_error("out of memory");
        status = IVM_ERROR_NO_MEMORY;
    }
    if (status != IVM_SUCCESS) {
        goto out;
    }
    if (ivmrun_boot_find(cfg, "ivm-boot-srun", a->exe, sizeof(a->exe)) != 0) {
        status = IVM_ERROR_NO_DAEMON;
        goto out;
    }
    if (ivmrun_srun_scancel_path(b, cfg) != 0) {
        status = IVM_ERROR_NO_MEMORY;
        goto out;
    }
    snprintf(nodes, sizeof(nodes), "--nodes=%d", b->nhosts);
    snprintf(ntasks, sizeof(ntasks), "--ntasks=%d", b->nhosts);
    status = IVM_ERROR_INTERNAL;
    if (ivmrun_boot_argv(c, a, args, cfg->srun_args, "--srun-args") != 0 ||
        ivmrun_boot_launch(b, a->argv, NULL, c->child_mask,
                           " (install Slurm's client, or name srun with --srun)") != 0) {
        goto out;
    }
    ivm_info("started %s (pid %d): ivm-boot-srun '%s' on %d host%s (%s)", cfg->srun,
             (int)b->pid, a->exe, b->nhosts, b->nhosts == 1 ? "" : "s", b->host_list);
    status = IVM_SUCCESS;
out:
    if (a != NULL) {
        ivmrun_boot_args_release(a);
        free(a);
    }
    return status;
}

static void ivmrun_srun_stop(ivmrun_cluster_t *c)
{
    ivmrun_boot_close(&c->boot, c->sigfd);
    ivmrun_srun_free(&c->boot);
}

const ivmrun_boot_ops_t ivmrun_boot_srun = {
    .name       = "srun",
    .check      = ivmrun_hosts_check,
    .start      = ivmrun_srun_start,
    .table      = ivmrun_srun_table,
    .wait_ready = ivmrun_srun_wait_ready,
    .reap       = ivmrun_hosts_reap,
    .stop       = ivmrun_srun_stop,
};
