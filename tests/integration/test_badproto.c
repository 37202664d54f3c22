/* Integration: malformed protocol input. Each bad connection is dropped by
 * ivmd (the client reads EOF) and the daemon keeps serving, including a
 * well-behaved PE program while bad connections sit idle. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sock.h"

TestSuite(badproto, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 60);

static int send_bytes(const void *bytes, size_t len)
{
    int fd = ivmt_connect(&ivmt_d);
    size_t off = 0;

    while (off < len) {
        ssize_t n = send(fd, (const char *)bytes + off, len - off, MSG_NOSIGNAL);
        if (n < 0) {
            /* the daemon may already have dropped us: that is what we check */
            cr_assert(errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
            break;
        }
        off += (size_t)n;
    }
    return fd;
}

static ivm_msg_hdr_t hdr_of(uint16_t type, uint32_t length)
{
    ivm_msg_hdr_t h;

    ivm_proto_hdr_init(&h, type, length, 1);
    return h;
}

/* Read until EOF (anything the daemon says before closing is ignored). */
static void expect_dropped(int fd, const char *what)
{
    double deadline = ivmt_now() + 3.0;
    char buf[4096];

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)((deadline - ivmt_now()) * 1000);
        ssize_t n;
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            close(fd);
            cr_assert_fail("ivmd kept the connection open 3 s after %s", what);
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            break;
        }
        cr_assert(n > 0 || errno == EINTR || errno == EAGAIN, "recv: %s", strerror(errno));
    }
    close(fd);
}

/* The daemon answers INFO, and holds no job state once what was left of an
 * ended job (its processes, parked ones of the warm pool included) is reaped:
 * that takes a moment, so the state is polled for up to 3 s. */
static void expect_alive(const char *after)
{
    double deadline = ivmt_now() + 3.0;
    ivm_msg_info_rep_t info;
    const char *why = NULL;

    for (;;) {
        cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0,
                     "ivmd stopped serving after %s: %s", after, why);
        if ((info.jobs == 0 && info.pes == 0 && info.objects == 0) || ivmt_now() > deadline) {
            break;
        }
        usleep(10000);
    }
    cr_assert(info.jobs == 0 && info.pes == 0 && info.objects == 0,
              "after %s: %u jobs, %u PEs, %u objects", after, info.jobs, info.pes,
              info.objects);
}

/* Send header (+ payload) and check the connection is dropped. */
static void bad_message(const ivm_msg_hdr_t *h, const void *payload, size_t len,
                        const char *what)
{
    char *buf = malloc(sizeof(*h) + len);
    int fd;

    cr_assert_not_null(buf);
    memcpy(buf, h, sizeof(*h));
    if (len > 0) {
        memcpy(buf + sizeof(*h), payload, len);
    }
    fd = send_bytes(buf, sizeof(*h) + len);
    free(buf);
    expect_dropped(fd, what);
    expect_alive(what);
}

/* A well-formed request the daemon must refuse: an error reply or a drop. */
static void expect_refused(const ivm_msg_hdr_t *h, const void *payload, size_t len,
                           const char *what)
{
    char buf[sizeof(ivm_msg_hdr_t) + 4096];
    ivm_msg_hdr_t rh;
    int32_t status;
    int fd;
    size_t got = 0;
    double deadline = ivmt_now() + 3.0;

    memcpy(buf, h, sizeof(*h));
    memcpy(buf + sizeof(*h), payload, len);
    fd = send_bytes(buf, sizeof(*h) + len);
    while (got < sizeof(rh) + sizeof(status)) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)((deadline - ivmt_now()) * 1000);
        ssize_t n;
        cr_assert(left > 0 && poll(&p, 1, left) > 0, "no answer and no drop 3 s after %s",
                  what);
        n = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            close(fd);
            expect_alive(what);
            return; /* dropped */
        }
        cr_assert(n > 0 || errno == EINTR, "recv: %s", strerror(errno));
        got += n > 0 ? (size_t)n : 0;
    }
    memcpy(&rh, buf, sizeof(rh));
    memcpy(&status, buf + sizeof(rh), sizeof(status));
    close(fd);
    cr_assert_eq(rh.magic, IVM_PROTO_MAGIC, "garbled reply to %s", what);
    cr_assert_eq(rh.type, h->type | IVM_MSG_REPLY, "reply type 0x%x to %s", rh.type, what);
    cr_assert_lt(status, 0, "%s was accepted (status %d)", what, status);
    expect_alive(what);
}

Test(badproto, bad_headers)
{
    ivm_msg_empty_t empty = {0};
    ivm_msg_hdr_t h;

    h = hdr_of(IVM_MSG_INFO, sizeof(empty));
    h.magic = 0xdeadbeef;
    bad_message(&h, &empty, sizeof(empty), "a wrong magic");

    h = hdr_of(IVM_MSG_INFO, sizeof(empty));
    h.version = IVM_PROTO_VERSION + 1;
    bad_message(&h, &empty, sizeof(empty), "a wrong version");

    h = hdr_of(IVM_MSG_NONE, sizeof(empty));
    bad_message(&h, &empty, sizeof(empty), "message type 0");

    h = hdr_of(999, sizeof(empty));
    bad_message(&h, &empty, sizeof(empty), "message type 999");

    h = hdr_of(IVM_MSG_LAST, sizeof(empty));
    bad_message(&h, &empty, sizeof(empty), "message type IVM_MSG_LAST");

    h = hdr_of(IVM_MSG_INFO | IVM_MSG_REPLY, sizeof(ivm_msg_info_rep_t));
    {
        ivm_msg_info_rep_t rep;
        memset(&rep, 0, sizeof(rep));
        bad_message(&h, &rep, sizeof(rep), "a reply sent as a request");
    }
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, bad_lengths)
{
    char payload[64];
    ivm_msg_hdr_t h;

    memset(payload, 0, sizeof(payload));
    h = hdr_of(IVM_MSG_ENTER, IVM_MSG_MAX_PAYLOAD + 1);
    bad_message(&h, NULL, 0, "a length beyond IVM_MSG_MAX_PAYLOAD");

    h = hdr_of(IVM_MSG_MALLOC, 0xffffffffu);
    bad_message(&h, NULL, 0, "a length of 4 GiB");

    h = hdr_of(IVM_MSG_INFO, 8);
    bad_message(&h, payload, 8, "an INFO of 8 bytes (fixed length 4)");

    h = hdr_of(IVM_MSG_WAIT, 4);
    bad_message(&h, payload, 4, "a WAIT of 4 bytes (fixed length 8)");

    h = hdr_of(IVM_MSG_SIGNAL, 0);
    bad_message(&h, NULL, 0, "an empty SIGNAL (fixed length 4)");

    h = hdr_of(IVM_MSG_MALLOC, sizeof(ivm_msg_malloc_req_t) - 1);
    {
        char *m = calloc(1, sizeof(ivm_msg_malloc_req_t));
        bad_message(&h, m, sizeof(ivm_msg_malloc_req_t) - 1, "a MALLOC one byte short");
        free(m);
    }
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, bad_variable_messages)
{
    struct {
        ivm_msg_kill_pes_req_t req;
        int32_t                ids[1];
    } kill = {{3, 0}, {1}};
    ivm_msg_hdr_t h = hdr_of(IVM_MSG_KILL_PES, sizeof(kill));

    bad_message(&h, &kill, sizeof(kill), "a KILL_PES whose count says 3 with 1 id");
    kill.req.n = 0;
    bad_message(&h, &kill, sizeof(kill), "a KILL_PES with count 0");

    {
        char buf[sizeof(ivm_msg_enter_req_t) + 10];
        ivm_msg_enter_req_t *e = (ivm_msg_enter_req_t *)buf;
        memset(buf, 0, sizeof(buf));
        e->flags = IVM_ENTER_ROOT;
        e->pid = (uint32_t)getpid();
        e->blob_len = 100;
        h = hdr_of(IVM_MSG_ENTER, sizeof(buf));
        bad_message(&h, buf, sizeof(buf), "an ENTER whose blob length disagrees");
        e->blob_len = 10;
        memset(e->cpu_devices, '7', sizeof(e->cpu_devices));
        bad_message(&h, buf, sizeof(buf), "an ENTER with an unterminated cpu_devices");
    }
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, truncated_and_half_messages)
{
    ivm_msg_hdr_t h = hdr_of(IVM_MSG_INFO, sizeof(ivm_msg_empty_t));
    char buf[sizeof(h) + 2];
    int fd;

    /* payload cut short, then end of stream */
    memcpy(buf, &h, sizeof(h));
    memset(buf + sizeof(h), 0, 2);
    fd = send_bytes(buf, sizeof(buf));
    shutdown(fd, SHUT_WR);
    expect_dropped(fd, "a message cut short before EOF");
    expect_alive("a message cut short");

    /* half a header, then close */
    fd = send_bytes(&h, sizeof(h) / 2);
    close(fd);
    expect_alive("half a header and close");

    /* a full header promising a payload, then close */
    fd = send_bytes(&h, sizeof(h));
    close(fd);
    expect_alive("a header without its payload and close");

    /* connect and close at once, many times */
    for (int i = 0; i < 50; ++i) {
        close(ivmt_connect(&ivmt_d));
    }
    expect_alive("50 empty connections");
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, random_bytes)
{
    unsigned char buf[512];
    unsigned seed = 12345;

    for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < sizeof(buf); ++i) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (unsigned char)(seed >> 16);
        }
        if (memcmp(buf, "IVM1", 4) == 0) {
            buf[0] ^= 0xff;
        }
        bad_message((const ivm_msg_hdr_t *)buf, buf + sizeof(ivm_msg_hdr_t),
                    sizeof(buf) - sizeof(ivm_msg_hdr_t), "512 random bytes");
    }
    /* random payload behind a valid header of each fixed-length type */
    for (int type = IVM_MSG_ENTER; type < IVM_MSG_LAST; ++type) {
        if (type == IVM_MSG_SHUTDOWN) {
            continue;
        }
        for (size_t i = 0; i < sizeof(buf); ++i) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (unsigned char)(seed >> 16);
        }
        ivm_msg_hdr_t h = hdr_of((uint16_t)type, 3); /* no type is 3 bytes long */
        bad_message(&h, buf, 3, "a 3-byte payload");
    }
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, requests_before_enter_or_forged)
{
    ivm_msg_malloc_req_t m;
    ivm_msg_enter_req_t e;
    ivm_msg_hdr_t h;

    memset(&m, 0, sizeof(m));
    m.size = 4096;
    strcpy(m.name, "sneaky");
    h = hdr_of(IVM_MSG_MALLOC, sizeof(m));
    expect_refused(&h, &m, sizeof(m), "a MALLOC before ENTER");

    memset(&e, 0, sizeof(e));
    e.pid = (uint32_t)getpid();
    e.job_id = 1;
    e.pe_id = 1;
    e.token = 0x1234567890abcdefull;
    h = hdr_of(IVM_MSG_ENTER, sizeof(e));
    expect_refused(&h, &e, sizeof(e), "an ENTER as PE 1 of a job that does not exist");

    e.job_id = 0;
    e.pe_id = 0;
    e.token = 0;
    e.pid = 1; /* not the caller's pid */
    e.flags = IVM_ENTER_ROOT;
    h = hdr_of(IVM_MSG_ENTER, sizeof(e));
    expect_refused(&h, &e, sizeof(e), "a root ENTER with someone else's pid");
    ivmt_daemon_finish(&ivmt_d);
}

Test(badproto, many_bad_connections_at_once)
{
    int fds[40];
    unsigned char junk[64];

    memset(junk, 0xab, sizeof(junk));
    for (int i = 0; i < 40; ++i) {
        fds[i] = send_bytes(junk, sizeof(junk));
    }
    for (int i = 0; i < 40; ++i) {
        expect_dropped(fds[i], "64 bytes of 0xab (one of 40 connections)");
    }
    expect_alive("40 bad connections");
    ivmt_daemon_finish(&ivmt_d);
}

/* Bad connections left idle do not stop a real PE program, before or after. */
Test(badproto, good_pe_beside_idle_bad_connections)
{
    ivm_msg_hdr_t h = hdr_of(IVM_MSG_INFO, sizeof(ivm_msg_empty_t));
    ivm_msg_hdr_t big = hdr_of(IVM_MSG_ENTER, IVM_MSG_MAX_PAYLOAD);
    char part[1000];
    ivmt_result_t r;
    int idle_half, idle_big, fd;

    /* dropped one first */
    h.magic = 0;
    fd = send_bytes(&h, sizeof(h));
    expect_dropped(fd, "a wrong magic");
    h.magic = IVM_PROTO_MAGIC;

    idle_half = send_bytes(&h, 6);              /* 6 bytes of a header */
    memset(part, 0, sizeof(part));
    idle_big = send_bytes(&big, sizeof(big));   /* 1 MiB promised ... */
    cr_assert_eq(send(idle_big, part, sizeof(part), MSG_NOSIGNAL), (ssize_t)sizeof(part));

    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "spawn_one", NULL, NULL, 20, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "spawn_one");
    ivmt_result_free(&r);
    ivmt_run_pe(&ivmt_d, IVMT_PE_MEM, "share", NULL, NULL, 20, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "share");
    ivmt_result_free(&r);

    close(idle_half);
    close(idle_big);
    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "spawn_one", NULL, NULL, 20, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "spawn_one");
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

/* Send one message (with fds) on a fresh connection; 0 if the daemon refused
 * it (dropped the connection or answered an error), 1 if it answered
 * IVM_SUCCESS, 2 if it said nothing for 3 s. */
static int try_request(const char *sock, const ivm_msg_hdr_t *h, const void *payload,
                       const int *fds, int nfds)
{
    char buf[sizeof(ivm_msg_hdr_t) + sizeof(ivm_msg_status_t)];
    size_t got = 0;
    int32_t status;
    int fd = ivm_sock_connect(sock);

    if (fd < 0) {
        return 0; /* not even connected: refused */
    }
    if (ivm_sock_send(fd, h, payload, fds, nfds) != IVM_SUCCESS) {
        close(fd);
        return 0;
    }
    while (got < sizeof(buf)) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t n;
        if (poll(&p, 1, 3000) != 1) {
            close(fd);
            return 2;
        }
        n = recv(fd, buf + got, sizeof(buf) - got, 0);
        if (n <= 0) {
            close(fd);
            return 0;
        }
        got += (size_t)n;
    }
    close(fd);
    memcpy(&status, buf + sizeof(ivm_msg_hdr_t), sizeof(status));
    return status == IVM_SUCCESS ? 1 : 0;
}

/* A root ENTER as libivm sends it: exe, cwd, argv[0], no environment. */
typedef struct root_enter {
    ivm_msg_enter_req_t req;
    char                blob[32];
} root_enter_t;

static uint32_t make_root_enter(root_enter_t *m)
{
    static const char blob[] = "/bin/true\0/\0true";

    memset(m, 0, sizeof(*m));
    m->req.flags = IVM_ENTER_ROOT;
    m->req.pid = (uint32_t)getpid();
    m->req.argc = 1;
    m->req.blob_len = sizeof(blob);
    memcpy(m->blob, blob, sizeof(blob));
    return (uint32_t)(sizeof(m->req) + sizeof(blob));
}

/* PEs are accepted only from the daemon owner's uid (SO_PEERCRED): a client
 * of another uid is refused even when the socket file lets it connect. */
Test(badproto, other_uid_is_refused)
{
    ivm_msg_empty_t empty = {0};
    ivm_msg_hdr_t h;
    root_enter_t enter;
    int results[2];

    if (getuid() != 0) {
        ivmt_daemon_finish(&ivmt_d);
        cr_skip_test("needs root to act as another user");
    }
    cr_assert_eq(chmod(ivmt_d.dir, 0755), 0);
    cr_assert_eq(chmod(ivmt_d.sock, 0777), 0);
    for (int k = 0; k < 2; ++k) {
        int status = 0;
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            int fds[2] = {1, 2};
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
                _exit(3);
            }
            if (k == 0) {
                ivm_proto_hdr_init(&h, IVM_MSG_INFO, sizeof(empty), 1);
                _exit(try_request(ivmt_d.sock, &h, &empty, NULL, 0));
            }
            ivm_proto_hdr_init(&h, IVM_MSG_ENTER, make_root_enter(&enter), 1);
            enter.req.pid = (uint32_t)getpid();
            _exit(try_request(ivmt_d.sock, &h, &enter, fds, 2));
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "the probe crashed");
        results[k] = WEXITSTATUS(status);
    }
    chmod(ivmt_d.dir, 0700);
    if (results[0] == 3) {
        ivmt_daemon_finish(&ivmt_d);
        cr_skip_test("cannot switch to uid 65534 here");
    }
    cr_assert_neq(results[1], 1, "ivmd let another uid ENTER as a root PE");
    cr_assert_eq(results[1], 0, "ivmd neither answered nor dropped another uid's ENTER");
    cr_assert_eq(results[0], 0, "ivmd answered INFO to another uid (%s)",
                 results[0] == 1 ? "served" : "no answer, connection kept");
    expect_alive("another uid's connections");
    ivmt_daemon_finish(&ivmt_d);
}

/* A child ENTER needs the token the daemon gave that PE: guessing it, or
 * naming a PE that does not exist, in a running job is refused. */
Test(badproto, forged_enter_into_a_running_job)
{
    ivmt_proc_t p;
    ivmt_result_t r;
    ivm_msg_enter_req_t e;
    ivm_msg_hdr_t h;
    pid_t pids[2];
    char *out;

    ivmt_start_pe(&ivmt_d, IVMT_PE_PROC, "sleep", NULL, NULL, &p);
    cr_assert(ivmt_wait_output(&p, "PIDS ", 20), "the job never got ready");
    out = ivmt_proc_output(&p);
    cr_assert_eq(ivmt_parse_pids(out, "PIDS", pids, 2), 2, "%s", out);
    free(out);
    for (uint32_t job = 1; job <= 4; ++job) {
        for (int pe = 0; pe <= 2; ++pe) {
            memset(&e, 0, sizeof(e));
            e.pid = (uint32_t)getpid();
            e.job_id = job;
            e.pe_id = pe;
            e.token = 0x0123456789abcdefull ^ ((uint64_t)job << 32 | (uint64_t)pe);
            ivm_proto_hdr_init(&h, IVM_MSG_ENTER, sizeof(e), 1);
            cr_assert_eq(try_request(ivmt_d.sock, &h, &e, NULL, 0), 0,
                         "a forged ENTER as PE %d of job %u was accepted (or hung)", pe, job);
        }
    }
    kill(p.pid, SIGKILL); /* the root dies: the job ends */
    ivmt_finish(&p, 10, &r);
    ivmt_result_free(&r);
    cr_assert_eq(ivmt_wait_pids_gone(&pids[1], 1, ivmt_leftover_grace_s()), 0,
                 "the child PE outlived its root");
    expect_alive("forged ENTERs");
    ivmt_daemon_finish(&ivmt_d);
}

/* One request on an entered connection: the reply's status, its detail text
 * (after the type's fixed reply of rep_len bytes) in detail; fds closed. */
static int call_on(int fd, uint16_t type, const void *req, uint32_t len, uint32_t rep_len,
                   const int *fds, int nfds, char *detail, size_t detail_len)
{
    char buf[4096 + IVM_MSG_DETAIL_MAX + 1];
    int got[IVM_MSG_MAX_FDS], ngot = 0, status;
    ivm_msg_hdr_t h;

    ivm_proto_hdr_init(&h, type, len, 9);
    cr_assert_eq(ivm_sock_send(fd, &h, req, fds, nfds), IVM_SUCCESS);
    cr_assert_eq(ivm_sock_recv(fd, &h, sizeof(h), got, &ngot, IVM_MSG_MAX_FDS), IVM_SUCCESS,
                 "no reply to a request of type %u", type);
    cr_assert(h.type == (type | IVM_MSG_REPLY) && h.length >= sizeof(int32_t) &&
                  h.length < sizeof(buf), "reply type 0x%x length %u", h.type, h.length);
    cr_assert_eq(ivm_sock_recv(fd, buf, h.length, got, &ngot, IVM_MSG_MAX_FDS), IVM_SUCCESS);
    buf[h.length] = '\0';
    ivm_sock_close_fds(got, ngot);
    memcpy(&status, buf, sizeof(status));
    snprintf(detail, detail_len, "%s", h.length > rep_len ? buf + rep_len : "");
    return status;
}

/* A CPU PE naming device copies (gpu_ref) on a node without GPUs, and
 * GPU_INFO there: clear errors, the daemon keeps serving. */
Test(badproto, gpu_requests_on_a_node_without_gpus)
{
    char detail[IVM_MSG_DETAIL_MAX + 1];
    ivm_msg_malloc_req_t m = {.size = 8192, .name = "g"};
    ivm_msg_gpu_info_req_t gi = {.gpu = 0};
    ivm_msg_empty_t empty = {0};
    ivm_msg_sync_req_t s;
    ivm_msg_obj_req_t o;
    ivm_msg_map_rep_t *map;
    root_enter_t enter;
    char rep[4096];
    int fd = ivm_sock_connect(ivmt_d.sock), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int fds[2] = {null, null};
    ivm_msg_hdr_t h;

    cr_assert(fd >= 0 && null >= 0);
    cr_assert_eq(call_on(fd, IVM_MSG_GPU_INFO, &gi, sizeof(gi), sizeof(ivm_msg_gpu_info_rep_t),
                         NULL, 0, detail, sizeof(detail)),
                 IVM_ERROR_NOT_FOUND, "GPU_INFO on a node without GPUs");
    cr_assert(strstr(detail, "no GPU") != NULL, "GPU_INFO detail '%s'", detail);

    cr_assert_eq(call_on(fd, IVM_MSG_ENTER, &enter, make_root_enter(&enter),
                         sizeof(ivm_msg_enter_rep_t), fds, 2, detail, sizeof(detail)),
                 IVM_SUCCESS, "root ENTER: %s", detail);
    close(null);
    /* The MALLOC reply's body tells the object id. */
    ivm_proto_hdr_init(&h, IVM_MSG_MALLOC, sizeof(m), 10);
    cr_assert_eq(ivm_sock_send(fd, &h, &m, NULL, 0), IVM_SUCCESS);
    {
        int got[IVM_MSG_MAX_FDS], ngot = 0;
        cr_assert_eq(ivm_sock_recv(fd, &h, sizeof(h), got, &ngot, IVM_MSG_MAX_FDS),
                     IVM_SUCCESS);
        cr_assert(h.length >= sizeof(*map) && h.length <= sizeof(rep));
        cr_assert_eq(ivm_sock_recv(fd, rep, h.length, got, &ngot, IVM_MSG_MAX_FDS),
                     IVM_SUCCESS);
        ivm_sock_close_fds(got, ngot);
        map = (ivm_msg_map_rep_t *)rep;
        cr_assert_eq(map->status, IVM_SUCCESS);
        cr_assert_eq(map->gpu_ref, 0, "a CPU PE's map has gpu_ref %llu",
                     (unsigned long long)map->gpu_ref);
    }
    memset(&s, 0, sizeof(s));
    s.obj_id = map->obj_id;
    s.size   = 4096;
    for (uint32_t op = IVM_SYNC_PUT; op <= IVM_SYNC_GET_GROUP; ++op) {
        s.op      = op;
        s.gpu_ref = op == IVM_SYNC_PUT ? 1 : ~0ull;
        cr_assert_eq(call_on(fd, IVM_MSG_SYNC, &s, sizeof(s), sizeof(ivm_msg_status_t), NULL,
                             0, detail, sizeof(detail)),
                     IVM_ERROR_INVALID_VALUE, "SYNC op %u naming device copy %llu", op,
                     (unsigned long long)s.gpu_ref);
        cr_assert(strstr(detail, "no GPU PE") != NULL, "SYNC detail '%s'", detail);
    }
    o.obj_id  = map->obj_id;
    o.gpu_ref = 7;
    cr_assert_eq(call_on(fd, IVM_MSG_UNMAP, &o, sizeof(o), sizeof(ivm_msg_status_t), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_ERROR_INVALID_VALUE, "UNMAP naming a device copy");
    cr_assert(detail[0] != '\0', "UNMAP refused without a message");
    cr_assert_eq(call_on(fd, IVM_MSG_FREE, &o, sizeof(o), sizeof(ivm_msg_status_t), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_ERROR_INVALID_VALUE, "FREE naming a device copy");
    cr_assert(detail[0] != '\0', "FREE refused without a message");
    /* The plain calls still work. */
    s.op      = IVM_SYNC_PUT;
    s.gpu_ref = 0;
    cr_assert_eq(call_on(fd, IVM_MSG_SYNC, &s, sizeof(s), sizeof(ivm_msg_status_t), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_SUCCESS, "%s", detail);
    o.gpu_ref = 0;
    cr_assert_eq(call_on(fd, IVM_MSG_FREE, &o, sizeof(o), sizeof(ivm_msg_status_t), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_SUCCESS, "%s", detail);
    cr_assert_eq(call_on(fd, IVM_MSG_EXIT, &empty, sizeof(empty), sizeof(ivm_msg_status_t),
                         NULL, 0, detail, sizeof(detail)),
                 IVM_SUCCESS, "%s", detail);
    close(fd);
    ivmt_daemon_finish(&ivmt_d);
}

/* One request on an entered connection; the reply's payload into rep (at
 * most rep_size bytes), its length returned. */
static uint32_t reply_of(int fd, uint16_t type, const void *req, uint32_t len, void *rep,
                         size_t rep_size)
{
    int got[IVM_MSG_MAX_FDS], ngot = 0;
    ivm_msg_hdr_t h;

    ivm_proto_hdr_init(&h, type, len, 11);
    cr_assert_eq(ivm_sock_send(fd, &h, req, NULL, 0), IVM_SUCCESS);
    cr_assert_eq(ivm_sock_recv(fd, &h, sizeof(h), got, &ngot, IVM_MSG_MAX_FDS), IVM_SUCCESS);
    cr_assert(h.type == (type | IVM_MSG_REPLY) && h.length <= rep_size,
              "reply type 0x%x length %u", h.type, h.length);
    cr_assert_eq(ivm_sock_recv(fd, rep, h.length, got, &ngot, IVM_MSG_MAX_FDS), IVM_SUCCESS);
    ivm_sock_close_fds(got, ngot);
    return h.length;
}

/* On the wire a successful CREATE_PES reply ends after its n PE ids (a warm
 * PE's creation moves 12 bytes, not 4 KiB); a failed one is the whole struct
 * and its detail, as every reply. */
Test(badproto, create_pes_reply_lengths)
{
    const uint32_t fixed = (uint32_t)offsetof(ivm_msg_create_pes_rep_t, pes);
    static char rep[sizeof(ivm_msg_create_pes_rep_t) + IVM_MSG_DETAIL_MAX];
    ivm_msg_create_pes_rep_t *pes = (ivm_msg_create_pes_rep_t *)rep;
    ivm_msg_create_dev_req_t dreq = {.devtype = IVM_CPU_N(0)};
    ivm_msg_create_dev_rep_t *dev = (ivm_msg_create_dev_rep_t *)rep;
    ivm_msg_create_pes_req_t req;
    ivm_msg_pe_req_t max = {.pe = 3};
    ivm_msg_empty_t empty = {0};
    root_enter_t enter;
    char detail[IVM_MSG_DETAIL_MAX + 1];
    int fd = ivm_sock_connect(ivmt_d.sock), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int fds[2] = {null, null};
    uint32_t len;

    cr_assert(fd >= 0 && null >= 0);
    cr_assert_eq(call_on(fd, IVM_MSG_ENTER, &enter, make_root_enter(&enter),
                         sizeof(ivm_msg_enter_rep_t), fds, 2, detail, sizeof(detail)),
                 IVM_SUCCESS, "root ENTER: %s", detail);
    close(null);
    len = reply_of(fd, IVM_MSG_CREATE_DEV, &dreq, sizeof(dreq), rep, sizeof(rep));
    cr_assert_eq(len, sizeof(*dev));
    cr_assert_eq(dev->status, IVM_SUCCESS);
    memset(&req, 0, sizeof(req));
    req.devtype = dev->devtype;
    memcpy(req.host, dev->host, sizeof(req.host));

    req.n = 2; /* the PEs run /bin/true: they end without ivmEnter */
    len = reply_of(fd, IVM_MSG_CREATE_PES, &req, sizeof(req), rep, sizeof(rep));
    cr_assert_eq(pes->status, IVM_SUCCESS);
    cr_assert_eq(len, fixed + 2 * sizeof(int32_t), "a 2-PE reply of %u bytes", len);
    cr_assert(pes->n == 2 && pes->pes[0] == 1 && pes->pes[1] == 2, "n %d ids %d %d", pes->n,
              pes->pes[0], pes->pes[1]);
    cr_assert_eq(call_on(fd, IVM_MSG_SET_MAX_ID, &max, sizeof(max), sizeof(ivm_msg_status_t),
                         NULL, 0, detail, sizeof(detail)),
                 IVM_SUCCESS, "%s", detail);
    len = reply_of(fd, IVM_MSG_CREATE_PES, &req, sizeof(req), rep, sizeof(rep));
    cr_assert_eq(len, fixed + 2 * sizeof(int32_t), "a reply past the max id: %u bytes", len);
    cr_assert(pes->status == IVM_SUCCESS && pes->pes[0] == 3 && pes->pes[1] == IVM_PE_NULL);

    req.n = -1;
    len = reply_of(fd, IVM_MSG_CREATE_PES, &req, sizeof(req), rep, sizeof(rep));
    cr_assert_eq(pes->status, IVM_ERROR_INVALID_VALUE);
    cr_assert_gt(len, sizeof(*pes), "a failed reply of %u bytes has no detail", len);
    cr_assert(strstr(rep + sizeof(*pes), "PE count") != NULL, "detail '%s'",
              rep + sizeof(*pes));
    cr_assert_eq(call_on(fd, IVM_MSG_EXIT, &empty, sizeof(empty), sizeof(ivm_msg_status_t),
                         NULL, 0, detail, sizeof(detail)),
                 IVM_SUCCESS, "%s", detail);
    close(fd);
    expect_alive("CREATE_PES replies");
    ivmt_daemon_finish(&ivmt_d);
}

/* CPU_INFO and SET_SHARE (no ivmEnter needed) with a device the daemon lacks,
 * a share outside 1..100 or a reserved field set: clear errors, nothing
 * changes, the daemon keeps serving. (A valid share of less than 100 would
 * make cgroups: test_share does that.) */
Test(badproto, cpu_share_requests_out_of_range)
{
    static const struct {
        uint32_t    dev, percent;
        int         status;
        const char *why;
    } bad[] = {
        {1, 50, IVM_ERROR_NOT_FOUND, "no CPU device 1"},
        {0xffffffffu, 50, IVM_ERROR_NOT_FOUND, "no CPU device"},
        {0, 0, IVM_ERROR_INVALID_VALUE, "share 0 is not a percentage of 1..100"},
        {0, 101, IVM_ERROR_INVALID_VALUE, "not a percentage of 1..100"},
        {0, 0xffffffffu, IVM_ERROR_INVALID_VALUE, "not a percentage of 1..100"},
    };
    char detail[IVM_MSG_DETAIL_MAX + 1];
    ivm_msg_cpu_info_req_t info = {.dev = 0};
    ivm_msg_cpu_info_rep_t rep;
    int fd = ivm_sock_connect(ivmt_d.sock);

    cr_assert(fd >= 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        ivm_msg_set_share_req_t req = {.dev = bad[i].dev, .percent = bad[i].percent};
        cr_assert_eq(call_on(fd, IVM_MSG_SET_SHARE, &req, sizeof(req), sizeof(ivm_msg_status_t),
                             NULL, 0, detail, sizeof(detail)),
                     bad[i].status, "SET_SHARE dev %u percent %u", bad[i].dev,
                     bad[i].percent);
        cr_assert(strstr(detail, bad[i].why) != NULL, "SET_SHARE dev %u percent %u: '%s'",
                  bad[i].dev, bad[i].percent, detail);
    }
    info.dev = 1;
    cr_assert_eq(call_on(fd, IVM_MSG_CPU_INFO, &info, sizeof(info), sizeof(rep), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_ERROR_NOT_FOUND, "CPU_INFO of device 1");
    cr_assert(strstr(detail, "no CPU device 1") != NULL, "'%s'", detail);
    info.dev      = 0;
    info.reserved = 1;
    cr_assert_eq(call_on(fd, IVM_MSG_CPU_INFO, &info, sizeof(info), sizeof(rep), NULL, 0,
                         detail, sizeof(detail)),
                 IVM_ERROR_INVALID_VALUE, "CPU_INFO with a reserved field set");
    info.reserved = 0;
    cr_assert_eq(reply_of(fd, IVM_MSG_CPU_INFO, &info, sizeof(info), &rep, sizeof(rep)),
                 sizeof(rep));
    cr_assert(rep.status == IVM_SUCCESS && rep.ndevs == 1 && rep.share == 100 &&
                  rep.quota_us == 0 && rep.groups == 0 && rep.pes == 0,
              "status %d ndevs %u share %u quota %llu groups %u pes %u", rep.status, rep.ndevs,
              rep.share, (unsigned long long)rep.quota_us, rep.groups, rep.pes);
    close(fd);
    expect_alive("CPU_INFO and SET_SHARE out of range");
    ivmt_daemon_finish(&ivmt_d);
}

/* A PE that sends requests and never reads the replies: the daemon queues
 * them up to the connection's output limit, then drops it (its memory stays
 * bounded) and keeps serving. */
Test(badproto, pe_not_reading_its_replies_is_dropped)
{
    enum { BATCH = 256 };
    struct {
        ivm_msg_hdr_t   h;
        ivm_msg_empty_t m;
    } reqs[BATCH];
    double deadline = ivmt_now() + 40.0;
    int fd = ivmt_connect(&ivmt_d), small = 4096, i, dropped = 0;
    size_t off = 0;

    memset(reqs, 0, sizeof(reqs));
    for (i = 0; i < BATCH; ++i) {
        ivm_proto_hdr_init(&reqs[i].h, IVM_MSG_INFO, sizeof(reqs[i].m), (uint32_t)i + 1);
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    while (!dropped && ivmt_now() < deadline) {
        struct pollfd p = {fd, POLLOUT, 0};
        ssize_t n;

        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        n = send(fd, (const char *)reqs + off, sizeof(reqs) - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            dropped = errno == EPIPE || errno == ECONNRESET;
            cr_assert(dropped || errno == EAGAIN || errno == EINTR, "send: %s",
                      strerror(errno));
            continue;
        }
        off = (off + (size_t)n) % sizeof(reqs);
        dropped = (p.revents & (POLLHUP | POLLERR)) != 0;
    }
    close(fd);
    cr_assert(dropped, "ivmd kept a connection that read none of its replies for 40 s");
    expect_alive("a PE that did not read its replies");
    {
        char *log = ivmt_daemon_log_tail(&ivmt_d, 8192);
        int said = log != NULL && strstr(log, "does not read") != NULL;
        free(log);
        cr_assert(said, "the daemon's log does not say why it dropped the connection");
    }
}
