// The process grid: world = TP * CP * PP * DP ranks, numbered
//   rank = tp + TP * (cp + CP * (pp + PP * dp)),
// so TP varies fastest (a TP group shares a machine's fast links) and DP is outermost
// (its traffic overlaps with compute). Each rank belongs to one group per dimension, plus
// dp_cp: the ranks holding the same weights (weights are replicated over CP as over DP),
// over which gradients are reduced and optimizer state is sharded; and, for tied embeddings
// at PP > 1, embed (Megatron's embedding group): the first and the last pipeline stage of one
// (tp, cp, dp) coordinate, which both hold the tied matrix and sum its gradients (a group of
// one on the stages between).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "parallel/comm.hpp"

namespace tetra {

struct Layout {
  int tp = 1, cp = 1, pp = 1, dp = 1;
  int world() const { return tp * cp * pp * dp; }
  std::string str() const;  // "TP 2 x CP 1 x PP 2 x DP 4"
};

struct Coord {
  int tp = 0, cp = 0, pp = 0, dp = 0;
};

inline int rank_of(const Layout& l, const Coord& c) {
  return c.tp + l.tp * (c.cp + l.cp * (c.pp + l.pp * c.dp));
}
Coord coord_of(const Layout& l, int rank);

// Fills the dimensions left at 0 (only dp may be) from the world size, and checks that
// the product is the world size. Throws tetra::Error otherwise.
Layout resolve_layout(int tp, int cp, int pp, int dp, int world);

struct Grid {
  Layout layout;
  int rank = 0;
  Coord coord;
  std::unique_ptr<Comm> world, tp, cp, pp, dp, dp_cp;
  std::unique_ptr<Comm> embed;  // tied embeddings at PP > 1 only, else null
  // "tp nccl, cp mpi, pp self, ...": the communicator each group got.
  std::string comm_kinds() const;
};

// Whether two ranks of `comm` compute on the same device (a GPU shared by several ranks).
// Collective over comm.
bool shares_device(MPI_Comm comm, const Backend& be);

// Which communicator a group gets (--comm). Mpi: MPI for every group of two or more ranks.
// Auto: NCCL for a group of two or more whose ranks each have a GPU of their own (where the
// build has NCCL), else MPI. Nccl: NCCL for every such group, groups of one included (what one
// GPU can test of NCCL). A group of one gets the group of one (self_comm.hpp) but under Nccl.
enum class CommChoice { Mpi, Auto, Nccl };
CommChoice comm_choice(const std::string& flag);  // "mpi", "auto" or "nccl"

// Collective over `world`: every rank must call it with the same layout, choice and tied.
// Every group's tensors live in be's memory. tied: make the embedding group (at PP > 1; the
// caller passes false where one stage holds both ends, as zb-v's V placement does).
Grid make_grid(MPI_Comm world, const Layout& layout, Backend& be,
               CommChoice choice = CommChoice::Mpi, bool tied = false);

}  // namespace tetra
