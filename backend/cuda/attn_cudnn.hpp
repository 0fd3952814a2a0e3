// Fused attention through cuDNN's SDPA (scaled dot-product attention) graphs, built with
// cudnn-frontend (header-only) and compiled as plain host C++: bf16 q, k, v, o and their
// gradients, fp32 statistics (the natural-log log-sum-exp, tetra's lse), fp32 compute, grouped
// KV heads, a causal mask top-left (CP 1: queries = keys) or bottom-right (a CP chunk of
// queries against its key prefix), and a deterministic backward. q, k, v are strided views of
// tetra's token-major buffers (strides {batch stride, hd, row stride, 1}: heads hd packed, or
// the fused qkv's width, AttnShape's layout), and so are dq, dk, dv: no transposes. A graph
// is built once per geometry and device in the process, shared by every backend, and kept (the
// first build compiles kernels through NVRTC).
// Built only where the frontend's headers were found (TETRA_HAVE_CUDNN).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"

namespace tetra::cuda {

struct SdpaGeometry {
  int64_t batch, heads, kv_heads, sq, sk, head_dim;
  int64_t q_batch_stride, k_batch_stride;  // elements between sequences of q (dq), k, v (dk, dv)
  bool bottom_right;                       // a CP chunk (else top-left causal)
  // Elements between tokens of q (dq) and of k, v (dk, dv); between sequences of o (do), whose
  // tokens are heads hd apart.
  int64_t q_row, kv_row, o_batch_stride;
  auto key() const {
    return std::tuple(batch, heads, kv_heads, sq, sk, head_dim, q_batch_stride, k_batch_stride,
                      bottom_right, q_row, kv_row, o_batch_stride);
  }
};

// The graphs an attention call of shape a asks for: one (Causal: all queries against all keys,
// top-left) or two (CpChunks: local query chunk g of C = sq/2 rows, at row offset g C of each
// sequence, against the key prefix [0, (c+1) C) of its global chunk c, bottom-right).
std::vector<SdpaGeometry> sdpa_geometries(const AttnShape& a);

// cudnn-frontend's validate() of the forward or backward graph for compute capability sm
// (90: Hopper) without a GPU: "" when accepted, else the frontend's reason.
std::string cudnn_sdpa_validate(const SdpaGeometry& g, bool backward, int sm);
// "cuDNN 9.19.0 (frontend 1.32.0)": the library run against, and the headers compiled with.
std::string cudnn_version();
// Graphs this process has built (accepted or refused): a second backend on a device builds none.
int64_t cudnn_graphs_built();

class CudnnSdpa {
 public:
  explicit CudnnSdpa(cudaStream_t s);
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Builds (once) the graph of g; false, with the reason in *why, when cuDNN refuses it.
  bool prepare(const SdpaGeometry& g, bool backward, std::string* why);
  int64_t workspace_bytes(const SdpaGeometry& g, bool backward);
  // Device pointers at the geometry's views; stats packed [B, H, Sq] fp32.
  void forward(const SdpaGeometry& g, const void* q, const void* k, const void* v, void* o,
               float* stats, void* workspace);
  void backward(const SdpaGeometry& g, const void* q, const void* k, const void* v, const void* o,
                const void* dout, const float* stats, void* dq, void* dk, void* dv,
                void* workspace);

 private:
  struct Shared;  // the device's cuDNN handle and graphs, for the whole process
  static Shared& shared_of(int device);
  cudaStream_t stream_;
  Shared* shared_ = nullptr;
};

}  // namespace tetra::cuda
