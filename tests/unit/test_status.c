/* Unit tests of the status table: common/status.c and the public
 * ivmGetErrorString() of libivm, both generated from IVM_STATUS_TABLE. */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "ivm.h"
#include "status.h"

typedef struct status_desc {
    const char *name;
    int         value;
    const char *text;
} status_desc_t;

#define STATUS_DESC(name, value, text) {#name, value, text},
static const status_desc_t all[] = {IVM_STATUS_TABLE(STATUS_DESC)};
#define NSTATUS (sizeof(all) / sizeof(all[0]))

TestSuite(status, .timeout = 10);

Test(status, success_is_zero_errors_negative)
{
    cr_assert_eq(IVM_SUCCESS, 0);
    for (size_t i = 1; i < NSTATUS; ++i) {
        cr_assert_lt(all[i].value, 0, "%s", all[i].name);
    }
}

Test(status, every_code_has_a_distinct_string)
{
    for (size_t i = 0; i < NSTATUS; ++i) {
        const char *s = ivm_status_string(all[i].value);
        cr_assert_not_null(s);
        cr_assert_str_neq(s, "unknown status", "%s", all[i].name);
        cr_assert_str_eq(s, all[i].text, "%s", all[i].name);
        cr_assert_str_eq(ivm_status_name(all[i].value), all[i].name);
        for (size_t j = 0; j < i; ++j) {
            cr_assert_neq(all[i].value, all[j].value, "%s and %s share a value",
                          all[i].name, all[j].name);
            cr_assert_str_neq(s, ivm_status_string(all[j].value), "%s and %s share a text",
                              all[i].name, all[j].name);
        }
    }
}

Test(status, public_strings_match_the_table)
{
    for (size_t i = 0; i < NSTATUS; ++i) {
        const char *s = ivmGetErrorString((ivmError_t)all[i].value);
        cr_assert_not_null(s, "%s", all[i].name);
        cr_assert_str_neq(s, "unknown status", "%s", all[i].name);
        cr_assert_str_eq(s, all[i].text, "ivmGetErrorString(%s)", all[i].name);
        for (size_t j = 0; j < i; ++j) {
            cr_assert_str_neq(s, ivmGetErrorString((ivmError_t)all[j].value), "%s vs %s",
                              all[i].name, all[j].name);
        }
    }
}

Test(status, unknown_codes)
{
    static const int unknown[] = {1, 42, -18, -999, -2147483647 - 1};

    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); ++i) {
        const char *s = ivmGetErrorString((ivmError_t)unknown[i]);
        cr_assert_not_null(s, "ivmGetErrorString(%d) is never NULL", unknown[i]);
        cr_assert_str_eq(ivm_status_string(unknown[i]), "unknown status");
        cr_assert_str_eq(ivm_status_name(unknown[i]), "?");
        for (size_t j = 0; j < NSTATUS; ++j) {
            cr_assert_str_neq(s, all[j].text, "code %d reads as %s", unknown[i], all[j].name);
        }
    }
}

Test(status, errno_translation)
{
    cr_assert_eq(ivm_status_from_errno(0), IVM_SUCCESS);
    cr_assert_eq(ivm_status_from_errno(ENOMEM), IVM_ERROR_NO_MEMORY);
    cr_assert_eq(ivm_status_from_errno(ENOENT), IVM_ERROR_NOT_FOUND);
    cr_assert_eq(ivm_status_from_errno(EEXIST), IVM_ERROR_EXISTS);
    cr_assert_eq(ivm_status_from_errno(EINVAL), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_status_from_errno(EACCES), IVM_ERROR_PERMISSION);
    cr_assert_eq(ivm_status_from_errno(ECONNREFUSED), IVM_ERROR_NO_DAEMON);
    cr_assert_eq(ivm_status_from_errno(EPIPE), IVM_ERROR_DAEMON_LOST);
    cr_assert_eq(ivm_status_from_errno(ETIMEDOUT), IVM_ERROR_TIMEOUT);
    cr_assert_lt(ivm_status_from_errno(EIO), 0, "any errno is an error");
}
