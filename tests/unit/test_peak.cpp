// The table of known GPUs' dense peaks (train/peak.cpp), by the names CUDA gives the devices:
// the NVL and PCIe parts must not take the SXM parts' peak, whose names theirs contain.
#include <doctest/doctest.h>

#include "train/peak.hpp"

using namespace tetra;

namespace {

double tflops(const std::string& name, DType dtype) {
  const std::optional<Peak> p = gpu_peak(name, dtype);
  REQUIRE(p.has_value());
  return p->flops / 1e12;
}

}  // namespace

TEST_CASE("peak: each GPU's name finds its own dense peak, the NVL parts before the SXM ones") {
  CHECK(tflops("NVIDIA H200", DType::BF16) == 989.0);
  CHECK(tflops("NVIDIA H100 80GB HBM3", DType::BF16) == 989.0);
  CHECK(tflops("NVIDIA H200 NVL", DType::BF16) == 835.0);
  CHECK(tflops("NVIDIA H100 NVL", DType::BF16) == 835.0);
  CHECK(tflops("NVIDIA H100 PCIe", DType::BF16) == 756.0);
  CHECK(tflops("NVIDIA A100-SXM4-80GB", DType::BF16) == 312.0);
  CHECK(tflops("NVIDIA H200", DType::F32) == 67.0);
  CHECK(tflops("NVIDIA H200 NVL", DType::F32) == 60.0);
  CHECK(tflops("NVIDIA H100 NVL", DType::F32) == 60.0);
  CHECK(gpu_peak("NVIDIA H200 NVL", DType::BF16)->source == "H200 NVL dense BF16 peak");
  CHECK(gpu_peak("NVIDIA H200", DType::F32)->source == "H200 dense FP32 peak");
  CHECK_FALSE(gpu_peak("NVIDIA GeForce RTX 4090", DType::BF16).has_value());
  CHECK_FALSE(gpu_peak("cpu", DType::F32).has_value());
}
