// Reading checkpoints: verify() and find_latest() decide which one a run may resume from;
// Reader assembles whole tensors from the segments of any saved layout.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <utility>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint/manifest.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"

namespace tetra::ckpt {

namespace fs = std::filesystem;

namespace {

using Range = std::pair<int64_t, int64_t>;

// The first part of [0, n) that no range covers, or nullopt.
std::optional<Range> first_gap(std::vector<Range> ranges, int64_t n) {
  std::sort(ranges.begin(), ranges.end());
  int64_t covered = 0;  // [0, covered) is covered
  for (const auto& [begin, end] : ranges) {
    if (begin > covered) return Range{covered, begin};
    covered = std::max(covered, end);
  }
  if (covered < n) return Range{covered, n};
  return std::nullopt;
}

const char* kind_name(Reader::Kind kind) {
  return kind == Reader::Kind::Param   ? "weights"
         : kind == Reader::Kind::AdamM ? "Adam m"
                                       : "Adam v";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string verify(const std::string& checkpoint_dir) {
  try {
    const Manifest m = read_manifest(checkpoint_dir);
    for (const ShardRecord& s : m.shards) {
      const std::string path = (fs::path(checkpoint_dir) / s.file).string();
      const std::string where = "checkpoint file '" + path + "'";
      std::error_code ec;
      const uint64_t bytes = fs::file_size(path, ec);
      check(!ec, where, ": ", ec.message());
      // The size first: it names a truncated file without reading all of it.
      check(bytes == s.bytes, where, ": ", bytes, " bytes, but the manifest says ", s.bytes,
            bytes < s.bytes ? " (truncated)" : "");
      const uint32_t crc = digest_file(path).crc;
      check(crc == s.crc32c, where, ": ", kChecksumAlgorithm, " ", crc_hex(crc),
            " does not match the manifest's ", crc_hex(s.crc32c), " (the file is corrupt)");
    }
    // Parses every shard's header and segments, which the checksums alone do not prove.
    const Reader r(checkpoint_dir);
    const std::string coverage = r.coverage_problem();
    return coverage.empty() ? r.copies_problem() : coverage;
  } catch (const std::exception& e) {
    return e.what();
  }
}

namespace {

// The checkpoint a reference names: a name in dir, or a path. "" when nothing is there.
std::string locate(const std::string& dir, const std::string& name) {
  const fs::path p = name.find('/') == std::string::npos ? fs::path(dir) / name : fs::path(name);
  std::error_code ec;
  return fs::is_directory(p, ec) ? p.string() : "";
}

// The newest checkpoint of the line whose newest is `head` that verifies, following parents;
// "" when none does (each one skipped is reported) or the line cannot be followed further.
std::string newest_on_line(const std::string& dir, std::string path,
                           std::vector<std::string>& warnings) {
  for (std::optional<uint32_t> expected;;) {
    const std::string problem = verify(path);
    if (problem.empty() && expected && read_manifest(path).checksum != *expected) {
      // Its own parents are another line's: the line ends here.
      warnings.push_back("skipping " + path +
                         ": another line's checkpoint has taken the name of the one its "
                         "successor follows");
      return "";
    }
    if (problem.empty()) return path;
    warnings.push_back("skipping " + path + ": " + problem);
    const std::optional<CheckpointRef> parent = parent_of(path);
    if (!parent) {
      warnings.push_back(
          "skipping the rest of its line: neither the manifest nor a shard file of " + path +
          " says which checkpoint it follows");
      return "";
    }
    if (parent->name.empty()) return "";  // the line began at step 0
    path = locate(dir, parent->name);
    if (path.empty()) return "";  // pruned or deleted: nothing older on this line
    expected = parent->manifest_crc;
  }
}

// The step_N directories in dir, newest first.
std::vector<std::string> step_dirs(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const auto step = parse_step_dir_name(e.path().filename().string());
    if (step && e.is_directory(ec)) found.emplace_back(*step, e.path().string());
  }
  check(!ec, "cannot list checkpoint directory '", dir, "': ", ec.message());
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (const auto& [step, path] : found) out.push_back(path);
  return out;
}

}  // namespace

std::string find_latest(const std::string& dir, std::vector<std::string>* warnings) {
  std::vector<std::string> ignored;
  std::vector<std::string>& notes = warnings ? *warnings : ignored;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  // `latest` names the newest checkpoint of the line being trained; the line continues
  // through parents. Checkpoints of other lines (a rollback's abandoned later steps) are
  // never taken in its place.
  // Read only when it is a regular file: a FIFO's open would wait for a writer.
  const std::string latest_path = (fs::path(dir) / kLatestFile).string();
  std::string latest;
  const std::string unread = read_input_file(latest_path, latest, 4096);
  latest = latest.substr(0, latest.find('\n'));
  if (!unread.empty() && unread != kNotFound) {
    notes.push_back("'" + latest_path + "' cannot be read (" + unread +
                    "); taking the newest that verifies");
  } else if (unread.empty()) {
    if (latest == kNoCheckpoint) return "";
    // A name in dir (step_N, or a copy resumed from, such as "best") or a path elsewhere.
    const bool a_name = !latest.empty() && latest != "." && latest != "..";
    const std::string head = a_name ? locate(dir, latest) : "";
    if (!head.empty()) return newest_on_line(dir, head, notes);
    // A `latest` that names nothing here was edited or damaged: say so rather than ignore it.
    std::ostringstream note;
    note << "'" << (fs::path(dir) / kLatestFile).string() << "' names '" << latest
         << "', which is not a checkpoint in '" << dir << "'; taking the newest that verifies";
    notes.push_back(note.str());
  }
  // No usable `latest`: the newest complete checkpoint that verifies.
  for (const std::string& path : step_dirs(dir)) {
    const std::string problem = verify(path);
    if (problem.empty()) return path;
    notes.push_back("skipping " + path + ": " + problem);
  }
  return "";
}

std::vector<std::string> verifying_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const std::string& path : step_dirs(dir))
    if (verify(path).empty()) out.push_back(path);
  return out;
}

Reader::Reader(const std::string& checkpoint_dir) : dir_(checkpoint_dir) {
  const Manifest m = read_manifest(dir_);
  manifest_crc_ = m.checksum;
  state_ = m.state;
  shards_ = m.shards;
  model_ = model_from_json(state_.model, "checkpoint '" + dir_ + "'");
  for (const UnitSpec& u : make_units(model_, 1, 0)) {
    params_.insert(params_.end(), u.params.begin(), u.params.end());
  }

  // Each segment names the TP layout it was cut from; that layout's ParamInfo maps its
  // elements to global ones.
  std::map<std::pair<int, int>, std::map<std::string, ParamInfo>> views;
  for (size_t f = 0; f < shards_.size(); ++f) {
    files_.emplace_back((fs::path(dir_) / shards_[f].file).string());
    check_shard_metadata(files_.back(), m, int(f));
    const std::string where = "checkpoint file '" + files_.back().path() + "'";
    const int64_t layout_tp = *json_int(state_.layout.at("tp"));  // read_manifest checked it
    for (const SegmentRange& s : read_segments(files_.back())) {
      check(s.tp_size == layout_tp, where, ": a segment of '", s.name, "' was cut for TP ",
            s.tp_size, ", but the manifest's layout has TP ", layout_tp);
      auto& view = views[{s.tp_size, s.tp_rank}];
      if (view.empty()) {
        with_context(where, [&] {
          for (const UnitSpec& u : make_units(model_, s.tp_size, s.tp_rank)) {
            for (const ParamInfo& p : u.params) view[p.name] = p;
          }
        });
      }
      const auto it = view.find(s.name);
      check(it != view.end(), where, ": segment of '", s.name, "', which the model lacks");
      check(s.end <= it->second.numel(), where, ": segment [", s.begin, ", ", s.end, ") of '",
            s.name, "' is outside its ", it->second.numel(), " elements on TP rank ", s.tp_rank,
            " of ", s.tp_size);
      pieces_[s.name].push_back({f, s.tp_rank, s.tp_size, s.begin, s.end, it->second});
    }
  }
}

std::vector<float> Reader::tensor(const std::string& name, Kind kind) const {
  const auto param = std::find_if(params_.begin(), params_.end(),
                                  [&](const ParamInfo& p) { return p.name == name; });
  check(param != params_.end(), "checkpoint '", dir_, "': the model has no tensor '", name, "'");
  const int64_t n = param->numel();
  std::vector<float> out(size_t(n), 0.0f);
  std::vector<int> from(size_t(n), -1);  // the piece each element came from
  int64_t covered = 0;
  const auto it = pieces_.find(name);
  if (it != pieces_.end()) {
    std::vector<float> buf;
    for (size_t k = 0; k < it->second.size(); ++k) {
      const Piece& p = it->second[k];
      buf.resize(size_t(p.end - p.begin));
      files_[p.file].read(segment_tensor(name, p.tp_rank, p.begin, kind), 0, int64_t(buf.size()),
                          buf.data());
      for (int64_t i = p.begin; i < p.end; ++i) {
        const auto g = size_t(p.param.global_index(i, p.tp_rank));
        const float x = buf[size_t(i - p.begin)];
        if (from[g] >= 0) {
          // A TP-replicated tensor saved by several TP ranks: the copies must agree bit for
          // bit, or the checkpoint does not say which one the run held.
          const Piece& q = it->second[size_t(from[g])];
          check(std::memcmp(&out[g], &x, sizeof x) == 0, "checkpoint '", dir_, "': tensor '", name,
                "' (", kind_name(kind), ") has copies that differ at flat index ", g, ": ", out[g],
                " from TP rank ", q.tp_rank, " in ", shards_[q.file].file, ", ", x,
                " from TP rank ", p.tp_rank, " in ", shards_[p.file].file);
          continue;
        }
        out[g] = x;
        from[g] = int(k);
        ++covered;
      }
    }
  }
  if (covered < n) {
    const auto first = std::find(from.begin(), from.end(), -1) - from.begin();
    fail("checkpoint '", dir_, "': tensor '", name, "' is incomplete: ", n - covered, " of ", n,
         " elements are in no shard file (the first at flat index ", first, ")");
  }
  return out;
}

std::string Reader::copies_problem() const {
  try {
    for (const ParamInfo& p : params_) {
      const auto it = pieces_.find(p.name);
      if (p.tp_dim >= 0 || it == pieces_.end()) continue;
      const bool copies = std::any_of(it->second.begin(), it->second.end(),
                                      [](const Piece& q) { return q.tp_rank > 0; });
      if (!copies) continue;
      for (Kind kind : {Kind::Param, Kind::AdamM, Kind::AdamV}) tensor(p.name, kind);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string Reader::coverage_problem(const ParamInfo& param) const {
  const auto it = pieces_.find(param.name);
  if (it == pieces_.end()) {
    return "checkpoint '" + dir_ + "': no shard file holds any of tensor '" + param.name + "'";
  }
  // A tensor split over TP is whole when, for some TP size it was saved at, every TP rank's
  // part is whole. A replicated one is the same on every TP rank: any piece counts.
  const bool split = param.tp_dim >= 0;
  std::map<int, std::map<int, std::vector<Range>>> by_size;  // tp_size -> tp_rank -> ranges
  for (const Piece& p : it->second) {
    by_size[split ? p.tp_size : 1][split ? p.tp_rank : 0].emplace_back(p.begin, p.end);
  }
  std::string problem;
  for (auto& [tp_size, ranks] : by_size) {
    problem.clear();
    for (int r = 0; r < tp_size && problem.empty(); ++r) {
      if (const auto gap = first_gap(ranks[r], param.numel() / tp_size)) {
        problem =
            "elements [" + std::to_string(gap->first) + ", " + std::to_string(gap->second) + ")" +
            (split ? " of TP rank " + std::to_string(r) + " of " + std::to_string(tp_size) : "");
      }
    }
    if (problem.empty()) return "";
  }
  return "checkpoint '" + dir_ + "': tensor '" + param.name + "' is incomplete: " + problem +
         " are in no shard file";
}

std::string Reader::coverage_problem() const {
  for (const ParamInfo& p : params_) {
    std::string problem = coverage_problem(p);
    if (!problem.empty()) return problem;
  }
  return "";
}

std::string Reader::describe() const {
  std::ostringstream os;
  os << "checkpoint " << dir_ << "\n";
  os << "  step " << state_.step << ", tokens seen " << state_.tokens_seen << ", seed "
     << state_.seed << "\n";
  os << "  sampler: step " << state_.sampler_step << ", global batch " << state_.global_batch
     << "\n";
  os << "  model: " << model_.str() << ", rope theta " << model_.rope_theta << ", norm eps "
     << model_.norm_eps << "\n";
  os << "  layout: " << state_.layout.dump() << "\n";
  os << "  config: " << state_.config.dump() << "\n";
  os << "  parent: "
     << (state_.parent.name.empty()
             ? "none (its line starts at step 0)"
             : state_.parent.name + " (manifest " + crc_hex(state_.parent.manifest_crc) + ")")
     << "\n";
  uint64_t total = 0;
  for (const ShardRecord& s : shards_) total += s.bytes;
  os << "  files: " << shards_.size() << ", " << total << " bytes, " << kChecksumAlgorithm << "\n";
  for (size_t f = 0; f < shards_.size(); ++f) {
    os << "    " << shards_[f].file << "  " << shards_[f].bytes << " bytes  "
       << crc_hex(shards_[f].crc32c) << "  segments " << files_[f].names().size() / 3 << "\n";
  }
  int64_t params = 0;
  for (const ParamInfo& p : params_) params += p.numel();
  os << "  tensors: " << params_.size() << ", " << params
     << " parameters, each with Adam m and v\n";
  for (const ParamInfo& p : params_) {
    const auto it = pieces_.find(p.name);
    os << "    " << p.name << "  " << shape_text(p.shape) << "  segments "
       << (it == pieces_.end() ? 0 : it->second.size())
       << (coverage_problem(p).empty() ? "" : "  INCOMPLETE") << "\n";
  }
  return os.str();
}

}  // namespace tetra::ckpt
