// A picture tetra wrote, read back as XML by tests/tools/svg_summary.py.
#pragma once
#include <string>

#include "spawn.hpp"
#include "test_util.hpp"

namespace tetra::test {

// What the SVG at `path` holds (lanes, ranks, a loss curve, a sweep's layouts), as JSON;
// fails the test unless it is XML.
inline json svg_summary(const std::string& path) {
  const Spawned r =
      spawn("python3 " + std::string(TETRA_SOURCE_DIR) + "/tests/tools/svg_summary.py " + path);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return parsed_json(r.out);
}

}  // namespace tetra::test
