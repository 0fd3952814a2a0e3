// The trainer's side of checkpoints: deciding where to resume from, restoring a rank's
// units from a checkpoint written at any layout, and saving this rank's shards.
#include "train/trainer_checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint.hpp"
#include "train/trainer.hpp"
#include "util/clock.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra {

// A checkpoint directory must be writable before the first step, not at the first save.
void check_writable_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  check(!ec, "cannot create checkpoint directory '", dir, "': ", ec.message());
  // A fresh temporary made and removed, as every checkpoint file will be made.
  const std::string problem = creation_problem(dir + "/probe");
  check(problem.empty(), "checkpoint directory '", dir, "' is not writable: ", problem);
}

// Rank 0 decides where to resume from: "" for a fresh start.
std::string find_resume_path(const TrainConfig& opt) {
  if (opt.checkpoint.resume == "never") return "";
  if (opt.checkpoint.resume != "auto") {
    const std::string problem = ckpt::verify(opt.checkpoint.resume);
    check(problem.empty(), "--resume ", opt.checkpoint.resume, ": ", problem);
    return opt.checkpoint.resume;
  }
  if (opt.checkpoint.ckpt_dir.empty()) return "";
  std::vector<std::string> warnings;
  const std::string path = ckpt::find_latest(opt.checkpoint.ckpt_dir, &warnings);
  // Checkpoints exist but none verifies: starting over would hide that (and --keep would
  // then prune them), so stop and say why each failed.
  const bool skipped = std::any_of(warnings.begin(), warnings.end(),
                                   [](const std::string& w) { return w.starts_with("skipping "); });
  if (path.empty() && skipped) {
    std::string why;
    for (const std::string& w : warnings) why += (why.empty() ? "" : "; ") + w;
    // Another line's checkpoint may verify: named, since "none verifies" would be untrue.
    const std::vector<std::string> others = ckpt::verifying_checkpoints(opt.checkpoint.ckpt_dir);
    if (others.empty())
      fail("--resume auto: no checkpoint in '", opt.checkpoint.ckpt_dir, "' verifies (", why,
           "); pass --resume never to start from step 0, keeping them");
    fail("--resume auto: no checkpoint of the line being trained in '", opt.checkpoint.ckpt_dir,
         "' verifies (", why, "); ", others.front(),
         " verifies but is another line's: pass --resume ", others.front(),
         " to continue from it, or --resume never to start from step 0, keeping them");
  }
  for (const std::string& w : warnings) std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
  return path;
}

json run_settings(const TrainConfig& opt) {
  json v = json::object();
  std::error_code ec;
  const auto path = std::filesystem::weakly_canonical(std::filesystem::absolute(opt.data.data), ec);
  v["data"] = opt.data.data == "synthetic" || ec ? opt.data.data : path.string();
  v["lr"] = opt.optimizer.lr;
  v["min-lr"] = opt.optimizer.min_lr;
  v["warmup"] = opt.optimizer.warmup;
  v["steps"] = opt.optimizer.steps;
  v["clip"] = opt.optimizer.clip;
  v["weight-decay"] = opt.optimizer.weight_decay;
  // bf16 and fp32 keep the same fp32 master state, but step on other numbers.
  v["dtype"] = opt.device.dtype;
  return v;
}

std::string broadcast_string(MPI_Comm comm, std::string s) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  s.resize(n);
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, comm);
  return s;
}

void Trainer::resume_from(const std::string& path) {
  const ckpt::Reader r(path);
  const ModelConfig saved = ckpt::model_from_json(r.state().model, path);
  check(ckpt::model_to_json(saved) == ckpt::model_to_json(cfg_), "checkpoint '", path,
        "' holds another model (", saved.str(), "); this run trains ", cfg_.str());
  check(r.state().seed == opt_.optimizer.seed, "checkpoint '", path, "' was written with --seed ",
        r.state().seed, "; this run has ", opt_.optimizer.seed, " (the data would differ)");
  check(r.state().global_batch == opt_.batch.global_batch, "checkpoint '", path,
        "' was written with --global-batch ", r.state().global_batch, "; this run has ",
        opt_.batch.global_batch);
  check(r.state().step <= opt_.optimizer.steps, "checkpoint '", path, "' is at step ",
        r.state().step, ", past --steps ", opt_.optimizer.steps,
        ": nothing is left to train; pass a larger --steps with --allow-change steps, or "
        "--resume never to start over");
  // What the run continues must be the run that was checkpointed, unless the user says
  // which settings may change (to extend a run, or fine-tune from it).
  // A setting the checkpoint does not record (written before tetra recorded it) counts as a
  // difference, which --allow-change can accept.
  const auto recorded = [&](const std::string& key) {
    return r.state().run.contains(key) ? r.state().run.at(key) : json("not recorded");
  };
  std::string differ, names;
  for (const std::string& key : kChangeable) {
    const json was = recorded(key);
    const json& now = settings_.at(key);
    // An --min-lr left to its default follows --lr: allowing or naming --lr covers it.
    const bool follows_lr =
        key == "min-lr" && !opt_.given.count("--min-lr") &&
        (opt_.checkpoint.allow_change.count("lr") || recorded("lr") != settings_.at("lr"));
    if (was == now || opt_.checkpoint.allow_change.count(key) || follows_lr) continue;
    differ += (differ.empty() ? "" : "; ") + ("--" + key) + " " + was.dump() + " there, " +
              now.dump() + " here";
    names += (names.empty() ? "" : ",") + key;
  }
  check(differ.empty(), "checkpoint '", path, "' comes from a run with other settings (", differ,
        "); pass --allow-change ", names, " to continue it with this run's");
  // Every rank assembles the whole tensors of its units and keeps its own TP slice; the
  // ZeRO shard is cut by load_state. Any saved layout resumes at any new one.
  for (int u = 0; u < params_->size(); ++u) {
    const UnitLayout& l = params_->layout(u);
    std::vector<float> w(l.numel), m(l.numel), v(l.numel);
    for (const ParamInfo& p : l.params) {
      const auto whole_w = r.tensor(p.name, ckpt::Reader::Kind::Param);
      const auto whole_m = r.tensor(p.name, ckpt::Reader::Kind::AdamM);
      const auto whole_v = r.tensor(p.name, ckpt::Reader::Kind::AdamV);
      for (int64_t i = 0; i < p.numel(); ++i) {
        const int64_t g = p.global_index(i, grid_.coord.tp);
        w[p.offset + i] = whole_w[g];
        m[p.offset + i] = whole_m[g];
        v[p.offset + i] = whole_v[g];
      }
    }
    params_->load_state(u, w, m, v);
  }
  step_ = r.state().step;
  resumed_from_ = path;
  if (!opt_.checkpoint.ckpt_dir.empty())
    line_head_ = ckpt::reference_to(opt_.checkpoint.ckpt_dir, path);
}

void Trainer::point_latest_here() {
  ckpt::set_latest(opt_.checkpoint.ckpt_dir,
                   line_head_.name.empty() ? ckpt::kNoCheckpoint : line_head_.name);
}

void Trainer::finish_already_done() {
  if (grid_.rank == 0)
    std::printf("run finished: %s is at step %lld, the last of --steps %lld; nothing to train\n",
                resumed_from_.c_str(), (long long)step_, (long long)opt_.optimizer.steps);
  if (opt_.output.export_path.empty()) return;
  export_weights(opt_.output.export_path);
  if (grid_.rank == 0)
    std::printf("exported the weights of step %lld to %s\n", (long long)step_,
                opt_.output.export_path.c_str());
}

double Trainer::save_checkpoint() {
  const Clock::time_point t0 = Clock::now();
  ckpt::RunState st;
  st.step = step_;
  st.tokens_seen = step_ * opt_.batch.global_batch * cfg_.seq_len;
  st.seed = opt_.optimizer.seed;
  st.sampler_step = step_;
  st.global_batch = opt_.batch.global_batch;
  st.model = ckpt::model_to_json(cfg_);
  json l = json::object();
  l["tp"] = grid_.layout.tp;
  l["cp"] = grid_.layout.cp;
  l["pp"] = grid_.layout.pp;
  l["dp"] = grid_.layout.dp;
  l["vpp"] = opt_.layout.vpp;
  l["zero"] = opt_.optimizer.zero;
  l["sp"] = opt_.layout.sp;
  l["schedule"] = schedule_name(work_.schedule);
  st.layout = l;
  st.run = settings_;
  st.parent = line_head_;
  const auto slices = params_->owned_slices();
  std::vector<ckpt::Segment> segments;
  for (const auto& s : slices) {
    // A TP-replicated tensor (the norms) is the same on every TP rank: TP rank 0 stores it.
    if (s.param->tp_dim < 0 && grid_.coord.tp != 0) continue;
    segments.push_back({s.param->name, grid_.coord.tp, grid_.layout.tp, s.begin, s.end,
                        s.weights.data(), s.adam_m.data(), s.adam_v.data()});
  }
  const int signal = fault_.signal_during_checkpoint(grid_.rank, step_);
  const std::string path =
      ckpt::save(world_, opt_.checkpoint.ckpt_dir, st, segments, opt_.checkpoint.keep, signal);
  line_head_ = ckpt::reference_to(opt_.checkpoint.ckpt_dir, path);
  return seconds_since(t0);
}

}  // namespace tetra
