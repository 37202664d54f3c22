/*
 * ivm-devrun: run an MPI program's ranks on the same CPU devices as IVM, so
 * that the MPI baselines of the benchmarks meet the devices IVM's PEs meet
 * (cores, and shares of their time enforced with cgroups, as ivmd does).
 *
 *   ivm-devrun --cpu-devices SPEC [--change T:DEV:PCT]... -- CMD [ARGS...]
 *   ivm-devrun --rank -- PROG [ARGS...]
 *
 * Outer mode parses SPEC as ivmd does (common/devspec.h: "0,1:50,1:25"),
 * makes one cgroup per device, <parent>/ivm/devrun-<pid>-<starttime>/dev<K>,
 * with the device's limit (share x cores; a device of whole cores gets a
 * group without a limit, so every rank is placed the same way), exports
 * "SPEC|DIR" (DIR: that directory) in IVM_DEVRUN, runs CMD (typically
 * mpirun), applies each --change at T seconds after CMD started (device DEV
 * gets share PCT; the shares of a core may not add up to more than 100 at
 * any time), and removes the groups when CMD ended (processes left in them
 * are moved out first), also after SIGINT, SIGTERM or SIGHUP, which it
 * passes on to CMD. Directories of an ivm-devrun that was killed are swept
 * at the next start. Exit status: CMD's (128+N if it died of signal N); 1 if
 * ivm-devrun failed, 2 for a bad command line, 127 if CMD cannot be run.
 *
 * Rank mode (what CMD runs for each rank) reads the rank from
 * OMPI_COMM_WORLD_RANK (else PMI_RANK, PMIX_RANK, SLURM_PROCID), joins the
 * group of device rank mod ndevs, pins itself to that device's cores, sets
 * OMP_NUM_THREADS to its number of cores and execs PROG. The groups live on
 * the host ivm-devrun runs on: run all ranks there.
 *
 * Example: ivm-devrun --cpu-devices 0,1:50 --change 5:1:25 -- \
 *            mpirun -np 2 ivm-devrun --rank -- nbody-mpi -n 4096
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "devspec.h"
#include "topo.h"
#include "version.h"

#define DEVRUN_ENV         "IVM_DEVRUN"
#define DEVRUN_PREFIX      "devrun"
#define DEVRUN_MAX_CHANGES 64
#define DEVRUN_EXIT_FAIL   1
#define DEVRUN_EXIT_USAGE  2
#define DEVRUN_EXIT_NOEXEC 127

typedef struct devrun_change {
    double at;      /* seconds after CMD started */
    int    dev;     /* device index */
    int    percent; /* its new share, 1..100 */
} devrun_change_t;

typedef struct devrun {
    ivm_cgroup_root_t root;
    char              own[128];  /* "ivm/devrun-<pid>-<starttime>", relative to the parent */
    int               made;      /* own exists */
    const char       *spec;
    ivm_cpu_device_t  devs[IVM_DEVSPEC_MAX_DEVICES];
    int               ndevs;
    devrun_change_t   changes[DEVRUN_MAX_CHANGES];
    int               nchanges;
    char            **cmd;       /* CMD and its arguments, NULL-terminated */
    pid_t             child;
    int               signo;     /* the signal that ended our wait, 0 if none */
} devrun_t;

static int devrun_usage(FILE *out, int rc)
{
    fprintf(out,
            "usage: ivm-devrun --cpu-devices SPEC [--change T:DEV:PCT]... -- CMD [ARGS...]\n"
            "       ivm-devrun --rank -- PROG [ARGS...]\n"
            "Runs CMD (e.g. mpirun) with one cgroup per CPU device of SPEC (IVM's syntax:\n"
            "0-3,4:50,4:25 is cores 0-3, half of core 4, a quarter of core 4), each\n"
            "limited to its share of its cores' time; each rank, started as\n"
            "'ivm-devrun --rank -- PROG', joins device (rank mod devices), is pinned to\n"
            "its cores and gets OMP_NUM_THREADS = its cores. --change T:DEV:PCT gives\n"
            "device DEV the share PCT at T seconds after CMD started. The groups are\n"
            "removed when CMD ends; the exit status is CMD's. Needs root (or a cgroup\n"
            "of the cpu controller delegated to the user).\n");
    return rc;
}

static double devrun_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "T:DEV:PCT" into c. */
static int devrun_change_parse(const char *text, devrun_change_t *c)
{
    int used = -1;

    if (sscanf(text, "%lf:%d:%d%n", &c->at, &c->dev, &c->percent, &used) != 3 ||
        text[used] != '\0' || !(c->at >= 0) || c->at > 1e6 || c->dev < 0) {
        fprintf(stderr, "ivm-devrun: --change '%s' is not T:DEV:PCT (seconds, device index, "
                "percent)\n", text);
        return -1;
    }
    return 0;
}

static int devrun_change_cmp(const void *a, const void *b)
{
    const devrun_change_t *x = a, *y = b;

    return (x->at > y->at) - (x->at < y->at);
}

/* The changes in time order, each valid for the table as the earlier ones
 * left it (a core's shares at most 100 at any time). */
static int devrun_changes_check(devrun_t *dr)
{
    ivm_cpu_device_t table[IVM_DEVSPEC_MAX_DEVICES];
    char err[256];
    int i;

    qsort(dr->changes, (size_t)dr->nchanges, sizeof(dr->changes[0]), devrun_change_cmp);
    memcpy(table, dr->devs, sizeof(table[0]) * (size_t)dr->ndevs);
    for (i = 0; i < dr->nchanges; ++i) {
        const devrun_change_t *c = &dr->changes[i];
        if (ivm_devspec_share_check(table, dr->ndevs, c->dev, c->percent, err, sizeof(err)) !=
            IVM_SUCCESS) {
            fprintf(stderr, "ivm-devrun: --change %g:%d:%d on '%s': %s\n", c->at, c->dev,
                    c->percent, dr->spec, err);
            return -1;
        }
        table[c->dev].percent = c->percent;
    }
    return 0;
}

/* Outer mode's command line into dr. */
static int devrun_parse(devrun_t *dr, int argc, char **argv)
{
    char err[256];
    long ncpus = sysconf(_SC_NPROCESSORS_CONF);
    int i;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (!strcmp(argv[i], "--cpu-devices") && i + 1 < argc) {
            dr->spec = argv[++i];
        } else if (!strcmp(argv[i], "--change") && i + 1 < argc) {
            if (dr->nchanges == DEVRUN_MAX_CHANGES) {
                fprintf(stderr, "ivm-devrun: more than %d --change\n", DEVRUN_MAX_CHANGES);
                return -1;
            }
            if (devrun_change_parse(argv[++i], &dr->changes[dr->nchanges++]) != 0) {
                return -1;
            }
        } else {
            fprintf(stderr, "ivm-devrun: unexpected '%s' (see --help)\n", argv[i]);
            return -1;
        }
    }
    if (dr->spec == NULL || i + 1 >= argc) {
        fprintf(stderr, "ivm-devrun: give --cpu-devices SPEC and, after --, the command\n");
        return -1;
    }
    dr->cmd = &argv[i + 1];
    if (ivm_topo_devspec_parse(dr->spec, ncpus > 0 ? (int)ncpus : 0, dr->devs,
                          IVM_DEVSPEC_MAX_DEVICES, &dr->ndevs, err, sizeof(err)) !=
        IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun: --cpu-devices: %s\n", err);
        return -1;
    }
    return devrun_changes_check(dr);
}

static uint32_t devrun_limit(const ivm_cpu_device_t *dev)
{
    return dev->percent < 100 ? (uint32_t)dev->percent * (uint32_t)dev->ncores : 0;
}

/* Remove our groups (processes left in them moved out). */
static void devrun_groups_remove(devrun_t *dr)
{
    char err[320];

    if (!dr->made) {
        return;
    }
    if (ivm_cgroup_destroy(&dr->root, dr->own, err, sizeof(err)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun: %s\n", err);
    }
    ivm_cgroup_top_remove(&dr->root);
    dr->made = 0;
}

/* Sweep killed runs' groups, make ours, export IVM_DEVRUN. */
static int devrun_groups_create(devrun_t *dr)
{
    char err[320], rel[192], dir[IVM_CGROUP_PATH_MAX], *env;
    int k, removed = 0;

    if (ivm_cgroup_root_find(&dr->root, err, sizeof(err)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun: no cgroups with a CPU limit here: %s\n", err);
        return -1;
    }
    if (ivm_cgroup_sweep(&dr->root, DEVRUN_PREFIX, &removed, err, sizeof(err)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun: cannot remove the groups of a killed run: %s\n", err);
    }
    if (ivm_cgroup_owner_dir(DEVRUN_PREFIX, 0, dr->own, sizeof(dr->own)) != IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun: cannot read this process's start time\n");
        return -1;
    }
    dr->made = 1; /* from here on, what exists of own is removed at the end */
    for (k = 0; k < dr->ndevs; ++k) {
        snprintf(rel, sizeof(rel), "%s/dev%d", dr->own, k);
        if (ivm_cgroup_create(&dr->root, rel, devrun_limit(&dr->devs[k]), err, sizeof(err)) !=
            IVM_SUCCESS) {
            fprintf(stderr, "ivm-devrun: device %d of '%s': %s (this needs root, or a "
                    "cgroup of the cpu controller delegated to you)\n", k, dr->spec, err);
            return -1;
        }
    }
    if (ivm_cgroup_path(&dr->root, dr->own, NULL, dir, sizeof(dir)) != IVM_SUCCESS ||
        asprintf(&env, "%s|%s", dr->spec, dir) < 0 || setenv(DEVRUN_ENV, env, 1) != 0) {
        fprintf(stderr, "ivm-devrun: cannot set %s\n", DEVRUN_ENV);
        return -1;
    }
    free(env);
    return 0;
}

/* Apply the changes due at `elapsed` seconds; returns the seconds to the
 * next one (-1: none left). */
static double devrun_changes_apply(devrun_t *dr, int *next, double elapsed)
{
    char err[320], rel[192];

    while (*next < dr->nchanges && dr->changes[*next].at <= elapsed) {
        const devrun_change_t *c = &dr->changes[(*next)++];
        dr->devs[c->dev].percent = c->percent;
        snprintf(rel, sizeof(rel), "%s/dev%d", dr->own, c->dev);
        if (ivm_cgroup_set_limit(&dr->root, rel, devrun_limit(&dr->devs[c->dev]), err,
                                 sizeof(err)) != IVM_SUCCESS) {
            fprintf(stderr, "ivm-devrun: --change %g:%d:%d: %s\n", c->at, c->dev, c->percent,
                    err);
        } else {
            fprintf(stderr, "ivm-devrun: %.3f s: CPU device %d now has %d%% of its cores\n",
                    elapsed, c->dev, c->percent);
        }
    }
    return *next < dr->nchanges ? dr->changes[*next].at - elapsed : -1;
}

/* Start CMD with the signals unblocked; 0 or an exit code. */
static int devrun_start(devrun_t *dr, const sigset_t *old_mask)
{
    dr->child = fork();
    if (dr->child < 0) {
        fprintf(stderr, "ivm-devrun: fork: %s\n", strerror(errno));
        return DEVRUN_EXIT_FAIL;
    }
    if (dr->child == 0) {
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        execvp(dr->cmd[0], dr->cmd);
        fprintf(stderr, "ivm-devrun: cannot run %s: %s\n", dr->cmd[0], strerror(errno));
        _exit(DEVRUN_EXIT_NOEXEC);
    }
    return 0;
}

/* Run CMD to its end, applying the changes and passing signals on; its
 * exit code. */
static int devrun_wait(devrun_t *dr, int sigfd)
{
    struct signalfd_siginfo si;
    struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
    double start = devrun_now(), left;
    int next = 0, status = 0;

    for (;;) {
        left = devrun_changes_apply(dr, &next, devrun_now() - start);
        if (poll(&pfd, 1, left < 0 ? -1 : (int)(left * 1000.0) + 1) < 0 && errno != EINTR) {
            fprintf(stderr, "ivm-devrun: poll: %s\n", strerror(errno));
        }
        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo != SIGCHLD) {
                dr->signo = (int)si.ssi_signo;
                kill(dr->child, (int)si.ssi_signo);
            }
        }
        if (waitpid(dr->child, &status, WNOHANG) == dr->child) {
            break;
        }
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

static int devrun_outer(int argc, char **argv)
{
    static devrun_t dr;
    sigset_t mask, old_mask;
    int sigfd, rc;

    if (devrun_parse(&dr, argc, argv) != 0) {
        return DEVRUN_EXIT_USAGE;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &old_mask) != 0 ||
        (sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        fprintf(stderr, "ivm-devrun: signals: %s\n", strerror(errno));
        return DEVRUN_EXIT_FAIL;
    }
    rc = devrun_groups_create(&dr) != 0 ? DEVRUN_EXIT_FAIL : devrun_start(&dr, &old_mask);
    if (rc == 0) {
        rc = devrun_wait(&dr, sigfd);
    }
    devrun_groups_remove(&dr);
    close(sigfd);
    return rc;
}

/* The rank from the launcher's environment, -1 if none says. */
static long devrun_rank_of_env(const char **name_p)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "SLURM_PROCID", NULL};
    const char *v;
    char *end;
    long rank;
    int i;

    for (i = 0; names[i] != NULL; ++i) {
        if ((v = getenv(names[i])) != NULL && *v != '\0') {
            rank = strtol(v, &end, 10);
            *name_p = names[i];
            return (*end == '\0' && rank >= 0) ? rank : -2;
        }
    }
    return -1;
}

/* Rank mode: join the device's group, pin, exec PROG. */
static int devrun_rank(int argc, char **argv)
{
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    const char *env = getenv(DEVRUN_ENV), *name = NULL, *bar;
    char spec[512], procs[IVM_CGROUP_PATH_MAX + 64], err[256], omp[32];
    long rank = devrun_rank_of_env(&name);
    int ndevs, k, e;

    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        return devrun_usage(stderr, DEVRUN_EXIT_USAGE);
    }
    if (rank < 0) {
        fprintf(stderr, rank == -1 ? "ivm-devrun --rank: no rank in the environment "
                "(OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID): run it under "
                "mpirun or srun\n" : "ivm-devrun --rank: %s is not a rank\n", name);
        return DEVRUN_EXIT_FAIL;
    }
    if (env == NULL || (bar = strchr(env, '|')) == NULL || (size_t)(bar - env) >= sizeof(spec)) {
        fprintf(stderr, "ivm-devrun --rank: %s is %s: run the launcher under ivm-devrun "
                "--cpu-devices SPEC -- ...\n", DEVRUN_ENV, env == NULL ? "not set" : "garbled");
        return DEVRUN_EXIT_FAIL;
    }
    snprintf(spec, sizeof(spec), "%.*s", (int)(bar - env), env);
    if (ivm_topo_devspec_parse(spec, 0, devs, IVM_DEVSPEC_MAX_DEVICES, &ndevs, err,
                               sizeof(err)) !=
        IVM_SUCCESS) {
        fprintf(stderr, "ivm-devrun --rank: %s: %s\n", DEVRUN_ENV, err);
        return DEVRUN_EXIT_FAIL;
    }
    k = (int)(rank % ndevs);
    snprintf(procs, sizeof(procs), "%s/dev%d/cgroup.procs", bar + 1, k);
    if ((e = ivm_cgroup_join(procs)) != 0) {
        fprintf(stderr, "ivm-devrun --rank: rank %ld cannot join %s: %s\n", rank, procs,
                strerror(e));
        return DEVRUN_EXIT_FAIL;
    }
    if (sched_setaffinity(0, sizeof(devs[k].cores), &devs[k].cores) != 0) {
        fprintf(stderr, "ivm-devrun --rank: rank %ld cannot be pinned to device %d: %s\n",
                rank, k, strerror(errno));
        return DEVRUN_EXIT_FAIL;
    }
    snprintf(omp, sizeof(omp), "%d", devs[k].ncores);
    setenv("OMP_NUM_THREADS", omp, 1);
    execvp(argv[3], &argv[3]);
    fprintf(stderr, "ivm-devrun --rank: cannot run %s: %s\n", argv[3], strerror(errno));
    return DEVRUN_EXIT_NOEXEC;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        return devrun_usage(stdout, 0);
    }
    if (argc > 1 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
        ivm_version_print(stdout, "ivm-devrun");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--rank")) {
        return devrun_rank(argc, argv);
    }
    return devrun_outer(argc, argv);
}
