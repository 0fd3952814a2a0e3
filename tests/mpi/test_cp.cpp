// Context parallelism alone and composed with TP, PP and DP, up to the full
// TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks, against a single rank.
#include <doctest/doctest.h>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

struct Layout4 {
  int tp, cp, pp, dp;
  std::vector<std::string> extra;
};

}  // namespace

TEST_CASE("cp: CP 2 and 4, alone and in 4D layouts, match one rank") {
  const std::vector<Layout4> layouts = {
      {1, 2, 1, 1, {}},
      {1, 4, 1, 1, {}},
      {2, 2, 1, 1, {"--sp"}},
      {1, 2, 1, 2, {"--zero", "3"}},
      {1, 2, 2, 1, {"--schedule", "1f1b"}},
      {2, 4, 1, 1, {"--sp", "--recompute", "full"}},
      {1, 4, 2, 2, {"--zero", "2"}},
      {2, 2, 2, 2, {"--zero", "1"}},
      {2, 2, 2, 2, {"--zero", "3", "--sp", "--recompute", "full"}},
      {2, 2, 2, 2, {"--vpp", "2", "--zero", "1"}},
      {1, 2, 2, 2, {"--vpp", "2", "--zero", "3", "--recompute", "full"}},
  };
  std::map<int, RunResult> reference;  // by global batch
  for (const Layout4& l : layouts) {
    const int m = 2 * l.pp;  // micro-batches per DP rank: PP for 1f1b, a multiple for interleaved
    const int G = l.dp * m;
    const std::vector<std::string> batch = {"--global-batch", std::to_string(G), "--micro-batch",
                                            "1"};
    if (!reference.count(G)) reference[G] = run_on(1, batch, 5);
    std::vector<std::string> args = batch;
    args.insert(args.end(), {"--tp", std::to_string(l.tp), "--cp", std::to_string(l.cp), "--pp",
                             std::to_string(l.pp), "--dp", std::to_string(l.dp)});
    args.insert(args.end(), l.extra.begin(), l.extra.end());
    const RunResult run = run_on(l.tp * l.cp * l.pp * l.dp, args, 5);
    if (world_rank() != 0) continue;
    std::string name;
    for (const std::string& a : args) name += a + " ";
    CAPTURE(name);
    double worst = 0;
    for (size_t s = 0; s < run.losses.size(); ++s)
      worst = std::max(worst, std::abs(run.losses[s] - reference[G].losses[s]) /
                                  std::abs(reference[G].losses[s]));
    MESSAGE(name << ": largest relative loss difference " << worst);
    const std::string diff = compare(reference[G], run);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("cp: the validation loss of 4D layouts equals one rank's") {
  // Forward only through each layout's pipeline schedule, on the held-out quarter of the
  // data; after two steps, so that the weights are trained ones.
  const std::vector<std::string> text = {"--val-split",    "0.25", "--eval-batches", "2",
                                         "--global-batch", "8",    "--micro-batch",  "1"};
  const RunResult ref = run_on(1, text, 2);
  const std::vector<std::vector<std::string>> layouts = {
      {"--tp", "2", "--cp", "2", "--pp", "2", "--dp", "2", "--zero", "3"},
      {"--tp", "2", "--cp", "2", "--pp", "2", "--dp", "2", "--vpp", "2", "--sp"},
      {"--pp", "4", "--dp", "2", "--schedule", "gpipe"},
  };
  for (const std::vector<std::string>& l : layouts) {
    std::vector<std::string> args = text;
    args.insert(args.end(), l.begin(), l.end());
    int ranks = 1;
    for (size_t i = 0; i + 1 < l.size(); ++i)
      if (l[i] == "--tp" || l[i] == "--cp" || l[i] == "--pp" || l[i] == "--dp")
        ranks *= std::stoi(l[i + 1]);
    const RunResult run = run_on(ranks, args, 2);
    if (world_rank() != 0) continue;
    std::string name;
    for (const std::string& a : l) name += a + " ";
    CAPTURE(name);
    REQUIRE(ref.val_loss > 0);
    const double rel = std::abs(run.val_loss - ref.val_loss) / ref.val_loss;
    MESSAGE(name << ": validation loss " << run.val_loss << " vs one rank's " << ref.val_loss
                 << ", relative difference " << rel);
    CHECK(rel <= 1e-5);
  }
}
