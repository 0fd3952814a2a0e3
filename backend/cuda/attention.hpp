// Attention on bf16 tensors for the CUDA backend's native path: cuDNN SDPA where the build has it
// and the mask hint and geometry allow (Causal: one call; CpChunks: each local query chunk
// against its key prefix, bottom-right; no documents), else the GEMM fallback
// (attn_fallback.hpp), which takes any mask by positions and documents. TETRA_ATTENTION=fallback in
// the environment forces the fallback (the on-device cross-check and the benchmark's comparison).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "backend/backend.hpp"

namespace tetra::cuda {

class CudnnSdpa;

class Attention {
 public:
  Attention(cudaStream_t s, cublasHandle_t blas);
  ~Attention();
  // Both passes: "cudnn sdpa (cuDNN 9.19.0 (frontend 1.32.0)), forward and backward" where
  // cuDNN takes the forward and the backward, else "forward <pass>; backward <pass>" with each
  // pass "cudnn sdpa (...)" or "cuda fallback (batched GEMMs): <why>" (a cuDNN may accept the
  // forward's graph and refuse the backward's; the fallback backward costs about half the MFU).
  std::string path(const AttnShape& a) const;
  void forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttnPositions& pos, const AttnShape& a);
  void backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                const AttnPositions& pos, const AttnShape& a);

 private:
  // Why cuDNN does not take this pass ("" when it does), and the pass's path as said above.
  std::string refusal(const AttnShape& a, bool backward) const;
  std::string path(const AttnShape& a, bool backward) const;

  cudaStream_t stream_;
  cublasHandle_t blas_;
  bool forced_fallback_ = false;
  std::string unavailable_;           // why cuDNN did not start
  std::unique_ptr<CudnnSdpa> cudnn_;  // null without cuDNN in the build
};

}  // namespace tetra::cuda
