/* PE program of the warm PE pool tests (test_pool.c). The root runs with
 * IVM_PE_POOL set by the test; it learns about its daemon's pool from INFO
 * (parked processes, PEs handed out by pools) and finds the parked processes
 * of its job in /proc (a negative IVM_PE_ID and its IVM_JOB_ID). */
#include "pe_util.h"

#include <dirent.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "proto.h"
#include "sock.h"

#define MAXP 16

typedef struct board {
    atomic_int seen[MAXP];
    int        pid[MAXP];
    int        gid[MAXP];
    int        id[MAXP];
} board_t;

static void pool_info(ivm_msg_info_rep_t *info)
{
    memset(info, 0, sizeof(*info));
    EXPECT(ivm_sock_info(getenv("IVM_SOCKET"), 5000, info), IVM_SUCCESS);
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

/* Parked processes of job gid of our daemon: their pids (at most max). */
static int parked_pids(int gid, pid_t *pids, int max)
{
    static char env[1 << 20]; /* the whole environment: IVM's variables come last */
    char want[32], sock[300], path[300];
    struct dirent *e;
    DIR *dir = opendir("/proc");
    int n = 0;

    ASSERT(dir != NULL, "%s", "cannot list /proc");
    /* Job ids are per daemon: the socket tells this daemon's processes from
     * those of other daemons running beside the test. */
    snprintf(want, sizeof(want), "IVM_JOB_ID=%d", gid);
    snprintf(sock, sizeof(sock), "IVM_SOCKET=%s", getenv("IVM_SOCKET") ? getenv("IVM_SOCKET") : "");
    while ((e = readdir(dir)) != NULL && n < max) {
        int parked = 0, ours = 0, here = 0;
        ssize_t len;
        FILE *f;

        if (e->d_name[0] < '1' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/environ", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        len = (ssize_t)fread(env, 1, sizeof(env) - 1, f);
        fclose(f);
        for (ssize_t off = 0; off < len; off += (ssize_t)strlen(env + off) + 1) {
            env[len] = '\0';
            parked |= strncmp(env + off, "IVM_PE_ID=-", 11) == 0;
            ours |= strcmp(env + off, want) == 0;
            here |= strcmp(env + off, sock) == 0;
        }
        if (parked && ours && here) {
            pids[n++] = (pid_t)atoi(e->d_name);
        }
    }
    closedir(dir);
    return n;
}

/* The value of variable `name` in process pid's environment ("" if none). */
static void proc_env(pid_t pid, const char *name, char *out, size_t out_len)
{
    static char env[1 << 20]; /* the whole environment: IVM's variables come last */
    char path[64];
    size_t nlen = strlen(name), len;
    FILE *f;

    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    f = fopen(path, "r");
    ASSERT(f != NULL, "cannot read %s", path);
    len = fread(env, 1, sizeof(env) - 1, f);
    fclose(f);
    env[len] = '\0';
    for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
        if (strncmp(env + off, name, nlen) == 0 && env[off + nlen] == '=') {
            snprintf(out, out_len, "%s", env + off + nlen + 1);
        }
    }
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
    EXPECT(ivm_sock_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_ENTER, &req, sizeof(req),
                            &rep, sizeof(rep)), IVM_ERROR_PERMISSION);
    req.token = strtoull(token, NULL, 10);
    pe_stage = "pool ENTER for a parked slot, right token, another pid";
    EXPECT(ivm_sock_request(getenv("IVM_SOCKET"), 5000, IVM_MSG_ENTER, &req, sizeof(req),
                            &rep, sizeof(rep)), IVM_ERROR_PERMISSION);
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

/* Children: record themselves, signal; PE 2 of "semantics" dies without
 * ivmExit, the others exit. */
static int child(int id, const char *scenario)
{
    board_t *b = NULL;

    CHECK(ivmMap("board", (void **)&b, 0));
    ASSERT(id > 0 && id < MAXP, "PE id %d", id);
    b->pid[id] = (int)getpid();
    CHECK(ivmGetMyGroupId(&b->gid[id]));
    CHECK(ivmGetMyId(&b->id[id]));
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
        ASSERT(has_pid(parked, 2, b->pid[i]), "PE %d (pid %d) is not a parked process", i,
               b->pid[i]);
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
        ASSERT(!has_pid(dead, 2, b->pid[pes[i]]), "PE %d is killed parked process %d",
               pes[i], b->pid[pes[i]]);
    }
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));

    pe_stage = "replacement";
    wait_parked(2, 20.0);
    ASSERT(parked_pids(gid, fresh, 4) == 2, "%s", "not 2 parked processes after the kill");
    ASSERT(!has_pid(dead, 2, fresh[0]) && !has_pid(dead, 2, fresh[1]),
           "%s", "a killed parked process is still counted");
    CHECK(ivmCreatePEs(dev, 2, pes));
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));
    for (int i = 0; i < 2; ++i) {
        ASSERT(has_pid(fresh, 2, b->pid[pes[i]]), "PE %d (pid %d) is not a replacement",
               pes[i], b->pid[pes[i]]);
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
    pe_sleep_ms(1000);
    pool_info(&info);
    ASSERT(info.parked == 0, "%u parked processes of a program that does not park",
           info.parked);
    ASSERT(parked_pids(gid, left, 4) == 0, "%s", "pool processes are still being started");
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
    EXPECT(ivm_sock_info(path, 5000, info), IVM_SUCCESS);
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

static const pe_scenario_entry_t scenarios[] = {
    {"remote", sc_remote},
    {"semantics", sc_semantics},
    {"kill_parked", sc_kill_parked},
    {"no_park", sc_no_park},
    {"bad_setting", sc_bad_setting},
    {"tagged", sc_tagged},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
