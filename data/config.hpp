// The input section of a run's configuration: what it trains on, what it validates on and how
// text becomes tokens.
#pragma once
#include <cstdint>
#include <string>

#include "util/settings.hpp"

namespace tetra {

struct DataConfig {
  // synthetic, a text file, llm.c .bin token shards, or JSONL documents (data/documents.hpp)
  std::string data = "synthetic";
  std::string data_field = "text";  // the documents' text is this field of each line's object
  bool skip_bad_lines = false;      // skip (and count) a bad line of documents, not stop
  // Validation: --val-data, or the last val_split of data's tokens (0: none); evaluated
  // every eval_every steps (0: after the last only) on eval_batches global batches.
  std::string val_data;
  double val_split = 0;
  int64_t eval_every = 0;
  int eval_batches = 4;
  // "" (bytes), "bpe:N" (train a BPE model of N pieces on data), a SentencePiece .model file
  // or a tokenizer.json; text and documents are tokenized into .bin shards cached beside them.
  std::string tokenizer;
};
// A resumed run may train on other data where --allow-change names it; whether bad lines are
// skipped (a run either skipped none, or stops at one without it), validation and the tokenizer
// (of the text the data names) do not enter the state, and the last two are one run's own.
inline const settings::Table<DataConfig> kDataKeys{
    "data",
    "Input",
    {.resume = settings::Resume::Fixed},
    {settings::key(&DataConfig::data, "data", "SRC",
                   "synthetic, a text file, an llm.c .bin token shard, or JSONL documents (one "
                   "object a line); a directory or a glob of shards or of documents")
         .on_resume(settings::Resume::Changeable),
     settings::key(&DataConfig::data_field, "data_field", "NAME",
                   "the field of each JSONL line that holds the document's text"),
     settings::key(&DataConfig::skip_bad_lines, "skip_bad_lines", "",
                   "skip a JSONL line that is not a document (and count them) instead of "
                   "stopping at it")
         .on_resume(settings::Resume::Free),
     settings::key(&DataConfig::val_data, "val_data", "SRC", "validation data (as `data.data`)")
         .on_resume(settings::Resume::Free)
         .sweep(false),
     settings::key(&DataConfig::val_split, "val_split", "F",
                   "validate on the last fraction F of `data.data`'s tokens and train on the rest",
                   settings::number_rule([](double f) { return f > 0 && f < 1; },
                                         "must be between 0 and 1, exclusive"))
         .on_resume(settings::Resume::Free)
         .sweep(false),
     settings::key(&DataConfig::eval_every, "eval_every", "N",
                   "validation loss every N steps and after the last (0: after the last only)",
                   settings::non_negative())
         .on_resume(settings::Resume::Free)
         .sweep(false),
     settings::key(&DataConfig::eval_batches, "eval_batches", "N",
                   "global batches of validation sequences, the same ones at every evaluation",
                   settings::at_least_1())
         .on_resume(settings::Resume::Free)
         .sweep(false),
     settings::key(&DataConfig::tokenizer, "tokenizer", "bpe:N|FILE",
                   "tokenize text data: bpe:N trains a SentencePiece BPE model of N pieces on "
                   "`data.data`, FILE is a SentencePiece .model or a tokenizer.json (default: "
                   "bytes); the tokens are cached beside the data")
         .on_resume(settings::Resume::Free)
         .sweep(false)}};

}  // namespace tetra
