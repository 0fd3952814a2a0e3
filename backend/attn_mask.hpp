// The attention mask as data, per (query, key): the one rule every attention path applies (the
// CPU's, the CUDA fp32 kernels', the GEMM fallback's), compiled for the host and the device.
//
// Key j is visible from query i when it is not later in the sequence (k_pos[j] <= q_pos[i],
// global positions, so a CP rank's chunks mask correctly) and, under --doc-mask, when both
// belong to the same document (q_doc, k_doc: each token's document within its sequence,
// Dataset::document_ids). Positions are one sequence's, shared by the batch's sequences;
// documents are per sequence. A query always sees its own key (same position, same
// document), so no row is empty.
#pragma once
#include <cstdint>

#include "util/bf16.hpp"  // TETRA_HD

namespace tetra {

struct AttnMaskView {
  const int32_t* q_pos;  // [Sq]
  const int32_t* k_pos;  // [Sk]
  const int32_t* q_doc;  // [B*Sq], or null: no documents
  const int32_t* k_doc;  // [B*Sk]
  int64_t sq, sk;

  // Whether query i of sequence b sees key j.
  TETRA_HD bool visible(int64_t b, int64_t i, int64_t j) const {
    return k_pos[j] <= q_pos[i] && (!q_doc || q_doc[b * sq + i] == k_doc[b * sk + j]);
  }
};

}  // namespace tetra
