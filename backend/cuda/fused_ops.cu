// Launchers of the native bf16 kernels (fused_ops.hpp): shape and dtype checks, grids, scratch
// from the stream-ordered pool. The kernels and their math are in fused_kernels.cuh.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <vector>

#include "backend/cuda/common.hpp"
#include "backend/cuda/fused_kernels.cuh"
#include "backend/cuda/fused_ops.hpp"
#include "backend/cuda/vector_io.hpp"
#include "backend/fusions.hpp"

namespace tetra::cuda {
namespace {

void same_dtype(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    check(t->dtype == (*ts.begin())->dtype, op, ": tensors of ", dtype_name((*ts.begin())->dtype),
          " and ", dtype_name(t->dtype));
}
unsigned warp_rows_grid(int64_t rows) {
  return unsigned((rows + kRowsPerWarpBlock - 1) / kRowsPerWarpBlock);
}

}  // namespace

void fill_any(cudaStream_t s, Tensor x, float value) {
  const int64_t n = x.numel();
  if (n == 0) return;
  by_dtype(x.dtype, "fill", [&](auto tag) {
    using T = decltype(tag);
    fill_t_kernel<T><<<grid_for(n, kThreads), kThreads, 0, s>>>(dev_as<T>(x), n, value);
  });
  TETRA_LAUNCH_CHECK("fill_t_kernel");
}

void add_any(cudaStream_t s, Tensor y, const Tensor& x) {
  check(y.numel() == x.numel(), "add ", x.shape_str(), " to ", y.shape_str());
  const int64_t n = y.numel();
  if (n == 0) return;
  by_dtype(y.dtype, "add", [&](auto ty) {
    by_dtype(x.dtype, "add", [&](auto tx) {
      using TY = decltype(ty);
      using TX = decltype(tx);
      add_t_kernel<TY, TX>
          <<<grid_for(n, kThreads), kThreads, 0, s>>>(dev_as<TY>(y), dev_as<TX>(x), n);
    });
  });
  TETRA_LAUNCH_CHECK("add_t_kernel");
}

void add3_any(cudaStream_t s, Tensor out, const Tensor& a, const Tensor& b) {
  check(out.numel() == a.numel() && a.numel() == b.numel(), "add3 shapes");
  same_dtype("add3", {&out, &a, &b});
  const int64_t n = out.numel();
  if (n == 0) return;
  by_dtype(out.dtype, "add3", [&](auto tag) {
    using T = decltype(tag);
    add3_t_kernel<T, T, T>
        <<<grid_for(n, kThreads), kThreads, 0, s>>>(dev_as<T>(out), dev_as<T>(a), dev_as<T>(b), n);
  });
  TETRA_LAUNCH_CHECK("add3_t_kernel");
}

void scale_any(cudaStream_t s, Tensor x, float alpha) {
  const int64_t n = x.numel();
  if (n == 0) return;
  by_dtype(x.dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_t_kernel<T><<<grid_for(n, kThreads), kThreads, 0, s>>>(dev_as<T>(x), n, alpha);
  });
  TETRA_LAUNCH_CHECK("scale_t_kernel");
}

void cp_zigzag(cudaStream_t s, Tensor dst, const Tensor& src, int cp, int64_t batch,
               bool to_global) {
  check(dst.bytes() == src.bytes() && cp > 0 && batch > 0 && src.numel() % (2 * cp * batch) == 0,
        "cp_zigzag ", src.shape_str(), " over ", cp, " ranks, batch ", batch);
  const size_t block = src.bytes() / size_t(2 * cp * batch);
  if (block == 0) return;
  const auto run = [&](auto word) {
    using E = decltype(word);
    const int64_t b = int64_t(block / sizeof(E)), n = 2 * cp * batch * b;
    cp_zigzag_kernel<E><<<grid_for(n, kThreads), kThreads, 0, s>>>(
        static_cast<E*>(dev(dst)), static_cast<const E*>(dev(src)), cp, batch, b, to_global);
  };
  if (block % 4 == 0)
    run(uint32_t{});
  else if (block % 2 == 0)
    run(uint16_t{});
  else
    run(uint8_t{});
  TETRA_LAUNCH_CHECK("cp_zigzag_kernel");
}

void sum_squares_many(cudaStream_t s, std::span<const Tensor> xs, double* out_dev) {
  // Launch sets of up to kMaxMultiTensors tensors of one dtype, in order.
  for (size_t i0 = 0; i0 < xs.size();) {
    const DType t = xs[i0].dtype;
    size_t i1 = i0;
    while (i1 < xs.size() && i1 - i0 < size_t(kMaxMultiTensors) && xs[i1].dtype == t) ++i1;
    by_dtype(t, "sum_squares", [&](auto tag) {
      using T = decltype(tag);
      MultiTensor<T> m{};
      m.count = int(i1 - i0);
      m.first[0] = 0;
      for (int j = 0; j < m.count; ++j) {
        const Tensor& x = xs[i0 + j];
        m.n[j] = x.numel();
        m.ptr[j] = m.n[j] ? dev_as<T>(x) : nullptr;
        m.first[j + 1] = m.first[j] + (m.n[j] + kSumChunk - 1) / kSumChunk;
      }
      const int64_t chunks = m.first[m.count];
      Scratch part(s, size_t(std::max<int64_t>(chunks, 1)) * sizeof(double));
      if (chunks > 0) {
        multi_sum_squares_partial_kernel<T>
            <<<unsigned(chunks), kThreads, 0, s>>>(part.as<double>(), m);
        TETRA_LAUNCH_CHECK("multi_sum_squares_partial_kernel");
      }
      multi_sum_partials_kernel<T>
          <<<unsigned(m.count), kThreads, 0, s>>>(out_dev + i0, part.as<double>(), m);
      TETRA_LAUNCH_CHECK("multi_sum_partials_kernel");
    });
    i0 = i1;
  }
}

void embedding_forward_any(cudaStream_t s, Tensor out, const Tensor& tokens, const Tensor& table,
                           int64_t vocab_start) {
  const int64_t T = out.rows(), d = out.cols(), V = table.rows();
  check(tokens.numel() == T && table.cols() == d, "embedding_forward ", table.shape_str(), " -> ",
        out.shape_str());
  same_dtype("embedding_forward", {&out, &table});
  if (T * d == 0) return;
  by_dtype(out.dtype, "embedding_forward", [&](auto tag) {
    using T_ = decltype(tag);
    embedding_forward_t_kernel<T_><<<grid_for(T * d, kThreads), kThreads, 0, s>>>(
        dev_as<T_>(out), i32(tokens), dev_as<T_>(table), T, d, V, vocab_start);
  });
  TETRA_LAUNCH_CHECK("embedding_forward_t_kernel");
}

void embedding_backward_sorted(cudaStream_t s, Tensor dtable, const Tensor& tokens,
                               const Tensor& dout, int64_t vocab_start) {
  const int64_t T = dout.rows(), d = dout.cols(), V = dtable.rows();
  check(tokens.numel() == T && dtable.cols() == d && dtable.dtype == DType::F32 && T <= INT32_MAX &&
            V < INT32_MAX,
        "embedding_backward ", dout.shape_str(), " -> ", dtable.shape_str());
  if (T == 0 || d == 0) return;
  // (row, t) pairs sorted by row; radix sort is stable, so t stays increasing within a row.
  Scratch keys(s, size_t(T) * 4), index(s, size_t(T) * 4), keys_sorted(s, size_t(T) * 4),
      index_sorted(s, size_t(T) * 4);
  embedding_keys_kernel<<<grid_for(T, kThreads), kThreads, 0, s>>>(
      keys.as<int32_t>(), index.as<int32_t>(), i32(tokens), T, V, vocab_start);
  TETRA_LAUNCH_CHECK("embedding_keys_kernel");
  int end_bit = 1;
  while ((int64_t(1) << end_bit) <= V) ++end_bit;  // keys in [0, V]
  size_t temp = 0;
  TETRA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp, keys.as<int32_t>(), keys_sorted.as<int32_t>(), index.as<int32_t>(),
      index_sorted.as<int32_t>(), int(T), 0, end_bit, s));
  Scratch work(s, std::max<size_t>(temp, 1));
  TETRA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      work.get(), temp, keys.as<int32_t>(), keys_sorted.as<int32_t>(), index.as<int32_t>(),
      index_sorted.as<int32_t>(), int(T), 0, end_bit, s));
  const bool spread = fused(Fusion::EmbeddingSpread);  // grid.y: column groups of 128
  check(!spread || (d + 127) / 128 <= 65535, "embedding_backward: ", d, " columns");
  by_dtype(dout.dtype, "embedding_backward", [&](auto tag) {
    using T_ = decltype(tag);
    const int32_t *key = keys_sorted.as<int32_t>(), *index = index_sorted.as<int32_t>();
    if (spread)
      embedding_backward_spread_kernel<T_>
          <<<dim3(unsigned(T), unsigned((d + 127) / 128)), 128, 0, s>>>(f32(dtable), key, index,
                                                                        dev_as<T_>(dout), T, d, V);
    else
      embedding_backward_runs_kernel<T_>
          <<<unsigned(T), 128, 0, s>>>(f32(dtable), key, index, dev_as<T_>(dout), T, d, V);
  });
  TETRA_LAUNCH_CHECK("embedding_backward kernel");
}

void rmsnorm_forward_any(cudaStream_t s, Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                         float eps) {
  const int64_t T = x.rows(), d = x.cols();
  check(y.numel() == T * d && rstd.numel() == T && w.numel() == d && rstd.dtype == DType::F32,
        "rmsnorm_forward ", x.shape_str());
  same_dtype("rmsnorm_forward", {&y, &x, &w});
  if (T == 0) return;
  by_dtype(x.dtype, "rmsnorm_forward", [&](auto tag) {
    using T_ = decltype(tag);
    rmsnorm_forward_t_kernel<T_><<<warp_rows_grid(T), 32 * kRowsPerWarpBlock, 0, s>>>(
        dev_as<T_>(y), f32(rstd), dev_as<T_>(x), dev_as<T_>(w), T, d, eps);
  });
  TETRA_LAUNCH_CHECK("rmsnorm_forward_t_kernel");
}

void rmsnorm_backward_any(cudaStream_t s, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                          const Tensor& w, const Tensor& rstd, const Tensor& residual) {
  const int64_t T = x.rows(), d = x.cols();
  check(dx.numel() == T * d && dy.numel() == T * d && dw.numel() == d && w.numel() == d &&
            rstd.numel() == T && dw.dtype == DType::F32 && rstd.dtype == DType::F32,
        "rmsnorm_backward ", x.shape_str());
  same_dtype("rmsnorm_backward", {&dx, &dy, &x, &w});
  if (residual.ptr) {
    check(residual.numel() == T * d && residual.ptr != dx.ptr,
          "rmsnorm_backward_residual: ", residual.shape_str(), " for dx ", dx.shape_str(),
          " (another tensor of its size)");
    same_dtype("rmsnorm_backward_residual", {&dx, &residual});
  }
  if (T == 0 || d == 0) return;
  const int64_t parts = (T + kNormPartialRows - 1) / kNormPartialRows;
  check(parts <= 65535, "rmsnorm_backward: ", T, " rows");
  Scratch partial(s, size_t(parts * d) * sizeof(float));
  by_dtype(x.dtype, "rmsnorm_backward", [&](auto tag) {
    using T_ = decltype(tag);
    rmsnorm_backward_dx_t_kernel<T_><<<warp_rows_grid(T), 32 * kRowsPerWarpBlock, 0, s>>>(
        dev_as<T_>(dx), dev_as<T_>(dy), dev_as<T_>(x), dev_as<T_>(w), f32(rstd), T, d,
        residual.ptr ? dev_as<T_>(residual) : nullptr);
    TETRA_LAUNCH_CHECK("rmsnorm_backward_dx_t_kernel");
    const dim3 grid(unsigned((d + kThreads - 1) / kThreads), unsigned(parts));
    rmsnorm_dw_partial_kernel<T_><<<grid, kThreads, 0, s>>>(partial.as<float>(), dev_as<T_>(dy),
                                                            dev_as<T_>(x), f32(rstd), T, d);
    TETRA_LAUNCH_CHECK("rmsnorm_dw_partial_kernel");
  });
  rmsnorm_dw_sum_kernel<<<grid_for(d, kThreads), kThreads, 0, s>>>(f32(dw), partial.as<float>(),
                                                                   parts, d);
  TETRA_LAUNCH_CHECK("rmsnorm_dw_sum_kernel");
}

size_t rope_table_bytes(int64_t hd) {
  return size_t(kRopeTablePositions) * size_t(hd / 2) * sizeof(float2);
}

void build_rope_table(cudaStream_t s, void* table, int64_t hd, const Rope& rope) {
  const int64_t n = int64_t(kRopeTablePositions) * (hd / 2);
  rope_table_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<float2*>(table),
                                                               kRopeTablePositions, hd, rope);
  TETRA_LAUNCH_CHECK("rope_table_kernel");
}

void rope_any(cudaStream_t s, Tensor x, int heads, int64_t hd, const Tensor& pos, const void* table,
              const Rope& rope, bool inverse) {
  const int64_t T = x.rows();
  check(heads > 0 && hd % 2 == 0 && heads * hd <= x.cols() && pos.numel() == T, "rope on ",
        x.shape_str(), " with ", heads, " heads of ", hd);
  if (T * hd == 0) return;
  by_dtype(x.dtype, "rope", [&](auto tag) {
    using T_ = decltype(tag);
    rope_t_kernel<T_><<<grid_for(T * hd / 2, kThreads), kThreads, 0, s>>>(
        dev_as<T_>(x), x.cols(), i32(pos), static_cast<const float2*>(table), T, heads, hd, rope,
        inverse ? -1.f : 1.f);
  });
  TETRA_LAUNCH_CHECK("rope_t_kernel");
}

namespace {
// Copies columns [col0, col0 + part.cols()) of the rows of `fused` into `part`, or back.
void columns(cudaStream_t s, const Tensor& part, const Tensor& fused, int64_t col0, bool back) {
  const int64_t T = part.rows(), w = part.cols();
  if (T * w == 0) return;
  by_dtype(part.dtype, "qkv columns", [&](auto tag) {
    using T_ = decltype(tag);
    copy_columns_kernel<T_><<<grid_for(T * w, kThreads), kThreads, 0, s>>>(
        dev_as<T_>(part), dev_as<T_>(fused), T, w, fused.cols(), col0, back);
  });
  TETRA_LAUNCH_CHECK("copy_columns_kernel");
}
void check_qkv(const char* op, const Tensor& qkv, const Tensor& q, const Tensor& k, const Tensor& v,
               int heads, int kv_heads) {
  const int64_t T = qkv.rows(), qw = q.cols(), kw = k.cols();
  check(heads > 0 && qw % heads == 0 && kw * heads == qw * kv_heads && qkv.cols() == qw + 2 * kw &&
            v.cols() == kw && q.rows() == T && k.rows() == T && v.rows() == T,
        op, " ", qkv.shape_str(), " <-> ", q.shape_str(), ", ", k.shape_str(), ", ", v.shape_str());
  same_dtype(op, {&qkv, &q, &k, &v});
}
}  // namespace

void rope_split_qkv_any(cudaStream_t s, Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads,
                        int kv_heads, const Tensor& pos, const void* table, const Rope& rope) {
  check_qkv("rope_split_qkv", qkv, q, k, v, heads, kv_heads);
  const int64_t qw = q.cols(), kw = k.cols(), hd = qw / heads;
  columns(s, q, qkv, 0, false);
  columns(s, k, qkv, qw, false);
  columns(s, v, qkv, qw + kw, false);
  rope_any(s, q, heads, hd, pos, table, rope, false);
  rope_any(s, k, kv_heads, hd, pos, table, rope, false);
}

void rope_merge_qkv_any(cudaStream_t s, Tensor dqkv, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, int heads, int kv_heads, const Tensor& pos,
                        const void* table, const Rope& rope) {
  check_qkv("rope_merge_qkv", dqkv, dq, dk, dv, heads, kv_heads);
  const int64_t qw = dq.cols(), kw = dk.cols(), hd = qw / heads;
  columns(s, dq, dqkv, 0, true);
  columns(s, dk, dqkv, qw, true);
  columns(s, dv, dqkv, qw + kw, true);
  rope_any(s, dqkv, heads + kv_heads, hd, pos, table, rope, true);
}

void swiglu_fused_forward_any(cudaStream_t s, Tensor h, const Tensor& gate_up) {
  const int64_t T = h.rows(), F = h.cols();
  check(gate_up.rows() == T && gate_up.cols() == 2 * F, "swiglu_fused_forward ",
        gate_up.shape_str(), " -> ", h.shape_str());
  same_dtype("swiglu_fused_forward", {&h, &gate_up});
  if (T * F == 0 || try_vec_swiglu_fused_forward(s, h, gate_up)) return;
  by_dtype(h.dtype, "swiglu_fused_forward", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* g = dev_as<T_>(gate_up);
    swiglu_t_kernel<T_>
        <<<grid_for(T * F, kThreads), kThreads, 0, s>>>(dev_as<T_>(h), g, g + F, T, F, 2 * F);
  });
  TETRA_LAUNCH_CHECK("swiglu_t_kernel");
}

void swiglu_fused_backward_any(cudaStream_t s, Tensor dgate_up, const Tensor& dh,
                               const Tensor& gate_up) {
  const int64_t T = dh.rows(), F = dh.cols();
  check(gate_up.rows() == T && gate_up.cols() == 2 * F && dgate_up.numel() == gate_up.numel(),
        "swiglu_fused_backward ", dh.shape_str(), " -> ", dgate_up.shape_str());
  same_dtype("swiglu_fused_backward", {&dgate_up, &dh, &gate_up});
  if (T * F == 0 || try_vec_swiglu_fused_backward(s, dgate_up, dh, gate_up)) return;
  by_dtype(dh.dtype, "swiglu_fused_backward", [&](auto tag) {
    using T_ = decltype(tag);
    T_* dg = dev_as<T_>(dgate_up);
    const T_* g = dev_as<T_>(gate_up);
    swiglu_backward_t_kernel<T_><<<grid_for(T * F, kThreads), kThreads, 0, s>>>(
        dg, dg + F, dev_as<T_>(dh), g, g + F, T, F, 2 * F);
  });
  TETRA_LAUNCH_CHECK("swiglu_backward_t_kernel");
}

void ce_row_max_any(cudaStream_t s, Tensor row_max, const Tensor& logits, int64_t valid) {
  const int64_t T = logits.rows(), V = logits.cols();
  check(row_max.numel() == T && row_max.dtype == DType::F32, "ce_row_max ", logits.shape_str());
  if (T == 0) return;
  by_dtype(logits.dtype, "ce_row_max", [&](auto tag) {
    using T_ = decltype(tag);
    ce_row_max_t_kernel<T_>
        <<<unsigned(T), kThreads, 0, s>>>(f32(row_max), dev_as<T_>(logits), V, valid);
  });
  TETRA_LAUNCH_CHECK("ce_row_max_t_kernel");
}

void ce_stats_any(cudaStream_t s, Tensor stats, const Tensor& logits, const Tensor& row_max,
                  const Tensor& targets, int64_t vocab_start, int64_t valid) {
  const int64_t T = logits.rows(), V = logits.cols();
  check(stats.numel() == 2 * T && row_max.numel() == T && targets.numel() == T &&
            stats.dtype == DType::F32,
        "ce_stats ", logits.shape_str());
  if (T == 0) return;
  by_dtype(logits.dtype, "ce_stats", [&](auto tag) {
    using T_ = decltype(tag);
    ce_stats_t_kernel<T_><<<unsigned(T), kThreads, 0, s>>>(
        f32(stats), dev_as<T_>(logits), f32(row_max), i32(targets), V, vocab_start, valid);
  });
  TETRA_LAUNCH_CHECK("ce_stats_t_kernel");
}

void ce_backward_any(cudaStream_t s, Tensor logits, const Tensor& row_max, const Tensor& stats,
                     const Tensor& targets, int64_t vocab_start, int64_t valid, float scale) {
  const int64_t T = logits.rows(), V = logits.cols();
  check(stats.numel() == 2 * T && row_max.numel() == T && targets.numel() == T, "ce_backward ",
        logits.shape_str());
  if (T * V == 0) return;
  by_dtype(logits.dtype, "ce_backward", [&](auto tag) {
    using T_ = decltype(tag);
    ce_backward_t_kernel<T_><<<grid_for(T * V, kThreads), kThreads, 0, s>>>(
        dev_as<T_>(logits), f32(row_max), f32(stats), i32(targets), T, V, vocab_start, valid,
        scale);
  });
  TETRA_LAUNCH_CHECK("ce_backward_t_kernel");
}

void adamw_segments(cudaStream_t s, Tensor param, const Tensor& grad, Tensor m, Tensor v,
                    const Backend::AdamW& h, std::span<const AdamWSegment> segments, Tensor copy) {
  check_adamw(param, grad, m, v, segments, copy);
  for (size_t at = 0; at < segments.size(); at += kAdamSegments) {
    AdamSegments t{};
    t.n = int(std::min<size_t>(kAdamSegments, segments.size() - at));
    for (int k = 0; k < t.n; ++k) {
      const AdamWSegment& g = segments[at + k];
      t.begin[k] = g.begin, t.end[k] = g.end;
      // adamw_coeffs' decay, per segment.
      t.decay[k] =
          op::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, g.weight_decay, h.grad_scale, h.step)
              .decay;
    }
    const int64_t first = t.begin[0], n = t.end[t.n - 1] - first;
    if (n == 0) continue;
    const op::AdamCoeffs c =
        op::adamw_coeffs(h.lr, h.beta1, h.beta2, h.eps, 0.f, h.grad_scale, h.step);
    if (try_vec_adamw(s, param, grad, m, v, copy, first, n, c, t)) continue;
    adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(
        f32(param), f32(grad), f32(m), f32(v), copy.ptr ? bf16(copy) : nullptr, first, n, c, t);
    TETRA_LAUNCH_CHECK("adamw_kernel");
  }
}

}  // namespace tetra::cuda
