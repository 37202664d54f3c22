/*
 * Chaos: a 3-node DS-LB run (apps/nbody through ivmrun --nodes 3, with
 * --verify) in which one random process is SIGKILLed at a random moment: a PE
 * (the root or a child PE, started cold or forked by a warm-pool process) or
 * one of the three daemons. Every run must end (no
 * hang: bounded), with the documented status, and leave nothing behind:
 *  - root PE killed: ivmrun exits 128 + 9 = 137;
 *  - anything else: exit 0 with a verified result (the kill came too late to
 *    matter, or after that PE's work was in), or exit 1 with a message that
 *    names the loss (a PE that died: IVM_ERROR_PE_FAILED; a daemon that is
 *    gone: IVM_ERROR_DAEMON_LOST, "unreachable");
 *  - then no process of the run, no socket or run directory, no cgroup of a
 *    daemon that is gone, no new /dev/shm entry.
 * IVMT_CHAOS_N runs (default 5), or as many as fit in IVMT_CHAOS_SECONDS;
 * IVMT_CHAOS_SEED seeds them (default: from the clock). Run k uses seed
 * SEED + k, printed with its outcome: IVMT_CHAOS_SEED=<that> IVMT_CHAOS_N=1
 * replays it. bench/chaos.sh runs many (a soak).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define CHAOS_RUNS      5     /* default number of runs */
#define CHAOS_MAX_PROCS 256
#define CHAOS_KILL_MIN  0.15  /* s after the start: the earliest kill */
#define CHAOS_KILL_SPAN 1.6   /* s: the kill comes within this much after that */
#define CHAOS_RUN_LIMIT 90.0  /* s a run may take at most, kill included */

/* The app: 24 portions per iteration on the 3 nodes' CPU devices; about 1.3
 * s of computation and 1 s of verification on a quiet 2-core machine. */
static const char *const chaos_app[] = {"--size", "6144", "--portions", "24", "--iters",
                                        "6", "--verify", NULL};

static uint64_t chaos_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The name (comm) of pid into buf; "" if it is gone. */
static void chaos_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    FILE *f;

    buf[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    if (fgets(buf, (int)len, f) == NULL) {
        buf[0] = '\0';
    }
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* The parent of pid; 0 if it is gone. */
static pid_t chaos_ppid(pid_t pid)
{
    char path[64], line[512], *paren;
    pid_t ppid = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    if (fgets(line, sizeof(line), f) != NULL && (paren = strrchr(line, ')')) != NULL &&
        strlen(paren) > 4) {
        ppid = (pid_t)atoi(paren + 4); /* ") S PPID ..." */
    }
    fclose(f);
    return ppid;
}

/* A parked warm-pool process (not a PE yet): started by a daemon with a
 * negative IVM_PE_ID (a pool slot). A PE it forked has that environment too,
 * but a parked process as its parent. */
static int chaos_parked(pid_t pid)
{
    char path[64], env[1 << 16], pname[32];
    size_t n;
    FILE *f;
    int parked = 0;

    chaos_comm(chaos_ppid(pid), pname, sizeof(pname));
    if (strcmp(pname, "ivmd") != 0) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    n = fread(env, 1, sizeof(env) - 1, f);
    fclose(f);
    env[n] = '\0';
    for (size_t off = 0; off < n; off += strlen(env + off) + 1) {
        if (strncmp(env + off, "IVM_PE_ID=-", 11) == 0) {
            parked = 1;
        }
    }
    return parked;
}

/* The processes of the run named comm (daemons: by their command line,
 * which names the run directory; PEs: by IVM_SOCKET_DIR), parked warm-pool
 * processes left out. */
static int chaos_procs(const ivmt_launch_t *c, const char *comm, pid_t *out, int max)
{
    const char *entries[] = {c->dir_env, NULL};
    pid_t all[CHAOS_MAX_PROCS];
    int n = ivmt_find_procs(0, c->proc.pid, entries, c->dir, all, CHAOS_MAX_PROCS), k = 0;
    char name[32];

    for (int i = 0; i < n && k < max; ++i) {
        chaos_comm(all[i], name, sizeof(name));
        if (strcmp(name, comm) == 0 && !chaos_parked(all[i])) {
            out[k++] = all[i];
        }
    }
    return k;
}

static char *chaos_shm_added(const char *before)
{
    char *now = ivmt_shm_listing(), *added = ivmt_listing_added(before, now);
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    /* MPI's segments are no IVM object (IVM keeps its memory in memfds). */
    for (line = strtok_r(added, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "vader_segment.", 14) != 0) {
            fprintf(f, "%s\n", line);
        }
    }
    fclose(f);
    free(now);
    free(added);
    return text;
}

/* One run with seed: launch, kill at a random moment, check; a failure
 * names the seed that replays it. */
static void chaos_run(int k, uint64_t seed)
{
    const char *args[24];
    ivmt_launch_t c;
    ivmt_result_t r;
    pid_t cand[CHAOS_MAX_PROCS], victim = 0;
    uint64_t s = seed * 2654435761u + 0x9E3779B97F4A7C15ull;
    double at, t0;
    int n = 0, want_daemon, ncand, root_killed = 0;
    char what[64] = "nothing (the run ended first)", *desc, *shm_before, *shm_new;

    args[n++] = "--nodes";
    args[n++] = "3";
    args[n++] = "--timeout";
    args[n++] = "80";
    args[n++] = IVMT_NBODY;
    for (int i = 0; chaos_app[i] != NULL; ++i) {
        args[n++] = chaos_app[i];
    }
    args[n] = NULL;

    chaos_next(&s);
    want_daemon = (int)(chaos_next(&s) % 2);
    at = CHAOS_KILL_MIN + CHAOS_KILL_SPAN * (double)(chaos_next(&s) % 10000) / 10000.0;

    shm_before = ivmt_shm_listing();
    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    t0 = c.proc.start;
    while (ivmt_now() < t0 + at) {
        ivmt_sleep_ms(5);
    }
    ncand = chaos_procs(&c, want_daemon ? "ivmd" : "nbody", cand, CHAOS_MAX_PROCS);
    if (ncand == 0) {
        want_daemon = !want_daemon;
        ncand = chaos_procs(&c, want_daemon ? "ivmd" : "nbody", cand, CHAOS_MAX_PROCS);
    }
    if (ncand > 0) {
        victim = cand[chaos_next(&s) % (uint64_t)ncand];
        if (want_daemon) {
            snprintf(what, sizeof(what), "a daemon (pid %d)", (int)victim);
        } else {
            root_killed = (chaos_ppid(victim) == c.proc.pid);
            snprintf(what, sizeof(what), "%s (pid %d)", root_killed ? "the root PE" : "a PE",
                     (int)victim);
        }
        kill(victim, SIGKILL);
    }
    ivmt_launch_finish_clean(&c, CHAOS_RUN_LIMIT, &r);
    desc = ivmt_describe(NULL, &r);
    cr_log_info("chaos run %d (seed %llu): killed %s at %.2f s: %s %d after %.1f s%s", k,
                (unsigned long long)seed, what, at,
                r.timed_out ? "time-out" : r.exited ? "exit" : "signal",
                r.exited ? r.code : r.signo, r.seconds,
                r.exited && r.code == 0 ? " (verified)"
                : strstr(r.err, "died") != NULL ? " (a PE died)"
                : strstr(r.err, "connection to the IVM daemon lost") != NULL ? " (daemon lost)"
                : strstr(r.err, "unreachable") != NULL ? " (a node unreachable)"
                : strstr(r.err, "before it was ready") != NULL ? " (a daemon killed at its start)"
                : strstr(r.err, "while the cluster was forming") != NULL
                    ? " (a daemon killed as the nodes joined)"
                    : "");
    cr_assert(!r.timed_out, "chaos run %d (replay: IVMT_CHAOS_SEED=%llu IVMT_CHAOS_N=1): "
              "killed %s at %.2f s: the run did not end within %g s\n%s", k,
              (unsigned long long)seed, what, at, CHAOS_RUN_LIMIT, desc);
    if (root_killed) {
        cr_assert(r.exited && r.code == 128 + SIGKILL,
                  "chaos run %d (replay: IVMT_CHAOS_SEED=%llu IVMT_CHAOS_N=1): killed %s at "
                  "%.2f s: ivmrun should exit 137\n%s", k, (unsigned long long)seed, what, at,
                  desc);
    } else if (r.exited && r.code == 0) {
        cr_assert(strstr(r.out, "verified=yes") != NULL,
                  "chaos run %d (replay: IVMT_CHAOS_SEED=%llu IVMT_CHAOS_N=1): killed %s at "
                  "%.2f s: exit 0 without a verified result\n%s", k, (unsigned long long)seed,
                  what, at, desc);
    } else {
        cr_assert(r.exited && r.code == 1 &&
                      (strstr(r.err, "died") != NULL ||
                       strstr(r.err, "connection to the IVM daemon lost") != NULL ||
                       strstr(r.err, "unreachable") != NULL ||
                       /* killed while it started or while the nodes joined (a slow
                        * start: the sanitizer build) */
                       strstr(r.err, "before it was ready") != NULL ||
                       strstr(r.err, "while the cluster was forming") != NULL),
                  "chaos run %d (replay: IVMT_CHAOS_SEED=%llu IVMT_CHAOS_N=1): killed %s at "
                  "%.2f s: expected exit 1 naming a lost PE or daemon\n%s", k,
                  (unsigned long long)seed, what, at, desc);
    }
    shm_new = chaos_shm_added(shm_before);
    cr_assert_str_empty(shm_new, "chaos run %d (replay: IVMT_CHAOS_SEED=%llu IVMT_CHAOS_N=1): "
                        "new /dev/shm entries: %s", k, (unsigned long long)seed, shm_new);
    free(shm_new);
    free(shm_before);
    free(desc);
    ivmt_result_free(&r);
}

static unsigned long long chaos_env(const char *name, unsigned long long def)
{
    const char *v = getenv(name);

    return (v != NULL && v[0] != '\0') ? strtoull(v, NULL, 10) : def;
}

TestSuite(chaos, .timeout = 240);

Test(chaos, kill_one_at_random)
{
    unsigned long long seed = chaos_env("IVMT_CHAOS_SEED", (unsigned long long)time(NULL));
    unsigned long long runs = chaos_env("IVMT_CHAOS_N", CHAOS_RUNS);
    double seconds = (double)chaos_env("IVMT_CHAOS_SECONDS", 0), start = ivmt_now();

    cr_log_info("chaos: seed %llu, %s %llu", seed, seconds > 0 ? "for seconds:" : "runs:",
                seconds > 0 ? (unsigned long long)seconds : runs);
    for (unsigned long long k = 0; seconds > 0 ? ivmt_now() - start < seconds : k < runs; ++k) {
        chaos_run((int)k, seed + k);
    }
}
