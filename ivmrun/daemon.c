#include "ivmrun.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_DAEMON_STOP_WAIT 5.0 /* seconds between SIGTERM and SIGKILL */
#define IVMRUN_DAEMON_SHARED_WAIT 1.0 /* s for a shared daemon to exit once idle */
#define IVMRUN_DAEMON_INFO_WAIT 1   /* seconds an INFO round trip may take */
#define IVMRUN_DAEMON_JOIN_WAIT 5000 /* ms a CLUSTER round trip may take */
#define IVMRUN_DAEMON_LISTEN    "127.0.0.1" /* --listen address of a simulated node */

int ivmrun_daemon_reap(ivmrun_daemon_t *d)
{
    return ivmrun_proc_reap(&d->pid, &d->status);
}

/* The ivmd to start: --daemon/IVM_DAEMON, else ivmd beside this executable,
 * else "ivmd" from PATH. */
static void ivmrun_daemon_find(const ivmrun_opts_t *opts, char *buf, size_t len)
{
    const char *daemon = ivmrun_opts_string(opts, "daemon");

    if (daemon != NULL && daemon[0] != '\0') {
        snprintf(buf, len, "%s", daemon);
        return;
    }
    if (!ivmrun_proc_beside_self("ivmd", buf, len)) {
        snprintf(buf, len, "ivmd");
    }
}

/* Wait until the daemon we started exits, at most wait seconds. Returns 1 if
 * it was reaped. */
static int ivmrun_daemon_wait_exit(ivmrun_daemon_t *d, int sigfd, double wait)
{
    return ivmrun_proc_wait_exit(&d->pid, &d->status, sigfd, wait);
}

/* Kill and reap the daemon we started, without waiting for a clean exit. */
void ivmrun_daemon_kill(ivmrun_daemon_t *d)
{
    ivmrun_proc_kill(&d->pid, &d->status);
}

/* Remove the socket our daemon left behind, unless some daemon answers on it. */
void ivmrun_daemon_unlink(ivmrun_daemon_t *d)
{
    struct stat st;

    if (lstat(d->path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return;
    }
    if (ivm_client_probe(d->path) == IVM_SUCCESS) {
        return;
    }
    if (unlink(d->path) == 0) {
        ivm_info("removed the socket %s left by ivmd", d->path);
    } else if (errno != ENOENT) {
        ivm_warn("cannot remove the socket %s: %m", d->path);
    }
}

/* The daemon's command line into argv (at most 32 entries with the NULL);
 * fdtext and listen are the caller's buffers the entries point into. */
static void ivmrun_daemon_argv(const ivmrun_daemon_t *d, const ivmrun_opts_t *opts,
                               char *exe, int ready_fd, char *fdtext, size_t fdtext_len,
                               char *listen, size_t listen_len, char **argv)
{
    const char *addr;
    int argc = 0;

    snprintf(fdtext, fdtext_len, "%d", ready_fd);
    argv[argc++] = exe;
    argv[argc++] = "--socket";
    argv[argc++] = (char *)d->path;
    if (d->node[0] != '\0') {
        argv[argc++] = "--node";
        argv[argc++] = (char *)d->node;
    }
    if (d->listen) {
        /* Port 0: any free one, which the readiness line reports. */
        addr = (d->listen_addr != NULL) ? d->listen_addr : IVMRUN_DAEMON_LISTEN;
        snprintf(listen, listen_len, strchr(addr, ':') != NULL ? "[%s]:0" : "%s:0", addr);
        argv[argc++] = "--listen";
        argv[argc++] = listen;
    }
    argv[argc++] = "--ready-fd";
    argv[argc++] = fdtext;
    if (d->remove_dir) {
        argv[argc++] = "--remove-dir";
    }
    if (d->shared) {
        argv[argc++] = "--exit-when-idle";
    }
    ivmrun_arg_opt(argv, &argc, "--cpu-devices", d->cpu_devices);
    ivmrun_opts_forward(opts, IVMRUN_FWD_IVMD, argv, &argc);
    argv[argc] = NULL;
}

/* The readiness line came: with --listen it must be "R PORT". */
static ivmError_t ivmrun_daemon_ready_line(ivmrun_daemon_t *d, const ivm_ready_t *r)
{
    if (!d->listen) {
        return IVM_SUCCESS; /* any line will do, as before --listen existed */
    }
    if (ivm_ready_port(r, &d->port) == IVM_SUCCESS) {
        ivm_debug("ivmd (pid %d) on %s is ready, TCP port %u", (int)d->pid, d->path, d->port);
        return IVM_SUCCESS;
    }
    ivm_error("ivmd (pid %d) on %s sent the readiness line '%s', not 'R PORT' (does it "
              "support --listen?); killing it", (int)d->pid, d->path, r->line);
    ivmrun_daemon_kill(d);
    ivmrun_daemon_unlink(d);
    return IVM_ERROR_PROTOCOL;
}

/* The pipe closed without a line: almost always, the daemon exited. */
static ivmError_t ivmrun_daemon_ready_eof(ivmrun_daemon_t *d, const char *exe, int sigfd)
{
    char why[64];

    if (ivmrun_daemon_wait_exit(d, sigfd, 1.0)) {
        ivmrun_proc_status_text(d->status, why, sizeof(why));
        ivm_error("ivmd '%s' exited (%s) before it was ready on %s; see its messages above",
                  exe, why, d->path);
    } else {
        ivm_error("ivmd (pid %d) closed its ready fd without signalling readiness; "
                  "killing it", (int)d->pid);
        ivmrun_daemon_kill(d);
    }
    ivmrun_daemon_unlink(d);
    return IVM_ERROR_NO_DAEMON;
}

/* Wait for the started daemon's readiness line on ready_fd, at most
 * the starter's --daemon-wait seconds, serving signals on sigfd meanwhile (a
 * terminating one stops the daemon: *signo_p). */
static ivmError_t ivmrun_daemon_wait_ready(ivmrun_daemon_t *d, double wait,
                                           const char *exe, int ready_fd, int sigfd,
                                           int *signo_p)
{
    double deadline = ivmrun_time_now() + wait;
    ivm_ready_t r;
    ivmError_t status;

    ivm_ready_init(&r, ready_fd);
    for (;;) {
        double left = deadline - ivmrun_time_now();
        int term;

        if (left <= 0) {
            ivm_error("ivmd (pid %d) did not become ready on %s within %g s; killing it",
                      (int)d->pid, d->path, wait);
            ivmrun_daemon_kill(d);
            ivmrun_daemon_unlink(d);
            return IVM_ERROR_TIMEOUT;
        }
        status = ivm_ready_wait(&r, (int)(left * 1000) + 1, sigfd);
        if (status == IVM_SUCCESS) {
            return ivmrun_daemon_ready_line(d, &r);
        }
        if (status == IVM_ERROR_NO_DAEMON) {
            return ivmrun_daemon_ready_eof(d, exe, sigfd);
        }
        if (status != IVM_ERROR_TIMEOUT) {
            ivm_error("cannot read ivmd's readiness pipe: %m");
            ivmrun_daemon_kill(d);
            return IVM_ERROR_INTERNAL;
        }
        term = ivmrun_proc_signals(sigfd, &d->pid, &d->status);
        if (term != 0) {
            ivm_info("got signal %d while starting ivmd; stopping it", term);
            *signo_p = term;
            ivmrun_daemon_close(d, sigfd);
            return IVM_ERROR_INTERNAL;
        }
    }
}

ivmError_t ivmrun_daemon_start(ivmrun_daemon_t *d, const ivmrun_opts_t *opts,
                               int sigfd, const sigset_t *child_mask, int *signo_p)
{
    char exe[PATH_MAX], dir[sizeof(d->path)], fdtext[16], listen[80];
    char *argv[32];
    int ready[2] = {-1, -1}, devnull = -1, err = 0;
    ivmrun_spawn_t spec;
    ivmError_t status;

    ivmrun_daemon_find(opts, exe, sizeof(exe));
    snprintf(dir, sizeof(dir), "%s", d->path);
    status = ivm_sock_dir_prepare(dirname(dir));
    if (status != IVM_SUCCESS) {
        ivm_error("cannot start ivmd: its socket directory is unusable (see above)");
        return status;
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        ivm_error("cannot open /dev/null: %m");
        status = IVM_ERROR_INTERNAL;
        goto out;
    }
    if (pipe2(ready, O_CLOEXEC) != 0) {
        ivm_error("cannot create the readiness pipe for ivmd: %m");
        status = IVM_ERROR_INTERNAL;
        goto out_close_devnull;
    }
    ivmrun_daemon_argv(d, opts, exe, ready[1], fdtext, sizeof(fdtext), listen, sizeof(listen),
                       argv);
    d->port = 0;

    ivmrun_spawn_init(&spec, exe, argv);
    spec.fd_in       = devnull;
    spec.fd_out      = devnull;
    spec.keep_fd     = ready[1];
    spec.new_session = 1;
    spec.sigmask     = child_mask;
    spec.pdeathsig   = d->pdeathsig;
    spec.env         = d->env;
    status = ivmrun_proc_spawn(&spec, &d->pid, &err);
    close(ready[1]);
    if (status != IVM_SUCCESS) {
        ivm_error("cannot start the IVM daemon '%s': %s%s", exe, strerror(err),
                  (err == ENOENT && strchr(exe, '/') == NULL)
                      ? " (not found in PATH; set IVM_DAEMON or use --daemon)"
                      : "");
        goto out_close_ready;
    }
    d->started = 1;
    if (d->node[0] != '\0') {
        ivm_info("started ivmd '%s' (pid %d) for %s on %s", exe, (int)d->pid, d->node,
                 d->path);
    } else {
        ivm_info("started ivmd '%s' (pid %d) on %s", exe, (int)d->pid, d->path);
    }
    status = ivmrun_daemon_wait_ready(d, ivmrun_opts_double(opts, "daemon-wait"), exe,
                                      ready[0], sigfd, signo_p);

out_close_ready:
    close(ready[0]);
out_close_devnull:
    close(devnull);
out:
    if (status != IVM_SUCCESS && d->pid <= 0) {
        d->started = 0;
    }
    return status;
}

ivmError_t ivmrun_daemon_open(ivmrun_daemon_t *d, const ivmrun_opts_t *opts,
                              int sigfd, const sigset_t *child_mask, int *signo_p)
{
    ivmError_t status;

    d->pid     = 0;
    d->started = 0;
    d->status  = 0;
    status = ivm_client_probe(d->path);
    if (status == IVM_SUCCESS) {
        ivm_info("using the running ivmd on %s", d->path);
        if (ivmrun_opts_started_only(opts)) {
            ivm_warn("using the running ivmd on %s: --emu-gpus, --gpus, --gpu-shares, "
                     "--daemon-poll-us, --transport, --daemon-huge-pages and "
                     "--daemon-tcp-congestion apply only to "
                     "a daemon ivmrun starts (use --socket with a fresh path, or --nodes)",
                     d->path);
        }
        return IVM_SUCCESS;
    }
    if (status == IVM_ERROR_PERMISSION) {
        ivm_error("cannot connect to the daemon socket %s: permission denied",
                  d->path);
        return IVM_ERROR_PERMISSION;
    }
    if (status == IVM_ERROR_INVALID_VALUE) {
        ivm_error("daemon socket path '%s' is too long for a Unix socket", d->path);
        return IVM_ERROR_INVALID_VALUE;
    }
    status = ivmrun_daemon_start(d, opts, sigfd, child_mask, signo_p);
    if (status == IVM_SUCCESS || *signo_p != 0) {
        return status;
    }
    /* Another launcher may have started a daemon on the same path meanwhile. */
    if (ivm_client_probe(d->path) == IVM_SUCCESS) {
        ivm_warn("using the ivmd that another process started on %s", d->path);
        return IVM_SUCCESS;
    }
    return status;
}

/* The daemon's INFO reply, within IVMRUN_DAEMON_INFO_WAIT. */
static ivmError_t ivmrun_daemon_info(const ivmrun_daemon_t *d, ivm_msg_info_rep_t *info)
{
    ivmError_t status = ivm_client_info(d->path, IVMRUN_DAEMON_INFO_WAIT * 1000, info, NULL);

    if (status != IVM_SUCCESS) {
        ivm_debug("no INFO from ivmd on %s: %s", d->path, ivm_status_string(status));
    }
    return status;
}

/* A shared daemon we started (d->shared), after our job ended: it exits by
 * itself once idle (--exit-when-idle), which it should be within
 * IVMRUN_DAEMON_SHARED_WAIT unless another run's job or client uses it; then
 * it is left running (returns 1), to end once they are done. Returns 0 when
 * it has exited, or serves nobody else and is stopped as ours. */
static int ivmrun_daemon_leave_shared(ivmrun_daemon_t *d, int sigfd)
{
    ivm_msg_info_rep_t info;

    if (ivmrun_daemon_wait_exit(d, sigfd, IVMRUN_DAEMON_SHARED_WAIT)) {
        return 0;
    }
    /* conns counts this INFO's own connection. */
    if (ivmrun_daemon_info(d, &info) != IVM_SUCCESS || (info.jobs == 0 && info.conns <= 1)) {
        return 0;
    }
    ivm_info("ivmd (pid %d) on %s serves %u other job(s) and %u other client(s): left "
             "running; it exits once idle", (int)d->pid, d->path, info.jobs,
             info.conns - 1);
    d->pid     = 0;
    d->started = 0;
    return 1;
}

void ivmrun_daemon_close(ivmrun_daemon_t *d, int sigfd)
{
    char why[64];

    if (!d->started) {
        return;
    }
    if (d->shared && d->pid > 0 && ivmrun_daemon_leave_shared(d, sigfd) == 1) {
        return;
    }
    if (d->pid > 0) {
        ivm_info("stopping ivmd (pid %d)", (int)d->pid);
        kill(d->pid, SIGTERM);
        if (!ivmrun_daemon_wait_exit(d, sigfd, IVMRUN_DAEMON_STOP_WAIT)) {
            ivm_warn("ivmd (pid %d) did not exit %g s after SIGTERM; killing it",
                     (int)d->pid, IVMRUN_DAEMON_STOP_WAIT);
            ivmrun_daemon_kill(d);
        } else if (!WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0) {
            ivmrun_proc_status_text(d->status, why, sizeof(why));
            ivm_warn("ivmd ended with %s", why);
        }
    }
    ivmrun_daemon_unlink(d);
    d->started = 0;
}

/* Whether the daemon we started has ended, within wait_ms (its socket closes
 * just before it becomes a zombie); not reaped, its reaper still sees it.
 * why gets how it ended. */
static int ivmrun_daemon_ended(const ivmrun_daemon_t *d, int wait_ms, char *why, size_t len)
{
    siginfo_t si;
    int ms;

    for (ms = 0; d->started && d->pid > 0; ms += 10) {
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)d->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == d->pid) {
            snprintf(why, len, si.si_code == CLD_EXITED ? "exit status %d" : "signal %d",
                     si.si_status);
            return 1;
        }
        if (ms >= wait_ms) {
            break;
        }
        usleep(10000);
    }
    return 0;
}

ivmError_t ivmrun_daemon_join(const ivmrun_daemon_t *d, const ivm_msg_cluster_req_t *req,
                              size_t len)
{
    ivm_client_result_t res;
    ivm_msg_status_t rep;
    ivmError_t status;
    char why[64];

    status = ivm_client_request(d->path, IVMRUN_DAEMON_JOIN_WAIT, IVM_MSG_CLUSTER, req,
                                (uint32_t)len, &rep, sizeof(rep), &res);
    if (status == IVM_SUCCESS) {
        return status;
    }
    /* A daemon killed as the table reached it: say so, as the wait for the
       peers does, not only that nobody answered on its socket. */
    if ((status == IVM_ERROR_NO_DAEMON || status == IVM_ERROR_DAEMON_LOST) &&
        ivmrun_daemon_ended(d, 200, why, sizeof(why))) {
        ivm_error("the ivmd of %s exited (%s) while the cluster was forming; see its "
                  "messages above", d->node, why);
        return IVM_ERROR_DAEMON_LOST;
    }
    ivm_error("the ivmd of %s (%s) did not join the cluster: %s%s%s", d->node, d->path,
              ivm_status_string(status), res.detail[0] != '\0' ? ": " : "", res.detail);
    return status;
}

int ivmrun_daemon_jobs(const ivmrun_daemon_t *d)
{
    ivm_msg_info_rep_t info;

    return ivmrun_daemon_info(d, &info) == IVM_SUCCESS ? (int)info.jobs : -1;
}
