/* PE program: IVM calls from several threads of one PE at once, one of them
 * blocked in ivmWait the whole time. */
#include "pe_util.h"

#include <pthread.h>

#define NTHREADS 4
#define ROUNDS   50

typedef struct worker {
    pthread_t   th;
    int         index;
    int         failed_line;
    char        what[200];
} worker_t;

static atomic_int workers_done;

#define WCHECK(w, call)                                                            \
    do {                                                                           \
        int rc_ = (int)(call);                                                     \
        if (rc_ != IVM_SUCCESS) {                                                  \
            (w)->failed_line = __LINE__;                                           \
            snprintf((w)->what, sizeof((w)->what), "%s returned %s [%s]", #call,   \
                     pe_status_name(rc_), ivmGetLastErrorMessage());               \
            return NULL;                                                           \
        }                                                                          \
    } while (0)

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    char name[32];
    unsigned char *p, *q;
    int id, n;

    for (int i = 0; i < ROUNDS; ++i) {
        size_t size = 256 + (size_t)i * 16;
        snprintf(name, sizeof(name), "t%d_%d", w->index, i);
        WCHECK(w, ivmMalloc(name, &p, size));
        memset(p, w->index + 1, size);
        WCHECK(w, ivmMap(name, &q, 0));
        for (size_t k = 0; k < size; ++k) {
            if (q[k] != w->index + 1) {
                w->failed_line = __LINE__;
                snprintf(w->what, sizeof(w->what), "%s byte %zu is %d", name, k, q[k]);
                return NULL;
            }
        }
        WCHECK(w, ivmSyncPut(q, size));
        WCHECK(w, ivmUnmap(q));
        WCHECK(w, ivmSignal());
        WCHECK(w, ivmGetMyId(&id));
        WCHECK(w, ivmGetNumPEs(&n));
        if (id != 0 || n < 1) {
            w->failed_line = __LINE__;
            snprintf(w->what, sizeof(w->what), "id %d, %d PEs", id, n);
            return NULL;
        }
        WCHECK(w, ivmFree(p));
    }
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

typedef struct waiter {
    pthread_t  th;
    ivm_pe     pe;
    int        rc;
    atomic_int done;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;

    w->rc = ivmWait(w->pe);
    atomic_store(&w->done, 1);
    return NULL;
}

static int sc_threads(int argc, char **argv)
{
    worker_t workers[NTHREADS];
    waiter_t waiter;
    ivm_device dev;
    int id = pe_enter();

    if (id != 0) {
        /* Consume every signal the root's workers post, then end. */
        pe_stage = "child consumes the root's signals";
        for (int i = 0; i < NTHREADS * ROUNDS; ++i) {
            CHECK(ivmWait(0));
        }
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &dev));
    memset(&waiter, 0, sizeof(waiter));
    CHECK(ivmCreatePEs(dev, 1, &waiter.pe));
    CHECK(ivmDestroyDev(dev));
    ASSERT(waiter.pe > 0, "child id %d", waiter.pe);

    /* This thread waits on the child, which ends only after taking every
     * signal the workers post: it is blocked while they run. */
    ASSERT(pthread_create(&waiter.th, NULL, waiter_main, &waiter) == 0, "%s", "pthread");
    pe_sleep_ms(100);
    pe_stage = "workers run while a thread is blocked in ivmWait";
    memset(workers, 0, sizeof(workers));
    for (int t = 0; t < NTHREADS; ++t) {
        workers[t].index = t;
        ASSERT(pthread_create(&workers[t].th, NULL, worker_main, &workers[t]) == 0, "%s",
               "pthread");
    }
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_join(workers[t].th, NULL);
        ASSERT(workers[t].failed_line == 0, "thread %d, line %d: %s", t,
               workers[t].failed_line, workers[t].what);
    }
    ASSERT(atomic_load(&workers_done) == NTHREADS, "%d workers done", atomic_load(&workers_done));
    pe_stage = "the blocked ivmWait returns when the child ends";
    pthread_join(waiter.th, NULL);
    ASSERT(waiter.rc == IVM_SUCCESS, "ivmWait on the child returned %s",
           pe_status_name(waiter.rc));
    {
        int n;
        unsigned char *p;
        CHECK(ivmGetNumPEs(&n));
        EXPECT(ivmMap("t0_0", &p, 0), IVM_ERROR_NOT_FOUND);
    }
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"threads", sc_threads},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
