#include "ivmrun.h"

#include <errno.h>
#include <sys/signalfd.h>
#include <libgen.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

double ivmrun_time_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ivmrun_proc_status_text(int status, char *buf, size_t len)
{
    if (WIFEXITED(status)) {
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(buf, len, "wait status 0x%x", (unsigned)status);
    }
}

int ivmrun_fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p   += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The child's environment changes: "NAME=VALUE" set, "NAME" unset. 0 or -1. */
static int ivmrun_proc_child_env(char *const *env)
{
    char *const *e;

    for (e = env; e != NULL && *e != NULL; ++e) {
        if (strchr(*e, '=') == NULL) {
            unsetenv(*e);
        } else if (putenv(*e) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Runs in the child between fork and exec: only async-signal-safe work plus
 * setenv/unsetenv, which are safe here because ivmrun is single-threaded. */
static void ivmrun_proc_child(const ivmrun_spawn_t *spec, int err_fd, pid_t parent)
{
    int err;

    if (spec->pdeathsig != 0) {
        if (prctl(PR_SET_PDEATHSIG, spec->pdeathsig) != 0) {
            goto fail;
        }
        if (getppid() != parent) { /* the parent died before prctl */
            _exit(127);
        }
    }
    signal(SIGPIPE, SIG_DFL);
    if (spec->sigmask != NULL) {
        sigprocmask(SIG_SETMASK, spec->sigmask, NULL);
    }
    if (spec->new_session && setsid() < 0) {
        goto fail;
    }
    if (!spec->new_session && spec->new_pgroup && setpgid(0, 0) < 0) {
        goto fail;
    }
    if ((spec->fd_in >= 0 && dup2(spec->fd_in, STDIN_FILENO) < 0) ||
        (spec->fd_out >= 0 && dup2(spec->fd_out, STDOUT_FILENO) < 0) ||
        (spec->fd_err >= 0 && dup2(spec->fd_err, STDERR_FILENO) < 0)) {
        goto fail;
    }
    if (spec->keep_fd >= 0 && fcntl(spec->keep_fd, F_SETFD, 0) < 0) {
        goto fail;
    }
    if (ivmrun_proc_child_env(spec->env) != 0) {
        goto fail;
    }
    execvp(spec->file, spec->argv);
fail:
    err = errno;
    (void)!write(err_fd, &err, sizeof(err));
    _exit(127);
}

ivmError_t ivmrun_proc_spawn(const ivmrun_spawn_t *spec, pid_t *pid_p, int *errno_p)
{
    int err_pipe[2];
    int child_err = 0;
    pid_t self = getpid(), pid;
    ssize_t n;

    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        *errno_p = errno;
        ivm_error("cannot create a pipe to start %s: %m", spec->file);
        return IVM_ERROR_SPAWN;
    }
    pid = fork();
    if (pid < 0) {
        *errno_p = errno;
        ivm_error("cannot fork to start %s: %m", spec->file);
        close(err_pipe[0]);
        close(err_pipe[1]);
        return IVM_ERROR_SPAWN;
    }
    if (pid == 0) {
        close(err_pipe[0]);
        ivmrun_proc_child(spec, err_pipe[1], self);
    }
    close(err_pipe[1]);
    if (!spec->new_session && spec->new_pgroup) {
        setpgid(pid, pid); /* also here, so that it holds when fork returns */
    }
    do {
        n = read(err_pipe[0], &child_err, sizeof(child_err));
    } while (n < 0 && errno == EINTR);
    close(err_pipe[0]);
    if (n == (ssize_t)sizeof(child_err)) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        *errno_p = child_err;
        return IVM_ERROR_SPAWN;
    }
    *pid_p = pid;
    return IVM_SUCCESS;
}

void ivmrun_spawn_init(ivmrun_spawn_t *spec, const char *file, char *const *argv)
{
    memset(spec, 0, sizeof(*spec));
    spec->file    = file;
    spec->argv    = argv;
    spec->fd_in   = -1;
    spec->fd_out  = -1;
    spec->fd_err  = -1;
    spec->keep_fd = -1;
}

void ivmrun_proc_kill(pid_t *pid_p, int *status_p)
{
    if (*pid_p > 0) {
        kill(*pid_p, SIGKILL);
        while (waitpid(*pid_p, status_p, 0) < 0 && errno == EINTR) {
        }
        *pid_p = 0;
    }
}

int ivmrun_proc_wait_exit(pid_t *pid_p, int *status_p, int sigfd, double wait)
{
    double deadline = ivmrun_time_now() + wait, left;
    struct pollfd pfd = {.fd = sigfd, .events = POLLIN};

    while (*pid_p > 0 && !ivmrun_proc_reap(pid_p, status_p)) {
        left = deadline - ivmrun_time_now();
        if (left <= 0) {
            return 0;
        }
        /* Terminating signals read here are dropped: teardown is under way. */
        if (poll(&pfd, 1, (int)(left * 1000) + 1) > 0) {
            ivmrun_proc_signals(sigfd, pid_p, status_p);
        }
    }
    return 1;
}

int ivmrun_proc_reap(pid_t *pid_p, int *status_p)
{
    int status;
    pid_t r;

    if (*pid_p <= 0) {
        return 0;
    }
    do {
        r = waitpid(*pid_p, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r != *pid_p) {
        return 0;
    }
    *status_p = status;
    *pid_p    = 0;
    return 1;
}

int ivmrun_proc_beside_self(const char *name, char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0) {
        return 0;
    }
    self[n] = '\0';
    return (size_t)snprintf(buf, len, "%s/%s", dirname(self), name) < len &&
           access(buf, X_OK) == 0;
}

int ivmrun_proc_signals(int sigfd, pid_t *pid_p, int *status_p)
{
    struct signalfd_siginfo si;
    int term = 0;

    while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            if (pid_p != NULL) {
                ivmrun_proc_reap(pid_p, status_p);
            }
        } else if (term == 0) {
            term = (int)si.ssi_signo;
        }
    }
    return term;
}

void ivmrun_join_order(int n, int *order)
{
    char a[16], b[16];
    int k, pos;

    for (k = 0; k < n; ++k) {
        snprintf(a, sizeof(a), "node%d", k);
        for (pos = k; pos > 0; --pos) {
            snprintf(b, sizeof(b), "node%d", order[pos - 1]);
            if (strcmp(b, a) >= 0) {
                break;
            }
            order[pos] = order[pos - 1];
        }
        order[pos] = k;
    }
}
