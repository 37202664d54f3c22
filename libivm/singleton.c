/* Singleton mode: a root PE that finds no daemon starts a private one, in its
 * own session and not as our child (so the application's wait() never sees
 * it), which exits once the job is over. */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "libivm.h"
#include "log.h"
#include "sock.h"

/* Milliseconds the private daemon has to report ready. */
#define IVM_SINGLETON_READY_MS 10000

#ifndef IVM_INSTALL_BINDIR
#define IVM_INSTALL_BINDIR "/usr/local/bin"
#endif

static int ivm_singleton_executable(const char *path)
{
    return access(path, X_OK) == 0;
}

/* $IVM_DAEMON, else ../bin/ivmd beside the library (build and install trees
 * alike), else the install bindir, else PATH. */
static ivmError_t ivm_singleton_find_daemon(char *buf, size_t len)
{
    const char *env = getenv("IVM_DAEMON");
    Dl_info info;
    char *slash;

    if (env != NULL && *env != '\0') {
        snprintf(buf, len, "%s", env);
        return ivm_singleton_executable(buf) ? IVM_SUCCESS : IVM_ERROR_NO_DAEMON;
    }
    if (dladdr((void *)ivm_singleton_find_daemon, &info) != 0 && info.dli_fname != NULL) {
        char real[PATH_MAX];
        if (realpath(info.dli_fname, real) != NULL && (slash = strrchr(real, '/')) != NULL) {
            *slash = '\0';
            snprintf(buf, len, "%s/../bin/ivmd", real);
            if (ivm_singleton_executable(buf)) {
                return IVM_SUCCESS;
            }
            snprintf(buf, len, "%s/ivmd", real);
            if (ivm_singleton_executable(buf)) {
                return IVM_SUCCESS;
            }
        }
    }
    snprintf(buf, len, "%s/ivmd", IVM_INSTALL_BINDIR);
    if (ivm_singleton_executable(buf)) {
        return IVM_SUCCESS;
    }
    {
        const char *path = getenv("PATH");
        char *copy, *dir, *save;
        if (path == NULL || (copy = strdup(path)) == NULL) {
            return IVM_ERROR_NO_DAEMON;
        }
        for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
            snprintf(buf, len, "%s/ivmd", dir);
            if (ivm_singleton_executable(buf)) {
                free(copy);
                return IVM_SUCCESS;
            }
        }
        free(copy);
    }
    return IVM_ERROR_NO_DAEMON;
}

ivmError_t ivm_singleton_start(const char *path)
{
    char daemon[PATH_MAX], dir[PATH_MAX], fdarg[16], *slash;
    int ready[2];
    pid_t mid;
    int wstatus;
    ivm_ready_t wait;
    ivmError_t status;

    status = ivm_singleton_find_daemon(daemon, sizeof(daemon));
    if (status != IVM_SUCCESS) {
        ivm_set_error("no IVM daemon serves %s and no ivmd executable was found to start "
                      "one (set IVM_DAEMON, or start ivmd, or use ivmrun)", path);
        return status;
    }
    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (ivm_sock_dir_prepare(dir) != IVM_SUCCESS) {
            ivm_set_error("cannot use socket directory %s (must be ours, mode 0700)", dir);
            return IVM_ERROR_PERMISSION;
        }
    }
    if (pipe2(ready, O_CLOEXEC) != 0) {
        ivm_set_error("pipe: %s", strerror(errno));
        return IVM_ERROR_NO_MEMORY;
    }
    snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
    mid = fork();
    if (mid < 0) {
        close(ready[0]);
        close(ready[1]);
        ivm_set_error("fork: %s", strerror(errno));
        return IVM_ERROR_NO_MEMORY;
    }
    if (mid == 0) {
        /* Intermediate: new session, then the daemon as a grandchild. */
        int null_fd;
        setsid();
        if (fork() != 0) {
            _exit(0);
        }
        null_fd = open("/dev/null", O_RDWR);
        if (null_fd >= 0) {
            dup2(null_fd, 0);
            dup2(null_fd, 1);
        }
        fcntl(ready[1], F_SETFD, 0);
        {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
        }
        /* The job's IVM_CPU_DEVICES travels in its ENTER; ivmd would also
         * read it from the environment as its own --cpu-devices, and then
         * refuse to start on shares it cannot enforce (cgroups), before
         * ivmEnter could learn why. */
        execl(daemon, "ivmd", "--socket", path, "--ready-fd", fdarg, "--exit-when-idle",
              "--cpu-devices", "", (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    while (waitpid(mid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    ivm_ready_init(&wait, ready[0]);
    if (ivm_ready_wait(&wait, IVM_SINGLETON_READY_MS, -1) != IVM_SUCCESS) {
        close(ready[0]);
        ivm_set_error("the private IVM daemon (%s) did not start; run it by hand to see "
                      "why", daemon);
        return IVM_ERROR_NO_DAEMON;
    }
    close(ready[0]);
    return IVM_SUCCESS;
}
