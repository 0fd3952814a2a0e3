#include "parallel/retire.hpp"

#include <map>

namespace tetra {
namespace {

// One chunk of a rank: its model chunk id and the ranks of the chunks before and after it
// (-1: none), found once per virtual stage rather than once per action.
struct Chunk {
  int k, prev, next;
};

std::vector<Chunk> chunks_of(ScheduleKind kind, int pp, int vpp, int rank) {
  const Placement place = placement(kind);
  const int K = pp * vpp;
  std::vector<Chunk> out;
  for (int v = 0; v < vpp; ++v) {
    const int k = chunk_id(place, pp, rank, v);
    out.push_back({k, k > 0 ? chunk_rank(place, pp, vpp, k - 1) : -1,
                   k < K - 1 ? chunk_rank(place, pp, vpp, k + 1) : -1});
  }
  return out;
}

// The messages one action receives and sends, with their peers (-1: none).
struct Hop {
  PipeMessage in{}, out{};
  int from = -1, to = -1;
};

Hop hop(const std::vector<Chunk>& chunks, const Action& a) {
  const Chunk& c = chunks[size_t(a.chunk)];
  Hop h;
  if (a.kind == Action::Forward) {  // the activation in from prev, out to next
    h.in = {false, c.k, a.micro_batch};
    h.out = {false, c.k + 1, a.micro_batch};
    h.from = c.prev;
    h.to = c.next;
  } else if (a.kind == Action::Backward) {  // the gradient in from next, out to prev
    h.in = {true, c.k, a.micro_batch};
    h.out = {true, c.k - 1, a.micro_batch};
    h.from = c.next;
    h.to = c.prev;
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
                           ScheduleMode mode, int weight_delay) {
  const Placement place = placement(kind);
  const int m = micro_batches;
  const std::vector<Chunk> own = chunks_of(kind, pp, vpp, rank);
  // Per peer (the ranks of the chunks next to this rank's, itself left out): the messages of
  // this rank's it receives, in its order, and for each message it sends here, how many of
  // them it had received when it made it; and how many of them are retired so far.
  struct Peer {
    std::vector<PipeMessage> received;
    std::vector<int> proves;
    int done = 0;
  };
  std::map<int, Peer> peers;
  for (const Chunk& c : own)
    for (int q : {c.prev, c.next})
      if (q >= 0 && q != rank) peers[q];
  for (auto& [q, peer] : peers) {
    peer.proves.assign(size_t(2) * vpp * m, 0);
    const std::vector<Chunk> theirs = chunks_of(kind, pp, vpp, q);
    for (const Action& a : make_schedule(kind, pp, vpp, m, q, mode, weight_delay)) {
      const Hop h = hop(theirs, a);
      if (h.from == rank) peer.received.push_back(h.in);
      if (h.to == rank) peer.proves[slot(h.out, place, pp, vpp, m)] = int(peer.received.size());
    }
  }
  // Walk this rank's list: each receive from a peer retires what it proves, less what an
  // earlier one did.
  RetiredSends out;
  for (const Action& a : make_schedule(kind, pp, vpp, m, rank, mode, weight_delay)) {
    out.first.push_back(int(out.messages.size()));
    const Hop h = hop(own, a);
    if (h.from < 0 || h.from == rank) continue;
    Peer& peer = peers.at(h.from);
    for (const int n = peer.proves[slot(h.in, place, pp, vpp, m)]; peer.done < n; ++peer.done)
      out.messages.push_back(peer.received[size_t(peer.done)]);
  }
  out.first.push_back(int(out.messages.size()));
  for (auto& [q, peer] : peers) out.to_peer[q] = std::move(peer.received);
  return out;
}

}  // namespace tetra
