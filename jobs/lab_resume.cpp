// The lesson on failures: a rank killed mid-step, tetra launch's restart from the newest
// checkpoint, the steps trained twice with the same loss, and the goodput.
#include <cstdio>
#include <fstream>
#include <regex>

#include "jobs/lab_build.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {
namespace {

// tetra launch's goodput line in the run's log, as a share; negative when there is none.
double goodput(const std::string& log) {
  std::ifstream in(log);
  const std::regex line(R"(goodput ([0-9.]+)%)");
  std::smatch m;
  for (std::string s; std::getline(in, s);)
    if (std::regex_search(s, m, line)) return std::stod(m[1]) / 100;
  return -1;
}

}  // namespace

Lesson resume(const TrainArgs& train) {
  TrainConfig c = tiny(2, 32, 4, 2, 64, 16, 4, 9);
  c.layout.dp = 2;
  c.checkpoint.ckpt_dir = "ckpt";  // the lab gives the run its own directory
  c.checkpoint.ckpt_every = 3;
  c.checkpoint.inject_failure = "1@7";
  const Setup s = setup(train, c, 2);
  Lesson l;
  l.name = "resume";
  l.unit = Unit::Step;
  l.title = {"a failure and the resume", "一次故障与续训"};
  l.idea = {
      "A rank that dies mid-step takes the whole job down (mpirun stops the others). tetra "
      "launch reruns it with --resume auto, and the run continues from the newest complete "
      "checkpoint: the steps after it are trained again (lost work), and the final weights are "
      "bitwise those of a run that never failed. The checkpoint written after step s holds s+1 "
      "steps of training and is named step_(s+1); training resumes at that step. Llama 3 saw "
      "466 interruptions in 54 days and still kept its effective training time above 90 %: "
      "checkpoints often enough, restarts fast enough.\n"
      "Here: DP 2, steps 0-8, --ckpt-every 3, rank 1 killed in step 7 (--inject-failure 1@7).",
      "一个 rank 在一步中间死掉，整个任务都会停下（mpirun 会终止其他 rank）。tetra launch 用 "
      "--resume auto 重新运行它，训练从最新的完整检查点接着走：检查点之后的步要重新训练（损失"
      "的工作），最终的权重与从未出错的运行逐位相同。第 s 步之后写的检查点包含 s+1 步的训练，"
      "名为 step_(s+1)；训练从那一步接着开始。Llama 3 在 54 天里中断了 466 次，有效训练时间仍"
      "在 90 % 以上：检查点存得够勤，重启够快。\n"
      "本课：DP 2，第 0-8 步，--ckpt-every 3，rank 1 在第 7 步被杀掉（--inject-failure 1@7）。"};
  l.question = {"At which step does the restarted run start training again?",
                "重启后的运行从第几步开始重新训练？"};
  l.formula = 6;
  l.mistakes = {
      {"failed-step",
       7,
       {"step 7 died before any checkpoint held it: the run goes back to the newest checkpoint, "
        "not to the step that failed.",
        "第 7 步在写进任何检查点之前就死了：运行回到最新的检查点，而不是出错的那一步。"}},
      {"last-saved",
       5,
       {"step_6 holds steps 0-5; the run resumes at the next step to train, 6.",
        "step_6 包含第 0-5 步；运行从下一个要训练的步，也就是第 6 步接着走。"}},
      {"next-checkpoint",
       9,
       {"checkpoints are written after the steps they hold, so the newest when step 7 fails is "
        "step_6.",
        "检查点写在它所包含的步之后，所以第 7 步出错时最新的是 step_6。"}},
      {"start-over",
       0,
       {"the run keeps its checkpoints: it does not start over.",
        "运行保留了检查点：不会从头开始。"}},
  };
  l.hint = {
      "which checkpoints exist when step 7 fails, and at which step does the newest one "
      "resume?",
      "第 7 步出错时已经有哪些检查点？最新的那个从第几步接着训练？"};
  l.working = {
      "Checkpoints come after every 3 steps: step_3 (steps 0-2) and step_6 (steps 0-5) exist "
      "when step 7 fails. The restart loads step_6 and trains from step 6: floor(7/3) x 3 = 6. "
      "Step 6, finished before the failure, is trained again.",
      "每 3 步存一次检查点：第 7 步出错时已有 step_3（第 0-2 步）和 step_6（第 0-5 步）。重启"
      "载入 step_6，从第 6 步开始训练：floor(7/3) × 3 = 6。第 6 步在故障前已经做完，现在再训练"
      "一遍。"};
  l.code = {{"train/faults.cpp", "FaultPlan::parse"},
            {"checkpoint/resume.cpp", "resume_path"},
            {"jobs/launch.cpp", "print_summary"}};
  l.runs = {run_of(s, {"DP 2 under tetra launch", "DP 2，在 tetra launch 下"}, true)};
  l.measure = [](const std::vector<RunOutput>& r) {
    const std::vector<json>& recs = r[0].metrics;
    for (size_t i = 1; i < recs.size(); ++i) {
      const int64_t from = recs[i]["step"].get<int64_t>(), to = recs[i - 1]["step"].get<int64_t>();
      if (from > to) continue;
      // The first attempt's record of the step the second attempt starts at.
      double before = 0;
      for (size_t j = 0; j < i; ++j)
        if (recs[j]["step"].get<int64_t>() == from) before = recs[j]["loss"].get<double>();
      const double after = recs[i]["loss"].get<double>();
      Measured m;
      m.value = double(from);
      m.source = {"the first step the second attempt wrote to the metrics",
                  "第二次尝试写进指标的第一步"};
      const double g = goodput(r[0].log);
      m.values = {{"from", std::to_string(from)},
                  {"which", std::to_string(from) + (from == to ? "" : "-" + std::to_string(to))},
                  {"before", num("%.6f", before)},
                  {"after", num("%.6f", after)},
                  {"same", before == after ? "the same bits" : "NOT the same"},
                  {"same_zh", before == after ? "逐位相同" : "不相同"},
                  {"goodput", g >= 0 ? pct(g) : "?"}};
      m.notes = {
          {"Trained twice: step {which}. Step {from}'s loss: {before} before the "
           "failure, {after} after the restart: {same}. tetra launch's goodput (kept "
           "steps' time over the wall time): {goodput}, low here because a step takes milliseconds "
           "and a restart seconds (MPI's start-up, the checkpoint's load); a real run's steps "
           "take seconds and its checkpoints come every few hundred steps.",
           "训练了两遍的步：{which}。第 {from} 步的损失：故障前 {before}，重启后 "
           "{after}：{same_zh}。tetra launch 的有效训练比例（保留下来的步的时间除以总时间）："
           "{goodput}；这里很低，因为一步只要几毫秒，而重启要几秒（MPI 启动、载入检查点）；"
           "真实训练一步要几秒，检查点每隔几百步才存一次。"}};
      return m;
    }
    fail("the metrics show no restart");
  };
  return l;
}

}  // namespace tetra::lab
