#include "parallel/pipeline.hpp"

#include <chrono>
#include <string>

#include "parallel/trace.hpp"

namespace tetra {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

PipelineExecutor::PipelineExecutor(Backend& be, Comm& pp, std::vector<PipelineStage*> chunks,
                                   ScheduleKind kind, int micro_batches, int64_t activation_numel,
                                   DType activation_dtype)
    : be_(be),
      pp_(pp),
      chunks_(std::move(chunks)),
      micro_batches_(micro_batches),
      activation_numel_(activation_numel),
      activation_dtype_(activation_dtype),
      actions_(make_schedule(kind, pp.size(), int(chunks_.size()), micro_batches, pp.rank())) {}

int PipelineExecutor::tag(Direction d, int chunk_id, int micro_batch) const {
  const int chunks = pp_.size() * int(chunks_.size());
  return (int(d) * chunks + chunk_id) * micro_batches_ + micro_batch;
}

void PipelineExecutor::send(Buffer payload, int peer, int t) {
  if (peer == pp_.rank()) {
    mailbox_[t] = std::move(payload);
    return;
  }
  PendingSend s{std::move(payload), nullptr};
  s.request = pp_.isend(s.payload.flat(), peer, t);
  sends_.push_back(std::move(s));
}

void PipelineExecutor::receive(Buffer& into, int peer, Direction d, int chunk_id, int micro_batch,
                               PipelineStats& stats) {
  const int t = tag(d, chunk_id, micro_batch);
  if (peer == pp_.rank()) {
    auto it = mailbox_.find(t);
    check(it != mailbox_.end(), "pipeline: message ", t, " to self was never sent");
    into = std::move(it->second);
    mailbox_.erase(it);
    return;
  }
  into = Buffer(be_, activation_numel_, activation_dtype_);
  // The receive also shows on the comm lane; this span marks the same time as bubble.
  trace::Span span(trace::Lane::Wait, [&](trace::Event& e) {
    e.name = std::string(d == kActivation ? "wait activation" : "wait grad") + " from pp rank " +
             std::to_string(peer);
    e.arg("micro_batch", int64_t(micro_batch));
    e.arg("chunk", int64_t(chunk_id));
  });
  const double t0 = now_seconds();
  pp_.recv(into.flat(), peer, t);
  stats.wait_seconds += now_seconds() - t0;
}

PipelineStats PipelineExecutor::evaluate(const std::vector<MicroBatch>& mbs) {
  PipelineStats stats;
  const double t0 = now_seconds();
  const int P = pp_.size(), r = pp_.rank(), K = P * int(chunks_.size());
  const int prev = (r - 1 + P) % P, next = (r + 1) % P;
  for (const Action& a : actions_) {
    if (a.kind != Action::Forward) continue;
    const int k = a.chunk * P + r;
    PipelineStage& chunk = *chunks_[a.chunk];
    Buffer in;
    if (k > 0) receive(in, prev, kActivation, k, a.micro_batch, stats);
    const Tensor in_view = in.flat();
    const StageOutput y =
        chunk.forward(a.micro_batch, mbs[a.micro_batch], k > 0 ? &in_view : nullptr);
    if (k != K - 1) {
      Buffer out(be_, activation_numel_);
      be_.copy(out.flat(), y.activation);
      send(std::move(out), next, tag(kActivation, k + 1, a.micro_batch));
    }
    chunk.discard(a.micro_batch);
  }
  for (PendingSend& s : sends_) s.request->wait();
  sends_.clear();
  for (PipelineStage* c : chunks_) stats.loss_sum += c->take_loss();
  check(mailbox_.empty(), "pipeline: ", mailbox_.size(), " messages to self left unread");
  stats.seconds = now_seconds() - t0;
  return stats;
}

PipelineStats PipelineExecutor::run(const std::vector<MicroBatch>& mbs, float loss_scale) {
  PipelineStats stats;
  const double t0 = now_seconds();
  const int P = pp_.size(), r = pp_.rank(), K = P * int(chunks_.size());
  const int prev = (r - 1 + P) % P, next = (r + 1) % P;

  for (const Action& a : actions_) {
    const int k = a.chunk * P + r;  // model chunk id
    PipelineStage& chunk = *chunks_[a.chunk];
    const MicroBatch& mb = mbs[a.micro_batch];
    const auto compute = [&](trace::Event& e) {
      e.name = std::string(a.kind == Action::Forward ? "F" : "B") + " mb" +
               std::to_string(a.micro_batch) + " chunk" + std::to_string(k);
      e.arg("micro_batch", int64_t(a.micro_batch));
      e.arg("chunk", int64_t(k));
      e.arg("virtual_stage", int64_t(a.chunk));
    };
    if (a.kind == Action::Forward) {
      Buffer in;
      if (k > 0) receive(in, prev, kActivation, k, a.micro_batch, stats);
      trace::Span span(trace::Lane::Compute, compute);  // after the wait, which has its own
      const Tensor in_view = in.flat();
      const StageOutput y = chunk.forward(a.micro_batch, mb, k > 0 ? &in_view : nullptr);
      if (k != K - 1) {
        Buffer out(be_, activation_numel_, activation_dtype_);
        be_.copy(out.flat(), y.activation);
        send(std::move(out), next, tag(kActivation, k + 1, a.micro_batch));
      }
    } else {
      Buffer grad;
      if (k < K - 1) receive(grad, next, kGradient, k, a.micro_batch, stats);
      trace::Span span(trace::Lane::Compute, compute);
      const Tensor grad_view = grad.flat();
      Buffer dx = chunk.backward(a.micro_batch, mb, k < K - 1 ? &grad_view : nullptr, loss_scale);
      if (k > 0) send(std::move(dx), prev, tag(kGradient, k - 1, a.micro_batch));
    }
  }
  for (PendingSend& s : sends_) s.request->wait();
  sends_.clear();
  for (PipelineStage* c : chunks_) stats.loss_sum += c->take_loss();
  check(mailbox_.empty(), "pipeline: ", mailbox_.size(), " messages to self left unread");
  stats.seconds = now_seconds() - t0;
  return stats;
}

}  // namespace tetra
