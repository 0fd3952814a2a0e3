// The lessons that split the model's tensors: tensor parallelism's all-reduces (tp), sequence
// parallelism's memory (sp), and context parallelism's K/V traffic and load balance (cp).
#include <algorithm>

#include "jobs/lab_build.hpp"
#include "parallel/cp.hpp"
#include "plan/memory.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {
namespace {

// TP 4 over 2 blocks of width 64, one micro-batch of 4 sequences of 16: the tp and sp
// lessons' run, with or without SP.
Setup tp_run(const TrainArgs& train, bool sp) {
  TrainConfig c = tiny(2, 64, 4, 4, 128, 16, 4, 2);
  c.layout.tp = 4;
  c.layout.sp = sp;
  return setup(train, c, 4);
}

}  // namespace

Lesson tp(const TrainArgs& train) {
  const Setup s = tp_run(train, true), plain = tp_run(train, false);
  const ModelConfig& c = s.config.model;
  const double N = 4, L = c.layers, d = c.dim, T = double(s.plan.tokens());
  const double x = T * d * 4, ring = 2 * (N - 1) / N, loss = 3 * T * 4, norms = (2 * L + 1) * d * 4;
  const double without = ring * ((4 * L + 2) * x + loss);
  Lesson l;
  l.name = "tp";
  l.values = {{"T", commas(T)},
              {"x", commas(x)},
              {"loss", commas(loss)},
              {"norms", commas(norms)},
              {"without", commas(without)},
              {"bytes", commas(without + ring * norms)}};
  l.title = {"tensor parallelism and its four all-reduces, with SP",
             "张量并行和它的四次全归约（开启 SP）"};
  l.idea = {
      "Tensor parallelism (Megatron) splits each block's matrices over N ranks: q, k, v, gate "
      "and up by their outputs (column-parallel), o and down by their inputs (row-parallel), "
      "whose outputs are then partial sums. So a block all-reduces its [T, d] activations twice "
      "forward (after o and after down) and twice backward (dx into attention and into the "
      "MLP): four all-reduces per block per micro-batch. The vocabulary-parallel embedding "
      "all-reduces its output, the LM head its input's gradient, and the loss 3 floats a token "
      "(row maxima, sums of exponentials, target logits).\n"
      "Sequence parallelism (--sp) splits norms and residuals along the tokens: each all-reduce "
      "becomes a reduce-scatter and an all-gather, (N-1)/N each. And each norm's weight "
      "gradient, now a partial sum, is all-reduced once a step (d floats, 2L+1 norms).\n"
      "Here: TP 4, L = 2 blocks, d = 64, one micro-batch of T = {T} tokens (4 sequences of 16), "
      "fp32.",
      "张量并行（Megatron）把每个块的矩阵切到 N 个 rank 上：q、k、v、gate、up 按输出切（列并行），"
      "o 和 down 按输入切（行并行），它们的输出因此是部分和。所以一个块要对 [T, d] 的激活值做"
      "两次前向全归约（o 之后、down 之后）和两次反向全归约（进入注意力和进入 MLP 的 dx）：每个"
      "块每个微批次四次。按词表切分的词嵌入要全归约它的输出，输出头要全归约输入的梯度，损失"
      "每个词元还要 3 个数（行最大值、指数和、目标 logit）。\n"
      "序列并行（--sp）把归一化和残差沿词元切开：每次全归约变成一次归约散射加一次全收集，"
      "各发 (N-1)/N。每个归一化层的权重梯度这时是部分和，每步还要全归约一次（d 个数，共 "
      "2L+1 个归一化层）。\n"
      "本课：TP 4，L = 2 个块，d = 64，一个微批次 T = {T} 个词元（4 条、每条 16 个），fp32。"};
  l.question = {"With --sp, how many bytes does one rank send in its TP group in one step?",
                "开启 --sp 时，一步之内一个 rank 在张量并行组里发出多少字节？"};
  l.formula = without + ring * norms;
  l.mistakes = {
      {"blocks-only",
       ring * 4 * L * x,
       {"those are the four all-reduces per block alone; the embedding's output, the LM head's "
        "input gradient, the loss's 3 floats a token and SP's norm gradients come on top.",
        "这只算了每个块的四次全归约；词嵌入的输出、输出头的输入梯度、损失每个词元的 3 个数和 "
        "SP 的归一化梯度都还要另加。"}},
      {"forward-only",
       ring * ((2 * L + 1) * x + loss),
       {"that is the forward's all-reduces; the backward all-reduces as many [T, d] gradients.",
        "这只是前向的全归约；反向对 [T, d] 的梯度还要做同样多次。"}},
      {"no-ring",
       (4 * L + 2) * x + loss + norms,
       {"that counts each tensor once; a ring all-reduce sends 2(N-1)/N = 1.5 times it.",
        "这把每个张量只算了一遍；环形全归约要发它的 2(N-1)/N = 1.5 倍。"}},
      {"sp-doubles",
       2 * without + ring * norms,
       {"SP splits each all-reduce into a reduce-scatter and an all-gather; it does not add "
        "one: the same bytes, plus the norms.",
        "SP 把每次全归约拆成一次归约散射和一次全收集，并没有多出一次：字节数不变，只多了归一化"
        "层的梯度。"}},
      {"values",
       (without + ring * norms) / 4,
       {"that counts values, not bytes: each fp32 value is 4 bytes.",
        "这是数值的个数，不是字节数：每个 fp32 数占 4 字节。"}},
  };
  l.hint = {
      "count the [T, d] tensors all-reduced in a step: four per block, the embedding's "
      "output and the head's input gradient; add the loss's 3 floats a token and the "
      "2L+1 norm gradients of d floats; each costs 2(N-1)/N of its bytes.",
      "数一数一步中全归约了几个 [T, d] 张量：每块四个，加上词嵌入的输出和输出头的输入"
      "梯度；再加损失每个词元 3 个数、2L+1 个长度为 d 的归一化梯度；每个都要发自身字节数"
      "的 2(N-1)/N 倍。"};
  l.working = {
      "2(N-1)/N x [(4L + 2) x T d x 4 B + 3T x 4 B + (2L + 1) x d x 4 B] = 1.5 x [10 x {x} + "
      "{loss} + {norms}] = {bytes} B. An all-reduce is a reduce-scatter plus an all-gather, so "
      "SP sends what the all-reduces sent ({without} B without SP), plus the norms. SP saves "
      "activation memory, not traffic (the sp lesson).",
      "2(N-1)/N × [(4L + 2) × T d × 4 B + 3T × 4 B + (2L + 1) × d × 4 B] = 1.5 × [10 × {x} + "
      "{loss} + {norms}] = {bytes} B。全归约就是归约散射加全收集，所以 SP 发的和全归约一样多"
      "（不开 SP 时 {without} B），只多了归一化层。SP 省的是激活值显存，不是通信（见 sp 一课）。"};
  l.code = {{"parallel/tp.cpp", "ColumnParallelLinear::backward_input"},
            {"parallel/tp.cpp", "RowParallelLinear::forward"},
            {"parallel/tp.cpp", "VocabParallelCrossEntropy::forward"},
            {"parallel/tp.cpp", "reduce_tokens"}};
  l.runs = {run_of(s, {"TP 4 with --sp", "TP 4，开启 --sp"}),
            run_of(plain, {"TP 4 without SP", "TP 4，不开 SP"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m = group_bytes(r[0].metrics, "tp");
    m.values = {{"plain", commas(group_bytes(r[1].metrics, "tp").value)}};
    m.notes = {
        {"Without SP the same run sent {plain} B.", "不开 SP 时，同一个运行发出 {plain} B。"}};
    return m;
  };
  return l;
}

Lesson sp(const TrainArgs& train) {
  const Setup s = tp_run(train, true), plain = tp_run(train, false);
  const ModelConfig& c = s.config.model;
  const double N = 4, L = c.layers, d = c.dim, T = double(s.plan.tokens());
  const double kept = (2 * L + 1) * (T * d + T) * 4;  // residual-stream tensors and norm stats
  const plan::Memory with = plan::peak_memory(s.plan).memory,
                     without = plan::peak_memory(plain.plan).memory;
  Lesson l;
  l.name = "sp";
  l.values = {{"T", commas(T)},
              {"kept", commas(kept)},
              {"saved", commas((N - 1) / N * kept)},
              {"planned", commas(without.peak() - with.peak())},
              {"kept_planned", commas(without.activations - with.activations)},
              {"Td", commas(T * d * 4)}};
  l.title = {"sequence parallelism: the memory it saves", "序列并行：省下的显存"};
  l.idea = {
      "Under tensor parallelism alone, what lies outside the split matrices is whole on every "
      "rank: the residual stream [T, d] between the blocks, each norm's input and output, and "
      "the norms' statistics (one float a token). Every TP rank keeps the same copy for the "
      "backward. Sequence parallelism (--sp) cuts these along the tokens: a rank keeps [T/N, d] "
      "of each, and gathers the whole [T, d] only inside the TP region, where the matrices "
      "need it. A step keeps for its backward 2L+1 such [T, d] tensors (the embedding's "
      "output and each block's two norm inputs, whose outputs it recomputes from them) and "
      "2L+1 norms' statistics of T floats.\n"
      "Here: the tp lesson's run, TP 4, L = 2, d = 64, T = {T} tokens, fp32, with and without "
      "--sp.",
      "只用张量并行时，切开的矩阵之外的东西在每个 rank 上都是完整的：块与块之间的残差流 "
      "[T, d]、每个归一化层的输入和输出、归一化的统计量（每个词元一个数）。每个 TP rank 都为"
      "反向保留同一份。序列并行（--sp）把它们沿词元切开：每个 rank 只留 [T/N, d]，只在 TP 区"
      "域里、矩阵需要时才全收集成完整的 [T, d]。一步为反向保留 2L+1 个这样的 [T, d] 张量（词"
      "嵌入的输出和每块两个归一化层的输入）以及 2L+1 个归一化层的统计量，每个 T 个数。\n"
      "本课：与 tp 一课相同的运行，TP 4，L = 2，d = 64，T = {T} 个词元，fp32，开与不开 --sp。"};
  l.question = {
      "How many bytes of the activations kept for the backward does --sp save on one "
      "rank?",
      "开启 --sp 后，一个 rank 为反向保留的激活值省下多少字节？"};
  l.formula = (N - 1) / N * kept;
  l.mistakes = {
      {"all",
       kept,
       {"a rank still keeps its own 1/N of each tensor: SP saves (N-1)/N of them.",
        "每个 rank 仍要保留每个张量的 1/N：SP 省下的是 (N-1)/N。"}},
      {"one-n",
       kept / N,
       {"that is what a rank still keeps, 1/N; it saves the other (N-1)/N.",
        "这是每个 rank 仍然保留的 1/N；省下的是其余的 (N-1)/N。"}},
      {"blocks-only",
       (N - 1) / N * 2 * L * (T * d + T) * 4,
       {"the embedding's output, the first block's input, lies outside the TP region too: "
        "2L + 1 tensors, not 2L.",
        "词嵌入的输出（第一个块的输入）也在 TP 区域之外：是 2L + 1 个张量，不是 2L 个。"}},
      {"zero",
       0,
       {"SP moves the same bytes as the all-reduces (the tp lesson), but it does save memory.",
        "SP 的通信量和全归约一样（见 tp 一课），但它确实省显存。"}},
  };
  l.hint = {
      "count the [T, d] tensors kept outside the TP region (2L+1 of them) and the norms' "
      "T-float statistics (2L+1); SP leaves a rank 1/N of each.",
      "数一数 TP 区域之外保留的 [T, d] 张量（2L+1 个）和归一化的统计量（2L+1 个，每个 T "
      "个数）；SP 让每个 rank 只留各自的 1/N。"};
  l.working = {
      "(N-1)/N x (2L + 1) x (T d + T) x 4 B = 3/4 x 5 x ({Td} + {T} x 4) = {saved} B. The peak "
      "falls by more: the temporaries alive at the moment of the peak (the gradient flowing "
      "back, a norm's output) are [T/N, d] under SP too. tetra plan's memory walk, which "
      "allocates each of them, counts the kept activations' drop at {kept_planned} B and "
      "predicts the peak's at {planned} B.",
      "(N-1)/N × (2L + 1) × (T d + T) × 4 B = 3/4 × 5 × ({Td} + {T} × 4) = {saved} B。峰值降"
      "得更多：峰值那一刻还活着的临时张量（反向传回的梯度、归一化的输出）在 SP 下也是 "
      "[T/N, d]。tetra plan 的显存模型逐个分配它们，算出保留的激活值降低 {kept_planned} B，"
      "预测峰值降低 {planned} B。"};
  l.code = {{"parallel/tp.cpp", "gather_tokens"},
            {"parallel/tp.cpp", "reduce_tokens"},
            {"plan/memory.cpp", "stage_memory"}};
  l.runs = {run_of(s, {"TP 4 with --sp", "TP 4，开启 --sp"}),
            run_of(plain, {"TP 4 without SP", "TP 4，不开 SP"})};
  // Run 2's peak (without SP) less run 1's.
  l.measure = [](const std::vector<RunOutput>& r) {
    return peak_drop(
        r[1].metrics, r[0].metrics,
        {"Peak memory: {more} B without SP, {less} B with it. The peak holds more "
         "than the kept activations: see the working.",
         "显存峰值：不开 SP {more} B，开 SP {less} B。峰值里不只是保留的激活值：见推导。"});
  };
  return l;
}

namespace {

// Query-key pairs under the causal mask for the positions a CP rank holds: position t
// attends to t + 1 keys.
double pairs(const std::vector<int32_t>& positions) {
  double n = 0;
  for (int32_t t : positions) n += t + 1;
  return n;
}

}  // namespace

Lesson cp(const TrainArgs& train) {
  TrainConfig cfg = tiny(2, 64, 4, 1, 128, 16, 4, 2);
  cfg.layout.cp = 2;
  const Setup s = setup(train, cfg, 2);
  const ModelConfig& c = s.config.model;
  const double N = 2, L = c.layers, S = c.seq_len, b = s.plan.run.micro_batch;
  const double m = s.plan.run.micro_batches, kv = double(c.kv_heads) * c.head_dim();
  const double tensor = b * S * kv * 4;
  std::vector<int32_t> lower, upper;
  for (int t = 0; t < c.seq_len; ++t) (t < c.seq_len / 2 ? lower : upper).push_back(t);
  Lesson l;
  l.values = {{"tensor", commas(tensor)},
              {"bytes", commas(4 * L * m * (N - 1) / N * tensor)},
              {"lower", commas(pairs(lower))},
              {"upper", commas(pairs(upper))}};
  for (int r = 0; r < 2; ++r) {
    const std::vector<int32_t> pos = cp_positions(c.seq_len, 2, r);
    const std::string k = std::to_string(r);
    l.values["a" + k] = std::to_string(pos.front()) + "-" + std::to_string(pos[pos.size() / 2 - 1]);
    l.values["b" + k] = std::to_string(pos[pos.size() / 2]) + "-" + std::to_string(pos.back());
    l.values["pairs" + k] = commas(pairs(pos));
  }
  l.name = "cp";
  l.title = {"context parallelism: K/V traffic and load balance", "上下文并行：K/V 通信与负载均衡"};
  l.idea = {
      "Context parallelism cuts every sequence over N ranks. Under the causal mask token t "
      "attends to t + 1 keys, so later tokens cost more: tetra (as Llama 3) cuts a sequence "
      "into 2N chunks and gives rank c chunks c and 2N-1-c, an early one and a late one:\n"
      "  CP rank 0 holds positions {a0}, {b0}: {pairs0} query-key pairs of each sequence\n"
      "  CP rank 1 holds positions {a1}, {b1}: {pairs1} query-key pairs\n"
      "  (cut in two halves instead, the ranks would score {lower} and {upper}).\n"
      "A rank computes the queries of its own tokens, but needs the keys and values of all: "
      "before attention it all-gathers K and V over the CP group ((N-1)/N of each full "
      "[b S, kv] tensor), and after attention's backward it reduce-scatters dK and dV. With "
      "grouped-query attention K and V have fewer heads than Q, which makes this traffic "
      "smaller.\n"
      "Here: CP 2, L = 2 blocks, one micro-batch of b = 4 sequences of S = 16 tokens, 1 K/V "
      "head of 16 (kv = 16 values a token, against 64 for the 4 query heads), fp32.",
      "上下文并行把每条序列切到 N 个 rank 上。在因果掩码下，词元 t 要看 t + 1 个键，越靠后的"
      "词元越贵：tetra（和 Llama 3 一样）把一条序列切成 2N 段，第 c 个 rank 拿第 c 段和第 "
      "2N-1-c 段，一段靠前、一段靠后：\n"
      "  CP rank 0 拿位置 {a0}、{b0}：每条序列 {pairs0} 个查询-键对\n"
      "  CP rank 1 拿位置 {a1}、{b1}：{pairs1} 个查询-键对\n"
      "  （如果直接切成前后两半，两个 rank 分别是 {lower} 和 {upper}。）\n"
      "一个 rank 只算自己词元的查询，却需要所有词元的键和值：注意力之前在 CP 组里全收集 K 和 V"
      "（每个完整 [b S, kv] 张量的 (N-1)/N），注意力的反向之后再归约散射 dK 和 dV。分组查询注意力"
      "（GQA）里 K、V 的头比 Q 少，这部分通信也就更小。\n"
      "本课：CP 2，L = 2 个块，一个微批次 b = 4 条、每条 S = 16 个词元，1 个 K/V 头、宽 16（每个"
      "词元 kv = 16 个数，4 个查询头则是 64 个），fp32。"};
  l.question = {"How many bytes does one rank send in its CP group in one step?",
                "一步之内，一个 rank 在上下文并行组里发出多少字节？"};
  l.formula = 4 * L * m * (N - 1) / N * tensor;
  l.mistakes = {
      {"forward-only",
       l.formula / 2,
       {"that is the forward's all-gathers of K and V; the backward reduce-scatters dK and dV, "
        "as many bytes again.",
        "这只是前向对 K、V 的全收集；反向还要归约散射 dK 和 dV，字节数一样多。"}},
      {"whole-tensor",
       l.formula * N / (N - 1),
       {"an all-gather sends the N-1 pieces the others lack, (N-1)/N of the tensor, not the "
        "whole of it.",
        "全收集只发别人缺的 N-1 份，即张量的 (N-1)/N，而不是整个张量。"}},
      {"all-heads",
       l.formula * c.heads / c.kv_heads,
       {"K and V have kv_heads heads, not the query's heads: grouped-query attention makes "
        "them 4 times smaller here.",
        "K、V 只有 kv_heads 个头，不是查询的头数：这里分组查询注意力让它们小了 4 倍。"}},
      {"with-q",
       l.formula * 1.5,
       {"the queries stay where they are: a rank computes attention for its own tokens.",
        "查询不动：每个 rank 只为自己的词元算注意力。"}},
      {"values",
       l.formula / 4,
       {"that counts values, not bytes: each fp32 value is 4 bytes.",
        "这是数值的个数，不是字节数：每个 fp32 数占 4 字节。"}},
  };
  l.hint = {
      "per block and micro-batch: K and V are all-gathered before attention, dK and dV "
      "reduce-scattered after its backward; each call sends (N-1)/N of a full [b S, kv] "
      "tensor.",
      "每个块、每个微批次：注意力之前全收集 K 和 V，反向之后归约散射 dK 和 dV；每次调用发出"
      "完整 [b S, kv] 张量的 (N-1)/N。"};
  l.working = {
      "Per block and micro-batch four calls (K, V all-gathered; dK, dV reduce-scattered) of "
      "(N-1)/N x b S kv x 4 B: 4 x L x (N-1)/N x b S kv x 4 B = 4 x 2 x 1/2 x {tensor} = {bytes} "
      "B.",
      "每个块、每个微批次四次调用（全收集 K、V；归约散射 dK、dV），每次 (N-1)/N × b S kv × 4 B："
      "4 × L × (N-1)/N × b S kv × 4 B = 4 × 2 × 1/2 × {tensor} = {bytes} B。"};
  l.code = {{"parallel/cp.cpp", "cp_positions"},
            {"parallel/cp.cpp", "ContextParallel::gather_kv"},
            {"parallel/cp.cpp", "ContextParallel::scatter_kv_grad"}};
  l.runs = {run_of(s, {"CP 2", "CP 2"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m = group_bytes(r[0].metrics, "cp");
    // Each rank's compute per step, over the steps after the first: the balance, measured.
    const std::vector<json>& recs = r[0].metrics;
    std::vector<double> ms(2, 0.0);
    int n = 0;
    for (size_t i = recs.size() > 1 ? 1 : 0; i < recs.size(); ++i, ++n)
      for (size_t q = 0; q < 2; ++q) ms[q] += recs[i]["compute_ms"].at(q).get<double>();
    check(n > 0, "the run wrote no metrics");
    m.values = {{"c0", num("%.1f", ms[0] / n)}, {"c1", num("%.1f", ms[1] / n)}};
    m.notes = {
        {"Compute per step (compute_ms): CP rank 0 {c0} ms, CP rank 1 {c1} ms; equal work, "
         "and on a shared CPU about equal time.",
         "每步计算时间（compute_ms）：CP rank 0 {c0} ms，CP rank 1 {c1} ms；工作量相等，在共享"
         "的 CPU 上时间也大致相等。"}};
    return m;
  };
  return l;
}

}  // namespace tetra::lab
