/*
 * How ivmrun brings up the daemons of a run, behind one interface: a
 * bootstrap is a table of phases (ivmrun_boot_ops_t) that the driver
 * (cluster.c) runs in order, chosen in one place (ivmrun_boot_select):
 *   daemon  the one node daemon, shared or started for the run (daemon.c)
 *   local   --nodes N > 1: N fresh daemons on loopback TCP (local.c)
 *   mpirun  --hosts/--hostfile: mpirun runs ivm-boot on each host (mpirun.c)
 *   srun    --slurm: srun runs ivm-boot-srun on each host, ivmrun is the hub
 *           of their exchange (srun.c)
 * The real clusters' shared parts (host list, launcher start and stop,
 * node0's check) are in hosts.c; the options every bootstrap passes on to
 * the daemons in opts.c.
 */
#ifndef IVMRUN_BOOTSTRAP_H
#define IVMRUN_BOOTSTRAP_H

#include <limits.h>

#include "ivmrun.h"
#include "slots.h"

typedef struct ivmrun_cluster ivmrun_cluster_t;

/* One bootstrap. Every phase but name and stop may be NULL (nothing to do);
 * start, table and wait_ready return an error status after logging why (on a
 * terminating signal with c->signo set), and after a failure the driver calls
 * stop, which must cope with any phase having failed halfway. */
typedef struct ivmrun_boot_ops {
    const char *name;
    /* While the settings are checked: plan the run (host list, socket path,
     * how many daemons). 0, or an exit code after logging why. */
    int (*check)(ivmrun_cluster_t *c);
    /* Start the daemons, or the launcher that starts them. */
    ivmError_t (*start)(ivmrun_cluster_t *c);
    /* Give the started daemons the cluster table and its secret. */
    ivmError_t (*table)(ivmrun_cluster_t *c);
    /* Wait until node0's daemon (nodes[0]) serves the whole cluster. */
    ivmError_t (*wait_ready)(ivmrun_cluster_t *c);
    /* After a SIGCHLD: reap what exited, warning about it. 1 when the
     * process that keeps the daemons went: they are gone. */
    int (*reap)(ivmrun_cluster_t *c);
    /* Stop the daemons and remove what the run made. */
    void (*stop)(ivmrun_cluster_t *c);
} ivmrun_boot_ops_t;

extern const ivmrun_boot_ops_t ivmrun_boot_daemon;
extern const ivmrun_boot_ops_t ivmrun_boot_local;
extern const ivmrun_boot_ops_t ivmrun_boot_mpirun;
extern const ivmrun_boot_ops_t ivmrun_boot_srun;

struct ivmrun_srun;

#define IVMRUN_BOOT_OUT_MAX 4096 /* bytes of the launcher's output held for a line */

/* A real cluster: the hosts, and mpirun or srun that keeps their daemons. */
typedef struct ivmrun_boot {
    int    nhosts;   /* hosts[] entries; 0 = no real cluster */
    char **hosts;    /* one node per entry, node<k> on hosts[k] */
    char  *host_list;/* the hosts joined by ',' (for mpirun and ivm-boot) */
    const char *launcher; /* "mpirun" or "srun" (--slurm), for messages */
    int    self_known; /* --slurm: hosts[0] is SLURMD_NODENAME, this machine */
    int    stop_line;  /* mpirun: write IVMRUN_BOOT_STOP before closing in_fd */
    char   step[32];   /* --slurm: JOBID.STEPID of srun's tasks; "" = unknown */
    char  *scancel;    /* --slurm: the scancel beside --srun (or from PATH) */
    char **sockets;    /* --slurm: node k's socket path (its UP line), or NULL */
    struct ivmrun_srun *srun; /* --slurm: the exchange while the cluster forms */
    /* Called by ivmrun_boot_close when the launcher ended before it was told
     * to stop, or had to be killed: its tasks may still run (NULL: none). */
    void (*orphans)(struct ivmrun_boot *b, int sigfd);
    double deadline; /* --boot-wait from the launcher's start */
    char   out[IVMRUN_BOOT_OUT_MAX]; /* its output, not yet a line */
    size_t got;      /* bytes held in out */
    pid_t  pid;      /* mpirun or srun, > 0 until reaped */
    int    status;   /* its wait status once reaped */
    int    in_fd;    /* write end of its stdin; -1 once closed */
    int    out_fd;   /* read end of its stdout; -1 once closed */
} ivmrun_boot_t;

/* The daemons of a run and how they came up. nodes[0] serves the root PE:
 * the one daemon, node0 of the simulated nodes, or node0's daemon of a real
 * cluster (which its bootstrap program started and stops). */
struct ivmrun_cluster {
    const ivmrun_boot_ops_t *ops;   /* ivmrun_boot_select */
    const ivmrun_config_t   *cfg;
    const ivmrun_opts_t     *opts;  /* cfg with its option table */
    char *const             *specs; /* per-node --cpu-devices, or NULL */
    ivmrun_slots_t slots[IVM_CLUSTER_MAX_NODES]; /* node k's (--hostfile, --node-slots) */
    int            has_slots; /* some node's slots are limited */
    int                      sigfd; /* SIGCHLD and the terminating signals */
    const sigset_t          *child_mask; /* the signal mask of what is started */
    int                      signo; /* terminating signal that ended the bring-up */
    int             n;      /* daemons in nodes[] */
    char            dir[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* run directory, "" = none */
    ivmrun_boot_t   boot;   /* real cluster */
    int             watch_fd; /* real cluster: a connection to node0's daemon,
                                 whose end means the daemons are gone; -1 = none */
    ivmrun_daemon_t nodes[IVMRUN_MAX_NODES];
};

/* The bootstrap for cfg, in c->ops (c->cfg, c->opts set), and its check.
 * 0, or an exit code after logging why. */
int ivmrun_cluster_plan(ivmrun_cluster_t *c);

/* Bring the daemons up with c->ops (c->specs, c->sigfd, c->child_mask set);
 * on failure everything started is torn down again. Errors are logged; a
 * terminating signal ends the wait with c->signo set. */
ivmError_t ivmrun_cluster_open(ivmrun_cluster_t *c);

/* After a SIGCHLD: c->ops->reap. 1 when the daemons are gone. */
int ivmrun_cluster_reap(ivmrun_cluster_t *c);

/* A real cluster: watch_fd is readable. Returns 1 (and closes it) when node0's
 * daemon closed the connection: it stopped, and with it the cluster (its
 * bootstrap stops every node). mpirun may take a second more to exit. */
int ivmrun_cluster_watch_ended(ivmrun_cluster_t *c);

/* Stop the daemons (c->ops->stop). */
void ivmrun_cluster_close(ivmrun_cluster_t *c);

/* --- the real clusters' shared parts (hosts.c) --- */

/* mpirun and srun: the host list (--hosts, --hostfile or --slurm: exactly
 * one) and the settings a real cluster needs. 0 or an exit code. */
int ivmrun_hosts_check(ivmrun_cluster_t *c);

/* Free the host list. */
void ivmrun_hosts_release(ivmrun_boot_t *b);

/* Reap mpirun (srun) if it has exited, warning that it ended early (the
 * ops' reap). Returns 1 if reaped now. */
int ivmrun_hosts_reap(ivmrun_cluster_t *c);

/* The bootstrap program name: --boot, else beside this executable, else
 * name from PATH. node0's runs here, so it must be here too: 0, or -1
 * (logged) if it is not. */
int ivmrun_boot_find(const ivmrun_config_t *cfg, const char *name, char *buf, size_t len);

/* The launcher's command line: its own arguments, the user's extra ones
 * (--mpirun-args, --srun-args) and the per-host bring-up program with its
 * options; what the entries point to. */
#define IVMRUN_BOOT_ARGS      96
#define IVMRUN_BOOT_NODE_ARGS 26 /* entries the bring-up program takes at most */
typedef struct ivmrun_boot_args {
    char *argv[IVMRUN_BOOT_ARGS];
    char  exe[PATH_MAX];  /* the bring-up program (ivmrun_boot_find) */
    char  dwait[32];      /* its --daemon-wait */
    char  uwait[32];      /* its --up-wait */
    char *extra;          /* the user's extra arguments, split in place */
    char *specs;          /* its --node-cpu-devices */
    char *slots;          /* its --node-slots */
} ivmrun_boot_args_t;

/* a->argv: args (NULL-terminated: the launcher and its options), the words
 * of extra (the user's option opt), then a->exe and its options from c's
 * settings. 0, or -1 after logging why. */
int ivmrun_boot_argv(const ivmrun_cluster_t *c, ivmrun_boot_args_t *a, char *const *args,
                     const char *extra, const char *opt);

/* Free what a holds. */
void ivmrun_boot_args_release(ivmrun_boot_args_t *a);

/* Start the launcher argv[0] (mpirun or srun) of the per-host bring-up in its
 * own process group, its stdin and stdout on pipes (b->in_fd, b->out_fd),
 * with env's changes to its environment (as ivmrun_spawn_t.env; may be NULL);
 * hint follows the error when the launcher is missing. 0 or -1 (logged). */
int ivmrun_boot_launch(ivmrun_boot_t *b, char **argv, char *const *env,
                       const sigset_t *child_mask, const char *hint);

/* Node0's daemon (c->nodes[0].path) answers here and heads the whole
 * cluster: say so (started: when the bring-up began) and watch it
 * (c->watch_fd). Errors are logged. */
ivmError_t ivmrun_boot_ready(ivmrun_cluster_t *c, double started);

/* The next "IVM-BOOT " line of the launcher's output (without its newline)
 * into line, at most len bytes with the NUL, until c->boot.deadline; the
 * other lines are passed on to ivmrun's stdout. Errors are logged (the end
 * of the output, the deadline, a terminating signal: c->signo). */
ivmError_t ivmrun_boot_line(ivmrun_cluster_t *c, char *line, size_t len);

/* Tell the bootstrap to stop (close its stdin), wait for mpirun (srun);
 * SIGTERM it after 10 s, SIGKILL after 5 s more. */
void ivmrun_boot_close(ivmrun_boot_t *b, int sigfd);

/* Make the private run directory <socket dir>/run-<pid>-XXXXXX (0700) into
 * c->dir, with room bytes left in c->dir for a socket's name after it.
 * Errors are logged. local.c. */
ivmError_t ivmrun_run_dir_make(ivmrun_cluster_t *c, size_t room);

/* Remove the run directory c->dir (if any): the sockets left in it (it is
 * ours alone), then the directory itself. */
void ivmrun_run_dir_remove(ivmrun_cluster_t *c);

/* items[0..n) joined by sep, in a new string; NULL when out of memory. */
char *ivmrun_join(char *const *items, int n, char sep);

#endif /* IVMRUN_BOOTSTRAP_H */
