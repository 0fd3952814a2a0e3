// The lessons on what a run computes (seed 002's first chapter): 6ND and the days of a run,
// MFU against HFU under recompute, and the barrier a straggler holds everyone at; and a walk
// through the Llama 3 405B plan against the seeds' numbers. 6nd and 405b run nothing: tetra
// plan's code computes them from the preset.
#include <cmath>

#include "jobs/lab_build.hpp"
#include "parallel/schedule.hpp"
#include "plan/machine.hpp"
#include "plan/preset.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {
namespace {

// Llama 3 405B as tetra plan's preset has it: N (the model card's), D, the rate per GPU the
// paper measured, the GPUs of its layout and the H100's dense bf16 peak.
struct Run405 {
  double N, D, rate, gpus, peak, memory;
  int tp, pp, dp;
};
Run405 llama3_405b() {
  const plan::Preset p = plan::preset_named("llama3-405b");
  const plan::Machine h100 = plan::machine_named(p.gpu);
  const LayoutConfig& l = p.layout;
  return {p.card_params,
          p.tokens,
          p.achieved_tflops * 1e12,
          double(l.tp * l.cp * l.pp * l.dp),
          h100.peak_flops,
          h100.memory_bytes,
          l.tp,
          l.pp,
          l.dp};
}

std::string sci(double x) {
  return num("%.3g", x);
}

Measured computed(double value, const std::string& how) {
  Measured m;
  m.value = value;
  m.source = {"tetra plan --preset llama3-405b computes it (" + how + ")",
              "tetra plan --preset llama3-405b 算出的数（" + how + "）"};
  return m;
}

}  // namespace

Lesson six_nd() {
  const Run405 r = llama3_405b();
  const double flops = 6 * r.N * r.D, seconds = flops / (r.gpus * r.rate), days = seconds / 86400;
  const double hours100 = flops / r.peak / 3600;  // GPU-hours at 100 % of the peak
  const double point = hours100 * (1 / 0.41 - 1 / 0.42);
  Lesson l;
  l.name = "6nd";
  l.unit = Unit::Days;
  l.values = {{"N", sci(r.N)},
              {"D", sci(r.D)},
              {"flops", sci(flops)},
              {"gpus", commas(r.gpus)},
              {"rate", num("%.0f", r.rate / 1e12)},
              {"peak", num("%.0f", r.peak / 1e12)},
              {"mfu", pct(r.rate / r.peak)},
              {"seconds", sci(seconds)},
              {"days", num("%.1f", days)},
              {"years", commas(flops / r.rate / (365.25 * 86400))},
              {"hours100", sci(hours100)},
              {"point", commas(point)},
              {"cluster", num("%.0f", point / r.gpus)},
              {"dollars", num("%.2g", point * 2 / 1e6)}};
  l.title = {"6ND: the arithmetic of a training run, and its days", "6ND：一次训练的运算量和天数"};
  l.idea = {
      "A weight does one multiply-add per token in the forward, 2 FLOPs, and the backward does "
      "two products of the same size (the gradient for the layer below, the gradient for the "
      "weight), 4 FLOPs: 6 FLOPs per parameter per token. A model of N parameters trained on D "
      "tokens needs about 6ND FLOPs (attention's scores, recomputation and the optimizer "
      "left out). To turn FLOPs into time, divide by what the GPUs deliver: G GPUs at R FLOP/s "
      "each take 6ND / (G R) seconds of pure stepping. R over the GPU's peak is the MFU.\n"
      "Here: Llama 3 405B, N = {N} parameters, D = {D} tokens, on G = {gpus} H100s at the "
      "R = {rate} TFLOP/s each that Meta measured ({mfu} of the {peak} TFLOP/s dense bf16 peak).",
      "一个权重对每个词元，前向做一次乘加，即 2 FLOP；反向做两次同样大小的乘法（给下一层的"
      "梯度、给权重的梯度），4 FLOP：每个参数每个词元 6 FLOP。N 个参数的模型训练 D 个词元，约需 "
      "6ND FLOP（不计注意力分数、重算和优化器）。把 FLOP 换成时间，就除以 GPU 实际交付的速率："
      "G 块 GPU、每块 R FLOP/s，纯步进时间是 6ND / (G R) 秒。R 除以 GPU 峰值就是 MFU。\n"
      "本课：Llama 3 405B，N = {N} 个参数，D = {D} 个词元，G = {gpus} 块 H100，每块按 Meta 实测"
      "的 R = {rate} TFLOP/s（稠密 bf16 峰值 {peak} TFLOP/s 的 {mfu}）。"};
  l.question = {"How many days of pure stepping does the run take? (days)",
                "这次训练的纯步进时间是多少天？（天）"};
  l.formula = days;
  l.mistakes = {
      {"forward-only",
       days / 3,
       {"2ND counts the forward only; the backward does twice the forward's work: 6ND.",
        "2ND 只算了前向；反向的工作量是前向的两倍：6ND。"}},
      {"recompute",
       days * 4 / 3,
       {"8ND counts the forward recomputed under activation checkpointing: what the hardware "
        "runs (HFU), not what the model needs (the mfu lesson).",
        "8ND 把激活检查点下重算的前向也算了进去：那是硬件执行的量（HFU），不是模型需要的量"
        "（见 mfu 一课）。"}},
      {"peak",
       days * r.rate / r.peak,
       {"that is at the GPU's peak, 100 % MFU; Meta's GPUs delivered {rate} TFLOP/s each.",
        "这是按 GPU 峰值、即 100 % MFU 算的；Meta 的 GPU 每块实际只交付 {rate} TFLOP/s。"}},
      {"one-gpu",
       days * r.gpus,
       {"that is one GPU alone; {gpus} of them share the work.",
        "这是一块 GPU 单干的时间；实际有 {gpus} 块分担。"}},
      {"seconds",
       seconds,
       {"that is the time in seconds; a day is 86,400 of them.",
        "这是以秒计的时间；一天是 86,400 秒。"}},
      {"hours", days * 24, {"that is the time in hours.", "这是以小时计的时间。"}},
  };
  l.hint = {"FLOPs = 6 x N x D; the cluster delivers G x R FLOP/s; seconds / 86,400 = days.",
            "FLOPs = 6 × N × D；集群每秒交付 G × R FLOP；秒数 / 86,400 = 天数。"};
  l.working = {
      "6 x {N} x {D} = {flops} FLOPs; / ({gpus} x {rate}e12 FLOP/s) = {seconds} s = {days} "
      "days ({years} GPU-years on one GPU). The seeds: about 67 days. What an MFU point is worth: "
      "at 100 % of the peak the run is {hours100} GPU-hours; 41 % to 42 % MFU saves {hours100} x "
      "(1/0.41 - 1/0.42) = {point} GPU-hours, {cluster} hours of the whole cluster, about "
      "${dollars} million at $2 an H100-hour. tetra plan --preset llama3-405b prints these.",
      "6 × {N} × {D} = {flops} FLOP；除以（{gpus} × {rate}e12 FLOP/s）= {seconds} 秒 = {days} "
      "天（一块 GPU 要 {years} 个 GPU 年）。种子文档：约 67 天。一个 MFU 百分点值多少：按 100 % "
      "峰值算，这次训练是 {hours100} GPU 小时；MFU 从 41 % 提到 42 % 省下 {hours100} × (1/0.41 - "
      "1/0.42) = {point} GPU 小时，相当于整个集群 {cluster} 小时，按每 H100 小时 2 美元约 "
      "{dollars} 百万美元。tetra plan --preset llama3-405b 会打印这些数。"};
  l.code = {{"model/config.cpp", "model_flops_per_token"},
            {"plan/plan_json.cpp", "plan_json"},
            {"plan/preset.cpp", "preset_named"}};
  l.measure = [days](const std::vector<RunOutput>&) { return computed(days, "6ND / (G R)"); };
  return l;
}

Lesson mfu_hfu(const TrainArgs& train) {
  TrainConfig c = tiny(2, 64, 4, 4, 128, 16, 8, 5);
  const Setup plain = setup(train, c, 1);
  c.optimizer.recompute = true;
  const Setup s = setup(train, c, 1);
  const double F = model_flops_per_token(s.config.model),
               R = recompute_flops_per_token(s.config.model);
  Lesson l;
  l.name = "mfu";
  l.unit = Unit::Ratio;
  l.values = {{"F", commas(F)}, {"R", commas(R)}, {"ratio", num("%.3f", (F + R) / F)}};
  l.title = {"MFU against HFU under recompute", "重算时的 MFU 与 HFU"};
  l.idea = {
      "MFU (model FLOPs utilization) is the FLOPs the model needs per second, tokens/s x 6N, "
      "over the GPUs' peak. HFU (hardware FLOPs utilization) counts every FLOP the hardware "
      "ran. They differ under activation checkpointing (--recompute full): to save memory a "
      "block keeps only its input, and runs its forward again just before its backward, 2N more "
      "FLOPs a token: about 8N instead of 6N. The same run, the same tokens/s: HFU counts the "
      "extra forward, MFU does not, so HFU >= MFU. PaLM reported 46.2 % MFU and 57.8 % HFU for "
      "one run.\n"
      "Here: one rank, 2 blocks of width 64, sequences of 16 tokens, fp32, with "
      "--recompute full. tetra counts F = 6N + 12 L d S = {F} FLOPs a token (attention's scores "
      "included) and, for the recomputed forward, R = 2 N_blocks + 4 L d S = {R}.",
      "MFU（模型 FLOPs 使用率）是模型每秒需要的运算量，即每秒词元数 × 6N，除以 GPU 的峰值。"
      "HFU（硬件 FLOPs 使用率）计入硬件实际执行的每一次运算。两者在激活检查点（--recompute "
      "full）下不同：为了省显存，一个块只保留自己的输入，在反向之前把前向再跑一遍，每个词元多 "
      "2N FLOP：约 8N 而不是 6N。同一个运行、同样的每秒词元数：HFU 计入多跑的前向，MFU 不计，"
      "所以 HFU >= MFU。PaLM 对同一次运行给出 46.2 % MFU 和 57.8 % HFU。\n"
      "本课：一个 rank，2 个宽 64 的块，每条序列 16 个词元，fp32，开启 --recompute full。tetra "
      "对每个词元记 F = 6N + 12 L d S = {F} FLOP（含注意力分数），重算的前向记 R = 2 N_blocks + "
      "4 L d S = {R}。"};
  l.question = {"In the run with --recompute full, what is HFU / MFU? (a ratio, like 1.5)",
                "开启 --recompute full 的运行里，HFU / MFU 是多少？（一个比值，比如 1.5）"};
  l.formula = (F + R) / F;
  l.mistakes = {
      {"same",
       1,
       {"MFU ignores the recomputed forward, HFU counts it: they differ by it.",
        "MFU 不计重算的前向，HFU 计入：两者正差在这里。"}},
      {"backward-too",
       2,
       {"recompute runs the forward again (2N), not the backward: 8N/6N, not 12N/6N.",
        "重算只再跑一遍前向（2N），不是反向：8N/6N，不是 12N/6N。"}},
      {"inverse",
       F / (F + R),
       {"that is MFU / HFU; HFU is the larger, since it counts more work in the same time.",
        "这是 MFU / HFU；HFU 更大，因为同样的时间里它计入了更多工作。"}},
      {"backward-cost",
       10.0 / 6,
       {"the recomputed forward costs a forward's 2N, not a backward's 4N: (6N + 2N) / 6N.",
        "重算的前向花的是前向的 2N，不是反向的 4N：(6N + 2N) / 6N。"}},
  };
  l.hint = {
      "per token the model needs 6N; under recompute the hardware runs one more forward. "
      "HFU / MFU is (what ran) / (what was needed).",
      "每个词元模型需要 6N；重算时硬件多跑一次前向。HFU / MFU = 执行的量 / 需要的量。"};
  l.working = {
      "(F + R) / F = ({F} + {R}) / {F} = {ratio}: about 8N/6N = 4/3, a little less here because "
      "the LM head (not recomputed) is part of N. HFU is the honest measure of how busy the "
      "hardware was; MFU of how much model the run bought.",
      "(F + R) / F = ({F} + {R}) / {F} = {ratio}：约等于 8N/6N = 4/3，这里稍小，因为 N 里有不"
      "重算的输出头。HFU 如实反映硬件有多忙；MFU 反映这次运行买到了多少模型。"};
  l.code = {{"model/config.cpp", "model_flops_per_token"},
            {"model/config.cpp", "recompute_flops_per_token"},
            {"train/trainer.cpp", "Trainer::measure"}};
  l.runs = {run_of(s, {"one rank, --recompute full", "单 rank，开启 --recompute full"}),
            run_of(plain, {"one rank, no recompute", "单 rank，不重算"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m;
    m.value = rate_after_first(r[0].metrics, "hfu") / rate_after_first(r[0].metrics, "mfu");
    m.source = {"hfu / mfu in the run's metrics", "运行指标里的 hfu / mfu"};
    const double t1 = median_after_first(r[0].metrics, "step_ms"),
                 t0 = median_after_first(r[1].metrics, "step_ms");
    m.values = {{"mfu1", pct(rate_after_first(r[0].metrics, "mfu"))},
                {"hfu1", pct(rate_after_first(r[0].metrics, "hfu"))},
                {"t0", num("%.1f", t0)},
                {"t1", num("%.1f", t1)},
                {"p0", commas(most(r[1].metrics, "peak_memory_bytes"))},
                {"p1", commas(most(r[0].metrics, "peak_memory_bytes"))}};
    m.notes = {
        {"With recompute: MFU {mfu1}, HFU {hfu1} (against a fixed --peak-tflops 1). A step "
         "took {t1} ms with recompute, {t0} ms without; peak memory {p1} B with, {p0} B "
         "without: compute traded for memory.",
         "重算时：MFU {mfu1}，HFU {hfu1}（相对于固定的 --peak-tflops 1）。一步用时：重算 "
         "{t1} ms，不重算 {t0} ms；显存峰值：重算 {p1} B，不重算 {p0} B：用计算换显存。"}};
    return m;
  };
  return l;
}

Lesson barrier(const TrainArgs& train) {
  const int slow_ms = 100;
  TrainConfig c = tiny(2, 64, 4, 4, 128, 16, 8, 4);
  c.layout.dp = 2;
  const Setup plain = setup(train, c, 2);
  c.checkpoint.inject_failure = "1@1:slow=" + std::to_string(slow_ms);
  const Setup s = setup(train, c, 2);
  Lesson l;
  l.name = "barrier";
  l.unit = Unit::Millis;
  l.values = {{"slow", std::to_string(slow_ms)}};
  l.title = {"the barrier: one straggler sets everyone's pace", "栅栏：一个落后者决定所有人的速度"};
  l.idea = {
      "Each step ends with the gradients' all-reduce, and no rank can finish it before every "
      "rank has sent its gradients: a barrier. So a step lasts as long as its slowest rank, not "
      "its average one. A straggler, a rank persistently slower than the others, makes all of "
      "them wait, every step: one GPU of 16,384 that is 10 % slower makes the other 16,383 wait "
      "10 % of every step. MegaScale found 0.5 % of its machines slow, and removing them "
      "regained 0.7 MFU points.\n"
      "Here: DP 2, a small model whose step takes a few ms; from step 1 on, rank 1 sleeps "
      "{slow} ms in every step (--inject-failure 1@1:slow={slow}), and the same run without it.",
      "每一步都以梯度的全归约结束，而在所有 rank 都送出梯度之前，谁也完成不了它：这是一道栅栏。"
      "所以一步的时间由最慢的 rank 决定，而不是平均的那个。落后者（持续比别人慢的 rank）让所有"
      "人每一步都要等它：16,384 块 GPU 里有一块慢 10 %，其余 16,383 块每一步都要等 10 % 的时间。"
      "MegaScale 发现约 0.5 % 的机器偏慢，移除它们拿回了 0.7 个 MFU 百分点。\n"
      "本课：DP 2，一个每步只要几毫秒的小模型；从第 1 步起，rank 1 每步睡 {slow} ms（--inject-"
      "failure 1@1:slow={slow}），并与不睡的同一运行比较。"};
  l.question = {"By how many milliseconds does each step grow? (ms)", "每一步变长多少毫秒？（ms）"};
  l.formula = slow_ms;
  l.mistakes = {
      {"mean",
       slow_ms / 2.0,
       {"that averages the sleep over the 2 ranks; a step lasts as long as its slowest rank.",
        "这是把睡眠时间平摊到 2 个 rank 上；一步的长度由最慢的 rank 决定。"}},
      {"none",
       0,
       {"rank 0 cannot go on alone: the all-reduce needs rank 1's gradients.",
        "rank 0 不能自己先走：全归约需要 rank 1 的梯度。"}},
      {"sum",
       2.0 * slow_ms,
       {"only rank 1 sleeps; rank 0 waits alongside it, it does not add a sleep of its own.",
        "只有 rank 1 在睡；rank 0 是在旁边等它，并不会再加一段自己的睡眠。"}},
  };
  l.hint = {"when can the step's last all-reduce finish, and who is last to reach it?",
            "一步最后的全归约什么时候才能完成？谁最后到达？"};
  l.working = {
      "The step is the slowest rank's: the others wait at the all-reduce, so every step grows "
      "by the straggler's {slow} ms. At 16,384 GPUs a 10 % straggler costs 10 % of the whole "
      "cluster. See it: tetra plot --barrier RUN.jsonl --out barrier.svg draws one step's ranks, "
      "the median compute and the wait.",
      "一步的时间是最慢 rank 的时间：其他 rank 在全归约处等待，所以每一步都变长了落后者的 "
      "{slow} ms。在 16,384 块 GPU 上，一个慢 10 % 的落后者让整个集群损失 10 %。画出来看："
      "tetra plot --barrier RUN.jsonl --out barrier.svg 画出一步中各 rank 的计算、中位数和等待。"};
  l.code = {{"train/faults.cpp", "FaultPlan::parse"},
            {"train/straggler.cpp", "find_straggler"},
            {"plot/plot_metrics.cpp", "barrier_svg"}};
  l.runs = {run_of(s, {"DP 2, rank 1 slow", "DP 2，rank 1 偏慢"}),
            run_of(plain, {"DP 2, no straggler", "DP 2，没有落后者"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    const double slow = median_after_first(r[0].metrics, "step_ms"),
                 fast = median_after_first(r[1].metrics, "step_ms");
    // Rank 0's wait per step, the time it spent blocked while rank 1 slept.
    double wait = 0;
    int n = 0;
    for (size_t i = 1; i < r[0].metrics.size(); ++i, ++n)
      wait += r[0].metrics[i]["wait_ms"].at(0).get<double>();
    check(n > 0, "the run wrote too few steps");
    Measured m;
    m.value = slow - fast;
    m.source = {"step_ms with the straggler less without (medians of the steps after the first)",
                "有落后者时的 step_ms 减去没有时的（第一步之后各步的中位数）"};
    m.values = {{"with", num("%.1f", slow)},
                {"without", num("%.1f", fast)},
                {"wait", num("%.1f", wait / n)},
                {"share", pct((slow - fast) / fast)}};
    m.notes = {
        {"A step took {with} ms with the straggler and {without} ms without ({share} "
         "longer); rank 0 waited {wait} ms a step (wait_ms).",
         "有落后者时一步 {with} ms，没有时 {without} ms（长了 {share}）；rank 0 每步等待 "
         "{wait} ms（wait_ms）。"}};
    return m;
  };
  return l;
}

Lesson llama405b() {
  const Run405 r = llama3_405b();
  const double state = 16 * r.N, gpus = std::ceil(state / r.memory - 1e-9);
  const double grads = 10e9, ring = 2 * (r.dp - 1.0) / r.dp;
  const plan::Machine h100 = plan::machine_named("h100");
  const auto bubble = [&](int m) {
    return pct(bubble_forms(ScheduleKind::GPipe, r.pp, 1, m).of_step);
  };
  const auto need = [&](double bytes) { return std::ceil(bytes * r.N / r.memory - 1e-9); };
  Lesson l;
  l.name = "405b";
  l.unit = Unit::Count;
  l.values = {{"N", sci(r.N)},
              {"weights", num("%.0f", 2 * r.N / 1e9)},
              {"state", num("%.2f", state / 1e12)},
              {"mem", num("%.0f", r.memory / 1e9)},
              {"gpus", num("%.0f", gpus)},
              {"layout", "TP " + std::to_string(r.tp) + " x PP " + std::to_string(r.pp) + " x DP " +
                             std::to_string(r.dp)},
              {"world", commas(r.gpus)},
              {"replica", std::to_string(r.tp * r.pp)},
              {"ring", num("%.2f", ring)},
              {"sent", num("%.1f", ring * grads / 1e9)},
              {"net", num("%.2f", ring * grads / h100.network_Bps)},
              {"nvl", num("%.3f", ring * grads / h100.nvlink_Bps)},
              {"b16", bubble(16)},
              {"b64", bubble(64)},
              {"b128", bubble(128)},
              {"days", num("%.1f", 6 * r.N * r.D / (r.gpus * r.rate) / 86400)},
              {"point", commas(6 * r.N * r.D / r.peak / 3600 * (1 / 0.41 - 1 / 0.42))}};
  l.title = {"Llama 3 405B on paper: tetra plan against the seeds",
             "纸上的 Llama 3 405B：tetra plan 对照种子文档"};
  l.idea = {
      "tetra plan --preset llama3-405b computes the paper's run from its shapes. Its numbers "
      "against the seeds':\n"
      "  parameters N = {N} (the model card's 405 B); bf16 weights 2N = {weights} GB: more than "
      "ten GPUs of {mem} GB for the weights alone\n"
      "  training state at 16 B a parameter (ZeRO's mixed-precision Adam) = {state} TB\n"
      "  layout {layout} = {world} GPUs; one replica is TP x PP = {replica} GPUs\n"
      "  ring all-reduce over DP {dp}: 2(N-1)/N = {ring}; 10 GB of gradients: {sent} GB sent by "
      "each GPU, {net} s at 50 GB/s of network, {nvl} s at 450 GB/s of NVLink\n"
      "  GPipe's bubble at PP 16: {b16} at m = 16, {b64} at m = 64, {b128} at m = 128\n"
      "  6ND at 400 TFLOP/s a GPU: {days} days; one MFU point, 41 % to 42 %: {point} GPU-hours "
      "(the 6nd lesson)",
      "tetra plan --preset llama3-405b 从模型的形状算出论文里的那次训练。它的数与种子文档对照：\n"
      "  参数 N = {N}（模型卡写 4 050 亿）；bf16 权重 2N = {weights} GB：光放权重就要十块多 "
      "{mem} GB 的 GPU\n"
      "  按每个参数 16 字节（ZeRO 的混合精度 Adam）的训练状态 = {state} TB\n"
      "  布局 {layout} = {world} 块 GPU；一份模型是 TP × PP = {replica} 块\n"
      "  DP {dp} 上的环形全归约：2(N-1)/N = {ring}；10 GB 梯度：每块 GPU 发出 {sent} GB，网络 "
      "50 GB/s 要 {net} 秒，NVLink 450 GB/s 要 {nvl} 秒\n"
      "  PP 16 下 GPipe 的气泡：m = 16 时 {b16}，m = 64 时 {b64}，m = 128 时 {b128}\n"
      "  按每块 400 TFLOP/s 的 6ND：{days} 天；MFU 从 41 % 到 42 % 的一个百分点：{point} GPU 小时"
      "（见 6nd 一课）"};
  l.values["dp"] = std::to_string(r.dp);
  l.question = {
      "At least how many GPUs of {mem} GB does the training state alone take, at 16 "
      "bytes a parameter?",
      "只算训练状态、按每个参数 16 字节，至少要几块 {mem} GB 的 GPU？"};
  l.formula = gpus;
  l.mistakes = {
      {"weights-only",
       need(2),
       {"that holds the bf16 weights (2 B); training also keeps the gradients (2 B) and the fp32 "
        "master weights and Adam's moments (12 B).",
        "这只放得下 bf16 权重（2 字节）；训练还要存梯度（2 字节）以及 fp32 主权重和 Adam 的两个"
        "矩（12 字节）。"}},
      {"fp32-weights",
       need(4),
       {"that holds fp32 weights (4 B); the state is 16 B a parameter.",
        "这只放得下 fp32 权重（4 字节）；训练状态是每个参数 16 字节。"}},
      {"adam-only",
       need(12),
       {"12 B is the optimizer's part (fp32 master weights, m and v); the bf16 weights and "
        "gradients add 4 B.",
        "12 字节只是优化器那部分（fp32 主权重、m 和 v）；bf16 权重和梯度还要 4 字节。"}},
      {"rounded-down",
       gpus - 1,
       {"round up: {state} TB does not fit in fewer GPUs.",
        "要向上取整：{state} TB 放不进更少的 GPU。"}},
  };
  l.hint = {"16 bytes x N, divided by the memory of one GPU, rounded up.",
            "16 字节 × N，除以一块 GPU 的显存，向上取整。"};
  l.working = {
      "16 x {N} = {state} TB; / {mem} GB = {gpus} GPUs (the seeds: 6.48 TB, at least 81), before "
      "a single activation. That is why the state is sharded (ZeRO, the zero lessons) and the "
      "model split (TP, PP). The whole plan, with memory per rank and traffic per group: "
      "tetra plan --preset llama3-405b.",
      "16 × {N} = {state} TB；除以 {mem} GB = {gpus} 块 GPU（种子文档：6.48 TB，至少 81 块），"
      "这还没算一个激活值。所以训练状态要分片（ZeRO，见 zero 两课），模型要切开（TP、PP）。"
      "完整的方案，包括每个 rank 的显存和每个组的通信：tetra plan --preset llama3-405b。"};
  l.code = {{"plan/preset.cpp", "preset_named"},
            {"plan/plan_json.cpp", "plan_json"},
            {"plan/memory.cpp", "stage_memory"}};
  l.measure = [gpus](const std::vector<RunOutput>&) {
    return computed(gpus, "ceil(16 N / memory)");
  };
  return l;
}

}  // namespace tetra::lab
