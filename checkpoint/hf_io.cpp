#include "checkpoint/hf_io.hpp"

#include <cstdlib>
#include <sstream>

#include "model/error.hpp"

namespace tetra {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

const st::TensorInfo& need(const st::Reader& f, const std::string& name) {
  check(f.has(name), "init file '", f.path(), "': missing tensor '", name, "'");
  return f.info(name);
}

int meta_int(const st::Reader& f, const std::string& key, int fallback) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (...) {
    fail("init file '", f.path(), "': metadata ", key, " = '", it->second, "' is not a number");
  }
}

}  // namespace

ModelConfig config_from_file(const st::Reader& f, const ModelConfig& flags,
                             const std::set<std::string>& given) {
  ModelConfig c = flags;
  for (const std::string& name : f.names()) {
    const std::string& t = f.info(name).dtype;
    check(t == "F32" || t == "BF16" || t == "F16", "init file '", f.path(), "': tensor '", name,
          "' has dtype ", t, "; supported: F32, BF16, F16");
  }
  const auto& emb = need(f, "model.embed_tokens.weight");
  check(emb.shape.size() == 2, "init file '", f.path(), "': model.embed_tokens.weight has shape ",
        shape_str(emb.shape), ", expected [vocab, dim]");
  c.vocab = emb.shape[0];
  c.dim = int(emb.shape[1]);
  int layers = 0;
  while (f.has("model.layers." + std::to_string(layers) + ".input_layernorm.weight")) ++layers;
  check(layers > 0, "init file '", f.path(),
        "': missing tensor 'model.layers.0.input_layernorm.weight'");
  c.layers = layers;
  c.ffn_dim = int(need(f, "model.layers.0.mlp.gate_proj.weight").shape[0]);
  // Shapes do not tell the head count (q_proj is [heads*head_dim, dim] either way): tetra's
  // exports say it in the metadata; for other files (transformers writes none) --heads must.
  check(f.metadata().count("heads") || given.count("--heads"), "init file '", f.path(),
        "' does not say how many attention heads the model has: pass --heads");
  c.heads = meta_int(f, "heads", flags.heads);
  c.rope_theta = flags.rope_theta;
  if (f.metadata().count("rope_theta")) {
    const std::string& text = f.metadata().at("rope_theta");
    char* end = nullptr;
    c.rope_theta = std::strtod(text.c_str(), &end);
    check(!text.empty() && *end == '\0' && c.rope_theta > 0, "init file '", f.path(),
          "': metadata rope_theta = '", text, "' is not a positive number");
    check(!given.count("--rope-theta") || c.rope_theta == flags.rope_theta, "--rope-theta ",
          flags.rope_theta, " disagrees with the init file '", f.path(), "', which has ",
          c.rope_theta);
  }
  check(c.heads > 0 && c.dim % c.heads == 0, "init file '", f.path(), "': dim ", c.dim,
        " is not divisible by ", c.heads, " heads");
  const int64_t kv_rows = need(f, "model.layers.0.self_attn.k_proj.weight").shape[0];
  check(kv_rows % c.head_dim() == 0, "init file '", f.path(), "': k_proj has ", kv_rows,
        " rows, not a multiple of head_dim ", c.head_dim());
  c.kv_heads = int(kv_rows / c.head_dim());

  auto agree = [&](const char* flag, int64_t file_value, int64_t flag_value) {
    check(!given.count(flag) || file_value == flag_value, flag, " ", flag_value,
          " disagrees with the init file '", f.path(), "', which has ", file_value);
  };
  agree("--layers", c.layers, flags.layers);
  agree("--dim", c.dim, flags.dim);
  agree("--heads", c.heads, flags.heads);
  agree("--kv-heads", c.kv_heads, flags.kv_heads);
  agree("--ffn-dim", c.ffn_dim, flags.ffn_dim);
  return c;
}

std::vector<float> read_unit(const st::Reader& f, const UnitLayout& unit, int tp_rank) {
  std::vector<float> out(unit.numel);
  for (const ParamInfo& p : unit.params) {
    const st::TensorInfo& info = need(f, p.name);
    check(info.shape == p.shape, "init file '", f.path(), "': tensor '", p.name, "' has shape ",
          shape_str(info.shape), ", expected ", shape_str(p.shape));
    const std::vector<float> whole = f.read(p.name);
    for (int64_t i = 0; i < p.numel(); ++i) out[p.offset + i] = whole[p.global_index(i, tp_rank)];
  }
  return out;
}

void write_export(const std::string& path, const std::map<std::string, std::vector<float>>& full,
                  const ModelConfig& cfg, bool bf16) {
  st::Writer w;
  for (const UnitLayout& u : make_units(cfg, 1, 0))
    for (const ParamInfo& p : u.params) w.add(p.name, p.shape, full.at(p.name).data(), bf16);
  w.set_metadata("format", "pt");
  w.set_metadata("heads", std::to_string(cfg.heads));
  w.set_metadata("kv_heads", std::to_string(cfg.kv_heads));
  std::ostringstream theta;
  theta.precision(17);
  theta << cfg.rope_theta;
  w.set_metadata("rope_theta", theta.str());
  w.set_metadata("seq_len", std::to_string(cfg.seq_len));
  w.write(path);
}

}  // namespace tetra
