// Writing a checkpoint: rank 0 prepares step_X.tmp/, every rank writes its shard file into
// it, rank 0 writes the manifest and moves the directory into place (the one-process steps;
// checkpoint/saver.cpp runs them across the ranks, in the background or not).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "checkpoint/atomic_file.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint/manifest.hpp"
#include "util/error.hpp"

namespace tetra::ckpt {

namespace fs = std::filesystem;

namespace {

std::string cannot_write(const std::string& dir) {
  return "cannot write checkpoint directory '" + dir + "'";
}

// Where the old checkpoint of a step waits while a new one replaces it, on filesystems that
// cannot swap two directories in one rename.
std::string old_dir_of(const std::string& dir, int64_t step) {
  return (fs::path(dir) / (step_dir_name(step) + ".old")).string();
}

// Moves the finished tmp directory to `final_dir`. A checkpoint already there (the same one,
// written again: see set_aside_unless_same) is swapped out in one atomic rename, so that the
// name always holds one complete checkpoint, and then deleted.
void install(const std::string& tmp, const std::string& final_dir, const std::string& old,
             const std::string& context) {
  if (::rename(tmp.c_str(), final_dir.c_str()) == 0) return;
  check(errno == EEXIST || errno == ENOTEMPTY, context, ": cannot rename '", tmp, "' to '",
        final_dir, "': ", std::strerror(errno));
  std::error_code ec;
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp, ec);  // the old checkpoint now; a leftover is a stale .tmp
    return;
  }
  // Filesystems without RENAME_EXCHANGE (NFS, for one): the old one steps aside first, so
  // a crash in between leaves it complete under the .old name.
  check(errno == EINVAL || errno == ENOSYS, context, ": cannot replace '", final_dir,
        "': ", std::strerror(errno));
  check(::rename(final_dir.c_str(), old.c_str()) == 0, context, ": cannot move '", final_dir,
        "' aside: ", std::strerror(errno));
  check(::rename(tmp.c_str(), final_dir.c_str()) == 0, context, ": cannot rename '", tmp, "' to '",
        final_dir, "': ", std::strerror(errno));
  fs::remove_all(old, ec);
}

// A checkpoint already at final_dir is replaced only when it is the very checkpoint being
// written (the same manifest: a run that redid its steps after a crash between the rename
// and `latest`). Anything else there, another line's checkpoint (a rollback, or a run from
// step 0, that reached its step) or one that does not verify, is moved aside to
// step_N.abandoned (.abandoned.2, ...) rather than deleted: it may be wanted, or salvageable.
void set_aside_unless_same(const std::string& final_dir, const std::string& manifest_checksum,
                           const std::string& context) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(final_dir, ec))) return;
  const std::string problem = verify(final_dir);
  if (problem.empty() && crc_hex(read_manifest(final_dir).checksum) == manifest_checksum) return;
  std::string aside = final_dir + ".abandoned";
  for (int k = 2; fs::exists(fs::symlink_status(aside, ec)); ++k)
    aside = final_dir + ".abandoned." + std::to_string(k);
  check(::rename(final_dir.c_str(), aside.c_str()) == 0, context, ": cannot move '", final_dir,
        "' aside: ", std::strerror(errno));
  std::fprintf(stderr, "tetra: warning: moved '%s' to '%s' rather than replace it (%s)\n",
               final_dir.c_str(), aside.c_str(),
               problem.empty() ? "another checkpoint of that step" : problem.c_str());
}

// The checkpoint `ref` names, relative to dir: its path when it is there and is the very
// checkpoint named (same manifest checksum), else "".
std::string resolve(const std::string& dir, const CheckpointRef& ref) {
  if (ref.name.empty() || ref.name.find('/') != std::string::npos) return "";
  const std::string path = (fs::path(dir) / ref.name).string();
  try {
    return read_manifest(path).checksum == ref.manifest_crc ? path : "";
  } catch (const Error&) {
    return "";
  }
}

// Deletes the ancestors of the checkpoint just written beyond the newest `keep` of its line
// (keep <= 0: none). Checkpoints of other lines (later ones a rollback abandoned, or earlier
// ones of a run that started over) are never deleted behind the user's back, nor is one that
// does not verify: it may still be salvageable, and deciding that is the user's. The
// manifest goes first: a deletion cut short by a crash leaves a directory that no longer
// verifies, not one that looks complete and is not.
void prune(const std::string& dir, const CheckpointRef& parent, int keep) {
  if (keep <= 0) return;
  std::vector<std::string> line;  // the ancestors in dir, newest first
  for (std::string path = resolve(dir, parent); !path.empty();
       path = resolve(dir, read_manifest(path).state.parent))
    line.push_back(path);
  std::error_code ec;
  for (size_t i = size_t(keep) - 1; i < line.size(); ++i) {
    const fs::path old = line[i];
    // Only tetra's own step_N directories: a copy the user made ("best") is theirs.
    if (!parse_step_dir_name(old.filename().string()) || !verify(old.string()).empty()) continue;
    fs::remove(old / kManifestFile, ec);
    if (!ec) fs::remove_all(old, ec);
    // The new checkpoint is complete: a leftover old one wastes space, it breaks nothing.
    if (ec) {
      std::fprintf(stderr, "tetra: warning: cannot delete old checkpoint '%s': %s\n", old.c_str(),
                   ec.message().c_str());
    }
  }
}

}  // namespace

std::string tmp_dir_of(const std::string& dir, int64_t step) {
  return (fs::path(dir) / (step_dir_name(step) + ".tmp")).string();
}

std::string begin_write(const std::string& dir, int64_t step) {
  const std::string context = cannot_write(dir);
  check(step >= 0, context, ": step ", step, " is negative");
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec, context, ": ", ec.message());
  check(fs::is_directory(dir, ec), context, ": it exists and is not a directory");
  const std::string tmp = tmp_dir_of(dir, step);
  for (const std::string& stale : {tmp, old_dir_of(dir, step)}) {
    fs::remove_all(stale, ec);  // left by a writer that crashed
    check(!ec, context, ": cannot remove the stale '", stale, "': ", ec.message());
  }
  check(::mkdir(tmp.c_str(), 0755) == 0, context, ": cannot create '", tmp,
        "': ", std::strerror(errno));
  return tmp;
}

void set_latest(const std::string& dir, const std::string& target) {
  write_file_atomically((fs::path(dir) / kLatestFile).string(), target + "\n", cannot_write(dir));
}

CheckpointRef reference_to(const std::string& dir, const std::string& checkpoint_path) {
  const fs::path p = fs::absolute(checkpoint_path).lexically_normal();
  const fs::path leaf = p.filename().empty() ? p.parent_path() : p;
  std::error_code ec;
  const bool here = fs::equivalent(leaf.parent_path(), dir, ec);
  return {here ? leaf.filename().string() : leaf.string(), read_manifest(checkpoint_path).checksum};
}

void prune_behind(const std::string& dir, const CheckpointRef& head, int keep) {
  const std::string path = resolve(dir, head);
  if (!path.empty()) prune(dir, read_manifest(path).state.parent, keep);
}

ShardRecord write_shard(const std::string& tmp_dir, int rank, int world_size, const RunState& state,
                        const std::vector<Segment>& segments) {
  const ModelConfig model = model_from_json(state.model, "checkpoint state");
  const std::string dir = fs::path(tmp_dir).parent_path().string();
  std::error_code ec;
  // Rank 0 created it: not finding it means the ranks do not share the directory.
  check(fs::is_directory(tmp_dir, ec), cannot_write(dir), ": '", tmp_dir,
        "' does not exist on rank ", rank, "; every rank must see the same checkpoint directory");

  // A segment that does not fit the model would make a checkpoint that cannot be read
  // back: refuse it now, with the caller's mistake in the message.
  std::map<std::pair<int, int>, std::map<std::string, int64_t>> local_numel;
  for (const Segment& s : segments) {
    const std::string what = "checkpoint segment '" + s.name + "' of rank " + std::to_string(rank);
    check(s.tp_size >= 1 && s.tp_rank >= 0 && s.tp_rank < s.tp_size, what, ": TP rank ", s.tp_rank,
          " of ", s.tp_size, " is invalid");
    auto& numel = local_numel[{s.tp_size, s.tp_rank}];
    if (numel.empty()) {
      for (const UnitSpec& u : make_units(model, s.tp_size, s.tp_rank)) {
        for (const ParamInfo& p : u.params) numel[p.name] = p.numel();
      }
    }
    const auto it = numel.find(s.name);
    check(it != numel.end(), what, ": the model has no such tensor");
    check(s.begin >= 0 && s.begin <= s.end && s.end <= it->second, what, ": range [", s.begin, ", ",
          s.end, ") is outside its ", it->second, " TP-local elements");
    check(s.begin == s.end || (s.param && s.adam_m && s.adam_v), what, ": missing data");
  }

  st::Writer w;
  for (const Segment& s : segments) {
    const std::vector<int64_t> shape = {s.end - s.begin};
    w.add(segment_tensor(s.name, s.tp_rank, s.begin, Reader::Kind::Param), shape, s.param);
    w.add(segment_tensor(s.name, s.tp_rank, s.begin, Reader::Kind::AdamM), shape, s.adam_m);
    w.add(segment_tensor(s.name, s.tp_rank, s.begin, Reader::Kind::AdamV), shape, s.adam_v);
  }
  w.set_metadata("segments", segments_metadata(segments));
  w.set_metadata("checkpoint", shard_metadata(state, rank, world_size));
  ShardRecord record;
  record.file = shard_file_name(rank);
  const std::string path = (fs::path(tmp_dir) / record.file).string();
  w.write(path);
  // Over the bytes as written, so that verify() compares against what is on disk.
  const FileDigest d = digest_file(path);
  record.bytes = d.bytes;
  record.crc32c = d.crc;
  return record;
}

std::string finish_write(const std::string& dir, const RunState& state,
                         const std::vector<ShardRecord>& shards, int keep,
                         const std::function<void()>& still_ours) {
  const std::string context = cannot_write(dir);
  const std::string name = step_dir_name(state.step);
  const std::string tmp = tmp_dir_of(dir, state.step);
  const std::string final_dir = (fs::path(dir) / name).string();
  const json manifest = manifest_json(state, shards);
  write_file_atomically((fs::path(tmp) / kManifestFile).string(), manifest.dump(2) + "\n", context);
  if (still_ours) still_ours();
  set_aside_unless_same(final_dir, manifest.at("manifest_checksum").get<std::string>(), context);
  install(tmp, final_dir, old_dir_of(dir, state.step), context);
  sync_dir(dir, context);
  // Only now may `latest` name it: before this point a crash leaves the previous one.
  set_latest(dir, name);
  prune(dir, state.parent, keep);
  return final_dir;
}

}  // namespace tetra::ckpt
