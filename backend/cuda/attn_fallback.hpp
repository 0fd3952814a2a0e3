// Attention by batched cuBLAS GEMMs and a masked-softmax kernel, for any mask (by positions and
// documents, backend/attn_mask.hpp)
// and either dtype: bf16 tensors are widened to fp32 scratch, computed in fp32 without TF32 and
// rounded once, as the CPU's mixed-precision reference computes them. The score matrix
// [H, Sq, Sk] of one sequence at a time sits in memory: O(H Sq Sk) scratch, tensor-free
// fp32 FMA GEMMs, deterministic (dK, dV summed over a KV head's query heads in head order).
// The native path's fallback where cuDNN is absent or refuses a geometry, and on the device an
// independent check of cuDNN.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/backend.hpp"

namespace tetra::cuda {

void gemm_attention_forward(cudaStream_t s, cublasHandle_t blas, Tensor out, Tensor lse,
                            const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttnPositions& pos, const AttnShape& a);
void gemm_attention_backward(cudaStream_t s, cublasHandle_t blas, Tensor dq, Tensor dk, Tensor dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const AttnPositions& pos,
                             const AttnShape& a);

}  // namespace tetra::cuda
