// The sections of a run's configuration that lay out its ranks: the layout (how many ranks
// in each dimension and how the pipeline runs), the batch (how a step's sequences are cut)
// and the device (where each rank computes and how its groups communicate). Each struct's
// settings follow it as a table (util/settings.hpp): tetra train's flags, the TOML keys and
// the JSON a checkpoint records all come from there.
#pragma once
#include <string>

#include "parallel/schedule.hpp"
#include "util/settings.hpp"

namespace tetra {

struct LayoutConfig {
  // TP * CP * PP * DP ranks; dp 0 means "the rest of the ranks".
  int tp = 1, cp = 1, pp = 1, dp = 0;
  bool sp = false;                // Megatron sequence parallelism inside the TP group
  int vpp = 1;                    // model chunks per pipeline rank (interleaved; zb-v: 2)
  std::string schedule = "1f1b";  // one of kScheduleNames
  // How the layers are cut into chunks (parallel/chunks.hpp): even, or ends (the
  // embedding and the head each count as a layer, so the first and the last chunk hold one
  // layer fewer, as Llama 3 405B's stages do).
  std::string pp_balance = "even";
};
// A resumed run may take any layout (restore() reshards); a sweep decides it for each run.
inline const settings::Table<LayoutConfig> kLayoutKeys{
    "layout",
    "Layout",
    {.resume = settings::Resume::Free, .swept = false},
    {settings::key(&LayoutConfig::tp, "tp", "N",
                   "tensor-parallel ranks (Megatron column/row splits)", settings::at_least_1()),
     settings::key(&LayoutConfig::cp, "cp", "N",
                   "context-parallel ranks (sequence cut into 2*CP chunks)",
                   settings::at_least_1()),
     settings::key(&LayoutConfig::pp, "pp", "N", "pipeline stages", settings::at_least_1()),
     settings::key(&LayoutConfig::dp, "dp", "N", "data-parallel ranks (0: world / (TP*CP*PP))",
                   settings::non_negative()),
     settings::key(&LayoutConfig::sp, "sp", "",
                   "sequence parallelism: norms and residuals split over TP along the tokens"),
     settings::key(&LayoutConfig::vpp, "vpp", "V",
                   "virtual pipeline stages per rank (interleaved; zb-v takes 2)",
                   settings::at_least_1()),
     settings::choice(&LayoutConfig::schedule, "schedule", kScheduleNames, "pipeline schedule"),
     settings::choice(&LayoutConfig::pp_balance, "pp_balance", {"even", "ends"},
                      "layers per pipeline chunk: even (the first chunks take what does not "
                      "divide), or ends (the embedding and the head count as a layer each: the "
                      "first and the last chunk hold one layer fewer, as Llama 3 405B)")}};

// Whether the layout setting `key` ("layout.sp") takes part in layout `l`: the schedule, the
// virtual stages and the balance of the chunks need a pipeline (PP above 1), sequence
// parallelism a TP group (TP above 1); the sizes always do. A run refuses one given where it
// does not (train/config.hpp's resolve); the jobs that lay out many runs pass each run only
// those that do.
inline bool layout_key_applies(const std::string& key, const LayoutConfig& l) {
  if (key == "layout.schedule" || key == "layout.vpp" || key == "layout.pp_balance")
    return l.pp > 1;
  if (key == "layout.sp") return l.tp > 1;
  return true;
}

struct BatchConfig {
  // global_batch sequences per step, over all DP ranks, in micro-batches of micro_batch
  // sequences (0: the largest that gives every pipeline stage PP micro-batches).
  int global_batch = 8, micro_batch = 0;
};
// The global batch fixes the run; restore() reshards to any micro-batch split.
inline const settings::Table<BatchConfig> kBatchKeys{
    "batch",
    "Batch",
    {.resume = settings::Resume::Fixed},
    {settings::key(&BatchConfig::micro_batch, "micro_batch", "B",
                   "sequences per micro-batch (0: G / (DP*PP))", settings::non_negative())
         .on_resume(settings::Resume::Free),
     settings::key(&BatchConfig::global_batch, "global_batch", "G",
                   "sequences per step, over all data-parallel ranks", settings::positive())}};

struct DeviceConfig {
  std::string device = "cpu";  // cpu, cuda, or guarded-cpu (a test configuration)
  std::string dtype = "fp32";  // fp32, or bf16 compute over fp32 master weights
  std::string comm = "auto";   // device collectives: auto, nccl or mpi
  // The data-parallel collectives queued to run under compute (parallel/zero.hpp), with
  // results bit-identical to the blocking calls of off.
  bool overlap = true;
};
// The device and the communicators do not enter the state; the precision may change with
// --allow-change dtype.
inline const settings::Table<DeviceConfig> kDeviceKeys{
    "device",
    "Device",
    {.resume = settings::Resume::Fixed},
    {settings::choice(&DeviceConfig::device, "device", {"cpu", "cuda", "guarded-cpu"},
                      "where each rank computes; guarded-cpu: the CPU backend with memory host "
                      "code cannot touch, a test configuration")
         .on_resume(settings::Resume::Free),
     settings::choice(&DeviceConfig::dtype, "dtype", {"fp32", "bf16"},
                      "compute precision: bf16 weights and activations over fp32 master "
                      "weights, gradients and Adam state")
         .on_resume(settings::Resume::Changeable),
     settings::choice(&DeviceConfig::comm, "comm", {"auto", "nccl", "mpi"},
                      "device collectives: auto = NCCL for groups whose ranks each have a GPU "
                      "of their own, else MPI through host memory")
         .on_resume(settings::Resume::Free),
     settings::choice(&DeviceConfig::overlap, "overlap", {"off", "on"},
                      "run the data-parallel gradient reduce-scatters and weight all-gathers "
                      "(ZeRO-3: one unit ahead) beside the compute, on a communication thread "
                      "(MPI) or stream (NCCL); the same results to the bit")
         .on_resume(settings::Resume::Free)}};

}  // namespace tetra
