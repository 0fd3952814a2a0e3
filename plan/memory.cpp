// The walk mirrors the allocations of transformer/chunk.cpp, transformer/block.cpp,
// parallel/tp.cpp, parallel/cp.cpp, parallel/zero.cpp and parallel/pipeline.cpp, in their
// order, so that the peak falls where tetra's does. Under bf16 each op of the mixed-precision
// backend (backend/mixed_backend.cpp) also holds an fp32 copy of every bf16 argument while it
// runs: `op` counts that scratch at the point where the op runs.
#include "plan/memory.hpp"

#include <algorithm>
#include <map>

#include "backend/cpu/cpu_attention.hpp"
#include "backend/fusions.hpp"
#include "parallel/retire.hpp"
#include "parallel/schedule.hpp"
#include "parallel/zero.hpp"

namespace tetra::plan {
namespace {

// Bytes in use and their peak, as Backend::alloc_stats counts them.
struct Ledger {
  double in_use = 0, peak = 0;
  double kept = 0, most_kept = 0;  // activations held for backward, now and at most
  void alloc(double b) {
    in_use += b;
    peak = std::max(peak, in_use);
  }
  void keep(double b) {
    kept += b;
    most_kept = std::max(most_kept, kept);
  }
  void free(double b) { in_use -= b; }
  // An op whose scratch (b bytes) lives only while it runs.
  void op(double b) { peak = std::max(peak, in_use + b); }
};

// The sizes of one rank's buffers, bytes. Shapes as in transformer/block.hpp: T tokens of a
// micro-batch on this rank, Tl rows outside the TP region, per-rank head widths.
struct Sizes {
  double R, x, q, kv_local, kv, qkv, F, lse, norm, logits, stats;
  double wq, wkv, wqkv, wf, wn, wv;  // weights: [qw, d], [kw, d], [qw + 2 kw, d], [F/TP, d], [d],
                                     // [V/TP, d]
  double dwn;                        // a norm weight's gradient [d], fp32
  double e;                          // bytes of an activation
  bool sp, tp1;                      // tp1: the residuals ride on the o and down GEMMs (matmul_add)
  bool in_place;                     // RoPE in place on qkv (backend/fusions.hpp)
  int cp;
  explicit Sizes(const Setup& s) {
    const ModelConfig& c = s.cfg;
    const int t = s.layout().tp;
    e = s.prec.act;
    const double f = 4, T = double(s.tokens()), Tl = double(s.rows());
    const double hd = c.head_dim();
    sp = s.spec.layout.sp;
    tp1 = t == 1;
    cp = s.layout().cp;
    in_place = fused(Fusion::RopeInPlace);
    R = Tl * c.dim * e;                        // [Tl, d]
    x = T * c.dim * e;                         // [T, d]
    q = T * (c.heads / t) * hd * e;            // q, attn, dq, dattn [T, H hd]
    kv_local = T * (c.kv_heads / t) * hd * e;  // k or v of this rank's tokens
    kv = cp * kv_local;                        // k or v of all CP ranks' tokens
    qkv = q + 2 * kv_local;                    // the fused projection's qkv, dqkv
    F = T * (c.ffn_dim / t) * e;               // gate, up, act [T, F/TP]
    lse = f * s.run.micro_batch * (c.heads / t) * double(s.run.seq_pos.size());
    norm = f * Tl;                          // rstd
    logits = T * double(c.rows() / t) * e;  // [T, V/TP]
    stats = f * 3 * T;                      // row maxima and (sum of exp, target logit)
    const double w = s.prec.compute_w, d = c.dim;
    wq = (c.heads / t) * hd * d * w;
    wkv = (c.kv_heads / t) * hd * d * w;
    wqkv = wq + 2 * wkv;
    wf = (c.ffn_dim / t) * d * w;
    wn = d * w;
    dwn = f * d;
    wv = double(c.rows() / t) * d * w;
  }
  // The mixed-precision backend's fp32 scratch for an op whose bf16 arguments (outputs
  // included) hold `bf16` bytes; none in fp32.
  double wide(double bf16) const { return e < 4 ? bf16 * 4 / e : 0; }
  // What attention keeps: q and k, v of every CP rank, or under RoPE in place qkv and, at
  // CP > 1, the gathered k, v.
  double attn_saved() const { return in_place ? qkv + (cp > 1 ? 2 * kv : 0) : q + 2 * kv; }
  // What a block keeps for backward, its output (the next block's input) included.
  double block_saved() const {
    return R + norm + x + q + attn_saved() + lse + R + norm + x + 3 * F;
  }
  double head_saved() const { return norm + x + logits + stats; }
};

// A region edge into the TP region: [Tl, d] -> [T, d] (the all-gather under --sp).
void enter_region(Ledger& L, const Sizes& z) {
  if (z.sp) L.alloc(z.x), L.free(z.R);
}
// A region exit: partial sums [T, d] -> [Tl, d] (reduce-scatter under --sp), the [T, d]
// partial sums allocated first and computed by an op with `scratch` bytes.
void leave_region(Ledger& L, const Sizes& z, double scratch) {
  L.alloc(z.x);
  L.op(scratch);
  if (z.sp) L.alloc(z.R), L.free(z.x);
}

// block_forward, with its output buffer (allocated by the chunk): leaves block_saved().
void block_forward(Ledger& L, const Sizes& z) {
  L.alloc(z.R);                   // out
  L.alloc(z.R), L.alloc(z.norm);  // xn, x_rstd
  L.op(z.wide(2 * z.R + z.wn));
  enter_region(L, z);
  L.alloc(z.qkv);  // qkv = n1 [Wq; Wk; Wv]^T
  L.op(z.wide(z.qkv + z.x + z.wqkv));
  if (!z.in_place) {
    L.alloc(z.q), L.alloc(z.kv_local), L.alloc(z.kv_local);  // q, k, v split off qkv
    L.op(z.wide(2 * z.qkv));
    L.free(z.qkv);
  } else {  // rotated in place; at CP > 1 k, v copied out of it
    if (z.cp > 1) L.alloc(z.kv_local), L.alloc(z.kv_local);
    L.op(z.wide(z.qkv));
  }
  if (z.cp > 1)
    for (int i = 0; i < 2; ++i)  // gathered, reordered; the gathered and local copies freed
      L.alloc(z.kv), L.alloc(z.kv), L.free(z.kv), L.free(z.kv_local);
  L.alloc(z.q), L.alloc(z.lse);  // attn, lse
  // q, k, v: under RoPE in place qkv (widened once at CP 1).
  const double qkv_args = !z.in_place ? z.q + 2 * z.kv : z.qkv + (z.cp > 1 ? 2 * z.kv : 0);
  L.op(z.wide(z.q + qkv_args));
  if (z.tp1) {  // h = x + attn Wo^T in one op
    L.alloc(z.x);
    L.op(z.wide(z.x + z.q + z.wq + z.R));
  } else {
    leave_region(L, z, z.wide(z.x + z.q + z.wq));  // h
    L.op(z.wide(2 * z.R));                         // h += x
  }
  L.alloc(z.R), L.alloc(z.norm);  // hn, h_rstd
  L.op(z.wide(2 * z.R + z.wn));
  enter_region(L, z);
  L.alloc(2 * z.F);  // gate_up = n2 [Wgate; Wup]^T
  L.op(z.wide(2 * z.F + z.x + 2 * z.wf));
  L.alloc(z.F);  // act
  L.op(z.wide(3 * z.F));
  if (z.tp1) {  // out = h + act Wdown^T in one op
    L.op(z.wide(2 * z.R + z.F + z.wf));
    return;
  }
  leave_region(L, z, z.wide(z.x + z.F + z.wf));  // down's output, added into out
  L.op(z.wide(3 * z.R));
  L.free(z.R);
}

// Whether a block's W gathers the Row layers' output gradients again: under --sp at TP > 1
// when W runs apart from its B (BlockGrads).
bool regathers(const Sizes& z, bool apart) {
  return apart && z.sp && !z.tp1;
}

// What a block keeps from its B to its W: the GEMMs' inputs xn, attn, hn, act
// (BlockActs::keep_for_weight_grads frees the rest) and their output gradients (BlockGrads:
// dout and dh, gathered [T, d] under --sp unless W runs apart; dgate_up, dqkv).
double acts_for_w(const Sizes& z) {
  return 2 * z.x + z.q + z.F;
}
double grads_for_w(const Sizes& z, bool apart) {
  return 2 * (z.sp && !regathers(z, apart) ? z.x : z.R) + 2 * z.F + z.qkv;
}

// block_backward_input (B) with the gradient [Tl, d] already held (and, under recompute, the
// activations recomputed); allocates dx [Tl, d] (which becomes the running gradient, the old
// one kept as dout), adds the norms' weight gradients into the chunk's sum of them (kept across
// steps: persistent_memory's `other`), and frees what W does not read. apart: W does not follow
// at once.
void block_backward_input(Ledger& L, const Sizes& z, bool apart) {
  // Under --sp, of each Row layer's output gradient: the local rows freed (the gathered kept),
  // or the gathered ones where W gathers again.
  const double dropped = !z.sp ? 0 : regathers(z, apart) ? z.x : z.R;
  L.alloc(z.R);  // dx
  // MLP half: dout gathered (under --sp), dact, dgate_up (kept); dhn leaves the region; dh;
  // the norm's backward; then dact, dhn and (under --sp) one copy of dout freed.
  if (z.sp) L.alloc(z.x);
  L.alloc(z.F);
  L.op(z.wide(z.F + z.x + z.wf));
  L.alloc(2 * z.F);  // dgate_up
  L.op(z.wide(5 * z.F));
  leave_region(L, z, z.wide(z.x + 2 * z.F + 2 * z.wf));
  L.alloc(z.R);  // dh
  L.op(z.wide(3 * z.R + z.wn));
  L.free(z.F + z.R + dropped);
  // Attention half: dh gathered (under --sp), dattn, dq, dk and dv for every CP rank (dattn
  // then freed), scattered back, merged into dqkv (kept; dq, dk, dv freed); dxn; the norm's
  // backward; then dxn and (under --sp) one copy of dh freed.
  if (z.sp) L.alloc(z.x);
  L.alloc(z.q);
  L.op(z.wide(z.q + z.x + z.wq));
  if (!z.in_place) {
    L.alloc(z.q), L.alloc(z.kv), L.alloc(z.kv);
    L.op(z.wide(4 * z.q + 4 * z.kv));
    L.free(z.q);  // dattn
    if (z.cp > 1)
      for (int i = 0; i < 2; ++i) L.alloc(z.kv), L.alloc(z.kv_local), L.free(z.kv), L.free(z.kv);
    L.alloc(z.qkv);  // dqkv
    L.op(z.wide(2 * z.qkv));
    L.free(z.q), L.free(2 * (z.cp > 1 ? z.kv_local : z.kv));
  } else {  // dqkv written by attention (at CP > 1 its k, v columns after the scatter)
    L.alloc(z.qkv);
    const double kv_args = z.cp > 1 ? 4 * z.kv : 0;
    if (z.cp > 1) L.alloc(z.kv), L.alloc(z.kv);
    L.op(z.wide(2 * z.q + 2 * z.qkv + kv_args));
    L.free(z.q);  // dattn
    if (z.cp > 1)
      for (int i = 0; i < 2; ++i) L.alloc(z.kv), L.alloc(z.kv_local), L.free(z.kv), L.free(z.kv);
    if (z.cp > 1) L.free(2 * z.kv_local);  // copied into dqkv
    L.op(z.wide(z.qkv));                   // rotated back in place
  }
  leave_region(L, z, z.wide(z.x + z.qkv + z.wqkv));  // dxn
  L.op(z.wide(3 * z.R + z.wn));
  L.free(z.R + dropped);
  // keep_for_weight_grads: q, k, v, lse, gate_up, x_rstd, h, h_rstd; then the chunk frees
  // the block's input.
  L.free(z.attn_saved() + z.lse + 2 * z.F + 2 * z.norm + z.R);
  L.free(z.R);
}

// block_backward_weight (W): the weight-gradient GEMMs (the Row layers' output gradients
// gathered again for theirs where B kept them local, each freed after its GEMM) and the norms'
// gradients copied in; then what B kept for them is freed.
void block_backward_weight(Ledger& L, const Sizes& z, bool apart) {
  const double gathered = regathers(z, apart) ? z.x : 0;
  L.alloc(gathered);
  L.op(z.wide(z.x + z.F));  // dWdown
  L.free(gathered);
  L.op(z.wide(2 * z.F + z.x));  // d[Wgate; Wup]
  L.alloc(gathered);
  L.op(z.wide(z.x + z.q));  // dWo
  L.free(gathered);
  L.op(z.wide(z.qkv + z.x));  // d[Wq; Wk; Wv]
  L.free(acts_for_w(z) + grads_for_w(z, apart));
}

}  // namespace

Memory persistent_memory(const Setup& s, int stage) {
  const int zero = s.spec.optimizer.zero, N = s.dp_cp();
  const Precision& pr = s.prec;
  // grad_alias: at dp_cp 1 the gradient shard is the full gradients, kept at every stage.
  const bool alias = ZeroParams::aliases_grads(N);

  // Tied embeddings: where the head is apart from the embedding (looped PP > 1) its stage also
  // holds a copy of unit 0, whose matrix the head reads (UnitPlacement::tied_copy).
  std::vector<int> held;
  for (const std::vector<int>& units : s.stage_chunks(stage))
    held.insert(held.end(), units.begin(), units.end());
  if (s.tied_copy(stage)) held.push_back(0);

  Memory mem;
  for (int g : held) {
    const double np = double(s.padded(g)), sh = np / N;
    // The full compute copy (ZeRO-1/2) and the fp32 master shard when it is its own.
    mem.weights +=
        (zero < 3 ? np * pr.compute_w : 0) + (pr.separate_master(zero) ? sh * pr.master : 0);
    mem.grads += alias ? np * pr.grad : sh * pr.grad + (zero == 1 ? np * pr.grad : 0);
    mem.adam += sh * pr.adam;
  }
  const double b = s.run.micro_batch, Sl = double(s.run.seq_pos.size());
  mem.other = 4 * (b * Sl + Sl + double(s.cfg.seq_len));  // token, query and key positions
  // Each block's sum of its norms' weight gradients [2, d] fp32 (ModelChunk).
  for (int g : held) mem.other += g >= 1 && g <= s.cfg.layers ? 2 * 4 * double(s.cfg.dim) : 0;
  return mem;
}

Memory stage_memory(const Setup& s, int stage) {
  const Layout& l = s.layout();
  const int P = l.pp, K = int(s.run.chunks.size()), L_ = s.cfg.layers, zero = s.spec.optimizer.zero;
  const int m = s.run.micro_batches, N = s.dp_cp();
  const Precision& pr = s.prec;
  const Sizes z(s);
  const bool recompute = s.spec.optimizer.recompute;
  const std::vector<std::vector<int>> chunks = s.stage_chunks(stage);
  const bool full_grads_kept = zero == 1 || ZeroParams::aliases_grads(N);

  Memory mem = persistent_memory(s, stage);
  // Tied embeddings: the head reads unit 0's matrix (the head's stage's copy of it where the
  // embedding is elsewhere); where one stage holds both (PP 1, zb-v's rank 0) unit 0 has two
  // backwards per micro-batch.
  const bool tied = s.cfg.tie_embeddings;
  const int uses0 = tied && !s.embedding_group() ? 2 : 1;
  const double b = s.run.micro_batch, Sl = double(s.run.seq_pos.size());

  Ledger L;
  // split: W runs apart from B. --overlap (parallel/zero.hpp): ZeRO-2/3 free a unit's full
  // gradients at the next hand-over rather than at its own; ZeRO-3 gathers the next unit of
  // the walk into a prefetch slot at each acquire (forwards, unless the last acquire was the
  // unit after; not downwards where split), within the unit's chunk.
  const bool split = splits_backward(s.run.schedule, s.run.weight_delay);
  const bool overlap = ZeroParams::queues(s.spec.device.overlap, N);
  double grads_in_flight = 0;
  std::vector<int> local, chunk_of;  // this rank's units in ZeroParams' order, their chunks
  for (size_t c = 0; c < chunks.size(); ++c)
    for (int g : chunks[c]) local.push_back(g), chunk_of.push_back(int(c));
  int last = -1, slot = -1;  // local indices: the last unit acquired, the prefetched one
  auto weights_of = [&](int i) { return double(s.padded(local[i])) * pr.compute_w; };
  auto acquire = [&](int g) {
    if (zero != 3) return;
    const int i = int(std::find(local.begin(), local.end(), g) - local.begin());
    if (slot == i)
      slot = -1;
    else
      L.alloc(weights_of(i));
    if (!overlap) return;
    const int next = last == i + 1 ? i - 1 : i + 1;
    last = i;
    if (next < 0 || next >= int(local.size()) || chunk_of[next] != chunk_of[i]) return;
    if (next < i && (split || local[next] == 0)) return;  // down: see ZeroParams
    if (slot >= 0) L.free(weights_of(slot));
    L.alloc(weights_of(next));
    slot = next;
  };

  L.alloc(2 * m * b * Sl * 4);  // the step's tokens and targets
  // --doc-mask: each micro-batch's documents of its queries [b Sl] and keys [b S], i32.
  if (s.cfg.doc_mask) L.alloc(m * b * (Sl + double(s.cfg.seq_len)) * 4);
  const double tied_w = double(s.padded(0)) * pr.compute_w;  // the tied matrix, gathered
  std::map<int, int> backwards;                              // per unit, W passes done this step
  std::map<int, bool> grads_held;                            // per unit, its full gradients
  // A unit's full gradients after its last W: freed there, or under --overlap at the next
  // hand-over or the next W action, whichever comes first (its reduce-scatter runs meanwhile;
  // ZeroParams::begin_weight_pass).
  auto release_grads = [&](double bytes) {
    if (!overlap) return L.free(bytes);
    L.free(grads_in_flight);
    grads_in_flight = bytes;
  };
  auto state_bytes = [&](const std::vector<int>& units) {
    double n = z.R;  // the chunk's input (or the embedding's output)
    for (int g : units) {
      if (g >= 1 && g <= L_) n += recompute ? z.R : z.block_saved();
      if (g == L_ + 1) n += z.head_saved();
    }
    return n;
  };
  // Between a split backward's B and W: each block's GEMM inputs and output gradients, the
  // embedding's gradient (B freed the chunk's input, the blocks' outputs and the head's state).
  auto pending_w_bytes = [&](const std::vector<int>& units) {
    double n = 0;
    for (int g : units) {
      if (g >= 1 && g <= L_) n += acts_for_w(z) + grads_for_w(z, true);
      if (g == 0) n += z.R;
    }
    return n;
  };
  // A unit's full gradients (ZeRO-2/3): allocated by its first pass that writes them (its
  // first W; the head's first backward), freed after its last W (reduce-scattered into the
  // shard).
  auto grads_begin = [&](int g) {
    if (full_grads_kept || grads_held[g]) return;
    L.alloc(double(s.padded(g)) * pr.grad);
    grads_held[g] = true;
  };
  auto weight_grads_end = [&](int g) {
    const int uses = g == 0 ? uses0 : 1;
    if (++backwards[g] == uses * m && !full_grads_kept) {
      release_grads(double(s.padded(g)) * pr.grad);
      grads_held[g] = false;
    }
  };
  // W of a block or the embedding (the head's runs in its B).
  auto unit_weights = [&](int g) {
    grads_begin(g);
    if (g >= 1) {
      block_backward_weight(L, z, split);
    } else if (z.sp) {
      L.alloc(z.x), L.op(z.wide(z.x));  // the gradient, gathered and consumed
      L.free(z.R), L.free(z.x);
    } else {
      L.op(z.wide(z.R));
      L.free(z.R);
    }
    weight_grads_end(g);
  };
  int in_flight = 0;
  // Messages sent to other ranks and not yet freed: each [Tl, d], freed by the receive that
  // proves it delivered (parallel/retire.hpp), the rest at the step's end.
  int sent = 0;
  const auto retire = [&](std::span<const PipeMessage> delivered) {
    L.free(double(delivered.size()) * z.R);
    sent -= int(delivered.size());
  };
  const int V = s.spec.layout.vpp;
  const std::vector<Action> actions =
      make_schedule(s.run.schedule, P, V, m, stage, ScheduleMode::Train, s.run.weight_delay);
  const RetiredSends retired =
      retired_sends(s.run.schedule, P, V, m, stage, ScheduleMode::Train, s.run.weight_delay);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    const std::vector<int>& units = chunks[a.chunk];
    const int k = s.chunk_id(stage, a.chunk);
    if (a.kind == Action::Forward) {
      const bool from_self = k > 0 && s.chunk_stage(k - 1) == stage;
      if (k > 0 && !from_self) L.alloc(z.R);  // the received activation (from self: held)
      retire(retired.at(i));
      if (units.front() != 0) L.alloc(z.R);  // the chunk's copy of its input
      for (int g : units) {
        acquire(g);
        if (g == 0) {
          leave_region(L, z, z.wide(z.x + z.wv));
        } else if (g <= L_) {
          block_forward(L, z);
          if (recompute) L.free(z.block_saved() - z.R);
        } else {
          if (tied && zero == 3) L.alloc(tied_w);  // the LM head's matrix
          L.alloc(z.R), L.alloc(z.norm);           // n, rstd
          L.op(z.wide(2 * z.R + z.wn));
          enter_region(L, z);
          L.alloc(z.logits);
          L.op(z.wide(z.logits + z.x + z.wv));
          if (tied && zero == 3) L.free(tied_w);
          L.alloc(z.stats);
          L.op(z.wide(z.logits));
          L.alloc(z.stats);  // their copy for the step's loss (DeviceLoss), to the step's end
        }
        if (zero == 3) L.free(double(s.padded(g)) * pr.compute_w);
      }
      if (k > 0) L.free(z.R);
      // The message to the next chunk: held until retired (or, to this rank's own next
      // chunk, until that chunk's forward has read it).
      if (k < K - 1) L.alloc(z.R);
      if (k < K - 1 && s.chunk_stage(k + 1) != stage) ++sent;
      L.keep(state_bytes(units));
      ++in_flight;
      mem.in_flight = std::max(mem.in_flight, in_flight);
    } else if (a.kind == Action::Backward) {
      if (k < K - 1 && s.chunk_stage(k + 1) != stage) L.alloc(z.R);  // the received gradient
      retire(retired.at(i));
      L.alloc(z.R);  // the chunk's running gradient, sent as the message to the previous chunk
      if (k > 0 && s.chunk_stage(k - 1) != stage) ++sent;
      for (auto it = units.rbegin(); it != units.rend(); ++it) {
        const int g = *it;
        const double np = double(s.padded(g));
        if (g == L_ + 1) {  // the head's B and W at once
          acquire(g);
          grads_begin(g);
          if (tied && zero == 3) L.alloc(tied_w);  // the LM head's matrix
          L.op(z.wide(z.logits));
          // Its gradient: the tied unit's, made at its first backward of the step.
          if (tied) grads_begin(0);
          leave_region(L, z, z.wide(z.x + z.logits + z.wv));  // dn, freed after the norm's backward
          if (tied) {
            if (zero == 3) L.free(tied_w);
            weight_grads_end(0);
          }
          L.op(z.wide(3 * z.R + z.wn));
          L.free(z.sp ? z.R : z.x);
          // The head's state: logits, n, 1/rms, loss statistics, and its input.
          L.free(z.logits + z.x + z.norm + z.stats + z.R);
          if (zero == 3) L.free(np * pr.compute_w);
          weight_grads_end(g);
          continue;
        }
        // The weights held through B, and through W where it follows at once.
        if (g >= 1 || !split) acquire(g);
        if (g >= 1) {
          if (recompute) block_forward(L, z), L.free(z.R);  // the recomputed output is dropped
          block_backward_input(L, z, split);
        }
        // g == 0: the embedding's gradient is the running gradient, kept for its W.
        if (!split) unit_weights(g);
        if (zero == 3 && (g >= 1 || !split)) L.free(np * pr.compute_w);
      }
      if (k < K - 1) L.free(z.R);
      if (units.back() != L_ + 1) L.free(z.R);  // the chunk's output
      L.keep(split ? pending_w_bytes(units) - state_bytes(units) : -state_bytes(units));
      if (!split) --in_flight;
    } else {                                                      // W
      if (overlap) L.free(grads_in_flight), grads_in_flight = 0;  // begin_weight_pass
      for (auto it = units.rbegin(); it != units.rend(); ++it)
        if (*it != L_ + 1) unit_weights(*it);
      L.keep(-pending_w_bytes(units));
      --in_flight;
    }
  }
  // The sends no receive retired are waited for and freed before the loss is taken.
  L.free(sent * z.R);
  // DeviceLoss::take gathers the step's loss statistics into one buffer for its download.
  for (const std::vector<int>& units : chunks)
    if (units.back() == L_ + 1) L.alloc(m * z.stats);
  mem.step_peak = L.peak;
  mem.activations = L.most_kept;
  return mem;
}

PeakMemory peak_memory(const Setup& s) {
  // Only the first, the second and the last stage can be the fullest: stage 0 holds the
  // embedding, the last the head, and in between a later stage never holds more blocks
  // (the first L mod (PP V) chunks take the extra ones) nor more micro-batches in flight
  // (every schedule's warm-up shrinks with the stage) than an earlier one. Walking three
  // stages keeps the plan's cost that of one stage's schedule, not PP times it. A schedule
  // that splits the backward keeps p in flight on every stage, and a later stage more of
  // them between B and W (which hold more than before B): every stage is walked.
  const int P = s.layout().pp;
  std::vector<int> stages = {0, 1, P - 1};
  if (splits_backward(s.run.schedule))
    for (int stage = 2; stage < P - 1; ++stage) stages.push_back(stage);
  PeakMemory best;
  for (int stage : stages) {
    if (stage >= P || (stage > 0 && stage == best.stage)) continue;
    const Memory m = stage_memory(s, stage);
    if (stage == 0 || m.peak() > best.memory.peak()) best = {m, stage};
  }
  return best;
}

double one_f_one_b_peak(const Setup& s) {
  Setup ref = s;
  ref.run.schedule = ScheduleKind::OneFOneB;
  ref.spec.layout.schedule = schedule_name(ScheduleKind::OneFOneB);
  return peak_memory(ref).memory.peak();
}

int zb_weight_delay(const Setup& s) {
  const int P = s.layout().pp;
  if (s.run.schedule != ScheduleKind::ZeroBubbleH1 || P == 1) return kPaperWeightDelay;
  const double bound = one_f_one_b_peak(s);
  Setup z = s;
  const auto fits = [&](int delay) {
    z.run.weight_delay = delay;
    return peak_memory(z).memory.peak() <= bound;
  };
  if (fits(P - 1)) return kPaperWeightDelay;
  // A longer delay only keeps W states longer, so the peak does not fall with it: the largest
  // delay that fits, by bisection over [0, P - 2]; where none does, W inside B (1F1B's peak).
  if (!fits(0)) return kWeightInBackward;
  int lo = 0, hi = P - 2;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

std::vector<MemoryFix> memory_fixes(const Setup& s, double capacity) {
  struct Try {
    std::string key, value, why;
    RunSpec spec;
  };
  std::vector<Try> tries;
  const RunSpec& base = s.spec;
  if (s.run.schedule == ScheduleKind::GPipe && s.layout().pp > 1) {
    Try t{"layout.schedule", "1f1b", "1F1B keeps at most PP micro-batches in flight, GPipe all m",
          base};
    t.spec.layout.schedule = "1f1b";
    tries.push_back(t);
  }
  if (!base.optimizer.recompute) {
    Try t{"optimizer.recompute", "full",
          "a layer keeps only its input for backward and runs its forward again", base};
    t.spec.optimizer.recompute = true;
    tries.push_back(t);
  }
  for (int zero = base.optimizer.zero + 1; zero <= 3; ++zero) {
    Try t{"optimizer.zero", std::to_string(zero),
          zero == 2 ? "gradients sharded over dp_cp" : "weights and gradients sharded over dp_cp",
          base};
    t.spec.optimizer.zero = zero;
    tries.push_back(t);
  }
  if (s.layout().tp > 1 && !base.layout.sp) {
    Try t{"layout.sp", "on", "the residual stream and norms split over TP along the tokens", base};
    t.spec.layout.sp = true;
    tries.push_back(t);
  }
  std::vector<MemoryFix> out;
  for (const Try& t : tries) {
    const double peak = peak_memory(make_setup(t.spec, s.cfg, s.world())).memory.peak();
    if (peak <= capacity) out.push_back({t.key, t.value, peak, t.why});
  }
  return out;
}

double cpu_attention_scratch(const Setup& s, int threads) {
  const double rows = double(std::min<int64_t>(kAttentionBlock, int64_t(s.run.seq_pos.size())));
  return 2.0 * rows * double(s.cfg.seq_len) * 4 * threads;
}

}  // namespace tetra::plan
