/* Unit tests of the Unix-socket helpers (common/sock.c): the socket directory
 * and path rules, the directory's ownership and mode checks, connect errors,
 * and whole-message send/receive with SCM_RIGHTS fds. No daemon. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock.h"

static char base[64];

static int count_fds(void)
{
    DIR *dp = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;

    cr_assert_not_null(dp);
    while ((de = readdir(dp)) != NULL) {
        n += de->d_name[0] != '.';
    }
    closedir(dp);
    return n - 1; /* the directory stream's own fd */
}

static void clear_env(void)
{
    unsetenv("IVM_SOCKET_DIR");
    unsetenv("IVM_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
}

static void setup(void)
{
    clear_env();
    snprintf(base, sizeof(base), "/tmp/ivmt-sock.XXXXXX");
    cr_assert_not_null(mkdtemp(base));
}

static void rm_rf(const char *path)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", path);
    }
}

static void teardown(void)
{
    rm_rf(base);
    clear_env();
}

TestSuite(sock, .init = setup, .fini = teardown, .timeout = 20);

Test(sock, socket_dir_precedence)
{
    char buf[256], want[64];

    setenv("IVM_SOCKET_DIR", "/some/dir", 1);
    setenv("XDG_RUNTIME_DIR", "/run/user/42", 1);
    cr_assert_eq(ivm_sock_dir(buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/some/dir", "IVM_SOCKET_DIR first");
    setenv("IVM_SOCKET_DIR", "", 1);
    cr_assert_eq(ivm_sock_dir(buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/run/user/42/ivm", "an empty IVM_SOCKET_DIR counts as unset");
    unsetenv("IVM_SOCKET_DIR");
    cr_assert_eq(ivm_sock_dir(buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/run/user/42/ivm", "then $XDG_RUNTIME_DIR/ivm");
    unsetenv("XDG_RUNTIME_DIR");
    cr_assert_eq(ivm_sock_dir(buf, sizeof(buf)), IVM_SUCCESS);
    snprintf(want, sizeof(want), "/tmp/ivm-%u", (unsigned)getuid());
    cr_assert_str_eq(buf, want, "then /tmp/ivm-$UID");
    setenv("IVM_SOCKET_DIR", "/a/rather/long/directory/name", 1);
    cr_assert_eq(ivm_sock_dir(buf, 8), IVM_ERROR_INVALID_VALUE, "does not fit");
}

Test(sock, socket_path)
{
    char buf[256];

    setenv("IVM_SOCKET_DIR", "/d", 1);
    cr_assert_eq(ivm_sock_path(buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/d/ivmd.sock");
    setenv("IVM_SOCKET", "/elsewhere/x.sock", 1);
    cr_assert_eq(ivm_sock_path(buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/elsewhere/x.sock", "IVM_SOCKET wins");
    cr_assert_eq(ivm_sock_path(buf, 5), IVM_ERROR_INVALID_VALUE);
}

Test(sock, dir_prepare_creates_0700)
{
    char dir[256];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/new", base);
    cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_SUCCESS);
    cr_assert_eq(lstat(dir, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0700, "created with mode %o", st.st_mode & 0777);
    cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_SUCCESS, "an existing good directory");
}

Test(sock, dir_prepare_refuses_unsafe_directories)
{
    char dir[256], file[256], link[256];
    FILE *f;

    snprintf(dir, sizeof(dir), "%s/d", base);
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(chmod(dir, 0750), 0);
    cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_ERROR_PERMISSION, "group-readable");
    cr_assert_eq(chmod(dir, 0707), 0);
    cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_ERROR_PERMISSION, "world-writable");
    cr_assert_eq(chmod(dir, 0700), 0);
    cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_SUCCESS);

    snprintf(file, sizeof(file), "%s/file", base);
    f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    chmod(file, 0700);
    cr_assert_eq(ivm_sock_dir_prepare(file), IVM_ERROR_PERMISSION, "a plain file");

    snprintf(link, sizeof(link), "%s/link", base);
    cr_assert_eq(symlink(dir, link), 0);
    cr_assert_eq(ivm_sock_dir_prepare(link), IVM_ERROR_PERMISSION, "a symbolic link");

    if (getuid() == 0) {
        cr_assert_eq(chown(dir, 65534, 65534), 0);
        cr_assert_eq(ivm_sock_dir_prepare(dir), IVM_ERROR_PERMISSION, "another user's");
    }
}

Test(sock, connect_errors)
{
    char path[256], longpath[200];
    struct sockaddr_un addr;
    int fd;
    FILE *f;

    snprintf(path, sizeof(path), "%s/none.sock", base);
    cr_assert_eq(ivm_sock_connect(path), IVM_ERROR_NO_DAEMON, "no socket file");

    memset(longpath, 'x', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    cr_assert_eq(ivm_sock_connect(longpath), IVM_ERROR_INVALID_VALUE, "longer than sun_path");

    /* a socket file nobody listens on any more */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/stale.sock", base);
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    close(fd);
    cr_assert_eq(ivm_sock_connect(addr.sun_path), IVM_ERROR_NO_DAEMON, "a stale socket");

    snprintf(path, sizeof(path), "%s/plain", base);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_lt(ivm_sock_connect(path), 0, "a plain file");
}

Test(sock, connect_sets_cloexec)
{
    struct sockaddr_un addr;
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fd;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/l.sock", base);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    fd = ivm_sock_connect(addr.sun_path);
    cr_assert_geq(fd, 0);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC, "PEs must not leak the socket into exec'd programs");
    close(fd);
    close(lfd);
}

Test(sock, send_recv_message_with_fd)
{
    int sv[2], pipefd[2], fds[IVM_MSG_MAX_FDS], nfds = 0;
    const char payload[] = "twelve bytes";
    ivm_msg_hdr_t hdr, got;
    char buf[64];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(pipe(pipefd), 0);
    ivm_proto_hdr_init(&hdr, IVM_MSG_MAP, sizeof(payload), 9);
    cr_assert_eq(ivm_sock_send(sv[0], &hdr, payload, &pipefd[1], 1), IVM_SUCCESS);
    cr_assert_eq(ivm_sock_recv(sv[1], &got, sizeof(got), fds, &nfds, IVM_MSG_MAX_FDS),
                 IVM_SUCCESS);
    cr_assert_eq(memcmp(&got, &hdr, sizeof(hdr)), 0);
    cr_assert_eq(nfds, 1, "the fd travels with the first byte");
    cr_assert_eq(ivm_sock_recv(sv[1], buf, got.length, fds, &nfds, IVM_MSG_MAX_FDS),
                 IVM_SUCCESS);
    cr_assert_str_eq(buf, payload);
    cr_assert_eq(nfds, 1);
    cr_assert(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, "received fds are close-on-exec");
    cr_assert_eq(write(fds[0], "ok", 2), 2, "the received fd is the pipe's write end");
    cr_assert_eq(read(pipefd[0], buf, 2), 2);
    cr_assert_eq(memcmp(buf, "ok", 2), 0);
    ivm_sock_close_fds(fds, nfds);
    close(pipefd[0]);
    close(pipefd[1]);
    close(sv[0]);
    close(sv[1]);
}

Test(sock, extra_fds_are_closed)
{
    int sv[2], pipefd[2], send_fds[3], fds[1], nfds = 0, before;
    ivm_msg_empty_t empty = {0};
    ivm_msg_hdr_t hdr;
    char buf[sizeof(hdr) + sizeof(empty)];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(pipe(pipefd), 0);
    send_fds[0] = send_fds[1] = send_fds[2] = pipefd[0];
    before = count_fds();
    ivm_proto_hdr_init(&hdr, IVM_MSG_INFO, sizeof(empty), 1);
    cr_assert_eq(ivm_sock_send(sv[0], &hdr, &empty, send_fds, 3), IVM_SUCCESS);
    cr_assert_eq(ivm_sock_recv(sv[1], buf, sizeof(buf), fds, &nfds, 1), IVM_SUCCESS);
    cr_assert_eq(nfds, 1, "one kept");
    cr_assert_eq(count_fds(), before + 1, "the fds beyond max_fds were closed, not leaked");
    close(fds[0]);
    close(pipefd[0]);
    close(pipefd[1]);
    close(sv[0]);
    close(sv[1]);
}

Test(sock, eof_and_broken_pipe_are_daemon_lost)
{
    int sv[2];
    ivm_msg_empty_t empty = {0};
    ivm_msg_hdr_t hdr;
    char buf[16];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    cr_assert_eq(ivm_sock_recv(sv[0], buf, sizeof(buf), NULL, NULL, 0), IVM_ERROR_DAEMON_LOST);
    ivm_proto_hdr_init(&hdr, IVM_MSG_INFO, sizeof(empty), 1);
    /* no SIGPIPE: the process survives to see the status */
    cr_assert_eq(ivm_sock_send(sv[0], &hdr, &empty, NULL, 0), IVM_ERROR_DAEMON_LOST);
    close(sv[0]);
}

Test(sock, message_cut_short_is_daemon_lost)
{
    int sv[2];
    char buf[16];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(write(sv[1], "12345", 5), 5);
    close(sv[1]);
    cr_assert_eq(ivm_sock_recv(sv[0], buf, sizeof(buf), NULL, NULL, 0), IVM_ERROR_DAEMON_LOST);
    close(sv[0]);
}

typedef struct reader_arg {
    int    fd;
    char  *buf;
    size_t len;
    int    rc;
} reader_arg_t;

static void *reader(void *p)
{
    reader_arg_t *a = p;

    a->rc = ivm_sock_recv(a->fd, a->buf, a->len, NULL, NULL, 0);
    return NULL;
}

Test(sock, large_message_in_pieces)
{
    const size_t len = IVM_MSG_MAX_PAYLOAD;
    char *out = malloc(len), *in = calloc(1, sizeof(ivm_msg_hdr_t) + len);
    int sv[2];
    ivm_msg_hdr_t hdr;
    reader_arg_t arg;
    pthread_t th;

    cr_assert(out != NULL && in != NULL);
    for (size_t i = 0; i < len; ++i) {
        out[i] = (char)(i * 31 + 7);
    }
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    arg = (reader_arg_t){sv[1], in, sizeof(hdr) + len, -1};
    cr_assert_eq(pthread_create(&th, NULL, reader, &arg), 0);
    ivm_proto_hdr_init(&hdr, IVM_MSG_ENTER, (uint32_t)len, 3);
    cr_assert_eq(ivm_sock_send(sv[0], &hdr, out, NULL, 0), IVM_SUCCESS);
    pthread_join(th, NULL);
    cr_assert_eq(arg.rc, IVM_SUCCESS);
    cr_assert_eq(memcmp(in + sizeof(hdr), out, len), 0, "1 MiB arrives intact");
    close(sv[0]);
    close(sv[1]);
    free(out);
    free(in);
}
