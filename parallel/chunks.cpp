#include "parallel/chunks.hpp"

#include "util/checked.hpp"
#include "util/error.hpp"

namespace tetra {

std::vector<ChunkPlan> plan_chunks(int layers, int pp, int vpp, bool ends, Placement placement) {
  const std::optional<int64_t> chunks64 = checked_mul(pp, vpp);
  check(chunks64 && *chunks64 <= layers, "PP * VPP = ", pp, " * ", vpp, " = ",
        chunks64 ? std::to_string(*chunks64) : std::string("more than 2^63"),
        " chunks is more than the ", layers, " layers");
  const int K = int(*chunks64);
  // The slots cut evenly: the layers, and with `ends` the embedding and the head too.
  const int slots = layers + (ends ? 2 : 0);
  std::vector<ChunkPlan> chunks(K);
  int next = 0;
  for (int k = 0; k < K; ++k) {
    ChunkPlan& c = chunks[k];
    c.stage = chunk_rank(placement, pp, vpp, k);
    c.virtual_stage = chunk_virtual_stage(placement, pp, k);
    if (k == 0) c.units.push_back(0);
    const int n = slots / K + (k < slots % K ? 1 : 0) - (ends && k == 0) - (ends && k == K - 1);
    check(n >= 1, "`layout.pp_balance` ends leaves chunk ", k, " of PP * VPP = ", K,
          " without a layer: (", layers, " layers + the embedding and the head) / ", K,
          " chunks is less than 2");
    for (int i = 0; i < n; ++i) c.units.push_back(1 + next++);
    if (k == K - 1) c.units.push_back(layers + 1);
  }
  return chunks;
}

UnitPlacement place_units(const std::vector<ChunkPlan>& chunks, int layers, int stage, bool tied) {
  UnitPlacement p;
  p.unit_stage.assign(layers + 2, -1);
  p.local_unit.assign(layers + 2, -1);
  int local = 0;
  for (const ChunkPlan& c : chunks) {
    for (int g : c.units) {
      p.unit_stage[g] = c.stage;
      if (c.stage == stage) p.local_unit[g] = local++;
    }
  }
  const int head_stage = chunks.back().stage;
  if (tied && stage == head_stage) {
    if (p.local_unit[0] < 0) p.tied_copy = local++;
    p.head_matrix = p.local_unit[0] >= 0 ? p.local_unit[0] : p.tied_copy;
  }
  return p;
}

std::string chunk_label(const ChunkPlan& chunk, int layers) {
  int lo = -1, hi = -1;  // the blocks: units 1..layers are blocks 0..layers-1
  for (int g : chunk.units)
    if (g >= 1 && g <= layers) {
      if (lo < 0) lo = g - 1;
      hi = g - 1;
    }
  return (chunk.units.front() == 0 ? "embed+" : "") +
         (lo >= 0 ? std::to_string(lo) + "-" + std::to_string(hi) : "") +
         (chunk.units.back() == layers + 1 ? "+head" : "");
}

std::string stage_label(const std::vector<ChunkPlan>& chunks, int stage, int layers) {
  std::string label;
  for (const ChunkPlan& c : chunks)
    if (c.stage == stage) label += (label.empty() ? "" : ", ") + chunk_label(c, layers);
  return label;
}

}  // namespace tetra
