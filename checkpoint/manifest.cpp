#include "checkpoint/manifest.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "checkpoint/checksum.hpp"
#include "util/input_file.hpp"

namespace tetra::ckpt {

namespace {

// Member `key` of object `v`. Messages name the key only: callers add the file.
const json& member(const json& v, const std::string& key) {
  check(v.is_object(), "expected an object with \"", key, "\", got ", v.dump());
  check(v.contains(key), "missing \"", key, "\"");
  return v.at(key);
}

int64_t int_member(const json& v, const std::string& key, int64_t lo, int64_t hi) {
  const json& x = member(v, key);
  const std::optional<int64_t> i = json_int(x);
  check(i.has_value(), "\"", key, "\" is ", x.dump(), ", not an integer");
  check(*i >= lo && *i <= hi, "\"", key, "\" is ", *i, ", outside [", lo, ", ", hi, "]");
  return *i;
}

double number_member(const json& v, const std::string& key) {
  const json& x = member(v, key);
  check(x.is_number(), "\"", key, "\" is ", x.dump(), ", not a number");
  return x.get<double>();
}

const std::string& string_member(const json& v, const std::string& key) {
  const json& x = member(v, key);
  check(x.is_string(), "\"", key, "\" is ", x.dump(), ", not a string");
  return x.get_ref<const std::string&>();
}

uint32_t parse_crc(const std::string& hex) {
  uint32_t crc = 0;
  const auto r = std::from_chars(hex.data(), hex.data() + hex.size(), crc, 16);
  check(hex.size() == 8 && r.ec == std::errc() && r.ptr == hex.data() + hex.size(), "checksum \"",
        hex, "\" is not 8 hex digits");
  return crc;
}

json ref_json(const CheckpointRef& r) {
  if (r.name.empty()) return nullptr;
  json v = json::object();
  v["name"] = r.name;
  v["manifest_checksum"] = crc_hex(r.manifest_crc);
  return v;
}

CheckpointRef ref_from_json(const json& v, const std::string& key) {
  if (v.is_null()) return {};
  CheckpointRef r;
  with_context("\"" + key + "\"", [&] {
    r.name = string_member(v, "name");
    check(!r.name.empty(), "an empty name");
    r.manifest_crc = parse_crc(string_member(v, "manifest_checksum"));
  });
  return r;
}

// The CRC-32C of the manifest without its own checksum, over the compact JSON that the
// library writes for it whether built or parsed (keys sorted, numbers round-tripped).
uint32_t contents_crc(json m) {
  m.erase("manifest_checksum");
  const std::string text = m.dump();
  return crc32c(text.data(), text.size());
}

// The step a checkpoint's directory name gives ("ck/step_00000030/" -> 30), if it has one.
std::optional<int64_t> step_of_path(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return parse_step_dir_name(p.filename().string());
}

// The cross-checks between the manifest's fields and the directory's name.
void check_consistent(const RunState& s, int64_t world, const std::string& checkpoint_dir) {
  if (const auto named = step_of_path(checkpoint_dir))
    check(*named == s.step, "step ", s.step, " is not the step of its directory's name (", *named,
          ")");
  check(s.sampler_step == s.step, "the sampler is at step ", s.sampler_step, ", the manifest at ",
        s.step);
  const int64_t seq_len = int_member(s.model, "seq_len", 1, INT_MAX);
  check(s.global_batch >= 1, "\"global_batch\" is ", s.global_batch, ", not positive");
  check(s.tokens_seen == s.step * s.global_batch * seq_len, "\"tokens_seen\" is ", s.tokens_seen,
        ", but ", s.step, " steps of ", s.global_batch, " sequences of ", seq_len, " tokens are ",
        s.step * s.global_batch * seq_len);
  int64_t product = 1;
  for (const char* dim : {"tp", "cp", "pp", "dp"}) product *= int_member(s.layout, dim, 1, INT_MAX);
  check(product == world, "the layout has ", product, " ranks (tp*cp*pp*dp), \"world_size\" ",
        world);
  // A parent named step_N must be older; one under another name (a resume from a copy such
  // as "/backup/best") has no step in its name to compare.
  if (const auto parent_step = step_of_path(s.parent.name))
    check(*parent_step < s.step, "the parent '", s.parent.name, "' is not older than step ",
          s.step);
}

// Version 2 manifests recorded the run's settings as `run`, under their --allow-change names
// ("min-lr"), and the ZeRO stage in the layout; version 3 records the configuration's sections.
// A version 2 manifest's settings are put where version 3 keeps them, beside its seed and
// global batch, so that a resume compares both alike.
json config_of_version_2(const json& run, const RunState& s) {
  check(run.is_object(), "\"run\" is ", run.dump(), ", not an object");
  json c = json::object();
  c["optimizer"]["seed"] = s.seed;
  c["batch"]["global_batch"] = s.global_batch;
  if (s.layout.is_object() && s.layout.contains("zero")) c["optimizer"]["zero"] = s.layout["zero"];
  const std::pair<const char*, const char*> sections[] = {{"data", "data"},
                                                          {"lr", "optimizer"},
                                                          {"min-lr", "optimizer"},
                                                          {"warmup", "optimizer"},
                                                          {"steps", "optimizer"},
                                                          {"clip", "optimizer"},
                                                          {"weight-decay", "optimizer"},
                                                          {"dtype", "device"}};
  for (const auto& [name, section] : sections) {
    std::string key = name;
    std::replace(key.begin(), key.end(), '-', '_');
    if (run.contains(name)) c[section][key] = run.at(name);
  }
  return c;
}

RunState run_state(const json& m, int64_t version) {
  RunState s;
  s.step = int_member(m, "step", 0, INT64_MAX);
  s.tokens_seen = int_member(m, "tokens_seen", 0, INT64_MAX);
  s.seed = uint64_t(int_member(m, "seed", INT64_MIN, INT64_MAX));  // see manifest_json
  const json& sampler = member(m, "sampler");
  s.sampler_step = int_member(sampler, "step", 0, INT64_MAX);
  s.global_batch = int(int_member(sampler, "global_batch", 0, INT_MAX));
  s.model = member(m, "model");
  model_from_json(s.model, "model");
  s.layout = member(m, "layout");
  s.config = version == 2 ? config_of_version_2(member(m, "run"), s) : member(m, "config");
  check(s.config.is_object(), "\"config\" is ", s.config.dump(), ", not an object");
  for (const auto& [name, section] : s.config.items())
    check(section.is_object(), "\"config\" has ", name, " = ", section.dump(), ", not an object");
  // The seed and the global batch are the sampler's too: both records must say the same.
  const json& optimizer = s.config.value("optimizer", json::object());
  const json& batch = s.config.value("batch", json::object());
  check(!optimizer.contains("seed") || optimizer.at("seed") == json(s.seed), "\"config\" has seed ",
        optimizer.value("seed", json()).dump(), ", the manifest ", s.seed);
  check(!batch.contains("global_batch") || batch.at("global_batch") == json(s.global_batch),
        "\"config\" has global_batch ", batch.value("global_batch", json()).dump(),
        ", the sampler ", s.global_batch);
  s.parent = ref_from_json(member(m, "parent"), "parent");
  return s;
}

}  // namespace

json model_to_json(const ModelConfig& c) {
  // The model's settings (model/config.hpp) but init_from (where the weights came from is not
  // the shape), and the two values of its shape that are not settings; norm_eps goes in as the
  // float's exact value as a double, so that it comes back bit for bit.
  json v = settings::to_json(kModelKeys, c);
  v.erase("init_from");
  v["vocab_rows"] = c.rows();
  v["norm_eps"] = c.norm_eps;
  return v;
}

ModelConfig model_from_json(const json& v, const std::string& what) {
  ModelConfig c;
  with_context(what, [&] {
    if (v.contains("vocab_rows")) {
      c.vocab_rows = int_member(v, "vocab_rows", 1, INT64_MAX);
      c.vocab = int_member(v, "vocab", 1, c.vocab_rows);
    } else {
      // Older manifests give the rows as vocab and the tokens as data_vocab, and those written
      // before the padding was masked have no data_vocab: all rows count.
      c.vocab_rows = int_member(v, "vocab", 1, INT64_MAX);
      c.vocab =
          v.contains("data_vocab") ? int_member(v, "data_vocab", 1, c.vocab_rows) : c.vocab_rows;
    }
    c.layers = int(int_member(v, "layers", 1, INT_MAX));
    c.dim = int(int_member(v, "dim", 1, INT_MAX));
    c.heads = int(int_member(v, "heads", 1, INT_MAX));
    c.kv_heads = int(int_member(v, "kv_heads", 1, INT_MAX));
    c.ffn_dim = int(int_member(v, "ffn_dim", 1, INT_MAX));
    c.seq_len = int(int_member(v, "seq_len", 1, INT_MAX));
    c.rope_theta = number_member(v, "rope_theta");
    // Llama 3's RoPE, tied embeddings and the document mask; a manifest written before them has
    // none of them.
    if (v.contains("rope_type")) {
      c.rope_type = string_member(v, "rope_type");
      c.rope_factor = number_member(v, "rope_factor");
      c.rope_low_freq_factor = number_member(v, "rope_low_freq_factor");
      c.rope_high_freq_factor = number_member(v, "rope_high_freq_factor");
      c.rope_original_context = int(int_member(v, "rope_original_context", 1, INT_MAX));
    }
    for (auto [key, field] :
         {std::pair{"tie_embeddings", &c.tie_embeddings}, {"doc_mask", &c.doc_mask}})
      if (v.contains(key)) {
        const json& x = member(v, key);
        check(x.is_boolean(), "\"", key, "\" is ", x.dump(), ", not true or false");
        *field = x.get<bool>();
      }
    c.norm_eps = float(number_member(v, "norm_eps"));
    c.validate();
  });
  return c;
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> parse_step_dir_name(const std::string& name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return {};
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return {};
  }
  int64_t step = 0;
  if (std::from_chars(digits.data(), digits.data() + digits.size(), step).ec != std::errc()) {
    return {};  // beyond int64
  }
  return step;
}

std::string shard_file_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank_%05d.safetensors", rank);
  return buf;
}

std::string segment_tensor(const std::string& name, int tp_rank, int64_t begin, Reader::Kind kind) {
  // The two numbers never hold '#', so the name can be read back from the right: distinct
  // segments always get distinct tensor names, whatever the parameter names are.
  const char* suffix = kind == Reader::Kind::Param   ? "param"
                       : kind == Reader::Kind::AdamM ? "adam_m"
                                                     : "adam_v";
  return name + "#" + std::to_string(tp_rank) + "#" + std::to_string(begin) + "/" + suffix;
}

std::string segments_metadata(const std::vector<Segment>& segments) {
  json list = json::array();
  for (const Segment& s : segments) {
    json e = json::object();
    e["name"] = s.name;
    e["tp_rank"] = s.tp_rank;
    e["tp_size"] = s.tp_size;
    e["begin"] = s.begin;
    e["end"] = s.end;
    list.push_back(std::move(e));
  }
  return list.dump();
}

std::vector<SegmentRange> read_segments(const st::Reader& file) {
  std::vector<SegmentRange> out;
  with_context("checkpoint file '" + file.path() + "'", [&] {
    const auto it = file.metadata().find("segments");
    check(it != file.metadata().end(), "no \"segments\" metadata: not a tetra checkpoint shard");
    json list;
    const std::string problem = parse_json(it->second, list);
    check(problem.empty(), "\"segments\" metadata: ", problem);
    check(list.is_array(), "\"segments\" metadata is not a JSON array");
    for (const json& e : list) {
      SegmentRange s;
      s.name = string_member(e, "name");
      s.tp_size = int(int_member(e, "tp_size", 1, INT_MAX));
      s.tp_rank = int(int_member(e, "tp_rank", 0, s.tp_size - 1));
      s.begin = int_member(e, "begin", 0, INT64_MAX);
      s.end = int_member(e, "end", s.begin, INT64_MAX);
      for (Reader::Kind kind : {Reader::Kind::Param, Reader::Kind::AdamM, Reader::Kind::AdamV}) {
        const std::string t = segment_tensor(s.name, s.tp_rank, s.begin, kind);
        check(file.has(t), "segment tensor '", t, "' is missing");
        const st::TensorInfo& info = file.info(t);
        check(info.dtype == "F32" && info.shape.size() == 1 && info.shape[0] == s.end - s.begin,
              "segment tensor '", t, "' is not 1-D F32 of ", s.end - s.begin, " elements");
      }
      out.push_back(std::move(s));
    }
  });
  return out;
}

std::string shard_metadata(const RunState& state, int rank, int world_size) {
  json v = json::object();
  v["step"] = state.step;
  v["rank"] = rank;
  v["world_size"] = world_size;
  v["parent"] = ref_json(state.parent);
  return v.dump();
}

namespace {

// The "checkpoint" metadata of a shard file, parsed. Throws tetra::Error (no file named).
json shard_header(const st::Reader& file) {
  const auto it = file.metadata().find("checkpoint");
  check(it != file.metadata().end(), "no \"checkpoint\" metadata");
  json v;
  const std::string problem = parse_json(it->second, v);
  check(problem.empty(), "\"checkpoint\" metadata: ", problem);
  check(v.is_object(), "\"checkpoint\" metadata is not an object");
  return v;
}

}  // namespace

void check_shard_metadata(const st::Reader& file, const Manifest& m, int rank) {
  with_context("checkpoint file '" + file.path() + "'", [&] {
    const json v = shard_header(file);
    const int64_t step = int_member(v, "step", 0, INT64_MAX);
    check(step == m.state.step, "it belongs to step ", step, ", the manifest to step ",
          m.state.step);
    const int64_t r = int_member(v, "rank", 0, INT_MAX);
    const int64_t world = int_member(v, "world_size", 1, INT_MAX);
    check(r == rank && world == int64_t(m.shards.size()), "it is rank ", r, " of ", world,
          ", the manifest lists it as rank ", rank, " of ", m.shards.size());
    const CheckpointRef parent = ref_from_json(member(v, "parent"), "parent");
    check(parent == m.state.parent, "its parent is '", parent.name, "', the manifest's '",
          m.state.parent.name, "'");
  });
}

std::optional<CheckpointRef> parent_of(const std::string& checkpoint_dir) {
  try {
    return read_manifest(checkpoint_dir).state.parent;
  } catch (const std::exception&) {
  }
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(checkpoint_dir, ec))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    try {
      return ref_from_json(member(shard_header(st::Reader(f)), "parent"), "parent");
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

json manifest_json(const RunState& state, const std::vector<ShardRecord>& shards) {
  json m = json::object();
  m["format"] = kFormatName;
  m["version"] = kFormatVersion;
  m["step"] = state.step;
  m["tokens_seen"] = state.tokens_seen;
  // JSON numbers here are int64: a seed of 2^63 or more is stored as its two's-complement
  // value, which run_state() turns back into the same bits.
  m["seed"] = static_cast<int64_t>(state.seed);
  m["sampler"]["step"] = state.sampler_step;
  m["sampler"]["global_batch"] = state.global_batch;
  m["model"] = state.model;
  m["layout"] = state.layout;
  m["config"] = state.config.is_null() ? json::object() : state.config;
  m["parent"] = ref_json(state.parent);
  m["world_size"] = static_cast<int64_t>(shards.size());
  m["checksum"] = kChecksumAlgorithm;
  m["shards"] = json::array();
  for (const ShardRecord& s : shards) {
    json e = json::object();
    e["file"] = s.file;
    e["bytes"] = s.bytes;
    e["checksum"] = crc_hex(s.crc32c);
    m["shards"].push_back(std::move(e));
  }
  m["manifest_checksum"] = crc_hex(contents_crc(m));
  return m;
}

Manifest read_manifest(const std::string& checkpoint_dir) {
  const std::string path = (std::filesystem::path(checkpoint_dir) / kManifestFile).string();
  const std::string where = "checkpoint manifest '" + path + "'";
  std::error_code ec;
  check(std::filesystem::is_directory(checkpoint_dir, ec), "checkpoint directory '", checkpoint_dir,
        "': not found");
  std::string text;
  const std::string unread = read_input_file(path, text);
  check(unread.empty(), where, ": ", unread);

  json m;
  const std::string problem = parse_json(text, m);
  check(problem.empty(), where, ": ", problem);
  Manifest out;
  with_context(where, [&] {
    const std::string& format = string_member(m, "format");
    check(format == kFormatName, "format is \"", format, "\", not \"", kFormatName, "\"");
    const int64_t version = int_member(m, "version", 1, INT64_MAX);
    check(version >= kOldestFormatVersion && version <= kFormatVersion, "format version ", version,
          "; this tetra reads versions ", kOldestFormatVersion, " to ", kFormatVersion);
    const std::string& algorithm = string_member(m, "checksum");
    check(algorithm == kChecksumAlgorithm, "unknown checksum algorithm \"", algorithm, "\"");
    const std::string& stored = string_member(m, "manifest_checksum");
    out.checksum = parse_crc(stored);
    const uint32_t actual = contents_crc(m);
    check(actual == out.checksum, "its checksum ", stored, " does not match its contents (",
          crc_hex(actual), "): the manifest was edited or is corrupt");
    out.state = run_state(m, version);

    const int64_t world = int_member(m, "world_size", 1, INT_MAX);
    check_consistent(out.state, world, checkpoint_dir);
    const json& shards = member(m, "shards");
    check(shards.is_array() && int64_t(shards.size()) == world, "\"shards\" must list ", world,
          " files, one per rank");
    for (int r = 0; r < int(world); ++r) {
      const json& e = shards.at(size_t(r));
      ShardRecord s;
      s.file = string_member(e, "file");
      // Fixed names also keep a manifest from pointing outside its directory.
      check(s.file == shard_file_name(r), "shard ", r, " is \"", s.file, "\", expected \"",
            shard_file_name(r), "\"");
      s.bytes = uint64_t(int_member(e, "bytes", 0, INT64_MAX));
      s.crc32c = parse_crc(string_member(e, "checksum"));
      out.shards.push_back(std::move(s));
    }
  });
  return out;
}

}  // namespace tetra::ckpt
