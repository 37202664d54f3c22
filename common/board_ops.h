/*
 * The two operations on the signal board's words (ivm_board_t, proto.h)
 * that libivm and ivmd both make: consume one of a count, and bump a futex
 * word and wake its sleepers.
 */
#ifndef IVM_BOARD_OPS_H
#define IVM_BOARD_OPS_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Consume one of *count by compare-and-swap: 1, or 0 when it is 0. */
static inline int ivm_board_take_one(uint32_t *count)
{
    uint32_t c = __atomic_load_n(count, __ATOMIC_SEQ_CST);

    while (c > 0) {
        if (__atomic_compare_exchange_n(count, &c, c - 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            return 1;
        }
    }
    return 0;
}

/* News on *word: bump it, then futex-wake its sleepers, if it has any. */
static inline void ivm_board_bump(uint32_t *word, const uint32_t *sleepers)
{
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0) {
        syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

#endif /* IVM_BOARD_OPS_H */
