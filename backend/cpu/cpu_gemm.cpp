// The CPU backend's matrix product, C = alpha op(A) op(B) + beta C, in fixed tiles of C: one
// thread computes a whole tile as one single-threaded product over the whole k. A BLAS's own
// threading (and Eigen's) splits the work by the thread count, and may so change the order in
// which an element's dot product is summed; tiles fixed by the shapes alone give every element
// the same sum at any thread count, so runs repeat bit for bit on any number of threads.
//
// The tile product is an sgemm of OpenBLAS's pthreads build set to one thread (the build's
// default, TETRA_OPENBLAS): about three times Eigen's own product on one core. Debian's serial
// OpenBLAS is not an option: its buffers are not locked, and concurrent calls from the tiles'
// threads return wrong results. A build without OpenBLAS (-DTETRA_OPENBLAS=OFF, the GPU
// bundle's) uses Eigen's product for the tile.
#include "backend/cpu/cpu_gemm.hpp"

#include <algorithm>
#include <climits>

#include "backend/cpu/cpu_parallel.hpp"

#ifdef TETRA_HAVE_OPENBLAS
#include <cblas.h>
#else
#include <Eigen/Dense>
#endif

namespace tetra {
namespace {

// Tiles of C: large enough that a tile's product runs near the BLAS's full speed (it packs a
// [k, kTileCols] panel of op(B) per tile), small enough that the model's products have a few
// tiles per thread.
constexpr int64_t kTileRows = 256, kTileCols = 256;

// One tile: rows [r0, r0 + rn) and columns [c0, c0 + cn) of C; A, B, C row-major with leading
// dimensions lda, ldb, ldc (their column counts).
void tile_product(float* C, int64_t ldc, const float* A, int64_t lda, bool ta, const float* B,
                  int64_t ldb, bool tb, int64_t r0, int64_t rn, int64_t c0, int64_t cn, int64_t k,
                  float alpha, float beta) {
  // op(A)'s rows r0.. are A's rows r0.. (A [m, k]) or A's columns r0.. (ta: A [k, m]);
  // op(B)'s columns c0.. are B's columns c0.. (B [k, n]) or B's rows c0.. (tb: B [n, k]).
  const float* a = ta ? A + r0 : A + r0 * lda;
  const float* b = tb ? B + c0 * ldb : B + c0;
  float* c = C + r0 * ldc + c0;
#ifdef TETRA_HAVE_OPENBLAS
  // beta = 0 overwrites C without reading it, as the contract says (NaN in C does not survive).
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(rn), int(cn), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
#else
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using In = Eigen::Map<const RowMat, 0, Eigen::OuterStride<> >;
  Eigen::Map<RowMat, 0, Eigen::OuterStride<> > ct(c, rn, cn, Eigen::OuterStride<>(ldc));
  // op(A)'s rows as an [rn, k] or (ta) [k, rn] block, op(B)'s columns as [k, cn] or (tb) [cn, k].
  const In ab(a, ta ? k : rn, ta ? rn : k, Eigen::OuterStride<>(lda));
  const In bb(b, tb ? cn : k, tb ? k : cn, Eigen::OuterStride<>(ldb));
  if (beta == 0.f)
    ct.setZero();
  else if (beta != 1.f)
    ct *= beta;
  if (!ta && !tb)
    ct.noalias() += alpha * (ab * bb);
  else if (!ta && tb)
    ct.noalias() += alpha * (ab * bb.transpose());
  else if (ta && !tb)
    ct.noalias() += alpha * (ab.transpose() * bb);
  else
    ct.noalias() += alpha * (ab.transpose() * bb.transpose());
#endif
}

}  // namespace

void cpu_gemm_init() {
#ifdef TETRA_HAVE_OPENBLAS
  // openblas_get_parallel: 0 for the serial build, 1 for pthreads, 2 for OpenMP (whose thread
  // count follows OpenMP's, not openblas_set_num_threads).
  check(openblas_get_parallel() == 1, "the OpenBLAS loaded (", openblas_get_config(),
        ") is not its pthreads build, which tetra was built against; is LD_LIBRARY_PATH naming "
        "another?");
  openblas_set_num_threads(1);
#endif
}

void cpu_matmul(Tensor C, const Tensor& A, bool ta, const Tensor& B, bool tb, float alpha,
                float beta) {
  const GemmDims g = gemm_dims(C, A, ta, B, tb);
  // The BLAS takes int dimensions.
  check(std::max({g.m, g.n, g.k, A.cols(), B.cols()}) <= INT_MAX, "matmul ", A.shape_str(), " x ",
        B.shape_str(), ": a dimension over ", INT_MAX);
  const int64_t tm = (g.m + kTileRows - 1) / kTileRows, tn = (g.n + kTileCols - 1) / kTileCols;
  float* c = C.f32();
  const float *a = A.f32(), *b = B.f32();
  // Dynamic: a thread that the machine's load slows takes fewer tiles (which thread computes a
  // tile changes no bit of it).
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel_macs(g.m * g.n * g.k))
  for (int64_t i = 0; i < tm; ++i)
    for (int64_t j = 0; j < tn; ++j)
      tile_product(c, g.n, a, A.cols(), ta, b, B.cols(), tb, i * kTileRows,
                   std::min(kTileRows, g.m - i * kTileRows), j * kTileCols,
                   std::min(kTileCols, g.n - j * kTileCols), g.k, alpha, beta);
}

}  // namespace tetra
