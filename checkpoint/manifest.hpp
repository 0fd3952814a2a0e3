// The on-disk format of a checkpoint, shared by the writer and the reader: directory and
// file names, the manifest, and the per-file list of segments.
//
//   DIR/latest                      "step_00000100\n"
//   DIR/step_00000100/manifest.json {format, version, step, tokens_seen, seed, sampler,
//                                    model, layout, world_size, checksum: "crc32c",
//                                    shards: [{file, bytes, checksum}] in rank order}
//   DIR/step_00000100/rank_00003.safetensors
//       per segment, three 1-D F32 tensors "<name>#<tp_rank>#<begin>/param", ".../adam_m",
//       ".../adam_v"; metadata "segments": a JSON array of {name, tp_rank, tp_size, begin,
//       end}, so that a reader never has to take tensor names apart.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/safetensors.hpp"
#include "model/error.hpp"
#include "util/json.hpp"

namespace tetra::ckpt {

inline constexpr const char* kFormatName = "tetra-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kLatestFile = "latest";

std::string step_dir_name(int64_t step);  // "step_00000100"
// The step of a complete checkpoint's directory name; nullopt for anything else, such as
// "step_00000100.tmp" or "latest".
std::optional<int64_t> parse_step_dir_name(const std::string& name);
std::string shard_file_name(int rank);  // "rank_00003.safetensors"

// The name, in its shard file, of one of a segment's three tensors.
std::string segment_tensor(const std::string& name, int tp_rank, int64_t begin, Reader::Kind kind);

// A segment as a shard file lists it.
struct SegmentRange {
  std::string name;
  int tp_rank = 0, tp_size = 1;
  int64_t begin = 0, end = 0;
};

// The "segments" metadata value of a shard file.
std::string segments_metadata(const std::vector<Segment>& segments);
// The segments a shard file lists, each checked to have its three F32 tensors of the right
// length. Throws tetra::Error naming the file.
std::vector<SegmentRange> read_segments(const st::Reader& file);

struct Manifest {
  RunState state;
  std::vector<ShardRecord> shards;  // one per world rank, in rank order
};

// Runs f, prefixing "<where>: " to the message of any tetra::Error it throws, so that
// checks deep inside a file's parsing need not each name the file.
template <typename F>
void with_context(const std::string& where, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

json manifest_json(const RunState& state, const std::vector<ShardRecord>& shards);
// Reads and checks checkpoint_dir/manifest.json. Throws tetra::Error naming the file.
Manifest read_manifest(const std::string& checkpoint_dir);

}  // namespace tetra::ckpt
