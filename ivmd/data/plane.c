/*
 * data/plane: the data plane's ends, told to each of its modules in order: a
 * node lost (the transport's queues, the group routes through it, then the
 * operations waiting on it), a copy's memory gone, the daemon closing. Apart
 * from data/op, which the group scatter stands on, so that op calls no
 * module above it.
 */
#include <uthash.h>

#include "data/group.h"
#include "data/op.h"
#include "data/transport.h"

/* The operations waiting on a lost node fail. A step may free or add other
 * operations, so the walk starts over after each (a peer's loss is rare). */
void ivmd_data_peer_lost(ivmd_data_t *dp, int node)
{
    uint64_t bit = node < 64 ? 1ull << node : 0;
    ivmd_op_t *op, *tmp;

    ivmd_data_transport(dp)->drop(dp, node);
    ivmd_group_peer_lost(dp, node);
again:
    HASH_ITER(hh, dp->ops, op, tmp) {
        if (op->peers & bit) {
            op->peers     &= ~bit;
            op->status     = IVM_ERROR_DAEMON_LOST;
            op->pending    = 0;
            op->then_group = 0;
            ivmd_op_done(dp, op);
            goto again;
        }
        if (op->reply_node == node) {
            op->reply_node = -1;
        }
    }
}

void ivmd_data_close_all(ivmd_data_t *dp)
{
    ivmd_op_t *op, *tmp;

    HASH_ITER(hh, dp->ops, op, tmp) {
        ivmd_op_free(dp, op);
    }
    ivmd_group_peer_lost(dp, -1);
    ivmd_data_transport(dp)->drop(dp, -1);
}

void ivmd_data_copy_gone(ivmd_data_t *dp, const ivmd_obj_t *obj)
{
    ivmd_group_copy_gone(dp, obj->id);
    ivmd_data_transport(dp)->copy_gone(dp, obj);
}

