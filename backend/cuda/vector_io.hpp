// 16-byte loads and stores in the memory-bound kernels (Fusion::VectorIo, backend/fusions.hpp).
// Each try_* queues the vector kernel (vector_io.cuh) of one op and returns true when the
// switch is on and the tensors allow it: fp32 or bf16 storage, every pointer aligned to its
// vectors, every row width a multiple of the vector's elements, something to do. Otherwise it
// returns false and queues nothing, and the op runs its scalar kernel. The caller has checked
// the shapes. The per-element math is the scalar kernel's, so both give the same bits
// (test_cuda_vector_io.cpp).
//
// Vectorized: fill, cast, add, add3, embedding_forward, swiglu_fused_forward/backward,
// ce_backward (bf16 logits: fp32 keeps kernels.cuh's own formula), AdamW. Left scalar: the
// reductions (RMSNorm's, the cross-entropy's row maxima and sums, sums of squares), whose sums
// a vector per thread would reorder, and so change in their bits; RoPE and the q|k|v column
// copies, which the rope_in_place fusion replaces.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/op_math.hpp"

namespace tetra::cuda {

struct AdamSegments;  // fused_kernels.cuh

bool try_vec_fill(cudaStream_t s, Tensor x, float value);
bool try_vec_cast(cudaStream_t s, Tensor dst, const Tensor& src);
bool try_vec_add(cudaStream_t s, Tensor y, const Tensor& x);
bool try_vec_add3(cudaStream_t s, Tensor out, const Tensor& a, const Tensor& b);
bool try_vec_embedding_forward(cudaStream_t s, Tensor out, const Tensor& tokens,
                               const Tensor& table, int64_t vocab_start);
bool try_vec_swiglu_fused_forward(cudaStream_t s, Tensor h, const Tensor& gate_up);
bool try_vec_swiglu_fused_backward(cudaStream_t s, Tensor dgate_up, const Tensor& dh,
                                   const Tensor& gate_up);
bool try_vec_ce_backward(cudaStream_t s, Tensor logits, const Tensor& row_max, const Tensor& stats,
                         const Tensor& targets, int64_t vocab_start, int64_t valid, float scale);
// One launch of adamw_segments over elements [first, first + n) of the shard (tensors as
// Backend::adamw takes them, copy empty or bf16), with adamw_kernel's coefficients.
bool try_vec_adamw(cudaStream_t s, Tensor param, const Tensor& grad, Tensor m, Tensor v,
                   Tensor copy, int64_t first, int64_t n, const op::AdamCoeffs& c,
                   const AdamSegments& segs);

}  // namespace tetra::cuda
