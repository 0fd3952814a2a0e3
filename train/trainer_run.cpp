// The training loop of tetra train and what it writes besides the steps: validation, samples,
// checkpoints at their steps, the trace, the export and the summary (trainer.cpp builds the
// run and takes one step).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "checkpoint/gather.hpp"
#include "checkpoint/hf_io.hpp"
#include "parallel/agree.hpp"
#include "parallel/trace.hpp"
#include "parallel/watchdog.hpp"
#include "train/generate.hpp"
#include "train/preempt.hpp"
#include "train/report.hpp"
#include "train/trainer.hpp"
#include "util/clock.hpp"

namespace tetra {

double Trainer::evaluate() {
  check(val_ != nullptr, "evaluate: this run has no validation data");
  const bool counts = grid_.coord.tp == 0 && grid_.coord.pp == grid_.layout.pp - 1;
  double loss_sum = 0;
  for (int b = 0; b < opt_.data.eval_batches; ++b) {
    std::vector<Buffer> data(4 * work_.micro_batches);
    std::vector<MicroBatch> mbs;
    for (int j = 0; j < work_.micro_batches; ++j)
      mbs.push_back(make_micro_batch(*val_, b, j, &data[4 * j]));
    const PipelineStats pipe = executor_->evaluate(mbs);
    if (counts) loss_sum += pipe.loss_sum;
  }
  grid_.world->all_reduce_host(&loss_sum, 1);
  return loss_sum / (double(opt_.data.eval_batches) * opt_.batch.global_batch * cfg_.seq_len);
}

std::map<std::string, std::vector<float>> Trainer::full_weights() {
  return gather_full(grid_, *params_, cfg_, work_.place, false);
}

std::map<std::string, std::vector<float>> Trainer::full_grads() {
  return gather_full(grid_, *params_, cfg_, work_.place, true);
}

void Trainer::export_weights(const std::string& path) {
  const auto full = full_weights();
  std::string err;
  if (grid_.rank == 0) {
    try {
      write_export(path, full, cfg_, *tokenizer_, opt_.output.export_dtype == "bf16");
    } catch (const Error& e) {
      err = e.what();
    }
  }
  agree(world_, [&] {
    if (!err.empty()) throw Error(err);
  });
}

std::string Trainer::sample(int tokens) {
  const auto full = full_weights();
  if (grid_.rank != 0) return "";
  const data::Dataset& source = val_ ? *val_ : *data_;
  std::vector<int32_t> seq(cfg_.seq_len + 1);
  source.sequence(0, seq.data());
  const std::vector<int> prompt(seq.begin(), seq.begin() + std::min(8, cfg_.seq_len));
  // Samples are drawn on the CPU from the gathered weights, whatever the training device.
  auto cpu = make_backend("cpu", threads_);
  Generator generator(*cpu, cfg_, full);
  const std::vector<int> out =
      generator.generate(prompt, SampleOptions{tokens, 0, 0, opt_.optimizer.seed});
  if (tokenizer_->model_file().empty() && cfg_.vocab > 256) {
    // Tokens of a tokenizer tetra does not have (token shards): their ids, not bytes.
    auto ids = [](const std::vector<int>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) s += ' ';
        s += std::to_string(v[i]);
      }
      return s + "]";
    };
    return ids(prompt) + " -> " + ids(out);
  }
  return printable(tokenizer_->decode(prompt)) + " -> " +
         printable(data::decode_continuation(*tokenizer_, prompt, out));
}

std::string Trainer::attention_path() const {
  const TensorParallel tp{*grid_.tp, opt_.layout.sp};
  const ContextParallel cp{*grid_.cp};
  const TokenPositions pos{work_.micro_batch,
                           int64_t(work_.seq_pos.size()),
                           token_pos_.flat(),
                           seq_pos_.flat(),
                           key_pos_.flat(),
                           {},
                           {}};
  AttnShape shape = attention_shape(BlockContext{*be_, tp, cp, cfg_, pos});
  shape.documents = cfg_.doc_mask;  // the step's micro-batches carry their documents
  return be_->attention_path(shape, compute_dtype(opt_.device));
}

std::string Trainer::startup_report() const {
  std::string data = data_->describe();
  if (val_) {
    // The evaluation takes B global batches; a smaller validation set wraps around.
    const int64_t taken = int64_t(opt_.data.eval_batches) * opt_.batch.global_batch;
    data += "\n  validation: " + val_->describe() + "; each evaluation takes " +
            std::to_string(taken) + " sequences";
    if (val_->num_sequences() < taken)
      data += ", so some twice or more (" + std::to_string(val_->num_sequences()) + " distinct)";
  }
  return tetra::startup_report(
      opt_, cfg_, work_,
      {data, be_->name(), grid_.comm_kinds(), peak_source_, attention_path(), peak_flops_});
}

int Trainer::run() {
  const PreemptSignals signals;
  const bool root = grid_.rank == 0;
  if (root) std::printf("%s", startup_report().c_str());
  if (root && !resumed_from_.empty())
    std::printf("resumed from %s at step %lld (loaded in %.3f s)\n", resumed_from_.c_str(),
                (long long)step_, resume_seconds_);
  if (step_ >= opt_.optimizer.steps) {
    finish_already_done();
    return 0;
  }
  agree(world_, [&] {
    if (root && !opt_.checkpoint.ckpt_dir.empty()) point_latest_here();
  });
  std::unique_ptr<RunReport> report;
  agree(world_, [&] {
    if (!root) return;
    if (!opt_.output.trace.empty()) trace::check_writable(opt_.output.trace);
    // The configuration by section, as the checkpoints record it.
    json recorded = record_.config;
    recorded["model"] = record_.model;
    recorded["layout"] = record_.layout;
    const std::string config =
        opt_.output.tensorboard.empty() ? "" : config_markdown(startup_report(), recorded);
    report = std::make_unique<RunReport>(
        opt_.output, ReportStart{step_, opt_.optimizer.steps, data_->entropy_floor(),
                                 std::log(double(opt_.model.vocab)), config, attention_path()});
  });
  const auto t0 = Clock::now();
  const int64_t first_step = step_;  // above 0 after a resume
  // Traced: --trace-steps steps after the run's first, which warms up (unless it is alone).
  const bool tracing = !opt_.output.trace.empty();
  const int64_t trace_from = first_step + (opt_.optimizer.steps - first_step > 1 ? 1 : 0);
  const int64_t trace_to = std::min(opt_.optimizer.steps, trace_from + opt_.output.trace_steps);
  if (tracing) trace::start(world_);
  while (step_ < opt_.optimizer.steps) {
    trace::record(tracing && step_ >= trace_from && step_ < trace_to);
    StepResult r;
    {
      const watchdog::StepWatch watched(step_);  // a hang outside any call is caught too
      r = step();
    }
    trace::record(false);
    if (val_ && (step_ == opt_.optimizer.steps ||
                 (opt_.data.eval_every > 0 && step_ % opt_.data.eval_every == 0)))
      r.val_loss = evaluate();
    std::string text;
    if (opt_.output.sample_every > 0 &&
        (step_ % opt_.output.sample_every == 0 || step_ == opt_.optimizer.steps))
      text = sample();
    // The first step of a run includes warm-up: left out of the averages.
    if (root)
      report->step(r, grid_.layout.pp > 1,
                   r.step > first_step || opt_.optimizer.steps - first_step == 1);
    if (root && !text.empty()) std::printf("sample: %s\n", text.c_str());
    const bool every = opt_.checkpoint.ckpt_every > 0 && step_ % opt_.checkpoint.ckpt_every == 0;
    const bool preempted = r.preempted > 0 && step_ < opt_.optimizer.steps;
    if (!opt_.checkpoint.ckpt_dir.empty() &&
        (every || step_ == opt_.optimizer.steps || preempted)) {
      const double seconds = save_checkpoint();
      if (root)
        std::printf("checkpoint: step %lld saved to %s in %.3f s\n", (long long)step_,
                    opt_.checkpoint.ckpt_dir.c_str(), seconds);
    }
    if (preempted) {
      lock_.reset();  // released before exit: the resumed job may start at once, anywhere
      if (!root) return exit_status::kPreempted;
      report->summary(first_step, step_ - 1, seconds_since(t0), seconds_since(started_));
      std::printf(
          "pre-empted: a signal reached %d of %d ranks; stopped after step %lld%s; exit "
          "status %d: resume with --resume auto\n",
          r.preempted, grid_.world->size(), (long long)step_ - 1,
          opt_.checkpoint.ckpt_dir.empty() ? " with no --ckpt-dir, so nothing was saved"
                                           : ", checkpointed",
          exit_status::kPreempted);
      std::fflush(stdout);
      return exit_status::kPreempted;
    }
  }
  if (tracing) {
    const Coord& c = grid_.coord;
    std::ostringstream me;
    me << "rank " << grid_.rank << " (tp " << c.tp << " cp " << c.cp << " pp " << c.pp << " dp "
       << c.dp << ")";
    agree(world_, [&] { trace::write(world_, opt_.output.trace, me.str()); });
  }
  if (!opt_.output.export_.empty()) export_weights(opt_.output.export_);
  if (!root) return 0;
  report->summary(first_step, opt_.optimizer.steps - 1, seconds_since(t0), seconds_since(started_));
  if (!opt_.output.export_.empty())
    std::printf("exported weights to %s\n", opt_.output.export_.c_str());
  if (tracing)
    std::printf("trace of steps %lld-%lld written to %s\n", (long long)trace_from,
                (long long)trace_to - 1, opt_.output.trace.c_str());
  return 0;
}

}  // namespace tetra
