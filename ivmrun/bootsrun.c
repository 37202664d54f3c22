/*
 * ivm-boot-srun: brings up one node of a real cluster inside a Slurm
 * allocation, without MPI. ivmrun --slurm starts it with
 *   srun --nodes=N --ntasks=N --ntasks-per-node=1 --kill-on-bad-exit
 *        --input=all ... ivm-boot-srun --hosts h0,h1,...
 * Each task is the node whose host is SLURMD_NODENAME in --hosts (node<k> on
 * the k-th host; SLURM_NTASKS must be the number of hosts). It starts its
 * host's ivmd as ivm-boot does (bootnode.c), reports
 *   IVM-BOOT NODE k ADDR PORT
 * on stdout, which srun passes to ivmrun, and reads from stdin (srun
 * broadcasts ivmrun's input to every task) the cluster secret, the whole
 * table and the join turns (the lines are listed in ivmrun.h); on its turn it
 * gives its daemon the table, says JOINED, waits until the daemon sees every
 * peer and says UP (with its daemon's socket path); node0 also names the
 * Slurm step (IVM-BOOT STEP). Then it keeps the daemon until stdin ends
 * (ivmrun closed it or exited) or it gets SIGTERM, SIGINT or SIGHUP (from
 * scancel: ivmrun sends it when srun died); it stops the daemon,
 * removes its run directory and exits 0. Any failure is logged on stderr and
 * ends the task with 1 (srun's --kill-on-bad-exit then ends the others).
 * The secret travels only on that pipe: never in argv or the environment.
 */
#include "boot.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proto.h"
#include "status.h"

#define IVMBOOT_SRUN_IN_MAX 8192 /* bytes of stdin held while looking for a line */

/* Variables of the Slurm step (and of MPI) that ivmd and its PEs must not
 * inherit: a PE that is itself launched with srun or MPI would take them for
 * its own. The job's SLURM_JOB_* ones stay. */
static const char *const ivmboot_srun_env[] = {
    "SLURM_STEP",      "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
    "SLURM_TASK_PID",  "SLURM_GTIDS",  "SLURM_NTASKS",  "SLURM_NPROCS",
    "SLURM_SRUN_COMM", "SLURM_LAUNCH", "SLURM_TASKS_PER_NODE", "SLURM_STEPID",
    "PMI_",            "PMIX_",        "OMPI_",         NULL};

typedef struct ivmboot_srun {
    ivmboot_t *b;
    char       in[IVMBOOT_SRUN_IN_MAX]; /* stdin not yet taken as lines */
    size_t     in_len;
    uint8_t    secret[IVM_SECRET_LEN];
    int        have_secret;
    int        have_nodes; /* table entries received */
} ivmboot_srun_t;

/* The next line of stdin (without its newline) into line, before deadline.
 * 0: a line; 1: end of input; -1: failure (logged); with a terminating
 * signal, -1 and *signo_p set. */
static int ivmboot_srun_line(ivmboot_srun_t *s, char *line, size_t len, double deadline,
                             int *signo_p)
{
    struct pollfd pfds[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                             {.fd = s->b->sigfd, .events = POLLIN}};
    double left;
    char *nl;
    size_t n;
    ssize_t got;

    for (;;) {
        nl = memchr(s->in, '\n', s->in_len);
        if (nl != NULL) {
            n = (size_t)(nl - s->in);
            if (n >= len) {
                ivm_error("a line of ivmrun's input is longer than %zu bytes", len - 1);
                return -1;
            }
            memcpy(line, s->in, n);
            line[n] = '\0';
            explicit_bzero(s->in, n + 1); /* it may hold the secret */
            s->in_len -= n + 1;
            memmove(s->in, nl + 1, s->in_len);
            return 0;
        }
        if (s->in_len == sizeof(s->in)) {
            ivm_error("ivmrun's input holds no line in %zu bytes", sizeof(s->in));
            return -1;
        }
        left = deadline - ivmrun_time_now();
        if (left <= 0) {
            ivm_error("node%d: ivmrun did not send the cluster table within %g s",
                      s->b->rank, s->b->cfg.up_wait);
            return -1;
        }
        if (poll(pfds, 2, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("poll failed: %m");
            return -1;
        }
        if (pfds[1].revents & POLLIN) {
            *signo_p = ivmboot_signals(s->b);
            if (*signo_p != 0) {
                return -1;
            }
            if (s->b->daemon_lost) {
                return -1;
            }
        }
        if (pfds[0].revents == 0) {
            continue;
        }
        got = read(STDIN_FILENO, s->in + s->in_len, sizeof(s->in) - s->in_len);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            ivm_error("cannot read ivmrun's input: %m");
            return -1;
        }
        if (got == 0) {
            return 1;
        }
        s->in_len += (size_t)got;
    }
}

static int ivmboot_srun_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* One line of ivmrun's input. 1: it is this node's turn to join; 0: taken
 * in; -1: malformed (logged). */
static int ivmboot_srun_take(ivmboot_srun_t *s, const char *line)
{
    ivmboot_t *b = s->b;
    char addr[sizeof(b->table[0].addr)];
    unsigned port;
    int k, hi, lo, end = 0;
    size_t i, plen;

    plen = strlen(IVMRUN_SRUN_SECRET);
    if (strncmp(line, IVMRUN_SRUN_SECRET, plen) == 0) {
        line += plen;
        if (strlen(line) != 2 * IVM_SECRET_LEN) {
            ivm_error("malformed cluster secret from ivmrun (not %d hex digits)",
                      2 * IVM_SECRET_LEN);
            return -1;
        }
        for (i = 0; i < IVM_SECRET_LEN; ++i) {
            hi = ivmboot_srun_hex(line[2 * i]);
            lo = ivmboot_srun_hex(line[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                ivm_error("malformed cluster secret from ivmrun (not hex)");
                return -1;
            }
            s->secret[i] = (uint8_t)(hi << 4 | lo);
        }
        s->have_secret = 1;
        return 0;
    }
    plen = strlen(IVMRUN_SRUN_NODE);
    if (strncmp(line, IVMRUN_SRUN_NODE, plen) == 0) {
        if (sscanf(line + plen, "%d %63s %u%n", &k, addr, &port, &end) != 3 ||
            line[plen + (size_t)end] != '\0' || k < 0 || k >= b->size || port == 0 ||
            port > 65535) {
            ivm_error("malformed table line from ivmrun: '%s'", line);
            return -1;
        }
        if (b->table[k].port == 0) {
            ++s->have_nodes;
        }
        snprintf(b->table[k].node, sizeof(b->table[k].node), "node%d", k);
        snprintf(b->table[k].addr, sizeof(b->table[k].addr), "%s", addr);
        b->table[k].port = (uint16_t)port;
        return 0;
    }
    plen = strlen(IVMRUN_SRUN_JOIN);
    if (strncmp(line, IVMRUN_SRUN_JOIN, plen) == 0) {
        if (sscanf(line + plen, "%d%n", &k, &end) != 1 || line[plen + (size_t)end] != '\0') {
            ivm_error("malformed join line from ivmrun: '%s'", line);
            return -1;
        }
        return k == b->rank;
    }
    ivm_error("unexpected line from ivmrun: '%.80s'", line);
    return -1;
}

/* Which entry of --hosts SLURMD_NODENAME is: this task's node index. Also
 * checks that srun runs one task per host. 0, or -1 after logging why. */
static int ivmboot_srun_identity(ivmboot_t *b)
{
    const char *name = getenv("SLURMD_NODENAME"), *procid = getenv("SLURM_PROCID");
    const char *ntasks = getenv("SLURM_NTASKS"), *p, *comma;
    size_t n, nlen;
    int k;

    if (name == NULL || procid == NULL || ntasks == NULL) {
        ivm_error("SLURMD_NODENAME, SLURM_PROCID or SLURM_NTASKS is not set: "
                  "ivm-boot-srun runs as a task of srun (ivmrun --slurm starts it)");
        return -1;
    }
    if (b->cfg.hosts[0] == '\0') {
        ivm_error("--hosts is missing (ivmrun --slurm gives it)");
        return -1;
    }
    nlen    = strlen(name);
    b->rank = -1;
    b->size = 0;
    for (p = b->cfg.hosts, k = 0;; p = comma + 1, ++k) {
        comma = strchr(p, ',');
        n     = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        if (b->rank < 0 && n == nlen && strncmp(p, name, n) == 0) {
            b->rank = k;
        }
        b->size = k + 1;
        if (comma == NULL) {
            break;
        }
    }
    if (b->rank < 0) {
        ivm_error("task %s runs on %s, which is not one of the hosts %s", procid, name,
                  b->cfg.hosts);
        return -1;
    }
    if (atoi(ntasks) != b->size) {
        ivm_error("srun runs %s tasks for %d hosts (one task per host is needed)",
                  ntasks, b->size);
        return -1;
    }
    if (b->size > IVM_CLUSTER_MAX_NODES) {
        ivm_error("%d hosts: a cluster has at most %d nodes", b->size,
                  IVM_CLUSTER_MAX_NODES);
        return -1;
    }
    return 0;
}

/* Print one protocol line on stdout in a single write. 0 or -1 (logged). */
static int ivmboot_srun_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int ivmboot_srun_say(const char *fmt, ...)
{
    char line[IVMRUN_SRUN_LINE_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(line) ||
        ivmrun_fd_write_all(STDOUT_FILENO, line, (size_t)n) != 0) {
        ivm_error("cannot tell ivmrun: %m");
        return -1;
    }
    return 0;
}

/* Node0 tells ivmrun the Slurm step of the tasks (SLURM_JOB_ID.SLURM_STEP_ID,
 * when both are numbers): if srun dies, ivmrun stops them through it. */
static int ivmboot_srun_step(ivmboot_t *b)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");

    (void)b;
    if (job == NULL || step == NULL || job[0] == '\0' || step[0] == '\0' ||
        strspn(job, "0123456789") != strlen(job) || strspn(step, "0123456789") != strlen(step) ||
        strlen(job) + strlen(step) > 30) {
        return 0;
    }
    return ivmboot_srun_say(IVMRUN_SRUN_STEP "%s.%s\n", job, step);
}

#define IVMBOOT_SRUN_GO (-1) /* a phase's result: go on with the next */

/* Options, identity, this node's daemon, reported to ivmrun.
 * IVMBOOT_SRUN_GO, or the exit code. */
static int ivmboot_srun_start(ivmboot_t *b, int argc, char **argv)
{
    ivmboot_entry_t me;
    int code;

    code = ivmboot_args(b, argc, argv,
                        "usage: srun --nodes=N --ntasks=N --ntasks-per-node=1 "
                        "--input=all ivm-boot-srun --hosts H0,H1,... [options]\n"
                        "Started by ivmrun --slurm: each task starts its host's ivmd "
                        "(node<k> on the k-th\nhost) and joins the cluster with the "
                        "table and secret ivmrun sends on stdin;\nit keeps the daemon "
                        "until stdin ends.\n\nOptions:\n", 1);
    if (code != 0) {
        return code < 0 ? 0 : code;
    }
    if (ivmboot_srun_identity(b) != 0) {
        return 1;
    }
    ivm_log_set_prefix("node%d ivm-boot-srun", b->rank);
    b->table = calloc((size_t)b->size, sizeof(*b->table));
    if (b->table == NULL) {
        ivm_error("out of memory");
        return 1;
    }
    memset(&me, 0, sizeof(me));
    code = ivmboot_start(b, &me);
    if (code > 0) {
        return ivmboot_abandon(b, code);
    }
    if (code != 0 || ivmboot_srun_say(IVMRUN_SRUN_NODE "%d %s %u\n", b->rank, me.addr,
                                      (unsigned)me.port) != 0) {
        ivmboot_cleanup(b);
        return 1;
    }
    snprintf(b->table[b->rank].host, sizeof(b->table[b->rank].host), "%s", b->host);
    if (b->rank == 0 && ivmboot_srun_step(b) != 0) {
        ivmboot_cleanup(b);
        return 1;
    }
    return IVMBOOT_SRUN_GO;
}

/* The table and the turns, until this node's turn. IVMBOOT_SRUN_GO, or the
 * exit code. */
static int ivmboot_srun_turn(ivmboot_srun_t *s)
{
    double deadline = ivmrun_time_now() + s->b->cfg.up_wait;
    char line[IVMRUN_SRUN_LINE_MAX];
    ivmboot_t *b = s->b;
    int code, signo = 0;

    for (;;) {
        code = ivmboot_srun_line(s, line, sizeof(line), deadline, &signo);
        if (code == 0) {
            code = ivmboot_srun_take(s, line);
            explicit_bzero(line, sizeof(line));
            if (code > 0) {
                return IVMBOOT_SRUN_GO;
            }
            if (code == 0) {
                continue;
            }
        } else if (code > 0) {
            ivm_error("node%d: ivmrun's input ended before this node's turn to join",
                      b->rank);
        }
        explicit_bzero(s->secret, sizeof(s->secret));
        if (signo != 0) {
            return ivmboot_abandon(b, signo);
        }
        ivmboot_cleanup(b);
        return 1;
    }
}

/* This node's turn: the table to its daemon, JOINED, the wait for the
 * peers, UP. IVMBOOT_SRUN_GO, or the exit code. */
static int ivmboot_srun_join(ivmboot_srun_t *s)
{
    ivmboot_t *b = s->b;
    int code;

    if (!s->have_secret || s->have_nodes != b->size) {
        ivm_error("node%d: its turn to join came before the secret and the %d table "
                  "entries (got %d)", b->rank, b->size, s->have_nodes);
        code = -1;
    } else {
        code = ivmboot_send_table(b, s->secret);
    }
    explicit_bzero(s->secret, sizeof(s->secret));
    if (code == 0 && ivmboot_srun_say(IVMRUN_SRUN_JOINED "%d\n", b->rank) == 0) {
        code = ivmboot_wait_peers(b);
        if (code > 0) {
            return ivmboot_abandon(b, code);
        }
        if (code == 0) {
            code = ivmboot_srun_say(IVMRUN_SRUN_UP "%d %s\n", b->rank, b->daemon.path);
        }
    } else {
        code = -1;
    }
    if (code != 0) {
        ivmboot_cleanup(b);
        return 1;
    }
    return IVMBOOT_SRUN_GO;
}

/* 0 after an orderly stop, 1 on failure, 128 + signal. */
static int ivmboot_srun_run(ivmboot_srun_t *s, int argc, char **argv)
{
    int code = ivmboot_srun_start(s->b, argc, argv);

    if (code == IVMBOOT_SRUN_GO) {
        code = ivmboot_srun_turn(s);
    }
    if (code == IVMBOOT_SRUN_GO) {
        code = ivmboot_srun_join(s);
    }
    if (code != IVMBOOT_SRUN_GO) {
        return code;
    }
    ivmboot_wait_stop(s->b, 0);
    ivm_debug("stopping node%d's daemon", s->b->rank);
    ivmboot_cleanup(s->b);
    return 0;
}

int main(int argc, char **argv)
{
    ivmboot_srun_t *s;
    ivmboot_t *b;
    int code;

    ivm_log_set_prefix("ivm-boot-srun");
    ivm_log_init_from_env();
    s = calloc(1, sizeof(*s));
    b = calloc(1, sizeof(*b));
    if (s == NULL || b == NULL) {
        ivm_error("out of memory");
        free(s);
        free(b);
        return 1;
    }
    s->b = b;
    if (ivmboot_init(b) != 0) {
        free(s);
        free(b);
        return 1;
    }
    b->env_drop = ivmboot_srun_env;
    code = ivmboot_srun_run(s, argc, argv);
    ivmboot_release(b);
    explicit_bzero(s, sizeof(*s));
    free(s);
    free(b);
    return code;
}
