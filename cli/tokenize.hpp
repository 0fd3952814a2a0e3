// `tetra tokenize --tokenizer FILE [--document | --decode]`: a tokenizer on the command line,
// to see the ids a text gets (tests/hf_tokenizers.py holds them to Hugging Face tokenizers').
// Reads standard input, writes standard output: the ids, separated by spaces, of the text as a
// text file is encoded (special tokens written in it are those tokens), or with --document of
// the text as one JSONL document is (data/documents.hpp); with --decode, the bytes of the ids.
#pragma once
#include <string>

namespace tetra {

struct TokenizeOptions {
  std::string tokenizer;  // a tokenizer.json, a SentencePiece .model, or a model directory
  bool document = false, decode = false;
};

// Throws tetra::Error for a tokenizer it cannot read, a text it cannot encode, or an input to
// --decode that is not ids of the tokenizer.
void tokenize_command(const TokenizeOptions& o);

}  // namespace tetra
