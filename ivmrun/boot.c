/*
 * ivm-boot: brings up the daemons of a real cluster. ivmrun starts it with
 * mpirun, one rank per host:
 *   mpirun -np N --host a,b,c --map-by node --bind-to none ivm-boot --hosts a,b,c
 * Rank k is node<k>: it makes a private run directory (0700) in the socket
 * directory of its host, starts `ivmd --node node<k> --listen ADDR:0` there
 * (ADDR: the address of the entry of --hosts that is its machine), reads the
 * port from the readiness line, and then all ranks exchange (node, address,
 * port) in one MPI_Allgather (after a first one of the host names); rank 0
 * draws the 32-byte cluster secret and broadcasts it; each rank sends the
 * table to its own daemon (CLUSTER; in the order of a token passed from rank
 * to rank, so that no daemon is dialed before it has the table) and waits
 * until the daemon sees every peer. Then rank 0 prints
 *   IVM-BOOT READY <node0's socket path>
 * on stdout, and every rank keeps its daemon until rank 0 is told to stop,
 * which it broadcasts; then each stops its daemon, removes its run directory
 * and ends. MPI carries nothing but that: the daemons talk to each other over
 * their own TCP connections. All MPI calls are non-blocking ones completed
 * with MPI_Test while the signals are watched.
 *
 * Two kinds of stop:
 *  - orderly: a line on rank 0's stdin (ivmrun writes IVMRUN_BOOT_STOP before
 *    it closes mpirun's stdin): every rank stops its daemon and calls
 *    MPI_Finalize;
 *  - the launcher is gone: rank 0's stdin ends without a line (ivmrun died,
 *    or mpirun is tearing the job down because a rank died) or rank 0 gets
 *    SIGTERM, SIGINT or SIGHUP. Rank 0 stops its daemon first, then tells the
 *    others (for 0.2 s at most: a rank may be dead), who stop theirs.
 * Every rank calls MPI_Finalize once its daemon is stopped (it removes MPI's
 * shared-memory segments), with SIGTERM, SIGINT and SIGHUP back to their
 * default action. After a stop of the second kind MPI_Finalize gets 0.3 s,
 * then SIGALRM ends the rank: it waits for every rank, and one may be dead,
 * in which case mpirun is ending the job and removes the segments itself
 * (it would kill the waiting ranks only a second or two later).
 *
 * A rank that gets a terminating signal itself (mpirun forwards SIGTERM when
 * it is killed) stops its daemon and leaves without MPI. The daemons get
 * SIGTERM if their ivm-boot dies (PR_SET_PDEATHSIG), which makes them clean
 * up, and remove the run directory (ivmd --remove-dir).
 *
 * What a node does for itself (run directory, ivmd, CLUSTER, the wait for the
 * peers, the stop) is in bootnode.c, shared with ivm-boot-srun (bootsrun.c);
 * only the MPI exchange is here.
 */
#include "boot.h"

#include <errno.h>
#include <mpi.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"
#include "proto.h"
#include "status.h"
#include "version.h"

#define IVMBOOT_MPI_POLL  50   /* ms between MPI_Test calls, at most */
#define IVMBOOT_GONE_WAIT 0.2  /* s rank 0 tries to tell the others the launcher is gone */
#define IVMBOOT_FINALIZE_WAIT_US 300000 /* then MPI_Finalize may take this long */

/* What rank 0 broadcasts at the end. */
#define IVMBOOT_STOP_ORDERLY 1 /* told to stop */
#define IVMBOOT_STOP_GONE    2 /* the launcher is gone: rank 0's daemon is stopped */

/* Variables of mpirun that ivmd and its PEs must not inherit. */
static const char *const ivmboot_mpi_env[] = {"OMPI_", "PMIX_", "OPAL_", "ORTE_", "PRTE_",
                                              NULL};

/* Wait for a non-blocking MPI operation, watching the signals meanwhile, at
 * most limit seconds (< 0: no limit). Returns 0 when it completed, the
 * terminating signal that came first, or -1 when the time is up. */
static int ivmboot_mpi_wait_for(ivmboot_t *b, MPI_Request *req, double limit)
{
    struct pollfd pfd = {.fd = b->sigfd, .events = POLLIN};
    double deadline = ivmrun_time_now() + limit;
    int done = 0, term, wait_ms = 1;

    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) {
            return 0;
        }
        if (limit >= 0 && ivmrun_time_now() >= deadline) {
            return -1;
        }
        if (poll(&pfd, 1, wait_ms) > 0) {
            term = ivmboot_signals(b);
            if (term != 0) {
                return term;
            }
        }
        wait_ms = (wait_ms * 2 > IVMBOOT_MPI_POLL) ? IVMBOOT_MPI_POLL : wait_ms * 2;
    }
}

/* The same without a time limit: 0, or the terminating signal. */
static int ivmboot_mpi_wait(ivmboot_t *b, MPI_Request *req)
{
    return ivmboot_mpi_wait_for(b, req, -1.0);
}

/* Send the table to this rank's daemon and wait until it sees every peer.
 * 0, -1 on failure, or a signal number. */
static int ivmboot_join(ivmboot_t *b, const uint8_t *secret)
{
    int term, pos, prev = -1, next = -1, token = 1, *order, code;
    MPI_Request mreq;

    /* The order in which the daemons get the table (ivmrun_join_order); a
     * token passed from rank to rank keeps it. */
    order = calloc((size_t)b->size, sizeof(*order));
    if (order == NULL) {
        ivm_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ivmrun_join_order(b->size, order);
    for (pos = 0; pos < b->size; ++pos) {
        if (order[pos] == b->rank) {
            prev = (pos > 0) ? order[pos - 1] : -1;
            next = (pos + 1 < b->size) ? order[pos + 1] : -1;
        }
    }
    free(order);
    if (prev >= 0) {
        MPI_Irecv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &mreq);
        if ((term = ivmboot_mpi_wait(b, &mreq)) != 0) {
            return term;
        }
    }
    code = ivmboot_send_table(b, secret);
    if (next >= 0) { /* the next node's turn, whatever happened here */
        MPI_Isend(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD, &mreq);
        if ((term = ivmboot_mpi_wait(b, &mreq)) != 0) {
            return term;
        }
    }
    if (code != 0) {
        return -1;
    }
    return ivmboot_wait_peers(b);
}

#define IVMBOOT_GO (-1) /* a phase's result: go on with the next */

/* Options, and the table. IVMBOOT_GO, or the exit code. */
static int ivmboot_mpi_args(ivmboot_t *b, int argc, char **argv)
{
    int code = ivmboot_args(b, argc, argv,
                            "usage: mpirun -np N --host H0,H1,... --map-by node --bind-to "
                            "none ivm-boot [options]\n"
                            "Started by ivmrun --hosts/--hostfile: one rank per host starts "
                            "that host's ivmd\n(node<rank>) and joins the daemons into one "
                            "cluster. Rank 0 prints\n\"" IVMRUN_BOOT_READY "<socket>\" and "
                            "keeps the cluster until its stdin ends.\n\nOptions:\n",
                            b->rank == 0);

    if (code != 0) {
        return code < 0 ? 0 : code; /* the same on every rank */
    }
    if (b->size > IVM_CLUSTER_MAX_NODES) {
        ivm_error("%d ranks: a cluster has at most %d nodes", b->size,
                  IVM_CLUSTER_MAX_NODES);
        return 2;
    }
    b->table = calloc((size_t)b->size, sizeof(*b->table));
    if (b->table == NULL) {
        ivm_error("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return IVMBOOT_GO;
}

/* Every rank's entry into b->table. IVMBOOT_GO, or the exit code. */
static int ivmboot_mpi_gather(ivmboot_t *b, ivmboot_entry_t *me)
{
    MPI_Request req;
    int term;

    MPI_Iallgather(me, (int)sizeof(*me), MPI_BYTE, b->table, (int)sizeof(*me), MPI_BYTE,
                   MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }
    return IVMBOOT_GO;
}

/* Host names, then the daemons and one exchange of every node's (name,
 * address, port). IVMBOOT_GO, or the exit code. */
static int ivmboot_mpi_start(ivmboot_t *b)
{
    ivmboot_entry_t me;
    int code, ok = 1, k;

    /* Host names first: without --hosts they tell whether the ranks share a
     * machine, and they name the nodes in messages. */
    memset(&me, 0, sizeof(me));
    snprintf(me.host, sizeof(me.host), "%s", b->host);
    if ((code = ivmboot_mpi_gather(b, &me)) != IVMBOOT_GO) {
        return code;
    }
    code = ivmboot_start(b, &me);
    if (code > 0) {
        return ivmboot_abandon(b, code);
    }
    snprintf(me.node, sizeof(me.node), "node%d", b->rank);
    me.ok = (code == 0);
    if ((code = ivmboot_mpi_gather(b, &me)) != IVMBOOT_GO) {
        return code;
    }
    for (k = 0; k < b->size; ++k) {
        if (!b->table[k].ok) {
            ok = 0;
            if (b->rank == 0) {
                ivm_error("node%d (host %s) could not start its daemon (see its "
                          "messages above)", k, b->table[k].host);
            }
        }
    }
    if (!ok) {
        ivmboot_cleanup(b);
        return 1;
    }
    return IVMBOOT_GO;
}

/* The secret from rank 0 to every rank, each daemon joins, everyone up
 * everywhere? IVMBOOT_GO, or the exit code. */
static int ivmboot_mpi_join(ivmboot_t *b)
{
    uint8_t secret[IVM_SECRET_LEN + 1]; /* the last byte: 1 = rank 0 made one */
    MPI_Request req;
    int code, ok, all_ok, term;

    memset(secret, 0, sizeof(secret));
    if (b->rank == 0) {
        secret[IVM_SECRET_LEN] =
            getrandom(secret, IVM_SECRET_LEN, 0) == (ssize_t)IVM_SECRET_LEN;
        if (!secret[IVM_SECRET_LEN]) {
            ivm_error("cannot make the cluster secret: getrandom: %m");
        }
    }
    MPI_Ibcast(secret, (int)sizeof(secret), MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        explicit_bzero(secret, sizeof(secret));
        return ivmboot_abandon(b, term);
    }
    code = secret[IVM_SECRET_LEN] ? ivmboot_join(b, secret) : -1;
    explicit_bzero(secret, sizeof(secret));
    if (code > 0) {
        return ivmboot_abandon(b, code);
    }
    ok = (code == 0);
    MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    if ((term = ivmboot_mpi_wait(b, &req)) != 0) {
        return ivmboot_abandon(b, term);
    }
    if (!all_ok) {
        if (b->rank == 0) {
            ivm_error("the cluster did not form (see the messages above)");
        }
        ivmboot_cleanup(b);
        return 1;
    }
    return IVMBOOT_GO;
}

/* Keep the daemons until rank 0 says stop; then stop this rank's. The exit
 * code; *gone_p: 1 after a stop because the launcher is gone. */
static int ivmboot_mpi_hold(ivmboot_t *b, int *gone_p)
{
    int stop = 0, how = 0, term;
    MPI_Request req;

    if (b->rank == 0) {
        printf(IVMRUN_BOOT_READY "%s\n", b->daemon.path);
        fflush(stdout);
        how = ivmboot_wait_stop(b, 1);
        if (how == 0) {
            stop = IVMBOOT_STOP_ORDERLY;
        } else {
            ivm_info("the launcher is gone; stopping every node's daemon");
            ivmboot_cleanup(b); /* this node's first, whatever MPI does next */
            stop = IVMBOOT_STOP_GONE;
        }
    }
    /* Until rank 0 says stop. Another rank's own signal ends it alone. */
    MPI_Ibcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    term = ivmboot_mpi_wait_for(b, &req, (b->rank == 0 && stop == IVMBOOT_STOP_GONE)
                                             ? IVMBOOT_GONE_WAIT : -1.0);
    if (term > 0) {
        return ivmboot_abandon(b, term);
    }
    if (how > 0) {
        return ivmboot_abandon(b, how); /* a signal: no MPI_Finalize, as on any rank */
    }
    ivm_debug("stopping node%d's daemon", b->rank);
    ivmboot_cleanup(b);
    *gone_p = (stop == IVMBOOT_STOP_GONE);
    return 0;
}

/* *gone_p: 1 after a stop because the launcher is gone. */
static int ivmboot_run(ivmboot_t *b, int argc, char **argv, int *gone_p)
{
    int code = ivmboot_mpi_args(b, argc, argv);

    if (code == IVMBOOT_GO) {
        code = ivmboot_mpi_start(b);
    }
    if (code == IVMBOOT_GO) {
        code = ivmboot_mpi_join(b);
    }
    if (code == IVMBOOT_GO) {
        code = ivmboot_mpi_hold(b, gone_p);
    }
    return code;
}

/* MPI_Finalize once the daemon is stopped; see the top of this file. */
static void ivmboot_finalize(ivmboot_t *b, int gone)
{
    struct itimerval bound = {.it_value = {.tv_usec = IVMBOOT_FINALIZE_WAIT_US}};

    sigprocmask(SIG_SETMASK, &b->child_mask, NULL);
    if (gone) {
        signal(SIGALRM, SIG_DFL);
        setitimer(ITIMER_REAL, &bound, NULL);
    }
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    ivmboot_t *b;
    int code, gone = 0;

    ivm_log_set_prefix("ivm-boot");
    ivm_log_init_from_env();
    /* --version needs no MPI: answered before MPI_Init, run by hand too. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
            ivm_version_print(stdout, "ivm-boot");
            return 0;
        }
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        ivm_error("out of memory");
        return 1;
    }
    /* Signals are blocked before MPI_Init starts MPI's threads. */
    if (ivmboot_init(b) != 0) {
        free(b);
        return 1;
    }
    b->env_drop = ivmboot_mpi_env;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        ivm_error("MPI_Init failed (ivm-boot runs under mpirun)");
        ivmboot_release(b);
        free(b);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    ivm_log_set_prefix("node%d ivm-boot", b->rank);

    code = ivmboot_run(b, argc, argv, &gone);
    if (code < 128) {
        ivmboot_finalize(b, gone); /* every rank took the same path here */
    }
    ivmboot_release(b);
    free(b);
    return code;
}
