/*
 * ivm-faultproxy: a TCP proxy that injects network faults into the link
 * between two IVM daemons, in user space (no netem, no privileges).
 *
 * It accepts connections on --accept and relays each to --to over a
 * connection of its own. A daemon dials its peer through the proxy when its
 * CLUSTER table gives that peer the proxy's address and port (the table is
 * per daemon: only the dialing side needs it; the lower-named node dials).
 * Faults apply per direction to every relayed connection, present and
 * future: "up" is from the dialing side to --to, "down" the other way.
 *
 * Commands (on the --control Unix socket, one line each, answered with a line
 * "OK ..." or "ERR why"; or at set times with --schedule):
 *   delay DIR MS          every byte is held MS milliseconds (0: off)
 *   stall DIR             no byte passes (they wait; then the sender's TCP
 *                         window fills)
 *   resume DIR            they pass again (ends stall)
 *   drop                  close every relayed connection now (both sides)
 *   corrupt DIR at N      flip (invert) the byte N bytes from now (0: the next)
 *   corrupt DIR prob P    flip each byte with probability P (0: off; --seed)
 *   clear                 every fault off
 *   stats                 OK conns=N up=BYTES down=BYTES flipped=K
 * DIR is up, down or both.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "version.h"

/* X(field, "option-name", TYPE, "default", "help text") */
#define FAULTPROXY_CONFIG_TABLE(X)                                                    \
    X(accept, "accept", STRING, "127.0.0.1:0",                                        \
      "numeric IPv4 ADDR:PORT to accept connections on (port 0: any free one)")       \
    X(to, "to", STRING, "", "numeric IPv4 ADDR:PORT to relay them to (required)")      \
    X(control, "control", STRING, "",                                                  \
      "Unix socket path for commands, one per line (none: --schedule only)")           \
    X(schedule, "schedule", STRING, "",                                                \
      "commands at set times, 'T:COMMAND;T:COMMAND...' (T: seconds after start)")      \
    X(ready_fd, "ready-fd", INT, "-1",                                                 \
      "once listening, write 'R PORT' and a newline to this fd and close it")          \
    X(seed, "seed", INT, "1", "seed of the random byte flips (corrupt DIR prob P)")    \
    X(log_level, "log-level", STRING, "warn", "error, warn, info or debug")

IVM_CONFIG_STRUCT(faultproxy_config, FAULTPROXY_CONFIG_TABLE);

#define FAULTPROXY_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(faultproxy_config, __VA_ARGS__)
static const ivm_config_field_t faultproxy_config_fields[] = {
    FAULTPROXY_CONFIG_TABLE(FAULTPROXY_CONFIG_FIELD) {0}};

#define FAULTPROXY_UP        0          /* dialing side -> --to */
#define FAULTPROXY_DOWN      1          /* --to -> dialing side */
#define FAULTPROXY_READ_MAX  65536      /* bytes read at once */
#define FAULTPROXY_QUEUE_MAX (4u << 20) /* bytes held per direction before reading stops */
#define FAULTPROXY_MAX_PAIRS 64         /* relayed connections at once */
#define FAULTPROXY_MAX_CTL   8          /* control connections at once */
#define FAULTPROXY_SCHED_MAX 32         /* --schedule entries */
#define FAULTPROXY_LINE_MAX  256        /* bytes of one command */

/* Bytes read from one side, to be written to the other once due. */
typedef struct faultproxy_chunk {
    struct faultproxy_chunk *next;
    uint64_t             due_ns; /* monotonic time it may pass */
    size_t               len, off;
    char                 data[];
} faultproxy_chunk_t;

/* One direction of one relayed connection. */
typedef struct faultproxy_flow {
    faultproxy_chunk_t *head, *tail;
    size_t          queued;  /* bytes held */
    int             eof;     /* its source ended */
    int             shut;    /* its destination was shut for writing */
} faultproxy_flow_t;

/* A relayed connection: fd[0] the dialing side, fd[1] the --to side. */
typedef struct faultproxy_pair {
    int           fd[2];
    int           connecting; /* fd[1]'s connect is under way */
    faultproxy_flow_t flow[2];    /* FAULTPROXY_UP, FAULTPROXY_DOWN */
} faultproxy_pair_t;

/* The faults of one direction. */
typedef struct faultproxy_fault {
    uint64_t delay_ns;
    int      stalled;
    int64_t  flip_at;   /* bytes before the one to flip; -1: none */
    double   flip_prob;
    uint64_t bytes;     /* relayed so far */
    uint64_t flipped;
} faultproxy_fault_t;

typedef struct faultproxy_ctl {
    int    fd;
    size_t len;
    char   line[FAULTPROXY_LINE_MAX];
} faultproxy_ctl_t;

typedef struct faultproxy_sched {
    uint64_t at_ns;
    char     cmd[FAULTPROXY_LINE_MAX];
    int      done;
} faultproxy_sched_t;

typedef struct fproxy {
    faultproxy_config_t    cfg;
    struct sockaddr_in to;
    int                listen_fd, ctl_fd, sigfd;
    uint16_t           port;
    faultproxy_pair_t      pairs[FAULTPROXY_MAX_PAIRS];
    int                npairs;
    faultproxy_ctl_t       ctls[FAULTPROXY_MAX_CTL];
    int                nctls;
    faultproxy_fault_t     fault[2];
    faultproxy_sched_t     sched[FAULTPROXY_SCHED_MAX];
    int                nsched;
    uint64_t           start_ns;
    uint64_t           rng;
    int                stopping;
} faultproxy_t;

static uint64_t faultproxy_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: the flips of "corrupt DIR prob P" are reproducible per --seed. */
static double faultproxy_random(faultproxy_t *p)
{
    p->rng ^= p->rng >> 12;
    p->rng ^= p->rng << 25;
    p->rng ^= p->rng >> 27;
    return (double)((p->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int faultproxy_parse_addr(const char *text, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    char *end;
    long port;

    if (colon == NULL || (size_t)(colon - text) >= sizeof(host)) {
        return -1;
    }
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || end == colon + 1 || port < 0 || port > 65535) {
        return -1;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port   = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static void faultproxy_flow_clear(faultproxy_flow_t *f)
{
    faultproxy_chunk_t *c, *next;

    for (c = f->head; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    memset(f, 0, sizeof(*f));
}

static void faultproxy_pair_close(faultproxy_t *p, int k, const char *why)
{
    faultproxy_pair_t *pr = &p->pairs[k];

    ivm_info("connection %d closed: %s", k, why);
    for (int s = 0; s < 2; ++s) {
        if (pr->fd[s] >= 0) {
            close(pr->fd[s]);
        }
        faultproxy_flow_clear(&pr->flow[s]);
    }
    p->pairs[k] = p->pairs[--p->npairs];
}

/* Parse DIR: a mask of directions (bit FAULTPROXY_UP, bit FAULTPROXY_DOWN); 0 if bad. */
static int faultproxy_dirs(const char *word)
{
    if (word == NULL) {
        return 0;
    }
    if (strcmp(word, "up") == 0) {
        return 1 << FAULTPROXY_UP;
    }
    if (strcmp(word, "down") == 0) {
        return 1 << FAULTPROXY_DOWN;
    }
    return strcmp(word, "both") == 0 ? 3 : 0;
}

/* Run one command; the answer goes to reply ("OK ..." or "ERR ..."). */
static void faultproxy_command(faultproxy_t *p, char *line, char *reply, size_t len)
{
    char *save = NULL, *verb, *dir, *arg, *val, *end;
    int dirs, k;
    double num = 0;

    line[strcspn(line, "\r\n")] = '\0';
    verb = strtok_r(line, " \t", &save);
    dir  = strtok_r(NULL, " \t", &save);
    arg  = strtok_r(NULL, " \t", &save);
    val  = strtok_r(NULL, " \t", &save);
    if (verb == NULL) {
        snprintf(reply, len, "ERR empty command");
        return;
    }
    if (strcmp(verb, "drop") == 0 && dir == NULL) {
        int n = p->npairs;
        while (p->npairs > 0) {
            faultproxy_pair_close(p, p->npairs - 1, "dropped on command");
        }
        snprintf(reply, len, "OK dropped %d", n);
        return;
    }
    if (strcmp(verb, "clear") == 0 && dir == NULL) {
        for (k = 0; k < 2; ++k) {
            p->fault[k].delay_ns  = 0;
            p->fault[k].stalled   = 0;
            p->fault[k].flip_at   = -1;
            p->fault[k].flip_prob = 0;
        }
        snprintf(reply, len, "OK");
        return;
    }
    if (strcmp(verb, "stats") == 0 && dir == NULL) {
        snprintf(reply, len, "OK conns=%d up=%llu down=%llu flipped=%llu", p->npairs,
                 (unsigned long long)p->fault[FAULTPROXY_UP].bytes,
                 (unsigned long long)p->fault[FAULTPROXY_DOWN].bytes,
                 (unsigned long long)(p->fault[0].flipped + p->fault[1].flipped));
        return;
    }
    dirs = faultproxy_dirs(dir);
    if (dirs == 0) {
        snprintf(reply, len, "ERR '%s': unknown command, or DIR is not up, down or both",
                 verb);
        return;
    }
    if (strcmp(verb, "delay") == 0 && arg != NULL && val == NULL) {
        num = strtod(arg, &end);
        if (*end != '\0' || !(num >= 0) || num > 60000) {
            snprintf(reply, len, "ERR delay: MS must be 0..60000");
            return;
        }
    } else if (strcmp(verb, "corrupt") == 0 && arg != NULL && val != NULL) {
        num = strtod(val, &end);
        if (*end != '\0' || !(num >= 0) || (strcmp(arg, "prob") == 0 && num > 1) ||
            (strcmp(arg, "at") != 0 && strcmp(arg, "prob") != 0)) {
            snprintf(reply, len, "ERR corrupt DIR at N | corrupt DIR prob P (0..1)");
            return;
        }
    } else if ((strcmp(verb, "stall") != 0 && strcmp(verb, "resume") != 0) || arg != NULL) {
        snprintf(reply, len, "ERR '%s': unknown command or wrong arguments", verb);
        return;
    }
    for (k = 0; k < 2; ++k) {
        faultproxy_fault_t *f = &p->fault[k];
        if (!(dirs & (1 << k))) {
            continue;
        }
        if (strcmp(verb, "delay") == 0) {
            f->delay_ns = (uint64_t)(num * 1e6);
        } else if (strcmp(verb, "stall") == 0) {
            f->stalled = 1;
        } else if (strcmp(verb, "resume") == 0) {
            f->stalled = 0;
        } else if (strcmp(arg, "at") == 0) {
            f->flip_at = (int64_t)num;
        } else {
            f->flip_prob = num;
        }
    }
    snprintf(reply, len, "OK");
}

/* A control line (or a scheduled one): run it, log it. */
static void faultproxy_run_command(faultproxy_t *p, const char *text, char *reply, size_t len)
{
    char line[FAULTPROXY_LINE_MAX];

    snprintf(line, sizeof(line), "%s", text);
    line[strcspn(line, "\r\n")] = '\0';
    faultproxy_command(p, line, reply, len);
    snprintf(line, sizeof(line), "%s", text);
    line[strcspn(line, "\r\n")] = '\0';
    ivm_info("command '%s': %s", line, reply);
}

static int faultproxy_schedule_parse(faultproxy_t *p)
{
    char *copy = strdup(p->cfg.schedule), *save = NULL, *entry, *colon, *end;
    double t;

    if (copy == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    for (entry = strtok_r(copy, ";", &save); entry != NULL;
         entry = strtok_r(NULL, ";", &save)) {
        colon = strchr(entry, ':');
        if (colon != NULL) {
            *colon = '\0';
            t = strtod(entry, &end);
        }
        if (colon == NULL || *end != '\0' || end == entry || !(t >= 0) ||
            p->nsched == FAULTPROXY_SCHED_MAX) {
            ivm_error("--schedule: '%s' is not T:COMMAND (T seconds >= 0; at most %d)",
                      entry, FAULTPROXY_SCHED_MAX);
            free(copy);
            return -1;
        }
        p->sched[p->nsched].at_ns = (uint64_t)(t * 1e9);
        snprintf(p->sched[p->nsched].cmd, sizeof(p->sched[p->nsched].cmd), "%s", colon + 1);
        ++p->nsched;
    }
    free(copy);
    return 0;
}

static int faultproxy_listen(faultproxy_t *p)
{
    struct sockaddr_in sa;
    struct sockaddr_un un;
    socklen_t len = sizeof(sa);
    int one = 1;

    if (faultproxy_parse_addr(p->cfg.accept, &sa) != 0) {
        ivm_error("--accept '%s' is not a numeric IPv4 ADDR:PORT", p->cfg.accept);
        return -1;
    }
    if (p->cfg.to[0] == '\0' || faultproxy_parse_addr(p->cfg.to, &p->to) != 0) {
        ivm_error("--to '%s' is not a numeric IPv4 ADDR:PORT", p->cfg.to);
        return -1;
    }
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->listen_fd < 0 ||
        setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(p->listen_fd, 16) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&sa, &len) != 0) {
        ivm_error("cannot listen on %s: %m", p->cfg.accept);
        return -1;
    }
    p->port = ntohs(sa.sin_port);
    if (p->cfg.control[0] == '\0') {
        return 0;
    }
    memset(&un, 0, sizeof(un));
    un.sun_family = AF_UNIX;
    if (strlen(p->cfg.control) >= sizeof(un.sun_path)) {
        ivm_error("--control path '%s' is too long", p->cfg.control);
        return -1;
    }
    strcpy(un.sun_path, p->cfg.control);
    unlink(un.sun_path);
    p->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->ctl_fd < 0 || bind(p->ctl_fd, (struct sockaddr *)&un, sizeof(un)) != 0 ||
        listen(p->ctl_fd, 8) != 0) {
        ivm_error("cannot listen on the control socket %s: %m", p->cfg.control);
        return -1;
    }
    return 0;
}

static void faultproxy_accept(faultproxy_t *p)
{
    faultproxy_pair_t *pr;
    int fd, up, one = 1;

    fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    if (p->npairs == FAULTPROXY_MAX_PAIRS) {
        ivm_warn("more than %d connections at once: refused", FAULTPROXY_MAX_PAIRS);
        close(fd);
        return;
    }
    up = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (up < 0 || (connect(up, (struct sockaddr *)&p->to, sizeof(p->to)) != 0 &&
                   errno != EINPROGRESS)) {
        ivm_warn("cannot connect to %s: %m", p->cfg.to);
        close(fd);
        if (up >= 0) {
            close(up);
        }
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    pr = &p->pairs[p->npairs++];
    memset(pr, 0, sizeof(*pr));
    pr->fd[0]      = fd;
    pr->fd[1]      = up;
    pr->connecting = 1;
    ivm_info("connection %d accepted, relayed to %s", p->npairs - 1, p->cfg.to);
}

/* Read what the source of direction d of pair k holds. Returns -1 when the
 * pair was closed. */
static int faultproxy_read(faultproxy_t *p, int k, int d)
{
    faultproxy_pair_t *pr = &p->pairs[k];
    faultproxy_flow_t *f  = &pr->flow[d];
    faultproxy_fault_t *fl = &p->fault[d];
    faultproxy_chunk_t *c = malloc(sizeof(*c) + FAULTPROXY_READ_MAX);
    ssize_t n;

    if (c == NULL) {
        ivm_error("out of memory");
        faultproxy_pair_close(p, k, "out of memory");
        return -1;
    }
    n = read(pr->fd[d == FAULTPROXY_UP ? 0 : 1], c->data, FAULTPROXY_READ_MAX);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        free(c);
        return 0;
    }
    if (n <= 0) {
        free(c);
        if (n < 0) {
            faultproxy_pair_close(p, k, strerror(errno));
            return -1;
        }
        f->eof = 1;
        return 0;
    }
    for (ssize_t i = 0; i < n; ++i) {
        int at = 0, by_chance = 0;
        if (fl->flip_at >= 0 && fl->flip_at-- == 0) {
            at = 1;
        }
        if (fl->flip_prob > 0 && faultproxy_random(p) < fl->flip_prob) {
            by_chance = 1;
        }
        if (at || by_chance) {
            c->data[i] = (char)~c->data[i];
            ++fl->flipped;
            IVM_LOG(at ? IVM_LOG_INFO : IVM_LOG_DEBUG, "flipped byte %llu going %s",
                    (unsigned long long)(fl->bytes + (uint64_t)i),
                    d == FAULTPROXY_UP ? "up" : "down");
        }
    }
    fl->bytes += (uint64_t)n;
    c->next   = NULL;
    c->len    = (size_t)n;
    c->off    = 0;
    c->due_ns = faultproxy_now_ns() + fl->delay_ns;
    if (f->tail != NULL) {
        f->tail->next = c;
    } else {
        f->head = c;
    }
    f->tail = c;
    f->queued += (size_t)n;
    return 0;
}

/* Write the due bytes of direction d of pair k. Returns -1 when the pair
 * was closed. */
static int faultproxy_write(faultproxy_t *p, int k, int d, uint64_t now)
{
    faultproxy_pair_t *pr = &p->pairs[k];
    faultproxy_flow_t *f  = &pr->flow[d];
    int fd = pr->fd[d == FAULTPROXY_UP ? 1 : 0];
    faultproxy_chunk_t *c;
    ssize_t n;

    while ((c = f->head) != NULL && c->due_ns <= now && !p->fault[d].stalled) {
        n = send(fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                return 0;
            }
            faultproxy_pair_close(p, k, strerror(errno));
            return -1;
        }
        c->off += (size_t)n;
        f->queued -= (size_t)n;
        if (c->off < c->len) {
            return 0;
        }
        f->head = c->next;
        if (f->head == NULL) {
            f->tail = NULL;
        }
        free(c);
    }
    if (f->head == NULL && f->eof && !f->shut) {
        shutdown(fd, SHUT_WR);
        f->shut = 1;
    }
    if (pr->flow[0].shut && pr->flow[1].shut) {
        faultproxy_pair_close(p, k, "both sides ended");
        return -1;
    }
    return 0;
}

static void faultproxy_ctl_read(faultproxy_t *p, int k)
{
    faultproxy_ctl_t *c = &p->ctls[k];
    char reply[FAULTPROXY_LINE_MAX + 64], *nl;
    ssize_t n = read(c->fd, c->line + c->len, sizeof(c->line) - 1 - c->len);

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        close(c->fd);
        p->ctls[k] = p->ctls[--p->nctls];
        return;
    }
    c->len += (size_t)n;
    c->line[c->len] = '\0';
    while ((nl = strchr(c->line, '\n')) != NULL) {
        *nl = '\0';
        faultproxy_run_command(p, c->line, reply, sizeof(reply) - 1);
        strcat(reply, "\n");
        if (write(c->fd, reply, strlen(reply)) < 0) {
            ivm_debug("control reply lost: %m");
        }
        c->len -= (size_t)(nl + 1 - c->line);
        memmove(c->line, nl + 1, c->len + 1);
    }
    if (c->len == sizeof(c->line) - 1) {
        ivm_warn("control line too long: connection closed");
        close(c->fd);
        p->ctls[k] = p->ctls[--p->nctls];
    }
}

static void faultproxy_ctl_accept(faultproxy_t *p)
{
    int fd = accept4(p->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0) {
        return;
    }
    if (p->nctls == FAULTPROXY_MAX_CTL) {
        close(fd);
        return;
    }
    p->ctls[p->nctls].fd  = fd;
    p->ctls[p->nctls].len = 0;
    ++p->nctls;
}

/* Scheduled commands that are due; the ms until the next one (-1: none). */
static int faultproxy_schedule_run(faultproxy_t *p, uint64_t now)
{
    char reply[FAULTPROXY_LINE_MAX + 64];
    uint64_t next = UINT64_MAX;

    for (int k = 0; k < p->nsched; ++k) {
        faultproxy_sched_t *s = &p->sched[k];
        if (s->done) {
            continue;
        }
        if (p->start_ns + s->at_ns <= now) {
            s->done = 1;
            faultproxy_run_command(p, s->cmd, reply, sizeof(reply));
            if (strncmp(reply, "OK", 2) != 0) {
                ivm_warn("scheduled command '%s': %s", s->cmd, reply);
            }
        } else if (p->start_ns + s->at_ns < next) {
            next = p->start_ns + s->at_ns;
        }
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000u) + 1;
}

/* One turn of the loop: poll every fd that can make progress. */
static void faultproxy_turn(faultproxy_t *p)
{
    struct pollfd pfds[3 + FAULTPROXY_MAX_CTL + 2 * FAULTPROXY_MAX_PAIRS];
    int who[3 + FAULTPROXY_MAX_CTL + 2 * FAULTPROXY_MAX_PAIRS];
    uint64_t now = faultproxy_now_ns(), soonest = UINT64_MAX;
    int n = 0, timeout, k, d, r;

    timeout = faultproxy_schedule_run(p, now);
    pfds[n] = (struct pollfd){.fd = p->sigfd, .events = POLLIN};
    who[n++] = -1;
    pfds[n] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
    who[n++] = -2;
    if (p->ctl_fd >= 0) {
        pfds[n] = (struct pollfd){.fd = p->ctl_fd, .events = POLLIN};
        who[n++] = -3;
    }
    for (k = 0; k < p->nctls; ++k) {
        pfds[n] = (struct pollfd){.fd = p->ctls[k].fd, .events = POLLIN};
        who[n++] = -10 - k;
    }
    for (k = 0; k < p->npairs; ++k) {
        faultproxy_pair_t *pr = &p->pairs[k];
        for (int s = 0; s < 2; ++s) {
            /* side s is the source of direction s and the destination of 1-s */
            faultproxy_flow_t *in = &pr->flow[s], *out = &pr->flow[1 - s];
            short ev = 0;
            if (pr->connecting) {
                ev = (s == 1) ? POLLOUT : 0;
            } else {
                if (!in->eof && in->queued < FAULTPROXY_QUEUE_MAX) {
                    ev |= POLLIN;
                }
                if (out->head != NULL && !p->fault[1 - s].stalled) {
                    if (out->head->due_ns <= now) {
                        ev |= POLLOUT;
                    } else if (out->head->due_ns < soonest) {
                        soonest = out->head->due_ns;
                    }
                }
            }
            /* A side with nothing to wait for is left out (-1): its HUP
             * would only wake the loop again and again. */
            pfds[n] = (struct pollfd){.fd = ev != 0 ? pr->fd[s] : -1, .events = ev};
            who[n++] = k * 2 + s;
        }
    }
    if (soonest != UINT64_MAX) {
        int ms = (int)((soonest - now) / 1000000u) + 1;
        timeout = (timeout < 0 || ms < timeout) ? ms : timeout;
    }
    r = poll(pfds, (nfds_t)n, timeout);
    if (r < 0) {
        if (errno != EINTR) {
            ivm_error("poll: %m");
            p->stopping = 1;
        }
        return;
    }
    now = faultproxy_now_ns();
    /* Pairs are visited from the last: closing one moves the last into its
     * slot, which then has been handled already. */
    for (int i = n - 1; i >= 0; --i) {
        short rev = pfds[i].revents;
        if (rev == 0) {
            continue;
        }
        if (who[i] == -1) {
            struct signalfd_siginfo si;
            while (read(p->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                p->stopping = 1;
            }
        } else if (who[i] == -2) {
            faultproxy_accept(p);
        } else if (who[i] == -3) {
            faultproxy_ctl_accept(p);
        } else if (who[i] <= -10) {
            k = -10 - who[i];
            if (k < p->nctls) {
                faultproxy_ctl_read(p, k);
            }
        } else {
            k = who[i] / 2;
            d = who[i] % 2; /* the side: source of direction d */
            if (k >= p->npairs || p->pairs[k].fd[d] != pfds[i].fd) {
                continue;
            }
            if (p->pairs[k].connecting) {
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(p->pairs[k].fd[1], SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0) {
                    ivm_warn("cannot connect to %s: %s", p->cfg.to, strerror(err));
                    faultproxy_pair_close(p, k, "connect failed");
                    continue;
                }
                p->pairs[k].connecting = 0;
                continue;
            }
            if ((rev & (POLLOUT | POLLERR | POLLHUP)) &&
                faultproxy_write(p, k, 1 - d, now) < 0) {
                continue;
            }
            if ((rev & (POLLIN | POLLERR | POLLHUP)) && !p->pairs[k].flow[d].eof &&
                faultproxy_read(p, k, d) < 0) {
                continue;
            }
            /* what arrived with no delay may pass at once */
            if (faultproxy_write(p, k, d, faultproxy_now_ns()) < 0) {
                continue;
            }
        }
    }
}

static void faultproxy_usage(FILE *out)
{
    fprintf(out,
            "usage: ivm-faultproxy --to ADDR:PORT [options]\n"
            "A TCP proxy that injects network faults between two IVM daemons (tests).\n"
            "It relays every connection accepted on --accept to --to. Give the dialing\n"
            "daemon (the lower-named node) a CLUSTER table that names its peer at the\n"
            "proxy's port, and the peers talk through it.\n\n"
            "Commands, one per line on the --control socket (answer: a line 'OK ...'\n"
            "or 'ERR why'), or at set times with --schedule. DIR: up (dialing side ->\n"
            "--to), down (the other way) or both. Faults hold for every connection,\n"
            "present and future.\n"
            "  delay DIR MS         hold every byte MS milliseconds (0: off)\n"
            "  stall DIR            let no byte pass (a silent link: heartbeats stop)\n"
            "  resume DIR           let them pass again\n"
            "  drop                 close every relayed connection now\n"
            "  corrupt DIR at N     invert the byte N bytes from now (0: the next one)\n"
            "  corrupt DIR prob P   invert each byte with probability P (0: off)\n"
            "  clear                every fault off\n"
            "  stats                'OK conns=N up=BYTES down=BYTES flipped=K'\n\n"
            "Example:\n"
            "  ivm-faultproxy --to 127.0.0.1:40001 --control /tmp/fp.sock --ready-fd 3 \\\n"
            "      --schedule '2:delay both 50;5:stall both;12:resume both'\n"
            "  echo 'corrupt down at 4096' | socat - UNIX-CONNECT:/tmp/fp.sock\n\n"
            "Options:\n");
    ivm_config_print_help(faultproxy_config_fields, out);
}

int main(int argc, char **argv)
{
    static faultproxy_t proxy;
    faultproxy_t *p = &proxy;
    char err[256], line[32];
    int first = 0, help = 0, level, len;
    sigset_t mask;

    ivm_log_set_prefix("ivm-faultproxy");
    p->listen_fd = p->ctl_fd = p->sigfd = -1;
    p->fault[0].flip_at = p->fault[1].flip_at = -1;
    if (ivm_config_defaults(faultproxy_config_fields, &p->cfg) != IVM_SUCCESS ||
        ivm_config_load_env(faultproxy_config_fields, &p->cfg, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_config_parse_args(faultproxy_config_fields, &p->cfg, argc, argv, &first, &help, err,
                              sizeof(err)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-faultproxy: %s (see --help)\n", err);
        return 2;
    }
    if (help == IVM_CONFIG_ASK_VERSION) {
        ivm_version_print(stdout, "ivm-faultproxy");
        return 0;
    }
    if (help) {
        faultproxy_usage(stdout);
        return 0;
    }
    if (first < argc) {
        fprintf(stderr, "ivm-faultproxy: unexpected argument '%s' (see --help)\n", argv[first]);
        return 2;
    }
    level = ivm_log_level_parse(p->cfg.log_level);
    if (level < 0) {
        fprintf(stderr, "ivm-faultproxy: bad --log-level '%s'\n", p->cfg.log_level);
        return 2;
    }
    ivm_log_current_level = level;
    p->rng = (uint64_t)p->cfg.seed * 0x9E3779B97F4A7C15ull + 1;
    if (faultproxy_schedule_parse(p) != 0 || faultproxy_listen(p) != 0) {
        return 2;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    p->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (p->sigfd < 0) {
        ivm_error("signalfd: %m");
        return 1;
    }
    p->start_ns = faultproxy_now_ns();
    ivm_info("relaying port %u to %s", (unsigned)p->port, p->cfg.to);
    if (p->cfg.ready_fd >= 0) {
        len = snprintf(line, sizeof(line), "R %u\n", (unsigned)p->port);
        if (write((int)p->cfg.ready_fd, line, (size_t)len) != len) {
            ivm_warn("cannot write the ready line to fd %ld: %m", p->cfg.ready_fd);
        }
        close((int)p->cfg.ready_fd);
    }
    while (!p->stopping) {
        faultproxy_turn(p);
    }
    while (p->npairs > 0) {
        faultproxy_pair_close(p, p->npairs - 1, "shutting down");
    }
    for (int k = 0; k < p->nctls; ++k) {
        close(p->ctls[k].fd);
    }
    if (p->ctl_fd >= 0) {
        close(p->ctl_fd);
        unlink(p->cfg.control);
    }
    close(p->listen_fd);
    close(p->sigfd);
    ivm_config_release(faultproxy_config_fields, &p->cfg);
    return 0;
}
