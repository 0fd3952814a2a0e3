// The on-disk format of a checkpoint, shared by the writer and the reader: directory and
// file names, the manifest, and the per-file list of segments.
//
//   DIR/latest                      "step_00000100\n" (or a path, or "none")
//   DIR/lock                        the running job's host and pid (checkpoint/lock.hpp)
//   DIR/step_00000100/manifest.json {format, version, step, tokens_seen, seed, sampler,
//                                    model, layout, run, parent: null | {name,
//                                    manifest_checksum}, world_size, checksum: "crc32c",
//                                    shards: [{file, bytes, checksum}] in rank order,
//                                    manifest_checksum}
//   DIR/step_00000100/rank_00003.safetensors
//       per segment, three 1-D F32 tensors "<name>#<tp_rank>#<begin>/param", ".../adam_m",
//       ".../adam_v"; metadata "segments": a JSON array of {name, tp_rank, tp_size, begin,
//       end}, so that a reader never has to take tensor names apart, and "checkpoint":
//       {step, rank, world_size, parent}, checked against the manifest.
//
// manifest_checksum is the CRC-32C of the manifest's compact JSON without that member
// (keys sorted, as the JSON library writes them), so any edit to the manifest shows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/safetensors.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

namespace tetra::ckpt {

inline constexpr const char* kFormatName = "tetra-checkpoint";
inline constexpr int kFormatVersion = 2;
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
  uint32_t checksum = 0;            // manifest_checksum
};

// The "checkpoint" metadata value of a shard file.
std::string shard_metadata(const RunState& state, int rank, int world_size);
// Throws tetra::Error naming the file when its "checkpoint" metadata disagrees with the
// manifest (another step, rank, world size or parent).
void check_shard_metadata(const st::Reader& file, const Manifest& m, int rank);

// The parent a checkpoint names, read from its manifest or, when that cannot be read, from
// a shard file's metadata; nullopt when neither can be read. For following a line past a
// checkpoint that does not verify.
std::optional<CheckpointRef> parent_of(const std::string& checkpoint_dir);

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

// The manifest, its manifest_checksum included.
json manifest_json(const RunState& state, const std::vector<ShardRecord>& shards);
// Reads checkpoint_dir/manifest.json and checks it: its checksum, its fields' types and
// ranges, and that its step agrees with the directory's name (when it has the step_N form),
// the sampler step and the tokens seen, its layout with its world size, its parent's step
// with its own. Throws tetra::Error naming the file.
Manifest read_manifest(const std::string& checkpoint_dir);

}  // namespace tetra::ckpt
