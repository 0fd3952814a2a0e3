// tetra serve's endpoints: the settings a page gives read as tetra plan's flags, the plan, the
// runs' requests bounded, the lessons.
#include "jobs/serve_api.hpp"

#include <algorithm>
#include <cmath>

#include "jobs/lab.hpp"
#include "parallel/schedule.hpp"
#include "plan/machine.hpp"
#include "plan/memory.hpp"
#include "plan/plan_report.hpp"
#include "plot/svg_schedule.hpp"
#include "util/format.hpp"
#include "util/settings.hpp"

namespace tetra::serve {
namespace {

// A request's body, whole: a plan request is a few hundred bytes.
constexpr size_t kMaxBody = 64 * 1024;
// The most boxes the timeline draws (2 m PP V): past that the picture helps nobody.
constexpr int64_t kMaxTimelineBoxes = 20000;
// The ranks of the grid the page is sent.
constexpr size_t kPageRanks = 512;
// Text values of the page's settings are choices: a short word.
constexpr size_t kMaxValueText = 64;

// The sections and settings the page gives; "*": every setting of the section that is a
// number, a switch or a choice.
const std::vector<std::pair<std::string, std::vector<std::string>>> kPageSections = {
    {"run", {"preset"}},
    {"layout", {"*"}},
    {"model", {"*"}},
    {"batch", {"*"}},
    {"optimizer", {"zero", "recompute"}},
    {"device", {"dtype"}}};
// tetra plan's machine, which is not a setting of a run.
const char* const kGpuKey = "plan.gpu";

bool page_section_allows(const std::string& section, const std::string& name) {
  for (const auto& [s, names] : kPageSections)
    if (s == section)
      return std::find(names.begin(), names.end(), "*") != names.end() ||
             std::find(names.begin(), names.end(), name) != names.end();
  return false;
}

// Calls f(key, kind, value) for each setting the page gives, with its value in c.
template <typename F>
void each_page_setting(const TrainConfig& c, F&& f) {
  for_each_section(c, [&](const auto& section, const auto& table) {
    for (const auto& k : table.keys)
      if (k.kind != settings::Kind::Text && page_section_allows(table.name, k.name))
        f(table.name + "." + k.name, k.kind, k.get(section));
  });
}

settings::Kind kind_of(const std::string& key) {
  settings::Kind kind = settings::Kind::Text;
  bool found = false;
  each_page_setting(TrainConfig(), [&](const std::string& k, settings::Kind kd, const json&) {
    if (k == key) kind = kd, found = true;
  });
  if (!found && key != kGpuKey) throw BadRequest("the page sets no setting '" + key + "'");
  return kind;
}

const json& member(const json& j, const char* key) {
  static const json null;
  return j.is_object() && j.contains(key) ? j.at(key) : null;
}

std::string text_of(const json& v, const std::string& what) {
  std::string s;
  if (v.is_string())
    s = v.get<std::string>();
  else if (v.is_number_integer())
    s = std::to_string(v.get<int64_t>());
  else if (v.is_number())
    s = format_number("%.17g", v.get<double>());
  else
    throw BadRequest(what + " takes a number or a word (got " + v.dump() + ")");
  if (s.size() > kMaxValueText) throw BadRequest(what + " is too long");
  return s;
}

// The effective values of the page's settings in c, by section, and the machine.
json page_settings(const TrainConfig& c, const plan::Request& req) {
  json out = json::object();
  each_page_setting(c, [&](const std::string& key, settings::Kind, const json& v) {
    const size_t dot = key.find('.');
    out[key.substr(0, dot)][key.substr(dot + 1)] = v;
  });
  out["plan"]["gpu"] = req.gpu;
  return out;
}

// The timeline of the plan's schedule: tetra plot --schedule's SVG, or why there is none.
json timeline(const plan::Setup& s) {
  const int pp = s.layout().pp, vpp = s.spec.layout.vpp, m = s.run.micro_batches;
  if (pp == 1) return {{"note", "one pipeline stage: no pipeline schedule"}};
  const int64_t boxes = 2 * int64_t(m) * pp * vpp;
  if (boxes > kMaxTimelineBoxes)
    return {{"note", "the schedule has " + commas(double(boxes)) +
                         " forward and backward boxes; the page draws up to " +
                         commas(double(kMaxTimelineBoxes))}};
  return {{"svg", schedule_svg(s.run.schedule, pp, vpp, m, s.run.weight_delay)}};
}

std::vector<std::string> words(const std::vector<std::string>& args) {
  std::vector<std::string> out = {"tetra", "plan"};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

}  // namespace

Reply refusal(const std::string& why, int status) {
  return {status, {{"error", why}}};
}

lab::Lang lang_named(const std::string& lang) {
  if (lang.empty() || lang == "en") return lab::Lang::En;
  if (lang == "zh") return lab::Lang::Zh;
  throw BadRequest("lang takes en or zh (got '" + lang.substr(0, kMaxValueText) + "')");
}

std::vector<std::string> page_setting_keys() {
  std::vector<std::string> keys;
  each_page_setting(TrainConfig(),
                    [&](const std::string& k, settings::Kind, const json&) { keys.push_back(k); });
  keys.push_back(kGpuKey);
  return keys;
}

json parse_body(const std::string& body) {
  if (body.size() > kMaxBody) throw BadRequest("the request's body is over 64 kB", 413);
  json j;
  if (const std::string problem = parse_json(body, j); !problem.empty())
    throw BadRequest("the request's body: " + problem);
  if (!j.is_object()) throw BadRequest("the request's body is not a JSON object");
  return j;
}

std::vector<std::string> plan_arguments(const json& settings) {
  std::vector<std::string> args;
  if (settings.is_null()) return args;
  if (!settings.is_object())
    throw BadRequest("settings takes an object of sections ({\"layout\": {\"tp\": 2}})");
  for (const auto& [section, values] : settings.items()) {
    if (!values.is_object())
      throw BadRequest("settings." + section + " takes an object of settings");
    for (const auto& [name, value] : values.items()) kind_of(section + "." + name);
  }
  // The page's form holds every setting: a layout's schedule, virtual stages, balance and SP
  // are left out where its TP or PP (as given) leaves them no part, as a sweep leaves them out
  // (tetra train refuses them there).
  LayoutConfig sizes;
  sizes.tp = sizes.pp = 2;  // not given: the preset's or the default, which the parse judges
  const json& layout = member(settings, "layout");
  for (auto [name, size] : {std::pair{"tp", &sizes.tp}, {"pp", &sizes.pp}})
    if (layout.is_object() && layout.contains(name) && layout.at(name).is_number_integer())
      *size = int(std::clamp<int64_t>(layout.at(name).get<int64_t>(), 0, 2));
  // In the schema's order, as tetra's own argument lists are.
  for (const std::string& key : page_setting_keys()) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    const json& values = member(settings, section.c_str());
    if (!values.is_object() || !values.contains(name)) continue;
    if (!layout_key_applies(key, sizes)) continue;
    const json& value = values.at(name);
    const std::string flag = settings::flag_of(name);
    if (kind_of(key) == settings::Kind::Switch) {
      if (!value.is_boolean()) throw BadRequest(key + " takes true or false");
      if (value.get<bool>()) args.push_back(flag);
      continue;
    }
    args.push_back(flag + "=" + text_of(value, key));
  }
  return args;
}

Api::Api(const ServeOptions& o, TrainArgs train, PlanArgs plan)
    : o_(o), train_(std::move(train)), plan_(std::move(plan)), lessons_(lab::lessons(train_)) {}

Reply Api::options() const {
  const PlanArgs::Parsed defaults = plan_.parse({});
  json presets = json::array(), choices = json::object();
  for_each_section(defaults.train, [&](const auto&, const auto& table) {
    for (const auto& k : table.keys)
      if (k.kind == settings::Kind::Choice && page_section_allows(table.name, k.name))
        choices[table.name + "." + k.name] = k.choices;
  });
  choices[kGpuKey] = plan::machine_names();
  return {200,
          {{"settings", page_settings(defaults.train, defaults.request)},
           {"keys", page_setting_keys()},
           {"choices", choices},
           {"limits",
            {{"max_ranks", o_.max_ranks},
             {"max_steps", o_.max_steps},
             {"run_timeout_s", o_.job.run_timeout}}}}};
}

Reply Api::plan(const std::string& body) const {
  const json request = parse_body(body);
  const std::vector<std::string> args = plan_arguments(member(request, "settings"));
  PlanArgs::Parsed p;
  try {
    p = plan_.parse(args);
  } catch (const Error& e) {
    throw BadRequest(settings::worded(e.what()));
  }
  json out;
  try {
    const plan::Setup s = plan::make_setup(p.train.run_spec(), p.train.model);
    // As tetra plan prints them: each setting a text names worded as its flag.
    const json plan = plan::plan_json(p.train.run_spec(), p.train.model, p.request);
    const std::string problem = parse_json(settings::worded(plan.dump()), out["plan"]);
    check(problem.empty(), "the plan's JSON, worded: ", problem);
    out["report"] = settings::worded(plan::plan_text(plan));
    // The page draws the first ranks of the grid; the rest of the listing (16,384 ranks are 2
    // MB) stays out of an answer sent on every change.
    json& ranks = out["plan"]["grid"]["ranks"];
    if (ranks.is_array() && ranks.size() > kPageRanks)
      ranks.erase(ranks.begin() + kPageRanks, ranks.end());
    out["timeline"] = timeline(s);
  } catch (const Error& e) {
    throw BadRequest(settings::worded(e.what()));
  }
  out["settings"] = page_settings(p.train, p.request);
  out["command"] = shell_line(words(args));
  return {200, out};
}

RunRequest Api::run_request(const std::string& body) const {
  const json request = parse_body(body);
  const json& steps = member(request, "steps");
  const std::optional<int64_t> n = json_int(steps);
  if (!n || *n < 1 || *n > o_.max_steps)
    throw BadRequest("steps takes a whole number from 1 to " + std::to_string(o_.max_steps) +
                     " (got " + steps.dump() + ")");
  const std::vector<std::string> args = plan_arguments(member(request, "settings"));
  RunRequest r;
  SweepOptions& o = r.options;
  try {
    TrainConfig c = plan_.parse(args).train;
    c.optimizer.steps = *n;
    const int64_t world = int64_t(c.layout.tp) * c.layout.cp * c.layout.pp * c.layout.dp;
    if (world > o_.max_ranks)
      throw BadRequest("a run here takes at most " + std::to_string(o_.max_ranks) +
                       " ranks (tetra serve --max-ranks); this layout has " +
                       commas(double(world)));
    o.train = c;
    o.ranks = int(world);
    o.machine.gpu = "cpu";
    o.job = o_.job;
    // Every run gets the page's model, batch, dtype and recompute where given or set (by a
    // preset) apart from the default, as a lesson does: a setting at its default given beside
    // none it goes with (--rope-factor without llama3 RoPE) would be refused. The layout's own
    // flags, the ZeRO stage, --steps and --metrics are the run's (layout_run.cpp).
    const json values = c, defaults = TrainConfig();
    std::set<std::string> keys;
    for (const std::string& key : page_setting_keys()) {
      const size_t dot = key.find('.');
      const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
      if ((section == "model" || section == "batch" || key == "device.dtype" ||
           key == "optimizer.recompute") &&
          (c.was_given(key) || values[section][name] != defaults[section][name]))
        keys.insert(key);
    }
    o.pass = train_.args(c, keys);
    r.machine = plan::machine_of(o.machine, c.device.dtype);
    r.layout.setup = plan::make_setup(c.run_spec(), c.model, int(world));
    plan_layout(r.layout, o, r.machine);
  } catch (const BadRequest&) {
    throw;
  } catch (const Error& e) {
    throw BadRequest(settings::worded(e.what()));
  }
  // The ranks share this machine's memory: the plan's peak of every rank together may take
  // half of what is free now.
  const double need = r.layout.peak_planned * r.layout.setup.world();
  const double free = plan::host_memory_available();
  if (need > free / 2)
    throw BadRequest("the plan's peak memory over the " + std::to_string(o.ranks) + " ranks is " +
                     byte_size(need) + ", more than half of the " + byte_size(free) +
                     " this machine has free; a smaller model or batch, please");
  r.command = shell_line(train_command(o, train_, r.layout.setup.spec, o.ranks, "run.jsonl"));
  return r;
}

const lab::Lesson& Api::find(const std::string& name) const {
  for (const lab::Lesson& l : lessons_)
    if (l.name == name) return l;
  throw BadRequest("no lesson named '" + name.substr(0, kMaxValueText) + "'", 404);
}

Reply Api::lessons(const std::string& lang) const {
  const lab::Lang lg = lang_named(lang);
  json list = json::array();
  for (const lab::Lesson& l : lessons_)
    list.push_back(
        {{"name", l.name}, {"title", lab::fill(l.title, lg, l.values)}, {"runs", l.runs.size()}});
  return {200, {{"lessons", list}}};
}

Reply Api::lesson(const std::string& name, const std::string& lang) const {
  const lab::Lang lg = lang_named(lang);
  const lab::Lesson& l = find(name);
  json runs = json::array();
  for (const lab::LessonRun& r : l.runs)
    runs.push_back({{"label", lab::fill(r.label, lg, l.values)}, {"ranks", r.ranks}});
  return {200,
          {{"name", l.name},
           {"number", &l - lessons_.data() + 1},
           {"title", lab::fill(l.title, lg, l.values)},
           {"idea", lab::fill(l.idea, lg, l.values)},
           {"question", lab::fill(l.question, lg, l.values)},
           {"share", l.unit == lab::Unit::Share},
           {"exact", l.exact()},
           {"runs", runs}}};
}

Reply Api::answer(const std::string& body) const {
  const json request = parse_body(body);
  const lab::Lang lg = lang_named(
      member(request, "lang").is_string() ? member(request, "lang").get<std::string>() : "");
  const json& name = member(request, "lesson");
  const json& text = member(request, "answer");
  if (!name.is_string() || !text.is_string() || text.get<std::string>().size() > kMaxValueText)
    throw BadRequest("an answer is {\"lesson\": NAME, \"answer\": TEXT, \"lang\": en|zh}");
  const lab::Lesson& l = find(name.get<std::string>());
  double value = 0;
  const Reading reading = read_answer(text.get<std::string>(), l.unit, value);
  json out = {{"reading", reading == Reading::Number      ? "number"
                          : reading == Reading::AsPercent ? "as_percent"
                          : reading == Reading::NotShare  ? "not_share"
                                                          : "not_number"}};
  if (reading != Reading::Number && reading != Reading::AsPercent) return {200, out};
  out["value"] = value;
  out["shown"] = lab::show(l.unit, value, lg);
  out["right"] = l.right(value);
  if (!l.right(value)) {
    if (const lab::Mistake* m = l.diagnose(value))
      out["mistake"] = {{"id", m->id}, {"says", lab::fill(m->says, lg, l.values)}};
    else
      out["hint"] = lab::fill(l.hint, lg, l.values);
  }
  return {200, out};
}

Api::LessonRequest Api::lesson_request(const std::string& body) const {
  const json request = parse_body(body);
  LessonRequest r;
  const json& lang = member(request, "lang");
  r.lang = lang_named(lang.is_string() ? lang.get<std::string>() : "");
  const json& name = member(request, "lesson");
  const json& answers = member(request, "answers");
  if (!name.is_string() || !answers.is_array() || answers.empty() || answers.size() > 2)
    throw BadRequest(
        "a lesson's run is {\"lesson\": NAME, \"answers\": [one or two TEXTs], \"lang\": en|zh}");
  r.lesson = &find(name.get<std::string>());
  for (const json& a : answers) {
    double value = 0;
    const Reading reading = a.is_string() && a.get<std::string>().size() <= kMaxValueText
                                ? read_answer(a.get<std::string>(), r.lesson->unit, value)
                                : Reading::NotNumber;
    if (reading != Reading::Number && reading != Reading::AsPercent)
      throw BadRequest("answers: " + a.dump().substr(0, kMaxValueText) + " is not a number" +
                       (reading == Reading::NotShare ? " between 0 and 100 %" : ""));
    r.answers.push_back(value);
  }
  return r;
}

}  // namespace tetra::serve
