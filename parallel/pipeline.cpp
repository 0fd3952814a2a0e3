#include "parallel/pipeline.hpp"

#include <string>

#include "parallel/trace.hpp"
#include "util/clock.hpp"

namespace tetra {

PipelineExecutor::PipelineExecutor(Backend& be, Comm& pp, std::vector<PipelineStage*> chunks,
                                   ScheduleKind kind, int micro_batches, int64_t activation_numel,
                                   DType activation_dtype, int weight_delay)
    : be_(be),
      pp_(pp),
      chunks_(std::move(chunks)),
      kind_(kind),
      micro_batches_(micro_batches),
      weight_delay_(weight_delay),
      activation_numel_(activation_numel),
      activation_dtype_(activation_dtype) {
  check_schedule(kind, pp.size(), int(chunks_.size()), micro_batches);
}

int PipelineExecutor::tag(Direction d, int chunk_id, int micro_batch) const {
  const int chunks = pp_.size() * int(chunks_.size());
  return (int(d) * chunks + chunk_id) * micro_batches_ + micro_batch;
}

Buffer PipelineExecutor::message() const {
  return Buffer(be_, activation_numel_, activation_dtype_);
}

void PipelineExecutor::send(Buffer payload, int peer, int t) {
  check(payload.numel() == activation_numel_ && payload.dtype() == activation_dtype_,
        "pipeline: message ", t, " has ", payload.numel(), " elements of ",
        dtype_name(payload.dtype()), ", not the ", activation_numel_, " of ",
        dtype_name(activation_dtype_), " its receiver allocates");
  if (peer == pp_.rank()) {
    mailbox_[t] = std::move(payload);
    return;
  }
  // Posted in the order the peer takes them: a message whose predecessors (in that order) are
  // not all made yet waits here. The peer's receive of it comes after theirs, which were made
  // before it could be posted, so the wait costs the peer nothing.
  Link& link = links_[peer];
  link.made[t] = std::move(payload);
  while (!link.order.empty() && link.made.count(link.order.front())) {
    const int next = link.order.front();
    link.order.pop_front();
    PendingSend s{std::move(link.made[next]), nullptr};
    link.made.erase(next);
    s.request = pp_.isend(s.payload.flat(), peer, next);
    sends_.emplace(next, std::move(s));
  }
}

void PipelineExecutor::retire(std::span<const PipeMessage> delivered) {
  for (const PipeMessage& x : delivered) {
    const auto it = sends_.find(tag(x.gradient ? kGradient : kActivation, x.chunk, x.micro_batch));
    check(it != sends_.end(), "pipeline: a delivered message was never posted");
    it->second.request->wait();  // returns at once: the peer has it
    sends_.erase(it);
  }
}

void PipelineExecutor::plan_links(const RetiredSends& retired) {
  links_.clear();
  for (const auto& [peer, messages] : retired.to_peer) {
    std::deque<int>& order = links_[peer].order;
    for (const PipeMessage& x : messages)
      order.push_back(tag(x.gradient ? kGradient : kActivation, x.chunk, x.micro_batch));
  }
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
  into = message();
  // The receive also shows on the comm lane; this span marks the same time as bubble.
  trace::Span span(trace::Lane::Wait, [&](trace::Event& e) {
    e.name = std::string(d == kActivation ? "wait activation" : "wait grad") + " from pp rank " +
             std::to_string(peer);
    e.arg("micro_batch", int64_t(micro_batch));
    e.arg("chunk", int64_t(chunk_id));
  });
  const Clock::time_point t0 = Clock::now();
  pp_.recv(into.flat(), peer, t);
  stats.wait_seconds += seconds_since(t0);
}

PipelineStats PipelineExecutor::execute(const std::vector<MicroBatch>& mbs, ScheduleMode mode,
                                        float loss_scale) {
  PipelineStats stats;
  stats.pass_seconds.assign(chunks_.size(), {0, 0, 0});
  const Clock::time_point t0 = Clock::now();
  const int P = pp_.size(), r = pp_.rank(), V = int(chunks_.size()), K = P * V;
  const Placement place = placement(kind_);
  auto [retired, first] = retired_.try_emplace(mode);
  if (first) retired->second = retired_sends(kind_, P, V, micro_batches_, r, mode, weight_delay_);
  plan_links(retired->second);

  const std::vector<Action> actions =
      make_schedule(kind_, P, V, micro_batches_, r, mode, weight_delay_);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const int k = chunk_id(place, P, r, a.chunk);  // model chunk id
    // The ranks of the chunks before and after it: r - 1 and r + 1 looped (wrapping around
    // between virtual stages); as a V the turn at rank P - 1 is this rank itself (mailbox).
    const int prev = k > 0 ? chunk_rank(place, P, V, k - 1) : -1;
    const int next = k + 1 < K ? chunk_rank(place, P, V, k + 1) : -1;
    PipelineStage& chunk = *chunks_[a.chunk];
    const MicroBatch& mb = mbs[a.micro_batch];
    Clock::time_point began = Clock::now();  // the pass's start: after its input's receive
    const auto compute = [&](trace::Event& e) {
      e.name = std::string(1, action_letter(a.kind)) + " mb" + std::to_string(a.micro_batch) +
               " chunk" + std::to_string(k);
      e.arg("micro_batch", int64_t(a.micro_batch));
      e.arg("chunk", int64_t(k));
      e.arg("virtual_stage", int64_t(a.chunk));
    };
    if (a.kind == Action::Forward) {
      Buffer in;
      if (k > 0) receive(in, prev, kActivation, k, a.micro_batch, stats);
      retire(retired->second.at(i));
      began = Clock::now();
      trace::Span span(trace::Lane::Compute, compute);  // after the wait, which has its own
      const Tensor in_view = in.flat();
      const StageOutput y = chunk.forward(a.micro_batch, mb, k > 0 ? &in_view : nullptr,
                                          mode == ScheduleMode::Train ? loss_scale : 0.f);
      if (k != K - 1) {
        Buffer out = message();
        be_.copy(out.flat(), y.activation);
        send(std::move(out), next, tag(kActivation, k + 1, a.micro_batch));
      }
      if (mode == ScheduleMode::ForwardOnly) chunk.discard(a.micro_batch);
    } else if (a.kind == Action::Backward) {
      Buffer grad;
      if (k < K - 1) receive(grad, next, kGradient, k, a.micro_batch, stats);
      retire(retired->second.at(i));
      began = Clock::now();
      trace::Span span(trace::Lane::Compute, compute);
      const Tensor grad_view = grad.flat();
      Buffer dx = chunk.backward(a.micro_batch, mb, k < K - 1 ? &grad_view : nullptr, loss_scale,
                                 !splits_backward(kind_, weight_delay_));
      if (k > 0) send(std::move(dx), prev, tag(kGradient, k - 1, a.micro_batch));
    } else {  // W: local, no message
      trace::Span span(trace::Lane::Compute, compute);
      chunk.backward_weight(a.micro_batch, mb);
    }
    PassCosts& spent = stats.pass_seconds[size_t(a.chunk)];
    (a.kind == Action::Forward    ? spent.f
     : a.kind == Action::Backward ? spent.b
                                  : spent.w) += seconds_since(began);
  }
  for (const auto& [peer, link] : links_)
    check(link.made.empty() && link.order.empty(), "pipeline: ", link.made.size(),
          " messages to pp rank ", peer, " never posted, ", link.order.size(), " never made");
  for (auto& [t, s] : sends_) s.request->wait();
  sends_.clear();
  for (PipelineStage* c : chunks_) stats.loss_sum += c->take_loss();
  check(mailbox_.empty(), "pipeline: ", mailbox_.size(), " messages to self left unread");
  stats.seconds = seconds_since(t0);
  return stats;
}

}  // namespace tetra
