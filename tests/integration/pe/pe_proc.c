/* PE program: PE creation, ids, wait/signal, kill, max PE id, DS-LB chain,
 * the end of a job, and the programs the ivmrun tests launch. */
#include "pe_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>

#define MAXPES 256

/* A board every PE of a job maps by name. */
typedef struct board {
    atomic_int role[MAXPES];  /* what PE i is to do, set by its creator */
    atomic_int seen[MAXPES];  /* times PE i ran */
    int        gid[MAXPES];
    int        devtype[MAXPES];
    int        pid[MAXPES];
    atomic_int flag[8];
    atomic_int last_null;     /* chain: id of the PE whose successor was IVM_PE_NULL */
} board_t;

static board_t *board_create(void)
{
    board_t *b = NULL;

    CHECK(ivmMalloc("board", &b, sizeof(*b)));
    return b;
}

static board_t *board_map(int id)
{
    board_t *b = NULL;

    ASSERT(id > 0 && id < MAXPES, "PE id %d", id);
    CHECK(ivmMap("board", &b, 0));
    atomic_fetch_add(&b->seen[id], 1);
    CHECK(ivmGetMyGroupId(&b->gid[id]));
    CHECK(ivmGetMyDevType(&b->devtype[id]));
    b->pid[id] = (int)getpid();
    return b;
}

/* The role the creator assigned to PE id (waits for it). */
static int board_role(board_t *b, int id)
{
    pe_wait_flag(&b->role[id], 1, 10.0, "my role");
    return atomic_load(&b->role[id]);
}

static ivm_device this_dev(void)
{
    ivm_device dev;

    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &dev));
    return dev;
}

static ivm_pe spawn(board_t *b, int role)
{
    ivm_device dev = this_dev();
    ivm_pe pe = IVM_PE_NULL;

    CHECK(ivmCreatePEs(dev, 1, &pe));
    CHECK(ivmDestroyDev(dev));
    ASSERT(pe > 0 && pe < MAXPES, "created PE id %d", pe);
    if (b != NULL) {
        atomic_store(&b->role[pe], role);
    }
    return pe;
}

/* Root creates one child that signals and exits (also the singleton test). */
static int sc_spawn_one(int argc, char **argv)
{
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    ivm_pe c = spawn(NULL, 0);
    pe_stage = "wait for the child's signal";
    CHECK(ivmWait(c));
    pe_stage = "wait for the child's exit";
    CHECK(ivmWait(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmCreatePEs: ids increasing and never reused, n = 0, n < 0, pes NULL;
 * group ids; ivmGetNumPEs. */
static int sc_pes(int argc, char **argv)
{
    board_t *b;
    ivm_device dev;
    ivm_pe a[3], z[2] = {77, 77}, bb[2], hidden = IVM_PE_NULL;
    int id = pe_enter(), n, gid, t;

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmSignal());
        pe_stage = "child waits for the root";
        CHECK(ivmWait(0));
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "a new job has %d PEs", n);
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmGetMyDevType(&t));
    b = board_create();
    dev = this_dev();

    pe_stage = "create";
    CHECK(ivmCreatePEs(dev, 3, a));
    ASSERT(a[0] > 0 && a[1] > a[0] && a[2] > a[1], "ids %d %d %d not increasing", a[0], a[1],
           a[2]);
    CHECK(ivmCreatePEs(dev, 0, z));
    ASSERT(z[0] == 77 && z[1] == 77, "n = 0 wrote slots: %d %d", z[0], z[1]);
    CHECK(ivmCreatePEs(dev, 0, NULL));
    EXPECT(ivmCreatePEs(dev, -1, z), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmCreatePEs(NULL, 1, z), IVM_ERROR_INVALID_VALUE);
    ASSERT(z[0] == 77, "%s", "failed ivmCreatePEs wrote a slot");
    CHECK(ivmCreatePEs(dev, 1, NULL));
    CHECK(ivmCreatePEs(dev, 2, bb));
    ASSERT(bb[0] > a[2] + 1 && bb[1] > bb[0],
           "ids after a PE created with pes = NULL: %d %d (last known %d)", bb[0], bb[1], a[2]);
    CHECK(ivmDestroyDev(dev));

    pe_stage = "wait for the children's signals";
    for (int i = 0; i < 3; ++i) {
        CHECK(ivmWait(a[i]));
    }
    for (int i = 0; i < 2; ++i) {
        CHECK(ivmWait(bb[i]));
    }
    /* The PE created without an id array ran too; find its id. */
    pe_stage = "find the PE created with pes = NULL";
    for (double deadline = pe_now() + 10.0; hidden == IVM_PE_NULL; pe_sleep_ms(5)) {
        ASSERT(pe_now() < deadline, "%s", "the PE created with pes = NULL never ran");
        for (int i = 1; i < MAXPES; ++i) {
            if (atomic_load(&b->seen[i]) && i != a[0] && i != a[1] && i != a[2] &&
                i != bb[0] && i != bb[1]) {
                hidden = i;
            }
        }
    }
    ASSERT(hidden > a[2] && hidden < bb[0], "PE created with pes = NULL has id %d", hidden);
    CHECK(ivmWait(hidden));

    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 7, "6 children blocked in ivmWait plus the root: ivmGetNumPEs says %d", n);
    EXPECT(ivmWait(9999), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmWait(bb[1] + 1), IVM_ERROR_NOT_FOUND);

    {
        ivm_pe all[6] = {a[0], a[1], a[2], hidden, bb[0], bb[1]};
        for (int i = 0; i < 6; ++i) {
            ASSERT(atomic_load(&b->seen[all[i]]) == 1, "PE %d ran %d times", all[i],
                   atomic_load(&b->seen[all[i]]));
            ASSERT(b->gid[all[i]] == gid, "PE %d has group id %d, the root %d", all[i],
                   b->gid[all[i]], gid);
            ASSERT(b->devtype[all[i]] == t, "PE %d on IVM_THIS_DEV has device type %d, root %d",
                   all[i], b->devtype[all[i]], t);
        }
        for (int i = 0; i < 6; ++i) {
            CHECK(ivmSignal());
        }
        pe_stage = "wait for the children's exits";
        for (int i = 0; i < 6; ++i) {
            CHECK(ivmWait(all[i]));
        }
    }
    for (int i = 0; i < MAXPES; ++i) {
        ASSERT(atomic_load(&b->seen[i]) <= 1, "PE %d ran %d times", i, atomic_load(&b->seen[i]));
    }
    pe_stage = "ivmGetNumPEs after the exits";
    for (double deadline = pe_now() + 5.0;; pe_sleep_ms(10)) {
        CHECK(ivmGetNumPEs(&n));
        if (n == 1) {
            break;
        }
        ASSERT(pe_now() < deadline, "ivmGetNumPEs is %d 5 s after every child exited", n);
    }
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

typedef struct waiter_arg {
    ivm_pe      pe;
    ivmError_t  rc;
    atomic_int  done;
} waiter_arg_t;

static void *waiter_main(void *p)
{
    waiter_arg_t *w = p;

    w->rc = ivmWait(w->pe);
    atomic_store(&w->done, 1);
    return NULL;
}

/* Signals posted before any wait are all counted. */
static int sc_signal_before_wait(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        for (int i = 0; i < 3; ++i) {
            CHECK(ivmSignal());
        }
        atomic_store(&b->flag[0], 1);
        pe_stage = "child waits for the root";
        CHECK(ivmWait(0));
        atomic_store(&b->flag[1], 1);
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return 0;
    }
    b = board_create();
    ivm_pe c = spawn(NULL, 0);
    pe_wait_flag(&b->flag[0], 1, 20.0, "the child's three signals");
    pe_sleep_ms(100);
    pe_stage = "three waits on three posted signals";
    for (int i = 0; i < 3; ++i) {
        CHECK(ivmWait(c));
    }
    /* A fourth wait has no signal to take: it must block until the child
     * ends, which it does only after the root signals. */
    waiter_arg_t w = {c, IVM_ERROR_INTERNAL, 0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, waiter_main, &w) == 0, "%s", "pthread_create");
    pe_sleep_ms(300);
    ASSERT(!atomic_load(&w.done), "a fourth ivmWait returned %s with no fourth signal",
           pe_status_name(w.rc));
    ASSERT(!atomic_load(&b->flag[1]), "%s", "the child passed its ivmWait(0) with no signal");
    CHECK(ivmSignal());
    pe_stage = "fourth wait, on the child's exit";
    pthread_join(th, NULL);
    ASSERT(w.rc == IVM_SUCCESS, "wait on a PE that called ivmExit returned %s",
           pe_status_name(w.rc));
    ASSERT(atomic_load(&b->flag[1]), "%s", "the fourth wait returned before the child ended");
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* A wait posted first returns once the PE signals. */
static int sc_wait_before_signal(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        pe_sleep_ms(400);
        atomic_store(&b->flag[0], 1);
        CHECK(ivmSignal());
        pe_stage = "child waits for the root";
        CHECK(ivmWait(0));
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return 0;
    }
    b = board_create();
    ivm_pe c = spawn(NULL, 0);
    pe_stage = "root waits before the child signals";
    CHECK(ivmWait(c));
    ASSERT(atomic_load(&b->flag[0]) == 1, "%s", "ivmWait returned before the child signalled");
    CHECK(ivmSignal());
    pe_stage = "root waits for the child's exit";
    CHECK(ivmWait(c));
    CHECK(ivmWait(c));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* A wait on a PE that called ivmExit succeeds, even while its process lives. */
static int sc_wait_exit(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        pe_stage = "child sleeps after ivmExit";
        pe_sleep_ms(1500);
        return 0;
    }
    b = board_create();
    ivm_pe c = spawn(NULL, 0);
    pe_stage = "wait on a PE that calls ivmExit";
    CHECK(ivmWait(c));
    ASSERT(b->pid[c] > 0, "%s", "child pid");
    ASSERT(kill(b->pid[c], 0) == 0, "%s",
           "the wait returned only when the process ended, not at ivmExit");
    CHECK(ivmWait(c));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* A PE that dies without ivmExit: its waiters get IVM_ERROR_PE_FAILED. */
static int sc_wait_failed(int argc, char **argv)
{
    int id = pe_enter();
    const char *how = argc > 2 ? argv[2] : "abort";

    if (id != 0) {
        if (strcmp(how, "abort") == 0) {
            abort();
        }
        if (strcmp(how, "segv") == 0) {
            /* A raw SIGSEGV death, also under ASan (whose handler would report
             * it and exit 1 instead). */
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        _exit(0); /* "exit": no ivmExit, no atexit handlers */
    }
    ivm_pe c = spawn(NULL, 0);
    pe_stage = "wait on a PE that dies";
    EXPECT(ivmWait(c), IVM_ERROR_PE_FAILED);
    EXPECT(ivmWait(c), IVM_ERROR_PE_FAILED);
    CHECK(ivmExit());
    return pe_ok();
}

enum { ROLE_IDLE = 1, ROLE_EXIT = 2 };

/* ivmKillPEs. */
static int sc_kill(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        if (board_role(b, id) == ROLE_EXIT) {
            CHECK(ivmUnmap(b));
            CHECK(ivmExit());
            return 0;
        }
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    b = board_create();
    ivm_pe c0 = spawn(b, ROLE_IDLE), c1 = spawn(b, ROLE_IDLE);
    pe_stage = "wait for the idle children's signals";
    CHECK(ivmWait(c0));
    CHECK(ivmWait(c1));
    pid_t pids[2] = {b->pid[c0], b->pid[c1]};
    ivm_pe list[3] = {c0, IVM_PE_NULL, c1};
    pe_stage = "kill";
    CHECK(ivmKillPEs(list, 3));
    EXPECT(ivmWait(c0), IVM_ERROR_PE_FAILED);
    EXPECT(ivmWait(c1), IVM_ERROR_PE_FAILED);
    for (double deadline = pe_now() + 5.0;; pe_sleep_ms(10)) {
        int alive = (kill(pids[0], 0) == 0) + (kill(pids[1], 0) == 0);
        if (alive == 0) {
            break;
        }
        ASSERT(pe_now() < deadline, "%d killed PE process(es) still exist after 5 s", alive);
    }

    pe_stage = "kill errors";
    ivm_pe bad = 9999, me = 0, nulls[2] = {IVM_PE_NULL, IVM_PE_NULL};
    EXPECT(ivmKillPEs(&bad, 1), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmKillPEs(list, -1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmKillPEs(&me, 1), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmKillPEs(nulls, 2));
    CHECK(ivmKillPEs(&c0, 1)); /* already ended: left alone */
    EXPECT(ivmWait(c0), IVM_ERROR_PE_FAILED);

    pe_stage = "kill right after creation";
    ivm_pe c3 = spawn(b, ROLE_IDLE);
    CHECK(ivmKillPEs(&c3, 1));
    /* A warm PE (IVM_PE_POOL) may have signalled before the kill: the signal
     * counts, and the next wait sees the death. */
    int rc3 = ivmWait(c3);
    if (rc3 == IVM_SUCCESS) {
        rc3 = ivmWait(c3);
    }
    ASSERT(rc3 == IVM_ERROR_PE_FAILED, "ivmWait on a killed PE returned %s",
           pe_status_name(rc3));

    pe_stage = "kill a PE that exited";
    ivm_pe c4 = spawn(b, ROLE_EXIT);
    CHECK(ivmWait(c4));
    CHECK(ivmKillPEs(&c4, 1));
    CHECK(ivmWait(c4));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmSetMaxPesId: slots beyond the limit are IVM_PE_NULL, the call succeeds. */
static int sc_maxid(int argc, char **argv)
{
    ivm_device dev;
    ivm_pe p[5], q[2], r[3];
    int id = pe_enter(), n;

    if (id != 0) {
        CHECK(ivmExit());
        return 0;
    }
    EXPECT(ivmSetMaxPesId(-1), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmSetMaxPesId(3));
    dev = this_dev();
    for (int i = 0; i < 5; ++i) {
        p[i] = 55;
    }
    CHECK(ivmCreatePEs(dev, 5, p));
    ASSERT(p[0] == 1 && p[1] == 2 && p[2] == 3 && p[3] == IVM_PE_NULL && p[4] == IVM_PE_NULL,
           "with max id 3, five slots got %d %d %d %d %d", p[0], p[1], p[2], p[3], p[4]);
    q[0] = q[1] = 55;
    CHECK(ivmCreatePEs(dev, 2, q));
    ASSERT(q[0] == IVM_PE_NULL && q[1] == IVM_PE_NULL, "at the limit: %d %d", q[0], q[1]);
    pe_stage = "wait for PEs 1..3";
    for (int i = 0; i < 3; ++i) {
        CHECK(ivmWait(p[i]));
    }
    EXPECT(ivmWait(4), IVM_ERROR_NOT_FOUND);
    for (double deadline = pe_now() + 5.0;; pe_sleep_ms(10)) {
        CHECK(ivmGetNumPEs(&n));
        if (n == 1) {
            break;
        }
        ASSERT(pe_now() < deadline, "%d PEs alive, only the root should be (no PE for "
               "IVM_PE_NULL slots)", n);
    }
    /* Raising the limit: ids continue where they stopped. */
    CHECK(ivmSetMaxPesId(5));
    CHECK(ivmCreatePEs(dev, 3, r));
    ASSERT(r[0] == 4 && r[1] == 5 && r[2] == IVM_PE_NULL, "after raising the limit to 5: "
           "%d %d %d", r[0], r[1], r[2]);
    CHECK(ivmWait(r[0]));
    CHECK(ivmWait(r[1]));
    /* Lowering it below the ids in use. */
    CHECK(ivmSetMaxPesId(0));
    r[0] = 55;
    CHECK(ivmCreatePEs(dev, 1, r));
    ASSERT(r[0] == IVM_PE_NULL, "with max id 0: %d", r[0]);
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmExit());
    return pe_ok();
}

/* The max PE id is a job-wide attribute: a child PE sets it for everyone. */
static int sc_maxid_global(int argc, char **argv)
{
    ivm_device dev;
    ivm_pe c, more[2];
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmSetMaxPesId(id + 1));
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    c = spawn(NULL, 0);
    CHECK(ivmWait(c));
    more[0] = more[1] = 55;
    dev = this_dev();
    CHECK(ivmCreatePEs(dev, 2, more));
    CHECK(ivmDestroyDev(dev));
    ASSERT(more[0] == c + 1 && more[1] == IVM_PE_NULL,
           "after PE %d set the max id to %d the root got %d %d", c, c + 1, more[0], more[1]);
    CHECK(ivmWait(c));
    CHECK(ivmWait(more[0]));
    CHECK(ivmExit());
    return pe_ok();
}

/* Several threads of the root wait on one PE at once; its signals release
 * them all (replies to one connection, out of order with other calls). */
static int sc_multi_waiters(int argc, char **argv)
{
    waiter_arg_t w[3];
    pthread_t th[3];
    int id = pe_enter(), n;

    if (id != 0) {
        pe_sleep_ms(300);
        for (int i = 0; i < 3; ++i) {
            CHECK(ivmSignal());
        }
        CHECK(ivmWait(0));
        CHECK(ivmExit());
        return 0;
    }
    ivm_pe c = spawn(NULL, 0);
    for (int i = 0; i < 3; ++i) {
        w[i] = (waiter_arg_t){c, IVM_ERROR_INTERNAL, 0};
        ASSERT(pthread_create(&th[i], NULL, waiter_main, &w[i]) == 0, "%s", "pthread");
    }
    pe_sleep_ms(100);
    CHECK(ivmGetNumPEs(&n)); /* answered while three WAITs are pending */
    ASSERT(n == 2, "%d PEs", n);
    pe_stage = "three threads wait on one PE";
    for (int i = 0; i < 3; ++i) {
        pthread_join(th[i], NULL);
        ASSERT(w[i].rc == IVM_SUCCESS, "waiter %d got %s", i, pe_status_name(w[i].rc));
    }
    CHECK(ivmSignal());
    CHECK(ivmWait(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* DS-LB: each PE starts its successor on its own device until the limit of
 * 200 stops the chain. */
static int sc_chain(int argc, char **argv)
{
    const int last = 200;
    board_t *b;
    ivm_device self;
    ivm_pe next = IVM_PE_NULL;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
        CHECK(ivmCreatePEs(self, 1, &next));
        CHECK(ivmDestroyDev(self));
        if (next == IVM_PE_NULL) {
            atomic_store(&b->last_null, id);
        } else if (next != id + 1) {
            pe_failf(__LINE__, "PE %d's successor has id %d", id, next);
        }
        CHECK(ivmUnmap(b));
        CHECK(ivmExit());
        return 0;
    }
    double t0 = pe_now();
    b = board_create();
    CHECK(ivmSetMaxPesId(last));
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &self));
    CHECK(ivmCreatePEs(self, 1, &next));
    ASSERT(next == 1, "first PE id %d", next);
    pe_stage = "chain of 200 PEs";
    pe_wait_flag(&b->last_null, 1, 60.0, "the end of the chain");
    ASSERT(atomic_load(&b->last_null) == last, "the chain ended at PE %d",
           atomic_load(&b->last_null));
    for (int i = 1; i <= last; ++i) {
        CHECK(ivmWait(i));
    }
    EXPECT(ivmWait(last + 1), IVM_ERROR_NOT_FOUND);
    for (int i = 1; i < MAXPES; ++i) {
        int want = i <= last ? 1 : 0;
        ASSERT(atomic_load(&b->seen[i]) == want, "PE %d ran %d times", i,
               atomic_load(&b->seen[i]));
    }
    printf("chain: %d PEs in %.2f s\n", last, pe_now() - t0);
    CHECK(ivmDestroyDev(self));
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* The root ends while its children run: "exit" (ivmExit, then exit 0),
 * "return" (no ivmExit), "sigkill". The children's pids are printed. */
static int sc_root_end(int argc, char **argv)
{
    const char *how = argc > 2 ? argv[2] : "exit";
    board_t *b;
    ivm_pe c[3];
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    b = board_create();
    for (int i = 0; i < 3; ++i) {
        c[i] = spawn(NULL, 0);
    }
    pe_stage = "wait for the children's signals";
    for (int i = 0; i < 3; ++i) {
        CHECK(ivmWait(c[i]));
    }
    printf("PIDS %d %d %d\n", b->pid[c[0]], b->pid[c[1]], b->pid[c[2]]);
    pe_ok();
    if (strcmp(how, "sigkill") == 0) {
        raise(SIGKILL);
    }
    if (strcmp(how, "exit") == 0) {
        CHECK(ivmExit());
    }
    return 0;
}

/* ivmrun: exit with the given code. */
static int sc_exit_code(int argc, char **argv)
{
    pe_enter();
    CHECK(ivmExit());
    return argc > 2 ? atoi(argv[2]) : 0;
}

/* ivmrun: die of SIGKILL. */
static int sc_sigkill(int argc, char **argv)
{
    pe_enter();
    raise(SIGKILL);
    return 0;
}

/* ivmrun --timeout: the root and a child sleep; prints both pids. */
static int sc_sleep(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    b = board_create();
    ivm_pe c = spawn(NULL, 0);
    CHECK(ivmWait(c));
    printf("PIDS %d %d\n", (int)getpid(), b->pid[c]);
    pe_stage = "root sleeps";
    pe_sleep_ms(60000);
    return 0;
}

/* ivmrun --tag-output: every PE prints a line. */
static int sc_hello(int argc, char **argv)
{
    ivm_device dev;
    ivm_pe c[2];
    int id = pe_enter();

    printf("hello from pe %d\n", id);
    fprintf(stderr, "err from pe %d\n", id);
    if (id != 0) {
        CHECK(ivmExit());
        return 0;
    }
    dev = this_dev();
    CHECK(ivmCreatePEs(dev, 2, c));
    CHECK(ivmWait(c[0]));
    CHECK(ivmWait(c[1]));
    CHECK(ivmDestroyDev(dev));
    CHECK(ivmExit());
    return pe_ok();
}

/* Any PE may wait on and kill any PE of its job: child A waits for its
 * sibling B's signal, then kills B. */
enum { ROLE_A = 1, ROLE_B = 2 };

static int sc_sibling(int argc, char **argv)
{
    board_t *b;
    int id = pe_enter();

    if (id != 0) {
        b = board_map(id);
        if (board_role(b, id) == ROLE_A) {
            ivm_pe sib = atomic_load(&b->flag[2]);
            pe_stage = "A waits for B's signal";
            CHECK(ivmWait(sib));
            CHECK(ivmKillPEs(&sib, 1));
            EXPECT(ivmWait(sib), IVM_ERROR_PE_FAILED);
            CHECK(ivmUnmap(b));
            CHECK(ivmExit());
            return 0;
        }
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    b = board_create();
    ivm_pe a = spawn(NULL, 0);
    ivm_pe sib = spawn(b, ROLE_B);
    atomic_store(&b->flag[2], sib);
    atomic_store(&b->role[a], ROLE_A);
    pe_stage = "root waits for A's exit";
    CHECK(ivmWait(a));
    pe_stage = "root waits on B, killed by A";
    EXPECT(ivmWait(sib), IVM_ERROR_PE_FAILED);
    CHECK(ivmFree(b));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmCreatePEs returns without waiting for the PE to run: the child sleeps
 * before its ivmEnter. */
static int sc_create_early(int argc, char **argv)
{
    int id, n;

    if (getenv("IVM_PE_ID") != NULL) {
        pe_sleep_ms(2000); /* a child (ivmd gives it its identity), slow to start */
    }
    id = pe_enter();
    if (id != 0) {
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    double t0 = pe_now();
    ivm_pe c = spawn(NULL, 0);
    double dt = pe_now() - t0;
    ASSERT(dt < 1.0, "ivmCreatePEs took %.2f s: it waited for the PE to start", dt);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 2, "a started PE that has not entered yet counts as alive: %d PEs", n);
    pe_stage = "wait on a PE that has not entered yet";
    CHECK(ivmWait(c));
    ASSERT(pe_now() - t0 > 1.5, "%s", "the wait returned before the child could signal");
    CHECK(ivmWait(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* The daemon goes away while the root waits: the wait fails, no call hangs. */
static int sc_daemon_lost(int argc, char **argv)
{
    board_t *b;
    void *p = NULL;
    int id = pe_enter(), rc, n;

    if (id != 0) {
        b = board_map(id);
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    b = board_create();
    ivm_pe c = spawn(NULL, 0);
    CHECK(ivmWait(c));
    printf("PIDS %d\n", b->pid[c]);
    printf("READY\n");
    pe_stage = "waiting while the daemon is terminated";
    rc = ivmWait(c);
    printf("WAIT %s\n", pe_status_name(rc));
    ASSERT(rc != IVM_SUCCESS, "%s", "ivmWait succeeded although the daemon is gone");
    pe_stage = "calls after the daemon is gone";
    rc = ivmGetNumPEs(&n);
    ASSERT(rc != IVM_SUCCESS, "ivmGetNumPEs returned %s without a daemon", pe_status_name(rc));
    rc = ivmMalloc("after", &p, 64);
    ASSERT(rc != IVM_SUCCESS, "ivmMalloc returned %s without a daemon", pe_status_name(rc));
    rc = ivmSignal();
    ASSERT(rc != IVM_SUCCESS, "ivmSignal returned %s without a daemon", pe_status_name(rc));
    return pe_ok();
}

/* Two jobs on one daemon see neither each other's objects nor PEs.
 * argv[2]: a directory for the two roots to meet in. */
static int sc_iso_a(int argc, char **argv)
{
    char path[512], tmp[512];
    unsigned char *p;
    FILE *f;
    int id = pe_enter(), gid;

    if (id != 0) {
        CHECK(ivmSignal());
        pe_idle_forever();
    }
    ASSERT(argc > 2, "%s", "usage: iso_a DIR");
    CHECK(ivmGetMyGroupId(&gid));
    CHECK(ivmMalloc("iso", &p, 4096));
    memset(p, 0xa5, 4096);
    ivm_pe c = spawn(NULL, 0);
    CHECK(ivmWait(c));
    snprintf(tmp, sizeof(tmp), "%s/a.tmp", argv[2]);
    snprintf(path, sizeof(path), "%s/a.txt", argv[2]);
    f = fopen(tmp, "w");
    ASSERT(f != NULL, "%s", tmp);
    fprintf(f, "%d %d\n", gid, c);
    fclose(f);
    ASSERT(rename(tmp, path) == 0, "%s", path);
    snprintf(path, sizeof(path), "%s/b.done", argv[2]);
    pe_stage = "job A waits for job B";
    for (double deadline = pe_now() + 30.0; access(path, F_OK) != 0; pe_sleep_ms(10)) {
        ASSERT(pe_now() < deadline, "%s", "job B never finished");
    }
    for (int i = 0; i < 4096; ++i) {
        ASSERT(p[i] == 0xa5, "job B changed job A's object at byte %d", i);
    }
    CHECK(ivmExit());
    return pe_ok();
}

static int sc_iso_b(int argc, char **argv)
{
    char path[512];
    unsigned char *p, *q = NULL;
    FILE *f = NULL;
    int gid_a = -1, child_a = -1, gid, n;

    ASSERT(argc > 2, "%s", "usage: iso_b DIR");
    snprintf(path, sizeof(path), "%s/a.txt", argv[2]);
    pe_stage = "job B waits for job A";
    for (double deadline = pe_now() + 30.0; (f = fopen(path, "r")) == NULL; pe_sleep_ms(10)) {
        ASSERT(pe_now() < deadline, "%s", "job A never got ready");
    }
    ASSERT(fscanf(f, "%d %d", &gid_a, &child_a) == 2, "%s", "a.txt");
    fclose(f);
    ASSERT(pe_enter() == 0, "%s", "a second job's first PE is its root PE");
    CHECK(ivmGetMyGroupId(&gid));
    ASSERT(gid != gid_a, "two jobs share the group id %d", gid);
    CHECK(ivmGetNumPEs(&n));
    ASSERT(n == 1, "job B counts %d PEs (job A's?)", n);
    EXPECT(ivmMap("iso", &q, 0), IVM_ERROR_NOT_FOUND);
    CHECK(ivmMalloc("iso", &p, 4096));
    for (int i = 0; i < 4096; ++i) {
        ASSERT(p[i] == 0, "job B's \"iso\" shows job A's data at byte %d", i);
    }
    memset(p, 0x5b, 4096);
    EXPECT(ivmWait(child_a), IVM_ERROR_NOT_FOUND);
    {
        ivm_pe other = child_a;
        EXPECT(ivmKillPEs(&other, 1), IVM_ERROR_NOT_FOUND);
    }
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    snprintf(path, sizeof(path), "%s/b.done", argv[2]);
    f = fopen(path, "w");
    ASSERT(f != NULL, "%s", path);
    fclose(f);
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"spawn_one", sc_spawn_one},
    {"pes", sc_pes},
    {"signal_before_wait", sc_signal_before_wait},
    {"wait_before_signal", sc_wait_before_signal},
    {"wait_exit", sc_wait_exit},
    {"wait_failed", sc_wait_failed},
    {"kill", sc_kill},
    {"maxid", sc_maxid},
    {"chain", sc_chain},
    {"root_end", sc_root_end},
    {"exit_code", sc_exit_code},
    {"sigkill", sc_sigkill},
    {"sleep", sc_sleep},
    {"hello", sc_hello},
    {"maxid_global", sc_maxid_global},
    {"multi_waiters", sc_multi_waiters},
    {"sibling", sc_sibling},
    {"create_early", sc_create_early},
    {"daemon_lost", sc_daemon_lost},
    {"iso_a", sc_iso_a},
    {"iso_b", sc_iso_b},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
