// The event file a --tensorboard run writes, decoded here (tests/tensorboard_readback.py reads
// it with TensorBoard itself), and the step line's step i/N and eta; a path that is not a
// directory is refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/event_file.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "train/tensorboard.hpp"

using namespace tetra::tensorboard;
using namespace tetra::test;

TEST_CASE("tensorboard: a run's event file; the step line's step i/N and eta") {
  TempDir d;
  const std::string dir = d / "runs/a";  // created with its parent
  const Spawned s =
      spawn(tetra_bin() + " train --steps 5 --layers 1 --dim 32 --heads 2 " +
            "--kv-heads 1 --ffn-dim 64 --seq-len 16 --peak-tflops 1 --tensorboard " + dir);
  REQUIRE(s.status == 0);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files.push_back(e.path().filename().string());
  REQUIRE(files.size() == 1);
  CHECK(files[0].starts_with("events.out.tfevents."));
  const std::vector<std::string> events = records(slurp(dir + "/" + files[0]));
  // The file version, the START, the configuration, then one event per step.
  REQUIRE(events.size() == 8);
  CHECK(events[0].find(field_bytes(3, "brain.Event:2")) != std::string::npos);
  CHECK(events[1].find(bytes({0x3A, 2, 0x08, 1})) != std::string::npos);
  CHECK(events[2].find("TP 1 x CP 1 x PP 1 x DP 1") != std::string::npos);
  for (int step = 0; step < 5; ++step) {
    CHECK(events[3 + step].find(field_varint(2, step)) != std::string::npos);
    CHECK(events[3 + step].find(field_bytes(1, "loss")) != std::string::npos);
  }
  // Step i of N; the time left once three intervals between step ends are known (step 3),
  // and not after the last step.
  std::istringstream out(s.out);
  int step = 0;
  const std::regex eta(R"( \| eta (\d+s|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh)( |$))");
  for (std::string line; std::getline(out, line);) {
    if (!line.starts_with("step ")) continue;
    CAPTURE(line);
    CHECK(std::regex_search(line, std::regex("^step +" + std::to_string(step) + "/5 \\| loss ")));
    CHECK(std::regex_search(line, eta) == (step == 3));
    ++step;
  }
  CHECK(step == 5);
  CHECK(std::regex_search(s.out,
                          std::regex(R"(summary: steps 0-4 in [0-9.]+ s \(total [0-9dhms]+\))")));

  // Not a directory: refused before step 0, with the flag named.
  const std::string file = d / "file";
  std::ofstream(file) << "x";
  const Spawned refused = spawn(tetra_bin() + " train --steps 1 --tensorboard " + file);
  CHECK(refused.status == 2);
  CHECK(refused.err.find("tetra: error: cannot write --tensorboard '" + file +
                         "': it is not a directory") != std::string::npos);
  CHECK(count(refused.out, "step ") == 0);
}
