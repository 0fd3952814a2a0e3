// The CPU backend's matrix product, C = alpha op(A) op(B) + beta C, in fixed tiles of C: one
// thread computes a whole tile as one single-threaded product over the whole k. A BLAS's own
// threading (and Eigen's) splits the work by the thread count, and may so change the order in
// which an element's dot product is summed; tiles fixed by the shapes alone give every element
// the same sum at any thread count, so runs repeat bit for bit on any number of threads.
//
// The tile product is an sgemm of OpenBLAS's pthreads build set to one thread (where the build
// finds it, TETRA_OPENBLAS): on the model's products about 1.35 times the Eigen tiles it
// replaced, and 0.9 of one whole-matrix sgemm, on one core of a loaded machine. Debian's serial
// OpenBLAS is not an option: its buffers are not locked, and concurrent calls from the tiles'
// threads return wrong results. A build without OpenBLAS (-DTETRA_OPENBLAS=OFF, the GPU
// bundle's) uses Eigen's product for the tile.
//
// On one thread OpenBLAS computes the whole product in one call instead: it packs each panel
// of A and B once where the tiles pack them once per tile (about 13 % of a one-core step went
// to packing). The bits are the tiles': OpenBLAS blocks the sum over k by k alone and adds the
// blocks into C in order, so an element of C is summed in the same order whichever rectangle
// of C one call computes. Its small-matrix kernels (products of about 10^6 multiply-adds and
// fewer, which sum all of k at once) do not: the cut's tiles are above their size.
// test_cpu_threads holds this, comparing one thread with two and three at the smallest tiles
// the cut makes, k longer than a block. Eigen chooses its k blocks from m and n too, so an
// Eigen build keeps the tiles on one thread.
#include "backend/cpu/cpu_gemm.hpp"

#include <omp.h>

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

// How C [m, n] is cut: into a x b tiles of ceil(m / a) x ceil(n / b), from the shapes alone. One
// tile for a product too small to thread (cpu_parallel.hpp); otherwise at least kMinTiles, so
// that two threads share the work evenly, and tiles of at most kMaxTile a side, so that a large
// product has tiles for many threads. Among those cuts, the one that packs least: each tile's
// sgemm packs its [rows, k] panel of op(A) and its [k, cols] panel of op(B) afresh, a x b tiles
// a n k + b m k floats (a whole-matrix sgemm packs each about once), which on one core cost
// 256 x 256 tiles about 18 % of the whole-matrix rate, 512 x 512 tiles 9 %, 1024 x 1024 4 %.
constexpr int64_t kMaxTile = 1024, kMinTiles = 4;

struct Cut {
  int64_t a, b;  // row parts, column parts
};
Cut cut(int64_t m, int64_t n, int64_t k) {
  if (!parallel_macs(m * n * k)) return {1, 1};
  const int64_t a0 = (m + kMaxTile - 1) / kMaxTile, b0 = (n + kMaxTile - 1) / kMaxTile;
  Cut best{a0, b0};
  double best_cost = -1;
  for (int64_t a = a0; a <= std::min(m, a0 + kMinTiles); ++a)
    for (int64_t b = b0; b <= std::min(n, b0 + kMinTiles); ++b) {
      if (a * b < kMinTiles && (a < m || b < n)) continue;
      const double cost = double(a) * double(n) + double(b) * double(m);
      // The least packing; then the fewest tiles; then the fewest row parts.
      if (best_cost < 0 || cost < best_cost ||
          (cost == best_cost &&
           (a * b < best.a * best.b || (a * b == best.a * best.b && a < best.a)))) {
        best = {a, b};
        best_cost = cost;
      }
    }
  return best;
}

}  // namespace

void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef TETRA_HAVE_OPENBLAS
  // A leading dimension of 0 (k = 0) is refused by the BLAS although nothing is read: 1 then.
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, A, int(std::max<int64_t>(1, lda)), B,
              int(std::max<int64_t>(1, ldb)), beta, C, int(ldc));
#else
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using In = Eigen::Map<const RowMat, 0, Eigen::OuterStride<> >;
  Eigen::Map<RowMat, 0, Eigen::OuterStride<> > c(C, m, n, Eigen::OuterStride<>(ldc));
  // A as stored, [m, k] or (ta) [k, m]; B as stored, [k, n] or (tb) [n, k].
  const In a(A, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  const In b(B, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  if (beta == 0.f)
    c.setZero();
  else if (beta != 1.f)
    c *= beta;
  if (!ta && !tb)
    c.noalias() += alpha * (a * b);
  else if (!ta && tb)
    c.noalias() += alpha * (a * b.transpose());
  else if (ta && !tb)
    c.noalias() += alpha * (a.transpose() * b);
  else
    c.noalias() += alpha * (a.transpose() * b.transpose());
#endif
}

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
  if (g.m == 0 || g.n == 0) return;
  float* c = C.f32();
  const float *a = A.f32(), *b = B.f32();
  const int64_t lda = A.cols(), ldb = B.cols();
#ifdef TETRA_HAVE_OPENBLAS
  if (omp_get_max_threads() == 1)
    return gemm_serial(ta, tb, g.m, g.n, g.k, alpha, a, lda, b, ldb, beta, c, g.n);
#endif
  const Cut parts = cut(g.m, g.n, g.k);
  const int64_t rows = (g.m + parts.a - 1) / parts.a, cols = (g.n + parts.b - 1) / parts.b;
  const int64_t tm = (g.m + rows - 1) / rows, tn = (g.n + cols - 1) / cols;
  // Dynamic: a thread that the machine's load slows takes fewer tiles (which thread computes a
  // tile changes no bit of it).
#pragma omp parallel for collapse(2) schedule(dynamic) if (parallel_macs(g.m * g.n * g.k))
  for (int64_t i = 0; i < tm; ++i)
    for (int64_t j = 0; j < tn; ++j) {
      // Rows [r0, r0 + rn) and columns [c0, c0 + cn) of C: op(A)'s rows r0.. are A's rows
      // (A [m, k]) or A's columns (ta: A [k, m]), op(B)'s columns c0.. are B's columns (B [k, n])
      // or B's rows (tb: B [n, k]).
      const int64_t r0 = i * rows, rn = std::min(rows, g.m - r0);
      const int64_t c0 = j * cols, cn = std::min(cols, g.n - c0);
      gemm_serial(ta, tb, rn, cn, g.k, alpha, ta ? a + r0 : a + r0 * lda, lda,
                  tb ? b + c0 * ldb : b + c0, ldb, beta, c + r0 * g.n + c0, g.n);
    }
}

}  // namespace tetra
