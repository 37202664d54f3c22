/*
 * ivm-gpud alone: each test starts the real daemon on one end of a
 * socketpair and talks to it as ivmd would (a tiny client below): dedup of
 * device copies, data movement, LRU eviction, FIFO admission with waiting and
 * time-outs, job ends, malformed input, exit on EOF/SIGTERM, backend choice.
 *
 * Backend: emu (emulated GPUs), or cuda when IVM_TEST_GPU_BACKEND=cuda (the
 * same cases on real GPUs, capacity capped with --mem-limit; skipped, saying
 * so, when no GPU/driver is there). Sizes are in granules of the GPU.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpud_proto.h"
#include "harness.h"
#include "sock.h"

#define GT_SLOTS   4   /* capacity of each GPU in granules */
#define GT_MAILBOX 16  /* replies that came before the one awaited */
#define GT_REP_MAX (sizeof(ivm_gpud_hello_rep_t) + IVM_MSG_DETAIL_MAX)

typedef struct gt_reply {
    ivm_msg_hdr_t hdr;
    char          payload[GT_REP_MAX];
    int           fd;   /* -1: none */
    int           used;
} gt_reply_t;

typedef struct gt {
    pid_t    pid;
    int      fd;
    int      cuda;
    uint32_t seq;
    char     dir[IVMT_PATH_MAX];
    char     log[IVMT_PATH_MAX + 32];
    char    *shm_before;
    int      fd_baseline;
    uint64_t gran, cap;
    pid_t    filler;     /* a cudaprobe holding device memory, 0: none */
    int      filler_in;  /* its stdin: closing it makes it let go */
    ivm_gpud_hello_rep_t hello;
    gt_reply_t box[GT_MAILBOX];
} gt_t;

static gt_t gt;

static int gt_is_cuda(void)
{
    const char *b = getenv("IVM_TEST_GPU_BACKEND");
    return b != NULL && strcmp(b, "cuda") == 0;
}

static char *gt_log_tail(void)
{
    static char buf[4096];
    FILE *f = fopen(gt.log, "r");
    size_t n = 0;
    long size;

    buf[0] = '\0';
    if (f == NULL) {
        return buf;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Fork+exec ivm-gpud with the gpud end as --ctl-fd; env entries NULL-terminated. */
static void gt_spawn(const char *const *args, const char *const *env)
{
    char fdnum[16];
    const char *argv[48];
    int sv[2], n = 0, i, out;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    gt.pid = fork();
    cr_assert_geq(gt.pid, 0);
    if (gt.pid == 0) {
        int ctl = fcntl(sv[1], F_DUPFD, 10); /* without close-on-exec */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        out = open(gt.log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(out, 1);
        dup2(out, 2);
        snprintf(fdnum, sizeof(fdnum), "%d", ctl);
        n = ivmt_daemon_wrapper(argv, 16);
        argv[n++] = IVMT_GPUD;
        argv[n++] = "--ctl-fd";
        argv[n++] = fdnum;
        for (i = 0; args != NULL && args[i] != NULL && n < 46; ++i) {
            argv[n++] = args[i];
        }
        argv[n] = NULL;
        unsetenv("IVM_GPU_ADMIT_TIMEOUT");
        unsetenv("IVM_ADMIT_TIMEOUT");
        for (i = 0; env != NULL && env[i] != NULL; ++i) {
            putenv((char *)env[i]);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(sv[1]);
    gt.fd = sv[0];
}

/* Wait for gpud to exit; returns the wait status, or -1 after timeout_s (killed). */
static int gt_wait_exit(double timeout_s)
{
    double end = ivmt_now() + timeout_s;
    int st;

    while (ivmt_now() < end) {
        if (waitpid(gt.pid, &st, WNOHANG) == gt.pid) {
            gt.pid = 0;
            return st;
        }
        ivmt_sleep_ms(10);
    }
    kill(gt.pid, SIGKILL);
    waitpid(gt.pid, &st, 0);
    gt.pid = 0;
    return -1;
}

static uint32_t gt_send(uint16_t type, const void *payload, uint32_t len, int fd)
{
    ivm_msg_hdr_t hdr;

    ivm_proto_hdr_init(&hdr, type, len, ++gt.seq);
    cr_assert_eq(ivm_sock_send(gt.fd, &hdr, payload, fd >= 0 ? &fd : NULL, fd >= 0),
                 IVM_SUCCESS, "send to gpud failed; its log:\n%s", gt_log_tail());
    return gt.seq;
}

/* Read one reply into r; 0 on success, -1 on EOF or time-out. */
static int gt_read_one(gt_reply_t *r, int timeout_ms)
{
    struct pollfd p = {.fd = gt.fd, .events = POLLIN};
    int nfds = 0;

    r->fd = -1;
    if (poll(&p, 1, timeout_ms) != 1 ||
        ivm_sock_recv(gt.fd, &r->hdr, sizeof(r->hdr), &r->fd, &nfds, 1) != IVM_SUCCESS) {
        return -1;
    }
    cr_assert_leq(r->hdr.length, GT_REP_MAX, "reply of %u bytes", r->hdr.length);
    if (r->hdr.length > 0 &&
        ivm_sock_recv(gt.fd, r->payload, r->hdr.length, &r->fd, &nfds, 1) != IVM_SUCCESS) {
        return -1;
    }
    r->used = 1;
    return 0;
}

/* The reply to seq, within timeout_ms; 0, or -1 if none came. Checks it. */
static int gt_recv(uint32_t seq, gt_reply_t *r, int timeout_ms)
{
    const char *why = NULL;
    int i;

    for (i = 0; i < GT_MAILBOX; ++i) {
        if (gt.box[i].used && gt.box[i].hdr.seq == seq) {
            *r = gt.box[i];
            gt.box[i].used = 0;
            return 0;
        }
    }
    for (;;) {
        if (gt_read_one(r, timeout_ms) != 0) {
            return -1;
        }
        cr_assert_eq(r->hdr.magic, IVM_PROTO_MAGIC);
        if (ivm_gpud_type_name(r->hdr.type)[0] != '?') { /* else: answer to junk */
            cr_assert_eq(ivm_gpud_check_hdr(&r->hdr, &why), IVM_SUCCESS, "%s", why);
            cr_assert_eq(ivm_gpud_check_rep(&r->hdr, &why), IVM_SUCCESS, "%s", why);
        }
        if (r->hdr.seq == seq) {
            return 0;
        }
        for (i = 0; i < GT_MAILBOX && gt.box[i].used; ++i) {
        }
        cr_assert_lt(i, GT_MAILBOX, "too many unclaimed replies");
        gt.box[i] = *r;
    }
}

static int32_t gt_status(const gt_reply_t *r)
{
    int32_t st;

    memcpy(&st, r->payload, sizeof(st));
    return st;
}

static const char *gt_detail(const gt_reply_t *r)
{
    uint32_t fixed = ivm_gpud_rep_size(r->hdr.type);

    if (fixed == 0) {
        fixed = sizeof(ivm_gpud_status_t);
    }
    return r->hdr.length > fixed ? r->payload + fixed : "";
}

/* Send and wait for the reply (10 s). Returns its status. */
static int32_t gt_call(uint16_t type, const void *payload, uint32_t len, int fd,
                       gt_reply_t *r)
{
    uint32_t seq = gt_send(type, payload, len, fd);

    cr_assert_eq(gt_recv(seq, r, 10000), 0, "no reply to %s; gpud log:\n%s",
                 ivm_gpud_type_name(type), gt_log_tail());
    cr_assert_eq(r->hdr.type, type | IVM_MSG_REPLY);
    return gt_status(r);
}

static void gt_stats(uint32_t gpu, ivm_gpud_stats_rep_t *s)
{
    ivm_gpud_stats_req_t req = {.gpu = gpu};
    gt_reply_t r;

    cr_assert_eq(gt_call(IVM_GPUD_GSTATS, &req, sizeof(req), -1, &r), IVM_SUCCESS);
    memcpy(s, r.payload, sizeof(*s));
}

/* A node copy: memfd of size bytes, filled with byte (i * mul + add). */
static int gt_node_copy(uint64_t size, unsigned mul, unsigned add)
{
    int fd = memfd_create("ivmt-node-copy", MFD_CLOEXEC);
    unsigned char *p;
    uint64_t i;

    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)size), 0);
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    for (i = 0; i < size; ++i) {
        p[i] = (unsigned char)(i * mul + add);
    }
    munmap(p, size);
    return fd;
}

typedef struct gt_acq {
    int32_t                status;
    ivm_gpud_acquire_rep_t rep;
    int                    dev_fd; /* closed by gt_acquire unless keep */
    const char            *detail;
} gt_acq_t;

static ivm_gpud_acquire_req_t gt_acq_req(uint32_t job, uint64_t obj, uint64_t obj_size,
                                         uint64_t off, uint64_t size, uint32_t gpu)
{
    ivm_gpud_acquire_req_t req;

    memset(&req, 0, sizeof(req));
    req.job = job;
    req.gpu = gpu;
    req.obj_id = obj;
    req.obj_size = obj_size;
    req.offset = off;
    req.size = size;
    return req;
}

static void gt_acq_parse(const gt_reply_t *r, gt_acq_t *a, int keep_fd)
{
    static char detail[IVM_MSG_DETAIL_MAX + 1];

    memset(a, 0, sizeof(*a));
    a->status = gt_status(r);
    memcpy(&a->rep, r->payload, sizeof(a->rep));
    snprintf(detail, sizeof(detail), "%s", gt_detail(r));
    a->detail = detail;
    a->dev_fd = r->fd;
    if (a->status == IVM_SUCCESS) {
        cr_assert_geq(r->fd, 0, "a successful ACQUIRE reply carries the device fd");
    } else {
        cr_assert_eq(r->fd, -1, "a failed ACQUIRE reply carries no fd");
    }
    if (!keep_fd && a->dev_fd >= 0) {
        close(a->dev_fd);
        a->dev_fd = -1;
    }
}

/* ACQUIRE, sending node_fd (not consumed); waits for the reply. */
static void gt_acquire(uint32_t job, uint64_t obj, uint64_t obj_size, uint64_t off,
                       uint64_t size, uint32_t gpu, int node_fd, gt_acq_t *a)
{
    ivm_gpud_acquire_req_t req = gt_acq_req(job, obj, obj_size, off, size, gpu);
    gt_reply_t r;

    gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node_fd, &r);
    gt_acq_parse(&r, a, 0);
}

static uint32_t gt_acquire_send(uint32_t job, uint64_t obj, uint64_t obj_size, uint64_t off,
                                uint64_t size, int node_fd)
{
    ivm_gpud_acquire_req_t req = gt_acq_req(job, obj, obj_size, off, size, 0);
    return gt_send(IVM_GPUD_ACQUIRE, &req, sizeof(req), node_fd);
}

static int32_t gt_release(uint64_t copy_id)
{
    ivm_gpud_copy_ref_t req = {.copy_id = copy_id};
    gt_reply_t r;

    return gt_call(IVM_GPUD_RELEASE, &req, sizeof(req), -1, &r);
}

static int32_t gt_copy(uint64_t copy_id, uint64_t off, uint64_t size, uint32_t dir)
{
    ivm_gpud_copy_req_t req = {.copy_id = copy_id, .offset = off, .size = size, .dir = dir};
    gt_reply_t r;

    return gt_call(IVM_GPUD_COPY, &req, sizeof(req), -1, &r);
}

static void gt_job_end(uint32_t job)
{
    ivm_gpud_job_req_t req = {.job = job};
    gt_reply_t r;

    cr_assert_eq(gt_call(IVM_GPUD_JOB_END, &req, sizeof(req), -1, &r), IVM_SUCCESS);
}

/* Start gpud with the test's backend plus extra args/env; GHELLO. Skips for
 * cuda without a usable GPU. */
static void gt_start_with(const char *const *extra, const char *const *env)
{
    char emu[64], limit[64];
    const char *args[24];
    gt_reply_t r;
    int n = 0, i;

    memset(&gt, 0, sizeof(gt));
    gt.fd = -1;
    gt.cuda = gt_is_cuda();
    ivmt_make_tmpdir(gt.dir, sizeof(gt.dir));
    snprintf(gt.log, sizeof(gt.log), "%s/gpud.log", gt.dir);
    gt.shm_before = ivmt_shm_listing();
    args[n++] = "--log-level";
    args[n++] = "debug";
    args[n++] = "--backend";
    if (gt.cuda) {
        if (ivmt_cudastub()) {
            char devfile[IVMT_PATH_MAX + 32];
            setenv("CUDASTUB_DEVICES", "2:64M", 1); /* two GPUs, as the emu run has */
            /* gpud and the test's other driver users share the devices'
             * memory, as the processes on a GPU do. */
            snprintf(devfile, sizeof(devfile), "%s/cudastub-devices", gt.dir);
            setenv("CUDASTUB_DEVICE_FILE", devfile, 1);
        }
        snprintf(limit, sizeof(limit), "%dM", 2 * GT_SLOTS);
        args[n++] = "cuda";
        args[n++] = "--mem-limit";
        args[n++] = limit; /* GT_SLOTS granules of 2 MiB */
    } else {
        snprintf(emu, sizeof(emu), "2:%dK", 64 * GT_SLOTS);
        args[n++] = "emu";
        args[n++] = "--emu-gpus";
        args[n++] = emu;
    }
    for (i = 0; extra != NULL && extra[i] != NULL; ++i) {
        args[n++] = extra[i];
    }
    args[n] = NULL;
    gt_spawn(args, env);
    if (gt_recv(gt_send(IVM_GPUD_GHELLO, &(ivm_gpud_empty_t){0}, sizeof(ivm_gpud_empty_t), -1),
                &r, 10000) != 0) {
        int st = gt_wait_exit(5);
        cr_assert(gt.cuda, "gpud (emu) did not answer GHELLO (exit status %d); log:\n%s", st,
                  gt_log_tail());
        cr_assert(!ivmt_cudastub(), "gpud on the CUDA stand-in did not answer GHELLO (exit "
                  "status %d); log:\n%s", st, gt_log_tail());
        cr_skip_test("cuda backend unavailable here (no driver/GPU, or built without "
                     "CUDA): gpud said:\n%s", gt_log_tail());
    }
    cr_assert_eq(gt_status(&r), IVM_SUCCESS);
    memcpy(&gt.hello, r.payload, sizeof(gt.hello));
    if (gt.cuda && gt.hello.ngpus == 0) {
        cr_assert(!ivmt_cudastub(), "%s", "gpud on the CUDA stand-in found no GPU");
        cr_skip_test("cuda backend: no GPU on this machine");
    }
    gt.gran = gt.hello.gpus[0].granularity;
    gt.cap  = gt.hello.gpus[0].capacity;
    if (strcmp(gt.hello.backend_name, gt.cuda ? "cuda" : "emu") == 0) {
        cr_assert_eq(gt.cap, GT_SLOTS * gt.gran, "capacity %llu is not %d granules of %llu",
                     (unsigned long long)gt.cap, GT_SLOTS, (unsigned long long)gt.gran);
    }
    gt.fd_baseline = ivmt_count_fds(gt.pid);
}

static void gt_start(void)
{
    gt_start_with(NULL, NULL);
}

/* Everything of every job freed: gpud's fds are back to the baseline; then
 * close the socket: gpud exits 0 and /dev/shm is as it was. */
static void gt_finish(void)
{
    char *now, *added;
    int st;

    if (gt.pid > 0) {
        /* The CUDA driver opens a few fds of its own on first use (not ours). */
        cr_assert_leq(ivmt_count_fds(gt.pid), gt.fd_baseline + (gt.cuda ? 4 : 0),
                      "gpud leaks fds; log:\n%s", gt_log_tail());
        close(gt.fd);
        gt.fd = -1;
        st = gt_wait_exit(5);
        cr_assert(st != -1, "gpud did not exit when its control socket closed");
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gpud exit status %#x; log:\n%s", st,
                  gt_log_tail());
        /* The stand-in reports each broken driver contract on a "cudastub:" line. */
        cr_assert(!ivmt_cudastub() || strstr(gt_log_tail(), "cudastub:") == NULL,
                  "gpud broke a CUDA driver contract; log:\n%s", gt_log_tail());
    }
    /* Only IVM's entries count: other programs (MPI runs of parallel tests)
     * come and go in /dev/shm too. */
    now = ivmt_shm_listing();
    added = ivmt_listing_added(gt.shm_before, now);
    cr_assert(strstr(added, "ivm") == NULL, "left in /dev/shm: %s", added);
    free(now);
    free(added);
}

static void gt_teardown(void)
{
    if (gt.filler > 0) {
        kill(gt.filler, SIGKILL);
        waitpid(gt.filler, NULL, 0);
        gt.filler = 0;
    }
    if (gt.pid > 0) {
        kill(gt.pid, SIGKILL);
        waitpid(gt.pid, NULL, 0);
        gt.pid = 0;
    }
    if (gt.fd >= 0) {
        close(gt.fd);
        gt.fd = -1;
    }
    free(gt.shm_before);
    gt.shm_before = NULL;
    if (gt.dir[0] != '\0') {
        ivmt_remove_dir(gt.dir);
    }
}

TestSuite(gpud, .fini = gt_teardown, .timeout = 60);

/* ------------------------------------------------------------------ tests */

Test(gpud, hello_describes_the_backend_and_gpus)
{
    gt_start();
    cr_assert_eq(gt.hello.pid, (uint32_t)gt.pid);
    cr_assert_str_eq(gt.hello.backend_name, gt.cuda ? "cuda" : "emu");
    cr_assert_eq(gt.hello.backend, gt.cuda ? IVM_GPUD_BACKEND_CUDA : IVM_GPUD_BACKEND_EMU);
    if (!gt.cuda) {
        cr_assert_eq(gt.hello.ngpus, 2);
        cr_assert_eq(gt.gran, 64 * 1024);
        cr_assert(strstr(gt.hello.gpus[1].name, "emu1") != NULL, "%s", gt.hello.gpus[1].name);
        cr_assert(strstr(gt.hello.gpus[1].name, "emulated") != NULL);
    }
    cr_assert_gt(strlen(gt.hello.gpus[0].name), 0);
    gt_finish();
}

Test(gpud, k_acquires_of_one_region_make_one_allocation)
{
    uint64_t G, obj_size;
    ivm_gpud_stats_rep_t s;
    gt_acq_t a, first;
    int node, k;

    gt_start();
    G = gt.gran;
    obj_size = 4 * G;
    node = gt_node_copy(obj_size, 1, 0);
    gt_acquire(1, 7, obj_size, 100, 2 * G - 100, 0, node, &first);
    cr_assert_eq(first.status, IVM_SUCCESS, "%s", first.detail);
    cr_assert_eq(first.rep.flags & IVM_GPUD_COPY_REUSED, 0);
    cr_assert_eq(first.rep.flags & (IVM_GPUD_COPY_EMU | IVM_GPUD_COPY_CUDA),
                 gt.cuda ? IVM_GPUD_COPY_CUDA : IVM_GPUD_COPY_EMU);
    cr_assert_eq(first.rep.copy_offset, 0, "rounded out to the granularity");
    cr_assert_eq(first.rep.copy_size, 2 * G);
    cr_assert_eq(first.rep.alloc_size, 2 * G);
    cr_assert_neq(first.rep.copy_id, 0);
    for (k = 1; k < 8; ++k) {
        gt_acquire(1, 7, obj_size, 100, 2 * G - 100, 0, node, &a);
        cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
        cr_assert_eq(a.rep.copy_id, first.rep.copy_id);
        cr_assert_neq(a.rep.flags & IVM_GPUD_COPY_REUSED, 0);
    }
    /* a range inside the copy reuses it too; one outside does not */
    gt_acquire(1, 7, obj_size, G, G / 2, 0, -1, &a);
    cr_assert_eq(a.rep.copy_id, first.rep.copy_id, "inside: same copy (no fd needed)");
    gt_stats(0, &s);
    cr_assert_eq(s.allocations, 1, "9 ACQUIREs, one allocation");
    cr_assert_eq(s.copies, 1);
    cr_assert_eq(s.mapped_refs, 9);
    cr_assert_eq(s.used, 2 * G);
    cr_assert_eq(s.cached_bytes, 0);

    gt_acquire(1, 7, obj_size, 3 * G, 1, 0, -1, &a);
    cr_assert_eq(a.status, IVM_SUCCESS);
    cr_assert_neq(a.rep.copy_id, first.rep.copy_id);
    cr_assert_eq(a.rep.copy_offset, 3 * G);
    /* the same region on the other GPU is a copy of its own */
    gt_acquire(1, 7, obj_size, 100, 2 * G - 100, 1, -1, &a);
    cr_assert_eq(a.status, IVM_SUCCESS);
    cr_assert_neq(a.rep.copy_id, first.rep.copy_id);
    gt_stats(1, &s);
    cr_assert_eq(s.allocations, 1);

    for (k = 0; k < 9; ++k) {
        cr_assert_eq(gt_release(first.rep.copy_id), IVM_SUCCESS);
    }
    cr_assert_eq(gt_release(first.rep.copy_id), IVM_ERROR_NOT_FOUND, "no reference left");
    gt_stats(0, &s);
    cr_assert_eq(s.copies, 2, "released copies stay cached");
    cr_assert_eq(s.cached_bytes, 2 * G);
    cr_assert_eq(s.mapped_refs, 1);
    gt_acquire(1, 7, obj_size, 0, 1, 0, -1, &a);
    cr_assert_eq(a.rep.copy_id, first.rep.copy_id, "a cached copy is reused");
    gt_stats(0, &s);
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.allocations, 2);

    gt_job_end(1);
    gt_stats(0, &s);
    cr_assert_eq(s.used, 0);
    cr_assert_eq(s.copies, 0);
    gt_stats(1, &s);
    cr_assert_eq(s.used, 0);
    close(node);
    gt_finish();
}

Test(gpud, copies_move_the_bytes_both_ways)
{
    uint64_t G, obj_size, i;
    unsigned char *host, *dev = NULL;
    gt_acq_t a;
    gt_reply_t r;
    int node;

    gt_start();
    G = gt.gran;
    obj_size = 2 * G + 123; /* the copy holds the object's end, not more */
    node = gt_node_copy(obj_size, 7, 3);
    host = mmap(NULL, obj_size, PROT_READ | PROT_WRITE, MAP_SHARED, node, 0);
    cr_assert_neq(host, MAP_FAILED);
    {
        ivm_gpud_acquire_req_t req = gt_acq_req(3, 1, obj_size, 0, obj_size, 0);
        gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node, &r);
        gt_acq_parse(&r, &a, 1);
    }
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert_eq(a.rep.copy_size, obj_size);
    cr_assert_eq(a.rep.alloc_size, 3 * G);
    if (!gt.cuda) { /* the emulated device memory is the fd's pages */
        dev = mmap(NULL, a.rep.alloc_size, PROT_READ | PROT_WRITE, MAP_SHARED, a.dev_fd, 0);
        cr_assert_neq(dev, MAP_FAILED);
        cr_assert_eq(memcmp(dev, host, obj_size), 0, "ACQUIRE filled the copy (H2D)");
    }
    close(a.dev_fd);

    /* D2H of a middle range restores exactly that range */
    memset(host, 0, obj_size);
    cr_assert_eq(gt_copy(a.rep.copy_id, G, G, IVM_GPUD_COPY_D2H), IVM_SUCCESS);
    for (i = 0; i < obj_size; ++i) {
        unsigned char want = (i >= G && i < 2 * G) ? (unsigned char)(i * 7 + 3) : 0;
        cr_assert_eq(host[i], want, "byte %llu after D2H", (unsigned long long)i);
    }
    /* H2D of new bytes, then D2H of everything gives them back */
    for (i = 0; i < obj_size; ++i) {
        host[i] = (unsigned char)(i * 13 + 1);
    }
    cr_assert_eq(gt_copy(a.rep.copy_id, 0, obj_size, IVM_GPUD_COPY_H2D), IVM_SUCCESS);
    if (dev != NULL) {
        cr_assert_eq(memcmp(dev, host, obj_size), 0, "H2D reached the device copy");
        dev[5] = 0xee; /* a "kernel" writes; D2H brings it to the node copy */
    }
    memset(host, 0, obj_size);
    cr_assert_eq(gt_copy(a.rep.copy_id, 0, obj_size, IVM_GPUD_COPY_D2H), IVM_SUCCESS);
    for (i = 0; i < obj_size; ++i) {
        unsigned char want = (dev != NULL && i == 5) ? 0xee : (unsigned char)(i * 13 + 1);
        cr_assert_eq(host[i], want, "byte %llu after H2D+D2H", (unsigned long long)i);
    }
    cr_assert_eq(gt_copy(a.rep.copy_id, obj_size - 10, 11, IVM_GPUD_COPY_D2H),
                 IVM_ERROR_INVALID_VALUE, "past the copy's end");
    cr_assert_eq(gt_copy(a.rep.copy_id + 100, 0, 1, IVM_GPUD_COPY_D2H), IVM_ERROR_NOT_FOUND);
    if (dev != NULL) {
        munmap(dev, a.rep.alloc_size);
    }
    munmap(host, obj_size);
    close(node);
    gt_job_end(3);
    gt_finish();
}

/* FILLED: node bytes that arrived after a copy was made (a mirror fill)
 * reach that copy, cached or mapped, only inside the range and the object;
 * another object's copy is untouched; an object without copies is fine. */
Test(gpud, filled_bytes_reach_the_copies_made_before)
{
    uint64_t G, obj_size, i;
    unsigned char *host, *dev;
    ivm_gpud_filled_req_t f;
    gt_acq_t a, b;
    gt_reply_t r;
    int node;

    gt_start();
    if (gt.cuda) {
        cr_skip_test("reads the device copy through its fd: emu backend only");
        return;
    }
    G = gt.gran;
    obj_size = 2 * G;
    node = gt_node_copy(obj_size, 0, 0); /* all zero: nothing filled yet */
    host = mmap(NULL, obj_size, PROT_READ | PROT_WRITE, MAP_SHARED, node, 0);
    cr_assert_neq(host, MAP_FAILED);
    /* The copy of [0, 100) holds the whole first granule. */
    {
        ivm_gpud_acquire_req_t req = gt_acq_req(4, 1, obj_size, 0, 100, 0);
        gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node, &r);
        gt_acq_parse(&r, &a, 1);
    }
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert_eq(a.rep.copy_size, G);
    dev = mmap(NULL, a.rep.alloc_size, PROT_READ | PROT_WRITE, MAP_SHARED, a.dev_fd, 0);
    cr_assert_neq(dev, MAP_FAILED);
    close(a.dev_fd);
    /* Another object of the job, also with a copy. */
    {
        ivm_gpud_acquire_req_t req = gt_acq_req(4, 2, obj_size, 0, 100, 0);
        gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node, &r);
        gt_acq_parse(&r, &b, 1);
    }
    cr_assert_eq(b.status, IVM_SUCCESS, "%s", b.detail);
    dev[10] = 0x5a; /* a PE's write in its mapped range stays */
    cr_assert_eq(gt_release(a.rep.copy_id), IVM_SUCCESS); /* now cached */

    /* [1000, G + 500) arrives in the node copy: the copy gets [1000, G). */
    for (i = 1000; i < G + 500; ++i) {
        host[i] = (unsigned char)(i * 5 + 1);
    }
    host[999] = 0x77; /* outside the range: not copied */
    f = (ivm_gpud_filled_req_t){.job = 4, .obj_id = 1, .offset = 1000, .size = G - 500};
    cr_assert_eq(gt_call(IVM_GPUD_FILLED, &f, sizeof(f), -1, &r), IVM_SUCCESS, "%s",
                 gt_detail(&r));
    for (i = 1000; i < G; ++i) {
        cr_assert_eq(dev[i], (unsigned char)(i * 5 + 1), "byte %llu not refreshed",
                     (unsigned long long)i);
    }
    cr_assert_eq(dev[999], 0, "byte before the range copied");
    cr_assert_eq(dev[10], 0x5a, "a byte outside the range was overwritten");
    /* Reused, the cached copy hands out the filled bytes. */
    gt_acquire(4, 1, obj_size, 1000, 50, 0, node, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert(a.rep.flags & IVM_GPUD_COPY_REUSED);
    {
        unsigned char *other = mmap(NULL, b.rep.alloc_size, PROT_READ, MAP_SHARED, b.dev_fd, 0);
        cr_assert_neq(other, MAP_FAILED);
        cr_assert_eq(other[1000], 0, "another object's copy was refreshed");
        munmap(other, b.rep.alloc_size);
    }
    close(b.dev_fd);
    /* No copy of the object: nothing to do. Empty range: refused. */
    f.obj_id = 9;
    cr_assert_eq(gt_call(IVM_GPUD_FILLED, &f, sizeof(f), -1, &r), IVM_SUCCESS);
    f.size = 0;
    cr_assert_eq(gt_call(IVM_GPUD_FILLED, &f, sizeof(f), -1, &r), IVM_ERROR_INVALID_VALUE);
    munmap(dev, a.rep.alloc_size);
    munmap(host, obj_size);
    close(node);
    gt_job_end(4);
    gt_finish();
}

/* Fill GPU 0 with GT_SLOTS one-granule copies of object 1 of job 1. */
static void gt_fill(int node, uint64_t *ids)
{
    gt_acq_t a;
    int i;

    for (i = 0; i < GT_SLOTS; ++i) {
        gt_acquire(1, 1, GT_SLOTS * gt.gran, i * gt.gran, gt.gran, 0, node, &a);
        cr_assert_eq(a.status, IVM_SUCCESS, "slot %d: %s", i, a.detail);
        ids[i] = a.rep.copy_id;
    }
}

Test(gpud, eviction_takes_the_least_recently_released_first)
{
    uint64_t ids[GT_SLOTS], G;
    ivm_gpud_stats_rep_t s;
    int node_a, node_b;
    gt_acq_t a;

    gt_start();
    G = gt.gran;
    node_a = gt_node_copy(GT_SLOTS * G, 1, 0);
    node_b = gt_node_copy(G, 1, 0);
    gt_fill(node_a, ids);
    /* released in the order 1, 0, 2, 3 */
    cr_assert_eq(gt_release(ids[1]), IVM_SUCCESS);
    cr_assert_eq(gt_release(ids[0]), IVM_SUCCESS);
    cr_assert_eq(gt_release(ids[2]), IVM_SUCCESS);
    cr_assert_eq(gt_release(ids[3]), IVM_SUCCESS);
    gt_acquire(1, 2, G, 0, G, 0, node_b, &a); /* full: evicts slot 1 */
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    gt_stats(0, &s);
    cr_assert_eq(s.evictions, 1);
    cr_assert_eq(s.used, GT_SLOTS * G);
    gt_acquire(1, 1, GT_SLOTS * G, 0, G, 0, -1, &a);
    cr_assert_eq(a.rep.copy_id, ids[0], "slot 0 was still cached");
    gt_acquire(1, 1, GT_SLOTS * G, G, G, 0, -1, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert_neq(a.rep.copy_id, ids[1], "slot 1 was evicted: a new copy");
    cr_assert_eq(a.rep.flags & IVM_GPUD_COPY_REUSED, 0);
    gt_acquire(1, 1, GT_SLOTS * G, 3 * G, G, 0, -1, &a);
    cr_assert_eq(a.rep.copy_id, ids[3], "slot 2 went for slot 1, slot 3 stayed");
    gt_stats(0, &s);
    cr_assert_eq(s.evictions, 2);
    cr_assert_eq(s.allocations, GT_SLOTS + 2);
    cr_assert_eq(s.cached_bytes, 0);
    gt_job_end(1);
    close(node_a);
    close(node_b);
    gt_finish();
}

/* gpud started, its GPU full of job 1's copies (ids, their node copy in
 * nodes[0]), and two ACQUIREs of job 1 sent: X of 2 granules (nodes[1]),
 * then Y of 1 (nodes[2]); their sequence numbers in seq[0], seq[1]. */
static void gt_full_with_two_waiters(uint64_t *ids, int *nodes, uint32_t *seq)
{
    uint64_t G;

    gt_start();
    G = gt.gran;
    nodes[0] = gt_node_copy(GT_SLOTS * G, 1, 0);
    nodes[1] = gt_node_copy(2 * G, 1, 0);
    nodes[2] = gt_node_copy(G, 1, 0);
    gt_fill(nodes[0], ids);
    seq[0] = gt_acquire_send(1, 3, 2 * G, 0, 2 * G, nodes[1]);
    seq[1] = gt_acquire_send(1, 4, G, 0, G, nodes[2]);
}

Test(gpud, a_full_gpu_waits_in_fifo_order_then_grants)
{
    uint64_t ids[GT_SLOTS], G;
    ivm_gpud_stats_rep_t s;
    uint32_t seq[2], seq_x, seq_y;
    int nodes[3];
    gt_reply_t r;
    gt_acq_t a;

    gt_full_with_two_waiters(ids, nodes, seq);
    G = gt.gran;
    seq_x = seq[0]; /* needs 2 granules */
    seq_y = seq[1]; /* needs 1 */
    cr_assert_eq(gt_recv(seq_x, &r, 300), -1, "X must wait while the GPU is full");
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 2);

    /* a region that has a copy needs no memory: served at once */
    gt_acquire(1, 1, GT_SLOTS * G, 2 * G, G, 0, -1, &a);
    cr_assert_eq(a.rep.copy_id, ids[2]);

    cr_assert_eq(gt_release(ids[0]), IVM_SUCCESS);
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 2, "Y fits now but must not pass X (FIFO)");
    cr_assert_eq(gt_release(ids[1]), IVM_SUCCESS);
    cr_assert_eq(gt_recv(seq_x, &r, 5000), 0, "X is granted once 2 granules are cached");
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert_eq(gt_recv(seq_y, &r, 200), -1, "Y still waits");
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 1);
    cr_assert_eq(s.evictions, 2);

    cr_assert_eq(gt_release(ids[3]), IVM_SUCCESS);
    cr_assert_eq(gt_recv(seq_y, &r, 5000), 0);
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 0);
    cr_assert_eq(s.wait_timeouts, 0);
    gt_job_end(1);
    close(nodes[0]);
    close(nodes[1]);
    close(nodes[2]);
    gt_finish();
}

static int32_t gt_cancel(uint32_t acquire_seq)
{
    ivm_gpud_cancel_req_t req = {.seq = acquire_seq};
    gt_reply_t r;

    return gt_call(IVM_GPUD_CANCEL, &req, sizeof(req), -1, &r);
}

/* A waiting ACQUIRE withdrawn (its PE died) is answered at once and no longer
 * holds up the waiters behind it; a CANCEL of nothing waiting is NOT_FOUND. */
Test(gpud, a_cancelled_waiter_lets_the_ones_behind_it_go)
{
    uint64_t ids[GT_SLOTS];
    ivm_gpud_stats_rep_t s;
    uint32_t seq[2], seq_x, seq_y;
    int nodes[3];
    gt_reply_t r;
    gt_acq_t a;

    gt_full_with_two_waiters(ids, nodes, seq);
    seq_x = seq[0]; /* needs 2 granules */
    seq_y = seq[1]; /* needs 1, behind X */
    cr_assert_eq(gt_release(ids[0]), IVM_SUCCESS);
    cr_assert_eq(gt_recv(seq_y, &r, 300), -1, "Y fits but waits behind X (FIFO)");
    cr_assert_eq(gt_cancel(seq_y + 100), IVM_ERROR_NOT_FOUND, "no such ACQUIRE waits");

    cr_assert_eq(gt_cancel(seq_x), IVM_SUCCESS);
    cr_assert_eq(gt_recv(seq_x, &r, 5000), 0, "the cancelled ACQUIRE is answered");
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_ERROR_NOT_FOUND, "cancelled X: %s", a.detail);
    cr_assert(strstr(a.detail, "cancelled") != NULL, "detail '%s'", a.detail);
    cr_assert_eq(gt_recv(seq_y, &r, 5000), 0, "Y is granted once X is out of its way");
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_SUCCESS, "%s", a.detail);
    cr_assert_eq(gt_cancel(seq_x), IVM_ERROR_NOT_FOUND, "X is no longer waiting");
    cr_assert_eq(gt_cancel(seq_y), IVM_ERROR_NOT_FOUND, "Y was granted");
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 0);
    cr_assert_eq(s.wait_timeouts, 0);
    {
        ivm_gpud_cancel_req_t bad = {.seq = seq_x, .reserved = 1};
        cr_assert_eq(gt_call(IVM_GPUD_CANCEL, &bad, sizeof(bad), -1, &r), IVM_ERROR_PROTOCOL);
    }
    gt_job_end(1);
    close(nodes[0]);
    close(nodes[1]);
    close(nodes[2]);
    gt_finish();
}

static void gt_expect_timeout(double min_s, double max_s)
{
    uint64_t ids[GT_SLOTS];
    ivm_gpud_stats_rep_t s;
    double t0, waited;
    gt_reply_t r;
    gt_acq_t a;
    uint32_t seq;
    int node_a, node_b;

    node_a = gt_node_copy(GT_SLOTS * gt.gran, 1, 0);
    node_b = gt_node_copy(gt.gran, 1, 0);
    gt_fill(node_a, ids);
    t0 = ivmt_now();
    seq = gt_acquire_send(1, 2, gt.gran, 0, gt.gran, node_b);
    cr_assert_eq(gt_recv(seq, &r, 10000), 0, "no answer after the admission time-out");
    waited = ivmt_now() - t0;
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_ERROR_NO_MEMORY);
    cr_assert(strstr(a.detail, "GPU 0") != NULL && strstr(a.detail, "time-out") != NULL,
              "detail: %s", a.detail);
    cr_assert(waited >= min_s && waited < max_s, "answered after %.2f s", waited);
    gt_stats(0, &s);
    cr_assert_eq(s.wait_timeouts, 1);
    cr_assert_eq(s.waiting, 0);
    gt_job_end(1);
    close(node_a);
    close(node_b);
}

Test(gpud, a_wait_times_out_with_no_memory)
{
    gt_start_with((const char *const[]){"--admit-timeout", "0.5", NULL}, NULL);
    gt_expect_timeout(0.45, 10);
    gt_finish();
}

Test(gpud, the_admission_timeout_comes_from_the_environment)
{
    gt_start_with(NULL, (const char *const[]){"IVM_GPU_ADMIT_TIMEOUT=0.3", NULL});
    gt_expect_timeout(0.25, 10);
    gt_finish();
}

Test(gpud, larger_than_the_gpu_fails_at_once)
{
    gt_acq_t a;
    double t0;
    int node;

    gt_start(); /* default admission time-out: 60 s */
    node = gt_node_copy((GT_SLOTS + 1) * gt.gran, 1, 0);
    t0 = ivmt_now();
    gt_acquire(1, 1, (GT_SLOTS + 1) * gt.gran, 0, (GT_SLOTS + 1) * gt.gran, 0, node, &a);
    cr_assert_eq(a.status, IVM_ERROR_NO_MEMORY);
    cr_assert_lt(ivmt_now() - t0, 2.0);
    cr_assert(strstr(a.detail, "larger than the GPU") != NULL, "detail: %s", a.detail);
    close(node);
    gt_finish();
}

Test(gpud, job_end_frees_its_copies_and_answers_its_waiters)
{
    uint64_t ids[GT_SLOTS], G;
    ivm_gpud_stats_rep_t s;
    uint32_t seq1, seq2;
    int node_a, node_b, node_c;
    gt_reply_t r;
    gt_acq_t a;

    gt_start();
    G = gt.gran;
    node_a = gt_node_copy(GT_SLOTS * G, 1, 0);
    node_b = gt_node_copy(G, 1, 0);
    node_c = gt_node_copy(G, 1, 0);
    gt_fill(node_a, ids); /* job 1 */
    seq1 = gt_acquire_send(1, 9, G, 0, G, node_b);
    {
        ivm_gpud_acquire_req_t req = gt_acq_req(2, 9, G, 0, G, 0); /* job 2, same obj id */
        seq2 = gt_send(IVM_GPUD_ACQUIRE, &req, sizeof(req), node_c);
    }
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 2);
    gt_job_end(1);
    cr_assert_eq(gt_recv(seq1, &r, 5000), 0);
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_ERROR_NOT_FOUND, "job 1's waiter: its job ended");
    cr_assert_eq(gt_recv(seq2, &r, 5000), 0);
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_SUCCESS, "job 2's waiter gets the freed memory: %s", a.detail);
    gt_stats(0, &s);
    cr_assert_eq(s.copies, 1);
    cr_assert_eq(s.used, G);
    cr_assert_eq(gt_release(ids[0]), IVM_ERROR_NOT_FOUND, "freed with its job");
    gt_job_end(2);
    gt_stats(0, &s);
    cr_assert_eq(s.used, 0);
    close(node_a);
    close(node_b);
    close(node_c);
    gt_finish();
}

Test(gpud, malformed_requests_are_refused_and_the_daemon_goes_on)
{
    ivm_gpud_acquire_req_t req;
    char junk[64] = {0};
    gt_reply_t r;
    gt_acq_t a;
    int node, small;

    gt_start();
    node = gt_node_copy(gt.gran, 1, 0);
    small = gt_node_copy(16, 1, 0);
    cr_assert_eq(gt_call(200, junk, 8, -1, &r), IVM_ERROR_PROTOCOL, "unknown type");
    cr_assert_eq(gt_call(IVM_MSG_ENTER, junk, 8, -1, &r), IVM_ERROR_PROTOCOL, "a PE type");
    cr_assert_eq(gt_call(IVM_GPUD_GSTATS | IVM_MSG_REPLY, junk, 8, -1, &r),
                 IVM_ERROR_PROTOCOL, "a reply as request");
    cr_assert_eq(gt_call(IVM_GPUD_ACQUIRE, junk, 40, node, &r), IVM_ERROR_PROTOCOL,
                 "short ACQUIRE");
    cr_assert_eq(r.fd, -1);
    cr_assert_gt(strlen(gt_detail(&r)), 0, "the error says why");
    req = gt_acq_req(1, 1, gt.gran, 0, gt.gran, 0);
    req.reserved = 1;
    cr_assert_eq(gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node, &r), IVM_ERROR_PROTOCOL);
    req = gt_acq_req(1, 1, gt.gran, 1, gt.gran, 0);
    cr_assert_eq(gt_call(IVM_GPUD_ACQUIRE, &req, sizeof(req), node, &r),
                 IVM_ERROR_INVALID_VALUE, "range past the object");
    gt_acquire(1, 1, gt.gran, 0, gt.gran, 7, node, &a);
    cr_assert_eq(a.status, IVM_ERROR_NO_DEVICE);
    gt_acquire(1, 1, gt.gran, 0, gt.gran, 0, -1, &a);
    cr_assert_eq(a.status, IVM_ERROR_INVALID_VALUE, "new object without its fd");
    gt_acquire(1, 1, gt.gran, 0, gt.gran, 0, small, &a);
    cr_assert_eq(a.status, IVM_ERROR_INVALID_VALUE, "fd smaller than the object");
    cr_assert_eq(gt_release(12345), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(gt_copy(12345, 0, 1, IVM_GPUD_COPY_H2D), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(gt_call(IVM_GPUD_GSTATS, &(ivm_gpud_stats_req_t){.gpu = 9},
                         sizeof(ivm_gpud_stats_req_t), -1, &r), IVM_ERROR_NO_DEVICE);
    /* an fd on a message that takes none is closed, not kept */
    cr_assert_eq(gt_call(IVM_GPUD_GHELLO, junk, sizeof(ivm_gpud_empty_t), node, &r),
                 IVM_SUCCESS);
    gt_acquire(1, 1, gt.gran, 0, gt.gran, 0, node, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "still serving: %s", a.detail);
    gt_job_end(1);
    cr_assert_leq(ivmt_count_fds(gt.pid), gt.fd_baseline + (gt.cuda ? 4 : 0),
                  "no fd kept from bad requests");
    close(node);
    close(small);
    gt_finish();
}

Test(gpud, a_broken_frame_closes_the_connection_cleanly)
{
    ivm_msg_hdr_t hdr;
    gt_reply_t r;
    int st;

    gt_start();
    ivm_proto_hdr_init(&hdr, IVM_GPUD_GHELLO, 4, 1);
    hdr.magic = 0x12345678;
    cr_assert_eq(ivm_sock_send(gt.fd, &hdr, "\0\0\0\0", NULL, 0), IVM_SUCCESS);
    cr_assert_eq(gt_read_one(&r, 5000), -1, "gpud closes the socket");
    st = gt_wait_exit(5);
    cr_assert(st != -1 && WIFEXITED(st), "gpud exits (no crash): status %#x", st);
    cr_assert(strstr(gt_log_tail(), "bad header") != NULL, "log:\n%s", gt_log_tail());
    gt_finish();
}

Test(gpud, eof_or_sigterm_ends_it_cleanly_with_copies_live)
{
    uint64_t ids[GT_SLOTS];
    int node, st, round;

    for (round = 0; round < 2; ++round) {
        gt_start();
        node = gt_node_copy(GT_SLOTS * gt.gran, 1, 0);
        gt_fill(node, ids);
        gt_acquire_send(1, 2, GT_SLOTS * gt.gran, 0, gt.gran, node); /* both wait */
        gt_acquire_send(2, 3, GT_SLOTS * gt.gran, 0, gt.gran, node);
        ivmt_sleep_ms(100);
        if (round == 0) {
            close(gt.fd);
            gt.fd = -1;
        } else {
            kill(gt.pid, SIGTERM);
        }
        st = gt_wait_exit(5);
        cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "round %d: exit status %#x; log:\n%s", round, st, gt_log_tail());
        close(node);
        gt_finish();
        gt_teardown();
    }
}

Test(gpud, backend_choice_and_bad_options)
{
    const char *argv[8];
    ivmt_result_t res;

    if (gt_is_cuda()) {
        cr_skip_test("backend choice is checked on the emu run");
    }
    argv[0] = IVMT_GPUD;
    argv[1] = "--help";
    argv[2] = NULL;
    ivmt_run(argv, NULL, 10, &res);
    cr_assert(res.exited && res.code == 0);
    cr_assert(strstr(res.out, "--admit-timeout") != NULL && strstr(res.out, "--emu-gpus"),
              "%s", res.out);
    ivmt_result_free(&res);

    argv[1] = "--ctl-fd";
    argv[2] = "0";
    argv[3] = "--backend";
    argv[4] = "emu";
    argv[5] = "--emu-gpus";
    argv[6] = "0:1G";
    argv[7] = NULL;
    ivmt_run(argv, NULL, 10, &res);
    cr_assert(res.exited && res.code != 0);
    cr_assert(strstr(res.err, "--emu-gpus") != NULL, "%s", res.err);
    ivmt_result_free(&res);

    argv[4] = "cuda";
    argv[5] = NULL;
    ivmt_run(argv, NULL, 10, &res);
    if (res.exited && res.code != 0) { /* no driver or no CUDA build: says so */
        cr_assert(strstr(res.err, "CUDA") != NULL || strstr(res.err, "cuda") != NULL,
                  "%s", res.err);
    }
    ivmt_result_free(&res);

    /* auto without a usable GPU: no GPUs (never emu) */
    gt_start_with((const char *const[]){"--backend", "auto", NULL}, NULL);
    cr_assert_str_neq(gt.hello.backend_name, "emu");
    if (gt.hello.ngpus == 0) {
        cr_assert_str_eq(gt.hello.backend_name, "none");
    }
    gt_finish();
}

/* --gpus naming a GPU the node lacks: CUDA drops it and those after it
 * without a word; gpud serves the others and says which it dropped (cuda
 * backend: the stand-in's two GPUs, or a real one). */
Test(gpud, gpus_naming_a_missing_gpu_warn)
{
    if (!gt_is_cuda()) {
        cr_skip_test("--gpus selects the cuda backend's GPUs (the emu run has --emu-gpus)");
    }
    gt_start_with((const char *const[]){"--gpus", "0,7", NULL}, NULL);
    cr_assert_eq(gt.hello.ngpus, 1, "--gpus 0,7: %u GPUs served", gt.hello.ngpus);
    cr_assert(strstr(gt_log_tail(), "--gpus 0,7: the CUDA driver shows 1 of the 2 GPUs named; "
                                    "'7' names no GPU of this node") != NULL,
              "no warning naming GPU 7; log:\n%s", gt_log_tail());
    gt_finish();
}

/* ------------------------------------------- the cuda backend and the driver */

/* The cuda backend's own cases need a second driver user (tests/cudastub's
 * cudaprobe): skipped on emu, where no driver names devices or holds memory. */
static void gt_need_probe(void)
{
#ifndef IVMT_CUDAPROBE
    cr_skip_test("built without CUDA: no cudaprobe");
#else
    if (!gt_is_cuda()) {
        cr_skip_test("a cuda backend case (IVM_TEST_GPU_BACKEND=cuda)");
    }
    if (ivmt_cudastub()) {
        setenv("CUDASTUB_DEVICES", "2:64M", 1); /* what gt_start gives gpud */
    }
#endif
}

#ifdef IVMT_CUDAPROBE
/* "cudaprobe uuids" under the environment entry env (NULL: ours): the UUIDs
 * of the devices it sees, in its order, one per slot of uuids. */
static int gt_probe_uuids(const char *env, char (*uuids)[48], int max)
{
    char cmd[512], line[256];
    FILE *f;
    int n = 0;

    snprintf(cmd, sizeof(cmd), "%s %s uuids", env != NULL ? env : "", IVMT_CUDAPROBE);
    f = popen(cmd, "r");
    cr_assert_not_null(f);
    while (n < max && fgets(line, sizeof(line), f) != NULL) {
        snprintf(uuids[n++], 48, "%.*s", (int)strcspn(line, " \n"), line);
    }
    cr_assert_eq(pclose(f), 0, "%s failed", cmd);
    return n;
}
#endif

Test(gpud, a_pe_env_names_its_gpu_by_uuid_whatever_list_gpud_inherits)
{
#ifdef IVMT_CUDAPROBE
    char uuids[16][48], seen[16][48], visible[256];
    char *env[2] = {visible, NULL};
    int order[2], n, i;

    gt_need_probe();
    n = gt_probe_uuids(NULL, uuids, 16);
    cr_assert_gt(n, 0, "the probe sees no GPU");
    /* gpud inherits the devices in reverse, by UUID (Slurm, containers): its
     * GPU 0 is the probe's last device, its GPU 1 the probe's first. */
    order[0] = n - 1;
    order[1] = 0;
    snprintf(visible, sizeof(visible), "CUDA_VISIBLE_DEVICES=%s%s%s", uuids[n - 1],
             n > 1 ? "," : "", n > 1 ? uuids[0] : "");
    gt_start_with(NULL, (const char *const *)env);
    for (i = 0; i < (int)gt.hello.ngpus && i < (n > 1 ? 2 : 1); ++i) {
        /* A PE started with the env gpud names sees exactly that GPU. */
        cr_assert_eq(gt_probe_uuids(gt.hello.gpus[i].env, seen, 16), 1, "env '%s'",
                     gt.hello.gpus[i].env);
        cr_assert_str_eq(seen[0], uuids[order[i]],
                         "gpud's GPU %d is %s, but its PEs get %s (env %s)", i,
                         uuids[order[i]], seen[0], gt.hello.gpus[i].env);
    }
    gt_finish();
#else
    gt_need_probe();
#endif
}

#ifdef IVMT_CUDAPROBE
/* Another process (cudaprobe) takes what GPU 0 has free but `leave` bytes,
 * behind gpud's back, as an application's own cudaMalloc would. */
static void gt_fill_device(uint64_t leave)
{
    char arg[32], line[64];
    int in[2], out[2];
    FILE *f;

    snprintf(arg, sizeof(arg), "%llu", (unsigned long long)leave);
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    gt.filler = fork();
    cr_assert_geq(gt.filler, 0);
    if (gt.filler == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl(IVMT_CUDAPROBE, IVMT_CUDAPROBE, "fill", "0", arg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    f = fdopen(out[0], "r");
    cr_assert_not_null(f);
    cr_assert(fgets(line, sizeof(line), f) != NULL && strncmp(line, "ready", 5) == 0,
              "cudaprobe fill did not get ready");
    fclose(f);
    gt.filler_in = in[1];
}

/* The probe lets its memory go and exits cleanly (no broken contract). */
static void gt_unfill_device(void)
{
    int st;

    close(gt.filler_in);
    cr_assert_eq(waitpid(gt.filler, &st, 0), gt.filler);
    gt.filler = 0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cudaprobe fill: status %#x", st);
}
#endif

/* gpud's accounting is not the device's: memory other processes take (the
 * PEs' contexts, the applications' own allocations) is found at admission
 * (cuMemGetInfo), and a device short of it makes gpud evict cached copies,
 * then wait, as when its own accounting refuses: never a failed map. */
Test(gpud, memory_taken_behind_gpuds_back_evicts_then_waits)
{
#ifdef IVMT_CUDAPROBE
    ivm_gpud_stats_rep_t s;
    uint64_t G;
    uint32_t seq;
    gt_reply_t r;
    gt_acq_t a;
    int na, nb, nc;

    gt_need_probe();
    gt_start_with((const char *const[]){"--admit-timeout", "30", NULL}, NULL);
    G = gt.gran;
    na = gt_node_copy(G, 1, 0);
    nb = gt_node_copy(2 * G, 1, 1);
    nc = gt_node_copy(2 * G, 1, 2);
    gt_acquire(1, 1, G, 0, G, 0, na, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "A: %s", a.detail);
    cr_assert_eq(gt_release(a.rep.copy_id), IVM_SUCCESS); /* A is cached */
    gt_fill_device(G);
    /* B (2 granules): gpud's accounting has 3 free, the device 1: A goes. */
    gt_acquire(1, 2, 2 * G, 0, 2 * G, 0, nb, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "B with the device short: %s", a.detail);
    gt_stats(0, &s);
    cr_assert_eq(s.evictions, 1, "the cached copy was to go first");
    /* C (2 granules): gpud's accounting has room, the device has none and
     * nothing is cached: C waits. */
    seq = gt_acquire_send(1, 3, 2 * G, 0, 2 * G, nc);
    cr_assert_eq(gt_recv(seq, &r, 500), -1, "C must wait for the device's memory, not fail");
    gt_stats(0, &s);
    cr_assert_eq(s.waiting, 1);
    /* The other process lets go: nothing tells gpud, which retries. */
    gt_unfill_device();
    cr_assert_eq(gt_recv(seq, &r, 5000), 0, "C is granted once the device has room");
    gt_acq_parse(&r, &a, 0);
    cr_assert_eq(a.status, IVM_SUCCESS, "C: %s", a.detail);
    gt_job_end(1);
    close(na);
    close(nb);
    close(nc);
    gt_finish();
#else
    gt_need_probe();
#endif
}

/* Start-up checks, with the stand-in's knobs (a real GPU has what it has). */
static void gt_need_stub(void)
{
    if (!gt_is_cuda() || !ivmt_cudastub()) {
        cr_skip_test("needs the CUDA stand-in (IVMT_CUDASTUB=1): it plays an older driver "
                     "or a GPU without a feature");
    }
}

/* A GPU without POSIX fd handles cannot share device copies with PEs: gpud
 * leaves it out, saying why, and numbers the others from 0. */
Test(gpud, a_gpu_without_fd_handles_is_left_out_saying_why)
{
    gt_need_stub();
    gt_start_with(NULL, (const char *const[]){"CUDASTUB_NO_FD_HANDLES=0", NULL});
    cr_assert_eq(gt.hello.ngpus, 1, "GPU 0 lacks POSIX fd handles: one GPU is left");
    cr_assert_str_eq(gt.hello.gpus[0].name, "cudastub GPU 1");
    cr_assert(strstr(gt_log_tail(), "POSIX file descriptor handles") != NULL &&
              strstr(gt_log_tail(), "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED") != NULL,
              "log:\n%s", gt_log_tail());
    gt_finish();
}

Test(gpud, a_gpu_without_vmm_is_left_out_saying_why)
{
    gt_need_stub();
    gt_start_with(NULL, (const char *const[]){"CUDASTUB_NO_VMM=1", NULL});
    cr_assert_eq(gt.hello.ngpus, 1, "GPU 1 lacks VMM: one GPU is left");
    cr_assert_str_eq(gt.hello.gpus[0].name, "cudastub GPU 0");
    cr_assert(strstr(gt_log_tail(), "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED") != NULL,
              "log:\n%s", gt_log_tail());
    gt_finish();
}

/* cuGetProcAddress is asked for the driver's own version: a version newer
 * than the driver is CUDA_ERROR_INVALID_VALUE (a fixed 12000 made a CUDA
 * 11.8 driver look as if it lacked cuGetErrorString). */
Test(gpud, an_older_driver_is_asked_for_its_own_version)
{
    gt_need_stub();
    gt_start_with(NULL, (const char *const[]){"CUDASTUB_DRIVER_VERSION=11080", NULL});
    cr_assert_eq(gt.hello.ngpus, 2);
    cr_assert(strstr(gt_log_tail(), "CUDA driver 11.8") != NULL, "log:\n%s", gt_log_tail());
    gt_finish();
}

/* gpud page-locks only the chunks of a node copy that its device copies
 * use: an object far larger than what a process may pin (RLIMIT_MEMLOCK,
 * the stand-in's CUDASTUB_PIN_LIMIT) still gets device copies of its parts,
 * and the bytes arrive. */
Test(gpud, only_the_parts_device_copies_use_are_pinned)
{
    const uint64_t obj = 32 << 20;
    unsigned char *host;
    gt_acq_t a, b;
    uint64_t G;
    int node;

    gt_need_stub();
    gt_start_with(NULL, (const char *const[]){"CUDASTUB_PIN_LIMIT=4194304", NULL});
    G = gt.gran;
    node = gt_node_copy(obj, 3, 1);
    gt_acquire(1, 1, obj, 8 << 20, G, 0, node, &a);
    cr_assert_eq(a.status, IVM_SUCCESS, "a 32 MiB node copy with 4 MiB pinnable: %s", a.detail);
    gt_acquire(1, 1, obj, 20 << 20, G, 0, -1, &b);
    cr_assert_eq(b.status, IVM_SUCCESS, "a second part: %s", b.detail);
    /* Device -> node copy of the second part lands (through its pinned chunk). */
    host = mmap(NULL, obj, PROT_READ | PROT_WRITE, MAP_SHARED, node, 0);
    cr_assert_neq(host, MAP_FAILED);
    memset(host + (20 << 20), 0, G);
    cr_assert_eq(gt_copy(b.rep.copy_id, 20 << 20, G, IVM_GPUD_COPY_D2H), IVM_SUCCESS);
    cr_assert_eq(host[(20 << 20) + 5], (unsigned char)(((20 << 20) + 5) * 3 + 1));
    munmap(host, obj);
    cr_assert_eq(gt_release(a.rep.copy_id), IVM_SUCCESS);
    cr_assert_eq(gt_release(b.rep.copy_id), IVM_SUCCESS);
    gt_job_end(1);
    close(node);
    gt_finish();
}
