#include "data/documents.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "util/error.hpp"
#include "util/input_file.hpp"
#include "util/json.hpp"

namespace tetra::data {
namespace {

// Why one line is not a document under `o`, or "" with its ids in `ids`.
std::string read_document(const std::string& line, const Tokenizer& tok, const DocumentOptions& o,
                          std::vector<int>& ids) {
  json doc;
  const std::string bad = parse_json(line, doc);
  if (!bad.empty()) return bad;
  if (!doc.is_object()) return "not a JSON object";
  if (!doc.contains(o.field) || !doc[o.field].is_string())
    return "has no string \"" + o.field + "\" (`data.data_field`)";
  ids = tok.encode_document(doc[o.field].get<std::string>());
  // The end-of-text token ends the document only: one inside would end it early.
  if (std::find(ids.begin(), ids.end() - 1, tok.end_of_text()) != ids.end() - 1)
    return "its text holds the end-of-text token (id " + std::to_string(tok.end_of_text()) +
           (tok.kind() == "bytes" ? ", byte 3" : "") + "), which ends a document";
  return "";
}

}  // namespace

bool is_jsonl(const std::string& path) {
  return path.ends_with(".jsonl");
}

std::vector<std::string> source_files(const std::string& spec) {
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) {
    std::vector<std::string> shards;
    for (const auto& e : std::filesystem::directory_iterator(spec, ec)) {
      if (is_jsonl(e.path().string())) files.push_back(e.path().string());
      if (e.path().extension() == ".bin") shards.push_back(e.path().string());
    }
    // Documents leave their token caches (.bin) beside them: a directory with documents is one
    // of documents.
    if (files.empty()) files = shards;
    check(!files.empty(), "data directory '", spec, "' holds no .jsonl documents or .bin shards");
  } else if (spec.find_first_of("*?[") != std::string::npos && !std::filesystem::exists(spec, ec)) {
    // A file whose name holds a wildcard character ("notes [draft].txt") is that file.
    glob_t g;
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    check(!files.empty(), "data '", spec, "' matches no file");
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool is_documents(const std::string& spec) {
  if (spec == "synthetic") return false;
  const std::vector<std::string> files = source_files(spec);
  if (files.empty()) return is_jsonl(spec);
  return std::any_of(files.begin(), files.end(), is_jsonl);
}

std::vector<std::string> document_files(const std::string& spec) {
  std::vector<std::string> files = source_files(spec);
  if (files.empty()) files.push_back(spec);
  for (const std::string& f : files)
    check(is_jsonl(f), "data '", spec, "': '", f,
          "' is not a .jsonl file of documents (a directory or a glob takes documents or "
          "shards, not both)");
  return files;
}

CachedShard tokenize_documents(const std::string& jsonl, const Tokenizer& tok,
                               const DocumentOptions& o) {
  const int eot = tok.end_of_text();
  check(eot >= 0, "tokenizer '", tok.model_file(),
        "' has no end-of-text token to end documents with (tetra takes tokenizer_config.json's "
        "eos_token beside a tokenizer.json, else its added token <|endoftext|>, <|end_of_text|> "
        "or </s>)");
  std::string recipe = "bytes";
  if (!tok.model_file().empty()) {
    const std::string problem = read_input_file(tok.model_file(), recipe);
    check(problem.empty(), "tokenizer '", tok.model_file(), "': ", problem);
  }
  recipe += "\ndocuments: field " + o.field + ", skip bad lines " +
            std::to_string(o.skip_bad_lines) + ", end of text " + std::to_string(eot);
  return cached_tokens(jsonl, recipe, [&](const std::string& bytes) {
    Made made;
    made.width = token_width(tok.vocab());
    int64_t line_no = 0;
    std::vector<int> ids;
    for (size_t at = 0; at < bytes.size();) {
      const size_t end = std::min(bytes.find('\n', at), bytes.size());
      const std::string line = bytes.substr(at, end - at);
      at = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank
      const std::string bad = read_document(line, tok, o, ids);
      if (!bad.empty()) {
        const std::string where = jsonl + ":" + std::to_string(line_no);
        check(o.skip_bad_lines, "data file ", where, ": ", bad,
              " (`data.skip_bad_lines` skips such lines)");
        if (made.skipped++ == 0) made.first_skipped = where + ": " + bad;
        continue;
      }
      made.tokens.insert(made.tokens.end(), ids.begin(), ids.end());
      ++made.documents;
    }
    return made;
  });
}

}  // namespace tetra::data
