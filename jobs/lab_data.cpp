// The lessons on data parallelism: the ring all-reduce (dp), ZeRO-3's memory (zero), the
// traffic of ZeRO 1, 2 and 3 (zero-traffic), and the dp_cp group of the 4D layout (4d).
#include <algorithm>

#include "jobs/lab_build.hpp"
#include "plan/memory.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {

Lesson dp(const TrainArgs& train) {
  TrainConfig c = tiny(2, 64, 4, 4, 128, 16, 8, 2);
  c.layout.dp = 4;
  const Setup s = setup(train, c, 4);
  const double P = stage0_params(s.plan), N = 4, ring = 2 * (N - 1) / N;
  Lesson l;
  l.name = "dp";
  l.values = {{"P", commas(P)}, {"bytes", commas(ring * 4 * P)}, {"twice", commas(8 * P)}};
  l.title = {"data parallelism and the ring all-reduce", "数据并行与环形全归约"};
  l.idea = {
      "Data parallelism: every rank holds the whole model and trains on its own part of the "
      "batch; then the gradients are summed over the N ranks. A ring all-reduce does it in two "
      "passes around the ring: a reduce-scatter (each rank ends up with the sum of 1/N of the "
      "tensor) and an all-gather (each rank collects the other sums). Each pass sends N-1 "
      "pieces of 1/N, so a rank sends 2(N-1)/N of the tensor: close to 2x for large N. tetra's "
      "ZeRO-1 makes the same two passes around Adam: it reduce-scatters the fp32 gradients, "
      "updates its 1/N shard, and all-gathers the updated weights.\n"
      "Here: DP 4, ZeRO-1, fp32 (4 bytes a value), P = {P} parameters.",
      "数据并行：每个 rank 都持有完整的模型，各自训练批次中的一部分；然后把 N 个 rank 的梯度"
      "加起来。环形全归约绕环走两趟：先归约散射（每个 rank 得到张量 1/N 的总和），再全收集（"
      "每个 rank 收齐其余各份的总和）。每趟发出 N-1 份、每份 1/N，所以一个 rank 一共发出张量的 "
      "2(N-1)/N 倍：N 很大时接近 2 倍。tetra 的 ZeRO-1 把这两趟分在 Adam 两边：先归约散射 fp32 "
      "梯度，更新自己那 1/N 的分片，再全收集更新后的权重。\n"
      "本课：DP 4，ZeRO-1，fp32（每个数 4 字节），P = {P} 个参数。"};
  l.question = {"How many bytes does one rank send in its data-parallel group in one step?",
                "一步之内，一个 rank 在它的数据并行组里发出多少字节？"};
  l.formula = ring * 4 * P;
  l.mistakes = {
      {"values",
       ring * P,
       {"that counts values, not bytes: each fp32 value is 4 bytes.",
        "这是数值的个数，不是字节数：每个 fp32 数占 4 字节。"}},
      {"limit",
       8 * P,
       {"\"twice the gradients\" is the ring's limit as N grows; at N = 4 a rank sends 2(N-1)/N "
        "= 1.5 times them.",
        "“梯度的两倍”是 N 趋于无穷时的极限；N = 4 时一个 rank 发出的是 2(N-1)/N = 1.5 倍。"}},
      {"one-pass",
       ring / 2 * 4 * P,
       {"that is one pass, the gradients' reduce-scatter; the all-gather of the updated weights "
        "sends as much again.",
        "这只是一趟，即梯度的归约散射；更新后权重的全收集还要再发同样多。"}},
      {"naive",
       (N - 1) * 4 * P,
       {"that sends the whole gradient to each of the N-1 others; the ring sends each rank only "
        "pieces of 1/N.",
        "这是把整份梯度分别发给其余 N-1 个 rank；环形算法每次只发 1/N 的一份。"}},
  };
  l.hint = {
      "a ring all-reduce is two passes (reduce-scatter, then all-gather); each sends N-1 "
      "pieces of 1/N of the tensor. Count in bytes.",
      "环形全归约是两趟（先归约散射，再全收集），每趟发出 N-1 份、每份是张量的 1/N。"
      "按字节计。"};
  l.working = {
      "2(N-1)/N x 4 B x P = 2 x 3/4 x 4 x {P} = {bytes} B: (N-1)/N x 4P for the gradients' "
      "reduce-scatter and as much for the weights' all-gather. \"Twice the gradients\" ({twice} "
      "B) is the limit as N grows.",
      "2(N-1)/N × 4 B × P = 2 × 3/4 × 4 × {P} = {bytes} B：梯度的归约散射发 (N-1)/N × 4P，"
      "权重的全收集再发同样多。“梯度的两倍”（{twice} B）是 N 增大时的极限。"};
  l.code = {{"parallel/mpi_comm.cpp", "MpiComm::all_reduce"},
            {"parallel/zero.cpp", "ZeroParams::reduce_scatter_grads"},
            {"parallel/zero.cpp", "ZeroParams::all_gather_weights"}};
  l.runs = {run_of(s, {"DP 4, ZeRO-1", "DP 4，ZeRO-1"})};
  l.measure = [](const std::vector<RunOutput>& r) { return group_bytes(r[0].metrics, "dp_cp"); };
  return l;
}

namespace {

// DP 4 over 8 small blocks, ZeRO stage `stage`: the zero and zero-traffic lessons' run.
Setup zero_run(const TrainArgs& train, int stage) {
  TrainConfig c = tiny(8, 64, 4, 4, 256, 8, 4, 2);
  c.layout.dp = 4;
  c.optimizer.zero = stage;
  // The blocking path, whose peak the lesson counts: --overlap holds one unit more of
  // gathered weights and of full gradients (parallel/zero.hpp).
  c.device.overlap = false;
  return setup(train, c, 4);
}

}  // namespace

Lesson zero(const TrainArgs& train) {
  const Setup s = zero_run(train, 3);
  const double P = stage0_params(s.plan), N = 4;
  double unit = 0;
  for (int u = 0; u < int(s.plan.units.size()); ++u)
    unit = std::max(unit, double(s.plan.padded(u)));
  const plan::Memory mem = plan::peak_memory(s.plan).memory;
  const double A = mem.activations, shards = 16 * P / N;
  Lesson l;
  l.name = "zero";
  l.values = {{"P", commas(P)},
              {"unit", commas(unit)},
              {"A", commas(A)},
              {"shards", commas(shards)},
              {"peak", commas(shards + 8 * unit + A)},
              {"zero1", commas(8 * P + 12 * P / N + A)},
              {"planned", commas(mem.peak())}};
  l.title = {"ZeRO-3: a rank's peak memory", "ZeRO-3：一个 rank 的显存峰值"};
  l.idea = {
      "Training in fp32 with Adam keeps 16 bytes per parameter: the weight (4), its gradient (4) "
      "and Adam's two moments (8). (The seeds' 16 B is mixed precision: a bf16 weight and "
      "gradient, 2 + 2, and fp32 master weight and moments, 12: the same total, other parts.) "
      "ZeRO shards this state over the N data-parallel ranks: stage 1 the moments, stage 2 the "
      "gradients too, stage 3 the weights as well, so that a rank keeps 16P/N. But nothing "
      "computes with a shard: under ZeRO-3 a rank all-gathers a unit (the embedding, a block, "
      "or the head) before it uses it, and the unit's full gradient lives until it is "
      "reduce-scattered: 4 + 4 bytes per parameter of the unit at work. The activations a "
      "micro-batch keeps for its backward come on top.\n"
      "Here: DP 4, ZeRO-3, fp32, P = {P} parameters, the largest unit {unit}, activations A = "
      "{A} B (as tetra plan counts them).",
      "用 fp32 和 Adam 训练，每个参数要存 16 字节：权重 4、梯度 4、Adam 的两个矩 8。（种子文档"
      "里的 16 字节是混合精度：bf16 的权重和梯度 2 + 2，fp32 的主权重和两个矩 12；总数一样，"
      "组成不同。）ZeRO 把这些状态分片到 N 个数据并行 rank 上：第 1 阶段分优化器的矩，第 2 阶段"
      "连梯度一起分，第 3 阶段连权重也分，于是一个 rank 只存 16P/N。但分片本身不能拿来计算："
      "ZeRO-3 下，一个 rank 用到一个单元（词嵌入、一个块或输出头）之前先全收集它，而这个单元"
      "的完整梯度要一直留到归约散射为止：正在工作的单元每个参数再占 4 + 4 字节。一个微批次为"
      "反向保留的激活值另算。\n"
      "本课：DP 4，ZeRO-3，fp32，P = {P} 个参数，最大的单元 {unit} 个参数，激活值 A = {A} B"
      "（按 tetra plan 的算法）。"};
  l.question = {"What is the peak memory of one rank during a step, in bytes?",
                "一步之中，一个 rank 的显存峰值是多少字节？"};
  l.formula = shards + 8 * unit + A;
  l.mistakes = {
      {"shards-only",
       shards + A,
       {"that is the shards and the activations, without the unit being gathered: its full "
        "weights and full gradient, 8 bytes a parameter, are there while it works.",
        "这是分片加激活值，漏了正在收集的那个单元：它工作时，完整的权重和完整的梯度每个参数"
        "共占 8 字节。"}},
      {"state-only",
       shards,
       {"that is the sharded state alone: the gathered unit and the activations come on top.",
        "这只是分片后的状态：收集来的单元和激活值还要另加。"}},
      {"unit-weights",
       shards + 4 * unit + A,
       {"the gathered unit's weights are there, but so is its full gradient until the "
        "reduce-scatter: 4 + 4 bytes a parameter.",
        "收集来的单元除了权重，完整的梯度也要留到归约散射为止：每个参数 4 + 4 字节。"}},
      {"zero1",
       8 * P + 12 * P / N + A,
       {"that is ZeRO-1's peak: whole weights and gradients on every rank. ZeRO-3 shards them too.",
        "这是 ZeRO-1 的峰值：每个 rank 都有完整的权重和梯度。ZeRO-3 把它们也分了片。"}},
  };
  l.hint = {
      "three parts: every parameter's state in shards, the one unit at work whole (its "
      "weights and its gradient), and the activations.",
      "三部分：所有参数状态的分片，正在工作的那一个完整单元（权重和梯度），以及激活值。"};
  l.working = {
      "16P/N + 8 x P_unit + A = 16 x {P} / 4 + 8 x {unit} + {A} = {peak} B. The shards alone "
      "({shards} B) leave out the unit being gathered. Without ZeRO-3's sharding of the weights "
      "(ZeRO-1: 4P weights, 4P gradients and their 4P/N reduced shard, 8P/N Adam) a rank would "
      "hold {zero1} B. tetra plan's memory model, which walks every allocation (the temporaries "
      "of each layer too), predicts {planned} B.",
      "16P/N + 8 × P_unit + A = 16 × {P} / 4 + 8 × {unit} + {A} = {peak} B。只算分片（{shards} "
      "B）就漏了正在收集的单元。如果不把权重分片（ZeRO-1：权重 4P、梯度 4P 和归约后的 4P/N "
      "分片、Adam 8P/N），一个 rank 要存 {zero1} B。tetra plan 的显存模型逐个走过每次分配（包括"
      "每层的临时缓冲），预测是 {planned} B。"};
  l.code = {{"parallel/zero.cpp", "ZeroParams::acquire"},
            {"parallel/zero.cpp", "ZeroParams::release"},
            {"plan/memory.cpp", "stage_memory"}};
  l.runs = {run_of(s, {"DP 4, ZeRO-3", "DP 4，ZeRO-3"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m;
    m.value = most(r[0].metrics, "peak_memory_bytes");
    m.source = {"peak_memory_bytes in the run's metrics", "运行指标里的 peak_memory_bytes"};
    m.notes = {kAllocatorPeak};
    return m;
  };
  return l;
}

Lesson zero_traffic(const TrainArgs& train) {
  const Setup s1 = zero_run(train, 1), s2 = zero_run(train, 2), s3 = zero_run(train, 3);
  const double P = stage0_params(s3.plan), N = 4, pass = (N - 1) / N * 4 * P;
  Lesson l;
  l.name = "zero-traffic";
  l.values = {
      {"P", commas(P)}, {"pass", commas(pass)}, {"z1", commas(2 * pass)}, {"z3", commas(3 * pass)}};
  l.title = {"ZeRO 1, 2 and 3: what each sends", "ZeRO 1、2、3：各发多少"};
  l.idea = {
      "Each stage of ZeRO shards more of the training state, and pays for it in traffic or not. "
      "ZeRO-1 (Adam's moments sharded) reduce-scatters the gradients, updates its shard and "
      "all-gathers the updated weights: two passes of (N-1)/N x 4P bytes, an all-reduce's worth. "
      "ZeRO-2 also keeps only its shard of the gradients: the same two passes. ZeRO-3 keeps only "
      "its shard of the weights: it all-gathers each unit before its forward, frees it, "
      "all-gathers it again before its backward, and reduce-scatters the gradients; the updated "
      "shard stays where it is.\n"
      "Here: DP 4, fp32, one micro-batch a step, P = {P} parameters; the same run under ZeRO-1, "
      "ZeRO-2 and ZeRO-3.",
      "ZeRO 每多一个阶段就多分片一部分训练状态，代价可能在通信上，也可能没有。ZeRO-1（分片 "
      "Adam 的矩）归约散射梯度、更新自己的分片、再全收集更新后的权重：两趟，每趟 (N-1)/N × 4P "
      "字节，相当于一次全归约。ZeRO-2 连梯度也只留自己的分片：还是这两趟。ZeRO-3 连权重也只留"
      "分片：每个单元在前向之前全收集一次、用完释放，反向之前再全收集一次，然后归约散射梯度；"
      "更新后的分片留在原地，不再收集。\n"
      "本课：DP 4，fp32，每步一个微批次，P = {P} 个参数；同一个运行分别用 ZeRO-1、ZeRO-2、"
      "ZeRO-3。"};
  l.question = {
      "Under ZeRO-3, how many bytes does one rank send in its data-parallel group in "
      "one step?",
      "ZeRO-3 下，一步之内一个 rank 在数据并行组里发出多少字节？"};
  l.formula = 3 * pass;
  l.mistakes = {
      {"zero1",
       2 * pass,
       {"that is ZeRO-1's and ZeRO-2's traffic. ZeRO-3 freed each unit's weights after its "
        "forward, so it gathers them again for the backward: a third pass.",
        "这是 ZeRO-1 和 ZeRO-2 的通信量。ZeRO-3 在前向之后释放了每个单元的权重，反向之前还要"
        "再收集一次：多出第三趟。"}},
      {"four-passes",
       4 * pass,
       {"ZeRO-3 does not all-gather the updated weights after Adam: each rank keeps its shard, "
        "and the next forward's gather fetches them.",
        "ZeRO-3 在 Adam 之后不全收集更新后的权重：每个 rank 留着自己的分片，下一步前向的收集"
        "会取走它们。"}},
      {"values",
       3 * pass / 4,
       {"that counts values, not bytes: each fp32 value is 4 bytes.",
        "这是数值的个数，不是字节数：每个 fp32 数占 4 字节。"}},
      {"all-reduces",
       3 * 2 * pass,
       {"an all-gather or a reduce-scatter sends (N-1)/N of the tensor, half of what an "
        "all-reduce sends: three passes, not three all-reduces.",
        "全收集和归约散射只发张量的 (N-1)/N，是全归约的一半：是三趟，不是三次全归约。"}},
  };
  l.hint = {
      "count the passes over the whole model, each (N-1)/N x 4P bytes: the gathers "
      "before the forward and before the backward, and the gradients' reduce-scatter.",
      "数一数对整个模型走了几趟，每趟 (N-1)/N × 4P 字节：前向之前的收集、反向之前的收集，"
      "以及梯度的归约散射。"};
  l.working = {
      "3 x (N-1)/N x 4 B x P = 3 x 3/4 x 4 x {P} = {z3} B, 1.5 times ZeRO-1's 2 x {pass} = {z1} "
      "B. ZeRO-3 trades a third pass for holding 1/N of the weights; with m micro-batches it "
      "gathers each unit twice per micro-batch, which is why real runs gather for several "
      "micro-batches at once or keep the weights through the step.",
      "3 × (N-1)/N × 4 B × P = 3 × 3/4 × 4 × {P} = {z3} B，是 ZeRO-1 的 2 × {pass} = {z1} B "
      "的 1.5 倍。ZeRO-3 用多一趟通信换来只存 1/N 的权重；有 m 个微批次时，每个微批次都要把"
      "每个单元收集两次，所以实际训练常常一次收集供几个微批次用，或在整步里保留权重。"};
  l.code = {{"parallel/zero.cpp", "ZeroParams::acquire"},
            {"parallel/zero.cpp", "ZeroParams::reduce_scatter_grads"},
            {"plan/traffic.cpp", "step_traffic"}};
  l.runs = {run_of(s1, {"DP 4, ZeRO-1", "DP 4，ZeRO-1"}),
            run_of(s2, {"DP 4, ZeRO-2", "DP 4，ZeRO-2"}),
            run_of(s3, {"DP 4, ZeRO-3", "DP 4，ZeRO-3"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m = group_bytes(r[2].metrics, "dp_cp");
    const double b1 = group_bytes(r[0].metrics, "dp_cp").value,
                 b2 = group_bytes(r[1].metrics, "dp_cp").value;
    m.values = {{"b1", commas(b1)},
                {"b2", commas(b2)},
                {"b3", commas(m.value)},
                {"ratio", num("%.3f", m.value / b1)},
                {"m1", commas(most(r[0].metrics, "peak_memory_bytes"))},
                {"m2", commas(most(r[1].metrics, "peak_memory_bytes"))},
                {"m3", commas(most(r[2].metrics, "peak_memory_bytes"))}};
    m.notes = {{"The three runs, bytes sent in dp_cp and peak memory:\n"
                "  ZeRO-1  {b1} B   peak {m1} B\n"
                "  ZeRO-2  {b2} B   peak {m2} B\n"
                "  ZeRO-3  {b3} B   peak {m3} B\n"
                "ZeRO-3 sent {ratio} times ZeRO-1's bytes, and held the least.",
                "三次运行在 dp_cp 组发出的字节和显存峰值：\n"
                "  ZeRO-1  {b1} B   峰值 {m1} B\n"
                "  ZeRO-2  {b2} B   峰值 {m2} B\n"
                "  ZeRO-3  {b3} B   峰值 {m3} B\n"
                "ZeRO-3 发出的字节是 ZeRO-1 的 {ratio} 倍，显存却最少。"},
               kAllocatorPeak};
    return m;
  };
  return l;
}

Lesson four_d(const TrainArgs& train) {
  TrainConfig c = tiny(4, 64, 4, 2, 128, 16, 8, 2);
  c.layout.tp = c.layout.cp = c.layout.pp = c.layout.dp = 2;
  const Setup s = setup(train, c, 16);
  const double P0 = stage0_params(s.plan), N = 4;
  double all = 0;  // every unit's parameters, whole
  for (const UnitSpec& u : make_units(s.config.model, 1, 0)) all += double(u.numel);
  Lesson l;
  l.name = "4d";
  l.values = {{"P0", commas(P0)}, {"bytes", commas(1.5 * 4 * P0)}, {"dp2", commas(4 * P0)}};
  l.title = {"the 4D composition on 16 ranks", "16 个 rank 上的 4D 组合"};
  l.idea = {
      "The four dimensions compose in [TP, CP, PP, DP] order: rank = tp + TP(cp + CP(pp + PP "
      "dp)). TP varies fastest, so a TP group sits inside one machine; DP is outermost, as its "
      "traffic overlaps compute best. A rank holds its pipeline stage's units and of each matrix "
      "its TP slice (norms whole). Weights are replicated over CP as well as DP: CP ranks hold "
      "the same weights and see other tokens of the same sequences. So gradients are "
      "reduce-scattered, and updated weights all-gathered, over dp_cp: CP x DP ranks.\n"
      "Here: TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks, ZeRO-1, fp32. Rank 0 (stage 0: the "
      "embedding and blocks 0-1, TP halves) holds P0 = {P0} parameters.",
      "四个维度按 [TP, CP, PP, DP] 的顺序嵌套：rank = tp + TP(cp + CP(pp + PP dp))。TP 变化最快，"
      "所以一个张量并行组落在一台机器里；DP 在最外层，因为它的通信最容易和计算重叠。一个 rank "
      "持有自己流水线段的单元，以及每个矩阵中属于自己的 TP 切片（归一化层的权重完整保留）。"
      "权重不仅在 DP 上复制，在 CP 上也复制：上下文并行的各 rank 持有相同的权重，只是看同一批"
      "序列的不同词元。所以梯度的归约散射和更新后权重的全收集都在 dp_cp 组里做：CP × DP 个 "
      "rank。\n"
      "本课：16 个 rank，TP 2 × CP 2 × PP 2 × DP 2，ZeRO-1，fp32。rank 0（第 0 段：词嵌入和第 "
      "0-1 块，各取 TP 的一半）持有 P0 = {P0} 个参数。"};
  l.question = {"How many bytes does rank 0 send in its dp_cp group in one step?",
                "一步之内，rank 0 在它的 dp_cp 组里发出多少字节？"};
  l.formula = 2 * (N - 1) / N * 4 * P0;
  l.mistakes = {
      {"dp-only",
       4 * P0,
       {"that counts DP = 2 alone: CP's ranks hold the same weights and take part in the same "
        "reduce-scatter, so N = CP x DP = 4.",
        "这只算了 DP = 2：CP 的各 rank 持有相同的权重，也参加同一次归约散射，所以 N = CP × DP "
        "= 4。"}},
      {"world",
       2 * 15.0 / 16 * 4 * P0,
       {"TP and PP ranks hold other parameters than rank 0: only its CP x DP = 4 ranks share "
        "them.",
        "TP 和 PP 的各 rank 持有的参数和 rank 0 不同：只有 CP × DP = 4 个 rank 与它共享。"}},
      {"whole-model",
       2 * (N - 1) / N * 4 * all,
       {"rank 0 holds only stage 0's units, and of each matrix its TP half.",
        "rank 0 只持有第 0 段的单元，而且每个矩阵只有 TP 的一半。"}},
      {"values",
       2 * (N - 1) / N * P0,
       {"that counts values, not bytes: each fp32 value is 4 bytes.",
        "这是数值的个数，不是字节数：每个 fp32 数占 4 字节。"}},
  };
  l.hint = {
      "which ranks hold the same parameters as rank 0? They form its dp_cp group, and it "
      "all-reduces over them as the dp lesson does.",
      "哪些 rank 持有和 rank 0 相同的参数？它们组成 dp_cp 组，在组里像数据并行那一课一样做"
      "全归约。"};
  l.working = {
      "N = CP x DP = 4 ranks share rank 0's weights: 2(N-1)/N x 4 B x P0 = 1.5 x 4 x {P0} = "
      "{bytes} B. Counting DP = 2 alone gives 1 x 4 x {P0} = {dp2} B.",
      "N = CP × DP = 4 个 rank 共享 rank 0 的权重：2(N-1)/N × 4 B × P0 = 1.5 × 4 × {P0} = "
      "{bytes} B。只算 DP = 2 会得到 1 × 4 × {P0} = {dp2} B。"};
  l.code = {{"parallel/grid.cpp", "make_grid"},
            {"parallel/grid.cpp", "coord_of"},
            {"parallel/zero.cpp", "ZeroParams::reduce_scatter_grads"}};
  l.runs = {run_of(s, {"TP 2 x CP 2 x PP 2 x DP 2", "TP 2 × CP 2 × PP 2 × DP 2"})};
  l.measure = [](const std::vector<RunOutput>& r) { return group_bytes(r[0].metrics, "dp_cp"); };
  return l;
}

}  // namespace tetra::lab
