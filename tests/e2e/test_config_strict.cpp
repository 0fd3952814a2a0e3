// The --config reader is strict (issue 38, class 7): a value of the wrong TOML type (a list of
// one, a number in quotes, a bare word) is refused, as is a key given twice, a line it cannot
// read, a file larger than any configuration (a 1 GB line trained the defaults under a memory
// limit: the rest of the file was dropped without a word) and --config "". Both commands that
// read one, train and plan; each refusal one line, exit status 2, nothing written.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "../support/refusal.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "cli/config_file.hpp"
#include "cli/options.hpp"

using namespace tetra::test;

namespace {

std::string parse_error(const std::string& command, const std::vector<std::string>& args) {
  std::vector<std::string> all = {command};
  all.insert(all.end(), args.begin(), args.end());
  return error_of([&] { tetra::parse_command_line(all); });
}

}  // namespace

TEST_CASE("config strict: wrong types, repeated keys and unreadable lines are refused") {
  TempDir d;
  const std::string f = d / "c.toml";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[model]\nlayers = [2]\n", ": model.layers takes one value, not a list"},
      {"[model]\nlayers = \"2\"\n", ": model.layers takes an integer, not the string \"2\""},
      {"[optimizer]\nlr = \"0.1\"\n", ": optimizer.lr takes a number, not the string \"0.1\""},
      {"[model]\nlayers = { n = 2 }\n", ": model.layers takes one value, not a table"},
      {"[layout]\nschedule = 1\n", ": layout.schedule takes a string, in quotes (got '1')"},
      {"[data]\ndata = corpus.txt\n",
       ":2: 'corpus.txt' is not a value (a string is in quotes: \"corpus.txt\")"},
      {"[model]\nlayers = 2\nlayers = 3\n", ": model.layers is given more than once"},
      {"[model]\nlayers = 2\n[model]\nlayers = 3\n", ": model.layers is given more than once"},
      {"[model]\nlayers 2\n", ":2: expected '=' after the key"},
      {"[model\nlayers = 2\n", ":1: expected ']' after the table's name"},
      {"[model]\nlayers = 2 3\n", ":2: unexpected '3' after the value"},
      {"[data]\ndata = \"a.txt\n", ":2: a string without its closing quote"},
      {"[data]\ndata = \"\"\"a\"\"\"\n", ":2: multi-line strings are not read"},
      {"[model]\nlayers =\n", ":2: a key without a value"},
  };
  for (const char* command : {"train", "plan"})
    for (const auto& [text, message] : cases) {
      CAPTURE(command);
      CAPTURE(text);
      std::ofstream(f, std::ios::trunc) << text;
      CHECK(parse_error(command, {"--config", f}) == f + message);
    }

  // What TOML allows and tetra writes reads as before: escapes, literal strings, 1_000,
  // comments after values, a key's flag spelling, an integer for a number.
  std::ofstream(f, std::ios::trunc)
      << "# a comment\n[model]\nkv-heads = 1 # after a value\nlayers = 1_0\n"
         "[optimizer]\nlr = 1\n[data]\ndata = \"a\\tb\\u00e9\"\nval_data = 'C:\\x'\n";
  const tetra::CommandLine cli = tetra::parse_command_line({"train", "--config", f});
  CHECK(cli.train.model.kv_heads == 1);
  CHECK(cli.train.model.layers == 10);
  CHECK(cli.train.optimizer.lr == 1.0);
  CHECK(cli.train.data.data == "a\tb\xc3\xa9");
  CHECK(cli.train.data.val_data == "C:\\x");
}

TEST_CASE("config strict: a file past the limit, a FIFO and --config \"\" are one error line") {
  TempDir d;
  // One line of 2 MiB: past kMaxConfigBytes, refused before it is held.
  const std::string big = d / "big.toml";
  {
    std::ofstream out(big);
    out << "[data]\ndata = \"" << std::string(size_t(tetra::cli::kMaxConfigBytes) * 2, 'a')
        << "\"\n[model]\nlayers = 3\n";
  }
  const std::string fifo = d / "fifo.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  for (const char* command : {"train", "plan"}) {
    CAPTURE(command);
    expect_refusal(tetra_bin() + " " + command + " --config " + big,
                   "bytes or more, past the 1048576 tetra reads");
    expect_refusal(tetra_bin() + " " + command + " --config " + fifo, "FIFO");
    expect_refusal(tetra_bin() + " " + command + " --config \"\"",
                   "--config needs a file name (got '')");
    expect_refusal(tetra_bin() + " " + command + " --config=", "--config needs a value");
  }
}
