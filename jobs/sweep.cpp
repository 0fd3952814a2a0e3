// tetra sweep: plan every layout, run one rank, run each layout, measure, rank, draw.
#include "jobs/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "jobs/job.hpp"
#include "plan/compare.hpp"
#include "plan/estimate.hpp"
#include "plan/memory.hpp"
#include "plan/traffic.hpp"
#include "plot/plot.hpp"
#include "plot/svg.hpp"
#include "plot/svg_sweep.hpp"
#include "train/match.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra {
namespace {

namespace fs = std::filesystem;

const char* const kGroups[] = {"tp", "cp", "pp", "dp_cp", "world"};

// One layout: what the plan says, and what its run measured (averages over the timed steps:
// all but the first, which warms up, unless it is the only one).
struct Run {
  plan::Setup setup;
  std::string id, title;
  std::string status = "planned";  // then ok, mismatch, failed or timeout
  int exit_code = 0;
  double seconds = 0;
  std::string error;  // why it failed
  std::vector<double> losses;
  double loss_gap = 0;
  double tokens_per_s = 0, mfu = 0, step_ms = 0;
  double bubble = 0, bubble_formula = 0;  // as the metrics give them
  // The step split, averaged over the ranks: compute, the bubble (of the step, any schedule)
  // and the exposed communication besides (the rest of the ranks' wait); they sum to 1.
  double compute_share = 0, bubble_of_step = 0, comm_share = 0;
  double peak_measured = 0, peak_planned = 0;
  std::map<std::string, double> bytes_planned;  // per step, each rank of pipeline stage 0
  std::map<std::string, int64_t> bytes_measured;
  bool plan_matches = false, fits = true;
  plan::StepEstimate estimate;
  bool ran() const { return status == "ok" || status == "mismatch"; }
};

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / 1e6);
  return buf;
}

// What the plan says of a layout on the machine; the step time needs a peak, which a CPU
// machine has only from --peak-tflops (the run's own probe fills it in later).
void plan_run(Run& r, const SweepOptions& o, const plan::Machine& mc) {
  r.id = plan::layout_id(r.setup.spec);
  r.title = plan::layout_title(r.setup.spec);
  r.peak_planned = plan::peak_memory(r.setup).memory.peak();
  r.bytes_planned = plan::bytes_by_group(plan::step_traffic(r.setup, 0));
  // A CPU's ranks share its memory; GPUs hold a rank each.
  const double need = o.machine.gpu == "cpu" ? r.peak_planned * r.setup.world() : r.peak_planned;
  r.fits = need <= mc.memory_bytes;
  r.estimate = plan::estimate_step(r.setup, mc);
}

std::vector<std::string> train_command(const SweepOptions& o, const TrainArgs& train,
                                       const plan::RunSpec& spec, int ranks,
                                       const std::string& metrics) {
  std::vector<std::string> cmd = launcher_words(o.job.launcher, ranks);
  cmd.insert(cmd.end(), {tetra_program(), "train"});
  cmd.insert(cmd.end(), o.pass.begin(), o.pass.end());
  // The layout's settings, its ZeRO stage, the sweep's --steps and the run's metrics file.
  TrainConfig run = o.train;
  run.layout = spec.layout;
  run.optimizer.zero = spec.optimizer.zero;
  run.output.metrics = metrics;
  std::set<std::string> keys = {"layout.tp",      "layout.cp",       "layout.pp",     "layout.dp",
                                "optimizer.zero", "optimizer.steps", "output.metrics"};
  if (run.layout.pp > 1) keys.insert({"layout.schedule", "layout.vpp"});
  if (run.layout.sp) keys.insert("layout.sp");
  const std::vector<std::string> args = train.args(run, keys);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

// The ranks' mean share of a step's time outside communication calls (its compute_ms, each
// rank's step less its wait).
double compute_share(const json& record) {
  check(record.contains("compute_ms") && record["compute_ms"].is_array() &&
            !record["compute_ms"].empty() && record.contains("step_ms"),
        "no per-rank compute_ms");
  double sum = 0;
  for (const json& ms : record["compute_ms"]) sum += ms.get<double>();
  return sum / double(record["compute_ms"].size()) / record["step_ms"].get<double>();
}

// What a finished run's metrics say, and the plan's step time at the run's own peak when the
// machine has none.
void measure(Run& r, const std::string& metrics, const plan::Machine& mc) {
  const std::vector<json> records = read_metrics(metrics);
  const size_t first = records.size() > 1 ? 1 : 0;
  const double timed = double(records.size() - first);
  const auto num = [](const json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
  };
  double peak = 0;  // per rank, as the run's MFU counted it: tokens/s F / (ranks MFU)
  const double F = model_flops_per_token(r.setup.cfg), ranks = r.setup.world();
  for (size_t i = 0; i < records.size(); ++i) {
    const json& j = records[i];
    r.losses.push_back(num(j, "loss"));
    r.peak_measured = std::max(r.peak_measured, num(j, "peak_memory_bytes"));
    if (i < first) continue;
    r.step_ms += num(j, "step_ms") / timed;
    r.compute_share += compute_share(j) / timed;
    r.bubble += num(j, "bubble") / timed;
    r.bubble_formula = num(j, "bubble_formula");
    peak = num(j, "tokens_per_s") * F / (ranks * num(j, "mfu"));
  }
  // Throughput over the mean step time, so that tokens/s ranks the runs as their step times do.
  r.tokens_per_s = double(r.setup.spec.batch.global_batch) * r.setup.cfg.seq_len / r.step_ms * 1e3;
  r.mfu = r.tokens_per_s * F / (ranks * peak);
  for (const char* g : kGroups)
    if (records.back().contains("comm_bytes") && records.back()["comm_bytes"].contains(g))
      r.bytes_measured[g] = json_int(records.back()["comm_bytes"][g]).value_or(-1);
  // Interleaved reports its bubble over the compute (b = idle / busy): idle / step = b / (1 + b).
  r.bubble_of_step =
      r.setup.run.schedule == ScheduleKind::Interleaved ? r.bubble / (1 + r.bubble) : r.bubble;
  r.bubble_of_step = std::min(r.bubble_of_step, 1 - r.compute_share);
  r.comm_share = 1 - r.compute_share - r.bubble_of_step;
  r.plan_matches = plan::compare_metrics(r.setup, metrics).match;
  if (mc.peak_flops <= 0 && std::isfinite(peak) && peak > 0) {  // a CPU: the run's own probe
    plan::Machine probed = mc;
    probed.peak_flops = peak;
    r.estimate = plan::estimate_step(r.setup, probed);
  }
}

// Runs the layout and reads its metrics. ref: the one-rank losses (empty for the reference).
void run_layout(Run& r, const SweepOptions& o, const TrainArgs& train, const plan::Machine& mc,
                const std::vector<double>& ref) {
  const std::string base = o.out + "/runs/" + r.id;
  const std::string metrics = base + ".jsonl", log = base + ".log";
  std::remove(metrics.c_str());  // metrics append: an earlier sweep's must not count
  const JobResult job = run_job(train_command(o, train, r.setup.spec, r.setup.world(), metrics),
                                log, o.job.run_timeout);
  r.seconds = job.seconds;
  r.exit_code = job.exit_code;
  if (job.timed_out || job.exit_code != 0) {
    r.status = job.timed_out ? "timeout" : "failed";
    r.error = job.timed_out ? "stopped after " + std::to_string(int(o.job.run_timeout)) + " s"
                            : log_error(log);
    return;
  }
  try {
    measure(r, metrics, mc);
  } catch (const std::exception& e) {  // a run that exits 0 without its records
    r.status = "failed";
    r.error = std::string("its metrics: ") + e.what();
    return;
  }
  if (ref.empty()) {
    r.status = "ok";
    return;
  }
  r.loss_gap = r.losses.size() == ref.size() ? largest_loss_gap(ref, r.losses) : INFINITY;
  r.status = r.loss_gap <= match_bounds(o.train.device.dtype).loss ? "ok" : "mismatch";
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
std::string bytes_cell(const Run& r) {
  std::string s;
  for (const char* g : {"tp", "cp", "pp", "dp_cp"})
    if (r.bytes_planned.at(g) > 0)
      s += (s.empty() ? "" : ", ") + std::string(g) + " " + byte_size(r.bytes_planned.at(g));
  return s.empty() ? "none" : s;
}

void print_plan_table(const std::vector<Run>& runs) {
  std::printf("%-44s %6s %10s %5s %10s  %s\n", "layout", "m x b", "peak MB", "fits", "plan ms",
              "sent per step by a rank of stage 0");
  for (const Run& r : runs) {
    const std::string mbs =
        std::to_string(r.setup.run.micro_batches) + "x" + std::to_string(r.setup.run.micro_batch);
    char est[32] = "-";
    if (r.estimate.known) std::snprintf(est, sizeof est, "%.3g", 1e3 * r.estimate.step);
    std::printf("%-44s %6s %10s %5s %10s  %s\n", r.title.c_str(), mbs.c_str(),
                mb(r.peak_planned).c_str(), r.fits ? "yes" : "NO", est, bytes_cell(r).c_str());
  }
}

// Fastest first; layouts that did not run at the end, in enumeration order.
std::vector<const Run*> ranked(const std::vector<Run>& runs) {
  std::vector<const Run*> order;
  for (const Run& r : runs) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const Run* a, const Run* b) {
    if (a->ran() != b->ran()) return a->ran();
    return a->ran() && a->tokens_per_s > b->tokens_per_s;
  });
  return order;
}

void print_ranked_table(const std::vector<const Run*>& order) {
  std::printf("%4s  %-44s %9s %7s %8s %6s %7s %16s %7s  %s\n", "rank", "layout", "tok/s", "MFU",
              "step ms", "comm", "bubble", "peak MB (plan)", "bytes", "one rank");
  int n = 0;
  for (const Run* r : order) {
    if (!r->ran()) {
      std::printf("%4s  %-44s %s (exit %d): %s\n", "-", r->title.c_str(),
                  r->status == "timeout" ? "TIMEOUT" : "FAILED", r->exit_code, r->error.c_str());
      continue;
    }
    char peak[40], match[64];
    std::snprintf(peak, sizeof peak, "%s (%s)", mb(r->peak_measured).c_str(),
                  mb(r->peak_planned).c_str());
    std::snprintf(match, sizeof match, "%s (%.1e)%s", r->status == "ok" ? "matches" : "MISMATCH",
                  r->loss_gap, r->fits ? "" : ", does not fit");
    std::printf("%4d  %-44s %9.0f %6.2f%% %8.1f %5.1f%% %6.1f%% %16s %7s  %s\n", ++n,
                r->title.c_str(), r->tokens_per_s, 100 * r->mfu, r->step_ms, 100 * r->comm_share,
                100 * r->bubble_of_step, peak, r->plan_matches ? "= plan" : "!= plan", match);
  }
}

json record(const Run& r, bool reference) {
  json j = json::object();
  const LayoutConfig& l = r.setup.spec.layout;
  j["name"] = reference ? "reference" : r.id;
  j["reference"] = reference;
  j["layout"] = {{"tp", l.tp},
                 {"cp", l.cp},
                 {"pp", l.pp},
                 {"dp", l.dp},
                 {"zero", r.setup.spec.optimizer.zero},
                 {"sp", l.sp},
                 {"schedule", schedule_name(r.setup.run.schedule)},
                 {"vpp", l.vpp},
                 {"micro_batch", r.setup.run.micro_batch},
                 {"micro_batches", r.setup.run.micro_batches}};
  j["status"] = r.status;
  j["fits"] = r.fits;
  j["peak_memory_bytes"] = {{"planned", std::llround(r.peak_planned)}};
  json bytes = json::object();
  for (const char* g : kGroups) bytes[g] = {{"planned", std::llround(r.bytes_planned.at(g))}};
  j["estimate_ms"] = r.estimate.known ? json(1e3 * r.estimate.step) : json(nullptr);
  if (r.status != "planned") {
    j["exit"] = r.exit_code;
    j["seconds"] = r.seconds;
  }
  if (!r.error.empty()) j["error"] = r.error;
  if (r.ran()) {
    j["matches"] = r.status == "ok";
    j["loss_gap"] = std::isfinite(r.loss_gap) ? json(r.loss_gap) : json(nullptr);
    j["losses"] = r.losses;
    j["tokens_per_s"] = r.tokens_per_s;
    j["mfu"] = r.mfu;
    j["step_ms"] = r.step_ms;
    j["compute_share"] = r.compute_share;
    j["comm_share"] = r.comm_share;
    j["bubble"] = r.bubble;
    j["bubble_formula"] = r.bubble_formula;
    j["split_ms"] = {{"compute", r.step_ms * r.compute_share},
                     {"comm", r.step_ms * r.comm_share},
                     {"bubble", r.step_ms * r.bubble_of_step}};
    j["peak_memory_bytes"]["measured"] = std::llround(r.peak_measured);
    for (const char* g : kGroups)
      if (r.bytes_measured.count(g)) bytes[g]["measured"] = r.bytes_measured.at(g);
    j["plan_matches"] = r.plan_matches;
  }
  j["comm_bytes"] = bytes;
  return j;
}

SweepBar bar(const Run& r) {
  SweepBar b;
  b.name = r.title;
  b.status = r.status;
  b.fits = r.fits;
  if (r.ran()) {
    b.comm_ms = r.step_ms * r.comm_share;
    b.bubble_ms = r.step_ms * r.bubble_of_step;
    b.compute_ms = r.step_ms * r.compute_share;
  } else {
    b.note = (r.status == "timeout" ? "timed out: " : "failed: ") + r.error;
  }
  b.estimate_ms = r.estimate.known ? 1e3 * r.estimate.step : -1;
  return b;
}

// DIR: created when missing; an existing one must be empty or hold an earlier sweep, whose
// files are replaced.
void prepare_out(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    check(fs::is_directory(dir, ec), "--out '", dir, "' is not a directory");
    check(fs::is_empty(dir, ec) || fs::exists(fs::path(dir) / "sweep.jsonl", ec), "--out '", dir,
          "' is neither empty nor an earlier sweep's; name a new or empty directory");
  }
  fs::create_directories(fs::path(dir) / "runs", ec);
  check(!ec, "cannot create '", dir, "/runs': ", ec.message());
}

}  // namespace

int run_sweep(const SweepOptions& o, const TrainArgs& train) {
  const plan::RunSpec base = o.train.run_spec();
  plan::Layouts all = plan::enumerate_layouts(o.ranks, base, o.train.model, o.choices);
  // Each refusal as tetra train words it to a user of flags, which a sweep's are.
  for (plan::Skipped& s : all.skipped) s.reason = settings::worded(s.reason);
  check(!all.valid.empty(), "no layout of ", o.ranks, " rank", o.ranks > 1 ? "s" : "",
        " is valid for this model and batch: ", all.skipped.front().reason,
        all.skipped.size() > 1 ? " (and " + std::to_string(all.skipped.size() - 1) + " more)" : "");
  const plan::Machine mc = plan::machine_of(o.machine, o.train.device.dtype);
  std::vector<Run> runs(all.valid.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].setup = all.valid[i];
    plan_run(runs[i], o, mc);
  }
  std::printf("tetra sweep: %d rank%s, %s, %s, %lld steps per run\n", o.ranks,
              o.ranks > 1 ? "s" : "", o.train.model.str().c_str(), o.train.device.dtype.c_str(),
              (long long)o.train.optimizer.steps);
  std::printf("%zu layout%s to run, %zu skipped%s\n%s", runs.size(), runs.size() == 1 ? "" : "s",
              all.skipped.size(), all.skipped.empty() ? "" : ", as tetra train would refuse them:",
              skipped_summary(all.skipped).c_str());
  if (o.dry_run) {
    print_plan_table(runs);
    return 0;
  }
  prepare_out(o.out);
  std::ofstream jsonl(o.out + "/sweep.jsonl", std::ios::trunc);
  check(bool(jsonl), "cannot write '", o.out, "/sweep.jsonl'");
  const auto write = [&](const json& j) {
    jsonl << j.dump() << "\n" << std::flush;
    check(bool(jsonl), "cannot write '", o.out, "/sweep.jsonl'");
  };
  for (const plan::Skipped& s : all.skipped)
    write({{"name", plan::layout_id(s.spec)}, {"status", "skipped"}, {"reason", s.reason}});

  plan::RunSpec one = base;
  one.layout = {1, 1, 1, 1, false, 1, "1f1b"};
  one.optimizer.zero = 1;
  Run ref;
  ref.setup = plan::make_setup(one, o.train.model, 1);
  plan_run(ref, o, mc);
  ref.id = "reference";
  run_layout(ref, o, train, mc, {});
  write(record(ref, true));
  if (!ref.ran()) {
    std::fprintf(stderr, "tetra: error: the one-rank reference run %s: %s (its log: %s)\n",
                 ref.status == "timeout" ? "timed out" : "failed", ref.error.c_str(),
                 (o.out + "/runs/reference.log").c_str());
    return ref.exit_code == 2 ? 2 : 1;
  }
  std::printf("one rank: losses");
  for (double l : ref.losses) std::printf(" %.6f", l);
  std::printf(" (%.1f s)\n", ref.seconds);

  for (size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    run_layout(r, o, train, mc, ref.losses);
    write(record(r, false));
    std::printf("[%zu/%zu] %s: ", i + 1, runs.size(), r.title.c_str());
    if (r.ran())
      std::printf("%s one rank (loss gap %.1e), %.0f tok/s, bytes %s plan (%.1f s)\n",
                  r.status == "ok" ? "matches" : "does NOT match", r.loss_gap, r.tokens_per_s,
                  r.plan_matches ? "=" : "!=", r.seconds);
    else
      std::printf("%s: %s (%.1f s)\n", r.status.c_str(), r.error.c_str(), r.seconds);
    std::fflush(stdout);
  }

  const std::vector<const Run*> order = ranked(runs);
  std::printf("\n");
  print_ranked_table(order);
  std::vector<SweepBar> bars;
  for (const Run* r : order) bars.push_back(bar(*r));
  write_svg(o.out + "/sweep.svg", sweep_svg(bars, "tetra sweep: " + std::to_string(o.ranks) +
                                                      " ranks, " + o.train.model.str()));
  const Run* best = nullptr;
  for (const Run* r : order)
    if (r->status == "ok" && r->fits) {
      best = r;
      break;
    }
  write({{"name", "summary"},
         {"status", "summary"},
         {"layouts", runs.size()},
         {"skipped", all.skipped.size()},
         {"fastest", best ? json(best->id) : json(nullptr)}});
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
