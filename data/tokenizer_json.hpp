// tokenizer.json, Hugging Face tokenizers' one-file format, for byte-level BPE: the tokenizer of
// GPT-2, Llama 3, SmolLM2 and most models since. Encoding runs as the reference's does, and
// gives its ids exactly (tests/hf_tokenizers.py holds tetra to them on 100 kB of text):
//
//   added tokens (data/added_tokens.hpp)  cut out first: special tokens are never split
//   normalizer, pre_tokenizer             (data/tokenizer_steps.hpp) on each piece left
//   model                                 BPE on each pre-token (data/bpe.hpp)
//   post_processor                        special tokens around a text (for documents only:
//                                         encode() gives the text's own ids)
//   decoder                               ids back to bytes
//
// Beside a file named tokenizer.json, a tokenizer_config.json (transformers') names the
// end-of-text token (eos_token); without one it is the added token <|endoftext|> (GPT-2's),
// <|end_of_text|> (Llama 3's) or </s>. An export writes tokenizer.json as it was read, with that
// tokenizer_config.json (or one naming PreTrainedTokenizerFast and the end-of-text token) and
// special_tokens_map.json when there is one, so that AutoTokenizer loads the fast tokenizer.
//
// Whatever the file asks for that tetra does not implement (a normalizer such as NFC, another
// model, truncation, padding) is refused when it is read, naming the field.
#pragma once
#include <memory>
#include <string>

#include "data/tokenizer.hpp"

namespace tetra::data {

// Reads a tokenizer.json. Throws tetra::Error naming the file (and the field) for a missing or
// malformed file, what tetra does not implement, or a build without PCRE2.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);

}  // namespace tetra::data
