// Tokenizers: bytes (256 symbols, the default), or a SentencePiece model, the tokenizer
// family of Llama 1 and 2, which transformers' LlamaTokenizer loads as tokenizer.model.
// SentencePiece is used through its C++ library (Debian's libsentencepiece-dev); a build
// without it has only bytes and says so when asked for more.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace tetra::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int vocab() const = 0;
  virtual std::vector<int> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The SentencePiece model file, which an export copies; "" for bytes.
  virtual std::string model_file() const { return ""; }
};

std::unique_ptr<Tokenizer> byte_tokenizer();

// The text that `ids` add after `context`. Decoded together and the context's text taken
// off: SentencePiece drops the space of a word piece ("\u2581word") at the start of what
// it decodes, so decoding `ids` alone would glue their first word to the context's last.
std::string decode_continuation(const Tokenizer& tok, const std::vector<int>& context,
                                const std::vector<int>& ids);

bool have_sentencepiece();
// Loads a SentencePiece model. Throws tetra::Error naming the file when it is missing or
// is not a SentencePiece model, or when this build has no SentencePiece.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path);
// Trains a BPE model of `pieces` pieces on a text file and writes it to model_path (through
// a temporary and a rename). Throws tetra::Error with SentencePiece's reason on failure.
void train_bpe(const std::string& text_path, int pieces, const std::string& model_path);

}  // namespace tetra::data
