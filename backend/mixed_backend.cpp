// bf16 mixed precision (`--dtype bf16`) over any backend: bf16 storage, fp32 arithmetic.
//
// The model keeps weights (the compute copy) and activations, and their gradients, in bf16;
// the fp32 master weights, weight gradients, Adam moments, RMSNorm's 1/rms, attention's
// log-sum-exp and the cross-entropy statistics stay fp32 (parallel/zero.hpp says who owns
// what). Every op here takes any mix of the two: a bf16 argument is widened to an fp32
// scratch copy (exact), the wrapped backend's fp32 op runs, and a bf16 result is rounded back
// to nearest even. So each op computes as a bf16 kernel with fp32 accumulation would, and
// rounds its output once; an output accumulated over several ops (beta = 1: the input
// gradient of q, k and v, or of gate and up, one matmul per weight) is rounded after each.
// On the CPU that is what CI checks against fp32 and across layouts.
// The CUDA backend runs the same way until it has native bf16 kernels.
#include <optional>
#include <vector>

#include "backend/backend.hpp"

namespace tetra {
namespace {

// One argument of one op, as the fp32 tensor the wrapped backend computes on.
class Wide {
 public:
  // read: the op reads it (an input, or an output it accumulates into or updates in place).
  Wide(Backend& be, const Tensor& t, bool read = true) : orig_(t), t_(t) {
    if (t.dtype != DType::BF16) return;
    scratch_.emplace(be, t.numel(), DType::F32);
    t_ = scratch_->flat();
    t_.dims = t.dims, t_.ndim = t.ndim;
    if (read) be.cast(t_, t);
  }
  operator const Tensor&() const { return t_; }
  // An output: rounds the fp32 result into the bf16 tensor.
  void store(Backend& be) const {
    if (scratch_) be.cast(orig_, t_);
  }

 private:
  Tensor orig_, t_;
  std::optional<Buffer> scratch_;
};

// Attention's q, k, v (or dq, dk, dv) widened. Under AttnLayout::Qkv they are one tensor,
// widened once, so that the backward's three outputs are rounded back once; under QInQkv dq is
// dqkv, whose k and v columns the backward leaves alone: it is read, so that they round-trip
// (bf16 -> fp32 -> bf16 is exact).
class WideQkv {
 public:
  WideQkv(Backend& be, const AttnShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
          bool read)
      : one_(s.layout == AttnLayout::Qkv),
        q_(be, q, read || s.layout == AttnLayout::QInQkv),
        k_(be, one_ ? Tensor() : k, read),
        v_(be, one_ ? Tensor() : v, read) {}
  const Tensor& q() const { return q_; }
  const Tensor& k() const { return one_ ? q_ : k_; }
  const Tensor& v() const { return one_ ? q_ : v_; }
  void store(Backend& be) const {
    q_.store(be);
    k_.store(be);
    v_.store(be);
  }

 private:
  bool one_;
  Wide q_, k_, v_;  // k_, v_ empty under Qkv
};

class MixedPrecisionBackend final : public Backend {
 public:
  explicit MixedPrecisionBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}
  Device device() const override { return in_->device(); }
  std::string name() const override { return in_->name(); }

  // Scratch Buffers are made on this backend, so alloc_stats counts them too.
  void* raw_alloc(size_t bytes) override { return in_->raw_alloc(bytes); }
  void raw_free(void* p, size_t bytes) override { in_->raw_free(p, bytes); }
  void upload(Tensor dst, const void* host) override { in_->upload(dst, host); }
  void download(void* host, const Tensor& src) override { in_->download(host, src); }
  void download_behind(void* host, const Tensor& src) override { in_->download_behind(host, src); }
  void copies_landed() override { in_->copies_landed(); }
  void synchronize() override { in_->synchronize(); }
  void* host_alloc(size_t bytes) override { return in_->host_alloc(bytes); }
  void host_free(void* p) override { in_->host_free(p); }
  void* stream() override { return in_->stream(); }
  std::string device_uuid() const override { return in_->device_uuid(); }
  bool has_bf16() const override { return in_->has_bf16(); }
  std::string attention_path(const AttnShape& s, DType t) const override {
    return in_->attention_path(s, DType::F32) + " under the mixed-precision wrapper";
  }

  void fill(Tensor x, float value) override {
    const Wide w(*this, x, false);
    in_->fill(w, value);
    w.store(*this);
  }
  void copy(Tensor dst, const Tensor& src) override {
    if (dst.dtype == src.dtype) return in_->copy(dst, src);
    in_->cast(dst, src);
  }
  void cast(Tensor dst, const Tensor& src) override { in_->cast(dst, src); }
  void add(Tensor y, const Tensor& x) override {
    const Wide wy(*this, y), wx(*this, x);
    in_->add(wy, wx);
    wy.store(*this);
  }
  void add3(Tensor out, const Tensor& a, const Tensor& b) override {
    const Wide wo(*this, out, false), wa(*this, a), wb(*this, b);
    in_->add3(wo, wa, wb);
    wo.store(*this);
  }
  double sum_squares(const Tensor& x) override { return in_->sum_squares(Wide(*this, x)); }
  void sum_squares(std::span<const Tensor> xs, std::span<double> out) override {
    std::vector<Wide> wide;
    wide.reserve(xs.size());
    std::vector<Tensor> t;
    for (const Tensor& x : xs) t.push_back(wide.emplace_back(*this, x));
    in_->sum_squares(t, out);
  }
  // Moves bytes only: any dtype as it is.
  void cp_zigzag(Tensor dst, const Tensor& src, int cp, int64_t batch, bool to_global) override {
    in_->cp_zigzag(dst, src, cp, batch, to_global);
  }

  void matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
              float beta) override {
    const Wide wc(*this, C, beta != 0.f), wa(*this, A), wb(*this, B);
    in_->matmul(wc, wa, ta, wb, tb, alpha, beta);
    wc.store(*this);
  }

  // The product and C added in fp32, D rounded once (as a GEMM's epilogue would).
  void matmul_add(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb,
                  const Tensor& C) override {
    const Wide wd(*this, D, false), wa(*this, A), wb(*this, B), wc(*this, C);
    in_->matmul_add(wd, wa, ta, wb, tb, wc);
    wd.store(*this);
  }

  void embedding_forward(Tensor out, const Tensor& tokens, const Tensor& table,
                         int64_t vocab_start) override {
    const Wide wo(*this, out, false), wt(*this, table);
    in_->embedding_forward(wo, tokens, wt, vocab_start);
    wo.store(*this);
  }
  void embedding_backward(Tensor dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t vocab_start) override {
    const Wide wd(*this, dtable), wg(*this, dout);
    in_->embedding_backward(wd, tokens, wg, vocab_start);
    wd.store(*this);
  }

  void rmsnorm_forward(Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                       float eps) override {
    const Wide wy(*this, y, false), wr(*this, rstd, false), wx(*this, x), ww(*this, w);
    in_->rmsnorm_forward(wy, wr, wx, ww, eps);
    wy.store(*this);
    wr.store(*this);
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& rstd) override {
    const Wide wdx(*this, dx, false), wdw(*this, dw), wdy(*this, dy), wx(*this, x), ww(*this, w),
        wr(*this, rstd);
    in_->rmsnorm_backward(wdx, wdw, wdy, wx, ww, wr);
    wdx.store(*this);
    wdw.store(*this);
  }
  // dx + residual g in fp32, rounded once: round(dx + g), the bf16 nearest the fp32 sum, where
  // rmsnorm_backward, then add round twice, round(round(dx) + g). The two differ by at most half
  // a bf16 ulp of dx plus one of the sum (so by many ulps of the sum only where dx and g nearly
  // cancel). The CUDA kernel rounds once as here.
  void rmsnorm_backward_residual(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                 const Tensor& w, const Tensor& rstd,
                                 const Tensor& residual) override {
    const Wide wdx(*this, dx, false), wdw(*this, dw), wdy(*this, dy), wx(*this, x), ww(*this, w),
        wr(*this, rstd), wg(*this, residual);
    in_->rmsnorm_backward_residual(wdx, wdw, wdy, wx, ww, wr, wg);
    wdx.store(*this);
    wdw.store(*this);
  }
  void rope_split_qkv(Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads, int kv_heads,
                      const Tensor& pos, const Rope& rope) override {
    const Wide wq(*this, q, false), wk(*this, k, false), wv(*this, v, false), wx(*this, qkv);
    in_->rope_split_qkv(wq, wk, wv, wx, heads, kv_heads, pos, rope);
    wq.store(*this);
    wk.store(*this);
    wv.store(*this);
  }
  void rope_merge_qkv(Tensor dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int heads,
                      int kv_heads, const Tensor& pos, const Rope& rope) override {
    const Wide wd(*this, dqkv, false), wq(*this, dq), wk(*this, dk), wv(*this, dv);
    in_->rope_merge_qkv(wd, wq, wk, wv, heads, kv_heads, pos, rope);
    wd.store(*this);
  }

  void rope_qkv(Tensor qkv, int heads, int kv_heads, const Tensor& pos, const Rope& rope,
                bool inverse) override {
    const Wide w(*this, qkv);
    in_->rope_qkv(w, heads, kv_heads, pos, rope, inverse);
    w.store(*this);
  }
  // Moves bytes only: any dtype as it is.
  void copy_columns(Tensor dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t width) override {
    in_->copy_columns(dst, dst_col, src, src_col, width);
  }

  void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttnPositions& pos, const AttnShape& s) override {
    const Wide wo(*this, out, false), wl(*this, lse, false);
    const WideQkv w(*this, s, q, k, v, true);
    in_->attention_forward(wo, wl, w.q(), w.k(), w.v(), pos, s);
    wo.store(*this);
    wl.store(*this);
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const AttnPositions& pos, const AttnShape& s) override {
    const WideQkv wd(*this, s, dq, dk, dv, false), w(*this, s, q, k, v, true);
    const Wide wg(*this, dout), wo(*this, out), wl(*this, lse);
    in_->attention_backward(wd.q(), wd.k(), wd.v(), wg, w.q(), w.k(), w.v(), wo, wl, pos, s);
    wd.store(*this);
  }

  void swiglu_fused_forward(Tensor h, const Tensor& gate_up) override {
    const Wide wh(*this, h, false), wg(*this, gate_up);
    in_->swiglu_fused_forward(wh, wg);
    wh.store(*this);
  }
  void swiglu_fused_backward(Tensor dgate_up, const Tensor& dh, const Tensor& gate_up) override {
    const Wide wd(*this, dgate_up, false), wh(*this, dh), wg(*this, gate_up);
    in_->swiglu_fused_backward(wd, wh, wg);
    wd.store(*this);
  }

  void ce_row_max(Tensor row_max, const Tensor& logits, int64_t valid) override {
    const Wide wm(*this, row_max, false), wl(*this, logits);
    in_->ce_row_max(wm, wl, valid);
    wm.store(*this);
  }
  void ce_stats(Tensor stats, const Tensor& logits, const Tensor& row_max, const Tensor& targets,
                int64_t vocab_start, int64_t valid) override {
    const Wide ws(*this, stats, false), wl(*this, logits), wm(*this, row_max);
    in_->ce_stats(ws, wl, wm, targets, vocab_start, valid);
    ws.store(*this);
  }
  void ce_backward(Tensor logits, const Tensor& row_max, const Tensor& stats, const Tensor& targets,
                   int64_t vocab_start, int64_t valid, float scale) override {
    const Wide wl(*this, logits), wm(*this, row_max), ws(*this, stats);
    in_->ce_backward(wl, wm, ws, targets, vocab_start, valid, scale);
    wl.store(*this);
  }
  // The statistics in fp32 from the widened logits, dlogits rounded once (as ce_backward's).
  void ce_fused(Tensor logits, Tensor row_max, Tensor stats, const Tensor& targets, int64_t valid,
                float scale) override {
    const Wide wl(*this, logits), wm(*this, row_max, false), ws(*this, stats, false);
    in_->ce_fused(wl, wm, ws, targets, valid, scale);
    wl.store(*this);
    wm.store(*this);
    ws.store(*this);
  }

  // The optimizer works on the fp32 master shard; the bf16 copy is the inner backend's to
  // write (a rounding, which every backend does itself).
  void adamw(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamW& h,
             std::span<const AdamWSegment> segments, Tensor copy = {}) override {
    in_->adamw(param, grad, m, v, h, segments, copy);
  }

 private:
  std::unique_ptr<Backend> in_;
};

}  // namespace

std::unique_ptr<Backend> make_mixed_precision_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<MixedPrecisionBackend>(std::move(inner));
}

}  // namespace tetra
