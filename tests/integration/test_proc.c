/* Integration: PE creation, wait/signal, kill, max PE id, DS-LB chain, the
 * end of a job, threads; against the real ivmd. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(proc, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 40);

Test(proc, create_pes_ids_groups_numpes)
{
    ivmt_scenario(IVMT_PE_PROC, "pes", NULL, NULL, 25);
}

Test(proc, signal_before_wait)
{
    ivmt_scenario(IVMT_PE_PROC, "signal_before_wait", NULL, NULL, 25);
}

Test(proc, wait_before_signal)
{
    ivmt_scenario(IVMT_PE_PROC, "wait_before_signal", NULL, NULL, 25);
}

Test(proc, wait_on_exited_pe)
{
    ivmt_scenario(IVMT_PE_PROC, "wait_exit", NULL, NULL, 25);
}

Test(proc, wait_on_aborted_pe)
{
    static const char *const args[] = {"abort", NULL};
    ivmt_scenario(IVMT_PE_PROC, "wait_failed", args, NULL, 25);
}

Test(proc, wait_on_segfaulted_pe)
{
    static const char *const args[] = {"segv", NULL};
    ivmt_scenario(IVMT_PE_PROC, "wait_failed", args, NULL, 25);
}

Test(proc, wait_on_pe_exiting_without_ivmexit)
{
    static const char *const args[] = {"exit", NULL};
    ivmt_scenario(IVMT_PE_PROC, "wait_failed", args, NULL, 25);
}

Test(proc, kill_pes)
{
    ivmt_scenario(IVMT_PE_PROC, "kill", NULL, NULL, 25);
}

Test(proc, set_max_pes_id)
{
    ivmt_scenario(IVMT_PE_PROC, "maxid", NULL, NULL, 25);
}

Test(proc, dslb_chain_of_200, .timeout = 90)
{
    ivmt_result_t r;

    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "chain", NULL, NULL, 60, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "chain");
    cr_assert_lt(r.seconds, 30.0, "a chain of 200 PEs took %.1f s", r.seconds);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

Test(proc, threads)
{
    ivmt_scenario(IVMT_PE_THREADS, "threads", NULL, NULL, 25);
}

/* The root PE ends while its children run: they are terminated. */
static void root_end(const char *how, int expect_signal)
{
    const char *args[] = {how, NULL};
    ivmt_result_t r;
    pid_t pids[3];
    int n, left;
    char *why;

    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "root_end", args, NULL, 25, &r);
    why = ivmt_describe(&ivmt_d, &r);
    cr_assert_not(r.timed_out, "%s", why);
    if (expect_signal) {
        cr_assert_eq(r.signo, SIGKILL, "%s", why);
    } else {
        cr_assert(r.exited && r.code == 0, "%s", why);
    }
    cr_assert(strstr(r.out, "OK root_end\n") != NULL && strstr(r.out, "FAIL") == NULL, "%s",
              why);
    n = ivmt_parse_pids(r.out, "PIDS", pids, 3);
    cr_assert_eq(n, 3, "children's pids not reported: %s", why);
    left = ivmt_wait_pids_gone(pids, n, 3.0);
    cr_assert_eq(left, 0, "%d of the children are still running 3 s after the root PE "
                 "ended (%s): %s", left, how, why);
    free(why);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

Test(proc, root_exit_terminates_children)
{
    root_end("exit", 0);
}

Test(proc, root_return_without_ivmexit_terminates_children)
{
    root_end("return", 0);
}

Test(proc, root_sigkill_terminates_children)
{
    root_end("sigkill", 1);
}
