/* Unit tests of the build's identity: common/version.c and libivm's
 * ivmGetVersion() / ivmGetLibraryVersion(), callable before ivmEnter(). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "ivm.h"
#include "version.h"

TestSuite(version, .timeout = 10);

Test(version, numbers_match_the_header)
{
    int major = -1, minor = -1, patch = -1;
    char text[32];

    cr_assert_eq(ivmGetVersion(&major, &minor, &patch), IVM_SUCCESS);
    cr_assert_eq(major, IVM_VERSION_MAJOR);
    cr_assert_eq(minor, IVM_VERSION_MINOR);
    cr_assert_eq(patch, IVM_VERSION_PATCH);
    snprintf(text, sizeof(text), "%d.%d.%d", major, minor, patch);
    cr_assert_str_eq(ivm_version_string(), text);
    cr_assert_eq(ivmGetVersion(NULL, &minor, NULL), IVM_SUCCESS, "NULL parts are skipped");
}

Test(version, library_version_names_version_revision_and_features)
{
    char buf[IVM_MAX_LIBRARY_VERSION_STRING], want[64];

    cr_assert_eq(ivmGetLibraryVersion(buf, sizeof(buf)), IVM_SUCCESS,
                 "%s", ivmGetLastErrorMessage());
    snprintf(want, sizeof(want), "IVM %s (revision ", ivm_version_string());
    cr_assert_eq(strncmp(buf, want, strlen(want)), 0, "got '%s'", buf);
    cr_assert_not_null(strstr(buf, ivm_version_revision()), "got '%s'", buf);
    cr_assert_not_null(strstr(buf, "built with: "), "got '%s'", buf);
    cr_assert_not_null(strstr(buf, "slurm-bootstrap"), "got '%s'", buf);
    cr_assert_str_neq(ivm_version_revision(), "", "the revision is never empty");
}

Test(version, short_buffer_is_an_error_and_still_terminated)
{
    char buf[12];

    memset(buf, 'x', sizeof(buf));
    cr_assert_eq(ivmGetLibraryVersion(buf, sizeof(buf)), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(buf[sizeof(buf) - 1], '\0');
    cr_assert_not_null(strstr(ivmGetLastErrorMessage(), "IVM_MAX_LIBRARY_VERSION_STRING"),
                       "the message says what suffices: %s", ivmGetLastErrorMessage());
    cr_assert_eq(ivmGetLibraryVersion(NULL, 10), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivmGetLibraryVersion(buf, 0), IVM_ERROR_INVALID_VALUE);
}
