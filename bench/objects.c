/*
 * bench-objects: the cost of object calls against the number of live objects
 * of the job (issue 17 item 6: "ivmMalloc / ivmFree cost grows with the live
 * objects"; target: at 100,000 live objects within 1.2x of the cost at 10).
 *
 * The root PE grows the job's population step by step to each level K of
 * --live (objects of 64 B to 4 KiB, named obj0000000..), and at each level
 * times, REPS times each:
 *   malloc/free: ivmMalloc of one more 256 B object, then its ivmFree
 *                (each call timed on its own);
 *   map/unmap:   ivmMap of one object of the population, then its ivmUnmap
 * (after REPS/10 + 10 untimed pairs of each).
 * It prints one line per level:
 *   RESULT objects live=K malloc_us=X free_us=Y map_us=Z unmap_us=W
 * (medians; the -v form adds min and p90), and frees the population at the
 * end, timing that too (free_all_ms).
 *
 * With --spread the population is spread evenly over the job's nodes: the
 * root makes its share, and for each other node a helper PE there makes that
 * node's share (its objects outlive it; the job's end frees them). All of
 * them are registered at the root's daemon, which is what grows with the
 * job's objects; the timed calls are the root's, on its own node, and maps
 * pick among the root's own objects.
 *
 * Each object is one memory file in the daemon (a file descriptor there) and
 * one mapping in the PE (a VMA): a level above the daemon's fd budget (its
 * hard RLIMIT_NOFILE) or the PE's vm.max_map_count fails with IVM_ERROR_LIMIT;
 * the level is then reported as `RESULT objects live=K skipped=...` with the
 * daemon's message, and the higher levels are not tried.

 *
 * Run:  ivmrun [--nodes N] bench-objects [--live 10,1000,10000,100000] [--reps R (200)]
 *                                [--spread] [-v]
 *       IVM_MAX_OBJECTS_PER_JOB (100000 by default) must exceed the largest level.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#include "bench_util.h"

#define MAX_LEVELS   16
#define MAX_NODES    64
#define NAME_LEN     32
#define PROBE_SIZE   256

typedef struct {
    int    levels[MAX_LEVELS];
    int    nlevels;
    int    reps;
    int    verbose;
    int    spread;
} objects_opts_t;

typedef struct {
    void  **ptrs;    /* the root's objects, ptrs[i] is obj<i>'s reference */
    int     mine;    /* objects the root made */
    int     live;    /* objects of the job, all nodes */
    int     nnodes;  /* nodes that make objects (1 without --spread) */
    int     made[MAX_NODES]; /* objects made so far on each node */
} objects_pop_t;

/* What a helper PE on another node is to make (object "task.<its id>"). */
typedef struct {
    int32_t node, from, count, pad;
} objects_task_t;

static void objects_usage(FILE *f)
{
    fprintf(f, "usage: ivmrun bench-objects [--live K1,K2,... (10,1000,10000,100000)]\n"
               "                            [--reps R (200)] [--spread] [-v]\n");
}

static int objects_parse_levels(const char *s, objects_opts_t *o)
{
    char buf[256], *save = NULL, *tok;

    snprintf(buf, sizeof(buf), "%s", s);
    o->nlevels = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int k = bench_parse_int(tok, 1);
        if (k < 0 || o->nlevels == MAX_LEVELS ||
            (o->nlevels > 0 && k <= o->levels[o->nlevels - 1])) {
            return -1;
        }
        o->levels[o->nlevels++] = k;
    }
    return o->nlevels > 0 ? 0 : -1;
}

static int objects_parse(int argc, char **argv, objects_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->reps = 200;
    objects_parse_levels("10,1000,10000,100000", o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--live") == 0 && i + 1 < argc) {
            if (objects_parse_levels(argv[++i], o) != 0) {
                fprintf(stderr, "bench-objects: --live wants increasing counts >= 1\n");
                return -1;
            }
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if ((o->reps = bench_parse_int(argv[++i], 1)) < 0) {
                fprintf(stderr, "bench-objects: --reps wants a count >= 1\n");
                return -1;
            }
        } else if (strcmp(argv[i], "-v") == 0) {
            o->verbose = 1;
        } else if (strcmp(argv[i], "--spread") == 0) {
            o->spread = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            objects_usage(stdout);
            exit(0);
        } else {
            objects_usage(stderr);
            return -1;
        }
    }
    return 0;
}

static size_t objects_size(int i)
{
    return (size_t)64 << (i % 7); /* 64 B .. 4 KiB */
}

/* Make objects "<prefix><from..from+count-1>" (the caller's own when ptrs):
 * IVM_SUCCESS or the first refusal. */
static ivmError_t objects_make(const char *prefix, int from, int count, void **ptrs)
{
    char name[NAME_LEN];

    for (int i = from; i < from + count; i++) {
        void *p;
        snprintf(name, sizeof(name), "%s%07d", prefix, i);
        ivmError_t rc = ivmMalloc(name, &p, objects_size(i));
        if (rc != IVM_SUCCESS) {
            fprintf(stderr, "bench-objects: object %s: %s: %s\n", name, ivmGetErrorString(rc),
                    ivmGetLastErrorMessage());
            return rc;
        }
        ((uint32_t *)p)[0] = (uint32_t)i;
        if (ptrs != NULL) {
            ptrs[i] = p;
        } else {
            BENCH_CHECK(ivmUnmap(p)); /* a helper's objects live on unmapped */
        }
    }
    return IVM_SUCCESS;
}

/* A helper PE (--spread): wait for its task, make its objects, exit. */
static int objects_helper(void)
{
    char name[NAME_LEN], prefix[NAME_LEN];
    objects_task_t *task;
    void *go;
    int me;

    BENCH_CHECK(ivmGetMyId(&me));
    snprintf(name, sizeof(name), "go.%d", me);
    for (int tries = 0; ivmMap(name, &go, 0) != IVM_SUCCESS; tries++) {
        if (tries > 60000) {
            fprintf(stderr, "bench-objects: helper %d got no task in 60 s\n", me);
            return 1;
        }
        bench_sleep_ns(1000000);
    }
    snprintf(name, sizeof(name), "task.%d", me);
    BENCH_CHECK(ivmMap(name, &task, 0));
    snprintf(prefix, sizeof(prefix), "n%02d.", (int)task->node);
    if (objects_make(prefix, task->from, task->count, NULL) != IVM_SUCCESS) {
        return 1; /* without ivmExit: the root's ivmWait says the helper failed */
    }
    BENCH_CHECK(ivmUnmap(task));
    BENCH_CHECK(ivmUnmap(go));
    BENCH_CHECK(ivmExit());
    return 0;
}

/* Start a helper PE on node k that makes count objects there; its task
 * objects (to free once it is done) in bufs[0..1]. */
static ivm_pe objects_helper_start(int k, int from, int count, void **bufs)
{
    char name[NAME_LEN], node[IVM_HOST_MAX + 1];
    objects_task_t *task;
    ivm_device dev;
    ivm_pe pe;

    BENCH_CHECK(ivmGetNodeName(k, node, sizeof(node)));
    BENCH_CHECK(ivmCreateDev(node, IVM_CPU, &dev));
    BENCH_CHECK(ivmCreatePEs(dev, 1, &pe));
    BENCH_CHECK(ivmDestroyDev(dev));
    snprintf(name, sizeof(name), "task.%d", pe);
    BENCH_CHECK(ivmMalloc(name, &task, sizeof(*task)));
    *task = (objects_task_t){.node = k, .from = from, .count = count};
    snprintf(name, sizeof(name), "go.%d", pe);
    BENCH_CHECK(ivmMalloc(name, &bufs[1], 8)); /* written last: the task is ready */
    bufs[0] = task;
    return pe;
}

/* Grow the job's population to `want` objects, the root's share here and,
 * with --spread, an equal share on every other node (one helper PE each);
 * on a refusal, say why and fail. */
static int objects_grow(objects_pop_t *pop, int want)
{
    int delta = want - pop->live, share = delta / pop->nnodes;
    ivm_pe helpers[MAX_NODES];
    void *bufs[MAX_NODES][2];
    ivmError_t rc;

    for (int k = 1; k < pop->nnodes; k++) {
        helpers[k] = objects_helper_start(k, pop->made[k], share, bufs[k]);
    }
    int own = delta - share * (pop->nnodes - 1);
    rc = objects_make("obj", pop->mine, own, pop->ptrs);
    for (int k = 1; k < pop->nnodes; k++) {
        ivmError_t hrc = ivmWait(helpers[k]);
        if (hrc != IVM_SUCCESS && rc == IVM_SUCCESS) {
            rc = hrc;
        }
        pop->made[k] += share;
        BENCH_CHECK(ivmFree(bufs[k][0]));
        BENCH_CHECK(ivmFree(bufs[k][1]));
    }
    if (pop->nnodes > 1) {
        bench_sleep_ns(300000000L); /* the helpers' exits, off the two cores */
    }
    if (rc != IVM_SUCCESS) {
        printf("RESULT objects live=%d skipped=\"%s: %s (see the messages above)\"\n", want,
               ivmGetErrorString(rc), ivmGetLastErrorMessage());
        return -1;
    }
    pop->mine += own;
    pop->live = want;
    return 0;
}

/* One level: REPS malloc+free pairs and REPS map+unmap pairs. */
static void objects_measure(const objects_opts_t *o, const objects_pop_t *pop)
{
    double *t[4];
    char name[NAME_LEN];

    for (int v = 0; v < 4; v++) {
        t[v] = malloc(sizeof(double) * (size_t)o->reps);
        if (t[v] == NULL) {
            fprintf(stderr, "bench-objects: out of memory\n");
            exit(1);
        }
    }
    /* Untimed pairs first: the first calls of a level pay for cold caches
     * and page faults of the tables that just grew. */
    for (int r = 0; r < o->reps / 10 + 10; r++) {
        void *p, *m;
        BENCH_CHECK(ivmMalloc("probe", &p, PROBE_SIZE));
        BENCH_CHECK(ivmFree(p));
        BENCH_CHECK(ivmMap("obj0000000", &m, 0));
        BENCH_CHECK(ivmUnmap(m));
    }
    for (int r = 0; r < o->reps; r++) {
        void *p, *m;
        double t0 = bench_now_ns();
        BENCH_CHECK(ivmMalloc("probe", &p, PROBE_SIZE));
        double t1 = bench_now_ns();
        BENCH_CHECK(ivmFree(p));
        double t2 = bench_now_ns();
        snprintf(name, sizeof(name), "obj%07d", (int)((unsigned)r * 7919u % (unsigned)pop->mine));
        BENCH_CHECK(ivmMap(name, &m, 0));
        double t3 = bench_now_ns();
        BENCH_CHECK(ivmUnmap(m));
        double t4 = bench_now_ns();
        t[0][r] = t1 - t0;
        t[1][r] = t2 - t1;
        t[2][r] = t3 - t2;
        t[3][r] = t4 - t3;
    }
    bench_stats_t s[4];
    for (int v = 0; v < 4; v++) {
        s[v] = bench_stats(t[v], o->reps);
        free(t[v]);
    }
    printf("RESULT objects live=%d malloc_us=%.1f free_us=%.1f map_us=%.1f unmap_us=%.1f\n",
           pop->live, s[0].median / 1e3, s[1].median / 1e3, s[2].median / 1e3,
           s[3].median / 1e3);
    if (o->verbose) {
        printf("  min/p90 us: malloc %.1f/%.1f free %.1f/%.1f map %.1f/%.1f unmap %.1f/%.1f\n",
               s[0].min / 1e3, s[0].p90 / 1e3, s[1].min / 1e3, s[1].p90 / 1e3,
               s[2].min / 1e3, s[2].p90 / 1e3, s[3].min / 1e3, s[3].p90 / 1e3);
    }
    fflush(stdout);
}

/* Free the population, checking a sample of contents on the way. */
static int objects_free_all(objects_pop_t *pop)
{
    double t0 = bench_now_ns();

    for (int i = 0; i < pop->mine; i++) {
        if (((uint32_t *)pop->ptrs[i])[0] != (uint32_t)i) {
            fprintf(stderr, "bench-objects: object %d holds %u\n", i,
                    ((uint32_t *)pop->ptrs[i])[0]);
            return 1;
        }
        BENCH_CHECK(ivmFree(pop->ptrs[i]));
    }
    printf("RESULT objects freed=%d free_all_ms=%.1f\n", pop->mine,
           (bench_now_ns() - t0) / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    objects_opts_t o;
    objects_pop_t pop = {0};
    int rc = 0, me;

    if (objects_parse(argc, argv, &o) != 0) {
        return 2;
    }
    BENCH_CHECK(ivmEnter());
    BENCH_CHECK(ivmGetMyId(&me));
    if (me != 0) {
        return objects_helper();
    }
    pop.nnodes = 1;
    if (o.spread) {
        BENCH_CHECK(ivmGetNumNodes(&pop.nnodes));
        pop.nnodes = pop.nnodes > MAX_NODES ? MAX_NODES : pop.nnodes;
    }
    pop.ptrs = calloc((size_t)o.levels[o.nlevels - 1], sizeof(void *));
    if (pop.ptrs == NULL) {
        fprintf(stderr, "bench-objects: out of memory\n");
        return 1;
    }
    printf("bench-objects: live objects over %d node(s); times in us, medians of %d\n",
           pop.nnodes, o.reps);
    for (int l = 0; l < o.nlevels; l++) {
        if (objects_grow(&pop, o.levels[l]) != 0) {
            break;
        }
        objects_measure(&o, &pop);
    }
    rc = objects_free_all(&pop);
    free(pop.ptrs);
    BENCH_CHECK(ivmExit()); /* the helpers' objects go with the job */
    return rc;
}
