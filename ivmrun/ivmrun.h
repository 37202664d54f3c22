/*
 * ivmrun: the launcher. It finds or starts the node daemon (or, with
 * --nodes N > 1, starts N fresh daemons and joins them into one cluster over
 * loopback TCP; or, with --hosts/--hostfile, has mpirun and ivm-boot, with
 * --slurm srun and ivm-boot-srun, start one daemon per host: the bootstraps
 * of bootstrap.h), runs PROGRAM as the root PE, forwards (and optionally
 * tags) its output, enforces the timeout, relays signals, returns the root's
 * exit status and cleans up. This header: what ivmrun and the per-host
 * bring-up programs share (settings, processes, the node daemon, the
 * bring-up's lines).
 */
#ifndef IVMRUN_IVMRUN_H
#define IVMRUN_IVMRUN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "config.h"
#include "proto.h"
#include "ivm.h"

/* X(field, "option-name", TYPE, "default", "help text") */
#define IVMRUN_CONFIG_TABLE(X)                                                      \
    X(cpu_devices, "cpu-devices", STRING, "",                                       \
      "CPU devices of the job, e.g. 0-7,8-11,12 (default: the daemon's table); "    \
      "CORES:PCT is a share of the cores' time, e.g. 0,1:50,1:25 (cgroups: root)") \
    X(tag_output,  "tag-output",  BOOL,   "0",                                      \
      "prefix every output line with \"[NODE,N] \" (the PE's node and id)")      \
    X(bind_to,     "bind-to",     STRING, "",                                       \
      "how PEs are bound: device (its cores; default), core (one core of it each), " \
      "numa (its NUMA nodes' cores) or none")                                      \
    X(pe_pool,     "pe-pool",     INT,    "-1",                                     \
      "processes per CPU device kept parked for ivmCreatePEs, 0-64 (-1: libivm's)") \
    X(timeout,     "timeout",     DOUBLE, "0",                                      \
      "kill the job after this many seconds and exit 124 (0 = no limit)")          \
    X(nodes,       "nodes",       INT,    "1",                                      \
      "nodes to simulate on this machine, 1-64 (N > 1: fresh daemons in a cluster)")\
    X(emu_gpus,    "emu-gpus",    STRING, "",                                       \
      "give every started ivmd N emulated GPUs of MEM bytes (N[:MEM], e.g. 2:256M)") \
    X(gpus,        "gpus",        STRING, "",                                       \
      "real GPUs of every started ivmd: all, none or CUDA indices 0,2 (default all)") \
    X(gpu_shares,  "gpu-shares",  STRING, "",                                       \
      "GPU devices of every started ivmd as shares of its GPUs, e.g. 0:50,0:50,1")  \
    X(peer_encrypt, "peer-encrypt", BOOL, "0",                                      \
      "encrypt the links between the started daemons (ivmd --peer-encrypt); they "  \
      "are authenticated in any case")                                              \
    X(daemon_poll_us, "daemon-poll-us", STRING, "",                                 \
      "every started ivmd polls this many us before sleeping (ivmd --poll-us)")     \
    X(daemon_huge_pages, "daemon-huge-pages", STRING, "",                           \
      "every started ivmd puts objects in 2 MiB pages: auto, on or off (ivmd "       \
      "--huge-pages; default auto)")                                                \
    X(daemon_tcp_congestion, "daemon-tcp-congestion", STRING, "",                   \
      "TCP congestion control of every started ivmd's peer links: cubic (ivmd's "   \
      "default), reno, bbr... or system (ivmd --tcp-congestion)")                  \
    X(transport,   "transport",   STRING, "",                                       \
      "how object bytes move between the started daemons: tcp, ucx or auto "         \
      "(ivmd --transport; default auto; UCX_* variables reach UCX)")                 \
    X(node_cpu_devices, "node-cpu-devices", STRING, "",                             \
      "one CPU device spec per node, ';'-separated, e.g. 0-3;4-5;6 or "             \
      "0:80;1:40;1:20 (several nodes)")                                             \
    X(node_slots,  "node-slots",  STRING, "",                                       \
      "slots of each node, SLOTS[:MAX_SLOTS] ','-separated, e.g. 1,4:4 (several "   \
      "nodes; 0 = not limited; as a hostfile's slots=N max_slots=N)")              \
    X(log_level,   "log-level",   STRING, "",                                       \
      "error|warn|info|debug|trace, also given to the root PE (-v = info)")        \
    X(socket,      "socket",      STRING, "",                                       \
      "daemon socket with --nodes 1 (default: <socket dir>/" "ivmd.sock)")          \
    X(daemon,      "daemon",      STRING, "",                                       \
      "ivmd to start (default: ivmd beside ivmrun, else PATH)")                     \
    X(daemon_wait, "daemon-wait", DOUBLE, "10",                                     \
      "seconds to wait for a started ivmd to become ready")                        \
    X(hosts,       "hosts",       STRING, "",                                       \
      "real cluster, one node per host: a,b,c (node0 = a = this machine)")         \
    X(hostfile,    "hostfile",    STRING, "",                                       \
      "real cluster, one node per line of an Open MPI hostfile")                   \
    X(slurm,       "slurm",       BOOL,   "0",                                      \
      "real cluster, one node per host of this Slurm allocation")                  \
    X(mpirun,      "mpirun",      STRING, "mpirun",                                 \
      "the Open MPI mpirun that starts ivm-boot on the hosts")                      \
    X(mpirun_args, "mpirun-args", STRING, "",                                       \
      "extra arguments for mpirun, separated by spaces")                            \
    X(srun,        "srun",        STRING, "srun",                                   \
      "the Slurm srun that starts ivm-boot-srun on the hosts (--slurm)")           \
    X(srun_args,   "srun-args",   STRING, "",                                       \
      "extra arguments for srun, separated by spaces (--slurm)")                   \
    X(boot,        "boot",        STRING, "",                                       \
      "ivm-boot (--slurm: ivm-boot-srun) to run on each host (default: beside "     \
      "ivmrun, else PATH)")                                                         \
    X(boot_wait,   "boot-wait",   DOUBLE, "60",                                     \
      "seconds the hosts' daemons may take to form the cluster")

IVM_CONFIG_STRUCT(ivmrun_config, IVMRUN_CONFIG_TABLE);

extern const ivm_config_field_t ivmrun_config_fields[];

/* The settings of a program that starts daemons (ivmrun, ivm-boot,
 * ivm-boot-srun): its option table and its values. The daemon settings are
 * read from it by option name (opts.c): "daemon", "daemon-wait" and those
 * passed on to the daemons. */
typedef struct ivmrun_opts {
    const ivm_config_field_t *fields;
    const void               *values;
} ivmrun_opts_t;

/* Whose options ivmrun_opts_forward writes: ivmd's, or the per-host
 * bring-up program's (ivm-boot, ivm-boot-srun: the launcher's names). */
typedef enum ivmrun_fwd_to {
    IVMRUN_FWD_IVMD,
    IVMRUN_FWD_BOOT
} ivmrun_fwd_to_t;

/* Append the daemon settings given in o to argv (at most 15 entries): the
 * one list of the options a launcher passes on (opts.c). */
void ivmrun_opts_forward(const ivmrun_opts_t *o, ivmrun_fwd_to_t to, char **argv,
                         int *argc_p);

/* 1 if o gives a setting that only a daemon started for the run can take
 * (--emu-gpus, --gpus, --gpu-shares, --daemon-poll-us, --transport,
 * --daemon-huge-pages). */
int ivmrun_opts_started_only(const ivmrun_opts_t *o);

/* The value of the STRING (DOUBLE) option name of o; NULL (0) if o has none. */
const char *ivmrun_opts_string(const ivmrun_opts_t *o, const char *name);
double ivmrun_opts_double(const ivmrun_opts_t *o, const char *name);

/* Append "opt value" to argv when value is set (not NULL, not empty). */
void ivmrun_arg_opt(char **argv, int *argc_p, const char *opt, const char *value);

/* How one child process is started. */
typedef struct ivmrun_spawn {
    const char        *file;     /* path, or a name looked up in PATH */
    char *const       *argv;     /* argv[0] included, NULL-terminated */
    int                fd_in;    /* becomes stdin; -1 = inherit */
    int                fd_out;   /* becomes stdout; -1 = inherit */
    int                fd_err;   /* becomes stderr; -1 = inherit */
    int                keep_fd;  /* left open across exec; -1 = none */
    int                new_session; /* setsid() in the child */
    int                new_pgroup;  /* own process group (ignored with new_session) */
    const sigset_t    *sigmask;  /* the child's signal mask */
    char *const       *env;      /* "NAME=VALUE" to set, "NAME" to unset; NULL-terminated or NULL */
    int                pdeathsig; /* sent to the child when its parent dies; 0 = none */
} ivmrun_spawn_t;

/* spec: start file with argv, everything else inherited. */
void ivmrun_spawn_init(ivmrun_spawn_t *spec, const char *file, char *const *argv);

/* Fork and exec spec. On success *pid_p is the child. If the exec fails, the
 * child is reaped, *errno_p says why and IVM_ERROR_SPAWN is returned. */
ivmError_t ivmrun_proc_spawn(const ivmrun_spawn_t *spec, pid_t *pid_p, int *errno_p);

/* Describe a wait status: "exit status 3", "signal 9 (Killed)". */
void ivmrun_proc_status_text(int status, char *buf, size_t len);

/* Reap *pid_p if it has ended (no wait): 1 with *status_p set and *pid_p = 0,
 * else 0 (also when *pid_p <= 0). */
int ivmrun_proc_reap(pid_t *pid_p, int *status_p);

/* SIGKILL *pid_p (if > 0) and reap it: *status_p, *pid_p = 0. */
void ivmrun_proc_kill(pid_t *pid_p, int *status_p);

/* Wait at most wait seconds for *pid_p to exit, reading sigfd meanwhile
 * (terminating signals are dropped: for teardown). 1 if it was reaped (or
 * *pid_p was <= 0 already), else 0. */
int ivmrun_proc_wait_exit(pid_t *pid_p, int *status_p, int sigfd, double wait);

/* Drain sigfd (a signalfd): on SIGCHLD reap *pid_p as ivmrun_proc_reap does
 * (pid_p NULL: SIGCHLDs are only consumed, for callers that reap with
 * WNOHANG). Returns the first terminating signal read, 0 if none. */
int ivmrun_proc_signals(int sigfd, pid_t *pid_p, int *status_p);

/* buf = "<directory of this executable>/name" if that is executable: 1, else 0. */
int ivmrun_proc_beside_self(const char *name, char *buf, size_t len);

/* Monotonic clock, in seconds. */
double ivmrun_time_now(void);

/* Write all of buf to fd (restarting on EINTR). 0 or -1 with errno. */
int ivmrun_fd_write_all(int fd, const void *buf, size_t len);

/* The order in which the n daemons node0..node<n-1> of a cluster get the
 * CLUSTER table: names from the highest down (strcmp). The node whose name
 * sorts lower dials, so every daemon learns the table after each daemon it
 * will dial has it, and no first dial is refused (a refused dial is retried,
 * but only after 200 ms or more). order[] gets the n node indices. */
void ivmrun_join_order(int n, int *order);

#define IVMRUN_MAX_NODES 64 /* --nodes */

/* The node daemon as ivmrun sees it. */
typedef struct ivmrun_daemon {
    char  path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* its socket */
    char  node[IVM_HOST_MAX + 1]; /* --node given to it; "" = ivmd's default */
    const char *cpu_devices; /* --cpu-devices given to it; NULL or "" = none */
    int   listen;    /* start it with --listen ADDR:0 (a cluster node) */
    const char *listen_addr; /* with listen: numeric ADDR; NULL = 127.0.0.1 */
    int   pdeathsig; /* signal it gets if its starter dies; 0 = none */
    int   remove_dir; /* ivmd --remove-dir: its socket's directory is a run
                         directory, which the last daemon in it removes */
    int   shared;    /* on a socket the user named, which other runs may use
                        too: ivmd --exit-when-idle, and left running at the end
                        while it serves another job (ivmrun_daemon_close) */
    char *const *env; /* changes to its environment, as ivmrun_spawn_t.env */
    unsigned port;   /* with listen: the TCP port from its readiness line */
    pid_t pid;       /* > 0 while a daemon we started is not yet reaped */
    int   started;   /* we started it, so we stop it */
    int   status;    /* its wait status once reaped */
} ivmrun_daemon_t;

/* Start ivmd on d->path (with d->node, d->listen, d->cpu_devices) and wait
 * for its readiness line; with d->listen, d->port is the port it reports.
 * sigfd and signo_p as for ivmrun_daemon_open. Errors are logged. */
ivmError_t ivmrun_daemon_start(ivmrun_daemon_t *d, const ivmrun_opts_t *opts,
                               int sigfd, const sigset_t *child_mask, int *signo_p);

/* Use the daemon listening on d->path, or start one. sigfd delivers SIGCHLD
 * and the terminating signals while waiting; if one of the latter arrives,
 * IVM_ERROR_INTERNAL is returned with *signo_p set. Errors are logged. */
ivmError_t ivmrun_daemon_open(ivmrun_daemon_t *d, const ivmrun_opts_t *opts,
                              int sigfd, const sigset_t *child_mask, int *signo_p);

/* Reap the daemon we started if it has exited (after a SIGCHLD). Returns 1
 * if it was reaped now. */
int ivmrun_daemon_reap(ivmrun_daemon_t *d);

/* Stop the daemon if we started it (SIGTERM, SIGKILL after 5 s), and remove
 * its socket if it left it behind. A shared daemon is left alone. */
void ivmrun_daemon_close(ivmrun_daemon_t *d, int sigfd);

/* SIGKILL and reap the daemon we started, if it has not been reaped. */
void ivmrun_daemon_kill(ivmrun_daemon_t *d);

/* Remove the socket our daemon left behind, unless some daemon answers on it. */
void ivmrun_daemon_unlink(ivmrun_daemon_t *d);

/* Jobs the daemon holds now, or -1 if it cannot be asked. */
int ivmrun_daemon_jobs(const ivmrun_daemon_t *d);

/* Give the daemon d the CLUSTER table req (len bytes: the secret and every
 * node's entry). Errors are logged. */
ivmError_t ivmrun_daemon_join(const ivmrun_daemon_t *d, const ivm_msg_cluster_req_t *req,
                              size_t len);

/* A real cluster (--hosts, --hostfile): mpirun runs ivm-boot once
 * per host; ivm-boot starts that host's ivmd, joins the daemons into one
 * cluster, prints node0's socket path and keeps the daemons until its stdin
 * (that of rank 0, fed by mpirun) closes. */
#define IVMRUN_BOOT_READY "IVM-BOOT READY " /* + node0's socket path: ivm-boot is up */
/* ivmrun -> ivm-boot (rank 0's stdin): an orderly stop. The end of that input
 * without it means that ivmrun is gone: the ranks then leave without
 * MPI_Finalize (boot.c). */
#define IVMRUN_BOOT_STOP "IVM-BOOT STOP\n"

/* --slurm: `srun ... ivm-boot-srun --hosts LIST` runs one task per host, and
 * ivmrun itself is the hub of the exchange, in lines on srun's stdout (from
 * the tasks, merged) and stdin (to every task, --input=all):
 *   task k -> ivmrun  "IVM-BOOT NODE k ADDR PORT"   its daemon listens there
 *   ivmrun -> tasks   "IVM-BOOT SECRET HEX"         the cluster secret (64 hex)
 *   ivmrun -> tasks   "IVM-BOOT NODE k ADDR PORT"   the whole table, n lines
 *   ivmrun -> tasks   "IVM-BOOT JOIN k"             node k's turn (join order)
 *   task k -> ivmrun  "IVM-BOOT JOINED k"           its daemon has the table
 *   task k -> ivmrun  "IVM-BOOT UP k SOCKET"        its daemon sees every peer;
 *                                                   SOCKET: its path (node0's is used)
 *   task 0 -> ivmrun  "IVM-BOOT STEP JOBID.STEPID"  the Slurm step of the tasks
 * End of srun's stdin stops every task (daemon stopped, run dir removed). If
 * srun dies, that input does not end: ivmrun then sends the step SIGTERM
 * (scancel), which stops every task the same way. */
#define IVMRUN_SRUN_NODE   "IVM-BOOT NODE "
#define IVMRUN_SRUN_SECRET "IVM-BOOT SECRET "
#define IVMRUN_SRUN_JOIN   "IVM-BOOT JOIN "
#define IVMRUN_SRUN_JOINED "IVM-BOOT JOINED "
#define IVMRUN_SRUN_UP     "IVM-BOOT UP "
#define IVMRUN_SRUN_STEP   "IVM-BOOT STEP "
#define IVMRUN_SRUN_LINE_MAX 512 /* bytes of one such line, newline included */

/* 1 if name is this machine: "localhost", this host's name, or a name that
 * resolves to a loopback address or an address of one of its interfaces. */
int ivmrun_host_is_local(const char *name);

/* The numeric address (IPv4 preferred) at which the others reach this
 * machine, found by resolving name (this host's name if NULL). If that gives
 * only loopback addresses and external is set (the nodes are on several
 * machines), the first IPv4 address of an interface that is up and not
 * loopback. 0, or -1 after logging why. */
int ivmrun_host_addr(const char *name, int external, char *buf, size_t len);

/* The root PE's guard (guard.c): a process that SIGKILLs the root PE and
 * its process group if ivmrun dies without stopping it first. */
typedef struct ivmrun_guard {
    pid_t pid; /* the guard, > 0 until reaped */
    int   fd;  /* write end of its pipe; -1 once closed */
} ivmrun_guard_t;

/* Start the guard of the root PE root (pgrp: it leads its own process
 * group, which the guard kills as a whole). Errors are logged. */
ivmError_t ivmrun_guard_start(ivmrun_guard_t *g, pid_t root, int pgrp);

/* An orderly end: tell the guard to leave the root alone, and reap it. */
void ivmrun_guard_stop(ivmrun_guard_t *g);

/* Most -x VAR=value options of one ivmrun. */
#define IVMRUN_MAX_X 64

/* Forwarding of one of the root PE's output pipes with "[NODE,0] " tags. */
#define IVMRUN_STREAM_BUF 65536

typedef struct ivmrun_stream {
    int    fd;        /* read end of the pipe (non-blocking); -1 once closed */
    int    out_fd;    /* where the tagged lines go */
    int    mid_line;  /* the output so far ends inside a line */
    size_t len;       /* bytes held in buf */
    size_t out_len;   /* bytes held in out */
    char   buf[IVMRUN_STREAM_BUF];      /* read from the pipe, not yet a full line */
    char   out[IVMRUN_STREAM_BUF + IVM_HOST_MAX + 64]; /* tagged lines not yet written */
    char   tag[IVM_HOST_MAX + 16]; /* "[NODE,0] ": the root PE's tag */
    size_t tag_len;
} ivmrun_stream_t;

/* Forward pipe fd to out_fd, tagging the root PE's lines "[node,0] ". */
void ivmrun_stream_init(ivmrun_stream_t *s, int fd, int out_fd, const char *node);

/* Read what is available and forward complete lines. Returns the bytes read
 * (0 at EOF, which also flushes a partial last line and closes the pipe),
 * or -1 if nothing was available. */
ssize_t ivmrun_stream_pump(ivmrun_stream_t *s);

/* Forward everything readable now, then flush and close the pipe. */
void ivmrun_stream_drain(ivmrun_stream_t *s);

#endif /* IVMRUN_IVMRUN_H */
