#include "model/config.hpp"

#include <optional>
#include <sstream>

#include "util/checked.hpp"
#include "util/error.hpp"

namespace tetra {

void ModelConfig::validate() const {
  check(layers > 0, "`model.layers` must be positive (got ", layers, ")");
  check(dim > 0, "`model.dim` must be positive (got ", dim, ")");
  check(heads > 0, "`model.heads` must be positive (got ", heads, ")");
  check(kv_heads > 0, "`model.kv_heads` must be positive (got ", kv_heads, ")");
  check(ffn_dim > 0, "`model.ffn_dim` must be positive (got ", ffn_dim, ")");
  check(seq_len > 0, "`model.seq_len` must be positive (got ", seq_len, ")");
  check(vocab > 0, "`model.vocab` must be positive (got ", vocab, ")");
  check(layers <= kMaxLayers, "`model.layers` ", layers, " is more than tetra's limit of ",
        kMaxLayers, " blocks");
  check(seq_len <= kMaxSeqLen, "`model.seq_len` ", seq_len, " is more than tetra's limit of ",
        kMaxSeqLen, " tokens per sequence");
  check(rows() <= kMaxVocab, "the vocabulary of ", vocab, " tokens is more than tetra's ",
        "limit of ", kMaxVocab);
  check(vocab <= rows(), "the vocabulary ", vocab, " is larger than the model's ", rows(), " rows");
  check(rope_theta > 0, "`model.rope_theta` must be positive (got ", rope_theta, ")");
  check(rope_type == "default" || rope_type == "llama3", "`model.rope_type` ", rope_type,
        ": expected default or llama3");
  if (rope_type == "llama3") {
    check(rope_factor > 0 && rope_low_freq_factor > 0 && rope_original_context > 0,
          "`model.rope_factor`, `model.rope_low_freq_factor` and `model.rope_original_context` "
          "must be positive (got ",
          rope_factor, ", ", rope_low_freq_factor, ", ", rope_original_context, ")");
    check(rope_high_freq_factor > rope_low_freq_factor, "`model.rope_high_freq_factor` ",
          rope_high_freq_factor, " must be above `model.rope_low_freq_factor` ",
          rope_low_freq_factor);
  }
  check(dim % heads == 0, "`model.dim` ", dim, " is not divisible by `model.heads` ", heads);
  check(heads % kv_heads == 0, "`model.heads` ", heads, " is not divisible by `model.kv_heads` ",
        kv_heads);
  check(head_dim() % 2 == 0, "head_dim = dim/heads = ", head_dim(),
        " must be even for rotate-half RoPE");
  // Every term of total_params(), each product checked: a shape past the limit is refused
  // before any count that would wrap (to a negative size) is made of it.
  const int64_t d = dim, hd = head_dim();
  std::optional<int64_t> n = checked_product({2, d, heads, hd});  // q, o
  for (const std::optional<int64_t> term :
       {checked_product({2, d, kv_heads, hd}), checked_product({3, d, ffn_dim}),
        std::optional<int64_t>(2 * d)})  // k, v; gate, up, down; two norms
    n = n && term ? checked_add(*n, *term) : std::nullopt;
  n = n ? checked_mul(*n, layers) : std::nullopt;
  // The embedding, the head (unless it is the embedding's matrix) and the final norm.
  const std::optional<int64_t> ends = checked_add((tie_embeddings ? 1 : 2) * rows() * d, d);
  n = n && ends ? checked_add(*n, *ends) : std::nullopt;
  check(n && *n <= kMaxParams, "the model (", str(), ") has ",
        n ? std::to_string(*n) : std::string("more than 2^63"),
        " parameters, more than tetra's limit of 2^50 = ", kMaxParams);
}

std::string ModelConfig::str() const {
  std::ostringstream os;
  os << "layers " << layers << ", dim " << dim << ", heads " << heads << " (kv " << kv_heads
     << ", head_dim " << head_dim() << "), ffn " << ffn_dim << ", vocab " << vocab;
  if (rows() != vocab) os << " (padded to " << rows() << ")";
  os << ", seq " << seq_len;
  if (rope_type == "llama3")
    os << ", rope llama3 (factor " << rope_factor << ", low " << rope_low_freq_factor << ", high "
       << rope_high_freq_factor << ", original context " << rope_original_context << ")";
  if (tie_embeddings) os << ", tied embeddings";
  if (doc_mask) os << ", document mask";
  return os.str();
}

Rope ModelConfig::rope() const {
  Rope r;
  r.theta = rope_theta;
  if (rope_type == "llama3") {
    r.factor = rope_factor;
    r.low_freq_factor = rope_low_freq_factor;
    r.high_freq_factor = rope_high_freq_factor;
    r.original_context = rope_original_context;
  }
  return r;
}

int64_t ModelConfig::matmul_params() const {
  const int64_t d = dim, hd = head_dim();
  const int64_t attn = d * heads * hd * 2 + d * kv_heads * hd * 2;  // q, o, k, v
  const int64_t mlp = 3 * d * int64_t(ffn_dim);
  return layers * (attn + mlp) + rows() * d;  // + LM head
}

int64_t ModelConfig::total_params() const {
  const int64_t embedding = tie_embeddings ? 0 : rows() * dim;  // tied: the head's matrix
  return matmul_params() + embedding + int64_t(layers) * 2 * dim + dim;
}

double model_flops_per_token(const ModelConfig& c) {
  return 6.0 * double(c.matmul_params()) + 12.0 * c.layers * c.dim * double(c.seq_len);
}

double recompute_flops_per_token(const ModelConfig& c) {
  const double blocks = double(c.matmul_params() - c.rows() * c.dim);
  return 2.0 * blocks + 4.0 * c.layers * c.dim * double(c.seq_len);
}

int64_t padded_vocab(int64_t v) {
  return v > kMaxVocab ? v : (v + 127) / 128 * 128;  // past the limit: for validate() to refuse
}

int64_t ParamInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : local_shape) n *= s;
  return n;
}

int64_t ParamInfo::global_index(int64_t i, int tp_rank) const {
  if (tp_dim < 0) return i;
  const int64_t cols = local_shape.back(), r = i / cols, c = i % cols;
  if (tp_dim == 0) return (tp_rank * local_shape[0] + r) * shape[1] + c;
  return r * shape[1] + tp_rank * local_shape[1] + c;
}

namespace {

void add(UnitSpec& u, std::string name, std::vector<int64_t> shape, int tp_dim, int tp) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = shape;
  p.tp_dim = tp_dim;
  p.local_shape = shape;
  if (tp_dim >= 0) {
    check(shape[tp_dim] % tp == 0, p.name, ": dimension ", shape[tp_dim], " does not divide by TP ",
          tp);
    p.local_shape[tp_dim] /= tp;
  }
  p.offset = u.numel;
  u.numel += p.numel();
  u.params.push_back(std::move(p));
}

}  // namespace

std::vector<UnitSpec> make_units(const ModelConfig& c, int tp, int tp_rank) {
  check(c.heads % tp == 0, "`model.heads` ", c.heads, " is not divisible by TP ", tp);
  check(c.kv_heads % tp == 0, "`model.kv_heads` ", c.kv_heads, " is not divisible by TP ", tp);
  check(c.ffn_dim % tp == 0, "`model.ffn_dim` ", c.ffn_dim, " is not divisible by TP ", tp);
  check(c.rows() % tp == 0, "the vocabulary ", c.rows(), " is not divisible by TP ", tp);
  const int64_t d = c.dim, q = int64_t(c.heads) * c.head_dim(),
                kv = int64_t(c.kv_heads) * c.head_dim(), f = c.ffn_dim;
  std::vector<UnitSpec> units;

  UnitSpec emb{UnitSpec::Kind::Embedding, -1, "embed", {}, 0};
  add(emb, "model.embed_tokens.weight", {c.rows(), d}, 0, tp);
  units.push_back(std::move(emb));

  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    UnitSpec b{UnitSpec::Kind::Block, l, "layers." + std::to_string(l), {}, 0};
    add(b, p + "input_layernorm.weight", {d}, -1, tp);
    add(b, p + "self_attn.q_proj.weight", {q, d}, 0, tp);
    add(b, p + "self_attn.k_proj.weight", {kv, d}, 0, tp);
    add(b, p + "self_attn.v_proj.weight", {kv, d}, 0, tp);
    add(b, p + "self_attn.o_proj.weight", {d, q}, 1, tp);
    add(b, p + "post_attention_layernorm.weight", {d}, -1, tp);
    add(b, p + "mlp.gate_proj.weight", {f, d}, 0, tp);
    add(b, p + "mlp.up_proj.weight", {f, d}, 0, tp);
    add(b, p + "mlp.down_proj.weight", {d, f}, 1, tp);
    units.push_back(std::move(b));
  }

  UnitSpec head{UnitSpec::Kind::Head, -1, "head", {}, 0};
  add(head, "model.norm.weight", {d}, -1, tp);
  if (!c.tie_embeddings) add(head, "lm_head.weight", {c.rows(), d}, 0, tp);
  units.push_back(std::move(head));
  return units;
}

}  // namespace tetra
