/* Integration: objects and sync calls, against the real ivmd. */
#include <criterion/criterion.h>

#include "harness.h"

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
