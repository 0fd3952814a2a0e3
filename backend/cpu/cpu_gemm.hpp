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

// C [m, n] = alpha op(A) op(B) + beta C on the calling thread alone, op(A) [m, k], op(B) [k, n];
// row-major with leading dimensions lda, ldb, ldc. beta = 0 writes C without reading it. The
// product of a matmul tile and of attention's blocks: OpenBLAS's sgemm, or Eigen's product in a
// build without OpenBLAS.
void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace tetra
