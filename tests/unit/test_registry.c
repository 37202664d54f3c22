/* Unit tests of ivmd's job registry (ivmd/ctl/job.c): jobs, PE ids, the max PE
 * id, signal counters and waiters, objects and their lifetime, lookups by
 * id and name. Pure logic: the I/O callbacks are recorded. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "ctl/job.h"

#define MAXREC 64

typedef struct wait_rec {
    void      *owner;
    uint32_t   seq;
    ivmError_t status;
} wait_rec_t;

static wait_rec_t waits[MAXREC];
static int nwaits;
static uint64_t released[MAXREC];
static int released_fd[MAXREC];
static int nreleased;
static int ctx_token;

static void rec_wait_done(void *ctx, void *owner, uint32_t seq, uint16_t type,
                          ivmError_t status, const char *why)
{
    (void)type;
    (void)why;
    cr_assert_eq(ctx, &ctx_token, "callbacks get the registry's context");
    cr_assert_lt(nwaits, MAXREC);
    waits[nwaits++] = (wait_rec_t){owner, seq, status};
}

static void rec_obj_release(void *ctx, ivmd_obj_t *obj)
{
    cr_assert_eq(ctx, &ctx_token);
    cr_assert_lt(nreleased, MAXREC);
    released_fd[nreleased] = obj->fd;
    released[nreleased++] = obj->id;
}

static const ivmd_job_ops_t rec_ops = {
    .wait_done   = rec_wait_done,
    .obj_release = rec_obj_release,
};

static ivmd_registry_t reg;
static ivm_cpu_device_t devs[2];
static int owner_a, owner_b; /* stand-ins for connections */

static void setup(void)
{
    char err[128];
    int n;

    nwaits = 0;
    nreleased = 0;
    ivmd_registry_init(&reg, &rec_ops, &ctx_token);
    cr_assert_eq(ivm_devspec_parse("0,1", 0, devs, 2, &n, err, sizeof(err)), IVM_SUCCESS);
}

static void teardown(void)
{
    ivmd_registry_cleanup(&reg);
    cr_assert_eq(reg.njobs, 0);
    cr_assert_null(reg.jobs);
    cr_assert_eq(reg.nobjs, 0);
    cr_assert_eq(reg.obj_bytes, 0);
}

TestSuite(registry, .init = setup, .fini = teardown, .timeout = 10);

static ivmd_job_t *new_job(void)
{
    ivmd_job_t *job = NULL;

    cr_assert_eq(ivmd_job_create(&reg, devs, 2, &job), IVM_SUCCESS);
    cr_assert_not_null(job);
    return job;
}

static ivmd_pe_t *new_pe(ivmd_job_t *job)
{
    ivmd_pe_t *pe = NULL;

    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(0), &pe), IVM_SUCCESS);
    cr_assert_not_null(pe);
    return pe;
}

/* WAIT that must be answered at once with want. */
static void wait_now(ivmd_job_t *job, int pe_id, ivmError_t want)
{
    int queued = -1;

    cr_assert_eq(ivmd_pe_wait(&reg, job, pe_id, &owner_a, 1, &queued), want, "wait on PE %d",
                 pe_id);
    cr_assert_eq(queued, 0, "wait on PE %d answered at once", pe_id);
}

static void wait_queued(ivmd_job_t *job, int pe_id, void *owner, uint32_t seq)
{
    int queued = -1;

    cr_assert_eq(ivmd_pe_wait(&reg, job, pe_id, owner, seq, &queued), IVM_SUCCESS);
    cr_assert_eq(queued, 1, "wait on PE %d is queued", pe_id);
}

Test(registry, job_create)
{
    ivmd_job_t *j1 = new_job(), *j2 = new_job(), *bad = (ivmd_job_t *)&owner_a;
    ivmd_pe_t *root;

    cr_assert_neq(j1->id, j2->id, "job ids are distinct");
    cr_assert_eq(reg.njobs, 2);
    cr_assert_eq(ivmd_job_find(&reg, j1->id), j1);
    cr_assert_eq(ivmd_job_find(&reg, j2->id), j2);
    cr_assert_null(ivmd_job_find(&reg, j2->id + 100));
    root = ivmd_pe_find(j1, 0);
    cr_assert_not_null(root, "a job starts with its root PE");
    cr_assert_eq(root->id, 0);
    cr_assert_eq(root->state, IVMD_PE_RUNNING);
    cr_assert_eq(root->devtype, IVM_CPU_N(0));
    cr_assert_eq(root->job, j1);
    cr_assert_eq(ivmd_job_npes(j1), 1);
    cr_assert_eq(j1->alive, 1);
    cr_assert_eq(j1->ndevs, 2);
    cr_assert_null(ivmd_pe_find(j1, 1));
    cr_assert_null(ivmd_pe_find(j1, -1));
    cr_assert_eq(ivmd_job_create(&reg, devs, 0, &bad), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(bad, (ivmd_job_t *)&owner_a, "no output on failure");
    cr_assert_eq(reg.njobs, 2);
}

Test(registry, job_copies_devices)
{
    ivmd_job_t *job;

    job = new_job();
    CPU_ZERO(&devs[1].cores);
    devs[1].ncores = 0;
    cr_assert_eq(job->devs[1].ncores, 1, "the job keeps its own copy of the device table");
    cr_assert(CPU_ISSET(1, &job->devs[1].cores));
}

Test(registry, pe_ids_increase_and_are_never_reused)
{
    ivmd_job_t *job = new_job(), *other = new_job();
    ivmd_pe_t *a = new_pe(job), *b = new_pe(job), *c = new_pe(job), *x = new_pe(other);

    cr_assert_eq(a->id, 1);
    cr_assert_eq(b->id, 2);
    cr_assert_eq(c->id, 3);
    cr_assert_eq(x->id, 1, "ids are per job");
    cr_assert_eq(a->state, IVMD_PE_SPAWNED);
    cr_assert_eq(job->alive, 4);
    cr_assert_eq(ivmd_pe_find(job, 2), b);
    ivmd_pe_end(&reg, b, 0);
    cr_assert_eq(job->alive, 3);
    cr_assert_eq(new_pe(job)->id, 4, "an ended PE's id is not reused");
    cr_assert_eq(ivmd_pe_find(job, 2), b, "an ended PE is remembered");
}

Test(registry, pe_reserve_on_device)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = NULL;

    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(1), &pe), IVM_SUCCESS);
    cr_assert_eq(pe->devtype, IVM_CPU_N(1));
}

Test(registry, unreserve)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *a = new_pe(job), *b = new_pe(job);

    (void)a;
    ivmd_pe_unreserve(&reg, job, b);
    cr_assert_eq(ivmd_job_npes(job), 2, "the last id is given back");
    cr_assert_eq(job->alive, 2);
    b = new_pe(job);
    cr_assert_eq(b->id, 2);
    /* not the last one: the id stays used, as a PE that failed */
    ivmd_pe_t *c = new_pe(job);
    ivmd_pe_unreserve(&reg, job, b);
    cr_assert_eq(ivmd_job_npes(job), 4);
    cr_assert_eq(ivmd_pe_find(job, 2)->state, IVMD_PE_FAILED);
    wait_now(job, 2, IVM_ERROR_PE_FAILED);
    cr_assert_eq(c->state, IVMD_PE_SPAWNED);
}

Test(registry, max_pe_id)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = (ivmd_pe_t *)&owner_a;

    cr_assert_eq(ivmd_job_set_max_id(job, -1), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivmd_job_set_max_id(job, 2), IVM_SUCCESS);
    cr_assert_eq(new_pe(job)->id, 1);
    cr_assert_eq(new_pe(job)->id, 2);
    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(0), &pe), IVM_SUCCESS,
                 "beyond the limit the call still succeeds");
    cr_assert_null(pe, "and reserves no PE");
    cr_assert_eq(ivmd_job_npes(job), 3);
    cr_assert_eq(job->alive, 3);
    cr_assert_eq(ivmd_job_set_max_id(job, 3), IVM_SUCCESS);
    cr_assert_eq(new_pe(job)->id, 3, "raising the limit continues the ids without a gap");
    cr_assert_eq(ivmd_job_set_max_id(job, 0), IVM_SUCCESS);
    pe = (ivmd_pe_t *)&owner_a;
    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(0), &pe), IVM_SUCCESS);
    cr_assert_null(pe);
}

Test(registry, resolve_dev)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *pe = NULL;
    int t = -99;

    cr_assert_eq(ivmd_job_resolve_dev(job, root, IVM_CPU_N(1), &t), IVM_SUCCESS);
    cr_assert_eq(t, IVM_CPU_N(1));
    cr_assert_eq(ivmd_job_resolve_dev(job, root, IVM_THIS_DEV, &t), IVM_SUCCESS);
    cr_assert_eq(t, IVM_CPU_N(0));
    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(1), &pe), IVM_SUCCESS);
    cr_assert_eq(ivmd_job_resolve_dev(job, pe, IVM_THIS_DEV, &t), IVM_SUCCESS);
    cr_assert_eq(t, IVM_CPU_N(1), "IVM_THIS_DEV is the caller's device");
    t = -99;
    cr_assert_eq(ivmd_job_resolve_dev(job, root, IVM_CPU_N(2), &t), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(ivmd_job_resolve_dev(job, root, IVM_CPU_N(1000), &t), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(ivmd_job_resolve_dev(job, root, -7, &t), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(ivmd_job_resolve_dev(job, root, IVM_GPU_N(0), &t), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(t, -99, "no output on failure");
}

Test(registry, signals_before_waits_are_counted)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = new_pe(job);

    ivmd_pe_enter(pe, &owner_b);
    cr_assert_eq(pe->state, IVMD_PE_RUNNING);
    for (int i = 0; i < 3; ++i) {
        ivmd_pe_signal(&reg, pe);
    }
    for (int i = 0; i < 3; ++i) {
        wait_now(job, pe->id, IVM_SUCCESS);
    }
    wait_queued(job, pe->id, &owner_a, 7);
    cr_assert_eq(nwaits, 0);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 1);
    cr_assert_eq(waits[0].owner, &owner_a);
    cr_assert_eq(waits[0].seq, 7);
    cr_assert_eq(waits[0].status, IVM_SUCCESS);
    wait_queued(job, pe->id, &owner_a, 8);
}

Test(registry, waiters_are_served_in_order)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = new_pe(job);

    wait_queued(job, pe->id, &owner_a, 1);
    wait_queued(job, pe->id, &owner_b, 2);
    wait_queued(job, pe->id, &owner_a, 3);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 1);
    cr_assert_eq(waits[0].seq, 1, "the oldest waiter first");
    ivmd_pe_signal(&reg, pe);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 3);
    cr_assert_eq(waits[1].seq, 2);
    cr_assert_eq(waits[1].owner, &owner_b);
    cr_assert_eq(waits[2].seq, 3);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 3, "no waiter left: the signal is counted");
    wait_now(job, pe->id, IVM_SUCCESS);
}

Test(registry, wait_unknown_pe)
{
    ivmd_job_t *job = new_job();

    new_pe(job);
    wait_now(job, 2, IVM_ERROR_NOT_FOUND);
    wait_now(job, 1000, IVM_ERROR_NOT_FOUND);
    wait_now(job, -1, IVM_ERROR_NOT_FOUND);
}

Test(registry, exit_and_failure)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *ok = new_pe(job), *bad = new_pe(job);

    wait_queued(job, ok->id, &owner_a, 11);
    wait_queued(job, ok->id, &owner_b, 12);
    wait_queued(job, bad->id, &owner_a, 13);
    ivmd_pe_end(&reg, ok, 0);
    cr_assert_eq(ok->state, IVMD_PE_EXITED);
    cr_assert_eq(nwaits, 2, "every waiter of an exiting PE is answered");
    cr_assert_eq(waits[0].status, IVM_SUCCESS);
    cr_assert_eq(waits[1].status, IVM_SUCCESS);
    ivmd_pe_end(&reg, bad, 1);
    cr_assert_eq(bad->state, IVMD_PE_FAILED);
    cr_assert_eq(nwaits, 3);
    cr_assert_eq(waits[2].seq, 13);
    cr_assert_eq(waits[2].status, IVM_ERROR_PE_FAILED);
    cr_assert_eq(job->alive, 1);
    wait_now(job, ok->id, IVM_SUCCESS);
    wait_now(job, ok->id, IVM_SUCCESS);
    wait_now(job, bad->id, IVM_ERROR_PE_FAILED);
    /* ending again changes nothing */
    ivmd_pe_end(&reg, bad, 0);
    ivmd_pe_end(&reg, ok, 1);
    cr_assert_eq(bad->state, IVMD_PE_FAILED);
    cr_assert_eq(ok->state, IVMD_PE_EXITED);
    cr_assert_eq(job->alive, 1);
}

Test(registry, pending_signals_survive_the_end)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *a = new_pe(job), *b = new_pe(job);

    ivmd_pe_signal(&reg, a);
    ivmd_pe_signal(&reg, a);
    ivmd_pe_end(&reg, a, 1);
    wait_now(job, a->id, IVM_SUCCESS);
    wait_now(job, a->id, IVM_SUCCESS);
    wait_now(job, a->id, IVM_ERROR_PE_FAILED);
    ivmd_pe_signal(&reg, b);
    ivmd_pe_end(&reg, b, 0);
    wait_now(job, b->id, IVM_SUCCESS);
    wait_now(job, b->id, IVM_SUCCESS);
}

Test(registry, waiter_cancel)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = new_pe(job);

    wait_queued(job, pe->id, &owner_a, 1);
    wait_queued(job, pe->id, &owner_b, 2);
    wait_queued(job, pe->id, &owner_a, 3);
    ivmd_waiter_cancel(&reg, &owner_a);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 1);
    cr_assert_eq(waits[0].owner, &owner_b);
    ivmd_pe_signal(&reg, pe);
    cr_assert_eq(nwaits, 1, "the cancelled waiters are gone; the signal is counted");
    wait_now(job, pe->id, IVM_SUCCESS);
    ivmd_pe_end(&reg, pe, 1);
    cr_assert_eq(nwaits, 1);
}

/* The registry lists exactly the PEs that have waiters, whichever way their
 * waiters go (signal, PE end, cancel, job end), so a cancel visits those
 * only and still finds every waiter of its owner. */
Test(registry, waited_list_follows_the_waiters)
{
    ivmd_job_t *j1 = new_job(), *j2 = new_job();
    ivmd_pe_t *p[6];
    int listed;

    for (int i = 0; i < 6; ++i)
        p[i] = new_pe(i < 4 ? j1 : j2);
    cr_assert_null(reg.waited, "no waiter, no listed PE");
    for (int i = 0; i < 6; ++i) {
        wait_queued(i < 4 ? j1 : j2, p[i]->id, &owner_a, (uint32_t)(10 + i));
        if (i % 2 == 0)
            wait_queued(i < 4 ? j1 : j2, p[i]->id, &owner_b, (uint32_t)(20 + i));
    }
    listed = 0;
    for (ivmd_pe_t *q = reg.waited; q != NULL; q = q->wnext)
        ++listed;
    cr_assert_eq(listed, 6);
    ivmd_pe_signal(&reg, p[1]);      /* its only waiter: p[1] leaves the list */
    cr_assert_null(p[1]->wlink);
    ivmd_pe_end(&reg, p[3], 1);      /* ends answer its waiter */
    cr_assert_null(p[3]->wlink);
    cr_assert_eq(nwaits, 2);
    ivmd_waiter_cancel(&reg, &owner_a); /* p[5] had only owner_a: unlisted */
    cr_assert_null(p[5]->wlink);
    listed = 0;
    for (ivmd_pe_t *q = reg.waited; q != NULL; q = q->wnext) {
        cr_assert(q == p[0] || q == p[2] || q == p[4], "PE %d listed without waiters", q->id);
        cr_assert_eq(q->waiters->owner, &owner_b);
        cr_assert_null(q->waiters->next, "owner_a's waiters are gone");
        ++listed;
    }
    cr_assert_eq(listed, 3);
    ivmd_pe_signal(&reg, p[2]);
    cr_assert_eq(nwaits, 3);
    cr_assert_eq(waits[2].owner, &owner_b);
    cr_assert_eq(waits[2].seq, 22);
    ivmd_job_destroy(&reg, j2);      /* p[4] forgotten with its waiter */
    cr_assert_eq(reg.waited, p[0]);
    cr_assert_null(p[0]->wnext);
    ivmd_waiter_cancel(&reg, &owner_b);
    cr_assert_null(reg.waited);
    ivmd_pe_signal(&reg, p[0]);      /* counted: nobody waits now */
    cr_assert_eq(nwaits, 3);
}

static ivmd_obj_t *new_obj(ivmd_job_t *job, ivmd_pe_t *pe, const char *name, uint64_t size,
                           int fd)
{
    ivmd_obj_t *obj = NULL;

    cr_assert_eq(ivmd_obj_create(&reg, job, pe, name, size, fd, &obj), IVM_SUCCESS, "%s", name);
    cr_assert_not_null(obj);
    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    return obj;
}

Test(registry, objects_names)
{
    ivmd_job_t *job = new_job(), *other = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *oroot = ivmd_pe_find(other, 0);
    ivmd_obj_t *a = new_obj(job, root, "a", 100, 40), *b = new_obj(job, root, "b", 28, 41);
    ivmd_obj_t *dup = (ivmd_obj_t *)&owner_a;

    cr_assert_neq(a->id, b->id);
    cr_assert_eq(a->size, 100);
    cr_assert_eq(a->owner_pe, 0);
    cr_assert_eq(ivmd_obj_find_name(job, "a"), a);
    cr_assert_eq(ivmd_obj_find_name(job, "b"), b);
    cr_assert_null(ivmd_obj_find_name(job, "c"));
    cr_assert_eq(ivmd_obj_find_id(job, b->id), b);
    cr_assert_null(ivmd_obj_find_id(job, a->id + b->id + 100));
    cr_assert_eq(ivmd_obj_create(&reg, job, root, "a", 5, 42, &dup), IVM_ERROR_EXISTS);
    cr_assert_eq(dup, (ivmd_obj_t *)&owner_a, "no output on failure");
    cr_assert_eq(reg.nobjs, 2);
    cr_assert_eq(reg.obj_bytes, 128);
    cr_assert_eq(job->nobjs, 2);
    /* names are per job */
    cr_assert_null(ivmd_obj_find_name(other, "a"), "a job sees only its own objects");
    cr_assert_null(ivmd_obj_find_id(other, a->id));
    new_obj(other, oroot, "a", 1, 43);
    cr_assert_eq(reg.nobjs, 3);
}

Test(registry, free_by_owner_only_and_memory_kept_while_mapped)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *pe = new_pe(job);
    ivmd_obj_t *obj = new_obj(job, root, "x", 4096, 50);
    uint64_t id = obj->id;

    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    cr_assert_eq(obj->nmaps, 2);
    cr_assert_eq(ivmd_obj_free(&reg, pe, id), IVM_ERROR_PERMISSION);
    cr_assert_eq(ivmd_obj_find_name(job, "x"), obj);
    cr_assert_eq(ivmd_obj_free(&reg, root, id), IVM_SUCCESS);
    cr_assert_null(ivmd_obj_find_name(job, "x"), "the name goes at once");
    cr_assert_eq(nreleased, 0, "the memory stays while another PE maps it");
    cr_assert_eq(ivmd_obj_free(&reg, root, id), IVM_ERROR_INVALID_VALUE, "freed twice");
    /* the name can be used again */
    ivmd_obj_t *again = new_obj(job, root, "x", 8, 51);
    cr_assert_neq(again->id, id);
    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_SUCCESS);
    cr_assert_eq(nreleased, 1, "the last mapping gone: released");
    cr_assert_eq(released[0], id);
    cr_assert_eq(released_fd[0], 50);
    cr_assert_eq(reg.nobjs, 1);
    cr_assert_eq(reg.obj_bytes, 8);
    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_ERROR_INVALID_VALUE);
}

Test(registry, unmap_counts_mappings)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *pe = new_pe(job);
    ivmd_obj_t *obj = new_obj(job, root, "m", 10, 60);
    uint64_t id = obj->id;

    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_ERROR_INVALID_VALUE, "not mapped by pe");
    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    cr_assert_eq(obj->nmaps, 3);
    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_SUCCESS);
    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_SUCCESS);
    cr_assert_eq(ivmd_obj_unmap(&reg, pe, id), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(obj->nmaps, 1);
    cr_assert_eq(nreleased, 0, "a named object stays without mappings of other PEs");
    cr_assert_eq(ivmd_obj_free(&reg, root, id), IVM_SUCCESS);
    cr_assert_eq(nreleased, 1);
    cr_assert_eq(reg.nobjs, 0);
}

Test(registry, pe_end_drops_its_mappings)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *pe = new_pe(job);
    ivmd_obj_t *obj = new_obj(job, root, "y", 64, 70);
    uint64_t id = obj->id;

    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    cr_assert_eq(ivmd_obj_map(&reg, pe, obj), IVM_SUCCESS);
    cr_assert_eq(ivmd_obj_free(&reg, root, id), IVM_SUCCESS);
    cr_assert_eq(nreleased, 0);
    ivmd_pe_end(&reg, pe, 1);
    cr_assert_eq(nreleased, 1, "a dead PE's mappings go with it");
    cr_assert_eq(released[0], id);
    cr_assert_eq(reg.nobjs, 0);
}

Test(registry, objects_of_other_pes_survive_pe_end)
{
    ivmd_job_t *job = new_job();
    ivmd_pe_t *pe = new_pe(job);
    ivmd_obj_t *obj = new_obj(job, pe, "z", 64, 71);

    ivmd_pe_end(&reg, pe, 0);
    cr_assert_eq(nreleased, 0, "an object keeps its name after its allocator ends");
    cr_assert_eq(ivmd_obj_find_name(job, "z"), obj);
}

Test(registry, job_end_and_destroy)
{
    ivmd_job_t *job = new_job(), *other = new_job();
    ivmd_pe_t *root = ivmd_pe_find(job, 0), *pe = new_pe(job), *none = NULL;
    ivmd_obj_t *o1 = new_obj(job, root, "o1", 10, 80);

    new_obj(job, pe, "o2", 20, 81);
    new_obj(other, ivmd_pe_find(other, 0), "o3", 30, 82);
    cr_assert_eq(ivmd_obj_map(&reg, pe, o1), IVM_SUCCESS);
    ivmd_job_end(&reg, job);
    cr_assert(job->ending);
    cr_assert_eq(nreleased, 2, "every object of the job is released");
    cr_assert_eq(reg.nobjs, 1);
    cr_assert_eq(reg.obj_bytes, 30);
    cr_assert_null(ivmd_obj_find_name(job, "o1"));
    cr_assert_eq(ivmd_pe_reserve(&reg, job, IVM_CPU_N(0), &none), IVM_ERROR_NOT_FOUND,
                 "no new PE in an ending job");
    ivmd_pe_end(&reg, pe, 1); /* its maps are gone already: no double release */
    cr_assert_eq(nreleased, 2);
    uint32_t jid = job->id;
    ivmd_job_destroy(&reg, job);
    cr_assert_eq(reg.njobs, 1);
    cr_assert_null(ivmd_job_find(&reg, jid));
    cr_assert_eq(ivmd_job_find(&reg, other->id), other);
    cr_assert_eq(nreleased, 2);
}

/* Objects and jobs are found through hash tables beside the lists: they stay
 * consistent through frees, releases out of order and reused names. */
Test(registry, lookups_by_id_and_name_through_frees)
{
    ivmd_job_t *job = new_job(), *jobs[8];
    ivmd_pe_t *root = ivmd_pe_find(job, 0);
    ivmd_obj_t *objs[60], *again, *o;
    char name[32];
    uint32_t n = 0;
    int i;

    for (i = 0; i < 60; ++i) {
        snprintf(name, sizeof(name), "obj%d", i);
        objs[i] = new_obj(job, root, name, 1, 100 + i);
    }
    for (i = 0; i < 60; i += 3) { /* every third one freed: name and memory go */
        cr_assert_eq(ivmd_obj_free(&reg, root, objs[i]->id), IVM_SUCCESS);
    }
    for (i = 0; i < 60; ++i) {
        snprintf(name, sizeof(name), "obj%d", i);
        if (i % 3 == 0) {
            cr_assert_null(ivmd_obj_find_name(job, name), "%s", name);
        } else {
            cr_assert_eq(ivmd_obj_find_name(job, name), objs[i], "%s", name);
            cr_assert_eq(ivmd_obj_find_id(job, objs[i]->id), objs[i], "%s", name);
        }
    }
    cr_assert_eq(job->nobjs, 40);
    for (o = job->objs; o != NULL; o = o->next) {
        ++n;
    }
    cr_assert_eq(n, 40, "the list holds what the tables hold");
    again = new_obj(job, root, "obj0", 7, 99);
    cr_assert_eq(ivmd_obj_find_name(job, "obj0"), again, "a freed name can be taken again");
    cr_assert_eq(job->objs, again, "newest first");
    /* Named but unmapped: the name goes, the memory with it. */
    ivmd_obj_unmap(&reg, root, objs[1]->id);
    ivmd_obj_free_name(&reg, job, objs[1]);
    cr_assert_null(ivmd_obj_find_name(job, "obj1"));
    for (i = 0; i < 8; ++i) {
        jobs[i] = new_job();
    }
    for (i = 0; i < 8; i += 2) {
        uint32_t id = jobs[i]->id;
        ivmd_job_destroy(&reg, jobs[i]);
        cr_assert_null(ivmd_job_find(&reg, id));
    }
    for (i = 1; i < 8; i += 2) {
        cr_assert_eq(ivmd_job_find(&reg, jobs[i]->id), jobs[i]);
    }
    cr_assert_eq(ivmd_job_find(&reg, job->id), job);
}
