#include "parallel/cp.hpp"

namespace tetra {

std::vector<int32_t> cp_positions(int64_t S, int cp, int c) {
  // Chunk k covers [k*S/(2CP), (k+1)*S/(2CP)): equal chunks when 2*CP divides S (which the
  // trainer requires for CP > 1), and all of an odd-length sequence when CP = 1.
  std::vector<int32_t> pos;
  // exercise(cp_chunks) begin
  const int64_t chunks = 2 * int64_t(cp);
  for (int64_t chunk : {int64_t(c), chunks - 1 - c})
    for (int64_t p = chunk * S / chunks; p < (chunk + 1) * S / chunks; ++p)
      pos.push_back(int32_t(p));
  // exercise(cp_chunks) end
  return pos;
}

std::string cp_ranges(int64_t S, int cp, int c) {
  if (cp == 1) return "0-" + std::to_string(S - 1);
  const std::vector<int32_t> pos = cp_positions(S, cp, c);
  const size_t half = pos.size() / 2;
  return std::to_string(pos.front()) + "-" + std::to_string(pos[half - 1]) + ", " +
         std::to_string(pos[half]) + "-" + std::to_string(pos.back());
}

void cp_slice(const int32_t* seqs, int64_t b, int64_t S, const std::vector<int32_t>& pos,
              int32_t* tokens, int32_t* targets) {
  const int64_t n = int64_t(pos.size());
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t t = 0; t < n; ++t) {
      tokens[i * n + t] = seqs[i * (S + 1) + pos[t]];
      targets[i * n + t] = seqs[i * (S + 1) + pos[t] + 1];
    }
  }
}

int64_t causal_pairs(const std::vector<int32_t>& query_pos, const std::vector<int32_t>& key_pos) {
  int64_t n = 0;
  for (int32_t q : query_pos)
    for (int32_t k : key_pos) n += k <= q;
  return n;
}

Buffer ContextParallel::gather_kv(Backend& be, Buffer local, int64_t batch) const {
  const int cp = comm.size();
  if (cp == 1) return local;
  // all-gather gives [CP, batch, Sl*w]; attention wants [batch, S, w] in sequence order.
  Buffer gathered(be, local.numel() * cp, local.dtype()),
      full(be, local.numel() * cp, local.dtype());
  comm.all_gather(gathered.flat(), local.flat());
  be.cp_zigzag(full.flat(), gathered.flat(), cp, batch, true);
  return full;
}

Buffer ContextParallel::scatter_kv_grad(Backend& be, Buffer full, int64_t batch) const {
  const int cp = comm.size();
  if (cp == 1) return full;
  Buffer by_rank(be, full.numel(), full.dtype()), local(be, full.numel() / cp, full.dtype());
  be.cp_zigzag(by_rank.flat(), full.flat(), cp, batch, false);
  comm.reduce_scatter(local.flat(), by_rank.flat());
  return local;
}

}  // namespace tetra
