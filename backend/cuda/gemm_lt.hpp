// bf16 GEMMs through cuBLASLt: bf16 A and B, fp32 accumulation (CUBLAS_COMPUTE_32F), D in bf16
// (activations) or fp32 (weight gradients, accumulated with beta = 1). Row-major as
// Backend::matmul: D [m, n] = alpha op(A) op(B) + beta C, through the column-major swap
// D^T = op(B)^T op(A)^T. One plan (descriptors, layouts and the heuristic's algorithm) per key
// (shape, transposes, types, beta != 0, each pointer's alignment), kept for the backend's
// life: the same algorithm every call, so one stream gives the same bits every run. One
// workspace, allocated once.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "backend/tensor.hpp"

namespace tetra::cuda {

class LtGemm {
 public:
  explicit LtGemm(cudaStream_t s);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // D = alpha op(A) op(B) + beta C; A, B bf16; C and D of one dtype (bf16 or fp32), C may be D.
  // beta = 0 does not read C.
  void matmul(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb, const Tensor& C,
              float alpha, float beta);
  static constexpr size_t kWorkspace = size_t(32) << 20;  // Hopper wants 32 MiB (llm.c)

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // m, n, k, ta, tb, D dtype, beta != 0, alignments of A, B, C, D.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, bool, int, int, int, int>;
  const Plan& plan(const Key& key);

  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan> plans_;
};

}  // namespace tetra::cuda
