// The CPU backend: fp32 everywhere, OpenBLAS for the matrix products (cpu_gemm.cpp), OpenMP
// over rows, heads, columns or tiles. Every reduction has a fixed order that does not depend on
// the thread count, so two runs of the same layout agree bit for bit; ops below a size
// (cpu_parallel.hpp) run on one thread.
#include <omp.h>
#include <sys/mman.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_attention.hpp"
#include "backend/cpu/cpu_gemm.hpp"
#include "backend/cpu/cpu_lanes.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/op_math.hpp"

namespace tetra {
namespace {

constexpr int64_t kChunk = 1 << 16;            // fixed reduction chunk for sum_squares
constexpr size_t kHugePage = size_t(2) << 20;  // x86-64's transparent huge page

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    omp_set_num_threads(threads);
    Eigen::setNbThreads(1);  // attention threads over heads itself
    cpu_gemm_init();
  }
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }

  // A step allocates the same buffer sizes every time, so freed blocks are kept by size and
  // handed out again: no malloc, no fresh pages from the kernel, in the steady state. The
  // cache never holds more than the step's peak.
  void* raw_alloc(size_t bytes) override {
    const size_t size = (bytes + 63) / 64 * 64;  // 64-byte alignment for vector loads
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    // A block of a huge page or more is asked for in huge pages, which the kernel gives only
    // on request where transparent huge pages are "madvise" (Debian's default): the products
    // then read their operands with a TLB miss per 2 MiB, not per 4 KiB. The advice changes
    // no value; where huge pages are off it is refused, and ignored.
    const bool huge = size >= kHugePage;
    const size_t whole = huge ? (size + kHugePage - 1) / kHugePage * kHugePage : size;
    void* p = std::aligned_alloc(huge ? kHugePage : 64, whole);
    check(p != nullptr, "out of host memory allocating ", bytes, " bytes");
    if (huge) madvise(p, whole, MADV_HUGEPAGE);
    return p;
  }
  void raw_free(void* p, size_t bytes) override {
    free_blocks_[(bytes + 63) / 64 * 64].push_back(p);
  }
  ~CpuBackend() override {
    for (auto& [size, blocks] : free_blocks_)
      for (void* p : blocks) std::free(p);
  }

  void upload(Tensor dst, const void* host) override { std::memcpy(dst.ptr, host, dst.bytes()); }
  void download(void* host, const Tensor& src) override { std::memcpy(host, src.ptr, src.bytes()); }

  void fill(Tensor x, float value) override {
    float* p = x.f32();
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (parallel_elements(n))
    for (int64_t i = 0; i < n; ++i) p[i] = value;
  }
  void copy(Tensor dst, const Tensor& src) override {
    check(dst.bytes() == src.bytes(), "copy ", src.shape_str(), " into ", dst.shape_str());
    std::memcpy(dst.ptr, src.ptr, src.bytes());
  }
  void cast(Tensor dst, const Tensor& src) override {
    check(dst.numel() == src.numel(), "cast ", src.shape_str(), " into ", dst.shape_str());
    const int64_t n = src.numel();
    if (dst.dtype == src.dtype) return copy(dst, src);
    if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
      uint16_t* d = static_cast<uint16_t*>(dst.ptr);
      const float* s = src.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(n))
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
    } else if (dst.dtype == DType::F32 && src.dtype == DType::BF16) {
      float* d = dst.f32();
      const uint16_t* s = static_cast<const uint16_t*>(src.ptr);
#pragma omp parallel for schedule(static) if (parallel_elements(n))
      for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
    } else {
      fail("cast from ", dtype_name(src.dtype), " to ", dtype_name(dst.dtype));
    }
  }
  void add(Tensor y, const Tensor& x) override {
    check(y.numel() == x.numel(), "add ", x.shape_str(), " to ", y.shape_str());
    float* py = y.f32();
    const float* px = x.f32();
    const int64_t n = y.numel();
#pragma omp parallel for schedule(static) if (parallel_elements(n))
    for (int64_t i = 0; i < n; ++i) py[i] += px[i];
  }
  void add3(Tensor out, const Tensor& a, const Tensor& b) override {
    check(out.numel() == a.numel() && a.numel() == b.numel(), "add3 shapes");
    float* po = out.f32();
    const float *pa = a.f32(), *pb = b.f32();
    const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (parallel_elements(n))
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
  }
  double sum_squares(const Tensor& x) override {
    const float* p = x.f32();
    const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> part(chunks, 0.0);
#pragma omp parallel for schedule(static) if (parallel_elements(n))
    for (int64_t c = 0; c < chunks; ++c) {
      const float* q = p + c * kChunk;
      part[c] = lane_sum<double>(std::min(n - c * kChunk, kChunk),
                                 [q](int64_t i) { return double(q[i]) * q[i]; });
    }
    double total = 0;
    for (double s : part) total += s;
    return total;
  }

  void cp_zigzag(Tensor dst, const Tensor& src, int cp, int64_t batch, bool to_global) override {
    check(dst.bytes() == src.bytes() && cp > 0 && batch > 0 && src.numel() % (2 * cp * batch) == 0,
          "cp_zigzag ", src.shape_str(), " over ", cp, " ranks, batch ", batch);
    const size_t block = src.bytes() / size_t(2 * cp * batch);
    const char* s = static_cast<const char*>(src.ptr);
    char* d = static_cast<char*>(dst.ptr);
    // Global chunk c of sequence b is half h of rank r's tokens: r = c, h = 0 below cp;
    // r = 2 cp - 1 - c, h = 1 from cp on.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t c = 0; c < 2 * cp; ++c) {
        const int64_t r = c < cp ? c : 2 * cp - 1 - c, h = c < cp ? 0 : 1;
        const size_t global = size_t(b * 2 * cp + c) * block,
                     ranked = size_t((r * batch + b) * 2 + h) * block;
        if (to_global)
          std::memcpy(d + global, s + ranked, block);
        else
          std::memcpy(d + ranked, s + global, block);
      }
  }

  void matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
              float beta) override {
    cpu_matmul(C, A, ta, B, tb, alpha, beta);
  }

  void matmul_add(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb,
                  const Tensor& C) override {
    check(C.ptr != D.ptr && C.numel() == D.numel(), "matmul_add: C ", C.shape_str(), " for D ",
          D.shape_str(), " (C must be another tensor of D's size)");
    matmul(D, A, ta, B, tb, 1.f, 0.f);
    add(D, C);
  }

  void embedding_forward(Tensor out, const Tensor& tokens, const Tensor& table,
                         int64_t vocab_start) override {
    const int64_t T = out.rows(), d = out.cols(), V = table.rows();
    const int32_t* tok = tokens.i32();
    const float* w = table.f32();
    float* o = out.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * d))
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = tok[t] - vocab_start;
      if (r >= 0 && r < V)
        std::memcpy(o + t * d, w + r * d, d * sizeof(float));
      else
        std::fill(o + t * d, o + (t + 1) * d, 0.f);
    }
  }
  void embedding_backward(Tensor dtable, const Tensor& tokens, const Tensor& dout,
                          int64_t vocab_start) override {
    const int64_t T = dout.rows(), d = dout.cols(), V = dtable.rows();
    const int32_t* tok = tokens.i32();
    const float* g = dout.f32();
    float* dw = dtable.f32();
    // Columns in parallel, tokens in order: no two threads touch one element.
    constexpr int64_t kCols = 16;
#pragma omp parallel for schedule(static) if (parallel_elements(T * d))
    for (int64_t c0 = 0; c0 < d; c0 += kCols) {
      const int64_t c1 = std::min(d, c0 + kCols);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = tok[t] - vocab_start;
        if (r < 0 || r >= V) continue;
        for (int64_t c = c0; c < c1; ++c) dw[r * d + c] += g[t * d + c];
      }
    }
  }

  void rmsnorm_forward(Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                       float eps) override {
    const int64_t T = x.rows(), d = x.cols();
    const float *px = x.f32(), *pw = w.f32();
    float *py = y.f32(), *pr = rstd.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * d))
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = px + t * d;
      const float ss = lane_sum<float>(d, [xr](int64_t i) { return xr[i] * xr[i]; });
      const float r = op::rmsnorm_rstd(ss, float(d), eps);
      pr[t] = r;
      for (int64_t i = 0; i < d; ++i) py[t * d + i] = op::rmsnorm_y(xr[i], r, pw[i]);
    }
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                        const Tensor& rstd) override {
    rmsnorm_grad(dx, dw, dy, x, w, rstd, nullptr);
  }
  void rmsnorm_backward_residual(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                                 const Tensor& w, const Tensor& rstd,
                                 const Tensor& residual) override {
    check(residual.numel() == dx.numel() && residual.ptr != dx.ptr,
          "rmsnorm_backward_residual: ", residual.shape_str(), " for dx ", dx.shape_str(),
          " (another tensor of its size)");
    rmsnorm_grad(dx, dw, dy, x, w, rstd, residual.f32());
  }

  void rope_split_qkv(Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads, int kv_heads,
                      const Tensor& pos, const Rope& rope) override {
    const int64_t T = qkv.rows(), W = qkv.cols(), qw = q.cols(), kw = k.cols();
    check(qw % heads == 0 && kw * heads == qw * kv_heads && W == qw + 2 * kw && v.cols() == kw &&
              q.rows() == T && k.rows() == T && v.rows() == T,
          "rope_split_qkv ", qkv.shape_str(), " -> ", q.shape_str(), ", ", k.shape_str());
    const float* s = qkv.f32();
    float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * W))
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(pq + t * qw, s + t * W, qw * sizeof(float));
      std::memcpy(pk + t * kw, s + t * W + qw, kw * sizeof(float));
      std::memcpy(pv + t * kw, s + t * W + qw + kw, kw * sizeof(float));
    }
    rotate(pq, qw, T, heads, qw / heads, pos.i32(), rope, false);
    rotate(pk, kw, T, kv_heads, qw / heads, pos.i32(), rope, false);
  }
  void rope_merge_qkv(Tensor dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int heads,
                      int kv_heads, const Tensor& pos, const Rope& rope) override {
    const int64_t T = dqkv.rows(), W = dqkv.cols(), qw = dq.cols(), kw = dk.cols();
    check(qw % heads == 0 && kw * heads == qw * kv_heads && W == qw + 2 * kw && dv.cols() == kw &&
              dq.rows() == T && dk.rows() == T && dv.rows() == T,
          "rope_merge_qkv ", dq.shape_str(), ", ", dk.shape_str(), " -> ", dqkv.shape_str());
    const float *sq = dq.f32(), *sk = dk.f32(), *sv = dv.f32();
    float* d = dqkv.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * W))
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(d + t * W, sq + t * qw, qw * sizeof(float));
      std::memcpy(d + t * W + qw, sk + t * kw, kw * sizeof(float));
      std::memcpy(d + t * W + qw + kw, sv + t * kw, kw * sizeof(float));
    }
    // The q and k parts are heads + kv_heads adjacent heads of each row.
    rotate(d, W, T, heads + kv_heads, qw / heads, pos.i32(), rope, true);
  }

  void rope_qkv(Tensor qkv, int heads, int kv_heads, const Tensor& pos, const Rope& rope,
                bool inverse) override {
    const int64_t T = qkv.rows(), W = qkv.cols();
    check(heads > 0 && kv_heads > 0 && W % (2 * (heads + 2 * kv_heads)) == 0 && pos.numel() == T,
          "rope_qkv ", qkv.shape_str(), " with ", heads, " + 2 x ", kv_heads, " heads");
    // The q and k parts are heads + kv_heads adjacent heads of each row.
    rotate(qkv.f32(), W, T, heads + kv_heads, W / (heads + 2 * kv_heads), pos.i32(), rope, inverse);
  }
  void copy_columns(Tensor dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t width) override {
    const int64_t T = src.rows();
    check_copy_columns(dst, dst_col, src, src_col, width);
    const size_t e = dtype_size(src.dtype);
    const char* ps = static_cast<const char*>(src.ptr);
    char* pd = static_cast<char*>(dst.ptr);
#pragma omp parallel for schedule(static) if (parallel_elements(T * width))
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(pd + (t * dst.cols() + dst_col) * e, ps + (t * src.cols() + src_col) * e,
                  width * e);
  }

  void attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttnPositions& pos, const AttnShape& s) override {
    cpu_attention_forward(out, lse, q, k, v, pos, s);
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const AttnPositions& pos, const AttnShape& s) override {
    cpu_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, pos, s);
  }

  // gate_up [T, 2F]: gate = columns [0, F) of a row, up = [F, 2F). The per-element math (its
  // e^-g op::exp_poly) vectorizes along a row.
  void swiglu_fused_forward(Tensor h, const Tensor& gate_up) override {
    const int64_t T = h.rows(), F = h.cols();
    check(gate_up.rows() == T && gate_up.cols() == 2 * F, "swiglu_fused_forward ",
          gate_up.shape_str(), " -> ", h.shape_str());
    const float* gu = gate_up.f32();
    float* ph = h.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * F))
    for (int64_t t = 0; t < T; ++t) {
      const float *g = gu + t * 2 * F, *u = g + F;
      float* hr = ph + t * F;
#pragma omp simd
      for (int64_t i = 0; i < F; ++i) hr[i] = op::swiglu(g[i], u[i]);
    }
  }
  void swiglu_fused_backward(Tensor dgate_up, const Tensor& dh, const Tensor& gate_up) override {
    const int64_t T = dh.rows(), F = dh.cols();
    check(gate_up.rows() == T && gate_up.cols() == 2 * F && dgate_up.numel() == gate_up.numel(),
          "swiglu_fused_backward ", dh.shape_str(), " -> ", dgate_up.shape_str());
    const float *gu = gate_up.f32(), *pdh = dh.f32();
    float* d = dgate_up.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * F))
    for (int64_t t = 0; t < T; ++t) {
      const float *g = gu + t * 2 * F, *u = g + F, *dhr = pdh + t * F;
      float *dg = d + t * 2 * F, *du = dg + F;  // gate's columns, up's columns
#pragma omp simd
      for (int64_t i = 0; i < F; ++i) op::swiglu_backward(dhr[i], g[i], u[i], dg[i], du[i]);
    }
  }

  void ce_row_max(Tensor row_max, const Tensor& logits, int64_t valid) override {
    const int64_t T = logits.rows(), V = logits.cols();
    const float* l = logits.f32();
    float* m = row_max.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * valid))
    for (int64_t t = 0; t < T; ++t)
      m[t] = valid > 0 ? *std::max_element(l + t * V, l + t * V + valid) : -INFINITY;
  }
  void ce_stats(Tensor stats, const Tensor& logits, const Tensor& row_max, const Tensor& targets,
                int64_t vocab_start, int64_t valid) override {
    const int64_t T = logits.rows(), V = logits.cols();
    const float *l = logits.f32(), *m = row_max.f32();
    const int32_t* y = targets.i32();
    float* st = stats.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * valid))
    for (int64_t t = 0; t < T; ++t) {
      float sum = 0;
      for (int64_t j = 0; j < valid; ++j) sum += std::exp(l[t * V + j] - m[t]);
      const int64_t r = y[t] - vocab_start;
      st[2 * t] = sum;
      st[2 * t + 1] = (r >= 0 && r < valid) ? l[t * V + r] : 0.f;
    }
  }
  void ce_backward(Tensor logits, const Tensor& row_max, const Tensor& stats, const Tensor& targets,
                   int64_t vocab_start, int64_t valid, float scale) override {
    const int64_t T = logits.rows(), V = logits.cols();
    float* l = logits.f32();
    const float *m = row_max.f32(), *st = stats.f32();
    const int32_t* y = targets.i32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * V))
    for (int64_t t = 0; t < T; ++t) {
      const float inv = 1.f / st[2 * t];
      const int64_t r = y[t] - vocab_start;
      for (int64_t j = 0; j < valid; ++j)
        l[t * V + j] = op::ce_grad(l[t * V + j], m[t], inv, scale, j == r);
      std::fill(l + t * V + valid, l + (t + 1) * V, 0.f);
    }
  }

  void ce_fused(Tensor logits, Tensor row_max, Tensor stats, const Tensor& targets, int64_t valid,
                float scale) override {
    const int64_t T = logits.rows(), V = logits.cols();
    check(row_max.numel() == T && stats.numel() == 2 * T && targets.numel() == T && valid >= 0 &&
              valid <= V,
          "ce_fused ", logits.shape_str(), ", ", valid, " valid columns");
    float *l = logits.f32(), *mx = row_max.f32(), *st = stats.f32();
    const int32_t* y = targets.i32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * V))
    for (int64_t t = 0; t < T; ++t) {
      float* row = l + t * V;
      float m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < valid; ++j) op::softmax_add(m, sum, row[j]);
      const int64_t r = y[t];
      mx[t] = m;
      st[2 * t] = sum;
      st[2 * t + 1] = (r >= 0 && r < valid) ? row[r] : 0.f;
      const float inv = 1.f / sum;
      for (int64_t j = 0; j < valid; ++j) row[j] = op::ce_grad(row[j], m, inv, scale, j == r);
      std::fill(row + valid, row + V, 0.f);
    }
  }

  void adamw(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamW& h,
             std::span<const AdamWSegment> segments, Tensor copy = {}) override {
    check_adamw(param, grad, m, v, segments, copy);
    float *p = param.f32(), *pm = m.f32(), *pv = v.f32();
    const float* g = grad.f32();
    uint16_t* c = static_cast<uint16_t*>(copy.ptr);
    for (const AdamWSegment& s : segments) {
      const op::AdamCoeffs k =
          op::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, s.weight_decay, h.grad_scale, h.step);
      // The update, then the copy, in blocks: each loop without a branch vectorizes, and the
      // block's parameters are still in cache for the copy.
      constexpr int64_t kBlock = 4096;
      const int64_t blocks = (s.end - s.begin + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (parallel_elements(s.end - s.begin))
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t i0 = s.begin + b * kBlock, i1 = std::min(s.end, i0 + kBlock);
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) op::adamw_update(p[i], g[i], pm[i], pv[i], k);
        if (c)
          for (int64_t i = i0; i < i1; ++i) c[i] = float_to_bf16(p[i]);
      }
    }
  }

 private:
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;

  // RMSNorm's backward, with xhat = x * r: dx = r * (dy*w - xhat * mean(dy*w*xhat)), plus
  // res [T, d] when given (each row's dx first, then res added in a second loop, so that the
  // compiler cannot contract the add into dx's product: the bits of an add after the op);
  // dw += sum_t dy * xhat.
  static void rmsnorm_grad(Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                           const Tensor& rstd, const float* res) {
    const int64_t T = x.rows(), d = x.cols();
    const float *px = x.f32(), *pw = w.f32(), *pg = dy.f32(), *pr = rstd.f32();
    float *pdx = dx.f32(), *pdw = dw.f32();
#pragma omp parallel for schedule(static) if (parallel_elements(T * d))
    for (int64_t t = 0; t < T; ++t) {
      const float *xr = px + t * d, *gr = pg + t * d;
      const float r = pr[t];
      const float dot = lane_sum<float>(d, [=](int64_t i) { return gr[i] * pw[i] * xr[i] * r; });
      const float mean = dot / float(d);
      float* dr = pdx + t * d;
      for (int64_t i = 0; i < d; ++i) dr[i] = op::rmsnorm_dx(gr[i], pw[i], xr[i], r, mean);
      if (res)
        for (int64_t i = 0; i < d; ++i) dr[i] = op::residual_add(dr[i], res[t * d + i]);
    }
    // dw in blocks of kCols columns (four cache lines of a row), each column summed over the
    // rows in order, in a local copy the compiler keeps out of memory.
    constexpr int64_t kCols = 64;
#pragma omp parallel for schedule(static) if (parallel_elements(T * d))
    for (int64_t c0 = 0; c0 < d; c0 += kCols) {
      const int64_t w = std::min(kCols, d - c0);
      float acc[kCols];
      for (int64_t c = 0; c < w; ++c) acc[c] = pdw[c0 + c];
      for (int64_t t = 0; t < T; ++t) {
        const float *gr = pg + t * d + c0, *xr = px + t * d + c0;
        const float r = pr[t];
        for (int64_t c = 0; c < w; ++c) acc[c] += gr[c] * xr[c] * r;
      }
      for (int64_t c = 0; c < w; ++c) pdw[c0 + c] = acc[c];
    }
  }
  // cos and sin of RoPE's angles at positions [0, n) of one (rope, hd): [n, hd/2] each, kept
  // from call to call (every layer's forward and backward rotates at the same positions).
  struct RopeTable {
    Rope rope;
    int64_t hd = 0, n = 0;
    std::vector<float> cos, sin;
  };
  std::vector<RopeTable> rope_tables_;

  // The table of (rope, hd) covering positions up to max_pos: angle = p rope.inv_freq(i, hd) in
  // double, cos and sin rounded to float (the rotation's one definition of its angles).
  const RopeTable& rope_table(const Rope& rope, int64_t hd, int64_t max_pos) {
    RopeTable* t = nullptr;
    for (RopeTable& r : rope_tables_)
      if (r.hd == hd && !(r.rope < rope) && !(rope < r.rope)) t = &r;
    if (!t) {
      rope_tables_.push_back({rope, hd, 0, {}, {}});
      t = &rope_tables_.back();
    }
    if (max_pos < t->n) return *t;
    const int64_t half = hd / 2, n = std::max(max_pos + 1, 2 * t->n);
    std::vector<double> f(half);
    for (int64_t i = 0; i < half; ++i) f[i] = rope.inv_freq(i, hd);
    t->cos.resize(n * half);
    t->sin.resize(n * half);
    for (int64_t p = t->n; p < n; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(p) * f[i];
        t->cos[p * half + i] = float(std::cos(angle));
        t->sin[p * half + i] = float(std::sin(angle));
      }
    t->n = n;
    return *t;
  }

  // Rotate-half RoPE in place on the first `heads` heads (hd wide) of T rows of `stride`
  // floats, at positions pos[T] (each at least 0), by the angles of rope_table; the sine
  // negated for the inverse.
  void rotate(float* x, int64_t stride, int64_t T, int heads, int64_t hd, const int32_t* pos,
              const Rope& rope, bool inverse) {
    const int64_t half = hd / 2;
    int32_t max_pos = 0;
    for (int64_t t = 0; t < T; ++t) {
      check(pos[t] >= 0, "RoPE at a negative position ", pos[t]);
      max_pos = std::max(max_pos, pos[t]);
    }
    const RopeTable& table = rope_table(rope, hd, max_pos);
    const float sign = inverse ? -1.f : 1.f;
#pragma omp parallel for schedule(static) if (parallel_elements(T * heads * hd))
    for (int64_t t = 0; t < T; ++t) {
      const float* __restrict c = table.cos.data() + pos[t] * half;
      const float* __restrict s = table.sin.data() + pos[t] * half;
      for (int h = 0; h < heads; ++h) {
        float* __restrict x1 = x + t * stride + h * hd;
        float* __restrict x2 = x1 + half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) op::rope_rotate(x1[i], x2[i], c[i], sign * s[i]);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(std::max(1, threads));
}

}  // namespace tetra
