#include "bootstrap.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devspec.h"
#include "topo.h"
#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "version.h"

#define IVMRUN_EXIT_FAILURE  1   /* ivmrun itself failed */
#define IVMRUN_EXIT_USAGE    2   /* bad command line or settings */
#define IVMRUN_EXIT_TIMEOUT  124 /* --timeout expired */
#define IVMRUN_EXIT_NOEXEC   127 /* PROGRAM could not be run */
#define IVMRUN_KILL_GRACE    2.0 /* seconds from a forwarded SIGTERM to SIGKILL */
#define IVMRUN_LINGER        2.0 /* seconds of silence after the root's exit */
#define IVMRUN_JOB_POLL      0.1 /* seconds between "is the job gone" checks */

#define IVMRUN_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmrun_config, __VA_ARGS__)
const ivm_config_field_t ivmrun_config_fields[] = {
    IVMRUN_CONFIG_TABLE(IVMRUN_CONFIG_FIELD) {0}};

/* All of the launcher's state. */
typedef struct ivmrun {
    ivmrun_config_t cfg;
    ivmrun_opts_t   opts;       /* cfg with its option table */
    ivmrun_cluster_t cluster;   /* cluster.nodes[0] serves the root PE */
    char           *node_specs_buf; /* --node-cpu-devices, split at ';' */
    char           *node_specs[IVM_CLUSTER_MAX_NODES]; /* one spec per node, or none */
    sigset_t        child_mask; /* the signal mask ivmrun was started with */
    int             sigfd;      /* SIGCHLD, SIGINT, SIGTERM, SIGHUP */
    pid_t           root_pid;
    int             root_pgrp;  /* the root leads its own process group */
    int             root_done;  /* the root PE has been reaped */
    int             root_status;
    double          quiet_since; /* last output, or the root's exit if later */
    int             signo;      /* terminating signal received, 0 = none */
    int             timed_out;
    int             cluster_lost; /* a real cluster's daemons went during the run */
    double          kill_at;    /* SIGKILL the root then (0 = not scheduled) */
    ivmrun_guard_t  guard;      /* kills the root's group if ivmrun dies (guard.c) */
    ivmrun_stream_t out;        /* --tag-output: the root's stdout pipe */
    ivmrun_stream_t err;        /* --tag-output: the root's stderr pipe */
    char            env_socket[sizeof("IVM_SOCKET=") + sizeof(((ivmrun_daemon_t *)0)->path)];
    char            env_cpus[sizeof("IVM_CPU_DEVICES=") +
                             sizeof(((ivm_msg_enter_req_t *)0)->cpu_devices)];
    char            env_log[64];
    char            env_pool[32];   /* IVM_PE_POOL=N for the root PE */
    char            env_bind[32];   /* IVM_BIND_TO=... for the root PE */
    char           *xenv[IVMRUN_MAX_X]; /* -x VAR=value: set for every PE */
    int             nxenv;
} ivmrun_t;

static void ivmrun_usage(FILE *out)
{
    fprintf(out,
            "usage: ivmrun [options] PROGRAM [ARGS...]\n"
            "Runs PROGRAM (looked up in PATH) as the root PE of an IVM job, using the\n"
            "ivmd that serves this user on this node or starting one for the job.\n"
            "With --nodes N > 1 it starts N fresh daemons (node0..node<N-1>) in a\n"
            "private directory, joins them into one cluster over loopback TCP, runs\n"
            "PROGRAM on node0 and stops them all when it is done.\n"
            "With --hosts or --hostfile it starts one daemon per host through Open\n"
            "MPI's mpirun and ivm-boot (node<k> on the k-th host), with --slurm through\n"
            "srun and ivm-boot-srun (no MPI), and runs PROGRAM on node0: run ivmrun on\n"
            "the first host.\n"
            "\n"
            "Options (they stop at PROGRAM; each also reads the variable shown):\n"
            "  %-28s same as --log-level info\n"
            "  %-28s set VAR (to value, or to ivmrun's own) for every PE; repeatable\n"
            "  %-28s print this help\n"
            "  %-28s print the version, revision and features built in\n",
            "-v", "-x VAR[=value]", "-h, --help", "-V, --version");
    ivm_config_print_help(ivmrun_config_fields, out);
    fprintf(out,
            "\n"
            "Exit status: PROGRAM's; 128+N if it was killed by signal N or ivmrun got\n"
            "signal N; 124 when --timeout expired; 127 if PROGRAM cannot be run;\n"
            "1 if ivmrun failed (also when mpirun or srun, which keeps the daemons,\n"
            "ended during the run: the root PE is killed); 2 for a bad command line.\n"
            "If ivmrun itself is killed (SIGKILL included), the root PE and its\n"
            "process group are killed, the job ends on every node and the daemons\n"
            "ivmrun started stop.\n");
}

/* Make sure fds 0-2 are open, so that no pipe or socket lands on them. */
static void ivmrun_fds_ensure(void)
{
    int fd;

    for (fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
            open("/dev/null", O_RDWR) < 0) {
            return;
        }
    }
}

/* -x VAR=value sets VAR for the root PE, and so for every PE of the job (the
 * root's environment travels with every ivmCreatePEs, to every node); -x VAR
 * passes ivmrun's own VAR, which the root inherits anyway, and warns when
 * there is none. IVM's own identity variables cannot be set. */
static int ivmrun_xenv_add(ivmrun_t *run, char *spec)
{
    static const char *const reserved[] = {"IVM_JOB_ID", "IVM_PE_ID", "IVM_PE_TOKEN",
                                           "IVM_SOCKET", "IVM_TAG_OUTPUT", NULL};
    size_t len = strcspn(spec, "=");
    size_t i;

    if (len == 0 || !(isalpha((unsigned char)spec[0]) || spec[0] == '_')) {
        ivm_error("-x '%s': give VAR or VAR=value, VAR a variable name", spec);
        return -1;
    }
    for (i = 1; i < len; ++i) {
        if (!isalnum((unsigned char)spec[i]) && spec[i] != '_') {
            ivm_error("-x '%s': '%.*s' is not a variable name", spec, (int)len, spec);
            return -1;
        }
    }
    for (i = 0; reserved[i] != NULL; ++i) {
        if (strlen(reserved[i]) == len && strncmp(spec, reserved[i], len) == 0) {
            ivm_error("-x %s: IVM sets %s itself for each PE", spec, reserved[i]);
            return -1;
        }
    }
    if (spec[len] == '\0') {
        if (getenv(spec) == NULL) {
            ivm_warn("-x %s: ivmrun's environment has no %s; the PEs get none", spec, spec);
        }
        return 0;
    }
    if (run->nxenv == IVMRUN_MAX_X) {
        ivm_error("-x %s: at most %d -x VAR=value", spec, IVMRUN_MAX_X);
        return -1;
    }
    run->xenv[run->nxenv++] = spec;
    return 0;
}

/* Parse the options before PROGRAM; "-v" and "-x VAR[=value]" may appear
 * among them. */
static int ivmrun_args_parse(ivmrun_t *run, int argc, char **argv, int *first_p)
{
    int pos = 1, first, help, any_help = 0;
    char err[256];

    if (ivm_config_defaults(ivmrun_config_fields, &run->cfg) != IVM_SUCCESS ||
        ivm_config_load_env(ivmrun_config_fields, &run->cfg, err, sizeof(err)) !=
            IVM_SUCCESS) {
        ivm_error("bad IVM_* setting in the environment: %s", err);
        return IVMRUN_EXIT_USAGE;
    }
    for (;;) {
        if (ivm_config_parse_args(ivmrun_config_fields, &run->cfg, argc - pos + 1,
                                  argv + pos - 1, &first, &help, err,
                                  sizeof(err)) != IVM_SUCCESS) {
            ivm_error("%s", err);
            return IVMRUN_EXIT_USAGE;
        }
        if (help != 0 && (any_help == 0 || help == IVM_CONFIG_ASK_HELP)) {
            any_help = help;
        }
        pos += first - 1;
        if (pos >= argc || strcmp(argv[pos - 1], "--") == 0 || argv[pos][0] != '-') {
            break;
        }
        if (strcmp(argv[pos], "-x") == 0) {
            if (pos + 1 >= argc || ivmrun_xenv_add(run, argv[pos + 1]) != 0) {
                if (pos + 1 >= argc) {
                    ivm_error("-x needs VAR or VAR=value");
                }
                return IVMRUN_EXIT_USAGE;
            }
            pos += 2;
            continue;
        }
        if (strcmp(argv[pos], "-v") != 0) {
            ivm_error("unknown option %s (see --help)", argv[pos]);
            return IVMRUN_EXIT_USAGE;
        }
        ivm_config_set(ivmrun_config_fields, &run->cfg, "log-level", "info", err,
                       sizeof(err));
        ++pos;
    }
    if (any_help == IVM_CONFIG_ASK_MAN) {
        ivm_config_print_man(ivmrun_config_fields, stdout);
        return -1;
    }
    if (any_help == IVM_CONFIG_ASK_VERSION) {
        ivm_version_print(stdout, "ivmrun");
        return -1;
    }
    if (any_help) {
        ivmrun_usage(stdout);
        return -1;
    }
    if (pos >= argc) {
        ivm_error("no PROGRAM given");
        ivmrun_usage(stderr);
        return IVMRUN_EXIT_USAGE;
    }
    *first_p = pos;
    return 0;
}

/* Split --node-cpu-devices at ';' into one spec per node and check each
 * (the core numbers only against this machine's when the nodes are here). */
static int ivmrun_node_specs_parse(ivmrun_t *run)
{
    ivmrun_config_t *cfg = &run->cfg;
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    char err[256], *p, *semi;
    int count = 0, ndevs, k, hosts = run->cluster.boot.nhosts;
    int nodes = hosts > 0 ? hosts : (int)cfg->nodes;
    long ncpus = hosts > 0 ? 0 : sysconf(_SC_NPROCESSORS_CONF);

    if (nodes < 2) {
        ivm_error("--node-cpu-devices is for several nodes (--nodes N > 1, --hosts, "
                  "--hostfile, --slurm); for one node use --cpu-devices");
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->cpu_devices[0] != '\0') {
        ivm_error("--node-cpu-devices and --cpu-devices (or IVM_CPU_DEVICES) cannot be "
                  "combined: give one spec per node, or one spec for all nodes");
        return IVMRUN_EXIT_USAGE;
    }
    run->node_specs_buf = strdup(cfg->node_cpu_devices);
    if (run->node_specs_buf == NULL) {
        ivm_error("out of memory");
        return IVMRUN_EXIT_FAILURE;
    }
    for (p = run->node_specs_buf;; p = semi + 1) {
        semi = strchr(p, ';');
        if (semi != NULL) {
            *semi = '\0';
        }
        if (count < IVM_CLUSTER_MAX_NODES) {
            run->node_specs[count] = p;
        }
        ++count;
        if (semi == NULL) {
            break;
        }
    }
    if (count != nodes) {
        ivm_error("--node-cpu-devices '%s' has %d spec%s, but there %s %d node%s (give "
                  "one spec per node, separated by ';')", cfg->node_cpu_devices, count,
                  count == 1 ? "" : "s", nodes == 1 ? "is" : "are", nodes,
                  nodes == 1 ? "" : "s");
        return IVMRUN_EXIT_USAGE;
    }
    for (k = 0; k < count; ++k) {
        if (ivm_topo_devspec_parse(run->node_specs[k], ncpus > 0 ? (int)ncpus : 0, devs,
                              IVM_DEVSPEC_MAX_DEVICES, &ndevs, err,
                              sizeof(err)) != IVM_SUCCESS) {
            ivm_error("bad --node-cpu-devices spec '%s' for node%d: %s",
                      run->node_specs[k], k, err);
            return IVMRUN_EXIT_USAGE;
        }
    }
    return 0;
}

/* --node-slots into the cluster's slots, one entry per node. */
static int ivmrun_node_slots_parse(ivmrun_t *run)
{
    ivmrun_cluster_t *c = &run->cluster;
    int hosts = c->boot.nhosts, nodes = hosts > 0 ? hosts : (int)run->cfg.nodes, k;
    char err[160];

    if (nodes < 2) {
        ivm_error("--node-slots is for several nodes (--nodes N > 1, --hosts, --hostfile, "
                  "--slurm)");
        return IVMRUN_EXIT_USAGE;
    }
    if (c->has_slots && run->cfg.hostfile[0] != '\0') {
        ivm_error("--node-slots and the hostfile's slots= cannot be combined: give the "
                  "slots in one place");
        return IVMRUN_EXIT_USAGE;
    }
    c->has_slots = 0; /* --slurm: --node-slots overrides SLURM_TASKS_PER_NODE */
    if (ivmrun_slots_parse(run->cfg.node_slots, nodes, c->slots, err, sizeof(err)) != 0) {
        ivm_error("bad --node-slots '%s': %s", run->cfg.node_slots, err);
        return IVMRUN_EXIT_USAGE;
    }
    for (k = 0; k < nodes; ++k) {
        c->has_slots |= (c->slots[k].slots != 0);
    }
    return 0;
}

/* The numbers: --nodes, --timeout, --daemon-wait, --pe-pool. */
static int ivmrun_config_numbers(ivmrun_t *run)
{
    const ivmrun_config_t *cfg = &run->cfg;

    if (cfg->nodes < 1) {
        ivm_error("--nodes must be at least 1 (got %ld)", cfg->nodes);
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->nodes > IVMRUN_MAX_NODES) {
        ivm_error("--nodes %ld: at most %d nodes can be simulated", cfg->nodes,
                  IVMRUN_MAX_NODES);
        return IVMRUN_EXIT_USAGE;
    }
    if (!(cfg->timeout >= 0) || isinf(cfg->timeout)) {
        ivm_error("--timeout must be a number of seconds >= 0 (got %g)", cfg->timeout);
        return IVMRUN_EXIT_USAGE;
    }
    if (!(cfg->daemon_wait > 0) || isinf(cfg->daemon_wait)) {
        ivm_error("--daemon-wait must be a number of seconds > 0 (got %g)",
                  cfg->daemon_wait);
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->pe_pool > IVM_PE_POOL_MAX || cfg->pe_pool < -1) {
        ivm_error("--pe-pool must be 0..%d (got %d)", IVM_PE_POOL_MAX, (int)cfg->pe_pool);
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->pe_pool >= 0) {
        snprintf(run->env_pool, sizeof(run->env_pool), "IVM_PE_POOL=%d", (int)cfg->pe_pool);
    }
    return 0;
}

/* --log-level and --bind-to, also for the root PE. */
static int ivmrun_config_words(ivmrun_t *run)
{
    const ivmrun_config_t *cfg = &run->cfg;
    int level;

    if (cfg->log_level[0] != '\0') {
        level = ivm_log_level_parse(cfg->log_level);
        if (level < 0) {
            ivm_error("--log-level '%s' is not one of error, warn, info, debug, trace",
                      cfg->log_level);
            return IVMRUN_EXIT_USAGE;
        }
        ivm_log_current_level = level;
        snprintf(run->env_log, sizeof(run->env_log), "IVM_LOG_LEVEL=%s",
                 cfg->log_level);
    }
    if (cfg->bind_to[0] != '\0') {
        if (strcmp(cfg->bind_to, "device") != 0 && strcmp(cfg->bind_to, "core") != 0 &&
            strcmp(cfg->bind_to, "numa") != 0 && strcmp(cfg->bind_to, "none") != 0) {
            ivm_error("--bind-to '%s' is not device, core, numa or none", cfg->bind_to);
            return IVMRUN_EXIT_USAGE;
        }
        snprintf(run->env_bind, sizeof(run->env_bind), "IVM_BIND_TO=%s", cfg->bind_to);
    }
    return 0;
}

/* --cpu-devices, also for the root PE. */
static int ivmrun_config_cpus(ivmrun_t *run)
{
    const ivmrun_config_t *cfg = &run->cfg;
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    long ncpus = sysconf(_SC_NPROCESSORS_CONF);
    char err[256];
    int ndevs;

    if (cfg->cpu_devices[0] == '\0') {
        return 0;
    }
    if (ivm_topo_devspec_parse(cfg->cpu_devices, ncpus > 0 ? (int)ncpus : 0, devs,
                               IVM_DEVSPEC_MAX_DEVICES, &ndevs, err,
                               sizeof(err)) != IVM_SUCCESS) {
        ivm_error("bad --cpu-devices: %s", err);
        return IVMRUN_EXIT_USAGE;
    }
    if (strlen(cfg->cpu_devices) >= sizeof(((ivm_msg_enter_req_t *)0)->cpu_devices)) {
        ivm_error("--cpu-devices spec is longer than %zu characters",
                  sizeof(((ivm_msg_enter_req_t *)0)->cpu_devices) - 1);
        return IVMRUN_EXIT_USAGE;
    }
    snprintf(run->env_cpus, sizeof(run->env_cpus), "IVM_CPU_DEVICES=%s", cfg->cpu_devices);
    return 0;
}

/* Check the settings, prepare the root PE's environment entries and plan
 * the bring-up of the daemons. */
static int ivmrun_config_check(ivmrun_t *run)
{
    int code = ivmrun_config_numbers(run);

    if (code == 0) {
        code = ivmrun_config_words(run);
    }
    if (code == 0) {
        code = ivmrun_config_cpus(run);
    }
    if (code == 0) {
        code = ivmrun_cluster_plan(&run->cluster);
    }
    if (code == 0 && run->cfg.node_cpu_devices[0] != '\0') {
        code = ivmrun_node_specs_parse(run);
    }
    if (code == 0 && run->cfg.node_slots[0] != '\0') {
        code = ivmrun_node_slots_parse(run);
    }
    return code;
}

/* Block the signals ivmrun handles and read them through a signalfd. */
static int ivmrun_signals_init(ivmrun_t *run)
{
    sigset_t mask;

    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &run->child_mask) != 0) {
        ivm_error("cannot block signals: %m");
        return IVMRUN_EXIT_FAILURE;
    }
    run->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (run->sigfd < 0) {
        ivm_error("cannot create a signalfd: %m");
        return IVMRUN_EXIT_FAILURE;
    }
    /* A closed output must not kill ivmrun before it cleans up. */
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int ivmrun_root_alive(const ivmrun_t *run)
{
    return run->root_pid > 0 && !run->root_done;
}

/* Signal the root PE, with the processes of its group (helpers it started
 * that are not PEs: the daemon kills the PEs) when it has one. */
static void ivmrun_root_kill(ivmrun_t *run, int signo)
{
    if (run->root_pid <= 0) {
        return;
    }
    if (run->root_pgrp) {
        kill(-run->root_pid, signo);
    } else if (!run->root_done) {
        kill(run->root_pid, signo);
    }
}

static void ivmrun_root_reap(ivmrun_t *run)
{
    char why[64];
    pid_t r;

    if (!ivmrun_root_alive(run)) {
        return;
    }
    do {
        r = waitpid(run->root_pid, &run->root_status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == run->root_pid) {
        run->root_done   = 1;
        run->quiet_since = ivmrun_time_now();
        ivmrun_proc_status_text(run->root_status, why, sizeof(why));
        ivm_info("root PE (pid %d) ended with %s", (int)run->root_pid, why);
    }
}

/* The daemons of a real cluster are gone (mpirun or srun ended, or node0's
 * daemon stopped): the job cannot go on, so the root and its group are
 * killed at once. */
static void ivmrun_cluster_lost(ivmrun_t *run, const char *why)
{
    if (!ivmrun_root_alive(run) || run->cluster_lost) {
        return;
    }
    ivm_error("the cluster's daemons are gone (%s): killing the root PE (pid %d)", why,
              (int)run->root_pid);
    run->cluster_lost = 1;
    ivmrun_root_kill(run, SIGKILL);
    run->kill_at = 0;
}

/* SIGCHLD reaps; the first SIGINT/SIGTERM/SIGHUP sends the root SIGTERM and
 * schedules SIGKILL, a second one kills it at once. When mpirun (srun), which
 * keeps a real cluster's daemons, ends while the root runs, the daemons are
 * gone with it: the root and its group are killed at once. */
static void ivmrun_signals_handle(ivmrun_t *run)
{
    struct signalfd_siginfo si;
    int signo;

    while (read(run->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        signo = (int)si.ssi_signo;
        if (signo == SIGCHLD) {
            ivmrun_root_reap(run);
            if (ivmrun_cluster_reap(&run->cluster)) {
                char why[32];
                snprintf(why, sizeof(why), "%s exited", run->cluster.boot.launcher);
                ivmrun_cluster_lost(run, why);
            }
            continue;
        }
        if (run->signo == 0 && !run->timed_out) {
            run->signo = signo;
            ivm_info("got signal %d (%s); terminating the job", signo,
                     strsignal(signo));
            if (ivmrun_root_alive(run)) {
                ivmrun_root_kill(run, SIGTERM);
                run->kill_at = ivmrun_time_now() + IVMRUN_KILL_GRACE;
            }
        } else if (ivmrun_root_alive(run)) {
            ivmrun_root_kill(run, SIGKILL);
            run->kill_at = 0;
        }
    }
}

/* The root PE's environment changes (as ivmrun_spawn_t.env) into env. */
static void ivmrun_root_env(const ivmrun_t *run, char **env)
{
    int nenv = 0, i;

    env[nenv++] = (char *)run->env_socket;
    if (run->env_cpus[0] != '\0') {
        env[nenv++] = (char *)run->env_cpus;
    } else if (run->node_specs[0] != NULL) {
        env[nenv++] = "IVM_CPU_DEVICES"; /* each node's own table applies */
    }
    env[nenv++] = run->cfg.tag_output ? "IVM_TAG_OUTPUT=1" : "IVM_TAG_OUTPUT";
    if (run->env_log[0] != '\0') {
        env[nenv++] = (char *)run->env_log;
    }
    if (run->env_pool[0] != '\0') {
        env[nenv++] = (char *)run->env_pool;
    }
    if (run->env_bind[0] != '\0') {
        env[nenv++] = (char *)run->env_bind;
    }
    for (i = 0; i < run->nxenv; ++i) {
        env[nenv++] = run->xenv[i];
    }
    /* PROGRAM is always a root PE, even when ivmrun runs inside a PE. */
    env[nenv++] = "IVM_JOB_ID";
    env[nenv++] = "IVM_PE_ID";
    env[nenv++] = "IVM_PE_TOKEN";
    env[nenv]   = NULL;
}

/* --tag-output: the root's stdout and stderr on non-blocking pipes
 * (out[0], err[0]: read ends). 0 or an exit code (logged). */
static int ivmrun_root_pipes(int *out_pipe, int *err_pipe)
{
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
        fcntl(out_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(err_pipe[0], F_SETFL, O_NONBLOCK) != 0) {
        ivm_error("cannot create the output pipes for --tag-output: %m");
        return IVMRUN_EXIT_FAILURE;
    }
    return 0;
}

/* --tag-output: forward the root's pipes with its node's tag. */
static void ivmrun_root_streams(ivmrun_t *run, int *out_pipe, int *err_pipe)
{
    ivm_msg_info_rep_t info;
    const char *node = "node0";

    /* The root runs on the node of the daemon it talks to. */
    if (ivm_client_info(run->cluster.nodes[0].path, 2000, &info, NULL) == IVM_SUCCESS) {
        info.node[sizeof(info.node) - 1] = '\0';
        node = info.node;
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    ivmrun_stream_init(&run->out, out_pipe[0], STDOUT_FILENO, node);
    ivmrun_stream_init(&run->err, err_pipe[0], STDERR_FILENO, node);
}

/* Start PROGRAM as the root PE. Returns 0 or an exit code. */
static int ivmrun_root_start(ivmrun_t *run, char **argv)
{
    char *env[12 + IVMRUN_MAX_X];
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, err = 0;
    ivmrun_spawn_t spec;
    int code = 0;

    ivmrun_root_env(run, env);
    ivmrun_spawn_init(&spec, argv[0], argv);
    spec.sigmask = &run->child_mask;
    spec.env     = env;
    /* If ivmrun dies, even by SIGKILL, the root dies with it, and its daemon
     * ends the job on every node (the guard kills the rest of its group). */
    spec.pdeathsig = SIGKILL;
    /* Its own process group, so that a timeout or a signal reaches what it
     * started too; but not when ivmrun runs in the foreground of a terminal,
     * where the root must stay in the foreground group to read it (and gets
     * the terminal's signals directly). */
    spec.new_pgroup = !(isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp());
    if (run->cfg.tag_output) {
        code = ivmrun_root_pipes(out_pipe, err_pipe);
        if (code != 0) {
            goto out_close_pipes;
        }
        spec.fd_out = out_pipe[1];
        spec.fd_err = err_pipe[1];
    }
    if (ivmrun_proc_spawn(&spec, &run->root_pid, &err) != IVM_SUCCESS) {
        if (err == ENOENT && strchr(argv[0], '/') == NULL) {
            ivm_error("cannot run '%s': command not found in PATH", argv[0]);
        } else {
            ivm_error("cannot run '%s': %s", argv[0], strerror(err));
        }
        run->root_pid = 0;
        code = IVMRUN_EXIT_NOEXEC;
        goto out_close_pipes;
    }
    run->root_pgrp = spec.new_pgroup;
    ivm_info("root PE '%s' started (pid %d)", argv[0], (int)run->root_pid);
    if (run->cfg.tag_output) {
        ivmrun_root_streams(run, out_pipe, err_pipe);
    }
    return 0;

out_close_pipes:
    for (int k = 0; k < 2; ++k) {
        if (out_pipe[k] >= 0) {
            close(out_pipe[k]);
        }
        if (err_pipe[k] >= 0) {
            close(err_pipe[k]);
        }
    }
    return code;
}

static int ivmrun_streams_open(const ivmrun_t *run)
{
    return run->out.fd >= 0 || run->err.fd >= 0;
}

/* poll() timeout for a wait of the given seconds (HUGE_VAL = none). */
static int ivmrun_poll_ms(double wait)
{
    if (isinf(wait)) {
        return -1;
    }
    if (wait <= 0) {
        return 0;
    }
    return wait > 60.0 ? 60000 : (int)(wait * 1000) + 1;
}

/* How long the loop may sleep, in *wait_p (HUGE_VAL: until something
 * happens). Returns 1 when the loop is done: the root is gone and its pipes
 * stayed silent long enough (or a signal came), and they are drained. */
static int ivmrun_loop_wait(ivmrun_t *run, double timeout_at, double *wait_p)
{
    double now = ivmrun_time_now(), wait = HUGE_VAL;

    if (!run->root_done) {
        if (timeout_at > 0 && !run->timed_out) {
            wait = fmin(wait, timeout_at - now);
        }
        if (run->kill_at > 0) {
            wait = fmin(wait, run->kill_at - now);
        }
        *wait_p = wait;
        return 0;
    }
    /* The root is gone but a pipe is still open: some process of the job
     * (or one that leaked the pipe) still holds it. */
    if (run->signo != 0 || now - run->quiet_since >= IVMRUN_LINGER) {
        ivm_info("no more output after the root PE's exit; closing its pipes");
        ivmrun_stream_drain(&run->out);
        ivmrun_stream_drain(&run->err);
        return 1;
    }
    *wait_p = fmin(IVMRUN_JOB_POLL, run->quiet_since + IVMRUN_LINGER - now);
    return 0;
}

/* The fds to watch: the signals, the root's open pipes, the watch on a real
 * cluster's node0 (polled[k]: the stream of pfds[k], NULL for the others).
 * Returns how many; *watch_p: the watch's index, -1 if none. */
static int ivmrun_loop_fds(ivmrun_t *run, struct pollfd *pfds, ivmrun_stream_t **polled,
                          int *watch_p)
{
    ivmrun_stream_t *streams[2] = {&run->out, &run->err};
    int n = 0, k;

    pfds[n].fd     = run->sigfd;
    pfds[n].events = POLLIN;
    polled[n++]    = NULL;
    for (k = 0; k < 2; ++k) {
        if (streams[k]->fd >= 0) {
            pfds[n].fd     = streams[k]->fd;
            pfds[n].events = POLLIN;
            polled[n++]    = streams[k];
        }
    }
    *watch_p = -1;
    if (run->cluster.watch_fd >= 0) {
        *watch_p       = n;
        pfds[n].fd     = run->cluster.watch_fd;
        pfds[n].events = POLLIN;
        polled[n++]    = NULL;
    }
    return n;
}

/* Act on what poll reported. Returns 1 if output was forwarded. */
static int ivmrun_loop_events(ivmrun_t *run, struct pollfd *pfds, ivmrun_stream_t **polled,
                              int n, int watch)
{
    int k, got_data = 0;

    if (pfds[0].revents & POLLIN) {
        ivmrun_signals_handle(run);
    }
    for (k = 1; k < n; ++k) {
        if (k == watch) {
            if (pfds[k].revents != 0 && ivmrun_cluster_watch_ended(&run->cluster)) {
                ivmrun_cluster_lost(run, "node0's daemon stopped");
            }
        } else if (pfds[k].revents != 0 && ivmrun_stream_pump(polled[k]) >= 0) {
            got_data = 1;
        }
    }
    return got_data;
}

/* While the root runs: the timeout, and SIGKILL after a SIGTERM's grace. */
static void ivmrun_loop_timers(ivmrun_t *run, double timeout_at, double now)
{
    if (timeout_at > 0 && !run->timed_out && run->signo == 0 && now >= timeout_at) {
        ivm_error("timeout after %g s, killing the job", run->cfg.timeout);
        run->timed_out = 1;
        ivmrun_root_kill(run, SIGKILL);
        run->kill_at = 0;
    }
    if (run->kill_at > 0 && now >= run->kill_at) {
        ivm_info("root PE (pid %d) still alive %g s after SIGTERM; killing it",
                 (int)run->root_pid, IVMRUN_KILL_GRACE);
        ivmrun_root_kill(run, SIGKILL);
        run->kill_at = 0;
    }
}

/* Run until the root PE is gone and its output is forwarded. */
static void ivmrun_loop(ivmrun_t *run)
{
    double timeout_at = run->cfg.timeout > 0 ? ivmrun_time_now() + run->cfg.timeout : 0;
    ivmrun_stream_t *polled[4];
    struct pollfd pfds[4];
    double now, wait;
    int n, r, got_data, watch;

    while (!run->root_done || ivmrun_streams_open(run)) {
        if (ivmrun_loop_wait(run, timeout_at, &wait)) {
            return;
        }
        n = ivmrun_loop_fds(run, pfds, polled, &watch);
        r = poll(pfds, (nfds_t)n, ivmrun_poll_ms(wait));
        if (r < 0 && errno != EINTR) {
            ivm_error("poll failed: %m");
            if (ivmrun_root_alive(run)) {
                ivmrun_root_kill(run, SIGKILL);
            }
            run->signo = run->signo != 0 ? run->signo : SIGTERM;
            return;
        }
        got_data = ivmrun_loop_events(run, pfds, polled, n, watch);
        now      = ivmrun_time_now();
        if (!run->root_done) {
            ivmrun_loop_timers(run, timeout_at, now);
        } else if (got_data) {
            run->quiet_since = now;
        } else if (r == 0 && ivmrun_daemon_jobs(&run->cluster.nodes[0]) == 0) {
            ivm_debug("the daemon holds no job any more; closing the output pipes");
            ivmrun_stream_drain(&run->out);
            ivmrun_stream_drain(&run->err);
            return;
        }
    }
}

static int ivmrun_exit_code(const ivmrun_t *run)
{
    if (run->signo != 0) {
        return 128 + run->signo;
    }
    if (run->timed_out) {
        return IVMRUN_EXIT_TIMEOUT;
    }
    if (run->cluster_lost) {
        return IVMRUN_EXIT_FAILURE;
    }
    if (WIFEXITED(run->root_status)) {
        return WEXITSTATUS(run->root_status);
    }
    if (WIFSIGNALED(run->root_status)) {
        return 128 + WTERMSIG(run->root_status);
    }
    return IVMRUN_EXIT_FAILURE;
}

int main(int argc, char **argv)
{
    ivmrun_t *run;
    int first = 0, code;

    ivm_log_set_prefix("ivmrun");
    ivm_log_init_from_env();
    ivmrun_fds_ensure();
    run = calloc(1, sizeof(*run));
    if (run == NULL) {
        ivm_error("out of memory");
        return IVMRUN_EXIT_FAILURE;
    }
    run->sigfd    = -1;
    run->out.fd   = -1;
    run->err.fd   = -1;
    run->guard.fd = -1;
    run->cluster.watch_fd = -1;
    run->opts.fields      = ivmrun_config_fields;
    run->opts.values      = &run->cfg;
    run->cluster.cfg      = &run->cfg;
    run->cluster.opts     = &run->opts;

    code = ivmrun_args_parse(run, argc, argv, &first);
    if (code != 0) {
        code = (code < 0) ? 0 : code;
        goto out_release;
    }
    code = ivmrun_config_check(run);
    if (code != 0) {
        goto out_release;
    }
    code = ivmrun_signals_init(run);
    if (code != 0) {
        goto out_close_sigfd;
    }
    run->cluster.specs      = run->node_specs[0] != NULL ? run->node_specs : NULL;
    run->cluster.sigfd      = run->sigfd;
    run->cluster.child_mask = &run->child_mask;
    if (ivmrun_cluster_open(&run->cluster) != IVM_SUCCESS) {
        code = (run->cluster.signo != 0) ? 128 + run->cluster.signo : IVMRUN_EXIT_FAILURE;
        goto out_close_sigfd;
    }
    snprintf(run->env_socket, sizeof(run->env_socket), "IVM_SOCKET=%s",
             run->cluster.nodes[0].path);
    code = ivmrun_root_start(run, argv + first);
    if (code != 0) {
        goto out_close_daemon;
    }
    /* Without a guard the root still dies with ivmrun (PR_SET_PDEATHSIG);
     * only the rest of its process group would not. */
    (void)ivmrun_guard_start(&run->guard, run->root_pid, run->root_pgrp);
    ivmrun_loop(run);
    code = ivmrun_exit_code(run);
    if (run->signo != 0 || run->timed_out || run->cluster_lost) {
        ivmrun_root_kill(run, SIGKILL); /* what is left of its group */
    }
    ivmrun_guard_stop(&run->guard);
    ivmrun_stream_drain(&run->out);
    ivmrun_stream_drain(&run->err);

out_close_daemon:
    ivmrun_cluster_close(&run->cluster);
out_close_sigfd:
    if (run->sigfd >= 0) {
        close(run->sigfd);
    }
out_release:
    ivm_config_release(ivmrun_config_fields, &run->cfg);
    ivmrun_hosts_release(&run->cluster.boot);
    free(run->node_specs_buf);
    free(run);
    return code;
}
