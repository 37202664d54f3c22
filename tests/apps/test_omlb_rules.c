/* Apps: the OM-LB root's rules (apps/common/omlb.h), without daemons: the
 * integer split of the units with the least slowest device, and when a move
 * pays for itself. */
#include <criterion/criterion.h>

#include "omlb.h"

Test(omlb_rules, split_follows_speed_and_gives_every_pe_a_unit)
{
    /* Speeds 4 : 2 : 1 (costs 1, 2, 4) over 70 units, one PE each: 40, 20,
       10, every device done in 40 (the split with the least slowest time). */
    const double cost[3] = {1.0, 2.0, 4.0};
    const int pes[3] = {1, 1, 1};
    int alloc[3];

    omlb_rule_split(3, 70, pes, cost, alloc);
    cr_expect_eq(alloc[0] + alloc[1] + alloc[2], 70);
    cr_expect(alloc[0] == 40 && alloc[1] == 20 && alloc[2] == 10, "got %d %d %d", alloc[0],
              alloc[1], alloc[2]);
    /* 24 units at 4 : 2 : 1: 14, 7, 3 (times 14, 14, 12; 13, 7, 4 would end
       at 16). */
    omlb_rule_split(3, 24, pes, cost, alloc);
    cr_expect(alloc[0] == 14 && alloc[1] == 7 && alloc[2] == 3, "got %d %d %d", alloc[0],
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
    const int pes[2] = {1, 1};
    const int equal[2] = {50, 50};
    const int balanced[2] = {75, 25};

    /* 50 x 3 ms against 50 x 1 ms; balanced 75 ms: 75 ms saved per iteration. */
    cr_expect(omlb_rule_worth(2, 100, pes, equal, cost, 0.05, 10, 0.5));
    /* Not when the 10 iterations left save less than the move costs. */
    cr_expect(!omlb_rule_worth(2, 100, pes, equal, cost, 0.05, 10, 1.0));
    /* Not once balanced (75 ms both). */
    cr_expect(!omlb_rule_worth(2, 100, pes, balanced, cost, 0.05, 1000, 0.0));
    /* Not within the tolerance: 52 x 1 ms against 48 x 1.05 ms (52 ms; the
       best split, 51 : 49, 51.45 ms, is 1% faster). */
    const double close[2] = {1e-3, 1.05e-3};
    const int near[2] = {52, 48};
    cr_expect(!omlb_rule_worth(2, 100, pes, near, close, 0.05, 1000, 0.0));
    /* A one-unit step is no move when the units cannot be split better. */
    const int best[2] = {51, 49};
    cr_expect(!omlb_rule_worth(2, 100, pes, best, close, 0.0, 1000, 0.0));
}
