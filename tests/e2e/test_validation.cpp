// Validation: --val-split F holds out the last F of the data's tokens (--val-data names
// another source), --eval-every N evaluates the same --eval-batches global batches of them,
// and the loss shows in the step line, the metrics (val_loss) and the summary.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "../support/tiny_model.hpp"
#include "cli/options.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace tetra;
using tetra::test::count;
using tetra::test::slurp;
using tetra::test::spawn;
using tetra::test::TempDir;
using tetra::test::tetra_bin;

namespace {

const std::string kTiny = " train" + tetra::test::tiny_model_flags();

// A text whose sentences repeat: a held-out part that training can learn to predict.
std::string write_corpus(const std::string& path) {
  std::ofstream f(path);
  const char* words[] = {"red", "green", "blue", "fox", "dog", "cat", "runs", "sleeps"};
  for (int i = 0; i < 600; ++i)
    f << "the " << words[i % 8] << " " << words[(i * 3 + 1) % 8] << " " << words[(i + 5) % 8]
      << ". ";
  return path;
}

}  // namespace

TEST_CASE("validation: the loss is in the step line, the metrics and the summary") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "corpus.txt"), metrics = tmp / "val.jsonl";
  const auto r = spawn(tetra_bin() + kTiny + "--steps 4 --data " + corpus +
                           " --val-split 0.2 --eval-every 2 --metrics " + metrics,
                       60);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "| val ") == 2);  // after steps 1 and 3
  CHECK(count(r.out, "validation loss") == 1);
  std::istringstream lines(slurp(metrics));
  std::vector<json> records;
  for (std::string line; std::getline(lines, line);) {
    json v;
    REQUIRE(parse_json(line, v) == "");
    records.push_back(v);
  }
  REQUIRE(records.size() == 4);
  CHECK(!records[0].contains("val_loss"));
  CHECK(records[1]["val_loss"].get<double>() > 0);
  CHECK(!records[2].contains("val_loss"));
  CHECK(records[3]["val_loss"].get<double>() > 0);
}

TEST_CASE("validation: a bf16 pipeline evaluates, sending what its peer receives") {
  // The command of [14/20]: evaluation once sent fp32 activations to a stage that receives
  // bf16 ones, and the run died at its first evaluation.
  const auto r = spawn(tetra::test::mpirun(2) + tetra_bin() +
                           " train --pp 2 --dtype bf16 --val-split 0.25 --data " TETRA_SOURCE_DIR
                           "/README.md --eval-every 1 --steps 3 --layers 2 --dim 32 --heads 2"
                           " --kv-heads 2 --ffn-dim 64 --seq-len 16 --global-batch 4"
                           " --peak-tflops 1",
                       90);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(count(r.out, "| val ") == 3);
  CHECK(count(r.out, "validation loss") == 1);
}

TEST_CASE("validation: training lowers the loss on held-out text, the same sequences each time") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "corpus.txt");
  TrainConfig o = parse_train_options(
      {"--layers",  "2",    "--dim",         "32", "--heads",        "4",    "--kv-heads",  "2",
       "--ffn-dim", "64",   "--seq-len",     "16", "--global-batch", "4",    "--steps",     "30",
       "--lr",      "1e-2", "--peak-tflops", "1",  "--data",         corpus, "--val-split", "0.1"});
  Trainer t(o, MPI_COMM_SELF);
  REQUIRE(t.has_validation());
  const double before = t.evaluate();
  CHECK(t.evaluate() == before);  // a fixed set, and evaluation changes nothing
  CHECK(std::abs(before - std::log(256.0)) < 0.05);
  for (int s = 0; s < 30; ++s) t.step();
  const double after = t.evaluate();
  MESSAGE("validation loss " << before << " -> " << after);
  CHECK(after < before - 2.0);
}

TEST_CASE("validation: a bad split or a source too short is one error line, exit 2") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "corpus.txt");
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--val-split 0", "--val-split must be between 0 and 1, exclusive (got 0)"},
      {"--val-split 1", "--val-split must be between 0 and 1, exclusive (got 1)"},
      {"--val-split 1.5", "--val-split must be between 0 and 1"},
      {"--val-split -0.2", "--val-split"},
      {"--val-split 0.2 --val-data " + corpus, "--val-data and --val-split exclude each other"},
      {"--eval-every 5", "--eval-every needs --val-data or --val-split"},
      {"--data " + corpus + " --val-split 0.0001", "(validation split)"},
      {"--val-data /nonexistent/val.txt", "'/nonexistent/val.txt': not found"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.flags);
    const auto r = spawn(tetra_bin() + kTiny + "--steps 1 " + c.flags, 30);
    CHECK(r.status == 2);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(count(r.err, c.message) == 1);
  }
}

TEST_CASE("validation: the start-up report says what is evaluated, and when sequences repeat") {
  const TempDir tmp;
  const std::string corpus = write_corpus(tmp / "corpus.txt");  // ~15 kB: ~900 sequences of 17
  auto report = [&](const std::string& split, const std::string& batches) {
    Trainer t(
        parse_train_options({"--layers",       "2",   "--dim",          "32",   "--heads",   "4",
                             "--kv-heads",     "2",   "--ffn-dim",      "64",   "--seq-len", "16",
                             "--global-batch", "4",   "--peak-tflops",  "1",    "--data",    corpus,
                             "--val-split",    split, "--eval-batches", batches}),
        MPI_COMM_SELF);
    return t.startup_report();
  };
  const std::string enough = report("0.1", "2");
  CHECK(count(enough, "validation: text file (validation split)") == 1);
  CHECK(count(enough, "each evaluation takes 8 sequences\n") == 1);
  // A validation set of a few sequences, evaluated over 40: said, not hidden.
  const std::string few = report("0.004", "10");
  MESSAGE(few);
  CHECK(count(few, "each evaluation takes 40 sequences, so some twice or more (") == 1);
}
