/* --slurm: the real cluster's bring-up through srun, without MPI. ivmrun runs
 *   srun --nodes=N --ntasks=N --ntasks-per-node=1 --kill-on-bad-exit
 *        --input=all --whole --overlap --mpi=none ivm-boot-srun --hosts LIST
 * and is itself the hub of the exchange (the IVMRUN_SRUN_* lines of
 * ivmrun.h): it collects every task's (node, address, port) from srun's
 * stdout, sends the fresh secret and the whole table to all tasks through
 * srun's stdin, then gives the nodes their turns to join one by one
 * (ivmrun_join_order) and waits until every node's daemon sees all its
 * peers. srun's stdin stays open for the run; ivmrun_boot_close closes it,
 * which stops every task. */
#include "ivmrun.h"

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

#define IVMRUN_SRUN_OUT_MAX 4096 /* bytes of srun's output held while looking for a line */
#define IVMRUN_SRUN_CANCEL_WAIT 5.0 /* s scancel may take */
#define IVMRUN_SRUN_SWEEP_WAIT  1.0 /* s for the killed daemons to stop answering */
#define IVMRUN_SRUN_SWEEP_POLL_US 10000 /* between two looks meanwhile */

typedef struct ivmrun_srun {
    ivmrun_boot_t *b;
    int            sigfd;
    double         boot_wait; /* --boot-wait, s */
    double         deadline;  /* from it */
    int           *signo_p;
    char           out[IVMRUN_SRUN_OUT_MAX]; /* srun's output, not yet a line */
    size_t         got;
    unsigned      *ports;    /* per node; 0 = not reported yet */
    char         (*addrs)[64];
    int           *joined;   /* per node: JOINED seen */
    int           *up;       /* per node: UP seen */
    int            nup;
} ivmrun_srun_t;

/* The next "IVM-BOOT " line of srun's output into line (other lines are
 * passed on to ivmrun's stdout). 0, or an error status (logged; on a
 * terminating signal *s->signo_p is set). */
static ivmError_t ivmrun_srun_line(ivmrun_srun_t *s, char *line, size_t len)
{
    ivmrun_boot_t *b = s->b;
    struct pollfd pfds[2];
    char why[64], *nl;
    double left;
    size_t n;
    ssize_t r;
    int term;

    for (;;) {
        while ((nl = memchr(s->out, '\n', s->got)) != NULL) {
            n = (size_t)(nl + 1 - s->out);
            if (strncmp(s->out, "IVM-BOOT ", strlen("IVM-BOOT ")) == 0 && n <= len) {
                memcpy(line, s->out, n - 1);
                line[n - 1] = '\0';
                s->got -= n;
                memmove(s->out, nl + 1, s->got);
                return IVM_SUCCESS;
            }
            (void)ivmrun_fd_write_all(STDOUT_FILENO, s->out, n); /* not ours */
            s->got -= n;
            memmove(s->out, nl + 1, s->got);
        }
        if (s->got == sizeof(s->out)) { /* a line too long to be ours */
            (void)ivmrun_fd_write_all(STDOUT_FILENO, s->out, s->got);
            s->got = 0;
        }
        left = s->deadline - ivmrun_time_now();
        if (left <= 0) {
            ivm_error("the cluster's daemons did not come up within %g s (--boot-wait); "
                      "stopping them", s->boot_wait);
            return IVM_ERROR_TIMEOUT;
        }
        pfds[0].fd     = b->out_fd;
        pfds[0].events = POLLIN;
        pfds[1].fd     = s->sigfd;
        pfds[1].events = POLLIN;
        if (poll(pfds, 2, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("poll failed while waiting for srun: %m");
            return IVM_ERROR_INTERNAL;
        }
        if (pfds[1].revents & POLLIN) {
            term = ivmrun_proc_signals(s->sigfd, &b->pid, &b->status);
            if (term != 0) {
                ivm_info("got signal %d while the cluster was forming; stopping it",
                         term);
                *s->signo_p = term;
                return IVM_ERROR_INTERNAL;
            }
        }
        if (!(pfds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            continue;
        }
        r = read(b->out_fd, s->out + s->got, sizeof(s->out) - s->got);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            ivm_error("cannot read srun's output: %m");
            return IVM_ERROR_INTERNAL;
        }
        if (r == 0) {
            /* srun is ending: a task failed (it said why) or srun could not
             * start them (it said why). */
            if (s->got > 0) {
                (void)ivmrun_fd_write_all(STDOUT_FILENO, s->out, s->got);
                s->got = 0;
            }
            close(b->out_fd);
            b->out_fd = -1;
            while (b->pid > 0 && waitpid(b->pid, &b->status, 0) < 0 && errno == EINTR) {
            }
            b->pid = 0;
            ivmrun_proc_status_text(b->status, why, sizeof(why));
            ivm_error("the cluster's daemons did not come up: srun ended with %s "
                      "(see the messages above)", why);
            return IVM_ERROR_NO_DAEMON;
        }
        s->got += (size_t)r;
    }
}

/* Take one line from a task: NODE, JOINED or UP. For UP 0, node0's socket
 * path goes to d->path. 0, or an error status (logged). */
static ivmError_t ivmrun_srun_take(ivmrun_srun_t *s, const char *line, ivmrun_daemon_t *d)
{
    int n = s->b->nhosts, k, end = 0;
    char addr[64], path[sizeof(d->path)];
    unsigned port;
    size_t plen;

    plen = strlen(IVMRUN_SRUN_NODE);
    if (strncmp(line, IVMRUN_SRUN_NODE, plen) == 0) {
        if (sscanf(line + plen, "%d %63s %u%n", &k, addr, &port, &end) != 3 ||
            line[plen + (size_t)end] != '\0' || k < 0 || k >= n || port == 0 ||
            port > 65535) {
            goto malformed;
        }
        if (s->ports[k] != 0) {
            ivm_error("two tasks of srun are node%d (one task per host is needed)", k);
            return IVM_ERROR_INVALID_VALUE;
        }
        s->ports[k] = port;
        snprintf(s->addrs[k], sizeof(s->addrs[k]), "%s", addr);
        ivm_debug("node%d (%s): its ivmd listens on %s port %u", k, s->b->hosts[k], addr,
                  port);
        return IVM_SUCCESS;
    }
    plen = strlen(IVMRUN_SRUN_JOINED);
    if (strncmp(line, IVMRUN_SRUN_JOINED, plen) == 0) {
        if (sscanf(line + plen, "%d%n", &k, &end) != 1 || line[plen + (size_t)end] != '\0' ||
            k < 0 || k >= n) {
            goto malformed;
        }
        s->joined[k] = 1;
        return IVM_SUCCESS;
    }
    plen = strlen(IVMRUN_SRUN_UP);
    if (strncmp(line, IVMRUN_SRUN_UP, plen) == 0) {
        if (sscanf(line + plen, "%d%n", &k, &end) != 1 || k < 0 || k >= n ||
            (line[plen + (size_t)end] != '\0' && line[plen + (size_t)end] != ' ')) {
            goto malformed;
        }
        if (line[plen + (size_t)end] == ' ') {
            if (strlen(line + plen + (size_t)end + 1) >= sizeof(path)) {
                goto malformed;
            }
            snprintf(path, sizeof(path), "%s", line + plen + (size_t)end + 1);
            if (s->b->sockets != NULL && s->b->sockets[k] == NULL) {
                s->b->sockets[k] = strdup(path); /* NULL: not swept (srun.c) */
            }
        } else if (k == 0) {
            goto malformed;
        }
        if (k == 0) {
            snprintf(d->path, sizeof(d->path), "%s", path);
        }
        if (!s->up[k]) {
            s->up[k] = 1;
            ++s->nup;
        }
        return IVM_SUCCESS;
    }
    plen = strlen(IVMRUN_SRUN_STEP);
    if (strncmp(line, IVMRUN_SRUN_STEP, plen) == 0) {
        char step[sizeof(s->b->step)];
        if (sscanf(line + plen, "%31[0-9.]%n", step, &end) != 1 ||
            line[plen + (size_t)end] != '\0') {
            goto malformed;
        }
        snprintf(s->b->step, sizeof(s->b->step), "%s", step);
        ivm_debug("the tasks are Slurm step %s", step);
        return IVM_SUCCESS;
    }
    if (strncmp(line, IVMRUN_BOOT_READY, strlen(IVMRUN_BOOT_READY)) == 0) {
        ivm_error("srun started ivm-boot, not ivm-boot-srun (see --boot)");
        return IVM_ERROR_PROTOCOL;
    }
    (void)ivmrun_fd_write_all(STDOUT_FILENO, line, strlen(line)); /* not ours */
    (void)ivmrun_fd_write_all(STDOUT_FILENO, "\n", 1);
    return IVM_SUCCESS;

malformed:
    ivm_error("malformed line from ivm-boot-srun: '%.80s'", line);
    return IVM_ERROR_PROTOCOL;
}

/* Write text to srun's stdin (every task's). 0, or an error status (logged). */
static ivmError_t ivmrun_srun_send(ivmrun_srun_t *s, const char *text, size_t len)
{
    if (ivmrun_fd_write_all(s->b->in_fd, text, len) != 0) {
        ivm_error("cannot write to srun's input: %m");
        return IVM_ERROR_DAEMON_LOST;
    }
    return IVM_SUCCESS;
}

/* The exchange: table in, secret and table out, turns, everyone up. */
static ivmError_t ivmrun_srun_exchange(ivmrun_srun_t *s, ivmrun_daemon_t *d)
{
    static const char hex[] = "0123456789abcdef";
    char line[IVMRUN_SRUN_LINE_MAX];
    char msg[sizeof(IVMRUN_SRUN_SECRET) + 2 * IVM_SECRET_LEN + 1];
    uint8_t secret[IVM_SECRET_LEN];
    int n = s->b->nhosts, k, nnodes = 0, pos, *order = NULL;
    ivmError_t status;
    size_t len;

    while (nnodes < n) {
        status = ivmrun_srun_line(s, line, sizeof(line));
        if (status == IVM_SUCCESS) {
            status = ivmrun_srun_take(s, line, d);
        }
        if (status != IVM_SUCCESS) {
            return status;
        }
        for (nnodes = 0, k = 0; k < n; ++k) {
            nnodes += (s->ports[k] != 0);
        }
    }

    /* The secret, fresh for this run, then the table: to every task. */
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
    status = ivmrun_srun_send(s, msg, len);
    explicit_bzero(secret, sizeof(secret));
    explicit_bzero(msg, sizeof(msg));
    for (k = 0; k < n && status == IVM_SUCCESS; ++k) {
        len    = (size_t)snprintf(line, sizeof(line), IVMRUN_SRUN_NODE "%d %s %u\n", k,
                                  s->addrs[k], s->ports[k]);
        status = ivmrun_srun_send(s, line, len);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }

    /* The turns: each node joins after the nodes it will dial have. */
    order = (n > 0) ? calloc((size_t)n, sizeof(*order)) : NULL;
    if (order == NULL) {
        ivm_error("out of memory");
        return IVM_ERROR_NO_MEMORY;
    }
    ivmrun_join_order(n, order);
    for (pos = 0; pos < n && status == IVM_SUCCESS; ++pos) {
        k      = order[pos];
        len    = (size_t)snprintf(line, sizeof(line), IVMRUN_SRUN_JOIN "%d\n", k);
        status = ivmrun_srun_send(s, line, len);
        while (status == IVM_SUCCESS && !s->joined[k]) {
            status = ivmrun_srun_line(s, line, sizeof(line));
            if (status == IVM_SUCCESS) {
                status = ivmrun_srun_take(s, line, d);
            }
        }
    }
    free(order);
    while (status == IVM_SUCCESS && s->nup < n) {
        status = ivmrun_srun_line(s, line, sizeof(line));
        if (status == IVM_SUCCESS) {
            status = ivmrun_srun_take(s, line, d);
        }
    }
    return status;
}

/* b->scancel: scancel in the directory of --srun when that is a path, else
 * "scancel" (from PATH). 0, or -1 when out of memory (logged). */
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

void ivmrun_srun_cancel(ivmrun_boot_t *b, int sigfd)
{
    char *argv[] = {b->scancel, "--quiet", "--signal=TERM", b->step, NULL};
    double deadline = ivmrun_time_now() + IVMRUN_SRUN_CANCEL_WAIT, left;
    struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
    ivmrun_spawn_t spec;
    int err = 0, status = 0;
    pid_t pid = 0;

    if (b->scancel == NULL || b->step[0] == '\0') {
        ivmrun_srun_sweep(b);
        return;
    }
    memset(&spec, 0, sizeof(spec));
    spec.file    = b->scancel;
    spec.argv    = argv;
    spec.fd_in   = -1;
    spec.fd_out  = -1;
    spec.fd_err  = -1;
    spec.keep_fd = -1;
    if (ivmrun_proc_spawn(&spec, &pid, &err) != IVM_SUCCESS) {
        ivm_warn("srun is gone and its tasks may still run, but '%s' cannot be run to "
                 "stop them (step %s): %s", b->scancel, b->step, strerror(err));
        ivmrun_srun_sweep(b);
        return;
    }
    ivm_info("srun is gone: sending its step %s SIGTERM (%s)", b->step, b->scancel);
    while (pid > 0) {
        left = deadline - ivmrun_time_now();
        if (left <= 0) {
            ivm_warn("%s did not return within %g s; killing it", b->scancel,
                     IVMRUN_SRUN_CANCEL_WAIT);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            ivmrun_srun_sweep(b);
            return;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0) {
            ivmrun_proc_signals(sigfd, &pid, &status);
        }
        ivmrun_proc_reap(&pid, &status);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[64];
        ivmrun_proc_status_text(status, why, sizeof(why));
        ivm_warn("%s --signal=TERM %s ended with %s", b->scancel, b->step, why);
    }
    ivmrun_srun_sweep(b);
}

ivmError_t ivmrun_srun_open(ivmrun_boot_t *b, ivmrun_daemon_t *d,
                            const ivmrun_config_t *cfg, char *const *specs,
                            int sigfd, const sigset_t *child_mask, int *signo_p)
{
    enum { MAX_ARGS = 96 };
    char exe[PATH_MAX], nodes[32], ntasks[32], dwait[32], uwait[32];
    char *argv[MAX_ARGS], *extra = NULL, *specs_arg = NULL;
    int argc = 0;
    double start = ivmrun_time_now();
    ivmError_t status = IVM_ERROR_INTERNAL;
    ivmrun_srun_t *s;

    b->pid      = 0;
    b->in_fd    = -1;
    b->out_fd   = -1;
    b->launcher = "srun";
    b->step[0]  = '\0';
    free(b->sockets);
    b->sockets = calloc((size_t)b->nhosts, sizeof(*b->sockets));
    s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->ports  = calloc((size_t)b->nhosts, sizeof(*s->ports));
        s->addrs  = calloc((size_t)b->nhosts, sizeof(*s->addrs));
        s->joined = calloc((size_t)b->nhosts, sizeof(*s->joined));
        s->up     = calloc((size_t)b->nhosts, sizeof(*s->up));
    }
    if (s == NULL || s->ports == NULL || s->addrs == NULL || s->joined == NULL ||
        s->up == NULL || b->sockets == NULL) {
        ivm_error("out of memory");
        status = IVM_ERROR_NO_MEMORY;
        goto out;
    }
    s->b        = b;
    s->sigfd    = sigfd;
    s->boot_wait = cfg->boot_wait;
    s->deadline  = start + cfg->boot_wait;
    s->signo_p  = signo_p;
    if (ivmrun_boot_find(cfg, "ivm-boot-srun", exe, sizeof(exe)) != 0) {
        status = IVM_ERROR_NO_DAEMON;
        goto out;
    }
    if (ivmrun_srun_scancel_path(b, cfg) != 0) {
        status = IVM_ERROR_NO_MEMORY;
        goto out;
    }
    snprintf(nodes, sizeof(nodes), "--nodes=%d", b->nhosts);
    snprintf(ntasks, sizeof(ntasks), "--ntasks=%d", b->nhosts);
    snprintf(dwait, sizeof(dwait), "%g", cfg->daemon_wait);
    /* ivm-boot-srun gives up first, saying which node misses which peers. */
    snprintf(uwait, sizeof(uwait), "%g", cfg->boot_wait * 0.8);

    argv[argc++] = cfg->srun;
    argv[argc++] = nodes;
    argv[argc++] = ntasks;
    argv[argc++] = "--ntasks-per-node=1";
    argv[argc++] = "--kill-on-bad-exit=1";
    argv[argc++] = "--input=all";  /* ivmrun's lines reach every task */
    argv[argc++] = "--whole";      /* all the job's CPUs of a node, for ivmd's PEs */
    argv[argc++] = "--overlap";    /* and other steps of the job may share them */
    argv[argc++] = "--mpi=none";
    if (ivmrun_boot_extra(cfg->srun_args, "--srun-args", argv, &argc, MAX_ARGS, &extra) != 0) {
        goto out;
    }
    if (ivmrun_boot_node_args(b, cfg, specs, exe, dwait, uwait, argv, &argc,
                              &specs_arg) != 0) {
        goto out;
    }

    if (ivmrun_boot_launch(b, argv, NULL, child_mask,
                           " (install Slurm's client, or name srun with --srun)") != 0) {
        goto out;
    }
    ivm_info("started %s (pid %d): ivm-boot-srun '%s' on %d host%s (%s)", cfg->srun,
             (int)b->pid, exe, b->nhosts, b->nhosts == 1 ? "" : "s", b->host_list);

    status = ivmrun_srun_exchange(s, d);
    if (status == IVM_SUCCESS) {
        snprintf(d->node, sizeof(d->node), "node0");
        d->pid     = 0;
        d->started = 0; /* ivm-boot-srun stops it */
        status     = ivmrun_boot_check(b, d);
    }
    if (status != IVM_SUCCESS) {
        ivmrun_boot_close(b, sigfd);
        goto out;
    }
    ivm_info("cluster of %d node%s is up (%.0f ms); node0's daemon is %s", b->nhosts,
             b->nhosts == 1 ? "" : "s", (ivmrun_time_now() - start) * 1000, d->path);
    /* Anything held after the last line is passed on. */
    if (s->got > 0) {
        (void)ivmrun_fd_write_all(STDOUT_FILENO, s->out, s->got);
    }
    fcntl(b->out_fd, F_SETFL, O_NONBLOCK);

out:
    if (s != NULL) {
        free(s->ports);
        free(s->addrs);
        free(s->joined);
        free(s->up);
        free(s);
    }
    free(extra);
    free(specs_arg);
    return status;
}
