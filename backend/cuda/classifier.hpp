// The fused classifier on the GPU (Backend::ce_fused, TP 1): one kernel over logits [T, V] of
// fp32 or bf16 storage.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/tensor.hpp"

namespace tetra::cuda {

// row_max [T], stats [T, 2] fp32; targets [T] i32 index the columns; logits become
// scale (softmax - onehot(target)) in place, 0 from column `valid` on.
void ce_fused_any(cudaStream_t s, Tensor logits, Tensor row_max, Tensor stats,
                  const Tensor& targets, int64_t valid, float scale);

}  // namespace tetra::cuda
