// The tiny models the end-to-end tests train, as tetra train's flags. The defaults are the
// shape most tests use; a test names each value it needs otherwise, so what it runs reads in
// the test: tiny_model_flags({.layers = 4, .steps = 12}).
#pragma once
#include <string>

namespace tetra::test {

struct TinyModel {
  int layers = 2, dim = 32, heads = 4, kv_heads = 2, ffn_dim = 64, seq_len = 16;
  int global_batch = 4;
  int steps = 0;        // 0: no --steps (the test gives its own)
  int peak_tflops = 1;  // 0: no --peak-tflops; 1 spares each run the start-up probe of the peak
};

// " --layers 2 --dim 32 ... --peak-tflops 1 ": "--flag value" pairs with a space on either
// side, so they join other flags as they are and with_defaults (spawn.hpp) reads them.
inline std::string tiny_model_flags(const TinyModel& m = {}) {
  auto flag = [](const char* name, int value) {
    return std::string(" --") + name + " " + std::to_string(value);
  };
  std::string out = flag("layers", m.layers) + flag("dim", m.dim) + flag("heads", m.heads) +
                    flag("kv-heads", m.kv_heads) + flag("ffn-dim", m.ffn_dim) +
                    flag("seq-len", m.seq_len) + flag("global-batch", m.global_batch);
  if (m.steps > 0) out += flag("steps", m.steps);
  if (m.peak_tflops > 0) out += flag("peak-tflops", m.peak_tflops);
  return out + " ";
}

}  // namespace tetra::test
