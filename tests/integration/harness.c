#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <criterion/criterion.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "client.h"
#include "sock.h"
#include "status.h"

#ifndef IVMT_IVMD
#error "IVMT_IVMD (path of the ivmd binary) must be defined by the build"
#endif

extern char **environ;

double ivmt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ivmt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A growable string. */
typedef struct strbuf {
    char  *s;
    size_t len, cap;
} strbuf_t;

static void sb_addf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_addf(strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 0) + 64;
        b->s = realloc(b->s, b->cap);
        if (b->s == NULL) {
            abort();
        }
    }
}

static char *sb_take(strbuf_t *b)
{
    if (b->s == NULL) {
        return strdup("");
    }
    return b->s;
}

/* Whole contents of an fd from offset 0. */
static char *read_fd_all(int fd)
{
    strbuf_t b = {0};
    char chunk[8192];
    off_t off = 0;
    ssize_t n;

    sb_addf(&b, "%s", "");
    while ((n = pread(fd, chunk, sizeof(chunk), off)) > 0) {
        sb_addf(&b, "%.*s", (int)n, chunk);
        off += n;
    }
    return sb_take(&b);
}

static char *read_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *s;

    if (fd < 0) {
        return strdup("");
    }
    s = read_fd_all(fd);
    close(fd);
    return s;
}

/* The temporary directories and daemons this test process made, for a test
 * that ends in cr_skip_test: Criterion then runs no .fini (its teardown) but
 * does run exit handlers, so the first directory registers one that stops
 * the daemons still running and removes the directories still there. Only
 * in the process that made them (owner): a forked child that exits does not
 * take its parent's. */
#define IVMT_OWNED_MAX 64

static struct {
    pid_t owner;
    int   ndirs, ndaemons;
    char  dirs[IVMT_OWNED_MAX][IVMT_PATH_MAX];
    pid_t daemons[IVMT_OWNED_MAX];
} ivmt_owned;

static void ivmt_owned_cleanup(void)
{
    int status;

    if (ivmt_owned.owner != getpid()) {
        return;
    }
    for (int i = 0; i < ivmt_owned.ndaemons; ++i) {
        pid_t pid = ivmt_owned.daemons[i];
        /* Still an unreaped child of ours (not a reused pid): stop it. */
        if (waitpid(pid, &status, WNOHANG) != 0) {
            continue;
        }
        kill(pid, SIGTERM);
        for (int k = 0; k < 300 && waitpid(pid, &status, WNOHANG) == 0; ++k) {
            ivmt_sleep_ms(10);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    for (int i = 0; i < ivmt_owned.ndirs; ++i) {
        char dir[IVMT_PATH_MAX];
        /* A copy: ivmt_remove_dir clears the entry it is given. */
        snprintf(dir, sizeof(dir), "%s", ivmt_owned.dirs[i]);
        if (dir[0] != '\0') {
            ivmt_remove_dir(dir);
        }
    }
}

static void ivmt_owned_start(void)
{
    if (ivmt_owned.owner != getpid()) {
        memset(&ivmt_owned, 0, sizeof(ivmt_owned));
        ivmt_owned.owner = getpid();
        atexit(ivmt_owned_cleanup);
    }
}

static void ivmt_owned_daemon(pid_t pid)
{
    ivmt_owned_start();
    if (ivmt_owned.ndaemons < IVMT_OWNED_MAX) {
        ivmt_owned.daemons[ivmt_owned.ndaemons++] = pid;
    }
}

void ivmt_make_tmpdir(char *buf, size_t len)
{
    const char *base = getenv("TMPDIR");

    if (base == NULL || *base == '\0' || strlen(base) > 60) {
        base = "/tmp";
    }
    snprintf(buf, len, "%s/ivmt.XXXXXX", base);
    cr_assert_not_null(mkdtemp(buf), "mkdtemp(%s): %s", buf, strerror(errno));
    cr_assert_eq(chmod(buf, 0700), 0);
    ivmt_owned_start();
    for (int i = 0; i < IVMT_OWNED_MAX; ++i) {
        if (ivmt_owned.dirs[i][0] == '\0') {
            snprintf(ivmt_owned.dirs[i], sizeof(ivmt_owned.dirs[i]), "%s", buf);
            ivmt_owned.ndirs = i + 1 > ivmt_owned.ndirs ? i + 1 : ivmt_owned.ndirs;
            break;
        }
    }
}

void ivmt_remove_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    char path[IVMT_PATH_MAX * 2];

    if (ivmt_owned.owner == getpid()) {
        for (int i = 0; i < ivmt_owned.ndirs; ++i) {
            if (strcmp(ivmt_owned.dirs[i], dir) == 0) {
                ivmt_owned.dirs[i][0] = '\0';
            }
        }
    }
    if (dp == NULL) {
        return;
    }
    while ((de = readdir(dp)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (unlink(path) != 0 && errno == EISDIR) {
            ivmt_remove_dir(path);
        }
    }
    closedir(dp);
    rmdir(dir);
}

int ivmt_count_fds(pid_t pid)
{
    char path[64];
    DIR *dp;
    struct dirent *de;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    dp = opendir(path);
    if (dp == NULL) {
        return -1;
    }
    while ((de = readdir(dp)) != NULL) {
        if (de->d_name[0] != '.') {
            ++n;
        }
    }
    closedir(dp);
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *ivmt_shm_listing(void)
{
    DIR *dp = opendir("/dev/shm");
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0;
    strbuf_t b = {0};

    sb_addf(&b, "%s", "");
    if (dp == NULL) {
        return sb_take(&b);
    }
    while ((de = readdir(dp)) != NULL) {
        /* bxfi_*, bxf_arena_*: Criterion's own (BoxFort) test-worker
         * segments and arenas, of this or another test program;
         * vader_segment.*: Open MPI's shared memory, of MPI runs (the apps'
         * baselines) that may run beside a test. */
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            strncmp(de->d_name, "bxfi_", 5) == 0 ||
            strncmp(de->d_name, "bxf_arena_", 10) == 0 ||
            strncmp(de->d_name, "vader_segment.", 14) == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof(*names));
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(dp);
    if (n > 0) {
        qsort(names, n, sizeof(*names), cmp_str);
    }
    for (size_t i = 0; i < n; ++i) {
        sb_addf(&b, "%s\n", names[i]);
        free(names[i]);
    }
    free(names);
    return sb_take(&b);
}

char *ivmt_listing_added(const char *before, const char *now)
{
    strbuf_t b = {0};
    const char *line = now;

    sb_addf(&b, "%s", "");
    while (*line != '\0') {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *p = before;
        int found = 0;
        while (*p != '\0') {
            const char *pend = strchr(p, '\n');
            size_t plen = pend ? (size_t)(pend - p) : strlen(p);
            if (plen == len && strncmp(p, line, len) == 0) {
                found = 1;
                break;
            }
            p += plen + (pend ? 1 : 0);
        }
        if (!found) {
            sb_addf(&b, "/dev/shm/%.*s ", (int)len, line);
        }
        line += len + (end ? 1 : 0);
    }
    return sb_take(&b);
}

/* Read a /proc file of NUL-separated strings; returns its length, -1. */
static ssize_t read_proc_file(pid_t pid, const char *what, char *buf, size_t len)
{
    char path[64];
    ssize_t n, total = 0;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    while ((size_t)total < len - 1 && (n = read(fd, buf + total, len - 1 - (size_t)total)) > 0) {
        total += n;
    }
    close(fd);
    buf[total] = '\0';
    return total;
}

static pid_t proc_ppid(pid_t pid, char *state_p)
{
    char buf[1024];
    char *p;
    int ppid = -1;
    char state = '?';

    if (read_proc_file(pid, "stat", buf, sizeof(buf)) <= 0) {
        return -1;
    }
    p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    if (p == NULL || sscanf(p + 1, " %c %d", &state, &ppid) != 2) {
        return -1;
    }
    if (state_p != NULL) {
        *state_p = state;
    }
    return ppid;
}

int ivmt_find_procs(pid_t parent, pid_t exclude, const char *const *env_entries,
                    const char *cmd_substr, pid_t *pids, int max)
{
    static char buf[1 << 18];
    DIR *dp = opendir("/proc");
    struct dirent *de;
    pid_t self = getpid();
    int n = 0;

    cr_assert_not_null(dp);
    while ((de = readdir(dp)) != NULL) {
        pid_t pid;
        int hit = 0;
        if (!isdigit((unsigned char)de->d_name[0])) {
            continue;
        }
        pid = (pid_t)atoi(de->d_name);
        if (pid == self || (exclude > 0 && pid == exclude)) {
            continue;
        }
        if (parent > 0 && proc_ppid(pid, NULL) == parent) {
            hit = 1;
        }
        if (!hit && env_entries != NULL) {
            ssize_t len = read_proc_file(pid, "environ", buf, sizeof(buf));
            for (ssize_t off = 0; len > 0 && off < len && !hit;) {
                const char *entry = buf + off;
                for (const char *const *e = env_entries; *e != NULL; ++e) {
                    if (strcmp(entry, *e) == 0) {
                        hit = 1;
                        break;
                    }
                }
                off += (ssize_t)strlen(entry) + 1;
            }
        }
        if (!hit && cmd_substr != NULL) {
            ssize_t len = read_proc_file(pid, "cmdline", buf, sizeof(buf));
            for (ssize_t i = 0; i < len; ++i) {
                if (buf[i] == '\0') {
                    buf[i] = ' ';
                }
            }
            if (len > 0 && strstr(buf, cmd_substr) != NULL) {
                hit = 1;
            }
        }
        if (hit && n < max) {
            pids[n++] = pid;
        }
    }
    closedir(dp);
    return n;
}

char *ivmt_describe_procs(const pid_t *pids, int n)
{
    strbuf_t b = {0};
    char cmd[512];
    char state = '?';

    sb_addf(&b, "%s", "");
    for (int i = 0; i < n; ++i) {
        ssize_t len = read_proc_file(pids[i], "cmdline", cmd, sizeof(cmd));
        pid_t ppid = proc_ppid(pids[i], &state);
        for (ssize_t k = 0; k < len; ++k) {
            if (cmd[k] == '\0') {
                cmd[k] = ' ';
            }
        }
        sb_addf(&b, "[pid %d ppid %d state %c: %s] ", (int)pids[i], (int)ppid, state,
                len > 0 ? cmd : "?");
    }
    return sb_take(&b);
}

/* Whether pid is still there. An orphaned zombie (its parent is init) is
 * not: it has ended, and collecting it is init's job, which some containers'
 * init does late or never. A zombie whose parent lives still counts (a daemon
 * that does not reap its children is a leak). */
static int ivmt_pid_runs(pid_t pid)
{
    char path[64], buf[256], *close_paren, state;
    int ppid = 0;
    FILE *f;
    size_t n;

    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');
    if (close_paren == NULL || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) {
        return 1;
    }
    return !((state == 'Z' || state == 'X') && ppid == 1);
}

int ivmt_wait_pids_gone(const pid_t *pids, int n, double timeout_s)
{
    double deadline = ivmt_now() + timeout_s;
    int left;

    for (;;) {
        left = 0;
        for (int i = 0; i < n; ++i) {
            if (pids[i] > 0 && ivmt_pid_runs(pids[i])) {
                ++left;
            }
        }
        if (left == 0 || ivmt_now() > deadline) {
            break;
        }
        ivmt_sleep_ms(20);
    }
    if (left > 0) {
        for (int i = 0; i < n; ++i) {
            if (pids[i] > 0) {
                kill(pids[i], SIGKILL);
            }
        }
    }
    return left;
}

int ivmt_parse_pids(const char *out, const char *key, pid_t *pids, int max)
{
    const char *p = out;
    size_t klen = strlen(key);
    int n = 0;

    while ((p = strstr(p, key)) != NULL) {
        if ((p == out || p[-1] == '\n') && p[klen] == ' ') {
            char *end;
            p += klen;
            while (n < max) {
                long v = strtol(p, &end, 10);
                if (end == p) {
                    break;
                }
                pids[n++] = (pid_t)v;
                p = end;
            }
            return n;
        }
        p += klen;
    }
    return 0;
}

/* Environment for a child: ours minus IVM_* (but IVM_PE_POOL and
 * IVM_TRANSPORT, which ctest sets for the _pool and _ucx runs of the suites)
 * minus overridden names, plus env. */
static char **build_env(const char *const *env)
{
    size_t n = 0, k = 0, extra = 0;
    char **envp;

    while (environ[n] != NULL) {
        ++n;
    }
    while (env != NULL && env[extra] != NULL) {
        ++extra;
    }
    envp = calloc(n + extra + 1, sizeof(*envp));
    cr_assert_not_null(envp);
    for (size_t i = 0; i < n; ++i) {
        const char *e = environ[i];
        const char *eq = strchr(e, '=');
        size_t nlen = eq ? (size_t)(eq - e) : strlen(e);
        int drop = strncmp(e, "IVM_", 4) == 0 && strncmp(e, "IVM_PE_POOL=", 12) != 0 &&
                   strncmp(e, "IVM_TRANSPORT=", 14) != 0;
        for (size_t j = 0; !drop && j < extra; ++j) {
            const char *x = env[j];
            const char *xeq = strchr(x, '=');
            size_t xlen = xeq ? (size_t)(xeq - x) : strlen(x);
            if (xlen == nlen && strncmp(x, e, nlen) == 0) {
                drop = 1;
            }
        }
        if (!drop) {
            envp[k++] = (char *)e;
        }
    }
    for (size_t j = 0; j < extra; ++j) {
        if (strchr(env[j], '=') != NULL) {
            envp[k++] = (char *)env[j];
        }
    }
    envp[k] = NULL;
    return envp;
}

/* An unlinked temporary file: returns a read/write fd; *wfd_p an O_APPEND
 * write fd for a child. */
static int capture_file(int *wfd_p)
{
    char path[] = "/tmp/ivmt-capture.XXXXXX";
    int fd = mkostemp(path, O_CLOEXEC);

    cr_assert_geq(fd, 0, "mkostemp: %s", strerror(errno));
    *wfd_p = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    cr_assert_geq(*wfd_p, 0);
    unlink(path);
    return fd;
}

/* In a forked child: standard streams, death signal, no inherited fds. */
static void child_setup(pid_t parent, int in_fd, int out_fd, int err_fd, int keep_fd)
{
    sigset_t none;

    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) {
        _exit(127);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; ++s) {
        if (s != SIGKILL && s != SIGSTOP) {
            signal(s, SIG_DFL);
        }
    }
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
        _exit(126);
    }
    if (keep_fd >= 0) {
        if (keep_fd != 3 && dup2(keep_fd, 3) < 0) {
            _exit(126);
        }
        fcntl(3, F_SETFD, 0);
        close_range(4, ~0u, 0);
    } else {
        close_range(3, ~0u, 0);
    }
}

void ivmt_start(const char *const *argv, const char *const *env, ivmt_proc_t *p)
{
    int out_w, err_w, devnull;
    char **envp = build_env(env);
    pid_t parent = getpid();

    memset(p, 0, sizeof(*p));
    p->out_r = capture_file(&out_w);
    p->err_r = capture_file(&err_w);
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(devnull, 0);
    fflush(NULL);
    p->start = ivmt_now();
    p->pid = fork();
    cr_assert_geq(p->pid, 0, "fork: %s", strerror(errno));
    if (p->pid == 0) {
        child_setup(parent, devnull, out_w, err_w, -1);
        execve(argv[0], (char *const *)argv, envp);
        fprintf(stderr, "ivmt: cannot exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(out_w);
    close(err_w);
    close(devnull);
    free(envp);
}

char *ivmt_proc_output(const ivmt_proc_t *p)
{
    return read_fd_all(p->out_r);
}

int ivmt_wait_output(const ivmt_proc_t *p, const char *text, double timeout_s)
{
    double deadline = ivmt_now() + timeout_s;

    for (;;) {
        char *out = read_fd_all(p->out_r);
        int found = strstr(out, text) != NULL;
        free(out);
        if (found) {
            return 1;
        }
        if (ivmt_now() > deadline || waitpid(p->pid, NULL, WNOHANG | WNOWAIT) == p->pid) {
            return 0;
        }
        ivmt_sleep_ms(10);
    }
}

void ivmt_finish(ivmt_proc_t *p, double timeout_s, ivmt_result_t *r)
{
    double deadline = ivmt_now() + timeout_s;
    int status = 0;

    memset(r, 0, sizeof(*r));
    for (;;) {
        pid_t w = waitpid(p->pid, &status, WNOHANG);
        if (w == p->pid) {
            break;
        }
        if (w < 0 && errno != EINTR) {
            cr_assert_fail("waitpid(%d): %s", (int)p->pid, strerror(errno));
        }
        if (ivmt_now() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            r->timed_out = 1;
            break;
        }
        ivmt_sleep_ms(2);
    }
    r->seconds = ivmt_now() - p->start;
    if (WIFEXITED(status)) {
        r->exited = 1;
        r->code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r->signo = WTERMSIG(status);
    }
    r->out = read_fd_all(p->out_r);
    r->err = read_fd_all(p->err_r);
    close(p->out_r);
    close(p->err_r);
    p->pid = 0;
}

void ivmt_run(const char *const *argv, const char *const *env, double timeout_s,
              ivmt_result_t *r)
{
    ivmt_proc_t p;

    ivmt_start(argv, env, &p);
    ivmt_finish(&p, timeout_s, r);
}

/* argv and env of a root PE of daemon d, in caller-provided arrays. */
static void pe_argv_env(const ivmt_daemon_t *d, const char *prog, const char *scenario,
                        const char *const *args, const char *const *env, const char **argv,
                        const char **envv, char *sock_env, size_t sock_env_len)
{
    int n = 0, m = 0;

    argv[n++] = prog;
    argv[n++] = scenario;
    while (args != NULL && *args != NULL && n < 31) {
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    snprintf(sock_env, sock_env_len, "IVM_SOCKET=%s", d->sock);
    envv[m++] = sock_env;
    envv[m++] = "IVM_AUTOSTART=0";
    while (env != NULL && *env != NULL && m < 31) {
        envv[m++] = *env++;
    }
    envv[m] = NULL;
}

void ivmt_start_pe(const ivmt_daemon_t *d, const char *prog, const char *scenario,
                   const char *const *args, const char *const *env, ivmt_proc_t *p)
{
    const char *argv[32];
    const char *envv[32];
    char sock_env[IVMT_PATH_MAX + 64];

    pe_argv_env(d, prog, scenario, args, env, argv, envv, sock_env, sizeof(sock_env));
    ivmt_start(argv, envv, p);
}

void ivmt_run_pe(const ivmt_daemon_t *d, const char *prog, const char *scenario,
                 const char *const *args, const char *const *env, double timeout_s,
                 ivmt_result_t *r)
{
    ivmt_proc_t p;

    ivmt_start_pe(d, prog, scenario, args, env, &p);
    ivmt_finish(&p, timeout_s, r);
}

void ivmt_result_free(ivmt_result_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *ivmt_daemon_log_tail(const ivmt_daemon_t *d, size_t max)
{
    char *all = read_file(d->log);
    size_t len = strlen(all);

    if (len > max) {
        memmove(all, all + len - max, max + 1);
    }
    return all;
}

char *ivmt_describe(const ivmt_daemon_t *d, const ivmt_result_t *r)
{
    strbuf_t b = {0};
    size_t olen = strlen(r->out), elen = strlen(r->err);
    const size_t keep = 3000;

    if (r->timed_out) {
        sb_addf(&b, "TIMED OUT after %.1f s (killed by the harness)", r->seconds);
    } else if (r->exited) {
        sb_addf(&b, "exit code %d after %.2f s", r->code, r->seconds);
    } else {
        sb_addf(&b, "killed by signal %d (%s) after %.2f s", r->signo, strsignal(r->signo),
                r->seconds);
    }
    sb_addf(&b, "\n--- stdout ---\n%s", olen > keep ? r->out + olen - keep : r->out);
    sb_addf(&b, "\n--- stderr ---\n%s", elen > keep ? r->err + elen - keep : r->err);
    if (d != NULL) {
        char *log = ivmt_daemon_log_tail(d, 2000);
        sb_addf(&b, "\n--- ivmd log (tail) ---\n%s", log);
        free(log);
    }
    return sb_take(&b);
}

/* Some line of text starts with prefix. */
static int has_line(const char *text, const char *prefix)
{
    size_t len = strlen(prefix);

    for (const char *p = text; (p = strstr(p, prefix)) != NULL; p += len) {
        if (p == text || p[-1] == '\n') {
            return 1;
        }
    }
    return 0;
}

void ivmt_expect_pe_ok(const ivmt_daemon_t *d, const ivmt_result_t *r, const char *scenario)
{
    char okline[128];
    char *why;

    snprintf(okline, sizeof(okline), "OK %s\n", scenario);
    if (!r->timed_out && r->exited && r->code == 0 && has_line(r->out, okline) &&
        !has_line(r->out, "FAIL ") && !has_line(r->err, "FAIL ")) {
        return;
    }
    why = ivmt_describe(d, r);
    cr_assert_fail("scenario '%s' did not pass (expected exit 0, \"OK %s\", no FAIL): %s",
                   scenario, scenario, why);
    free(why);
}

int ivmt_connect(const ivmt_daemon_t *d)
{
    int fd = ivm_sock_connect(d->sock);
    struct timeval tv = {5, 0};

    cr_assert_geq(fd, 0, "cannot connect to ivmd at %s: %s", d->sock,
                  ivm_status_string(fd));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

int ivmt_info(const char *sock, ivm_msg_info_rep_t *info, const char **why_p)
{
    static ivm_client_result_t res; /* *why_p points into it until the next call */
    ivmError_t status = ivm_client_info(sock, IVMT_INFO_WAIT_MS, info, &res);

    if (status == IVM_SUCCESS) {
        return 0;
    }
    if (res.detail[0] == '\0') {
        snprintf(res.detail, sizeof(res.detail), "INFO reply status is %s",
                 ivm_status_string(status));
    }
    *why_p = res.detail;
    return -1;
}

/* IVMT_DAEMON_WRAPPER (opt-in, e.g. "valgrind --error-exitcode=99
 * --leak-check=full --errors-for-leak-kinds=definite -q"): the words the
 * daemons the harness starts are run under. Puts them at argv[0..) and
 * returns how many (at most max). ivmd's errors then fail the teardown
 * check of its exit status. */
/* ---------------------------------------------------------------- cgroups */

int ivmt_cgroup_daemon_dir(pid_t pid, char *buf, size_t len)
{
    ivm_cgroup_root_t root;
    char err[320], top[IVM_CGROUP_PATH_MAX], prefix[64];
    struct dirent *de;
    int found = -1;
    DIR *dp;

    if (ivm_cgroup_root_find(&root, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_cgroup_path(&root, IVM_CGROUP_TOP, NULL, top, sizeof(top)) != IVM_SUCCESS ||
        (dp = opendir(top)) == NULL) {
        return -1;
    }
    snprintf(prefix, sizeof(prefix), "ivmd-%d-", (int)pid);
    while (found != 0 && (de = readdir(dp)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
            snprintf(buf, len, "%s/%s", IVM_CGROUP_TOP, de->d_name) < (int)len) {
            found = 0;
        }
    }
    closedir(dp);
    return found;
}

/* Subdirectories of dir (absolute) as "<base>name" lines, recursively. */
static void cgroup_list(FILE *out, const char *dir, const char *base, int depth)
{
    char sub[IVM_CGROUP_PATH_MAX + 256], name[IVM_CGROUP_PATH_MAX];
    struct dirent *de;
    DIR *dp = opendir(dir);

    while (dp != NULL && depth < 8 && (de = readdir(dp)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.') {
            continue;
        }
        snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
        snprintf(name, sizeof(name), "%s%s", base, de->d_name);
        fprintf(out, "%s\n", name);
        snprintf(name + strlen(name), sizeof(name) - strlen(name), "/");
        cgroup_list(out, sub, name, depth + 1);
    }
    if (dp != NULL) {
        closedir(dp);
    }
}

char *ivmt_cgroup_listing(const char *rel)
{
    ivm_cgroup_root_t root;
    char err[320], dir[IVM_CGROUP_PATH_MAX];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f, "open_memstream: %s", strerror(errno));
    if (ivm_cgroup_root_find(&root, err, sizeof(err)) == IVM_SUCCESS &&
        ivm_cgroup_path(&root, rel, NULL, dir, sizeof(dir)) == IVM_SUCCESS) {
        cgroup_list(f, dir, "", 0);
    }
    fclose(f);
    return text;
}

char *ivmt_cgroup_stale(void)
{
    ivm_cgroup_root_t root;
    char err[320], top[IVM_CGROUP_PATH_MAX];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct dirent *de;
    DIR *dp = NULL;

    cr_assert_not_null(f, "open_memstream: %s", strerror(errno));
    if (ivm_cgroup_root_find(&root, err, sizeof(err)) == IVM_SUCCESS &&
        ivm_cgroup_path(&root, IVM_CGROUP_TOP, NULL, top, sizeof(top)) == IVM_SUCCESS) {
        dp = opendir(top);
    }
    while (dp != NULL && (de = readdir(dp)) != NULL) {
        if (de->d_type == DT_DIR && (ivm_cgroup_owner_stale("ivmd", de->d_name) == 1 ||
                                     ivm_cgroup_owner_stale("devrun", de->d_name) == 1)) {
            fprintf(f, "%s/%s\n", IVM_CGROUP_TOP, de->d_name);
        }
    }
    if (dp != NULL) {
        closedir(dp);
    }
    fclose(f);
    return text;
}

int ivmt_cgroup_remove(const char *rel)
{
    ivm_cgroup_root_t root;
    char err[320];

    if (ivm_cgroup_root_find(&root, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_cgroup_destroy(&root, rel, err, sizeof(err)) != IVM_SUCCESS) {
        return -1;
    }
    ivm_cgroup_top_remove(&root);
    return 0;
}

int ivmt_cgroup_writable(char *why, size_t len)
{
    ivm_cgroup_root_t root;
    char err[320], rel[128];

    if (ivm_cgroup_root_find(&root, err, sizeof(err)) != IVM_SUCCESS ||
        ivm_cgroup_owner_dir("ivmt", 0, rel, sizeof(rel)) != IVM_SUCCESS ||
        ivm_cgroup_create(&root, rel, 25, err, sizeof(err)) != IVM_SUCCESS) {
        snprintf(why, len, "%s", err);
        return 0;
    }
    ivm_cgroup_destroy(&root, rel, err, sizeof(err));
    ivm_cgroup_top_remove(&root);
    return 1;
}

static int cgroup_exists(const char *rel)
{
    ivm_cgroup_root_t root;
    char err[320], dir[IVM_CGROUP_PATH_MAX];

    return ivm_cgroup_root_find(&root, err, sizeof(err)) == IVM_SUCCESS &&
           ivm_cgroup_path(&root, rel, NULL, dir, sizeof(dir)) == IVM_SUCCESS &&
           access(dir, F_OK) == 0;
}

/* Whether text holds line as one of its lines. */
static int has_whole_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    const char *p;

    for (p = text; p != NULL && (p = strstr(p, line)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) {
            return 1;
        }
    }
    return 0;
}

/* The daemon's cgroups of jobs are gone once its jobs are. */
static void cgroup_check_jobs_gone(const ivmt_daemon_t *d, strbuf_t *problems)
{
    char dir[IVM_CGROUP_PATH_MAX];
    char *left;

    if (ivmt_cgroup_daemon_dir(d->pid, dir, sizeof(dir)) != 0) {
        return;
    }
    left = ivmt_cgroup_listing(dir);
    if (*left != '\0') {
        sb_addf(problems, "\n* cgroups left in %s after the job:\n%s", dir, left);
    }
    free(left);
}

int ivmt_daemon_wrapper(const char **argv, int max)
{
    static char words[1024];
    const char *env = getenv("IVMT_DAEMON_WRAPPER");
    char *save = NULL, *w;
    int n = 0;

    if (env == NULL || *env == '\0') {
        return 0;
    }
    snprintf(words, sizeof(words), "%s", env);
    for (w = strtok_r(words, " \t", &save); w != NULL && n < max;
         w = strtok_r(NULL, " \t", &save)) {
        argv[n++] = w;
    }
    return n;
}

/* ivmd's readiness line on fd within 10 s, then EOF (it closes the fd)
 * within 5 s; otherwise kill it and fail with its log. */
static void ivmt_daemon_wait_ready(ivmt_daemon_t *d, int fd)
{
    ivm_ready_t ready;
    ivmError_t rc;
    const char *what;

    ivm_ready_init(&ready, fd);
    rc = ivm_ready_wait(&ready, 10000, -1);
    what = rc == IVM_ERROR_TIMEOUT     ? "10 s time-out"
           : rc == IVM_ERROR_NO_DAEMON ? "EOF without a byte"
                                       : "poll or read failed";
    if (rc == IVM_SUCCESS) {
        rc   = ivm_ready_wait_eof(&ready, 5000);
        what = "the ready fd was not closed within 5 s";
    }
    if (rc != IVM_SUCCESS) {
        char *log = ivmt_daemon_log_tail(d, 3000);
        pid_t pid = d->pid;
        int status = 0;
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        d->pid = 0;
        close(fd);
        cr_assert_fail("ivmd did not signal readiness on --ready-fd (%s; exit status 0x%x)."
                       "\n--- ivmd log ---\n%s",
                       what, status, log);
    }
}

void ivmt_daemon_start(ivmt_daemon_t *d, const char *const *extra_args)
{
    const char *argv[56];
    int pipefd[2], logfd, devnull, n = 0;
    char **envp = build_env(NULL);
    pid_t parent = getpid();
    const char *why;
    ivm_msg_info_rep_t info;

    memset(d, 0, sizeof(*d));
    ivmt_make_tmpdir(d->dir, sizeof(d->dir));
    snprintf(d->sock, sizeof(d->sock), "%s/ivmd.sock", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/ivmd.log", d->dir);
    d->shm_baseline = ivmt_shm_listing();
    cr_assert_eq(pipe2(pipefd, O_CLOEXEC), 0);
    logfd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(logfd >= 0 && devnull >= 0);

    n = ivmt_daemon_wrapper(argv, 16);
    argv[n++] = IVMT_IVMD;
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--ready-fd";
    argv[n++] = "3";
    while (extra_args != NULL && *extra_args != NULL && n < 54) {
        argv[n++] = *extra_args++;
    }
    argv[n] = NULL;
    fflush(NULL);
    d->pid = fork();
    cr_assert_geq(d->pid, 0);
    if (d->pid == 0) {
        /* ivmd does not daemonize: give it its own session as its users do. */
        setsid();
        child_setup(parent, devnull, logfd, logfd, pipefd[1]);
        execvpe(argv[0], (char *const *)argv, envp);
        fprintf(stderr, "ivmt: cannot exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    free(envp);
    ivmt_owned_daemon(d->pid);
    close(pipefd[1]);
    close(logfd);
    close(devnull);

    ivmt_daemon_wait_ready(d, pipefd[0]);
    close(pipefd[0]);
    /* Baseline now, before any client connects. */
    d->fd_baseline = ivmt_count_fds(d->pid);
    cr_assert_gt(d->fd_baseline, 0, "cannot read /proc/%d/fd", (int)d->pid);
    {
        struct stat st;
        cr_assert_eq(stat(d->sock, &st), 0, "socket %s missing after readiness", d->sock);
        cr_assert(S_ISSOCK(st.st_mode), "%s is not a socket", d->sock);
    }
    if (ivmt_info(d->sock, &info, &why) != 0) {
        char *log = ivmt_daemon_log_tail(d, 3000);
        cr_assert_fail("INFO on a fresh ivmd failed: %s\n--- ivmd log ---\n%s", why, log);
    }
    cr_assert_eq(info.pid, (uint32_t)d->pid, "INFO reports pid %u, ivmd is %d", info.pid,
                 (int)d->pid);
    cr_assert_eq(info.jobs, 0);
    cr_assert_eq(info.pes, 0);
    cr_assert_eq(info.objects, 0);
}

static void daemon_kill_leftovers(ivmt_daemon_t *d, strbuf_t *problems)
{
    pid_t pids[64];
    char sock_env[IVMT_PATH_MAX + 64];
    const char *entries[2] = {sock_env, NULL};
    double deadline = ivmt_now() + 3.0;
    int n;

    snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s", d->sock);
    for (;;) {
        n = ivmt_find_procs(d->pid, d->pid, entries, NULL, pids, 64);
        /* The daemon's own GPU daemon is no leftover while ivmd runs; it
         * must be gone once ivmd exits (daemon_stop checks). */
        for (int i = 0; i < n; ++i) {
            char comm[64];
            if (proc_ppid(pids[i], NULL) == d->pid &&
                read_proc_file(pids[i], "comm", comm, sizeof(comm)) > 0 &&
                strncmp(comm, "ivm-gpud", 8) == 0) {
                d->gpud_pid = pids[i];
                pids[i--] = pids[--n];
            }
        }
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
        ivmt_sleep_ms(20);
    }
    if (n > 0) {
        char *desc = ivmt_describe_procs(pids, n);
        if (problems != NULL) {
            sb_addf(problems, "\n* %d process(es) of the daemon or with our IVM_SOCKET left "
                              "3 s after the job: %s",
                    n, desc);
        }
        free(desc);
        for (int i = 0; i < n; ++i) {
            kill(pids[i], SIGKILL);
        }
    }
}

/* SIGTERM the daemon: it must exit 0 within 5 s, remove its socket and leave
 * no process with our IVM_SOCKET. Problems are appended to `problems`. */
static void daemon_stop(ivmt_daemon_t *d, strbuf_t *problems)
{
    char cgdir[IVM_CGROUP_PATH_MAX];
    int have_cg = ivmt_cgroup_daemon_dir(d->pid, cgdir, sizeof(cgdir)) == 0;
    double deadline;
    int status = 0;
    pid_t w = 0;

    kill(d->pid, SIGTERM);
    deadline = ivmt_now() + 5.0;
    while ((w = waitpid(d->pid, &status, WNOHANG)) == 0 && ivmt_now() < deadline) {
        ivmt_sleep_ms(10);
    }
    if (w != d->pid) {
        sb_addf(problems, "\n* ivmd did not exit within 5 s of SIGTERM (killed)");
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFSIGNALED(status)) {
            sb_addf(problems, "\n* ivmd died of signal %d (%s) after SIGTERM",
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
        } else {
            sb_addf(problems, "\n* ivmd exited %d after SIGTERM, expected 0",
                    WEXITSTATUS(status));
        }
    }
    d->pid = 0;
    if (access(d->sock, F_OK) == 0) {
        sb_addf(problems, "\n* socket %s still exists after ivmd exited", d->sock);
    }
    if (have_cg && cgroup_exists(cgdir)) {
        sb_addf(problems, "\n* the daemon's cgroup directory %s is left after it exited",
                cgdir);
        ivmt_cgroup_remove(cgdir);
    }
    if (d->gpud_pid > 0) {
        /* ivmd reaps its ivm-gpud before it exits. */
        if (kill(d->gpud_pid, 0) == 0 || errno != ESRCH) {
            sb_addf(problems, "\n* ivm-gpud (pid %d) still exists after ivmd exited",
                    (int)d->gpud_pid);
            kill(d->gpud_pid, SIGKILL);
        }
        d->gpud_pid = 0;
    }
    /* Processes that only show up now (the daemon did not kill them). */
    {
        pid_t pids[64];
        char sock_env[IVMT_PATH_MAX + 64];
        const char *entries[2] = {sock_env, NULL};
        int n;
        snprintf(sock_env, sizeof(sock_env), "IVM_SOCKET=%s", d->sock);
        for (deadline = ivmt_now() + 2.0;; ivmt_sleep_ms(20)) {
            n = ivmt_find_procs(0, 0, entries, NULL, pids, 64);
            /* our own children (root PEs) are the test's to collect */
            for (int i = 0; i < n; ++i) {
                if (proc_ppid(pids[i], NULL) == getpid()) {
                    pids[i--] = pids[--n];
                }
            }
            if (n == 0 || ivmt_now() > deadline) {
                break;
            }
        }
        if (n > 0) {
            char *desc = ivmt_describe_procs(pids, n);
            sb_addf(problems, "\n* process(es) with our IVM_SOCKET alive after ivmd exited: %s",
                    desc);
            free(desc);
            for (int i = 0; i < n; ++i) {
                kill(pids[i], SIGKILL);
            }
        }
    }
}

/* The stand-in (tests/cudastub) reports each broken CUDA driver contract of
 * ivm-gpud, whose output is the daemon's log, on a "cudastub:" line. */
static void cudastub_check_log(const ivmt_daemon_t *d, strbuf_t *problems)
{
    char *log, *at;

    if (!ivmt_cudastub() || (log = read_file(d->log)) == NULL) {
        return;
    }
    at = strstr(log, "cudastub:");
    if (at != NULL) {
        sb_addf(problems, "\n* ivm-gpud broke a CUDA driver contract: %.600s", at);
    }
    free(log);
}

void ivmt_daemon_finish(ivmt_daemon_t *d)
{
    strbuf_t problems = {0};
    ivm_msg_info_rep_t info;
    const char *why = NULL;
    double deadline;
    int ok = 0, fds = -1;
    char *shm_now, *added;

    cr_assert_gt(d->pid, 0, "daemon not running");
    sb_addf(&problems, "%s", "");

    /* 1. The job is gone from the daemon. */
    deadline = ivmt_now() + 3.0;
    for (;;) {
        ok = ivmt_info(d->sock, &info, &why) == 0;
        if (ok && info.jobs == 0 && info.pes == 0 && info.objects == 0 && info.shm_bytes == 0 &&
            info.conns <= 1) {
            break;
        }
        if (ivmt_now() > deadline) {
            if (!ok) {
                sb_addf(&problems, "\n* INFO failed at teardown: %s", why);
            } else {
                sb_addf(&problems,
                        "\n* the daemon still holds state 3 s after the job ended: jobs %u, "
                        "PEs %u, objects %u, shm bytes %llu, connections %u (1 is ours)",
                        info.jobs, info.pes, info.objects, (unsigned long long)info.shm_bytes,
                        info.conns);
            }
            break;
        }
        ivmt_sleep_ms(20);
    }

    /* 1b. Its cgroups of jobs (CPU share devices) are gone. */
    cgroup_check_jobs_gone(d, &problems);

    /* 2. No process left. */
    daemon_kill_leftovers(d, &problems);

    /* 3. The daemon's fds back to the baseline. */
    deadline = ivmt_now() + 3.0;
    for (;;) {
        fds = ivmt_count_fds(d->pid);
        if (fds == d->fd_baseline || ivmt_now() > deadline) {
            break;
        }
        ivmt_sleep_ms(20);
    }
    if (fds != d->fd_baseline) {
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "/proc/%d/fd", (int)d->pid);
        sb_addf(&problems, "\n* the daemon has %d open fds, %d when it became ready", fds,
                d->fd_baseline);
        {
            DIR *dp = opendir(cmd);
            struct dirent *de;
            char link[512], path[600];
            while (dp != NULL && (de = readdir(dp)) != NULL) {
                ssize_t len;
                if (de->d_name[0] == '.') {
                    continue;
                }
                snprintf(path, sizeof(path), "%s/%s", cmd, de->d_name);
                len = readlink(path, link, sizeof(link) - 1);
                link[len > 0 ? len : 0] = '\0';
                sb_addf(&problems, " [%s -> %s]", de->d_name, link);
            }
            if (dp != NULL) {
                closedir(dp);
            }
        }
    }

    /* 4. /dev/shm unchanged. */
    shm_now = ivmt_shm_listing();
    added = ivmt_listing_added(d->shm_baseline, shm_now);
    if (*added != '\0') {
        sb_addf(&problems, "\n* new /dev/shm entries: %s", added);
    }
    free(shm_now);
    free(added);

    /* 5. SIGTERM: exit 0, socket removed, nothing left. */
    daemon_stop(d, &problems);

    /* 6. The CUDA stand-in's runs: ivm-gpud broke no driver contract. */
    cudastub_check_log(d, &problems);

    if (problems.len > 0) {
        char *log = ivmt_daemon_log_tail(d, 3000);
        char *msg = sb_take(&problems);
        ivmt_remove_dir(d->dir);
        free(d->shm_baseline);
        d->shm_baseline = NULL;
        cr_assert_fail("teardown checks failed:%s\n--- ivmd log (tail) ---\n%s", msg, log);
    }
    free(problems.s);
    ivmt_remove_dir(d->dir);
    free(d->shm_baseline);
    d->shm_baseline = NULL;
}

void ivmt_daemon_terminate(ivmt_daemon_t *d)
{
    strbuf_t problems = {0};

    cr_assert_gt(d->pid, 0, "daemon not running");
    sb_addf(&problems, "%s", "");
    daemon_stop(d, &problems);
    if (problems.len > 0) {
        char *log = ivmt_daemon_log_tail(d, 3000);
        char *msg = sb_take(&problems);
        ivmt_remove_dir(d->dir);
        cr_assert_fail("SIGTERM with a job running:%s\n--- ivmd log (tail) ---\n%s", msg, log);
    }
    free(problems.s);
    ivmt_remove_dir(d->dir);
    free(d->shm_baseline);
    d->shm_baseline = NULL;
}

void ivmt_daemon_abandon(ivmt_daemon_t *d)
{
    char cgdir[IVM_CGROUP_PATH_MAX];
    int status;
    double deadline;

    if (d->pid > 0) {
        int have_cg = ivmt_cgroup_daemon_dir(d->pid, cgdir, sizeof(cgdir)) == 0;
        daemon_kill_leftovers(d, NULL);
        kill(d->pid, SIGTERM);
        deadline = ivmt_now() + 3.0;
        while (waitpid(d->pid, &status, WNOHANG) == 0 && ivmt_now() < deadline) {
            ivmt_sleep_ms(10);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &status, 0);
        d->pid = 0;
        if (have_cg) {
            ivmt_cgroup_remove(cgdir); /* gone already unless it was SIGKILLed */
        }
    }
    if (d->dir[0] != '\0') {
        ivmt_remove_dir(d->dir);
        d->dir[0] = '\0';
    }
    free(d->shm_baseline);
    d->shm_baseline = NULL;
}

ivmt_daemon_t ivmt_d;

void ivmt_fixture_start(void)
{
    ivmt_daemon_start(&ivmt_d, NULL);
}

void ivmt_fixture_stop(void)
{
    ivmt_daemon_abandon(&ivmt_d);
}

void ivmt_scenario(const char *prog, const char *scenario, const char *const *args,
                   const char *const *env, double timeout_s)
{
    ivmt_result_t r;

    ivmt_run_pe(&ivmt_d, prog, scenario, args, env, timeout_s, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, scenario);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

void ivmt_launch_start(const char *launcher, const char *const *args, ivmt_launch_t *c)
{
    ivmt_launch_start_env(launcher, args, NULL, c);
}

void ivmt_launch_start_env(const char *launcher, const char *const *args,
                           const char *const *extra, ivmt_launch_t *c)
{
    const char *env[16] = {c->dir_env, "XDG_RUNTIME_DIR"};
    const char *argv[32];
    int argc = 0, nenv = 2;

    while (extra != NULL && *extra != NULL) {
        cr_assert(nenv < 15, "ivmt_launch_start_env: more than 13 variables");
        env[nenv++] = *extra++;
    }
    env[nenv] = NULL;

    ivmt_make_tmpdir(c->dir, sizeof(c->dir));
    snprintf(c->dir_env, sizeof(c->dir_env), "IVM_SOCKET_DIR=%s", c->dir);
    argv[argc++] = launcher;
    while (*args != NULL && argc < 31) {
        argv[argc++] = *args++;
    }
    argv[argc] = NULL;
    c->cg_stale = ivmt_cgroup_stale();
    ivmt_start(argv, env, &c->proc);
}

/* The entries of dir, "name (type)" per line (malloc'd, "" if empty). */
static char *ivmt_dir_entries(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f, "open_memstream: %s", strerror(errno));
    if (dp != NULL) {
        while ((de = readdir(dp)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
                continue;
            }
            fprintf(f, "%s/%s (%s)\n", dir, de->d_name,
                    de->d_type == DT_DIR ? "directory" :
                    de->d_type == DT_SOCK ? "socket" : "file");
        }
        closedir(dp);
    }
    fclose(f);
    return text;
}

/* 5, or IVMT_LEFTOVER_GRACE_S: a PE's exit under the sanitizers runs the
 * leak checker, which takes seconds on a loaded machine. */
double ivmt_leftover_grace_s(void)
{
    const char *s = getenv("IVMT_LEFTOVER_GRACE_S");
    double v      = s != NULL ? atof(s) : 0.0;

    return v > 0.0 ? v : 5.0;
}

/* What leftover processes are doing, for the failure message: each one's
 * IVM_PE_ID, kernel wait channel and, where gdb is installed, its threads'
 * stacks (the first four processes; taken before they are killed). */
static char *ivmt_describe_stacks(const pid_t *pids, int n)
{
    strbuf_t b = {0};
    char buf[4096], cmd[128];
    int have_gdb = access("/usr/bin/gdb", X_OK) == 0;

    sb_addf(&b, "%s", "");
    for (int i = 0; i < n && i < 4; ++i) {
        ssize_t len = read_proc_file(pids[i], "environ", buf, sizeof(buf) - 1);
        const char *pe = "?";
        for (ssize_t off = 0; off < len; off += (ssize_t)strlen(buf + off) + 1) {
            if (strncmp(buf + off, "IVM_PE_ID=", 10) == 0) {
                pe = buf + off + 10;
            }
        }
        sb_addf(&b, "\n--- pid %d (IVM_PE_ID %s)", (int)pids[i], pe);
        len = read_proc_file(pids[i], "wchan", buf, sizeof(buf) - 1);
        buf[len > 0 ? len : 0] = '\0';
        sb_addf(&b, ", wchan %s ---\n", len > 0 ? buf : "?");
        if (!have_gdb) {
            continue;
        }
        snprintf(cmd, sizeof(cmd), "timeout 20 gdb -batch -nx -p %d -ex 'thread apply all bt 12' "
                 "2>/dev/null | grep -E '^(#|Thread)'", (int)pids[i]);
        FILE *f = popen(cmd, "r");
        size_t got = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f != NULL) {
            pclose(f);
        }
        buf[got] = '\0';
        sb_addf(&b, "%s", buf);
    }
    return sb_take(&b);
}

static void ivmt_launch_collect(ivmt_launch_t *c, double timeout_s, ivmt_result_t *r,
                                int expect_empty_dir)
{
    const char *entries[] = {c->dir_env, NULL};
    pid_t pids[64];
    int n = 0;
    char *procs, *stacks, *left = NULL;

    ivmt_finish(&c->proc, timeout_s, r);
    for (double deadline = ivmt_now() + ivmt_leftover_grace_s();; ivmt_sleep_ms(20)) {
        n = ivmt_find_procs(0, 0, entries, c->dir, pids, 64);
        if (n == 0 || ivmt_now() > deadline) {
            break;
        }
    }
    procs = ivmt_describe_procs(pids, n);
    stacks = n > 0 ? ivmt_describe_stacks(pids, n) : NULL;
    for (int i = 0; i < n; ++i) {
        kill(pids[i], SIGKILL);
    }
    if (expect_empty_dir) {
        left = ivmt_dir_entries(c->dir);
    }
    ivmt_remove_dir(c->dir);
    {
        /* Daemons that ended without removing their cgroups (CPU shares). */
        char *stale = ivmt_cgroup_stale(), *line, *save = NULL, *added = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&added, &len);
        for (line = strtok_r(stale, "\n", &save); line != NULL && f != NULL;
             line = strtok_r(NULL, "\n", &save)) {
            if (c->cg_stale == NULL || !has_whole_line(c->cg_stale, line)) {
                fprintf(f, "%s\n", line);
                ivmt_cgroup_remove(line);
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        free(stale);
        free(c->cg_stale);
        c->cg_stale = NULL;
        if (added != NULL && added[0] != '\0') {
            char *why = ivmt_describe(NULL, r);
            cr_assert_fail("cgroup directories of daemons that are gone were left:\n%s"
                           "launcher: %s", added, why);
        }
        free(added);
    }
    if (n > 0) {
        char *why = ivmt_describe(NULL, r);
        cr_assert_fail("%d process(es) of the launched run left %.0f s after the launcher "
                       "returned: %s%s\nlauncher: %s", n, ivmt_leftover_grace_s(), procs,
                       stacks, why);
    }
    free(procs);
    free(stacks);
    if (left != NULL && left[0] != '\0') {
        char *why = ivmt_describe(NULL, r);
        cr_assert_fail("the launcher left entries in its private IVM_SOCKET_DIR:\n%s"
                       "launcher: %s", left, why);
    }
    free(left);
}

void ivmt_launch_finish(ivmt_launch_t *c, double timeout_s, ivmt_result_t *r)
{
    ivmt_launch_collect(c, timeout_s, r, 0);
}

void ivmt_launch_finish_clean(ivmt_launch_t *c, double timeout_s, ivmt_result_t *r)
{
    ivmt_launch_collect(c, timeout_s, r, 1);
}

uint16_t ivmt_ready_port(int fd, const char *who, const char *node, const char *netns)
{
    ivm_ready_t ready;
    unsigned port = 0;

    ivm_ready_init(&ready, fd);
    ivm_ready_wait(&ready, 10000, -1);
    close(fd);
    cr_assert(ivm_ready_port(&ready, &port) == IVM_SUCCESS,
              "%s%s%s%s%s: no readiness line (got '%s')", who, node != NULL ? " " : "",
              node != NULL ? node : "", netns != NULL ? " in " : "", netns != NULL ? netns : "",
              ready.line);
    return (uint16_t)port;
}

pid_t ivmt_peer_daemon_start(const char *netns, const char *node, const char *sock,
                             const char *log, const char *listen, uint16_t *port_p)
{
    char fdarg[16];
    int ready[2], logfd;
    pid_t pid;

    cr_assert_eq(pipe(ready), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(logfd, 1);
        dup2(logfd, 2);
        snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
        {
            const char *argv[32];
            int n = ivmt_daemon_wrapper(argv, 16);
            if (netns == NULL && n > 0) {
                const char *rest[] = {IVMT_IVMD, "--socket", sock, "--node", node, "--listen",
                                      listen, "--ready-fd", fdarg, "--log-level", "info",
                                      NULL};
                for (int i = 0; rest[i] != NULL; ++i) {
                    argv[n++] = rest[i];
                }
                argv[n] = NULL;
                execvp(argv[0], (char *const *)argv);
                _exit(127);
            }
        }
        if (netns != NULL) {
            execlp("ip", "ip", "netns", "exec", netns, IVMT_IVMD, "--socket", sock, "--node",
                   node, "--listen", listen, "--ready-fd", fdarg, "--log-level", "info",
                   (char *)NULL);
        } else {
            execl(IVMT_IVMD, "ivmd", "--socket", sock, "--node", node, "--listen", listen,
                  "--ready-fd", fdarg, "--log-level", "info", (char *)NULL);
        }
        _exit(127);
    }
    ivmt_owned_daemon(pid);
    close(ready[1]);
    *port_p = ivmt_ready_port(ready[0], "ivmd", node, netns);
    return pid;
}

int ivmt_unix_call(const char *sock, uint16_t type, const void *payload, uint32_t len,
                   char *detail, size_t detail_len)
{
    ivm_client_result_t res;
    ivm_msg_status_t rep;
    ivmError_t status = ivm_client_request(sock, 0, type, payload, len, &rep, sizeof(rep), &res);

    cr_assert(res.answered, "%s to %s: %s (%s)", ivm_proto_type_name(type), sock,
              ivm_status_string(status), res.detail);
    if (detail != NULL) {
        snprintf(detail, detail_len, "%s", res.detail);
    }
    return status;
}
