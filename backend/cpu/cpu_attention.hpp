// Attention on the CPU backend (backend/backend.hpp has the contract); fp32 host tensors.
#pragma once
#include "backend/backend.hpp"

namespace tetra {

// Query rows per block: each thread's scratch is one [block, Sk] fp32 score matrix forward and
// two backward (the memory model counts them: plan::cpu_attention_scratch).
constexpr int64_t kAttentionBlock = 64;

void cpu_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttnPositions& pos, const AttnShape& s);
void cpu_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                            const AttnPositions& pos, const AttnShape& s);

}  // namespace tetra
