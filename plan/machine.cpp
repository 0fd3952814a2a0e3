#include "plan/machine.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace tetra::plan {

const std::vector<std::string>& machine_names() {
  static const std::vector<std::string> names = {"h100", "h200", "a100", "cpu"};
  return names;
}

Machine machine_named(const std::string& name) {
  // H100 and H200 SXM: 989 TFLOP/s dense BF16, 18 NVLinks of 25 GB/s per direction
  // (450 GB/s), one 400 Gb/s NIC per GPU (50 GB/s). A100 SXM: 312 TFLOP/s, 12 NVLinks
  // (300 GB/s per direction), one 200 Gb/s NIC (25 GB/s).
  // fp32 without TF32 (tetra's fp32 is exact fp32): 67 and 19.5 TFLOP/s.
  if (name == "h100") return {"H100 SXM", 989e12, 67e12, 80e9, 450e9, 50e9, 8};
  if (name == "h200") return {"H200 SXM", 989e12, 67e12, 141e9, 450e9, 50e9, 8};
  if (name == "a100") return {"A100 SXM", 312e12, 19.5e12, 80e9, 300e9, 25e9, 8};
  if (name == "cpu") {
    const double pages = double(::sysconf(_SC_PHYS_PAGES)), page = double(::sysconf(_SC_PAGESIZE));
    // One node: every rank shares this machine's memory; memory moves at a few GB/s.
    return {"this CPU", 0, 0, pages * page, 10e9, 10e9, 1 << 20, "shared memory"};
  }
  std::string names;
  for (const std::string& n : machine_names()) names += (names.empty() ? "" : ", ") + n;
  fail("--gpu takes one of ", names, " (got '", name, "')");
}

namespace {

// The first number in a file ("max" or a missing file: -1).
double read_number(const std::string& path) {
  std::ifstream f(path);
  double x = -1;
  if (f && f >> x) return x;
  return -1;
}

}  // namespace

double host_memory_available() {
  double avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) avail = std::stod(line.substr(13)) * 1024;  // kB
  if (avail < 0) avail = double(::sysconf(_SC_AVPHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  // cgroup v2, then v1: the limit less what the group already uses.
  for (const auto& [limit, usage] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const double lim = read_number(limit), used = read_number(usage);
    if (lim > 0 && used >= 0 && lim < 1e18) avail = std::min(avail, lim - used);
  }
  return avail;
}

Precision precision_named(const std::string& dtype) {
  Precision p;
  if (dtype == "bf16") {
    p.name = "bf16";
    p.act = 2;
    p.compute_w = 2;
  } else {
    check(dtype == "fp32", "`device.dtype` takes fp32 or bf16 (got '", dtype, "')");
  }
  return p;
}

}  // namespace tetra::plan
