#include "train/peak.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "util/clock.hpp"

namespace tetra {

std::optional<Peak> gpu_peak(const std::string& device_name, DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  struct Gpu {
    const char* name;
    double fp32, bf16;
  };
  // The first name the device's contains: the PCIe and NVL parts before the SXM ones, whose
  // names ("NVIDIA H200", "NVIDIA H100 80GB HBM3") the others' contain too.
  for (const Gpu& g : {Gpu{"H100 PCIe", 51.0, 756.0},
                       {"H100 NVL", 60.0, 835.0},
                       {"H200 NVL", 60.0, 835.0},
                       {"H100", 67.0, 989.0},
                       {"H200", 67.0, 989.0},
                       {"A100", 19.5, 312.0}}) {
    if (device_name.find(g.name) != std::string::npos)
      return Peak{(bf16 ? g.bf16 : g.fp32) * 1e12,
                  std::string(g.name) + (bf16 ? " dense BF16 peak" : " dense FP32 peak")};
  }
  return std::nullopt;
}

Peak find_peak(Backend& be, Comm& world, double peak_tflops, int threads, DType dtype) {
  if (peak_tflops > 0) return {peak_tflops * 1e12, "`output.peak_tflops`"};
  if (be.device() == Device::CUDA)
    if (const std::optional<Peak> p = gpu_peak(be.name(), dtype)) return *p;
  // Otherwise: the best rate of a square fp32 GEMM with this rank's threads (on the CPU bf16
  // runs compute in fp32 too), all ranks
  // probing at once (they share the cores as they will in training), averaged over the
  // ranks. The best of several calls, not their mean, so that a noisy moment does not lower
  // the peak.
  const int64_t n = 1024;
  Buffer a(be, n * n), b(be, n * n), c(be, n * n);
  be.fill(a.flat(), 0.5f);
  be.fill(b.flat(), 0.25f);
  const Tensor A = a.view({n, n}), B = b.view({n, n}), C = c.view({n, n});
  be.matmul(C, A, false, B, false);  // warm-up
  world.barrier();
  double best = 1e30;
  const Clock::time_point t0 = Clock::now();
  for (int reps = 0; reps < 3 || seconds_since(t0) < 0.5; ++reps) {
    const Clock::time_point t = Clock::now();
    be.matmul(C, A, false, B, false);
    be.synchronize();
    best = std::min(best, seconds_since(t));
  }
  double rate = 2.0 * n * n * n / best;
  world.all_reduce_host(&rate, 1);
  std::ostringstream os;
  if (be.device() != Device::CUDA) {
    os << "CPU GEMM probe (" << n << "^3 fp32, " << threads << " thread" << (threads > 1 ? "s" : "")
       << " per rank)";
  } else {
    os << be.name() << " GEMM probe (" << n << "^3 fp32)";
  }
  return {rate / world.size(), os.str()};
}

}  // namespace tetra
