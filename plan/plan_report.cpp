// The plan's text, from its JSON object alone (plan_json.cpp builds it): the model and its
// arithmetic, the batch, the rank grid, memory per rank, traffic per group and its time,
// then the bubble, the step time and what an MFU point is worth.
#include "plan/plan_report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "parallel/schedule.hpp"
#include "util/format.hpp"

namespace tetra::plan {
namespace {

std::string fmt(const char* f, double x) {
  return format_number(f, x);
}

// Past a million, three significant digits: a peak of 1e-300 TFLOPS makes times of 300 digits.
std::string seconds(double s) {
  if (s >= 1e6) return fmt("%.3g s", s);
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
  if (s >= 2 * 86400) return fmt(s >= 1e6 * 86400 ? "%.3g days" : "%.1f days", s / 86400);
  if (s >= 2 * 3600) return fmt("%.1f hours", s / 3600);
  return fmt("%.3g s", s);
}

std::string pct(double x) {
  return fmt(x >= 1e4 ? "%.3g%%" : x >= 0.1 ? "%.1f%%" : "%.2f%%", 100 * x);
}

double num(const json& j) {
  return j.get<double>();
}

// A setting and its value as a message names them (util/settings.hpp: the printer words the
// key as the user gave settings): "`layout.schedule` 1f1b", a switch bare.
std::string setting_of(const std::string& key, const std::string& value) {
  return "`" + key + "`" + (value == "on" ? "" : " " + value);
}

void header(std::ostream& os, const json& p) {
  const json& r = p["run"];
  const json& l = r["layout"];
  os << "tetra plan: " << (r["preset"].is_null() ? "" : r["preset"].get<std::string>() + ", ")
     << r["layout_text"].get<std::string>() << (l["sp"].get<bool>() ? " with SP" : "") << ", ZeRO-"
     << r["zero"].get<int>() << ", " << l["schedule"].get<std::string>()
     << (r["recompute"].get<bool>() ? ", recompute full" : "") << ", "
     << r["dtype"].get<std::string>() << ", on " << commas(num(r["world"])) << " x "
     << p["machine"]["name"].get<std::string>() << "\n";
  if (!r["preset"].is_null())
    os << "preset " << r["preset"].get<std::string>()
       << " (a flag given replaces its part): " << r["preset_about"].get<std::string>() << "\n";
}

void model_section(std::ostream& os, const json& p) {
  const json& m = p["model"];
  const json& w = p["whole_model"];
  const json& f = m["flops_per_token"];
  const double total = num(m["parameters"]), mat = num(m["matmul_parameters"]);
  os << "model: " << m["text"].get<std::string>() << "\n";
  os << "  parameters: " << commas(total) << " total (" << fmt("%.4g", total) << "), "
     << commas(mat) << " in matrix products\n";
  os << "  FLOPs per token: 6N " << fmt("%.4g", num(f["six_n"])) << " + attention 12*L*d*S "
     << fmt("%.4g", num(f["attention"])) << " = " << fmt("%.4g", num(f["total"])) << "\n";
  const double n = num(w["n"]);
  const bool card = w["n_source"] == "model card";
  os << "  whole model (N = " << fmt("%.4g", n)
     << (card ? ", the model card's" : ", in matrix products") << "):\n";
  const std::string device = p["machine"]["device"];
  const double devices = num(w["min_devices"]);
  os << "    bf16 weights " << byte_size(num(w["bf16_weight_bytes"]))
     << "; training state at 16 bytes per parameter (ZeRO's mixed-precision Adam) "
     << byte_size(num(w["training_state_bytes"])) << ", so at least " << commas(devices) << " "
     << device << (devices == 1 ? "" : "s") << " of "
     << byte_size(num(p["machine"]["memory_bytes"])) << "\n";
  // The headline's bytes per parameter beside tetra's own, which keeps fp32 gradients.
  const json& h = w["bytes_per_parameter"]["headline"];
  const json& t = w["bytes_per_parameter"]["tetra"];
  const json &one = t["one_rank"], &z = t["zero1"];
  const double ranks = num(h["zero1_ranks"]);
  os << "    bytes per parameter: the headline's 16 = bf16 weights 2 + bf16 gradients 2 + fp32 "
        "master weights, Adam m and v 12; ZeRO-1 over dp_cp "
     << commas(ranks) << " shards the 12: " << fmt("%.3g", num(h["zero1_total"])) << " ("
     << fmt("%.2g", num(h["zero1_total"]) / 16) << " of 16)\n";
  os << "      tetra's own, " << t["dtype"].get<std::string>()
     << ", one rank: " << fmt("%.3g", num(one["total"])) << " = weights "
     << fmt("%.3g", num(one["weights"]))
     << (t["dtype"] == "bf16" ? " (bf16 2 + fp32 master 4)" : "") << " + gradients "
     << fmt("%.3g", num(one["gradients"])) << " (fp32) + Adam " << fmt("%.3g", num(one["adam"]));
  if (ranks > 1)
    os << "; ZeRO-1 over " << commas(ranks) << ": " << fmt("%.3g", num(z["total"])) << " ("
       << fmt("%.2g", num(z["total"]) / num(one["total"]))
       << " of one rank's: the full fp32 gradients stay beside their shard)";
  os << "\n";
  if (w["tokens"].is_null()) return;
  os << "    6ND for D = " << fmt("%.4g", num(w["tokens"]))
     << " tokens: " << fmt("%.3g", num(w["flops"])) << " FLOPs\n";
  if (w["achieved_tflops"].is_null()) return;
  os << "    at " << fmt("%g", num(w["achieved_tflops"]))
     << " TFLOP/s per GPU: " << count(num(w["device_years"])) << " GPU-years on one GPU, "
     << fmt(num(w["days"]) >= 1e6 ? "%.3g" : "%.1f", num(w["days"])) << " days on "
     << commas(num(p["run"]["world"])) << "\n";
}

void batch_section(std::ostream& os, const json& p) {
  const json& b = p["batch"];
  const double tokens = num(b["tokens_per_step"]);
  os << "batch: " << commas(num(b["sequences"])) << " sequences x " << commas(num(b["seq_len"]))
     << " tokens = " << commas(tokens) << " tokens per step (" << fmt("%.3g", tokens / 1e6)
     << " M); " << commas(num(b["tokens_per_replica"])) << " tokens per replica (DP "
     << p["run"]["layout"]["dp"].get<int>() << ") as " << b["micro_batches"].get<int>()
     << " micro-batches of " << b["micro_batch"].get<int>() << "\n";
}

void grid_section(std::ostream& os, const json& p) {
  const json& g = p["grid"];
  const int world = g["world"];
  os << "grid: " << p["run"]["layout_text"].get<std::string>() << " = " << commas(world)
     << " ranks, rank = tp + TP*(cp + CP*(pp + PP*dp)); nodes of " << g["node_ranks"].get<int>()
     << "\n";
  for (const json& d : g["dims"]) {
    const int size = d["size"], stride = d["stride"];
    std::string members;
    for (int i = 0; i < std::min(size, 4); ++i)
      members += (i ? ", " : "") + std::to_string(i * stride);
    if (size > 4) members += ", ... " + std::to_string((size - 1) * stride);
    os << "  " << d["name"].get<std::string>() << " groups of " << size << " (ranks " << members
       << " form the first; " << d["groups"].get<int>()
       << " groups): " << (d["inside_node"].get<bool>() ? "inside a node" : "across nodes") << "\n";
  }
  // The stages and CP ranks printed: all of up to 16, else the first two and the last.
  const auto listed = [&os](const json& list, const auto& line) {
    const size_t n = list.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 16 && i == 2) os << "  ...\n";
      if (n > 16 && i >= 2 && i + 1 < n) continue;
      line(list[i]);
    }
  };
  listed(g["stages"], [&os](const json& st) {
    os << "  pp rank " << st["stage"].get<int>() << " holds layers "
       << st["label"].get<std::string>() << "\n";
  });
  if (g["cp_ranks"].size() > 1)
    listed(g["cp_ranks"], [&os](const json& c) {
      os << "  cp rank " << c["cp_rank"].get<int>() << " holds tokens "
         << c["label"].get<std::string>() << " of each sequence\n";
    });
}

void memory_section(std::ostream& os, const json& p) {
  const json& m = p["memory"];
  const json& r = p["run"];
  const int fullest = m["fullest_stage"];
  const json& st = m["stages"][size_t(fullest)];
  const double cap = num(m["capacity_bytes"]);
  os << "memory per rank (as " << r["dtype"].get<std::string>() << ", ZeRO-" << r["zero"].get<int>()
     << (r["recompute"].get<bool>() ? ", recompute" : "")
     << (r["overlap"].get<bool>() ? ", overlap" : "") << "; the fullest pipeline stage, " << fullest
     << "): weights " << byte_size(num(st["weights"])) << ", gradients "
     << byte_size(num(st["gradients"])) << ", Adam " << byte_size(num(st["adam"]))
     << ", activations " << byte_size(num(st["activations"])) << " (" << st["in_flight"].get<int>()
     << " micro-batch chunks in flight), peak " << byte_size(num(st["peak"])) << " of "
     << byte_size(cap) << (m["fits"].get<bool>() ? ": fits" : ": does NOT fit") << "\n";
  if (m["stages"].size() > 1)
    os << "  stage " << fullest << " is the fullest: " << m["fullest_why"].get<std::string>()
       << "\n";
  const std::string schedule = r["layout"]["schedule"];
  if (m.contains("weight_delay")) {
    const json& w = m["weight_delay"];
    const int d = w["delay"];
    os << "  zb-h1 runs " << weight_delay_text(d)
       << ": the paper's delays (rank r, r late) would peak at " << byte_size(num(w["paper_peak"]))
       << ", above 1f1b's " << byte_size(num(w["one_f_one_b_peak"]))
       << (r["recompute"].get<bool>()
               ? " (under recompute a micro-batch awaiting W keeps each block's GEMM output "
                 "gradients, one awaiting B only the block's input)"
               : "")
       << "\n";
  } else if (r["recompute"].get<bool>() && splits_backward(parse_schedule(schedule))) {
    os << "  " << schedule << " under recompute holds more than 1f1b: a micro-batch awaiting W "
       << "keeps each block's GEMM output gradients, one awaiting B only the block's input, and "
       << "no order of W makes up for it (docs/design.md)\n";
  }
  if (!m["fits"].get<bool>()) {
    if (m["fixes"].empty())
      os << "  no one change of `layout.schedule`, `optimizer.recompute`, `optimizer.zero` or "
            "`layout.sp` fits it: more pipeline "
            "stages or TP ranks, or a smaller micro-batch\n";
    for (const json& f : m["fixes"])
      os << "  it fits with " << setting_of(f["key"], f["value"]) << ": peak "
         << byte_size(num(f["peak"])) << " (" << f["why"].get<std::string>() << ")\n";
  }
  os << "  dtype  ZeRO  weights    grads      Adam       activations  recompute    peak\n";
  for (const json& t : m["table"]) {
    char line[200];
    std::snprintf(
        line, sizeof line, "  %-5s  %-4d  %-9s  %-9s  %-9s  %-11s  %-11s  %s\n",
        t["dtype"].get<std::string>().c_str(), t["zero"].get<int>(),
        byte_size(num(t["weights"])).c_str(), byte_size(num(t["gradients"])).c_str(),
        byte_size(num(t["adam"])).c_str(), byte_size(num(t["activations"])).c_str(),
        byte_size(num(t["activations_recompute"])).c_str(),
        (byte_size(num(t["peak"])) + " / " + byte_size(num(t["peak_recompute"]))).c_str());
    os << line;
  }
  os << "  (activations: the most the micro-batches in flight keep for backward, without and "
        "with `optimizer.recompute` full; peak without / with)\n";
}

void traffic_section(std::ostream& os, const json& p) {
  const json& t = p["traffic"];
  os << "traffic per step, each rank of pipeline stage 0 (ring factor 2(N-1)/N for an "
        "all-reduce, (N-1)/N for reduce-scatter and all-gather):\n";
  for (const json& g : t["groups"]) {
    const double bytes = num(g["bytes"]);
    if (bytes == 0) continue;
    os << "  " << g["group"].get<std::string>() << ": " << byte_size(bytes) << " (" << commas(bytes)
       << " B), at " << g["link"].get<std::string>() << " " << byte_size(num(g["link_bytes_per_s"]))
       << "/s: " << seconds(num(g["seconds"])) << "\n";
    for (const json& k : g["calls"])
      os << "    " << k["calls"].get<int64_t>() << " x " << k["op"].get<std::string>() << " of "
         << byte_size(num(k["tensor_bytes"])) << " over " << k["size"].get<int>() << " (factor "
         << fmt("%.3g", num(k["ring_factor"])) << "): " << k["what"].get<std::string>() << "\n";
  }
  if (const json& tp = t["tp_per_layer"]; !tp.is_null()) {
    const int fwd = tp["forward"], bwd = tp["backward"], rc = tp["recompute"], all = tp["total"];
    const std::string more =
        rc > 0 ? ", " + std::to_string(rc) + " more to recompute the forward" : "";
    if (tp["ops"].size() == 1)
      os << "  TP: " << all << " all-reduces per layer per micro-batch (" << fwd << " forward, "
         << bwd << " backward" << more << ")\n";
    else
      os << "  TP with SP: " << all << " all-gathers and " << all
         << " reduce-scatters per layer per micro-batch (" << fwd << " of each forward, " << bwd
         << " of each backward, where each one's backward is the other" << more << ")\n";
  }
  os << "  ring factor 2(N-1)/N:";
  for (const json& r : t["ring_factors"])
    os << " " << r["group"].get<std::string>() << " " << r["size"].get<int>() << ": "
       << fmt("%.3g", num(r["factor"])) << ";";
  os << "\n";
  if (const json& e = t["gradient_example"]; !e.is_null()) {
    const json& mc = p["machine"];
    os << "  for scale (not this run's traffic): 10 GB of gradients all-reduced over dp_cp, "
       << commas(num(e["ranks"])) << " ranks: " << byte_size(num(e["sent_bytes"]))
       << " sent by each, " << seconds(num(e["network_seconds"])) << " at "
       << byte_size(num(mc["network_bytes_per_s"])) << "/s network, "
       << seconds(num(e["node_link_seconds"])) << " at "
       << byte_size(num(mc["node_link_bytes_per_s"])) << "/s " << mc["node_link"].get<std::string>()
       << "\n";
  }
}

void time_section(std::ostream& os, const json& p) {
  const json& b = p["bubble"];
  const bool interleaved = b["schedule"] == "interleaved";
  // The bubble by the schedule's formula at this m, and at 2, 4 and 8 times as many; the
  // interleaved schedule's paper gives it as a ratio to the compute, printed beside.
  os << "bubble (" << b["schedule"].get<std::string>() << ", PP " << b["pp"].get<int>() << ", V "
     << b["vpp"].get<int>() << "), the idle share ";
  if (b.contains("weight_delay"))
    os << "of the step simulated with F, B and W of equal cost and "
       << weight_delay_text(b["weight_delay"].get<int>()) << " (see memory)";
  else
    os << bubble_formula_text(parse_schedule(b["schedule"])) << " of the step";
  if (splits_backward(parse_schedule(b["schedule"])) && !b.contains("weight_delay"))
    os << " (each backward as B and W, W filling the idle time; F, B and W of equal cost"
       << (placement(parse_schedule(b["schedule"])) == Placement::V
               ? "; two chunks per rank placed as a V, rank 0 holding the first and the last)"
               : ")");
  for (const json& a : b["at"])
    os << (&a == &b["at"].front() ? ": " : ", ") << pct(num(a["of_step"]))
       << " at m = " << a["micro_batches"].get<int>();
  os << "\n";
  if (interleaved) {
    os << "  as a ratio to the compute, (p-1)/(V*m), as the interleaved schedule's paper gives it";
    for (const json& a : b["at"])
      os << (&a == &b["at"].front() ? ": " : ", ") << pct(num(a["of_compute"]))
         << " at m = " << a["micro_batches"].get<int>();
    os << "\n";
  }
  const json& s = p["step"];
  if (!s["known"].get<bool>()) {
    os << "time: give `output.peak_tflops` (or a --gpu) to estimate it\n";
    return;
  }
  const double peak = num(s["peak_flops"]);
  os << "step time at peak " << fmt("%g", peak / 1e12) << " TFLOP/s: compute "
     << seconds(num(s["compute_s"])) << ", with the bubble " << seconds(num(s["piped_s"]))
     << ", + TP " << seconds(num(s["tp_s"])) << " + CP " << seconds(num(s["cp_s"])) << " + PP "
     << seconds(num(s["pp_s"])) << " + DP beyond the compute " << seconds(num(s["dp_exposed_s"]))
     << " = " << seconds(num(s["step_s"])) << "; MFU estimate for this schedule "
     << pct(num(s["mfu"]));
  if (p["run"]["recompute"].get<bool>())
    os << ", HFU " << pct(num(s["hfu"])) << " (the recompute's forward counted)";
  os << "\n  the estimate assumes " << s["assumes"].get<std::string>() << "\n";
  const json& w = p["whole_run"];
  if (w.is_null()) return;
  os << "  " << fmt("%.4g", num(w["tokens"])) << " tokens: " << commas(num(w["steps"]))
     << " steps, " << duration(num(w["seconds"])) << " at that step time\n";
  const json& pt = w["mfu_point"];
  const double at = num(pt["from"]);
  os << "  one MFU point, " << fmt("%.3g", 100 * at) << "% to " << fmt("%.3g", 100 * at + 1)
     << "%: " << count(num(pt["gpu_hours"])) << " GPU-hours (6ND at " << fmt("%g", peak / 1e12)
     << " TFLOP/s: " << fmt("%.4g", num(pt["gpu_hours_at_100"])) << " GPU-hours at 100%)\n";
}

}  // namespace

std::string plan_text(const json& plan) {
  std::ostringstream os;
  header(os, plan);
  model_section(os, plan);
  batch_section(os, plan);
  grid_section(os, plan);
  memory_section(os, plan);
  traffic_section(os, plan);
  time_section(os, plan);
  return os.str();
}

std::string plan_report(const RunSpec& spec, const ModelConfig& cfg, const Request& req) {
  return plan_text(plan_json(spec, cfg, req));
}

}  // namespace tetra::plan
