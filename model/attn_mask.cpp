// The attention mask hint against the positions it summarizes (model/backend.hpp, AttnMask).
#include "model/backend.hpp"

namespace tetra {

void check_attn_mask(const AttnShape& s, const int32_t* q_pos, const int32_t* k_pos) {
  if (s.mask == AttnMask::General) return;
  // Keys in sequence order, 0..Sk-1, under both hints.
  for (int64_t j = 0; j < s.sk; ++j)
    check(k_pos[j] == j, "attention mask hint: key ", j, " is at position ", k_pos[j],
          ", not in sequence order");
  if (s.mask == AttnMask::Causal) {
    check(s.sq == s.sk, "causal attention mask hint with ", s.sq, " queries and ", s.sk, " keys");
    for (int64_t i = 0; i < s.sq; ++i)
      check(q_pos[i] == i, "causal attention mask hint: query ", i, " is at position ", q_pos[i]);
    return;
  }
  // CpChunks: chunk g of the rank is global chunk c = cp_rank or 2 cp - 1 - cp_rank.
  const int64_t C = s.sq / 2;
  check(s.cp >= 1 && s.cp_rank >= 0 && s.cp_rank < s.cp && s.sq == 2 * C && s.sk == 2 * s.cp * C,
        "CP attention mask hint: cp ", s.cp, ", rank ", s.cp_rank, ", ", s.sq, " queries, ", s.sk,
        " keys");
  for (int64_t i = 0; i < s.sq; ++i) {
    const int64_t g = i / C, c = g == 0 ? s.cp_rank : 2 * s.cp - 1 - s.cp_rank;
    check(q_pos[i] == c * C + i % C, "CP attention mask hint (rank ", s.cp_rank, " of ", s.cp,
          "): query ", i, " is at position ", q_pos[i], ", not ", c * C + i % C);
  }
}

}  // namespace tetra
