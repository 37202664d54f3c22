/*
 * ivm-info: what IVM is and what its daemons hold, as ompi_info and ucx_info
 * tell of theirs.
 *   - The build (--config, and whenever no daemon runs): version, revision,
 *     features, paths, and every setting of ivmrun, ivmd and ivm-gpud with its
 *     environment variable, default and current value.
 *   - A node (its daemon found by itself: the socket given, IVM_SOCKET, the
 *     per-user socket, else the only daemon in the socket directory and its
 *     run directories; --job N picks the daemon where job N's root runs):
 *     INFO, its CPU devices, GPUs, jobs with their PEs and objects, peers.
 *   - --cluster: the same for every node of the daemon's cluster whose socket
 *     this host can reach (the nodes of ivmrun --nodes).
 *   - --list: the daemons found; --object JOB NAME, --gpu K: one object, one GPU.
 * Every view prints key=value lines, or with --json one JSON object (schema
 * in docs/CONTRACTS.md).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpud.h"
#include "ivmd.h"
#include "ivmrun.h"
#include "client.h"
#include "log.h"
#include "sock.h"
#include "status.h"
#include "version.h"

#define INFO_TIMEOUT_MS 2000
#define INFO_MAX_DAEMONS 128
#define INFO_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

/* ------------------------------------------------------------ output */

/* Writes key=value lines or JSON from the same calls. A record is one text
 * line "label=k=v k=v ..." or one JSON object; arrays exist in JSON only. */
typedef struct info_out {
    int  json;
    int  depth;
    int  first[16];  /* JSON: nothing written yet at this depth */
    int  line_open;  /* text: a record's line is being written */
    int  line_fields;
} info_out_t;

static void info_json_str(const char *s)
{
    putchar('"');
    for (; *s != '\0'; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static void info_json_key(info_out_t *o, const char *key)
{
    if (!o->first[o->depth]) {
        putchar(',');
    }
    o->first[o->depth] = 0;
    if (key != NULL) {
        info_json_str(key);
        putchar(':');
    }
}

static void info_open(info_out_t *o, const char *key, char bracket)
{
    info_json_key(o, key);
    putchar(bracket);
    o->first[++o->depth] = 1;
}

static void info_close(info_out_t *o, char bracket)
{
    putchar(bracket);
    --o->depth;
}

static void info_text_end_line(info_out_t *o)
{
    if (o->line_open) {
        putchar('\n');
        o->line_open = 0;
    }
}

static void info_begin(info_out_t *o)
{
    if (o->json) {
        o->first[0] = 1;
        info_open(o, NULL, '{');
        o->first[0] = 1;
    }
}

static void info_end(info_out_t *o)
{
    if (o->json) {
        info_close(o, '}');
        putchar('\n');
    } else {
        info_text_end_line(o);
    }
}

/* One record: JSON object (named key, or an array element when key is
 * NULL); text line starting "label=". */
static void info_rec_open(info_out_t *o, const char *key, const char *label)
{
    if (o->json) {
        info_open(o, key, '{');
        return;
    }
    info_text_end_line(o);
    printf("%s=", label);
    o->line_open   = 1;
    o->line_fields = 0;
}

static void info_rec_close(info_out_t *o)
{
    if (o->json) {
        info_close(o, '}');
    } else {
        info_text_end_line(o);
    }
}

static void info_arr_open(info_out_t *o, const char *key)
{
    if (o->json) {
        info_open(o, key, '[');
    } else {
        info_text_end_line(o);
    }
}

static void info_arr_close(info_out_t *o)
{
    if (o->json) {
        info_close(o, ']');
    }
}

/* A field: inside a record, or at the top (text: its own line). */
static void info_text_key(info_out_t *o, const char *key)
{
    if (o->line_open) {
        printf("%s%s=", o->line_fields++ > 0 ? " " : "", key);
    } else {
        printf("%s=", key);
    }
}

static void info_str(info_out_t *o, const char *key, const char *value)
{
    if (o->json) {
        info_json_key(o, key);
        info_json_str(value);
        return;
    }
    info_text_key(o, key);
    fputs(value, stdout);
    if (!o->line_open) {
        putchar('\n');
    }
}

static void info_u64(info_out_t *o, const char *key, uint64_t value)
{
    char buf[24];

    if (o->json) {
        info_json_key(o, key);
        printf("%" PRIu64, value);
        return;
    }
    snprintf(buf, sizeof(buf), "%" PRIu64, value);
    info_str(o, key, buf);
}

static void info_i64(info_out_t *o, const char *key, int64_t value)
{
    char buf[24];

    if (o->json) {
        info_json_key(o, key);
        printf("%" PRId64, value);
        return;
    }
    snprintf(buf, sizeof(buf), "%" PRId64, value);
    info_str(o, key, buf);
}

static void info_bool(info_out_t *o, const char *key, int value)
{
    if (o->json) {
        info_json_key(o, key);
        fputs(value ? "true" : "false", stdout);
        return;
    }
    info_str(o, key, value ? "1" : "0");
}

/* ------------------------------------------------------------ the build */

#define INFO_IVMD_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmd_config, __VA_ARGS__)
static const ivm_config_field_t info_ivmd_fields[] = {IVMD_CONFIG_TABLE(INFO_IVMD_FIELD){0}};
#define INFO_IVMRUN_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmrun_config, __VA_ARGS__)
static const ivm_config_field_t info_ivmrun_fields[] = {
    IVMRUN_CONFIG_TABLE(INFO_IVMRUN_FIELD){0}};
#define INFO_GPUD_FIELD(...) IVM_CONFIG_FIELD_ENTRY(gpud_config, __VA_ARGS__)
static const ivm_config_field_t info_gpud_fields[] = {GPUD_CONFIG_TABLE(INFO_GPUD_FIELD){0}};

static void info_settings(info_out_t *o, const char *prog, const ivm_config_field_t *f)
{
    char env[96], label[160];
    const char *value;
    size_t i;

    for (; f->name != NULL; ++f) {
        snprintf(env, sizeof(env), "IVM_%s", f->name);
        for (i = 4; env[i] != '\0'; ++i) {
            env[i] = env[i] == '-' ? '_' : (char)(env[i] >= 'a' && env[i] <= 'z'
                                                      ? env[i] - 'a' + 'A' : env[i]);
        }
        value = getenv(env);
        snprintf(label, sizeof(label), "setting.%s.%s", prog, f->name);
        info_rec_open(o, NULL, label);
        info_str(o, "program", prog);
        info_str(o, "name", f->name);
        info_str(o, "env", env);
        info_str(o, "default", f->defval);
        info_str(o, "current", value != NULL ? value : f->defval);
        info_str(o, "source", value != NULL ? "environment" : "default");
        if (o->json) {
            info_str(o, "help", f->help);
        }
        info_rec_close(o);
    }
}

static void info_config(info_out_t *o)
{
    char exe[512], dir[512], sockdir[INFO_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    exe[n > 0 ? n : 0] = '\0';
    snprintf(dir, sizeof(dir), "%s", exe);
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    info_str(o, "version", ivm_version_string());
    info_str(o, "revision", ivm_version_revision());
    info_str(o, "features", ivm_version_features());
    info_str(o, "features_off", ivm_version_features_off());
    info_str(o, "bindir", dir);
    if (ivm_sock_dir(sockdir, sizeof(sockdir)) == IVM_SUCCESS) {
        info_str(o, "socket_dir", sockdir);
    }
    info_arr_open(o, "settings");
    info_settings(o, "ivmrun", info_ivmrun_fields);
    info_settings(o, "ivmd", info_ivmd_fields);
    info_settings(o, "ivm-gpud", info_gpud_fields);
    info_arr_close(o);
}

/* ------------------------------------------------------------ finding daemons */

typedef struct info_daemon {
    char path[INFO_PATH_MAX];
    char node[IVM_HOST_MAX + 1];
    uint32_t jobs;
} info_daemon_t;

/* Add path if a daemon answers INFO there and it is not listed yet. */
static void info_probe(const char *path, info_daemon_t *found, int *n)
{
    ivm_msg_info_rep_t info;
    int i;

    for (i = 0; i < *n; ++i) {
        if (strcmp(found[i].path, path) == 0) {
            return;
        }
    }
    if (*n >= INFO_MAX_DAEMONS || ivm_client_info(path, INFO_TIMEOUT_MS, &info, NULL) != IVM_SUCCESS) {
        return;
    }
    snprintf(found[*n].path, sizeof(found[*n].path), "%s", path);
    info.node[sizeof(info.node) - 1] = '\0';
    snprintf(found[*n].node, sizeof(found[*n].node), "%s", info.node);
    found[*n].jobs = info.jobs;
    ++*n;
}

/* Daemons with a socket in dir, and one directory level below (the run
 * directories of ivmrun --nodes and of the boot helpers). */
static void info_scan(const char *dir, int depth, info_daemon_t *found, int *n)
{
    char path[1024];
    struct dirent *e;
    struct stat st;
    DIR *d = opendir(dir);
    size_t len;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= INFO_PATH_MAX ||
            lstat(path, &st) != 0) {
            continue;
        }
        len = strlen(e->d_name);
        if (S_ISSOCK(st.st_mode) && len > 5 && strcmp(e->d_name + len - 5, ".sock") == 0) {
            info_probe(path, found, n);
        } else if (S_ISDIR(st.st_mode) && depth == 0) {
            info_scan(path, 1, found, n);
        }
    }
    closedir(d);
}

/* The daemon to show: $IVM_SOCKET's, else the per-user one, else those of
 * the socket directory; with all, every one of them. */
static int info_find(info_daemon_t *found, int all)
{
    char path[INFO_PATH_MAX], dir[INFO_PATH_MAX];
    const char *env = getenv("IVM_SOCKET");
    int n = 0;

    if (env != NULL && *env != '\0') {
        info_probe(env, found, &n);
        if (n > 0 && !all) {
            return n;
        }
    }
    if (ivm_sock_path(path, sizeof(path)) == IVM_SUCCESS) {
        info_probe(path, found, &n);
        if (n > 0 && !all) {
            return n;
        }
    }
    if (ivm_sock_dir(dir, sizeof(dir)) == IVM_SUCCESS) {
        info_scan(dir, 0, found, &n);
    }
    return n;
}

static ivmError_t info_list(const char *path, uint32_t kind, uint32_t job, uint32_t index,
                            ivm_msg_list_rep_t *rep)
{
    ivm_msg_list_req_t req = {.kind = kind, .job = job, .index = index};

    memset(rep, 0, sizeof(*rep));
    return ivm_client_request(path, INFO_TIMEOUT_MS, IVM_MSG_LIST, &req, sizeof(req), rep,
                            sizeof(*rep), NULL);
}

/* The daemon among found where job `job` has its root PE; -1 if none. */
static int info_find_job(const info_daemon_t *found, int n, uint32_t job)
{
    ivm_msg_list_rep_t rep;
    uint32_t k;
    int i;

    for (i = 0; i < n; ++i) {
        for (k = 0; info_list(found[i].path, IVM_LIST_JOBS, 0, k, &rep) == IVM_SUCCESS; ++k) {
            if (rep.id == job && rep.state != 0) {
                return i;
            }
        }
    }
    return -1;
}

/* ------------------------------------------------------------ a node */

static const char *const info_pe_states[] = {"started", "running", "exited", "failed"};

static void info_devtype(char *buf, size_t len, int devtype)
{
    snprintf(buf, len, IVM_DEV_IS_GPU(devtype) ? "gpu%d" : "cpu%d", IVM_DEV_INDEX(devtype));
}

static void info_cpu_devices(info_out_t *o, const char *path)
{
    ivm_msg_cpu_info_req_t req = {.dev = 0};
    ivm_msg_cpu_info_rep_t rep;
    char label[32];
    uint32_t k, n = 1;

    for (k = 0; k < n; ++k) {
        req.dev = k;
        if (ivm_client_request(path, INFO_TIMEOUT_MS, IVM_MSG_CPU_INFO, &req, sizeof(req), &rep,
                             sizeof(rep), NULL) != IVM_SUCCESS) {
            return;
        }
        rep.cores[sizeof(rep.cores) - 1] = '\0';
        if (k == 0) {
            n = rep.ndevs;
            info_u64(o, "cpu_devices", n);
            info_u64(o, "numa_nodes", rep.numa_nodes);
            info_arr_open(o, "cpu_device");
        }
        snprintf(label, sizeof(label), "cpu_device.%u", k);
        info_rec_open(o, NULL, label);
        info_str(o, "cores", rep.cores);
        info_u64(o, "ncores", rep.ncores);
        info_u64(o, "share", rep.share);
        info_u64(o, "pes", rep.pes);
        info_u64(o, "groups", rep.groups);
        info_u64(o, "quota_us", rep.quota_us);
        info_u64(o, "period_us", rep.period_us);
        info_i64(o, "numa", rep.numa);
        info_rec_close(o);
    }
    info_arr_close(o);
}

static void info_gpus(info_out_t *o, const char *path)
{
    ivm_msg_gpu_info_req_t req;
    ivm_msg_gpu_info_rep_t rep;

    memset(&req, 0, sizeof(req));
    if (ivm_client_request(path, INFO_TIMEOUT_MS, IVM_MSG_GPU_INFO, &req, sizeof(req), &rep,
                         sizeof(rep), NULL) != IVM_SUCCESS) {
        info_u64(o, "gpus", 0);
        return;
    }
    rep.backend[sizeof(rep.backend) - 1] = '\0';
    info_u64(o, "gpus", rep.ngpus);
    info_str(o, "gpu_backend", rep.backend);
    info_bool(o, "gpud_alive", (rep.flags & IVM_GPU_INFO_ALIVE) != 0);
}

static void info_job(info_out_t *o, const char *path, const ivm_msg_list_rep_t *job)
{
    ivm_msg_list_rep_t rep;
    char label[96], dev[16];
    uint32_t k;

    snprintf(label, sizeof(label), "job.%" PRIu64, job->id);
    info_rec_open(o, NULL, label);
    info_u64(o, "id", job->id);
    info_str(o, "program", job->name);
    info_str(o, "root_node", job->node);
    info_bool(o, "root_here", job->state != 0);
    info_i64(o, "root_pid", job->pid);
    info_u64(o, "pes_alive", job->count);
    info_u64(o, "objects", job->count2);
    info_u64(o, "object_bytes", job->size);
    info_arr_open(o, "pes");
    for (k = 0; info_list(path, IVM_LIST_PES, (uint32_t)job->id, k, &rep) == IVM_SUCCESS; ++k) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        snprintf(label, sizeof(label), "job.%" PRIu64 ".pe.%" PRIu64, job->id, rep.id);
        info_devtype(dev, sizeof(dev), rep.devtype);
        info_rec_open(o, NULL, label);
        info_u64(o, "id", rep.id);
        info_str(o, "state", rep.state < 4 ? info_pe_states[rep.state] : "unknown");
        info_str(o, "device", dev);
        info_str(o, "node", rep.node);
        info_i64(o, "pid", rep.pid);
        info_u64(o, "maps", rep.count);
        info_rec_close(o);
    }
    info_arr_close(o);
    info_arr_open(o, "objects");
    for (k = 0; info_list(path, IVM_LIST_OBJECTS, (uint32_t)job->id, k, &rep) == IVM_SUCCESS;
         ++k) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        rep.name[sizeof(rep.name) - 1] = '\0';
        snprintf(label, sizeof(label), "job.%" PRIu64 ".object.%" PRIu64, job->id, rep.id);
        info_rec_open(o, NULL, label);
        info_str(o, "name", rep.name);
        info_u64(o, "size", rep.size);
        info_str(o, "copy", rep.state ? "master" : "mirror");
        info_str(o, "master_node", rep.node);
        info_u64(o, "mappings", rep.count);
        info_u64(o, rep.state ? "mirrors" : "regions", rep.count2);
        info_u64(o, "sent_bytes", rep.tx_bytes);
        info_u64(o, "received_bytes", rep.rx_bytes);
        info_rec_close(o);
    }
    info_arr_close(o);
    info_rec_close(o);
}

/* In a cluster: this node's slots and max_slots (its own peer entry). */
static void info_slots(info_out_t *o, const char *path)
{
    ivm_msg_list_rep_t rep;
    uint32_t k;

    for (k = 0; info_list(path, IVM_LIST_PEERS, 0, k, &rep) == IVM_SUCCESS; ++k) {
        if (rep.count != 0) {
            info_u64(o, "slots", rep.count2);
            info_u64(o, "max_slots", rep.size);
            return;
        }
    }
}

static int info_node(info_out_t *o, const char *path)
{
    ivm_msg_info_rep_t info;
    ivm_msg_list_rep_t rep;
    ivmError_t status;
    char label[32];
    uint32_t k;

    status = ivm_client_info(path, INFO_TIMEOUT_MS, &info, NULL);
    if (status != IVM_SUCCESS) {
        ivm_error("%s: %s", path, ivm_status_string(status));
        return 1;
    }
    info.node[sizeof(info.node) - 1] = '\0';
    info_str(o, "node", info.node);
    info_str(o, "socket", path);
    info_u64(o, "pid", info.pid);
    info_u64(o, "jobs", info.jobs);
    info_u64(o, "pes", info.pes);
    info_u64(o, "objects", info.objects);
    info_u64(o, "connections", info.conns);
    info_u64(o, "object_bytes", info.shm_bytes);
    info_u64(o, "peers", info.peers);
    info_u64(o, "peers_up", info.peers_up);
    info_slots(o, path);
    info_u64(o, "sent_bytes", info.tx_bytes);
    info_u64(o, "received_bytes", info.rx_bytes);
    info_u64(o, "parked", info.parked);
    info_u64(o, "pooled", info.pooled);
    info_u64(o, "poll_us", info.poll_us);
    info_u64(o, "polled", info.polled);
    info_u64(o, "psync_relayed", info.psync_relayed);
    info_u64(o, "places_told", info.places_told);
    info_u64(o, "signals_carried", info.signals_carried);
    info.transport[sizeof(info.transport) - 1] = '\0';
    info.ucx_tls[sizeof(info.ucx_tls) - 1]     = '\0';
    info_str(o, "transport", info.transport);
    if (info.ucx_tls[0] != '\0') {
        info_str(o, "ucx_transports", info.ucx_tls);
    }
    info_u64(o, "buffered_bytes", info.buf_bytes);
    info_u64(o, "one_sided_bytes", info.rdma_bytes);
    info_u64(o, "endpoint_puts", info.ep_puts);
    info_u64(o, "endpoint_gets", info.ep_gets);
    /* The daemon's start-up probe of a mapped page's first touch. */
    info_u64(o, "touch_read_ns", info.touch_ns[0]);
    info_u64(o, "touch_read_ro_first_ns", info.touch_ns[1]);
    info_u64(o, "touch_write_ns", info.touch_ns[2]);
    info_u64(o, "touch_write_ro_first_ns", info.touch_ns[3]);
    info_str(o, "map_populate", (info.map_flags & IVM_MAP_READ_FIRST) ? "read-only first"
                                                                       : "writable");
    info_str(o, "huge_pages", info.huge_pages ? "2 MiB" : "off");
    info_u64(o, "huge_page_bytes", info.huge_bytes);
    info_u64(o, "huge_page_failures", info.huge_failed);
    info_cpu_devices(o, path);
    info_gpus(o, path);
    info_arr_open(o, "job");
    for (k = 0; info_list(path, IVM_LIST_JOBS, 0, k, &rep) == IVM_SUCCESS; ++k) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        rep.name[sizeof(rep.name) - 1] = '\0';
        info_job(o, path, &rep);
    }
    info_arr_close(o);
    info_arr_open(o, "peer");
    for (k = 0; info_list(path, IVM_LIST_PEERS, 0, k, &rep) == IVM_SUCCESS; ++k) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        rep.name[sizeof(rep.name) - 1] = '\0';
        snprintf(label, sizeof(label), "peer.%" PRIu64, rep.id);
        info_rec_open(o, NULL, label);
        info_str(o, "node", rep.node);
        info_str(o, "address", rep.name);
        info_bool(o, "up", rep.state != 0);
        info_bool(o, "self", rep.count != 0);
        info_u64(o, "slots", rep.count2);
        info_u64(o, "max_slots", rep.size);
        info_rec_close(o);
    }
    info_arr_close(o);
    return 0;
}

/* Every node of path's cluster whose daemon has a socket beside path's. */
static int info_cluster(info_out_t *o, const char *path)
{
    char dir[INFO_PATH_MAX], peer[INFO_PATH_MAX + 80], label[96];
    ivm_msg_list_rep_t rep;
    int ret = 0, n = 0;
    uint32_t k;
    char *slash;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    } else {
        strcpy(dir, ".");
    }
    info_arr_open(o, "nodes");
    for (k = 0; info_list(path, IVM_LIST_PEERS, 0, k, &rep) == IVM_SUCCESS; ++k) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        snprintf(peer, sizeof(peer), "%s/%s.sock", dir, rep.node);
        snprintf(label, sizeof(label), "cluster.%s", rep.node);
        if (o->json) {
            info_rec_open(o, NULL, label);
        } else {
            printf("\n# %s\n", rep.node);
        }
        if (access(peer, F_OK) != 0 || info_node(o, peer) != 0) {
            info_str(o, "node", rep.node);
            info_str(o, "unreachable", "no socket of its daemon on this host");
            ret = 1;
        }
        if (o->json) {
            info_rec_close(o);
        }
        ++n;
    }
    info_arr_close(o);
    if (n == 0) {
        ivm_error("%s is not part of a cluster", path);
        return 1;
    }
    return ret;
}

/* ------------------------------------------------------------ one object, one GPU */

static int info_object(info_out_t *o, const char *path, const char *job, const char *name)
{
    ivm_msg_obj_info_req_t req;
    ivm_msg_obj_info_rep_t rep;
    ivmError_t status;
    char *end;

    memset(&req, 0, sizeof(req));
    req.job = (uint32_t)strtoul(job, &end, 0);
    if (*job == '\0' || *end != '\0') {
        ivm_error("--object '%s': not a job id", job);
        return 2;
    }
    if (ivm_proto_strset(req.name, sizeof(req.name), name) != 0) {
        ivm_error("object name too long");
        return 2;
    }
    status = ivm_client_request(path, INFO_TIMEOUT_MS, IVM_MSG_OBJ_INFO, &req, sizeof(req), &rep,
                              sizeof(rep), NULL);
    if (status != IVM_SUCCESS) {
        ivm_error("%s: object '%s' of job %s: %s", path, name, job,
                ivm_status_string(status));
        return 1;
    }
    info_str(o, "copy", (rep.flags & IVM_OBJ_INFO_MASTER) ? "master" : "mirror");
    info_u64(o, "size", rep.size);
    info_u64(o, "held_bytes", rep.held);
    info_u64(o, "sent_bytes", rep.tx_bytes);
    info_u64(o, "received_bytes", rep.rx_bytes);
    info_u64(o, "mirror_regions", rep.mirrors);
    return 0;
}

static int info_gpu(info_out_t *o, const char *path, const char *gpu)
{
    ivm_msg_gpu_info_req_t req;
    ivm_msg_gpu_info_rep_t rep;
    ivmError_t status;
    char *end;
    unsigned long k = strtoul(gpu, &end, 10);

    if (*gpu == '\0' || *end != '\0' || k > 255) {
        ivm_error("--gpu '%s' is not a GPU index", gpu);
        return 2;
    }
    memset(&req, 0, sizeof(req));
    req.gpu = (uint32_t)k;
    status = ivm_client_request(path, INFO_TIMEOUT_MS, IVM_MSG_GPU_INFO, &req, sizeof(req), &rep,
                              sizeof(rep), NULL);
    if (status != IVM_SUCCESS) {
        ivm_error("%s: GPU %lu: %s", path, k, ivm_status_string(status));
        return 1;
    }
    rep.name[sizeof(rep.name) - 1]       = '\0';
    rep.backend[sizeof(rep.backend) - 1] = '\0';
    info_u64(o, "gpu", k);
    info_str(o, "name", rep.name);
    info_str(o, "backend", rep.backend);
    info_u64(o, "gpus", rep.ngpus);
    info_u64(o, "gpud_pid", rep.gpud_pid);
    info_bool(o, "gpud_alive", (rep.flags & IVM_GPU_INFO_ALIVE) != 0);
    info_u64(o, "capacity_bytes", rep.capacity);
    info_u64(o, "used_bytes", rep.used);
    info_u64(o, "cached_bytes", rep.cached_bytes);
    info_u64(o, "copies", rep.copies);
    info_u64(o, "mapped_refs", rep.mapped_refs);
    info_u64(o, "allocations", rep.allocations);
    info_u64(o, "evictions", rep.evictions);
    info_u64(o, "waiting", rep.waiting);
    info_u64(o, "wait_timeouts", rep.wait_timeouts);
    info_u64(o, "granularity_bytes", rep.granularity);
    return 0;
}

/* ------------------------------------------------------------ main */

static int info_usage(FILE *out, int rc)
{
    fprintf(out,
            "usage: ivm-info [--json] [--socket PATH | --job N | SOCKET] [VIEW]\n"
            "Prints what IVM is (the build) and what its daemons hold, as key=value\n"
            "lines or, with --json, one JSON object.\n\n"
            "The daemon: the socket given, else $IVM_SOCKET, else the per-user socket,\n"
            "else the only daemon with a socket in the socket directory or its run\n"
            "directories (ivmrun --nodes); --job N picks the one where job N's root runs.\n\n"
            "Views:\n"
            "  (none)              the node: INFO, CPU devices, GPUs, jobs with their PEs\n"
            "                      and objects, peers; the build when no daemon runs\n"
            "  --config            the build: version, revision, features, paths, and\n"
            "                      every setting of ivmrun, ivmd, ivm-gpud with its\n"
            "                      environment variable, default and current value\n"
            "  --list              the daemons found (socket, node, jobs)\n"
            "  --cluster           every node of the daemon's cluster reachable from here\n"
            "  --object JOB NAME   the node's copy of object NAME of job JOB\n"
            "  --gpu K             the node's GPU K as its ivm-gpud counts it\n"
            "  -V, --version       the version; -h, --help: this help\n\n"
            "Exit status: 0; 1 when a daemon cannot be reached or does not know what was\n"
            "asked; 2 for a bad command line.\n");
    return rc;
}

/* The command line. */
typedef struct info_args {
    const char *sock, *job, *obj_job, *obj_name, *gpu;
    int         config, list, cluster;
} info_args_t;

/* One option at argv[*i] (advanced past its values). 0, or -1 if unknown
 * or incomplete. */
static int info_arg(info_args_t *a, info_out_t *o, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];

    if (!strcmp(arg, "--json")) {
        o->json = 1;
    } else if (!strcmp(arg, "--config")) {
        a->config = 1;
    } else if (!strcmp(arg, "--list")) {
        a->list = 1;
    } else if (!strcmp(arg, "--cluster")) {
        a->cluster = 1;
    } else if (!strcmp(arg, "--socket") && *i + 1 < argc) {
        a->sock = argv[++*i];
    } else if (!strcmp(arg, "--job") && *i + 1 < argc) {
        a->job = argv[++*i];
    } else if (!strcmp(arg, "--gpu") && *i + 1 < argc) {
        a->gpu = argv[++*i];
    } else if (!strcmp(arg, "--object") && *i + 2 < argc) {
        a->obj_job  = argv[++*i];
        a->obj_name = argv[++*i];
    } else if (arg[0] != '-' && a->sock == NULL) {
        a->sock = arg;
    } else {
        return -1;
    }
    return 0;
}

/* Parse the command line. -1 to go on, else the exit status. */
static int info_args(info_args_t *a, info_out_t *o, int argc, char **argv)
{
    char *end;
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return info_usage(stdout, 0);
        }
        if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
            ivm_version_print(stdout, "ivm-info");
            return 0;
        }
        if (info_arg(a, o, argc, argv, &i) != 0) {
            ivm_error("unknown or incomplete option '%s'", argv[i]);
            return info_usage(stderr, 2);
        }
    }
    if (a->config + a->list + a->cluster + (a->gpu != NULL) + (a->obj_name != NULL) > 1) {
        ivm_error("give one view (--config, --list, --cluster, --object, --gpu)");
        return 2;
    }
    if (a->job != NULL && (strtoul(a->job, &end, 10), *a->job == '\0' || *end != '\0')) {
        ivm_error("--job '%s' is not a job id", a->job);
        return 2;
    }
    return -1;
}

/* --list: the daemons found. */
static int info_show_daemons(info_out_t *o, const info_daemon_t *found, int n)
{
    char label[32];
    int i;

    info_arr_open(o, "daemons");
    for (i = 0; i < n; ++i) {
        snprintf(label, sizeof(label), "daemon.%d", i);
        info_rec_open(o, NULL, label);
        info_str(o, "socket", found[i].path);
        info_str(o, "node", found[i].node);
        info_u64(o, "jobs", found[i].jobs);
        info_rec_close(o);
    }
    info_arr_close(o);
    info_end(o);
    return 0;
}

/* Which of the n daemons found to ask: *pick_p. -1 to go on, else the exit
 * status (after the output, or the build's when no daemon runs). */
static int info_pick(info_out_t *o, const info_args_t *a, info_daemon_t *found, int n,
                     int *pick_p)
{
    int i;

    *pick_p = 0;
    if (a->job != NULL) {
        *pick_p = info_find_job(found, n, (uint32_t)strtoul(a->job, NULL, 10));
        if (*pick_p < 0) {
            info_end(o);
            ivm_error("no daemon found runs the root of job %s", a->job);
            return 1;
        }
    } else if (n == 0) {
        /* No daemon: what the build is. */
        info_str(o, "daemon", "none running");
        info_config(o);
        info_end(o);
        return 0;
    } else if (n > 1) {
        info_end(o);
        ivm_error("%d daemons found; choose one with --socket PATH or --job N:", n);
        for (i = 0; i < n; ++i) {
            fprintf(stderr, "  %s (node %s, %u jobs)\n", found[i].path, found[i].node,
                    found[i].jobs);
        }
        return 1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    static info_daemon_t found[INFO_MAX_DAEMONS];
    info_args_t a;
    info_out_t o;
    int n, pick, ret;

    ivm_log_set_prefix("ivm-info");
    memset(&o, 0, sizeof(o));
    memset(&a, 0, sizeof(a));
    ret = info_args(&a, &o, argc, argv);
    if (ret >= 0) {
        return ret;
    }
    info_begin(&o);
    if (a.config) {
        info_config(&o);
        info_end(&o);
        return 0;
    }
    if (a.sock != NULL) {
        snprintf(found[0].path, sizeof(found[0].path), "%s", a.sock);
        n = 1;
    } else {
        n = info_find(found, a.list || a.job != NULL);
    }
    if (a.list) {
        return info_show_daemons(&o, found, n);
    }
    ret = info_pick(&o, &a, found, n, &pick);
    if (ret >= 0) {
        return ret;
    }
    if (a.obj_name != NULL) {
        ret = info_object(&o, found[pick].path, a.obj_job, a.obj_name);
    } else if (a.gpu != NULL) {
        ret = info_gpu(&o, found[pick].path, a.gpu);
    } else if (a.cluster) {
        ret = info_cluster(&o, found[pick].path);
    } else {
        ret = info_node(&o, found[pick].path);
    }
    info_end(&o);
    return ret;
}
