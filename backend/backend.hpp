// The Backend: every numerical operation the model and optimizer need, on tensors that live
// in the backend's memory. Layer code calls these and never asks which backend it has; the
// CPU backend (fp32, Eigen, OpenMP) is the ground truth, the CUDA backend (backend/cuda/) sits
// behind the same calls.
//
// Conventions: row-major; a token-major activation is [T, width] with T = batch * seq;
// weights are [out, in] as in Hugging Face, so a linear layer is y = x W^T.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "backend/attn_mask.hpp"
#include "backend/rope.hpp"
#include "backend/tensor.hpp"

namespace tetra {

// What the positions of an attention call amount to, so that a fused kernel can take the mask
// from its geometry instead of reading positions:
//   General   any positions (the op tests, generation's KV cache);
//   Causal    q_pos = k_pos = 0..S-1 (Sq = Sk = S): top-left causal;
//   CpChunks  context parallelism: the queries are CP rank cp_rank's two chunks c and
//             2 cp - 1 - c of C = Sq/2 tokens each (parallel/cp.hpp), the keys the whole
//             sequence in order, k_pos = 0..Sk-1 with Sk = 2 cp C. Local chunk g (global g')
//             sees the key prefix [0, (g'+1) C), bottom-right aligned.
// The positions stay the truth: the CPU backend masks by them and checks the hint against
// them, so every CPU test checks the hints the layers pass. Documents (--doc-mask) mask within
// any of these: AttnShape::documents says the call has them.
enum class AttnMask { General, Causal, CpChunks };

// Geometry of one attention call. Queries are [B*Sq, H*hd], keys and values
// [B*Sk, KV*hd]; query head h reads KV head h / (H/KV). A query at global position pq sees
// keys at positions pk <= pq (q_pos and k_pos give global positions, so a CP rank holding
// two chunks of the sequence masks correctly).
//
// Where q, k, v lie (out, dout are always packed [B*Sq, H*hd]):
//   Packed  q [B*Sq, H*hd], k, v [B*Sk, KV*hd], each its own tensor (so dq, dk, dv);
//   Qkv     q, k and v are one tensor, the fused projection's qkv [B*Sq, (H + 2 KV) hd]
//           (columns q | k | v, Sq = Sk), and dq, dk, dv one tensor dqkv of its shape, whose
//           columns the backward writes, all of them (Fusion::RopeInPlace at CP 1);
//   QInQkv  q is qkv and dq is dqkv (the backward writes only their q columns); k, v, dk, dv
//           packed (CP, whose keys are gathered; decoding, whose keys are cached).
enum class AttnLayout { Packed, Qkv, QInQkv };
struct AttnShape {
  int64_t batch, sq, sk;
  int heads, kv_heads, head_dim;
  AttnMask mask = AttnMask::General;
  int cp = 1, cp_rank = 0;  // CpChunks only
  AttnLayout layout = AttnLayout::Packed;
  bool documents = false;  // the mask also keeps each query within its document (--doc-mask)
};
// What an attention call masks by (backend/attn_mask.hpp): the positions q_pos [Sq] and
// k_pos [Sk] (i32, one sequence's, shared by the batch's) and, under --doc-mask, each token's
// document q_doc [B*Sq] and k_doc [B*Sk] (i32; left empty without documents).
struct AttnPositions {
  Tensor q_pos, k_pos, q_doc, k_doc;
};
// Throws tetra::Error unless host positions q_pos [Sq] and k_pos [Sk] are what s.mask says.
void check_attn_mask(const AttnShape& s, const int32_t* q_pos, const int32_t* k_pos);
// Throws tetra::Error unless the tensors fit s: positions [Sq] and [Sk], and documents [B*Sq]
// and [B*Sk] exactly when s.documents. Reads no element (device memory alike).
void check_attn_positions(const AttnShape& s, const AttnPositions& p);
// The mask of a call, from the tensors' pointers (host or device memory alike).
AttnMaskView attn_mask_view(const AttnShape& s, const AttnPositions& p);
// Where s.layout puts q, k, v in their tensors: column c < H hd of token t's query heads is
// element t * q + q_col + c of q's tensor (and of dq's); k's and v's are at t * kv + k_col + c
// and t * kv + v_col + c (dk's, dv's likewise).
struct AttnStrides {
  int64_t q, kv;  // row strides of q (dq) and of k, v (dk, dv)
  int64_t q_col, k_col, v_col;
};
AttnStrides attn_strides(const AttnShape& s);
// Throws tetra::Error unless q, k, v (or dq, dk, dv) have the shapes s and its layout say:
// [B*Sq, q stride], [B*Sk, kv stride].
void check_attn_qkv(const char* op, const AttnShape& s, const Tensor& q, const Tensor& k,
                    const Tensor& v);

// The sizes of C [m, n] = op(A) [m, k] op(B) [k, n]; throws tetra::Error naming the
// shapes when they do not fit. Every backend's matmul starts here.
struct GemmDims {
  int64_t m, n, k;
};
inline GemmDims gemm_dims(const Tensor& C, const Tensor& A, bool ta, const Tensor& B, bool tb) {
  const int64_t m = ta ? A.cols() : A.rows(), k = ta ? A.rows() : A.cols();
  const int64_t kb = tb ? B.cols() : B.rows(), n = tb ? B.rows() : B.cols();
  check(k == kb && C.rows() == m && C.cols() == n, "matmul ", A.shape_str(), (ta ? "^T" : ""),
        " x ", B.shape_str(), (tb ? "^T" : ""), " -> ", C.shape_str());
  return {m, n, k};
}

// Throws tetra::Error unless Backend::copy_columns's columns lie in both tensors' rows. Every
// backend's copy_columns starts here.
inline void check_copy_columns(const Tensor& dst, int64_t dst_col, const Tensor& src,
                               int64_t src_col, int64_t width) {
  check(dst.dtype == src.dtype && dst.rows() == src.rows() && width >= 0 && dst_col >= 0 &&
            src_col >= 0 && dst_col + width <= dst.cols() && src_col + width <= src.cols(),
        "copy_columns: ", width, " from column ", src_col, " of ", src.shape_str(), " to column ",
        dst_col, " of ", dst.shape_str());
}

// A segment of an AdamW shard (Backend::adamw): elements [begin, end), their weight decay.
struct AdamWSegment {
  int64_t begin, end;
  float weight_decay;
};
// Throws tetra::Error unless grad, m, v (and copy, when given: bf16) have param's size and the
// segments lie in it in increasing order without overlap. Every backend's adamw starts here.
void check_adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                 std::span<const AdamWSegment> segments, const Tensor& copy);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // What Buffers hold of this backend's memory: now, at the peak, and the largest single
  // buffer (tests use it to show that no rank ever holds the full logits).
  struct AllocStats {
    int64_t in_use = 0, peak = 0, largest = 0;
    void reset_peak() { peak = in_use, largest = 0; }
  };
  AllocStats alloc_stats;

  // Raw memory. Buffers call these; nothing else should.
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p, size_t bytes) = 0;

  // Host <-> backend copies of f32 / i32 data (a plain memcpy on CPU).
  virtual void upload(Tensor dst, const void* host) = 0;
  virtual void download(void* host, const Tensor& src) = 0;
  // Blocks until queued work is done (no-op on CPU).
  virtual void synchronize() {}
  // Host memory for staging this backend's buffers through the host (the MPI path):
  // page-locked on a GPU (cudaMallocHost), so that copies run at the bus's speed; plain
  // memory on CPU.
  virtual void* host_alloc(size_t bytes);
  virtual void host_free(void* p);
  // A checkpoint's copy, which training must not wait for: src into `host` (host_alloc's
  // memory), queued behind the work queued so far on a stream of the copies' own; the
  // backend's later work waits for it on the device, the calling thread does not.
  // copies_landed() blocks its caller (the checkpoint's writer thread) until every copy
  // queued has landed. A plain download on CPU.
  virtual void download_behind(void* host, const Tensor& src) { download(host, src); }
  virtual void copies_landed() {}
  // The CUDA stream (a cudaStream_t) the backend queues its work on, for communicators that
  // queue theirs in the same order (NCCL); null on CPU.
  virtual void* stream() { return nullptr; }
  // Whether the device computes in bf16 (CUDA: compute capability 8.0 or later).
  virtual bool has_bf16() const { return true; }
  // Whether every op takes bf16 tensors itself (bf16 storage, fp32 math), so that --dtype bf16
  // needs no mixed-precision wrapper (make_mixed_precision_backend). The CPU says no: the
  // wrapper over its fp32 ops is the bf16 reference.
  virtual bool native_bf16() const { return false; }
  // Which implementation an attention call of this geometry and dtype runs (the start-up line
  // and the metrics say it): "cpu", "cuda fp32 kernels", "cudnn sdpa", "cuda fallback", ...
  virtual std::string attention_path(const AttnShape& s, DType t) const { return name(); }
  // Names the physical device across processes (a GPU's UUID), so that ranks can tell
  // whether they share one; empty on CPU.
  virtual std::string device_uuid() const { return ""; }

  // Elementwise.
  virtual void fill(Tensor x, float value) = 0;
  virtual void copy(Tensor dst, const Tensor& src) = 0;  // same dtype, byte for byte
  // dst = src converted to dst's dtype: f32 -> bf16 rounds to nearest even (util/bf16.hpp),
  // bf16 -> f32 is exact.
  virtual void cast(Tensor dst, const Tensor& src) = 0;
  virtual void add(Tensor y, const Tensor& x) = 0;                      // y += x
  virtual void add3(Tensor out, const Tensor& a, const Tensor& b) = 0;  // out = a + b
  virtual double sum_squares(const Tensor& x) = 0;                      // sum x^2, in double
  // out[i] = sum_squares(xs[i]) for every tensor at once, each to the same bits as alone:
  // the gradient norm's one launch set and one wait per step.
  virtual void sum_squares(std::span<const Tensor> xs, std::span<double> out);
  // Context parallelism's key order. CP ranks' tokens [CP, batch, 2, block] (rank r holds
  // chunks r and 2 CP - 1 - r of each sequence, `block` elements each) -> dst [batch, 2 CP,
  // block] in sequence order (to_global); the inverse permutation when !to_global.
  virtual void cp_zigzag(Tensor dst, const Tensor& src, int cp, int64_t batch, bool to_global) = 0;

  // C = alpha * op(A) op(B) + beta * C with op(X) = X or X^T; all 2-D row-major.
  virtual void matmul(Tensor C, const Tensor& A, bool trans_a, const Tensor& B, bool trans_b,
                      float alpha = 1.f, float beta = 0.f) = 0;
  // D = op(A) op(B) + C with C another tensor of D's shape (not D itself): the residual add
  // riding on a GEMM's epilogue. The CPU computes the product, then adds C.
  virtual void matmul_add(Tensor D, const Tensor& A, bool trans_a, const Tensor& B, bool trans_b,
                          const Tensor& C) = 0;

  // Embedding rows for a vocabulary shard [vocab_start, vocab_start + table.rows()):
  // out[t] = table[tok[t] - vocab_start] for tokens in the shard, 0 otherwise.
  virtual void embedding_forward(Tensor out, const Tensor& tokens, const Tensor& table,
                                 int64_t vocab_start) = 0;
  // dtable[tok[t] - vocab_start] += dout[t] for tokens in the shard.
  virtual void embedding_backward(Tensor dtable, const Tensor& tokens, const Tensor& dout,
                                  int64_t vocab_start) = 0;

  // y = x / rms(x) * w per row, rms = sqrt(mean(x^2) + eps); rstd[T] keeps 1/rms.
  virtual void rmsnorm_forward(Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                               float eps) = 0;
  // dx = (overwrite), dw += (accumulate).
  virtual void rmsnorm_backward(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                const Tensor& w, const Tensor& rstd) = 0;
  // The same with the residual stream's gradient added in the same pass (the norm_residual
  // fusion): dx = rmsnorm'(dy) + residual, residual [T, d] another tensor of dx's dtype. In fp32
  // the bits of rmsnorm_backward, then add(dx, residual); in bf16 the sum is rounded once.
  virtual void rmsnorm_backward_residual(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                         const Tensor& w, const Tensor& rstd,
                                         const Tensor& residual) = 0;

  // Rotate-half RoPE of a head x [hd] at global position p: for i < hd/2,
  // (x_i, x_{i+hd/2}) -> (x_i cos - x_{i+hd/2} sin, x_{i+hd/2} cos + x_i sin),
  // angle = p * rope.inv_freq(i, hd) (backend/rope.hpp: theta^(-2i/hd), or Llama 3's scaling of
  // it); its backward is the transposed rotation (angle -> -angle).
  // The fused projection's output qkv [T, (H + 2 KV) hd] (columns q | k | v) split into
  // q [T, H*hd] = rope(q part), k [T, KV*hd] = rope(k part), v [T, KV*hd] = v part, at the
  // positions pos [T] (i32).
  virtual void rope_split_qkv(Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads,
                              int kv_heads, const Tensor& pos, const Rope& rope) = 0;
  // Its backward: dqkv [T, (H + 2 KV) hd] = (rope^-1(dq) | rope^-1(dk) | dv), overwritten.
  virtual void rope_merge_qkv(Tensor dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              int heads, int kv_heads, const Tensor& pos, const Rope& rope) = 0;
  // RoPE in place on the q and k columns of qkv [T, (H + 2 KV) hd] (v's are left alone): the
  // same rotation as rope_split_qkv's, without the copies (Fusion::RopeInPlace); inverse, on
  // dqkv, is the backward's (rope_merge_qkv's).
  virtual void rope_qkv(Tensor qkv, int heads, int kv_heads, const Tensor& pos, const Rope& rope,
                        bool inverse) = 0;
  // Columns [src_col, src_col + width) of src's rows into columns [dst_col, dst_col + width) of
  // dst's rows (the same number of rows, the same dtype), bytes as they are.
  virtual void copy_columns(Tensor dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                            int64_t width) = 0;

  // out = softmax(q k^T / sqrt(hd) + mask) v per (batch, head), the mask by pos
  // (backend/attn_mask.hpp); lse [B, H, Sq] keeps each row's log-sum-exp so that backward can
  // rebuild the probabilities. q, k, v (and the backward's dq, dk, dv) as s.layout says.
  virtual void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const AttnPositions& pos, const AttnShape& s) = 0;
  // dq overwritten; dk, dv overwritten (summed over the query heads that share them).
  virtual void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout,
                                  const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const AttnPositions& pos,
                                  const AttnShape& s) = 0;

  // SwiGLU on the fused projection's output gate_up [T, 2F] (columns gate | up):
  // h [T, F] = silu(gate) * up; backward writes dgate_up [T, 2F] = (dgate | dup).
  virtual void swiglu_fused_forward(Tensor h, const Tensor& gate_up) = 0;
  virtual void swiglu_fused_backward(Tensor dgate_up, const Tensor& dh, const Tensor& gate_up) = 0;

  // Vocab-parallel cross-entropy in three local pieces, with reductions over the tensor
  // parallel group between them (VocabParallelCrossEntropy in parallel/tp.hpp). Only the
  // first `valid` of the shard's columns are tokens; the rest pad the vocabulary and take no
  // part in the softmax (v below runs over the valid columns):
  //   row_max[T]            = max_v logits[t, v], -inf when valid is 0   (then all-reduce max)
  //   stats[T, 2]           = (sum_v exp(logits - row_max), logits[t, target - vocab_start]
  //                            or 0 when the target is not in this shard)  (then all-reduce sum)
  //   dlogits               = scale * (softmax - onehot(target)) in place over logits, 0 in
  //                            the padding columns.
  virtual void ce_row_max(Tensor row_max, const Tensor& logits, int64_t valid) = 0;
  virtual void ce_stats(Tensor stats, const Tensor& logits, const Tensor& row_max,
                        const Tensor& targets, int64_t vocab_start, int64_t valid) = 0;
  virtual void ce_backward(Tensor logits, const Tensor& row_max, const Tensor& stats,
                           const Tensor& targets, int64_t vocab_start, int64_t valid,
                           float scale) = 0;
  // The fused classifier (TP 1, the whole vocabulary here, targets index the columns): the
  // three pieces in one op, per row an online softmax over one read of the logits
  // (op::softmax_merge) giving row_max and stats as above, then dlogits written in place. The
  // maximum is the same value as ce_row_max's; the sum of exponentials is rounded in another
  // order.
  virtual void ce_fused(Tensor logits, Tensor row_max, Tensor stats, const Tensor& targets,
                        int64_t valid, float scale) = 0;

  // One AdamW step (torch.optim.AdamW semantics) on the segments of a flat fp32 shard, which
  // differ only in weight decay (a unit's parameters: decay on matrices only), in one pass (one
  // launch on a GPU); elements outside every segment (padding) are left alone. grad is
  // multiplied by grad_scale first (clipping). step counts from 1. A non-empty `copy` (bf16,
  // param's size) receives the updated weights rounded, in the same pass: the compute copy.
  struct AdamW {
    float lr, beta1, beta2, eps, grad_scale;
    int64_t step;
  };
  virtual void adamw(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamW& h,
                     std::span<const AdamWSegment> segments, Tensor copy = {}) = 0;
};

// The backend a device asks for, the one place backends are made: "cpu" or "guarded-cpu"
// with `threads` OpenMP threads, or "cuda" (the GPU of node-local rank local_rank). Throws
// tetra::Error for a device this build lacks or does not know.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads, int local_rank = 0);
std::unique_ptr<Backend> make_cpu_backend(int threads);
// The CPU backend behind pointers host code cannot follow: a test configuration that
// crashes wherever host code touches backend memory, as it would on a GPU.
std::unique_ptr<Backend> make_guarded_cpu_backend(int threads);
// bf16 mixed precision over any backend (backend/mixed_backend.cpp): ops accept bf16 tensors,
// widen them to fp32, compute in fp32 and round bf16 outputs.
std::unique_ptr<Backend> make_mixed_precision_backend(std::unique_ptr<Backend> inner);
#ifdef TETRA_HAVE_CUDA
// The GPU of a node-local rank: local_rank modulo the GPUs visible, so that ranks beyond the
// GPU count share them. Throws when no GPU is visible.
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
#endif

// Staging memory on the host from a backend's host_alloc, grown on demand and reused.
class HostBuffer {
 public:
  explicit HostBuffer(Backend* be = nullptr) : be_(be) {}
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  // At least `bytes` of memory (the old contents are not kept when it grows).
  char* get(Backend& be, size_t bytes);

 private:
  Backend* be_;
  char* p_ = nullptr;
  size_t size_ = 0;
};

// Owns memory from a backend; hands out views. Movable, not copyable.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& be, int64_t numel, DType dtype = DType::F32);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool empty() const { return ptr_ == nullptr; }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return size_t(numel_) * dtype_size(dtype_); }
  // The whole buffer seen with a shape (element count must match), or flat.
  Tensor view(std::initializer_list<int64_t> shape) const;
  Tensor flat() const;
  Tensor flat(int64_t offset, int64_t n) const { return flat().flat(offset, n); }
  void reset();

 private:
  Backend* be_ = nullptr;
  void* ptr_ = nullptr;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
};

}  // namespace tetra
