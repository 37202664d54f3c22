/* Unit tests of the synchronous request client and the readiness wait
 * (common/client.c) against a scripted fake daemon: a thread that accepts one
 * connection on a private socket, reads one request and answers as told. */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "sock.h"

/* What the fake daemon answers. */
typedef enum {
    FAKE_ANSWER,   /* the reply to the request: status, the struct, detail */
    FAKE_SILENT,   /* reads the request, never answers (until closed) */
    FAKE_WRONG,    /* a reply of another type */
    FAKE_SHORT,    /* a header announcing more than it sends, then EOF */
} fake_mode_t;

typedef struct fake {
    char        path[108];
    int         listen_fd;
    fake_mode_t mode;
    int32_t     status;
    const char *detail;
    uint16_t    got_type; /* the request's type, as the fake read it */
    pthread_t   thread;
} fake_t;

static char base[64];

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    char buf[sizeof(ivm_msg_info_rep_t) + IVM_MSG_DETAIL_MAX];
    ivm_msg_info_rep_t rep;
    ivm_msg_hdr_t hdr;
    uint16_t type;
    size_t len;
    int fd = accept(f->listen_fd, NULL, NULL);

    if (fd < 0) {
        return NULL;
    }
    if (ivm_sock_recv(fd, &hdr, sizeof(hdr), NULL, NULL, 0) != IVM_SUCCESS ||
        ivm_sock_recv(fd, buf, hdr.length, NULL, NULL, 0) != IVM_SUCCESS) {
        close(fd);
        return NULL;
    }
    f->got_type = hdr.type;
    type        = f->mode == FAKE_WRONG ? IVM_MSG_LIST : hdr.type;
    memset(&rep, 0, sizeof(rep));
    rep.status = f->status;
    rep.pid    = 4321;
    snprintf(rep.node, sizeof(rep.node), "fake-node");
    memcpy(buf, &rep, sizeof(rep));
    len = sizeof(rep);
    if (f->detail != NULL) {
        memcpy(buf + len, f->detail, strlen(f->detail) + 1);
        len += strlen(f->detail) + 1;
    }
    if (f->mode == FAKE_SILENT) {
        while (read(fd, buf, sizeof(buf)) > 0) {
        }
    } else {
        ivm_proto_hdr_init(&hdr, type | IVM_MSG_REPLY, (uint32_t)len, hdr.seq);
        if (f->mode == FAKE_SHORT) {
            /* No Criterion assertion off the test's thread: the client's
             * checks tell what did not arrive. */
            if (write(fd, &hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr)) {
                (void)!write(fd, buf, 8);
            }
        } else {
            (void)ivm_sock_send(fd, &hdr, buf, NULL, 0);
        }
    }
    close(fd);
    return NULL;
}

static void fake_start(fake_t *f, fake_mode_t mode, int32_t status, const char *detail)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};

    memset(f, 0, sizeof(*f));
    f->mode   = mode;
    f->status = status;
    f->detail = detail;
    snprintf(f->path, sizeof(f->path), "%s/fake.sock", base);
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", f->path);
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(f->listen_fd, 0);
    cr_assert_eq(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    cr_assert_eq(listen(f->listen_fd, 4), 0);
    cr_assert_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake_t *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    unlink(f->path);
}

static void setup(void)
{
    snprintf(base, sizeof(base), "/tmp/ivmt-client.XXXXXX");
    cr_assert_not_null(mkdtemp(base));
}

static void teardown(void)
{
    rmdir(base);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 20);

Test(client, answer_with_reply_struct)
{
    ivm_msg_info_rep_t info;
    ivm_client_result_t res;
    fake_t f;

    fake_start(&f, FAKE_ANSWER, IVM_SUCCESS, NULL);
    cr_assert_eq(ivm_client_info(f.path, 2000, &info, &res), IVM_SUCCESS);
    fake_stop(&f);
    cr_assert_eq(f.got_type, IVM_MSG_INFO);
    cr_assert_eq(res.answered, 1);
    cr_assert_str_eq(res.detail, "");
    cr_assert_eq(info.pid, 4321);
    cr_assert_str_eq(info.node, "fake-node");
}

Test(client, daemon_status_and_detail)
{
    ivm_msg_info_rep_t info = {.pid = 77};
    ivm_client_result_t res;
    fake_t f;

    fake_start(&f, FAKE_ANSWER, IVM_ERROR_PERMISSION, "not your daemon");
    cr_assert_eq(ivm_client_info(f.path, 2000, &info, &res), IVM_ERROR_PERMISSION);
    fake_stop(&f);
    cr_assert_eq(res.answered, 1, "the status is the daemon's");
    cr_assert_str_eq(res.detail, "not your daemon");
    cr_assert_eq(info.pid, 77, "rep is left alone when the status is not IVM_SUCCESS");
}

Test(client, status_prefix_of_a_reply)
{
    ivm_msg_status_t rep;
    ivm_msg_empty_t req = {0};
    ivm_client_result_t res;
    fake_t f;

    /* A caller may take only the status; the detail still follows the type's
     * whole reply struct. */
    fake_start(&f, FAKE_ANSWER, IVM_ERROR_LIMIT, "too many");
    cr_assert_eq(ivm_client_request(f.path, 0, IVM_MSG_INFO, &req, sizeof(req), &rep,
                                    sizeof(rep), &res),
                 IVM_ERROR_LIMIT);
    fake_stop(&f);
    cr_assert_str_eq(res.detail, "too many");
}

Test(client, no_daemon)
{
    ivm_msg_info_rep_t info;
    ivm_client_result_t res;
    char path[128];

    snprintf(path, sizeof(path), "%s/nobody.sock", base);
    cr_assert_eq(ivm_client_info(path, 1000, &info, &res), IVM_ERROR_NO_DAEMON);
    cr_assert_eq(res.answered, 0);
    cr_assert_not_null(strstr(res.detail, "cannot connect"), "detail: %s", res.detail);
    cr_assert_eq(ivm_client_info(path, 1000, &info, NULL), IVM_ERROR_NO_DAEMON,
                 "res may be NULL");
}

Test(client, silence_times_out)
{
    ivm_msg_info_rep_t info;
    ivm_client_result_t res;
    struct timespec t0, t1;
    fake_t f;
    double s;

    fake_start(&f, FAKE_SILENT, IVM_SUCCESS, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(ivm_client_info(f.path, 300, &info, &res), IVM_ERROR_DAEMON_LOST);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fake_stop(&f);
    s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert(s >= 0.25 && s < 5.0, "gave up after %.3f s", s);
    cr_assert_eq(res.answered, 0);
    cr_assert_not_null(strstr(res.detail, "no reply to INFO within 300 ms"), "detail: %s",
                       res.detail);
}

Test(client, wrong_reply_is_protocol)
{
    ivm_msg_info_rep_t info;
    ivm_client_result_t res;
    fake_t f;

    fake_start(&f, FAKE_WRONG, IVM_SUCCESS, NULL);
    cr_assert_eq(ivm_client_info(f.path, 2000, &info, &res), IVM_ERROR_PROTOCOL);
    fake_stop(&f);
    cr_assert_eq(res.answered, 0);
    cr_assert_not_null(strstr(res.detail, "bad reply to INFO"), "detail: %s", res.detail);
}

Test(client, reply_cut_short_is_daemon_lost)
{
    ivm_msg_info_rep_t info;
    ivm_client_result_t res;
    fake_t f;

    fake_start(&f, FAKE_SHORT, IVM_SUCCESS, NULL);
    cr_assert_eq(ivm_client_info(f.path, 2000, &info, &res), IVM_ERROR_DAEMON_LOST);
    fake_stop(&f);
    cr_assert_not_null(strstr(res.detail, "cut short"), "detail: %s", res.detail);
}

Test(client, probe)
{
    char path[128], longpath[256];
    fake_t f;

    snprintf(path, sizeof(path), "%s/nobody.sock", base);
    cr_assert_eq(ivm_client_probe(path), IVM_ERROR_NO_DAEMON);
    memset(longpath, 'x', sizeof(longpath) - 1);
    longpath[0]                   = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    cr_assert_eq(ivm_client_probe(longpath), IVM_ERROR_INVALID_VALUE);
    fake_start(&f, FAKE_SILENT, IVM_SUCCESS, NULL);
    cr_assert_eq(ivm_client_probe(f.path), IVM_SUCCESS);
    fake_stop(&f);
    cr_assert_eq(ivm_client_probe(f.path), IVM_ERROR_NO_DAEMON, "the socket file is gone");
}

/* ---------------------------------------------------------------- readiness */

static void write_all(int fd, const char *text)
{
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
}

Test(client, ready_line_with_port)
{
    ivm_ready_t r;
    unsigned port = 0;
    int p[2];

    cr_assert_eq(pipe(p), 0);
    write_all(p[1], "R 4711\n");
    ivm_ready_init(&r, p[0]);
    cr_assert_eq(ivm_ready_wait(&r, 1000, -1), IVM_SUCCESS);
    cr_assert_str_eq(r.line, "R 4711");
    cr_assert_eq(ivm_ready_port(&r, &port), IVM_SUCCESS);
    cr_assert_eq(port, 4711);
    cr_assert_eq(ivm_ready_wait_eof(&r, 100), IVM_ERROR_TIMEOUT, "the writer is still open");
    close(p[1]);
    cr_assert_eq(ivm_ready_wait_eof(&r, 1000), IVM_SUCCESS);
    close(p[0]);
}

Test(client, ready_line_without_port)
{
    ivm_ready_t r;
    unsigned port = 0;
    int p[2];

    cr_assert_eq(pipe(p), 0);
    write_all(p[1], "R");
    close(p[1]);
    ivm_ready_init(&r, p[0]);
    cr_assert_eq(ivm_ready_wait(&r, 1000, -1), IVM_SUCCESS, "EOF after a byte ends the line");
    cr_assert_str_eq(r.line, "R");
    cr_assert_eq(ivm_ready_port(&r, &port), IVM_ERROR_PROTOCOL);
    close(p[0]);
}

Test(client, ready_bad_ports)
{
    static const char *const bad[] = {"R 0", "R 65536", "R 12x", "X 12", "R -3", "R "};
    ivm_ready_t r;
    unsigned port;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        ivm_ready_init(&r, -1);
        snprintf(r.line, sizeof(r.line), "%s", bad[i]);
        cr_assert_eq(ivm_ready_port(&r, &port), IVM_ERROR_PROTOCOL, "'%s'", bad[i]);
    }
}

Test(client, ready_eof_without_a_byte)
{
    ivm_ready_t r;
    int p[2];

    cr_assert_eq(pipe(p), 0);
    close(p[1]);
    ivm_ready_init(&r, p[0]);
    cr_assert_eq(ivm_ready_wait(&r, 1000, -1), IVM_ERROR_NO_DAEMON);
    close(p[0]);
}

Test(client, ready_timeout_and_wake_fd)
{
    ivm_ready_t r;
    int p[2], wake[2];

    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(pipe(wake), 0);
    ivm_ready_init(&r, p[0]);
    cr_assert_eq(ivm_ready_wait(&r, 50, -1), IVM_ERROR_TIMEOUT);
    write_all(p[1], "R 1");
    write_all(wake[1], "x");
    cr_assert_eq(ivm_ready_wait(&r, 5000, wake[0]), IVM_ERROR_TIMEOUT,
                 "a readable wake_fd returns while the line is not whole");
    write_all(p[1], "2\n");
    cr_assert_eq(ivm_ready_wait(&r, 5000, -1), IVM_SUCCESS, "what came before is kept");
    cr_assert_str_eq(r.line, "R 12");
    close(p[0]);
    close(p[1]);
    close(wake[0]);
    close(wake[1]);
}
