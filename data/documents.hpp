// Documents: JSONL files, one JSON object a line with the document's text under a field ("text",
// --data-field), given to --data as a file, a directory of them or a glob (read in sorted
// order, so that a source is always the same tokens).
//
// Each document becomes the tokenizer's encode_document ids: what it puts before a text (Llama
// 3's <|begin_of_text|>), the text's ids with its special tokens read as plain text, then the
// end-of-text token, so that the end-of-text tokens are exactly the ends of the documents
// (Dataset::document_ids counts them). One file's tokens are cached as one llm.c shard beside
// it (data/token_cache.hpp), named by the file's bytes, the tokenizer's and the options; the
// shard's record counts its documents and the lines skipped.
//
// A line that is not a JSON object with a string under the field, or whose text holds the
// end-of-text token itself (under bytes: byte 3), is an error naming the file and the line; with
// --skip-bad-lines it is skipped and counted instead. Blank lines are no documents, and no
// error.
#pragma once
#include <string>
#include <vector>

#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"

namespace tetra::data {

struct DocumentOptions {
  std::string field = "text";
  bool skip_bad_lines = false;
};

// Whether a file holds documents: its name ends in .jsonl.
bool is_jsonl(const std::string& path);

// The files a --data source names when it is a directory (its .jsonl files when it has any,
// else its .bin shards) or a glob (its matches; a file whose name holds a wildcard character is
// that file), sorted; empty for one file. Throws tetra::Error for a directory or a glob with
// none of them.
std::vector<std::string> source_files(const std::string& spec);

// Whether --data names documents: a .jsonl file, or a directory or glob of them.
bool is_documents(const std::string& spec);
// The JSONL files of a source that is_documents: itself, or its directory's or glob's files.
// Throws tetra::Error for a glob that matches other files too.
std::vector<std::string> document_files(const std::string& spec);

// The cached shard of one JSONL file's documents under `tok`, made now when missing. Throws
// tetra::Error naming the file and line for a bad line (unless o.skip_bad_lines), and for a
// tokenizer with no end-of-text token.
CachedShard tokenize_documents(const std::string& jsonl, const Tokenizer& tok,
                               const DocumentOptions& o);

}  // namespace tetra::data
