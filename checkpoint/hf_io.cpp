#include "checkpoint/hf_io.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "checkpoint/atomic_file.hpp"
#include "util/checked.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace fs = std::filesystem;
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

bool is_vocab_tensor(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "lm_head.weight";
}

const st::TensorInfo& need(const HfModel& m, const std::string& name) {
  check(m.has(name), "init model '", m.path(), "': missing tensor '", name, "'");
  return m.info(name);
}

int meta_int(const HfModel& m, const std::string& key, int fallback) {
  auto it = m.metadata().find(key);
  if (it == m.metadata().end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (...) {
    fail("init model '", m.path(), "': metadata ", key, " = '", it->second, "' is not a number");
  }
}

// config.json's integer `key` (required unless fallback >= 0).
int64_t config_int(const HfModel& m, const char* key, int64_t fallback = -1) {
  const json& c = m.config();
  if (!c.contains(key) || c[key].is_null()) {
    check(fallback >= 0, "init model '", m.path(), "': config.json has no \"", key, "\"");
    return fallback;
  }
  const std::optional<int64_t> v = json_int(c[key]);
  check(v && *v > 0, "init model '", m.path(), "': config.json's \"", key, "\" is ", c[key].dump(),
        ", not a positive integer");
  return *v;
}

// A size of the model (read as 64 bits, as JSON and safetensors hold it) as the int tetra keeps
// it in, refused when it does not fit rather than cut to its low 32 bits (4294967360 is 64).
int model_int(const HfModel& m, const std::string& what, int64_t v) {
  const std::optional<int> i = checked_int(v);
  check(i.has_value(), "init model '", m.path(), "': ", what, " is ", v,
        ", more than tetra holds (", INT_MAX, ")");
  return *i;
}

// config.json's integer `key` as an int (required unless fallback >= 0), at most `limit`
// (tetra's for that size, model/config.hpp): checked before anything is made of it.
int config_size(const HfModel& m, const char* key, int64_t fallback = -1, int64_t limit = INT_MAX) {
  const int64_t v = config_int(m, key, fallback);
  check(v <= limit, "init model '", m.path(), "': config.json's \"", key, "\" is ", v,
        ", more than tetra's limit of ", limit);
  return model_int(m, std::string("config.json's \"") + key + "\"", v);
}

double config_number(const HfModel& m, const char* key, double fallback) {
  const json& c = m.config();
  if (!c.contains(key)) return fallback;
  check(c[key].is_number() && c[key].get<double>() > 0, "init model '", m.path(),
        "': config.json's \"", key, "\" is ", c[key].dump(), ", not a positive number");
  return c[key].get<double>();
}

// The shape the model's architecture must be: what tetra computes.
void check_architecture(const HfModel& m) {
  const json& c = m.config();
  auto refuse_if = [&](bool bad, const char* what) {
    check(!bad, "init model '", m.path(), "': config.json asks for ", what,
          ", which tetra does not implement");
  };
  refuse_if(c.contains("model_type") && c["model_type"] != "llama",
            "a model_type other than llama");
  refuse_if(c.contains("hidden_act") && c["hidden_act"] != "silu", "an activation other than silu");
  refuse_if(c.value("attention_bias", false), "attention biases");
  refuse_if(c.value("mlp_bias", false), "MLP biases");
}

// RoPE as one object of config.json (`key`: "rope_scaling", as transformers 4 writes the
// variants, or "rope_parameters", as transformers 5 writes all of it) or of a single file's
// metadata, into c: the default type, or Llama 3's with its four numbers. Other types, and
// RoPE over part of each head, are refused.
void read_rope(const HfModel& m, const char* key, const json& r, ModelConfig& c) {
  const std::string where = "init model '" + m.path() + "': config.json's \"" + key + "\"";
  check(r.is_object(), where, " is ", r.dump(), ", not an object");
  const json& type = r.contains("rope_type") ? r["rope_type"]
                     : r.contains("type")    ? r["type"]
                                             : json("default");
  check(type == "default" || type == "llama3", where, " asks for RoPE of type ", type.dump(),
        ", which tetra does not implement (default and llama3 only)");
  check(!r.contains("partial_rotary_factor") || r["partial_rotary_factor"] == 1, where,
        " asks for RoPE over part of each head, which tetra does not implement");
  const auto positive = [&](const char* name) {
    check(r.contains(name) && r[name].is_number() && r[name].get<double>() > 0, where, ".", name,
          " is ", r.value(name, json()).dump(), ", not a positive number");
    return r[name].get<double>();
  };
  if (r.contains("rope_theta")) c.rope_theta = positive("rope_theta");
  if (type != "llama3") return;
  c.rope_type = "llama3";
  c.rope_factor = positive("factor");
  c.rope_low_freq_factor = positive("low_freq_factor");
  c.rope_high_freq_factor = positive("high_freq_factor");
  const std::optional<int64_t> original = r.contains("original_max_position_embeddings")
                                              ? json_int(r["original_max_position_embeddings"])
                                              : std::nullopt;
  check(original && *original > 0, where, ".original_max_position_embeddings is ",
        r.value("original_max_position_embeddings", json()).dump(), ", not a positive integer");
  c.rope_original_context =
      model_int(m, std::string(key) + ".original_max_position_embeddings", *original);
}

// RoPE's base and type from config.json: "rope_theta" at the top (10000 when missing), then
// what "rope_scaling" or "rope_parameters" says (the default type when neither does).
void config_rope(const HfModel& m, ModelConfig& c) {
  const json& j = m.config();
  c.rope_theta = config_number(m, "rope_theta", 10000.0);
  c.rope_type = "default";
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (j.contains(key) && !j[key].is_null()) read_rope(m, key, j[key], c);
}

// config.json's "tie_word_embeddings" (transformers' LlamaConfig defaults it to false).
bool config_tied(const HfModel& m) {
  const json& c = m.config();
  if (!c.contains("tie_word_embeddings")) return false;
  check(c["tie_word_embeddings"].is_boolean(), "init model '", m.path(),
        "': config.json's \"tie_word_embeddings\" is ", c["tie_word_embeddings"].dump(),
        ", not true or false");
  return c["tie_word_embeddings"].get<bool>();
}

// Every tensor of the model is one that a Llama of shape `c` has (transformers' older files
// also store RoPE's inv_freq, which is computed, not learned): a config.json that names fewer
// layers than the file holds, or a file with biases, is refused rather than cut short.
void check_all_used(const HfModel& m, const ModelConfig& c) {
  std::set<std::string> used;
  for (const UnitSpec& u : make_units(c, 1, 0))
    for (const ParamInfo& p : u.params) used.insert(p.name);
  // A tied model's file may still hold the head's copy, which transformers ties over too.
  if (c.tie_embeddings) used.insert("lm_head.weight");
  for (const std::string& name : m.names())
    check(used.count(name) || name.ends_with(".rotary_emb.inv_freq"), "init model '", m.path(),
          "': holds tensor '", name, "', which a Llama model of ", c.layers,
          c.layers == 1 ? " layer" : " layers", " does not have");
}

// Llama 3's RoPE as transformers' config.json says it (rope_scaling).
json llama3_rope_json(const ModelConfig& c) {
  return {{"rope_type", "llama3"},
          {"factor", c.rope_factor},
          {"low_freq_factor", c.rope_low_freq_factor},
          {"high_freq_factor", c.rope_high_freq_factor},
          {"original_max_position_embeddings", c.rope_original_context}};
}

}  // namespace

ModelConfig config_from_model(const HfModel& m, const ModelConfig& asked,
                              const std::set<std::string>& given) {
  ModelConfig c = asked;
  for (const std::string& name : m.names()) {
    const std::string& t = m.info(name).dtype;
    check(t == "F32" || t == "BF16" || t == "F16", "init model '", m.path(), "': tensor '", name,
          "' has dtype ", t, "; supported: F32, BF16, F16");
  }
  const auto& emb = need(m, "model.embed_tokens.weight");
  check(emb.shape.size() == 2, "init model '", m.path(), "': model.embed_tokens.weight has shape ",
        shape_str(emb.shape), ", expected [vocab, dim]");
  // The file's rows are the tokens; the model pads them (padded_vocab) so that any TP divides.
  c.vocab = emb.shape[0];
  c.vocab_rows = padded_vocab(emb.shape[0]);
  c.dim = model_int(m, "model.embed_tokens.weight's width", emb.shape[1]);
  if (m.config().is_object()) {
    check_architecture(m);
    check(config_int(m, "vocab_size") == c.vocab, "init model '", m.path(),
          "': config.json's vocab_size ", config_int(m, "vocab_size"),
          " disagrees with model.embed_tokens.weight's ", c.vocab, " rows");
    check(config_int(m, "hidden_size") == c.dim, "init model '", m.path(),
          "': config.json's hidden_size disagrees with model.embed_tokens.weight");
    c.layers = config_size(m, "num_hidden_layers", -1, kMaxLayers);
    c.heads = config_size(m, "num_attention_heads");
    c.kv_heads = config_size(m, "num_key_value_heads", c.heads);
    c.ffn_dim = config_size(m, "intermediate_size");
    config_rope(m, c);
    c.tie_embeddings = config_tied(m);
    c.norm_eps = float(config_number(m, "rms_norm_eps", 1e-6));
    check(c.dim % c.heads == 0, "init model '", m.path(), "': hidden_size ", c.dim,
          " is not divisible by ", c.heads, " heads");
    check(config_int(m, "head_dim", c.head_dim()) == c.head_dim(), "init model '", m.path(),
          "': head_dim ", config_int(m, "head_dim"), " is not hidden_size / heads");
  } else {
    int layers = 0;
    while (m.has("model.layers." + std::to_string(layers) + ".input_layernorm.weight")) ++layers;
    check(layers > 0, "init model '", m.path(),
          "': missing tensor 'model.layers.0.input_layernorm.weight'");
    c.layers = layers;
    c.ffn_dim = model_int(m, "model.layers.0.mlp.gate_proj.weight's rows",
                          need(m, "model.layers.0.mlp.gate_proj.weight").shape[0]);
    // Shapes do not tell the head count (q_proj is [heads*head_dim, dim] either way): tetra's
    // exports say it in the metadata; for other files (transformers writes none) the heads
    // setting must.
    check(m.metadata().count("heads") || given.count("model.heads"), "init model '", m.path(),
          "' does not say how many attention heads the model has: pass `model.heads`");
    c.heads = meta_int(m, "heads", asked.heads);
    if (m.metadata().count("rope_theta")) {
      const std::string& text = m.metadata().at("rope_theta");
      char* end = nullptr;
      c.rope_theta = std::strtod(text.c_str(), &end);
      check(!text.empty() && *end == '\0' && c.rope_theta > 0, "init model '", m.path(),
            "': metadata rope_theta = '", text, "' is not a positive number");
    }
    // tetra's single-file exports say Llama 3's RoPE in the metadata, as config.json would.
    if (m.metadata().count("rope_scaling")) {
      json r;
      check(parse_json(m.metadata().at("rope_scaling"), r).empty(), "init model '", m.path(),
            "': metadata rope_scaling is not JSON");
      read_rope(m, "rope_scaling", r, c);
    }
    // A file without the head's matrix ties it to the embedding's.
    c.tie_embeddings = !m.has("lm_head.weight");
    check(c.heads > 0 && c.dim % c.heads == 0, "init model '", m.path(), "': dim ", c.dim,
          " is not divisible by ", c.heads, " heads");
    const int64_t kv_rows = need(m, "model.layers.0.self_attn.k_proj.weight").shape[0];
    check(kv_rows % c.head_dim() == 0, "init model '", m.path(), "': k_proj has ", kv_rows,
          " rows, not a multiple of head_dim ", c.head_dim());
    c.kv_heads = model_int(m, "the k_proj heads", kv_rows / c.head_dim());
  }

  // A shape setting given beside init_from must be the model's own.
  auto check_given = [&](const std::string& name, auto file_value, auto asked_value) {
    const std::string key = "model." + name;
    check(!given.count(key) || file_value == asked_value, "`", key, "` ", asked_value,
          " disagrees with the init model '", m.path(), "', which has ", file_value);
  };
  check_given("layers", c.layers, asked.layers);
  check_given("dim", c.dim, asked.dim);
  check_given("heads", c.heads, asked.heads);
  check_given("kv_heads", c.kv_heads, asked.kv_heads);
  check_given("ffn_dim", c.ffn_dim, asked.ffn_dim);
  check_given("rope_theta", c.rope_theta, asked.rope_theta);
  check_given("rope_type", c.rope_type, asked.rope_type);
  const auto word = [](bool b) { return std::string(b ? "true" : "false"); };
  check_given("tie_embeddings", word(c.tie_embeddings), word(asked.tie_embeddings));
  // Every size within tetra's limits before the model's tensors are listed.
  try {
    c.validate();
  } catch (const Error& e) {
    fail("init model '", m.path(), "': ", e.what());
  }
  check_all_used(m, c);
  return c;
}

std::vector<float> read_unit(const HfModel& m, const ModelConfig& cfg, const UnitSpec& unit,
                             int tp_rank) {
  std::vector<float> out(unit.numel);
  for (const ParamInfo& p : unit.params) {
    std::vector<int64_t> stored = p.shape;
    if (is_vocab_tensor(p.name)) stored[0] = cfg.vocab;
    const std::string& name = p.name;
    const st::TensorInfo& info = need(m, name);
    check(info.shape == stored, "init model '", m.path(), "': tensor '", name, "' has shape ",
          shape_str(info.shape), ", expected ", shape_str(stored));
    const std::vector<float> whole = m.read(name);
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = p.global_index(i, tp_rank);
      out[p.offset + i] = g < int64_t(whole.size()) ? whole[g] : 0.f;  // padding rows: 0
    }
  }
  return out;
}

void check_tokenizer_matches(const std::string& model_path, const ModelConfig& cfg,
                             const data::Tokenizer& tok) {
  check(tok.vocab() == cfg.vocab, "model '", model_path, "' has ", cfg.vocab,
        " tokens, and the tokenizer '", tok.model_file(), "' has ", tok.vocab(), " pieces");
}

bool export_is_file(const std::string& path) {
  const std::string suffix = ".safetensors";
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string export_problem(const std::string& path) {
  if (export_is_file(path)) return output_file_problem(path);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return std::strerror(errno);
    return parent_dir_problem(path);  // created at export: its parent must take it
  }
  if (S_ISLNK(st.st_mode))
    return "it is a symbolic link; tetra writes a model directory only where it is (name the "
           "directory it points to)";
  if (!S_ISDIR(st.st_mode))
    return "it exists and is not a directory (a model directory is exported; name a path "
           "ending in .safetensors for one file)";
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    return std::string("it is not writable: ") + std::strerror(errno);
  std::error_code ec;
  if (fs::is_empty(path, ec)) return "";
  std::string text;
  json c;
  if (!read_input_file((fs::path(path) / "config.json").string(), text).empty() ||
      !parse_json(text, c).empty() || !c.is_object() || !c.contains("tetra"))
    return "it exists, is not empty and is not a model directory tetra exported; tetra will "
           "not write into it";
  return "";
}

json hf_config_json(const ModelConfig& cfg, const data::Tokenizer& tok, bool bf16) {
  json c = json::object();
  c["architectures"] = json::array({"LlamaForCausalLM"});
  c["model_type"] = "llama";
  c["hidden_size"] = cfg.dim;
  c["intermediate_size"] = cfg.ffn_dim;
  c["num_hidden_layers"] = cfg.layers;
  c["num_attention_heads"] = cfg.heads;
  c["num_key_value_heads"] = cfg.kv_heads;
  c["head_dim"] = cfg.head_dim();
  c["vocab_size"] = cfg.vocab;
  c["rms_norm_eps"] = double(cfg.norm_eps);
  c["rope_theta"] = cfg.rope_theta;
  if (cfg.rope_type == "llama3") c["rope_scaling"] = llama3_rope_json(cfg);
  c["max_position_embeddings"] = cfg.seq_len;
  c["hidden_act"] = "silu";
  c["attention_bias"] = false;
  c["mlp_bias"] = false;
  c["tie_word_embeddings"] = cfg.tie_embeddings;
  c["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  if (tok.begin_of_text() >= 0) c["bos_token_id"] = tok.begin_of_text();
  if (tok.end_of_text() >= 0 && tok.kind() != "bytes") c["eos_token_id"] = tok.end_of_text();
  // Marks the directory as tetra's, so that a later --export may replace it.
  c["tetra"] = json{{"tokenizer", tok.kind()}};
  return c;
}

void write_export(const std::string& path, const std::map<std::string, std::vector<float>>& full,
                  const ModelConfig& cfg, const data::Tokenizer& tok, bool bf16) {
  st::Writer w;
  for (const UnitSpec& u : make_units(cfg, 1, 0))
    for (const ParamInfo& p : u.params) {
      std::vector<int64_t> shape = p.shape;
      if (is_vocab_tensor(p.name)) shape[0] = cfg.vocab;  // rows are [vocab, dim]
      w.add(p.name, shape, full.at(p.name).data(), bf16);
    }
  w.set_metadata("format", "pt");
  w.set_metadata("heads", std::to_string(cfg.heads));
  w.set_metadata("kv_heads", std::to_string(cfg.kv_heads));
  std::ostringstream theta;
  theta.precision(17);
  theta << cfg.rope_theta;
  w.set_metadata("rope_theta", theta.str());
  if (cfg.rope_type == "llama3") w.set_metadata("rope_scaling", llama3_rope_json(cfg).dump());
  w.set_metadata("seq_len", std::to_string(cfg.seq_len));
  if (export_is_file(path)) {
    w.write(path);
    return;
  }
  const std::string context = "`output.export` '" + path + "'";
  std::error_code ec;
  fs::create_directory(path, ec);
  check(!ec, context, ": cannot create the directory: ", ec.message());
  const fs::path dir(path);
  w.write((dir / "model.safetensors").string());
  // The tokenizer's files; an earlier export's others would not be this model's.
  const std::map<std::string, std::string> files = tok.export_files(cfg.seq_len);
  for (const char* name :
       {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    if (!files.count(name)) fs::remove(dir / name, ec);
  for (const auto& [name, bytes] : files)
    ckpt::write_file_atomically((dir / name).string(), bytes, context);
  // Last: config.json is what makes the directory a model.
  ckpt::write_file_atomically((dir / "config.json").string(),
                              hf_config_json(cfg, tok, bf16).dump(2) + "\n", context);
}

}  // namespace tetra
