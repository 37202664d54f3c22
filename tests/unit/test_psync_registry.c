/* Unit tests of the registry's addressed signals and barriers
 * (ivmd/ctl/psync.c): per-pair counting, FIFO waiters, the sender's end,
 * list and whole-job barriers, their failure when a member dies, and the
 * cancellation of a closed connection's requests. Pure logic: the replies
 * are recorded. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "ctl/job.h"
#include "ctl/psync.h"
#include "proto.h"

#define MAXREC 64

typedef struct rec {
    void      *owner;
    uint32_t   seq;
    uint16_t   type;
    ivmError_t status;
    char       why[128];
} rec_t;

static rec_t recs[MAXREC];
static int nrecs;

static void rec_wait_done(void *ctx, void *owner, uint32_t seq, uint16_t type,
                          ivmError_t status, const char *why)
{
    (void)ctx;
    cr_assert_lt(nrecs, MAXREC);
    recs[nrecs] = (rec_t){.owner = owner, .seq = seq, .type = type, .status = status};
    snprintf(recs[nrecs].why, sizeof(recs[nrecs].why), "%s", why ? why : "");
    ++nrecs;
}

static void rec_obj_release(void *ctx, ivmd_obj_t *obj)
{
    (void)ctx;
    (void)obj;
}

static const ivmd_job_ops_t rec_ops = {
    .wait_done   = rec_wait_done,
    .obj_release = rec_obj_release,
};

static ivmd_registry_t reg;
static ivm_cpu_device_t devs[1];
static ivmd_job_t *job;
static ivmd_pe_t *pe[5];
static int conn[5]; /* stand-ins for each PE's connection */

static void setup(void)
{
    char err[128];
    int n, i;

    nrecs = 0;
    ivmd_registry_init(&reg, &rec_ops, NULL);
    cr_assert_eq(ivm_devspec_parse("0", 0, devs, 1, &n, err, sizeof(err)), IVM_SUCCESS);
    cr_assert_eq(ivmd_job_create(&reg, devs, 1, &job), IVM_SUCCESS);
    pe[0] = ivmd_pe_find(job, 0);
    for (i = 1; i < 5; ++i) {
        cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(0), &pe[i]), IVM_SUCCESS);
        ivmd_pe_enter(pe[i], &conn[i]);
    }
}

static void teardown(void)
{
    ivmd_registry_cleanup(&reg);
}

TestSuite(psync, .init = setup, .fini = teardown, .timeout = 10);

static void wait_from(int me, int from, uint32_t seq, ivmError_t want, int want_queued)
{
    int queued = -1;

    cr_assert_eq(ivmd_psync_wait_from(&reg, job, pe[me], from, &conn[me], seq, IVM_MSG_WAIT_FROM,
                                      &queued),
                 want, "pe %d waits from %d", me, from);
    cr_assert_eq(queued, want_queued, "pe %d waits from %d: queued %d", me, from, queued);
}

static void barrier(int me, const int32_t *ids, int n, uint32_t seq, ivmError_t want,
                    int want_queued)
{
    int queued = -1, bad = -1;

    cr_assert_eq(ivmd_psync_barrier(&reg, job, pe[me], ids, n, &conn[me], seq, IVM_MSG_BARRIER,
                                    &queued, &bad),
                 want, "pe %d at a barrier", me);
    cr_assert_eq(queued, want_queued, "pe %d at a barrier: queued %d", me, queued);
}

Test(psync, signals_are_counted_per_pair)
{
    /* 1 signals 3 twice, 2 signals 3 once: 3 takes exactly those. */
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 3), IVM_SUCCESS);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 3), IVM_SUCCESS);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[2]->id, 3), IVM_SUCCESS);
    wait_from(3, 1, 1, IVM_SUCCESS, 0);
    wait_from(3, 2, 2, IVM_SUCCESS, 0);
    wait_from(3, 1, 3, IVM_SUCCESS, 0);
    wait_from(3, 2, 4, IVM_SUCCESS, 1); /* 2's only signal is taken */
    /* 4 cannot take a signal meant for 3. */
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 3), IVM_SUCCESS);
    wait_from(4, 1, 5, IVM_SUCCESS, 1);
    cr_assert_eq(nrecs, 0);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[2]->id, 3), IVM_SUCCESS);
    cr_assert_eq(nrecs, 1);
    cr_assert_eq(recs[0].owner, &conn[3]);
    cr_assert_eq(recs[0].seq, 4);
    cr_assert_eq(recs[0].type, IVM_MSG_WAIT_FROM);
    cr_assert_eq(recs[0].status, IVM_SUCCESS);
    cr_assert_eq(job->psync_waiting, 1, "4's wait is still queued");
}

Test(psync, unknown_ids)
{
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 7), IVM_ERROR_NOT_FOUND);
    wait_from(1, 9, 1, IVM_ERROR_NOT_FOUND, 0);
}

Test(psync, waiters_fifo_and_sender_end)
{
    wait_from(3, 1, 10, IVM_SUCCESS, 1);
    wait_from(3, 1, 11, IVM_SUCCESS, 1); /* a second thread of 3 */
    wait_from(4, 2, 12, IVM_SUCCESS, 1);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 3), IVM_SUCCESS);
    cr_assert_eq(nrecs, 1);
    cr_assert_eq(recs[0].seq, 10, "the oldest waiter first");
    ivmd_pe_end(&reg, pe[1], 1);
    cr_assert_eq(nrecs, 2);
    cr_assert_eq(recs[1].seq, 11);
    cr_assert_eq(recs[1].status, IVM_ERROR_PE_FAILED);
    cr_assert(strstr(recs[1].why, "pe 1") != NULL, "the detail names the PE: %s", recs[1].why);
    ivmd_pe_end(&reg, pe[2], 0);
    cr_assert_eq(nrecs, 3);
    cr_assert_eq(recs[2].seq, 12);
    cr_assert_eq(recs[2].status, IVM_SUCCESS, "an exited sender releases its waiters");
    wait_from(3, 1, 13, IVM_ERROR_PE_FAILED, 0);
    wait_from(3, 2, 14, IVM_SUCCESS, 0);
    cr_assert_eq(job->psync_waiting, 0);
}

Test(psync, signal_posted_before_the_end_is_consumed_first)
{
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 2), IVM_SUCCESS);
    ivmd_pe_end(&reg, pe[1], 1);
    wait_from(2, 1, 1, IVM_SUCCESS, 0);
    wait_from(2, 1, 2, IVM_ERROR_PE_FAILED, 0);
}

/* Places of other nodes' PEs (the receiver's daemon keeps the pair): a
 * place is waited from like a PE here; a not-final end (the root's word)
 * does not end a place already known running (its node's SIGNALs may still
 * be on their way), a final one does, after the signals posted before it;
 * a lost node fails its running places. */
Test(psync, places_of_other_nodes)
{
    int node;

    cr_assert_eq(ivmd_psync_where(job, 20, &node), IVMD_PLACE_UNKNOWN);
    wait_from(3, 20, 1, IVM_ERROR_NOT_FOUND, 0);
    cr_assert_eq(ivmd_psync_place(job, 20, 2), IVM_SUCCESS);
    cr_assert_eq(ivmd_psync_place(job, 21, 2), IVM_SUCCESS);
    cr_assert_eq(ivmd_psync_place(job, 22, 1), IVM_SUCCESS);
    cr_assert_eq(ivmd_psync_place(job, 3, 1), IVM_SUCCESS); /* ours: not a place */
    cr_assert_eq(ivmd_psync_where(job, 3, &node), IVMD_PLACE_RUNNING);
    cr_assert_eq(node, -1);
    cr_assert_eq(ivmd_psync_where(job, 20, &node), IVMD_PLACE_RUNNING);
    cr_assert_eq(node, 2);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, 20, 3), IVM_SUCCESS);
    wait_from(3, 20, 2, IVM_SUCCESS, 0);
    wait_from(3, 20, 3, IVM_SUCCESS, 1);
    ivmd_psync_place_ended(&reg, job, 20, 2, 1, 0);
    cr_assert_eq(nrecs, 0, "the root's word does not end a known place");
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, 20, 3), IVM_SUCCESS);
    cr_assert_eq(nrecs, 1);
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, 20, 3), IVM_SUCCESS);
    ivmd_psync_place_ended(&reg, job, 20, 2, 1, 1);
    wait_from(3, 20, 4, IVM_SUCCESS, 0); /* posted before the end */
    wait_from(3, 20, 5, IVM_ERROR_PE_FAILED, 0);
    /* An end first heard of makes the place, ended. */
    ivmd_psync_place_ended(&reg, job, 30, 1, 0, 0);
    cr_assert_eq(ivmd_psync_where(job, 30, &node), IVMD_PLACE_EXITED);
    wait_from(4, 30, 6, IVM_SUCCESS, 0);
    /* node 2 lost: 21's waiters fail, 22 of node 1 waits on. */
    wait_from(4, 21, 7, IVM_SUCCESS, 1);
    wait_from(4, 22, 8, IVM_SUCCESS, 1);
    ivmd_psync_node_lost(&reg, job, 2);
    cr_assert_eq(nrecs, 2);
    cr_assert_eq(recs[1].seq, 7);
    cr_assert_eq(recs[1].status, IVM_ERROR_PE_FAILED);
    cr_assert_eq(job->psync_waiting, 1);
}

Test(psync, cancel_drops_a_closed_connections_requests)
{
    int32_t ids[] = {1, 2};

    wait_from(3, 1, 1, IVM_SUCCESS, 1);
    barrier(1, ids, 2, 2, IVM_SUCCESS, 1);
    cr_assert_eq(job->psync_waiting, 2);
    ivmd_psync_cancel(&reg, &conn[3]);
    ivmd_psync_cancel(&reg, &conn[1]);
    cr_assert_eq(job->psync_waiting, 0);
    cr_assert_null(job->barriers, "a barrier without arrivals is forgotten");
    cr_assert_eq(ivmd_psync_signal_to(&reg, job, pe[1]->id, 3), IVM_SUCCESS);
    cr_assert_eq(nrecs, 0, "nobody is answered on a closed connection");
}

Test(psync, list_barrier_completes_in_generations)
{
    int32_t ids[]  = {3, 1, 2, 1};
    int32_t same[] = {2, 3, 1};
    int i;

    barrier(1, ids, 4, 1, IVM_SUCCESS, 1);
    barrier(1, same, 3, 2, IVM_SUCCESS, 1); /* the next generation */
    barrier(2, same, 3, 3, IVM_SUCCESS, 1);
    cr_assert_eq(nrecs, 0);
    barrier(3, ids, 4, 4, IVM_SUCCESS, 0); /* the last arrival completes the first */
    cr_assert_eq(nrecs, 2);
    for (i = 0; i < 2; ++i) {
        cr_assert_eq(recs[i].status, IVM_SUCCESS);
        cr_assert_eq(recs[i].type, IVM_MSG_BARRIER);
    }
    cr_assert(recs[0].seq == 1 && recs[1].seq == 3, "pe 1's first and pe 2's arrivals");
    barrier(2, ids, 4, 5, IVM_SUCCESS, 1);
    barrier(3, ids, 4, 6, IVM_SUCCESS, 0);
    cr_assert_eq(nrecs, 4);
    cr_assert_null(job->barriers);
    cr_assert_eq(job->psync_waiting, 0);
}

Test(psync, list_barrier_refusals)
{
    int32_t ids[]  = {1, 2};
    int32_t bad[]  = {1, 8};
    int queued, who;

    barrier(3, ids, 2, 1, IVM_ERROR_INVALID_VALUE, 0);
    cr_assert_eq(ivmd_psync_barrier(&reg, job, pe[1], bad, 2, &conn[1], 2, IVM_MSG_BARRIER,
                                    &queued, &who),
                 IVM_ERROR_NOT_FOUND);
    cr_assert_eq(who, 8);
    ivmd_pe_end(&reg, pe[2], 0);
    cr_assert_eq(ivmd_psync_barrier(&reg, job, pe[1], ids, 2, &conn[1], 3, IVM_MSG_BARRIER,
                                    &queued, &who),
                 IVM_ERROR_PE_FAILED, "an exited member can never arrive");
    cr_assert_eq(who, 2);
    cr_assert_null(job->barriers);
}

Test(psync, list_barrier_fails_when_a_member_dies)
{
    int32_t ids[]   = {1, 2, 3};
    int32_t other[] = {1, 4};

    barrier(1, ids, 3, 1, IVM_SUCCESS, 1);
    barrier(2, ids, 3, 2, IVM_SUCCESS, 1);
    barrier(4, other, 2, 3, IVM_SUCCESS, 1);
    ivmd_pe_end(&reg, pe[3], 1);
    cr_assert_eq(nrecs, 2, "the barrier of pe 3 fails, the other waits on");
    cr_assert_eq(recs[0].status, IVM_ERROR_PE_FAILED);
    cr_assert_eq(recs[1].status, IVM_ERROR_PE_FAILED);
    cr_assert(strstr(recs[0].why, "pe 3") != NULL, "%s", recs[0].why);
    cr_assert_eq(job->psync_waiting, 1);
}

Test(psync, whole_job_barrier)
{
    /* PEs 0..4 alive: everyone must arrive; an exit leaves it, a death fails it. */
    barrier(0, NULL, 0, 1, IVM_SUCCESS, 1);
    barrier(1, NULL, 0, 2, IVM_SUCCESS, 1);
    barrier(2, NULL, 0, 3, IVM_SUCCESS, 1);
    barrier(3, NULL, 0, 4, IVM_SUCCESS, 1);
    ivmd_pe_end(&reg, pe[4], 0);
    cr_assert_eq(nrecs, 4, "pe 4's exit completes it");
    cr_assert_eq(recs[3].status, IVM_SUCCESS);
    barrier(0, NULL, 0, 5, IVM_SUCCESS, 1);
    barrier(1, NULL, 0, 6, IVM_SUCCESS, 1);
    ivmd_pe_end(&reg, pe[3], 1);
    cr_assert_eq(nrecs, 6);
    cr_assert_eq(recs[4].status, IVM_ERROR_PE_FAILED);
    cr_assert_eq(recs[5].status, IVM_ERROR_PE_FAILED);
    cr_assert_null(job->barriers);
}
