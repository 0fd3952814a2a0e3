#include "parallel/zero.hpp"

#include <algorithm>

#include "backend/fusions.hpp"

namespace tetra {

ZeroParams::ZeroParams(Backend& be, Comm& dp_cp, std::vector<UnitSpec> units, int zero_stage,
                       Comm* sequence_parallel, DType compute, bool overlap)
    : be_(be),
      comm_(dp_cp),
      sp_tp_(sequence_parallel),
      zero_(zero_stage),
      compute_(compute),
      alias_(aliases_grads(dp_cp.size())),
      fresh_writes_(fused(Fusion::WgradBeta0)),
      overlap_(queues(overlap, dp_cp.size())) {
  check(zero_ >= 1 && zero_ <= 3, "`optimizer.zero` must be 1, 2 or 3 (got ", zero_, ")");
  check(compute_ == DType::F32 || compute_ == DType::BF16, "ZeroParams: compute dtype ",
        dtype_name(compute_));
  if (overlap_) comm_.open_queue();
  const int N = comm_.size();
  for (UnitSpec& l : units) {
    Unit u;
    u.layout = std::move(l);
    u.padded = (u.layout.numel + N - 1) / N * N;
    u.shard = u.padded / N;
    if (zero_ < 3) {
      u.weights = Buffer(be_, u.padded, compute_);
      be_.fill(u.weights.flat(), 0.f);
    }
    if (zero_ == 3 || compute_ != DType::F32) {
      u.master = Buffer(be_, u.shard);
      be_.fill(u.master.flat(), 0.f);
    }
    if (zero_ == 1 || alias_) {
      u.grads = Buffer(be_, u.padded);
      if (fresh_writes_) be_.fill(u.grads.flat(), 0.f);  // the padding, which no step writes
    }
    if (!alias_) u.grad_shard = Buffer(be_, u.shard);
    u.adam_m = Buffer(be_, u.shard);
    u.adam_v = Buffer(be_, u.shard);
    be_.fill(u.adam_m.flat(), 0.f);
    be_.fill(u.adam_v.flat(), 0.f);
    units_.push_back(std::move(u));
  }
  chunk_of_.assign(units_.size(), 0);
  // The part [begin, end) of this rank's shard (offsets within the shard) that holds each
  // parameter: what the optimizer, the gradient norm and checkpoints walk.
  for (Unit& u : units_) {
    const int64_t lo = comm_.rank() * u.shard, hi = lo + u.shard;
    for (const ParamInfo& p : u.layout.params) {
      const int64_t b = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel());
      if (b < e) u.segments.push_back({&p, b - lo, e - lo});
    }
  }
}

ZeroParams::~ZeroParams() {
  try {
    drop_prefetch();
    settle_all_on_host();
  } catch (...) {  // a destructor must not throw; the requests complete themselves
  }
}

void ZeroParams::set_chunks(const std::vector<std::vector<int>>& chunks, bool weights_apart) {
  prefetch_down_ = !weights_apart;
  // A unit in no chunk (a tied embedding's copy on the last stage, read by the head) is
  // neither prefetched nor a step of the walk.
  chunk_of_.assign(units_.size(), -1);
  for (size_t c = 0; c < chunks.size(); ++c)
    for (int u : chunks[c]) chunk_of_.at(u) = int(c);
}

void ZeroParams::settle(Unit& u) {
  settle_grads(u);
  if (u.weight_sync) {
    u.weight_sync->wait();
    u.weight_sync.reset();
  }
}

void ZeroParams::settle_grads(Unit& u) {
  if (u.grad_sync) {
    u.grad_sync->wait();
    u.grad_sync.reset();
    u.grads_in_flight.reset();
    grads_queued_.erase(
        std::find(grads_queued_.begin(), grads_queued_.end(), int(&u - &units_[0])));
  }
}

void ZeroParams::settle_all() {
  for (Unit& u : units_) settle(u);
}

void ZeroParams::settle_all_on_host() {
  settle_all();
  be_.synchronize();
}

void ZeroParams::prefetch(int i) {
  drop_prefetch();
  Unit& u = units_[i];
  prefetch_.unit = i;
  prefetch_.weights = Buffer(be_, u.padded, compute_);
  const Tensor mine = prefetch_.weights.flat(comm_.rank() * u.shard, u.shard);
  be_.cast(mine, u.master.flat());
  prefetch_.request = comm_.queue_all_gather(prefetch_.weights.flat(), mine);
}

void ZeroParams::drop_prefetch() {
  if (prefetch_.request) prefetch_.request->wait();
  prefetch_ = Prefetch{};
}

Tensor ZeroParams::master_shard(const Unit& u) const {
  return u.master.empty() ? u.weights.flat(comm_.rank() * u.shard, u.shard) : u.master.flat();
}

void ZeroParams::publish(Unit& u, bool rounded) {
  const Tensor mine = u.weights.flat(comm_.rank() * u.shard, u.shard);
  if (!u.master.empty() && !rounded) be_.cast(mine, u.master.flat());
  comm_.all_gather(u.weights.flat(), mine);
}

void ZeroParams::load(int i, const std::vector<float>& host) {
  Unit& u = units_[i];
  drop_prefetch();
  settle(u);
  check(int64_t(host.size()) == u.layout.numel, "unit ", u.layout.name, ": ", host.size(),
        " values for ", u.layout.numel, " parameters");
  std::vector<float> padded(host);
  padded.resize(u.padded, 0.f);
  if (!u.master.empty()) be_.upload(u.master.flat(), padded.data() + comm_.rank() * u.shard);
  if (zero_ == 3) return;
  if (compute_ == DType::F32) return be_.upload(u.weights.flat(), padded.data());
  // The whole compute copy from the host values (every rank has them: no collective), rounded
  // as publish() rounds the master shard.
  Buffer full(be_, u.padded);
  be_.upload(full.flat(), padded.data());
  be_.cast(u.weights.flat(), full.flat());
}

std::vector<float> ZeroParams::gather_to_host(int i) {
  Unit& u = units_[i];
  settle(u);
  std::vector<float> host(u.padded);
  if (u.master.empty()) {
    be_.download(host.data(), u.weights.flat());
  } else {
    Buffer full(be_, u.padded);
    comm_.all_gather(full.flat(), u.master.flat());
    be_.download(host.data(), full.flat());
  }
  host.resize(u.layout.numel);
  return host;
}

Tensor ZeroParams::acquire(int i) {
  Unit& u = units_[i];
  settle(u);
  if (zero_ == 3) {
    if (prefetch_.unit == i) {
      prefetch_.request->wait();
      u.weights = std::move(prefetch_.weights);
      prefetch_ = Prefetch{};
    } else {
      u.weights = Buffer(be_, u.padded, compute_);
      publish(u);
    }
    // The next unit of the walk: forwards, unless the last acquire was the unit after this.
    // Never the embedding on the way down: a split backward (zb-h1's B) does not acquire it,
    // and a gather nobody takes would change the step's bytes.
    const int next = last_acquired_ == i + 1 ? i - 1 : i + 1;
    // The tied matrix the head reads (acquired right after the head unit, at PP 1 or on zb-v's
    // rank 0 where it is the embedding unit itself) is no step of the walk either.
    const bool head_read = i == tied_.unit && last_acquired_ >= 0 &&
                           units_[last_acquired_].layout.kind == UnitSpec::Kind::Head;
    const bool walked = chunk_of_[i] >= 0 && !head_read;
    if (walked) last_acquired_ = i;
    const bool embedding_down =
        next < i && next >= 0 && units_[next].layout.kind == UnitSpec::Kind::Embedding;
    const bool down_allowed = next > i || (prefetch_down_ && !embedding_down);
    if (overlap_ && walked && next >= 0 && next < size() && chunk_of_[next] == chunk_of_[i] &&
        down_allowed)
      prefetch(next);
  }
  return u.weights.flat(0, u.layout.numel);
}

void ZeroParams::release(int i) {
  if (zero_ == 3) units_[i].weights.reset();
}

Tensor ZeroParams::grad_shard(const Unit& u) const {
  return alias_ ? u.grads.flat() : u.grad_shard.flat();
}

Tensor ZeroParams::grads(int i) {
  Unit& u = units_[i];
  if (u.grads.empty()) {
    u.grads = Buffer(be_, u.padded);
    // Under wgrad_beta0 the first backward writes every element but the padding.
    be_.fill(
        fresh_writes_ ? u.grads.flat(u.layout.numel, u.padded - u.layout.numel) : u.grads.flat(),
        0.f);
  }
  return u.grads.flat(0, u.layout.numel);
}

bool ZeroParams::grads_fresh(int i) const {
  return fresh_writes_ && units_[i].weight_passes == 0;
}

bool ZeroParams::last_weight_pass(int i) const {
  const int uses = i == tied_.unit ? tied_.uses : 1;
  return units_[i].weight_passes + 1 == micro_batches_ * uses;
}

void ZeroParams::begin_step(int micro_batches) {
  micro_batches_ = micro_batches;
  for (Unit& u : units_) {
    // The fill below writes what the queued reduce-scatter reads. The weights' all-gathers
    // queued after the last update run on into this step's forward: each unit's acquire waits
    // for its own.
    settle_grads(u);
    u.weight_passes = 0;
    if (!u.grads.empty() && !fresh_writes_) be_.fill(u.grads.flat(), 0.f);
  }
}

void ZeroParams::hand_over_grads(int i) {
  Unit& u = units_[i];
  const int uses = i == tied_.unit ? tied_.uses : 1;
  // exercise(zero2_reduce_scatter) begin
  if (++u.weight_passes < micro_batches_ * uses) return;  // later passes still add to u.grads
  reduce_scatter_grads(u);
  if (zero_ >= 2 && !alias_) u.grads.reset();  // ZeRO-2 and 3 keep the shard alone
  // exercise(zero2_reduce_scatter) end
}

void ZeroParams::begin_weight_pass() {
  if (zero_ < 2) return;  // ZeRO-1 keeps its full gradients: nothing to free
  while (!grads_queued_.empty()) settle(units_[grads_queued_.front()]);
}

void ZeroParams::tie(const Tied& t) {
  check(t.unit >= 0 && t.unit < size() && t.uses >= 1 &&
            units_[t.unit].layout.kind == UnitSpec::Kind::Embedding,
        "ZeroParams: the tied matrix must be an embedding unit of this rank");
  tied_ = t;
}

void ZeroParams::sum_tied_grads() {
  if (tied_.unit < 0 || !tied_.group || tied_.group->size() == 1) return;
  Unit& u = units_[tied_.unit];
  settle(u);  // --overlap: its queued reduce-scatter writes the shard summed here
  tied_.group->all_reduce(grad_shard(u));
}

void ZeroParams::reduce_scatter_grads(Unit& u) {
  if (sp_tp_ && sp_tp_->size() > 1)
    for (const ParamInfo& p : u.layout.params)
      if (p.tp_dim < 0) sp_tp_->all_reduce(u.grads.flat(p.offset, p.numel()));
  if (alias_) return;  // the gradients are the shard
  if (overlap_) {
    u.grad_sync = comm_.queue_reduce_scatter(u.grad_shard.flat(), u.grads.flat());
    grads_queued_.push_back(int(&u - &units_[0]));
    if (zero_ == 1) return;
    // ZeRO-2/3: the full gradients live until the queued call has read them (u.grads left
    // empty for the hand-over to free). The call runs under the next unit's backward and is
    // waited for at the next hand-over at the latest: a unit's full gradients more than the
    // blocking path holds.
    u.grads_in_flight = std::move(u.grads);
    while (grads_queued_.size() > 1) settle(units_[grads_queued_.front()]);
    return;
  }
  // exercise(ring_reduce_scatter) begin
  comm_.reduce_scatter(u.grad_shard.flat(), u.grads.flat());
  // exercise(ring_reduce_scatter) end
}

ZeroParams::Shard ZeroParams::shard(int i) {
  Unit& u = units_[i];
  drop_prefetch();  // the optimizer is about to change the weights it holds
  settle(u);
  const bool copy = zero_ < 3 && compute_ != DType::F32;
  return {master_shard(u), grad_shard(u),
          u.adam_m.flat(), u.adam_v.flat(),
          u.segments,      copy ? u.weights.flat(comm_.rank() * u.shard, u.shard) : Tensor{}};
}

std::vector<float> ZeroParams::gather_grads_to_host(int i) {
  Unit& u = units_[i];
  settle(u);
  Buffer full(be_, u.padded);
  comm_.all_gather(full.flat(), grad_shard(u));
  std::vector<float> host(u.padded);
  be_.download(host.data(), full.flat());
  host.resize(u.layout.numel);
  return host;
}

void ZeroParams::all_gather_weights() {
  drop_prefetch();
  if (zero_ == 3) return;
  for (Unit& u : units_) {
    settle(u);
    if (!overlap_) {
      publish(u, true);  // AdamW wrote the bf16 slice (Shard::copy)
      continue;
    }
    const Tensor mine = u.weights.flat(comm_.rank() * u.shard, u.shard);
    u.weight_sync = comm_.queue_all_gather(u.weights.flat(), mine);
  }
}

MemoryBytes ZeroParams::persistent_bytes() const {
  MemoryBytes m;
  for (const Unit& u : units_) {
    m.params += int64_t((zero_ < 3 ? u.weights.bytes() : 0) + u.master.bytes());
    m.grads += int64_t(u.grad_shard.bytes()) + int64_t(zero_ == 1 || alias_ ? u.grads.bytes() : 0);
    m.adam += int64_t(u.adam_m.bytes() + u.adam_v.bytes());
  }
  return m;
}

std::vector<ZeroParams::OwnedSlice> ZeroParams::owned_slices(HostBuffer& host) {
  settle_all_on_host();
  int64_t total = 0;
  for (const Unit& u : units_)
    for (const Segment& g : u.segments) total += 3 * (g.end - g.begin);
  float* at = reinterpret_cast<float*>(host.get(be_, size_t(total) * sizeof(float)));
  std::vector<OwnedSlice> out;
  for (int i = 0; i < size(); ++i) {
    if (!counted(i)) continue;
    const Unit& u = units_[i];
    const int64_t lo = comm_.rank() * u.shard;
    const Tensor w = master_shard(u);
    for (const Segment& g : u.segments) {
      const ParamInfo& p = *g.param;
      const int64_t n = g.end - g.begin;
      out.push_back({&p, lo + g.begin - p.offset, lo + g.end - p.offset, at, at + n, at + 2 * n});
      for (const Tensor& src : {w, u.adam_m.flat(), u.adam_v.flat()}) {
        be_.download_behind(at, src.flat(g.begin, n));
        at += n;
      }
    }
  }
  return out;
}

void ZeroParams::load_state(int i, const std::vector<float>& weights,
                            const std::vector<float>& adam_m, const std::vector<float>& adam_v) {
  load(i, weights);
  Unit& u = units_[i];
  check(int64_t(adam_m.size()) == u.layout.numel && int64_t(adam_v.size()) == u.layout.numel,
        "unit ", u.layout.name, ": Adam state of the wrong size");
  const int64_t lo = comm_.rank() * u.shard;
  for (auto [dst, src] : {std::pair{&u.adam_m, &adam_m}, {&u.adam_v, &adam_v}}) {
    std::vector<float> shard(u.shard, 0.f);
    for (int64_t i = 0; i < u.shard && lo + i < u.layout.numel; ++i) shard[i] = (*src)[lo + i];
    be_.upload(dst->flat(), shard.data());
  }
}

}  // namespace tetra
