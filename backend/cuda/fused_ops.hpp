// The launchers of the CUDA backend's native bf16 kernels (backend/cuda/fused_kernels.cuh):
// each takes tensors of fp32 or bf16 storage, checks shapes and dtypes, and queues its kernels
// on the stream. The CUDA backend calls these for bf16 tensors and for the ops that have no
// fp32 kernel of their own (kernels.cuh keeps today's fp32 path).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend/backend.hpp"

namespace tetra::cuda {

void fill_any(cudaStream_t s, Tensor x, float value);
void add_any(cudaStream_t s, Tensor y, const Tensor& x);
void add3_any(cudaStream_t s, Tensor out, const Tensor& a, const Tensor& b);
void scale_any(cudaStream_t s, Tensor x, float alpha);
void cp_zigzag(cudaStream_t s, Tensor dst, const Tensor& src, int cp, int64_t batch,
               bool to_global);
// out[i] = sum of squares of xs[i] (fp32 or bf16), into device memory out_dev [xs.size()]
// (doubles): no host wait.
void sum_squares_many(cudaStream_t s, std::span<const Tensor> xs, double* out_dev);

void embedding_forward_any(cudaStream_t s, Tensor out, const Tensor& tokens, const Tensor& table,
                           int64_t vocab_start);
// dtable fp32, dout fp32 or bf16: a stable sort of the tokens, then a block per run of equal
// tokens adding its gradients in token order (under embedding_spread a block per run and group
// of 128 columns).
void embedding_backward_sorted(cudaStream_t s, Tensor dtable, const Tensor& tokens,
                               const Tensor& dout, int64_t vocab_start);

void rmsnorm_forward_any(cudaStream_t s, Tensor y, Tensor rstd, const Tensor& x, const Tensor& w,
                         float eps);
// residual: when given, added into dx in the same pass (Backend::rmsnorm_backward_residual).
void rmsnorm_backward_any(cudaStream_t s, Tensor dx, Tensor dw, const Tensor& dy, const Tensor& x,
                          const Tensor& w, const Tensor& rstd, const Tensor& residual = {});

// The cos/sin table [kRopeTablePositions, hd/2] (float2) for one (rope, hd), built on the
// stream into `table` (device memory of that size, from rope_table_bytes).
size_t rope_table_bytes(int64_t hd);
void build_rope_table(cudaStream_t s, void* table, int64_t hd, const Rope& rope);
// Rotates the first `heads` heads of each row of x (any width) in place.
void rope_any(cudaStream_t s, Tensor x, int heads, int64_t hd, const Tensor& pos, const void* table,
              const Rope& rope, bool inverse);
void rope_split_qkv_any(cudaStream_t s, Tensor q, Tensor k, Tensor v, const Tensor& qkv, int heads,
                        int kv_heads, const Tensor& pos, const void* table, const Rope& rope);
void rope_merge_qkv_any(cudaStream_t s, Tensor dqkv, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, int heads, int kv_heads, const Tensor& pos,
                        const void* table, const Rope& rope);

// Gate and up fused as gate_up [T, 2F] (columns gate | up).
void swiglu_fused_forward_any(cudaStream_t s, Tensor h, const Tensor& gate_up);
void swiglu_fused_backward_any(cudaStream_t s, Tensor dgate_up, const Tensor& dh,
                               const Tensor& gate_up);

void ce_row_max_any(cudaStream_t s, Tensor row_max, const Tensor& logits, int64_t valid);
void ce_stats_any(cudaStream_t s, Tensor stats, const Tensor& logits, const Tensor& row_max,
                  const Tensor& targets, int64_t vocab_start, int64_t valid);
void ce_backward_any(cudaStream_t s, Tensor logits, const Tensor& row_max, const Tensor& stats,
                     const Tensor& targets, int64_t vocab_start, int64_t valid, float scale);

// Backend::adamw: fp32 param, grad, m, v; copy empty or bf16 of param's size; one launch per
// kAdamSegments segments (one per unit: a block has 9).
void adamw_segments(cudaStream_t s, Tensor param, const Tensor& grad, Tensor m, Tensor v,
                    const Backend::AdamW& h, std::span<const AdamWSegment> segments, Tensor copy);

}  // namespace tetra::cuda
