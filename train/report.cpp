#include "train/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "backend/fusions.hpp"
#include "parallel/chunks.hpp"
#include "parallel/cp.hpp"
#include "util/json.hpp"

namespace tetra {

std::string startup_report(const TrainConfig& opt, const ModelConfig& cfg, const RankWork& work,
                           const StartupFacts& facts) {
  std::ostringstream os;
  const Layout& l = work.layout;
  os << "tetra train: " << l.world() << " rank" << (l.world() > 1 ? "s" : "") << ", " << l.str()
     << (opt.layout.sp ? " with SP" : "") << ", ZeRO-" << opt.optimizer.zero
     << (opt.optimizer.recompute ? ", recompute full" : "") << "\n";
  os << "  model: " << cfg.str() << "; " << std::fixed << std::setprecision(2)
     << cfg.total_params() / 1e6 << "M parameters (" << cfg.matmul_params() / 1e6
     << "M in matmuls)\n";
  os << "  batch: " << opt.batch.global_batch << " sequences x " << cfg.seq_len << " tokens; "
     << work.micro_batches << " micro-batch" << (work.micro_batches > 1 ? "es" : "") << " of "
     << work.micro_batch << " per DP rank\n";
  if (weight_delay_capped(work.schedule, l.pp, work.weight_delay))
    os << "  schedule: zb-h1 running " << weight_delay_text(work.weight_delay)
       << ": the paper's delays would hold more than 1f1b's fullest rank (tetra plan shows "
          "both)\n";
  os << "  data: " << facts.data << "\n";
  os << "  device: " << facts.device << "; communicators: " << facts.communicators << "\n";
  os << "  attention: " << facts.attention << "\n";
  // Which GPU fusions run (backend/fusions.hpp), so that a device log says what it measured.
  os << "  " << fusions_line() << "\n";
  if (opt.device.dtype == "bf16")
    os << "  precision: bf16 weights and activations; fp32 master weights, gradients and Adam "
          "state\n";
  os << "  peak: " << std::setprecision(1) << facts.peak_flops / 1e9 << " GFLOP/s per rank, "
     << facts.peak_source << "\n";
  os << "  rank   tp cp pp dp   tokens of each sequence   layers\n";
  for (int r = 0; r < l.world(); ++r) {
    const Coord c = coord_of(l, r);
    os << "  " << std::setw(4) << r << "   " << std::setw(2) << c.tp << " " << std::setw(2) << c.cp
       << " " << std::setw(2) << c.pp << " " << std::setw(2) << c.dp << "   ";
    os << std::left << std::setw(26) << cp_ranges(cfg.seq_len, l.cp, c.cp) << std::right
       << stage_label(work.chunks, c.pp, cfg.layers) << "\n";
  }
  return os.str();
}

std::string config_markdown(const std::string& startup, const json& config) {
  // Markdown keeps a line indented by four spaces as it is.
  const auto preformatted = [](const std::string& text) {
    std::string out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) out += "    " + line + "\n";
    return out;
  };
  return preformatted(startup) + "\nthe configuration, as checkpoints record it:\n\n" +
         preformatted(config.dump(2));
}

RunReport::RunReport(const OutputConfig& out, const ReportStart& start)
    : metrics_path_(out.metrics),
      steps_(start.steps),
      entropy_floor_(start.entropy_floor),
      ln_vocab_(start.ln_vocab),
      attention_(start.attention),
      interleaved_(start.interleaved),
      split_backward_(start.split_backward) {
  if (!out.metrics.empty()) {
    // Appended to (a restart continues the file), never through a link (util/output_file.hpp).
    const Temporary f = open_for_append(out.metrics, true);
    check(f.fd >= 0, "cannot open `output.metrics` file '", out.metrics, "': ", f.problem);
    metrics_ = OutputStream(f.fd);
  }
  if (!out.tensorboard.empty()) {
    tensorboard_ = std::make_unique<TensorBoardWriter>(out.tensorboard);
    // What earlier files hold from here on was lost and is trained again (a restart): the
    // reader drops it.
    tensorboard_->session_start(start.first_step);
    tensorboard_->text(start.first_step, "config", start.config);
  }
}

json RunReport::record(const StepResult& r) const {
  json j = json::object();
  j["step"] = r.step;
  // A diverged run still gets its record: JSON has no NaN or infinity, so null. Finite
  // values are written with the digits that read back to the same double.
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  j["loss"] = num(r.loss);
  j["lr"] = num(r.lr);
  j["grad_norm"] = num(r.grad_norm);
  j["tokens_per_s"] = num(r.tokens_per_s);
  j["mfu"] = num(r.mfu);
  j["hfu"] = num(r.hfu);
  j["step_ms"] = num(r.step_ms);
  j["comm_share"] = num(r.comm_share);
  j["comm_exposed_ms"] = num(r.comm_exposed_ms);
  j["comm_hidden_ms"] = num(r.comm_hidden_ms);
  j["bubble"] = num(r.bubble);
  j["bubble_formula"] = num(r.bubble_formula);
  j["bubble_formula_of_compute"] = num(r.bubble_formula_of_compute);
  if (!r.pass_ms.empty()) {
    j["bubble_at_measured_costs"] = num(r.bubble_at_measured_costs);
    json f = json::array(), b = json::array(), w = json::array();
    for (const PassCosts& c : r.pass_ms)
      f.push_back(num(c.f)), b.push_back(num(c.b)), w.push_back(num(c.w));
    j["pass_ms"] = split_backward_ ? json{{"F", f}, {"B", b}, {"W", w}} : json{{"F", f}, {"B", b}};
  }
  j["peak_memory_bytes"] = int64_t(r.peak_memory_bytes);
  j["attention_path"] = attention_;
  if (r.val_loss >= 0) j["val_loss"] = num(r.val_loss);
  json bytes = json::object();
  for (const auto& [group, s] : r.comm) bytes[group] = int64_t(std::llround(s.bytes));
  j["comm_bytes"] = bytes;
  json compute = json::array(), wait = json::array();
  for (size_t q = 0; q < r.compute_ms.size(); ++q) {
    compute.push_back(num(r.compute_ms[q]));
    wait.push_back(num(r.wait_ms[q]));
  }
  j["compute_ms"] = compute;
  j["wait_ms"] = wait;
  j["straggler"] = r.straggler.rank >= 0 ? json(r.straggler.rank) : json(nullptr);
  if (entropy_floor_ >= 0) j["entropy_floor"] = entropy_floor_;
  j["ln_vocab"] = ln_vocab_;
  return j;
}

void RunReport::step(const StepResult& r, bool pipelined, bool timed) {
  last_loss_ = r.loss;
  if (r.val_loss >= 0) last_val_loss_ = r.val_loss;
  peak_memory_ = std::max(peak_memory_, r.peak_memory_bytes);
  if (timed) {
    const double seconds = r.step_ms / 1e3;
    timed_tokens_ += r.tokens_per_s * seconds;
    timed_seconds_ += seconds;
    mfu_seconds_ += r.mfu * seconds;
    hfu_seconds_ += r.hfu * seconds;
  }
  wait_ms_.resize(r.wait_ms.size());
  for (size_t q = 0; q < r.wait_ms.size(); ++q) wait_ms_[q] += r.wait_ms[q];
  straggler_steps_ += r.straggler.rank >= 0;
  eta_.step_ended(seconds_since(created_));
  std::printf(
      "step %5lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %8.0f tok/s | MFU %5.2f%% | "
      "HFU %5.2f%% | %7.1f ms | comm %4.1f%%",
      (long long)r.step, (long long)steps_, r.loss, r.lr, r.grad_norm, r.tokens_per_s, 100 * r.mfu,
      100 * r.hfu, r.step_ms, 100 * r.comm_share);
  // What ran beside the compute, as a share of the step like the exposed part before it.
  if (r.comm_hidden_ms > 0) std::printf(" (+%.1f%% hidden)", 100 * r.comm_hidden_ms / r.step_ms);
  // The bubble is the idle share of the step; the interleaved schedule's paper gives its
  // formula as a ratio to the compute, printed beside.
  if (pipelined) {
    std::printf(" | bubble %4.1f%% (at costs %4.1f%%, formula %4.1f%%", 100 * r.bubble,
                100 * r.bubble_at_measured_costs, 100 * r.bubble_formula);
    if (interleaved_) std::printf("; idle/compute %4.1f%%", 100 * r.bubble_formula_of_compute);
    std::printf(")");
  }
  if (r.val_loss >= 0) std::printf(" | val %.4f", r.val_loss);
  const double left = eta_.seconds_left(steps_ - r.step - 1);
  if (left >= 0 && r.step + 1 < steps_) std::printf(" | eta %s", short_duration(left).c_str());
  // The rank that held the step back, and the wait it added to the others.
  if (r.straggler.rank >= 0)
    std::printf(" | straggler rank %d: compute %.1f ms (median %.1f), cost the others %.1f ms",
                r.straggler.rank, r.straggler.compute, r.straggler.median, r.straggler.cost);
  std::printf("\n");
  std::fflush(stdout);
  if (!metrics_.is_open() && !tensorboard_) return;
  const json j = record(r);
  if (metrics_.is_open()) {
    // A full disk must stop the run, not drop its metrics without a word.
    const bool written = metrics_.write(j.dump() + "\n");  // errno before strerror reads it
    check(written, "cannot write `output.metrics` file '", metrics_path_,
          "': ", std::strerror(errno));
  }
  if (tensorboard_) tensorboard_->scalars(r.step, scalar_tags(j));
}

void RunReport::summary(int64_t first_step, int64_t last_step, double seconds, double total) const {
  // Throughput is the timed steps' tokens over their time, never a mean of the steps' rates.
  const double t = timed_seconds_ > 0 ? timed_seconds_ : 1;
  std::printf("summary: steps %lld-%lld in %.1f s (total %s) | final loss %.4f",
              (long long)first_step, (long long)last_step, seconds, short_duration(total).c_str(),
              last_loss_);
  if (entropy_floor_ >= 0)
    std::printf(" (entropy floor %.4f, ln(vocab) %.4f)", entropy_floor_, ln_vocab_);
  if (last_val_loss_ >= 0) std::printf(" | validation loss %.4f", last_val_loss_);
  std::printf(
      " | %.0f tok/s (%.0f tokens in %.3f s of timed steps) | MFU %.2f%% | HFU %.2f%% | peak "
      "memory per rank %.1f MiB\n",
      timed_tokens_ / t, timed_tokens_, timed_seconds_, 100 * mfu_seconds_ / t,
      100 * hfu_seconds_ / t, peak_memory_ / (1 << 20));
  if (wait_ms_.size() < 2) return;
  std::printf("wait per rank over the run (s), %d step%s with a straggler:", straggler_steps_,
              straggler_steps_ == 1 ? "" : "s");
  for (size_t q = 0; q < wait_ms_.size(); ++q)
    std::printf("%s %zu: %.3f", q == 0 ? "" : ",", q, wait_ms_[q] / 1e3);
  std::printf("\n");
}

}  // namespace tetra
