// The guarded CPU backend (`--device guarded-cpu`): the CPU backend behind pointers that
// host code cannot follow, a test configuration for the rule that host code never reads or
// writes backend memory outside backend calls. A GPU's memory cannot be read from the host
// either, but there a slip crashes only on a machine with a GPU; here it crashes in CI.
//
// Buffers live in ordinary host memory, but the tensors handed out carry the address with
// bit 62 flipped: a non-canonical x86-64 address, so any load or store through it (a memcpy,
// an MPI call given the pointer) faults. Their device is Device::Guarded, so communicators
// stage them through upload/download as they stage GPU memory. Every op maps its tensors
// back and runs the CPU backend's code: results are bit for bit the CPU backend's.
#include <vector>

#include "backend/backend.hpp"

namespace tetra {
namespace {

constexpr uintptr_t kGuardBit = uintptr_t(1) << 62;

void* flip(void* p) {
  return p ? reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) ^ kGuardBit) : nullptr;
}

class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(int threads) : cpu_(make_cpu_backend(threads)) {}
  Device device() const override { return Device::Guarded; }
  std::string name() const override { return "guarded-cpu"; }

  void* raw_alloc(size_t bytes) override { return flip(cpu_->raw_alloc(bytes)); }
  void raw_free(void* p, size_t bytes) override { cpu_->raw_free(flip(p), bytes); }
  void upload(Tensor dst, const void* host) override { cpu_->upload(in(dst), host); }
  void download(void* host, const Tensor& src) override { cpu_->download(host, in(src)); }

  void fill(Tensor x, float value) override { cpu_->fill(in(x), value); }
  void copy(Tensor dst, const Tensor& src) override { cpu_->copy(in(dst), in(src)); }
  void cast(Tensor dst, const Tensor& src) override { cpu_->cast(in(dst), in(src)); }
  void add(Tensor y, const Tensor& x) override { cpu_->add(in(y), in(x)); }
  void add3(Tensor out, const Tensor& a, const Tensor& b) override {
    cpu_->add3(in(out), in(a), in(b));
  }
  double sum_squares(const Tensor& x) override { return cpu_->sum_squares(in(x)); }
  void sum_squares(std::span<const Tensor> xs, std::span<double> out) override {
    std::vector<Tensor> host(xs.begin(), xs.end());
    for (Tensor& t : host) t = in(t);
    cpu_->sum_squares(host, out);
  }
  void cp_zigzag(Tensor dst, const Tensor& src, int cp, int64_t batch, bool to_global) override {
    cpu_->cp_zigzag(in(dst), in(src), cp, batch, to_global);
  }
  void matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
              float beta) override {
    cpu_->matmul(in(C), in(A), ta, in(B), tb, alpha, beta);
  }
  void matmul_add(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb,
                  const Tensor& C) override {
    cpu_->matmul_add(in(D), in(A), ta, in(B), tb, in(C));
  }
  void embedding_forward(Tensor out, const Tensor& tokens, const Tensor& table,
                         int64_t vocab_start) override {
    cpu_->embedding_forward(in(out), in(tokens), in(table), vocab_start);
  }
  void embedding_backward(Tensor dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t vocab_start) override {
    cpu_->embedding_backward(in(dtable), in(tokens), in(dout), vocab_start);
  }
  void rmsnorm_forward(Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                       float eps) override {
    cpu_->rmsnorm_forward(in(y), in(rstd), in(x), in(w), eps);
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& rstd) override {
    cpu_->rmsnorm_backward(in(dx), in(dw), in(dy), in(x), in(w), in(rstd));
  }
  void rmsnorm_backward_residual(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                 const Tensor& w, const Tensor& rstd,
                                 const Tensor& residual) override {
    cpu_->rmsnorm_backward_residual(in(dx), in(dw), in(dy), in(x), in(w), in(rstd), in(residual));
  }
  void rope_split_qkv(Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads, int kv_heads,
                      const Tensor& pos, const Rope& rope) override {
    cpu_->rope_split_qkv(in(q), in(k), in(v), in(qkv), heads, kv_heads, in(pos), rope);
  }
  void rope_merge_qkv(Tensor dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int heads,
                      int kv_heads, const Tensor& pos, const Rope& rope) override {
    cpu_->rope_merge_qkv(in(dqkv), in(dq), in(dk), in(dv), heads, kv_heads, in(pos), rope);
  }
  void rope_qkv(Tensor qkv, int heads, int kv_heads, const Tensor& pos, const Rope& rope,
                bool inverse) override {
    cpu_->rope_qkv(in(qkv), heads, kv_heads, in(pos), rope, inverse);
  }
  void copy_columns(Tensor dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t width) override {
    cpu_->copy_columns(in(dst), dst_col, in(src), src_col, width);
  }
  void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttnPositions& pos, const AttnShape& s) override {
    cpu_->attention_forward(in(out), in(lse), in(q), in(k), in(v), in(pos), s);
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const AttnPositions& pos, const AttnShape& s) override {
    cpu_->attention_backward(in(dq), in(dk), in(dv), in(dout), in(q), in(k), in(v), in(out),
                             in(lse), in(pos), s);
  }
  void swiglu_fused_forward(Tensor h, const Tensor& gate_up) override {
    cpu_->swiglu_fused_forward(in(h), in(gate_up));
  }
  void swiglu_fused_backward(Tensor dgate_up, const Tensor& dh, const Tensor& gate_up) override {
    cpu_->swiglu_fused_backward(in(dgate_up), in(dh), in(gate_up));
  }
  void ce_row_max(Tensor row_max, const Tensor& logits, int64_t valid) override {
    cpu_->ce_row_max(in(row_max), in(logits), valid);
  }
  void ce_stats(Tensor stats, const Tensor& logits, const Tensor& row_max, const Tensor& targets,
                int64_t vocab_start, int64_t valid) override {
    cpu_->ce_stats(in(stats), in(logits), in(row_max), in(targets), vocab_start, valid);
  }
  void ce_backward(Tensor logits, const Tensor& row_max, const Tensor& stats, const Tensor& targets,
                   int64_t vocab_start, int64_t valid, float scale) override {
    cpu_->ce_backward(in(logits), in(row_max), in(stats), in(targets), vocab_start, valid, scale);
  }
  void ce_fused(Tensor logits, Tensor row_max, Tensor stats, const Tensor& targets, int64_t valid,
                float scale) override {
    cpu_->ce_fused(in(logits), in(row_max), in(stats), in(targets), valid, scale);
  }
  void adamw(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamW& h,
             std::span<const AdamWSegment> segments, Tensor copy = {}) override {
    cpu_->adamw(in(param), in(grad), in(m), in(v), h, segments, in(copy));
  }

 private:
  // The host view of one of this backend's tensors; anything else is a caller's mistake.
  static Tensor in(Tensor t) {
    if (t.ptr == nullptr) return t;
    check(t.device == Device::Guarded, "the guarded CPU backend was given a tensor ", t.shape_str(),
          " that it does not own");
    t.ptr = flip(t.ptr);
    t.device = Device::CPU;
    return t;
  }
  static AttnPositions in(const AttnPositions& p) {
    return {in(p.q_pos), in(p.k_pos), in(p.q_doc), in(p.k_doc)};
  }

  std::unique_ptr<Backend> cpu_;
};

}  // namespace

std::unique_ptr<Backend> make_guarded_cpu_backend(int threads) {
  return std::make_unique<GuardedBackend>(threads);
}

}  // namespace tetra
