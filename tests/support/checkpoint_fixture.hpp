// Test fixture shared by the checkpoint tests (one process and under mpirun): a small
// model, whole tensors with a distinct exact value per element, and what one rank of a
// TP x DP layout stores of them.
#pragma once
#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "model/config.hpp"

namespace tetra::test {

using ckpt::Segment;

inline ModelConfig checkpoint_model() {
  ModelConfig c;
  c.vocab = 64;
  c.layers = 2;
  c.dim = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_dim = 32;
  c.seq_len = 8;
  c.rope_theta = 500000.0;
  c.norm_eps = 1e-6f;
  return c;
}

// Global tensors with a distinct value per element and kind (exact in float), so that any
// element put in the wrong place shows; `salt` tells two saves apart.
struct Weights {
  std::map<std::string, std::vector<float>> param, adam_m, adam_v;
  // 0: weights, 1: Adam m, 2: Adam v (the order of ckpt::Reader::Kind).
  const std::map<std::string, std::vector<float>>& of(int kind) const {
    return kind == 0 ? param : kind == 1 ? adam_m : adam_v;
  }
};

inline Weights make_weights(const ModelConfig& cfg, int salt) {
  Weights w;
  float next = 1.0f;
  for (const UnitSpec& u : make_units(cfg, 1, 0)) {
    for (const ParamInfo& p : u.params) {
      for (int64_t i = 0; i < p.numel(); ++i, next += 1.0f) {
        w.param[p.name].push_back(next + 0.25f * float(salt));
        w.adam_m[p.name].push_back(-next);
        w.adam_v[p.name].push_back(next + 0.5f);
      }
    }
  }
  return w;
}

// What one rank of a TP x DP layout stores: of every unit's TP-local flat buffer, its
// contiguous 1/DP share, as ZeRO cuts it, so shares begin and end inside tensors.
struct RankShard {
  std::deque<std::vector<float>> storage;  // what the segments point into
  std::vector<Segment> segments;
};

inline RankShard shard_of(const ModelConfig& cfg, const Weights& w, int tp, int tp_rank, int dp,
                          int dp_rank) {
  RankShard out;
  for (const UnitSpec& u : make_units(cfg, tp, tp_rank)) {
    const int64_t per = (u.numel + dp - 1) / dp;
    const int64_t lo = std::min(u.numel, dp_rank * per), hi = std::min(u.numel, lo + per);
    for (const ParamInfo& p : u.params) {
      const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel());
      if (b >= e) continue;
      Segment s{p.name, tp_rank, tp, b - p.offset, e - p.offset};
      const float** dst[3] = {&s.param, &s.adam_m, &s.adam_v};
      const std::map<std::string, std::vector<float>>* src[3] = {&w.param, &w.adam_m, &w.adam_v};
      for (int k = 0; k < 3; ++k) {
        std::vector<float>& local = out.storage.emplace_back();
        for (int64_t i = s.begin; i < s.end; ++i)
          local.push_back(src[k]->at(p.name)[size_t(p.global_index(i, tp_rank))]);
        *dst[k] = local.data();
      }
      out.segments.push_back(s);
    }
  }
  return out;
}

}  // namespace tetra::test
