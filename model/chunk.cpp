#include "model/chunk.hpp"

#include "parallel/tp.hpp"

namespace tetra {

ModelChunk::ModelChunk(Backend& be, Comm& tp, Comm& cp, const ModelConfig& cfg,
                       ShardedParams& params, std::vector<int> units, bool recompute)
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
  const int64_t T = mb.pos.tokens(), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  s.xs.clear();
  s.acts.clear();
  s.xs.emplace_back(be_, T * d);
  if (!has_embedding()) be_.copy(s.xs[0].flat(), *x_in);
  for (int u : units_) {
    const UnitLayout& l = params_.layout(u);
    params_.acquire(u);
    const Tensor w = params_.weights(u);
    if (l.kind == UnitLayout::Kind::Embedding) {
      VocabParallelEmbedding::forward(be_, tp_, s.xs[0].view({T, d}), mb.tokens,
                                      param_view(w, l.params[0]));
    } else if (l.kind == UnitLayout::Kind::Block) {
      s.acts.emplace_back();
      Buffer out(be_, T * d);
      block_forward(ctx, l, w, s.xs.back().view({T, d}), out.view({T, d}), s.acts.back());
      if (recompute_) s.acts.back().clear();
      s.xs.push_back(std::move(out));
    } else {  // final norm, LM head, vocab-parallel cross-entropy
      const int64_t V = l.params[kLmHead].local_shape[0];
      s.head_n = Buffer(be_, T * d);
      s.head_rstd = Buffer(be_, T);
      s.logits = Buffer(be_, T * V);
      s.row_max = Buffer(be_, T);
      s.ce_stats = Buffer(be_, 2 * T);
      be_.rmsnorm_forward(s.head_n.view({T, d}), s.head_rstd.flat(), s.xs.back().view({T, d}),
                          param_view(w, l.params[kFinalNorm]), cfg_.norm_eps);
      ColumnParallelLinear::forward(be_, s.logits.view({T, V}), s.head_n.view({T, d}),
                                    param_view(w, l.params[kLmHead]));
      s.loss_sum = VocabParallelCrossEntropy::forward(be_, tp_, s.logits.view({T, V}), mb.targets,
                                                      s.row_max.flat(), s.ce_stats.flat());
    }
    params_.release(u);
  }
}

void ModelChunk::backward(ChunkState& s, const MicroBatch& mb, const Tensor* dout,
                          float loss_scale) {
  const int64_t T = mb.pos.tokens(), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  Buffer grad(be_, T * d);  // dL/d(current activation), walking backwards
  if (!has_head()) be_.copy(grad.flat(), *dout);
  int block = int(s.acts.size());
  for (auto it = units_.rbegin(); it != units_.rend(); ++it) {
    const int u = *it;
    const UnitLayout& l = params_.layout(u);
    params_.acquire(u);
    const Tensor w = params_.weights(u), dw = params_.grads(u);
    if (l.kind == UnitLayout::Kind::Head) {
      const int64_t V = l.params[kLmHead].local_shape[0];
      Tensor dlogits = s.logits.view({T, V});
      VocabParallelCrossEntropy::backward(be_, tp_, dlogits, mb.targets, s.row_max.flat(),
                                          s.ce_stats.flat(), loss_scale);
      Buffer dn(be_, T * d);
      ColumnParallelLinear::backward(be_, dn.view({T, d}), param_view(dw, l.params[kLmHead]),
                                     dlogits, s.head_n.view({T, d}),
                                     param_view(w, l.params[kLmHead]), false);
      copy_to_tensor_parallel_region_backward(tp_, dn.flat());
      be_.rmsnorm_backward(grad.view({T, d}), param_view(dw, l.params[kFinalNorm]), dn.view({T, d}),
                           s.xs.back().view({T, d}), param_view(w, l.params[kFinalNorm]),
                           s.head_rstd.flat());
      s.logits.reset();
      s.head_n.reset();
    } else if (l.kind == UnitLayout::Kind::Block) {
      --block;
      const Tensor x = s.xs[block].view({T, d});
      BlockActs& a = s.acts[block];
      if (recompute_) {
        Buffer out(be_, T * d);
        block_forward(ctx, l, w, x, out.view({T, d}), a);
      }
      Buffer dx(be_, T * d);
      block_backward(ctx, l, w, dw, x, grad.view({T, d}), dx.view({T, d}), a);
      a.clear();
      grad = std::move(dx);
    } else {
      VocabParallelEmbedding::backward(be_, tp_, param_view(dw, l.params[0]), mb.tokens,
                                       grad.view({T, d}));
    }
    params_.release(u);
    params_.backward_done(u);
  }
  if (!has_embedding()) s.dx = std::move(grad);
  s.xs.clear();
  s.acts.clear();
}

}  // namespace tetra
