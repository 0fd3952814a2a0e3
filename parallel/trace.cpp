#include "parallel/trace.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "util/error.hpp"
#include "util/json.hpp"
#include "util/output_file.hpp"

namespace tetra::trace {
namespace {

struct Recorded {
  Lane lane;
  double start_us, dur_us;
  Event event;
};

std::vector<Recorded> events;
double origin_us = 0;

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::Step:
      return "step";
    case Lane::Compute:
      return "compute";
    case Lane::Wait:
      return "wait";
    case Lane::Comm:
      return "comm";
    case Lane::Queued:
      return "comm queued";
  }
  return "?";
}

std::string quoted(const std::string& s) {
  return json(s).dump();
}

// Microseconds with nanosecond digits: enough to keep nested spans nested after rounding.
std::string micros(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  return buf;
}

std::string metadata(const char* what, int pid, int tid, const std::string& name) {
  return std::string("{\"ph\":\"M\",\"name\":\"") + what + "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + quoted(name) + "}}";
}

// This rank's events as JSON objects, one per line, each followed by a comma.
std::string serialize(int rank, const std::string& process_name) {
  std::string out = metadata("process_name", rank, 0, process_name) + ",\n";
  for (Lane lane : {Lane::Step, Lane::Compute, Lane::Wait, Lane::Comm, Lane::Queued})
    out += metadata("thread_name", rank, int(lane), lane_name(lane)) + ",\n";
  for (const Recorded& r : events) {
    out += "{\"ph\":\"X\",\"name\":" + quoted(r.event.name) + ",\"cat\":\"" + lane_name(r.lane) +
           "\",\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(int(r.lane)) +
           ",\"ts\":" + micros(r.start_us - origin_us) + ",\"dur\":" + micros(r.dur_us) +
           ",\"args\":{" + r.event.args + "}},\n";
  }
  return out;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string problem = replace_file(path, text);
  check(problem.empty(), "cannot write `output.trace` file '", path, "': ", problem);
}

}  // namespace

void Event::arg(const char* key, int64_t value) {
  args += (args.empty() ? "\"" : ",\"") + std::string(key) + "\":" + std::to_string(value);
}
void Event::arg(const char* key, const std::string& value) {
  args += (args.empty() ? "\"" : ",\"") + std::string(key) + "\":" + quoted(value);
}

namespace detail {

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void add(Lane lane, double start_us, Event&& e) {
  events.push_back({lane, start_us, now_us() - start_us, std::move(e)});
}

}  // namespace detail

void add_span(Lane lane, double start_us, double end_us, Event&& e) {
  if (detail::recording) events.push_back({lane, start_us, end_us - start_us, std::move(e)});
}

void record(bool on) {
  detail::recording = on;
}

void start(MPI_Comm world) {
  events.clear();
  MPI_Barrier(world);
  origin_us = detail::now_us();
}

void write(MPI_Comm world, const std::string& path, const std::string& process_name) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  // Plain MPI rather than a Comm: the export is not part of the training it describes.
  const std::string mine = serialize(rank, process_name);
  int len = int(mine.size());
  std::vector<int> lens(size), offsets(size);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, world);
  std::string all;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) offsets[r] = r == 0 ? 0 : offsets[r - 1] + lens[r - 1];
    all.resize(size_t(offsets[size - 1]) + lens[size - 1]);
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0,
              world);
  events.clear();
  if (rank != 0) return;
  all.resize(all.size() - 2);  // the last event's ",\n"
  write_atomically(path, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + all + "\n]}\n");
}

}  // namespace tetra::trace
