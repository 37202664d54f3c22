/* Integration: objects and sync calls, against the real ivmd. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "hugemap.h"

TestSuite(mem, .init = ivmt_fixture_start, .fini = ivmt_fixture_stop, .timeout = 40);

Test(mem, malloc)
{
    ivmt_scenario(IVMT_PE_MEM, "malloc", NULL, NULL, 20);
}

Test(mem, map_and_subset)
{
    ivmt_scenario(IVMT_PE_MEM, "map", NULL, NULL, 20);
}

Test(mem, share_between_pes)
{
    ivmt_scenario(IVMT_PE_MEM, "share", NULL, NULL, 20);
}

Test(mem, free_and_unmap)
{
    ivmt_scenario(IVMT_PE_MEM, "free", NULL, NULL, 20);
}

Test(mem, sync_ranges)
{
    ivmt_scenario(IVMT_PE_MEM, "sync", NULL, NULL, 20);
}

Test(mem, sync_on_own_copy_is_local)
{
    ivmt_scenario(IVMT_PE_MEM, "sync_local", NULL, NULL, 20);
}

Test(mem, many_objects)
{
    ivmt_scenario(IVMT_PE_MEM, "many_objects", NULL, NULL, 25);
}

Test(mem, big_object)
{
    ivmt_scenario(IVMT_PE_MEM, "big_object", NULL, NULL, 30);
}

/* The daemon measures at start what a mapped page's first touch costs
 * (INFO touch_ns) and asks for maps populated read-only first where a first
 * read is cheaper so (and a first write not much dearer): its PEs follow
 * what it says, and IVM_MAP_READ_FIRST overrides it either way. */
Test(mem, map_read_first_as_the_daemon_measured)
{
    ivm_msg_info_rep_t info;
    const char *why = NULL, *args[] = {NULL, NULL};
    int cheaper;

    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    for (int k = 0; k < 4; ++k) {
        cr_assert_gt(info.touch_ns[k], 0, "touch_ns[%d] not measured", k);
    }
    cheaper = 3ull * info.touch_ns[1] <= 2ull * info.touch_ns[0] &&
              2ull * info.touch_ns[3] <= 3ull * info.touch_ns[2];
    cr_assert_eq(info.map_flags, cheaper ? IVM_MAP_READ_FIRST : 0u,
                 "touch ns %u %u %u %u, map flags 0x%x", info.touch_ns[0], info.touch_ns[1],
                 info.touch_ns[2], info.touch_ns[3], info.map_flags);
    args[0] = cheaper ? "1" : "0";
    ivmt_scenario(IVMT_PE_MEM, "read_first", args, NULL, 20);
}

Test(mem, map_read_first_forced)
{
    static const char *const args[] = {"1", NULL}, *const env[] = {"IVM_MAP_READ_FIRST=1", NULL};

    ivmt_scenario(IVMT_PE_MEM, "read_first", args, env, 20);
}

Test(mem, map_writable_first_forced)
{
    static const char *const args[] = {"0", NULL}, *const env[] = {"IVM_MAP_READ_FIRST=0", NULL};

    ivmt_scenario(IVMT_PE_MEM, "read_first", args, env, 20);
}

Test(mem, map_not_populated_is_writable_at_once)
{
    static const char *const args[] = {"1", "nopop", NULL},
                             *const env[] = {"IVM_MAP_READ_FIRST=1", "IVM_MAP_POPULATE=0", NULL};

    ivmt_scenario(IVMT_PE_MEM, "read_first", args, env, 20);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* Whether this kernel puts a memfd's reserved pages in 2 MiB pages on
 * request (MADV_COLLAPSE, Linux 6.1), tried here on a mapping of our own:
 * 1, or 0 with why. */
static int kernel_collapses_memfd(char *why, size_t len)
{
    const size_t huge = IVM_HUGE_PAGE_SIZE;
    int fd = memfd_create("test-huge", MFD_CLOEXEC), rc = 0;
    void *at;

    if (fd < 0 || ftruncate(fd, (off_t)huge) != 0 || posix_fallocate(fd, 0, (off_t)huge) != 0) {
        snprintf(why, len, "memfd: %s", strerror(errno));
        goto out;
    }
    at = ivm_hugemap_mmap(huge, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert(at != MAP_FAILED, "mmap: %s", strerror(errno));
    rc = madvise(at, huge, MADV_COLLAPSE) == 0;
    snprintf(why, len, "madvise(MADV_COLLAPSE): %s", rc ? "done" : strerror(errno));
    munmap(at, huge);
out:
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

/* ivmd --huge-pages auto (the default): where the kernel can (checked here
 * on a memfd of the test's own), objects are put in 2 MiB pages, INFO says
 * so and counts their bytes, and a PE's maps take those pages whole; where
 * it cannot, nothing is. The kernel may refuse a collapse while memory is
 * fragmented (EAGAIN): a daemon whose start-up probe was refused is asked
 * again once, and a copy it could not put in 2 MiB pages must show in INFO
 * (huge_failed), not in a PE's maps only. */
Test(mem, huge_pages_where_the_kernel_can)
{
    static const char *const any[] = {"any", NULL};
    ivm_msg_info_rep_t info;
    const char *why = NULL, *line;
    char kernel[128];
    ivmt_result_t r;
    long kb_obj = -1, kb_sub = -1;
    int can = kernel_collapses_memfd(kernel, sizeof(kernel));

    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    if (info.huge_pages != (uint32_t)can) {
        ivmt_daemon_finish(&ivmt_d);
        ivmt_daemon_start(&ivmt_d, NULL);
        can = kernel_collapses_memfd(kernel, sizeof(kernel));
        cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    }
    cr_assert_eq(info.huge_pages, (uint32_t)can, "the daemon says huge_pages %u; the kernel: %s",
                 info.huge_pages, kernel);
    ivmt_run_pe(&ivmt_d, IVMT_PE_MEM, "huge", any, NULL, 20, &r);
    ivmt_expect_pe_ok(&ivmt_d, &r, "huge");
    line = strstr(r.out, "HUGE ");
    cr_assert(line != NULL && sscanf(line, "HUGE object=%ld subset=%ld", &kb_obj, &kb_sub) == 2,
              "no HUGE line: %s", r.out);
    ivmt_result_free(&r);
    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    if (!can) {
        cr_assert(kb_obj == 0 && kb_sub == 0 && info.huge_bytes == 0,
                  "no 2 MiB pages here, yet %ld / %ld kB PMD-mapped, huge_bytes %llu", kb_obj,
                  kb_sub, (unsigned long long)info.huge_bytes);
    } else if (info.huge_failed == 0) {
        cr_assert(kb_obj == 6144 && kb_sub == 4096 && info.huge_bytes == 3ull << 21,
                  "ShmemPmdMapped %ld kB of the object's map and %ld kB of the subset map "
                  "(expected 6144 and 4096), huge_bytes %llu", kb_obj, kb_sub,
                  (unsigned long long)info.huge_bytes);
    } else {
        cr_log_warn("the kernel refused 2 MiB pages for the object (fragmented memory?): "
                    "%ld / %ld kB PMD-mapped, huge_bytes %llu", kb_obj, kb_sub,
                    (unsigned long long)info.huge_bytes);
        cr_assert_lt(info.huge_bytes, 3ull << 21);
    }
    ivmt_daemon_finish(&ivmt_d);
}

/* The kernel's own policy for shared memory's 2 MiB pages (the bracketed word
 * of transparent_hugepage/shmem_enabled; "never" where it cannot be read). */
static void shmem_policy(char *buf, size_t len)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
    char line[256] = "", *a, *b;

    snprintf(buf, len, "never");
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL && (a = strchr(line, '[')) != NULL &&
            (b = strchr(a, ']')) != NULL) {
            *b = '\0';
            snprintf(buf, len, "%s", a + 1);
        }
        fclose(f);
    }
}

/* --huge-pages off: 4 KiB pages whatever the kernel can (unless the kernel
 * itself gives shared memory 2 MiB pages: shmem_enabled always, within_size
 * or force; then only the maps' placement is checked). */
Test(mem, huge_pages_off)
{
    static const char *const off[] = {"--huge-pages", "off", NULL}, *const zero[] = {"0", NULL},
                             *const any[] = {"any", NULL};
    ivm_msg_info_rep_t info;
    const char *why = NULL;
    char policy[32];

    shmem_policy(policy, sizeof(policy));
    ivmt_daemon_abandon(&ivmt_d);
    ivmt_daemon_start(&ivmt_d, off);
    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    cr_assert_eq(info.huge_pages, 0);
    ivmt_scenario(IVMT_PE_MEM, "huge",
                  strcmp(policy, "never") == 0 || strcmp(policy, "advise") == 0 ||
                          strcmp(policy, "deny") == 0
                      ? zero
                      : any,
                  NULL, 20);
}

/* Settings the daemon cannot take: refused at start with their reason. */
Test(mem, huge_pages_bad_settings_are_refused)
{
    static const struct {
        const char *a[5], *why;
    } bad[] = {
        {{"--huge-pages", "maybe", NULL}, "--huge-pages 'maybe' is not auto, on or off"},
        {{"--huge-pages", "on", "--reserve-memory=0", NULL},
         "--huge-pages on needs --reserve-memory"},
    };
    char dir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *argv[8] = {IVMT_IVMD, "--socket", sock};
        ivmt_result_t r;
        int n = 3;

        for (int k = 0; bad[i].a[k] != NULL; ++k) {
            argv[n++] = bad[i].a[k];
        }
        ivmt_make_tmpdir(dir, sizeof(dir));
        snprintf(sock, sizeof(sock), "%s/s", dir);
        ivmt_run(argv, NULL, 10, &r);
        ivmt_remove_dir(dir);
        cr_assert(r.exited && r.code == 2, "ivmd %s %s exited %d: %s", bad[i].a[0], bad[i].a[1],
                  r.code, r.err);
        cr_assert(strstr(r.err, bad[i].why) != NULL, "ivmd said '%s', not '%s'", r.err,
                  bad[i].why);
        ivmt_result_free(&r);
    }
}
