// Helpers of the one-process checkpoint tests (test_checkpoint.cpp, test_checkpoint_lines.cpp):
// checkpoints of a TP 2 x DP 2 layout written rank by rank, one-rank checkpoints through
// save(), and file surgery.
#pragma once
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint_fixture.hpp"
#include "model/config.hpp"

namespace tetra::test {

using namespace tetra::ckpt;
namespace fs = std::filesystem;

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A manifest edited by hand and given a matching checksum again, as a careful forger would:
// what it says must still agree with the shards and the directory's name.
inline void write_manifest(const std::string& path, json m) {
  m.erase("manifest_checksum");
  const std::string text = m.dump();
  m["manifest_checksum"] = crc_hex(crc32c(text.data(), text.size()));
  write_bytes(path, m.dump());
}

inline RunState state_at(int64_t step, const ModelConfig& cfg, int tp = 2, int dp = 2) {
  RunState s;
  s.step = step;
  s.tokens_seen = step * 8 * cfg.seq_len;
  s.seed = 0xFEDCBA9876543210ull;  // above 2^63: must survive the int64 JSON numbers
  s.sampler_step = step;
  s.global_batch = 8;
  s.model = model_to_json(cfg);
  s.layout["tp"] = tp;
  s.layout["cp"] = 1;
  s.layout["pp"] = 1;
  s.layout["dp"] = dp;
  s.layout["zero"] = 1;
  return s;
}

// A TP 2 x DP 2 checkpoint written as four ranks would (rank = tp + 2 dp, as in the grid).
// drop_from_rank1 leaves that tensor's segments out of rank 1's file.
inline std::string save_tp2_dp2(const std::string& dir, const RunState& st, const Weights& w,
                                int keep, const std::string& drop_from_rank1 = "") {
  const ModelConfig cfg = model_from_json(st.model, "test");
  const std::string tmp = begin_write(dir, st.step);
  std::vector<ShardRecord> shards;
  for (int rank = 0; rank < 4; ++rank) {
    RankShard s = shard_of(cfg, w, 2, rank % 2, 2, rank / 2);
    if (rank == 1)
      std::erase_if(s.segments, [&](const Segment& g) { return g.name == drop_from_rank1; });
    shards.push_back(write_shard(tmp, rank, 4, st, s.segments));
  }
  return finish_write(dir, st, shards, keep);
}

// The checkpoint dir/latest names, as a parent: the line continues from it.
inline CheckpointRef latest_of(const std::string& dir) {
  std::ifstream in(dir + "/latest");
  std::string name;
  if (!std::getline(in, name) || !fs::exists(dir + "/" + name + "/manifest.json")) return {};
  return reference_to(dir, dir + "/" + name);
}

// A one-rank checkpoint through the collective entry point, continuing the line `latest`
// names unless a parent is given.
inline std::string save_one(const std::string& dir, int64_t step, int salt, int keep,
                            std::optional<CheckpointRef> parent = std::nullopt) {
  const ModelConfig cfg = checkpoint_model();
  const RankShard s = shard_of(cfg, make_weights(cfg, salt), 1, 0, 1, 0);
  RunState st = state_at(step, cfg, 1, 1);
  st.parent = parent ? *parent : latest_of(dir);
  return save(MPI_COMM_SELF, dir, st, s.segments, keep);
}

inline std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline void check_tensors(const Reader& r, const ModelConfig& cfg, const Weights& w) {
  for (const UnitSpec& u : make_units(cfg, 1, 0)) {
    for (const ParamInfo& p : u.params) {
      CAPTURE(p.name);
      CHECK(r.tensor(p.name, Reader::Kind::Param) == w.param.at(p.name));
      CHECK(r.tensor(p.name, Reader::Kind::AdamM) == w.adam_m.at(p.name));
      CHECK(r.tensor(p.name, Reader::Kind::AdamV) == w.adam_v.at(p.name));
    }
  }
}

}  // namespace tetra::test
