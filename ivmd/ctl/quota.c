/* Quotas: objects, bytes, PEs and connections, and objects' memory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctl/quota.h"
#include "log.h"

void ivmd_quota_init(ivmd_quota_t *q, const ivmd_quota_cfg_t *cfg, const ivmd_registry_t *reg,
                     const ivmd_conn_table_t *conns, const ivmd_netlimits_t *net,
                     const ivmd_quota_mem_ops_t *mem)
{
    *q = (ivmd_quota_t){.cfg = *cfg, .reg = reg, .conns = conns, .net = net, .mem = *mem};
}

ivmError_t ivmd_quota_conn_admit(const ivmd_quota_t *q, char *detail, size_t detail_len)
{
    if (q->cfg.max_conns > 0 && q->conns->nclients >= (uint32_t)q->cfg.max_conns) {
        snprintf(detail, detail_len, "this daemon has %u connections, the limit "
                 "(--max-conns)", (unsigned)q->conns->nclients);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_quota_pes_admit(const ivmd_quota_t *q, const ivmd_job_t *job, int n,
                                char *detail, size_t detail_len)
{
    const ivmd_job_t *j;
    long alive = 0;

    if (q->cfg.max_pes_per_job > 0 && (long)job->alive + n > q->cfg.max_pes_per_job) {
        snprintf(detail, detail_len, "job %u has %d live PEs; %d more would pass the "
                 "limit of %ld (--max-pes-per-job)", job->id, job->alive, n,
                 q->cfg.max_pes_per_job);
        return IVM_ERROR_LIMIT;
    }
    if (q->cfg.max_pes > 0) {
        for (j = q->reg->jobs; j != NULL; j = j->next) {
            alive += j->alive;
        }
        if (alive + n > q->cfg.max_pes) {
            snprintf(detail, detail_len, "this daemon's jobs have %ld live PEs; %d more "
                     "would pass the limit of %ld (--max-pes)", alive, n, q->cfg.max_pes);
            return IVM_ERROR_LIMIT;
        }
    }
    if (!ivmd_netlimits_fd_ok(q->net, -1)) {
        snprintf(detail, detail_len, "this daemon's file descriptors are used up to its "
                 "reserve (open-file limit %ld, --fd-reserve %ld)", q->net->fd_limit,
                 q->net->cfg.fd_reserve);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

/* Reads "<key> <n> kB" from /proc/meminfo, in bytes; 0 if absent. */
static uint64_t ivmd_quota_meminfo(const char *key)
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
static uint64_t ivmd_quota_read_u64(const char *path)
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
static void ivmd_quota_cgroup_mem(uint64_t *limit_p, uint64_t *usage_p)
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
            limit = ivmd_quota_read_u64(path);
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", rel);
        } else if ((rel = strstr(line, ":memory:")) != NULL) {
            rel += strlen(":memory:");
            snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", rel);
            limit = ivmd_quota_read_u64(path);
            snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", rel);
        } else {
            continue;
        }
        /* v1 says "no limit" with a huge number. */
        if (limit > 0 && limit < (UINT64_C(1) << 62) && (*limit_p == 0 || limit < *limit_p)) {
            *limit_p = limit;
            *usage_p = ivmd_quota_read_u64(path);
        }
    }
    fclose(f);
}

/* Bytes an object may still take: the node's available memory, the cgroup's
 * room, --max-bytes. Names the binding one in what. The files are read at
 * most every IVMD_QUOTA_ROOM_NS (a burst of small objects costs no reads);
 * in between, what objects took since is subtracted. */
#define IVMD_QUOTA_ROOM_NS 50000000u
static uint64_t ivmd_quota_mem_room(ivmd_quota_t *q, const char **what_p)
{
    uint64_t now = ivmd_now_ns();
    uint64_t room, cg_limit, cg_usage;

    if (q->room_ns != 0 && now - q->room_ns < IVMD_QUOTA_ROOM_NS &&
        q->reg->obj_bytes >= q->room_used) {
        uint64_t took = q->reg->obj_bytes - q->room_used;
        *what_p = q->room_what;
        return q->room > took ? q->room - took : 0;
    }
    room = ivmd_quota_meminfo("MemAvailable");

    *what_p = "available memory of the node (MemAvailable)";
    if (room == 0) {
        room = ivmd_quota_meminfo("MemTotal");
        *what_p = "memory of the node (MemTotal)";
    }
    ivmd_quota_cgroup_mem(&cg_limit, &cg_usage);
    if (cg_limit > 0) {
        uint64_t cg_room = cg_limit > cg_usage ? cg_limit - cg_usage : 0;
        if (cg_room < room) {
            room    = cg_room;
            *what_p = "room under the daemon's cgroup memory limit";
        }
    }
    if (q->cfg.max_bytes > 0) {
        uint64_t cap = (uint64_t)q->cfg.max_bytes;
        uint64_t left = cap > q->reg->obj_bytes ? cap - q->reg->obj_bytes : 0;
        if (left < room) {
            room    = left;
            *what_p = "room under this daemon's limit (--max-bytes)";
        }
    }
    q->room      = room;
    q->room_ns   = now;
    q->room_used = q->reg->obj_bytes;
    q->room_what = *what_p;
    return room;
}

/* The limits on objects and bytes for one more object of size bytes. */
static ivmError_t ivmd_quota_obj_check(const ivmd_quota_t *q, const ivmd_job_t *job,
                                       const char *name, uint64_t size, int counted,
                                       char *detail, size_t detail_len)
{
    uint64_t job_objs = job->nobjs, node_objs = q->reg->nobjs, job_bytes = job->obj_bytes;

    if (counted) {
        job_objs  -= job_objs > 0;
        node_objs -= node_objs > 0;
        job_bytes  = job_bytes > size ? job_bytes - size : 0;
    }
    if (q->cfg.max_objects_per_job > 0 && job_objs >= (uint64_t)q->cfg.max_objects_per_job) {
        snprintf(detail, detail_len, "job %u has %llu objects on node %s, the limit "
                 "(--max-objects-per-job)", job->id, (unsigned long long)job_objs,
                 q->cfg.node);
        return IVM_ERROR_LIMIT;
    }
    if (q->cfg.max_objects > 0 && node_objs >= (uint64_t)q->cfg.max_objects) {
        snprintf(detail, detail_len, "node %s holds %llu objects, the limit (--max-objects)",
                 q->cfg.node, (unsigned long long)node_objs);
        return IVM_ERROR_LIMIT;
    }
    if (q->cfg.max_bytes_per_job > 0 &&
        (job_bytes > (uint64_t)q->cfg.max_bytes_per_job ||
         size > (uint64_t)q->cfg.max_bytes_per_job - job_bytes)) {
        snprintf(detail, detail_len, "object '%s' of %llu bytes: job %u holds %llu bytes on "
                 "node %s, the limit is %ld (--max-bytes-per-job)", name,
                 (unsigned long long)size, job->id, (unsigned long long)job_bytes,
                 q->cfg.node, q->cfg.max_bytes_per_job);
        return IVM_ERROR_LIMIT;
    }
    return IVM_SUCCESS;
}

ivmError_t ivmd_quota_obj_mem(ivmd_quota_t *q, const ivmd_job_t *job, const char *name,
                              uint64_t size, int counted, int numa, int *fd_p, char *detail,
                              size_t detail_len)
{
    const ivmd_netlimits_t *l = q->net;
    ivmError_t status;
    const char *what;
    uint64_t room;
    int fd, rc;

    status = ivmd_quota_obj_check(q, job, name, size, counted, detail, detail_len);
    if (status != IVM_SUCCESS) {
        return status;
    }
    room = ivmd_quota_mem_room(q, &what);
    if (size > room) {
        snprintf(detail, detail_len, "object '%s' of %llu bytes does not fit: %llu bytes "
                 "are left on node %s (%s)", name, (unsigned long long)size,
                 (unsigned long long)room, q->cfg.node, what);
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
                 job->id, (unsigned)job->nobjs, q->cfg.node, l->fd_limit,
                 l->cfg.fd_reserve);
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
    if (q->mem.place != NULL) {
        q->mem.place(fd, size, numa);
    }
    rc = !q->cfg.reserve_memory ? 0
         : q->mem.reserve != NULL ? q->mem.reserve(q->mem.arg, fd, size)
                                  : posix_fallocate(fd, 0, (off_t)size);
    if (rc != 0 && rc != EOPNOTSUPP) {
        close(fd);
        snprintf(detail, detail_len, "cannot reserve %llu bytes for object '%s' on node "
                 "%s: %s (%llu bytes were left: %s)", (unsigned long long)size, name,
                 q->cfg.node, strerror(rc), (unsigned long long)room, what);
        return IVM_ERROR_NO_MEMORY;
    }
    *fd_p = fd;
    return IVM_SUCCESS;
}
