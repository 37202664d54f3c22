/* ctl/board (board.h). The memfd is sparse: the count matrix's pages are
 * allocated by the kernel where pairs signal, not for all 1024 x 1024. */
#include "ctl/board.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "board_ops.h"
#include "log.h"
#include "proto.h"

struct ivmd_board {
    int          fd;
    ivm_board_t *map;
};

static int ivmd_board_local(const ivmd_pe_t *pe)
{
    return pe->node < 0 && pe->id >= 0 && (uint32_t)pe->id < IVM_BOARD_PES;
}

static uint32_t ivmd_board_state_of(const ivmd_pe_t *pe)
{
    switch (pe->state) {
    case IVMD_PE_EXITED:
        return IVM_BOARD_LOCAL | IVM_BOARD_EXITED;
    case IVMD_PE_FAILED:
        return IVM_BOARD_LOCAL | IVM_BOARD_FAILED;
    default:
        return IVM_BOARD_LOCAL;
    }
}

/* Addressed signals and barriers go on the board unless the job's
 * environment (the root's, every PE's unless it changes its own) turns the
 * board off: a choice of the job, not of each process, since the two ends of
 * a pair must take the same path. */
static int ivmd_board_pairs_wanted(const ivmd_job_data_t *jd)
{
    char **e;

    for (e = jd->envp; e != NULL && *e != NULL; ++e) {
        if (strcmp(*e, "IVM_SIGNAL_BOARD=0") == 0) {
            return 0;
        }
    }
    return 1;
}

static ivmError_t ivmd_board_make(ivmd_job_t *job, struct ivmd_board **b_p)
{
    struct ivmd_board *b = calloc(1, sizeof(*b));
    const ivmd_job_data_t *jd = job->data;
    int i;

    if (b == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    b->fd = memfd_create("ivm-board", MFD_CLOEXEC);
    if (b->fd < 0 || ftruncate(b->fd, (off_t)sizeof(ivm_board_t)) != 0 ||
        (b->map = mmap(NULL, sizeof(ivm_board_t), PROT_READ | PROT_WRITE, MAP_SHARED, b->fd,
                       0)) == MAP_FAILED) {
        ivmError_t status = errno == EMFILE || errno == ENFILE ? IVM_ERROR_LIMIT
                                                               : IVM_ERROR_NO_MEMORY;
        ivm_warn("job %u: no signal board: %m", job->id);
        if (b->fd >= 0) {
            close(b->fd);
        }
        free(b);
        return status;
    }
    b->map->magic = IVM_BOARD_MAGIC;
    b->map->pes   = IVM_BOARD_PES;
    /* The root node's daemon keeps every PE's own signals (a node daemon
     * forwards its PEs' SIGNAL and WAIT to it): they move to the board, with
     * whether WAITs are queued on each (its posts must tell the daemon). */
    b->map->flags = (jd->proxy ? 0 : IVM_BOARD_F_SIGNALS) |
                    (ivmd_board_pairs_wanted(jd) ? IVM_BOARD_F_PAIRS : 0);
    for (i = 0; i < job->next_pe_id; ++i) {
        ivmd_pe_t *pe = job->pes[i];
        if (pe != NULL && ivmd_board_local(pe)) {
            b->map->state[pe->id] = ivmd_board_state_of(pe);
            if (!jd->proxy) {
                b->map->sig[pe->id]   = pe->signals > UINT32_MAX ? UINT32_MAX
                                                                 : (uint32_t)pe->signals;
                b->map->dwait[pe->id] = pe->waiters != NULL; /* queued before */
                pe->signals           = 0;
            }
        }
    }
    *b_p = b;
    return IVM_SUCCESS;
}

ivmError_t ivmd_board_open(ivmd_job_t *job, int *fd_p)
{
    ivmd_job_data_t *jd = job->data;
    ivmError_t status;

    if (jd->board == NULL && (status = ivmd_board_make(job, &jd->board)) != IVM_SUCCESS) {
        return status;
    }
    *fd_p = jd->board->fd;
    return IVM_SUCCESS;
}

void ivmd_board_pe_added(ivmd_job_t *job, const ivmd_pe_t *pe)
{
    ivmd_job_data_t *jd = job->data;

    if (jd != NULL && jd->board != NULL && ivmd_board_local(pe)) {
        __atomic_or_fetch(&jd->board->map->state[pe->id], IVM_BOARD_LOCAL, __ATOMIC_SEQ_CST);
    }
}

int ivmd_board_counts(const ivmd_job_t *job, const ivmd_pe_t *pe)
{
    const ivmd_job_data_t *jd = job->data;

    return jd != NULL && jd->board != NULL && !jd->proxy && ivmd_board_local(pe);
}

void ivmd_board_sig_post(ivmd_job_t *job, const ivmd_pe_t *pe)
{
    ivm_board_t *m = ((ivmd_job_data_t *)job->data)->board->map;

    __atomic_add_fetch(&m->sig[pe->id], 1, __ATOMIC_SEQ_CST);
    ivm_board_bump(&m->swake[pe->id], &m->ssleepers[pe->id]);
}

int ivmd_board_sig_take(ivmd_job_t *job, const ivmd_pe_t *pe)
{
    ivm_board_t *m = ((ivmd_job_data_t *)job->data)->board->map;

    return ivm_board_take_one(&m->sig[pe->id]);
}

void ivmd_board_sig_waiters(ivmd_job_t *job, const ivmd_pe_t *pe)
{
    ivm_board_t *m = ((ivmd_job_data_t *)job->data)->board->map;

    __atomic_store_n(&m->dwait[pe->id], pe->waiters != NULL, __ATOMIC_SEQ_CST);
}

void ivmd_board_pe_ended(ivmd_job_t *job, const ivmd_pe_t *pe, int failed)
{
    ivmd_job_data_t *jd = job->data;
    ivm_board_t *m;
    uint32_t r;

    if (jd == NULL || jd->board == NULL || !ivmd_board_local(pe)) {
        return;
    }
    m = jd->board->map;
    __atomic_or_fetch(&m->state[pe->id], failed ? IVM_BOARD_FAILED : IVM_BOARD_EXITED,
                      __ATOMIC_SEQ_CST);
    /* Who waits on it is not known here: every receiver looks again, and so
     * do the waiters on its own signals. */
    for (r = 0; r < IVM_BOARD_PES && r < (uint32_t)job->next_pe_id; ++r) {
        if (!(m->state[r] & IVM_BOARD_LOCAL)) {
            continue;
        }
        ivm_board_bump(&m->wake[r], &m->sleepers[r]);
    }
    ivm_board_bump(&m->swake[pe->id], &m->ssleepers[pe->id]);
    /* Barrier waiters look at their members' states when woken. */
    for (r = 0; r < IVM_BOARD_BARRIERS; ++r) {
        if (__atomic_load_n(&m->barriers[r].sleepers, __ATOMIC_SEQ_CST) > 0) {
            syscall(SYS_futex, &m->barriers[r].gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        }
    }
}

void ivmd_board_destroy(struct ivmd_board *b)
{
    if (b == NULL) {
        return;
    }
    munmap(b->map, sizeof(ivm_board_t));
    close(b->fd);
    free(b);
}
