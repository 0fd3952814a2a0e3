#include "backend/cuda/gemm_lt.hpp"

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/cuda/common.hpp"

namespace tetra::cuda {
namespace {

void check_lt(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail("cuBLASLt error in ", call, ": ", cublasGetStatusString(st));
}
#define LT_CHECK(call) check_lt((call), #call)

// The largest power of two up to 256 that divides the address: what the heuristic may assume.
int alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % uintptr_t(align) != 0) align /= 2;
  return align;
}

cudaDataType_t cuda_type(DType t) {
  check(t == DType::BF16 || t == DType::F32, "cuBLASLt matmul of ", dtype_name(t));
  return t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

}  // namespace

LtGemm::LtGemm(cudaStream_t s) : stream_(s) {
  LT_CHECK(cublasLtCreate(&lt_));
  TETRA_CUDA_CHECK(cudaMallocAsync(&workspace_, kWorkspace, s));
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (workspace_) cudaFreeAsync(workspace_, stream_);
  if (lt_) cublasLtDestroy(lt_);
}

const LtGemm::Plan& LtGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const auto [m, n, k, ta, tb, out, accumulate, align_a, align_b, align_c, align_d] = key;
  Plan p;
  LT_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLAS's first operand is our B, its second our A (the column-major swap).
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                          sizeof(op_first)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                          sizeof(op_second)));
  // Column-major (rows, cols, ld) of the stored matrices: our B is [k, n] (or [n, k] when tb),
  // seen column-major as [n, k] ld n (or [k, n] ld k); likewise A; D [m, n] is [n, m] ld n.
  const uint64_t b_rows = tb ? k : n, b_cols = tb ? n : k;
  const uint64_t a_rows = ta ? m : k, a_cols = ta ? k : m;
  LT_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, b_rows, b_cols, b_rows));
  LT_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, a_rows, a_cols, a_rows));
  LT_CHECK(cublasLtMatrixLayoutCreate(&p.c, cudaDataType_t(out), n, m, n));
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kWorkspace;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof(ws)));
  // The real alignments: the defaults (256 bytes) would let the heuristic pick an algorithm that
  // faults on a view into a unit's flat buffer.
  const uint32_t al[4] = {uint32_t(align_b), uint32_t(align_a), uint32_t(align_c),
                          uint32_t(align_d)};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  LT_CHECK(st);
  check(found > 0, "cuBLASLt has no algorithm for a bf16 GEMM [", m, ", ", k, "] x [", k, ", ", n,
        "] (alignments ", align_a, ", ", align_b, ", ", align_c, ", ", align_d, " bytes)");
  (void)accumulate;  // beta is not part of the query, but a plan's users agree on it
  p.algo = res.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::matmul(Tensor D, const Tensor& A, bool ta, const Tensor& B, bool tb, const Tensor& C,
                    float alpha, float beta) {
  const GemmDims g = gemm_dims(D, A, ta, B, tb);
  check(A.dtype == DType::BF16 && B.dtype == DType::BF16 && C.dtype == D.dtype &&
            C.numel() == D.numel(),
        "cuBLASLt matmul: A ", dtype_name(A.dtype), ", B ", dtype_name(B.dtype), ", C ",
        dtype_name(C.dtype), ", D ", dtype_name(D.dtype));
  if (g.m == 0 || g.n == 0) return;
  const void *a = dev(A), *b = dev(B), *c = dev(C);
  void* d = dev(D);
  const Key key{
      g.m,         g.n,          g.k,          ta,           tb,          int(cuda_type(D.dtype)),
      beta != 0.f, alignment(a), alignment(b), alignment(c), alignment(d)};
  const Plan& p = plan(key);
  LT_CHECK(cublasLtMatmul(lt_, p.op, &alpha, b, p.a, a, p.b, &beta, c, p.c, d, p.c, &p.algo,
                          workspace_, kWorkspace, stream_));
}

}  // namespace tetra::cuda
