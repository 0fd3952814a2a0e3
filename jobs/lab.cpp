// tetra lab: present a lesson, take the learner's prediction (a second try after a diagnosis
// or a hint), run, measure, grade, and show the working and the code.
#include "jobs/lab.hpp"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "jobs/job.hpp"
#include "jobs/lab_exercise.hpp"
#include "jobs/lab_lessons.hpp"
#include "plot/plot.hpp"
#include "util/error.hpp"
#include "util/output_dir.hpp"

namespace tetra {

namespace fs = std::filesystem;
using lab::Lang;
using lab::Text;

namespace {

// The lab's own words, in both languages; {x} as in the lessons' texts.
struct Words {
  Text lesson{"== lesson {i} of {n}: {name}, {title} ==",
              "== 第 {i} 课（共 {n} 课）：{name}，{title} =="};
  Text your_answer{"your answer: ", "你的答案："};
  Text not_number{
      "'{text}' is not a number; a number, please (3,099,520 or 3.1e6; a share as 0.2, 20% or 1/5)",
      "“{text}”不是数字；请输入一个数（3,099,520 或 3.1e6；比例可写 0.2、20% 或 1/5）"};
  Text not_share{"'{text}' is not a share of a whole: between 0 and 1, or 0 % and 100 %",
                 "“{text}”不是一个占比：应在 0 到 1 之间，或 0 % 到 100 %"};
  Text as_percent{"(read {text} as {text} %)", "（把 {text} 读作 {text} %）"};
  Text no_answer{
      "no answer to lesson {name} (the input ended; --answer X answers without a terminal)",
      "第 {name} 课没有答案（输入已结束；不用终端时可用 --answer X 作答）"};
  Text off{"{off} off the formula's answer", "与公式的答案相差 {off}"};
  Text mistake{"wrong, and a known mistake: {says}", "不对，这是一个常见错误：{says}"};
  Text hint{"not yet. A hint: {hint}", "还不对。提示：{hint}"};
  Text again{"try once more.", "再试一次。"};
  Text no_second{"(one --answer given: no second try; --answer X --answer Y gives one)",
                 "（只给了一个 --answer，没有第二次机会；--answer X --answer Y 可以给两次）"};
  Text running{"running {label}: tetra train on {ranks} rank(s) ... ",
               "运行 {label}：tetra train，{ranks} 个 rank …… "};
  Text seconds{"{s} s", "{s} 秒"};
  Text computed{"computed, no run: {source}", "直接计算，不需要运行：{source}"};
  Text row_answer{"  your answer   ", "  你的答案     "};
  Text row_second{"  second answer ", "  第二次答案   "};
  Text row_formula{"  the formula   ", "  公式         "};
  Text row_measured{"  measured      ", "  测量值       "};
  Text row_computed{"  tetra plan    ", "  tetra plan   "};
  Text right{"right{try}: within 5 % of the formula's answer ({off} off)",
             "答对了{try}：与公式的答案相差 {off}，在 5 % 之内"};
  Text right_exact{"right{try}: exactly the formula's answer", "答对了{try}：与公式的答案完全一致"};
  Text second_try{" on the second try", "（第二次）"};
  Text wrong{"wrong: the formula's answer is {formula}", "答错了：公式的答案是 {formula}"};
  Text same{"The run measured exactly what the formula says.", "运行测得的数与公式完全一致。"};
  Text differs{"The run measured {off} from the formula's answer.",
               "运行测得的数与公式相差 {off}。"};
  Text working{"the working: {working}", "推导：{working}"};
  Text code{"the code: {code}", "代码：{code}"};
};
const Words kWords;

// The files a lesson's run k (from 1) writes in the run directory: its metrics, its log, and
// a supervised run's checkpoint directory.
std::string run_base(const lab::Lesson& l, size_t k) {
  return l.name + "-" + std::to_string(k);
}

// --out, before the first run: new, empty, or an earlier lab's (util/output_dir.hpp), with
// every file the lessons' runs will write there checked and the directory marked as the lab's.
void claim_out(const std::string& out, const std::vector<const lab::Lesson*>& lessons) {
  OutputDir d{.dir = out, .command = "lab", .files = {}, .dirs = {}};
  for (const lab::Lesson* l : lessons)
    for (size_t k = 1; k <= l->runs.size(); ++k) {
      d.files.push_back(run_base(*l, k) + ".jsonl");
      d.files.push_back(run_base(*l, k) + ".log");
      if (l->runs[k - 1].supervised) d.dirs.push_back(run_base(*l, k) + ".ckpt");
    }
  const std::string problem = output_dir_problem(d, "--out");
  check(problem.empty(), problem);
  const std::string unclaimed = claim_output_dir(d);
  check(unclaimed.empty(), unclaimed);
}

// Text broken into lines of at most `width` columns (its own line breaks kept), each line
// after the first indented. Lines break at spaces, and between two Chinese characters (two
// columns wide, three bytes of UTF-8 each).
std::string wrapped(const std::string& text, size_t width = 88, const std::string& indent = "  ") {
  const auto wide = [](char c) { return uint8_t(c) >= 0xE0; };
  const auto columns = [&](const std::string& s) {
    size_t n = 0;
    for (char c : s)
      if ((c & 0xC0) != 0x80) n += wide(c) ? 2 : 1;
    return n;
  };
  std::string out, line;
  size_t used = 0;
  const auto flush = [&] {
    out += (out.empty() ? "" : "\n" + indent) + line;
    line.clear();
    used = 0;
  };
  for (size_t at = 0; at <= text.size();) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    // A line's own indent is kept (the lessons' tables).
    const size_t lead = std::min(text.find_first_not_of(' ', at), nl) - at;
    line = std::string(lead, ' '), used = lead;
    std::istringstream words(text.substr(at, nl - at));
    for (std::string w; words >> w;) {
      // The word's pieces: each wide character alone, the runs of others together; an opening
      // bracket stays with what follows it, closing punctuation with what precedes it.
      const auto next = [&](size_t i) {
        size_t j = i + 1;
        while (j < w.size() && (w[j] & 0xC0) == 0x80) ++j;
        if (!wide(w[i]))
          while (j < w.size() && !wide(w[j])) ++j;
        return j;
      };
      const auto is = [&](size_t i, size_t j, const char* set) {
        return wide(w[i]) && std::string(set).find(w.substr(i, j - i)) != std::string::npos;
      };
      for (size_t i = 0, k = 0; i < w.size(); ++k) {
        size_t j = next(i);
        while (j < w.size() && is(i, j, "（《「“") && next(j) - i < 40) j = next(j);
        while (j < w.size() && is(j, next(j), "。，、；：！？）》」”")) j = next(j);
        const std::string piece = w.substr(i, j - i);
        const bool space = k == 0 && used > lead;
        const size_t room = width - (out.empty() ? 0 : indent.size());
        if (used > lead && used + space + columns(piece) > room) {
          flush();  // an indented row goes on two columns further in
          const size_t in = lead > 0 ? lead + 2 : 0;
          line = std::string(in, ' ') + piece, used = in + columns(piece);
        } else {
          line += (space ? " " : "") + piece, used += space + columns(piece);
        }
        i = j;
      }
    }
    flush();
    at = nl + 1;
  }
  return out;
}

// One line of the lab's words, printed.
void say(const Text& t, Lang lang, const lab::Values& v = {}) {
  std::printf("%s\n", wrapped(lab::fill(t, lang, v), 88, "").c_str());
}

std::string percent_off(double value, double reference) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %%",
                100 * std::abs(value - reference) / std::abs(reference));
  return buf;
}

// One try's answer: the next --answer, or asked on the terminal until it reads; nullopt when
// the answers given ran out. Throws at the end of the input.
std::optional<double> next_answer(const lab::Lesson& l, const LabOptions& o, size_t attempt,
                                  Lang lang) {
  const bool scripted = !o.answers.empty();
  if (scripted && attempt >= o.answers.size()) return std::nullopt;
  for (;;) {
    std::printf("%s", lab::fill(kWords.your_answer, lang, {}).c_str());
    std::string line;
    if (scripted) {
      line = o.answers[attempt];
    } else {
      std::fflush(stdout);
      const bool read = bool(std::getline(std::cin, line));
      InterruptScope::check("while waiting for an answer");
      check(read, lab::fill(kWords.no_answer, Lang::En, {{"name", l.name}}));
    }
    if (scripted || !::isatty(0)) std::printf("%s\n", line.c_str());  // a terminal echoes it
    double value = 0;
    const Reading r = read_answer(line, l.unit, value);
    const lab::Values v{{"text", line}};
    if (r == Reading::AsPercent) say(kWords.as_percent, lang, v);
    if (r == Reading::Number || r == Reading::AsPercent) return value;
    const Text& why = r == Reading::NotShare ? kWords.not_share : kWords.not_number;
    check(!scripted, "--answer: ", lab::fill(why, Lang::En, v));
    say(why, lang, v);
  }
}

// One lesson from the question to the grade.
void teach(const lab::Lesson& l, size_t index, size_t count, const LabOptions& o,
           const TrainArgs& train, const std::string& dir, Lang lang) {
  InterruptScope::check();  // between lessons: a signal after the last job is not lost
  const lab::Values& v = l.values;
  const std::string title = lab::fill(l.title, lang, v);
  std::printf("\n");
  say(kWords.lesson, lang,
      {{"i", std::to_string(index + 1)},
       {"n", std::to_string(count)},
       {"name", l.name},
       {"title", title}});
  std::printf("%s\n\n", wrapped(lab::fill(l.idea, lang, v), 88, "").c_str());
  say(l.question, lang, v);
  const std::string formula = lab::show(l.unit, l.formula, lang);
  // Up to two tries: a wrong first answer gets its mistake named, or a hint.
  std::vector<double> tries;
  std::string mistake = "-";
  for (size_t attempt = 0; attempt < 2; ++attempt) {
    const std::optional<double> a = next_answer(l, o, attempt, lang);
    if (!a) break;
    tries.push_back(*a);
    if (l.right(*a)) break;
    const lab::Mistake* m = l.diagnose(*a);
    if (m) mistake = m->id;
    if (attempt == 0) {
      const Text& t = m ? kWords.mistake : kWords.hint;
      say(t, lang,
          {{"says", m ? lab::fill(m->says, lang, v) : ""}, {"hint", lab::fill(l.hint, lang, v)}});
      if (o.answers.size() == 1) {
        say(kWords.no_second, lang);
        break;
      }
      say(kWords.again, lang);
    } else if (m) {
      say(kWords.mistake, lang, {{"says", lab::fill(m->says, lang, v)}});
    }
  }
  const double answer = tries.back();
  lab::Measured m;
  try {
    const auto before = [&](size_t k) {
      std::printf("%s", lab::fill(kWords.running, lang,
                                  {{"label", lab::fill(l.runs[k].label, lang, l.values)},
                                   {"ranks", std::to_string(l.runs[k].ranks)}})
                            .c_str());
      std::fflush(stdout);
    };
    const auto after = [&](size_t, const JobResult& job) {
      char s[32];
      std::snprintf(s, sizeof s, "%.1f", job.seconds);
      say(kWords.seconds, lang, {{"s", s}});
    };
    m = l.measure(run_lesson(l, o.job, train, dir, before, after));
  } catch (const Interrupted&) {
    throw;
  } catch (const Error& e) {  // a run that went wrong is not bad input
    throw JobFailed(e.what());
  }
  lab::Values mv = v;
  mv.insert(m.values.begin(), m.values.end());
  const std::string source = lab::fill(m.source, lang, mv);
  if (l.runs.empty()) say(kWords.computed, lang, {{"source", source}});
  for (size_t t = 0; t < tries.size(); ++t)
    std::printf("%s%s\n",
                lab::fill(t == 0 ? kWords.row_answer : kWords.row_second, lang, {}).c_str(),
                lab::show(l.unit, tries[t], lang).c_str());
  std::printf("%s%s\n", lab::fill(kWords.row_formula, lang, {}).c_str(), formula.c_str());
  std::printf(
      "%s%s%s\n",
      lab::fill(l.runs.empty() ? kWords.row_computed : kWords.row_measured, lang, {}).c_str(),
      lab::show(l.unit, m.value, lang).c_str(),
      l.runs.empty() ? "" : ("   (" + source + ")").c_str());
  const bool right = l.right(answer);
  const lab::Values g{{"off", percent_off(answer, l.formula)},
                      {"formula", formula},
                      {"try", tries.size() > 1 ? lab::fill(kWords.second_try, lang, {}) : ""}};
  if (right)
    say(l.exact() ? kWords.right_exact : kWords.right, lang, g);
  else
    say(kWords.wrong, lang, g);
  if (!l.runs.empty()) {
    if (std::abs(m.value - l.formula) <= 1e-9 * std::abs(l.formula))
      say(kWords.same, lang);
    else
      say(kWords.differs, lang, {{"off", percent_off(m.value, l.formula)}});
  }
  for (const Text& note : m.notes) say(note, lang, mv);
  if (m.ring_bytes) say(lab::kRingBytes, lang);
  std::printf("%s\n", wrapped(lab::fill(kWords.working, lang,
                                        {{"working", lab::fill(l.working, lang, mv)}}))
                          .c_str());
  // "file: f, g; file2: h", the functions of one file together.
  std::string code;
  for (size_t i = 0; i < l.code.size(); ++i) {
    const bool same = i > 0 && l.code[i - 1].file == l.code[i].file;
    code += (same ? ", " : (i > 0 ? "; " : "") + l.code[i].file + ": ") + l.code[i].function;
  }
  std::printf("%s\n", wrapped(lab::fill(kWords.code, lang, {{"code", code}})).c_str());
  // One line for scripts and tests.
  std::printf(
      "lab %s: answer %.10g | formula %.10g | measured %.10g | %s | tries %zu | mistake %s\n",
      l.name.c_str(), answer, l.formula, m.value, right ? "right" : "wrong", tries.size(),
      mistake.c_str());
  std::fflush(stdout);
}

// Digits with commas only between groups of three, a decimal point and an exponent, into
// `clean` without the commas.
bool plain_number(const std::string& s, std::string& clean) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
  int group = 0, whole = 0;
  bool grouped = false;
  for (; i < s.size() && (std::isdigit(uint8_t(s[i])) || s[i] == ','); ++i) {
    if (s[i] == ',') {
      if (grouped ? group != 3 : (group < 1 || group > 3)) return false;
      grouped = true;
      group = 0;
      continue;
    }
    clean += s[i];
    ++group, ++whole;
  }
  if (grouped && group != 3) return false;
  int fraction = 0;
  if (i < s.size() && s[i] == '.')
    for (clean += s[i++]; i < s.size() && std::isdigit(uint8_t(s[i])); ++i)
      clean += s[i], ++fraction;
  if (whole + fraction == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
    int digits = 0;
    for (; i < s.size() && std::isdigit(uint8_t(s[i])); ++i) clean += s[i], ++digits;
    if (digits == 0) return false;
  }
  return i == s.size();
}

bool finite_number(const std::string& s, double& value) {
  std::string clean;
  if (!plain_number(s, clean)) return false;
  value = std::strtod(clean.c_str(), nullptr);
  return std::isfinite(value);
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::vector<lab::RunOutput> run_lesson(const lab::Lesson& l, const JobOptions& job_options,
                                       const TrainArgs& train, const std::string& dir,
                                       const std::function<void(size_t)>& before,
                                       const std::function<void(size_t, const JobResult&)>& after,
                                       const std::function<bool()>& go_on) {
  std::vector<lab::RunOutput> out;
  for (size_t k = 0; k < l.runs.size(); ++k) {
    const lab::LessonRun& run = l.runs[k];
    const std::string base = dir + "/" + run_base(l, k + 1);
    const std::string jsonl = base + ".jsonl", log = base + ".log", ckpt = base + ".ckpt";
    // An earlier lab's, in a directory claim_out checked: metrics append, and a checkpoint
    // left would be resumed from.
    std::error_code ec;
    fs::remove(jsonl, ec);
    if (run.supervised) fs::remove_all(ckpt, ec);
    std::vector<std::string> cmd;
    if (run.supervised) cmd = {tetra_program(), "launch", "--restarts", "1", "--quiet", "--"};
    const std::vector<std::string> launcher = launcher_words(job_options.launcher, run.ranks);
    cmd.insert(cmd.end(), launcher.begin(), launcher.end());
    cmd.insert(cmd.end(), {tetra_program(), "train"});
    // The lesson's settings with the run's files, as the schema spells them.
    TrainConfig c = run.config;
    std::set<std::string> keys = run.keys;
    c.output.metrics = jsonl;
    keys.insert("output.metrics");
    if (run.supervised) c.checkpoint.ckpt_dir = ckpt, keys.insert("checkpoint.ckpt_dir");
    const std::vector<std::string> args = train.args(c, keys);
    cmd.insert(cmd.end(), args.begin(), args.end());
    if (before) before(k);
    const JobResult job = run_job(cmd, log, job_options.run_timeout, go_on);
    if (after) after(k, job);
    if (job.stopped) throw Interrupted("the lesson's run was stopped");
    if (job.timed_out || job.exit_code != 0)
      throw JobFailed("the run " + std::string(job.timed_out ? "" : "failed: ") +
                      job_failure(job, log, job_options.run_timeout) + " (log: " + log + ")");
    out.push_back({read_metrics(jsonl), log});
  }
  return out;
}

bool parse_answer(const std::string& text, double& value, bool* percent) {
  std::string s = trimmed(text);
  const bool pc = !s.empty() && s.back() == '%';
  if (pc) s = trimmed(s.substr(0, s.size() - 1));
  double v = 0;
  const size_t slash = s.find('/');
  if (slash != std::string::npos) {
    double num = 0, den = 0;
    if (!finite_number(trimmed(s.substr(0, slash)), num) ||
        !finite_number(trimmed(s.substr(slash + 1)), den) || den == 0)
      return false;
    v = num / den;
  } else if (!finite_number(s, v)) {
    return false;
  }
  value = pc ? v / 100 : v;
  if (percent) *percent = pc;
  return true;
}

Reading read_answer(const std::string& text, lab::Unit unit, double& value) {
  bool percent = false;
  if (!parse_answer(text, value, &percent)) return Reading::NotNumber;
  if (unit != lab::Unit::Share) return Reading::Number;
  if (!percent && value > 1 && value <= 100) {
    value /= 100;
    return Reading::AsPercent;
  }
  return value >= 0 && value <= 1 ? Reading::Number : Reading::NotShare;
}

int run_lab(const LabOptions& o, const TrainArgs& train) {
  try {
    const InterruptScope interrupts;
    if (!o.exercise.empty()) return lab::make_exercise(o.exercise, o.dir);
    if (o.check) return lab::check_exercise(o.dir, o.job);
    const Lang lang = lab::language(o.lang);
    const std::vector<lab::Lesson> all = lab::lessons(train);
    if (o.list) {
      for (size_t i = 0; i < all.size(); ++i)
        std::printf("%2zu. %-12s %s\n", i + 1, all[i].name.c_str(),
                    lab::fill(all[i].title, lang, all[i].values).c_str());
      return 0;
    }
    std::vector<size_t> chosen;
    if (!o.lesson.empty())
      chosen = {lab::find_lesson(all, o.lesson)};
    else
      for (size_t i = 0; i < all.size(); ++i) chosen.push_back(i);
    if (!o.out.empty()) {
      std::vector<const lab::Lesson*> taught;
      for (size_t i : chosen) taught.push_back(&all[i]);
      claim_out(o.out, taught);
    }
    RunDir dir(o.out, "tetra_lab");
    try {
      for (size_t i : chosen) teach(all[i], i, all.size(), o, train, dir.path(), lang);
    } catch (const JobFailed&) {
      dir.keep();
      throw;
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "\ntetra: error: %s\n", settings::worded(error_text(e)).c_str());
    return exit_status_of(e);
  }
  return 0;
}

}  // namespace tetra
