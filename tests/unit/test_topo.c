/* Unit tests of common/topo.c: CPU device specs that name hardware units,
 * expanded against synthetic topologies (hwloc's HWLOC_SYNTHETIC, read when
 * the topology is first loaded: each test runs in its own process), and
 * against this machine. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "topo.h"

/* Two packages, each with two NUMA nodes of 2 cores of 2 hardware threads. */
#define SYNTH "pack:2 numa:2 l3:1 core:2 pu:2"

static char err[256], out[4096];

static void synthetic(void)
{
    setenv("HWLOC_SYNTHETIC", SYNTH, 1);
}

TestSuite(topo, .timeout = 10);

Test(topo, numa_socket_l3_core_expand_to_their_cores, .init = synthetic)
{
    cr_assert_eq(ivm_topo_expand("numa", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS,
                 "%s", err);
    cr_assert_str_eq(out, "0-3,4-7,8-11,12-15");
    cr_assert_eq(ivm_topo_expand("socket", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS);
    cr_assert_str_eq(out, "0-7,8-15");
    cr_assert_eq(ivm_topo_expand("package", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS);
    cr_assert_str_eq(out, "0-7,8-15");
    cr_assert_eq(ivm_topo_expand("l3", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS);
    cr_assert_str_eq(out, "0-3,4-7,8-11,12-15");
    cr_assert_eq(ivm_topo_expand("core:25", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS);
    cr_assert_str_eq(out, "0-1:25,2-3:25,4-5:25,6-7:25,8-9:25,10-11:25,12-13:25,14-15:25");
    cr_assert_eq(ivm_topo_numa_count(), 4);
}

Test(topo, devices_know_their_numa_node, .init = synthetic)
{
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    cpu_set_t cores;
    int n = 0;

    cr_assert_eq(ivm_topo_devspec_parse("numa", 0, devs, IVM_DEVSPEC_MAX_DEVICES, &n, err,
                                        sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 4);
    for (int k = 0; k < 4; ++k) {
        cr_assert_eq(devs[k].ncores, 4);
        cr_assert_eq(devs[k].numa, k, "device %d is on NUMA node %d", k, devs[k].numa);
    }
    /* Core numbers: a device inside one node, and one across two. */
    cr_assert_eq(ivm_topo_devspec_parse("5-6,3-4", 0, devs, IVM_DEVSPEC_MAX_DEVICES, &n, err,
                                        sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_eq(devs[0].numa, 1);
    cr_assert_eq(devs[1].numa, -1, "cores 3 and 4 span nodes 0 and 1");
    cr_assert_eq(ivm_topo_numa_cores(2, &cores), 0);
    cr_assert_eq(CPU_COUNT(&cores), 4);
    cr_assert(CPU_ISSET(8, &cores) && CPU_ISSET(11, &cores) && !CPU_ISSET(12, &cores));
    cr_assert_eq(ivm_topo_numa_cores(9, &cores), -1);
}

Test(topo, bad_shares_and_other_specs, .init = synthetic)
{
    cr_assert_eq(ivm_topo_expand("numa:0", out, sizeof(out), err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "share") != NULL, "%s", err);
    cr_assert_eq(ivm_topo_expand("numa:101", out, sizeof(out), err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_topo_expand("core:5x", out, sizeof(out), err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_topo_expand("numa", out, 8, err, sizeof(err)), IVM_ERROR_INVALID_VALUE,
                 "an expansion that does not fit is refused");
    /* Not a keyword: unchanged. */
    cr_assert_eq(ivm_topo_expand("0-3,4:50", out, sizeof(out), err, sizeof(err)), IVM_SUCCESS);
    cr_assert_str_eq(out, "0-3,4:50");
    cr_assert(!ivm_topo_is_keyword("numas"));
    cr_assert(!ivm_topo_is_keyword("0"));
    cr_assert(ivm_topo_is_keyword("l3:10"));
}

Test(topo, this_machine)
{
    ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    int n = 0, total = 0;

    unsetenv("HWLOC_SYNTHETIC");
    cr_assert_eq(ivm_topo_devspec_parse("core", 0, devs, IVM_DEVSPEC_MAX_DEVICES, &n, err,
                                        sizeof(err)), IVM_SUCCESS, "%s", err);
    cr_assert_geq(n, 1);
    for (int k = 0; k < n; ++k) {
        total += devs[k].ncores;
        if (ivm_topo_numa_count() == 1) {
            cr_assert_eq(devs[k].numa, 0, "one NUMA node: every device is on node 0");
        }
    }
    cr_assert_geq(total, n);
}
