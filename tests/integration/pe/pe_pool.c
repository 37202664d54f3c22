/* PE program of the warm PE pool tests (test_pool.c). The root runs with
 * IVM_PE_POOL set by the test; it learns about its daemon's pool from INFO
 * (parked processes, PEs handed out by pools) and finds the parked processes
 * of its job in /proc (a negative IVM_PE_ID and its IVM_JOB_ID). The GPU
 * scenarios reach device memory by memcpy on the emu backend and through the
 * dlopen'd driver API when IVM_TEST_GPU_BACKEND=cuda (as pe_gpu.c does). */
#include "pe_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "client.h"
#include "proto.h"
#include "sock.h"

#define MAXP 16

typedef struct board {
    atomic_int seen[MAXP];
    int        pid[MAXP];
    int        ppid[MAXP];  /* a PE forked by a parked process: that process */
    int        gid[MAXP];
    int        id[MAXP];
    int        bind_env[MAXP];  /* getenv("LD_BIND_NOW") != NULL or IVM_POOL_BIND_NOW's */
    int        bind_start[MAXP]; /* its process started with LD_BIND_NOW=1 */
} board_t;

/* The environment process pid (0: ourselves) was started with, its
 * NUL-separated entries into env_buf (the whole of it: IVM's variables come
 * last), NUL-terminated: its length, -1 if the process is gone. This is the
 * block /proc/PID/environ shows, which unsetenv leaves as it was (and a fork
 * child inherits). */
static char env_buf[1 << 20];

static ssize_t proc_environ(pid_t pid)
{
    char path[64];
    size_t len;
    FILE *f;

    if (pid == 0) {
        snprintf(path, sizeof(path), "/proc/self/environ");
    } else {
        snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    }
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    len = fread(env_buf, 1, sizeof(env_buf) - 1, f);
    fclose(f);
    env_buf[len] = '\0';
    return (ssize_t)len;
}

/* The value of variable `name` in the environment process pid (0: ourselves)
 * was started with ("" if none or the process is gone). */
static void proc_env(pid_t pid, const char *name, char *out, size_t out_len)
{
    ssize_t len = proc_environ(pid);
    size_t nlen = strlen(name);

    out[0] = '\0';
    for (ssize_t off = 0; off < len; off += (ssize_t)strlen(env_buf + off) + 1) {
        if (strncmp(env_buf + off, name, nlen) == 0 && env_buf[off + (ssize_t)nlen] == '=') {
            snprintf(out, out_len, "%s", env_buf + off + nlen + 1);
        }
    }
}

/* Whether process pid (0: ourselves) was started with LD_BIND_NOW=1. */
static int started_bound(pid_t pid)
{
    char v[16];

    proc_env(pid, "LD_BIND_NOW", v, sizeof(v));
    return strcmp(v, "1") == 0;
}

static void pool_info(ivm_msg_info_rep_t *info)
{
    memset(info, 0, sizeof(*info));
    EXPECT(ivm_client_info(getenv("IVM_SOCKET"), 5000, info, NULL), IVM_SUCCESS);
}

/* Wait until the daemon reports `n` parked processes. */
static void wait_parked(uint32_t n, double seconds)
{
    double deadline = pe_now() + seconds;
    ivm_msg_info_rep_t info;

    for (;;) {
        pool_info(&info);
        if (info.parked == n) {
            return;
        }
        ASSERT(pe_now() < deadline, "%u parked processes after %.0f s, want %u", info.parked,
               seconds, n);
        pe_sleep_ms(5);
    }
}

/* The parent of pid (0 if gone). */
static pid_t proc_ppid(pid_t pid)
{
    char path[64], buf[512], *p;
    int ppid = 0;
    size_t len;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1) {
        return 0;
    }
    return (pid_t)ppid;
}

/* Parked processes of job gid of our daemon: their pids (at most max). A
 * parked process is the daemon's child; a PE a parked process forked has its
 * environment too until it ends, and is not counted. */
static int parked_pids(int gid, pid_t *pids, int max)
{
    char want[32], sock[300];
    struct dirent *e;
    DIR *dir = opendir("/proc");
    ivm_msg_info_rep_t info;
    int n = 0;

    pool_info(&info);
    ASSERT(dir != NULL, "%s", "cannot list /proc");
    /* Job ids are per daemon: the socket tells this daemon's processes from
     * those of other daemons running beside the test. */
    snprintf(want, sizeof(want), "IVM_JOB_ID=%d", gid);
    snprintf(sock, sizeof(sock), "IVM_SOCKET=%s", getenv("IVM_SOCKET") ? getenv("IVM_SOCKET") : "");
    while ((e = readdir(dir)) != NULL && n < max) {
        int parked = 0, ours = 0, here = 0;
        ssize_t len;

        if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
            (len = proc_environ((pid_t)atoi(e->d_name))) < 0) {
            continue;
        }
        for (ssize_t off = 0; off < len; off += (ssize_t)strlen(env_buf + off) + 1) {
            parked |= strncmp(env_buf + off, "IVM_PE_ID=-", 11) == 0;
            ours |= strcmp(env_buf + off, want) == 0;
            here |= strcmp(env_buf + off, sock) == 0;
        }
        if (parked && ours && here && proc_ppid((pid_t)atoi(e->d_name)) == (pid_t)info.pid) {
            pids[n++] = (pid_t)atoi(e->d_name);
        }
    }
    closedir(dir);
    return n;
}

/* Wait until exactly n processes read as this job's parked ones, their pids
 * into pids[0..n). A PE that was a parked process reads as one until it is
 * gone, which under a sanitizer (its leak check at exit) can be a while after
 * ivmWait saw it end. */
static void list_parked(int gid, pid_t *pids, int n, double seconds, const char *what)
{
    pid_t seen[64];
    double deadline = pe_now() + seconds;

    ASSERT(n <= 56, "list_parked(%d)", n);
    while (parked_pids(gid, seen, n + 8) != n) {
        ASSERT(pe_now() < deadline, "not %d parked processes %s", n, what);
        pe_sleep_ms(5);
    }
    memcpy(pids, seen, sizeof(*pids) * (size_t)n);
}

/* A pool ENTER for a real slot of our job: refused with a wrong token, and
 * with the right token from another pid (ours) while the slot's own process
 * is parked. */
static void forge_pool_enter(int gid, pid_t parked)
{
    char slot[32], token[32];
    ivm_msg_enter_req_t req;
    ivm_msg_enter_rep_t rep;

    proc_env(parked, "IVM_PE_ID", slot, sizeof(slot));
    proc_env(parked, "IVM_PE_TOKEN", token, sizeof(token));
    ASSERT(atoi(slot) < -1 && token[0] != '\0', "parked process %d: IVM_PE_ID '%s'",
           (int)parked, slot);
    memset(&req, 0, sizeof(req));
    req.flags  = IVM_ENTER_POOL;
    req.pid    = (uint32_t)getpid();
    req.job_id = (uint32_t)gid;
    req.pe_id  = atoi(slot);
    req.token  = strtoull(token, NULL, 10) + 1;
    pe_stage = "pool ENTER with a wrong token";
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_ENTER, &req, sizeof(req),
                              &rep, sizeof(rep), NULL),
           IVM_ERROR_PERMISSION);
    req.token = strtoull(token, NULL, 10);
    pe_stage = "pool ENTER for a parked slot, right token, another pid";
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_ENTER, &req, sizeof(req),
                              &rep, sizeof(rep), NULL),
           IVM_ERROR_PERMISSION);
}

/* A process that has exited (a zombie) or is gone: its sockets are closed. */
static int proc_ended(pid_t pid)
{
    char path[64], stat[256];
    FILE *f;
    char *p;
    size_t len;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 1;
    }
    len = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[len] = '\0';
    p = strrchr(stat, ')');
    return p == NULL || p[2] == 'Z' || p[2] == 'X';
}

static int has_pid(const pid_t *pids, int n, pid_t pid)
{
    for (int i = 0; i < n; ++i) {
        if (pids[i] == pid) {
            return 1;
        }
    }
    return 0;
}

/* Whether a PE (pid, parent pid) came from one of these parked processes:
   handed out itself, or forked by it (a parked process that can fork,
   IVM_ENTER_FORKABLE, stays parked and forks each PE). */
static int from_parked(const pid_t *pids, int n, pid_t pid, pid_t ppid)
{
    return has_pid(pids, n, pid) || has_pid(pids, n, ppid);
}

/* Children: record themselves, signal; PE 2 of "semantics" dies without
 * ivmExit, the others exit. */
static int child(int id, const char *scenario)
{
    board_t *b = NULL;

    CHECK(ivmMap("board", (void **)&b, 0));
    ASSERT(id > 0 && id < MAXP, "PE id %d", id);
    b->pid[id] = (int)getpid();
    b->ppid[id] = (int)getppid();
    CHECK(ivmGetMyGroupId(&b->gid[id]));
    CHECK(ivmGetMyId(&b->id[id]));
    b->bind_env[id] = getenv("LD_BIND_NOW") != NULL || getenv("IVM_POOL_BIND_NOW") != NULL;
    b->bind_start[id] = started_bound(0);
    atomic_fetch_add(&b->seen[id], 1);
    printf("hello from pe %d\n", id);
    fflush(stdout);
    CHECK(ivmSignal());
    if (strcmp(scenario, "semantics") == 0 && id == 2) {
        _exit(3);
    }
    CHECK(ivmUnmap(b));
    CHECK(ivmExit());
    return 0;
}

static board_t *board_create(void)
{
    board_t *b = NULL;

    CHECK(ivmMalloc("board", (void **)&b, sizeof(board_t)));
    memset(b, 0, sizeof(*b));
    return b;
}

/* PE ids, group ids, the max PE id, wait/signal, death reporting, counting,
 * all with PEs taken from the pool. */
static int sc_semantics(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    ivm_device dev;
    pid_t parked[4];
    ivm_pe pes[3];
    int id = pe_enter(), gid, n;

    if (id != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    pe_stage = "pool fill";
    wait_parked(2, 20.0);
    ASSERT(parked_pids(gid, parked, 4) == 2, "%s", "not 2 parked processes of this job");
    forge_pool_enter(gid, parked[0]);
    wait_parked(2, 5.0);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "ivmGetNumPEs counts %d PEs with 2 parked processes", n);
    pool_info(&info);
    ASSERT(info.pes == 1, "INFO counts %u PEs with 2 parked processes", info.pes);
    uint32_t pooled = info.pooled;

    pe_stage = "create from the pool";
    const char *fork_env = getenv("IVM_POOL_FORK");
    int fork_mode = fork_env == NULL || strcmp(fork_env, "0") != 0;
    CHECK(ivmSetMaxPesId(2));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    CHECK(ivmCreatePEs(dev, 3, pes));
    ASSERT(pes[0] == 1 && pes[1] == 2 && pes[2] == IVM_PE_NULL,
           "PE ids %d %d %d, want 1 2 NULL", pes[0], pes[1], pes[2]);
    CHECK(ivmWait(1));
    CHECK(ivmWait(2));
    for (int i = 1; i <= 2; ++i) {
        ASSERT(atomic_load(&b->seen[i]) == 1, "PE %d ran %d times", i, atomic_load(&b->seen[i]));
        ASSERT(b->id[i] == i, "PE %d believes it is PE %d", i, b->id[i]);
        ASSERT(b->gid[i] == gid, "PE %d in group %d, root in %d", i, b->gid[i], gid);
        ASSERT(from_parked(parked, 2, b->pid[i], b->ppid[i]), "PE %d (pid %d, parent %d) is "
               "not from a parked process", i, b->pid[i], b->ppid[i]);
        /* The PE program has one thread when it parks: forked, unless told not. */
        if (fork_mode)
            ASSERT(has_pid(parked, 2, b->ppid[i]) && !has_pid(parked, 2, b->pid[i]),
                   "PE %d (pid %d, parent %d) was not forked by a parked process", i,
                   b->pid[i], b->ppid[i]);
        else
            ASSERT(has_pid(parked, 2, b->pid[i]), "PE %d (pid %d) is not a parked process "
                   "handed out (IVM_POOL_FORK=0)", i, b->pid[i]);
    }
    pool_info(&info);
    ASSERT(info.pooled == pooled + 2, "INFO: %u PEs from pools, want %u", info.pooled,
           pooled + 2);

    pe_stage = "exit and death";
    CHECK(ivmWait(1));
    EXPECT(ivmWait(2), IVM_ERROR_PE_FAILED);
    EXPECT(ivmWait(3), IVM_ERROR_NOT_FOUND);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "ivmGetNumPEs: %d after both children ended", n);

    pe_stage = "refill";
    wait_parked(2, 20.0);
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* One PE on dev, to its end; whether it came from a pool (INFO pooled). */
static int create_one(ivm_device dev)
{
    ivm_msg_info_rep_t info;
    uint32_t pooled;
    ivm_pe pe;

    pool_info(&info);
    pooled = info.pooled;
    CHECK(ivmCreatePEs(dev, 1, &pe));
    ASSERT(pe != IVM_PE_NULL, "%s", "no PE created");
    CHECK(ivmWait(pe)); /* its signal */
    CHECK(ivmWait(pe)); /* its exit */
    pool_info(&info);
    return info.pooled != pooled;
}

/* The test runs a copy of this program (argv[2] names the copy, which the
 * root may replace and delete; a second copy waits beside it as argv[2].new).
 * Parked processes started from a file that was since replaced under its name
 * (what a rebuild does) or deleted are never handed out: the PE is a cold
 * spawn of the file the name now gives, and the pool refills from it. */
static int sc_exe_replaced(int argc, char **argv)
{
    char fresh[PATH_MAX + 8];
    const char *exe = argc > 2 ? argv[2] : "";
    ivm_device dev;
    ivm_pe pe;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(exe[0] == '/', "the copy's path, got '%s'", exe);
    snprintf(fresh, sizeof(fresh), "%s.new", exe);
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    pe_stage = "pool fill";
    wait_parked(2, 20.0);
    ASSERT(create_one(dev), "%s", "a PE of the full pool was not taken from it");
    wait_parked(2, 20.0);

    pe_stage = "replaced under its name";
    ASSERT(rename(fresh, exe) == 0, "rename %s %s", fresh, exe);
    ASSERT(!create_one(dev), "%s", "a process parked before its program file was replaced "
           "was handed out");
    pe_stage = "refilled from the new file";
    wait_parked(2, 20.0);
    ASSERT(create_one(dev), "%s", "the pool refilled from the new file is not used");

    pe_stage = "deleted";
    wait_parked(2, 20.0);
    ASSERT(unlink(exe) == 0, "unlink %s", exe);
    EXPECT(ivmCreatePEs(dev, 1, &pe), IVM_ERROR_SPAWN);
    ASSERT(pe == IVM_PE_NULL, "PE %d created from a deleted program", pe);
    ASSERT(strstr(ivmGetLastErrorMessage(), exe) != NULL, "the error does not name the "
           "program: '%s'", ivmGetLastErrorMessage());
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmExit());
    return pe_ok();
}

/* PEs per burst: 64, and 24 in the sanitizer build, where each PE's start
 * and exit (the leak check) cost tens of milliseconds more: still six times
 * the pool of 4 the bursts draw from, the same paths, a third of the PEs. */
#if defined(__SANITIZE_ADDRESS__)
#define BURST_N 24
#else
#define BURST_N 64
#endif
#define BURST_SLOTS 1024
#define BURST_OBJ "burst-ids"

/* A PE of a burst: writes its id into slot id of the root's object (pushed
 * to the master from node1's mirror), signals and exits. One of a failed
 * burst (may_die) can be ended before it runs: it leaves quietly then (the
 * root checks that none is alive). */
static int burst_child(int id, int may_die)
{
    ivmError_t st;
    int *ids = NULL;

    ASSERT(id < BURST_SLOTS, "PE id %d beyond the board", id);
    st = ivmMapSubset(BURST_OBJ, &ids, (size_t)id * sizeof(int), sizeof(int));
    if (st == IVM_SUCCESS) {
        ids[0] = id;
        st = ivmSyncPut(ids, sizeof(int));
    }
    if (st == IVM_SUCCESS) {
        st = ivmUnmap(ids);
    }
    if (st == IVM_SUCCESS) {
        st = ivmSignal();
    }
    if (st != IVM_SUCCESS && may_die) {
        _exit(0);
    }
    ASSERT(st == IVM_SUCCESS, "PE %d: %s (%s)", id, ivmGetErrorString(st),
           ivmGetLastErrorMessage());
    CHECK(ivmExit());
    return 0;
}

/* One ivmCreatePEs of BURST_N PEs on dev: the ids increase, every PE runs,
 * signals and exits, and each wrote its own id (ivmGetMyId) into its slot. */
static void burst_one(ivm_device dev, volatile int *ids, const char *where)
{
    ivm_pe pes[BURST_N];
    int n = -1;

    pe_stage = where;
    CHECK(ivmCreatePEs(dev, BURST_N, pes));
    for (int i = 0; i < BURST_N; ++i) {
        ASSERT(pes[i] != IVM_PE_NULL && pes[i] < BURST_SLOTS && (i == 0 || pes[i] > pes[i - 1]),
               "%s: slot %d has PE %d after %d", where, i, pes[i], i ? pes[i - 1] : -1);
    }
    for (int i = 0; i < BURST_N; ++i) {
        CHECK(ivmWait(pes[i])); /* its signal */
        CHECK(ivmWait(pes[i])); /* its exit */
        ASSERT(ids[pes[i]] == pes[i], "%s: PE %d wrote %d into its slot", where, pes[i],
               ids[pes[i]]);
    }
    for (double deadline = pe_now() + 10.0; n != 1; pe_sleep_ms(5)) {
        CHECK(ivmGetNumPEs(&n));
        ASSERT(n == 1 || pe_now() < deadline, "%s: %d PEs alive after the burst", where, n);
    }
}

/* Bursts of BURST_N PEs in one call each, on this node and, when the job has
 * it, on node1, with IVM_PE_POOL smaller than the burst or none. */
static int sc_burst(int argc, char **argv)
{
    const char *pool = getenv("IVM_PE_POOL");
    ivm_msg_info_rep_t info;
    ivm_device dev, dev1;
    int *ids;
    int id = pe_enter();

    (void)argc;
    (void)argv;
    if (id != 0) {
        return burst_child(id, 0);
    }
    CHECK(ivmMalloc(BURST_OBJ, &ids, BURST_SLOTS * sizeof(int)));
    for (int i = 0; i < BURST_SLOTS; ++i) {
        ids[i] = -1;
    }
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    if (pool != NULL && atoi(pool) > 0) {
        pe_stage = "pool fill";
        wait_parked((uint32_t)atoi(pool), 20.0);
    }
    pool_info(&info);
    uint32_t pooled = info.pooled;
    burst_one(dev, ids, "burst on this node");
    pool_info(&info);
    if (pool != NULL && atoi(pool) > 0) {
        /* Parked processes that fork fork the whole burst (the PEs beyond
         * the pool wait for one to park again); without fork the pool
         * gives its processes and the rest is spawned. */
        const char *fork_env = getenv("IVM_POOL_FORK");
        uint32_t want = fork_env != NULL && strcmp(fork_env, "0") == 0 ? (uint32_t)atoi(pool)
                                                                       : BURST_N;
        ASSERT(info.pooled - pooled == want, "%u of %d PEs of the burst from a pool of %s, "
               "want %u", info.pooled - pooled, BURST_N, pool, want);
    }
    burst_one(dev, ids, "second burst on this node");
    if (ivmCreateDev("node1", IVM_CPU_N(0), &dev1) == IVM_SUCCESS) {
        burst_one(dev1, ids, "burst on node1");
        CHECK(ivmDestroyDev(dev1));
    }
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(ids));
    CHECK(ivmExit());
    return pe_ok();
}

/* A burst whose program cannot be executed (argv[2], a copy of this program,
 * made mode 0644 after the pool filled: parked processes of a program that
 * lost its x bits are not handed out, as a cold spawn of it would fail):
 * IVM_ERROR_SPAWN naming the program, every slot IVM_PE_NULL, and no PE of
 * it left alive; once executable again, a burst runs. */
static int sc_burst_noexec(int argc, char **argv)
{
    const char *exe = argc > 2 ? argv[2] : "", *pool = getenv("IVM_PE_POOL");
    ivm_pe pes[BURST_N];
    ivm_device dev;
    int n = -1, *ids;
    int id = pe_enter();

    if (id != 0) {
        return burst_child(id, 1);
    }
    ASSERT(exe[0] == '/', "the copy's path, got '%s'", exe);
    CHECK(ivmMalloc(BURST_OBJ, &ids, BURST_SLOTS * sizeof(int)));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    if (pool != NULL && atoi(pool) > 0) {
        pe_stage = "pool fill";
        wait_parked((uint32_t)atoi(pool), 20.0);
    }
    pe_stage = "burst of a program that cannot be executed";
    ASSERT(chmod(exe, 0644) == 0, "chmod %s: %s", exe, strerror(errno));
    for (int i = 0; i < BURST_N; ++i) {
        pes[i] = 12345;
    }
    EXPECT(ivmCreatePEs(dev, BURST_N, pes), IVM_ERROR_SPAWN);
    ASSERT(strstr(ivmGetLastErrorMessage(), exe) != NULL, "the error does not name the "
           "program: '%s'", ivmGetLastErrorMessage());
    for (int i = 0; i < BURST_N; ++i) {
        ASSERT(pes[i] == IVM_PE_NULL, "slot %d of the failed burst: %d", i, pes[i]);
    }
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "%d PEs alive after the failed burst", n);
    ASSERT(chmod(exe, 0755) == 0, "chmod %s: %s", exe, strerror(errno));
    burst_one(dev, ids, "burst once the program is executable again");
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(ids));
    CHECK(ivmExit());
    return pe_ok();
}

/* The parked processes SIGKILLed right after ivmCreatePEs handed them a burst
 * of BURST_N (most of it queued for them): no wait hangs; a PE whose fork
 * the kill prevented fails (IVM_ERROR_PE_FAILED), the queued ones are
 * spawned cold and run; nothing is left (the fixture checks). */
static int sc_burst_kill_parked(int argc, char **argv)
{
    ivm_pe pes[BURST_N];
    ivm_device dev;
    pid_t dead[8];
    int *ids, gid, ok = 0, n = -1, nparked;
    int id = pe_enter();

    (void)argc;
    (void)argv;
    if (id != 0) {
        return burst_child(id, 1);
    }
    CHECK(ivmMalloc(BURST_OBJ, &ids, BURST_SLOTS * sizeof(int)));
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    pe_stage = "pool fill";
    wait_parked(2, 20.0);
    nparked = parked_pids(gid, dead, 8);
    ASSERT(nparked == 2, "%d parked processes of this job, want 2", nparked);
    pe_stage = "burst, parked processes killed";
    CHECK(ivmCreatePEs(dev, BURST_N, pes));
    kill(dead[0], SIGKILL);
    kill(dead[1], SIGKILL);
    for (int i = 0; i < BURST_N; ++i) {
        ivmError_t st = ivmWait(pes[i]);
        ASSERT(st == IVM_SUCCESS || st == IVM_ERROR_PE_FAILED, "wait on PE %d: %s", pes[i],
               ivmGetErrorString(st));
        if (st == IVM_SUCCESS && ids[pes[i]] == pes[i]) {
            ++ok;
        }
        ivmWait(pes[i]); /* its end */
    }
    ASSERT(ok >= BURST_N - 4, "only %d of %d PEs ran after the kill", ok, BURST_N);
    for (double deadline = pe_now() + 10.0; n != 1; pe_sleep_ms(5)) {
        CHECK(ivmGetNumPEs(&n));
        ASSERT(n == 1 || pe_now() < deadline, "%d PEs alive after the burst", n);
    }
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(ids));
    CHECK(ivmExit());
    return pe_ok();
}

/* Parked processes killed while parked are replaced and never handed out. */
static int sc_kill_parked(int argc, char **argv)
{
    ivm_device dev;
    pid_t dead[4], fresh[4];
    ivm_pe pes[2];
    int id = pe_enter(), gid;

    if (id != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    pe_stage = "pool fill";
    wait_parked(2, 20.0);
    ASSERT(parked_pids(gid, dead, 4) == 2, "%s", "not 2 parked processes of this job");

    pe_stage = "kill both parked processes, create at once";
    kill(dead[0], SIGKILL);
    kill(dead[1], SIGKILL);
    for (double deadline = pe_now() + 5.0; !proc_ended(dead[0]) || !proc_ended(dead[1]);) {
        ASSERT(pe_now() < deadline, "%s", "killed parked processes still run after 5 s");
    }
    CHECK(ivmCreatePEs(dev, 2, pes));
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));
    for (int i = 0; i < 2; ++i) {
        ASSERT(!from_parked(dead, 2, b->pid[pes[i]], b->ppid[pes[i]]),
               "PE %d is (or was forked by) a killed parked process %d", pes[i],
               b->pid[pes[i]]);
    }
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));

    pe_stage = "replacement";
    wait_parked(2, 20.0);
    list_parked(gid, fresh, 2, 20.0, "after the kill");
    ASSERT(!has_pid(dead, 2, fresh[0]) && !has_pid(dead, 2, fresh[1]),
           "%s", "a killed parked process is still counted");
    CHECK(ivmCreatePEs(dev, 2, pes));
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));
    for (int i = 0; i < 2; ++i) {
        ASSERT(from_parked(fresh, 2, b->pid[pes[i]], b->ppid[pes[i]]),
               "PE %d (pid %d) is not from a replacement", pes[i], b->pid[pes[i]]);
        CHECK(ivmWait(pes[i]));
    }
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* A program that ends before ivmEnter when it is a parked process: the
 * daemon gives up on its pool (no restart loop); PEs still start cold. */
static int sc_no_park(int argc, char **argv)
{
    const char *pe = getenv("IVM_PE_ID");
    ivm_msg_info_rep_t info;
    ivm_device dev;
    pid_t left[4];
    ivm_pe c;
    int gid;

    if (pe != NULL && atoi(pe) < 0) {
        return 0;
    }
    if (pe_enter() != 0) {
        return child(pe_me, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    /* Every start of the pool ends early until the daemon gives up: the last
     * one gone (seconds under a sanitizer on a loaded machine), none starts
     * again. */
    for (double deadline = pe_now() + 20.0, quiet = pe_now() + 0.3; pe_now() < quiet;) {
        if (parked_pids(gid, left, 4) != 0) {
            ASSERT(pe_now() < deadline, "%s", "pool processes are still being started");
            quiet = pe_now() + 0.3;
        }
        pe_sleep_ms(5);
    }
    pe_sleep_ms(500);
    pool_info(&info);
    ASSERT(info.parked == 0, "%u parked processes of a program that does not park",
           info.parked);
    ASSERT(parked_pids(gid, left, 4) == 0, "%s", "pool processes are started again");
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    CHECK(ivmCreatePEs(dev, 1, &c));
    CHECK(ivmWait(c));
    CHECK(ivmWait(c));
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* Bad IVM_PE_POOL values: ivmEnter fails with a clear error. */
static int sc_bad_setting(int argc, char **argv)
{
    static const char *const bad[] = {"abc", "-1", "65", "2x", NULL};

    for (int i = 0; bad[i] != NULL; ++i) {
        setenv("IVM_PE_POOL", bad[i], 1);
        EXPECT(ivmEnter(), IVM_ERROR_INVALID_VALUE);
        ASSERT(strstr(ivmGetLastErrorMessage(), "IVM_PE_POOL") != NULL,
               "message for IVM_PE_POOL=%s: %s", bad[i], ivmGetLastErrorMessage());
    }
    setenv("IVM_PE_POOL", "0", 1);
    CHECK(ivmEnter());
    CHECK(ivmExit());
    return pe_ok();
}

/* Output of warm PEs is tagged with their PE ids (IVM_TAG_OUTPUT=1). */
static int sc_tagged(int argc, char **argv)
{
    ivm_device dev;
    ivm_pe pes[2];
    int id = pe_enter();

    if (id != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    wait_parked(2, 20.0);
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    CHECK(ivmCreatePEs(dev, 2, pes));
    for (int i = 0; i < 2; ++i) {
        CHECK(ivmWait(pes[i]));
        CHECK(ivmWait(pes[i]));
    }
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* INFO of node1's daemon of this ivmrun --nodes 2 run (<dir>/node1.sock). */
static void node1_info(ivm_msg_info_rep_t *info)
{
    char dir[4096], path[4200];

    snprintf(dir, sizeof(dir), "%s", getenv("IVM_SOCKET"));
    snprintf(path, sizeof(path), "%s/node1.sock", dirname(dir));
    memset(info, 0, sizeof(*info));
    EXPECT(ivm_client_info(path, 5000, info, NULL), IVM_SUCCESS);
}

/* Remote node: node1's daemon keeps a pool for the job once its first PE
 * there started (cold), and hands its parked processes out to SPAWN. */
static int sc_remote(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    ivm_device dev;
    ivm_pe pes[2], first;
    int id = pe_enter();

    if (id != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmCreateDev("node1", IVM_CPU_N(0), &dev));
    CHECK(ivmCreatePEs(dev, 1, &first));
    CHECK(ivmWait(first));
    CHECK(ivmWait(first));
    pe_stage = "node1's pool fill";
    for (double deadline = pe_now() + 20.0;; pe_sleep_ms(5)) {
        node1_info(&info);
        if (info.parked == 2) {
            break;
        }
        ASSERT(pe_now() < deadline, "node1 has %u parked processes, want 2", info.parked);
    }
    uint32_t pooled = info.pooled;
    CHECK(ivmCreatePEs(dev, 2, pes));
    ASSERT(pes[0] == first + 1 && pes[1] == first + 2, "remote PE ids %d %d after %d",
           pes[0], pes[1], first);
    for (int i = 0; i < 2; ++i) {
        CHECK(ivmWait(pes[i]));
        CHECK(ivmWait(pes[i]));
    }
    node1_info(&info);
    ASSERT(info.pooled == pooled + 2, "node1 handed out %u PEs from its pool, want 2",
           info.pooled - pooled);
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* ------------------------------------------------------------ GPU pools */

#define GPU_SIZE (1024u * 1024u)
#define GPU_DATA (64u * 1024u)            /* device-checked bytes start here */
#define GPU_BACK (GPU_DATA + 32u * 4096u) /* the root's change, Got by the PEs */

/* At the start of the object "v" (its node copy is the master: GPU PEs
 * write it through ivmHostPtr, the root reads it directly). */
typedef struct gpu_board {
    atomic_int seen[MAXP];
    int        pid[MAXP];
    int        ppid[MAXP];
    int        id[MAXP];
    int        devtype[MAXP];
    int        gpu_env[MAXP];     /* IVM_GPU */
    int        backend_ok[MAXP];  /* IVM_GPU_BACKEND names the test's backend */
    int        primary[MAXP];     /* cuda: current context at start is the primary one */
    uint64_t   cpus[MAXP];        /* affinity: CPUs 0..63 */
} gpu_board_t;

static int gpu_cuda(void)
{
    const char *b = getenv("IVM_TEST_GPU_BACKEND");

    return b != NULL && strcmp(b, "cuda") == 0;
}

static void dev_copy(void *dst, const void *src, size_t n, int to_dev)
{
    typedef int (*htod_fn)(unsigned long long, const void *, size_t);
    typedef int (*dtoh_fn)(void *, unsigned long long, size_t);

    if (!gpu_cuda()) {
        memcpy(dst, src, n);
    } else if (to_dev) {
        htod_fn f = (htod_fn)pe_cuda_sym("cuMemcpyHtoD_v2");
        ASSERT(f((unsigned long long)(uintptr_t)dst, src, n) == 0, "%s", "cuMemcpyHtoD failed");
    } else {
        dtoh_fn f = (dtoh_fn)pe_cuda_sym("cuMemcpyDtoH_v2");
        ASSERT(f(dst, (unsigned long long)(uintptr_t)src, n) == 0, "%s", "cuMemcpyDtoH failed");
    }
}

static void dev_expect(const char *dev, int byte, size_t n, const char *what)
{
    unsigned char *buf = malloc(n);

    ASSERT(buf != NULL, "%s", "malloc");
    dev_copy(buf, dev, n, 0);
    for (size_t i = 0; i < n; ++i) {
        ASSERT(buf[i] == (unsigned char)byte, "%s: device byte %zu is 0x%02x, want 0x%02x",
               what, i, buf[i], (unsigned char)byte);
    }
    free(buf);
}

/* cuda: whether this thread's current context is its GPU's primary context
 * (a warm PE's, made by libivm while parked); emu: -1, no contexts. */
static int gpu_primary_current(void)
{
    typedef int (*init_fn)(unsigned int);
    typedef int (*cur_fn)(void **);
    typedef int (*dev_fn)(int *, int);
    typedef int (*retain_fn)(void **, int);
    typedef int (*release_fn)(int);
    void *cur = NULL, *primary = NULL;
    int dev = 0;

    if (!gpu_cuda()) {
        return -1;
    }
    ASSERT(((init_fn)pe_cuda_sym("cuInit"))(0) == 0, "%s", "cuInit failed");
    ASSERT(((cur_fn)pe_cuda_sym("cuCtxGetCurrent"))(&cur) == 0, "%s", "cuCtxGetCurrent failed");
    if (cur == NULL) {
        return 0;
    }
    ASSERT(((dev_fn)pe_cuda_sym("cuDeviceGet"))(&dev, 0) == 0, "%s", "cuDeviceGet failed");
    ASSERT(((retain_fn)pe_cuda_sym("cuDevicePrimaryCtxRetain"))(&primary, dev) == 0, "%s",
           "cuDevicePrimaryCtxRetain failed");
    ((release_fn)pe_cuda_sym("cuDevicePrimaryCtxRelease_v2"))(dev);
    return cur == primary;
}

static void gpu_info0(ivm_msg_gpu_info_rep_t *g)
{
    ivm_msg_gpu_info_req_t req = {.gpu = 0};

    memset(g, 0, sizeof(*g));
    EXPECT(ivm_client_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_GPU_INFO, &req, sizeof(req),
                              g, sizeof(*g), NULL),
           IVM_SUCCESS);
}

static uint64_t my_cpus(void)
{
    cpu_set_t set;
    uint64_t m = 0;

    CPU_ZERO(&set);
    ASSERT(sched_getaffinity(0, sizeof(set), &set) == 0, "%s", "sched_getaffinity");
    for (int i = 0; i < 64; ++i) {
        m |= CPU_ISSET(i, &set) ? (uint64_t)1 << i : 0;
    }
    return m;
}

/* A GPU PE, warm or cold: records what it is, checks the device copy, Puts
 * its own page, then (after the root's change) Gets the root's page. */
static int gpu_child(int id)
{
    const char *backend = getenv("IVM_GPU_BACKEND");
    int primary = gpu_primary_current(); /* before any map makes a context current */
    gpu_board_t *gb;
    char *dev, *host, *page;

    ASSERT(id > 0 && id < MAXP, "PE id %d", id);
    CHECK(ivmMap("v", &dev, 0));
    CHECK(ivmHostPtr(dev, &host));
    gb = (gpu_board_t *)host;
    gb->pid[id] = (int)getpid();
    gb->ppid[id] = (int)getppid();
    CHECK(ivmGetMyId(&gb->id[id]));
    CHECK(ivmGetMyDevType(&gb->devtype[id]));
    gb->gpu_env[id]    = getenv("IVM_GPU") != NULL ? atoi(getenv("IVM_GPU")) : -1;
    gb->backend_ok[id] = backend != NULL && strcmp(backend, gpu_cuda() ? "cuda" : "emu") == 0;
    gb->primary[id]    = primary;
    gb->cpus[id]       = my_cpus();
    pe_stage = "GPU PE checks its device copy";
    /* Pages 0..15 of the data are the PEs' own (written by them meanwhile). */
    dev_expect(dev + GPU_DATA + MAXP * 4096, 0x5a, 16 * 4096, "device copy");
    page = malloc(4096);
    ASSERT(page != NULL, "%s", "malloc");
    memset(page, 0x10 + id, 4096);
    dev_copy(dev + GPU_DATA + (size_t)id * 4096, page, 4096, 1);
    free(page);
    CHECK(ivmSyncPut(dev + GPU_DATA + (size_t)id * 4096, 4096));
    atomic_fetch_add(&gb->seen[id], 1);
    CHECK(ivmSignal());
    pe_stage = "GPU PE waits for the root's change";
    CHECK(ivmWait(0));
    CHECK(ivmSyncGet(dev + GPU_BACK, 4096));
    dev_expect(dev + GPU_BACK, 'C', 4096, "device copy after SyncGet");
    CHECK(ivmUnmap(dev));
    CHECK(ivmExit());
    return 0;
}

/* Wait until `want` processes of job gid parked for GPU 0 and every started
 * parked process has parked; their pids into gp. */
static void gpu_parked(int gid, int want, pid_t *gp, double seconds)
{
    double deadline = pe_now() + seconds;
    ivm_msg_info_rep_t info;
    pid_t all[64];
    char val[32];

    for (;; pe_sleep_ms(5)) {
        int n = parked_pids(gid, all, 64), k = 0;
        pool_info(&info);
        for (int i = 0; i < n; ++i) {
            proc_env(all[i], "IVM_GPU", val, sizeof(val));
            if (strcmp(val, "0") == 0 && k < want) {
                gp[k++] = all[i]; /* GPU 0's (a real node may have more GPUs) */
            }
        }
        if (k == want && info.parked == (uint32_t)n) {
            return;
        }
        ASSERT(pe_now() < deadline, "%d processes parked for GPU 0 (%u parked of %d "
               "started) after %.0f s, want %d", k, info.parked, n, seconds, want);
    }
}

/* Create n GPU PEs, let them run, check them; returns how many of them were
 * the processes in warm[0..nwarm). With exact, warm[] is every process parked
 * for the GPU, so a PE not from it is cold (its primary context not made);
 * without, replacements may have parked since warm[] was taken. */
static int gpu_round(gpu_board_t *gb, char *v, ivm_device dev, int n, const pid_t *warm,
                     int nwarm, int exact, ivm_pe *pes)
{
    int from_warm = 0;

    memset(v + GPU_BACK, 'A', 4096);
    CHECK(ivmCreatePEs(dev, n, pes));
    for (int i = 0; i < n; ++i) {
        ASSERT(pes[i] > 0 && pes[i] < MAXP, "slot %d got PE %d", i, pes[i]);
        CHECK(ivmWait(pes[i]));
    }
    for (int i = 0; i < n; ++i) {
        int id = pes[i], is_warm = from_parked(warm, nwarm, gb->pid[id], gb->ppid[id]);
        ASSERT(atomic_load(&gb->seen[id]) == 1, "PE %d ran %d times", id,
               atomic_load(&gb->seen[id]));
        ASSERT(gb->id[id] == id, "PE %d believes it is PE %d", id, gb->id[id]);
        ASSERT(gb->devtype[id] == IVM_GPU_0, "PE %d: device type 0x%x, want GPU 0", id,
               gb->devtype[id]);
        ASSERT(gb->gpu_env[id] == 0 && gb->backend_ok[id], "PE %d: IVM_GPU %d, backend ok %d",
               id, gb->gpu_env[id], gb->backend_ok[id]);
        ASSERT(gb->cpus[id] == gb->cpus[pes[0]], "PE %d: affinity 0x%llx, PE %d's 0x%llx", id,
               (unsigned long long)gb->cpus[id], pes[0], (unsigned long long)gb->cpus[pes[0]]);
        for (size_t b = 0; b < 4096; ++b) {
            ASSERT(v[GPU_DATA + (size_t)id * 4096 + b] == (char)(0x10 + id),
                   "master byte %zu of PE %d's page after its SyncPut: 0x%02x", b, id,
                   (unsigned char)v[GPU_DATA + (size_t)id * 4096 + b]);
        }
        if (gb->primary[id] >= 0 && (exact || is_warm)) {
            ASSERT(gb->primary[id] == is_warm, "PE %d (%s): primary context current at "
                   "start: %d", id, is_warm ? "warm" : "cold", gb->primary[id]);
        }
        from_warm += is_warm;
    }
    memset(v + GPU_BACK, 'C', 4096);
    for (int i = 0; i < n; ++i) {
        CHECK(ivmSignal());
    }
    for (int i = 0; i < n; ++i) {
        CHECK(ivmWait(pes[i]));
    }
    return from_warm;
}

/* Warm GPU PEs: from the pool, the right device and environment, the same
 * affinity as a cold GPU PE, one device copy with the cold one, syncs,
 * wait/signal; killed parked GPU processes are replaced, never handed out. */
static int sc_gpu(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    ivm_msg_gpu_info_rep_t g;
    ivm_device dev;
    pid_t gp[2], dead[2];
    ivm_pe pes[3];
    char val[64], *v;
    int id = pe_enter(), gid, n;

    if (id != 0) {
        return gpu_child(id);
    }
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmMalloc("v", &v, GPU_SIZE));
    memset(v, 0, GPU_DATA);
    memset(v + GPU_DATA, 0x5a, GPU_SIZE - GPU_DATA);
    gpu_board_t *gb = (gpu_board_t *)v;
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_0, &dev));

    pe_stage = "GPU pool fill";
    gpu_parked(gid, 2, gp, 20.0);
    for (int i = 0; i < 2; ++i) {
        proc_env(gp[i], "IVM_GPU_BACKEND", val, sizeof(val));
        ASSERT(strcmp(val, gpu_cuda() ? "cuda" : "emu") == 0, "parked GPU process: "
               "IVM_GPU_BACKEND=%s", val);
        proc_env(gp[i], "CUDA_VISIBLE_DEVICES", val, sizeof(val));
        ASSERT(!gpu_cuda() || val[0] != '\0', "%s", "parked cuda process without "
               "CUDA_VISIBLE_DEVICES");
    }
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "ivmGetNumPEs counts %d PEs with parked GPU processes", n);
    pool_info(&info);
    uint32_t pooled = info.pooled;

    /* Parked processes that fork (emu) fork the third PE too, once one has
     * parked again; ones that do not (cuda: a context does not survive a
     * fork) are two PEs, and the third is cold. */
    const char *fork_env = getenv("IVM_POOL_FORK");
    int nwarm = gpu_cuda() || (fork_env != NULL && strcmp(fork_env, "0") == 0) ? 2 : 3;
    pe_stage = "3 GPU PEs from a pool of 2";
    ASSERT(gpu_round(gb, v, dev, 3, gp, 2, 1, pes) == nwarm, "not %d of 3 GPU PEs were the "
           "parked ones (or forked by them)", nwarm);
    pool_info(&info);
    ASSERT(info.pooled == pooled + (uint32_t)nwarm, "INFO: %u PEs from pools, want %u",
           info.pooled, pooled + (uint32_t)nwarm);
    gpu_info0(&g);
    ASSERT(g.allocations == 1 && g.copies == 1,
           "warm and cold GPU PEs mapping one object: %llu allocations, %u copies",
           (unsigned long long)g.allocations, g.copies);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "ivmGetNumPEs: %d after the GPU PEs ended", n);

    pe_stage = "kill the parked GPU processes";
    gpu_parked(gid, 2, dead, 20.0);
    kill(dead[0], SIGKILL);
    kill(dead[1], SIGKILL);
    for (double deadline = pe_now() + 5.0; !proc_ended(dead[0]) || !proc_ended(dead[1]);) {
        ASSERT(pe_now() < deadline, "%s", "killed parked processes still run after 5 s");
    }
    memset(gb, 0, sizeof(*gb));
    ASSERT(gpu_round(gb, v, dev, 2, dead, 2, 0, pes) == 0, "%s",
           "a killed parked GPU process was handed out");

    pe_stage = "replacements";
    gpu_parked(gid, 2, gp, 20.0);
    ASSERT(!has_pid(dead, 2, gp[0]) && !has_pid(dead, 2, gp[1]), "%s",
           "a killed parked GPU process is still counted");
    memset(gb, 0, sizeof(*gb));
    pool_info(&info);
    pooled = info.pooled;
    ASSERT(gpu_round(gb, v, dev, 2, gp, 2, 1, pes) == 2, "%s",
           "the replacements were not handed out");
    pool_info(&info);
    ASSERT(info.pooled == pooled + 2, "INFO: %u PEs from pools, want %u", info.pooled,
           pooled + 2);
    gpu_info0(&g);
    ASSERT(g.copies == 1, "%u device copies of one object", g.copies);
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(v));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivm-gpud killed while GPU processes are parked: they are killed and not
 * replaced, GPU devices fail with IVM_ERROR_DAEMON_LOST, the CPU pool works. */
static int sc_gpu_gpud_dead(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    ivm_msg_gpu_info_rep_t g;
    ivm_device dev;
    pid_t gp[2];
    ivm_pe pe;
    int id = pe_enter(), gid;

    if (id != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    pe_stage = "GPU pool fill";
    gpu_parked(gid, 2, gp, 20.0);
    gpu_info0(&g);
    ASSERT(g.gpud_pid > 0 && (g.flags & IVM_GPU_INFO_ALIVE), "%s", "no live ivm-gpud");
    printf("gpud-pid %u\n", g.gpud_pid);
    fflush(stdout);

    pe_stage = "kill ivm-gpud";
    ASSERT(kill((pid_t)g.gpud_pid, SIGKILL) == 0, "kill ivm-gpud: %s", strerror(errno));
    for (double deadline = pe_now() + 5.0; !proc_ended(gp[0]) || !proc_ended(gp[1]);
         pe_sleep_ms(5)) {
        ASSERT(pe_now() < deadline, "%s", "parked GPU processes still run 5 s after "
               "ivm-gpud died");
    }
    EXPECT(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_0, &dev), IVM_ERROR_DAEMON_LOST);

    pe_stage = "the CPU pool still works, no GPU process is started again";
    wait_parked(2, 20.0);
    pe_sleep_ms(100);
    pool_info(&info);
    ASSERT(info.parked == 2, "%u parked processes (want the 2 of the CPU device)",
           info.parked);
    uint32_t pooled = info.pooled;
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    CHECK(ivmCreatePEs(dev, 1, &pe));
    CHECK(ivmWait(pe));
    CHECK(ivmWait(pe));
    pool_info(&info);
    ASSERT(info.pooled == pooled + 1, "%s", "the CPU PE did not come from the pool");
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* GPU shares (ivmd --gpu-shares 0:50,0:50, IVM_PE_POOL=1): each share
 * device has its own pool: processes park with IVM_GPU=0 and IVM_GPU=1, both
 * with IVM_GPU_SHARE=50, and a PE created on each share is a parked one. */
static int sc_gpu_shares(int argc, char **argv)
{
    ivm_msg_info_rep_t info;
    ivm_device dev;
    pid_t all[64];
    char val[32], share[32];
    uint32_t pooled;
    ivm_pe pe;
    int id = pe_enter(), gid, per[2] = {0, 0};

    if (id != 0) {
        const char *s = getenv("IVM_GPU_SHARE");
        ASSERT(s != NULL && strcmp(s, "50") == 0, "IVM_GPU_SHARE is '%s'", s ? s : "(unset)");
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmGetMyGroupId(&gid));
    pe_stage = "GPU share pools fill";
    /* A process with IVM_PE_ID=-1 may not have reached the daemon yet: wait
     * until the daemon counts every one of them parked (as gpu_parked does),
     * or a slow start (ASan) makes the PE below a cold spawn. */
    for (double deadline = pe_now() + 20.0; per[0] == 0 || per[1] == 0; pe_sleep_ms(5)) {
        int n = parked_pids(gid, all, 64);
        pool_info(&info);
        per[0] = per[1] = 0;
        for (int i = 0; i < n; ++i) {
            proc_env(all[i], "IVM_GPU", val, sizeof(val));
            proc_env(all[i], "IVM_GPU_SHARE", share, sizeof(share));
            if ((strcmp(val, "0") == 0 || strcmp(val, "1") == 0) && strcmp(share, "50") == 0) {
                ++per[atoi(val)];
            }
        }
        if (info.parked != (uint32_t)n) {
            per[0] = per[1] = 0; /* not all of them have reached the daemon yet */
        }
        ASSERT(pe_now() < deadline, "after 20 s: %d processes parked for share 0, %d for "
               "share 1 (IVM_GPU_SHARE=50), want 1 each (%u parked of %d started)",
               per[0], per[1], info.parked, n);
    }
    for (int k = 0; k < 2; ++k) {
        pool_info(&info);
        pooled = info.pooled;
        CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_GPU_N(k), &dev));
        CHECK(ivmCreatePEs(dev, 1, &pe));
        CHECK(ivmWait(pe));
        CHECK(ivmDestroyDev(dev));
        pool_info(&info);
        ASSERT(info.pooled == pooled + 1, "the PE on share %d did not come from its pool "
               "(%u PEs from pools, want %u)", k, info.pooled, pooled + 1);
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* How a request is served from a pool of IVM_PE_POOL (4 here, or 1): a
 * request that fits the idle parked processes of its device gets the parked
 * processes themselves, all but the last PE, which the last idle one forks
 * (it stays to fork what comes before the refill); a pool of one forks
 * every PE. Run with IVM_PE_POOL=4: one PE alone, then 4 in one call once the
 * pool is full again; with IVM_PE_POOL=1: one PE. Each PE signals once, on
 * the signal board its parked process mapped while it waited, not through
 * the daemon as a fresh process's first signals go (INFO signals_carried). */
static int sc_handout(int argc, char **argv)
{
    int id = pe_enter(), gid, pool = atoi(getenv("IVM_PE_POOL") ? getenv("IVM_PE_POOL") : "0");
    ivm_msg_info_rep_t info;
    uint64_t carried;
    pid_t parked[4];
    ivm_pe pes[4];
    ivm_device dev;

    if (id != 0) {
        return child(id, argv[1]);
    }
    ASSERT(pool == 4 || pool == 1, "IVM_PE_POOL=%d, want 4 or 1", pool);
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));

    pe_stage = "one PE";
    wait_parked((uint32_t)pool, 20.0);
    ASSERT(parked_pids(gid, parked, 4) == pool, "not %d parked processes of this job", pool);
    pool_info(&info);
    carried = info.signals_carried;
    CHECK(ivmCreatePEs(dev, 1, pes));
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[0]));
    pool_info(&info);
    if (pool == 1) {
        ASSERT(b->ppid[1] == parked[0] && b->pid[1] != parked[0], "PE 1 (pid %d, parent %d) "
               "was not forked by the one parked process %d", b->pid[1], b->ppid[1], parked[0]);
        ASSERT(info.signals_carried == carried, "the forked PE sent %llu signal(s) to the "
               "daemon, want 0 (on the board its parent mapped)",
               (unsigned long long)(info.signals_carried - carried));
        CHECK(ivmDestroyDev(dev));
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return pe_ok();
    }
    ASSERT(has_pid(parked, 4, b->pid[1]), "PE 1 (pid %d, parent %d) is not one of the 4 idle "
           "parked processes handed out itself", b->pid[1], b->ppid[1]);
    ASSERT(info.signals_carried == carried, "the parked process handed out itself sent %llu "
           "signal(s) to the daemon, want 0 (on the board it mapped while parked)",
           (unsigned long long)(info.signals_carried - carried));

    pe_stage = "4 PEs in one call from a pool of 4";
    wait_parked(4, 20.0);
    list_parked(gid, parked, 4, 20.0, "after PE 1 ended: the pool did not refill to 4");
    pool_info(&info);
    carried = info.signals_carried;
    CHECK(ivmCreatePEs(dev, 4, pes));
    int direct = 0, forked = 0;
    for (int i = 0; i < 4; ++i) {
        int k = pes[i];
        CHECK(ivmWait(k));
        CHECK(ivmWait(k));
        ASSERT(k > 0 && k < MAXP, "PE id %d", k);
        direct += has_pid(parked, 4, b->pid[k]);
        forked += has_pid(parked, 4, b->ppid[k]) && !has_pid(parked, 4, b->pid[k]);
    }
    ASSERT(direct == 3 && forked == 1, "of 4 PEs from 4 idle parked processes %d were parked "
           "processes and %d forked by one, want 3 and 1", direct, forked);
    pool_info(&info);
    ASSERT(info.signals_carried == carried, "4 PEs from the pool: %llu signal(s) through "
           "the daemon, want 0", (unsigned long long)(info.signals_carried - carried));
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmUnmap(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* Parked processes start with every symbol bound (LD_BIND_NOW=1, ctl/pool.c)
 * unless the job says IVM_POOL_BIND_NOW=0; the PEs they become or fork see
 * the job's environment without it. argv[2]: "on", "off", or "die": the
 * program, as a parked process started bound, ends before ivmEnter (as one
 * with a symbol only lazy binding lets it start without would): the daemon
 * starts the next ones without it, and the pool stays on. */
static int sc_bind_now(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[2] : "on", *pe = getenv("IVM_PE_ID");
    int want = strcmp(mode, "on") == 0, gid, id;
    pid_t parked[2];
    ivm_pe pes[3];
    ivm_device dev;

    if (pe != NULL && atoi(pe) < 0 && strcmp(mode, "die") == 0 && getenv("LD_BIND_NOW") != NULL) {
        return 1;
    }
    if ((id = pe_enter()) != 0) {
        return child(id, argv[1]);
    }
    board_t *b = board_create();
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &dev));
    pe_stage = mode;
    wait_parked(2, 20.0);
    list_parked(gid, parked, 2, 20.0, "of this job");
    for (int i = 0; i < 2; ++i) {
        ASSERT(started_bound(parked[i]) == want, "parked process %d started "
               "%s LD_BIND_NOW=1 (IVM_POOL_BIND_NOW %s, mode %s)", (int)parked[i],
               want ? "without" : "with", getenv("IVM_POOL_BIND_NOW") ? "set" : "unset", mode);
    }
    CHECK(ivmCreatePEs(dev, 3, pes));
    for (int i = 0; i < 3; ++i) {
        int k = pes[i];
        CHECK(ivmWait(k));
        CHECK(ivmWait(k));
        ASSERT(k > 0 && k < MAXP, "PE id %d", k);
        ASSERT(from_parked(parked, 2, b->pid[k], b->ppid[k]), "PE %d (pid %d, parent %d) is "
               "not from the pool", k, b->pid[k], b->ppid[k]);
        ASSERT(b->bind_start[k] == want, "PE %d was %s from a process started bound", k,
               want ? "not" : "");
        ASSERT(b->bind_env[k] == (strcmp(mode, "off") == 0), "PE %d sees LD_BIND_NOW or "
               "IVM_POOL_BIND_NOW: %d (mode %s)", k, b->bind_env[k], mode);
    }
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmUnmap(b));
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"bind_now", sc_bind_now},
    {"remote", sc_remote},
    {"burst", sc_burst},
    {"burst_noexec", sc_burst_noexec},
    {"burst_kill_parked", sc_burst_kill_parked},
    {"semantics", sc_semantics},
    {"handout", sc_handout},
    {"kill_parked", sc_kill_parked},
    {"no_park", sc_no_park},
    {"exe_replaced", sc_exe_replaced},
    {"bad_setting", sc_bad_setting},
    {"tagged", sc_tagged},
    {"gpu", sc_gpu},
    {"gpu_gpud_dead", sc_gpu_gpud_dead},
    {"gpu_shares", sc_gpu_shares},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
