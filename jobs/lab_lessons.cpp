// The seven lessons. Each states its layout's sizes (from tetra train's own parser and the
// plan's units), computes the textbook formula from them, and reads the measured number from
// the run's metrics: bytes from comm_bytes, memory from peak_memory_bytes, the bubble, and
// the step a supervised restart resumed at.
#include "jobs/lab_lessons.hpp"

#include <cstdio>
#include <sstream>

#include "parallel/cp.hpp"
#include "plan/memory.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {
namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A lesson's run: its flags, and the configuration tetra train makes of them.
struct Setup {
  std::vector<std::string> flags;
  TrainConfig config;
  plan::Setup plan;
};

Setup setup(const TrainArgs& train, const std::string& flags, int ranks) {
  Setup s;
  s.flags = words(flags + " --peak-tflops 1");  // no GEMM probe: the lessons time nothing
  s.config = train.parse(s.flags);
  s.plan = plan::make_setup(s.config.run_spec(), s.config.model, ranks);
  return s;
}

// The parameters a rank of pipeline stage 0 holds, TP-local, each unit padded to a multiple
// of dp_cp as ZeRO's flat buffers are.
double stage0_params(const plan::Setup& s) {
  double n = 0;
  for (const std::vector<int>& chunk : s.stage_chunks(0))
    for (int u : chunk) n += double(s.padded(u));
  return n;
}

// A group's bytes in the last record, noting when the steps disagree (they do not in tetra).
Measured group_bytes(const std::vector<json>& records, const std::string& group) {
  Measured m;
  m.source = "comm_bytes." + group + " in the run's metrics";
  bool first = true;
  for (const json& r : records) {
    check(r.contains("comm_bytes") && r["comm_bytes"].contains(group), "the metrics have no ",
          m.source);
    const double b = double(json_int(r["comm_bytes"][group]).value_or(-1));
    if (!first && b != m.value) m.note = "the steps sent different bytes";
    m.value = b;
    first = false;
  }
  check(!first, "the run wrote no metrics");
  return m;
}

Lesson dp(const TrainArgs& train) {
  const Setup s =
      setup(train,
            "--dp 4 --layers 2 --dim 64 --heads 4 --kv-heads 4 --ffn-dim 128 --seq-len 16 "
            "--global-batch 8 --steps 2",
            4);
  const double P = stage0_params(s.plan), N = 4;
  Lesson l;
  l.name = "dp";
  l.title = "data parallelism and the ring all-reduce";
  l.idea =
      "Data parallelism: every rank holds the whole model and trains on its own part of the\n"
      "batch; then the gradients are summed over the N ranks. A ring all-reduce does it in two\n"
      "passes around the ring: a reduce-scatter (each rank ends up with the sum of 1/N of the\n"
      "tensor) and an all-gather (each rank collects the other sums). Each pass sends N-1\n"
      "pieces of 1/N, so a rank sends 2(N-1)/N of the tensor: close to 2x for large N.\n"
      "tetra's ZeRO-1 makes the same two passes around Adam: it reduce-scatters the fp32\n"
      "gradients, updates its 1/N shard, and all-gathers the updated weights.\n"
      "Here: DP 4, ZeRO-1, fp32 (4 bytes a value), P = " +
      commas(P) + " parameters.";
  l.question = "How many bytes does one rank send in its data-parallel group in one step?";
  l.formula = 2 * (N - 1) / N * 4 * P;
  l.working = "2(N-1)/N x 4 B x P = 2 x 3/4 x 4 x " + commas(P) + " = " + commas(l.formula) +
              " B: (N-1)/N x 4P for the gradient reduce-scatter and as much for the weight "
              "all-gather.\n\"Twice the gradients\" (" +
              commas(8 * P) + " B) is the ring's limit as N grows; at N = 4 it sends 3/4 of that.";
  l.runs = {{"DP 4, ZeRO-1", 4, s.flags}};
  l.measure = [](const std::vector<std::vector<json>>& m) { return group_bytes(m[0], "dp_cp"); };
  return l;
}

Lesson zero(const TrainArgs& train) {
  const Setup s =
      setup(train,
            "--dp 4 --zero 3 --layers 8 --dim 64 --heads 4 --kv-heads 4 --ffn-dim 256 --seq-len 8 "
            "--global-batch 4 --steps 2",
            4);
  const double P = stage0_params(s.plan), N = 4;
  double unit = 0;
  for (int u = 0; u < int(s.plan.units.size()); ++u)
    unit = std::max(unit, double(s.plan.padded(u)));
  const plan::Memory mem = plan::peak_memory(s.plan).memory;
  const double A = mem.activations;
  Lesson l;
  l.name = "zero";
  l.title = "ZeRO 1, 2 and 3: memory and traffic";
  l.idea =
      "Training in fp32 with Adam keeps 16 bytes per parameter: the weight (4), its gradient\n"
      "(4) and Adam's two moments (8). ZeRO shards this state over the N data-parallel ranks:\n"
      "stage 1 the moments, stage 2 the gradients too, stage 3 the weights as well, so that a\n"
      "rank keeps 16P/N. But nothing computes with a shard: under ZeRO-3 a rank all-gathers a\n"
      "unit (the embedding, a block, or the head) before it uses it, and the unit's full\n"
      "gradient lives until it is reduce-scattered: 4 + 4 bytes per parameter of the unit at\n"
      "work. The activations a micro-batch keeps for its backward come on top. The price in\n"
      "traffic: ZeRO-3 gathers each unit before every forward and every backward.\n"
      "Here: DP 4, ZeRO-3, fp32, P = " +
      commas(P) + " parameters, the largest unit " + commas(unit) +
      ", activations A = " + commas(A) + " B (as tetra plan counts them).";
  l.question = "What is the peak memory of one rank during a step, in bytes?";
  l.formula = 16 * P / N + 8 * unit + A;
  l.working = "16P/N + 8 x P_unit + A = 16 x " + commas(P) + " / 4 + 8 x " + commas(unit) + " + " +
              commas(A) + " = " + commas(l.formula) +
              " B.\nThe shards alone (16P/N = " + commas(16 * P / N) +
              " B) leave out the unit being gathered; without ZeRO-3's sharding of the weights\n"
              "(ZeRO-1: 4P weights, 4P gradients and their 4P/N reduced shard, 8P/N Adam) a rank "
              "would hold " +
              commas(8 * P + 12 * P / N + A) + " B.";
  l.runs = {{"DP 4, ZeRO-3", 4, s.flags}};
  const double planned = mem.peak();
  l.measure = [planned](const std::vector<std::vector<json>>& m) {
    Measured r;
    r.source = "peak_memory_bytes in the run's metrics (the most any rank held)";
    for (const json& rec : m[0])
      if (rec.contains("peak_memory_bytes"))
        r.value = std::max(r.value, rec["peak_memory_bytes"].get<double>());
    check(r.value > 0, "the metrics have no peak_memory_bytes");
    r.note = "tetra plan's memory model, which walks every allocation, predicts " +
             commas(planned) + " B.";
    return r;
  };
  return l;
}

Lesson tp(const TrainArgs& train) {
  const std::string model =
      "--tp 4 --layers 2 --dim 64 --heads 4 --kv-heads 4 --ffn-dim 128 --seq-len 16 "
      "--global-batch 4 --steps 2";
  const Setup sp = setup(train, model + " --sp", 4), plain = setup(train, model, 4);
  const ModelConfig& c = sp.config.model;
  const double N = 4, L = c.layers, d = c.dim, T = double(sp.plan.tokens());
  const double m = sp.plan.run.micro_batches;
  const double x = T * d * 4, ring = 2 * (N - 1) / N;
  const double without = ring * m * ((4 * L + 2) * x + 3 * T * 4);
  Lesson l;
  l.name = "tp";
  l.title = "tensor parallelism and its four all-reduces, with and without SP";
  l.idea =
      "Tensor parallelism (Megatron) splits each block's matrices over N ranks: q, k, v, gate\n"
      "and up by their outputs (column-parallel), o and down by their inputs (row-parallel),\n"
      "whose outputs are then partial sums. So a block all-reduces its [T, d] activations\n"
      "twice forward (after o and after down) and twice backward (dx into attention and into\n"
      "the MLP): four all-reduces per block per micro-batch. The vocabulary-parallel\n"
      "embedding all-reduces its output, the LM head its input's gradient, and the loss 3\n"
      "floats a token (row maxima, sums of exponentials, target logits).\n"
      "Sequence parallelism (--sp) splits norms and residuals along the tokens: each\n"
      "all-reduce becomes a reduce-scatter and an all-gather, (N-1)/N each. And each norm's\n"
      "weight gradient, now a partial sum, is all-reduced once a step (d floats, 2L+1 norms).\n"
      "Here: TP 4, L = 2 blocks, d = 64, one micro-batch of T = " +
      commas(T) + " tokens (4 sequences of 16), fp32.";
  l.question = "With --sp, how many bytes does one rank send in its TP group in one step?";
  l.formula = without + ring * (2 * L + 1) * d * 4;
  l.working = "2(N-1)/N x [(4L + 2) x T d x 4 B + 3T x 4 B + (2L + 1) x d x 4 B] = 1.5 x [10 x " +
              commas(x) + " + " + commas(3 * T * 4) + " + " + commas((2 * L + 1) * d * 4) +
              "] = " + commas(l.formula) +
              " B.\nAn all-reduce is a reduce-scatter plus an all-gather, so SP sends what the "
              "all-reduces sent (" +
              commas(without) +
              " B without SP), plus the norms.\nSP saves activation memory, not traffic.";
  l.runs = {{"TP 4 with --sp", 4, sp.flags}, {"TP 4 without SP", 4, plain.flags}};
  l.measure = [](const std::vector<std::vector<json>>& m) {
    Measured r = group_bytes(m[0], "tp");
    r.note = "Without SP the same run sent " + commas(group_bytes(m[1], "tp").value) + " B.";
    return r;
  };
  return l;
}

Lesson pp(const TrainArgs& train) {
  // Blocks wide enough that a micro-batch's compute outweighs a message's latency, and one
  // rank per stage on a 2-core laptop: the measured bubble then comes near the formula.
  const Setup s =
      setup(train,
            "--pp 2 --schedule gpipe --layers 2 --dim 256 --heads 4 --kv-heads 4 --ffn-dim 1024 "
            "--seq-len 64 --global-batch 4 --micro-batch 1 --steps 4",
            2);
  const double p = 2, m = s.plan.run.micro_batches;
  char working[300];
  std::snprintf(working, sizeof working,
                "(p-1)/(m+p-1) = %.0f/%.0f = %.3g. (p-1)/m = %.3g divides the idle time by the "
                "compute time (the form interleaved schedules report), not by the step.",
                p - 1, m + p - 1, (p - 1) / (m + p - 1), (p - 1) / m);
  Lesson l;
  l.name = "pp";
  l.title = "pipeline schedules and the bubble";
  l.unit = Unit::Fraction;
  l.idea =
      "Pipeline parallelism cuts the blocks into p stages on p ranks, and a step's m\n"
      "micro-batches flow through them. Under GPipe every stage runs all m forwards, then all\n"
      "m backwards. The last stage starts only after p-1 forward slots, and the first waits as\n"
      "long for the first backward to come back: of the m + p - 1 slots a step takes, each\n"
      "stage is idle in p - 1. That idle share of the step is the bubble, (p-1)/(m+p-1).\n"
      "1F1B has the same bubble but keeps p micro-batches in flight instead of m; interleaving\n"
      "V model chunks per rank divides it by about V.\n"
      "Here: PP 2 (one block a stage), GPipe, m = " +
      std::to_string(int(m)) + " micro-batches of one sequence.";
  l.question = "What share of the step is a stage idle? (a fraction, or a percentage)";
  l.formula = (p - 1) / (m + p - 1);
  l.working = working;
  l.runs = {{"PP 2, GPipe", 2, s.flags}};
  l.measure = [](const std::vector<std::vector<json>>& m) {
    Measured r;
    r.source =
        "bubble in the run's metrics (time blocked on pipeline receives over the step, "
        "averaged over the ranks and the steps after the first)";
    int n = 0;
    for (size_t i = m[0].size() > 1 ? 1 : 0; i < m[0].size(); ++i) {
      check(m[0][i].contains("bubble"), "the metrics have no bubble");
      r.value += m[0][i]["bubble"].get<double>();
      ++n;
    }
    check(n > 0, "the run wrote no metrics");
    r.value /= n;
    r.note =
        "The formula counts slots of equal work. A real run adds what it ignores: the head and\n"
        "the loss on the last stage, messages that take time, and on a CPU with fewer cores\n"
        "than ranks, ranks that wait for a core.";
    return r;
  };
  return l;
}

// Query-key pairs under the causal mask for the positions a CP rank holds: position t
// attends to t + 1 keys.
double causal_pairs(const std::vector<int32_t>& positions) {
  double n = 0;
  for (int32_t t : positions) n += t + 1;
  return n;
}

Lesson cp(const TrainArgs& train) {
  const Setup s =
      setup(train,
            "--cp 2 --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn-dim 128 --seq-len 16 "
            "--global-batch 4 --steps 2",
            2);
  const ModelConfig& c = s.config.model;
  const double N = 2, L = c.layers, S = c.seq_len, b = s.plan.run.micro_batch;
  const double m = s.plan.run.micro_batches, kv = double(c.kv_heads) * c.head_dim();
  std::string balance;
  for (int r = 0; r < 2; ++r) {
    const std::vector<int32_t> pos = cp_positions(c.seq_len, 2, r);
    balance += "  CP rank " + std::to_string(r) + " holds positions " +
               std::to_string(pos.front()) + "-" + std::to_string(pos[pos.size() / 2 - 1]) + ", " +
               std::to_string(pos[pos.size() / 2]) + "-" + std::to_string(pos.back()) + ": " +
               commas(causal_pairs(pos)) + " query-key pairs of each sequence\n";
  }
  std::vector<int32_t> lower, upper;
  for (int t = 0; t < c.seq_len; ++t) (t < c.seq_len / 2 ? lower : upper).push_back(t);
  Lesson l;
  l.name = "cp";
  l.title = "context parallelism and its load balance";
  l.idea =
      "Context parallelism cuts every sequence over N ranks. Under the causal mask token t\n"
      "attends to t + 1 keys, so later tokens cost more: tetra (as Llama 3) cuts a sequence\n"
      "into 2N chunks and gives rank c chunks c and 2N-1-c, an early one and a late one:\n" +
      balance + "  (cut in two halves instead, the ranks would score " +
      commas(causal_pairs(lower)) + " and " + commas(causal_pairs(upper)) +
      ").\n"
      "A rank computes the queries of its own tokens, but needs the keys and values of all:\n"
      "before attention it all-gathers K and V over the CP group ((N-1)/N of each full\n"
      "[b S, kv] tensor), and after attention's backward it reduce-scatters dK and dV.\n"
      "Here: CP 2, L = 2 blocks, one micro-batch of b = 4 sequences of S = 16 tokens,\n"
      "kv = 2 heads x 16 = 32 values a token, fp32.";
  l.question = "How many bytes does one rank send in its CP group in one step?";
  l.formula = 4 * L * m * (N - 1) / N * b * S * kv * 4;
  l.working =
      "Per block and micro-batch four calls (K, V all-gathered; dK, dV reduce-scattered) "
      "of (N-1)/N x b S kv x 4 B:\n4 x L x (N-1)/N x b S kv x 4 B = 4 x 2 x 1/2 x " +
      commas(b * S * kv * 4) + " = " + commas(l.formula) +
      " B. An all-gather sends the N-1 pieces it does not hold, not the whole tensor.";
  l.runs = {{"CP 2", 2, s.flags}};
  l.measure = [](const std::vector<std::vector<json>>& m) { return group_bytes(m[0], "cp"); };
  return l;
}

Lesson four_d(const TrainArgs& train) {
  const Setup s =
      setup(train,
            "--tp 2 --cp 2 --pp 2 --dp 2 --layers 4 --dim 64 --heads 4 --kv-heads 2 --ffn-dim 128 "
            "--seq-len 16 --global-batch 8 --steps 2",
            16);
  const double P0 = stage0_params(s.plan), N = 4;
  Lesson l;
  l.name = "4d";
  l.title = "the 4D composition on 16 ranks";
  l.idea =
      "The four dimensions compose in [TP, CP, PP, DP] order: rank = tp + TP(cp + CP(pp +\n"
      "PP dp)). TP varies fastest, so a TP group sits inside one machine; DP is outermost, as\n"
      "its traffic overlaps compute best. A rank holds its pipeline stage's units and of each\n"
      "matrix its TP slice (norms whole). Weights are replicated over CP as well as DP: CP\n"
      "ranks hold the same weights and see other tokens of the same sequences. So gradients\n"
      "are reduce-scattered, and updated weights all-gathered, over dp_cp: CP x DP ranks.\n"
      "Here: TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks, ZeRO-1, fp32. Rank 0 (stage 0: the\n"
      "embedding and blocks 0-1, TP halves) holds P0 = " +
      commas(P0) + " parameters.";
  l.question = "How many bytes does rank 0 send in its dp_cp group in one step?";
  l.formula = 2 * (N - 1) / N * 4 * P0;
  l.working = "N = CP x DP = 4 ranks share rank 0's weights: 2(N-1)/N x 4 B x P0 = 1.5 x 4 x " +
              commas(P0) + " = " + commas(l.formula) + " B.\nCounting DP = 2 alone gives 1 x 4 x " +
              commas(P0) + " = " + commas(4 * P0) +
              " B: CP's ranks take part in the same reduce-scatter.";
  l.runs = {{"TP 2 x CP 2 x PP 2 x DP 2", 16, s.flags}};
  l.measure = [](const std::vector<std::vector<json>>& m) { return group_bytes(m[0], "dp_cp"); };
  return l;
}

Lesson resume() {
  // The lab adds the checkpoint directory (which --ckpt-every needs) when it runs this.
  const std::vector<std::string> flags = words(
      "--dp 2 --layers 2 --dim 32 --heads 4 --kv-heads 2 --ffn-dim 64 --seq-len 16 "
      "--global-batch 4 --steps 9 --ckpt-every 3 --inject-failure 1@7 --peak-tflops 1");
  Lesson l;
  l.name = "resume";
  l.title = "a failure and the resume";
  l.unit = Unit::Step;
  l.idea =
      "A rank that dies mid-step takes the whole job down (mpirun stops the others). tetra\n"
      "launch reruns it with --resume auto, and the run continues from the newest complete\n"
      "checkpoint: the steps after it are trained again (lost work), and the final weights are\n"
      "bitwise those of a run that never failed. The checkpoint written after step s holds s+1\n"
      "steps of training and is named step_(s+1); training resumes at that step.\n"
      "Here: DP 2, steps 0-8, --ckpt-every 3, rank 1 killed in step 7 (--inject-failure 1@7).";
  l.question = "At which step does the restarted run start training again?";
  l.formula = 6;
  l.working =
      "Checkpoints come after every 3 steps: step_3 (steps 0-2) and step_6 (steps 0-5) exist "
      "when step 7 fails.\nThe restart loads step_6 and trains from step 6: floor(7/3) x 3 = 6. "
      "Step 6, finished before the failure, is trained again.";
  l.runs = {{"DP 2 under tetra launch", 2, flags, true}};
  l.measure = [](const std::vector<std::vector<json>>& m) {
    Measured r;
    r.source = "the first step the second attempt wrote to the metrics";
    for (size_t i = 1; i < m[0].size(); ++i)
      if (m[0][i]["step"].get<int64_t>() <= m[0][i - 1]["step"].get<int64_t>()) {
        const int64_t from = m[0][i]["step"].get<int64_t>(), to = m[0][i - 1]["step"];
        r.value = double(from);
        r.note =
            (from == to ? "Step " + std::to_string(from) + " was"
                        : "Steps " + std::to_string(from) + "-" + std::to_string(to) + " were") +
            " trained twice; the step after died half-way.";
        return r;
      }
    fail("the metrics show no restart");
  };
  return l;
}

}  // namespace

std::vector<Lesson> lessons(const TrainArgs& train) {
  return {dp(train), zero(train), tp(train), pp(train), cp(train), four_d(train), resume()};
}

size_t find_lesson(const std::vector<Lesson>& all, const std::string& which) {
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == which || std::to_string(i + 1) == which) return i;
  std::string names;
  for (const Lesson& l : all) names += (names.empty() ? "" : ", ") + l.name;
  fail("no lesson '", which, "' (the lessons: ", names, "; tetra lab --list describes them)");
}

std::string show(Unit unit, double value) {
  char buf[64];
  switch (unit) {
    case Unit::Bytes:
      return commas(value) + " B";
    case Unit::Fraction:
      std::snprintf(buf, sizeof buf, "%.1f %% (%.4f)", 100 * value, value);
      return buf;
    case Unit::Step:
      std::snprintf(buf, sizeof buf, "step %.0f", value);
      return buf;
  }
  return "";
}

}  // namespace tetra::lab
