#include "data/tokenizer.hpp"

#include <filesystem>

#include "data/tokenizer_json.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"

#ifdef TETRA_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace tetra::data {
namespace {

class Bytes final : public Tokenizer {
 public:
  int vocab() const override { return 256; }
  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::string text;
    for (int id : ids) text += static_cast<char>(id & 0xff);
    return text;
  }
  int end_of_text() const override { return kByteEndOfText; }
  std::string kind() const override { return "bytes"; }
};

#ifdef TETRA_HAVE_SENTENCEPIECE
class SentencePiece final : public Tokenizer {
 public:
  // The model's bytes, read from `path` (or to be written there: a model trained now).
  SentencePiece(const std::string& path, const std::string& bytes) : path_(path) {
    const auto status = sp_.LoadFromSerializedProto(bytes);
    check(status.ok(), "tokenizer '", path, "': not a SentencePiece model (", status.ToString(),
          ")");
  }
  int vocab() const override { return sp_.GetPieceSize(); }
  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    check(status.ok(), "tokenizer '", path_, "': ", status.ToString());
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::string text;
    const auto status = sp_.Decode(ids, &text);
    check(status.ok(), "tokenizer '", path_, "': ", status.ToString());
    return text;
  }
  int end_of_text() const override { return sp_.eos_id(); }
  int begin_of_text() const override { return sp_.bos_id(); }
  std::string model_file() const override { return path_; }
  std::string kind() const override { return "sentencepiece"; }
  // tokenizer.model, and tokenizer_config.json for transformers' LlamaTokenizer: no BOS or EOS
  // added, as tetra encodes.
  std::map<std::string, std::string> export_files(int max_length) const override {
    std::string bytes;
    const std::string problem = read_input_file(path_, bytes);
    check(problem.empty(), "cannot read the tokenizer '", path_, "': ", problem);
    json config = {{"tokenizer_class", "LlamaTokenizer"},
                   {"model_max_length", max_length},
                   {"add_bos_token", false},
                   {"add_eos_token", false}};
    for (const auto& [name, id] : {std::pair<const char*, int>{"bos_token", sp_.bos_id()},
                                   {"eos_token", sp_.eos_id()},
                                   {"unk_token", sp_.unk_id()}})
      if (id >= 0) config[name] = sp_.IdToPiece(id);
    return {{"tokenizer.model", bytes}, {"tokenizer_config.json", config.dump(2) + "\n"}};
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
};
#endif

}  // namespace

std::unique_ptr<Tokenizer> byte_tokenizer() {
  return std::make_unique<Bytes>();
}

std::vector<int> Tokenizer::encode_document(const std::string& text) const {
  std::vector<int> ids = encode(text);
  ids.push_back(end_of_text());
  return ids;
}

std::string decode_continuation(const Tokenizer& tok, const std::vector<int>& context,
                                const std::vector<int>& ids) {
  std::vector<int> all = context;
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string whole = tok.decode(all), head = tok.decode(context);
  if (whole.compare(0, head.size(), head) == 0) return whole.substr(head.size());
  return tok.decode(ids);  // the context decodes differently at the join: no better cut
}

bool have_sentencepiece() {
#ifdef TETRA_HAVE_SENTENCEPIECE
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path) {
  std::string bytes;
  if (have_sentencepiece()) {  // else the build's lack is the problem, said below
    const std::string problem = read_input_file(model_path, bytes);
    check(problem.empty(), "tokenizer '", model_path, "': ", problem);
  }
  return load_sentencepiece(model_path, bytes);
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path,
                                              const std::string& bytes) {
#ifdef TETRA_HAVE_SENTENCEPIECE
  return std::make_unique<SentencePiece>(model_path, bytes);
#else
  fail("tokenizer '", model_path,
       "': this build has no SentencePiece (libsentencepiece-dev was not found when tetra was "
       "configured)");
#endif
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path.ends_with(".json")) return load_tokenizer_json(path);
  return load_sentencepiece(path);
}

std::string model_dir_tokenizer(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "";
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    if (std::filesystem::exists(path, ec)) return path;
  }
  return "";
}

std::string train_bpe(const std::string& text_path, int pieces) {
#ifdef TETRA_HAVE_SENTENCEPIECE
  // Llama's settings: BPE, no normalization (text decodes back exactly), digits split, bytes
  // for what the pieces do not cover (a newline, a rare character), ids 0-2 for <unk>, <s>
  // and </s>. One thread, so that the same text always gives the same model.
  std::string serialized;
  const auto status =
      sentencepiece::SentencePieceTrainer::Train({{"input", text_path},
                                                  {"model_type", "bpe"},
                                                  {"vocab_size", std::to_string(pieces)},
                                                  {"character_coverage", "1.0"},
                                                  {"normalization_rule_name", "identity"},
                                                  {"remove_extra_whitespaces", "false"},
                                                  {"byte_fallback", "true"},
                                                  {"split_digits", "true"},
                                                  {"max_sentence_length", "100000"},
                                                  {"input_sentence_size", "1000000"},
                                                  {"shuffle_input_sentence", "false"},
                                                  {"num_threads", "1"},
                                                  {"minloglevel", "2"}},
                                                 nullptr, &serialized);
  check(status.ok(), "`data.tokenizer` bpe:", pieces, " on '", text_path,
        "': SentencePiece could not train: ", status.ToString());
  return serialized;
#else
  fail("`data.tokenizer` bpe:", pieces,
       ": this build has no SentencePiece (libsentencepiece-dev was not found when tetra was "
       "configured)");
#endif
}

}  // namespace tetra::data
