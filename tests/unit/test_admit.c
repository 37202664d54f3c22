/* Unit tests of ivm-gpud's admission bookkeeping (ivm-gpud/admit.c): fit,
 * LRU eviction order, FIFO waiting, time-outs, requests larger than a GPU,
 * and the gpud protocol validators (common/gpud_proto.c). */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "admit.h"
#include "gpud_proto.h"

#define MB (1ull << 20)

static gpud_admit_t *make(uint64_t cap0, uint64_t cap1)
{
    uint64_t caps[2] = {cap0, cap1};
    gpud_admit_t *a = NULL;

    cr_assert_eq(gpud_admit_create(2, caps, &a), IVM_SUCCESS);
    return a;
}

Test(admit, fits_until_full_and_gpus_are_separate)
{
    gpud_admit_t *a = make(10 * MB, 4 * MB);
    gpud_admit_stats_t s;

    cr_assert_eq(gpud_admit_check(a, 0, 6 * MB), GPUD_ADMIT_FITS);
    gpud_admit_take(a, 0, 6 * MB);
    cr_assert_eq(gpud_admit_check(a, 0, 4 * MB), GPUD_ADMIT_FITS);
    cr_assert_eq(gpud_admit_check(a, 0, 5 * MB), GPUD_ADMIT_WAIT);
    cr_assert_eq(gpud_admit_check(a, 1, 4 * MB), GPUD_ADMIT_FITS, "GPU 1 has its own room");
    gpud_admit_take(a, 0, 4 * MB);
    gpud_admit_get_stats(a, 0, &s);
    cr_assert_eq(s.used, 10 * MB);
    cr_assert_eq(s.allocations, 2);
    gpud_admit_give(a, 0, 6 * MB);
    cr_assert_eq(gpud_admit_check(a, 0, 6 * MB), GPUD_ADMIT_FITS);
    gpud_admit_destroy(a);
}

Test(admit, larger_than_the_gpu_fails_at_once)
{
    gpud_admit_t *a = make(10 * MB, 4 * MB);

    cr_assert_eq(gpud_admit_check(a, 0, 10 * MB + 1), GPUD_ADMIT_TOO_LARGE);
    cr_assert_eq(gpud_admit_check(a, 1, 5 * MB), GPUD_ADMIT_TOO_LARGE);
    cr_assert_eq(gpud_admit_check(a, 0, 10 * MB), GPUD_ADMIT_FITS);
    gpud_admit_take(a, 0, 1 * MB);
    cr_assert_eq(gpud_admit_check(a, 0, 10 * MB), GPUD_ADMIT_WAIT,
                 "fits the GPU but not now: wait, not fail");
    gpud_admit_destroy(a);
}

Test(admit, eviction_is_least_recently_cached_first)
{
    gpud_admit_t *a = make(8 * MB, 8 * MB);
    gpud_admit_lru_t n[4];
    gpud_admit_stats_t s;
    int i;

    memset(n, 0, sizeof(n));
    for (i = 0; i < 4; ++i) {
        gpud_admit_take(a, 0, 2 * MB);
    }
    /* released in the order 2, 0, 3, 1; then 0 is referenced again */
    gpud_admit_cache(a, 0, &n[2], 2 * MB);
    gpud_admit_cache(a, 0, &n[0], 2 * MB);
    gpud_admit_cache(a, 0, &n[3], 2 * MB);
    gpud_admit_cache(a, 0, &n[1], 2 * MB);
    gpud_admit_uncache(a, 0, &n[0]);
    gpud_admit_get_stats(a, 0, &s);
    cr_assert_eq(s.cached, 6 * MB);
    cr_assert_eq(s.ncached, 3);

    cr_assert_eq(gpud_admit_check(a, 0, 2 * MB), GPUD_ADMIT_EVICT);
    cr_assert_eq(gpud_admit_check(a, 0, 6 * MB), GPUD_ADMIT_EVICT);
    cr_assert_eq(gpud_admit_check(a, 0, 8 * MB), GPUD_ADMIT_WAIT,
                 "copy 0 is referenced: evicting all cached is not enough");
    cr_assert_eq(gpud_admit_evict(a, 0), &n[2]);
    gpud_admit_give(a, 0, 2 * MB);
    cr_assert_eq(gpud_admit_check(a, 0, 2 * MB), GPUD_ADMIT_FITS);
    cr_assert_eq(gpud_admit_evict(a, 0), &n[3]);
    cr_assert_eq(gpud_admit_evict(a, 0), &n[1]);
    cr_assert_null(gpud_admit_evict(a, 0));
    gpud_admit_get_stats(a, 0, &s);
    cr_assert_eq(s.evictions, 3);
    cr_assert_eq(s.cached, 0);
    /* uncaching something not cached is harmless */
    gpud_admit_uncache(a, 0, &n[0]);
    gpud_admit_destroy(a);
}

Test(admit, waiters_are_fifo_and_time_out)
{
    gpud_admit_t *a = make(8 * MB, 8 * MB);
    gpud_admit_wait_t w[3];
    gpud_admit_stats_t s;

    memset(w, 0, sizeof(w));
    cr_assert_eq(gpud_admit_next_deadline(a), UINT64_MAX);
    gpud_admit_wait_push(a, 0, &w[0], 4 * MB, 300);
    gpud_admit_wait_push(a, 0, &w[1], 1 * MB, 100);
    gpud_admit_wait_push(a, 1, &w[2], 1 * MB, 200);
    cr_assert_eq(gpud_admit_wait_head(a, 0), &w[0]);
    cr_assert_eq(gpud_admit_wait_head(a, 1), &w[2]);
    cr_assert_eq(gpud_admit_next_deadline(a), 100);
    gpud_admit_get_stats(a, 0, &s);
    cr_assert_eq(s.waiting, 2);

    cr_assert_null(gpud_admit_wait_expired(a, 0, 99));
    cr_assert_eq(gpud_admit_wait_expired(a, 0, 100), &w[1]);
    cr_assert_null(gpud_admit_wait_expired(a, 0, 100));
    cr_assert_eq(gpud_admit_next_deadline(a), 200);
    gpud_admit_get_stats(a, 0, &s);
    cr_assert_eq(s.wait_timeouts, 1);
    cr_assert_eq(s.waiting, 1);

    gpud_admit_wait_remove(a, 0, &w[0]); /* granted */
    cr_assert_null(gpud_admit_wait_head(a, 0));
    gpud_admit_wait_remove(a, 0, &w[0]); /* twice: harmless */
    gpud_admit_wait_remove(a, 1, &w[2]);
    cr_assert_eq(gpud_admit_next_deadline(a), UINT64_MAX);
    gpud_admit_destroy(a);
}

/* ------------------------------------------------------- protocol checks */

static ivm_msg_hdr_t hdr_of(uint16_t type, uint32_t length)
{
    ivm_msg_hdr_t h;

    ivm_proto_hdr_init(&h, type, length, 5);
    return h;
}

Test(gpud_proto, every_type_has_a_name_and_sizes)
{
    const char *why = NULL;
    ivm_msg_hdr_t h;
    uint32_t t;

    for (t = IVM_GPUD_FIRST + 1; t < IVM_GPUD_LAST; ++t) {
        cr_assert_str_neq(ivm_gpud_type_name(t), "?");
        cr_assert_gt(ivm_gpud_req_size(t), 0);
        cr_assert_geq(ivm_gpud_rep_size(t), sizeof(ivm_gpud_status_t));
        h = hdr_of((uint16_t)t, 0);
        cr_assert_eq(ivm_gpud_check_hdr(&h, &why), IVM_SUCCESS);
    }
    cr_assert_str_eq(ivm_gpud_type_name(IVM_GPUD_ACQUIRE | IVM_MSG_REPLY), "ACQUIRE");
    cr_assert_str_eq(ivm_gpud_type_name(7), "?");
    h = hdr_of(7, 0);
    cr_assert_eq(ivm_gpud_check_hdr(&h, &why), IVM_ERROR_PROTOCOL, "PE types are not gpud's");
    h = hdr_of(IVM_GPUD_LAST, 0);
    cr_assert_eq(ivm_gpud_check_hdr(&h, &why), IVM_ERROR_PROTOCOL);
    h = hdr_of(IVM_GPUD_GHELLO, 0);
    h.magic ^= 1;
    cr_assert_eq(ivm_gpud_check_hdr(&h, &why), IVM_ERROR_PROTOCOL);
    h = hdr_of(IVM_GPUD_GHELLO, IVM_MSG_MAX_PAYLOAD + 1);
    cr_assert_eq(ivm_gpud_check_hdr(&h, &why), IVM_ERROR_PROTOCOL);
}

Test(gpud_proto, requests_are_checked)
{
    ivm_gpud_acquire_req_t acq = {.job = 1, .obj_id = 2, .obj_size = 100, .offset = 10,
                                  .size = 90};
    ivm_gpud_copy_req_t copy = {.copy_id = 1, .offset = 0, .size = 8,
                                .dir = IVM_GPUD_COPY_D2H};
    const char *why = NULL;
    ivm_msg_hdr_t h;

    h = hdr_of(IVM_GPUD_ACQUIRE, sizeof(acq));
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_SUCCESS);
    h.length -= 1;
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_ERROR_PROTOCOL);
    h.length += 1;
    acq.size = 91;
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_ERROR_INVALID_VALUE);
    acq.size = 0;
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_ERROR_INVALID_VALUE);
    acq.offset = UINT64_MAX;
    acq.size   = 2;
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_ERROR_INVALID_VALUE);
    acq.offset = 0;
    acq.flags  = 1;
    cr_assert_eq(ivm_gpud_check_req(&h, &acq, &why), IVM_ERROR_PROTOCOL);

    h = hdr_of(IVM_GPUD_COPY, sizeof(copy));
    cr_assert_eq(ivm_gpud_check_req(&h, &copy, &why), IVM_SUCCESS);
    copy.dir = 3;
    cr_assert_eq(ivm_gpud_check_req(&h, &copy, &why), IVM_ERROR_INVALID_VALUE);
    copy.dir    = IVM_GPUD_COPY_H2D;
    copy.offset = UINT64_MAX;
    cr_assert_eq(ivm_gpud_check_req(&h, &copy, &why), IVM_ERROR_INVALID_VALUE);

    h = hdr_of(IVM_GPUD_RELEASE | IVM_MSG_REPLY, sizeof(ivm_gpud_copy_ref_t));
    cr_assert_eq(ivm_gpud_check_req(&h, &copy, &why), IVM_ERROR_PROTOCOL);
    h.length = 4;
    cr_assert_eq(ivm_gpud_check_rep(&h, &why), IVM_ERROR_PROTOCOL, "shorter than the reply");
    h.length = sizeof(ivm_gpud_status_t) + 20;
    cr_assert_eq(ivm_gpud_check_rep(&h, &why), IVM_SUCCESS, "detail text allowed");
    h.length = sizeof(ivm_gpud_status_t);
    cr_assert_eq(ivm_gpud_check_rep(&h, &why), IVM_SUCCESS);
    h = hdr_of(IVM_GPUD_GSTATS | IVM_MSG_REPLY, sizeof(ivm_gpud_status_t));
    cr_assert_eq(ivm_gpud_check_rep(&h, &why), IVM_ERROR_PROTOCOL,
                 "a failed reply still has the full fixed size");
}
