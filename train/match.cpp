#include "train/match.hpp"

#include <cmath>

#include "util/error.hpp"

namespace tetra {

Gaps match_bounds(const std::string& dtype) {
  // fp32: a layout sums the same terms in another order (TP's partial sums, CP's gathered K/V,
  // the micro-batch split), about 1e-7 relative per op. On an AVX2 machine at lr 3e-3 one rank
  // against itself with another micro-batch split ends 1.1e-5 apart in the final weights and
  // TP 2 x CP 2 x PP 2 x DP 2 3.6e-5, next to the 1e-4 bound; losses and step-0 gradients stay
  // far below 1e-5.
  if (dtype == "fp32") return {1e-5, 1e-5, 1e-4};
  // bf16 keeps 8 significant bits, so one rounding moves a value by up to 2^-9 = 2e-3
  // relative. A layout changes which partial sums get rounded (TP all-reduces bf16 partial
  // sums, CP reduce-scatters bf16 dK/dV), so its activations differ from one rank's by a few
  // roundings, as bf16's do from fp32's. Adam then spreads such differences into the
  // weights: in its first steps each weight moves by about lr whatever its gradient's size,
  // so where a gradient is near zero a rounding can flip the move. The bounds were twice the
  // largest gaps measured over the bf16 layout tests at lr 1e-2 (loss 1.4e-3, gradient
  // 1.8e-2, weights 5.7e-2), the size of bf16's own gaps from fp32 on one rank; at the layout
  // tests' lr of 3e-3 the largest are loss 4.4e-4, gradient 1.8e-2, weights 1.3e-2. A real
  // fault (a missing reduction, a wrong slice) moves the loss by orders of magnitude more.
  if (dtype == "bf16") return {3e-3, 4e-2, 1.2e-1};
  fail("no matching bounds for dtype '", dtype, "' (fp32 or bf16)");
}

double loss_gap(double ref, double run) {
  return std::abs(run - ref) / std::abs(ref);
}

double largest_loss_gap(const std::vector<double>& ref, const std::vector<double>& run) {
  double worst = 0;
  for (size_t s = 0; s < ref.size() && s < run.size(); ++s) {
    const double g = loss_gap(ref[s], run[s]);
    if (!(g <= worst)) worst = g;  // a NaN gap stays, and matches no bound
  }
  return worst;
}

}  // namespace tetra
