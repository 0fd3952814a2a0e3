// The work of a rank alone: layout, batch, model and world size in, who does what out, and
// every layout that does not fit refused with a message naming it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli/options.hpp"
#include "parallel/rank_work.hpp"

using namespace tetra;

namespace {

TrainConfig options(std::vector<std::string> args) {
  const std::vector<std::string> model = {"--layers",   "4", "--dim",     "64",  "--heads",   "8",
                                          "--kv-heads", "4", "--ffn-dim", "128", "--seq-len", "16"};
  args.insert(args.begin(), model.begin(), model.end());
  return parse_train_options(args);
}

RankWork work(const std::vector<std::string>& args, int world, int rank) {
  const TrainConfig o = options(args);
  return rank_work(o.layout, o.batch, o.model, world, rank);
}

std::string error_of(const std::vector<std::string>& args, int world) {
  try {
    work(args, world, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rank work: 4D layout on 16 ranks, DP inferred, coordinates in [TP, CP, PP, DP] order") {
  const RankWork p = work({"--tp", "2", "--cp", "2", "--pp", "2", "--global-batch", "8"}, 16, 13);
  CHECK(p.layout.dp == 2);
  // rank 13 = tp 1 + 2 * (cp 0 + 2 * (pp 1 + 2 * dp 1))
  CHECK(p.coord.tp == 1);
  CHECK(p.coord.cp == 0);
  CHECK(p.coord.pp == 1);
  CHECK(p.coord.dp == 1);
  // 8 sequences over DP 2: 4 per DP rank, PP 2 micro-batches of 2 by default.
  CHECK(p.micro_batches == 2);
  CHECK(p.micro_batch == 2);
  CHECK(p.schedule == ScheduleKind::OneFOneB);
  // CP rank 0 of 2 holds chunks 0 and 3 of 4 (4 tokens each); keys in sequence order.
  CHECK(p.seq_pos == std::vector<int32_t>{0, 1, 2, 3, 12, 13, 14, 15});
  CHECK(p.key_pos == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(p.local_tokens() == 16);
  // Two chunks of two blocks: stage 1 holds blocks 2-3 and the head (units 3, 4, 5).
  REQUIRE(p.chunks.size() == 2);
  CHECK(p.chunks[1].units == std::vector<int>{3, 4, 5});
  CHECK(p.place.local_unit == std::vector<int>{-1, -1, -1, 0, 1, 2});
}

TEST_CASE("rank work: micro-batch default and explicit, --vpp implies interleaved") {
  CHECK(work({"--global-batch", "6"}, 1, 0).micro_batch == 6);
  // 6 per DP rank does not split into PP 4 micro-batches: one sequence each.
  const RankWork odd = work({"--pp", "4", "--global-batch", "6", "--schedule", "gpipe"}, 4, 0);
  CHECK(odd.micro_batch == 1);
  CHECK(odd.micro_batches == 6);
  const RankWork v =
      work({"--pp", "2", "--vpp", "2", "--global-batch", "4", "--micro-batch", "1"}, 2, 1);
  CHECK(v.schedule == ScheduleKind::Interleaved);
  CHECK(v.micro_batches == 4);
  CHECK(v.chunks.size() == 4);
}

TEST_CASE("rank work: what does not fit is refused, naming it") {
  CHECK(error_of({"--tp", "3"}, 4).find("does not divide the 4 ranks") != std::string::npos);
  CHECK(error_of({"--cp", "3"}, 3).find("`model.seq_len` 16 is not divisible by 2*CP = 6") !=
        std::string::npos);
  CHECK(error_of({"--global-batch", "3"}, 2)
            .find("`batch.global_batch` 3 is not divisible by DP 2") != std::string::npos);
  CHECK(error_of({"--global-batch", "6", "--micro-batch", "4"}, 1)
            .find("not divisible by DP * micro-batch = 1 * 4") != std::string::npos);
  CHECK(error_of({"--tp", "3", "--sp", "--cp", "2", "--global-batch", "1", "--micro-batch", "1"}, 6)
            .find("`layout.sp` splits the 8 tokens") != std::string::npos);
  CHECK(!error_of({"--pp", "2", "--global-batch", "1"}, 2).empty());  // fewer micro-batches than PP
}
