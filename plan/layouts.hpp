// Every layout of N ranks that tetra train would accept: each TP x CP x PP x DP = N, crossed
// with the ZeRO stages, pipeline schedules, virtual stages and SP settings asked for. A layout
// is valid exactly when make_setup (the trainer's own rank_work and make_units) accepts it,
// so the rules are tetra's, in one place; the others are kept with the reason it gave.
#pragma once
#include <string>
#include <vector>

#include "plan/setup.hpp"

namespace tetra::plan {

// What to cross the factorizations of N with. A schedule and V matter only with PP > 1 (a
// layout without a pipeline runs one, 1f1b), V only under interleaved, SP only with TP > 1.
struct LayoutChoices {
  std::vector<int> zero = {1};
  std::vector<std::string> schedules = {"1f1b"};
  std::vector<int> vpp = {1};
  std::vector<bool> sp = {false};
};

struct Skipped {
  RunSpec spec;
  std::string reason;  // make_setup's refusal
};

struct Layouts {
  std::vector<Setup> valid;  // in enumeration order: TP, then CP, PP and DP, then the choices
  std::vector<Skipped> skipped;
};

// `base` gives the batch, the optimizer (but its ZeRO stage) and the device.
Layouts enumerate_layouts(int ranks, const RunSpec& base, const ModelConfig& cfg,
                          const LayoutChoices& choices);

// A short name that tells layouts apart, for files and tables: "tp2-cp1-pp2-dp1-z1-1f1b",
// with "-v2" for V above 1 and "-sp" under SP.
std::string layout_id(const RunSpec& spec);
// The same for people: "TP 2 x CP 1 x PP 2 x DP 1, ZeRO-1, 1f1b".
std::string layout_title(const RunSpec& spec);

}  // namespace tetra::plan
