// tetra train's command line as the jobs read and write it. cli/ owns the flags (CLI11, the
// --config reader); main hands these two in, so that a job parses a child's configuration
// exactly as tetra train will, and builds its arguments from the same schema.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace tetra {

struct TrainArgs {
  // tetra train's arguments (flags and a --config file) -> the configuration it would train
  // with; throws tetra::Error as tetra train would refuse them.
  std::function<TrainConfig(const std::vector<std::string>&)> parse;
  // The arguments that give the settings `keys` ("model.heads") their values in a
  // configuration, in the schema's order.
  std::function<std::vector<std::string>(const TrainConfig&, const std::set<std::string>&)> args;
};

}  // namespace tetra
