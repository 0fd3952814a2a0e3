// tetra sweep: plan every layout, run one rank, run each layout, measure, rank, draw.
#include "jobs/sweep.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "jobs/job.hpp"
#include "jobs/layout_run.hpp"
#include "plot/svg.hpp"
#include "plot/svg_sweep.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/output_dir.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

namespace fs = std::filesystem;

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / 1e6);
  return buf;
}

// "3 skipped: 2 x --kv-heads 2 is not divisible by TP 4 (tp4-cp1-pp1-dp1-z1, ...)".
std::string skipped_summary(const std::vector<plan::Skipped>& skipped) {
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const plan::Skipped& s : skipped) by_reason[s.reason].push_back(plan::layout_id(s.spec));
  std::string out;
  for (const auto& [reason, ids] : by_reason) {
    out += "  " + std::to_string(ids.size()) + " x " + reason + " (";
    for (size_t i = 0; i < ids.size() && i < 3; ++i) out += (i ? ", " : "") + ids[i];
    out += ids.size() > 3 ? ", ...)\n" : ")\n";
  }
  return out;
}

// The groups that carry the layout's traffic (world's step totals are a few bytes in all).
std::string bytes_cell(const LayoutRun& r) {
  std::string s;
  for (const char* g : {"tp", "cp", "pp", "dp_cp"})
    if (r.bytes_planned.at(g) > 0)
      s += (s.empty() ? "" : ", ") + std::string(g) + " " + byte_size(r.bytes_planned.at(g));
  return s.empty() ? "none" : s;
}

void print_plan_table(const std::vector<LayoutRun>& runs) {
  std::printf("%-44s %6s %10s %5s %10s  %s\n", "layout", "m x b", "peak MB", "fits", "plan ms",
              "sent per step by a rank of stage 0");
  for (const LayoutRun& r : runs) {
    const std::string mbs =
        std::to_string(r.setup.run.micro_batches) + "x" + std::to_string(r.setup.run.micro_batch);
    char est[32] = "-";
    if (r.estimate.known) std::snprintf(est, sizeof est, "%.3g", 1e3 * r.estimate.step);
    std::printf("%-44s %6s %10s %5s %10s  %s\n", r.title.c_str(), mbs.c_str(),
                mb(r.peak_planned).c_str(), r.fits ? "yes" : "NO", est, bytes_cell(r).c_str());
  }
}

// Fastest first; layouts that did not run at the end, in enumeration order.
std::vector<const LayoutRun*> ranked(const std::vector<LayoutRun>& runs) {
  std::vector<const LayoutRun*> order;
  for (const LayoutRun& r : runs) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const LayoutRun* a, const LayoutRun* b) {
    if (a->ran() != b->ran()) return a->ran();
    return a->ran() && a->tokens_per_s > b->tokens_per_s;
  });
  return order;
}

// One row: the layout's rate, its speed-up over one rank, MFU at the sweep's one peak, the
// step and its split, the bubble (the idle share of the step) beside the schedule's at the
// measured pass costs and its formula, memory and bytes against the plan, and whether it
// matched one rank.
void print_row(const std::string& rank, const LayoutRun& r, const LayoutRun& ref) {
  char peak[40], match[64], at_costs[16] = "-", formula[16] = "-";
  std::snprintf(peak, sizeof peak, "%s (%s)", mb(r.peak_measured).c_str(),
                mb(r.peak_planned).c_str());
  if (&r == &ref)
    std::snprintf(match, sizeof match, "reference");
  else
    std::snprintf(match, sizeof match, "%s (%.1e)%s", r.status == "ok" ? "matches" : "MISMATCH",
                  r.loss_gap, r.fits ? "" : ", does not fit");
  if (r.setup.layout().pp > 1) {
    std::snprintf(at_costs, sizeof at_costs, "%.1f%%", 100 * r.bubble_at_costs);
    std::snprintf(formula, sizeof formula, "%.1f%%", 100 * r.bubble_formula);
  }
  std::printf(
      "%4s  %-44s %9.0f %6.2fx %6.2f%% %8.1f %5.1f%% %6.1f%% %6.1f%% %8s %7s %16s %7s  %s\n",
      rank.c_str(), r.title.c_str(), r.tokens_per_s, r.tokens_per_s / ref.tokens_per_s, 100 * r.mfu,
      r.step_ms, 100 * r.comm_share, 100 * r.hidden_share, 100 * r.bubble_of_step, at_costs,
      formula, peak, r.plan_matches ? "= plan" : "!= plan", match);
}

void print_ranked_table(const std::vector<const LayoutRun*>& order, const LayoutRun& ref) {
  std::printf("%4s  %-44s %9s %7s %7s %8s %6s %7s %7s %8s %7s %16s %7s  %s\n", "rank", "layout",
              "tok/s", "speedup", "MFU", "step ms", "comm", "hidden", "bubble", "at costs",
              "formula", "peak MB (plan)", "bytes", "one rank");
  print_row("ref", ref, ref);
  int n = 0;
  for (const LayoutRun* r : order) {
    if (!r->ran()) {
      std::printf("%4s  %-44s %s (exit %d): %s\n", "-", r->title.c_str(),
                  r->status == "timeout" ? "TIMEOUT" : "FAILED", r->exit_code, r->error.c_str());
      continue;
    }
    print_row(std::to_string(++n), *r, ref);
  }
}

SweepBar bar(const LayoutRun& r) {
  SweepBar b;
  b.name = r.title;
  b.status = r.status;
  b.fits = r.fits;
  if (r.ran()) {
    b.comm_ms = r.step_ms * r.comm_share;
    b.bubble_ms = r.step_ms * r.bubble_of_step;
    b.compute_ms = r.step_ms * r.compute_share;
  } else {
    b.note = r.status == "timeout" ? r.error : "failed: " + r.error;
  }
  b.estimate_ms = r.estimate.known ? 1e3 * r.estimate.step : -1;
  return b;
}

// --out DIR and what the sweep writes there (util/output_dir.hpp): checked before the first
// run, claimed (created, marked as a sweep's) once every check has passed.
OutputDir out_dir(const std::string& dir, const std::vector<LayoutRun>& runs) {
  OutputDir d{
      .dir = dir, .command = "sweep", .files = {"sweep.jsonl", "sweep.svg"}, .dirs = {"runs"}};
  std::vector<std::string> ids = {"reference"};
  for (const LayoutRun& r : runs) ids.push_back(r.id);
  for (const std::string& id : ids)
    for (const char* ext : {".jsonl", ".log"}) d.files.push_back("runs/" + id + ext);
  return d;
}

}  // namespace

int run_sweep(const SweepOptions& o, const TrainArgs& train) {
  const InterruptScope interrupts;
  const plan::RunSpec base = o.train.run_spec();
  plan::Layouts all = plan::enumerate_layouts(o.ranks, base, o.train.model, o.choices);
  // Each refusal as tetra train words it to a user of flags, which a sweep's are.
  for (plan::Skipped& s : all.skipped) s.reason = settings::worded(s.reason);
  check(!all.valid.empty(), "no layout of ", o.ranks, " rank", o.ranks > 1 ? "s" : "",
        " is valid for this model and batch: ", all.skipped.front().reason,
        all.skipped.size() > 1 ? " (and " + std::to_string(all.skipped.size() - 1) + " more)" : "");
  const plan::Machine mc = plan::machine_of(o.machine, o.train.device.dtype);
  std::vector<LayoutRun> runs(all.valid.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].setup = all.valid[i];
    plan_layout(runs[i], o, mc);
  }
  std::printf("tetra sweep: %d rank%s, %s, %s, %lld steps per run\n", o.ranks,
              o.ranks > 1 ? "s" : "", o.train.model.str().c_str(), o.train.device.dtype.c_str(),
              (long long)o.train.optimizer.steps);
  // What the plan is for and what each run is given: every flag the sweep took shows here.
  std::printf(
      "machine: %s, %.4g GB %s, %.4g TFLOPS peak, NVLink %.4g GB/s, network %.4g "
      "GB/s, %d GPUs per node\n",
      mc.name.c_str(), mc.memory_bytes / 1e9, o.machine.gpu == "cpu" ? "for all ranks" : "per GPU",
      mc.peak_flops / 1e12, mc.nvlink_Bps / 1e9, mc.network_Bps / 1e9, mc.gpus_per_node);
  std::printf(
      "each run: %s tetra train %s, the layout's flags and --metrics %s/runs/LAYOUT.jsonl%s\n",
      o.job.launcher.c_str(), shell_line(o.pass).c_str(), o.out.empty() ? "OUT" : o.out.c_str(),
      o.job.run_timeout > 0
          ? (", stopped after " + format_number("%g", o.job.run_timeout) + " s").c_str()
          : "");
  std::printf("%zu layout%s to run, %zu skipped%s\n%s", runs.size(), runs.size() == 1 ? "" : "s",
              all.skipped.size(), all.skipped.empty() ? "" : ", as tetra train would refuse them:",
              skipped_summary(all.skipped).c_str());
  if (o.dry_run) {
    print_plan_table(runs);
    return 0;
  }
  const OutputDir out = out_dir(o.out, runs);
  const std::string problem = output_dir_problem(out, "--out");
  check(problem.empty(), problem);
  const std::string unclaimed = claim_output_dir(out);
  check(unclaimed.empty(), unclaimed);
  std::error_code ec;
  fs::create_directory(o.out + "/runs", ec);
  check(!ec, "cannot create '", o.out, "/runs': ", ec.message());
  // sweep.jsonl, a record per line as the runs finish: a fresh file of the sweep's own.
  const std::string jsonl = o.out + "/sweep.jsonl";
  const Temporary created = create_replacing(jsonl);
  check(created.fd >= 0, "cannot write '", jsonl, "': ", created.problem);
  OutputStream records(created.fd);
  const auto write = [&](const json& j) {
    const bool written = records.write(j.dump() + "\n");  // errno before strerror reads it
    check(written, "cannot write '", jsonl, "': ", std::strerror(errno));
  };
  for (const plan::Skipped& s : all.skipped)
    write({{"name", plan::layout_id(s.spec)}, {"status", "skipped"}, {"reason", s.reason}});

  LayoutRun ref = reference_run(o, mc);
  run_layout(ref, o, train, mc, {}, 0);
  write(run_record(ref, true));
  if (!ref.ran()) {
    std::fprintf(stderr, "tetra: error: the one-rank reference run %s%s (its log: %s)\n",
                 ref.status == "timeout" ? "" : "failed: ", ref.error.c_str(),
                 (o.out + "/runs/reference.log").c_str());
    return ref.exit_code == 2 ? 2 : 1;
  }
  std::printf("one rank: losses");
  for (double l : ref.losses) std::printf(" %.6f", l);
  std::printf(" (%.1f s)\n", ref.seconds);
  // One peak per rank for every layout's MFU.
  const double peak = layouts_peak(o, ref);
  const std::string peak_source = layouts_peak_source(o);

  for (size_t i = 0; i < runs.size(); ++i) {
    LayoutRun& r = runs[i];
    run_layout(r, o, train, mc, ref.losses, peak);
    write(run_record(r, false));
    std::printf("[%zu/%zu] %s: ", i + 1, runs.size(), r.title.c_str());
    if (r.ran())
      std::printf("%s one rank (loss gap %.1e), %.0f tok/s, bytes %s plan (%.1f s)\n",
                  r.status == "ok" ? "matches" : "does NOT match", r.loss_gap, r.tokens_per_s,
                  r.plan_matches ? "=" : "!=", r.seconds);
    else
      std::printf("%s: %s (%.1f s)\n", r.status.c_str(), r.error.c_str(), r.seconds);
    std::fflush(stdout);
  }

  InterruptScope::check();  // a signal after the last job is not lost
  const std::vector<const LayoutRun*> order = ranked(runs);
  // More ranks than cores: a rank that waits for a core is counted as waiting in communication.
  const unsigned cores = std::thread::hardware_concurrency();
  const std::string oversubscribed =
      cores > 0 && unsigned(o.ranks) > cores
          ? std::to_string(o.ranks) + " ranks on " + std::to_string(cores) +
                " cores: most of the communication share is waiting for a core, not for the network"
          : "";
  std::printf(
      "\nMFU at one peak for every layout, %s per rank (%s), so it ranks the layouts as "
      "tok/s does; speedup over the one-rank reference; bubble: the idle share of the "
      "step, measured, the schedule's at the measured pass costs, and by its formula\n",
      (format_number("%.3g", peak / 1e9) + " GFLOP/s").c_str(), peak_source.c_str());
  if (!oversubscribed.empty()) std::printf("%s\n", oversubscribed.c_str());
  print_ranked_table(order, ref);
  std::vector<SweepBar> bars;
  for (const LayoutRun* r : order) bars.push_back(bar(*r));
  write_svg(
      o.out + "/sweep.svg",
      sweep_svg(bars, "tetra sweep: " + std::to_string(o.ranks) + " ranks, " + o.train.model.str(),
                oversubscribed));
  const LayoutRun* best = nullptr;
  for (const LayoutRun* r : order)
    if (r->status == "ok" && r->fits) {
      best = r;
      break;
    }
  write({{"name", "summary"},
         {"status", "summary"},
         {"layouts", runs.size()},
         {"skipped", all.skipped.size()},
         {"fastest", best ? json(best->id) : json(nullptr)},
         {"mfu_peak_flops", peak},
         {"mfu_peak_source", peak_source}});
  std::printf("wrote %s/sweep.jsonl and %s/sweep.svg\n", o.out.c_str(), o.out.c_str());
  if (!best) {
    std::printf("no layout both fits and matches one rank\n");
    return 1;
  }
  std::printf("fastest that fits and matches one rank: %s, %.0f tok/s, MFU %.2f%%\n",
              best->title.c_str(), best->tokens_per_s, 100 * best->mfu);
  return 0;
}

}  // namespace tetra