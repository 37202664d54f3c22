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
 * Each object is one memory file in the daemon (a file descriptor there) and
 * one mapping in the PE (a VMA): a level above the daemon's fd budget (its
 * hard RLIMIT_NOFILE) or the PE's vm.max_map_count fails with IVM_ERROR_LIMIT;
 * the level is then reported as `RESULT objects live=K skipped=...` with the
 * daemon's message, and the higher levels are not tried.

 *
 * Run:  ivmrun bench-objects [--live 10,1000,10000,100000] [--reps R (200)] [-v]
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
#define NAME_LEN     32
#define PROBE_SIZE   256

typedef struct {
    int    levels[MAX_LEVELS];
    int    nlevels;
    int    reps;
    int    verbose;
} objects_opts_t;

typedef struct {
    void  **ptrs;    /* the population, ptrs[i] is object i's reference */
    int     live;
} objects_pop_t;

static void objects_usage(FILE *f)
{
    fprintf(f, "usage: ivmrun bench-objects [--live K1,K2,... (10,1000,10000,100000)]\n"
               "                            [--reps R (200)] [-v]\n");
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

/* Grow the population to `want` objects; on a refusal, say why and fail. */
static int objects_grow(objects_pop_t *pop, int want)
{
    char name[NAME_LEN];

    while (pop->live < want) {
        size_t size = (size_t)64 << (pop->live % 7); /* 64 B .. 4 KiB */
        snprintf(name, sizeof(name), "obj%07d", pop->live);
        ivmError_t rc = ivmMalloc(name, &pop->ptrs[pop->live], size);
        if (rc != IVM_SUCCESS) {
            printf("RESULT objects live=%d skipped=\"object %d: %s: %s\"\n", want, pop->live,
                   ivmGetErrorString(rc), ivmGetLastErrorMessage());
            return -1;
        }
        ((uint32_t *)pop->ptrs[pop->live])[0] = (uint32_t)pop->live;
        pop->live++;
    }
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
        snprintf(name, sizeof(name), "obj%07d", (int)((unsigned)r * 7919u % (unsigned)pop->live));
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

    for (int i = 0; i < pop->live; i++) {
        if (((uint32_t *)pop->ptrs[i])[0] != (uint32_t)i) {
            fprintf(stderr, "bench-objects: object %d holds %u\n", i,
                    ((uint32_t *)pop->ptrs[i])[0]);
            return 1;
        }
        BENCH_CHECK(ivmFree(pop->ptrs[i]));
    }
    printf("RESULT objects freed=%d free_all_ms=%.1f\n", pop->live,
           (bench_now_ns() - t0) / 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    objects_opts_t o;
    objects_pop_t pop = {0};
    int rc = 0;

    if (objects_parse(argc, argv, &o) != 0) {
        return 2;
    }
    BENCH_CHECK(ivmEnter());
    pop.ptrs = calloc((size_t)o.levels[o.nlevels - 1], sizeof(void *));
    if (pop.ptrs == NULL) {
        fprintf(stderr, "bench-objects: out of memory\n");
        return 1;
    }
    for (int l = 0; l < o.nlevels; l++) {
        if (objects_grow(&pop, o.levels[l]) != 0) {
            break;
        }
        objects_measure(&o, &pop);
    }
    rc = objects_free_all(&pop);
    free(pop.ptrs);
    BENCH_CHECK(ivmExit());
    return rc;
}
