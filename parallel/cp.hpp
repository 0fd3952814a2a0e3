// Context parallelism as Llama 3 trains long sequences: each sequence of S tokens is cut
// into 2*CP equal chunks and CP rank c holds chunks c and 2*CP-1-c. Under a causal mask
// the early chunks attend to few keys and the late ones to many, so pairing chunk c with
// its mirror gives every rank the same attention work.
//
// Everything but attention is per token, so it runs on the local tokens alone (RoPE at
// their global positions). Attention all-gathers K and V over the CP group and puts them in
// sequence order, so that each local query chunk sees a prefix of the keys (what fused
// attention kernels take, AttnMask::CpChunks), under the causal mask by global position;
// backward applies the inverse permutation and reduce-scatters dK and dV back to the ranks
// that own those tokens. The weights are
// replicated over CP, so their gradients are reduced over dp_cp together with DP.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

// Global positions of the tokens CP rank c holds in a sequence of S tokens (S / CP of them:
// chunk c, then chunk 2*CP-1-c).
std::vector<int32_t> cp_positions(int64_t S, int cp, int c);

// Those positions as reports print them: "0-15, 48-63"; without CP one range, "0-63".
std::string cp_ranges(int64_t S, int cp, int c);

// The rank's share of b sequences of S + 1 tokens (seqs [b, S+1]): tokens[i, t] =
// seqs[i, pos[t]] and targets[i, t] = seqs[i, pos[t] + 1], both [b, pos.size()].
void cp_slice(const int32_t* seqs, int64_t b, int64_t S, const std::vector<int32_t>& pos,
              int32_t* tokens, int32_t* targets);

// Query-key pairs a CP rank scores under the causal mask, per sequence: the attention work
// that the chunk pairing balances.
int64_t causal_pairs(const std::vector<int32_t>& query_pos, const std::vector<int32_t>& key_pos);

struct ContextParallel {
  Comm& comm;

  int size() const { return comm.size(); }
  // Keys (or values) of this rank's tokens [batch * Sl, w] -> every rank's, laid out
  // [batch, S, w] in sequence order (key positions 0..S-1): the all-gather's [CP, batch, Sl, w]
  // permuted by Backend::cp_zigzag.
  Buffer gather_kv(Backend& be, Buffer local, int64_t batch) const;
  // Gradient [batch, S, w] -> this rank's tokens [batch * Sl, w], summed over ranks: the
  // inverse permutation, then a reduce-scatter.
  Buffer scatter_kv_grad(Backend& be, Buffer full, int64_t batch) const;
};

}  // namespace tetra
