// Tokenizers: bytes (256 symbols, the default), a SentencePiece model, the tokenizer family of
// Llama 1 and 2, which transformers' LlamaTokenizer loads as tokenizer.model, or a
// tokenizer.json, the one file of Hugging Face tokenizers that GPT-2, Llama 3, SmolLM2 and
// most models since ship (data/tokenizer_json.hpp: byte-level BPE). SentencePiece is used
// through its C++ library (Debian's libsentencepiece-dev), tokenizer.json through PCRE2 for its
// patterns (libpcre2-dev); a build without one says so when asked for it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tetra::data {

// The end of a document under the byte tokenizer: byte 3, ASCII's End of Text. It keeps the
// vocabulary at 256 (every byte model, export and tetra generate stays as it is); a document
// that holds the byte itself is refused, as it would end early.
inline constexpr int kByteEndOfText = 3;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int vocab() const = 0;
  // The ids of a text, with nothing added around it; special tokens written in the text are
  // those tokens ("<|endoftext|>" in a text file separates its parts, as GPT-2's data does).
  virtual std::vector<int> encode(const std::string& text) const = 0;
  // The ids of one document as tetra trains on it: what the tokenizer puts before a text
  // (tokenizer.json's post-processor: Llama 3's <|begin_of_text|>), the text with its special
  // tokens read as plain text (a document's text is content, never control: the reference's
  // encode_special_tokens), then end_of_text() unless the post-processor ended with it.
  virtual std::vector<int> encode_document(const std::string& text) const;
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The token that ends a document (bytes: kByteEndOfText; SentencePiece: its </s>;
  // tokenizer.json: tokenizer_config.json's eos_token, else an added <|endoftext|>,
  // <|end_of_text|> or </s>), or -1 when there is none.
  virtual int end_of_text() const = 0;
  // The token a model's config.json names as bos_token_id, or -1.
  virtual int begin_of_text() const { return -1; }
  // The file the tokenizer was read from, whose bytes name its token caches; "" for bytes.
  virtual std::string model_file() const { return ""; }
  // "bytes", "sentencepiece" or "tokenizer.json": what an exported config.json records.
  virtual std::string kind() const = 0;
  // The files an exported model directory gets, name -> content, so that transformers'
  // AutoTokenizer loads this tokenizer from it; `max_length` is the model's sequence length.
  virtual std::map<std::string, std::string> export_files(int max_length) const { return {}; }
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
// The same from the model's bytes; model_path is where they are (or will be) written.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path,
                                              const std::string& bytes);
// A tokenizer file: a tokenizer.json (a name ending in .json), else a SentencePiece model.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// The tokenizer file of a model directory: tokenizer.model (SentencePiece, as tetra has read
// it before), else tokenizer.json; "" when it has neither (or `dir` is a file).
std::string model_dir_tokenizer(const std::string& dir);
// Trains a BPE model of `pieces` pieces on a text file: the model's bytes (a SentencePiece
// model, written by whoever keeps it). Throws tetra::Error with SentencePiece's reason on
// failure.
std::string train_bpe(const std::string& text_path, int pieces);

}  // namespace tetra::data
