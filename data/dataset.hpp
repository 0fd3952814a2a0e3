// Training data: where the token sequences come from, and which ones a step takes.
//
// Sources (chosen by --data):
//   synthetic      generated in-process from the seed; has a known entropy floor
//   PATH.bin       llm.c token shard: 256 int32 header (magic, version, token count), then
//                  that many tokens: uint16 (GPT-2's: magic 20240520, version 1) or uint32
//                  (Llama 3's: magic 20240801, version 7)
//   PATH.jsonl     documents, one JSON object a line (data/documents.hpp), each tokenized and
//                  ended with the tokenizer's end-of-text token, cached as a shard beside it
//   DIR or GLOB    the .jsonl documents (else the .bin shards) in a directory or matching a
//                  glob, in sorted order, as one source
//   any other PATH a text file; its bytes are the tokens (byte tokenizer, 256 symbols)
//
// Sequence order (docs/design.md, to the letter): a source of T tokens holds K = floor((T-1)/S)
// sequences; sequence k is tokens k*S .. k*S+S inclusive (S inputs and their S shifted
// targets); step s takes sequences (s*G + j) mod K for j = 0 .. G-1.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/documents.hpp"
#include "data/shard.hpp"
#include "data/tokenizer.hpp"

namespace tetra::data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Number of sequences of length seq_len (K above); the synthetic source is unbounded
  // and returns INT64_MAX.
  virtual int64_t num_sequences() const = 0;
  // Writes seq_len+1 token ids of sequence k (0 <= k < num_sequences()) to out.
  virtual void sequence(int64_t k, int32_t* out) const = 0;
  // Writes the document of each of those seq_len+1 tokens to out, counted from the sequence's
  // first token's (0) and one up after each end-of-text token, which belongs to the document it
  // ends: what a per-document attention mask needs. A source without documents (synthetic, a
  // text file, shards) is one: all 0.
  virtual void document_ids(int64_t k, int32_t* out) const = 0;
  // Cross-entropy floor in nats per predicted token that a perfect model reaches on this
  // source, or a negative number when unknown.
  virtual double entropy_floor() const { return -1.0; }
  // One line for the start-up log: "synthetic (order-1 Markov, floor 1.213 nats)", ...
  virtual std::string describe() const = 0;
};

// Which tokens of a source a dataset sees: all, or under --val-split F the first 1-F
// (training) or the last F (validation). The synthetic source's validation sequences are
// other draws from the same chain.
struct Portion {
  enum Kind { All, Train, Validation } kind = All;
  double fraction = 0;  // F, in (0, 1)
};
// Opens --data. Throws tetra::Error with a clear message for a missing file, a .bin with a
// wrong magic/version or fewer tokens than its header says, a token id not below vocab,
// a bad document (data/documents.hpp), or a source too short to hold one sequence of
// seq_len+1 tokens. Documents are tokenized with `tokenizer` (bytes when null) under
// `documents`' options, or read from their cache.
std::unique_ptr<Dataset> open_dataset(const std::string& spec, int vocab, int seq_len,
                                      uint64_t seed, Portion portion = {},
                                      const Tokenizer* tokenizer = nullptr,
                                      const DocumentOptions& documents = {});

// The tokens of step `step`: sequences j = first .. first+count-1 of the global batch of
// G = global_batch sequences, each seq_len+1 tokens, written one after another to out; and
// when `docs` is given, each token's document (Dataset::document_ids) there in the same order.
void fill_batch(const Dataset& ds, int64_t step, int global_batch, int first, int count,
                int seq_len, int32_t* out, int32_t* docs = nullptr);

}  // namespace tetra::data
