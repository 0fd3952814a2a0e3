// The lessons in order, and what they share: the language, texts with values, grading and
// diagnosis, a lesson's run built from tetra train's schema, and readers of its metrics.
#include "jobs/lab_lessons.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "jobs/lab_build.hpp"
#include "util/error.hpp"
#include "util/format.hpp"

namespace tetra::lab {

Lang language(const std::string& flag) {
  if (!flag.empty()) return flag == "zh" ? Lang::Zh : Lang::En;
  for (const char* name : {"LC_ALL", "LC_MESSAGES", "LANG"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::string(v).rfind("zh", 0) == 0 ? Lang::Zh : Lang::En;
  }
  return Lang::En;
}

std::string fill(const Text& t, Lang lang, const Values& values) {
  const std::string& s = lang == Lang::Zh ? t.zh : t.en;
  std::string out;
  for (size_t at = 0; at < s.size();) {
    const size_t open = s.find('{', at);
    if (open == std::string::npos) {
      out += s.substr(at);
      break;
    }
    const size_t close = s.find('}', open);
    check(close != std::string::npos, "a lesson's text has an unclosed '{': ", s.substr(open, 40));
    const std::string name = s.substr(open + 1, close - open - 1);
    const auto v = values.find(name);
    check(v != values.end(), "a lesson's text names {", name, "}, which it has no value for");
    out += s.substr(at, open - at) + v->second;
    at = close + 1;
  }
  return out;
}

bool Lesson::right(double answer) const {
  if (exact()) return answer == formula;
  return std::abs(answer - formula) <= 0.05 * std::abs(formula);
}

const Mistake* Lesson::diagnose(double answer) const {
  if (right(answer)) return nullptr;
  const Mistake* best = nullptr;
  double off = 0;
  for (const Mistake& m : mistakes) {
    const double d = std::abs(answer - m.value);
    const bool near = exact() ? d == 0 : d <= 0.01 * std::abs(m.value);
    if (near && (!best || d < off)) best = &m, off = d;
  }
  return best;
}

std::vector<Lesson> lessons(const TrainArgs& train) {
  // Seed 002's foundations first (the arithmetic of a run, what MFU counts, the barrier),
  // then one dimension at a time, then their composition, failures and the 405B plan.
  return {six_nd(),    mfu_hfu(train),      barrier(train),     dp(train),
          zero(train), zero_traffic(train), tp(train),          sp(train),
          pp(train),   interleaved(train),  zero_bubble(train), pp_memory(train),
          cp(train),   four_d(train),       resume(train),      llama405b()};
}

size_t find_lesson(const std::vector<Lesson>& all, const std::string& which) {
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == which || std::to_string(i + 1) == which) return i;
  std::string names;
  for (const Lesson& l : all) names += (names.empty() ? "" : ", ") + l.name;
  fail("no lesson '", which, "' (the lessons: ", names, "; tetra lab --list describes them)");
}

std::string show(Unit unit, double value, Lang lang) {
  const bool zh = lang == Lang::Zh;
  switch (unit) {
    case Unit::Bytes:
      return commas(value) + " B";
    case Unit::Share:
      return format_number("%.1f %%", 100 * value) + format_number(" (%.4f)", value);
    case Unit::Ratio:
      return format_number(zh ? "%.3f 倍" : "%.3fx", value);
    case Unit::Step:
      return format_number(zh ? "第 %.0f 步" : "step %.0f", value);
    case Unit::Count:
      return commas(value);
    case Unit::Days:
      return format_number(zh ? "%.1f 天" : "%.1f days", value);
    case Unit::Millis:
      return format_number("%.1f ms", value);
  }
  return "";
}

// What the lesson files share.

TrainConfig tiny(int layers, int dim, int heads, int kv_heads, int ffn, int seq, int batch,
                 int steps) {
  TrainConfig c;
  c.model.layers = layers;
  c.model.dim = dim;
  c.model.heads = heads;
  c.model.kv_heads = kv_heads;
  c.model.ffn_dim = ffn;
  c.model.seq_len = seq;
  c.batch.global_batch = batch;
  c.optimizer.steps = steps;
  c.output.peak_tflops = 1;  // no GEMM probe: the lessons' MFU is against this fixed peak
  return c;
}

Setup setup(const TrainArgs& train, const TrainConfig& c, int ranks) {
  json defaults, values;
  to_json(defaults, TrainConfig{});
  to_json(values, c);
  Setup s;
  for (const auto& [section, keys] : values.items())
    for (const auto& [key, value] : keys.items())
      if (defaults[section][key] != value && layout_key_applies(section + "." + key, c.layout))
        s.keys.insert(section + "." + key);  // a layout's setting only where it takes part
  // Through tetra train's own parser: what it would train with, resolved and checked.
  s.config = train.parse(train.args(c, s.keys));
  s.plan = plan::make_setup(s.config.run_spec(), s.config.model, ranks);
  s.ranks = ranks;
  return s;
}

LessonRun run_of(const Setup& s, Text label, bool supervised) {
  return {std::move(label), s.ranks, s.config, s.keys, supervised};
}

double stage0_params(const plan::Setup& s) {
  double n = 0;
  for (const std::vector<int>& chunk : s.stage_chunks(0))
    for (int u : chunk) n += double(s.padded(u));
  return n;
}

Measured group_bytes(const std::vector<json>& records, const std::string& group) {
  Measured m;
  m.source = {"comm_bytes." + group + " in the run's metrics", "运行指标里的 comm_bytes." + group};
  m.ring_bytes = true;
  bool first = true;
  for (const json& r : records) {
    check(r.contains("comm_bytes") && r["comm_bytes"].contains(group),
          "the metrics have no comm_bytes.", group);
    const double b = double(json_int(r["comm_bytes"][group]).value_or(-1));
    check(first || b == m.value, "the steps sent different bytes in ", group);
    m.value = b;
    first = false;
  }
  check(!first, "the run wrote no metrics");
  return m;
}

double most(const std::vector<json>& records, const char* key) {
  double v = 0;
  bool any = false;
  for (const json& r : records)
    if (r.contains(key) && r[key].is_number())
      v = any ? std::max(v, r[key].get<double>()) : r[key].get<double>(), any = true;
  check(any, "the metrics have no ", key);
  return v;
}

double mean_after_first(const std::vector<json>& records, const char* key) {
  double sum = 0;
  int n = 0;
  for (size_t i = records.size() > 1 ? 1 : 0; i < records.size(); ++i) {
    check(records[i].contains(key) && records[i][key].is_number(), "the metrics have no ", key);
    sum += records[i][key].get<double>();
    ++n;
  }
  check(n > 0, "the run wrote no metrics");
  return sum / n;
}

double rate_after_first(const std::vector<json>& records, const char* key) {
  double sum = 0, ms = 0;
  for (size_t i = records.size() > 1 ? 1 : 0; i < records.size(); ++i) {
    const json& r = records[i];
    check(
        r.contains(key) && r[key].is_number() && r.contains("step_ms") && r["step_ms"].is_number(),
        "the metrics have no ", key, " or step_ms");
    sum += r[key].get<double>() * r["step_ms"].get<double>();
    ms += r["step_ms"].get<double>();
  }
  check(ms > 0, "the run wrote no metrics");
  return sum / ms;
}

double median_after_first(const std::vector<json>& records, const char* key) {
  std::vector<double> v;
  for (size_t i = records.size() > 1 ? 1 : 0; i < records.size(); ++i) {
    check(records[i].contains(key) && records[i][key].is_number(), "the metrics have no ", key);
    v.push_back(records[i][key].get<double>());
  }
  check(!v.empty(), "the run wrote no metrics");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Measured peak_drop(const std::vector<json>& more, const std::vector<json>& less, Text note) {
  const double a = most(more, "peak_memory_bytes"), b = most(less, "peak_memory_bytes");
  Measured m;
  m.value = a - b;
  m.source = {"the difference of the two runs' peak_memory_bytes",
              "两次运行的 peak_memory_bytes 之差"};
  m.values = {{"more", commas(a)}, {"less", commas(b)}};
  m.notes = {std::move(note), kAllocatorPeak};
  return m;
}

std::string num(const char* format, double x) {
  return format_number(format, x);
}

std::string pct(double share) {
  return format_number("%.1f %%", 100 * share);
}

const Text kRingBytes{
    "Bytes are counted per call at ring volumes (parallel/comm.hpp: 2(N-1)/N of the tensor for "
    "an all-reduce, (N-1)/N for a reduce-scatter or an all-gather), not observed on the wire: "
    "the count checks which collectives ran, how often and on what sizes.",
    "字节数是按每次调用、以环形算法的通信量记下的（parallel/comm.hpp：全归约记张量的 "
    "2(N-1)/N，归约散射和全收集记 (N-1)/N），不是在网线上观测到的：它核对的是跑了哪些集合"
    "通信、跑了几次、每次多大。"};
const Text kAllocatorPeak{
    "Memory is the backend allocator's real peak (Backend::alloc_stats), the most any rank held.",
    "显存是后端分配器记录的真实峰值（Backend::alloc_stats），取所有 rank 中最大的。"};

}  // namespace tetra::lab
