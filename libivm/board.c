/* Addressed signals between PEs of one node through the job's signal board
 * (BOARD in common/proto.h): shared memory and a futex, no daemon round trip.
 * The board is asked for once, at the first addressed signal or wait; a pair
 * it does not cover (another node, ids past IVM_BOARD_PES, no board) goes
 * through the daemon, and both ends of a pair always agree on which. */
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "board_ops.h"
#include "libivm.h"
#include "log.h"

enum { IVM_BOARD_UNKNOWN = 0, IVM_BOARD_NONE = 1, IVM_BOARD_MAPPED = 2 };

static pthread_mutex_t ivm_board_lock = PTHREAD_MUTEX_INITIALIZER;
static int ivm_board_state;       /* IVM_BOARD_UNKNOWN .. MAPPED */
static ivm_board_t *ivm_board_map;

/* Map the board memfd fd (closed here): MAPPED, or NONE if it is not one. */
static int ivm_board_map_fd(int fd)
{
    void *map = mmap(NULL, sizeof(ivm_board_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

    close(fd);
    if (map == MAP_FAILED || ((ivm_board_t *)map)->magic != IVM_BOARD_MAGIC) {
        if (map != MAP_FAILED) {
            munmap(map, sizeof(ivm_board_t));
        }
        return IVM_BOARD_NONE;
    }
    ivm_board_map = map;
    return IVM_BOARD_MAPPED;
}

/* Ask the daemon for the board and map it; NONE if it has none for us. */
static int ivm_board_fetch(void)
{
    ivm_msg_status_t rep;
    int fd = -1;

    if (ivm_call(IVM_MSG_BOARD, &(ivm_msg_empty_t){0}, sizeof(ivm_msg_empty_t), &rep,
                 sizeof(rep), &fd) != IVM_SUCCESS ||
        fd < 0) {
        ivm_debug("no signal board: addressed signals go through the daemon");
        if (fd >= 0) {
            close(fd);
        }
        return IVM_BOARD_NONE;
    }
    return ivm_board_map_fd(fd);
}

/* The bytes of the board that a PE's own ivmSignal / ivmWait touch: the
 * header, the states and the own-signal arrays, up to the barriers. */
#define IVM_BOARD_OWN_BYTES offsetof(ivm_board_t, barriers)

void ivm_board_adopt(int fd)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), off;

    pthread_mutex_lock(&ivm_board_lock);
    if (ivm_board_state != IVM_BOARD_UNKNOWN) {
        close(fd);
    } else if (ivm_board_map_fd(fd) == IVM_BOARD_MAPPED) {
        /* Written, not read: the first write to a page read first faults
         * again. Adding 0 changes nothing the daemon or a PE keeps there. */
        for (off = 0; off < IVM_BOARD_OWN_BYTES; off += page) {
            __atomic_fetch_add((uint32_t *)((char *)ivm_board_map + off), 0, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&ivm_board_state, IVM_BOARD_MAPPED, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ivm_board_lock);
}

static ivm_board_t *ivm_board_get(void)
{
    int state = __atomic_load_n(&ivm_board_state, __ATOMIC_ACQUIRE);

    if (state == IVM_BOARD_UNKNOWN) {
        pthread_mutex_lock(&ivm_board_lock);
        state = ivm_board_state;
        if (state == IVM_BOARD_UNKNOWN) {
            state = ivm_board_fetch();
            __atomic_store_n(&ivm_board_state, state, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&ivm_board_lock);
    }
    return state == IVM_BOARD_MAPPED ? ivm_board_map : NULL;
}

/* The board, if a and b are both its node's PEs. Not once the daemon is
 * known to be lost: the call then fails as every call to it does. */
static ivm_board_t *ivm_board_local(int a, int b)
{
    ivm_board_t *m;

    if (a < 0 || b < 0 || (uint32_t)a >= IVM_BOARD_PES || (uint32_t)b >= IVM_BOARD_PES ||
        __atomic_load_n(&ivm_ctx.lost, __ATOMIC_RELAXED) || (m = ivm_board_get()) == NULL) {
        return NULL;
    }
    if (!(__atomic_load_n(&m->state[a], __ATOMIC_ACQUIRE) & IVM_BOARD_LOCAL) ||
        !(__atomic_load_n(&m->state[b], __ATOMIC_ACQUIRE) & IVM_BOARD_LOCAL)) {
        return NULL;
    }
    return m;
}

/* The board, if the pair (a, b) is on it (the job puts pairs there). */
static ivm_board_t *ivm_board_pair(int a, int b)
{
    ivm_board_t *m = ivm_board_local(a, b);

    return m != NULL && (m->flags & IVM_BOARD_F_PAIRS) ? m : NULL;
}

int ivm_board_has_pair(int to)
{
    return ivm_board_pair(ivm_ctx.pe_id, to) != NULL;
}

int ivm_board_signal(int to, ivmError_t *status_p)
{
    ivm_board_t *m = ivm_board_pair(ivm_ctx.pe_id, to);

    if (m == NULL) {
        return 0;
    }
    __atomic_add_fetch(&m->count[to][ivm_ctx.pe_id], 1, __ATOMIC_SEQ_CST);
    ivm_board_bump(&m->wake[to], &m->sleepers[to]);
    *status_p = IVM_SUCCESS;
    return 1;
}

/* The daemon closed our connection (it died): sleeping waiters look every
 * IVM_BOARD_NAP_NS. */
#define IVM_BOARD_NAP_NS 50000000L
static int ivm_board_daemon_gone(void)
{
    struct pollfd pfd = {.fd = ivm_ctx.fd, .events = POLLRDHUP};

    return ivm_ctx.lost ||
           (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)));
}

/* One sleep on a wake word, unless the news came meanwhile. */
static void ivm_board_nap(ivm_board_t *m, uint32_t *wake, uint32_t *sleepers,
                          const uint32_t *count, int from)
{
    uint32_t seq = __atomic_load_n(wake, __ATOMIC_SEQ_CST);
    struct timespec ts = {0, IVM_BOARD_NAP_NS};

    __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(count, __ATOMIC_SEQ_CST) == 0 &&
        !(__atomic_load_n(&m->state[from], __ATOMIC_SEQ_CST) &
          (IVM_BOARD_EXITED | IVM_BOARD_FAILED))) {
        syscall(SYS_futex, wake, FUTEX_WAIT, seq, &ts, NULL, 0);
    }
    __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
}

/* Consume one of count, PE `from`'s signals, asleep on wake / sleepers
 * between looks; from's end answers when none is left (fn: the caller's
 * name, for the error message). */
static ivmError_t ivm_board_take_wait(ivm_board_t *m, uint32_t *count, uint32_t *wake,
                                      uint32_t *sleepers, int from, const char *fn)
{
    uint64_t spin_until = ivm_now_ns() + ivm_ctx.spin_ns;
    uint32_t state;

    for (;;) {
        if (ivm_board_take_one(count)) {
            return IVM_SUCCESS;
        }
        state = __atomic_load_n(&m->state[from], __ATOMIC_SEQ_CST);
        if (state & (IVM_BOARD_EXITED | IVM_BOARD_FAILED)) {
            /* A signal posted before its end is consumed first. */
            if (ivm_board_take_one(count) || !(state & IVM_BOARD_FAILED)) {
                return IVM_SUCCESS;
            }
            ivm_set_error("%s: pe %d died without ivmExit", fn, from);
            return IVM_ERROR_PE_FAILED;
        }
        if (ivm_now_ns() < spin_until) {
            continue;
        }
        ivm_board_nap(m, wake, sleepers, count, from);
        if (ivm_board_daemon_gone()) {
            ivm_set_error("%s: connection to the daemon lost", fn);
            return IVM_ERROR_DAEMON_LOST;
        }
    }
}

int ivm_board_wait(int from, ivmError_t *status_p)
{
    int me = ivm_ctx.pe_id;
    ivm_board_t *m = ivm_board_pair(me, from);

    if (m == NULL) {
        return 0;
    }
    *status_p = ivm_board_take_wait(m, &m->count[me][from], &m->wake[me], &m->sleepers[me],
                                    from, "ivmWaitFrom");
    return 1;
}

/* ------------------------------------------------------------ own signals */

/* A process's first ivmSignal / ivmWait calls go through the daemon unless
 * the board is mapped already (for an addressed signal, or while the
 * process was parked): a process maps it once, and in a fresh process the mapping and its first page touches cost
 * about as much as two or three daemon round trips (60-100 us on the VM
 * whose page tables the hypervisor shadows, docs/BENCHMARKS.md), which a PE
 * that signals once never earns back. A parked process of the warm pool
 * maps and touches it while it waits (ivm_board_adopt), so the PE it
 * becomes, or forks, signals on the board from its first call: a fork
 * child's first touches of the inherited mapping fault again (a fork copies
 * no page table entries of a shared mapping), a few pages, which costs it
 * less than a daemon round trip that waits behind the daemon's other work
 * (in a burst, the other PEs' exits: docs/BENCHMARKS.md). The daemon posts
 * and serves the calls that go through it on the board all the same. */
#define IVM_BOARD_OWN_AFTER 2u
static unsigned ivm_board_own_calls;

/* The board, if it holds pe's own signals and the caller is on it. */
static ivm_board_t *ivm_board_own(int pe)
{
    ivm_board_t *m;

    /* IVM_SIGNAL_BOARD=0 in this process (ivm_ctx.own_board_off) keeps its own
     * signals off the board; its addressed signals and barriers follow the
     * job's choice (IVM_BOARD_F_PAIRS), which the daemon reads from the job's
     * environment: both ends of a pair must agree. */
    if (ivm_ctx.own_board_off ||
        (__atomic_load_n(&ivm_board_state, __ATOMIC_ACQUIRE) == IVM_BOARD_UNKNOWN &&
         __atomic_add_fetch(&ivm_board_own_calls, 1, __ATOMIC_RELAXED) <= IVM_BOARD_OWN_AFTER)) {
        return NULL;
    }
    m = ivm_board_local(ivm_ctx.pe_id, pe);

    return m != NULL && (m->flags & IVM_BOARD_F_SIGNALS) ? m : NULL;
}

int ivm_board_post(void)
{
    int me = ivm_ctx.pe_id;
    ivm_board_t *m = ivm_board_own(me);

    if (m == NULL) {
        return -1;
    }
    __atomic_add_fetch(&m->sig[me], 1, __ATOMIC_SEQ_CST);
    ivm_board_bump(&m->swake[me], &m->ssleepers[me]);
    /* After the post: the daemon writes dwait before it looks at sig. */
    return __atomic_load_n(&m->dwait[me], __ATOMIC_SEQ_CST) > 0;
}

int ivm_board_wait_pe(int pe, ivmError_t *status_p)
{
    ivm_board_t *m = ivm_board_own(pe);

    if (m == NULL) {
        return 0;
    }
    *status_p = ivm_board_take_wait(m, &m->sig[pe], &m->swake[pe], &m->ssleepers[pe], pe,
                                    "ivmWait");
    return 1;
}

/* ------------------------------------------------------------ barriers */

static int ivm_board_cmp_pe(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

/* pes sorted, repeats dropped, into set (n <= IVM_BOARD_SET_MAX); its count. */
static int ivm_board_set(const ivm_pe *pes, int n, int *set)
{
    int i, k = 0;

    memcpy(set, pes, sizeof(*set) * (size_t)n);
    qsort(set, (size_t)n, sizeof(*set), ivm_board_cmp_pe);
    for (i = 0; i < n; ++i) {
        if (k == 0 || set[k - 1] != set[i]) {
            set[k++] = set[i];
        }
    }
    return k;
}

/* The member of set that ended, or -1. */
static int ivm_board_ended(ivm_board_t *m, const int *set, int k)
{
    int i;

    for (i = 0; i < k; ++i) {
        if (__atomic_load_n(&m->state[set[i]], __ATOMIC_SEQ_CST) &
            (IVM_BOARD_EXITED | IVM_BOARD_FAILED)) {
            return set[i];
        }
    }
    return -1;
}

/* Whether every member is a live PE of this node and the caller is one. */
static int ivm_board_set_ok(ivm_board_t *m, const int *set, int k)
{
    int i, mine = 0;

    for (i = 0; i < k; ++i) {
        if (set[i] < 0 || (uint32_t)set[i] >= IVM_BOARD_PES ||
            !(__atomic_load_n(&m->state[set[i]], __ATOMIC_SEQ_CST) & IVM_BOARD_LOCAL)) {
            return 0;
        }
        mine |= set[i] == ivm_ctx.pe_id;
    }
    return mine && ivm_board_ended(m, set, k) < 0;
}

/* The set's slot (found, or claimed now), NULL when every slot is taken. */
static ivm_board_barrier_t *ivm_board_slot(ivm_board_t *m, const int *set, int k)
{
    uint64_t key = 1469598103934665603ull, cur;
    uint32_t i;
    int j;

    for (j = 0; j < k; ++j) { /* FNV-1a over the ids */
        key = (key ^ (uint32_t)set[j]) * 1099511628211ull;
    }
    key = key ? key : 1;
    for (i = 0; i < IVM_BOARD_BARRIERS; ++i) {
        ivm_board_barrier_t *b = &m->barriers[(key + i) % IVM_BOARD_BARRIERS];
        cur = __atomic_load_n(&b->key, __ATOMIC_SEQ_CST);
        if (cur == 0 && __atomic_compare_exchange_n(&b->key, &cur, key, 0, __ATOMIC_SEQ_CST,
                                                    __ATOMIC_SEQ_CST)) {
            return b;
        }
        if (cur == key) {
            return b;
        }
    }
    return NULL;
}

/* Wait for gen to leave g; a member's end fails the barrier. */
static ivmError_t ivm_board_await(ivm_board_t *m, ivm_board_barrier_t *b, uint32_t g,
                                  const int *set, int k)
{
    /* More members than CPUs: a spinning member keeps the CPU from one that
     * has still to arrive, so sleep at once. */
    uint64_t spin_until =
        ivm_now_ns() + (k <= sysconf(_SC_NPROCESSORS_ONLN) ? ivm_ctx.spin_ns : 0);
    struct timespec ts = {0, IVM_BOARD_NAP_NS};
    int dead;

    for (;;) {
        if (__atomic_load_n(&b->gen, __ATOMIC_SEQ_CST) != g) {
            return IVM_SUCCESS;
        }
        if ((dead = ivm_board_ended(m, set, k)) >= 0) {
            ivm_set_error("ivmBarrier: pe %d of the barrier %s", dead,
                          (__atomic_load_n(&m->state[dead], __ATOMIC_SEQ_CST) & IVM_BOARD_FAILED)
                              ? "died without ivmExit"
                              : "called ivmExit before reaching it");
            return IVM_ERROR_PE_FAILED;
        }
        if (ivm_now_ns() < spin_until) {
            continue;
        }
        __atomic_add_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &b->gen, FUTEX_WAIT, g, &ts, NULL, 0);
        __atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
        if (ivm_board_daemon_gone()) {
            ivm_set_error("ivmBarrier: connection to the daemon lost");
            return IVM_ERROR_DAEMON_LOST;
        }
    }
}

int ivm_board_barrier(const ivm_pe *pes, int n, ivmError_t *status_p)
{
    int set[IVM_BOARD_SET_MAX], k;
    ivm_board_barrier_t *b;
    ivm_board_t *m;
    uint32_t g;

    if (n > IVM_BOARD_SET_MAX || (m = ivm_board_get()) == NULL ||
        !(m->flags & IVM_BOARD_F_PAIRS)) {
        return 0;
    }
    k = ivm_board_set(pes, n, set);
    if (!ivm_board_set_ok(m, set, k) || (b = ivm_board_slot(m, set, k)) == NULL) {
        return 0;
    }
    g = __atomic_load_n(&b->gen, __ATOMIC_SEQ_CST);
    if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_SEQ_CST) == (uint32_t)k) {
        __atomic_store_n(&b->arrived, 0, __ATOMIC_SEQ_CST);
        ivm_board_bump(&b->gen, &b->sleepers);
        *status_p = IVM_SUCCESS;
        return 1;
    }
    *status_p = ivm_board_await(m, b, g, set, k);
    return 1;
}
