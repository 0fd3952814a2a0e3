#include "cli/generate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "checkpoint/hf_io.hpp"
#include "data/tokenizer.hpp"
#include "transformer/generator.hpp"
#include "util/error.hpp"

namespace tetra {

std::string generate_text(const GenerateOptions& o) {
  const HfModel model(o.init_from);
  ModelConfig flags;
  flags.seq_len = 1;  // unused: positions come from the prompt and the tokens asked for
  const ModelConfig cfg = config_from_model(model, flags, {});
  cfg.validate();
  std::unique_ptr<data::Tokenizer> tok;
  if (const std::string file = data::model_dir_tokenizer(o.init_from); !file.empty()) {
    tok = data::load_tokenizer(file);
    check_tokenizer_matches(o.init_from, cfg, *tok);
  } else {
    check(cfg.vocab <= 256, "model '", o.init_from, "' has ", cfg.vocab,
          " tokens and no tokenizer.model or tokenizer.json: tetra generate reads bytes only "
          "without one");
    tok = data::byte_tokenizer();
  }
  std::map<std::string, std::vector<float>> whole;
  for (const UnitSpec& u : make_units(cfg, 1, 0)) {
    const std::vector<float> flat = read_unit(model, cfg, u, 0);
    for (const ParamInfo& p : u.params) {
      std::vector<float>& w = whole[p.name];
      w.assign(flat.begin() + p.offset, flat.begin() + p.offset + p.numel());
      // As training stops at a loss that is not finite: such a weight makes every logit NaN.
      const auto bad = std::find_if(w.begin(), w.end(), [](float x) { return !std::isfinite(x); });
      if (bad != w.end())
        throw DivergedError("model '" + o.init_from + "': " + p.name +
                            " holds a value that is not finite (" +
                            (std::isnan(*bad) ? "nan"
                             : *bad > 0       ? "inf"
                                              : "-inf") +
                            " at element " + std::to_string(bad - w.begin()) + ")");
    }
  }
  const std::unique_ptr<Backend> be =
      make_backend(o.device, int(std::max(1u, std::thread::hardware_concurrency())));
  Generator generator(*be, cfg, whole);
  const std::vector<int> prompt = tok->encode(o.prompt);
  check(!prompt.empty(), "--prompt gives no tokens");
  return data::decode_continuation(
      *tok, prompt, generator.generate(prompt, {o.tokens, o.temperature, o.top_k, o.seed}));
}

}  // namespace tetra
