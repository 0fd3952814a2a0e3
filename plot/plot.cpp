#include "plot/plot.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "plot/svg_schedule.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/same_path.hpp"

namespace tetra {

void plot_command(const PlotOptions& opt) {
  std::string svg, what;
  const std::string& input = !opt.loss.empty()    ? opt.loss
                             : !opt.trace.empty() ? opt.trace
                                                  : opt.barrier;
  const char* flag = !opt.loss.empty() ? "--loss" : !opt.trace.empty() ? "--trace" : "--barrier";
  const std::string clash = same_file_problem("--out", opt.out, flag, input);
  check(clash.empty(), clash);
  try {
    if (!opt.schedule.empty()) {
      const ScheduleKind kind = parse_schedule(opt.schedule);
      const int m = opt.micro_batches > 0 ? opt.micro_batches
                                          : int(std::min<int64_t>(2 * int64_t(opt.pp), INT32_MAX));
      check(m >= opt.pp, "--micro-batches ", m, " is fewer than --pp ", opt.pp,
            ": every stage needs a micro-batch");
      check(kind != ScheduleKind::Interleaved || m % opt.pp == 0, "--micro-batches ", m,
            " is not a multiple of --pp ", opt.pp, ", which the interleaved schedule needs");
      check_schedule(kind, opt.pp, opt.vpp, m);
      const json events = schedule_json(kind, opt.pp, opt.vpp, m);
      if (opt.json) {
        std::printf("%s\n", events.dump().c_str());
        return;
      }
      svg = schedule_svg(events);
      what = std::string("the ") + schedule_name(kind) + " schedule";
    } else if (!opt.trace.empty()) {
      std::string text;
      const std::string unread = read_input_file(opt.trace, text);
      check(unread.empty(), "cannot read trace file '", opt.trace, "': ", unread);
      json trace;
      const std::string problem = parse_json(text, trace);
      check(problem.empty(), opt.trace, ": ", problem);
      svg = trace_step_svg(trace, opt.step, opt.trace);
      what = "a traced step";
    } else if (!opt.loss.empty()) {
      svg = loss_svg(read_metrics(opt.loss), opt.loss);
      what = "the loss curve";
    } else {
      svg = barrier_svg(read_metrics(opt.barrier), opt.step);
      what = "compute and wait per rank";
    }
  } catch (const json::exception& e) {
    // A value of the wrong type where tetra wrote a number or a string.
    fail(input, ": unexpected content (", e.what(), ")");
  }
  write_svg(opt.out, svg);
  std::printf("tetra plot: %s written to %s\n", what.c_str(), opt.out.c_str());
}

}  // namespace tetra
