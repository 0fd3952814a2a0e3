// tetra lab's lessons in process, without running them: each formula against one computed
// here from the lesson's sizes; each lesson's texts in English and Chinese with every value
// filled in; the formula's answer graded right and each listed mistake diagnosed as itself;
// every file and function a lesson names exists in the tree; and the answer parser.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "cli/options.hpp"
#include "jobs/lab.hpp"
#include "jobs/lab_lessons.hpp"
#include "model/config.hpp"

namespace {

using tetra::lab::Lang;
using tetra::lab::Lesson;

const std::vector<Lesson>& all() {
  static const std::vector<Lesson> lessons = tetra::lab::lessons(tetra::train_args());
  return lessons;
}

const Lesson& named(const std::string& name) {
  return all()[tetra::lab::find_lesson(all(), name)];
}

tetra::ModelConfig model(int layers, int dim, int heads, int kv, int ffn, int seq) {
  return {.vocab = 256,
          .layers = layers,
          .dim = dim,
          .heads = heads,
          .kv_heads = kv,
          .ffn_dim = ffn,
          .seq_len = seq};
}

bool has_cjk(const std::string& s) {
  for (char c : s)
    if (uint8_t(c) >= 0xE4 && uint8_t(c) <= 0xE9) return true;
  return false;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("lab lessons: the formulas, from each lesson's sizes") {
  // dp: a ring sends 2(N-1)/N of the fp32 parameters, N = 4.
  const double P1 = double(model(2, 64, 4, 4, 128, 16).total_params());
  CHECK(named("dp").formula == doctest::Approx(1.5 * 4 * P1));
  // zero-traffic: ZeRO-3 gathers before the forward and the backward and reduce-scatters.
  const double P2 = double(model(8, 64, 4, 4, 256, 8).total_params());
  CHECK(named("zero-traffic").formula == doctest::Approx(3 * 0.75 * 4 * P2));
  // tp: 4 all-reduces a block, the embedding's and the head's, the loss, 2L+1 norms (SP).
  CHECK(named("tp").formula ==
        doctest::Approx(1.5 * (10 * 64 * 64 * 4.0 + 3 * 64 * 4.0 + 5 * 64 * 4.0)));
  // sp: 3/4 of 2L+1 [T, d] tensors and their norm statistics, T = 64 tokens, d = 64.
  CHECK(named("sp").formula == doctest::Approx(0.75 * 5 * (64 * 64 + 64) * 4.0));
  // cp: K and V of 4 x 16 tokens x 16 (one K/V head) gathered, their gradients scattered.
  CHECK(named("cp").formula == doctest::Approx(4 * 2 * 0.5 * (4 * 16 * 16 * 4.0)));
  // pp and interleaved: (p-1)/(V m + p - 1) with p = 2, m = 4.
  CHECK(named("pp").formula == doctest::Approx(1.0 / 5));
  CHECK(named("interleaved").formula == doctest::Approx(1.0 / 9));
  // zero-bubble: (p-1)/(3m + p - 1) with p = 2, m = 4.
  CHECK(named("zero-bubble").formula == doctest::Approx(1.0 / 13));
  // mfu: (6N + 12 L d S + 2 N_blocks + 4 L d S) / (6N + 12 L d S).
  const tetra::ModelConfig m = model(2, 64, 4, 4, 128, 16);
  const double F = 6.0 * double(m.matmul_params()) + 12.0 * 2 * 64 * 16;
  const double R = 2.0 * double(m.matmul_params() - 256 * 64) + 4.0 * 2 * 64 * 16;
  CHECK(named("mfu").formula == doctest::Approx((F + R) / F));
  CHECK(named("barrier").formula == 100);
  CHECK(named("resume").formula == 6);
  // Llama 3 405B: 6ND on 16,384 GPUs at 400 TFLOP/s, and 16 B a parameter on 80 GB.
  CHECK(named("6nd").formula == doctest::Approx(6 * 405e9 * 15.6e12 / (16384 * 400e12) / 86400));
  CHECK(named("405b").formula == 81);
  // pp-memory: (m - p) micro-batches of stage 0's activations less the p - 1 messages
  // [16, 64] fp32 that 1F1B's stage 0 still holds unproved (parallel/retire.hpp), m 8, p 2.
  const double message = 16 * 64 * 4;
  CHECK(named("pp-memory").formula > 0);
  CHECK(std::fmod(named("pp-memory").formula + message, 6) == 0);
}

TEST_CASE("lab lessons: both languages, every mistake diagnosed, a hint otherwise") {
  REQUIRE(all().size() >= 15);
  std::set<std::string> names;
  for (const Lesson& l : all()) {
    CAPTURE(l.name);
    CHECK(names.insert(l.name).second);
    const auto texts = [&](Lang lang) {
      std::vector<std::string> out;
      for (const tetra::lab::Text* t : {&l.title, &l.idea, &l.question, &l.hint, &l.working})
        out.push_back(tetra::lab::fill(*t, lang, l.values));
      for (const tetra::lab::Mistake& m : l.mistakes)
        out.push_back(tetra::lab::fill(m.says, lang, l.values));
      for (const tetra::lab::LessonRun& r : l.runs)
        out.push_back(tetra::lab::fill(r.label, lang, l.values));
      return out;
    };
    for (const std::string& t : texts(Lang::En)) {
      CHECK(!t.empty());
      CHECK(!has_cjk(t));
    }
    int chinese = 0;
    for (const std::string& t : texts(Lang::Zh)) chinese += has_cjk(t);
    CHECK(chinese >= 5);  // labels like "CP 2" read the same in both
    // The working names the numbers the run's measure adds after the run: only the lesson's
    // own values are checked here (fill throws on a name it lacks, which the runs test).
    CHECK(l.right(l.formula));
    CHECK(l.diagnose(l.formula) == nullptr);
    CHECK(l.mistakes.size() >= 3);
    for (const tetra::lab::Mistake& m : l.mistakes) {
      CAPTURE(m.id);
      CHECK(!l.right(m.value));
      const tetra::lab::Mistake* d = l.diagnose(m.value);
      REQUIRE(d != nullptr);
      CHECK(d->id == m.id);
    }
    // An answer that is no known mistake gets the hint.
    CHECK(l.diagnose(l.formula * 7.31 + 3) == nullptr);
    CHECK(!l.code.empty());
  }
}

TEST_CASE("lab lessons: every file and function a lesson names is in the tree") {
  const std::filesystem::path root = TETRA_SOURCE_DIR;
  for (const Lesson& l : all())
    for (const tetra::lab::CodeRef& c : l.code) {
      CAPTURE(l.name);
      CAPTURE(c.file);
      CAPTURE(c.function);
      REQUIRE(std::filesystem::is_regular_file(root / c.file));
      const std::string text = slurp(root / c.file);
      const size_t colons = c.function.rfind("::");
      const std::string name =
          colons == std::string::npos ? c.function : c.function.substr(colons + 2);
      // Defined as "Class::name(", or inside its class as " name(".
      const bool defined = text.find(" " + c.function + "(") != std::string::npos ||
                           (text.find(" " + name + "(") != std::string::npos &&
                            text.find(c.function.substr(
                                0, colons == std::string::npos ? 0 : colons)) != std::string::npos);
      CHECK(defined);
    }
}

TEST_CASE("lab: answers as learners type them") {
  using tetra::Reading;
  using tetra::lab::Unit;
  const auto read = [](const std::string& text, Unit unit) {
    double v = -1;
    const Reading r = tetra::read_answer(text, unit, v);
    return std::make_pair(r, v);
  };
  for (const char* share : {"0.2", "20%", "1/5", " 20 % ", "2/10", "2e-1"}) {
    CAPTURE(share);
    const auto [r, v] = read(share, Unit::Share);
    CHECK(r == Reading::Number);
    CHECK(v == doctest::Approx(0.2));
  }
  // "20" on a share question is 20 %, not 2000 %; past 100 it is no share.
  CHECK(read("20", Unit::Share) == std::make_pair(Reading::AsPercent, 0.2));
  CHECK(read("150", Unit::Share).first == Reading::NotShare);
  CHECK(read("150%", Unit::Share).first == Reading::NotShare);
  CHECK(read("-0.1", Unit::Share).first == Reading::NotShare);
  CHECK(read("1", Unit::Share) == std::make_pair(Reading::Number, 1.0));
  // On other questions a number is itself.
  CHECK(read("20", Unit::Bytes) == std::make_pair(Reading::Number, 20.0));
  CHECK(read("3,099,520", Unit::Bytes) == std::make_pair(Reading::Number, 3099520.0));
  CHECK(read("3.79e25", Unit::Bytes).second == doctest::Approx(3.79e25));
  CHECK(read("66.9", Unit::Days) == std::make_pair(Reading::Number, 66.9));
  for (const char* bad : {"1 2", "0x10", "inf", "nan", "1,2", "12,34", "1,2345", ",123", "12%%",
                          "1/0", "/5", "twelve", "", "%", "1e", "--1", "1.2.3"}) {
    CAPTURE(bad);
    CHECK(read(bad, Unit::Bytes).first == Reading::NotNumber);
    CHECK(read(bad, Unit::Share).first == Reading::NotNumber);
  }
}

TEST_CASE("lab: the language from --lang, else the locale") {
  using tetra::lab::language;
  // The environment as it was, put back at the end.
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* name : {"LC_ALL", "LC_MESSAGES", "LANG"})
    saved[name] = std::getenv(name) ? std::optional<std::string>(std::getenv(name)) : std::nullopt;
  CHECK(language("zh") == Lang::Zh);
  CHECK(language("en") == Lang::En);
  const auto with = [](const char* all, const char* messages, const char* lang) {
    for (auto [name, v] : {std::pair{"LC_ALL", all}, {"LC_MESSAGES", messages}, {"LANG", lang}})
      v ? setenv(name, v, 1) : unsetenv(name);
    return language("");
  };
  CHECK(with(nullptr, nullptr, "zh_CN.UTF-8") == Lang::Zh);
  CHECK(with(nullptr, "zh_TW.UTF-8", "en_US.UTF-8") == Lang::Zh);
  CHECK(with("C", nullptr, "zh_CN.UTF-8") == Lang::En);  // LC_ALL decides
  CHECK(with("", nullptr, "zh_CN.UTF-8") == Lang::Zh);   // an empty one is unset
  CHECK(with(nullptr, nullptr, nullptr) == Lang::En);
  CHECK(language("en") == Lang::En);
  for (const auto& [name, v] : saved)
    v ? setenv(name.c_str(), v->c_str(), 1) : unsetenv(name.c_str());
}
