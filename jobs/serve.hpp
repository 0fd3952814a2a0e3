// `tetra serve [--port N] [--host ADDR]`: a local web page over tetra's own code. The planner
// as a calculator (every number from tetra plan's JSON, the timeline tetra's own SVG), a run
// of the page's layout on this machine's CPU ranks (the sweep's run: one rank, then the
// layout, its step records streamed to the page as server-sent events, then measured beside
// planned), and tetra lab's lessons, in English and Chinese. The page (jobs/serve_page/) is
// compiled into the binary.
//
// Safe by default: it listens on 127.0.0.1; a request whose Host is not the address it serves
// is refused (DNS rebinding); starting a run needs the token it prints with its address; a
// request's settings go through tetra's own parsers and never name a path (runs happen in a
// fresh temporary directory, removed afterwards); a run is bounded in ranks, steps, memory and
// time, one at a time, and stopped when its page goes or the server stops. Like tetra launch
// it is the parent of its MPI jobs, never one of them.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "jobs/job.hpp"
#include "jobs/train_args.hpp"
#include "plan/plan_json.hpp"
#include "train/config.hpp"

namespace tetra {

// tetra plan's command line, as cli/ parses it (main hands it in, as it does TrainArgs): its
// arguments -> the configuration and the machine it plans for; throws tetra::Error as tetra
// plan would refuse them.
struct PlanArgs {
  struct Parsed {
    TrainConfig train;
    plan::Request request;
  };
  std::function<Parsed(const std::vector<std::string>&)> parse;
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8008;     // 0: any free port (printed)
  int max_ranks = 16;  // a run's ranks, steps and memory (the plan's, all ranks together, at
  int max_steps = 50;  // most half of what this machine has free); run_timeout: per job
  JobOptions job{.run_timeout = 300};
};

// Serves until SIGINT or SIGTERM, then returns 0. Throws tetra::Error for bad input: an
// address it cannot listen on, a rank of an MPI job.
int run_serve(const ServeOptions& o, const TrainArgs& train, const PlanArgs& plan);

}  // namespace tetra
