// tetra lab: present a lesson, take the learner's prediction, run, measure, grade.
#include "jobs/lab.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "jobs/job.hpp"
#include "jobs/lab_lessons.hpp"
#include "plot/plot.hpp"
#include "util/error.hpp"

namespace tetra {

namespace fs = std::filesystem;
namespace {

// Where the runs write: --out, or a temporary directory removed at the end.
class RunDir {
 public:
  explicit RunDir(const std::string& out) {
    if (!out.empty()) {
      std::error_code ec;
      fs::create_directories(out, ec);
      check(!ec && fs::is_directory(out), "cannot make --out directory '", out, "'",
            ec ? ": " + ec.message() : "");
      path_ = out;
      return;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp && *tmp ? tmp : "/tmp") + "/tetra_lab_XXXXXX";
    check(::mkdtemp(name.data()) != nullptr, "cannot create a temporary directory in ",
          tmp && *tmp ? tmp : "/tmp");
    path_ = name;
    temporary_ = true;
  }
  ~RunDir() {
    std::error_code ec;
    if (temporary_) fs::remove_all(path_, ec);
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool temporary_ = false;
};

// Asks on the terminal until the answer is a number; throws at the end of the input.
double ask(const lab::Lesson& l) {
  for (;;) {
    std::printf("your answer: ");
    std::fflush(stdout);
    std::string line;
    check(bool(std::getline(std::cin, line)), "no answer to lesson ", l.name,
          " (the input ended; --answer X answers without a terminal)");
    if (!::isatty(0)) std::printf("%s\n", line.c_str());  // a terminal echoes it
    double value = 0;
    if (parse_answer(line, value)) return value;
    std::printf("'%s' is not a number; a number, please (commas and a trailing %% are fine)\n",
                line.c_str());
  }
}

// Runs the lesson's jobs; the metrics records of each.
std::vector<std::vector<json>> run_lesson(const lab::Lesson& l, const LabOptions& o,
                                          const TrainArgs& train, const std::string& dir) {
  std::vector<std::vector<json>> metrics;
  for (size_t k = 0; k < l.runs.size(); ++k) {
    const lab::LessonRun& run = l.runs[k];
    const std::string base = dir + "/" + l.name + "-" + std::to_string(k + 1);
    const std::string jsonl = base + ".jsonl", log = base + ".log", ckpt = base + ".ckpt";
    std::error_code ec;
    fs::remove(jsonl, ec);  // metrics append; a checkpoint left would be resumed from
    fs::remove_all(ckpt, ec);
    std::vector<std::string> cmd;
    if (run.supervised) cmd = {tetra_program(), "launch", "--restarts", "1", "--quiet", "--"};
    const std::vector<std::string> launcher = launcher_words(o.job.launcher, run.ranks);
    cmd.insert(cmd.end(), launcher.begin(), launcher.end());
    cmd.insert(cmd.end(), {tetra_program(), "train"});
    // The lesson's settings with the run's files, as tetra train reads them.
    std::vector<std::string> flags = run.flags;
    flags.insert(flags.end(), {"--metrics", jsonl});
    if (run.supervised) flags.insert(flags.end(), {"--ckpt-dir", ckpt});
    const TrainConfig c = train.parse(flags);
    const std::vector<std::string> args = train.args(c, c.given);
    cmd.insert(cmd.end(), args.begin(), args.end());
    std::printf("running %s: tetra train on %d rank%s ... ", run.label.c_str(), run.ranks,
                run.ranks > 1 ? "s" : "");
    std::fflush(stdout);
    const JobResult job = run_job(cmd, log, o.job.run_timeout);
    std::printf("%.1f s\n", job.seconds);
    if (job.timed_out || job.exit_code != 0)
      throw JobFailed("the run " + std::string(job.timed_out ? "timed out" : "failed") + " (exit " +
                      std::to_string(job.exit_code) + "): " + log_error(log) + " (log: " + log +
                      ")");
    metrics.push_back(read_metrics(jsonl));
  }
  return metrics;
}

// Text broken into lines of at most `width` characters at spaces (its own line breaks kept),
// each line after the first indented.
std::string wrapped(const std::string& text, size_t width = 88, const std::string& indent = "  ") {
  std::string out, line;
  const auto flush = [&] {
    out += (out.empty() ? "" : "\n" + indent) + line;
    line.clear();
  };
  for (size_t at = 0; at <= text.size();) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    std::istringstream words(text.substr(at, nl - at));
    for (std::string w; words >> w;) {
      if (!line.empty() && line.size() + 1 + w.size() + (out.empty() ? 0 : indent.size()) > width)
        flush();
      line += (line.empty() ? "" : " ") + w;
    }
    flush();
    at = nl + 1;
  }
  return out;
}

bool graded_right(const lab::Lesson& l, double answer) {
  if (l.exact()) return answer == l.formula;
  return std::abs(answer - l.formula) <= 0.05 * std::abs(l.formula);
}

std::string percent_off(double value, double reference) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %%",
                100 * std::abs(value - reference) / std::abs(reference));
  return buf;
}

// One lesson from the question to the grade.
void teach(const lab::Lesson& l, size_t index, size_t count, const LabOptions& o,
           const TrainArgs& train, const std::string& dir) {
  std::printf("\n== lesson %zu of %zu: %s, %s ==\n%s\n\n%s\n", index + 1, count, l.name.c_str(),
              l.title.c_str(), l.idea.c_str(), l.question.c_str());
  double answer = o.answer_value;
  if (o.answer.empty())
    answer = ask(l);
  else
    std::printf("your answer: %s\n", o.answer.c_str());
  lab::Measured m;
  try {
    m = l.measure(run_lesson(l, o, train, dir));
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {  // a run that went wrong is not bad input
    throw JobFailed(e.what());
  }
  const bool right = graded_right(l, answer);
  std::printf("  your answer   %s\n", lab::show(l.unit, answer).c_str());
  std::printf("  the formula   %s\n", lab::show(l.unit, l.formula).c_str());
  std::printf("  measured      %s   (%s)\n", lab::show(l.unit, m.value).c_str(), m.source.c_str());
  if (right)
    std::printf("right: %s\n", l.exact() ? "exactly the formula's answer"
                                         : ("within 5 % of the formula's answer (" +
                                            percent_off(answer, l.formula) + " off)")
                                               .c_str());
  else
    std::printf("wrong: %s\n%s\n",
                l.exact() ? "the formula's answer is exact"
                          : (percent_off(answer, l.formula) +
                             " off the formula's answer, and within 5 % counts")
                                .c_str(),
                wrapped("the working: " + l.working).c_str());
  if (m.value == l.formula)
    std::printf("The run measured exactly what the formula says.\n");
  else
    std::printf("The run measured %s from the formula's answer.\n",
                percent_off(m.value, l.formula).c_str());
  if (!m.note.empty()) std::printf("%s\n", wrapped(m.note, 88, "").c_str());
  // One line for scripts and tests.
  std::printf("lab %s: answer %.10g | formula %.10g | measured %.10g | %s\n", l.name.c_str(),
              answer, l.formula, m.value, right ? "right" : "wrong");
  std::fflush(stdout);
}

}  // namespace

bool parse_answer(const std::string& text, double& value) {
  std::string s;
  for (char c : text)
    if (c != ',' && c != ' ' && c != '\t' && c != '\r') s += c;
  const bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  value = percent ? v / 100 : v;
  return true;
}

int run_lab(const LabOptions& o, const TrainArgs& train) {
  try {
    const std::vector<lab::Lesson> all = lab::lessons(train);
    if (o.list) {
      for (size_t i = 0; i < all.size(); ++i)
        std::printf("%zu. %-7s %s\n", i + 1, all[i].name.c_str(), all[i].title.c_str());
      return 0;
    }
    const RunDir dir(o.out);
    if (!o.lesson.empty()) {
      const size_t i = lab::find_lesson(all, o.lesson);
      teach(all[i], i, all.size(), o, train, dir.path());
    } else {
      for (size_t i = 0; i < all.size(); ++i) teach(all[i], i, all.size(), o, train, dir.path());
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\ntetra: error: %s\n", error_text(e).c_str());
    return exit_status_of(e);
  }
  return 0;
}

}  // namespace tetra
