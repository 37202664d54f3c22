/*
 * bench-tcp-baseline: raw TCP between two processes over loopback, the floor
 * for bench-sync-remote (IVM moves node-to-node data daemon to daemon over
 * one loopback TCP connection when nodes are simulated on one machine).
 *
 * The process forks; the child serves, the parent measures. One connection
 * to 127.0.0.1, TCP_NODELAY on both ends, default socket buffers.
 *   - latency: 8-byte ping-pong; one sample = one round trip (client send,
 *     server recv + send, client recv). The round trip is what is compared
 *     with a blocking ivmSyncPut (which also waits for the far end); half of
 *     it (the classic one-way "latency") is printed too.
 *   - put: the client sends a 16-byte request then N bytes from its buffer;
 *     the server recv()s them into its buffer and answers an 8-byte ack; one
 *     sample = request sent until ack received (like a blocking Put).
 *   - get: the client sends a 16-byte request; the server send()s N bytes
 *     from its buffer; one sample = request sent until the last byte is in the
 *     client's buffer (like a blocking Get).
 * Sizes, repetitions and statistics as bench-sync-remote.
 * Buffers are allocated after the fork (each process its own pages, all
 * touched before timing); IVM_BENCH_TCP_MEMFD=1 makes them shared mappings of
 * a memfd, as IVM's copies are (it made no difference here).
 * Variants for diagnosis: -c KIB caps each send()/recv() call at KIB KiB
 * (default: one call per transfer); -p makes receivers poll with MSG_DONTWAIT
 * instead of sleeping, which takes the wake-up cost out of the round trip
 * (as MPI's progress engine does).
 *
 * Run:  bench-tcp-baseline [-s MAX_MIB (64)] [-l LAT_CALLS (2000)]
 *                          [-w WARMUP (200)] [-r REPS (10)] [-c KIB (0)] [-p]
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define MIB (1024u * 1024u)

enum { OP_PING = 1, OP_PUT = 2, OP_GET = 3, OP_QUIT = 4 };

typedef struct {
    uint64_t op;
    uint64_t len;
} req_t;

static const size_t bw_sizes[] = { 4096, 64 * 1024, MIB, 16 * MIB, 64 * MIB };
#define N_SIZES (sizeof(bw_sizes) / sizeof(bw_sizes[0]))

static void die(const char *what)
{
    fprintf(stderr, "bench-tcp-baseline: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Largest length of one send() or recv() call; 0 = no limit (-c). */
static size_t io_chunk;
/* -p: receive by polling (MSG_DONTWAIT in a loop) instead of sleeping in recv(). */
static int busy_poll;

static void send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, io_chunk && len > io_chunk ? io_chunk : len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("send");
        }
        p += n;
        len -= (size_t)n;
    }
}

/* 0 on success, -1 on EOF before len bytes. */
static int recv_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, io_chunk && len > io_chunk ? io_chunk : len,
                         busy_poll ? MSG_DONTWAIT : 0);
        if (n < 0) {
            if (errno == EINTR || (busy_poll && errno == EAGAIN))
                continue;
            die("recv");
        }
        if (n == 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The transfer buffer, every page touched. IVM_BENCH_TCP_MEMFD=1 in the
 * environment: a shared mapping of a memfd, like IVM's object copies. */
static char *alloc_buf(size_t size)
{
    char *p;

    if (getenv("IVM_BENCH_TCP_MEMFD") != NULL) {
        int mfd = memfd_create("bench-tcp", MFD_CLOEXEC);
        if (mfd < 0 || ftruncate(mfd, (off_t)size) != 0)
            die("memfd");
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        close(mfd);
        if (p == MAP_FAILED)
            die("mmap");
    } else {
        p = malloc(size);
        if (p == NULL)
            die("malloc");
    }
    memset(p, 0x3C, size);
    return p;
}

static void serve(int fd, char *buf, size_t bufsize)
{
    req_t r;
    uint64_t word;

    for (;;) {
        if (recv_all(fd, &r, sizeof(r)) != 0 || r.op == OP_QUIT)
            return;
        if (r.len > bufsize) {
            fprintf(stderr, "bench-tcp-baseline: request of %llu bytes\n",
                    (unsigned long long)r.len);
            exit(1);
        }
        switch (r.op) {
        case OP_PING:                   /* the 8-byte ping-pong: raw words */
            for (uint64_t i = 0; i < r.len; i++) {
                if (recv_all(fd, &word, sizeof(word)) != 0)
                    return;
                send_all(fd, &word, sizeof(word));
            }
            break;
        case OP_PUT:
            if (recv_all(fd, buf, r.len) != 0)
                return;
            word = r.len;
            send_all(fd, &word, sizeof(word));
            break;
        case OP_GET:
            send_all(fd, buf, r.len);
            break;
        default:
            fprintf(stderr, "bench-tcp-baseline: bad request %llu\n", (unsigned long long)r.op);
            exit(1);
        }
    }
}

static double put_once(int fd, char *buf, size_t len)
{
    req_t r = { OP_PUT, len };
    uint64_t ack;
    double t0 = bench_now_ns();

    send_all(fd, &r, sizeof(r));
    send_all(fd, buf, len);
    if (recv_all(fd, &ack, sizeof(ack)) != 0 || ack != len) {
        fprintf(stderr, "bench-tcp-baseline: bad put ack\n");
        exit(1);
    }
    return bench_now_ns() - t0;
}

static double get_once(int fd, char *buf, size_t len)
{
    req_t r = { OP_GET, len };
    double t0 = bench_now_ns();

    send_all(fd, &r, sizeof(r));
    if (recv_all(fd, buf, len) != 0) {
        fprintf(stderr, "bench-tcp-baseline: server closed during a get\n");
        exit(1);
    }
    return bench_now_ns() - t0;
}

/* n round trips of 8 bytes; t[i] in ns (t may be NULL). */
static void ping(int fd, int n, double *t)
{
    req_t r = { OP_PING, (uint64_t)n };
    uint64_t w, back;

    send_all(fd, &r, sizeof(r));
    for (int i = 0; i < n; i++) {
        w = (uint64_t)i;
        double t0 = bench_now_ns();
        send_all(fd, &w, sizeof(w));
        if (recv_all(fd, &back, sizeof(back)) != 0 || back != w) {
            fprintf(stderr, "bench-tcp-baseline: bad pong\n");
            exit(1);
        }
        double t1 = bench_now_ns();
        if (t != NULL)
            t[i] = t1 - t0;
    }
}

int main(int argc, char **argv)
{
    int max_mib = 64, lat_calls = 2000, warmup = 200, reps = 10, chunk_kib = 0, opt, one = 1;

    while ((opt = getopt(argc, argv, "s:l:w:r:c:p")) != -1) {
        switch (opt) {
        case 's': max_mib = bench_parse_int(optarg, 1); break;
        case 'l': lat_calls = bench_parse_int(optarg, 1); break;
        case 'w': warmup = bench_parse_int(optarg, 0); break;
        case 'r': reps = bench_parse_int(optarg, 1); break;
        case 'c': chunk_kib = bench_parse_int(optarg, 0); break;
        case 'p': busy_poll = 1; break;
        default: max_mib = -1; break;
        }
    }
    if (max_mib < 0 || max_mib > 4096 || lat_calls < 0 || warmup < 0 || reps < 0 ||
        chunk_kib < 0 || optind < argc) {
        fprintf(stderr, "usage: %s [-s MAX_MIB (64)] [-l LAT_CALLS (2000)] "
                        "[-w WARMUP (200)] [-r REPS (10)] [-c CHUNK_KIB (0)] [-p]\n", argv[0]);
        return 2;
    }
    io_chunk = (size_t)chunk_kib * 1024;
    size_t bufsize = (size_t)max_mib * MIB;
    char *buf;

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
        die("listen on 127.0.0.1");

    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    buf = alloc_buf(bufsize);           /* after fork: each process its own pages */
    if (pid == 0) {                     /* server */
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        close(lfd);
        serve(fd, buf, bufsize);
        close(fd);
        _exit(0);
    }
    close(lfd);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    int n = lat_calls > 10 * reps ? lat_calls : 10 * reps;
    double *t = calloc((size_t)n, sizeof(double));
    bench_stats_t lat, bw[N_SIZES][2];
    int nsizes = 0;
    if (t == NULL)
        die("calloc");

    ping(fd, warmup, NULL);
    ping(fd, lat_calls, t);
    lat = bench_stats(t, lat_calls);

    for (size_t s = 0; s < N_SIZES && bw_sizes[s] <= bufsize; s++, nsizes++) {
        int r = bw_sizes[s] < MIB ? 10 * reps : reps;
        for (int put = 1; put >= 0; put--) {
            (put ? put_once : get_once)(fd, buf, bw_sizes[s]);
            for (int i = 0; i < r; i++)
                t[i] = (put ? put_once : get_once)(fd, buf, bw_sizes[s]);
            bw[s][put] = bench_stats(t, r);
        }
    }
    req_t q = { OP_QUIT, 0 };
    send_all(fd, &q, sizeof(q));
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;

    printf("bench-tcp-baseline: two processes, one TCP connection over 127.0.0.1, "
           "TCP_NODELAY%s%s\n", busy_poll ? ", receivers poll (-p)" : "",
           io_chunk ? ", send/recv calls of at most -c KiB" : "");
    printf("latency, 8 B ping-pong, %d round trips (+%d warm-up)\n", lat_calls, warmup);
    printf("%-12s %10s %10s %10s\n", "", "median_us", "p90_us", "min_us");
    printf("%-12s %10.1f %10.1f %10.1f\n", "round trip", lat.median * 1e-3, lat.p90 * 1e-3,
           lat.min * 1e-3);
    printf("%-12s %10.1f %10.1f %10.1f\n", "half (1-way)", lat.median * 0.5e-3,
           lat.p90 * 0.5e-3, lat.min * 0.5e-3);
    printf("bandwidth, MB/s = 10^6 B / median time (best = fastest), %d reps (%d below "
           "1 MiB); put = send + 8-byte ack, get = request + receive\n", reps, 10 * reps);
    bench_print_bw_table(bw_sizes, nsizes, (const bench_stats_t(*)[2])bw);
    printf("RESULT tcp_lat rtt_median_us=%.2f rtt_p90_us=%.2f half_rtt_median_us=%.2f "
           "calls=%d\n", lat.median * 1e-3, lat.p90 * 1e-3, lat.median * 0.5e-3, lat_calls);
    for (int s = 0; s < nsizes; s++) {
        double b = (double)bw_sizes[s] * 1e3;
        printf("RESULT tcp_bw bytes=%zu put_MBps=%.1f get_MBps=%.1f put_median_us=%.1f "
               "get_median_us=%.1f\n", bw_sizes[s], b / bw[s][1].median, b / bw[s][0].median,
               bw[s][1].median * 1e-3, bw[s][0].median * 1e-3);
    }
    free(t);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
