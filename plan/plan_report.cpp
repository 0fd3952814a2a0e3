// The report in the order a learner checks a cluster: the model and its arithmetic, the
// batch, the rank grid, memory per rank, traffic per group and its time, then the bubble,
// the step time and what an MFU point is worth.
#include "plan/plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "parallel/chunks.hpp"
#include "parallel/cp.hpp"
#include "parallel/schedule.hpp"
#include "plan/estimate.hpp"
#include "plan/memory.hpp"
#include "plan/preset.hpp"
#include "plan/traffic.hpp"
#include "util/format.hpp"

namespace tetra::plan {
namespace {

std::string fmt(const char* f, double x) {
  return format_number(f, x);
}

std::string seconds(double s) {
  if (s >= 0.1) return fmt("%.2f s", s);
  if (s >= 1e-4) return fmt("%.3g ms", s * 1e3);
  return fmt("%.3g us", s * 1e6);
}

// Whole numbers with commas, small ones with three significant digits.
std::string count(double x) {
  return x >= 100 ? commas(x) : fmt("%.3g", x);
}

// A duration in days, hours or seconds, whichever reads best.
std::string duration(double s) {
  if (s >= 2 * 86400) return fmt("%.1f days", s / 86400);
  if (s >= 2 * 3600) return fmt("%.1f hours", s / 3600);
  return fmt("%.3g s", s);
}

std::string pct(double x) {
  return fmt(x >= 0.1 ? "%.1f%%" : "%.2f%%", 100 * x);
}

const char* op_name(CommOp op) {
  switch (op) {
    case CommOp::AllReduce:
      return "all-reduce";
    case CommOp::ReduceScatter:
      return "reduce-scatter";
    case CommOp::AllGather:
      return "all-gather";
    case CommOp::SendRecv:
      return "send";
    default:
      return "other";
  }
}

struct Ctx {
  const Request& opt;
  const Setup& s;
  const Machine& mc;
  std::ostringstream os;
};

void model_section(Ctx& c, double card) {
  const ModelConfig& m = c.s.cfg;
  std::ostream& os = c.os;
  const double total = double(m.total_params()), mat = double(m.matmul_params());
  os << "model: " << m.str() << "\n";
  os << "  parameters: " << commas(total) << " total (" << fmt("%.4g", total) << "), "
     << commas(mat) << " in matrix products\n";
  const double attn = 12.0 * m.layers * m.dim * double(m.seq_len);
  os << "  FLOPs per token: 6N " << fmt("%.4g", 6 * mat) << " + attention 12*L*d*S "
     << fmt("%.4g", attn) << " = " << fmt("%.4g", model_flops_per_token(m)) << "\n";
  const double n = card > 0 ? card : mat;
  const std::string which =
      card > 0 ? fmt("N = %.4g, the model card's", card) : fmt("N = %.4g, in matrix products", mat);
  os << "  whole model (" << which << "):\n";
  os << "    bf16 weights " << byte_size(2 * n) << "; training state at 16 bytes per parameter "
     << "(ZeRO's mixed-precision Adam) " << byte_size(16 * n) << ", so at least "
     << commas(std::ceil(16 * n / c.mc.memory_bytes - 1e-9))
     << (c.opt.gpu == "cpu" ? " machines of " : " GPUs of ") << byte_size(c.mc.memory_bytes)
     << "\n";
  const double D = c.opt.tokens;
  if (D <= 0) return;
  const double flops = 6 * n * D;
  os << "    6ND for D = " << fmt("%.4g", D) << " tokens: " << fmt("%.3g", flops) << " FLOPs\n";
  const double rate = c.opt.achieved_tflops * 1e12;
  if (rate > 0) {
    const double one = flops / rate;
    os << "    at " << fmt("%g", c.opt.achieved_tflops)
       << " TFLOP/s per GPU: " << commas(one / (365.25 * 86400)) << " GPU-years on one GPU, "
       << fmt("%.1f", one / c.s.world() / 86400) << " days on " << commas(c.s.world()) << "\n";
  }
}

void batch_section(Ctx& c) {
  const Setup& s = c.s;
  const double S = s.cfg.seq_len, G = s.spec.batch.global_batch;
  const double per_dp = G / s.layout().dp;
  c.os << "batch: " << commas(G) << " sequences x " << commas(S) << " tokens = " << commas(G * S)
       << " tokens per step (" << fmt("%.3g", G * S / 1e6) << " M); " << commas(per_dp * S)
       << " tokens per replica (DP " << s.layout().dp << ") as " << s.run.micro_batches
       << " micro-batches of " << s.run.micro_batch << "\n";
}

void grid_section(Ctx& c) {
  const Layout& l = c.s.layout();
  const int g = c.mc.gpus_per_node;
  std::ostream& os = c.os;
  os << "grid: " << l.str() << " = " << commas(l.world()) << " ranks, rank = tp + TP*(cp + "
     << "CP*(pp + PP*dp)); nodes of " << std::min(g, l.world()) << "\n";
  const char* names[4] = {"tp", "cp", "pp", "dp"};
  const int sizes[4] = {l.tp, l.cp, l.pp, l.dp};
  int stride = 1;
  for (int d = 0; d < 4; ++d) {
    std::string members;
    for (int i = 0; i < std::min(sizes[d], 4); ++i)
      members += (i ? ", " : "") + std::to_string(i * stride);
    if (sizes[d] > 4) members += ", ... " + std::to_string((sizes[d] - 1) * stride);
    os << "  " << names[d] << " groups of " << sizes[d] << " (ranks " << members
       << " form the first; " << l.world() / sizes[d]
       << " groups): " << (inside_node(l, d, g) ? "inside a node" : "across nodes") << "\n";
    stride *= sizes[d];
  }
  // Which layers and sequence positions each pipeline stage and CP rank holds.
  // The stages printed: all of up to 16, else the first two and the last.
  for (int p = 0; p < l.pp; ++p) {
    if (l.pp > 16 && p == 2) os << "  ...\n";
    if (l.pp > 16 && p >= 2 && p < l.pp - 1) continue;
    os << "  pp rank " << p << " holds layers " << stage_label(c.s.run.chunks, p, c.s.cfg.layers)
       << "\n";
  }
  for (int r = 0; r < l.cp && l.cp > 1; ++r) {
    if (l.cp > 16 && r == 2) os << "  ...\n";
    if (l.cp > 16 && r >= 2 && r < l.cp - 1) continue;
    os << "  cp rank " << r << " holds tokens " << cp_ranges(c.s.cfg.seq_len, l.cp, r)
       << " of each sequence\n";
  }
}

void memory_section(Ctx& c) {
  std::ostream& os = c.os;
  const PeakMemory mine = peak_memory(c.s);
  os << "memory per rank (as " << c.s.prec.name << ", ZeRO-" << c.s.spec.optimizer.zero
     << (c.s.spec.optimizer.recompute ? ", recompute" : "") << "; the fullest pipeline stage, "
     << mine.stage << "): weights " << byte_size(mine.memory.weights) << ", gradients "
     << byte_size(mine.memory.grads) << ", Adam " << byte_size(mine.memory.adam) << ", activations "
     << byte_size(mine.memory.activations) << " (" << mine.memory.in_flight
     << " micro-batch chunks in flight), peak " << byte_size(mine.memory.peak()) << " of "
     << byte_size(c.mc.memory_bytes)
     << (mine.memory.peak() <= c.mc.memory_bytes ? ": fits" : ": does NOT fit") << "\n";
  os << "  dtype  ZeRO  weights    grads      Adam       activations  recompute    peak\n";
  for (const char* dtype : {"fp32", "bf16"})
    for (int zero = 1; zero <= 3; ++zero) {
      PeakMemory r[2];
      for (int rc = 0; rc < 2; ++rc) {
        RunSpec o = c.s.spec;
        o.device.dtype = dtype;
        o.optimizer.zero = zero;
        o.optimizer.recompute = rc == 1;
        r[rc] = peak_memory(make_setup(o, c.s.cfg));
      }
      char line[200];
      std::snprintf(
          line, sizeof line, "  %-5s  %-4d  %-9s  %-9s  %-9s  %-11s  %-11s  %s\n", dtype, zero,
          byte_size(r[0].memory.weights).c_str(), byte_size(r[0].memory.grads).c_str(),
          byte_size(r[0].memory.adam).c_str(), byte_size(r[0].memory.activations).c_str(),
          byte_size(r[1].memory.activations).c_str(),
          (byte_size(r[0].memory.peak()) + " / " + byte_size(r[1].memory.peak())).c_str());
      os << line;
    }
  os << "  (activations: the most the micro-batches in flight keep for backward, without and "
        "with `optimizer.recompute` full; peak without / with)\n";
}

// Traffic of stage 0's ranks, per group, and its time at the group's link.
void traffic_section(Ctx& c) {
  std::ostream& os = c.os;
  const Layout& l = c.s.layout();
  const std::vector<Collective> calls = step_traffic(c.s, 0);
  const std::map<std::string, double> by = bytes_by_group(calls);
  os << "traffic per step, each rank of pipeline stage 0 (ring factor 2(N-1)/N for an "
        "all-reduce, (N-1)/N for reduce-scatter and all-gather):\n";
  for (const char* group : {"tp", "cp", "pp", "dp_cp", "embed", "world"}) {
    if (!by.count(group) || by.at(group) == 0) continue;
    const auto [bw, where] = group_link(c.s, c.mc, group);
    const double secs = bw > 0 ? by.at(group) / bw : 0;
    os << "  " << group << ": " << byte_size(by.at(group)) << " (" << commas(by.at(group))
       << " B), at " << where << " " << byte_size(bw) << "/s: " << seconds(secs) << "\n";
    for (const Collective& k : calls) {
      if (k.group != group || k.bytes() == 0) continue;
      os << "    " << k.calls << " x " << op_name(k.op) << " of " << byte_size(k.tensor) << " over "
         << k.size << " (factor " << fmt("%.3g", ring_factor(k.op, k.size)) << "): " << k.what
         << "\n";
    }
  }
  if (l.tp > 1)
    os << "  TP: " << (c.s.spec.layout.sp ? "4 all-gathers and 4 reduce-scatters" : "4 all-reduces")
       << " per layer per micro-batch (2 forward, 2 backward"
       << (c.s.spec.optimizer.recompute ? ", 2 more to recompute" : "") << ")\n";
  // The ring at this layout's group sizes, and a round 10 GB of gradients over the largest.
  os << "  ring factor 2(N-1)/N:";
  int largest = 1;
  for (const auto& [name, n] : {std::pair{"tp", l.tp}, {"cp", l.cp}, {"pp", l.pp}, {"dp", l.dp}})
    if (n > 1)
      os << " " << name << " " << n << ": " << fmt("%.3g", 2.0 * (n - 1) / n) << ";",
          largest = std::max(largest, n);
  os << "\n";
  if (largest > 1) {
    const double sent = 10e9 * 2.0 * (largest - 1) / largest;
    os << "  10 GB of gradients all-reduced over " << largest << " ranks: " << byte_size(sent)
       << " sent by each, " << seconds(sent / c.mc.network_Bps) << " at "
       << byte_size(c.mc.network_Bps) << "/s network, " << seconds(sent / c.mc.nvlink_Bps) << " at "
       << byte_size(c.mc.nvlink_Bps) << "/s NVLink\n";
  }
}

void time_section(Ctx& c, double card) {
  std::ostream& os = c.os;
  const Setup& s = c.s;
  const Layout& l = s.layout();
  const int P = l.pp, V = s.spec.layout.vpp, m = s.run.micro_batches;
  const ScheduleKind kind = s.run.schedule;
  // The bubble by the schedule's formula at this m, and at 2, 4 and 8 times as many.
  os << "bubble (" << schedule_name(kind) << ", PP " << P << ", V " << V << "): ";
  if (kind == ScheduleKind::Interleaved)
    os << "(p-1)/(V*m) of the compute";
  else
    os << "(p-1)/(m+p-1) of the step";
  for (int f : {1, 2, 4, 8})
    os << (f == 1 ? ": " : ", ") << pct(bubble_formula(kind, P, V, m * f)) << " at m = " << m * f;
  os << "\n";
  const double peak = c.mc.peak_flops;
  if (peak <= 0) {
    os << "time: give `output.peak_tflops` (or a --gpu) to estimate it\n";
    return;
  }
  const double tokens = double(s.spec.batch.global_batch) * s.cfg.seq_len;
  const StepEstimate e = estimate_step(s, c.mc);
  const double step = e.step, mfu = e.mfu;
  os << "step time at peak " << fmt("%g", peak / 1e12) << " TFLOP/s: compute " << seconds(e.compute)
     << ", with the bubble " << seconds(e.piped) << ", + TP " << seconds(e.tp) << " + CP "
     << seconds(e.cp) << " + PP " << seconds(e.pp) << " + DP beyond the compute "
     << seconds(e.dp_exposed) << " = " << seconds(step) << "; MFU bound " << pct(mfu) << "\n";
  const double D = c.opt.tokens;
  if (D <= 0) return;
  os << "  " << fmt("%.4g", D) << " tokens: " << commas(std::ceil(D / tokens)) << " steps, "
     << duration(std::ceil(D / tokens) * step) << " at that step time\n";
  const double n = card > 0 ? card : double(s.cfg.matmul_params());
  const double at = c.opt.mfu > 0 ? c.opt.mfu / 100 : mfu;
  const double gpu_hours = 6 * n * D / peak / 3600;
  os << "  one MFU point, " << fmt("%.3g", 100 * at) << "% to " << fmt("%.3g", 100 * at + 1)
     << "%: " << count(gpu_hours * (1 / at - 1 / (at + 0.01))) << " GPU-hours (6ND at "
     << fmt("%g", peak / 1e12) << " TFLOP/s: " << fmt("%.4g", gpu_hours) << " GPU-hours at 100%)\n";
}

}  // namespace

Machine machine_of(const Request& opt, const std::string& dtype) {
  Machine m = machine_named(opt.gpu);
  // An fp32 run computes at the fp32 rate, as its MFU counts it (train/peak.cpp).
  if (dtype != "bf16" && m.fp32_flops > 0) m.peak_flops = m.fp32_flops;
  if (opt.peak_tflops > 0) m.peak_flops = opt.peak_tflops * 1e12;
  if (opt.memory_gb > 0) m.memory_bytes = opt.memory_gb * 1e9;
  if (opt.nvlink_gbs > 0) m.nvlink_Bps = opt.nvlink_gbs * 1e9;
  if (opt.network_gbs > 0) m.network_Bps = opt.network_gbs * 1e9;
  if (opt.gpus_per_node > 0) m.gpus_per_node = opt.gpus_per_node;
  return m;
}

std::string plan_report(const RunSpec& spec, const ModelConfig& cfg, const Request& opt) {
  const Setup s = make_setup(spec, cfg);
  const Machine mc = machine_of(opt, spec.device.dtype);
  const double card = opt.preset.empty() ? 0 : preset_named(opt.preset).card_params;
  Ctx c{opt, s, mc, {}};
  c.os << "tetra plan: " << (opt.preset.empty() ? "" : opt.preset + ", ") << s.layout().str()
       << (s.spec.layout.sp ? " with SP" : "") << ", ZeRO-" << s.spec.optimizer.zero << ", "
       << schedule_name(s.run.schedule) << (s.spec.optimizer.recompute ? ", recompute full" : "")
       << ", " << s.prec.name << ", on " << commas(s.world()) << " x " << mc.name << "\n";
  if (!opt.preset.empty())
    c.os << "preset " << opt.preset
         << " (a flag given replaces its part): " << preset_named(opt.preset).about << "\n";
  model_section(c, card);
  batch_section(c);
  grid_section(c);
  memory_section(c);
  traffic_section(c);
  time_section(c, card);
  return c.os.str();
}

}  // namespace tetra::plan
