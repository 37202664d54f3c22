/* PE program: CPU devices that are a share of their cores' time (ivmd/devcg.c):
 * the cgroup a PE lands in, its limit, the CPU time a busy PE gets, changing
 * a share at run time (ivm-ctl, ivm-info), killed PEs, refusals. */
#include "pe_util.h"

#include <stdatomic.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "client.h"
#include "proto.h"
#include "sock.h"

#define SHARE_PES 4

/* What child PE k reports; a child on another node pushes its slot to the
 * master with ivmSyncPut. */
typedef struct share_slot {
    atomic_int reported;     /* 1: pid and cgroup written; 2: frac too */
    int        pid;
    double     frac;         /* CPU time / wall time of its busy loop */
    char       cgroup[256];  /* its path in the cpu hierarchy */
} share_slot_t;

typedef struct share_board {
    atomic_int   go;         /* the root lets the waiting children end */
    share_slot_t slot[SHARE_PES];
} share_board_t;

/* Whether the comma-separated list names controller cpu. */
static int share_lists_cpu(const char *list)
{
    size_t n;

    while (*list != '\0') {
        n = strcspn(list, ",");
        if (n == 3 && strncmp(list, "cpu", 3) == 0) {
            return 1;
        }
        list += n + (list[n] == ',');
    }
    return 0;
}

/* The path of pid's cgroup in the hierarchy with the cpu controller: the v1
 * line naming cpu, else the unified ("0::") one. */
static void share_cgroup_of(pid_t pid, char *buf, size_t len)
{
    char path[64], line[512], v2[256] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    f = fopen(path, "r");
    ASSERT(f != NULL, "cannot open %s", path);
    buf[0] = '\0';
    while (buf[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
        char *c1 = strchr(line, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        line[strcspn(line, "\n")] = '\0';
        if (c2 == NULL) {
            continue;
        }
        *c2 = '\0';
        if (share_lists_cpu(c1 + 1)) {
            snprintf(buf, len, "%s", c2 + 1);
        } else if (strcmp(line, "0:") == 0) {
            snprintf(v2, sizeof(v2), "%s", c2 + 1);
        }
    }
    fclose(f);
    if (buf[0] == '\0') {
        snprintf(buf, len, "%s", v2);
    }
}

/* The group path (relative to this process's own cgroup, as common/cgroup.h
 * names groups) of the child whose cgroup path is child_path. */
static const char *share_rel(const char *child_path)
{
    char mine[256];
    size_t n;

    share_cgroup_of(getpid(), mine, sizeof(mine));
    n = strcmp(mine, "/") == 0 ? 0 : strlen(mine);
    ASSERT(strncmp(child_path, mine, n) == 0 && child_path[n] == '/',
           "the PE's cgroup %s is not below the root PE's %s", child_path, mine);
    return child_path + n + 1;
}

static double share_cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A child: report, then (busy) loop for `seconds` of wall time, or until go. */
static int share_child(int id, double busy_seconds)
{
    share_board_t *b;
    double t0, c0;
    int k = id - 1;

    CHECK(ivmMap("board", &b, 0));
    ASSERT(k >= 0 && k < SHARE_PES, "pe %d", id);
    b->slot[k].pid = (int)getpid();
    share_cgroup_of(getpid(), b->slot[k].cgroup, sizeof(b->slot[k].cgroup));
    atomic_store(&b->slot[k].reported, 1);
    CHECK(ivmSyncPut(&b->slot[k], sizeof(b->slot[k])));
    if (busy_seconds > 0) {
        pe_stage = "busy loop";
        t0 = pe_now();
        c0 = share_cpu_seconds();
        while (pe_now() - t0 < busy_seconds) {
            for (volatile int spin = 0; spin < 10000; ++spin) {
            }
        }
        b->slot[k].frac = (share_cpu_seconds() - c0) / (pe_now() - t0);
        atomic_store(&b->slot[k].reported, 2);
        CHECK(ivmSyncPut(&b->slot[k], sizeof(b->slot[k])));
    } else {
        pe_stage = "waiting for go";
        while (!atomic_load(&b->go)) {
            pe_sleep_ms(2);
        }
    }
    CHECK(ivmUnmap(b));
    CHECK(ivmExit());
    return 0;
}

/* The group of the child k of kind "shared" (dev<K>/job<J>: the limit is on
 * dev<K>) or "own" (job<J>-dev<K>), checked by name; returns the group that
 * holds the limit (static storage). */
static const char *share_limit_group(const share_board_t *b, int k, int dev, const char *kind)
{
    static char rel[256];
    char want[32];
    char *slash;

    snprintf(rel, sizeof(rel), "%s", share_rel(b->slot[k].cgroup));
    ASSERT(strncmp(rel, "ivm/ivmd-", 9) == 0, "PE %d is in cgroup %s, not in ivm/ivmd-*",
           k + 1, rel);
    slash = strrchr(rel, '/');
    if (strcmp(kind, "shared") == 0) {
        ASSERT(strncmp(slash, "/job", 4) == 0, "PE in %s, not in a job group", rel);
        *slash = '\0';
        snprintf(want, sizeof(want), "/dev%d", dev);
        ASSERT(strcmp(strrchr(rel, '/'), want) == 0, "the job group is in %s, not %s", rel,
               want);
    } else {
        snprintf(want, sizeof(want), "-dev%d", dev);
        ASSERT(strstr(slash, want) != NULL && strncmp(slash, "/job", 4) == 0,
               "PE in %s, not in job<J>%s", rel, want);
    }
    return rel;
}

/* The quota and period of group rel (relative to our cgroup). */
static void share_limit(const char *rel, uint64_t *quota, uint64_t *period)
{
    ivm_cgroup_root_t root;
    char err[320];

    ASSERT(ivm_cgroup_root_find(&root, err, sizeof(err)) == IVM_SUCCESS, "%s", err);
    ASSERT(ivm_cgroup_get_limit(&root, rel, quota, period, err, sizeof(err)) == IVM_SUCCESS,
           "%s", err);
}

static void share_expect_limit(const char *rel, uint32_t cpu_pct)
{
    uint64_t quota, period, want_q, want_p;

    ivm_cgroup_period(cpu_pct, &want_p, &want_q);
    share_limit(rel, &quota, &period);
    ASSERT(quota == want_q && (cpu_pct == 0 || period == want_p),
           "cgroup %s has quota %llu us per %llu us, want %llu per %llu (%u%% of a core)", rel,
           (unsigned long long)quota, (unsigned long long)period,
           (unsigned long long)want_q, (unsigned long long)want_p, cpu_pct);
}

static ivm_msg_info_rep_t share_info(void)
{
    ivm_msg_info_rep_t info;

    EXPECT(ivm_client_info(getenv("IVM_SOCKET"), 5000, &info, NULL), IVM_SUCCESS);
    return info;
}

/* With the warm pool on, wait until every device's pool is full, so that
 * the next PE is a parked process. */
static void share_wait_pool(int ndevs)
{
    const char *env = getenv("IVM_PE_POOL");
    int pool = env != NULL ? atoi(env) : 0;
    double deadline = pe_now() + 20.0;

    pe_stage = "waiting for the warm pool";
    while (pool > 0 && share_info().parked < (uint32_t)(pool * ndevs)) {
        ASSERT(pe_now() < deadline, "%u parked processes after 20 s, want %d",
               share_info().parked, pool * ndevs);
        pe_sleep_ms(5);
    }
}

/* busy HOST DEV CPU_PCT MAXFRAC shared|own NDEVS: a PE on CPU device DEV of
 * node HOST ("-": this one), a share of CPU_PCT percent of one core,
 * busy-loops for 1 s and gets at most MAXFRAC of a core; its group (of the
 * daemon's table, or of the job's own) has the limit. With the pool on, a
 * local PE is a parked process (NDEVS: the devices whose pools fill). */
static int sc_busy(int argc, char **argv)
{
    int id = pe_enter(), dev, local;
    const char *pool = getenv("IVM_PE_POOL");
    share_board_t *b;
    ivm_device d;
    ivm_pe pe;
    uint32_t pooled;

    if (id != 0) {
        return share_child(id, 1.0);
    }
    ASSERT(argc == 8, "%s", "usage: busy HOST DEV CPU_PCT MAXFRAC shared|own NDEVS");
    local = strcmp(argv[2], "-") == 0;
    dev   = atoi(argv[3]);
    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    if (local) {
        share_wait_pool(atoi(argv[7]));
    }
    pooled = share_info().pooled;
    CHECK(ivmCreateDev(local ? IVM_THIS_HOST : argv[2], IVM_CPU_N(dev), &d));
    CHECK(ivmCreatePEs(d, 1, &pe));
    pe_stage = "waiting for the PE's report";
    pe_wait_flag(&b->slot[0].reported, 1, 20.0, "the PE's cgroup");
    share_expect_limit(share_limit_group(b, 0, dev, argv[6]), (uint32_t)atoi(argv[4]));
    if (local && pool != NULL && atoi(pool) > 0) {
        ASSERT(share_info().pooled == pooled + 1, "%s", "the PE was not a parked process");
    }
    CHECK(ivmWait(pe));
    printf("SHARE pe=%d cgroup=%s cpu=%.3f\n", pe, b->slot[0].cgroup, b->slot[0].frac);
    ASSERT(b->slot[0].frac > 0.0 && b->slot[0].frac <= atof(argv[5]),
           "the PE on CPU device %d got %.3f of a core over 1 s, at most %s expected", dev,
           b->slot[0].frac, argv[5]);
    CHECK(ivmDestroyDev(d));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* Run a command line; its exit status, its output (both streams) in out. */
static int share_run(const char *cmd, char *out, size_t len)
{
    char line[512];
    size_t used = 0;
    FILE *f = popen(cmd, "r");
    int status;

    ASSERT(f != NULL, "popen %s", cmd);
    out[0] = '\0';
    while (fgets(line, sizeof(line), f) != NULL) {
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s", line);
        used = used < len ? used : len;
    }
    status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* out has a line that starts with head and holds tail. */
static void share_expect_line(const char *out, const char *head, const char *tail)
{
    const char *line = strstr(out, head);
    size_t len = line != NULL ? strcspn(line, "\n") : 0;

    ASSERT(line != NULL && (line == out || line[-1] == '\n'), "no line '%s...' in:\n%s",
           head, out);
    ASSERT(memmem(line, len, tail, strlen(tail)) != NULL, "the line '%.*s' lacks '%s'",
           (int)len, line, tail);
}

/* change IVM_CTL IVM_INFO, on a daemon with --cpu-devices 0,1:50,1:25: a PE on
 * device 2 and one on device 0; ivm-ctl changes device 2's share (its group's
 * limit follows; a share making core 1's sum exceed 100 is refused), gives
 * device 0 (whole core 0) a share (its running PE joins a group), and back;
 * ivm-info shows the shares and the PEs. */
static int sc_change(int argc, char **argv)
{
    char cmd[1024], out[4096], limit2[256];
    int id = pe_enter();
    share_board_t *b;
    ivm_device d0, d2;
    ivm_pe pes[2];

    if (id != 0) {
        return share_child(id, 0);
    }
    ASSERT(argc == 4, "%s", "usage: change IVM_CTL IVM_INFO");
    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(2), &d2));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(0), &d0));
    CHECK(ivmCreatePEs(d2, 1, &pes[0]));
    CHECK(ivmCreatePEs(d0, 1, &pes[1]));
    pe_wait_flag(&b->slot[0].reported, 1, 20.0, "the PE on device 2");
    pe_wait_flag(&b->slot[1].reported, 1, 20.0, "the PE on device 0");
    snprintf(limit2, sizeof(limit2), "%s", share_limit_group(b, 0, 2, "shared"));
    share_expect_limit(limit2, 25);
    ASSERT(strcmp(b->slot[1].cgroup, "/") == 0 || strstr(b->slot[1].cgroup, "/ivm/") == NULL,
           "the PE on whole core 0 is in cgroup %s", b->slot[1].cgroup);

    pe_stage = "ivm-ctl set-share 2 50";
    snprintf(cmd, sizeof(cmd), "%s set-share 2 50 2>&1", argv[2]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
    share_expect_limit(limit2, 50);
    pe_stage = "ivm-ctl set-share 2 60 (refused)";
    snprintf(cmd, sizeof(cmd), "%s set-share 2 60 2>&1", argv[2]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 1, "%s was not refused: %s", cmd, out);
    ASSERT(strstr(out, "core 1 would be shared by devices whose shares add up to 110%") != NULL,
           "%s said: %s", cmd, out);
    share_expect_limit(limit2, 50);

    pe_stage = "ivm-info";
    snprintf(cmd, sizeof(cmd), "%s 2>&1", argv[3]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
    ASSERT(strstr(out, "cpu_devices=3\n") != NULL, "ivm-info: %s", out);
    share_expect_line(out, "cpu_device.0=cores=0 ncores=1 share=100 pes=1 groups=0 ",
                      "quota_us=0 period_us=0");
    /* (with the warm pool, device 1's parked processes have a group) */
    share_expect_line(out, "cpu_device.1=cores=1 ncores=1 share=50 pes=0 ",
                      "quota_us=2000 period_us=4000");
    share_expect_line(out, "cpu_device.2=cores=1 ncores=1 share=50 pes=1 groups=1 ",
                      "quota_us=2000 period_us=4000");

    pe_stage = "ivm-ctl set-share 0 30: the running PE joins a group";
    snprintf(cmd, sizeof(cmd), "%s set-share 0 30 2>&1", argv[2]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
    share_cgroup_of(b->slot[1].pid, b->slot[1].cgroup, sizeof(b->slot[1].cgroup));
    share_expect_limit(share_limit_group(b, 1, 0, "shared"), 30);
    snprintf(cmd, sizeof(cmd), "%s set-share 0 100 2>&1", argv[2]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
    share_expect_limit(share_limit_group(b, 1, 0, "shared"), 0);
    snprintf(cmd, sizeof(cmd), "%s set-share 3 50 2>&1", argv[2]);
    ASSERT(share_run(cmd, out, sizeof(out)) == 1 && strstr(out, "no CPU device 3") != NULL,
           "%s: %s", cmd, out);

    atomic_store(&b->go, 1);
    CHECK(ivmWait(pes[0]));
    CHECK(ivmWait(pes[1]));
    CHECK(ivmDestroyDev(d0));
    CHECK(ivmDestroyDev(d2));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* killed DEV: two PEs on share device DEV, one ended by ivmKillPEs, one by
 * SIGKILL; the job then ends (the teardown checks that its groups went). */
static int sc_killed(int argc, char **argv)
{
    int id = pe_enter();
    share_board_t *b;
    ivm_device d;
    ivm_pe pes[2];

    if (id != 0) {
        return share_child(id, 0);
    }
    ASSERT(argc == 3, "%s", "usage: killed DEV");
    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(atoi(argv[2])), &d));
    CHECK(ivmCreatePEs(d, 2, pes));
    pe_wait_flag(&b->slot[0].reported, 1, 20.0, "PE 1");
    pe_wait_flag(&b->slot[1].reported, 1, 20.0, "PE 2");
    ASSERT(strstr(b->slot[0].cgroup, "/ivm/ivmd-") != NULL, "PE 1 is in cgroup %s", b->slot[0].cgroup);
    CHECK(ivmKillPEs(&pes[0], 1));
    ASSERT(kill(b->slot[1].pid, SIGKILL) == 0, "kill %d", b->slot[1].pid);
    EXPECT(ivmWait(pes[0]), IVM_ERROR_PE_FAILED);
    EXPECT(ivmWait(pes[1]), IVM_ERROR_PE_FAILED);
    CHECK(ivmDestroyDev(d));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* hold DEV: a PE on DEV that waits until killed; prints "HELD <its pid>
 * <its cgroup>" and idles until killed (the daemon-killed test). */
static int sc_hold(int argc, char **argv)
{
    int id = pe_enter();
    share_board_t *b;
    ivm_device d;
    ivm_pe pe;

    if (id != 0) {
        return share_child(id, 0);
    }
    ASSERT(argc == 3, "%s", "usage: hold DEV");
    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_CPU_N(atoi(argv[2])), &d));
    CHECK(ivmCreatePEs(d, 1, &pe));
    pe_wait_flag(&b->slot[0].reported, 1, 20.0, "the PE");
    printf("HELD %d %s\n", b->slot[0].pid, b->slot[0].cgroup);
    fflush(stdout);
    alarm(0);
    pe_idle_forever();
}

/* enter_refused STATUS_NAME: ivmEnter fails with that status (the job's
 * IVM_CPU_DEVICES has a bad or unenforceable share); prints its message. */
static int sc_enter_refused(int argc, char **argv)
{
    int rc;

    ASSERT(argc == 3, "%s", "usage: enter_refused STATUS_NAME");
    pe_stage = "ivmEnter";
    rc = ivmEnter();
    printf("MESSAGE: %s\n", ivmGetLastErrorMessage());
    ASSERT(strcmp(pe_status_name(rc), argv[2]) == 0, "ivmEnter returned %s, expected %s",
           pe_status_name(rc), argv[2]);
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"busy", sc_busy},
    {"change", sc_change},
    {"killed", sc_killed},
    {"hold", sc_hold},
    {"enter_refused", sc_enter_refused},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
