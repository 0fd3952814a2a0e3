#include "parallel/retire.hpp"

#include <map>

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

// Where q's message x to `rank` sits in a table of 2 V m: by kind, rank's virtual stage of
// the receiving chunk, micro-batch.
size_t slot(const PipeMessage& x, Placement place, int pp, int vpp, int m) {
  return (size_t(x.gradient) * vpp + chunk_virtual_stage(place, pp, x.chunk)) * m + x.micro_batch;
}

}  // namespace

RetiredSends retired_sends(ScheduleKind kind, int pp, int vpp, int micro_batches, int rank,
                           ScheduleMode mode) {
  const Placement place = placement(kind);
  const int m = micro_batches;
  const std::vector<Action> mine = make_schedule(kind, pp, vpp, m, rank, mode);
  std::vector<Hop> hops;
  hops.reserve(mine.size());
  for (const Action& a : mine) hops.push_back(hop(kind, pp, vpp, rank, a));
  // Per peer (the ranks of the chunks next to this rank's, itself left out): the messages of
  // this rank's it receives, in its order, and for each message it sends here, how many of
  // them it had received when it made it; and how many of them are retired so far.
  struct Peer {
    std::vector<PipeMessage> received;
    std::vector<size_t> proves;
    size_t done = 0;
  };
  std::map<int, Peer> peers;
  for (const Hop& h : hops)
    for (int q : {h.from, h.to})
      if (q >= 0 && q != rank) peers[q];
  for (auto& [q, peer] : peers) {
    peer.proves.assign(size_t(2) * vpp * m, 0);
    for (const Action& a : make_schedule(kind, pp, vpp, m, q, mode)) {
      const Hop h = hop(kind, pp, vpp, q, a);
      if (h.from == rank) peer.received.push_back(h.in);
      if (h.to == rank) peer.proves[slot(h.out, place, pp, vpp, m)] = peer.received.size();
    }
  }
  // Walk this rank's list: each receive from a peer retires what it proves, less what an
  // earlier one did.
  RetiredSends out;
  out.first.reserve(mine.size() + 1);
  for (const Hop& h : hops) {
    out.first.push_back(out.messages.size());
    if (h.from < 0 || h.from == rank) continue;
    Peer& peer = peers.at(h.from);
    for (const size_t n = peer.proves[slot(h.in, place, pp, vpp, m)]; peer.done < n; ++peer.done)
      out.messages.push_back(peer.received[peer.done]);
  }
  out.first.push_back(out.messages.size());
  return out;
}

}  // namespace tetra
