/* PE program: objects (malloc, map, subset, unmap, free) and sync calls. */
#include "pe_util.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 13u + 7u) & 0xffu);
}

static void fill(unsigned char *p, size_t off, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = pattern(off + i);
    }
}

/* p[0..n) holds the pattern of bytes off..off+n of the object. */
static void check_pattern(const unsigned char *p, size_t off, size_t n, int line)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pattern(off + i)) {
            pe_failf(line, "byte %zu of the object is 0x%02x, expected 0x%02x", off + i, p[i],
                     pattern(off + i));
        }
    }
}

static void check_zero(const unsigned char *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != 0) {
            pe_failf(__LINE__, "%s: byte %zu is 0x%02x, objects are zero-filled", what, i, p[i]);
        }
    }
}

static ivm_pe spawn_one(void)
{
    ivm_device dev;
    ivm_pe pe = IVM_PE_NULL;

    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &dev));
    CHECK(ivmCreatePEs(dev, 1, &pe));
    CHECK(ivmDestroyDev(dev));
    ASSERT(pe > 0, "created PE id %d", pe);
    return pe;
}

/* ivmMalloc: zero-filled memory, argument errors, name rules. */
static int sc_malloc(int argc, char **argv)
{
    unsigned char *p = NULL, *big = NULL, *r = NULL, *m = NULL, *one = NULL;
    char name255[IVM_NAME_MAX + 1], name256[IVM_NAME_MAX + 2];
    const size_t big_size = 8u << 20;
    ivmError_t rc;

    pe_enter();
    pe_stage = "malloc";
    CHECK(ivmMalloc("a", &p, 4096));
    ASSERT(p != NULL, "%s", "ivmMalloc returned NULL");
    check_zero(p, 4096, "4 KiB object");
    memset(p, 0x5a, 4096);
    CHECK(ivmMalloc("big", &big, big_size));
    check_zero(big, big_size, "8 MiB object");
    big[big_size - 1] = 1;
    CHECK(ivmMalloc("one", &one, 1));
    ASSERT(one[0] == 0, "%d", one[0]);
    ASSERT(one != p && one != big, "%s", "distinct objects have distinct references");

    EXPECT(ivmMalloc("zero", &r, 0), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMalloc(NULL, &r, 16), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMalloc("null-out", NULL, 16), IVM_ERROR_INVALID_VALUE);
    ASSERT(r == NULL, "%s", "a failed ivmMalloc returned a pointer");

    memset(name255, 'n', IVM_NAME_MAX);
    name255[IVM_NAME_MAX] = '\0';
    memset(name256, 'n', IVM_NAME_MAX + 1);
    name256[IVM_NAME_MAX + 1] = '\0';
    EXPECT(ivmMalloc(name256, &r, 16), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmMalloc(name255, &r, 16));
    check_zero(r, 16, "object with the longest name");

    EXPECT(ivmMalloc("a", &m, 4096), IVM_ERROR_EXISTS);
    EXPECT(ivmMalloc("a", &m, 10), IVM_ERROR_EXISTS);
    EXPECT(ivmMalloc(name255, &m, 16), IVM_ERROR_EXISTS);
    ASSERT(m == NULL, "%s", "a failed ivmMalloc returned a pointer");
    ASSERT(p[0] == 0x5a && p[4095] == 0x5a, "%s", "the existing object was not touched");

    /* Mapping one's own object: same node, same physical copy. */
    pe_stage = "map own object";
    CHECK(ivmMap("a", &m, 0));
    ASSERT(m[0] == 0x5a && m[4095] == 0x5a, "%s", "the mapping sees the allocator's data");
    m[100] = 0x33;
    ASSERT(p[100] == 0x33, "%s", "write through the mapping not seen through the allocation");
    CHECK(ivmUnmap(m));
    CHECK(ivmMap(name255, &m, 0));
    CHECK(ivmUnmap(m));

    CHECK(ivmFree(p));
    CHECK(ivmFree(big));
    CHECK(ivmFree(one));
    CHECK(ivmFree(r));

    /* An impossible size fails cleanly and leaves no object behind. */
    pe_stage = "malloc of 4 EiB";
    m = NULL;
    rc = ivmMalloc("huge", &m, (size_t)1 << 62);
    ASSERT(rc == IVM_ERROR_NO_MEMORY || rc == IVM_ERROR_INVALID_VALUE,
           "ivmMalloc of 4 EiB returned %s", pe_status_name(rc));
    ASSERT(m == NULL, "%s", "a failed ivmMalloc returned a pointer");
    EXPECT(ivmMap("huge", &m, 0), IVM_ERROR_NOT_FOUND);
    CHECK(ivmMalloc("huge", &m, 64));
    CHECK(ivmFree(m));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmMap / ivmMapSubset: errors, ranges, subset pointers, own node. */
static int sc_map(int argc, char **argv)
{
    const size_t size = 10000;
    unsigned char *p, *q = NULL, *s, *s2, *s3, *s4, *pre;
    void *h = NULL;
    char stackbuf[16];

    pe_enter();
    CHECK(ivmMalloc("obj", &p, size));
    fill(p, 0, size);
    pe_stage = "map errors";
    EXPECT(ivmMap("nope", &q, 0), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmMapSubset("nope", &q, 0, 1), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmMap("ob", &q, 0), IVM_ERROR_NOT_FOUND);
    EXPECT(ivmMap(NULL, &q, 0), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMap("obj", NULL, 0), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMap("obj", &q, size + 1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMapSubset("obj", &q, size - 10, 11), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMapSubset("obj", &q, size, 1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMapSubset("obj", &q, size + 1, 0), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMapSubset("obj", &q, (size_t)-5, 10), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmMapSubset("obj", &q, 10, (size_t)-5), IVM_ERROR_INVALID_VALUE);
    ASSERT(q == NULL, "%s", "a failed map returned a pointer");

    pe_stage = "maps";
    CHECK(ivmMap("obj", &q, size));
    check_pattern(q, 0, size, __LINE__);
    CHECK(ivmMap("obj", &pre, 100));
    check_pattern(pre, 0, 100, __LINE__);
    CHECK(ivmMapSubset("obj", &s, 1234, 100));
    check_pattern(s, 1234, 100, __LINE__);
    CHECK(ivmMapSubset("obj", &s2, 9000, 0));
    check_pattern(s2, 9000, 1000, __LINE__);
    CHECK(ivmMapSubset("obj", &s3, size - 1, 1));
    check_pattern(s3, size - 1, 1, __LINE__);
    CHECK(ivmMapSubset("obj", &s4, 4096, 4096));
    check_pattern(s4, 4096, 4096, __LINE__);

    /* One node, one copy: writes through any mapping are seen by all. */
    s[0] = 0xee;
    ASSERT(p[1234] == 0xee && q[1234] == 0xee, "%s",
           "a write through a subset mapping is not at its byte offset");
    s4[4095] = 0xdd;
    ASSERT(p[8191] == 0xdd && s2[0] != 0xdd, "p[8191]=0x%02x", p[8191]);
    p[9999] = 0x11;
    ASSERT(s3[0] == 0x11 && s2[999] == 0x11, "%s", "end of object seen by the subsets");

    CHECK(ivmHostPtr(s, &h));
    ASSERT(h == (void *)s, "a CPU PE's host pointer is the reference itself (%p vs %p)", h,
           (void *)s);
    CHECK(ivmHostPtr(s4 + 10, &h));
    ASSERT(h == (void *)(s4 + 10), "%s", "host pointer inside a mapping");
    EXPECT(ivmHostPtr(stackbuf, &h), IVM_ERROR_INVALID_VALUE);

    pe_stage = "unmaps";
    CHECK(ivmUnmap(s));
    EXPECT(ivmUnmap(s), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmUnmap(s2));
    CHECK(ivmUnmap(s3));
    EXPECT(ivmUnmap(s4 + 1), IVM_ERROR_INVALID_VALUE);
    CHECK(ivmUnmap(s4));
    CHECK(ivmUnmap(pre));
    CHECK(ivmUnmap(q));
    ASSERT(p[1234] == 0xee, "%s", "the allocation is intact after the unmaps");
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* Another PE of the node maps a subset: it sees the data, and its writes are
 * seen by the root without any sync (one host copy per node). */
static int sc_share(int argc, char **argv)
{
    const size_t size = 65536, off = 1000, len = 1000;
    unsigned char *p, *s, *full;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMapSubset("shared", &s, off, len));
        check_pattern(s, off, len, __LINE__);
        CHECK(ivmMap("shared", &full, 0));
        s[0] = 0x42;
        ASSERT(full[off] == 0x42, "%s", "two mappings of one PE are not the same bytes");
        for (size_t i = 0; i < len; ++i) {
            s[i] = (unsigned char)(i ^ 0xc0);
        }
        CHECK(ivmUnmap(full));
        CHECK(ivmSignal());
        pe_stage = "child waits for the root's writes";
        CHECK(ivmWait(0));
        for (size_t i = 0; i < len; ++i) {
            ASSERT(s[i] == 0x11, "root's write to byte %zu not seen: 0x%02x", off + i, s[i]);
        }
        CHECK(ivmUnmap(s));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("shared", &p, size));
    fill(p, 0, size);
    ivm_pe c = spawn_one();
    pe_stage = "root waits for the child's writes";
    CHECK(ivmWait(c));
    for (size_t i = 0; i < len; ++i) {
        ASSERT(p[off + i] == (unsigned char)(i ^ 0xc0), "child's write to byte %zu not seen",
               off + i);
    }
    check_pattern(p, 0, off, __LINE__);
    check_pattern(p + off + len, off + len, size - off - len, __LINE__);
    memset(p + off, 0x11, len);
    CHECK(ivmSignal());
    pe_stage = "root waits for the child's exit";
    CHECK(ivmWait(c));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmFree / ivmUnmap: bad pointers, name gone at once, memory kept while
 * mapped, freeing by another PE refused. */
static int sc_free(int argc, char **argv)
{
    unsigned char *p, *p2, *q, *k, *m, *n;
    char stackbuf[64];
    unsigned char *heap = malloc(64);
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("keep", &m, 0));
        check_pattern(m, 0, 4096, __LINE__);
        EXPECT(ivmFree(m), IVM_ERROR_PERMISSION);
        CHECK(ivmSignal());
        pe_stage = "child waits for the root's ivmFree";
        CHECK(ivmWait(0));
        /* the name is gone, the memory still mapped here */
        EXPECT(ivmMap("keep", &n, 0), IVM_ERROR_NOT_FOUND);
        check_pattern(m, 0, 4096, __LINE__);
        memset(m, 0x77, 4096);
        ASSERT(m[4095] == 0x77, "%s", "");
        CHECK(ivmMalloc("keep", &n, 16));
        check_zero(n, 16, "new object of a freed name");
        CHECK(ivmFree(n));
        CHECK(ivmUnmap(m));
        EXPECT(ivmUnmap(m), IVM_ERROR_INVALID_VALUE);
        free(heap);
        CHECK(ivmExit());
        return 0;
    }
    pe_stage = "free";
    CHECK(ivmMalloc("f", &p, 4096));
    memset(p, 1, 4096);
    CHECK(ivmFree(p));
    EXPECT(ivmMap("f", &q, 0), IVM_ERROR_NOT_FOUND);
    CHECK(ivmMalloc("f", &p2, 8192));
    check_zero(p2, 8192, "object of a freed name");
    CHECK(ivmMap("f", &q, 0));
    q[8191] = 9;
    ASSERT(p2[8191] == 9, "%s", "new object has the new size");
    CHECK(ivmUnmap(q));

    pe_stage = "bad pointers";
    EXPECT(ivmFree(stackbuf), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmFree(heap), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmFree(NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmFree(p2 + 1), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmFree(p2 + 4096), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmUnmap(stackbuf), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmUnmap(heap), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmUnmap(NULL), IVM_ERROR_INVALID_VALUE);
    EXPECT(ivmUnmap(p2 + 16), IVM_ERROR_INVALID_VALUE);
    ASSERT(p2[8191] == 9, "%s", "object intact after failed calls");
    CHECK(ivmFree(p2));
    EXPECT(ivmMap("f", &q, 0), IVM_ERROR_NOT_FOUND);

    pe_stage = "free while another PE maps it";
    CHECK(ivmMalloc("keep", &k, 4096));
    fill(k, 0, 4096);
    ivm_pe c = spawn_one();
    CHECK(ivmWait(c)); /* the child mapped "keep" and failed to free it */
    CHECK(ivmFree(k));
    EXPECT(ivmMap("keep", &q, 0), IVM_ERROR_NOT_FOUND);
    CHECK(ivmSignal());
    pe_stage = "root waits for the child's exit";
    CHECK(ivmWait(c));
    free(heap);
    CHECK(ivmExit());
    return pe_ok();
}

typedef ivmError_t (*sync_fn_t)(void *addr, size_t size);
static ivmError_t sync_put(void *a, size_t n) { return ivmSyncPut(a, n); }
static ivmError_t sync_get(void *a, size_t n) { return ivmSyncGet(a, n); }
static ivmError_t sync_put_group(void *a, size_t n) { return ivmSyncPutGroup(a, n); }
static ivmError_t sync_get_group(void *a, size_t n) { return ivmSyncGetGroup(a, n); }
static const struct {
    const char *name;
    sync_fn_t   fn;
} sync_fns[] = {
    {"ivmSyncPut", sync_put},
    {"ivmSyncGet", sync_get},
    {"ivmSyncPutGroup", sync_put_group},
    {"ivmSyncGetGroup", sync_get_group},
};
#define NSYNC (sizeof(sync_fns) / sizeof(sync_fns[0]))

#define EXPECT_SYNC(k, addr, size, want)                                              \
    do {                                                                            \
        int rc_ = (int)sync_fns[k].fn((void *)(addr), (size));                      \
        if (rc_ != (int)(want)) {                                                   \
            pe_failf(__LINE__, "%s(%s, %zu) returned %s, expected %s [%s]",         \
                     sync_fns[k].name, #addr, (size_t)(size), pe_status_name(rc_),  \
                     pe_status_name(want), ivmGetLastErrorMessage());               \
        }                                                                           \
    } while (0)

/* Sync calls: mapped ranges succeed, anything else is IVM_ERROR_INVALID_VALUE. */
static int sc_sync(int argc, char **argv)
{
    const size_t size = 65536;
    unsigned char *p, *q, *w;
    char stackbuf[64];
    unsigned char *heap = malloc(4096);
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMapSubset("s", &q, 4096, 4096));
        for (size_t k = 0; k < NSYNC; ++k) {
            EXPECT_SYNC(k, q, 4096, IVM_SUCCESS);
            EXPECT_SYNC(k, q + 10, 100, IVM_SUCCESS);
            EXPECT_SYNC(k, q + 4095, 1, IVM_SUCCESS);
            EXPECT_SYNC(k, q + 4000, 200, IVM_ERROR_INVALID_VALUE);
            EXPECT_SYNC(k, q - 1, 2, IVM_ERROR_INVALID_VALUE);
            EXPECT_SYNC(k, q, 4097, IVM_ERROR_INVALID_VALUE);
            EXPECT_SYNC(k, stackbuf, sizeof(stackbuf), IVM_ERROR_INVALID_VALUE);
        }
        check_pattern(q, 4096, 4096, __LINE__);
        memset(q, 0x99, 4096);
        CHECK(ivmSyncPut(q, 4096));
        CHECK(ivmUnmap(q));
        EXPECT(ivmSyncPut(q, 16), IVM_ERROR_INVALID_VALUE);
        EXPECT(ivmSyncGet(q, 16), IVM_ERROR_INVALID_VALUE);
        CHECK(ivmSignal());
        free(heap);
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("s", &p, size));
    fill(p, 0, size);
    pe_stage = "sync on the master";
    for (size_t k = 0; k < NSYNC; ++k) {
        EXPECT_SYNC(k, p, size, IVM_SUCCESS);
        EXPECT_SYNC(k, p + 100, 200, IVM_SUCCESS);
        EXPECT_SYNC(k, p + size - 1, 1, IVM_SUCCESS);
        EXPECT_SYNC(k, stackbuf, sizeof(stackbuf), IVM_ERROR_INVALID_VALUE);
        EXPECT_SYNC(k, heap, 4096, IVM_ERROR_INVALID_VALUE);
        EXPECT_SYNC(k, NULL, 16, IVM_ERROR_INVALID_VALUE);
        EXPECT_SYNC(k, p + size - 10, 20, IVM_ERROR_INVALID_VALUE);
        EXPECT_SYNC(k, p, size + 1, IVM_ERROR_INVALID_VALUE);
        EXPECT_SYNC(k, p - 1, 1, IVM_ERROR_INVALID_VALUE);
        check_pattern(p, 0, size, __LINE__);
    }
    /* A range inside a second mapping of the same object. */
    CHECK(ivmMapSubset("s", &w, 100, 50));
    CHECK(ivmSyncPut(w, 50));
    CHECK(ivmSyncGet(w + 49, 1));
    CHECK(ivmUnmap(w));
    /* Gone with its mapping, unless the address is also inside p's mapping. */
    EXPECT(ivmSyncPut(w, 50),
           (w >= p && w + 50 <= p + size) ? IVM_SUCCESS : IVM_ERROR_INVALID_VALUE);

    ivm_pe c = spawn_one();
    pe_stage = "root waits for the child";
    CHECK(ivmWait(c));
    for (size_t i = 0; i < 4096; ++i) {
        ASSERT(p[4096 + i] == 0x99, "child's put of byte %zu not in the master", 4096 + i);
    }
    CHECK(ivmWait(c));
    free(heap);
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* Put/Get on the caller's own node copy cost no daemon round trip: 100000
 * calls (2.5 us each at most) take far less than as many socket round trips. */
static int sc_sync_local(int argc, char **argv)
{
    const int calls = 100000;
    unsigned char *p, *q;
    double t0, dt_master, dt_mapped;
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("fast", &q, 0));
        t0 = pe_now();
        for (int i = 0; i < calls / 2; ++i) {
            CHECK(ivmSyncPut(q + (i & 1023), 64));
            CHECK(ivmSyncGet(q + (i & 1023), 64));
        }
        dt_mapped = pe_now() - t0;
        printf("sync_local: %d Put/Get on a same-node mapping: %.1f ms\n", calls,
               dt_mapped * 1e3);
        ASSERT(dt_mapped < 0.25, "%d Put/Get on the node's own copy took %.0f ms "
               "(a daemon round trip per call?)", calls, dt_mapped * 1e3);
        CHECK(ivmUnmap(q));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("fast", &p, 65536));
    t0 = pe_now();
    for (int i = 0; i < calls / 2; ++i) {
        CHECK(ivmSyncPut(p + (i & 1023), 64));
        CHECK(ivmSyncGet(p + (i & 1023), 64));
    }
    dt_master = pe_now() - t0;
    printf("sync_local: %d Put/Get on the master: %.1f ms\n", calls, dt_master * 1e3);
    ASSERT(dt_master < 0.25, "%d Put/Get on the master copy took %.0f ms "
           "(a daemon round trip per call?)", calls, dt_master * 1e3);
    ivm_pe c = spawn_one();
    CHECK(ivmWait(c));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* Hundreds of objects: each created, mapped by another PE, freed. */
static int sc_many_objects(int argc, char **argv)
{
    enum { N = 300 };
    unsigned char *p[N], *q;
    char name[32];
    int id = pe_enter();

    if (id != 0) {
        for (int i = 0; i < N; ++i) {
            snprintf(name, sizeof(name), "o%d", i);
            CHECK(ivmMap(name, &q, 0));
            ASSERT(q[0] == (unsigned char)i && q[4095 + i] == (unsigned char)(i + 1),
                   "object %s has %d..%d", name, q[0], q[4095 + i]);
            CHECK(ivmUnmap(q));
        }
        CHECK(ivmSignal());
        CHECK(ivmExit());
        return 0;
    }
    for (int i = 0; i < N; ++i) {
        snprintf(name, sizeof(name), "o%d", i);
        CHECK(ivmMalloc(name, &p[i], 4096 + (size_t)i));
        p[i][0] = (unsigned char)i;
        p[i][4095 + i] = (unsigned char)(i + 1);
    }
    ivm_pe c = spawn_one();
    pe_stage = "the child maps every object";
    CHECK(ivmWait(c));
    for (int i = 0; i < N; ++i) {
        CHECK(ivmFree(p[i]));
    }
    CHECK(ivmWait(c));
    CHECK(ivmExit());
    return pe_ok();
}

/* A 64 MiB object written by the root, checked and rewritten by a child. */
static int sc_big_object(int argc, char **argv)
{
    const size_t size = 64u << 20;
    uint64_t *p, *q;
    const size_t n = size / sizeof(uint64_t);
    int id = pe_enter();

    if (id != 0) {
        CHECK(ivmMap("big", &q, 0));
        for (size_t i = 0; i < n; ++i) {
            if (q[i] != i * 0x9e3779b97f4a7c15ull) {
                pe_failf(__LINE__, "word %zu of the 64 MiB object is wrong", i);
            }
            q[i] = ~q[i];
        }
        CHECK(ivmSyncPut(q, size));
        CHECK(ivmUnmap(q));
        CHECK(ivmExit());
        return 0;
    }
    CHECK(ivmMalloc("big", &p, size));
    for (size_t i = 0; i < n; ++i) {
        p[i] = i * 0x9e3779b97f4a7c15ull;
    }
    ivm_pe c = spawn_one();
    pe_stage = "the child checks 64 MiB";
    CHECK(ivmWait(c));
    for (size_t i = 0; i < n; ++i) {
        ASSERT(p[i] == ~(i * 0x9e3779b97f4a7c15ull), "word %zu not rewritten by the child", i);
    }
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* Wait (at most 20 s) until the test made the file path: its go-ahead. */
static void wait_file(const char *path, const char *what)
{
    double deadline = pe_now() + 20;

    pe_stage = what;
    while (access(path, F_OK) != 0) {
        ASSERT(pe_now() < deadline, "no go-ahead file %s within 20 s", path);
        pe_sleep_ms(5);
    }
}

#define LIMITS_MAX_OBJS 4096

/* Objects until the daemon's fd budget refuses one (IVM_ERROR_LIMIT naming
 * --fd-reserve); then, while they are held, the test checks the daemon
 * (argv[2]: its go-ahead file) and a new PE is served. */
static int sc_fd_budget(int argc, char **argv)
{
    static unsigned char *objs[LIMITS_MAX_OBJS];
    unsigned char *p = NULL;
    char name[32];
    int n, rc = IVM_SUCCESS;

    pe_enter();
    if (pe_me != 0) {
        CHECK(ivmExit());
        return 0;
    }
    ASSERT(argc >= 3, "%s", "usage: fd_budget GO_FILE");
    pe_stage = "allocating until the fd budget";
    for (n = 0; n < LIMITS_MAX_OBJS; ++n) {
        snprintf(name, sizeof(name), "o%d", n);
        rc = ivmMalloc(name, &objs[n], 64);
        if (rc != IVM_SUCCESS) {
            break;
        }
    }
    ASSERT(rc == IVM_ERROR_LIMIT, "object %d: %s (%d) [%s], expected IVM_ERROR_LIMIT", n,
           pe_status_name(rc), rc, ivmGetLastErrorMessage());
    ASSERT(strstr(ivmGetLastErrorMessage(), "--fd-reserve") != NULL,
           "the message names the setting: [%s]", ivmGetLastErrorMessage());
    ASSERT(n > 16, "only %d objects before the limit", n);
    EXPECT(ivmMalloc("again", &p, 64), IVM_ERROR_LIMIT);
    printf("FULL %d\n", n);
    fflush(stdout);
    wait_file(argv[2], "waiting for the test's checks");
    pe_stage = "a new PE while the objects are held";
    {
        ivm_pe c = spawn_one();
        CHECK(ivmWait(c));
    }
    for (int i = 0; i < n; ++i) {
        CHECK(ivmFree(objs[i]));
    }
    CHECK(ivmMalloc("after", &p, 64));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* The daemon's fd table runs out under a reply (argv[2]: go-ahead once the
 * test lowered its open-file limit): the object that could not be handed
 * over is rolled back, its name is free again once fds are. */
static int sc_fd_rollback(int argc, char **argv)
{
    static unsigned char *objs[LIMITS_MAX_OBJS];
    unsigned char *p = NULL;
    char name[32];
    int n, rc = IVM_SUCCESS;

    pe_enter();
    ASSERT(argc >= 3, "%s", "usage: fd_rollback GO_FILE");
    printf("READY\n");
    fflush(stdout);
    wait_file(argv[2], "waiting for the lowered open-file limit");
    pe_stage = "allocating until the fd table is full";
    for (n = 0; n < LIMITS_MAX_OBJS; ++n) {
        snprintf(name, sizeof(name), "o%d", n);
        rc = ivmMalloc(name, &objs[n], 64);
        if (rc != IVM_SUCCESS) {
            break;
        }
    }
    ASSERT(rc == IVM_ERROR_LIMIT, "object %d: %s (%d) [%s], expected IVM_ERROR_LIMIT", n,
           pe_status_name(rc), rc, ivmGetLastErrorMessage());
    ASSERT(objs[n] == NULL, "%s", "a failed ivmMalloc returned a pointer");
    rc = ivmMalloc(name, &p, 64);
    ASSERT(rc == IVM_ERROR_LIMIT, "retry of '%s' while full: %s (%d) [%s] (EXISTS: the "
           "failed object kept its name)", name, pe_status_name(rc), rc,
           ivmGetLastErrorMessage());
    pe_stage = "freeing two objects";
    CHECK(ivmFree(objs[0]));
    CHECK(ivmFree(objs[1]));
    CHECK(ivmMalloc(name, &p, 64));
    p[63] = 7;
    CHECK(ivmFree(p));
    for (int i = 2; i < n; ++i) {
        CHECK(ivmFree(objs[i]));
    }
    printf("OBJECTS %d\n", n);
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmMalloc of more than the node's memory (argv[2]: bytes): NO_MEMORY
 * with a message naming the size and what is left; the daemon serves on. */
static int sc_too_big(int argc, char **argv)
{
    unsigned long long size;
    unsigned char *p = NULL;
    char want[32];

    pe_enter();
    ASSERT(argc >= 3, "%s", "usage: too_big BYTES");
    size = strtoull(argv[2], NULL, 10);
    EXPECT(ivmMalloc("huge", &p, (size_t)size), IVM_ERROR_NO_MEMORY);
    ASSERT(p == NULL, "%s", "a failed ivmMalloc returned a pointer");
    snprintf(want, sizeof(want), "%llu bytes", size);
    ASSERT(strstr(ivmGetLastErrorMessage(), want) != NULL &&
           strstr(ivmGetLastErrorMessage(), "left") != NULL,
           "the message names the size asked and what is left: [%s]",
           ivmGetLastErrorMessage());
    CHECK(ivmMalloc("huge", &p, 1u << 20));
    memset(p, 1, 1u << 20);
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* ivmd --max-objects-per-job 5 --max-pes-per-job 3. */
static int sc_job_limits(int argc, char **argv)
{
    unsigned char *objs[6] = {NULL};
    ivm_device dev;
    ivm_pe kids[3];
    char name[16];
    int i;

    pe_enter();
    if (pe_me != 0) {
        CHECK(ivmExit());
        return 0;
    }
    for (i = 0; i < 5; ++i) {
        snprintf(name, sizeof(name), "o%d", i);
        CHECK(ivmMalloc(name, &objs[i], 4096));
    }
    EXPECT(ivmMalloc("o5", &objs[5], 4096), IVM_ERROR_LIMIT);
    ASSERT(strstr(ivmGetLastErrorMessage(), "--max-objects-per-job") != NULL,
           "the message names the setting: [%s]", ivmGetLastErrorMessage());
    CHECK(ivmFree(objs[0]));
    CHECK(ivmMalloc("o5", &objs[5], 4096));

    CHECK(ivmCreateDev(IVM_THIS_HOST, IVM_THIS_DEV, &dev));
    EXPECT(ivmCreatePEs(dev, 3, kids), IVM_ERROR_LIMIT);
    ASSERT(strstr(ivmGetLastErrorMessage(), "--max-pes-per-job") != NULL,
           "the message names the setting: [%s]", ivmGetLastErrorMessage());
    CHECK(ivmCreatePEs(dev, 2, kids));
    CHECK(ivmWait(kids[0]));
    CHECK(ivmWait(kids[1]));
    CHECK(ivmDestroyDev(dev));
    for (i = 1; i < 6; ++i) {
        CHECK(ivmFree(objs[i]));
    }
    CHECK(ivmExit());
    return pe_ok();
}

/* Issue 17: a PE that maps more objects than the kernel lets a process have
 * mappings (vm.max_map_count): one object mapped again and again, each map a
 * mapping of its own, until IVM_ERROR_LIMIT naming the setting; then every
 * map is undone and the object still works. */
static int sc_map_count_limit(int argc, char **argv)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long max = 0, n = 0;
    unsigned char *p, **maps;
    ivmError_t rc = IVM_SUCCESS;

    ASSERT(f != NULL && fscanf(f, "%ld", &max) == 1 && max > 0, "vm.max_map_count unreadable");
    fclose(f);
    maps = calloc((size_t)max + 1, sizeof(*maps));
    ASSERT(maps != NULL, "out of memory");
    pe_enter();
    CHECK(ivmMalloc("many_maps", &p, 4096));
    p[0] = 42;
    while (n <= max && (rc = ivmMap("many_maps", &maps[n], 0)) == IVM_SUCCESS) {
        ++n;
    }
    EXPECT(rc, IVM_ERROR_LIMIT);
    ASSERT(strstr(ivmGetLastErrorMessage(), "vm.max_map_count") != NULL,
           "the message names the setting: [%s]", ivmGetLastErrorMessage());
    ASSERT(n > max / 2, "refused after %ld maps of %ld", n, max);
    ASSERT(maps[n - 1][0] == 42, "the last map sees %u", maps[n - 1][0]);
    while (n > 0) {
        CHECK(ivmUnmap(maps[--n]));
    }
    CHECK(ivmMap("many_maps", &maps[0], 0));
    ASSERT(maps[0][0] == 42, "a map after the refusal sees %u", maps[0][0]);
    CHECK(ivmUnmap(maps[0]));
    CHECK(ivmFree(p));
    free(maps);
    CHECK(ivmExit());
    return pe_ok();
}

/* mprotect calls that opened a range for writing, counted by interposing
 * libc's mprotect for libivm (the executable's definition comes first; the
 * build hides symbols by default, so it is made visible): how the
 * read_first scenario sees the way libivm populated a map. */
static int opened_for_writing;

__attribute__((visibility("default"))) int mprotect(void *addr, size_t len, int prot)
{
    if (prot == (PROT_READ | PROT_WRITE)) {
        ++opened_for_writing;
    }
    return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* argv[2] "1": maps are populated read-only first (IVM_MAP_READ_FIRST, the
 * daemon's choice or the environment's), then opened for writing with one
 * mprotect; "0": mapped writable at once, no mprotect. Either way reads and
 * writes through the map reach the one node copy; with IVM_MAP_POPULATE=0
 * (argv[3] "nopop") nothing is populated, so nothing is opened later. */
static int sc_read_first(int argc, char **argv)
{
    const size_t pages = 64, page = (size_t)sysconf(_SC_PAGESIZE), size = pages * page;
    unsigned char *p, *q;
    int expect, before;

    ASSERT(argc > 2 && (strcmp(argv[2], "0") == 0 || strcmp(argv[2], "1") == 0),
           "%s", "usage: read_first 0|1 [nopop]");
    expect = argv[2][0] == '1' && !(argc > 3 && strcmp(argv[3], "nopop") == 0);
    pe_enter();
    CHECK(ivmMalloc("read_first", &p, size));
    fill(p, 0, size);
    before = opened_for_writing;
    CHECK(ivmMap("read_first", &q, 0));
    ASSERT(opened_for_writing - before == expect, "%d ranges opened for writing by ivmMap, "
           "expected %d", opened_for_writing - before, expect);
    pe_stage = "reads of the fresh map";
    check_pattern(q, 0, size, __LINE__);
    pe_stage = "writes to the fresh map";
    for (size_t i = 0; i < size; i += page) {
        q[i] = (unsigned char)~pattern(i);
    }
    for (size_t i = 0; i < size; i += page) {
        ASSERT(p[i] == (unsigned char)~pattern(i), "byte %zu: a write through the map is "
               "not in the copy", i);
        q[i] = pattern(i);
    }
    check_pattern(p, 0, size, __LINE__);
    CHECK(ivmUnmap(q));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

/* kB of the mapping holding addr that the kernel maps by 2 MiB pages
 * (ShmemPmdMapped of /proc/self/smaps); -1 if no mapping holds it. */
static long pmd_mapped_kb(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    unsigned long lo, hi, a = (unsigned long)(uintptr_t)addr;
    char line[512];
    long kb = -1;
    int in = 0;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        /* A mapping's first line starts with its address in lower-case hex,
           its fields' lines with a capital. */
        if (strchr("0123456789abcdef", line[0]) != NULL &&
            sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = a >= lo && a < hi;
        } else if (in && sscanf(line, "ShmemPmdMapped: %ld kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

/* ivmd --huge-pages: argv[2] "1", the daemon puts objects in 2 MiB pages:
 * an object of three of them and a bit is mapped by ivmMalloc and by a
 * subset map at an offset that is no multiple of 2 MiB, each placed so that
 * the whole 2 MiB pages it holds are mapped 2 MiB to an entry (smaps'
 * ShmemPmdMapped); "0": nothing is; "any": the kB are printed ("HUGE
 * object=K subset=K") for the test to hold against the daemon's INFO (the
 * kernel may refuse 2 MiB pages when memory is fragmented). Either way the
 * maps are placed congruent and the bytes are the object's. */
static int sc_huge(int argc, char **argv)
{
    const size_t huge = 2u << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t size = 3 * huge + 3 * page, off = huge - page, len = 2 * huge + page;
    unsigned char *p, *q;
    long kb_p, kb_q;
    int expect;

    ASSERT(argc > 2 && (strcmp(argv[2], "0") == 0 || strcmp(argv[2], "1") == 0 ||
                        strcmp(argv[2], "any") == 0),
           "%s", "usage: huge 0|1|any");
    expect = argv[2][0] == 'a' ? -1 : argv[2][0] == '1';
    pe_enter();
    CHECK(ivmMalloc("huge", &p, size));
    fill(p, 0, size);
    CHECK(ivmMapSubset("huge", &q, off, len));
    ASSERT((uintptr_t)q % huge == off % huge, "the subset map at offset %zu is at %p: not "
           "congruent modulo 2 MiB", off, (void *)q);
    pe_stage = "reads of the subset map";
    check_pattern(q, off, len, __LINE__);
    kb_p = pmd_mapped_kb(p);
    kb_q = pmd_mapped_kb(q);
    /* The object's first three 2 MiB pages; the subset [2 MiB - 4 KiB, 6 MiB)
       holds the second and third whole. */
    if (expect < 0) {
        printf("HUGE object=%ld subset=%ld\n", kb_p, kb_q);
        fflush(stdout);
    } else {
        ASSERT(kb_p == (expect ? 6144 : 0) && kb_q == (expect ? 4096 : 0),
               "ShmemPmdMapped %ld kB of the object's map and %ld kB of the subset map, "
               "expected %d and %d", kb_p, kb_q, expect ? 6144 : 0, expect ? 4096 : 0);
    }
    for (size_t i = 0; i < len; i += page) {
        q[i] = (unsigned char)~pattern(off + i);
    }
    for (size_t i = 0; i < len; i += page) {
        ASSERT(p[off + i] == (unsigned char)~pattern(off + i), "byte %zu: a write through the "
               "subset map is not in the object", off + i);
    }
    CHECK(ivmUnmap(q));
    CHECK(ivmFree(p));
    CHECK(ivmExit());
    return pe_ok();
}

static const pe_scenario_entry_t scenarios[] = {
    {"malloc", sc_malloc},
    {"map", sc_map},
    {"share", sc_share},
    {"free", sc_free},
    {"sync", sc_sync},
    {"sync_local", sc_sync_local},
    {"many_objects", sc_many_objects},
    {"big_object", sc_big_object},
    {"fd_budget", sc_fd_budget},
    {"fd_rollback", sc_fd_rollback},
    {"too_big", sc_too_big},
    {"job_limits", sc_job_limits},
    {"map_count_limit", sc_map_count_limit},
    {"read_first", sc_read_first},
    {"huge", sc_huge},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    return pe_main(scenarios, argc, argv);
}
