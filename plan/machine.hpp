// What `tetra plan` plans for: a machine (peak, memory and link speeds per GPU, GPUs per node)
// and the precision whose byte sizes the memory and traffic models use. Named runs are in
// preset.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tetra::plan {

struct Machine {
  std::string name;
  double peak_flops = 0;    // dense, per GPU, in the run's compute precision
  double fp32_flops = 0;    // dense fp32 without TF32, what --dtype fp32 runs at (0: unknown)
  double memory_bytes = 0;  // per GPU
  double nvlink_Bps = 0;    // per GPU, per direction, inside a node
  double network_Bps = 0;   // per GPU, per direction, between nodes
  int gpus_per_node = 1;
  std::string node_link = "NVLink";  // what links the devices of a node
};

// The names machine_named takes, in the order --gpu's help and the serve page list them.
const std::vector<std::string>& machine_names();

// h100, h200, a100 (SXM, dense BF16 peaks, and the fp32 ones train/peak.cpp uses; NVLink
// and one NIC per GPU, per direction), or
// cpu: this machine, one node, its memory, its ranks linked by shared memory; peak and links
// from the flags. Throws tetra::Error for any other name.
Machine machine_named(const std::string& name);

// Bytes this process may still allocate on this machine: the kernel's MemAvailable, lowered
// to what the cgroup's limit leaves when there is one.
double host_memory_available();

// Bytes per element of what the models count. fp32: everything 4. bf16 (Megatron's mixed
// precision, as parallel/zero.hpp keeps it): the weights the matmuls read, activations and
// what TP, CP and PP send are bf16, and ZeRO gathers the bf16 weights; master weights,
// gradients (accumulated and reduced) and Adam's moments are fp32.
struct Precision {
  std::string name = "fp32";
  int act = 4;        // activations and their gradients, and the TP/CP/PP messages
  int compute_w = 4;  // the weights the matmuls read (gathered by ZeRO)
  int grad = 4, master = 4, adam = 8;
  // Whether the fp32 master shard is a buffer of its own: under ZeRO-3, or when the compute
  // copy is not fp32 (otherwise it is this rank's slice of the full fp32 weights).
  bool separate_master(int zero) const { return zero == 3 || compute_w != master; }
};
Precision precision_named(const std::string& dtype);

}  // namespace tetra::plan
