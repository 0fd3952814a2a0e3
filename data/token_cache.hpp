// Text under a SentencePiece tokenizer becomes an llm.c .bin shard once, cached beside the
// text and named by a hash of the text's and the tokenizer's bytes, so that a later run on
// the same text with the same tokenizer reads the shard instead of tokenizing again, and a
// change to either makes a new one. --tokenizer bpe:N trains the model on the text the same
// way, cached as TEXT.bpeN-HASH.model.
#pragma once
#include <string>

#include "data/tokenizer.hpp"

namespace tetra::data {

// The SentencePiece model --tokenizer names for the training text: FILE.model as it is, or
// for bpe:N the cached model trained on `text` (trained now when missing). Sets `trained`
// when it trained one. Throws tetra::Error for a malformed spec or a failed training.
std::string tokenizer_model(const std::string& spec, const std::string& text, bool* trained);

// The .bin shard of `text` under `tok`, written now when missing (through a temporary and a
// rename); `reused` says whether it was there. Throws tetra::Error for a .bin `text` (it is
// tokens already), an unreadable file or a tokenizer of more pieces than uint16 holds.
std::string tokenize_cached(const std::string& text, const Tokenizer& tok, bool* reused);

}  // namespace tetra::data
