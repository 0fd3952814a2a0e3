// The CPU backend's matrix product (backend/backend.hpp has the contract); fp32 host tensors.
#pragma once
#include "backend/backend.hpp"

namespace tetra {

// Once per backend, before any product: sets the BLAS to one thread per call (the backend
// threads over tiles itself) and checks that its build may be called from several threads.
void cpu_gemm_init();

// C = alpha op(A) op(B) + beta C.
void cpu_matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
                float beta);

}  // namespace tetra
