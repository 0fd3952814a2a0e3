#include "plan/layouts.hpp"

#include <cstdint>

#include "util/error.hpp"

namespace tetra::plan {

namespace {

// The divisors of n in increasing order, by trial division up to sqrt(n): at most 4096
// candidates for the largest --ranks, where trying every candidate up to n took minutes.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

}  // namespace

Layouts enumerate_layouts(int ranks, const RunSpec& base, const ModelConfig& cfg,
                          const LayoutChoices& choices) {
  check(ranks >= 1 && ranks <= kMaxPlanRanks, "--ranks must be from 1 to ", kMaxPlanRanks, " (got ",
        ranks, ")");
  Layouts out;
  auto consider = [&](RunSpec spec) {
    try {
      out.valid.push_back(make_setup(spec, cfg, ranks));
    } catch (const Error& e) {
      out.skipped.push_back({spec, e.what()});
    }
  };
  for (const int64_t tp : divisors(ranks))
    for (const int64_t cp : divisors(ranks / tp))
      for (const int64_t pp : divisors(ranks / (tp * cp))) {
        const int64_t dp = ranks / (tp * cp * pp);
        for (int zero : choices.zero)
          for (bool sp : choices.sp) {
            if (sp && tp == 1) continue;
            RunSpec spec = base;
            spec.layout = {int(tp), int(cp), int(pp), int(dp),
                           sp,      1,       "1f1b",  base.layout.pp_balance};
            spec.optimizer.zero = zero;
            if (pp == 1) {
              consider(spec);
              continue;
            }
            for (const std::string& schedule : choices.schedules) {
              spec.layout.schedule = schedule;
              // V: the interleaved schedule's choices; zb-v's two chunks per rank; else 1.
              const std::vector<int> vs = schedule == "interleaved" ? choices.vpp
                                          : schedule == "zb-v"      ? std::vector<int>{2}
                                                                    : std::vector<int>{1};
              for (int v : vs) {
                spec.layout.vpp = v;
                consider(spec);
              }
            }
          }
      }
  return out;
}

std::string layout_id(const RunSpec& spec) {
  const LayoutConfig& l = spec.layout;
  std::string id = "tp" + std::to_string(l.tp) + "-cp" + std::to_string(l.cp) + "-pp" +
                   std::to_string(l.pp) + "-dp" + std::to_string(l.dp) + "-z" +
                   std::to_string(spec.optimizer.zero);
  if (l.pp > 1) id += "-" + l.schedule;
  if (l.vpp > 1 && l.schedule == "interleaved") id += "-v" + std::to_string(l.vpp);
  if (l.sp) id += "-sp";
  return id;
}

std::string layout_title(const RunSpec& spec) {
  const LayoutConfig& l = spec.layout;
  std::string t = "TP " + std::to_string(l.tp) + " x CP " + std::to_string(l.cp) + " x PP " +
                  std::to_string(l.pp) + " x DP " + std::to_string(l.dp) + ", ZeRO-" +
                  std::to_string(spec.optimizer.zero);
  if (l.pp > 1)
    t += ", " + l.schedule +
         (l.vpp > 1 && l.schedule == "interleaved" ? " V " + std::to_string(l.vpp) : "");
  if (l.sp) t += ", SP";
  return t;
}

}  // namespace tetra::plan
