/*
 * Integration-test harness: starts the real ivmd on a private socket, runs
 * real PE programs against it, and on teardown checks that nothing was left
 * behind (job state, processes, daemon file descriptors, /dev/shm entries).
 *
 * Every function reports problems with Criterion assertions, so it must be
 * called from a Criterion test (or its fixtures).
 */
#ifndef IVMT_HARNESS_H
#define IVMT_HARNESS_H

#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define IVMT_PATH_MAX 256

typedef struct ivmt_daemon {
    pid_t pid;                 /* 0 once stopped */
    char  dir[IVMT_PATH_MAX];  /* private 0700 temporary directory */
    char  sock[IVMT_PATH_MAX + 32]; /* <dir>/ivmd.sock */
    char  log[IVMT_PATH_MAX + 32];  /* the daemon's stdout and stderr */
    int   fd_baseline;         /* open fds of the daemon once ready */
    char *shm_baseline;        /* sorted /dev/shm listing at start */
    pid_t gpud_pid;            /* its ivm-gpud child, once seen (0: none) */
} ivmt_daemon_t;

typedef struct ivmt_result {
    int    timed_out; /* killed by the harness after the time limit */
    int    exited;    /* exited normally (then code is valid) */
    int    code;      /* exit code */
    int    signo;     /* terminating signal, 0 if none */
    double seconds;   /* wall time from start to exit */
    char  *out;       /* everything written to stdout (by every PE of the job) */
    char  *err;       /* everything written to stderr */
} ivmt_result_t;

/* Start ivmd with --socket <fresh dir>/ivmd.sock --ready-fd N plus extra_args
 * (NULL-terminated, may be NULL); wait for the ready byte; record baselines. */
void ivmt_daemon_start(ivmt_daemon_t *d, const char *const *extra_args);
/* IVMT_DAEMON_WRAPPER (opt-in, e.g. "valgrind --error-exitcode=99
 * --leak-check=full -q"): a command the daemons the tests start (ivmd by
 * ivmt_daemon_start and ivmt_peer_daemon_start outside network namespaces,
 * ivm-gpud by test_gpud) run under. Puts its words at argv[0..) and returns
 * how many (at most max); exec the result with execvp. */
int ivmt_daemon_wrapper(const char **argv, int max);

/* The teardown checks, then SIGTERM: the job registry is empty, no process of
 * ours is left, the daemon's fd count is back to its baseline, /dev/shm is
 * unchanged, the daemon exits 0 and removes its socket. */
void ivmt_daemon_finish(ivmt_daemon_t *d);

/* SIGTERM the daemon while jobs may run: it must exit 0 within 5 s, remove
 * its socket and leave no process with its IVM_SOCKET (every PE killed). */
void ivmt_daemon_terminate(ivmt_daemon_t *d);

/* Kill a daemon that is still running (test failed half-way) without checks. */
void ivmt_daemon_abandon(ivmt_daemon_t *d);

/* The last bytes of the daemon's log (malloc'd). */
char *ivmt_daemon_log_tail(const ivmt_daemon_t *d, size_t max);

/* Milliseconds ivmt_info waits for each step of INFO. */
#define IVMT_INFO_WAIT_MS 3000

/* Ask the daemon at sock for its INFO. Returns 0, or -1 with *why_p set (a
 * text valid until the next call). */
int ivmt_info(const char *sock, ivm_msg_info_rep_t *info, const char **why_p);

/* Connect to the daemon's socket (asserts success). */
int ivmt_connect(const ivmt_daemon_t *d);

/* Run argv (argv[0] an absolute path) with the test's environment minus every
 * IVM_* variable but IVM_PE_POOL (the suite's _pool runs), plus env entries ("NAME=value"; "NAME" alone removes it),
 * each NULL-terminated (env may be NULL). The child gets /dev/null as stdin,
 * its stdout and stderr are captured, it dies with the test process, and it
 * is killed after timeout_s. */
void ivmt_run(const char *const *argv, const char *const *env, double timeout_s,
              ivmt_result_t *r);

/* A program started in the background. */
typedef struct ivmt_proc {
    pid_t  pid;
    int    out_r, err_r; /* the captured streams */
    double start;
} ivmt_proc_t;

/* Start argv as ivmt_run does, without waiting. */
void ivmt_start(const char *const *argv, const char *const *env, ivmt_proc_t *p);

/* Start a PE program as a root PE of daemon d, as ivmt_run_pe does. */
void ivmt_start_pe(const ivmt_daemon_t *d, const char *prog, const char *scenario,
                   const char *const *args, const char *const *env, ivmt_proc_t *p);

/* Its stdout so far (malloc'd). */
char *ivmt_proc_output(const ivmt_proc_t *p);

/* Wait until its stdout holds text; 0 on time-out or if it ended first. */
int ivmt_wait_output(const ivmt_proc_t *p, const char *text, double timeout_s);

/* Wait for it to end (killed after timeout_s) and collect the result. */
void ivmt_finish(ivmt_proc_t *p, double timeout_s, ivmt_result_t *r);

/* Run a PE program as a root PE of daemon d: argv = {prog, scenario, args...},
 * env IVM_SOCKET=<d's socket> IVM_AUTOSTART=0 plus env. */
void ivmt_run_pe(const ivmt_daemon_t *d, const char *prog, const char *scenario,
                 const char *const *args, const char *const *env, double timeout_s,
                 ivmt_result_t *r);

/* Assert that a PE run passed: no time-out, exit 0, an "OK <scenario>" line,
 * no line starting with "FAIL ". The message shows the outputs and the daemon's log. */
void ivmt_expect_pe_ok(const ivmt_daemon_t *d, const ivmt_result_t *r,
                       const char *scenario);

/* Human-readable account of a run (malloc'd), for assertion messages. */
char *ivmt_describe(const ivmt_daemon_t *d, const ivmt_result_t *r);

void ivmt_result_free(ivmt_result_t *r);

/* Parse "<key> n1 n2 ..." from the output; returns how many numbers. */
int ivmt_parse_pids(const char *out, const char *key, pid_t *pids, int max);

/* Wait up to timeout_s for each pid to be gone (not even a zombie, unless an
 * orphaned one, which init collects). Returns the number still present (and
 * SIGKILLs them). */
int ivmt_wait_pids_gone(const pid_t *pids, int n, double timeout_s);

/* Seconds a run's processes may take to be gone once it ended: 5, or
 * IVMT_LEFTOVER_GRACE_S (the sanitizer pass). The timeout_s of
 * ivmt_wait_pids_gone for "outlived its job" checks: a process left behind
 * is still there after any grace, and a loaded machine needs more than 3 s. */
double ivmt_leftover_grace_s(void);

/* Processes (other than ourselves and `exclude`) whose parent is `parent` or
 * whose environment holds one of the NULL-terminated entries exactly, or whose
 * command line contains `cmd_substr`. Returns the count; fills pids. */
int ivmt_find_procs(pid_t parent, pid_t exclude, const char *const *env_entries,
                    const char *cmd_substr, pid_t *pids, int max);

/* "pid (cmdline)" for each, malloc'd. */
char *ivmt_describe_procs(const pid_t *pids, int n);

/* Sorted listing of /dev/shm, one name per line (malloc'd). */
char *ivmt_shm_listing(void);

/* Entries of `now` missing from `before` (malloc'd, "" if none). */
char *ivmt_listing_added(const char *before, const char *now);

/* Open fds of a process, -1 if it is gone. */
int ivmt_count_fds(pid_t pid);

/* Make a private 0700 temporary directory; asserts. */
void ivmt_make_tmpdir(char *buf, size_t len);

/* Remove a directory and the plain files/sockets directly in it. */
void ivmt_remove_dir(const char *dir);

/* Cgroups of CPU share devices (common/cgroup.h: <parent>/ivm/ivmd-<pid>-
 * <starttime>/..., the parent being the test's own cgroup in the hierarchy
 * with the cpu controller). Paths are relative to the parent. */
/* The directory of daemon pid into buf: 0, or -1 if it has none. */
int ivmt_cgroup_daemon_dir(pid_t pid, char *buf, size_t len);
/* The groups below rel, one "sub/path" per line (malloc'd, "" if none). */
char *ivmt_cgroup_listing(const char *rel);
/* The owner directories in ivm/ whose process is gone, one per line
 * (malloc'd, "" if none). */
char *ivmt_cgroup_stale(void);
/* Remove group rel and all below it (processes moved out); 0 or -1. */
int ivmt_cgroup_remove(const char *rel);
/* 1 if this process can make cgroups with CPU limits (root, or a delegated
 * cgroup, with the cpu controller), else 0 with the reason in why. */
int ivmt_cgroup_writable(char *why, size_t len);

/* A launcher (ivmrun) run with a private IVM_SOCKET_DIR. */
typedef struct ivmt_launch {
    char        dir[IVMT_PATH_MAX];
    char        dir_env[IVMT_PATH_MAX + 32];
    ivmt_proc_t proc;
    char       *cg_stale;  /* ivmt_cgroup_stale() at the start */
} ivmt_launch_t;

/* Start `launcher args...` with IVM_SOCKET_DIR=<fresh dir>, no other IVM_*
 * but IVM_PE_POOL. */
void ivmt_launch_start(const char *launcher, const char *const *args, ivmt_launch_t *c);
/* The same with env ("NAME=VALUE" entries, NULL-terminated; NULL: none)
 * added: the launcher's daemons and PEs inherit them. */
void ivmt_launch_start_env(const char *launcher, const char *const *args,
                           const char *const *env, ivmt_launch_t *c);

/* Collect it; assert that no process of the run (environment or command line
 * naming the directory) is left 5 s later, and no cgroup directory of a
 * daemon that is gone appeared. */
void ivmt_launch_finish(ivmt_launch_t *c, double timeout_s, ivmt_result_t *r);

/* ivmt_launch_finish, and the private IVM_SOCKET_DIR must then be empty: no
 * run directory, socket or file of the run left in it. */
void ivmt_launch_finish_clean(ivmt_launch_t *c, double timeout_s, ivmt_result_t *r);

/* Fixture of most tests: one daemon per test in ivmt_d. */
extern ivmt_daemon_t ivmt_d;
void ivmt_fixture_start(void);  /* .init: start ivmt_d with default options */
void ivmt_fixture_stop(void);   /* .fini: abandon ivmt_d if a test left it running */

/* Run a scenario against ivmt_d, expect it to pass, then the teardown checks. */
void ivmt_scenario(const char *prog, const char *scenario, const char *const *args,
                   const char *const *env, double timeout_s);

/* Start an ivmd accepting peers: node name `node`, Unix socket `sock`, output to
 * `log`, --listen `listen` (e.g. "127.0.0.1:0"), inside network namespace `netns`
 * (through `ip netns exec`) unless it is NULL. Reads the "R PORT" readiness line
 * into *port_p (asserts). Returns its pid. */
pid_t ivmt_peer_daemon_start(const char *netns, const char *node, const char *sock,
                             const char *log, const char *listen, uint16_t *port_p);

/* The "R PORT" readiness line of a daemon (`who`, e.g. "ivmd", on node
 * `node` in `netns`, each may be NULL, for the message) on the read end fd of
 * its --ready-fd pipe, within 10 s; closes fd. Asserts a port came. */
uint16_t ivmt_ready_port(int fd, const char *who, const char *node, const char *netns);

/* One request on a fresh connection to sock (asserts the transport); returns
 * the reply's status and copies its detail text, if any, into detail. */
int ivmt_unix_call(const char *sock, uint16_t type, const void *payload, uint32_t len,
                   char *detail, size_t detail_len);

double ivmt_now(void);
void ivmt_sleep_ms(int ms);

/* The CUDA stand-in runs (tests/cudastub; ctest's *_cudastub entries set
 * IVMT_CUDASTUB=1 with the stand-in on LD_LIBRARY_PATH): the cuda backend
 * must be there, so a test that would skip for want of a GPU fails instead. */
static inline int ivmt_cudastub(void)
{
    const char *v = getenv("IVMT_CUDASTUB");
    return v != NULL && v[0] == '1';
}

/* Stand-in runs: the emulated GPUs a test would ask of the emu backend (N:SIZE,
 * as --emu-gpus) are the stand-in's GPUs, with the emu backend's 64 KiB
 * granularity; ivmd and its children inherit them. */
static inline void ivmt_cudastub_devices(const char *emu)
{
    if (ivmt_cudastub()) {
        setenv("CUDASTUB_DEVICES", emu, 1);
        setenv("CUDASTUB_GRANULARITY", "64K", 1);
    }
}

#endif /* IVMT_HARNESS_H */
