// tetra lab, run: every lesson once, answered as learners do (a known mistake, then the right
// answer; a wrong answer alone; a hint; "20" on a share question; on the terminal), in English
// and in Chinese. Each is graded as it should be, names the mistake it made, shows the value
// its run measured (read here from the run's metrics, and equal to the formula where tetra's
// formula is exact), and bad input is one error line. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/test_util.hpp"

namespace {

using tetra::json;
using tetra::test::count;
using tetra::test::jsonl_records;
using tetra::test::spawn;
using tetra::test::Spawned;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

using Runs = std::vector<std::vector<json>>;

double last(const std::vector<json>& r, const char* group) {
  return r.back()["comm_bytes"][group].get<double>();
}
double peak(const std::vector<json>& r) {
  double p = 0;
  for (const json& j : r) p = std::max(p, j["peak_memory_bytes"].get<double>());
  return p;
}
double mean_after_first(const std::vector<json>& r, const char* key) {
  double s = 0;
  for (size_t i = 1; i < r.size(); ++i) s += r[i][key].get<double>();
  return s / double(r.size() - 1);
}
double median_after_first(const std::vector<json>& r, const char* key) {
  std::vector<double> v;
  for (size_t i = 1; i < r.size(); ++i) v.push_back(r[i][key].get<double>());
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// A lesson as a learner takes it, and what it must say.
struct Case {
  std::string lesson, answers;  // the flags or the terminal's input (stdin)
  bool zh, right;
  int tries;
  std::string mistake;              // the first wrong answer's, or "-"
  bool exact;                       // the run measures the formula's number exactly
  double (*measured)(const Runs&);  // from the runs' metrics; null: none (no run, or noisy)
};

const Case kCases[] = {
    {"6nd", "--answer 22.3 --answer 67", true, true, 2, "forward-only", true, nullptr},
    {"mfu", "--answer 2 --answer 4/3", false, true, 2, "backward-too", true,
     [](const Runs& r) { return mean_after_first(r[0], "hfu") / mean_after_first(r[0], "mfu"); }},
    {"barrier", "--answer 50 --answer 60", true, false, 2, "mean", false,
     [](const Runs& r) {
       return median_after_first(r[0], "step_ms") - median_after_first(r[1], "step_ms");
     }},
    {"dp", "--answer 172,512", false, false, 1, "values", true,
     [](const Runs& r) { return last(r[0], "dp_cp"); }},
    {"zero", "--answer 3099520", true, true, 1, "-", false,
     [](const Runs& r) { return peak(r[0]); }},
    {"zero-traffic", "--answer 3348864 --answer 5023296", false, true, 2, "zero1", true,
     [](const Runs& r) { return last(r[2], "dp_cp"); }},
    {"tp", "--answer 196608 --answer 248832", true, true, 2, "blocks-only", true,
     [](const Runs& r) { return last(r[0], "tp"); }},
    {"sp", "--answer 62400", false, true, 1, "-", false,
     [](const Runs& r) { return peak(r[1]) - peak(r[0]); }},
    // On the terminal: not a number, not a share, the ratio form, then "20" read as 20 %.
    {"pp", "abc\n150\n25%\n20\n", false, true, 2, "ratio", false,
     [](const Runs& r) { return mean_after_first(r[0], "bubble"); }},
    {"interleaved", "--answer 1/5 --answer 1/9", true, true, 2, "1f1b", false, nullptr},
    {"zero-bubble", "--answer 1/5 --answer 1/13", false, true, 2, "1f1b", false, nullptr},
    {"pp-memory", "--answer 0 --answer 717312", false, true, 2, "same", true,
     [](const Runs& r) { return peak(r[0]) - peak(r[1]); }},
    {"cp", "--answer 8192 --answer 16384", true, true, 2, "forward-only", true,
     [](const Runs& r) { return last(r[0], "cp"); }},
    {"4d", "--answer 181248", false, false, 1, "dp-only", true,
     [](const Runs& r) { return last(r[0], "dp_cp"); }},
    // A wrong answer that is no known mistake gets the hint.
    {"resume", "--answer 3 --answer 6", true, true, 2, "-", true,
     [](const Runs& r) {
       for (size_t i = 1; i < r[0].size(); ++i)
         if (r[0][i]["step"].get<int>() <= r[0][i - 1]["step"].get<int>())
           return r[0][i]["step"].get<double>();
       return -1.0;
     }},
    {"405b", "--answer 11 --answer 81", false, true, 2, "weights-only", true, nullptr},
};

// The lesson's summary line.
struct Summary {
  double answer = 0, formula = 0, measured = 0;
  std::string grade, mistake;
  int tries = 0;
};

Summary summary(const std::string& out, const std::string& lesson) {
  const std::regex line("lab " + lesson +
                        ": answer ([-0-9.e+]+) \\| formula ([-0-9.e+]+) \\| measured ([-0-9.e+]+) "
                        "\\| (right|wrong) \\| tries ([12]) \\| mistake ([-a-z0-9]+)");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, line));
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), m[4], m[6], std::stoi(m[5])};
}

}  // namespace

TEST_CASE("lab: every lesson, with mistakes, hints and second tries, in both languages") {
  TempDir dir;
  for (const Case& c : kCases) {
    CAPTURE(c.lesson);
    const bool terminal = c.answers.rfind("--", 0) != 0;
    std::string input = c.answers;
    // printf's format, in the double quotes of spawn's sh -c '...': "\n" for a newline, "%%".
    for (size_t at = 0; (at = input.find_first_of("\n%", at)) != std::string::npos; at += 2)
      input.replace(at, 1, input[at] == '\n' ? "\\n" : "%%");
    const std::string lab = tetra_bin() + " lab " + c.lesson + " --out " + dir.path.string() +
                            (c.zh ? " --lang zh" : " --lang en");
    const Spawned r =
        spawn(terminal ? "printf \"" + input + "\" | " + lab : lab + " " + c.answers, 300);
    CAPTURE(r.out);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const Summary s = summary(r.out, c.lesson);
    CHECK(s.grade == (c.right ? "right" : "wrong"));
    CHECK(s.tries == c.tries);
    CHECK(s.mistake == c.mistake);
    // The text is the language asked for, the worked answer and the code always shown.
    CHECK(r.out.find(c.zh ? "你的答案" : "your answer") != std::string::npos);
    CHECK(r.out.find(c.zh ? "推导：" : "the working: ") != std::string::npos);
    CHECK(r.out.find(c.zh ? "代码：" : "the code: ") != std::string::npos);
    if (c.mistake != "-")
      CHECK(r.out.find(c.zh ? "常见错误" : "a known mistake") != std::string::npos);
    if (c.lesson == "resume") CHECK(r.out.find("提示") != std::string::npos);
    if (c.lesson == "pp") {
      CHECK(r.out.find("'abc' is not a number") != std::string::npos);
      CHECK(r.out.find("'150' is not a share") != std::string::npos);
      CHECK(r.out.find("(read 20 as 20 %)") != std::string::npos);
      CHECK(s.answer == doctest::Approx(0.2));
    }
    if (c.lesson == "resume") CHECK(r.out.find("逐位相同") != std::string::npos);  // the same loss
    if (c.lesson == "zero-traffic") CHECK(r.out.find("1.500 times ZeRO-1's") != std::string::npos);
    // What the runs measured is their metrics' number, and the formula's where it is exact.
    if (!c.measured) {
      if (c.exact) CHECK(s.measured == doctest::Approx(s.formula));
      continue;
    }
    Runs runs;
    for (int k = 1;
         std::filesystem::exists(dir.path / (c.lesson + "-" + std::to_string(k) + ".jsonl")); ++k)
      runs.push_back(jsonl_records(dir.path / (c.lesson + "-" + std::to_string(k) + ".jsonl")));
    REQUIRE(!runs.empty());
    CHECK(s.measured == doctest::Approx(c.measured(runs)).epsilon(1e-9));
    if (c.exact) CHECK(s.measured == doctest::Approx(s.formula).epsilon(1e-9));
    if (c.lesson == "zero") CHECK(std::abs(s.measured - s.formula) <= 0.05 * s.formula);
  }
}

TEST_CASE("lab: --list in the locale's language, and bad input is one error line and exit 2") {
  const Spawned list = spawn(tetra_bin() + " lab --list", 60);
  CHECK(list.status == 0);
  for (const char* name :
       {" 1. 6nd ", " 4. dp ", " 9. pp ", "11. zero-bubble ", "15. resume ", "16. 405b "})
    CHECK(list.out.find(name) != std::string::npos);
  const Spawned zh =
      spawn("env LC_ALL= LC_MESSAGES= LANG=zh_CN.UTF-8 " + tetra_bin() + " lab --list", 60);
  CHECK(zh.out.find("数据并行与环形全归约") != std::string::npos);
  const Spawned en = spawn("env LC_ALL=C LANG=zh_CN.UTF-8 " + tetra_bin() + " lab --list", 60);
  CHECK(en.out.find("data parallelism and the ring all-reduce") != std::string::npos);
  const std::pair<std::string, std::string> cases[] = {
      {"lab nope --answer 1", "no lesson 'nope'"},
      {"lab 17", "no lesson '17'"},
      {"lab dp --answer twelve", "--answer takes a number (got 'twelve')"},
      {"lab dp --answer 12%%%", "--answer takes a number"},
      {"lab dp --answer 0x10", "--answer takes a number (got '0x10')"},
      {"lab dp --answer \"1 2\"", "--answer takes a number (got '1 2')"},
      {"lab pp --answer 150", "'150' is not a share of a whole"},
      {"lab dp --answer 1 --answer 2 --answer 3", "--answer is given at most twice"},
      {"lab --answer 3", "--answer needs a LESSON"},
      {"lab dp --lang fr", "--lang takes en or zh (got 'fr')"},
      {"lab dp --launcher mpirun", "--launcher must say where the number of ranks"},
      {"lab dp --answer", "--answer needs"},
      {"lab dp </dev/null", "no answer to lesson dp"},  // asked, and the input ends
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    const Spawned r = spawn(tetra_bin() + " " + args, 60);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
