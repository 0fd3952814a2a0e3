#include "train/trainer.hpp"

#include <csignal>

#include <algorithm>
#include <cmath>
#include <map>
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

// The measured bubble, each rank's idle share of its pipeline's step, averaged over the ranks,
// from every world rank's schedule span and time blocked in receives (slots per rank, at
// `span` and `span + 1`). A rank idles while blocked and, its list done, until the last rank
// of its pipeline is done with its own (1F1B's last stage while the first runs its last
// backwards): the pipeline's step is its longest rank's schedule, all of them starting at the
// step's start. At PP 1 it is 0.
double measured_bubble(const Layout& l, const std::vector<double>& slots, size_t per_rank,
                       size_t span) {
  const auto pipeline_of = [&](int q) {  // the world rank of q's first stage
    Coord c = coord_of(l, q);
    c.pp = 0;
    return rank_of(l, c);
  };
  const auto at = [&](int q, size_t i) { return slots[per_rank * size_t(q) + span + i]; };
  std::map<int, double> longest;  // by pipeline
  for (int q = 0; q < l.world(); ++q)
    longest[pipeline_of(q)] = std::max(longest[pipeline_of(q)], at(q, 0));
  double sum = 0;
  for (int q = 0; q < l.world(); ++q) {
    const double step = longest[pipeline_of(q)];
    if (step > 0) sum += (at(q, 1) + step - at(q, 0)) / step;
  }
  return sum / l.world();
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, MPI_Comm world)
    : parts_(build_rank(config, world)),
      bubble_forms_(bubble_forms(parts_.work.schedule, parts_.grid.layout.pp,
                                 parts_.config.layout.vpp, parts_.work.micro_batches,
                                 parts_.work.weight_delay)),
      world_(world),
      step_(parts_.resume.step),
      line_head_(parts_.resume.line),
      saver_(world) {}

Trainer::~Trainer() = default;

Trainer::Batch Trainer::batch_of(const data::Dataset& source, int64_t index) {
  const RankWork& w = parts_.work;
  const int S = model().seq_len, b = w.micro_batch, G = config().batch.global_batch;
  const int per_dp = G / parts_.grid.layout.dp;
  const int64_t local = w.local_tokens();
  const bool docs = model().doc_mask;
  Batch batch;
  batch.buffers.reserve((docs ? 4 : 2) * size_t(w.micro_batches));  // references stay valid
  Backend& be = *parts_.backend;
  const auto upload = [&](const std::vector<int32_t>& v) {
    Buffer& t = batch.buffers.emplace_back(be, int64_t(v.size()), DType::I32);
    be.upload(t.flat(), v.data());
    return t.flat();
  };
  for (int j = 0; j < w.micro_batches; ++j) {
    // Micro-batch j: b sequences of this DP rank's share, this CP rank's tokens of each.
    std::vector<int32_t> seqs(size_t(b) * (S + 1)), seq_docs(docs ? seqs.size() : 0);
    data::fill_batch(source, index, G, parts_.grid.coord.dp * per_dp + j * b, b, S, seqs.data(),
                     docs ? seq_docs.data() : nullptr);
    std::vector<int32_t> in(static_cast<size_t>(local)), out(in.size());
    cp_slice(seqs.data(), b, S, w.seq_pos, in.data(), out.data());
    MicroBatch& mb = batch.micro.emplace_back();
    mb.tokens = upload(in);
    mb.targets = upload(out);
    mb.pos.batch = b;
    mb.pos.seq = int64_t(w.seq_pos.size());
    mb.pos.token_pos = parts_.token_pos.flat();
    mb.pos.seq_pos = parts_.seq_pos.flat();
    mb.pos.key_pos = parts_.key_pos.flat();
    if (docs) {
      // `model.doc_mask`: the documents of this rank's tokens (the queries, cut as the tokens
      // are) and of the whole sequence (the keys, in sequence order, as CP gathers them):
      // each rank has every sequence's tokens, so no document ids travel.
      std::vector<int32_t> q_doc(in.size()), ignored(in.size()), k_doc;
      cp_slice(seq_docs.data(), b, S, w.seq_pos, q_doc.data(), ignored.data());
      for (int i = 0; i < b; ++i)
        k_doc.insert(k_doc.end(), seq_docs.begin() + i * (S + 1),
                     seq_docs.begin() + i * (S + 1) + S);
      mb.pos.token_doc = upload(q_doc);
      mb.pos.key_doc = upload(k_doc);
    }
  }
  return batch;
}

std::vector<CommStats*> Trainer::comm_stats() {
  const Grid& g = parts_.grid;
  std::vector<CommStats*> all = {&g.tp->stats, &g.cp->stats,    &g.pp->stats,
                                 &g.dp->stats, &g.dp_cp->stats, &g.world->stats};
  if (g.embed) all.push_back(&g.embed->stats);
  return all;
}

// One step, in the four phases of a training step: forward and backward over the
// micro-batches, the synchronisation of the gradients (reduce-scattered over dp_cp as each
// unit's backward ends, then the step's totals), the optimizer's update, and the measurements.
StepResult Trainer::step() {
  for (CommStats* s : comm_stats()) s->clear();
  parts_.backend->alloc_stats.reset_peak();
  const auto t0 = Clock::now();
  trace::Span span(trace::Lane::Step, [&](trace::Event& e) {
    e.name = "step " + std::to_string(step_);
    e.arg("step", step_);
  });
  const PipelineStats pipe = forward_backward();
  parts_.fault.during_step(parts_.grid.rank, step_);
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
  parts_.params->begin_step(parts_.work.micro_batches);
  const Batch batch = batch_of(*parts_.data, step_);
  const PipelineStats pipe =
      parts_.executor->train_step(batch.micro, float(1.0 / tokens_per_step()));
  // Tied embeddings beyond PP 1: the first and the last stage sum the matrix's gradient (after
  // the schedule: inside it the two stages are at different points of their backwards).
  parts_.params->sum_tied_grads();
  return pipe;
}

// The loss and the global gradient norm, in one all-reduce over the world: gradient shards
// are disjoint over dp_cp and pipeline stages; the loss counts on the last stage's TP rank 0
// only.
Trainer::StepTotals Trainer::reduce_totals(const PipelineStats& pipe) {
  double grad_sq = 0;
  {
    trace::Span norm(trace::Lane::Compute, [](trace::Event& e) { e.name = "grad-norm"; });
    grad_sq = local_grad_sum_squares(*parts_.params, *parts_.backend, parts_.grid.coord.tp == 0);
  }
  double sums[2] = {grad_sq, counts_loss() ? pipe.loss_sum : 0.0};
  parts_.grid.world->all_reduce_host(sums, 2);
  return {sums[1] / tokens_per_step(), std::sqrt(sums[0])};
}

double Trainer::update(double grad_norm) {
  const OptimizerConfig& o = config().optimizer;
  const double lr = LrSchedule{o.lr, o.min_lr, o.warmup, o.steps}.at(step_);
  trace::Span adam(trace::Lane::Compute, [](trace::Event& e) { e.name = "adam"; });
  const AdamWConfig adamw{lr, 0.9, 0.95, 1e-8, o.weight_decay};
  adamw_step(*parts_.params, *parts_.backend, adamw, clip_scale(grad_norm, o.clip), step_ + 1);
  return lr;
}

// ZeRO-3 gathers at each use instead (a no-op there). The step's device work ends here.
void Trainer::regather() {
  parts_.params->all_gather_weights();
  parts_.backend->synchronize();
}

StepResult Trainer::measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                            double lr) {
  const Grid& g = parts_.grid;
  const RankWork& w = parts_.work;
  StepResult r;
  r.step = step_;
  r.loss = totals.loss;
  r.lr = lr;
  r.grad_norm = totals.grad_norm;
  r.bubble_formula = bubble_forms_.of_step;
  r.bubble_formula_of_compute = bubble_forms_.of_compute;
  r.step_ms = seconds * 1e3;
  r.tokens_per_s = tokens_per_step() / seconds;
  const double world = g.world->size();
  r.mfu = r.tokens_per_s * model_flops_per_token(model()) / (world * parts_.peak.flops);
  r.hfu = config().optimizer.recompute
              ? r.tokens_per_s *
                    (model_flops_per_token(model()) + recompute_flops_per_token(model())) /
                    (world * parts_.peak.flops)
              : r.mfu;
  double wait_s = 0;    // inside communication calls, pipeline receives (the bubble) included
  double hidden_s = 0;  // queued collectives that ran while this rank computed
  for (Comm* c :
       {g.tp.get(), g.cp.get(), g.pp.get(), g.dp_cp.get(), g.embed.get(), g.world.get()}) {
    if (!c) continue;  // embed: tied embeddings beyond PP 1 only
    r.comm[c->name()] = c->stats;
    wait_s += c->stats.seconds;
    hidden_s += c->stats.hidden_seconds();
  }
  r.comm_share = (wait_s - pipe.wait_seconds) / seconds;  // the bubble is shown on its own
  r.comm_exposed_ms = 1e3 * (wait_s - pipe.wait_seconds);
  r.comm_hidden_ms = 1e3 * hidden_s;

  // One small all-reduce over the world at the step's end, after the counters above were
  // read (so it is not in this step's bytes): every rank's compute and wait, each rank
  // writing its own slots of zeros (an all-gather), its peak of backend memory (weights,
  // gradients, Adam state, activations), of which the step reports the largest, and its
  // pipeline schedule's span and time blocked in receives (the bubble, below).
  // The last two slots count the ranks that received a pre-emption signal, and SIGINT among
  // them: summed in the same call, so every rank agrees on the step at which the run stops and
  // on its exit status.
  // Under PP the same call sums each model chunk's mean pass costs over the world / PP ranks
  // that hold it (3 slots per chunk, after the ranks'), each adding its share of the mean.
  const int world_size = g.world->size(), me = g.world->rank();
  const int P = g.layout.pp, V = config().layout.vpp, K = P > 1 ? P * V : 0;
  constexpr size_t kPerRank = 5;
  const size_t costs_at = kPerRank * size_t(world_size);
  std::vector<double> slots(costs_at + 3 * size_t(K) + 2, 0.0);
  double* mine = &slots[kPerRank * size_t(me)];
  mine[0] = seconds - wait_s;
  mine[1] = wait_s;
  mine[2] = double(parts_.backend->alloc_stats.peak);
  mine[3] = pipe.seconds;
  mine[4] = pipe.wait_seconds;
  const double share = 1e3 / (double(w.micro_batches) * (world_size / P));  // ms, mean of means
  for (size_t v = 0; K > 0 && v < pipe.pass_seconds.size(); ++v) {
    const PassCosts& spent = pipe.pass_seconds[v];
    double* chunk =
        &slots[costs_at + 3 * size_t(chunk_id(placement(w.schedule), P, g.coord.pp, int(v)))];
    chunk[0] = share * spent.f, chunk[1] = share * spent.b, chunk[2] = share * spent.w;
  }
  slots.end()[-2] = PreemptSignals::received() != 0 ? 1 : 0;
  slots.back() = PreemptSignals::received() == SIGINT ? 1 : 0;
  g.world->all_reduce_host(slots.data(), int(slots.size()));
  r.preempted = int(slots.end()[-2]);
  r.interrupted = int(slots.back());
  for (int q = 0; q < world_size; ++q) {
    const double* theirs = &slots[kPerRank * size_t(q)];
    r.compute_ms.push_back(1e3 * theirs[0]);
    r.wait_ms.push_back(1e3 * theirs[1]);
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, theirs[2]);
  }
  r.straggler = find_straggler(r.compute_ms);
  r.bubble = measured_bubble(g.layout, slots, kPerRank, 3);
  // The bubble the pure schedule gives at those costs, communication taken as free: what the
  // measured one would be if the passes were all there were (docs/design.md, Bubble reporting).
  for (int k = 0; k < K; ++k) {
    const double* chunk = &slots[costs_at + 3 * size_t(k)];
    r.pass_ms.push_back({chunk[0], chunk[1], chunk[2]});
  }
  if (K > 0)
    r.bubble_at_measured_costs =
        simulate(w.schedule, P, V, w.micro_batches, r.pass_ms, ScheduleMode::Train, w.weight_delay)
            .bubble();
  return r;
}

}  // namespace tetra
