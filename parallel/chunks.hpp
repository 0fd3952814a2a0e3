// How the layers are cut into pipeline chunks: PP * V chunks of consecutive blocks; chunk k
// lives where the schedule's placement puts it (parallel/schedule.hpp): looped on pipeline
// rank k mod PP as its virtual stage k / PP, as a V (zb-v) on rank k for k < PP and on rank
// 2 PP - 1 - k after (so rank 0 holds the embedding and the head). Either way a rank's chunks
// in model order are its virtual stages in order. Chunk 0 also holds the
// embedding, chunk PP*V - 1 the final norm and the head. When PP*V does not divide the
// layers, the first L mod (PP*V) chunks take one block more; a layout with more chunks
// than layers is refused. With `ends` (layout.pp_balance ends) the embedding and the head count
// as one block each: L + 2 slots are cut as above, so the first and the last chunk hold a
// block fewer (Llama 3 405B: 126 layers over 16 stages, 7, 8, ..., 8, 7).
#pragma once
#include <string>
#include <vector>

#include "parallel/schedule.hpp"

namespace tetra {

// unit_stage[g]: the pipeline rank that holds global unit g (embedding 0, blocks 1..L,
// head L+1); local_unit[g]: its index in params on that stage, or -1 elsewhere.
// Tied embeddings where the head is on another stage than the embedding (looped PP > 1,
// Megatron's embedding group): the last stage holds a copy of the embedding unit for the LM
// head, after its own units; tied_copy is its index there (-1 on every other stage, and where
// one stage holds both ends, PP 1 or the V placement, where the head reads the embedding unit
// itself).
struct UnitPlacement {
  std::vector<int> unit_stage;
  std::vector<int> local_unit;
  int tied_copy = -1;
  // The local unit whose matrix the LM head reads under tied embeddings: the copy, or at PP 1
  // the embedding unit; -1 where the stage has no head or the embeddings are untied.
  int head_matrix = -1;
};

struct ChunkPlan {
  int stage = 0;           // pipeline rank
  int virtual_stage = 0;   // index among that rank's chunks
  std::vector<int> units;  // global unit ids: 0 embedding, 1 + l block l, L + 1 head
};

// All PP*V chunks, in model order, placed by `placement`. Throws tetra::Error when PP*V >
// layers, or with `ends` when a chunk would hold no block.
std::vector<ChunkPlan> plan_chunks(int layers, int pp, int vpp, bool ends = false,
                                   Placement placement = Placement::Looped);

// Which stage holds each global unit, and its index among the units of that stage (units
// of a stage are numbered in the order of its chunks; under `tied` embeddings the last stage's
// copy of the embedding follows them).
UnitPlacement place_units(const std::vector<ChunkPlan>& chunks, int layers, int stage,
                          bool tied = false);

// The layers a chunk of a model of `layers` blocks holds, as reports print them: "embed+0-3",
// "4-7", "8-11+head".
std::string chunk_label(const ChunkPlan& chunk, int layers);
// The labels of the chunks pipeline rank `stage` holds, in order: "embed+0-1, 4-5".
std::string stage_label(const std::vector<ChunkPlan>& chunks, int stage, int layers);

}  // namespace tetra
