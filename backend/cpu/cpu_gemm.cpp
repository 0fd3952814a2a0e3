// The CPU backend's matrix product, C = alpha op(A) op(B) + beta C, in fixed tiles of C (bands
// of its rows): one thread computes a whole tile as one single-threaded product over the whole k. A
// BLAS's own threading (and Eigen's) splits the work by the thread count, and may so change the
// order in which an element's dot product is summed; tiles fixed by the shapes alone give every
// element the same sum at any thread count, so runs repeat bit for bit on any number of threads.
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
// to packing). The tiles are bands of whole rows of C, each a multiple of kRowQuantum rows but
// the last, because that is where a band's bits are the whole product's on every kernel
// measured. OpenBLAS blocks an element's sum over k by k alone and adds the blocks in order, but
// its micro-kernels sum an element in an order that can depend on where the element sits in
// the kernel's block of C: with the Haswell kernel, which Zen runs too, C's rows (the columns of
// its column-major C) go 12 at a time, a band that starts off a multiple of 12 gets other bits,
// and so does almost any cut of C's columns (how it blocks them depends on their count). With
// SkylakeX's kernel any rectangle gave the whole product's bits. Its small-matrix kernels (products
// of about 10^6 multiply-adds and fewer, which sum all of k at once) differ too: the cut's tiles
// are above their size. test_cpu_threads holds this, comparing one thread with two and three at
// the smallest bands the cut makes, k longer than a block. Eigen chooses its k blocks from m and
// n too, so an Eigen build keeps the tiles on one thread.
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

// How C [m, n] is cut, from the shapes alone: into `count` bands of whole rows, band i from
// row start(i) to start(i + 1), each starting on a multiple of kRowQuantum (48: a multiple of
// the 12 rows of the Haswell kernel's blocks, and of 16 and 24), as equal as that allows, the
// last one taking the rows left over. One band for a product too small to thread
// (cpu_parallel.hpp); otherwise at least kMinBands, so that two threads share the work evenly,
// and bands of at most about kMaxBandRows rows, so that a large product has bands for many
// threads; but no band under kMinBandMacs multiply-adds, where OpenBLAS's small-matrix kernels
// would take it. Each band's sgemm packs all of op(B), [k, n], afresh, where one whole-matrix
// sgemm packs it once.
constexpr int64_t kMaxBandRows = 1024, kMinBands = 4, kRowQuantum = 48;
constexpr int64_t kMinBandMacs = int64_t(1) << 20;

struct Bands {
  int64_t m, quanta, count;  // rows, whole quanta of rows in them, bands
  int64_t start(int64_t i) const { return i == count ? m : quanta * i / count * kRowQuantum; }
};
Bands bands_of(int64_t m, int64_t n, int64_t k) {
  const int64_t quanta = m / kRowQuantum;
  if (!parallel_macs(m * n * k) || quanta < 2) return {m, quanta, 1};
  int64_t count = std::min(quanta, std::max(kMinBands, (m + kMaxBandRows - 1) / kMaxBandRows));
  while (count > 1 && quanta / count * kRowQuantum * n * k < kMinBandMacs) --count;
  return {m, quanta, count};
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
  const Bands bands = bands_of(g.m, g.n, g.k);
  // Dynamic: a thread that the machine's load slows takes fewer bands (which thread computes a
  // band changes no bit of it).
#pragma omp parallel for schedule(dynamic) if (bands.count > 1)
  for (int64_t i = 0; i < bands.count; ++i) {
    // Rows [r0, r1) of C: op(A)'s rows r0.. are A's rows (A [m, k]) or A's columns
    // (ta: A [k, m]).
    const int64_t r0 = bands.start(i), r1 = bands.start(i + 1);
    gemm_serial(ta, tb, r1 - r0, g.n, g.k, alpha, ta ? a + r0 : a + r0 * lda, lda, b, ldb, beta,
                c + r0 * g.n, g.n);
  }
}

}  // namespace tetra
