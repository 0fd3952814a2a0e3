// The training loop of tetra train and what it writes besides the steps: validation, samples,
// checkpoints at their steps, the trace, the export and the summary (trainer.cpp builds the
// run and takes one step).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

#include "checkpoint/gather.hpp"
#include "checkpoint/hf_io.hpp"
#include "parallel/agree.hpp"
#include "parallel/trace.hpp"
#include "parallel/watchdog.hpp"
#include "train/preempt.hpp"
#include "train/report.hpp"
#include "train/trainer.hpp"
#include "transformer/generator.hpp"
#include "util/clock.hpp"
#include "util/format.hpp"

namespace tetra {

double Trainer::evaluate() {
  check(parts_.val != nullptr, "evaluate: this run has no validation data");
  const int batches = config().data.eval_batches;
  double loss_sum = 0;
  for (int b = 0; b < batches; ++b) {
    const Batch batch = batch_of(*parts_.val, b);
    const PipelineStats pipe = parts_.executor->evaluate(batch.micro);
    if (counts_loss()) loss_sum += pipe.loss_sum;
  }
  parts_.grid.world->all_reduce_host(&loss_sum, 1);
  return loss_sum / (double(batches) * tokens_per_step());
}

std::map<std::string, std::vector<float>> Trainer::full_weights() {
  return gather_full(parts_.grid, *parts_.params, model(), parts_.work.place, false);
}

std::map<std::string, std::vector<float>> Trainer::full_grads() {
  return gather_full(parts_.grid, *parts_.params, model(), parts_.work.place, true);
}

void Trainer::export_weights(const std::string& path) {
  const auto full = full_weights();
  std::string err;
  if (parts_.grid.rank == 0) {
    try {
      write_export(path, full, model(), *parts_.tokenizer, config().output.export_dtype == "bf16");
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
  if (parts_.grid.rank != 0) return "";
  const ModelConfig& m = model();
  const data::Tokenizer& tokenizer = *parts_.tokenizer;
  const data::Dataset& source = parts_.val ? *parts_.val : *parts_.data;
  std::vector<int32_t> seq(m.seq_len + 1);
  source.sequence(0, seq.data());
  const std::vector<int> prompt(seq.begin(), seq.begin() + std::min(8, m.seq_len));
  // Samples are drawn on the CPU from the gathered weights, whatever the training device.
  auto cpu = make_backend("cpu", parts_.threads);
  Generator generator(*cpu, m, full);
  const std::vector<int> out =
      generator.generate(prompt, SampleOptions{tokens, 0, 0, config().optimizer.seed});
  if (tokenizer.model_file().empty() && m.vocab > 256) {
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
  return printable(tokenizer.decode(prompt)) + " -> " +
         printable(data::decode_continuation(tokenizer, prompt, out));
}

std::string Trainer::attention_path() const {
  const TensorParallel tp{*parts_.grid.tp, config().layout.sp};
  const ContextParallel cp{*parts_.grid.cp};
  const RankWork& w = parts_.work;
  const TokenPositions pos{w.micro_batch,
                           int64_t(w.seq_pos.size()),
                           parts_.token_pos.flat(),
                           parts_.seq_pos.flat(),
                           parts_.key_pos.flat(),
                           {},
                           {}};
  Backend& be = *parts_.backend;
  AttnShape shape = attention_shape(BlockContext{be, tp, cp, model(), pos});
  shape.documents = model().doc_mask;  // the step's micro-batches carry their documents
  return be.attention_path(shape, compute_dtype(config().device));
}

std::string Trainer::startup_report() const {
  const data::Dataset* val = parts_.val.get();
  std::string data = parts_.data->describe();
  if (val) {
    // The evaluation takes B global batches; a smaller validation set wraps around.
    const int64_t taken = int64_t(config().data.eval_batches) * config().batch.global_batch;
    data += "\n  validation: " + val->describe() + "; each evaluation takes " +
            std::to_string(taken) + " sequences";
    if (val->num_sequences() < taken)
      data += ", so some twice or more (" + std::to_string(val->num_sequences()) + " distinct)";
  }
  return settings::worded(
      tetra::startup_report(config(), model(), parts_.work,
                            {data, parts_.backend->name(), parts_.grid.comm_kinds(),
                             parts_.peak.source, attention_path(), parts_.peak.flops}),
      config().origin);
}

// The run, in its phases: the start-up report; the loop of steps, each followed at its
// cadence by an evaluation, a sample and a checkpoint, and stopped early by pre-emption; the
// end.
int Trainer::run() {
  const PreemptSignals signals;
  report_start();
  if (step_ >= config().optimizer.steps) return finish_already_done();
  start_run();
  while (step_ < config().optimizer.steps) {
    StepResult r = watched_step();
    after_step(r);
    if (preempted(r)) return stop(r);
  }
  return finish();
}

void Trainer::report_start() const {
  if (parts_.grid.rank != 0) return;
  std::printf("%s", startup_report().c_str());
  if (!parts_.resume.path.empty())
    std::printf("resumed from %s at step %lld (loaded in %.3f s)\n", parts_.resume.path.c_str(),
                (long long)step_, parts_.resume.seconds);
}

void Trainer::start_run() {
  const bool root = parts_.grid.rank == 0;
  const TrainConfig& c = config();
  // The outputs were checked before anything changed (train/outputs.hpp): what is left to fail
  // here is the file system itself, before `latest` moves.
  agree(world_, [&] {
    if (!root) return;
    // The configuration by section, as the checkpoints record it.
    json recorded = parts_.record.config;
    recorded["model"] = parts_.record.model;
    recorded["layout"] = parts_.record.layout;
    const std::string text =
        c.output.tensorboard.empty() ? "" : config_markdown(startup_report(), recorded);
    report_ = std::make_unique<RunReport>(
        c.output, ReportStart{step_, c.optimizer.steps, parts_.data->entropy_floor(),
                              std::log(double(model().vocab)), text, attention_path(),
                              parts_.work.schedule == ScheduleKind::Interleaved,
                              splits_backward(parts_.work.schedule, parts_.work.weight_delay)});
  });
  agree(world_, [&] {
    if (root && !c.checkpoint.ckpt_dir.empty()) point_latest_here();
  });
  loop_started_ = Clock::now();
  if (!c.output.trace.empty()) trace::start(world_);
}

Trainer::StepRange Trainer::traced_steps() const {
  const int64_t first = parts_.resume.step, steps = config().optimizer.steps;
  const int64_t from = first + (steps - first > 1 ? 1 : 0);
  return {from, std::min(steps, from + config().output.trace_steps)};
}

StepResult Trainer::watched_step() {
  const StepRange traced = traced_steps();
  trace::record(!config().output.trace.empty() && step_ >= traced.from && step_ < traced.to);
  StepResult r;
  {
    const watchdog::StepWatch watched(step_);  // a hang outside any call is caught too
    r = step();
  }
  trace::record(false);
  return r;
}

void Trainer::after_step(StepResult& r) {
  const TrainConfig& c = config();
  const bool root = parts_.grid.rank == 0, last = step_ == c.optimizer.steps;
  const auto every = [&](int64_t n) { return n > 0 && step_ % n == 0; };
  if (parts_.val && (last || every(c.data.eval_every))) r.val_loss = evaluate();
  std::string text;
  if (c.output.sample_every > 0 && (every(c.output.sample_every) || last)) text = sample();
  // The first step of a run includes warm-up: left out of the averages.
  const int64_t first = parts_.resume.step;
  if (root)
    report_->step(r, parts_.grid.layout.pp > 1, r.step > first || c.optimizer.steps - first == 1);
  if (root && !text.empty()) std::printf("sample: %s\n", text.c_str());
  if (c.checkpoint.ckpt_dir.empty()) return;
  if (std::optional<ckpt::Saved> s = saver_.poll()) saved(*s);
  if (every(c.checkpoint.ckpt_every) || last || preempted(r)) {
    save_checkpoint();
    // Pre-emption and the end of the run wait for it: the run is over once it is installed.
    if (!c.checkpoint.ckpt_async || last || preempted(r)) saved(saver_.wait());
  }
}

bool Trainer::preempted(const StepResult& r) const {
  return r.preempted > 0 && step_ < config().optimizer.steps;
}

int Trainer::stop(const StepResult& r) {
  parts_.lock.reset();  // released before exit: the resumed job may start at once, anywhere
  // SIGINT (Ctrl-C) on any rank: a person stopped the run, no supervisor restarts it.
  const int status = r.interrupted > 0 ? exit_status::kInterrupted : exit_status::kPreempted;
  if (parts_.grid.rank != 0) return status;
  report_->summary(parts_.resume.step, step_ - 1, seconds_since(loop_started_),
                   seconds_since(started_));
  const bool saved = !config().checkpoint.ckpt_dir.empty();
  const std::string line =
      std::string(r.interrupted > 0 ? "interrupted (SIGINT)" : "pre-empted") +
      ": a signal reached " + std::to_string(r.preempted) + " of " +
      std::to_string(parts_.grid.world->size()) + " ranks; stopped after step " +
      std::to_string(step_ - 1) +
      (saved ? ", checkpointed" : " with no `checkpoint.ckpt_dir`, so nothing was saved") +
      "; exit status " + std::to_string(status) +
      (saved ? ": resume with `checkpoint.resume` auto" : "");
  std::printf("%s\n", settings::worded(line, config().origin).c_str());
  std::fflush(stdout);
  return status;
}

int Trainer::finish() {
  const OutputConfig& out = config().output;
  const bool root = parts_.grid.rank == 0;
  if (!out.trace.empty()) {
    const Coord& c = parts_.grid.coord;
    std::ostringstream me;
    me << "rank " << parts_.grid.rank << " (tp " << c.tp << " cp " << c.cp << " pp " << c.pp
       << " dp " << c.dp << ")";
    agree(world_, [&] { trace::write(world_, out.trace, me.str()); });
  }
  if (!out.export_.empty()) export_weights(out.export_);
  if (!root) return 0;
  report_->summary(parts_.resume.step, config().optimizer.steps - 1, seconds_since(loop_started_),
                   seconds_since(started_));
  if (!out.export_.empty()) std::printf("exported weights to %s\n", out.export_.c_str());
  if (!out.trace.empty()) {
    const StepRange traced = traced_steps();
    std::printf("trace of steps %lld-%lld written to %s\n", (long long)traced.from,
                (long long)traced.to - 1, out.trace.c_str());
  }
  return 0;
}

}  // namespace tetra
