// The peak FLOP/s per rank that MFU and HFU divide by: --peak-tflops when given, else the
// dense peak of a known GPU in the precision the run computes in, else (CPU, or an unknown
// GPU) a GEMM probe measured at start-up on every rank at once.
#pragma once
#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct Peak {
  double flops = 0;    // per rank
  std::string source;  // said in the start-up report
};

// A known GPU's dense peak in the precision dtype computes in, by the device's name (the CUDA
// backend's name(), as nvidia-smi says it); none for other names.
std::optional<Peak> gpu_peak(const std::string& device_name, DType dtype);

// Collective over world (the probe runs on every rank at once, as training will). dtype:
// the precision the run computes in (a GPU's bf16 and fp32 peaks differ).
Peak find_peak(Backend& be, Comm& world, double peak_tflops, int threads, DType dtype);

}  // namespace tetra
