/* Real clusters: what the two launchers of the per-host bring-up share.
 * mpirun (mpirun.c) and srun (srun.c) each start a bring-up program on every
 * host with the same options (ivmrun_boot_argv), in their own process group
 * with their stdin and stdout on pipes; ivmrun reads their output for the
 * bring-up's "IVM-BOOT " lines (ivmrun_boot_line) and passes the rest on,
 * checks that node0's daemon answers here and heads the whole cluster, and
 * at the end closes their stdin, which stops every node. */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_BOOT_STOP_WAIT 10.0  /* s from closing ivm-boot's stdin to SIGTERM */
#define IVMRUN_BOOT_KILL_WAIT 5.0   /* s from SIGTERM to SIGKILL */
#define IVMRUN_BOOT_INFO_WAIT 2000  /* ms for node0's INFO round trip */

int ivmrun_hosts_reap(ivmrun_cluster_t *c)
{
    char why[64];

    if (!ivmrun_proc_reap(&c->boot.pid, &c->boot.status)) {
        return 0;
    }
    ivmrun_proc_status_text(c->boot.status, why, sizeof(why));
    ivm_warn("%s, which keeps the cluster's daemons, exited early (%s)",
             c->boot.launcher, why);
    return 1;
}

int ivmrun_boot_find(const ivmrun_config_t *cfg, const char *name, char *buf, size_t len)
{
    char path[PATH_MAX + 16];
    const char *dirs, *colon;
    int dlen;

    if (cfg->boot != NULL && cfg->boot[0] != '\0') {
        snprintf(buf, len, "%s", cfg->boot);
        if (strchr(buf, '/') != NULL && access(buf, X_OK) != 0) {
            ivm_error("--boot %s: %m", buf);
            return -1;
        }
        if (strchr(buf, '/') != NULL) {
            return 0;
        }
    } else if (ivmrun_proc_beside_self(name, buf, len)) {
        return 0;
    } else {
        snprintf(buf, len, "%s", name);
    }
    dirs = getenv("PATH");
    for (; dirs != NULL && *dirs != '\0'; dirs = colon + 1) {
        colon = strchr(dirs, ':');
        dlen  = (int)(colon != NULL ? colon - dirs : (ptrdiff_t)strlen(dirs));
        if (dlen > 0 &&
            (size_t)snprintf(path, sizeof(path), "%.*s/%s", dlen, dirs, buf) < sizeof(path) &&
            access(path, X_OK) == 0) {
            return 0; /* mpirun and srun look it up the same way on each host */
        }
        if (colon == NULL) {
            break;
        }
    }
    if (strcmp(name, "ivm-boot") == 0) {
        ivm_error("%s not found beside ivmrun or in PATH: it is built only where CMake "
                  "finds MPI (install Open MPI's development files and rebuild), or "
                  "name it with --boot", buf);
    } else {
        ivm_error("%s not found beside ivmrun or in PATH (name it with --boot)", buf);
    }
    return -1;
}

/* Read ivm-boot's stdout while it stops: nothing but a late ready line
 * (when ivmrun gave up before it came) can arrive there now; drop it. */
static void ivmrun_boot_drain(ivmrun_boot_t *b)
{
    char buf[4096];
    ssize_t n;

    if (b->out_fd < 0) {
        return;
    }
    while ((n = read(b->out_fd, buf, sizeof(buf))) > 0 ||
           (n < 0 && errno == EINTR)) {
    }
    if (n == 0) {
        close(b->out_fd);
        b->out_fd = -1;
    }
}
/* Wait at most left seconds for a signal or output of the ending launcher
 * (dropped: teardown is under way). */
static void ivmrun_boot_poll_end(ivmrun_boot_t *b, int sigfd, double left)
{
    struct pollfd pfds[2];
    int nfds = 0;

    pfds[nfds].fd       = sigfd;
    pfds[nfds++].events = POLLIN;
    if (b->out_fd >= 0) {
        pfds[nfds].fd       = b->out_fd;
        pfds[nfds++].events = POLLIN;
    }
    if (poll(pfds, (nfds_t)nfds, (int)(left * 1000) + 1) > 0) {
        if (pfds[0].revents & POLLIN) {
            ivmrun_proc_signals(sigfd, &b->pid, &b->status);
        }
        if (nfds > 1 && pfds[1].revents != 0) {
            ivmrun_boot_drain(b);
        }
    }
}

/* Wait until the launcher, told to stop, exits: SIGTERM after
 * IVMRUN_BOOT_STOP_WAIT, SIGKILL to its process group IVMRUN_BOOT_KILL_WAIT
 * later. Returns 1 if it had to be sent SIGTERM. */
static int ivmrun_boot_wait_end(ivmrun_boot_t *b, int sigfd)
{
    double deadline = ivmrun_time_now() + IVMRUN_BOOT_STOP_WAIT, left;
    int sent_term = 0;

    while (b->pid > 0 && !ivmrun_proc_reap(&b->pid, &b->status)) {
        left = deadline - ivmrun_time_now();
        if (left > 0) {
            ivmrun_boot_poll_end(b, sigfd, left);
            continue;
        }
        if (!sent_term) {
            ivm_warn("%s (pid %d) still runs %g s after the bootstrap was told to "
                     "stop; sending it SIGTERM", b->launcher, (int)b->pid,
                     IVMRUN_BOOT_STOP_WAIT);
            kill(b->pid, SIGTERM);
            sent_term = 1;
            deadline  = ivmrun_time_now() + IVMRUN_BOOT_KILL_WAIT;
            continue;
        }
        ivm_warn("%s (pid %d) did not exit %g s after SIGTERM; killing it",
                 b->launcher, (int)b->pid, IVMRUN_BOOT_KILL_WAIT);
        kill(-b->pid, SIGKILL); /* its process group */
        ivmrun_proc_kill(&b->pid, &b->status);
    }
    return sent_term;
}

void ivmrun_boot_close(ivmrun_boot_t *b, int sigfd)
{
    double start = ivmrun_time_now();
    int sent_term, waited = (b->pid > 0);
    char why[64];

    if (b->in_fd >= 0) {
        ivm_info("stopping the cluster's daemons (closing %s's input)", b->launcher);
        /* The line tells ivm-boot that this is an orderly stop; EOF on the
         * bootstrap's stdin then stops every node. */
        if (b->stop_line &&
            ivmrun_fd_write_all(b->in_fd, IVMRUN_BOOT_STOP, strlen(IVMRUN_BOOT_STOP)) != 0) {
            ivm_debug("cannot write to %s's input: %m", b->launcher);
        }
        close(b->in_fd);
        b->in_fd = -1;
    }
    /* Terminating signals read meanwhile are dropped: teardown is under way. */
    sent_term = ivmrun_boot_wait_end(b, sigfd);
    if (b->out_fd >= 0) {
        ivmrun_boot_drain(b);
        if (b->out_fd >= 0) {
            close(b->out_fd);
            b->out_fd = -1;
        }
    }
    if (b->orphans != NULL && (!waited || sent_term)) {
        b->orphans(b, sigfd); /* its tasks may still run */
    }
    if (!waited) {
        return; /* it ended before, and that was reported then */
    }
    if (sent_term || !WIFEXITED(b->status) || WEXITSTATUS(b->status) != 0) {
        ivmrun_proc_status_text(b->status, why, sizeof(why));
        ivm_warn("%s (the cluster's bootstrap) ended with %s", b->launcher, why);
    } else {
        ivm_info("the cluster's daemons are stopped (%.0f ms)",
                 (ivmrun_time_now() - start) * 1000);
    }
}

/* Split args at spaces and tabs (in place) into argv[*argc_p..max). 0, or -1
 * if there are too many words. */
static int ivmrun_boot_split(char *args, char **argv, int *argc_p, int max)
{
    char *save = NULL, *word;

    for (word = strtok_r(args, " \t", &save); word != NULL;
         word = strtok_r(NULL, " \t", &save)) {
        if (*argc_p >= max) {
            return -1;
        }
        argv[(*argc_p)++] = word;
    }
    return 0;
}

/* The per-host bring-up program (a->exe) and its options, the same for
 * ivm-boot under mpirun and ivm-boot-srun under srun. */
static int ivmrun_boot_node_args(const ivmrun_cluster_t *c, ivmrun_boot_args_t *a,
                                 int *argc_p)
{
    const ivmrun_config_t *cfg = c->cfg;
    char **argv = a->argv;
    int argc = *argc_p;

    snprintf(a->dwait, sizeof(a->dwait), "%g", cfg->daemon_wait);
    /* The bring-up program gives up first, saying which node misses which peers. */
    snprintf(a->uwait, sizeof(a->uwait), "%g", cfg->boot_wait * 0.8);
    argv[argc++] = a->exe;
    argv[argc++] = "--hosts";
    argv[argc++] = c->boot.host_list;
    argv[argc++] = "--daemon-wait";
    argv[argc++] = a->dwait;
    argv[argc++] = "--up-wait";
    argv[argc++] = a->uwait;
    ivmrun_opts_forward(c->opts, IVMRUN_FWD_BOOT, argv, &argc);
    if (c->specs != NULL) {
        a->specs = ivmrun_join(c->specs, c->boot.nhosts, ';');
        if (a->specs == NULL) {
            ivm_error("out of memory");
            return -1;
        }
        argv[argc++] = "--node-cpu-devices";
        argv[argc++] = a->specs;
    } else {
        ivmrun_arg_opt(argv, &argc, "--cpu-devices", cfg->cpu_devices);
    }
    if (c->has_slots) {
        a->slots = ivmrun_slots_format(c->slots, c->boot.nhosts);
        if (a->slots == NULL) {
            ivm_error("out of memory");
            return -1;
        }
        argv[argc++] = "--node-slots";
        argv[argc++] = a->slots;
    }
    argv[argc] = NULL;
    *argc_p = argc;
    return 0;
}

int ivmrun_boot_argv(const ivmrun_cluster_t *c, ivmrun_boot_args_t *a, char *const *args,
                     const char *extra, const char *opt)
{
    int argc = 0;

    while (args[argc] != NULL) {
        a->argv[argc] = args[argc];
        ++argc;
    }
    if (extra[0] != '\0') {
        a->extra = strdup(extra);
        if (a->extra == NULL) {
            ivm_error("out of memory");
            return -1;
        }
        if (ivmrun_boot_split(a->extra, a->argv, &argc,
                              IVMRUN_BOOT_ARGS - IVMRUN_BOOT_NODE_ARGS) != 0) {
            ivm_error("%s: too many words", opt);
            return -1;
        }
    }
    return ivmrun_boot_node_args(c, a, &argc);
}

void ivmrun_boot_args_release(ivmrun_boot_args_t *a)
{
    free(a->extra);
    free(a->specs);
    free(a->slots);
    a->extra = NULL;
    a->specs = NULL;
    a->slots = NULL;
}

int ivmrun_boot_launch(ivmrun_boot_t *b, char **argv, char *const *env,
                       const sigset_t *child_mask, const char *hint)
{
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err = 0;
    ivmrun_spawn_t spec;

    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        ivm_error("cannot create the pipes for %s: %m", argv[0]);
        goto fail;
    }
    ivmrun_spawn_init(&spec, argv[0], argv);
    spec.fd_in      = in_pipe[0];
    spec.fd_out     = out_pipe[1];
    spec.new_pgroup = 1; /* the terminal's ^C is for ivmrun, which stops it in order */
    spec.sigmask    = child_mask;
    spec.env        = env;
    if (ivmrun_proc_spawn(&spec, &b->pid, &err) != IVM_SUCCESS) {
        ivm_error("cannot run '%s' to start the cluster's daemons: %s%s", argv[0],
                  strerror(err), err == ENOENT ? hint : "");
        b->pid = 0;
        goto fail;
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    b->in_fd  = in_pipe[1];
    b->out_fd = out_pipe[0];
    return 0;

fail:
    for (int k = 0; k < 2; ++k) {
        if (in_pipe[k] >= 0) {
            close(in_pipe[k]);
        }
        if (out_pipe[k] >= 0) {
            close(out_pipe[k]);
        }
    }
    return -1;
}

/* Node0's daemon (d->path) answers here and heads the whole cluster
 * (b->nhosts nodes, all up). Errors are logged. */
static ivmError_t ivmrun_boot_check(const ivmrun_boot_t *b, const ivmrun_daemon_t *d)
{
    ivm_msg_info_rep_t info;
    ivmError_t status = ivm_client_info(d->path, IVMRUN_BOOT_INFO_WAIT, &info, NULL);

    if (status != IVM_SUCCESS) {
        ivm_error("node0's daemon (%s) does not answer on this machine (%s): node0's "
                  "bootstrap must run here, on the first host (%s); check the "
                  "host names and the %s options", d->path,
                  ivm_status_string(status), b->hosts[0], b->launcher);
        return status;
    }
    if ((int)info.peers != b->nhosts - 1 || (int)info.peers_up != b->nhosts - 1) {
        ivm_error("node0's daemon (%s) sees %u of %d peers up", d->path, info.peers_up,
                  b->nhosts - 1);
        return IVM_ERROR_INTERNAL;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmrun_boot_ready(ivmrun_cluster_t *c, double started)
{
    ivmrun_boot_t *b = &c->boot;
    ivmrun_daemon_t *d = &c->nodes[0];
    ivmError_t status;

    snprintf(d->node, sizeof(d->node), "node0");
    d->pid     = 0;
    d->started = 0; /* its bring-up program stops it */
    status = ivmrun_boot_check(b, d);
    if (status != IVM_SUCCESS) {
        return status;
    }
    ivm_info("cluster of %d node%s is up (%.0f ms); node0's daemon is %s", b->nhosts,
             b->nhosts == 1 ? "" : "s", (ivmrun_time_now() - started) * 1000, d->path);
    /* Anything held after the last line is passed on. */
    if (b->got > 0) {
        (void)ivmrun_fd_write_all(STDOUT_FILENO, b->out, b->got);
        b->got = 0;
    }
    fcntl(b->out_fd, F_SETFL, O_NONBLOCK);
    /* ivmrun is not the parent of these daemons: it learns that they are
     * gone from the end of a connection to node0's. */
    c->watch_fd = ivm_sock_connect(d->path);
    if (c->watch_fd < 0) {
        ivm_debug("cannot watch node0's daemon: %s",
                  ivm_status_string((ivmError_t)c->watch_fd));
        c->watch_fd = -1;
    }
    return IVM_SUCCESS;
}

/* The launcher's output ended while the cluster formed: a task failed (it
 * said why) or the launcher could not start them (it said why). */
static ivmError_t ivmrun_boot_ended(ivmrun_boot_t *b)
{
    char why[64];

    if (b->got > 0) {
        (void)ivmrun_fd_write_all(STDOUT_FILENO, b->out, b->got);
        b->got = 0;
    }
    close(b->out_fd);
    b->out_fd = -1;
    while (b->pid > 0 && waitpid(b->pid, &b->status, 0) < 0 && errno == EINTR) {
    }
    b->pid = 0;
    ivmrun_proc_status_text(b->status, why, sizeof(why));
    ivm_error("the cluster's daemons did not come up: %s ended with %s "
              "(see the messages above)", b->launcher, why);
    return IVM_ERROR_NO_DAEMON;
}

/* Take the first "IVM-BOOT " line held in b->out that fits in line (the
 * lines before it are passed on to ivmrun's stdout). 1 if one was taken. */
static int ivmrun_boot_take(ivmrun_boot_t *b, char *line, size_t len)
{
    size_t n;
    char *nl;
    int ours;

    while ((nl = memchr(b->out, '\n', b->got)) != NULL) {
        n    = (size_t)(nl + 1 - b->out);
        ours = strncmp(b->out, "IVM-BOOT ", strlen("IVM-BOOT ")) == 0 && n <= len;
        if (ours) {
            memcpy(line, b->out, n - 1);
            line[n - 1] = '\0';
        } else {
            (void)ivmrun_fd_write_all(STDOUT_FILENO, b->out, n); /* not ours */
        }
        b->got -= n;
        memmove(b->out, nl + 1, b->got);
        if (ours) {
            return 1;
        }
    }
    if (b->got == sizeof(b->out)) { /* a line too long to be ours */
        (void)ivmrun_fd_write_all(STDOUT_FILENO, b->out, b->got);
        b->got = 0;
    }
    return 0;
}

/* Wait (until b->deadline) for the launcher's output or a signal, and read
 * what came into b->out. */
static ivmError_t ivmrun_boot_read(ivmrun_cluster_t *c)
{
    ivmrun_boot_t *b = &c->boot;
    struct pollfd pfds[2] = {{.fd = b->out_fd, .events = POLLIN},
                             {.fd = c->sigfd, .events = POLLIN}};
    double left = b->deadline - ivmrun_time_now();
    ssize_t r;

    if (left <= 0) {
        ivm_error("the cluster's daemons did not come up within %g s (--boot-wait); "
                  "stopping them", c->cfg->boot_wait);
        return IVM_ERROR_TIMEOUT;
    }
    if (poll(pfds, 2, (int)(left * 1000) + 1) < 0) {
        if (errno == EINTR) {
            return IVM_SUCCESS;
        }
        ivm_error("poll failed while waiting for %s: %m", b->launcher);
        return IVM_ERROR_INTERNAL;
    }
    if (pfds[1].revents & POLLIN) {
        c->signo = ivmrun_proc_signals(c->sigfd, &b->pid, &b->status);
        if (c->signo != 0) {
            ivm_info("got signal %d while the cluster was forming; stopping it", c->signo);
            return IVM_ERROR_INTERNAL;
        }
    }
    if (!(pfds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        return IVM_SUCCESS;
    }
    r = read(b->out_fd, b->out + b->got, sizeof(b->out) - b->got);
    if (r < 0) {
        if (errno == EINTR || errno == EAGAIN) {
            return IVM_SUCCESS;
        }
        ivm_error("cannot read %s's output: %m", b->launcher);
        return IVM_ERROR_INTERNAL;
    }
    if (r == 0) {
        return ivmrun_boot_ended(b);
    }
    b->got += (size_t)r;
    return IVM_SUCCESS;
}

ivmError_t ivmrun_boot_line(ivmrun_cluster_t *c, char *line, size_t len)
{
    ivmError_t status = IVM_SUCCESS;

    while (status == IVM_SUCCESS && !ivmrun_boot_take(&c->boot, line, len)) {
        status = ivmrun_boot_read(c);
    }
    return status;
}
