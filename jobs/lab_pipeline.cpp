// The lessons on pipeline parallelism: GPipe's bubble (pp), the interleaved schedule's
// against 1F1B's at the same m (interleaved), the zero-bubble ZB-H1's against 1F1B's
// (zero-bubble), and what GPipe holds in memory that 1F1B does not (pp-memory). The bubble is the
// idle share of the step, (p-1)/(m+p-1); its ratio to the compute, (p-1)/m, is the form seed 000
// quotes for interleaving.
#include "jobs/lab_build.hpp"
#include "parallel/schedule.hpp"
#include "plan/memory.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {
namespace {

// Blocks wide enough that a micro-batch's compute outweighs a message's latency, and one rank
// per stage: the measured bubble then comes near the formula on a 2-core laptop.
Setup bubble_run(const TrainArgs& train, int layers, int dim, const std::string& schedule,
                 int vpp) {
  TrainConfig c = tiny(layers, dim, 4, 4, 4 * dim, 64, 4, 4);
  c.batch.micro_batch = 1;
  c.layout.pp = 2;
  c.layout.schedule = schedule;
  c.layout.vpp = vpp;
  return setup(train, c, 2);
}

// The bubble of the metrics' steps after the first, averaged: the idle share of the step.
double idle_share(const std::vector<json>& records) {
  return mean_after_first(records, "bubble");
}

const Text kBubbleSource{
    "bubble in the run's metrics: time blocked on pipeline receives, and idle after the rank's "
    "last pass until its pipeline's last rank is done, over the step, averaged over the ranks "
    "and the steps after the first",
    "运行指标里的 bubble：一步中阻塞在流水线接收上的时间，加上该 rank 最后一个计算结束后等待"
    "流水线最后一个 rank 结束的时间，占这一步的比例，对各 rank 和第一步之后的各步取平均"};
const Text kBubbleNote{
    "The formula counts slots of equal work. A real run adds what it ignores: the head and the "
    "loss on the last stage, messages that take time, and on a CPU with fewer cores than ranks, "
    "ranks that wait for a core. The metrics' bubble_at_measured_costs is the schedule's bubble "
    "at the run's own pass costs, with messages free.",
    "公式按等量工作的时隙来数。实际运行还有公式忽略的东西：最后一段的输出头和损失、需要时间的"
    "消息，以及在核数少于 rank 数的 CPU 上，等 CPU 核的 rank。指标里的 "
    "bubble_at_measured_costs 是按本次运行实测的各计算耗时、消息不计时间模拟出的调度气泡。"};

}  // namespace

Lesson pp(const TrainArgs& train) {
  const Setup s = bubble_run(train, 2, 256, "gpipe", 1);
  const double p = 2, m = s.plan.run.micro_batches;
  Lesson l;
  l.name = "pp";
  l.unit = Unit::Share;
  l.values = {{"m", num("%.0f", m)},
              {"slots", num("%.0f", m + p - 1)},
              {"share", num("%.3g", (p - 1) / (m + p - 1))},
              {"ratio", num("%.3g", (p - 1) / m)}};
  l.title = {"pipeline schedules and the bubble", "流水线调度与气泡"};
  l.idea = {
      "Pipeline parallelism cuts the blocks into p stages on p ranks, and a step's m "
      "micro-batches flow through them. Under GPipe every stage runs all m forwards, then all m "
      "backwards. The last stage starts only after p-1 forward slots, and the first waits as "
      "long for the first backward to come back: of the m + p - 1 slots a step takes, each "
      "stage is idle in p - 1. That idle share of the step is the bubble, (p-1)/(m+p-1). Its "
      "ratio to the compute, (p-1)/m, is the other form in use. 1F1B has the same bubble but "
      "keeps p micro-batches in flight instead of m (the pp-memory lesson); interleaving V "
      "model chunks per rank shrinks it (the interleaved lesson).\n"
      "Here: PP 2 (one block a stage), GPipe, m = {m} micro-batches of one sequence.",
      "流水线并行把各块切成 p 段放在 p 个 rank 上，一步的 m 个微批次依次流过它们。GPipe 下每一段"
      "先做完 m 个前向，再做 m 个反向。最后一段要等 p-1 个前向时隙才开始，第一段也要等同样久，"
      "第一个反向才传回来：一步共 m + p - 1 个时隙，每段空着 p - 1 个。这个空闲时间占一步的比例"
      "就是气泡：(p-1)/(m+p-1)。它与计算时间之比 (p-1)/m 是另一种常见写法。1F1B 的气泡相同，"
      "但同时在途的微批次是 p 个而不是 m 个（见 pp-memory 一课）；每个 rank 放 V 个模型块的交错"
      "调度能把气泡缩小（见 interleaved 一课）。\n"
      "本课：PP 2（每段一个块），GPipe，m = {m} 个微批次，每个一条序列。"};
  l.question = {
      "What share of the step is a stage idle? (a fraction like 0.2 or 1/5, or a "
      "percentage like 20%)",
      "每一段空闲的时间占一步的多少？（写成 0.2 或 1/5 这样的小数、分数，或 20% 这样的"
      "百分数）"};
  l.formula = (p - 1) / (m + p - 1);
  l.mistakes = {
      {"ratio",
       (p - 1) / m,
       {"(p-1)/m is the idle time over the compute time, the ratio form seed 000 quotes for "
        "interleaving; of the step it is (p-1)/(m+p-1).",
        "(p-1)/m 是空闲时间与计算时间之比，种子文档 000 讲交错调度时用的是这种写法；占一步的比例"
        "是 (p-1)/(m+p-1)。"}},
      {"one-micro-batch",
       (p - 1) / p,
       {"that is the idle share with a single micro-batch; m of them fill the pipeline's slots.",
        "这是只有一个微批次时的空闲比例；m 个微批次会把流水线的时隙填满。"}},
      {"busy",
       m / (m + p - 1),
       {"that is the busy share; the bubble is the idle one, 1 minus it.",
        "这是忙碌的比例；气泡是空闲的比例，等于 1 减去它。"}},
      {"none",
       0,
       {"each stage waits p - 1 slots in a step: at the start for the first forward to reach "
        "it, at the end for the last backward.",
        "每一段在一步中都要等 p - 1 个时隙：开头等第一个前向传到，结尾等最后一个反向。"}},
  };
  l.hint = {
      "count slots: a step takes m + p - 1 slots of one micro-batch's work, and each "
      "stage works in m of them.",
      "数时隙：一步共 m + p - 1 个时隙（每个是一个微批次的工作量），每段只在其中 m 个里"
      "干活。"};
  l.working = {
      "(p-1)/(m+p-1) = 1/{slots} = {share}. (p-1)/m = {ratio} divides the idle time by the "
      "compute time (the form interleaved schedules are often quoted in), not by the step. "
      "Draw it: tetra plot --schedule gpipe --pp 2 --micro-batches {m} --out gpipe.svg.",
      "(p-1)/(m+p-1) = 1/{slots} = {share}。(p-1)/m = {ratio} 是空闲时间除以计算时间（交错调度"
      "常用这种写法），不是除以一步。画出来看：tetra plot --schedule gpipe --pp 2 "
      "--micro-batches {m} --out gpipe.svg。"};
  l.code = {{"parallel/schedule.cpp", "make_schedule"},
            {"parallel/schedule.cpp", "bubble_forms"},
            {"parallel/pipeline.cpp", "PipelineExecutor::execute"}};
  l.runs = {run_of(s, {"PP 2, GPipe", "PP 2，GPipe"})};
  l.measure = [s](const std::vector<RunOutput>& r) {
    Measured m;
    m.value = idle_share(r[0].metrics);
    m.source = kBubbleSource;
    m.notes = {kBubbleNote};
    return m;
  };
  return l;
}

Lesson interleaved(const TrainArgs& train) {
  const Setup s = bubble_run(train, 4, 256, "interleaved", 2),
              plain = bubble_run(train, 4, 256, "1f1b", 1);
  const double p = 2, V = 2, m = s.plan.run.micro_batches;
  const BubbleForms f = bubble_forms(ScheduleKind::Interleaved, 2, 2, int(m));
  const BubbleForms g = bubble_forms(ScheduleKind::OneFOneB, 2, 1, int(m));
  Lesson l;
  l.name = "interleaved";
  l.unit = Unit::Share;
  l.values = {{"m", num("%.0f", m)},
              {"slots", num("%.0f", V * m + p - 1)},
              {"share", pct(f.of_step)},
              {"ratio", pct(f.of_compute)},
              {"plain", pct(g.of_step)}};
  l.title = {"the interleaved schedule against 1F1B", "交错调度与 1F1B 的比较"};
  l.idea = {
      "The bubble shrinks with more micro-batches, but a step's batch is fixed. The interleaved "
      "schedule (Megatron's, which Llama 3 uses) shrinks it another way: each rank holds V "
      "model chunks instead of one contiguous stage (rank 0 blocks 0 and 2, rank 1 blocks 1 "
      "and 3), so a micro-batch visits every rank V times, each time for 1/V of the work. The "
      "pipeline fills and drains in p - 1 slots that are now V times smaller, while each rank "
      "works in V m of them: the idle share of the step is (p-1)/(V m + p - 1), and its ratio "
      "to the compute (p-1)/(V m). The price: V times as many messages between stages.\n"
      "Here: PP 2, 4 blocks, m = {m} micro-batches, interleaved with V = 2, beside 1F1B at the "
      "same m.",
      "微批次越多，气泡越小，但一步的批次大小是固定的。交错调度（Megatron 的做法，Llama 3 也用它）"
      "用另一种办法缩小气泡：每个 rank 不再持有连续的一段，而是 V 个模型块（rank 0 放第 0、2 块，"
      "rank 1 放第 1、3 块），于是一个微批次要经过每个 rank V 次，每次做 1/V 的工作。流水线灌满"
      "和排空仍是 p - 1 个时隙，但时隙小了 V 倍，而每个 rank 在 V m 个时隙里干活：空闲占一步的"
      "比例是 (p-1)/(V m + p - 1)，与计算之比是 (p-1)/(V m)。代价是段与段之间的消息多了 V 倍。\n"
      "本课：PP 2，4 个块，m = {m} 个微批次，V = 2 的交错调度，与相同 m 的 1F1B 并排比较。"};
  l.question = {
      "Under the interleaved schedule with V = 2, what share of the step is a rank "
      "idle? (0.2, 20% or 1/5)",
      "V = 2 的交错调度下，每个 rank 空闲的时间占一步的多少？（0.2、20% 或 1/5）"};
  l.formula = f.of_step;
  l.mistakes = {
      {"1f1b",
       g.of_step,
       {"that is 1F1B's bubble at the same m: interleaving makes the slots V times smaller and "
        "V times as many.",
        "这是相同 m 下 1F1B 的气泡：交错调度让时隙小了 V 倍、多了 V 倍。"}},
      {"ratio",
       f.of_compute,
       {"(p-1)/(V m) is the idle time over the compute time; of the step it is "
        "(p-1)/(V m + p - 1).",
        "(p-1)/(V m) 是空闲时间与计算时间之比；占一步的比例是 (p-1)/(V m + p - 1)。"}},
      {"divided",
       g.of_step / V,
       {"dividing 1F1B's share by V divides the idle time, but the step shrinks with it: "
        "(p-1)/(V m + p - 1).",
        "把 1F1B 的比例除以 V，除掉的是空闲时间，但一步也随之变短了：应为 (p-1)/(V m + p - 1)。"}},
      {"gpipe-one",
       (p - 1) / p,
       {"that is the bubble of one micro-batch; here m micro-batches fill V m slots.",
        "这是只有一个微批次时的气泡；这里 m 个微批次填满 V m 个时隙。"}},
  };
  l.hint = {
      "count in slots of 1/V of a micro-batch's work: how many does a rank work in, and "
      "how many more does the step take?",
      "以一个微批次工作量的 1/V 为一个时隙来数：每个 rank 干活的有几个，一步又多出几个？"};
  l.working = {
      "(p-1)/(V m + p - 1) = 1/{slots} = {share}; the ratio form (p-1)/(V m) = {ratio}; 1F1B at "
      "the same m: {plain}. Draw both: tetra plot --schedule interleaved --pp 2 --vpp 2 "
      "--micro-batches {m} --out il.svg, and --schedule 1f1b.",
      "(p-1)/(V m + p - 1) = 1/{slots} = {share}；比值形式 (p-1)/(V m) = {ratio}；相同 m 的 "
      "1F1B：{plain}。两种都画出来看：tetra plot --schedule interleaved --pp 2 --vpp 2 "
      "--micro-batches {m} --out il.svg，以及 --schedule 1f1b。"};
  l.code = {{"parallel/schedule.cpp", "make_schedule"},
            {"parallel/schedule.cpp", "warmup_forwards"},
            {"parallel/schedule.cpp", "bubble_forms"}};
  l.runs = {run_of(s, {"PP 2, interleaved V 2", "PP 2，交错调度 V 2"}),
            run_of(plain, {"PP 2, 1F1B", "PP 2，1F1B"})};
  l.measure = [s, plain](const std::vector<RunOutput>& r) {
    Measured m;
    m.value = idle_share(r[0].metrics);
    m.source = kBubbleSource;
    m.values = {{"measured_1f1b", pct(idle_share(r[1].metrics))}};
    m.notes = {{"1F1B at the same m measured {measured_1f1b} (formula {plain}). Interleaving "
                "sends V times as many messages between stages; on a CPU whose ranks share cores "
                "their latency and the waits for a core can eat its gain, where GPUs with fast "
                "links keep it.",
                "相同 m 的 1F1B 测得 {measured_1f1b}（公式 {plain}）。交错调度在段与段之间多发 V "
                "倍的消息；在各 rank 共用 CPU 核的机器上，消息的延迟和等 CPU 核的时间可能吃掉它的"
                "好处，而有高速互联的 GPU 能保住。"},
               kBubbleNote};
    return m;
  };
  return l;
}

Lesson zero_bubble(const TrainArgs& train) {
  const Setup s = bubble_run(train, 2, 256, "zb-h1", 1),
              plain = bubble_run(train, 2, 256, "1f1b", 1);
  const double p = 2, m = s.plan.run.micro_batches;
  const BubbleForms f = bubble_forms(ScheduleKind::ZeroBubbleH1, 2, 1, int(m));
  const BubbleForms g = bubble_forms(ScheduleKind::OneFOneB, 2, 1, int(m));
  Lesson l;
  l.name = "zero-bubble";
  l.unit = Unit::Share;
  l.values = {{"m", num("%.0f", m)},
              {"slots", num("%.0f", 3 * m + p - 1)},
              {"share", pct(f.of_step)},
              {"ratio", pct(f.of_compute)},
              {"plain", pct(g.of_step)}};
  l.title = {"the zero-bubble schedule ZB-H1 against 1F1B", "零气泡调度 ZB-H1 与 1F1B 的比较"};
  l.idea = {
      "A backward is two jobs: B, the gradient of the block's input, which the previous stage "
      "waits for, and W, the gradients of its weights, which only the optimizer needs (Qi et "
      "al. 2023). Split them, and W can wait: ZB-H1 runs 1F1B's forwards and B passes in 1F1B's "
      "order, and stage s runs its W passes s micro-batches late, into the time it would idle. "
      "Count a step in slots of one F, B or W (equal costs): each stage works in 3 m of them, "
      "and the pipeline's fill and drain cost p - 1 slots instead of 1F1B's 3 (p - 1), since "
      "only F and B are on the path between stages. The idle share of the step is "
      "(p-1)/(3 m + p - 1), and no stage holds more micro-batches' activations than 1F1B's "
      "first stage (p).\n"
      "Here: PP 2 (one block a stage), m = {m} micro-batches, ZB-H1 beside 1F1B at the same m.",
      "反向其实是两件事：B 是块输入的梯度，前一段在等它；W 是权重的梯度，只有优化器需要（Qi "
      "等，2023）。把它们拆开，W 就可以等：ZB-H1 按 1F1B 的顺序做前向和 B，第 s 段把 W 推迟 s "
      "个微批次，填进它本来要空闲的时间。以一个 F、B 或 W 为一个时隙来数（三者代价相同）：每段"
      "在 3 m 个时隙里干活，而流水线灌满和排空只占 p - 1 个时隙，不是 1F1B 的 3 (p - 1) 个，"
      "因为段与段之间的路径上只有 F 和 B。空闲占一步的比例是 (p-1)/(3 m + p - 1)，而且没有哪"
      "一段持有的微批次激活值比 1F1B 的第一段（p 个）多。\n"
      "本课：PP 2（每段一个块），m = {m} 个微批次，ZB-H1 与相同 m 的 1F1B 并排比较。"};
  l.question = {
      "Under ZB-H1, with F, B and W of equal cost, what share of the step is a stage idle? "
      "(0.2, 20% or 1/5)",
      "ZB-H1 下，F、B、W 代价相同时，每段空闲的时间占一步的多少？（0.2、20% 或 1/5）"};
  l.formula = f.of_step;
  l.mistakes = {
      {"1f1b",
       g.of_step,
       {"that is 1F1B's bubble at the same m: there a backward (B and W together) is on the "
        "path between stages, and each stage idles (p - 1)(T_F + T_B + T_W).",
        "这是相同 m 下 1F1B 的气泡：那里整个反向（B 和 W 一起）都在段与段之间的路径上，每段空闲 "
        "(p - 1)(T_F + T_B + T_W)。"}},
      {"ratio",
       f.of_compute,
       {"(p-1)/(3 m) is the idle time over the compute time; of the step it is "
        "(p-1)/(3 m + p - 1).",
        "(p-1)/(3 m) 是空闲时间与计算时间之比；占一步的比例是 (p-1)/(3 m + p - 1)。"}},
      {"zero",
       0,
       {"ZB-H1 keeps 1F1B's memory, and at that memory a stage still waits p - 1 slots for the "
        "first forward to reach it (its name's zero needs more activations in flight, ZB-H2).",
        "ZB-H1 保持 1F1B 的显存，在这样的显存下每段仍要等 p - 1 个时隙，等第一个前向传到（名字里"
        "的“零”要更多在途的激活值，即 ZB-H2）。"}},
  };
  l.hint = {
      "count in slots of one F, B or W: how many does a stage work in, and how many does it "
      "wait for the first forward to arrive?",
      "以一个 F、B 或 W 为一个时隙来数：每段干活的有几个，等第一个前向传到又要几个？"};
  l.working = {
      "(p-1)/(3 m + p - 1) = 1/{slots} = {share}; the ratio form (p-1)/(3 m) = {ratio}; 1F1B at "
      "the same m: {plain}. Draw both: tetra plot --schedule zb-h1 --pp 2 --micro-batches {m} "
      "--out zb.svg, and --schedule 1f1b. Then --schedule zb-v: two chunks of half a stage per "
      "rank placed as a V (rank 0 holds the first and the last), the same memory, and a wait "
      "of p - 1 half slots: (p-1)/(6 m + p - 1).",
      "(p-1)/(3 m + p - 1) = 1/{slots} = {share}；比值形式 (p-1)/(3 m) = {ratio}；相同 m 的 "
      "1F1B：{plain}。两种都画出来看：tetra plot --schedule zb-h1 --pp 2 --micro-batches {m} "
      "--out zb.svg，以及 --schedule 1f1b。再画 --schedule zb-v：每个 rank 两个半段大小的分块，"
      "排成 V 形（rank 0 持有第一块和最后一块），显存相同，只等 p - 1 个半时隙："
      "(p-1)/(6 m + p - 1)。"};
  l.code = {{"parallel/schedule.cpp", "make_schedule"},
            {"transformer/block.cpp", "block_backward_input"},
            {"transformer/block.cpp", "block_backward_weight"}};
  l.runs = {run_of(s, {"PP 2, ZB-H1", "PP 2，ZB-H1"}), run_of(plain, {"PP 2, 1F1B", "PP 2，1F1B"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    Measured m;
    m.value = idle_share(r[0].metrics);
    m.source = kBubbleSource;
    m.values = {{"measured_1f1b", pct(idle_share(r[1].metrics))}};
    m.notes = {{"1F1B at the same m measured {measured_1f1b} (formula {plain}). On a CPU, B costs "
                "more than F and W less (attention's backward is in B), so the measured gap "
                "differs from the formula's equal costs.",
                "相同 m 的 1F1B 测得 {measured_1f1b}（公式 {plain}）。在 CPU 上 B 比 F 贵、W 比 F "
                "便宜（注意力的反向在 B 里），所以测得的差距与公式的等代价假设不同。"},
               kBubbleNote};
    return m;
  };
  return l;
}

Lesson pp_memory(const TrainArgs& train) {
  // Stage 0 (the embedding and 2 blocks) is the fullest under both schedules.
  const auto run = [&](const std::string& schedule) {
    TrainConfig c = tiny(3, 64, 4, 4, 128, 16, 8, 2);
    c.batch.micro_batch = 1;
    c.layout.pp = 2;
    c.layout.schedule = schedule;
    return setup(train, c, 2);
  };
  const Setup g = run("gpipe"), o = run("1f1b");
  const plan::Memory mg = plan::stage_memory(g.plan, 0), mo = plan::stage_memory(o.plan, 0);
  const double A = mg.activations / mg.in_flight, m = g.plan.run.micro_batches, p = 2;
  // One activation sent to stage 1, [T, d]: at its peak, in a backward, 1F1B's stage 0 still
  // holds the p - 1 it sent that no gradient back has proved received yet (parallel/retire.hpp);
  // GPipe's first gradient back proves all m received.
  const double M = double(g.plan.rows()) * g.plan.cfg.dim * g.plan.prec.act;
  Lesson l;
  l.name = "pp-memory";
  l.values = {{"A", commas(A)},
              {"M", commas(M)},
              {"m", num("%.0f", m)},
              {"bytes", commas((m - p) * A - (p - 1) * M)},
              {"in_g", std::to_string(mg.in_flight)},
              {"in_o", std::to_string(mo.in_flight)}};
  l.title = {"GPipe against 1F1B: micro-batches in flight", "GPipe 与 1F1B：在途的微批次"};
  l.idea = {
      "A stage keeps each micro-batch's activations from its forward until its backward. GPipe "
      "runs all m forwards before any backward, so the first stage holds all m micro-batches at "
      "once. 1F1B (one forward, one backward) starts the backwards as soon as the first "
      "micro-batch comes back: after p - s warm-up forwards stage s alternates, so it never "
      "holds more than p - s; the first stage holds p. The bubble is the same; the memory is "
      "not.\n"
      "Here: PP 2, stage 0 holds the embedding and 2 blocks, m = {m} micro-batches of one "
      "sequence; one micro-batch's activations on stage 0: A = {A} B (as tetra plan counts "
      "them).",
      "一段要把每个微批次的激活值从它的前向一直留到它的反向。GPipe 先做完全部 m 个前向才开始"
      "反向，所以第一段会同时留着全部 m 个微批次。1F1B（一前一后交替）在第一个微批次传回来后"
      "立刻开始反向：第 s 段做完 p - s 个预热前向之后就前后交替，所以最多只留 p - s 个；第一段"
      "留 p 个。两者气泡一样，显存不一样。\n"
      "本课：PP 2，第 0 段有词嵌入和 2 个块，m = {m} 个微批次，每个一条序列；第 0 段一个微批次"
      "的激活值 A = {A} B（按 tetra plan 的算法）。"};
  l.question = {
      "How many bytes more does the first stage hold at its peak under GPipe than "
      "under 1F1B?",
      "第一段的显存峰值，GPipe 比 1F1B 多多少字节？"};
  l.formula = (m - p) * A - (p - 1) * M;
  l.mistakes = {
      {"all-m",
       m * A,
       {"1F1B's first stage still holds p micro-batches at once; GPipe holds m - p more.",
        "1F1B 的第一段仍然同时留着 p 个微批次；GPipe 比它多 m - p 个。"}},
      {"one",
       (m - 1) * A,
       {"1F1B holds one micro-batch only on the last stage; the first holds p.",
        "1F1B 只有最后一段才只留一个微批次；第一段留 p 个。"}},
      {"p-only",
       p * A,
       {"that is what 1F1B holds; GPipe holds m, so the difference is m - p micro-batches.",
        "这是 1F1B 留的量；GPipe 留 m 个，差是 m - p 个微批次。"}},
      {"same",
       0,
       {"the two have the same bubble, not the same memory.", "两者气泡相同，显存不同。"}},
  };
  l.hint = {
      "how many micro-batches has the first stage run forward but not yet backward, at "
      "most, under each schedule?",
      "在两种调度下，第一段最多有几个微批次做完了前向、还没做反向？"};
  l.working = {
      "(m - p) x A - (p - 1) x M = ({m} - 2) x {A} - {M} = {bytes} B: GPipe keeps {in_g} "
      "micro-batches in flight on stage 0, 1F1B {in_o}. The small term: at its peak, in a "
      "backward, 1F1B's stage 0 still holds the p - 1 activations it sent (M = [T, d] = {M} B "
      "each) that no gradient back has yet proved received, while GPipe's first gradient back "
      "proved all m received and freed them. This is why 1F1B replaced GPipe, and why a plan that "
      "does not fit under GPipe may fit under 1F1B (tetra plan --schedule 1f1b).",
      "(m - p) × A - (p - 1) × M = ({m} - 2) × {A} - {M} = {bytes} B：GPipe 在第 0 段同时留 "
      "{in_g} 个微批次，1F1B 只留 {in_o} 个。小的那一项：1F1B 的第 0 段在峰值处（某个反向中）"
      "还留着 p - 1 个已发出、但还没有任何传回的梯度证明对方已收到的激活值（M = [T, d] = {M} B "
      "一个），而 GPipe 传回的第一个梯度就证明了全部 m 个已收到，它们已被释放。这就是 1F1B 取代 "
      "GPipe 的原因，也是为什么 GPipe 下放不下的方案，换成 "
      "1F1B 也许就放得下（tetra plan --schedule 1f1b）。"};
  l.code = {{"parallel/schedule.cpp", "make_schedule"},
            {"parallel/schedule.cpp", "max_in_flight_bound"},
            {"plan/memory.cpp", "stage_memory"}};
  l.runs = {run_of(g, {"PP 2, GPipe", "PP 2，GPipe"}), run_of(o, {"PP 2, 1F1B", "PP 2，1F1B"})};
  l.measure = [](const std::vector<RunOutput>& r) {
    return peak_drop(r[0].metrics, r[1].metrics,
                     {"Peak memory: GPipe {more} B, 1F1B {less} B.",
                      "显存峰值：GPipe {more} B，1F1B {less} B。"});
  };
  return l;
}

}  // namespace tetra::lab
