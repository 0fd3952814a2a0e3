// Attention on fp32 tensors: one block per query row and head for the forward and dQ, one per
// key row and KV head for dK and dV (summing the group's query heads in order): no atomics.
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.hpp"

namespace tetra::cuda {

void fp32_attention_forward(cudaStream_t stream, Tensor out, Tensor lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, const AttnPositions& pos,
                            const AttnShape& s);
void fp32_attention_backward(cudaStream_t stream, Tensor dq, Tensor dk, Tensor dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, const AttnPositions& pos,
                             const AttnShape& s);

}  // namespace tetra::cuda
