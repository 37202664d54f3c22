/*
 * ctl/board: the job's signal board on this node (BOARD, common/proto.h):
 * a memfd the PEs of the node map, in which they exchange addressed signals
 * without the daemon. The daemon keeps the PEs' states in it: LOCAL when it
 * hands out the id of a PE of this node, EXITED or FAILED when that PE ends.
 * Made at the job's first BOARD request; gone with the job's data.
 */
#ifndef IVMD_CTL_BOARD_H
#define IVMD_CTL_BOARD_H

#include "ctl/job.h"
#include "ctl/jobdata.h"
#include "status.h"

struct ivmd_board;

/* The job's board (made now, with every PE of this node marked, if it did
 * not exist): its memfd in *fd_p (still the board's).
 * IVM_ERROR_NO_MEMORY / IVM_ERROR_LIMIT when it cannot be made. */
ivmError_t ivmd_board_open(ivmd_job_t *job, int *fd_p);

/* A PE of this node got its id (spawned, or taken from the pool). */
void ivmd_board_pe_added(ivmd_job_t *job, const ivmd_pe_t *pe);

/* A PE of this node ended: its state, then every receiver is woken. */
void ivmd_board_pe_ended(ivmd_job_t *job, const ivmd_pe_t *pe, int failed);

/* Whether the board holds pe's own signals (ivmSignal / ivmWait): the job's
 * root node, a board made, pe a PE of this node with an id on it. */
int ivmd_board_counts(const ivmd_job_t *job, const ivmd_pe_t *pe);

/* One signal of pe (ivmd_board_counts) posted on the board; its waiters on
 * the board are woken. */
void ivmd_board_sig_post(ivmd_job_t *job, const ivmd_pe_t *pe);

/* Consume one of pe's signals: 1 if there was one. */
int ivmd_board_sig_take(ivmd_job_t *job, const ivmd_pe_t *pe);

/* Tell the board whether the daemon holds WAITs on pe now (dwait, see
 * common/proto.h). */
void ivmd_board_sig_waiters(ivmd_job_t *job, const ivmd_pe_t *pe);

/* Unmap and close (the job's data goes). */
void ivmd_board_destroy(struct ivmd_board *b);

#endif /* IVMD_CTL_BOARD_H */
