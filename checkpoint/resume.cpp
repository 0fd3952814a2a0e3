#include "checkpoint/resume.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace tetra {

std::vector<std::string> changeable() {
  std::vector<std::string> names;
  for_each_compared_table([&](const auto& table) {
    for (const auto& k : table.keys)
      if (*k.resume == settings::Resume::Changeable) names.push_back(k.flag().substr(2));
  });
  return names;
}

std::string changeable_list() {
  std::string list;
  for (const std::string& name : changeable()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

}  // namespace tetra

namespace tetra::ckpt {
namespace {

// Member `key` of section `section` of a recorded configuration; "not recorded" when absent.
json recorded(const RunState& s, const std::string& section, const std::string& key) {
  const json& c = s.config;
  if (c.is_object() && c.contains(section) && c.at(section).contains(key))
    return c.at(section).at(key);
  return "not recorded";
}

}  // namespace

std::string resume_path(const CheckpointConfig& c) {
  if (c.resume == "never") return "";
  if (c.resume != "auto") {
    const std::string problem = verify(c.resume);
    check(problem.empty(), "`checkpoint.resume` ", c.resume, ": ", problem);
    return c.resume;
  }
  if (c.ckpt_dir.empty()) return "";
  std::vector<std::string> warnings;
  const std::string path = find_latest(c.ckpt_dir, &warnings);
  // Checkpoints exist but none verifies: starting over would hide that (and --keep would
  // then prune them), so stop and say why each failed.
  const bool skipped = std::any_of(warnings.begin(), warnings.end(),
                                   [](const std::string& w) { return w.starts_with("skipping "); });
  if (path.empty() && skipped) {
    std::string why;
    for (const std::string& w : warnings) why += (why.empty() ? "" : "; ") + w;
    // Another line's checkpoint may verify: named, since "none verifies" would be untrue.
    const std::vector<std::string> others = verifying_checkpoints(c.ckpt_dir);
    if (others.empty())
      fail("`checkpoint.resume` auto: no checkpoint in '", c.ckpt_dir, "' verifies (", why,
           "); pass `checkpoint.resume` never to start from step 0, keeping them");
    fail("`checkpoint.resume` auto: no checkpoint of the line being trained in '", c.ckpt_dir,
         "' verifies (", why, "); ", others.front(),
         " verifies but is another line's: pass `checkpoint.resume` ", others.front(),
         " to continue from it, or `checkpoint.resume` never to start from step 0, keeping them");
  }
  for (const std::string& w : warnings) std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
  return path;
}

void check_resumable(const RunState& saved, const RunState& now,
                     const std::set<std::string>& allowed, bool min_lr_given,
                     const std::string& path) {
  const ModelConfig was = model_from_json(saved.model, "checkpoint '" + path + "'");
  check(model_to_json(was) == now.model, "checkpoint '", path, "' holds another model (", was.str(),
        "); this run trains ", model_from_json(now.model, "this run").str());
  // What the run continues must be the run that was checkpointed, unless the user says
  // which settings may change (to extend a run, or fine-tune from it).
  std::map<std::string, std::string> changes;  // by --allow-change name
  for_each_compared_table([&](const auto& table) {
    for (const auto& k : table.keys) {
      if (*k.resume == settings::Resume::Free) continue;
      const std::string key = table.name + "." + k.name, name = k.flag().substr(2);
      const json& value = now.config.at(table.name).at(k.name);
      const json there = recorded(saved, table.name, k.name);
      if (there == value || allowed.count(name)) continue;
      if (*k.resume == settings::Resume::Fixed) {
        check(!saved.config.contains(table.name) || !saved.config[table.name].contains(k.name),
              "checkpoint '", path, "' was written with `", key, "` ", there.dump(),
              "; this run has ", value.dump(), ", which a resumed run cannot change");
        continue;
      }
      // A --min-lr left to its default follows --lr: allowing or changing --lr covers it.
      const bool follows_lr = key == "optimizer.min_lr" && !min_lr_given &&
                              (allowed.count("lr") ||
                               recorded(saved, "optimizer", "lr") != now.config["optimizer"]["lr"]);
      if (!follows_lr)
        changes[name] = "`" + key + "` " + there.dump() + " there, " + value.dump() + " here";
    }
  });
  const int64_t steps = now.config.at("optimizer").at("steps").get<int64_t>();
  check(saved.step <= steps, "checkpoint '", path, "' is at step ", saved.step,
        ", past `optimizer.steps` ", steps,
        ": nothing is left to train; pass a larger `optimizer.steps` with "
        "`checkpoint.allow_change` steps, or `checkpoint.resume` never to start over");
  std::string differ, names;
  for (const std::string& name : changeable()) {
    if (!changes.count(name)) continue;
    differ += (differ.empty() ? "" : "; ") + changes[name];
    names += (names.empty() ? "" : ",") + name;
  }
  check(differ.empty(), "checkpoint '", path, "' comes from a run with other settings (", differ,
        "); pass `checkpoint.allow_change` ", names, " to continue it with this run's");
}

void restore(const Reader& r, ZeroParams& params, int tp_rank) {
  for (int u = 0; u < params.size(); ++u) {
    const UnitSpec& l = params.layout(u);
    std::vector<float> w(l.numel), m(l.numel), v(l.numel);
    for (const ParamInfo& p : l.params) {
      const auto whole_w = r.tensor(p.name, Reader::Kind::Param);
      const auto whole_m = r.tensor(p.name, Reader::Kind::AdamM);
      const auto whole_v = r.tensor(p.name, Reader::Kind::AdamV);
      for (int64_t i = 0; i < p.numel(); ++i) {
        const int64_t g = p.global_index(i, tp_rank);
        w[p.offset + i] = whole_w[g];
        m[p.offset + i] = whole_m[g];
        v[p.offset + i] = whole_v[g];
      }
    }
    params.load_state(u, w, m, v);
  }
}

}  // namespace tetra::ckpt
