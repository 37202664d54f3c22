/* Apps: the OM-LB root's rules (apps/common/omlb.h), without daemons: the
 * spawn rule time[j]/min < threshold with its cap, the split of the units in
 * proportion to speed, and when a move pays for itself. */
#include <criterion/criterion.h>

#include "omlb.h"

Test(omlb_rules, spawn_on_the_fast_devices_only_when_the_devices_differ)
{
    const double cost[3] = {1.0, 1.5, 4.0}; /* seconds per unit */
    const int pes[3] = {1, 1, 1};
    int add[3];

    /* 4 / 1 >= 2: devices 0 and 1 (1.5 / 1 < 2) get a PE, device 2 none. */
    cr_expect_eq(omlb_rule_spawn(3, cost, 2.0, pes, 4, 10, add), 2);
    cr_expect(add[0] == 1 && add[1] == 1 && add[2] == 0);

    /* Threshold 5: 4 / 1 < 5, the devices do not differ enough. */
    cr_expect_eq(omlb_rule_spawn(3, cost, 5.0, pes, 4, 10, add), 0);
    cr_expect(add[0] == 0 && add[1] == 0 && add[2] == 0);

    /* Equal devices never spawn. */
    const double same[3] = {2.0, 2.0, 2.0};
    cr_expect_eq(omlb_rule_spawn(3, same, 2.0, pes, 4, 10, add), 0);
}

Test(omlb_rules, spawn_respects_the_cap_per_device_and_the_room_left)
{
    const double cost[3] = {1.0, 1.2, 6.0};
    const int full[3] = {4, 1, 1};
    int add[3];

    /* Device 0 is at the cap of 4: only device 1 gets one. */
    cr_expect_eq(omlb_rule_spawn(3, cost, 2.0, full, 4, 10, add), 1);
    cr_expect(add[0] == 0 && add[1] == 1 && add[2] == 0);

    /* Room for one PE in the whole run: the first fast device takes it. */
    const int pes[3] = {1, 1, 1};
    cr_expect_eq(omlb_rule_spawn(3, cost, 2.0, pes, 4, 1, add), 1);
    cr_expect(add[0] == 1 && add[1] == 0 && add[2] == 0);
    cr_expect_eq(omlb_rule_spawn(3, cost, 2.0, pes, 4, 0, add), 0);
}

Test(omlb_rules, split_follows_speed_and_gives_every_pe_a_unit)
{
    /* Speeds 4 : 2 : 1 (costs 1, 2, 4) over 70 units, one PE each:
       1 unit each, then 67 dealt 38.3 : 19.1 : 9.6 -> 39, 20, 11 with the
       largest remainders. */
    const double cost[3] = {1.0, 2.0, 4.0};
    const int pes[3] = {1, 1, 1};
    int alloc[3];

    omlb_rule_split(3, 70, pes, cost, alloc);
    cr_expect_eq(alloc[0] + alloc[1] + alloc[2], 70);
    cr_expect(alloc[0] == 39 && alloc[1] == 20 && alloc[2] == 11, "got %d %d %d", alloc[0],
              alloc[1], alloc[2]);

    /* A device 1000x slower still keeps one unit per PE. */
    const double slow[2] = {1.0, 1000.0};
    const int two[2] = {3, 2};
    omlb_rule_split(2, 10, two, slow, alloc);
    cr_expect(alloc[0] == 8 && alloc[1] == 2, "got %d %d", alloc[0], alloc[1]);

    /* Equal devices: an equal split. */
    const double same[2] = {1.0, 1.0};
    const int one[2] = {1, 1};
    omlb_rule_split(2, 64, one, same, alloc);
    cr_expect(alloc[0] == 32 && alloc[1] == 32);
}

Test(omlb_rules, a_move_must_beat_the_tolerance_and_pay_for_itself)
{
    const double cost[2] = {1e-3, 3e-3}; /* device 1 three times slower */
    const int equal[2] = {50, 50};
    const int balanced[2] = {75, 25};

    /* 50 x 3 ms against 50 x 1 ms; balanced 75 ms: 75 ms saved per iteration. */
    cr_expect(omlb_rule_worth(2, 100, equal, cost, 0.2, 10, 0.5));
    /* Not when the 10 iterations left save less than the move costs. */
    cr_expect(!omlb_rule_worth(2, 100, equal, cost, 0.2, 10, 1.0));
    /* Not once balanced (75 ms both). */
    cr_expect(!omlb_rule_worth(2, 100, balanced, cost, 0.2, 1000, 0.0));
    /* Not within the tolerance: 52 x 1 ms against 48 x 1.1 ms. */
    const double close[2] = {1e-3, 1.1e-3};
    const int near[2] = {52, 48};
    cr_expect(!omlb_rule_worth(2, 100, near, close, 0.2, 1000, 0.0));
}
