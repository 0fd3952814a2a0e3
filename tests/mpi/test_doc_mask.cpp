// --doc-mask, attention within documents, on JSONL documents whose end-of-text tokens fall
// inside the sequences: CP 2 (the gathered keys' documents are the whole sequence's, which
// every CP rank has), CP 2 x TP 2 and PP 2, in fp32 and bf16, each against one rank with the
// mask; and the mask against no mask on one rank, so that the layouts compare a mask that
// changes what the model computes.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "layout_check.hpp"

using namespace tetra;
using namespace tetra::test;

namespace {

// Documents of 2 to 22 bytes (and the end-of-text byte after each), so that a sequence of 16
// tokens holds one to several of them and their ends fall anywhere, in either CP rank's chunks.
std::string documents_file() {
  char templ[] = "/tmp/tetra_doc_mask_XXXXXX";
  if (world_rank() == 0) REQUIRE(::mkdtemp(templ) != nullptr);
  MPI_Bcast(templ, sizeof templ, MPI_CHAR, 0, MPI_COMM_WORLD);
  const std::string path = std::string(templ) + "/docs.jsonl";
  if (world_rank() == 0) {
    std::ofstream out(path);
    const std::string words = "the quick brown fox jumps over the lazy dog and runs away again";
    for (int i = 0; i < 200; ++i) {
      const int n = 2 + (i * 7) % 21, at = (i * 5) % int(words.size() - n);
      out << "{\"text\": \"" << words.substr(at, n) << "\"}\n";
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

}  // namespace

TEST_CASE("doc mask: CP 2, CP 2 x TP 2 and PP 2 equal one rank, fp32 and bf16") {
  const std::string docs = documents_file();
  for (const char* dtype : {"fp32", "bf16"}) {
    TrainConfig one = tiny_model(4);
    one.data.data = docs;
    one.model.doc_mask = true;
    one.device.dtype = dtype;
    const RunResult ref = run_on(one, 4);
    if (std::string(dtype) == "fp32") {
      // The mask is in force: without it the same model on the same batch computes otherwise.
      TrainConfig plain = one;
      plain.model.doc_mask = false;
      const RunResult causal = run_on(plain, 1);
      if (world_rank() == 0) CHECK(std::abs(causal.losses[0] - ref.losses[0]) > 1e-4);
    }
    struct L {
      int tp, cp, pp;
    };
    for (const L l : {L{1, 2, 1}, L{2, 2, 1}, L{1, 1, 2}}) {
      const TrainConfig c = laid_out(one, l.tp, l.cp, l.pp, 1);
      const RunResult run = run_on(c, 4);
      if (world_rank() != 0) continue;
      const std::string name = describe(c) + ", doc mask";
      CAPTURE(name);
      MESSAGE(name << ": largest relative loss difference "
                   << largest_loss_gap(ref.losses, run.losses));
      const std::string diff = compare(ref, run, match_bounds(dtype));
      CHECK_MESSAGE(diff.empty(), diff);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::error_code ec;
  if (world_rank() == 0) std::filesystem::remove_all(std::filesystem::path(docs).parent_path(), ec);
}
