// The simulator at given pass costs, the bubble the metrics' bubble_at_measured_costs reports:
// small cases worked by hand at unequal costs, and the formula met at equal costs by every
// schedule.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "parallel/schedule.hpp"
#include "util/error.hpp"

using tetra::PassCosts;
using tetra::ScheduleKind;
using tetra::simulate;

// PP 2, m 2, T_F, T_B, T_W = 1, 2, 1 on both stages.
//   1f1b (B the whole backward, 3):   rank 0 F0 [0,1] F1 [1,2] B0 [5,8] B1 [9,12]
//                                     rank 1 F0 [1,2] B0 [2,5] F1 [5,6] B1 [6,9]
//   step 12, each rank busy 8: bubble 4/12, the formula's 1/3 (1F1B's does not depend on the
//   costs while the stages are equal).
//   zb-h1 (rank 1 runs W0 after B1):  rank 0 F0 [0,1] F1 [1,2] B0 [4,6] W0 [6,7] B1 [7,9] W1 [9,10]
//                                     rank 1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] W0 [7,8] W1 [8,9]
//   step 10, each rank busy 8: bubble 2/10 = (p-1)(T_F+T_B-T_W) / (m(T_F+T_B+T_W) + that),
//   against the equal-cost formula's 1/7.
TEST_CASE("schedule costs: unequal pass costs give the bubble worked by hand") {
  const tetra::SimResult onef1b = simulate(ScheduleKind::OneFOneB, 2, 1, 2, {{1, 2, 1}, {1, 2, 1}});
  REQUIRE_FALSE(onef1b.deadlock);
  CHECK(onef1b.makespan == 12);
  CHECK(onef1b.busy == std::vector<double>{8, 8});
  CHECK(onef1b.bubble() == doctest::Approx(1.0 / 3));

  const tetra::SimResult h1 = simulate(ScheduleKind::ZeroBubbleH1, 2, 1, 2, {{1, 2, 1}, {1, 2, 1}});
  REQUIRE_FALSE(h1.deadlock);
  CHECK(h1.makespan == 10);
  CHECK(h1.busy == std::vector<double>{8, 8});
  CHECK(h1.bubble() == doctest::Approx(0.2));
  CHECK(tetra::bubble_formula(ScheduleKind::ZeroBubbleH1, 2, 1, 2) == doctest::Approx(1.0 / 7));
  // The last W of rank 1 is the one after B1: W0 [7,8], W1 [8,9].
  CHECK(h1.timeline[1].back().start == 8);
  CHECK(h1.timeline[0].back().end == 10);

  // Unequal stages (the head makes the last stage dearer): chunk 1's F costs 2. 1f1b:
  //   rank 0 F0 [0,1] F1 [1,2] B0 [6,9] B1 [11,14];  rank 1 F0 [1,3] B0 [3,6] F1 [6,8] B1 [8,11]
  //   step 14, rank 0 idle 6, rank 1 idle 4: the ranks' mean 5/14.
  const tetra::SimResult heavy_head =
      simulate(ScheduleKind::OneFOneB, 2, 1, 2, {{1, 2, 1}, {2, 2, 1}});
  CHECK(heavy_head.makespan == 14);
  CHECK(heavy_head.idle == std::vector<double>{6, 4});
  CHECK(heavy_head.bubble() == doctest::Approx(5.0 / 14));

  CHECK_THROWS_WITH_AS(simulate(ScheduleKind::OneFOneB, 2, 1, 2, {{1, 2, 1}}),
                       doctest::Contains("1 chunks' costs for 2 chunks"), tetra::Error);
  CHECK_THROWS_WITH_AS(simulate(ScheduleKind::OneFOneB, 2, 1, 2, {{1, 2, 1}, {1, -1, 1}}),
                       doctest::Contains("must not be negative"), tetra::Error);
}

// The formula tetra prints assumes T_F = T_B = T_W on every chunk; the simulation at those
// costs gives it for every schedule (PP 2, 3, 4, 8; m = p, 2p, 3p + 1 where the schedule
// takes it), whatever the common cost.
TEST_CASE("schedule costs: at equal costs the simulated bubble is the formula, every schedule") {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                            ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleV}) {
    const int vpp = kind == ScheduleKind::Interleaved || kind == ScheduleKind::ZeroBubbleV ? 2 : 1;
    for (int pp : {2, 3, 4, 8}) {
      for (int m : {pp, 2 * pp, 3 * pp + 1}) {
        if (kind == ScheduleKind::Interleaved && m % pp != 0) continue;
        INFO(tetra::schedule_name(kind), " PP ", pp, " m ", m);
        const double t = 0.75;
        const tetra::SimResult s =
            simulate(kind, pp, vpp, m, std::vector<PassCosts>(size_t(pp) * vpp, {t, t, t}));
        REQUIRE_FALSE(s.deadlock);
        CHECK(s.bubble() ==
              doctest::Approx(tetra::bubble_formula(kind, pp, vpp, m)).epsilon(1e-12));
      }
    }
  }
  // No pipeline, no bubble.
  CHECK(simulate(ScheduleKind::OneFOneB, 1, 1, 4, {{1, 2, 1}}).bubble() == 0);
}
