// When a parallel layout "matches one rank": the bounds every layout is held to against a
// single rank training the same model on the same batch. The layout tests (tests/mpi/) hold
// their per-step losses, step-0 gradients and final weights to them; `tetra sweep` holds each
// layout's per-step losses to them. One definition, so that the two cannot drift apart.
#pragma once
#include <string>
#include <vector>

namespace tetra {

// How far a run is from the reference, or how far it may be: the largest per-step relative
// loss gap; the largest step-0 gradient gap over each tensor's largest magnitude; the largest
// final-weight gap in norm over the tensor's norm.
struct Gaps {
  double loss = 0, grad = 0, weight = 0;
};

// The bounds for a run computing in `dtype` (fp32 or bf16; the reasons are in match.cpp).
Gaps match_bounds(const std::string& dtype);

// |run - ref| / |ref|.
double loss_gap(double ref, double run);

// The largest loss_gap over the steps both ran (0 when none); steps of different counts are
// for the caller to refuse.
double largest_loss_gap(const std::vector<double>& ref, const std::vector<double>& run);

}  // namespace tetra
