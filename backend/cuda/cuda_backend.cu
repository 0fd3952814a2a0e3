// The CUDA backend: the same ops as the CPU backend (the ground truth) on one device, all
// queued on the backend's own stream, in two precisions:
//   fp32 (--dtype fp32): cuBLAS fp32 GEMMs without TF32 and the plain kernels of kernels.cuh,
//        written to be read and checked, not to be fast (the correctness baseline);
//   bf16 (--dtype bf16, native_bf16(): no mixed-precision wrapper): cuBLASLt bf16 GEMMs with
//        fp32 accumulation (gemm_lt.hpp), cuDNN SDPA or the GEMM fallback for attention
//        (attention.hpp), and fused memory-bound kernels with bf16 storage and fp32 math
//        (fused_ops.hpp), the per-element math shared with the CPU (backend/op_math.hpp).
// Each op takes the path of its tensors' dtypes; ops that came with the bf16 path (fused q|k|v
// and gate|up, matmul_add, cp_zigzag, several sums of squares at once) take either dtype.
// Reductions have a fixed order, so two runs agree bit for bit.
//
// Memory comes from the device's stream-ordered pool (cudaMallocAsync on the stream, freed
// memory kept in the pool), so allocating and freeing Buffers between kernels is cheap and safe.
// Errors of CUDA and cuBLAS calls become tetra::Error naming the call. One backend per process
// (one rank drives one device): the constructor makes its device the current one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/attention.hpp"
#include "backend/cuda/attention_fp32.hpp"
#include "backend/cuda/category_times.hpp"
#include "backend/cuda/classifier.hpp"
#include "backend/cuda/common.hpp"
#include "backend/cuda/fused_ops.hpp"
#include "backend/cuda/gemm_lt.hpp"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/vector_io.hpp"
#include "backend/host_wait.hpp"

namespace tetra {
namespace {

using namespace tetra::cuda;

void check_cublas(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error in ", call, ": ", cublasGetStatusString(st));
}
#define CUDA_CHECK(call) TETRA_CUDA_CHECK(call)
#define CUBLAS_CHECK(call) check_cublas((call), #call)
#define LAUNCH_CHECK(kernel) TETRA_LAUNCH_CHECK(kernel)

bool all_f32(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype != DType::F32) return false;
  return true;
}

// Blocks for a grid-stride kernel over n elements (n > 0).
unsigned blocks_for(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 16));
}

int as_int(int64_t x, const char* what) {
  check(x >= 0 && x <= INT_MAX, "cuBLAS ", what, " = ", x, " does not fit in an int");
  return int(x);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    try {
      int count = 0;
      CUDA_CHECK(cudaGetDeviceCount(&count));
      check(device >= 0 && device < count, "CUDA device ", device, " requested, ", count,
            " visible");
      CUDA_CHECK(cudaSetDevice(device));
      // A blocking stream: work queued on the legacy default stream (a plain cudaMemcpy, say)
      // still waits for this one's kernels.
      CUDA_CHECK(cudaStreamCreate(&stream_));
      // Keep freed memory in the pool rather than giving it back to the driver at each sync.
      cudaMemPool_t pool;
      CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
      uint64_t keep = UINT64_MAX;
      CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
      CUBLAS_CHECK(cublasCreate(&blas_));
      CUBLAS_CHECK(cublasSetStream(blas_, stream_));
      // Plain fp32 FMA GEMMs (no TF32), so that results stay close to the CPU's.
      CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
      lt_ = std::make_unique<LtGemm>(stream_);
      times_ = std::make_unique<CategoryTimes>(stream_);
      attention_ = std::make_unique<Attention>(stream_, blas_);
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaBackend() override { release(); }

  Device device() const override { return Device::CUDA; }
  // "cuda:0 (NVIDIA H200)": the trainer looks the device up in its table of peaks.
  std::string name() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device_);
    return "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
  }

  void* raw_alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMallocAsync(&p, bytes, stream_);
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail("out of CUDA memory allocating ", bytes, " bytes on device ", device_, " (",
           cudaGetErrorString(err), ")");
    }
    return p;
  }
  void raw_free(void* p, size_t) override {
    // Buffer destructors call this, so it reports instead of throwing.
    const cudaError_t err = cudaFreeAsync(p, stream_);
    if (err != cudaSuccess) {
      cudaGetLastError();
      std::fprintf(stderr, "tetra: cudaFreeAsync failed: %s\n", cudaGetErrorString(err));
    }
  }

  // The caller may reuse or free `host` as soon as this returns. From pageable memory the
  // driver stages the data before cudaMemcpyAsync returns; from page-locked memory
  // (host_alloc: the MPI path's staging, which the next call of the communicator overwrites)
  // the copy is truly asynchronous, so it is waited for.
  void upload(Tensor dst, const void* host) override {
    if (dst.bytes() == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dev(dst), host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
    cudaPointerAttributes attr{};
    CUDA_CHECK(cudaPointerGetAttributes(&attr, host));
    if (attr.type == cudaMemoryTypeHost) {
      before_host_wait(stream_);
      CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
  }
  void download(void* host, const Tensor& src) override {
    if (src.bytes() == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(host, dev(src), src.bytes(), cudaMemcpyDeviceToHost, stream_));
    before_host_wait(stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // The copy stream waits for the work queued so far (an event), copies, and the compute
  // stream's later work waits for the copy (another event): the next step's update cannot
  // overwrite what is being copied, and no host thread waits.
  void download_behind(void* host, const Tensor& src) override {
    if (src.bytes() == 0) return;
    if (!copy_stream_) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(queued_, stream_));
    CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, queued_, 0));
    CUDA_CHECK(cudaMemcpyAsync(host, dev(src), src.bytes(), cudaMemcpyDeviceToHost, copy_stream_));
    CUDA_CHECK(cudaEventRecord(copied_, copy_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, copied_, 0));
  }
  // Called from the writer thread: the device is per thread, so it is set first.
  void copies_landed() override {
    if (!copy_stream_) return;
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
  }
  void synchronize() override {
    before_host_wait(stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    times_->collect();
  }
  // Pinned host memory: device copies from it run at the bus's speed.
  void* host_alloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, std::max<size_t>(bytes, 1)));
    return p;
  }
  void host_free(void* p) override { cudaFreeHost(p); }
  void* stream() override { return stream_; }
  bool has_bf16() const override {
    int major = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
    return major >= 8;
  }
  bool native_bf16() const override { return has_bf16(); }
  std::string attention_path(const AttnShape& s, DType t) const override {
    return t == DType::F32 ? "cuda fp32 kernels" : attention_->path(s);
  }
  std::string device_uuid() const override {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    char hex[2 * sizeof(prop.uuid.bytes) + 1];
    for (size_t i = 0; i < sizeof(prop.uuid.bytes); ++i)
      std::snprintf(hex + 2 * i, 3, "%02x",
                    unsigned(static_cast<unsigned char>(prop.uuid.bytes[i])));
    return std::string("GPU-") + hex;
  }

  void fill(Tensor x, float value) override {
    if (try_vec_fill(stream_, x, value)) return;
    const int64_t n = x.numel();
    if (x.dtype != DType::F32) return fill_any(stream_, x, value);
    if (n == 0) return;
    fill_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(f32(x), n, value);
    LAUNCH_CHECK("fill_kernel");
  }
  void copy(Tensor dst, const Tensor& src) override {
    check(dst.bytes() == src.bytes(), "copy ", src.shape_str(), " into ", dst.shape_str());
    if (src.bytes() == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dev(dst), dev(src), src.bytes(), cudaMemcpyDeviceToDevice, stream_));
  }
  void cast(Tensor dst, const Tensor& src) override {
    check(dst.numel() == src.numel(), "cast ", src.shape_str(), " into ", dst.shape_str());
    const int64_t n = src.numel();
    if (dst.dtype == src.dtype) return copy(dst, src);
    if (n == 0 || try_vec_cast(stream_, dst, src)) return;
    if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
      f32_to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(static_cast<uint16_t*>(dev(dst)),
                                                                  f32(src), n);
    } else if (dst.dtype == DType::F32 && src.dtype == DType::BF16) {
      bf16_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(
          f32(dst), static_cast<const uint16_t*>(dev(src)), n);
    } else {
      fail("cast from ", dtype_name(src.dtype), " to ", dtype_name(dst.dtype));
    }
    LAUNCH_CHECK("cast kernel");
  }
  void add(Tensor y, const Tensor& x) override {
    check(y.numel() == x.numel(), "add ", x.shape_str(), " to ", y.shape_str());
    if (try_vec_add(stream_, y, x)) return;
    if (!all_f32({&y, &x})) return add_any(stream_, y, x);
    const int64_t n = y.numel();
    if (n == 0) return;
    add_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(f32(y), f32(x), n);
    LAUNCH_CHECK("add_kernel");
  }
  void add3(Tensor out, const Tensor& a, const Tensor& b) override {
    check(out.numel() == a.numel() && a.numel() == b.numel(), "add3 shapes");
    if (try_vec_add3(stream_, out, a, b)) return;
    if (!all_f32({&out, &a, &b})) return add3_any(stream_, out, a, b);
    const int64_t n = out.numel();
    if (n == 0) return;
    add3_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(f32(out), f32(a), f32(b), n);
    LAUNCH_CHECK("add3_kernel");
  }
  double sum_squares(const Tensor& x) override {
    double total = 0;
    sum_squares(std::span<const Tensor>(&x, 1), std::span<double>(&total, 1));
    return total;
  }
  // Every tensor's partials and totals on the device (fused_ops.hpp), then one copy of the
  // totals into pinned memory and one wait.
  void sum_squares(std::span<const Tensor> xs, std::span<double> out) override {
    check(xs.size() == out.size(), "sum_squares: ", xs.size(), " tensors, ", out.size(),
          " results");
    if (xs.empty()) return;
    const size_t bytes = xs.size() * sizeof(double);
    Scratch totals(stream_, bytes);
    sum_squares_many(stream_, xs, totals.as<double>());
    double* host = reinterpret_cast<double*>(sum_host_.get(*this, bytes));
    CUDA_CHECK(cudaMemcpyAsync(host, totals.get(), bytes, cudaMemcpyDeviceToHost, stream_));
    before_host_wait(stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy(host, host + xs.size(), out.begin());
  }
  void cp_zigzag(Tensor dst, const Tensor& src, int cp, int64_t batch, bool to_global) override {
    cuda::cp_zigzag(stream_, dst, src, cp, batch, to_global);
  }

  // Row-major X [r, c] is column-major X^T with leading dimension c. So C = op(A) op(B) [m, n]
  // is, in cuBLAS's column-major terms, C^T [n, m] = op(B)^T [n, k] op(A)^T [k, m]: cuBLAS's
  // first operand is B (ld = B.cols, transposed iff trans_b), its second A (ld = A.cols,
  // transposed iff trans_a), and ldc = n. beta = 0 does not read C, like the CPU's setZero.
  void matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
              float beta) override {
    const auto [m, n, k] = gemm_dims(C, A, ta, B, tb);
    if (m == 0 || n == 0) return;
    const CategoryTimes::Span timed(*times_, CategoryTimes::kGemm);
    if (!all_f32({&C, &A, &B})) {
      if (k > 0) return lt_->matmul(C, A, ta, B, tb, C, alpha, beta);
    }
    if (k == 0) {  // an empty sum: C = beta C
      if (beta == 0.f)
        fill(C, 0.f);
      else
        scale_any(stream_, C, beta);
      return;
    }
    CUBLAS_CHECK(cublasSgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                             as_int(n, "n"), as_int(m, "m"), as_int(k, "k"), &alpha, f32(B),
                             as_int(B.cols(), "ldb"), f32(A), as_int(A.cols(), "lda"), &beta,
                             f32(C), as_int(n, "ldc")));
  }
  // bf16: C rides on cuBLASLt's epilogue (beta 1, C another matrix); fp32: the product, then
  // the add, as on the CPU.
  void matmul_add(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb,
                  const Tensor& C) override {
    check(C.ptr != D.ptr && C.numel() == D.numel(), "matmul_add: C ", C.shape_str(), " for D ",
          D.shape_str(), " (C must be another tensor of D's size)");
    const GemmDims g = gemm_dims(D, A, ta, B, tb);
    if (!all_f32({&D, &A, &B, &C}) && g.k > 0 && g.m > 0 && g.n > 0) {
      const CategoryTimes::Span timed(*times_, CategoryTimes::kGemm);
      return lt_->matmul(D, A, ta, B, tb, C, 1.f, 1.f);
    }
    matmul(D, A, ta, B, tb, 1.f, 0.f);
    add(D, C);
  }

  void embedding_forward(Tensor out, const Tensor& tokens, const Tensor& table,
                         int64_t vocab_start) override {
    const int64_t T = out.rows(), d = out.cols(), V = table.rows();
    check(tokens.numel() == T && table.cols() == d, "embedding_forward ", table.shape_str(), " -> ",
          out.shape_str());
    if (try_vec_embedding_forward(stream_, out, tokens, table, vocab_start)) return;
    if (!all_f32({&out, &table}))
      return embedding_forward_any(stream_, out, tokens, table, vocab_start);
    if (T * d == 0) return;
    embedding_forward_kernel<<<blocks_for(T * d), kThreads, 0, stream_>>>(
        f32(out), i32(tokens), f32(table), T, d, V, vocab_start);
    LAUNCH_CHECK("embedding_forward_kernel");
  }
  void embedding_backward(Tensor dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t vocab_start) override {
    const int64_t T = dout.rows(), d = dout.cols(), V = dtable.rows();
    check(tokens.numel() == T && dtable.cols() == d, "embedding_backward ", dout.shape_str(),
          " -> ", dtable.shape_str());
    if (dout.dtype != DType::F32)
      return embedding_backward_sorted(stream_, dtable, tokens, dout, vocab_start);
    if (d == 0) return;
    embedding_backward_kernel<<<blocks_for(d), kThreads, 0, stream_>>>(
        f32(dtable), i32(tokens), f32(dout), T, d, V, vocab_start);
    LAUNCH_CHECK("embedding_backward_kernel");
  }

  void rmsnorm_forward(Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                       float eps) override {
    const int64_t T = x.rows(), d = x.cols();
    check(y.numel() == T * d && rstd.numel() == T && w.numel() == d, "rmsnorm_forward ",
          x.shape_str());
    if (!all_f32({&y, &x, &w})) return rmsnorm_forward_any(stream_, y, rstd, x, w, eps);
    if (T == 0) return;
    rmsnorm_forward_kernel<<<unsigned(T), kThreads, 0, stream_>>>(f32(y), f32(rstd), f32(x), f32(w),
                                                                  d, eps);
    LAUNCH_CHECK("rmsnorm_forward_kernel");
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& rstd) override {
    const int64_t T = x.rows(), d = x.cols();
    check(dx.numel() == T * d && dy.numel() == T * d && dw.numel() == d && w.numel() == d &&
              rstd.numel() == T,
          "rmsnorm_backward ", x.shape_str());
    if (!all_f32({&dx, &dy, &x, &w})) return rmsnorm_backward_any(stream_, dx, dw, dy, x, w, rstd);
    if (T == 0 || d == 0) return;
    rmsnorm_backward_dx_kernel<<<unsigned(T), kThreads, 0, stream_>>>(f32(dx), f32(dy), f32(x),
                                                                      f32(w), f32(rstd), d);
    LAUNCH_CHECK("rmsnorm_backward_dx_kernel");
    rmsnorm_backward_dw_kernel<<<blocks_for(d), kThreads, 0, stream_>>>(f32(dw), f32(dy), f32(x),
                                                                        f32(rstd), T, d);
    LAUNCH_CHECK("rmsnorm_backward_dw_kernel");
  }
  // Either dtype through the warp-per-row kernel (fused_ops.hpp), the residual added in it.
  void rmsnorm_backward_residual(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                 const Tensor& w, const Tensor& rstd,
                                 const Tensor& residual) override {
    check(residual.ptr != nullptr, "rmsnorm_backward_residual without a residual");
    rmsnorm_backward_any(stream_, dx, dw, dy, x, w, rstd, residual);
  }

  void rope_split_qkv(Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads, int kv_heads,
                      const Tensor& pos, const Rope& rope) override {
    const int64_t hd = q.cols() / std::max(heads, 1);
    rope_split_qkv_any(stream_, q, k, v, qkv, heads, kv_heads, pos, rope_table(hd, rope), rope);
  }
  void rope_merge_qkv(Tensor dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int heads,
                      int kv_heads, const Tensor& pos, const Rope& rope) override {
    const int64_t hd = dq.cols() / std::max(heads, 1);
    rope_merge_qkv_any(stream_, dqkv, dq, dk, dv, heads, kv_heads, pos, rope_table(hd, rope), rope);
  }

  // One launch on the q and k heads of each row (the kernel rope_split_qkv's rotation uses).
  void rope_qkv(Tensor qkv, int heads, int kv_heads, const Tensor& pos, const Rope& rope,
                bool inverse) override {
    check(heads > 0 && kv_heads > 0 && qkv.cols() % (2 * (heads + 2 * kv_heads)) == 0, "rope_qkv ",
          qkv.shape_str(), " with ", heads, " + 2 x ", kv_heads, " heads");
    const int64_t hd = qkv.cols() / (heads + 2 * kv_heads);
    rope_any(stream_, qkv, heads + kv_heads, hd, pos, rope_table(hd, rope), rope, inverse);
  }
  void copy_columns(Tensor dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t width) override {
    const int64_t T = src.rows();
    check_copy_columns(dst, dst_col, src, src_col, width);
    if (T * width == 0) return;
    const size_t e = dtype_size(src.dtype);
    CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dev(dst)) + dst_col * e, dst.cols() * e,
                                 static_cast<const char*>(dev(src)) + src_col * e, src.cols() * e,
                                 width * e, size_t(T), cudaMemcpyDeviceToDevice, stream_));
  }

  void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttnPositions& pos, const AttnShape& s) override {
    const CategoryTimes::Span timed(*times_, CategoryTimes::kAttention);
    if (!all_f32({&out, &q, &k, &v})) return attention_->forward(out, lse, q, k, v, pos, s);
    fp32_attention_forward(stream_, out, lse, q, k, v, pos, s);
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const AttnPositions& pos, const AttnShape& s) override {
    const CategoryTimes::Span timed(*times_, CategoryTimes::kAttention);
    if (!all_f32({&dq, &dk, &dv, &dout, &q, &k, &v, &out}))
      return attention_->backward(dq, dk, dv, dout, q, k, v, out, lse, pos, s);
    fp32_attention_backward(stream_, dq, dk, dv, dout, q, k, v, out, lse, pos, s);
  }

  void swiglu_fused_forward(Tensor h, const Tensor& gate_up) override {
    swiglu_fused_forward_any(stream_, h, gate_up);
  }
  void swiglu_fused_backward(Tensor dgate_up, const Tensor& dh, const Tensor& gate_up) override {
    swiglu_fused_backward_any(stream_, dgate_up, dh, gate_up);
  }

  void ce_row_max(Tensor row_max, const Tensor& logits, int64_t valid) override {
    const int64_t T = logits.rows(), V = logits.cols();
    check(row_max.numel() == T, "ce_row_max ", logits.shape_str());
    if (logits.dtype != DType::F32) return ce_row_max_any(stream_, row_max, logits, valid);
    if (T == 0) return;
    ce_row_max_kernel<<<unsigned(T), kThreads, 0, stream_>>>(f32(row_max), f32(logits), V, valid);
    LAUNCH_CHECK("ce_row_max_kernel");
  }
  void ce_stats(Tensor stats, const Tensor& logits, const Tensor& row_max, const Tensor& targets,
                int64_t vocab_start, int64_t valid) override {
    const int64_t T = logits.rows(), V = logits.cols();
    check(stats.numel() == 2 * T && row_max.numel() == T && targets.numel() == T, "ce_stats ",
          logits.shape_str());
    if (logits.dtype != DType::F32)
      return ce_stats_any(stream_, stats, logits, row_max, targets, vocab_start, valid);
    if (T == 0) return;
    ce_stats_kernel<<<unsigned(T), kThreads, 0, stream_>>>(f32(stats), f32(logits), f32(row_max),
                                                           i32(targets), V, vocab_start, valid);
    LAUNCH_CHECK("ce_stats_kernel");
  }
  void ce_backward(Tensor logits, const Tensor& row_max, const Tensor& stats, const Tensor& targets,
                   int64_t vocab_start, int64_t valid, float scale) override {
    const int64_t T = logits.rows(), V = logits.cols();
    check(stats.numel() == 2 * T && row_max.numel() == T && targets.numel() == T, "ce_backward ",
          logits.shape_str());
    if (try_vec_ce_backward(stream_, logits, row_max, stats, targets, vocab_start, valid, scale))
      return;
    if (logits.dtype != DType::F32)
      return ce_backward_any(stream_, logits, row_max, stats, targets, vocab_start, valid, scale);
    if (T * V == 0) return;
    ce_backward_kernel<<<blocks_for(T * V), kThreads, 0, stream_>>>(
        f32(logits), f32(row_max), f32(stats), i32(targets), T, V, vocab_start, valid, scale);
    LAUNCH_CHECK("ce_backward_kernel");
  }
  void ce_fused(Tensor logits, Tensor row_max, Tensor stats, const Tensor& targets, int64_t valid,
                float scale) override {
    ce_fused_any(stream_, logits, row_max, stats, targets, valid, scale);
  }

  void adamw(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamW& h,
             std::span<const AdamWSegment> segments, Tensor copy = {}) override {
    adamw_segments(stream_, param, grad, m, v, h, segments, copy);
  }

 private:
  // RoPE's cos/sin table for (hd, rope), built on first use (fused_ops.hpp) and kept.
  const void* rope_table(int64_t hd, const Rope& rope) {
    auto& t = rope_tables_[{hd, rope}];
    if (!t) {
      CUDA_CHECK(cudaMallocAsync(&t, rope_table_bytes(hd), stream_));
      build_rope_table(stream_, t, hd, rope);
    }
    return t;
  }

  void release() noexcept {
    times_.reset();
    attention_.reset();
    lt_.reset();
    for (auto& [key, t] : rope_tables_) cudaFreeAsync(t, stream_);
    rope_tables_.clear();
    if (blas_) cublasDestroy(blas_);
    if (copy_stream_) {
      cudaStreamSynchronize(copy_stream_);
      cudaStreamDestroy(copy_stream_);
      cudaEventDestroy(queued_);
      cudaEventDestroy(copied_);
    }
    copy_stream_ = nullptr;
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    blas_ = nullptr;
    stream_ = nullptr;
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  // Checkpoint copies (download_behind): their stream, and the events that order it with
  // stream_ both ways.
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t queued_ = nullptr, copied_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<LtGemm> lt_;
  std::unique_ptr<Attention> attention_;
  std::unique_ptr<CategoryTimes> times_;
  std::map<std::pair<int64_t, Rope>, void*> rope_tables_;
  HostBuffer sum_host_{this};  // pinned: the sums of squares come back through it
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int local_rank) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) cudaGetLastError();
  check(err == cudaSuccess && count > 0, "`device.device` cuda: no GPU is visible (",
        err == cudaSuccess ? "none found" : cudaGetErrorString(err), ")");
  return std::make_unique<CudaBackend>(local_rank % count);
}

}  // namespace tetra
