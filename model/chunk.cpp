#include "model/chunk.hpp"

namespace tetra {

ModelChunk::ModelChunk(Backend& be, const TensorParallel& tp, const ContextParallel& cp,
                       const ModelConfig& cfg, ZeroParams& params, std::vector<int> units,
                       bool recompute)
    : be_(be),
      tp_(tp),
      cp_(cp),
      cfg_(cfg),
      params_(params),
      units_(std::move(units)),
      recompute_(recompute) {}

bool ModelChunk::has_embedding() const {
  return params_.layout(units_.front()).kind == UnitLayout::Kind::Embedding;
}

bool ModelChunk::has_head() const {
  return params_.layout(units_.back()).kind == UnitLayout::Kind::Head;
}

BlockContext ModelChunk::block_ctx(const MicroBatch& mb) const {
  return BlockContext{be_, tp_, cp_, cfg_, mb.pos};
}

void ModelChunk::forward(ChunkState& s, const MicroBatch& mb, const Tensor* x_in) {
  const int64_t T = mb.pos.tokens(), Tl = tp_.local_rows(T), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  s.xs.clear();
  s.acts.clear();
  if (!has_embedding()) {
    s.xs.emplace_back(be_, Tl * d);
    be_.copy(s.xs[0].flat(), *x_in);
  }
  for (int u : units_) {
    const UnitLayout& l = params_.layout(u);
    params_.gather_weights(u);
    const Tensor w = params_.weights(u);
    if (l.kind == UnitLayout::Kind::Embedding) {
      Buffer partial(be_, T * d);
      VocabParallelEmbedding::forward(be_, tp_, partial.view({T, d}), mb.tokens,
                                      param_view(w, l.params[0]));
      s.xs.push_back(tp_.reduce(be_, std::move(partial)));
    } else if (l.kind == UnitLayout::Kind::Block) {
      s.acts.emplace_back();
      Buffer out(be_, Tl * d);
      block_forward(ctx, l, w, s.xs.back().view({Tl, d}), out.view({Tl, d}), s.acts.back());
      if (recompute_) s.acts.back().clear();
      s.xs.push_back(std::move(out));
    } else {  // final norm, LM head, vocab-parallel cross-entropy
      const int64_t V = l.params[kLmHead].local_shape[0];
      Buffer n(be_, Tl * d);
      s.head_rstd = Buffer(be_, Tl);
      be_.rmsnorm_forward(n.view({Tl, d}), s.head_rstd.flat(), s.xs.back().view({Tl, d}),
                          param_view(w, l.params[kFinalNorm]), cfg_.norm_eps);
      s.head_n = tp_.gather(be_, std::move(n));
      s.logits = Buffer(be_, T * V);
      s.row_max = Buffer(be_, T);
      s.ce_stats = Buffer(be_, 2 * T);
      ColumnParallelLinear::forward(be_, s.logits.view({T, V}), s.head_n.view({T, d}),
                                    param_view(w, l.params[kLmHead]));
      s.loss_sum = VocabParallelCrossEntropy::forward(
          be_, tp_.comm, s.logits.view({T, V}), mb.targets, s.row_max.flat(), s.ce_stats.flat());
    }
    params_.release_weights(u);
  }
}

void ModelChunk::backward(ChunkState& s, const MicroBatch& mb, const Tensor* dout,
                          float loss_scale) {
  const int64_t T = mb.pos.tokens(), Tl = tp_.local_rows(T), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  Buffer grad(be_, Tl * d);  // dL/d(current activation) [Tl, d], walking backwards
  if (!has_head()) be_.copy(grad.flat(), *dout);
  int block = int(s.acts.size());
  for (auto it = units_.rbegin(); it != units_.rend(); ++it) {
    const int u = *it;
    const UnitLayout& l = params_.layout(u);
    params_.gather_weights(u);
    const Tensor w = params_.weights(u), dw = params_.grads(u);
    if (l.kind == UnitLayout::Kind::Head) {
      const int64_t V = l.params[kLmHead].local_shape[0];
      const Tensor dlogits = s.logits.view({T, V});
      VocabParallelCrossEntropy::backward(be_, tp_.comm, dlogits, mb.targets, s.row_max.flat(),
                                          s.ce_stats.flat(), loss_scale);
      Buffer dn(be_, T * d);
      ColumnParallelLinear::backward(be_, dn.view({T, d}), param_view(dw, l.params[kLmHead]),
                                     dlogits, s.head_n.view({T, d}),
                                     param_view(w, l.params[kLmHead]), false);
      const Buffer dn_local = tp_.reduce(be_, std::move(dn));
      be_.rmsnorm_backward(grad.view({Tl, d}), param_view(dw, l.params[kFinalNorm]),
                           dn_local.view({Tl, d}), s.xs.back().view({Tl, d}),
                           param_view(w, l.params[kFinalNorm]), s.head_rstd.flat());
      s.logits.reset();
      s.head_n.reset();
    } else if (l.kind == UnitLayout::Kind::Block) {
      --block;
      const Tensor x = s.xs[block].view({Tl, d});
      BlockActs& a = s.acts[block];
      if (recompute_) {
        Buffer out(be_, Tl * d);
        block_forward(ctx, l, w, x, out.view({Tl, d}), a);
      }
      Buffer dx(be_, Tl * d);
      block_backward(ctx, l, w, dw, x, grad.view({Tl, d}), dx.view({Tl, d}), a);
      a.clear();
      grad = std::move(dx);
    } else {
      const Buffer full = tp_.gather(be_, std::move(grad));
      VocabParallelEmbedding::backward(be_, tp_, param_view(dw, l.params[0]), mb.tokens,
                                       full.view({T, d}));
    }
    params_.release_weights(u);
    // The data-parallel gradient sync, per unit, as soon as its last micro-batch is done.
    if (params_.last_backward(u)) params_.reduce_scatter_grads(u);
  }
  if (!has_embedding()) s.dx = std::move(grad);
  s.xs.clear();
  s.acts.clear();
}

}  // namespace tetra
