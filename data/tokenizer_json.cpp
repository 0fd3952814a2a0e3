#include "data/tokenizer_json.hpp"

#include <algorithm>
#include <filesystem>

#include "data/added_tokens.hpp"
#include "data/bpe.hpp"
#include "data/tokenizer_steps.hpp"
#include "data/utf8.hpp"
#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"

namespace tetra::data {
namespace {

// The largest tokenizer.json read (Llama 3's is 9 MB).
constexpr int64_t kMaxFileBytes = int64_t(1) << 30;

// A file's bytes and its JSON.
struct Loaded {
  std::string bytes;
  json value;
};

Loaded load_json(const std::string& path, const std::string& what) {
  Loaded l;
  const std::string unread = read_input_file(path, l.bytes, kMaxFileBytes);
  check(unread.empty(), what, " '", path, "': ", unread);
  const std::string bad = parse_json(l.bytes, l.value);
  check(bad.empty(), what, " '", path, "': ", bad);
  check(l.value.is_object(), what, " '", path, "' is not a JSON object");
  return l;
}

const json& member(const json& j, const char* name) {
  static const json null;
  return j.contains(name) ? j[name] : null;
}

// The files transformers keeps beside a tokenizer.json in a model directory.
const char* const kBesideFiles[] = {"tokenizer_config.json", "special_tokens_map.json"};

class JsonTokenizer final : public Tokenizer {
 public:
  explicit JsonTokenizer(const std::string& path)
      : JsonTokenizer(path, load_json(path, "tokenizer")) {}

  int vocab() const override { return std::max(model_.size(), added_.size()); }
  std::vector<int> encode(const std::string& text) const override {
    return encode_text(text, true);
  }
  std::vector<int> encode_document(const std::string& text) const override {
    check(eot_ >= 0, where_, " has no end-of-text token to end a document with");
    std::vector<int> ids = post_.apply(encode_text(text, false));
    if (ids.empty() || ids.back() != eot_) ids.push_back(eot_);
    return ids;
  }
  std::string decode(const std::vector<int>& ids) const override {
    std::vector<std::string> tokens;
    for (const int id : ids) {
      const std::string* t = added_.content(id);
      if (t == nullptr) t = model_.token(id);
      if (t != nullptr) tokens.push_back(*t);  // an id of no token decodes to nothing
    }
    return decoder_.decode(tokens);
  }
  int end_of_text() const override { return eot_; }
  int begin_of_text() const override { return bos_; }
  std::string model_file() const override { return path_; }
  std::string kind() const override { return "tokenizer.json"; }
  std::map<std::string, std::string> export_files(int max_length) const override {
    std::map<std::string, std::string> files = beside_;
    files["tokenizer.json"] = bytes_;
    if (!files.count("tokenizer_config.json")) {
      json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                     {"model_max_length", max_length},
                     {"clean_up_tokenization_spaces", false}};
      if (eot_ >= 0) config["eos_token"] = token_text(eot_);
      if (bos_ >= 0) config["bos_token"] = token_text(bos_);
      files["tokenizer_config.json"] = config.dump(2) + "\n";
    }
    return files;
  }

 private:
  JsonTokenizer(const std::string& path, Loaded file)
      : path_(path),
        where_("tokenizer '" + path + "'"),
        bytes_(std::move(file.bytes)),
        normalizer_(checked(file.value, where_), where_ + ": normalizer"),
        model_(member(file.value, "model"), where_),
        pre_(member(file.value, "pre_tokenizer"), where_ + ": pre_tokenizer"),
        post_(member(file.value, "post_processor"), where_ + ": post_processor"),
        decoder_(member(file.value, "decoder"), where_ + ": decoder"),
        added_(member(file.value, "added_tokens"), model_, normalizer_, where_) {
    read_beside();
    eot_ = end_token();
    bos_ = post_.first_token();
    if (bos_ < 0) bos_ = config_token("bos_token");
  }

  // The top level's fields that change encoding beyond its steps, refused; then the normalizer.
  static const json& checked(const json& j, const std::string& where) {
    const json& version = member(j, "version");
    check(version.is_null() || version == "1.0", where, ": version ", version.dump(),
          " is not supported (tetra reads 1.0)");
    for (const char* name : {"truncation", "padding"})
      check(member(j, name).is_null(), where, ": ", name, " ", member(j, name).dump(),
            " is not supported (it would cut or pad every text)");
    return member(j, "normalizer");
  }

  // transformers' files beside a tokenizer.json in a model directory, kept for the export.
  void read_beside() {
    const std::filesystem::path p(path_);
    if (p.filename() != "tokenizer.json") return;
    for (const char* name : kBesideFiles) {
      const std::string file = (p.parent_path() / name).string();
      std::error_code ec;
      if (!std::filesystem::exists(file, ec)) continue;
      const Loaded l = load_json(file, "tokenizer configuration");
      beside_[name] = l.bytes;
      if (std::string(name) == "tokenizer_config.json") config_ = l.value;
    }
  }

  // The id of tokenizer_config.json's token `name` (a string, or {"content": ...}), or -1.
  int config_token(const char* name) const {
    const json& v = member(config_, name);
    if (v.is_null()) return -1;
    const json& content = v.is_object() ? member(v, "content") : v;
    check(content.is_string(), "tokenizer configuration beside '", path_, "': ", name, " is ",
          v.dump(), ", not a token");
    const std::string text = content.get<std::string>();
    const AddedToken* added = added_.find(text);
    const int id = added ? added->id : model_.id(text);
    check(id >= 0, "tokenizer configuration beside '", path_, "': ", name, " '", text,
          "' is not a token of the tokenizer");
    return id;
  }

  int end_token() const {
    const int configured = config_token("eos_token");
    if (configured >= 0) return configured;
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"})
      if (const AddedToken* t = added_.find(name)) return t->id;
    return -1;
  }

  std::string token_text(int id) const {
    const std::string* t = added_.content(id);
    if (t == nullptr) t = model_.token(id);
    return t ? *t : "";
  }

  std::vector<int> encode_text(const std::string& text, bool match_special) const {
    const size_t bad = utf8_error(text);
    check(bad == std::string::npos, "the text is not UTF-8 (at byte ", bad,
          "), and a tokenizer.json reads UTF-8 only");
    std::vector<int> ids;
    for (const Piece& raw : added_.split(text, false, match_special)) {
      if (raw.id >= 0) {
        ids.push_back(raw.id);
        continue;
      }
      for (const Piece& piece : added_.split(normalizer_.apply(raw.text), true, match_special)) {
        if (piece.id >= 0) {
          ids.push_back(piece.id);
          continue;
        }
        for (const std::string& word : pre_.split(piece.text)) model_.tokenize(word, ids);
      }
    }
    return ids;
  }

  std::string path_, where_, bytes_;
  Normalizer normalizer_;
  Bpe model_;
  PreTokenizer pre_;
  PostProcessor post_;
  Decoder decoder_;
  AddedTokens added_;
  std::map<std::string, std::string> beside_;  // file name -> bytes
  json config_;                                // tokenizer_config.json, or null
  int eot_ = -1, bos_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  check(have_pcre2(), "tokenizer '", path,
        "': this build has no PCRE2 (libpcre2-dev was not found when tetra was configured), "
        "which tokenizer.json's patterns need");
  return std::make_unique<JsonTokenizer>(path);
}

}  // namespace tetra::data
