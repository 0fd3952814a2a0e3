#include "transformer/ends.hpp"

#include "transformer/block.hpp"

namespace tetra {

Buffer embed_forward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& w,
                     const Tensor& tokens) {
  return VocabParallelEmbedding(be, tp, param_view(w, u.params[0])).forward(tokens);
}

void embed_backward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& dw,
                    Buffer dx, const Tensor& tokens) {
  VocabParallelEmbedding(be, tp, Tensor{}, param_view(dw, u.params[0]))
      .backward(std::move(dx), tokens);
}

Tensor head_matrix(const UnitSpec& u, const Tensor& w) {
  return param_view(w, u.params[u.kind == UnitSpec::Kind::Embedding ? 0 : kLmHead]);
}

Buffer head_forward(Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                    const UnitSpec& u, const Tensor& w, const Tensor& w_head, const Tensor& x,
                    HeadActs& a) {
  const int64_t Tl = x.rows(), d = x.cols();
  // n [Tl, d] = rmsnorm(x) * w_final.
  Buffer n(be, Tl * d, x.dtype);
  a.rstd = Buffer(be, Tl);
  be.rmsnorm_forward(n.view({Tl, d}), a.rstd.flat(), x, param_view(w, u.params[kFinalNorm]),
                     cfg.norm_eps);
  // logits [T, V/TP] = n W_head^T: this rank's vocabulary shard, never gathered.
  Buffer logits;
  a.n = ColumnParallelLinear(be, tp, w_head).forward(std::move(n), logits);
  return logits;
}

void head_backward(Backend& be, const TensorParallel& tp, const UnitSpec& u, const Tensor& w,
                   const Tensor& dw, const Tensor& w_head, const Tensor& dw_head, const Tensor& x,
                   const Tensor& dlogits, Tensor dx, const HeadActs& a, bool head_fresh) {
  const int64_t Tl = x.rows(), d = x.cols(), T = dlogits.rows();
  // dn [Tl, d] = dlogits W_head, summed over TP; dW_head += dlogits^T n (tied: into the
  // embedding's gradient, where the embedding adds its rows too).
  const ColumnParallelLinear lm_head(be, tp, w_head, dw_head, head_fresh);
  const Buffer dn = lm_head.backward_input(dlogits);
  lm_head.backward_weight(dlogits, a.n.view({T, d}));
  be.rmsnorm_backward(dx, param_view(dw, u.params[kFinalNorm]), dn.view({Tl, d}), x,
                      param_view(w, u.params[kFinalNorm]), a.rstd.flat());
}

Buffer head_last_row(Backend& be, const TensorParallel& tp, const ModelConfig& cfg,
                     const UnitSpec& u, const Tensor& w, const Tensor& w_head, const Tensor& x) {
  check(tp.size() == 1,
        "head_last_row: at TP 1 only (the last row of a TP rank's rows is not "
        "the last token under `layout.sp`)");
  HeadActs a;
  return head_forward(be, tp, cfg, u, w, w_head, x.rows_view(x.rows() - 1, 1), a);
}

}  // namespace tetra
