// `tetra generate --init-from DIR --prompt TEXT ...`: text from a model on one rank.
#pragma once
#include <cstdint>
#include <string>

namespace tetra {

struct GenerateOptions {
  std::string init_from, prompt, device = "cpu";
  int tokens = 64, top_k = 0;
  double temperature = 0;
  uint64_t seed = 1234;
};

// The model and its tokenizer (tokenizer.model or tokenizer.json beside it, else bytes) from
// o.init_from, the prompt's continuation as text. Throws tetra::Error for a model or a
// tokenizer it cannot read, or a prompt with no tokens.
std::string generate_text(const GenerateOptions& o);

}  // namespace tetra
