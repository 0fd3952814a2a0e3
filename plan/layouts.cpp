#include "plan/layouts.hpp"

#include "util/error.hpp"

namespace tetra::plan {

Layouts enumerate_layouts(int ranks, const RunSpec& base, const ModelConfig& cfg,
                          const LayoutChoices& choices) {
  check(ranks >= 1, "--ranks must be at least 1 (got ", ranks, ")");
  Layouts out;
  auto consider = [&](RunSpec spec) {
    try {
      out.valid.push_back(make_setup(spec, cfg, ranks));
    } catch (const Error& e) {
      out.skipped.push_back({spec, e.what()});
    }
  };
  for (int tp = 1; tp <= ranks; ++tp) {
    if (ranks % tp) continue;
    for (int cp = 1; cp <= ranks / tp; ++cp) {
      if ((ranks / tp) % cp) continue;
      for (int pp = 1; pp <= ranks / (tp * cp); ++pp) {
        if ((ranks / (tp * cp)) % pp) continue;
        const int dp = ranks / (tp * cp * pp);
        for (int zero : choices.zero)
          for (bool sp : choices.sp) {
            if (sp && tp == 1) continue;
            RunSpec spec = base;
            spec.layout = {tp, cp, pp, dp, sp, 1, "1f1b", base.layout.pp_balance};
            spec.optimizer.zero = zero;
            if (pp == 1) {
              consider(spec);
              continue;
            }
            for (const std::string& schedule : choices.schedules) {
              spec.layout.schedule = schedule;
              for (int v : schedule == "interleaved" ? choices.vpp : std::vector<int>{1}) {
                spec.layout.vpp = v;
                consider(spec);
              }
            }
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
  if (l.vpp > 1) id += "-v" + std::to_string(l.vpp);
  if (l.sp) id += "-sp";
  return id;
}

std::string layout_title(const RunSpec& spec) {
  const LayoutConfig& l = spec.layout;
  std::string t = "TP " + std::to_string(l.tp) + " x CP " + std::to_string(l.cp) + " x PP " +
                  std::to_string(l.pp) + " x DP " + std::to_string(l.dp) + ", ZeRO-" +
                  std::to_string(spec.optimizer.zero);
  if (l.pp > 1) t += ", " + l.schedule + (l.vpp > 1 ? " V " + std::to_string(l.vpp) : "");
  if (l.sp) t += ", SP";
  return t;
}

}  // namespace tetra::plan
