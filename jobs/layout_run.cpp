#include "jobs/layout_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jobs/job.hpp"
#include "plan/compare.hpp"
#include "plan/memory.hpp"
#include "plan/traffic.hpp"
#include "plot/plot.hpp"
#include "train/match.hpp"
#include "util/error.hpp"

namespace tetra {

const char* const kRunGroups[5] = {"tp", "cp", "pp", "dp_cp", "world"};

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
  // Of the layout's settings, those that take part in it: a run of PP 1 refuses a schedule,
  // one of TP 1 --sp.
  std::set<std::string> keys = {"optimizer.zero", "optimizer.steps", "output.metrics"};
  for (const auto& k : kLayoutKeys.keys)
    if (layout_key_applies("layout." + k.name, run.layout)) keys.insert("layout." + k.name);
  const std::vector<std::string> args = train.args(run, keys);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

namespace {

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

// What a finished run's metrics say; MFU and the plan's step time on a machine without a peak
// at `peak` (0: the run's own probe).
void measure(LayoutRun& r, const std::string& metrics, const plan::Machine& mc, double peak) {
  const std::vector<json> records = read_metrics(metrics);
  const size_t first = records.size() > 1 ? 1 : 0;
  const double timed = double(records.size() - first);
  const auto num = [](const json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
  };
  const double F = model_flops_per_token(r.setup.cfg), ranks = r.setup.world();
  for (size_t i = 0; i < records.size(); ++i) {
    const json& j = records[i];
    r.losses.push_back(num(j, "loss"));
    r.peak_measured = std::max(r.peak_measured, num(j, "peak_memory_bytes"));
    if (i < first) continue;
    r.step_ms += num(j, "step_ms") / timed;
    r.compute_share += compute_share(j) / timed;
    r.bubble += num(j, "bubble") / timed;
    if (j.contains("bubble_at_measured_costs"))  // under PP
      r.bubble_at_costs += num(j, "bubble_at_measured_costs") / timed;
    if (j.contains("comm_hidden_ms"))
      r.hidden_share += num(j, "comm_hidden_ms") / num(j, "step_ms") / timed;
    r.bubble_formula = num(j, "bubble_formula");
    r.probe_flops = num(j, "tokens_per_s") * F / (ranks * num(j, "mfu"));  // its MFU's peak
  }
  if (peak <= 0) peak = r.probe_flops;
  // Throughput over the mean step time, so that tokens/s ranks the runs as their step times do.
  r.tokens_per_s = double(r.setup.spec.batch.global_batch) * r.setup.cfg.seq_len / r.step_ms * 1e3;
  r.mfu = r.tokens_per_s * F / (ranks * peak);
  for (const char* g : kRunGroups)
    if (records.back().contains("comm_bytes") && records.back()["comm_bytes"].contains(g))
      r.bytes_measured[g] = json_int(records.back()["comm_bytes"][g]).value_or(-1);
  r.bubble_of_step = std::min(r.bubble, 1 - r.compute_share);
  r.comm_share = 1 - r.compute_share - r.bubble_of_step;
  r.plan_matches = plan::compare_metrics(r.setup, metrics).match;
  if (mc.peak_flops <= 0 && std::isfinite(peak) && peak > 0) {  // a CPU: the layouts' peak
    plan::Machine probed = mc;
    probed.peak_flops = peak;
    r.estimate = plan::estimate_step(r.setup, probed);
  }
}

}  // namespace

// The step time needs a peak, which a CPU machine has only from --peak-tflops (the run's own
// probe fills it in later).
void plan_layout(LayoutRun& r, const SweepOptions& o, const plan::Machine& mc) {
  r.id = plan::layout_id(r.setup.spec);
  r.title = plan::layout_title(r.setup.spec);
  r.peak_planned = plan::peak_memory(r.setup).memory.peak();
  r.bytes_planned = plan::bytes_by_group(plan::step_traffic(r.setup, 0));
  // A CPU's ranks share its memory; GPUs hold a rank each.
  const double need = o.machine.gpu == "cpu" ? r.peak_planned * r.setup.world() : r.peak_planned;
  r.fits = need <= mc.memory_bytes;
  r.estimate = plan::estimate_step(r.setup, mc);
}

std::string run_metrics_path(const LayoutRun& r, const SweepOptions& o) {
  return o.out + "/runs/" + r.id + ".jsonl";
}

void run_layout(LayoutRun& r, const SweepOptions& o, const TrainArgs& train,
                const plan::Machine& mc, const std::vector<double>& ref, double peak,
                const std::function<bool()>& go_on) {
  const std::string metrics = run_metrics_path(r, o), log = o.out + "/runs/" + r.id + ".log";
  std::remove(metrics.c_str());  // metrics append: an earlier sweep's must not count
  const JobResult job = run_job(train_command(o, train, r.setup.spec, r.setup.world(), metrics),
                                log, o.job.run_timeout, go_on);
  r.seconds = job.seconds;
  r.exit_code = job.exit_code;
  if (job.stopped) {
    r.status = "stopped";
    r.error = "stopped before it finished";
    return;
  }
  if (job.timed_out || job.exit_code != 0) {
    r.status = job.timed_out ? "timeout" : "failed";
    r.error = job_failure(job, log, o.job.run_timeout);
    return;
  }
  try {
    measure(r, metrics, mc, peak);
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

double layouts_peak(const SweepOptions& o, const LayoutRun& ref) {
  return o.train.output.peak_tflops > 0 ? o.train.output.peak_tflops * 1e12 : ref.probe_flops;
}

std::string layouts_peak_source(const SweepOptions& o) {
  return o.train.output.peak_tflops > 0 ? "--peak-tflops" : "the one-rank reference's GEMM probe";
}

LayoutRun reference_run(const SweepOptions& o, const plan::Machine& mc) {
  plan::RunSpec one = o.train.run_spec();
  one.layout = {1, 1, 1, 1, false, 1, "1f1b"};
  one.optimizer.zero = 1;
  LayoutRun ref;
  ref.setup = plan::make_setup(one, o.train.model, 1);
  plan_layout(ref, o, mc);
  ref.id = "reference";
  return ref;
}

json run_record(const LayoutRun& r, bool reference) {
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
  for (const char* g : kRunGroups) bytes[g] = {{"planned", std::llround(r.bytes_planned.at(g))}};
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
    j["hidden_share"] = r.hidden_share;
    j["bubble"] = r.bubble;
    j["bubble_at_measured_costs"] = r.bubble_at_costs;
    j["bubble_formula"] = r.bubble_formula;
    j["split_ms"] = {{"compute", r.step_ms * r.compute_share},
                     {"comm", r.step_ms * r.comm_share},
                     {"bubble", r.step_ms * r.bubble_of_step}};
    j["peak_memory_bytes"]["measured"] = std::llround(r.peak_measured);
    for (const char* g : kRunGroups)
      if (r.bytes_measured.count(g)) bytes[g]["measured"] = r.bytes_measured.at(g);
    j["plan_matches"] = r.plan_matches;
  }
  j["comm_bytes"] = bytes;
  return j;
}

}  // namespace tetra
