/* The public API (include/ivm.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <unistd.h>

#include "ep.h"
#include "hugemap.h"
#include "libivm.h"
#include "log.h"
#include "sock.h"
#include "status.h"
#include "version.h"

struct ivm_device_s {
    char host[IVM_HOST_MAX + 1];
    int  devtype;
};

ivm_ctx_t ivm_ctx = {
    .lock      = PTHREAD_MUTEX_INITIALIZER,
    .cond      = PTHREAD_COND_INITIALIZER,
    .send_lock = PTHREAD_MUTEX_INITIALIZER,
    .maps_lock = PTHREAD_RWLOCK_INITIALIZER,
    .fd        = -1,
};

/* Serialises ivmEnter/ivmExit against each other. */
static pthread_mutex_t ivm_life_lock = PTHREAD_MUTEX_INITIALIZER;

/* Before ivmEnter or after ivmExit, fail naming the API call `fn`. */
#define IVM_CHECK_ENTERED_AS(fn)                                                \
    do {                                                                        \
        if (__atomic_load_n(&ivm_ctx.state, __ATOMIC_ACQUIRE) != IVM_CTX_ENTERED) { \
            ivm_set_error("%s: %s", (fn),                                       \
                          ivm_ctx.state == IVM_CTX_NEW ? "call ivmEnter first"  \
                                                       : "called after ivmExit"); \
            return IVM_ERROR_NOT_ENTERED;                                       \
        }                                                                       \
    } while (0)
#define IVM_CHECK_ENTERED() IVM_CHECK_ENTERED_AS(__func__)

/* IVM_FAIL's message, then var = status and a jump to label. */
#define IVM_FAIL_AT(label, var, status, ...) \
    do {                                     \
        ivm_set_error(__VA_ARGS__);          \
        ivm_debug(__VA_ARGS__);              \
        (var) = (status);                    \
        goto label;                          \
    } while (0)

IVM_API const char *ivmGetErrorString(ivmError_t err)
{
    return ivm_status_string(err);
}

IVM_API ivmError_t ivmGetVersion(int *major, int *minor, int *patch)
{
    int v[3] = {0, 0, 0};

    ivm_clear_error();
    sscanf(ivm_version_string(), "%d.%d.%d", &v[0], &v[1], &v[2]);
    if (major != NULL) {
        *major = v[0];
    }
    if (minor != NULL) {
        *minor = v[1];
    }
    if (patch != NULL) {
        *patch = v[2];
    }
    return IVM_SUCCESS;
}

IVM_API ivmError_t ivmGetLibraryVersion(char *buf, size_t len)
{
    size_t need;

    ivm_clear_error();
    if (buf == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetLibraryVersion: buf is NULL");
    }
    need = ivm_version_describe(buf, len);
    if (need >= len) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE,
                 "ivmGetLibraryVersion: the text needs %zu bytes, buf has %zu "
                 "(IVM_MAX_LIBRARY_VERSION_STRING suffices)", need + 1, len);
    }
    return IVM_SUCCESS;
}

/* A call's status: transport failure, or the first int32 of its reply. The
 * fds it brought go to *fd_p and *fd2_p (closed where those are NULL). */
static ivmError_t ivm_call_fds(uint16_t type, const void *req, uint32_t req_len, void *rep,
                               size_t rep_len, int *fd_p, int *fd2_p)
{
    ivm_rpc_reply_t reply = {.buf = rep, .len = rep_len, .fd = -1, .fd2 = -1};
    ivmError_t status;

    status = ivm_rpc_call(type, req, req_len, NULL, 0, &reply);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = (ivmError_t)((ivm_msg_status_t *)rep)->status;
    if (fd_p != NULL) {
        *fd_p = reply.fd;
    } else if (reply.fd >= 0) {
        close(reply.fd);
    }
    if (fd2_p != NULL) {
        *fd2_p = reply.fd2;
    } else if (reply.fd2 >= 0) {
        close(reply.fd2);
    }
    return status;
}

ivmError_t ivm_call(uint16_t type, const void *req, uint32_t req_len, void *rep,
                    size_t rep_len, int *fd_p)
{
    return ivm_call_fds(type, req, req_len, rep, rep_len, fd_p, NULL);
}

/* ------------------------------------------------------------ enter/exit */

/* Read a /proc file whole (cmdline, environ). */
static char *ivm_read_proc(const char *path, size_t *len_p)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || buf == NULL) {
        free(buf);
        if (fd >= 0) {
            close(fd);
        }
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            char *more = realloc(buf, cap *= 2);
            if (more == NULL) {
                break;
            }
            buf = more;
        }
        n = read(fd, buf + len, cap - len);
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    *len_p = len;
    return buf;
}

static uint32_t ivm_count_strings(const char *buf, size_t len)
{
    uint32_t n = 0;
    size_t i;

    for (i = 0; i < len; ++i) {
        n += (buf[i] == '\0');
    }
    return n;
}

/* IVM_PE_POOL of a root PE: parked processes per CPU device of its job. */
static ivmError_t ivm_pe_pool_setting(uint32_t *pool_p)
{
    const char *env = getenv("IVM_PE_POOL");
    char *end;
    long n;

    if (env == NULL || *env == '\0') {
        *pool_p = IVM_PE_POOL_DEFAULT;
        return IVM_SUCCESS;
    }
    n = strtol(env, &end, 10);
    if (*end != '\0' || n < 0 || n > IVM_PE_POOL_MAX) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmEnter: IVM_PE_POOL='%s' is not a number "
                 "0..%d", env, IVM_PE_POOL_MAX);
    }
    *pool_p = (uint32_t)n;
    return IVM_SUCCESS;
}

/* IVM_BIND_TO of a root PE: IVM_BIND_DEVICE (the default), _CORE, _NUMA or
 * _NONE. */
static ivmError_t ivm_bind_setting(uint32_t *bind_p)
{
    static const char *const names[] = {"device", "core", "numa", "none"};
    const char *bind = getenv("IVM_BIND_TO");
    uint32_t flag;

    *bind_p = IVM_BIND_DEVICE;
    if (bind == NULL || *bind == '\0') {
        return IVM_SUCCESS;
    }
    for (flag = 0; flag < 4 && strcmp(bind, names[flag]) != 0; ++flag) {
    }
    if (flag == 4) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE,
                 "ivmEnter: IVM_BIND_TO='%s' is not device, core, numa or none", bind);
    }
    *bind_p = flag;
    return IVM_SUCCESS;
}

/* Bytes of the environment's strings, their NULs included. */
static size_t ivm_environ_len(void)
{
    extern char **environ;
    size_t len = 0;
    char **e;

    for (e = environ; e != NULL && *e != NULL; ++e) {
        len += strlen(*e) + 1;
    }
    return len;
}

/* Append a root PE's blob after req's fixed part: exe, cwd, the argument
 * strings (args_len bytes of args) and the environment; sets envc. */
static void ivm_enter_fill_blob(ivm_msg_enter_req_t *req, const char *exe, const char *cwd,
                                const char *args, size_t args_len)
{
    extern char **environ;
    char *at = (char *)(req + 1);
    size_t l;
    char **e;

    l = strlen(exe) + 1;
    memcpy(at, exe, l);
    at += l;
    l = strlen(cwd) + 1;
    memcpy(at, cwd, l);
    at += l;
    memcpy(at, args, args_len);
    at += args_len;
    for (e = environ; e != NULL && *e != NULL; ++e) {
        l = strlen(*e) + 1;
        memcpy(at, *e, l);
        at += l;
        ++req->envc;
    }
}

/* A root PE's ENTER request: the fixed part with pid, argc, envc and
 * blob_len set, and its blob (exe, cwd, argv, environment); malloc'd into
 * *req_p. */
static ivmError_t ivm_enter_root_request(ivm_msg_enter_req_t **req_p)
{
    char exe[PATH_MAX], cwd[PATH_MAX];
    size_t args_len = 0, blob_len;
    ivm_msg_enter_req_t *req;
    ivmError_t status = IVM_SUCCESS;
    char *args;
    ssize_t n;

    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || getcwd(cwd, sizeof(cwd)) == NULL) {
        IVM_FAIL(IVM_ERROR_INTERNAL, "ivmEnter: cannot read /proc/self/exe or the cwd");
    }
    exe[n] = '\0';
    args = ivm_read_proc("/proc/self/cmdline", &args_len);
    if (args == NULL || args_len == 0) {
        free(args);
        IVM_FAIL(IVM_ERROR_INTERNAL, "ivmEnter: cannot read /proc/self/cmdline");
    }
    blob_len = strlen(exe) + 1 + strlen(cwd) + 1 + args_len + ivm_environ_len();
    if (sizeof(*req) + blob_len > IVM_MSG_MAX_PAYLOAD) {
        IVM_FAIL_AT(out, status, IVM_ERROR_INVALID_VALUE,
                    "ivmEnter: arguments and environment exceed %u bytes", IVM_MSG_MAX_PAYLOAD);
    }
    req = calloc(1, sizeof(*req) + blob_len);
    if (req == NULL) {
        status = IVM_ERROR_NO_MEMORY;
        goto out;
    }
    req->pid      = (uint32_t)getpid();
    req->argc     = ivm_count_strings(args, args_len);
    req->blob_len = (uint32_t)blob_len;
    ivm_enter_fill_blob(req, exe, cwd, args, args_len);
    *req_p = req;
out:
    free(args);
    return status;
}

/* Send a root PE's ENTER with our stdout and stderr, which its children
 * inherit (a closed one becomes /dev/null). */
static ivmError_t ivm_enter_root_send(const ivm_msg_enter_req_t *req, ivm_msg_enter_rep_t *rep)
{
    ivm_rpc_reply_t reply = {.buf = rep, .len = sizeof(*rep), .fd = -1};
    int fds[2] = {1, 2};
    int null_fd = -1, i;
    ivmError_t status;

    for (i = 0; i < 2; ++i) {
        if (fcntl(fds[i], F_GETFD) < 0) {
            if (null_fd < 0) {
                null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
            }
            fds[i] = null_fd;
        }
    }
    status = ivm_rpc_call(IVM_MSG_ENTER, req, (uint32_t)(sizeof(*req) + req->blob_len), fds, 2,
                          &reply);
    if (null_fd >= 0) {
        close(null_fd);
    }
    return status;
}

/* Root PE: exe, cwd, argv and environment travel in the ENTER blob. */
static ivmError_t ivm_enter_root(ivm_msg_enter_rep_t *rep)
{
    const char *spec = getenv("IVM_CPU_DEVICES");
    const char *tag  = getenv("IVM_TAG_OUTPUT");
    ivm_msg_enter_req_t *req = NULL;
    uint32_t pe_pool, bind_flag;
    ivmError_t status;

    status = ivm_pe_pool_setting(&pe_pool);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_bind_setting(&bind_flag);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_enter_root_request(&req);
    if (status != IVM_SUCCESS) {
        return status;
    }
    req->flags   = IVM_ENTER_ROOT | (bind_flag << IVM_BIND_SHIFT);
    req->pe_pool = pe_pool;
    if (tag != NULL && strcmp(tag, "1") == 0) {
        req->flags |= IVM_ENTER_TAG_OUTPUT;
    }
    if (spec != NULL && ivm_proto_strset(req->cpu_devices, sizeof(req->cpu_devices),
                                         spec) != 0) {
        IVM_FAIL_AT(out, status, IVM_ERROR_INVALID_VALUE,
                    "IVM_CPU_DEVICES is longer than %zu bytes", sizeof(req->cpu_devices) - 1);
    }
    status = ivm_enter_root_send(req, rep);
out:
    free(req);
    return status;
}

/* A parked process of the warm pool is about to block in its ENTER; its
 * device is known (the spawner's environment: IVM_DEVICE_CORES for a CPU
 * slot, IVM_GPU, IVM_GPU_BACKEND and CUDA_VISIBLE_DEVICES for a GPU one).
 * CPU slots and emulated GPUs need nothing; on the cuda backend the process
 * creates its GPU's primary context now and keeps it current (gpu.c), so a
 * warm GPU PE's first CUDA call pays no context creation. This runs at pool
 * fill time, like all the program's code before ivmEnter. */
static void ivm_pool_park_prepare(void)
{
    const char *backend = getenv("IVM_GPU_BACKEND"), *bind_now = getenv("IVM_POOL_BIND_NOW");

    /* The daemon started this process with every symbol bound (ctl/pool.c):
     * done, so the PEs it becomes or forks see the job's environment. */
    if (bind_now != NULL && strcmp(bind_now, "1") == 0) {
        unsetenv("LD_BIND_NOW");
        unsetenv("IVM_POOL_BIND_NOW");
    }

    if (getenv("IVM_GPU") != NULL && backend != NULL && strcmp(backend, "cuda") == 0) {
        (void)ivm_gpu_cuda_warm(); /* logged; a cold context later otherwise */
    }
}

/* Whether a parked process may fork PEs (IVM_ENTER_FORKABLE): fork copies
 * the calling thread only, so this process must have one; a CUDA context
 * does not survive a fork, so not on the cuda backend. IVM_POOL_FORK=0 turns
 * it off (each PE is then a parked process of its own). */
static int ivm_pool_forkable(void)
{
    const char *backend = getenv("IVM_GPU_BACKEND"), *opt = getenv("IVM_POOL_FORK");
    char *status, *line;
    size_t len;
    int threads = 0;

    if ((opt != NULL && strcmp(opt, "0") == 0) ||
        (getenv("IVM_GPU") != NULL && backend != NULL && strcmp(backend, "cuda") == 0)) {
        return 0;
    }
    status = ivm_read_proc("/proc/self/status", &len);
    line = status != NULL ? strstr(status, "\nThreads:") : NULL;
    if (line != NULL) {
        threads = atoi(line + strlen("\nThreads:"));
    }
    free(status);
    return threads == 1;
}

/* The fork child of a parked process, told to be PE rep->pe_id: the parked
 * connection is its own now (the daemon made it that PE's when it sent the
 * reply), so it runs at once, with no ENTER of its own; its stdout and
 * stderr are the ones that came with the reply. */
static ivmError_t ivm_pool_child(ivm_msg_enter_rep_t *rep, int out_fd, int err_fd)
{
    if (out_fd >= 0 && err_fd >= 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
    }
    if (out_fd >= 0) {
        close(out_fd);
    }
    if (err_fd >= 0) {
        close(err_fd);
    }
    rep->flags = 0;
    rep->token = 0;
    return IVM_SUCCESS;
}

/* The parked process after a fork: the old connection is the child's, so
 * it parks again on a new one (its ENTER names the child's pid). */
static ivmError_t ivm_pool_reconnect(void)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    ivmError_t status;

    /* close, not shutdown: the child's copy stays open */
    ivm_rpc_close();
    status = ivm_sock_path(path, sizeof(path));
    if (status == IVM_SUCCESS) {
        status = ivm_rpc_open(path);
    }
    if (status != IVM_SUCCESS) {
        ivm_set_error("ivmEnter: a parked process cannot reach its daemon again");
    }
    return status;
}

/* A parked process asks for its job's signal board first (a pool ENTER
 * with IVM_ENTER_BOARD, answered at once) and maps it while it waits. No
 * board (the daemon's limits, IVM_SIGNAL_BOARD=0 here): the PE's first
 * signals go through the daemon, as in a spawned PE. */
static void ivm_pool_board(const ivm_msg_enter_req_t *park)
{
    ivm_msg_enter_req_t req = *park;
    ivm_msg_enter_rep_t rep;
    ivmError_t status;
    int fd = -1;

    if (ivm_ctx.own_board_off) {
        return;
    }
    req.flags = IVM_ENTER_POOL | IVM_ENTER_BOARD;
    status = ivm_call(IVM_MSG_ENTER, &req, sizeof(req), &rep, sizeof(rep), &fd);
    if (status == IVM_SUCCESS && fd >= 0) {
        ivm_board_adopt(fd);
        return;
    }
    ivm_debug("parked without the signal board: %s", ivm_status_string(status));
    if (fd >= 0) {
        close(fd);
    }
}

/* A parked process: its ENTER waits until the daemon hands it a PE identity
 * (it returns as that PE) or, when it is forkable, tells it to fork one: the
 * child returns as the PE on this connection, the parent parks again on a
 * new one, naming the child. Its fork children are reaped by the kernel
 * (SIGCHLD ignored while it is parked). */
static ivmError_t ivm_pool_park(ivm_msg_enter_req_t *req, ivm_msg_enter_rep_t *rep)
{
    struct sigaction reap = {.sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT}, old;
    ivmError_t status;

    ivm_pool_park_prepare();
    ivm_pool_board(req);
    if (ivm_pool_forkable()) {
        req->flags |= IVM_ENTER_FORKABLE;
        fflush(NULL); /* or the children would print what we buffered */
        sigaction(SIGCHLD, &reap, &old);
    }
    for (;;) {
        ivm_rpc_reply_t reply = {.buf = rep, .len = sizeof(*rep), .fd = -1, .fd2 = -1};
        pid_t pid;

        memset(rep, 0, sizeof(*rep));
        status = ivm_rpc_call(IVM_MSG_ENTER, req, sizeof(*req), NULL, 0, &reply);
        if (status != IVM_SUCCESS || rep->status != IVM_SUCCESS ||
            !(rep->flags & IVM_ENTER_REP_FORK)) {
            if (reply.fd >= 0) {
                close(reply.fd);
            }
            if (reply.fd2 >= 0) {
                close(reply.fd2);
            }
            break;
        }
        pid = fork();
        if (pid == 0) {
            sigaction(SIGCHLD, &old, NULL);
            return ivm_pool_child(rep, reply.fd, reply.fd2);
        }
        if (reply.fd >= 0) {
            close(reply.fd);
        }
        if (reply.fd2 >= 0) {
            close(reply.fd2);
        }
        req->forked_pid = pid > 0 ? (uint32_t)pid : 0;
        status = ivm_pool_reconnect();
        if (status != IVM_SUCCESS) {
            break;
        }
    }
    if (req->flags & IVM_ENTER_FORKABLE) {
        sigaction(SIGCHLD, &old, NULL);
    }
    return status;
}

/* Child PE, or (negative IVM_PE_ID) a parked process of the warm pool: its
 * ENTER is answered once the daemon hands it a PE identity. */
static ivmError_t ivm_enter_child(ivm_msg_enter_rep_t *rep, const char *pe_env)
{
    ivm_msg_enter_req_t req;
    ivm_rpc_reply_t reply = {.buf = rep, .len = sizeof(*rep), .fd = -1};
    const char *job = getenv("IVM_JOB_ID"), *token = getenv("IVM_PE_TOKEN");

    if (job == NULL || token == NULL) {
        IVM_FAIL(IVM_ERROR_PERMISSION,
                 "ivmEnter: IVM_PE_ID is set but IVM_JOB_ID or IVM_PE_TOKEN is not");
    }
    memset(&req, 0, sizeof(req));
    req.pid    = (uint32_t)getpid();
    req.job_id = (uint32_t)strtoul(job, NULL, 10);
    req.pe_id  = (int32_t)strtol(pe_env, NULL, 10);
    req.token  = strtoull(token, NULL, 10);
    /* Programs this PE starts are not this PE: they begin jobs of their own. */
    unsetenv("IVM_PE_ID");
    unsetenv("IVM_PE_TOKEN");
    unsetenv("IVM_JOB_ID");
    if (req.pe_id < 0) {
        req.flags = IVM_ENTER_POOL;
        return ivm_pool_park(&req, rep);
    }
    return ivm_rpc_call(IVM_MSG_ENTER, &req, sizeof(req), NULL, 0, &reply);
}

static ivmError_t ivm_connect(int is_root)
{
    struct sockaddr_un addr;
    char path[sizeof(addr.sun_path)], dir[sizeof(addr.sun_path)];
    const char *autostart = getenv("IVM_AUTOSTART");
    ivmError_t status;

    status = ivm_sock_path(path, sizeof(path));
    if (status != IVM_SUCCESS) {
        IVM_FAIL(status, "ivmEnter: the IVM socket path is too long");
    }
    status = ivm_rpc_open(path);
    if (status == IVM_SUCCESS || !is_root) {
        if (status != IVM_SUCCESS) {
            ivm_set_error("ivmEnter: cannot reach the IVM daemon at %s", path);
        }
        return status;
    }
    if (autostart != NULL && strcmp(autostart, "0") == 0) {
        IVM_FAIL(IVM_ERROR_NO_DAEMON,
                 "ivmEnter: no IVM daemon at %s and IVM_AUTOSTART=0; start one with "
                 "'ivmd &' or run the program with 'ivmrun PROGRAM'", path);
    }
    /* Singleton mode: a private daemon on a private socket, unless the user
     * named the socket. */
    if (getenv("IVM_SOCKET") == NULL || *getenv("IVM_SOCKET") == '\0') {
        if (ivm_sock_dir(dir, sizeof(dir)) != IVM_SUCCESS ||
            snprintf(path, sizeof(path), "%s/singleton-%d.sock", dir, (int)getpid()) >=
                (int)sizeof(path)) {
            IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmEnter: socket path too long");
        }
    }
    status = ivm_singleton_start(path);
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_rpc_open(path);
    if (status != IVM_SUCCESS) {
        ivm_set_error("ivmEnter: the private daemon started but %s does not answer", path);
    }
    return status;
}

/* IVM_SPIN_US: microseconds a call polls for its reply before it sleeps. */
static uint64_t ivm_spin_from_env(void)
{
    const char *env = getenv("IVM_SPIN_US");
    char *end;
    unsigned long us;

    if (env == NULL || *env == '\0') {
        return IVM_SPIN_US_DEFAULT * 1000u;
    }
    us = strtoul(env, &end, 10);
    if (*end != '\0' || us > 1000000u) {
        ivm_warn("IVM_SPIN_US=%s is not a number of microseconds up to 1000000; using %u",
                 env, IVM_SPIN_US_DEFAULT);
        return IVM_SPIN_US_DEFAULT * 1000u;
    }
    return (uint64_t)us * 1000u;
}

/* IVM_MAP_READ_FIRST: 1, populate maps read-only first; 0, writable at
 * once; unset: as the node's daemon measured (IVM_MAP_READ_FIRST flag). */
static int ivm_read_first_from_env(void)
{
    const char *env = getenv("IVM_MAP_READ_FIRST");

    if (env == NULL || *env == '\0') {
        return -1;
    }
    if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0) {
        ivm_warn("IVM_MAP_READ_FIRST=%s is neither 0 nor 1; the daemon's choice applies", env);
        return -1;
    }
    return env[0] == '1';
}

/* IVM_MAP_POPULATE: mappings up to this many bytes are filled in at once
 * (MAP_POPULATE: one call instead of a page fault per page touched; a
 * program that maps a copy touches it). Larger ones, which may be sparse,
 * fault page by page. 0: never. */
static size_t ivm_populate_from_env(void)
{
    const char *env = getenv("IVM_MAP_POPULATE");
    char *end;
    unsigned long long bytes;

    if (env == NULL || *env == '\0') {
        return IVM_MAP_POPULATE_DEFAULT;
    }
    bytes = strtoull(env, &end, 10);
    if (*end != '\0') {
        ivm_warn("IVM_MAP_POPULATE=%s is not a number of bytes; using %u", env,
                 IVM_MAP_POPULATE_DEFAULT);
        return IVM_MAP_POPULATE_DEFAULT;
    }
    return (size_t)bytes;
}

IVM_API ivmError_t ivmEnter(void)
{
    const char *pe_env = getenv("IVM_PE_ID");
    int is_root = (pe_env == NULL || *pe_env == '\0');
    ivm_msg_enter_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    pthread_mutex_lock(&ivm_life_lock);
    if (ivm_ctx.state == IVM_CTX_ENTERED) {
        pthread_mutex_unlock(&ivm_life_lock);
        IVM_FAIL(IVM_ERROR_ALREADY_ENTERED,
                 "ivmEnter: this process is PE %d already (ivmEnter is called once)",
                 ivm_ctx.pe_id);
    }
    if (ivm_ctx.state == IVM_CTX_EXITED) {
        pthread_mutex_unlock(&ivm_life_lock);
        IVM_FAIL(IVM_ERROR_NOT_ENTERED, "ivmEnter: this process already called ivmExit");
    }
    ivm_log_init_from_env();
    ivm_log_set_prefix("pe");
    ivm_ctx.spin_ns = ivm_spin_from_env();
    ivm_ctx.populate_max = ivm_populate_from_env();
    ivm_ctx.read_first = ivm_read_first_from_env();
    ivm_ctx.put_signal_two = getenv("IVM_PUT_SIGNAL") != NULL &&
                             strcmp(getenv("IVM_PUT_SIGNAL"), "0") == 0;
    ivm_ctx.own_board_off = getenv("IVM_SIGNAL_BOARD") != NULL &&
                            strcmp(getenv("IVM_SIGNAL_BOARD"), "0") == 0;
    ivm_ep_configure();
    status = ivm_connect(is_root);
    if (status == IVM_SUCCESS) {
        memset(&rep, 0, sizeof(rep));
        status = is_root ? ivm_enter_root(&rep) : ivm_enter_child(&rep, pe_env);
        if (status == IVM_SUCCESS) {
            status = (ivmError_t)rep.status;
        }
        if (status != IVM_SUCCESS) {
            ivm_rpc_close();
        }
    }
    if (status == IVM_SUCCESS) {
        rep.node[sizeof(rep.node) - 1] = '\0';
        ivm_ctx.job_id  = rep.job_id;
        ivm_ctx.pe_id   = rep.pe_id;
        ivm_ctx.devtype = rep.devtype;
        ivm_ctx.ncores  = (int)rep.ncores;
        memcpy(ivm_ctx.node, rep.node, sizeof(ivm_ctx.node));
        ivm_log_set_prefix("%s pe%d", ivm_ctx.node, ivm_ctx.pe_id);
        __atomic_store_n(&ivm_ctx.state, IVM_CTX_ENTERED, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ivm_life_lock);
    if (status != IVM_SUCCESS) {
        ivm_info("ivmEnter failed: %s (%s)", ivm_status_string(status),
                 ivmGetLastErrorMessage());
    }
    return status;
}

/* Every posted call settled: the endpoints' puts, then the daemon's calls;
 * a failure is kept for the next quiet. */
static void ivm_posted_drain(void)
{
    ivm_ep_settle();
    ivm_rpc_drain();
}

/* Drained, and the first failure since the last quiet, with its message. */
static ivmError_t ivm_quiet_all(void)
{
    ivm_ep_settle();
    return ivm_rpc_quiet();
}

IVM_API ivmError_t ivmExit(void)
{
    ivm_msg_status_t rep;
    ivmError_t status, quiet;

    ivm_clear_error();
    pthread_mutex_lock(&ivm_life_lock);
    if (ivm_ctx.state != IVM_CTX_ENTERED) {
        pthread_mutex_unlock(&ivm_life_lock);
        IVM_CHECK_ENTERED();
    }
    __atomic_store_n(&ivm_ctx.state, IVM_CTX_EXITED, __ATOMIC_RELEASE);
    /* Output written so far reaches the job's streams before the root can
     * end the job. */
    fflush(NULL);
    /* Posted calls complete first; a failure no ivmQuiet reported is
     * ivmExit's. */
    quiet = ivm_quiet_all();
    if (quiet != IVM_SUCCESS) {
        ivm_warn("ivmExit: a call posted by ivmSyncPutNbi or ivmSyncGetNbi failed and no "
                 "ivmQuiet reported it: %s", ivmGetLastErrorMessage());
    }
    status = ivm_call(IVM_MSG_EXIT, &(ivm_msg_empty_t){0}, sizeof(ivm_msg_empty_t), &rep,
                      sizeof(rep), NULL);
    ivm_ep_close_all();
    ivm_maps_clear();
    ivm_rpc_close();
    pthread_mutex_unlock(&ivm_life_lock);
    if (quiet != IVM_SUCCESS && quiet != IVM_ERROR_DAEMON_LOST) {
        return quiet;
    }
    /* A lost daemon at exit is not the caller's problem. */
    return (status == IVM_ERROR_DAEMON_LOST) ? IVM_SUCCESS : status;
}

/* ------------------------------------------------------------ devices */

IVM_API ivmError_t ivmCreateDev(const char *host, int devtype, ivm_device *dev)
{
    ivm_msg_create_dev_req_t req;
    ivm_msg_create_dev_rep_t rep;
    struct ivm_device_s *d;
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (dev == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmCreateDev: dev is NULL");
    }
    /* The caller's own device takes no round trip: its node and device came
     * with ivmEnter's reply, as the daemon would resolve them (ivmCreatePEs
     * then says what this call would have: a GPU whose ivm-gpud is gone). A
     * DS-LB chain asks for it once per PE, on the way to its successor. */
    if ((host == NULL || *host == '\0') && devtype == IVM_THIS_DEV && ivm_ctx.node[0] != '\0') {
        d = calloc(1, sizeof(*d));
        if (d == NULL) {
            IVM_FAIL(IVM_ERROR_NO_MEMORY, "ivmCreateDev: out of memory");
        }
        snprintf(d->host, sizeof(d->host), "%s", ivm_ctx.node);
        d->devtype = ivm_ctx.devtype;
        *dev       = d;
        return IVM_SUCCESS;
    }
    memset(&req, 0, sizeof(req));
    req.devtype = devtype;
    if (host != NULL && ivm_proto_strset(req.host, sizeof(req.host), host) != 0) {
        IVM_FAIL(IVM_ERROR_NOT_FOUND, "ivmCreateDev: host name '%.40s...' is too long",
                 host);
    }
    status = ivm_call(IVM_MSG_CREATE_DEV, &req, sizeof(req), &rep, sizeof(rep), NULL);
    if (status != IVM_SUCCESS) {
        return status;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL) {
        IVM_FAIL(IVM_ERROR_NO_MEMORY, "ivmCreateDev: out of memory");
    }
    rep.host[sizeof(rep.host) - 1] = '\0';
    memcpy(d->host, rep.host, sizeof(d->host));
    d->devtype = rep.devtype;
    *dev       = d;
    return IVM_SUCCESS;
}

IVM_API ivmError_t ivmDestroyDev(ivm_device dev)
{
    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (dev == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmDestroyDev: dev is NULL");
    }
    free(dev);
    return IVM_SUCCESS;
}

/* ------------------------------------------------------------ PEs */

IVM_API ivmError_t ivmCreatePEs(ivm_device dev, int n, ivm_pe *pes)
{
    ivm_msg_create_pes_req_t req;
    ivm_msg_create_pes_rep_t rep; /* 4 KiB: a successful reply fills 8 + 4 n bytes */
    ivmError_t status = IVM_SUCCESS;
    int done = 0, i;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (dev == NULL || n < 0) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmCreatePEs: %s",
                 dev == NULL ? "dev is NULL" : "n is negative");
    }
    if (pes != NULL) {
        for (i = 0; i < n; ++i) {
            pes[i] = IVM_PE_NULL;
        }
    }
    memset(&req, 0, sizeof(req));
    req.devtype = dev->devtype;
    memcpy(req.host, dev->host, sizeof(req.host));
    while (done < n) {
        int chunk = (n - done < IVM_CREATE_PES_MAX) ? n - done : IVM_CREATE_PES_MAX;
        req.n = chunk;
        status = ivm_call(IVM_MSG_CREATE_PES, &req, sizeof(req), &rep, sizeof(rep), NULL);
        if (status != IVM_SUCCESS && status != IVM_ERROR_SPAWN) {
            break;
        }
        if (rep.n != chunk) {
            status = IVM_ERROR_PROTOCOL;
            ivm_set_error("ivmCreatePEs: the daemon answered %d PE ids for %d", rep.n, chunk);
            break;
        }
        if (pes != NULL) {
            for (i = 0; i < chunk; ++i) {
                pes[done + i] = rep.pes[i];
            }
        }
        if (status != IVM_SUCCESS || (chunk > 0 && rep.pes[chunk - 1] == IVM_PE_NULL)) {
            break; /* spawn failure, or the max PE id was reached */
        }
        done += chunk;
    }
    return status;
}

IVM_API ivmError_t ivmKillPEs(const ivm_pe *pes, int n)
{
    ivm_msg_kill_pes_req_t *req;
    ivm_msg_status_t rep;
    ivmError_t status = IVM_SUCCESS;
    int done = 0;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (n < 0 || (n > 0 && pes == NULL)) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmKillPEs: %s",
                 n < 0 ? "n is negative" : "pes is NULL");
    }
    req = malloc(sizeof(*req) + sizeof(int32_t) * IVM_KILL_PES_MAX);
    if (req == NULL) {
        IVM_FAIL(IVM_ERROR_NO_MEMORY, "ivmKillPEs: out of memory");
    }
    while (done < n && status == IVM_SUCCESS) {
        int chunk = (n - done < IVM_KILL_PES_MAX) ? n - done : IVM_KILL_PES_MAX;
        memset(req, 0, sizeof(*req));
        req->n = chunk;
        memcpy(req + 1, pes + done, sizeof(int32_t) * (size_t)chunk);
        status = ivm_call(IVM_MSG_KILL_PES, req,
                          (uint32_t)(sizeof(*req) + sizeof(int32_t) * (size_t)chunk), &rep,
                          sizeof(rep), NULL);
        done += chunk;
    }
    free(req);
    return status;
}

#define IVM_GETTER(fn, type, expr)                                     \
    IVM_API ivmError_t fn(type *out)                                   \
    {                                                                  \
        ivm_clear_error();                                             \
        IVM_CHECK_ENTERED();                                           \
        if (out == NULL) {                                             \
            IVM_FAIL(IVM_ERROR_INVALID_VALUE, #fn ": NULL argument");  \
        }                                                              \
        *out = (expr);                                                 \
        return IVM_SUCCESS;                                            \
    }

IVM_GETTER(ivmGetMyId, int, ivm_ctx.pe_id)
IVM_GETTER(ivmGetMyGroupId, int, (int)ivm_ctx.job_id)
IVM_GETTER(ivmGetMyDevType, int, ivm_ctx.devtype)

IVM_API ivmError_t ivmSetMaxPesId(int max_id)
{
    ivm_msg_pe_req_t req = {.pe = max_id};
    ivm_msg_status_t rep;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (max_id < 0) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmSetMaxPesId: %d is negative", max_id);
    }
    return ivm_call(IVM_MSG_SET_MAX_ID, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmWait(ivm_pe pe)
{
    ivm_msg_pe_req_t req = {.pe = pe};
    ivm_msg_status_t rep;
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (pe < 0) {
        IVM_FAIL(IVM_ERROR_NOT_FOUND, "ivmWait: %d is not a PE id", pe);
    }
    /* pe's signals on the node's board (the job's root node): no daemon. */
    if (ivm_board_wait_pe(pe, &status)) {
        return status;
    }
    return ivm_call(IVM_MSG_WAIT, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmSignal(void)
{
    ivm_msg_status_t rep;
    uint16_t type = IVM_MSG_SIGNAL;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    switch (ivm_board_post()) {
    case 0:
        return IVM_SUCCESS;
    case 1: /* posted; WAITs on this PE queued in the daemon are served there */
        type = IVM_MSG_SIGNAL_POKE;
        break;
    default:
        break;
    }
    return ivm_call(type, &(ivm_msg_empty_t){0}, sizeof(ivm_msg_empty_t), &rep, sizeof(rep),
                    NULL);
}

/* SIGNAL_TO / WAIT_FROM: through the node's signal board when the pair is
 * on it (board.c), else through the daemon. */
static ivmError_t ivm_pe_call(const char *fn, uint16_t type, ivm_pe pe)
{
    ivm_msg_pe_req_t req = {.pe = pe};
    ivm_msg_status_t rep;
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED_AS(fn);
    if (pe < 0) {
        IVM_FAIL(IVM_ERROR_NOT_FOUND, "%s: %d is not a PE id", fn, pe);
    }
    if (type == IVM_MSG_SIGNAL_TO ? ivm_board_signal(pe, &status)
                                  : ivm_board_wait(pe, &status)) {
        return status;
    }
    return ivm_call(type, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmSignalTo(ivm_pe pe)
{
    return ivm_pe_call("ivmSignalTo", IVM_MSG_SIGNAL_TO, pe);
}

IVM_API ivmError_t ivmWaitFrom(ivm_pe pe)
{
    return ivm_pe_call("ivmWaitFrom", IVM_MSG_WAIT_FROM, pe);
}

/* n = 0: the whole job (ivmBarrierAll). */
static ivmError_t ivm_barrier(const ivm_pe *pes, int n)
{
    size_t len = sizeof(ivm_msg_barrier_req_t) + sizeof(int32_t) * (size_t)n;
    ivm_msg_barrier_req_t *req = calloc(1, len);
    ivm_msg_status_t rep;
    ivmError_t status;

    if (req == NULL) {
        IVM_FAIL(IVM_ERROR_NO_MEMORY, "ivmBarrier: out of memory");
    }
    req->n = n;
    if (n > 0) {
        memcpy(req + 1, pes, sizeof(int32_t) * (size_t)n);
    }
    status = ivm_call(IVM_MSG_BARRIER, req, (uint32_t)len, &rep, sizeof(rep), NULL);
    free(req);
    return status;
}

IVM_API ivmError_t ivmBarrier(const ivm_pe *pes, int n)
{
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (n < 1 || n > IVM_BARRIER_PES_MAX || pes == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmBarrier: %s",
                 pes == NULL ? "pes is NULL" : "n is outside 1..IVM_BARRIER_PES_MAX");
    }
    if (ivm_board_barrier(pes, n, &status)) {
        return status;
    }
    return ivm_barrier(pes, n);
}

IVM_API ivmError_t ivmBarrierAll(void)
{
    ivm_clear_error();
    IVM_CHECK_ENTERED();
    return ivm_barrier(NULL, 0);
}

/* ------------------------------------------------------------ discovery */

/* NODE_DEVS of node (IVM_THIS_NODE: the caller's) into *rep. */
static ivmError_t ivm_node_devs(const char *fn, int node, ivm_msg_node_devs_rep_t *rep)
{
    ivm_msg_node_req_t req = {.node = node};

    IVM_CHECK_ENTERED_AS(fn);
    if (node < 0 && node != IVM_THIS_NODE) {
        IVM_FAIL(IVM_ERROR_NOT_FOUND, "%s: %d is not a node index", fn, node);
    }
    return ivm_call(IVM_MSG_NODE_DEVS, &req, sizeof(req), rep, sizeof(*rep), NULL);
}

IVM_API ivmError_t ivmGetNumNodes(int *n)
{
    ivm_msg_node_devs_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    if (n == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetNumNodes: n is NULL");
    }
    status = ivm_node_devs("ivmGetNumNodes", IVM_THIS_NODE, &rep);
    if (status == IVM_SUCCESS) {
        *n = (int)rep.nnodes;
    }
    return status;
}

IVM_API ivmError_t ivmGetMyNode(int *node)
{
    ivm_msg_node_devs_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    if (node == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetMyNode: node is NULL");
    }
    status = ivm_node_devs("ivmGetMyNode", IVM_THIS_NODE, &rep);
    if (status == IVM_SUCCESS) {
        *node = rep.self;
    }
    return status;
}

IVM_API ivmError_t ivmGetNodeName(int node, char *name, size_t len)
{
    ivm_msg_node_devs_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    if (name == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetNodeName: name is NULL");
    }
    status = ivm_node_devs("ivmGetNodeName", node, &rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    rep.name[sizeof(rep.name) - 1] = '\0';
    if (len > 0) {
        snprintf(name, len, "%s", rep.name);
    }
    if (strlen(rep.name) >= len) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetNodeName: %zu bytes do not hold \"%s\"", len,
                 rep.name);
    }
    return IVM_SUCCESS;
}

IVM_API ivmError_t ivmGetDevices(int node, ivm_device_info *devs, int max, int *ndevs)
{
    ivm_msg_node_devs_rep_t rep;
    ivmError_t status;
    uint32_t i;

    ivm_clear_error();
    if (ndevs == NULL || max < 0 || (devs == NULL && max > 0)) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetDevices: %s",
                 ndevs == NULL ? "ndevs is NULL" : max < 0 ? "max is negative" : "devs is NULL");
    }
    status = ivm_node_devs("ivmGetDevices", node, &rep);
    if (status != IVM_SUCCESS) {
        return status;
    }
    for (i = 0; i < rep.ndevs && i < IVM_NODE_DEVICES_MAX && (int)i < max; ++i) {
        memset(&devs[i], 0, sizeof(devs[i]));
        devs[i].devtype = rep.devs[i].devtype;
        devs[i].ncores  = (int)rep.devs[i].ncores;
        devs[i].share   = (int)rep.devs[i].share;
        devs[i].numa    = rep.devs[i].numa;
        devs[i].npes    = (int)rep.devs[i].npes;
    }
    *ndevs = (int)(rep.ndevs < IVM_NODE_DEVICES_MAX ? rep.ndevs : IVM_NODE_DEVICES_MAX);
    return IVM_SUCCESS;
}

IVM_API ivmError_t ivmGetNodeSlots(int node, int *slots, int *max_slots)
{
    ivm_msg_node_devs_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    if (slots == NULL || max_slots == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetNodeSlots: %s is NULL",
                 slots == NULL ? "slots" : "max_slots");
    }
    status = ivm_node_devs("ivmGetNodeSlots", node, &rep);
    if (status == IVM_SUCCESS) {
        *slots     = (int)rep.slots;
        *max_slots = (int)rep.max_slots;
    }
    return status;
}

IVM_API ivmError_t ivmGetNumPEs(int *n)
{
    ivm_msg_value_rep_t rep;
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (n == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmGetNumPEs: n is NULL");
    }
    status = ivm_call(IVM_MSG_NUM_PES, &(ivm_msg_empty_t){0}, sizeof(ivm_msg_empty_t), &rep,
                      sizeof(rep), NULL);
    if (status == IVM_SUCCESS) {
        *n = rep.value;
    }
    return status;
}

/* ------------------------------------------------------------ memory */

/* A failed map leaves nothing behind at the daemon (a failed ivmMalloc no
 * object). */
static void ivm_map_undo(const ivm_msg_map_rep_t *rep, int allocated)
{
    ivm_msg_obj_req_t undo = {.obj_id = rep->obj_id, .gpu_ref = rep->gpu_ref};
    ivm_msg_status_t undo_rep;

    ivm_call(allocated ? IVM_MSG_FREE : IVM_MSG_UNMAP, &undo, sizeof(undo), &undo_rep,
             sizeof(undo_rep), NULL);
}

/* A long from a one-number file (/proc/sys/...), -1 if unreadable. */
static long ivm_read_long(const char *path)
{
    FILE *f = fopen(path, "re");
    long v = -1;

    if (f != NULL) {
        if (fscanf(f, "%ld", &v) != 1) {
            v = -1;
        }
        fclose(f);
    }
    return v;
}

/* Memory mappings of this process (lines of /proc/self/maps), -1 if unknown. */
static long ivm_count_vmas(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    long n = 0;
    int ch;

    if (f == NULL) {
        return -1;
    }
    while ((ch = getc(f)) != EOF) {
        n += ch == '\n';
    }
    fclose(f);
    return n;
}

/* Why an mmap of an object failed. Each mapped object is one mapping of the
 * process, and the kernel caps their number (vm.max_map_count, 65530 by
 * default): a program that maps that many objects gets IVM_ERROR_LIMIT
 * naming the limit, not an out-of-memory it cannot act on. */
static ivmError_t ivm_map_mmap_failed(size_t len, int err)
{
    long max = err == ENOMEM ? ivm_read_long("/proc/sys/vm/max_map_count") : -1;
    long n   = max > 0 ? ivm_count_vmas() : -1;

    if (max > 0 && n >= max - 16) {
        IVM_FAIL(IVM_ERROR_LIMIT,
                 "this process has %ld memory mappings, the kernel's limit "
                 "(vm.max_map_count %ld): each ivmMalloc or ivmMap is one; unmap objects "
                 "or raise the limit (sysctl vm.max_map_count)", n, max);
    }
    IVM_FAIL(IVM_ERROR_NO_MEMORY, "mmap of %zu bytes failed: %s", len, strerror(err));
}

/* mmap a copy's fd for reading and writing, placed so that the copy's 2 MiB
 * pages (ivmd --huge-pages) map whole (common/hugemap.h). Up to IVM_MAP_POPULATE bytes
 * are populated at once; read-only first, then opened for writing by
 * mprotect, when the daemon found a page's first read cheaper so on its node
 * (IVM_MAP_READ_FIRST in the reply; the env variable overrides): the same
 * mapping either way (ivmd/data/copies.h). MAP_FAILED with errno on
 * failure. */
static void *ivm_map_mmap(int fd, size_t len, off_t off, uint32_t flags)
{
    int read_first = ivm_ctx.read_first >= 0 ? ivm_ctx.read_first
                                             : (flags & IVM_MAP_READ_FIRST) != 0;
    void *base;
    int err;

    if (len > ivm_ctx.populate_max) {
        return ivm_hugemap_mmap(len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    }
    if (!read_first) {
        return ivm_hugemap_mmap(len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                                off);
    }
    base = ivm_hugemap_mmap(len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, off);
    if (base != MAP_FAILED && mprotect(base, len, PROT_READ | PROT_WRITE) != 0) {
        err = errno;
        munmap(base, len);
        errno = err;
        return MAP_FAILED;
    }
    return base;
}

/* mmap the reply's fd over [offset, offset+size) and record the mapping. A
 * GPU PE's reply also brings the device copy (fd2), which its backend imports:
 * the reference is then the device pointer of byte `offset`. */
static ivmError_t ivm_map_install(const ivm_msg_map_rep_t *rep, int fd, int fd2,
                                  int allocated, void *ptr_out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t aligned = rep->offset & ~(uint64_t)(page - 1);
    size_t len = (size_t)(rep->size + (rep->offset - aligned));
    const ivm_gpu_ops_t *gpu = ivm_gpu_ops_for(rep->flags);
    ivm_map_t map;
    ivmError_t status;
    void *base, *dev = NULL;

    if (gpu != NULL && (fd2 < 0 || rep->offset < rep->gpu_offset ||
                        rep->offset - rep->gpu_offset > rep->gpu_size ||
                        rep->size > rep->gpu_size - (rep->offset - rep->gpu_offset))) {
        close(fd);
        if (fd2 >= 0) {
            close(fd2);
        }
        ivm_map_undo(rep, allocated);
        IVM_FAIL(IVM_ERROR_PROTOCOL, "the daemon sent no usable device copy for a GPU map");
    }
    base = ivm_map_mmap(fd, len, (off_t)aligned, rep->flags);
    close(fd);
    if (base == MAP_FAILED) {
        int err = errno;
        if (fd2 >= 0) {
            close(fd2);
        }
        ivm_map_undo(rep, allocated);
        return ivm_map_mmap_failed(len, err);
    }
    if (gpu != NULL) {
        status = gpu->import(fd2, (size_t)rep->gpu_size, &dev);
        close(fd2);
        if (status != IVM_SUCCESS) {
            munmap(base, len);
            ivm_map_undo(rep, allocated);
            return status; /* the backend said why */
        }
    } else if (fd2 >= 0) {
        close(fd2);
    }
    memset(&map, 0, sizeof(map));
    map.ref       = (char *)base + (rep->offset - aligned);
    map.size      = (size_t)rep->size;
    map.map_base  = base;
    map.map_len   = len;
    map.obj_id    = rep->obj_id;
    map.offset    = rep->offset;
    map.flags     = rep->flags;
    map.allocated = allocated;
    map.master_node = (rep->flags & IVM_MAP_DIRECT) ? rep->master_node : -1;
    map.master_id   = rep->master_id;
    if (gpu != NULL) {
        map.host      = map.ref;
        map.host_base = base;
        map.host_len  = len;
        map.ref       = (char *)dev + (rep->offset - rep->gpu_offset);
        map.map_base  = dev;
        map.map_len   = (size_t)rep->gpu_size;
        map.gpu_ref   = rep->gpu_ref;
    }
    if (ivm_maps_add(&map) != IVM_SUCCESS) {
        ivm_map_release(&map);
        ivm_map_undo(rep, allocated);
        IVM_FAIL(IVM_ERROR_NO_MEMORY, "out of memory recording a mapping");
    }
    memcpy(ptr_out, &map.ref, sizeof(void *));
    return IVM_SUCCESS;
}

static ivmError_t ivm_check_name(const char *fn, const char *name)
{
    if (name == NULL || *name == '\0') {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "%s: the object name is %s", fn,
                 name == NULL ? "NULL" : "empty");
    }
    if (strlen(name) > IVM_NAME_MAX) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "%s: object name longer than %d bytes", fn,
                 IVM_NAME_MAX);
    }
    return IVM_SUCCESS;
}

IVM_API ivmError_t ivmMalloc(const char *name, void *ptr_out, size_t size)
{
    ivm_msg_malloc_req_t req;
    ivm_msg_map_rep_t rep;
    ivmError_t status;
    int fd = -1, fd2 = -1;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    status = ivm_check_name("ivmMalloc", name);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (ptr_out == NULL || size == 0) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmMalloc('%s'): %s", name,
                 ptr_out == NULL ? "ptr_out is NULL" : "size is 0");
    }
    memset(&req, 0, sizeof(req));
    req.size = size;
    strcpy(req.name, name);
    status = ivm_call_fds(IVM_MSG_MALLOC, &req, sizeof(req), &rep, sizeof(rep), &fd, &fd2);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (fd < 0) {
        IVM_FAIL(IVM_ERROR_PROTOCOL, "ivmMalloc('%s'): the daemon sent no memory", name);
    }
    return ivm_map_install(&rep, fd, fd2, 1, ptr_out);
}

/* ivmMap and ivmMapSubset; `fn` names the call in messages. */
static ivmError_t ivm_map_named(const char *fn, const char *name, void *ptr_out, size_t offset,
                                size_t size)
{
    ivm_msg_map_req_t req;
    ivm_msg_map_rep_t rep;
    ivmError_t status;
    int fd = -1, fd2 = -1;

    ivm_clear_error();
    IVM_CHECK_ENTERED_AS(fn);
    status = ivm_check_name(fn, name);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (ptr_out == NULL) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "%s('%s'): ptr_out is NULL", fn, name);
    }
    memset(&req, 0, sizeof(req));
    req.offset = offset;
    req.size   = size;
    strcpy(req.name, name);
    status = ivm_call_fds(IVM_MSG_MAP, &req, sizeof(req), &rep, sizeof(rep), &fd, &fd2);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (fd < 0) {
        IVM_FAIL(IVM_ERROR_PROTOCOL, "%s('%s'): the daemon sent no memory", fn, name);
    }
    return ivm_map_install(&rep, fd, fd2, 0, ptr_out);
}

IVM_API ivmError_t ivmMapSubset(const char *name, void *ptr_out, size_t offset, size_t size)
{
    return ivm_map_named("ivmMapSubset", name, ptr_out, offset, size);
}

IVM_API ivmError_t ivmMap(const char *name, void *ptr_out, size_t size)
{
    return ivm_map_named("ivmMap", name, ptr_out, 0, size);
}

IVM_API ivmError_t ivmUnmap(void *ptr)
{
    ivm_msg_obj_req_t req;
    ivm_msg_status_t rep;
    ivm_map_t map;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (ivm_maps_take(ptr, &map) != IVM_SUCCESS) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE,
                 "ivmUnmap: %p is not the start of a mapping of this PE", ptr);
    }
    ivm_posted_drain(); /* posted calls on this mapping's bytes */
    ivm_map_release(&map);
    req.obj_id  = map.obj_id;
    req.gpu_ref = map.gpu_ref;
    return ivm_call(IVM_MSG_UNMAP, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmFree(void *ptr)
{
    ivm_msg_obj_req_t req;
    ivm_msg_status_t rep;
    ivm_map_t map;
    ivmError_t status;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (ptr == NULL || ivm_maps_lookup(ptr, 0, &map) != IVM_SUCCESS || map.ref != ptr) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE,
                 "ivmFree: %p is not the start of a mapping of this PE", ptr);
    }
    ivm_posted_drain(); /* posted calls on this object */
    req.obj_id  = map.obj_id;
    req.gpu_ref = map.gpu_ref;
    status = ivm_call(IVM_MSG_FREE, &req, sizeof(req), &rep, sizeof(rep), NULL);
    if (status != IVM_SUCCESS) {
        return status;
    }
    if (ivm_maps_take(ptr, &map) == IVM_SUCCESS) {
        ivm_map_release(&map);
    }
    return IVM_SUCCESS;
}

/* The sync calls. Put and Get on the master copy itself (every PE of the
 * master's node maps it) move no data and cost no round trip: a fence orders
 * the caller's accesses. A mirror, and the group calls (which reach the other
 * nodes' mirrors), go through the daemon, which moves the data. A GPU PE's
 * syncs always go to the daemon (its device copy is never the master); they
 * accept the device reference or the host view (ivmHostPtr), and first wait
 * for the PE's device work on its primary context (cuda: cuCtxSynchronize). */
static ivmError_t ivm_sync_device(const char *fn, const ivm_map_t *map)
{
    const ivm_gpu_ops_t *gpu = ivm_gpu_ops_for(map->flags);
    char why[256];

    /* The device copy is read (Put) or overwritten (Get) by ivm-gpud: the
     * PE's kernels and copies into it must have finished. */
    if (gpu == NULL || gpu->device_sync == NULL || gpu->device_sync() == IVM_SUCCESS) {
        return IVM_SUCCESS;
    }
    snprintf(why, sizeof(why), "%s", ivmGetLastErrorMessage());
    IVM_FAIL(IVM_ERROR_INTERNAL, "%s: %s", fn, why);
}

/* The SYNC request for [addr, +size) (*call_p = 1), or nothing to ask the
 * daemon (*call_p = 0: the caller's copy is the master). */
static ivmError_t ivm_sync_prepare(const char *fn, uint32_t op, const void *addr, size_t size,
                                   ivm_msg_sync_req_t *req, int *call_p, ivm_map_t *map_p)
{
    uint64_t offset;
    ivm_map_t map;

    IVM_CHECK_ENTERED_AS(fn);
    if (addr != NULL && ivm_maps_lookup(addr, size, &map) == IVM_SUCCESS) {
        offset = map.offset + (uint64_t)((const char *)addr - map.ref);
    } else if (addr != NULL && ivm_maps_lookup_host(addr, size, &map) == IVM_SUCCESS) {
        offset = map.offset + (uint64_t)((const char *)addr - map.host);
    } else {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE,
                 "%s: [%p, +%zu) does not lie inside one IVM mapping of this PE", fn, addr,
                 size);
    }
    atomic_thread_fence(memory_order_seq_cst);
    if (ivm_sync_device(fn, &map) != IVM_SUCCESS) {
        return IVM_ERROR_INTERNAL;
    }
    *call_p = !((map.flags & IVM_MAP_MASTER) && !(map.flags & IVM_MAP_GPU) &&
                (op == IVM_SYNC_PUT || op == IVM_SYNC_GET));
    memset(req, 0, sizeof(*req));
    req->obj_id  = map.obj_id;
    req->offset  = offset;
    req->size    = size;
    req->op      = op;
    req->gpu_ref = map.gpu_ref;
    if (map_p != NULL) {
        *map_p = map;
    }
    return IVM_SUCCESS;
}

static ivmError_t ivm_sync(const char *fn, uint32_t op, const void *addr, size_t size)
{
    ivm_msg_sync_req_t req;
    ivm_msg_status_t rep;
    ivm_map_t map;
    ivmError_t status;
    int call;

    status = ivm_sync_prepare(fn, op, addr, size, &req, &call, &map);
    if (status != IVM_SUCCESS || !call) {
        return status;
    }
    /* A small put or get of a node copy: straight to the master's daemon. */
    if (ivm_ep_sync(op, &map, req.offset, (void *)addr, size, -1, &status)) {
        return status;
    }
    return ivm_call(IVM_MSG_SYNC, &req, sizeof(req), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmSyncPut(const void *addr, size_t size)
{
    return ivm_sync("ivmSyncPut", IVM_SYNC_PUT, addr, size);
}

/* Start a put or a get and return (ivmSyncPutNbi, ivmSyncGetNbi): a put
 * over the PE's endpoint to the master's daemon when it has one (the answer
 * read later), else the request posted to the PE's daemon. */
static ivmError_t ivm_sync_post(const char *fn, uint32_t op, void *addr, size_t size)
{
    ivm_msg_sync_req_t req;
    ivm_map_t map;
    ivmError_t status;
    int call;

    ivm_clear_error();
    status = ivm_sync_prepare(fn, op, addr, size, &req, &call, &map);
    if (status != IVM_SUCCESS || !call) {
        return status;
    }
    if (op == IVM_SYNC_PUT && ivm_ep_post_put(&map, req.offset, addr, size, &status)) {
        return status;
    }
    return ivm_rpc_post(IVM_MSG_SYNC, &req, sizeof(req), fn);
}

IVM_API ivmError_t ivmSyncPutNbi(const void *addr, size_t size)
{
    return ivm_sync_post("ivmSyncPutNbi", IVM_SYNC_PUT, (void *)addr, size);
}

IVM_API ivmError_t ivmSyncGetNbi(void *addr, size_t size)
{
    return ivm_sync_post("ivmSyncGetNbi", IVM_SYNC_GET, addr, size);
}

IVM_API ivmError_t ivmQuiet(void)
{
    ivm_clear_error();
    IVM_CHECK_ENTERED_AS("ivmQuiet");
    return ivm_quiet_all();
}

IVM_API ivmError_t ivmSyncPutSignal(const void *addr, size_t size, ivm_pe pe)
{
    ivm_msg_put_signal_req_t req = {.pe = pe};
    ivm_msg_pe_req_t sig = {.pe = pe};
    ivm_msg_status_t rep;
    ivm_map_t map;
    ivmError_t status;
    int call;

    ivm_clear_error();
    if (pe < 0) {
        IVM_CHECK_ENTERED();
        IVM_FAIL(IVM_ERROR_NOT_FOUND, "ivmSyncPutSignal: %d is not a PE id", pe);
    }
    status = ivm_sync_prepare("ivmSyncPutSignal", IVM_SYNC_PUT, addr, size, &req.sync, &call,
                              &map);
    if (status != IVM_SUCCESS) {
        return status;
    }
    /* A mirror's bytes and a signal in one operation: over the PE's endpoint
     * when the master's daemon is the receiver's, else through the PE's
     * daemon, which posts the signal once the master has the bytes
     * (IVM_PUT_SIGNAL=0: the two calls, for comparison). */
    if (call && req.sync.gpu_ref == 0 && !ivm_ctx.put_signal_two && !ivm_board_has_pair(pe)) {
        if (ivm_ep_sync(IVM_SYNC_PUT, &map, req.sync.offset, (void *)addr, size, pe, &status)) {
            return status;
        }
        return ivm_call(IVM_MSG_PUT_SIGNAL, &req, sizeof(req), &rep, sizeof(rep), NULL);
    }
    /* Else the put is blocking: once it returns the bytes are in the
     * master, so the signal that follows cannot overtake them. */
    if (call && !ivm_ep_sync(IVM_SYNC_PUT, &map, req.sync.offset, (void *)addr, size, -1,
                             &status)) {
        status = ivm_call(IVM_MSG_SYNC, &req.sync, sizeof(req.sync), &rep, sizeof(rep), NULL);
    }
    if (call && status != IVM_SUCCESS) {
        return status;
    }
    if (ivm_board_signal(pe, &status)) {
        return status;
    }
    return ivm_call(IVM_MSG_SIGNAL_TO, &sig, sizeof(sig), &rep, sizeof(rep), NULL);
}

IVM_API ivmError_t ivmSyncGet(void *addr, size_t size)
{
    return ivm_sync("ivmSyncGet", IVM_SYNC_GET, addr, size);
}

IVM_API ivmError_t ivmSyncPutGroup(const void *addr, size_t size)
{
    return ivm_sync("ivmSyncPutGroup", IVM_SYNC_PUT_GROUP, addr, size);
}

IVM_API ivmError_t ivmSyncGetGroup(void *addr, size_t size)
{
    return ivm_sync("ivmSyncGetGroup", IVM_SYNC_GET_GROUP, addr, size);
}

IVM_API ivmError_t ivmHostPtr(const void *ref, void *host_ptr_out)
{
    ivm_map_t map;

    ivm_clear_error();
    IVM_CHECK_ENTERED();
    if (host_ptr_out == NULL || ivm_maps_lookup(ref, 0, &map) != IVM_SUCCESS) {
        IVM_FAIL(IVM_ERROR_INVALID_VALUE, "ivmHostPtr: %s",
                 host_ptr_out == NULL ? "host_ptr_out is NULL"
                                      : "ref is not inside an IVM mapping of this PE");
    }
    if (map.flags & IVM_MAP_GPU) {
        void *host = map.host + ((const char *)ref - map.ref);
        memcpy(host_ptr_out, &host, sizeof(void *));
    } else {
        memcpy(host_ptr_out, &ref, sizeof(void *));
    }
    return IVM_SUCCESS;
}
