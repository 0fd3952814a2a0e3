#include "parallel/retire.hpp"

#include <map>
#include <set>

namespace tetra {
namespace {

// The messages one action of `rank` receives and sends, with their peers (-1: none).
struct Hop {
  PipeMessage in{}, out{};
  int from = -1, to = -1;
};

Hop hop(ScheduleKind kind, int pp, int vpp, int rank, const Action& a) {
  const Placement place = placement(kind);
  const int K = pp * vpp, k = chunk_id(place, pp, rank, a.chunk);
  Hop h;
  if (a.kind == Action::Forward) {
    if (k > 0) {
      h.in = {false, k, a.micro_batch};
      h.from = chunk_rank(place, pp, vpp, k - 1);
    }
    if (k < K - 1) {
      h.out = {false, k + 1, a.micro_batch};
      h.to = chunk_rank(place, pp, vpp, k + 1);
    }
  } else if (a.kind == Action::Backward) {
    if (k < K - 1) {
      h.in = {true, k, a.micro_batch};
      h.from = chunk_rank(place, pp, vpp, k + 1);
    }
    if (k > 0) {
      h.out = {true, k - 1, a.micro_batch};
      h.to = chunk_rank(place, pp, vpp, k - 1);
    }
  }
  return h;
}

int key(const PipeMessage& x, int K, int m) {
  return (int(x.gradient) * K + x.chunk) * m + x.micro_batch;
}

}  // namespace

std::vector<std::vector<PipeMessage>> retired_sends(ScheduleKind kind, int pp, int vpp,
                                                    int micro_batches, int rank,
                                                    ScheduleMode mode) {
  const int K = pp * vpp, m = micro_batches;
  const std::vector<Action> mine = make_schedule(kind, pp, vpp, m, rank, mode);
  std::set<int> peers;  // the ranks of the chunks next to this rank's, itself left out
  for (const Action& a : mine) {
    const Hop h = hop(kind, pp, vpp, rank, a);
    for (int q : {h.from, h.to})
      if (q >= 0 && q != rank) peers.insert(q);
  }
  std::vector<std::vector<PipeMessage>> retired(mine.size());
  for (int q : peers) {
    // Walk q's list: the messages of this rank's it has received so far, and for each
    // message it sends here, how many of them it had when it made it.
    std::vector<PipeMessage> received;
    std::map<int, size_t> proves;  // by the key of q's message to this rank
    for (const Action& a : make_schedule(kind, pp, vpp, m, q, mode)) {
      const Hop h = hop(kind, pp, vpp, q, a);
      if (h.from == rank) received.push_back(h.in);
      if (h.to == rank) proves[key(h.out, K, m)] = received.size();
    }
    // Walk this rank's: each receive from q retires what it proves and nothing retired before.
    size_t done = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      const Hop h = hop(kind, pp, vpp, rank, mine[i]);
      if (h.from != q) continue;
      for (const size_t n = proves.at(key(h.in, K, m)); done < n; ++done)
        retired[i].push_back(received[done]);
    }
  }
  return retired;
}

}  // namespace tetra
