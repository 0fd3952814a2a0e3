#include "transformer/chunk.hpp"

namespace tetra {
namespace {

// A unit's first backward of a step, whose gradients hold nothing of it yet (grads_fresh):
// the weight-gradient GEMMs write their parts, so only what other ops accumulate is zeroed
// first: the embedding's rows and the norms' weights (the unit's 1-D parameters).
void zero_accumulated_grads(Backend& be, const UnitLayout& l, const Tensor& dw) {
  for (const ParamInfo& p : l.params)
    if (l.kind == UnitLayout::Kind::Embedding || p.local_shape.size() == 1)
      be.fill(dw.flat(p.offset, p.numel()), 0.f);
}

}  // namespace

ModelChunk::ModelChunk(Backend& be, const TensorParallel& tp, const ContextParallel& cp,
                       const ModelConfig& cfg, UnitParams& params, std::vector<int> units,
                       bool recompute, int head_matrix)
    : be_(be),
      tp_(tp),
      cp_(cp),
      cfg_(cfg),
      params_(params),
      units_(std::move(units)),
      recompute_(recompute),
      head_matrix_(head_matrix) {
  check(!has_head() || (head_matrix_ >= 0) == cfg_.tie_embeddings,
        "ModelChunk: the LM head's matrix is the embedding's exactly when the embeddings are tied");
}

ModelChunk::HeadMatrix ModelChunk::head_matrix(int head_unit, const Tensor& w) {
  if (head_matrix_ < 0) return {w, params_.layout(head_unit).params[kLmHead], head_unit};
  return {params_.acquire(head_matrix_), params_.layout(head_matrix_).params[0], head_matrix_};
}

bool ModelChunk::has_embedding() const {
  return params_.layout(units_.front()).kind == UnitLayout::Kind::Embedding;
}

bool ModelChunk::has_head() const {
  return params_.layout(units_.back()).kind == UnitLayout::Kind::Head;
}

BlockContext ModelChunk::block_ctx(const MicroBatch& mb) const {
  return BlockContext{be_, tp_, cp_, cfg_, mb.pos};
}

StageOutput ModelChunk::forward(int id, const MicroBatch& mb, const Tensor* x_in,
                                float loss_scale) {
  const int64_t T = mb.pos.tokens(), Tl = tp_.local_rows(T), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  const auto [it, fresh] = states_.try_emplace(id);
  check(fresh, "ModelChunk: forward of micro-batch ", id, " twice before its backward");
  State& s = it->second;
  StageOutput y;
  if (!has_embedding()) {
    s.xs.emplace_back(be_, Tl * d, x_in->dtype);
    be_.copy(s.xs[0].flat(), *x_in);
  }
  for (int u : units_) {
    const UnitLayout& l = params_.layout(u);
    const Tensor w = params_.acquire(u);
    if (l.kind == UnitLayout::Kind::Embedding) {
      // x [Tl, d] = the rows of the tokens, from the TP ranks' vocabulary shards.
      const VocabParallelEmbedding embed(be_, tp_, param_view(w, l.params[0]));
      s.xs.push_back(embed.forward(mb.tokens));
    } else if (l.kind == UnitLayout::Kind::Block) {
      s.acts.emplace_back();
      Buffer out(be_, Tl * d, s.xs.back().dtype());
      block_forward(ctx, l, w, s.xs.back().view({Tl, d}), out.view({Tl, d}), s.acts.back());
      if (recompute_) s.acts.back().clear();
      s.xs.push_back(std::move(out));
    } else {  // final norm, LM head, vocab-parallel cross-entropy
      const HeadMatrix m = head_matrix(u, w);
      const int64_t V = m.param.local_shape[0];
      // n [Tl, d] = rmsnorm(x) * w_final.
      Buffer n(be_, Tl * d, s.xs.back().dtype());
      s.head_rstd = Buffer(be_, Tl);
      be_.rmsnorm_forward(n.view({Tl, d}), s.head_rstd.flat(), s.xs.back().view({Tl, d}),
                          param_view(w, l.params[kFinalNorm]), cfg_.norm_eps);
      // logits [T, V/TP] = n W_head^T: this rank's vocabulary shard, never gathered.
      const ColumnParallelLinear lm_head(be_, tp_, param_view(m.weights, m.param));
      s.head_n = lm_head.forward(std::move(n), s.logits);
      if (m.unit != u) params_.release(m.unit);
      s.row_max = Buffer(be_, T);
      s.ce_stats = Buffer(be_, 2 * T);
      // The loss statistics; at TP 1 in training also dlogits, in the same pass (the fused
      // classifier).
      if (loss_scale != 0 && VocabParallelCrossEntropy::fuses(tp_.comm)) {
        VocabParallelCrossEntropy::forward_backward(be_, tp_.comm, s.logits.view({T, V}),
                                                    mb.targets, s.row_max.flat(), s.ce_stats.flat(),
                                                    cfg_.vocab, loss_scale);
        s.dlogits_scale = loss_scale;
      } else {
        VocabParallelCrossEntropy::forward(be_, tp_.comm, s.logits.view({T, V}), mb.targets,
                                           s.row_max.flat(), s.ce_stats.flat(), cfg_.vocab);
      }
      loss_.record(be_, s.row_max.flat(), s.ce_stats.flat());
    }
    params_.release(u);
  }
  if (!has_head()) y.activation = s.xs.back().view({Tl, d});
  return y;
}

Buffer ModelChunk::backward(int id, const MicroBatch& mb, const Tensor* dout, float loss_scale) {
  const int64_t T = mb.pos.tokens(), Tl = tp_.local_rows(T), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  const auto it = states_.find(id);
  check(it != states_.end(), "ModelChunk: backward of micro-batch ", id, " before its forward");
  State& s = it->second;
  // dL/d(current activation) [Tl, d], walking backwards, in the activations' dtype.
  Buffer grad(be_, Tl * d, params_.compute_dtype());
  if (!has_head()) be_.copy(grad.flat(), *dout);
  int block = int(s.acts.size());
  for (auto u_it = units_.rbegin(); u_it != units_.rend(); ++u_it) {
    const int u = *u_it;
    const UnitLayout& l = params_.layout(u);
    const Tensor w = params_.acquire(u), dw = params_.grads(u);
    const bool fresh = params_.grads_fresh(u);
    if (fresh) zero_accumulated_grads(be_, l, dw);
    if (l.kind == UnitLayout::Kind::Head) {
      const HeadMatrix m = head_matrix(u, w);
      const int64_t V = m.param.local_shape[0];
      // dlogits [T, V/TP] = loss_scale * (softmax - onehot(target)), over the logits (already,
      // when the forward fused the classifier).
      const Tensor dlogits = s.logits.view({T, V});
      if (s.dlogits_scale == 0)
        VocabParallelCrossEntropy::backward(be_, tp_.comm, dlogits, mb.targets, s.row_max.flat(),
                                            s.ce_stats.flat(), cfg_.vocab, loss_scale);
      else
        check(s.dlogits_scale == loss_scale, "ModelChunk: micro-batch ", id,
              "'s forward computed dlogits at loss scale ", s.dlogits_scale, ", backward asks ",
              loss_scale);
      // dn [Tl, d] = dlogits W_head, summed over TP; dW_head += dlogits^T n (into the tied
      // matrix's gradient, where the embedding adds its rows too; written whole by the GEMM
      // when it is fresh).
      const bool own = m.unit == u;
      const ColumnParallelLinear lm_head(be_, tp_, param_view(m.weights, m.param),
                                         param_view(own ? dw : params_.grads(m.unit), m.param),
                                         own ? fresh : params_.grads_fresh(m.unit));
      const Buffer dn = lm_head.backward(dlogits, s.head_n.view({T, d}));
      if (!own) {
        params_.release(m.unit);
        params_.hand_over_grads(m.unit);
      }
      be_.rmsnorm_backward(grad.view({Tl, d}), param_view(dw, l.params[kFinalNorm]),
                           dn.view({Tl, d}), s.xs.back().view({Tl, d}),
                           param_view(w, l.params[kFinalNorm]), s.head_rstd.flat());
      s.logits.reset();
      s.head_n.reset();
    } else if (l.kind == UnitLayout::Kind::Block) {
      --block;
      const Tensor x = s.xs[block].view({Tl, d});
      BlockActs& a = s.acts[block];
      if (recompute_) {
        Buffer out(be_, Tl * d, x.dtype);
        block_forward(ctx, l, w, x, out.view({Tl, d}), a);
      }
      Buffer dx(be_, Tl * d, x.dtype);
      block_backward(ctx, l, w, dw, x, grad.view({Tl, d}), dx.view({Tl, d}), a, fresh);
      a.clear();
      grad = std::move(dx);
    } else {
      const VocabParallelEmbedding embed(be_, tp_, param_view(w, l.params[0]),
                                         param_view(dw, l.params[0]));
      embed.backward(std::move(grad), mb.tokens);
    }
    params_.release(u);
    params_.hand_over_grads(u);
  }
  states_.erase(it);
  if (has_embedding()) return Buffer();
  return grad;
}

}  // namespace tetra
