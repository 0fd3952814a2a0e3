#include "jobs/serve_runs.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "jobs/lab.hpp"
#include "train/match.hpp"
#include "util/format.hpp"

namespace tetra::serve {
namespace {

// A metrics file as its run appends to it: each complete new line, once.
class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) {}
  std::vector<json> next() {
    std::vector<json> out;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return out;
    in.seekg(std::streamoff(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t at = 0;
    for (size_t nl; (nl = chunk.find('\n', at)) != std::string::npos; at = nl + 1) {
      json j;
      if (parse_json(chunk.substr(at, nl - at), j).empty() && j.is_object()) out.push_back(j);
    }
    offset_ += at;
    return out;
  }

 private:
  std::string path_;
  size_t offset_ = 0;
};

// run_job's go_on for a run whose records go to the page as "step" events of `phase`.
std::function<bool()> follow(EventStream& events, const std::string& metrics,
                             const std::string& phase) {
  auto tail = std::make_shared<MetricsTail>(metrics);
  return [&events, tail, phase] {
    for (json& record : tail->next()) events.emit("step", {{"phase", phase}, {"record", record}});
    return !events.stopped();
  };
}

std::string percent_off(double value, double reference) {
  return format_number("%.1f %%", 100 * std::abs(value - reference) / std::abs(reference));
}

}  // namespace

void EventStream::emit(const std::string& event, const json& data) {
  {
    std::lock_guard<std::mutex> lock(m_);
    events_.push_back("event: " + event + "\ndata: " + data.dump() + "\n\n");
  }
  cv_.notify_all();
}

bool EventStream::take(std::vector<std::string>& out, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait_for(lock, wait, [&] { return !events_.empty() || finished_; });
  out.insert(out.end(), events_.begin(), events_.end());
  events_.clear();
  return finished_;
}

void EventStream::finish() {
  {
    std::lock_guard<std::mutex> lock(m_);
    finished_ = true;
  }
  cv_.notify_all();
}

std::shared_ptr<EventStream> RunSlot::start(Work work) {
  std::lock_guard<std::mutex> lock(m_);
  if (done_ && !*done_) return nullptr;
  if (worker_.joinable()) worker_.join();
  current_ = std::make_shared<EventStream>();
  done_ = std::make_shared<std::atomic<bool>>(false);
  worker_ = std::thread([work = std::move(work), events = current_, done = done_] {
    try {
      work(*events);
    } catch (const std::exception& e) {
      events->emit("error", {{"error", error_text(e)}});
    }
    events->finish();
    *done = true;
  });
  return current_;
}

std::string RunSlot::state() {
  std::lock_guard<std::mutex> lock(m_);
  if (!done_ || *done_) return "idle";
  return current_->stopped() ? "stopping" : "running";
}

void RunSlot::stop() {
  std::lock_guard<std::mutex> lock(m_);
  if (current_) current_->stop();
  if (worker_.joinable()) worker_.join();
}

void run_layout_work(EventStream& events, RunRequest r, const TrainArgs& train) {
  SweepOptions& o = r.options;
  const RunDir dir("", "tetra_serve");
  o.out = dir.path();
  std::filesystem::create_directories(o.out + "/runs");
  events.emit("start", {{"command", r.command},
                        {"ranks", o.ranks},
                        {"steps", o.train.optimizer.steps},
                        {"layout", r.layout.title},
                        {"plan", run_record(r.layout, false)}});
  LayoutRun ref = reference_run(o, r.machine);
  events.emit("phase", {{"phase", "reference"}, {"ranks", 1}});
  run_layout(ref, o, train, r.machine, {}, 0,
             follow(events, run_metrics_path(ref, o), "reference"));
  events.emit("reference", run_record(ref, true));
  if (!ref.ran()) {
    events.emit("error", {{"error", "the one-rank reference " + ref.status + ": " + ref.error}});
    return;
  }
  events.emit("phase", {{"phase", "layout"}, {"ranks", o.ranks}});
  run_layout(r.layout, o, train, r.machine, ref.losses, layouts_peak(o, ref),
             follow(events, run_metrics_path(r.layout, o), "layout"));
  json result = run_record(r.layout, false);
  result["bounds"] = {{"loss", match_bounds(o.train.device.dtype).loss}};
  events.emit("result", result);
  if (!r.layout.ran())
    events.emit("error",
                {{"error", "the layout's run " + r.layout.status + ": " + r.layout.error}});
}

void run_lesson_work(EventStream& events, Api::LessonRequest r, const JobOptions& job,
                     const TrainArgs& train) {
  const lab::Lesson& l = *r.lesson;
  const lab::Lang lang = r.lang;
  const RunDir dir("", "tetra_serve");
  const auto before = [&](size_t k) {
    events.emit("run", {{"run", k + 1},
                        {"of", l.runs.size()},
                        {"label", lab::fill(l.runs[k].label, lang, l.values)},
                        {"ranks", l.runs[k].ranks}});
  };
  const auto after = [&](size_t k, const JobResult& result) {
    events.emit("ran", {{"run", k + 1}, {"seconds", result.seconds}});
  };
  const lab::Measured m = l.measure(
      run_lesson(l, job, train, dir.path(), before, after, [&] { return !events.stopped(); }));
  lab::Values mv = l.values;
  mv.insert(m.values.begin(), m.values.end());
  json answers = json::array();
  for (double a : r.answers) answers.push_back(lab::show(l.unit, a, lang));
  json notes = json::array();
  for (const lab::Text& note : m.notes) notes.push_back(lab::fill(note, lang, mv));
  json code = json::array();
  for (const lab::CodeRef& c : l.code) code.push_back({{"file", c.file}, {"function", c.function}});
  const double answer = r.answers.back();
  events.emit("result", {{"answers", answers},
                         {"right", l.right(answer)},
                         {"exact", l.exact()},
                         {"off", percent_off(answer, l.formula)},
                         {"formula", lab::show(l.unit, l.formula, lang)},
                         {"measured", lab::show(l.unit, m.value, lang)},
                         {"computed", l.runs.empty()},
                         {"same", std::abs(m.value - l.formula) <= 1e-9 * std::abs(l.formula)},
                         {"measured_off", percent_off(m.value, l.formula)},
                         {"source", lab::fill(m.source, lang, mv)},
                         {"notes", notes},
                         {"ring_bytes", m.ring_bytes ? json(lab::fill(lab::kRingBytes, lang, mv))
                                                     : json(nullptr)},
                         {"working", lab::fill(l.working, lang, mv)},
                         {"code", code}});
}

}  // namespace tetra::serve
