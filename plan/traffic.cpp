// Mirrors where the layers communicate: parallel/tp.cpp (the region edges), parallel/cp.cpp
// (K/V all-gather, dK/dV reduce-scatter), parallel/pipeline.cpp (one send per activation and
// per gradient between stages), parallel/zero.cpp (the per-unit reduce-scatter, the weight
// all-gathers and a tied embedding's gradient summed over the embedding group) and
// train/trainer.cpp (one all-reduce of two doubles over the world).
#include "plan/traffic.hpp"

namespace tetra::plan {

double ring_factor(CommOp op, int n) {
  switch (op) {
    case CommOp::AllReduce:
      return 2.0 * (n - 1) / n;
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
      return double(n - 1) / n;
    case CommOp::SendRecv:
    case CommOp::Broadcast:
      return 1.0;
    default:
      return 0.0;
  }
}

namespace {

// Accumulates calls by (group, op, what).
class Tally {
 public:
  void add(const std::string& group, int size, CommOp op, const std::string& what, double tensor,
           int64_t calls) {
    for (Collective& c : list_)
      if (c.group == group && c.op == op && c.what == what && c.tensor == tensor) {
        c.calls += calls;
        return;
      }
    list_.push_back({group, size, op, what, tensor, calls});
  }
  std::vector<Collective> list_;
};

}  // namespace

std::vector<Collective> step_traffic(const Setup& s, int stage) {
  const Layout& l = s.layout();
  const ModelConfig& c = s.cfg;
  const int t = l.tp, cp = l.cp, P = l.pp, K = int(s.run.chunks.size());
  const int64_t m = s.run.micro_batches, T = s.tokens(), Tl = s.rows(), d = c.dim;
  const int64_t kw = int64_t(c.kv_heads / t) * c.head_dim();
  const double act = s.prec.act, x = double(T * d) * act;  // [T, d] in activations' bytes
  const bool sp = s.spec.layout.sp;
  Tally tally;

  // One micro-batch's TP and CP calls of a block, forward or backward (which mirror each
  // other: two region entries and two exits, K and V each way).
  auto block_pass = [&](int64_t n, bool backward) {
    if (sp) {
      tally.add("tp", t, CommOp::AllGather, "SP all-gather of a block's input [T, d]", x, 2 * n);
      tally.add("tp", t, CommOp::ReduceScatter, "SP reduce-scatter of a block's output [T, d]", x,
                2 * n);
    } else {
      tally.add("tp", t, CommOp::AllReduce,
                backward ? "all-reduce of dx into attention and MLP [T, d]"
                         : "all-reduce after o and down [T, d]",
                x, 2 * n);
    }
    if (cp > 1) {
      const double kv = double(cp * T * kw) * act;
      if (backward)
        tally.add("cp", cp, CommOp::ReduceScatter, "dK and dV reduce-scatter [CP T, kv]", kv,
                  2 * n);
      else
        tally.add("cp", cp, CommOp::AllGather, "K and V all-gather [CP T, kv]", kv, 2 * n);
    }
  };

  // ZeRO over dp_cp: one gradient reduce-scatter per unit per step; the weights all-gathered
  // after the update (ZeRO-1/2) or before each forward and backward of the unit's own
  // (ZeRO-3; a tied copy has none: the head's gathers of it are counted with the head; the
  // embedding's W apart from its B, as zb-h1 runs it, needs none).
  auto zero_sync = [&](int g, bool own_passes) {
    const int N = s.dp_cp();
    const double np = double(s.padded(g));
    tally.add("dp_cp", N, CommOp::ReduceScatter, "gradient reduce-scatter (per unit)",
              np * s.prec.grad, 1);
    if (s.spec.optimizer.zero < 3)
      tally.add("dp_cp", N, CommOp::AllGather, "updated weights all-gather (per unit)",
                np * s.prec.compute_w, 1);
    else if (own_passes && g == 0 &&
             splits_backward(s.run.schedule, s.run.weight_delay))  // its W apart: none
      tally.add("dp_cp", N, CommOp::AllGather, "ZeRO-3 weight all-gather (embedding, F)",
                np * s.prec.compute_w, m);
    else if (own_passes)
      tally.add("dp_cp", N, CommOp::AllGather, "ZeRO-3 weight all-gather (per unit, F and B)",
                np * s.prec.compute_w, 2 * m);
  };

  const std::vector<std::vector<int>> chunks = s.stage_chunks(stage);
  const int L = c.layers;
  for (size_t v = 0; v < chunks.size(); ++v) {
    const int k = s.chunk_id(stage, int(v));
    for (int g : chunks[v]) {
      const UnitSpec& u = s.units[g];
      if (g == 0) {  // vocab-parallel embedding: its exit forward, entry backward
        if (sp) {
          tally.add("tp", t, CommOp::ReduceScatter, "embedding output [T, d]", x, m);
          tally.add("tp", t, CommOp::AllGather, "embedding gradient [T, d]", x, m);
        } else {
          tally.add("tp", t, CommOp::AllReduce, "embedding output [T, d]", x, m);
        }
      } else if (g <= L) {
        block_pass(m, false);
        block_pass(m, true);
        // A W apart from its B gathers the Row layers' output gradients again
        // (transformer/block.hpp, BlockGrads).
        if (sp && t > 1 && splits_backward(s.run.schedule, s.run.weight_delay))
          tally.add("tp", t, CommOp::AllGather, "SP all-gather of o's and down's dy for W [T, d]",
                    x, 2 * m);
        if (s.spec.optimizer.recompute) block_pass(m, false);
      } else {  // final norm, LM head (column-parallel) and the vocab-parallel loss
        if (sp) {
          tally.add("tp", t, CommOp::AllGather, "LM head input [T, d]", x, m);
          tally.add("tp", t, CommOp::ReduceScatter, "LM head input gradient [T, d]", x, m);
        } else {
          tally.add("tp", t, CommOp::AllReduce, "LM head input gradient [T, d]", x, m);
        }
        tally.add("tp", t, CommOp::AllReduce, "loss: row maxima [T] fp32", double(T) * 4, m);
        tally.add("tp", t, CommOp::AllReduce, "loss: sum of exp, target logit [T, 2] fp32",
                  double(2 * T) * 4, m);
      }
      // --sp: gradients of TP-replicated weights (norms) are partial sums over TP.
      if (sp && t > 1)
        for (const ParamInfo& p : u.params)
          if (p.tp_dim < 0)
            tally.add("tp", t, CommOp::AllReduce, "SP norm weight gradients [d] fp32",
                      double(p.numel()) * s.prec.grad, 1);
      zero_sync(g, true);
      // Tied embeddings: the head reads the embedding's matrix, gathered for it too under
      // ZeRO-3; where the embedding is on another stage, from this stage's copy, which is
      // synced as a unit of its own.
      if (g == L + 1 && c.tie_embeddings) {
        if (s.tied_copy(stage)) zero_sync(0, false);
        if (s.spec.optimizer.zero == 3)
          tally.add("dp_cp", s.dp_cp(), CommOp::AllGather,
                    "ZeRO-3 all-gather of the tied embedding for the head (F and B)",
                    double(s.padded(0)) * s.prec.compute_w, 2 * m);
      }
    }
    // Pipeline: an activation to the next chunk, a gradient to the previous one, where that
    // chunk is on another stage (not zb-v's turn at its last stage).
    const double msg = double(Tl * d) * act;
    if (k < K - 1 && s.chunk_stage(k + 1) != stage)
      tally.add("pp", P, CommOp::SendRecv, "activation send [Tl, d]", msg, m);
    if (k > 0 && s.chunk_stage(k - 1) != stage)
      tally.add("pp", P, CommOp::SendRecv, "gradient send [Tl, d]", msg, m);
  }
  // Tied embeddings with the head apart (Megatron's embedding group): the first stage and the
  // head's sum the matrix's gradient shard before the update.
  if (s.embedding_group() && (stage == 0 || s.tied_copy(stage)))
    tally.add("embed", 2, CommOp::AllReduce, "tied embedding gradient shard all-reduce fp32",
              double(s.padded(0)) / s.dp_cp() * s.prec.grad, 1);
  // The step's totals: loss and gradient norm, two doubles.
  tally.add("world", s.world(), CommOp::AllReduce, "step totals (2 doubles)", 16, 1);
  return tally.list_;
}

std::map<std::string, double> bytes_by_group(const std::vector<Collective>& calls) {
  std::map<std::string, double> out = {{"tp", 0}, {"cp", 0}, {"pp", 0}, {"dp_cp", 0}, {"world", 0}};
  for (const Collective& c : calls) out[c.group] += c.bytes();
  return out;
}

}  // namespace tetra::plan
