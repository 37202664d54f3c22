/* Limits: the daemon's fd budget, pauses of its listeners when fds run out,
 * the limits on jobs' objects, bytes, PEs and connections, the memory an
 * object takes (reserved when it is made), and the admission of
 * unauthenticated peer connections per source address. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "ivmd.h"
#include "log.h"

#define IVMD_LIMITS_PAUSE_NS   100000000u /* a listener out of fds rests 100 ms */
#define IVMD_LIMITS_MAX_PAUSED 2          /* the PE listener and the peer listener */
#define IVMD_LIMITS_NSRC       64         /* pre-auth sources remembered */
#define IVMD_LIMITS_FD_MIN     16         /* fds a budget must leave to jobs */

/* One source address of pre-auth peer connections: a token bucket. */
typedef struct ivmd_limits_src {
    uint8_t  addr[16];
    double   tokens;
    uint64_t last_ns; /* 0: slot unused */
} ivmd_limits_src_t;

typedef struct ivmd_limits {
    long              fd_limit;  /* RLIMIT_NOFILE we run with */
    long              obj_line;  /* objects' fds stay below this */
    long              conn_line; /* connections' and new PEs' fds stay below this */
    int               timer_fd;  /* pause timer */
    ivmd_handler_t    timer_h;
    ivmd_handler_t   *paused[IVMD_LIMITS_MAX_PAUSED];
    int               npaused;
    uint64_t          refused_sources; /* pre-auth connections closed at once */
    uint64_t          room;      /* memory room read at room_ns ... */
    uint64_t          room_ns;   /* ... (0: never) ... */
    uint64_t          room_used; /* ... when the node's objects held this many bytes */
    const char       *room_what; /* what bound it */
    ivmd_limits_src_t src[IVMD_LIMITS_NSRC];
} ivmd_limits_t;

static void ivmd_limits_resume(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_limits_t *l = d->limits;
    uint64_t ticks;
    int i;

    if (read(l->timer_fd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
        return;
    }
    for (i = 0; i < l->npaused; ++i) {
        ivmd_handler_t *h = l->paused[i];
        if (h->fd >= 0 && ivmd_loop_add(d, h, EPOLLIN) == IVM_SUCCESS) {
            /* Pending connections are taken by the next loop turn. */
            ivm_debug("accepting again on fd %d", h->fd);
        }
    }
    l->npaused = 0;
}

ivmError_t ivmd_limits_open(ivmd_t *d)
{
    ivmd_limits_t *l;
    struct rlimit rl;

    if (d->cfg.fd_reserve < 8) {
        ivm_error("--fd-reserve %ld: the daemon needs at least 8 fds for its own work",
                  d->cfg.fd_reserve);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        ivm_error("getrlimit(RLIMIT_NOFILE): %m");
        return IVM_ERROR_INTERNAL;
    }
    rl.rlim_cur = rl.rlim_max;
    if (d->cfg.max_fds > 0 && (rlim_t)d->cfg.max_fds < rl.rlim_cur) {
        rl.rlim_cur = (rlim_t)d->cfg.max_fds;
    }
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        ivm_warn("cannot raise the open-file limit to %llu: %m",
                 (unsigned long long)rl.rlim_cur);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < (rlim_t)(d->cfg.fd_reserve + IVMD_LIMITS_FD_MIN)) {
        ivm_error("the open-file limit %llu leaves no fd to jobs beyond --fd-reserve %ld",
                  (unsigned long long)rl.rlim_cur, d->cfg.fd_reserve);
        return IVM_ERROR_INVALID_VALUE;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        ivm_error("out of memory for the limits");
        return IVM_ERROR_NO_MEMORY;
    }
    d->limits    = l;
    l->fd_limit  = rl.rlim_cur > (rlim_t)INT32_MAX ? INT32_MAX : (long)rl.rlim_cur;
    l->obj_line  = l->fd_limit - d->cfg.fd_reserve;
    l->conn_line = l->fd_limit - d->cfg.fd_reserve / 2;
    l->timer_fd  = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->timer_fd < 0) {
        ivm_error("timerfd_create: %m");
        return IVM_ERROR_INTERNAL;
    }
    l->timer_h = (ivmd_handler_t){.fd = l->timer_fd, .cb = ivmd_limits_resume};
    ivm_info("open-file limit %ld: objects below fd %ld, connections below fd %ld",
             l->fd_limit, l->obj_line, l->conn_line);
    return ivmd_loop_add(d, &l->timer_h, EPOLLIN);
}

void ivmd_limits_close(ivmd_t *d)
{
    if (d->limits == NULL) {
        return;
    }
    if (d->limits->timer_fd >= 0) {
        close(d->limits->timer_fd);
    }
    free(d->limits);
    d->limits = NULL;
}

void ivmd_limits_accept_pause(ivmd_t *d, ivmd_handler_t *h, const char *what)
{
    ivmd_limits_t *l = d->limits;
    struct itimerspec once = {.it_value = {.tv_nsec = IVMD_LIMITS_PAUSE_NS}};
    int i;

    for (i = 0; i < l->npaused; ++i) {
        if (l->paused[i] == h) {
            return;
        }
    }
    ivm_warn_limited("cannot accept %s (%m): not accepting for %u ms", what,
                     IVMD_LIMITS_PAUSE_NS / 1000000u);
    ivmd_loop_del(d, h);
    if (l->npaused < IVMD_LIMITS_MAX_PAUSED) {
        l->paused[l->npaused++] = h;
    }
    if (timerfd_settime(l->timer_fd, 0, &once, NULL) != 0) {
        ivm_error("timerfd_settime: %m");
    }
}

int ivmd_limits_conn_fd_ok(ivmd_t *d, int fd)
{
    int probe = fd;

    if (fd < 0) {
        probe = fcntl(d->devnull, F_DUPFD_CLOEXEC, 0);
        if (probe < 0) {
            return 0;
        }
        close(probe);
    }
    return probe < d->limits->conn_line;
}

ivmError_t ivmd_limits_conn_admit(ivmd_t *d, char *detail, size_t detail_len)
{
    if (d->cfg.max_conns > 0 && d->conns.nclients >= (uint32_t)d->cfg.max_conns) {
        snprintf(detail, detail_len, "this daemon has %u connections, the limit "
                 "(--max-conns)", (unsigned)d->conns.nclients);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_limits_pes_admit(ivmd_t *d, const ivmd_job_t *job, int n, char *detail,
                                 size_t detail_len)
{
    const ivmd_job_t *j;
    long alive = 0;

    if (d->cfg.max_pes_per_job > 0 && (long)job->alive + n > d->cfg.max_pes_per_job) {
        snprintf(detail, detail_len, "job %u has %d live PEs; %d more would pass the "
                 "limit of %ld (--max-pes-per-job)", job->id, job->alive, n,
                 d->cfg.max_pes_per_job);
        return IVM_ERROR_LIMIT;
    }
    if (d->cfg.max_pes > 0) {
        for (j = d->reg.jobs; j != NULL; j = j->next) {
            alive += j->alive;
        }
        if (alive + n > d->cfg.max_pes) {
            snprintf(detail, detail_len, "this daemon's jobs have %ld live PEs; %d more "
                     "would pass the limit of %ld (--max-pes)", alive, n, d->cfg.max_pes);
            return IVM_ERROR_LIMIT;
        }
    }
    if (!ivmd_limits_conn_fd_ok(d, -1)) {
        snprintf(detail, detail_len, "this daemon's file descriptors are used up to its "
                 "reserve (open-file limit %ld, --fd-reserve %ld)", d->limits->fd_limit,
                 d->cfg.fd_reserve);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

/* Reads "<key> <n> kB" from /proc/meminfo, in bytes; 0 if absent. */
static uint64_t ivmd_limits_meminfo(const char *key)
{
    char line[256];
    size_t klen = strlen(key);
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "re");

    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            sscanf(line + klen + 1, "%llu", &kb);
            break;
        }
    }
    fclose(f);
    return (uint64_t)kb * 1024u;
}

/* One number from a cgroup file; 0 if absent or "max". */
static uint64_t ivmd_limits_read_u64(const char *path)
{
    unsigned long long v = 0;
    char buf[64];
    FILE *f = fopen(path, "re");

    if (f == NULL) {
        return 0;
    }
    if (fgets(buf, sizeof(buf), f) == NULL || sscanf(buf, "%llu", &v) != 1) {
        v = 0;
    }
    fclose(f);
    return (uint64_t)v;
}

/* The daemon's cgroup memory limit and usage (v2 memory.max, v1
 * memory.limit_in_bytes); *limit_p 0 when none is set. */
static void ivmd_limits_cgroup_mem(uint64_t *limit_p, uint64_t *usage_p)
{
    char line[512], path[1024];
    FILE *f = fopen("/proc/self/cgroup", "re");

    *limit_p = *usage_p = 0;
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *nl = strchr(line, '\n');
        char *rel;
        uint64_t limit;

        if (nl != NULL) {
            *nl = '\0';
        }
        if (strncmp(line, "0::", 3) == 0) {
            rel = line + 3;
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", rel);
            limit = ivmd_limits_read_u64(path);
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", rel);
        } else if ((rel = strstr(line, ":memory:")) != NULL) {
            rel += strlen(":memory:");
            snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", rel);
            limit = ivmd_limits_read_u64(path);
            snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", rel);
        } else {
            continue;
        }
        /* v1 says "no limit" with a huge number. */
        if (limit > 0 && limit < (UINT64_C(1) << 62) && (*limit_p == 0 || limit < *limit_p)) {
            *limit_p = limit;
            *usage_p = ivmd_limits_read_u64(path);
        }
    }
    fclose(f);
}

/* Bytes an object may still take: the node's available memory, the cgroup's
 * room, --max-bytes. Names the binding one in what. The files are read at
 * most every IVMD_LIMITS_ROOM_NS (a burst of small objects costs no reads);
 * in between, what objects took since is subtracted. */
#define IVMD_LIMITS_ROOM_NS 50000000u
static uint64_t ivmd_limits_mem_room(const ivmd_t *d, const char **what_p)
{
    ivmd_limits_t *l = d->limits;
    uint64_t now = ivmd_now_ns();
    uint64_t room, cg_limit, cg_usage;

    if (l->room_ns != 0 && now - l->room_ns < IVMD_LIMITS_ROOM_NS &&
        d->reg.obj_bytes >= l->room_used) {
        uint64_t took = d->reg.obj_bytes - l->room_used;
        *what_p = l->room_what;
        return l->room > took ? l->room - took : 0;
    }
    room = ivmd_limits_meminfo("MemAvailable");

    *what_p = "available memory of the node (MemAvailable)";
    if (room == 0) {
        room = ivmd_limits_meminfo("MemTotal");
        *what_p = "memory of the node (MemTotal)";
    }
    ivmd_limits_cgroup_mem(&cg_limit, &cg_usage);
    if (cg_limit > 0) {
        uint64_t cg_room = cg_limit > cg_usage ? cg_limit - cg_usage : 0;
        if (cg_room < room) {
            room    = cg_room;
            *what_p = "room under the daemon's cgroup memory limit";
        }
    }
    if (d->cfg.max_bytes > 0) {
        uint64_t cap = (uint64_t)d->cfg.max_bytes;
        uint64_t left = cap > d->reg.obj_bytes ? cap - d->reg.obj_bytes : 0;
        if (left < room) {
            room    = left;
            *what_p = "room under this daemon's limit (--max-bytes)";
        }
    }
    l->room      = room;
    l->room_ns   = now;
    l->room_used = d->reg.obj_bytes;
    l->room_what = *what_p;
    return room;
}

ivmError_t ivmd_limits_obj_mem(ivmd_t *d, const ivmd_job_t *job, const char *name,
                               uint64_t size, int counted, int numa, int *fd_p, char *detail,
                               size_t detail_len)
{
    const ivmd_limits_t *l = d->limits;
    uint64_t job_objs = job->nobjs, node_objs = d->reg.nobjs, job_bytes = job->obj_bytes;
    const char *what;
    uint64_t room;
    int fd, rc;

    if (counted) {
        job_objs  -= job_objs > 0;
        node_objs -= node_objs > 0;
        job_bytes  = job_bytes > size ? job_bytes - size : 0;
    }
    if (d->cfg.max_objects_per_job > 0 && job_objs >= (uint64_t)d->cfg.max_objects_per_job) {
        snprintf(detail, detail_len, "job %u has %llu objects on node %s, the limit "
                 "(--max-objects-per-job)", job->id, (unsigned long long)job_objs,
                 d->cfg.node);
        return IVM_ERROR_LIMIT;
    }
    if (d->cfg.max_objects > 0 && node_objs >= (uint64_t)d->cfg.max_objects) {
        snprintf(detail, detail_len, "node %s holds %llu objects, the limit (--max-objects)",
                 d->cfg.node, (unsigned long long)node_objs);
        return IVM_ERROR_LIMIT;
    }
    if (d->cfg.max_bytes_per_job > 0 &&
        (job_bytes > (uint64_t)d->cfg.max_bytes_per_job ||
         size > (uint64_t)d->cfg.max_bytes_per_job - job_bytes)) {
        snprintf(detail, detail_len, "object '%s' of %llu bytes: job %u holds %llu bytes on "
                 "node %s, the limit is %ld (--max-bytes-per-job)", name,
                 (unsigned long long)size, job->id, (unsigned long long)job_bytes,
                 d->cfg.node, d->cfg.max_bytes_per_job);
        return IVM_ERROR_LIMIT;
    }
    room = ivmd_limits_mem_room(d, &what);
    if (size > room) {
        snprintf(detail, detail_len, "object '%s' of %llu bytes does not fit: %llu bytes "
                 "are left on node %s (%s)", name, (unsigned long long)size,
                 (unsigned long long)room, d->cfg.node, what);
        return IVM_ERROR_NO_MEMORY;
    }
    {
        char memname[64];
        snprintf(memname, sizeof(memname), "ivm-job%u", job->id);
        fd = memfd_create(memname, MFD_CLOEXEC);
    }
    if (fd < 0) {
        rc = errno;
        ivm_warn_limited("memfd_create: %m");
        snprintf(detail, detail_len, "cannot create the memory of object '%s': %s", name,
                 strerror(rc));
        return (rc == EMFILE || rc == ENFILE) ? IVM_ERROR_LIMIT : IVM_ERROR_NO_MEMORY;
    }
    if (fd >= l->obj_line) {
        close(fd);
        snprintf(detail, detail_len, "job %u has %u objects on node %s, the limit of this "
                 "daemon's file descriptors (open-file limit %ld less --fd-reserve %ld)",
                 job->id, (unsigned)job->nobjs, d->cfg.node, l->fd_limit,
                 d->cfg.fd_reserve);
        return IVM_ERROR_LIMIT;
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        rc = errno;
        close(fd);
        snprintf(detail, detail_len, "cannot size object '%s' to %llu bytes: %s", name,
                 (unsigned long long)size, strerror(rc));
        return IVM_ERROR_NO_MEMORY;
    }
    /* Place, then reserve the pages now: a later first touch cannot SIGBUS. */
    ivmd_numa_place(fd, size, numa);
    rc = d->cfg.reserve_memory ? posix_fallocate(fd, 0, (off_t)size) : 0;
    if (rc != 0 && rc != EOPNOTSUPP) {
        close(fd);
        snprintf(detail, detail_len, "cannot reserve %llu bytes for object '%s' on node "
                 "%s: %s (%llu bytes were left: %s)", (unsigned long long)size, name,
                 d->cfg.node, strerror(rc), (unsigned long long)room, what);
        return IVM_ERROR_NO_MEMORY;
    }
    *fd_p = fd;
    return IVM_SUCCESS;
}

int ivmd_limits_peer_admit(ivmd_t *d, const void *ss_arg, uint8_t src[16])
{
    const struct sockaddr_storage *ss = ss_arg;
    ivmd_limits_t *l = d->limits;
    ivmd_limits_src_t *s = NULL, *oldest = &l->src[0];
    double burst = 4.0 * (double)d->cfg.preauth_rate;
    uint64_t now = ivmd_now_ns();
    const ivmd_conn_t *c;
    long unauth = 0;
    int i;

    memset(src, 0, 16);
    if (ss->ss_family == AF_INET) {
        src[10] = src[11] = 0xff;
        memcpy(src + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        memcpy(src, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
    if (d->cfg.preauth_per_source > 0) {
        for (c = d->conns.head; c != NULL; c = c->next) {
            if (c->kind == IVMD_CONN_PEER && !c->closed && c->pstate != IVMD_PEER_UP &&
                c->pstate != IVMD_PEER_CONNECTING && c->pstate != IVMD_PEER_HELLO_SENT &&
                memcmp(c->src, src, 16) == 0) {
                ++unauth;
            }
        }
        if (unauth >= d->cfg.preauth_per_source) {
            ++l->refused_sources;
            return 0;
        }
    }
    if (d->cfg.preauth_rate <= 0) {
        return 1;
    }
    for (i = 0; i < IVMD_LIMITS_NSRC; ++i) {
        if (l->src[i].last_ns != 0 && memcmp(l->src[i].addr, src, 16) == 0) {
            s = &l->src[i];
            break;
        }
        if (l->src[i].last_ns < oldest->last_ns) {
            oldest = &l->src[i];
        }
    }
    if (s == NULL) {
        s = oldest;
        memcpy(s->addr, src, 16);
        s->tokens  = burst;
        s->last_ns = now;
    }
    s->tokens += (double)(now - s->last_ns) * 1e-9 * (double)d->cfg.preauth_rate;
    if (s->tokens > burst) {
        s->tokens = burst;
    }
    s->last_ns = now;
    if (s->tokens < 1.0) {
        ++l->refused_sources;
        return 0;
    }
    s->tokens -= 1.0;
    return 1;
}
