// Reading checkpoints: verify() and find_latest() decide which one a run may resume from;
// Reader assembles whole tensors from the segments of any saved layout.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint/manifest.hpp"
#include "model/error.hpp"

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
    return Reader(checkpoint_dir).coverage_problem();
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string find_latest(const std::string& dir, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<std::pair<int64_t, std::string>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const auto step = parse_step_dir_name(e.path().filename().string());
    if (step && e.is_directory(ec)) found.emplace_back(*step, e.path().string());
  }
  check(!ec, "cannot list checkpoint directory '", dir, "': ", ec.message());
  std::sort(found.rbegin(), found.rend());
  // `latest` names the newest checkpoint of the current line of training: a run resumed
  // from an earlier step leaves later, abandoned checkpoints behind. It comes first when it
  // verifies; the others follow newest first, as fallbacks.
  std::ifstream latest_file(fs::path(dir) / kLatestFile);
  std::string latest;
  std::getline(latest_file, latest);
  const auto named = parse_step_dir_name(latest);
  const auto it = std::find_if(found.begin(), found.end(),
                               [&](const auto& f) { return named && f.first == *named; });
  if (it != found.end()) {
    std::rotate(found.begin(), it, it + 1);
  } else if (latest_file.is_open() && warnings) {
    // A `latest` that names nothing here was edited or damaged: say so rather than ignore it.
    warnings->push_back("'" + (fs::path(dir) / kLatestFile).string() + "' names '" + latest +
                        "', which is not a checkpoint in '" + dir +
                        "'; taking the newest that verifies");
  }
  for (const auto& [step, path] : found) {
    const std::string problem = verify(path);
    if (problem.empty()) return path;
    if (warnings) warnings->push_back("skipping " + path + ": " + problem);
  }
  return "";
}

Reader::Reader(const std::string& checkpoint_dir) : dir_(checkpoint_dir) {
  Manifest m = read_manifest(dir_);
  state_ = std::move(m.state);
  shards_ = std::move(m.shards);
  model_ = model_from_json(state_.model, "checkpoint '" + dir_ + "'");
  for (const UnitLayout& u : make_units(model_, 1, 0)) {
    params_.insert(params_.end(), u.params.begin(), u.params.end());
  }

  // Each segment names the TP layout it was cut from; that layout's ParamInfo maps its
  // elements to global ones.
  std::map<std::pair<int, int>, std::map<std::string, ParamInfo>> views;
  for (size_t f = 0; f < shards_.size(); ++f) {
    files_.emplace_back((fs::path(dir_) / shards_[f].file).string());
    const std::string where = "checkpoint file '" + files_.back().path() + "'";
    for (const SegmentRange& s : read_segments(files_.back())) {
      auto& view = views[{s.tp_size, s.tp_rank}];
      if (view.empty()) {
        with_context(where, [&] {
          for (const UnitLayout& u : make_units(model_, s.tp_size, s.tp_rank)) {
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
  std::vector<bool> have(size_t(n), false);
  int64_t covered = 0;
  const auto it = pieces_.find(name);
  if (it != pieces_.end()) {
    std::vector<float> buf;
    for (const Piece& p : it->second) {
      buf.resize(size_t(p.end - p.begin));
      files_[p.file].read(segment_tensor(name, p.tp_rank, p.begin, kind), 0, int64_t(buf.size()),
                          buf.data());
      for (int64_t i = p.begin; i < p.end; ++i) {
        const auto g = size_t(p.param.global_index(i, p.tp_rank));
        out[g] = buf[size_t(i - p.begin)];
        covered += have[g] ? 0 : 1;
        have[g] = true;
      }
    }
  }
  if (covered < n) {
    const auto first = std::find(have.begin(), have.end(), false) - have.begin();
    fail("checkpoint '", dir_, "': tensor '", name, "' is incomplete: ", n - covered, " of ", n,
         " elements are in no shard file (the first at flat index ", first, ")");
  }
  return out;
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
