/* Integration: PE creation, wait/signal, kill, max PE id, DS-LB chain, the
 * end of a job, threads; against the real ivmd. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    cr_assert(strstr(r.out, "OK root_end\n") != NULL && strstr(r.out, "FAIL [") == NULL, "%s",
              why);
    n = ivmt_parse_pids(r.out, "PIDS", pids, 3);
    cr_assert_eq(n, 3, "children's pids not reported: %s", why);
    left = ivmt_wait_pids_gone(pids, n, ivmt_leftover_grace_s());
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

Test(proc, any_pe_waits_on_and_kills_any_pe)
{
    ivmt_scenario(IVMT_PE_PROC, "sibling", NULL, NULL, 25);
}

Test(proc, create_pes_returns_before_the_pe_runs)
{
    ivmt_scenario(IVMT_PE_PROC, "create_early", NULL, NULL, 25);
}

static int count_lines(const char *out, const char *line)
{
    size_t len = strlen(line);
    int n = 0;

    for (const char *p = out; (p = strstr(p, line)) != NULL; p += len) {
        if (p == out || p[-1] == '\n') {
            ++n;
        }
    }
    return n;
}

/* Children's stdout and stderr go where the root's go; IVM_TAG_OUTPUT=1 makes
 * the daemon prefix the children's lines with "[NODE,N] ". */
static void children_output(int tagged)
{
    static const char *const tag_env[] = {"IVM_TAG_OUTPUT=1", NULL};
    ivmt_result_t r;
    char *why;

    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "hello", NULL, tagged ? tag_env : NULL, 25, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "hello");
    why = ivmt_describe(&ivmt_d, &r);
    cr_assert_eq(count_lines(r.out, "hello from pe 0\n"), 1, "%s", why);
    cr_assert_eq(count_lines(r.err, "err from pe 0\n"), 1, "%s", why);
    for (int i = 1; i <= 2; ++i) {
        char out[64], err[64];
        snprintf(out, sizeof(out), "%shello from pe %d\n", tagged ? "[node0,X] " : "", i);
        snprintf(err, sizeof(err), "%serr from pe %d\n", tagged ? "[node0,X] " : "", i);
        if (tagged) {
            out[7] = err[7] = (char)('0' + i);
        }
        cr_assert_eq(count_lines(r.out, out), 1, "child's stdout line '%s' missing: %s", out,
                     why);
        cr_assert_eq(count_lines(r.err, err), 1, "child's stderr line '%s' missing: %s", err,
                     why);
    }
    if (!tagged) {
        cr_assert_null(strstr(r.out, "[node0,"), "tagged without IVM_TAG_OUTPUT: %s", why);
    }
    free(why);
    ivmt_result_free(&r);
    ivmt_daemon_finish(&ivmt_d);
}

Test(proc, children_output_goes_to_the_roots_streams)
{
    children_output(0);
}

Test(proc, children_output_tagged)
{
    children_output(1);
}

/* SIGTERM to ivmd while a job runs: the blocked root gets an error instead of
 * hanging, the children die, the daemon exits 0 and removes its socket. */
Test(proc, daemon_terminated_during_a_job)
{
    ivmt_proc_t p;
    ivmt_result_t r;
    pid_t pids[1];
    char *why, *out;

    ivmt_start_pe(&ivmt_d, IVMT_PE_PROC, "daemon_lost", NULL, NULL, &p);
    if (!ivmt_wait_output(&p, "READY\n", 20)) {
        ivmt_finish(&p, 1, &r);
        why = ivmt_describe(&ivmt_d, &r);
        cr_assert_fail("the job never got ready: %s", why);
    }
    out = ivmt_proc_output(&p);
    cr_assert_eq(ivmt_parse_pids(out, "PIDS", pids, 1), 1, "%s", out);
    free(out);
    ivmt_sleep_ms(200); /* the root is blocked in ivmWait now */
    ivmt_daemon_terminate(&ivmt_d);
    ivmt_finish(&p, 10, &r);
    ivmt_expect_pe_ok(NULL, &r, "daemon_lost");
    cr_assert_eq(ivmt_wait_pids_gone(pids, 1, ivmt_leftover_grace_s()), 0,
                 "the child PE survived its daemon");
    ivmt_result_free(&r);
}

/* Two jobs on one daemon at once: separate group ids, objects and PEs. */
Test(proc, two_jobs_are_isolated)
{
    char dir[IVMT_PATH_MAX];
    const char *args[] = {dir, NULL};
    ivmt_proc_t a;
    ivmt_result_t ra, rb;

    ivmt_make_tmpdir(dir, sizeof(dir));
    ivmt_start_pe(&ivmt_d, IVMT_PE_PROC, "iso_a", args, NULL, &a);
    ivmt_run_pe(&ivmt_d, IVMT_PE_PROC, "iso_b", args, NULL, 30, &rb);
    ivmt_finish(&a, 30, &ra);
    ivmt_remove_dir(dir);
    ivmt_expect_pe_ok(&ivmt_d, &rb, "iso_b");
    ivmt_expect_pe_ok(&ivmt_d, &ra, "iso_a");
    ivmt_result_free(&ra);
    ivmt_result_free(&rb);
    ivmt_daemon_finish(&ivmt_d);
}

Test(proc, max_pes_id_is_job_wide)
{
    ivmt_scenario(IVMT_PE_PROC, "maxid_global", NULL, NULL, 25);
}

Test(proc, several_threads_wait_on_one_pe)
{
    ivmt_scenario(IVMT_PE_PROC, "multi_waiters", NULL, NULL, 25);
}
