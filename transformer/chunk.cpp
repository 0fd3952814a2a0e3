#include "transformer/chunk.hpp"

namespace tetra {
namespace {

// A unit's first backward of a step, whose gradients hold nothing of it yet (grads_fresh):
// the weight-gradient GEMMs write their parts, so only what other ops accumulate is zeroed
// first: the embedding's rows and the norms' weights (the unit's 1-D parameters).
void zero_accumulated_grads(Backend& be, const UnitSpec& l, const Tensor& dw) {
  for (const ParamInfo& p : l.params)
    if (l.kind == UnitSpec::Kind::Embedding || p.local_shape.size() == 1)
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
  int blocks = 0;
  for (int u : units_) blocks += params_.layout(u).kind == UnitSpec::Kind::Block ? 1 : 0;
  if (blocks > 0) norm_grads_ = Buffer(be_, int64_t(blocks) * 2 * cfg_.dim);
  norm_grads_open_.assign(blocks, false);
}

int ModelChunk::head_unit(int head) const {
  return head_matrix_ < 0 ? head : head_matrix_;
}

bool ModelChunk::has_embedding() const {
  return params_.layout(units_.front()).kind == UnitSpec::Kind::Embedding;
}

bool ModelChunk::has_head() const {
  return params_.layout(units_.back()).kind == UnitSpec::Kind::Head;
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
    const UnitSpec& l = params_.layout(u);
    const Tensor w = params_.acquire(u);
    if (l.kind == UnitSpec::Kind::Embedding) {
      s.xs.push_back(embed_forward(be_, tp_, l, w, mb.tokens));
    } else if (l.kind == UnitSpec::Kind::Block) {
      s.acts.emplace_back();
      Buffer out(be_, Tl * d, s.xs.back().dtype());
      block_forward(ctx, l, w, s.xs.back().view({Tl, d}), out.view({Tl, d}), s.acts.back());
      if (recompute_) s.acts.back().clear();
      s.xs.push_back(std::move(out));
    } else {  // final norm, LM head, vocab-parallel cross-entropy
      // The LM head's matrix: the head unit's own, or the tied embedding's (acquired here).
      const int hu = head_unit(u);
      const Tensor hw = hu == u ? w : params_.acquire(hu);
      const Tensor w_head = head_matrix(params_.layout(hu), hw);
      const int64_t V = w_head.rows();
      s.logits = head_forward(be_, tp_, cfg_, l, w, w_head, s.xs.back().view({Tl, d}), s.head);
      if (hu != u) params_.release(hu);
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

Buffer ModelChunk::backward(int id, const MicroBatch& mb, const Tensor* dout, float loss_scale,
                            bool run_weights) {
  const int64_t T = mb.pos.tokens(), Tl = tp_.local_rows(T), d = cfg_.dim;
  const BlockContext ctx = block_ctx(mb);
  const auto it = states_.find(id);
  check(it != states_.end(), "ModelChunk: backward of micro-batch ", id, " before its forward");
  State& s = it->second;
  check(!s.input_grad_done, "ModelChunk: backward of micro-batch ", id, " twice");
  s.input_grad_done = true;
  s.grads.resize(s.acts.size());
  // dL/d(current activation) [Tl, d], walking backwards, in the activations' dtype.
  Buffer grad(be_, Tl * d, params_.compute_dtype());
  if (!has_head()) be_.copy(grad.flat(), *dout);
  int block = int(s.acts.size());
  for (size_t i = units_.size(); i-- > 0;) {
    const int u = units_[i];
    const UnitSpec& l = params_.layout(u);
    // Where W follows at once, the unit's weights stay acquired through it, as one backward
    // holds them (W itself reads none: a W apart gathers nothing under ZeRO-3).
    if (l.kind == UnitSpec::Kind::Embedding) {  // all W: the gradient waits for it
      s.embed_grad = std::move(grad);
      if (run_weights) params_.acquire(u);
    } else {
      const Tensor w = params_.acquire(u);
      if (l.kind == UnitSpec::Kind::Head) {  // B and W at once (see chunk.hpp)
        const Tensor dw = params_.grads(u);
        const bool fresh = params_.grads_fresh(u);
        if (fresh) zero_accumulated_grads(be_, l, dw);
        const int hu = head_unit(u);
        const bool own = hu == u;
        const Tensor hw = own ? w : params_.acquire(hu);
        const UnitSpec& hl = params_.layout(hu);
        const Tensor w_head = head_matrix(hl, hw);
        const int64_t V = w_head.rows();
        // dlogits [T, V/TP] = loss_scale * (softmax - onehot(target)), over the logits
        // (already, when the forward fused the classifier).
        const Tensor dlogits = s.logits.view({T, V});
        if (s.dlogits_scale == 0)
          VocabParallelCrossEntropy::backward(be_, tp_.comm, dlogits, mb.targets, s.row_max.flat(),
                                              s.ce_stats.flat(), cfg_.vocab, loss_scale);
        else
          check(s.dlogits_scale == loss_scale, "ModelChunk: micro-batch ", id,
                "'s forward computed dlogits at loss scale ", s.dlogits_scale, ", backward asks ",
                loss_scale);
        // The head's gradient: the tied embedding's, where the embedding adds its rows too,
        // which counts this as one of its weight-gradient passes.
        head_backward(be_, tp_, l, w, dw, w_head, head_matrix(hl, own ? dw : params_.grads(hu)),
                      s.xs.back().view({Tl, d}), dlogits, grad.view({Tl, d}), s.head,
                      own ? fresh : params_.grads_fresh(hu));
        if (!own) {
          params_.release(hu);
          params_.hand_over_grads(hu);
        }
        // The head is done with this micro-batch: its input (the last block's output), logits,
        // norm and loss statistics go.
        s.xs.back().reset();
        s.logits.reset(), s.row_max.reset(), s.ce_stats.reset();
        s.head = HeadActs{};
        params_.release(u);
        params_.hand_over_grads(u);
        continue;
      }
      --block;
      const Tensor x = s.xs[block].view({Tl, d});
      BlockActs& a = s.acts[block];
      if (recompute_) {
        Buffer out(be_, Tl * d, x.dtype);
        block_forward(ctx, l, w, x, out.view({Tl, d}), a);
      }
      const Tensor dnorm = norm_grads_.flat(block * 2 * d, 2 * d);
      if (!norm_grads_open_[block]) be_.fill(dnorm, 0.f), norm_grads_open_[block] = true;
      Buffer dx(be_, Tl * d, x.dtype);
      block_backward_input(ctx, l, w, dnorm, x, std::move(grad), dx.view({Tl, d}), a,
                           s.grads[block], !run_weights);
      a.keep_for_weight_grads();
      s.xs[block].reset();  // the block's input: W reads none of it
      grad = std::move(dx);
      if (!run_weights) params_.release(u);
    }
    if (run_weights) unit_weight_grads(i, s, mb), params_.release(u);
  }
  s.xs.clear();  // what B did not free on the way: the chunk's output (without the head)
  if (run_weights) states_.erase(it);
  if (has_embedding()) return Buffer();
  return grad;
}

void ModelChunk::backward_weight(int id, const MicroBatch& mb) {
  const auto it = states_.find(id);
  check(it != states_.end() && it->second.input_grad_done, "ModelChunk: W of micro-batch ", id,
        " before its B");
  params_.begin_weight_pass();
  for (size_t i = units_.size(); i-- > 0;) unit_weight_grads(i, it->second, mb);
  states_.erase(it);
}

void ModelChunk::unit_weight_grads(size_t i, State& s, const MicroBatch& mb) {
  const int u = units_[i];
  const UnitSpec& l = params_.layout(u);
  if (l.kind == UnitSpec::Kind::Head) return;  // done in B
  const Tensor dw = params_.grads(u);
  const bool fresh = params_.grads_fresh(u);
  if (l.kind == UnitSpec::Kind::Embedding) {
    if (fresh) zero_accumulated_grads(be_, l, dw);
    embed_backward(be_, tp_, l, dw, std::move(s.embed_grad), mb.tokens);
  } else {
    // Block b of the chunk is unit i less the embedding before it. Its norms' gradients are
    // the Bs' sum so far; after the step's last W they are complete.
    const size_t b = i - (has_embedding() ? 1 : 0);
    const int64_t d = cfg_.dim;
    block_backward_weight(block_ctx(mb), l, dw, norm_grads_.flat(int64_t(b) * 2 * d, 2 * d),
                          s.acts[b], s.grads[b], fresh);
    if (params_.last_weight_pass(u)) norm_grads_open_[b] = false;
    s.acts[b].clear();
    s.grads[b] = BlockGrads{};
  }
  params_.hand_over_grads(u);
}

}  // namespace tetra
