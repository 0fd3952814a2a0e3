#include "cli/plan_command.hpp"

#include "checkpoint/hf_io.hpp"
#include "checkpoint/hf_model.hpp"
#include "cli/apply_preset.hpp"
#include "plan/compare.hpp"
#include "plan/plan_json.hpp"
#include "plan/plan_report.hpp"
#include "plot/svg.hpp"
#include "plot/svg_schedule.hpp"
#include "util/error.hpp"

namespace tetra {

namespace {

// The model tetra plan plans: --init-from's shape, as tetra train would train it, else the
// flags'.
ModelConfig planned_model(const TrainConfig& c) {
  const std::string& from = c.model.init_from;
  return from.empty() ? c.model : config_from_model(HfModel(from), c.model, c.given);
}

// The report of `c` on the machine of `request` (at c's --peak-tflops, tetra train's flag).
std::string report(const TrainConfig& c, plan::Request request) {
  request.peak_tflops = c.output.peak_tflops;
  return plan::plan_report(c.run_spec(), planned_model(c), request);
}

// The configuration `c` would have without its setting `dropped`: its other given settings
// on the defaults, the preset and what follows from them, as the command line is read.
TrainConfig without(const TrainConfig& c, const std::string& dropped) {
  const json values = c;
  json v = TrainConfig();
  for (const std::string& key : c.given) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (key != dropped && values.contains(section) && values[section].contains(name))
      v[section][name] = values[section][name];
  }
  TrainConfig out;
  from_json(v, out);
  out.given = c.given;
  out.given.erase(dropped);
  if (!out.run.preset.empty()) cli::apply_preset(out, nullptr);
  if (out.layout.dp == 0) out.layout.dp = 1;  // as tetra plan takes --dp
  resolve(out);
  return out;
}

// The settings given that leave the report as it is without them, found by planning without
// each: one line, so that no flag given is dropped without a word.
std::string unplanned(const TrainConfig& c, const plan::Request& request, const std::string& text) {
  const json values = c;
  std::string names;
  for (const std::string& key : c.given) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (!values.contains(section) || !values[section].contains(name)) continue;  // plan's own
    try {
      if (report(without(c, key), request) != text) continue;
    } catch (const Error&) {  // no run without it (--ckpt-every without --ckpt-dir): it counts
      continue;
    }
    names += (names.empty() ? "" : ", ") + settings::flag_of(name);
  }
  return names.empty()
             ? ""
             : "given, and no part of a plan (they change no memory, traffic or time): " + names +
                   "\n";
}

}  // namespace

PlanOutput plan_output(const PlanOptions& opt, bool write_files) {
  PlanOutput out;
  const ModelConfig model = planned_model(opt.train);
  if (!opt.compare.empty()) {
    const plan::Setup s = plan::make_setup(opt.train.run_spec(), model);
    const plan::Comparison c = plan::compare_metrics(s, opt.compare);
    out.text = c.table + (c.match ? "plan matches " : "plan does NOT match ") + opt.compare + "\n";
    out.status = c.match ? 0 : 1;
  } else {
    const json plan = plan::plan_json(opt.train.run_spec(), model, opt.request);
    if (opt.json) {
      out.text = plan.dump() + "\n";
    } else {
      out.text = plan::plan_text(plan);
      out.text += unplanned(opt.train, opt.request, out.text);
    }
  }
  // --draw: the planned schedule simulated and drawn, as tetra plot --schedule draws it.
  if (!opt.draw.empty() && write_files) {
    const plan::Setup s = plan::make_setup(opt.train.run_spec(), model);
    write_svg(opt.draw, schedule_svg(s.run.schedule, s.layout().pp, opt.train.layout.vpp,
                                     s.run.micro_batches, s.run.weight_delay));
  }
  return out;
}

}  // namespace tetra
