// The sections of a run's configuration that lay out its ranks: the layout (how many ranks
// in each dimension and how the pipeline runs), the batch (how a step's sequences are cut)
// and the device (where each rank computes and how its groups communicate). tetra train's
// flags of the same help groups fill them (cli/options_flags.cpp).
#pragma once
#include <string>

namespace tetra {

struct LayoutConfig {
  // TP * CP * PP * DP ranks; dp 0 means "the rest of the ranks".
  int tp = 1, cp = 1, pp = 1, dp = 0;
  bool sp = false;                // Megatron sequence parallelism inside the TP group
  int vpp = 1;                    // virtual pipeline stages (model chunks) per pipeline rank
  std::string schedule = "1f1b";  // gpipe, 1f1b or interleaved
};

struct BatchConfig {
  // global_batch sequences per step, over all DP ranks, in micro-batches of micro_batch
  // sequences (0: the largest that gives every pipeline stage PP micro-batches).
  int global_batch = 8, micro_batch = 0;
};

struct DeviceConfig {
  std::string device = "cpu";  // cpu, cuda, or guarded-cpu (a test configuration)
  std::string dtype = "fp32";  // fp32, or bf16 compute over fp32 master weights
  std::string comm = "auto";   // device collectives: auto, nccl or mpi
};

}  // namespace tetra
