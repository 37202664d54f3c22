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
