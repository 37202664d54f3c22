
#include <arpa/inet.h>
#include "sock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

ivmError_t ivm_sock_dir(char *buf, size_t len)
{
    const char *env = getenv("IVM_SOCKET_DIR");
    int n;

    if (env != NULL && *env != '\0') {
        n = snprintf(buf, len, "%s", env);
    } else if ((env = getenv("XDG_RUNTIME_DIR")) != NULL && *env != '\0') {
        n = snprintf(buf, len, "%s/ivm", env);
    } else {
        n = snprintf(buf, len, "/tmp/ivm-%u", (unsigned)getuid());
    }
    return (n < 0 || (size_t)n >= len) ? IVM_ERROR_INVALID_VALUE : IVM_SUCCESS;
}

ivmError_t ivm_sock_path(char *buf, size_t len)
{
    const char *env = getenv("IVM_SOCKET");
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    ivmError_t status;
    int n;

    if (env != NULL && *env != '\0') {
        n = snprintf(buf, len, "%s", env);
    } else {
        status = ivm_sock_dir(dir, sizeof(dir));
        if (status != IVM_SUCCESS) {
            return status;
        }
        n = snprintf(buf, len, "%s/%s", dir, IVM_SOCKET_NAME);
    }
    return (n < 0 || (size_t)n >= len) ? IVM_ERROR_INVALID_VALUE : IVM_SUCCESS;
}

ivmError_t ivm_sock_dir_prepare(const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ivm_error("cannot create socket directory %s: %m", dir);
        return IVM_ERROR_PERMISSION;
    }
    if (lstat(dir, &st) != 0) {
        ivm_error("cannot stat socket directory %s: %m", dir);
        return IVM_ERROR_PERMISSION;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        ivm_error("socket directory %s must be a directory owned by uid %u with mode "
                  "0700 (it has uid %u, mode %03o)",
                  dir, (unsigned)getuid(), (unsigned)st.st_uid,
                  (unsigned)(st.st_mode & 0777));
        return IVM_ERROR_PERMISSION;
    }
    return IVM_SUCCESS;
}

int ivm_sock_connect(const char *path)
{
    struct sockaddr_un addr;
    int fd;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr.sun_path)) {
        return IVM_ERROR_INVALID_VALUE;
    }
    strcpy(addr.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return IVM_ERROR_NO_MEMORY;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        int err = errno;
        close(fd);
        return (err == ENOENT || err == ECONNREFUSED) ? IVM_ERROR_NO_DAEMON
               : (err == EACCES) ? IVM_ERROR_PERMISSION
                                 : IVM_ERROR_NO_DAEMON;
    }
    return fd;
}

ivmError_t ivm_sock_send(int fd, const ivm_msg_hdr_t *hdr, const void *payload,
                         const int *fds, int nfds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * IVM_MSG_MAX_FDS)];
    } ctrl;
    struct iovec iov[2];
    struct msghdr msg;
    size_t total = sizeof(*hdr) + hdr->length;
    size_t sent = 0, skip;
    ssize_t n;
    int niov;

    memset(&msg, 0, sizeof(msg));
    if (nfds > 0) {
        struct cmsghdr *cmsg;
        memset(&ctrl, 0, sizeof(ctrl));
        msg.msg_control    = ctrl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cmsg               = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level   = SOL_SOCKET;
        cmsg->cmsg_type    = SCM_RIGHTS;
        cmsg->cmsg_len     = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
    }
    while (sent < total) {
        niov = 0;
        skip = sent;
        if (skip < sizeof(*hdr)) {
            iov[niov].iov_base = (char *)hdr + skip;
            iov[niov].iov_len  = sizeof(*hdr) - skip;
            ++niov;
            skip = 0;
        } else {
            skip -= sizeof(*hdr);
        }
        if (hdr->length > 0) {
            iov[niov].iov_base = (char *)payload + skip;
            iov[niov].iov_len  = hdr->length - skip;
            ++niov;
        }
        msg.msg_iov    = iov;
        msg.msg_iovlen = (size_t)niov;
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return IVM_ERROR_DAEMON_LOST;
        }
        sent += (size_t)n;
        msg.msg_control    = NULL; /* fds go with the first byte only */
        msg.msg_controllen = 0;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_sock_recv(int fd, void *buf, size_t len, int *fds, int *nfds_p,
                         int max_fds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * IVM_MSG_MAX_FDS)];
    } ctrl;
    struct cmsghdr *cmsg;
    struct msghdr msg;
    struct iovec iov;
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        memset(&msg, 0, sizeof(msg));
        iov.iov_base       = (char *)buf + got;
        iov.iov_len        = len - got;
        msg.msg_iov        = &iov;
        msg.msg_iovlen     = 1;
        msg.msg_control    = ctrl.buf;
        msg.msg_controllen = sizeof(ctrl.buf);
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return IVM_ERROR_DAEMON_LOST;
        }
        for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
                int count = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                int k, one;
                for (k = 0; k < count; ++k) {
                    memcpy(&one, CMSG_DATA(cmsg) + k * sizeof(int), sizeof(int));
                    if (fds != NULL && *nfds_p < max_fds) {
                        fds[(*nfds_p)++] = one;
                    } else {
                        close(one);
                    }
                }
            }
        }
        got += (size_t)n;
    }
    return IVM_SUCCESS;
}

void ivm_sock_close_fds(const int *fds, int n)
{
    int i;

    for (i = 0; i < n; ++i) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
}

int ivm_sock_inet_addr(const char *host, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *len_p)
{
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port   = htons(port);
        *len_p         = sizeof(*a4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port   = htons(port);
        *len_p          = sizeof(*a6);
        return 0;
    }
    return -1;
}
