/*
 * The per-host side of a real cluster's bring-up, shared by the two
 * bootstrap programs: ivm-boot (started by mpirun, exchanges through MPI)
 * and ivm-boot-srun (started by srun, exchanges through srun's stdin and
 * stdout with ivmrun). Each process is one node: it starts its host's ivmd in
 * a private run directory, gives it the CLUSTER table, waits until it sees
 * every peer and, at the end, stops it and removes the directory. Only the
 * way the table, the secret and the join order travel differs.
 */
#ifndef IVMRUN_BOOT_H
#define IVMRUN_BOOT_H

#include <signal.h>
#include <stdint.h>

#include "ivmrun.h"

/* X(field, "option-name", TYPE, "default", "help text") */
#define IVMBOOT_CONFIG_TABLE(X)                                                        \
    X(hosts,       "hosts",       STRING, "",                                          \
      "the hosts, ','-separated, node<k> on the k-th: each node listens on the "       \
      "address of the entry that is its machine (default: this host's name)")          \
    X(addr,        "addr",        STRING, "",                                          \
      "numeric address for every node's daemon to listen on (instead of --hosts)")     \
    X(daemon,      "daemon",      STRING, "",                                          \
      "ivmd to start (default: ivmd beside this program, else PATH)")                  \
    X(daemon_wait, "daemon-wait", DOUBLE, "10",                                        \
      "seconds to wait for ivmd to become ready")                                      \
    X(up_wait,     "up-wait",     DOUBLE, "60",                                        \
      "seconds to wait until every daemon sees all the others")                        \
    X(cpu_devices, "cpu-devices", STRING, "",                                          \
      "CPU devices of every node's daemon (default: ivmd's)")                          \
    X(node_cpu_devices, "node-cpu-devices", STRING, "",                                \
      "one CPU device spec per node, ';'-separated: node<k> gets the k-th")            \
    X(node_slots,  "node-slots",  STRING, "",                                          \
      "slots of every node, SLOTS[:MAX_SLOTS] ','-separated (0 = not limited)")      \
    X(emu_gpus,    "emu-gpus",    STRING, "",                                          \
      "N[:MEM] emulated GPUs for every node's daemon (ivmd --emu-gpus)")               \
    X(gpus,        "gpus",        STRING, "",                                          \
      "real GPUs of every node's daemon: all, none or CUDA indices (ivmd --gpus)")    \
    X(gpu_shares,  "gpu-shares",  STRING, "",                                          \
      "GPU devices of every node's daemon as shares of its GPUs (ivmd --gpu-shares)")  \
    X(peer_encrypt, "peer-encrypt", BOOL, "0",                                         \
      "encrypt the links between the daemons (ivmd --peer-encrypt)")                   \
    X(daemon_poll_us, "daemon-poll-us", STRING, "",                                    \
      "us every node's daemon polls before sleeping (ivmd --poll-us)")                 \
    X(daemon_huge_pages, "daemon-huge-pages", STRING, "",                              \
      "2 MiB pages for every node's daemon's objects: auto, on or off (ivmd --huge-pages)") \
    X(daemon_tcp_congestion, "daemon-tcp-congestion", STRING, "",                      \
      "TCP congestion control of every node's daemon's peer links (ivmd "               \
      "--tcp-congestion; default cubic)")                                             \
    X(transport,   "transport",   STRING, "",                                          \
      "how object bytes move between the daemons: tcp, ucx or auto (ivmd --transport)") \
    X(log_level,   "log-level",   STRING, "",                                          \
      "error|warn|info|debug|trace, also given to ivmd")

IVM_CONFIG_STRUCT(ivmboot_config, IVMBOOT_CONFIG_TABLE);

#define IVMBOOT_NAME_MAX 256 /* bytes of a host name, NUL included */

/* What each node tells the others. */
typedef struct ivmboot_entry {
    char     node[IVM_HOST_MAX + 1]; /* node<k> */
    char     addr[64];   /* where its daemon listens */
    char     host[IVMBOOT_NAME_MAX]; /* its host name, for messages */
    uint16_t port;       /* its daemon's TCP port */
    uint16_t ok;         /* 1: the daemon is up */
    uint32_t reserved;
} ivmboot_entry_t;

typedef struct ivmboot {
    ivmboot_config_t cfg;
    ivmrun_opts_t    opts;     /* cfg with its option table, for ivmrun_daemon_start */
    int              rank, size; /* this node's index (node<rank>), nodes */
    int              sigfd;    /* SIGCHLD, SIGINT, SIGTERM, SIGHUP */
    sigset_t         child_mask; /* the signal mask to give ivmd */
    char             host[IVMBOOT_NAME_MAX];
    char             dir[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* run dir */
    const char *const *env_drop; /* prefixes of variables ivmd must not inherit */
    char           **env;      /* those variables, as ivmrun_spawn_t.env unsets them */
    char            *specs;    /* --node-cpu-devices, split at ';' */
    ivmrun_daemon_t  daemon;
    ivmboot_entry_t *table;    /* every node's entry */
    int              daemon_lost; /* its exit was reported */
} ivmboot_t;

/* Block SIGCHLD/SIGINT/SIGTERM/SIGHUP into a signalfd, ignore SIGPIPE and
 * learn the host name. 0, or -1 after logging why. */
int ivmboot_init(ivmboot_t *b);

/* Free what b holds and close its signalfd. */
void ivmboot_release(ivmboot_t *b);

/* Parse the options (environment IVM_*, then argv). usage is printed before
 * the options with --help (only when print_help is set). Returns 0, -1 after
 * --help, or an exit code after logging why. */
int ivmboot_args(ivmboot_t *b, int argc, char **argv, const char *usage, int print_help);

/* Read what sigfd holds; reap the daemon on SIGCHLD (and say so once).
 * Returns the first terminating signal, 0 if none. */
int ivmboot_signals(ivmboot_t *b);

/* Local phase: run directory, ivmd listening on this node's address, whose
 * address and port go to me. b->rank and, without --hosts and --addr,
 * b->table's host names must be set. 0, -1 on failure (logged), or a signal
 * number. */
int ivmboot_start(ivmboot_t *b, ivmboot_entry_t *me);

/* Send b->table (b->size entries) with secret to this node's daemon.
 * 0, or -1 after logging why. */
int ivmboot_send_table(ivmboot_t *b, const uint8_t *secret);

/* Wait (--up-wait) until this node's daemon sees every peer. 0, -1 on
 * failure (logged), or a signal number. */
int ivmboot_wait_peers(ivmboot_t *b);

/* Wait until stdin ends or a terminating signal arrives. With any_input,
 * input also ends the wait; else it is read and dropped. Returns 0 when
 * input ended it (told to stop), -1 at the end of input (or a failed read:
 * whoever fed stdin is gone), or the terminating signal. */
int ivmboot_wait_stop(ivmboot_t *b, int any_input);

/* Stop the daemon (SIGTERM, SIGKILL after 5 s) and remove the run directory. */
void ivmboot_cleanup(ivmboot_t *b);

/* A terminating signal outside the orderly path: clean up and return the
 * exit code 128 + signo. */
int ivmboot_abandon(ivmboot_t *b, int signo);

#endif /* IVMRUN_BOOT_H */
