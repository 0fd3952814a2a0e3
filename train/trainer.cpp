#include "train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "optim/adamw.hpp"
#include "optim/clip.hpp"
#include "optim/lr_schedule.hpp"
#include "parallel/trace.hpp"
#include "train/preempt.hpp"
#include "util/clock.hpp"

namespace tetra {
namespace {

// Every rank holds the same totals, so every rank throws the same DivergedError.
void stop_if_diverged(int64_t step, double loss, double grad_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return;
  // NaN prints as "nan" whatever its sign bit (the stream would say "-nan" for some).
  const auto show = [](double x) {
    std::ostringstream os;
    if (std::isnan(x)) return std::string("nan");
    os << x;
    return os.str();
  };
  throw DivergedError("step " + std::to_string(step) + " diverged: loss " + show(loss) +
                      ", gradient norm " + show(grad_norm) +
                      "; stopped before its update, so no checkpoint holds it");
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, MPI_Comm world)
    : Trainer(build_rank(config, world), world) {}

Trainer::Trainer(RankParts p, MPI_Comm world)
    : opt_(std::move(p.config)),
      world_(world),
      record_(std::move(p.record)),
      cfg_(p.model),
      tokenizer_(std::move(p.tokenizer)),
      data_(std::move(p.data)),
      val_(std::move(p.val)),
      work_(std::move(p.work)),
      fault_(p.fault),
      lock_(std::move(p.lock)),
      resumed_from_(p.resume.path),
      line_head_(p.resume.line),
      resume_seconds_(p.resume.seconds),
      threads_(p.threads),
      be_(std::move(p.backend)),
      grid_(std::move(p.grid)),
      params_(std::move(p.params)),
      chunks_(std::move(p.chunks)),
      executor_(std::move(p.executor)),
      token_pos_(std::move(p.token_pos)),
      seq_pos_(std::move(p.seq_pos)),
      key_pos_(std::move(p.key_pos)),
      peak_flops_(p.peak.flops),
      peak_source_(p.peak.source),
      step_(p.resume.step) {}

Trainer::~Trainer() = default;

MicroBatch Trainer::make_micro_batch(const data::Dataset& source, int64_t step, int j,
                                     Buffer* held) {
  const int S = cfg_.seq_len, b = work_.micro_batch;
  const int per_dp = opt_.batch.global_batch / grid_.layout.dp;
  const bool docs = cfg_.doc_mask;
  std::vector<int32_t> seqs(size_t(b) * (S + 1)), seq_docs(docs ? seqs.size() : 0);
  data::fill_batch(source, step, opt_.batch.global_batch, grid_.coord.dp * per_dp + j * b, b, S,
                   seqs.data(), docs ? seq_docs.data() : nullptr);
  const int64_t local = work_.local_tokens();
  std::vector<int32_t> in(static_cast<size_t>(local)), out(in.size());
  cp_slice(seqs.data(), b, S, work_.seq_pos, in.data(), out.data());
  Buffer &tokens = held[0], &targets = held[1];
  tokens = Buffer(*be_, local, DType::I32);
  targets = Buffer(*be_, local, DType::I32);
  be_->upload(tokens.flat(), in.data());
  be_->upload(targets.flat(), out.data());
  MicroBatch mb;
  if (docs) {
    // --doc-mask: the documents of this rank's tokens (the queries, cut as the tokens are) and
    // of the whole sequence (the keys, in sequence order, as CP gathers them): each rank has
    // every sequence's tokens, so no document ids travel.
    std::vector<int32_t> q_doc(in.size()), ignored(in.size()), k_doc;
    cp_slice(seq_docs.data(), b, S, work_.seq_pos, q_doc.data(), ignored.data());
    for (int i = 0; i < b; ++i)
      k_doc.insert(k_doc.end(), seq_docs.begin() + i * (S + 1), seq_docs.begin() + i * (S + 1) + S);
    Buffer &qd = held[2], &kd = held[3];
    qd = Buffer(*be_, local, DType::I32);
    kd = Buffer(*be_, int64_t(k_doc.size()), DType::I32);
    be_->upload(qd.flat(), q_doc.data());
    be_->upload(kd.flat(), k_doc.data());
    mb.pos.token_doc = qd.flat();
    mb.pos.key_doc = kd.flat();
  }
  mb.tokens = tokens.flat();
  mb.targets = targets.flat();
  mb.pos.batch = b;
  mb.pos.seq = int64_t(work_.seq_pos.size());
  mb.pos.token_pos = token_pos_.flat();
  mb.pos.seq_pos = seq_pos_.flat();
  mb.pos.key_pos = key_pos_.flat();
  return mb;
}

std::vector<CommStats*> Trainer::comm_stats() {
  std::vector<CommStats*> all = {&grid_.tp->stats, &grid_.cp->stats,    &grid_.pp->stats,
                                 &grid_.dp->stats, &grid_.dp_cp->stats, &grid_.world->stats};
  if (grid_.embed) all.push_back(&grid_.embed->stats);
  return all;
}

// One step, in the phases of the seed.
StepResult Trainer::step() {
  for (CommStats* s : comm_stats()) s->clear();
  be_->alloc_stats.reset_peak();
  const auto t0 = Clock::now();
  trace::Span span(trace::Lane::Step, [&](trace::Event& e) {
    e.name = "step " + std::to_string(step_);
    e.arg("step", step_);
  });
  const PipelineStats pipe = forward_backward();
  fault_.during_step(grid_.rank, step_);
  const StepTotals totals = reduce_totals(pipe);
  stop_if_diverged(step_, totals.loss, totals.grad_norm);
  const double lr = update(totals.grad_norm);
  regather();
  const StepResult r = measure(totals, pipe, seconds_since(t0), lr);
  ++step_;
  return r;
}

// Each unit's gradients are reduce-scattered over dp_cp as soon as its last backward is done
// (ModelChunk::backward hands them over to ZeroParams). The loss is pre-divided by the
// global token count, so the reduced gradients are the mean's.
PipelineStats Trainer::forward_backward() {
  params_->begin_step(work_.micro_batches);
  std::vector<Buffer> data(4 * work_.micro_batches);
  std::vector<MicroBatch> mbs;
  for (int j = 0; j < work_.micro_batches; ++j)
    mbs.push_back(make_micro_batch(*data_, step_, j, &data[4 * j]));
  const PipelineStats pipe = executor_->run(mbs, float(1.0 / tokens_per_step()));
  // Tied embeddings beyond PP 1: the first and the last stage sum the matrix's gradient (after
  // the schedule: inside it the two stages are at different points of their backwards).
  params_->sum_tied_grads();
  return pipe;
}

// The loss, the global gradient norm and the bubble, in one all-reduce over the world:
// gradient shards are disjoint over dp_cp and pipeline stages; the loss counts on the last
// stage's TP rank 0 only.
Trainer::StepTotals Trainer::reduce_totals(const PipelineStats& pipe) {
  // This rank's bubble in the form the schedule's formula uses: of the step for gpipe and
  // 1f1b, of the compute for interleaved.
  const double busy = pipe.seconds - pipe.wait_seconds;
  const double bubble = work_.schedule == ScheduleKind::Interleaved
                            ? (busy > 0 ? pipe.wait_seconds / busy : 0.0)
                            : (pipe.seconds > 0 ? pipe.wait_seconds / pipe.seconds : 0.0);
  const bool tp0 = grid_.coord.tp == 0;
  const bool last_stage = grid_.coord.pp == grid_.layout.pp - 1;
  double grad_sq = 0;
  {
    trace::Span norm(trace::Lane::Compute, [](trace::Event& e) { e.name = "grad-norm"; });
    grad_sq = local_grad_sum_squares(*params_, *be_, tp0);
  }
  double sums[3] = {grad_sq, (tp0 && last_stage) ? pipe.loss_sum : 0.0, bubble};
  grid_.world->all_reduce_host(sums, 3);
  return {sums[1] / tokens_per_step(), std::sqrt(sums[0]), sums[2] / grid_.world->size()};
}

double Trainer::update(double grad_norm) {
  const OptimizerConfig& o = opt_.optimizer;
  const double lr = LrSchedule{o.lr, o.min_lr, o.warmup, o.steps}.at(step_);
  trace::Span adam(trace::Lane::Compute, [](trace::Event& e) { e.name = "adam"; });
  const AdamWConfig adamw{lr, 0.9, 0.95, 1e-8, o.weight_decay};
  adamw_step(*params_, *be_, adamw, clip_scale(grad_norm, o.clip), step_ + 1);
  return lr;
}

// ZeRO-3 gathers at each use instead (a no-op there). The step's device work ends here.
void Trainer::regather() {
  params_->all_gather_weights();
  be_->synchronize();
}

StepResult Trainer::measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                            double lr) {
  StepResult r;
  r.step = step_;
  r.loss = totals.loss;
  r.lr = lr;
  r.grad_norm = totals.grad_norm;
  r.bubble = totals.bubble;
  r.bubble_formula =
      bubble_formula(work_.schedule, grid_.layout.pp, opt_.layout.vpp, work_.micro_batches);
  r.step_ms = seconds * 1e3;
  r.tokens_per_s = tokens_per_step() / seconds;
  const double world = grid_.world->size();
  r.mfu = r.tokens_per_s * model_flops_per_token(cfg_) / (world * peak_flops_);
  r.hfu = opt_.optimizer.recompute
              ? r.tokens_per_s * (model_flops_per_token(cfg_) + recompute_flops_per_token(cfg_)) /
                    (world * peak_flops_)
              : r.mfu;
  double wait_s = 0;  // inside communication calls, pipeline receives (the bubble) included
  for (Comm* c :
       {grid_.tp.get(), grid_.cp.get(), grid_.pp.get(), grid_.dp_cp.get(), grid_.embed.get()}) {
    if (!c) continue;  // embed: tied embeddings beyond PP 1 only
    r.comm[c->name()] = c->stats;
    wait_s += c->stats.seconds;
  }
  r.comm["world"] = grid_.world->stats;
  wait_s += grid_.world->stats.seconds;
  r.comm_share = (wait_s - pipe.wait_seconds) / seconds;  // the bubble is shown on its own

  // One small all-reduce over the world at the step's end, after the counters above were
  // read (so it is not in this step's bytes): every rank's compute and wait, each rank
  // writing its own slot of zeros (an all-gather), and its peak of backend memory (weights,
  // gradients, Adam state, activations), of which the step reports the largest.
  // The last slot counts the ranks that received a pre-emption signal: summed in the same
  // call, so every rank agrees on the step at which the run stops.
  const int world_size = grid_.world->size(), me = grid_.world->rank();
  std::vector<double> slots(3 * size_t(world_size) + 1, 0.0);
  slots[3 * me] = seconds - wait_s;
  slots[3 * me + 1] = wait_s;
  slots[3 * me + 2] = double(be_->alloc_stats.peak);
  slots.back() = PreemptSignals::received() != 0 ? 1 : 0;
  grid_.world->all_reduce_host(slots.data(), int(slots.size()));
  r.preempted = int(slots.back());
  for (int q = 0; q < world_size; ++q) {
    r.compute_ms.push_back(1e3 * slots[3 * q]);
    r.wait_ms.push_back(1e3 * slots[3 * q + 1]);
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, slots[3 * q + 2]);
  }
  r.straggler = find_straggler(r.compute_ms);
  return r;
}

}  // namespace tetra
