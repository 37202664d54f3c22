/* Unit tests of the cgroup helpers that need no cgroup access
 * (common/cgroup.c): the period rule, owner directory names, paths, and
 * finding the hierarchy. Creating and removing groups is tested with the
 * daemon (integration/test_share.c), where cgroup write access is had. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"

TestSuite(cgroup, .timeout = 10);

static void expect_period(uint32_t pct, uint64_t period, uint64_t quota)
{
    uint64_t p = 7, q = 7;

    ivm_cgroup_period(pct, &p, &q);
    cr_assert_eq(p, period, "%u%%: period %llu us, want %llu", pct, (unsigned long long)p,
                 (unsigned long long)period);
    cr_assert_eq(q, quota, "%u%%: quota %llu us, want %llu", pct, (unsigned long long)q,
                 (unsigned long long)quota);
}

/* A short period (4 ms) unless the quota would fall below the kernel's 1 ms. */
Test(cgroup, period_rule)
{
    expect_period(25, 4000, 1000);
    expect_period(50, 4000, 2000);
    expect_period(30, 4000, 1200);
    expect_period(100, 4000, 4000);
    expect_period(200, 4000, 8000);
    expect_period(20, 5000, 1000);
    expect_period(10, 10000, 1000);
    expect_period(3, 33334, 1000);
    expect_period(1, 100000, 1000);
    expect_period(0, 0, 0);
    for (uint32_t pct = 1; pct <= 400; ++pct) {
        uint64_t p, q;
        ivm_cgroup_period(pct, &p, &q);
        cr_assert(p >= 4000 && p <= 1000000 && q >= 1000, "%u%%: %llu/%llu", pct,
                  (unsigned long long)q, (unsigned long long)p);
        cr_assert(q * 100 <= p * pct + 100 && q * 100 + p >= p * pct, "%u%%: %llu/%llu", pct,
                  (unsigned long long)q, (unsigned long long)p);
    }
}

Test(cgroup, owner_names)
{
    char dir[128], name[160];
    const char *base;

    cr_assert_eq(ivm_cgroup_owner_dir("test", 0, dir, sizeof(dir)), IVM_SUCCESS);
    cr_assert(strncmp(dir, "ivm/test-", 9) == 0, "%s", dir);
    base = strrchr(dir, '/') + 1;
    cr_assert_gt(strtoull(strrchr(dir, '-') + 1, NULL, 10), 0ull,
                 "%s: a start time in clock ticks after boot", dir);
    cr_assert_eq(ivm_cgroup_owner_stale("test", base), 0, "our own directory %s", base);
    cr_assert_eq(ivm_cgroup_owner_stale("ivmd", base), -1, "another prefix");
    snprintf(name, sizeof(name), "%sx", base);
    cr_assert_eq(ivm_cgroup_owner_stale("test", name), -1, "trailing garbage");
    snprintf(name, sizeof(name), "test-%d-1", (int)getpid());
    cr_assert_eq(ivm_cgroup_owner_stale("test", name), 1, "our pid, another start time");
    cr_assert_eq(ivm_cgroup_owner_stale("test", "test-999999999-5"), 1, "no such pid");
    cr_assert_eq(ivm_cgroup_owner_stale("test", "test-12"), -1);
    cr_assert_eq(ivm_cgroup_owner_stale("test", "test--5-5"), -1);
    cr_assert_eq(ivm_cgroup_owner_stale("test", "tests-1-1"), -1);
    cr_assert_eq(ivm_cgroup_owner_dir("test", 999999999, dir, sizeof(dir)),
                 IVM_ERROR_NOT_FOUND);
    cr_assert_eq(ivm_cgroup_owner_dir("test", 0, dir, 8), IVM_ERROR_INVALID_VALUE);
}

Test(cgroup, paths)
{
    ivm_cgroup_root_t root = {.version = 1, .parent = "/sys/fs/cgroup/cpu"};
    char buf[64];

    cr_assert_eq(ivm_cgroup_path(&root, "ivm/a", "cgroup.procs", buf, sizeof(buf)),
                 IVM_SUCCESS);
    cr_assert_str_eq(buf, "/sys/fs/cgroup/cpu/ivm/a/cgroup.procs");
    cr_assert_eq(ivm_cgroup_path(&root, "", NULL, buf, sizeof(buf)), IVM_SUCCESS);
    cr_assert_str_eq(buf, "/sys/fs/cgroup/cpu");
    cr_assert_eq(ivm_cgroup_path(&root, "ivm", "cpu.cfs_quota_us", buf, 20),
                 IVM_ERROR_INVALID_VALUE);
}

/* Where a hierarchy has the cpu controller, the parent is an existing
 * directory; elsewhere the reason is IVM_ERROR_UNSUPPORTED with a message. */
Test(cgroup, root_find)
{
    ivm_cgroup_root_t root;
    char err[256] = "";
    struct stat st;
    ivmError_t status = ivm_cgroup_root_find(&root, err, sizeof(err));

    if (status != IVM_SUCCESS) {
        cr_assert_eq(status, IVM_ERROR_UNSUPPORTED, "%s", err);
        cr_assert_neq(err[0], '\0');
        return;
    }
    cr_assert(root.version == 1 || root.version == 2);
    cr_assert_eq(stat(root.parent, &st), 0, "%s", root.parent);
    cr_assert(S_ISDIR(st.st_mode), "%s", root.parent);
}
