// Tensor parallelism, with and without sequence parallelism, alone and with DP under
// ZeRO 1 and 3, against a single rank; the collective pattern per block; logits never
// gathered.
#include <doctest/doctest.h>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

TEST_CASE("tp: TP 2 and 4, alone and with DP 2 under ZeRO 1 and 3, with and without --sp") {
  const RunResult ref = run_on(tiny_model(4), 5);
  const int L = 4;  // layers of tiny_model()
  for (int tp : {2, 4}) {
    for (int dp_zero : {0, 1, 3}) {  // 0: TP alone
      for (bool sp : {false, true}) {
        TrainConfig c = laid_out(tiny_model(4), tp, 1, 1, dp_zero ? 2 : 1);
        if (dp_zero) c.optimizer.zero = dp_zero;
        c.layout.sp = sp;
        const RunResult run = run_on(c, 5);
        if (world_rank() != 0) continue;
        CAPTURE(tp);
        CAPTURE(dp_zero);
        CAPTURE(sp);
        const std::string diff = compare(ref, run);
        CHECK_MESSAGE(diff.empty(), diff);

        // Collectives over the TP group in one step, m micro-batches of L blocks:
        //   without --sp: 2 all-reduces per block forward and 2 backward, 1 after the
        //     embedding, 1 for the head's input gradient, and the cross-entropy's 2 (max and
        //     sum-exp) per micro-batch: m (4L + 4);
        //   with --sp: per block 2 all-gathers and 2 reduce-scatters each way; the embedding
        //     reduce-scatters forward and all-gathers backward, the head all-gathers forward
        //     and reduce-scatters backward; the cross-entropy's 2 all-reduces per micro-batch
        //     and, once per step, one all-reduce per norm weight's partial gradient (2L + 1).
        const int m = run.micro_batches;
        for (const StepResult& s : run.steps) {
          const CommStats& c = s.comm.at("tp");
          if (!sp) {
            CHECK(c.count(CommOp::AllReduce) == m * (4 * L + 4));
            CHECK(c.count(CommOp::AllGather) == 0);
            CHECK(c.count(CommOp::ReduceScatter) == 0);
          } else {
            CHECK(c.count(CommOp::AllGather) == m * (4 * L + 2));
            CHECK(c.count(CommOp::ReduceScatter) == m * (4 * L + 2));
            CHECK(c.count(CommOp::AllReduce) == 2 * m + 2 * L + 1);
          }
        }
      }
    }
  }
}

TEST_CASE("tp: no rank ever holds more than vocab/TP logits per token") {
  // A wide vocabulary and a narrow model, so that full logits [T, V] would be by far the
  // largest buffer of a step: T = 4 * 32 tokens, V = 4096, d = 64.
  TrainConfig wide = tiny_model(4, 4);
  wide.model.vocab = 4096;
  wide.model.seq_len = 32;
  for (int tp : {1, 2, 4}) {
    const RunResult run = run_on(laid_out(wide, tp, 1, 1, 1), 1);
    if (world_rank() != 0) continue;
    CAPTURE(tp);
    const int64_t T = run.tokens_per_micro_batch, V = 4096;
    CHECK(run.largest_alloc == T * V / tp * 4);  // the logits shard is the largest buffer
  }
}

TEST_CASE("tp: overlap on gives overlap off's bits beside TP 2, with and without --sp") {
  // Under --sp the norms' gradients are summed over TP (blocking) before the queued
  // reduce-scatter over DP.
  for (const char* dtype : {"fp32", "bf16"})
    for (int zero : {1, 3}) {
      TrainConfig c = laid_out(tiny_model(2), 2, 1, 1, 2);
      c.optimizer.zero = zero;
      c.layout.sp = zero == 3;
      c.device.dtype = dtype;
      const std::string diff = overlap_diff(c, 3);
      if (world_rank() != 0) continue;
      CAPTURE(describe(c));
      CHECK_MESSAGE(diff.empty(), diff);
    }
}
