/* Integration: the calls beyond Table 5-1 that programs synchronise with
 * (issue 16): discovery of nodes and devices, signals addressed to one PE,
 * barriers over a list of PEs or the whole job, put-with-signal; each on one
 * node and on three simulated nodes (ivmrun --nodes 1|3), with the partner
 * or a member dying while it is waited for. Each run has a private socket
 * directory; no process or file of the run may be left after it. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(psync, .timeout = 120);

/* ivmrun --nodes N --timeout 60 [-x VAR=VAL] pe_psync SCENARIO [ARG], its
 * daemons and PEs with env (NULL-terminated "NAME=VALUE"s; NULL: none)
 * added; must print OK. */
static void run_psync_env(const char *nodes, const char *x, const char *const *env,
                          const char *scenario, const char *arg)
{
    const char *argv[12] = {"--nodes", nodes, "--timeout", "60"};
    int argc = 4;
    ivmt_result_t r;
    ivmt_launch_t c;
    const char *line;

    if (x != NULL) {
        argv[argc++] = "-x";
        argv[argc++] = x;
    }
    argv[argc++] = IVMT_PE_PSYNC;
    argv[argc++] = scenario;
    argv[argc++] = arg;
    argv[argc]   = NULL;
    ivmt_launch_start_env(IVMT_IVMRUN, argv, env, &c);
    ivmt_launch_finish_clean(&c, 75, &r);
    ivmt_expect_pe_ok(NULL, &r, scenario);
    for (line = r.out; line != NULL && *line != '\0'; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, "HALO ", 5) == 0 || strncmp(line, "BARRIER ", 8) == 0 ||
            strncmp(line, "NODE ", 5) == 0 || strncmp(line, "OWN ", 4) == 0 ||
            strncmp(line, "TOLD ", 5) == 0) {
            cr_log_info("--nodes %s%s%s: %.*s", nodes, x ? " -x " : "", x ? x : "",
                        (int)strcspn(line, "\n"), line);
        }
    }
    ivmt_result_free(&r);
}

static void run_psync_x(const char *nodes, const char *x, const char *scenario, const char *arg)
{
    run_psync_env(nodes, x, NULL, scenario, arg);
}

static void run_psync(const char *nodes, const char *scenario, const char *arg)
{
    run_psync_x(nodes, NULL, scenario, arg);
}

/* The same with the daemons sending no PLACED (ivmd's IVM_PSYNC_PLACES=0;
 * the harness passes no IVM_* of its own environment on). */
static const char *const no_places[] = {"IVM_PSYNC_PLACES=0", NULL};

static void run_psync_no_places(const char *nodes, const char *scenario, const char *arg)
{
    run_psync_env(nodes, NULL, no_places, scenario, arg);
}

Test(psync, discovery_one_node) { run_psync("1", "discover", "1"); }

/* ivmrun --nodes 3 --node-slots 2:2,1,3:3: every node's slots reach every
 * daemon (ivmGetNodeSlots); creates past a max_slots fail with
 * IVM_ERROR_LIMIT and leave nothing behind; slots alone does not limit. */
Test(psync, node_slots_three_nodes)
{
    const char *argv[] = {"--nodes", "3", "--timeout", "60", "--node-slots", "2:2,1,3:3",
                          IVMT_PE_PSYNC, "slots", "2:2,1:0,3:3", NULL};
    ivmt_result_t r;
    ivmt_launch_t c;

    ivmt_launch_start(IVMT_IVMRUN, argv, &c);
    ivmt_launch_finish_clean(&c, 75, &r);
    ivmt_expect_pe_ok(NULL, &r, "slots");
    cr_log_info("%s", r.out);
    ivmt_result_free(&r);
}

/* One daemon, no cluster table: no node is limited. */
Test(psync, node_slots_one_node) { run_psync("1", "slots", "0:0"); }
Test(psync, discovery_three_nodes) { run_psync("3", "discover", "3"); }

Test(psync, halo_exchange_one_node) { run_psync("1", "halo", "60"); }
Test(psync, halo_exchange_three_nodes) { run_psync("3", "halo", "60"); }

Test(psync, addressed_signal_faults_one_node) { run_psync("1", "p2p_fail", NULL); }
Test(psync, addressed_signal_faults_three_nodes) { run_psync("3", "p2p_fail", NULL); }

/* ivmSignal / ivmWait with the root's node keeping the counts on its
 * board: the PEs on the board too, or through the daemon. */
Test(psync, own_signals_one_node) { run_psync_x("1", NULL, "own", "20"); }
Test(psync, own_signals_three_nodes) { run_psync_x("3", NULL, "own", "20"); }
Test(psync, own_signals_one_node_pes_through_the_daemon)
{
    run_psync_x("1", NULL, "own", "20,daemon");
}
Test(psync, own_signals_three_nodes_pes_through_the_daemon)
{
    run_psync_x("3", NULL, "own", "20,daemon");
}

Test(psync, barrier_one_node) { run_psync("1", "barrier", "40"); }
Test(psync, barrier_three_nodes) { run_psync("3", "barrier", "40"); }

/* node1 <-> node2 without the root's node: put-with-signal rows checked
 * byte by byte over 300 rounds, a signal posted before the sender's death,
 * a barrier across the three nodes whose member is killed. */
Test(psync, far_pair_three_nodes) { run_psync("3", "far_pair", "300"); }

/* The same with ivmSyncPutSignal as two calls (put, then signal). */
Test(psync, far_pair_three_nodes_two_calls)
{
    run_psync_x("3", "IVM_PUT_SIGNAL=0", "far_pair", "100");
}

/* The same, and the faults, with the root's daemon sending no PLACED
 * (ivmd --psync-places 0): every node daemon learns each PE's place by
 * forwarding its first request to the root, which sends the place and the
 * request back (far_pair checks that it did). The ivmds inherit ivmrun's
 * environment. */
Test(psync, far_pair_three_nodes_by_the_roots_bounce)
{
    run_psync_no_places("3", "far_pair", "50");
}
Test(psync, addressed_signal_faults_three_nodes_by_the_roots_bounce)
{
    run_psync_no_places("3", "p2p_fail", NULL);
}
/* Without PLACED every node daemon still knows where the root PE is: a new
 * PE's first ivmWaitFrom(0) takes no detour through the root (pe_psync.c,
 * root_placed). */
Test(psync, root_pe_placed_without_a_table_three_nodes)
{
    run_psync_no_places("3", "root_placed", NULL);
}
Test(psync, far_wait_sees_its_sender_node_lost_by_the_roots_bounce)
{
    run_psync_no_places("3", "far_lost", NULL);
}

/* A job that starts PE after PE on two nodes (a DS-LB chain's pattern): the
 * root's daemon sends node1 the job's table of places once, not after every
 * SPAWN (INFO places_told bounded by the job's PEs), and the addressed
 * signals of PEs made afterwards still find their places. */
Test(psync, table_of_places_goes_to_a_node_once) { run_psync("2", "table_once", "16"); }

/* node1's daemon killed while a PE of node2 waits from one of node1's (their
 * pair at node2's daemon): IVM_ERROR_PE_FAILED, no hang. */
Test(psync, far_wait_sees_its_sender_node_lost) { run_psync("3", "far_lost", NULL); }

Test(psync, barrier_member_dies_one_node) { run_psync("1", "barrier_fail", NULL); }
Test(psync, barrier_member_dies_three_nodes) { run_psync("3", "barrier_fail", NULL); }

/* The same on one node with the signal board off: every signal through the
 * daemon (the path PEs of different nodes take). */
Test(psync, halo_exchange_one_node_through_the_daemon)
{
    run_psync_x("1", "IVM_SIGNAL_BOARD=0", "halo", "60");
}
Test(psync, addressed_signal_faults_one_node_through_the_daemon)
{
    run_psync_x("1", "IVM_SIGNAL_BOARD=0", "p2p_fail", NULL);
}
Test(psync, barrier_one_node_through_the_daemon)
{
    run_psync_x("1", "IVM_SIGNAL_BOARD=0", "barrier", "40");
}
Test(psync, barrier_member_dies_one_node_through_the_daemon)
{
    run_psync_x("1", "IVM_SIGNAL_BOARD=0", "barrier_fail", NULL);
}

/* Two PEs of node1 asleep on the signal board (ivmWaitFrom, ivmBarrier) when
 * node1's daemon is killed: both get IVM_ERROR_DAEMON_LOST (checked by the
 * root through files in a temporary directory). */
static char board_dir[] = "/tmp/ivmt-board-XXXXXX";

/* Also when the test failed: its directory and what the PEs left in it. */
static void board_dir_fini(void)
{
    if (strchr(board_dir, 'X') == NULL) {
        ivmt_remove_dir(board_dir);
    }
}

Test(psync, board_waiters_see_their_daemon_die, .fini = board_dir_fini)
{
    cr_assert_not_null(mkdtemp(board_dir));
    run_psync_x("2", NULL, "board_lost", board_dir);
    cr_assert_eq(rmdir(board_dir), 0, "%s is not empty", board_dir);
}
