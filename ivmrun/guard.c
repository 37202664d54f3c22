/* The root PE's guard: what ends the job when ivmrun cannot.
 *
 * ivmrun kills the root PE (and its process group) on a signal or a
 * timeout, but a SIGKILL leaves it no chance. So once the root runs, ivmrun
 * forks a guard: a small process in a session of its own (a signal sent to
 * ivmrun's process group does not reach it) that holds the read end of a
 * pipe whose write end only ivmrun holds. The pipe ends in one of two ways:
 *  - ivmrun writes one byte first (an orderly end: the root was reaped and
 *    its group dealt with): the guard exits without doing anything;
 *  - it ends without a byte: ivmrun died. The guard SIGKILLs the root PE's
 *    process group (or the root alone when it shares ivmrun's group, in a
 *    terminal's foreground), says so on stderr and exits.
 * The root PE itself also has PR_SET_PDEATHSIG(SIGKILL) (main.c), which holds
 * even if the guard was killed too; the guard adds what the root started
 * (a shell's children, helpers). Its daemon sees the root's death and ends
 * the job on every node (its PEs killed, its objects released). */
#include "ivmrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#define IVMRUN_GUARD_FD 3 /* the pipe's read end in the guard */

/* The guard's whole life; never returns. (ivmrun has one thread, so the
 * forked copy may use anything; it keeps to plain system calls anyway.) */
static void ivmrun_guard_main(int fd, pid_t root, int pgrp)
{
    static const char gone[] = "ivmrun: the launcher died; its guard killed the root PE";
    char byte, line[160];
    int devnull, len;
    ssize_t n;

    setsid();
    prctl(PR_SET_NAME, "ivmrun-guard"); /* ps: not a second ivmrun */
    devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
    }
    /* stderr stays: the one line below is for whoever reads ivmrun's. */
    if (fd != IVMRUN_GUARD_FD) {
        dup2(fd, IVMRUN_GUARD_FD);
    }
    /* ivmrun's other fds (pipes of mpirun or srun, of the root's output)
     * must not outlive ivmrun through the guard. */
    if (close_range(IVMRUN_GUARD_FD + 1, ~0u, 0) != 0) {
        for (int k = IVMRUN_GUARD_FD + 1; k < 1024; ++k) {
            close(k);
        }
    }
    do {
        n = read(IVMRUN_GUARD_FD, &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n == 1) {
        _exit(0);
    }
    if (pgrp) {
        kill(-root, SIGKILL);
    }
    kill(root, SIGKILL);
    len = snprintf(line, sizeof(line), "%s (pid %d)%s\n", gone, (int)root,
                   pgrp ? " and its process group" : "");
    if (len > 0) {
        (void)!write(STDERR_FILENO, line, (size_t)len);
    }
    _exit(0);
}

ivmError_t ivmrun_guard_start(ivmrun_guard_t *g, pid_t root, int pgrp)
{
    int fds[2];
    pid_t pid;

    g->pid = 0;
    g->fd  = -1;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        ivm_error("cannot create the pipe of the root PE's guard: %m");
        return IVM_ERROR_INTERNAL;
    }
    pid = fork();
    if (pid < 0) {
        ivm_error("cannot fork the root PE's guard: %m");
        close(fds[0]);
        close(fds[1]);
        return IVM_ERROR_INTERNAL;
    }
    if (pid == 0) {
        close(fds[1]);
        ivmrun_guard_main(fds[0], root, pgrp);
    }
    close(fds[0]);
    g->pid = pid;
    g->fd  = fds[1];
    ivm_debug("root PE guard started (pid %d)", (int)pid);
    return IVM_SUCCESS;
}

void ivmrun_guard_stop(ivmrun_guard_t *g)
{
    const char byte = 'x';

    if (g->fd >= 0) {
        if (ivmrun_fd_write_all(g->fd, &byte, 1) != 0) {
            ivm_debug("the root PE's guard is gone already: %m");
        }
        close(g->fd);
        g->fd = -1;
    }
    if (g->pid > 0) {
        while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR) {
        }
        g->pid = 0;
    }
}
