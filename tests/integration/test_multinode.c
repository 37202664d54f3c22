/* Integration: two simulated nodes through ivmrun --nodes 2 (SPEC sections 1-3):
 * node copies and the four sync directions, tile reuse, PEs across nodes.
 * Each run has a private socket directory; nothing may be left after it. */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "harness.h"

TestSuite(multinode, .timeout = 90);

static void run_nodes(const char *scenario, ivmt_result_t *r)
{
    const char *args[] = {"--nodes", "2", "--timeout", "60", IVMT_PE_NODES, scenario, NULL};
    ivmt_launch_t c;

    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    ivmt_launch_finish(&c, 75, r);
}

Test(multinode, sync_directions_between_nodes)
{
    ivmt_result_t r;

    run_nodes("sync_nodes", &r);
    ivmt_expect_pe_ok(NULL, &r, "sync_nodes");
    ivmt_result_free(&r);
}

Test(multinode, second_map_of_a_held_region_moves_no_data)
{
    ivmt_result_t r;

    run_nodes("reuse_nodes", &r);
    ivmt_expect_pe_ok(NULL, &r, "reuse_nodes");
    ivmt_result_free(&r);
}

Test(multinode, pes_across_nodes)
{
    ivmt_result_t r;
    pid_t pids[2];

    run_nodes("procs_nodes", &r);
    ivmt_expect_pe_ok(NULL, &r, "procs_nodes");
    cr_assert_eq(ivmt_parse_pids(r.out, "PIDS", pids, 2), 2, "%s", r.out);
    cr_assert_eq(ivmt_wait_pids_gone(pids, 2, 3.0), 0,
                 "PEs on node1 outlived the job's root PE");
    ivmt_result_free(&r);
}
