// The input of every plan model: the run as tetra train would lay it out (the same
// rank_work), the model's units as TP rank 0 holds them, and the byte sizes of the precision.
// Everything here is a pure function of the configuration: no MPI, no backend.
#pragma once
#include <vector>

#include "model/config.hpp"
#include "optim/config.hpp"
#include "parallel/config.hpp"
#include "parallel/rank_work.hpp"
#include "plan/machine.hpp"

namespace tetra::plan {

// The sections of a run's configuration that the models read; the others (data,
// checkpoints, output) change nothing they predict.
struct RunSpec {
  LayoutConfig layout;
  BatchConfig batch;
  OptimizerConfig optimizer;  // the ZeRO stage and --recompute
  DeviceConfig device;        // the dtype
};

struct Setup {
  RunSpec spec;
  ModelConfig cfg;
  RankWork run;                 // rank 0's
  std::vector<UnitSpec> units;  // every unit, TP-local (embedding, blocks, head)
  Precision prec;

  const Layout& layout() const { return run.layout; }
  int world() const { return run.layout.world(); }
  int dp_cp() const { return run.layout.cp * run.layout.dp; }
  // Tokens of one micro-batch on a rank (b S / CP), and the rows of the residual stream
  // outside the TP region (all of them, or 1/TP under --sp).
  int64_t tokens() const { return run.local_tokens(); }
  int64_t rows() const { return spec.layout.sp ? tokens() / run.layout.tp : tokens(); }
  // A unit's elements padded to a multiple of dp_cp (ZeRO's flat buffer, parallel/zero.hpp).
  int64_t padded(int unit) const;
  // Global unit ids (0 embedding, 1 + l block l, L + 1 head) of the chunks on pipeline
  // rank `stage`, in virtual-stage order.
  std::vector<std::vector<int>> stage_chunks(int stage) const;
  // The chunk's model id for the stage's v-th chunk (v * PP + stage looped; as zb-v's V, stage
  // for v = 0 and 2 PP - 1 - stage for v = 1), and the stage that holds chunk k.
  int chunk_id(int stage, int v) const {
    return tetra::chunk_id(placement(run.schedule), run.layout.pp, stage, v);
  }
  int chunk_stage(int k) const { return run.chunks[size_t(k)].stage; }
  // Under tied embeddings, whether the stage's head reads a copy of the embedding (the head on
  // another stage than the embedding: looped PP > 1), which the embedding group sums.
  bool tied_copy(int stage) const {
    return cfg.tie_embeddings && chunk_stage(int(run.chunks.size()) - 1) != 0 &&
           stage == chunk_stage(int(run.chunks.size()) - 1);
  }
  // Whether the embedding group exists: tied embeddings with the head apart from the embedding.
  bool embedding_group() const {
    return cfg.tie_embeddings && chunk_stage(int(run.chunks.size()) - 1) != 0;
  }
};

// The most ranks a plan lays out: 2^24, a thousand times Llama 3 405B's 16,384 GPUs.
inline constexpr int64_t kMaxPlanRanks = 1 << 24;

// For `world` ranks (0: the product of the layout, DP 0 counting as 1, at most
// kMaxPlanRanks). Throws tetra::Error as tetra train would refuse the layout.
Setup make_setup(const RunSpec& spec, const ModelConfig& cfg, int world = 0);

}  // namespace tetra::plan
