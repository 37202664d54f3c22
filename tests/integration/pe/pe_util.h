/*
 * Helpers shared by the PE programs of the integration tests.
 *
 * A PE program takes a scenario name as argv[1]. Every PE of the job (the
 * root, started by the test, and the PEs it creates, started by ivmd) runs the
 * same scenario function from the top and tells its role from ivmGetMyId.
 * A failed check prints one "FAIL ..." line on stdout (which the daemon gives
 * to every PE of the job) and ends the process without ivmExit; the root PE
 * prints "OK <scenario>" when the scenario passed.
 */
#ifndef IVMT_PE_UTIL_H
#define IVMT_PE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ivm.h"

static int pe_me = -1;                       /* this PE's id once known */
static const char *volatile pe_stage = "start"; /* what the PE is doing, for time-outs */
static const char *pe_scenario = "?";

static inline const char *pe_status_name(int rc)
{
    switch (rc) {
#define PE_STATUS_NAME_CASE(name, value, text) case value: return #name;
    IVM_STATUS_TABLE(PE_STATUS_NAME_CASE)
#undef PE_STATUS_NAME_CASE
    default:
        return "(not a status)";
    }
}

static inline void pe_die(void) __attribute__((noreturn));
static inline void pe_die(void)
{
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

static inline void pe_failf(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static inline void pe_failf(int line, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL [%s pe%d line %d] ", pe_scenario, pe_me, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    pe_die();
}

/* call must return want. */
#define EXPECT(call, want)                                                        \
    do {                                                                          \
        int pe_rc_ = (int)(call);                                                 \
        int pe_want_ = (int)(want);                                               \
        if (pe_rc_ != pe_want_) {                                                 \
            pe_failf(__LINE__, "%s returned %s (%d), expected %s [%s]", #call,    \
                     pe_status_name(pe_rc_), pe_rc_, pe_status_name(pe_want_),    \
                     ivmGetLastErrorMessage());                                   \
        }                                                                         \
    } while (0)

#define CHECK(call) EXPECT(call, IVM_SUCCESS)

static inline void pe_failc(int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static inline void pe_failc(int line, const char *cond, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL [%s pe%d line %d] assertion '%s' failed: ", pe_scenario, pe_me, line, cond);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    pe_die();
}

/* ASSERT(x == 1, "x = %d", x): the format explains the values. */
#define ASSERT(cond, ...)                                                         \
    do {                                                                          \
        if (!(cond)) {                                                            \
            pe_failc(__LINE__, #cond, __VA_ARGS__);                               \
        }                                                                         \
    } while (0)

/* A CUDA driver function, for PEs that check device memory themselves on
 * the cuda backend (libcuda is dlopen'd: the PE starts without a driver). */
static inline void *pe_cuda_sym(const char *name)
{
    static void *lib;
    void *fn;

    if (lib == NULL) {
        lib = dlopen("libcuda.so.1", RTLD_NOW);
        ASSERT(lib != NULL, "dlopen libcuda.so.1: %s", dlerror());
    }
    fn = dlsym(lib, name);
    ASSERT(fn != NULL, "libcuda lacks %s", name);
    return fn;
}

static inline void pe_on_alarm(int sig)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "FAIL [%s pe%d] watchdog: still in '%s'\n",
                     pe_scenario, pe_me, pe_stage);
    (void)sig;
    if (n > 0) {
        ssize_t w = write(1, buf, (size_t)n);
        (void)w;
    }
    _exit(3);
}

/* Line-buffered output, no core dumps, a watchdog of `seconds`. */
static inline void pe_init(const char *scenario, unsigned seconds)
{
    struct rlimit nocore = {0, 0};

    pe_scenario = scenario;
    setvbuf(stdout, NULL, _IOLBF, 0);
    setrlimit(RLIMIT_CORE, &nocore);
    signal(SIGALRM, pe_on_alarm);
    alarm(seconds);
}

static inline double pe_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void pe_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Enter, learn the id. */
static inline int pe_enter(void)
{
    int id = -1;

    pe_stage = "ivmEnter";
    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    ASSERT(id >= 0, "id %d", id);
    pe_me = id;
    return id;
}

/* Wait until *flag (in shared memory) is at least value, for at most
 * seconds; fail otherwise. */
static inline void pe_wait_flag(atomic_int *flag, int value, double seconds, const char *what)
{
    double deadline = pe_now() + seconds;

    while (atomic_load(flag) < value) {
        if (pe_now() > deadline) {
            pe_failf(__LINE__, "time-out waiting for %s (%d, want %d)", what,
                     atomic_load(flag), value);
        }
        pe_sleep_ms(1);
    }
}

/* Block forever (until killed or the watchdog fires). */
static inline void pe_idle_forever(void) __attribute__((noreturn));
static inline void pe_idle_forever(void)
{
    pe_stage = "idle forever (should have been terminated)";
    for (;;) {
        pause();
    }
}

/* The scenario table of a PE program. */
typedef int (*pe_scenario_fn)(int argc, char **argv);
typedef struct pe_scenario_entry {
    const char     *name;
    pe_scenario_fn  fn;
} pe_scenario_entry_t;

static inline int pe_main(const pe_scenario_entry_t *table, int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCENARIO [ARGS]\n", argv[0]);
        return 2;
    }
    for (; table->name != NULL; ++table) {
        if (strcmp(table->name, argv[1]) == 0) {
            pe_init(table->name, 90);
            return table->fn(argc, argv);
        }
    }
    fprintf(stderr, "FAIL unknown scenario '%s'\n", argv[1]);
    return 2;
}

/* Root's last words. */
static inline int pe_ok(void)
{
    printf("OK %s\n", pe_scenario);
    fflush(stdout);
    return 0;
}

#endif /* IVMT_PE_UTIL_H */
