#include "parallel/grid.hpp"

#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "parallel/mpi_comm.hpp"
#include "parallel/nccl_comm.hpp"
#include "util/checked.hpp"
#include "util/error.hpp"

namespace tetra {

std::string Layout::str() const {
  std::ostringstream os;
  os << "TP " << tp << " x CP " << cp << " x PP " << pp << " x DP " << dp;
  return os.str();
}

Coord coord_of(const Layout& l, int rank) {
  Coord c;
  c.tp = rank % l.tp;
  rank /= l.tp;
  c.cp = rank % l.cp;
  rank /= l.cp;
  c.pp = rank % l.pp;
  c.dp = rank / l.pp;
  return c;
}

Layout resolve_layout(int tp, int cp, int pp, int dp, int world) {
  check(tp >= 1 && cp >= 1 && pp >= 1 && dp >= 0,
        "`layout.tp`, `layout.cp` and `layout.pp` must be at least 1 and ",
        "`layout.dp` at least 1 (or left out)");
  // In 64 bits, checked: a product of flags that wrapped (65536 * 65536 is 0 in 32) would
  // pass for another number of ranks or divide by zero.
  const std::optional<int64_t> inner = checked_product({tp, cp, pp});
  const auto product = [&](std::optional<int64_t> n) {
    return n ? std::to_string(*n) : std::string("more than 2^63");
  };
  if (dp == 0) {
    check(inner && world % *inner == 0, "TP*CP*PP = ", tp, "*", cp, "*", pp, " = ", product(inner),
          " does not divide the ", world, " ranks, so `layout.dp` cannot be inferred");
    dp = int(world / *inner);
  }
  const std::optional<int64_t> all = inner ? checked_mul(*inner, dp) : std::nullopt;
  check(all == int64_t(world), "the layout TP*CP*PP*DP = ", tp, "*", cp, "*", pp, "*", dp, " = ",
        product(all), " must equal the number of ranks (", world, ")");
  return Layout{tp, cp, pp, dp};
}

bool shares_device(MPI_Comm comm, const Backend& be) {
  constexpr int kLen = 64;
  std::string id = be.device_uuid();
  if (id.empty()) return false;
  // The machine's name too: UUIDs are unique anyway, but that makes it plain.
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  id = (std::string(host, len) + "/" + id).substr(0, kLen);
  id.resize(kLen, '\0');
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<char> all(size_t(n) * kLen);
  MPI_Allgather(id.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm);
  std::set<std::string> seen;
  for (int r = 0; r < n; ++r) seen.insert(std::string(&all[size_t(r) * kLen], kLen));
  return int(seen.size()) < n;
}

std::string Grid::comm_kinds() const {
  std::ostringstream os;
  os << "tp " << tp->kind() << ", cp " << cp->kind() << ", pp " << pp->kind() << ", dp_cp "
     << dp_cp->kind();
  if (embed) os << ", embed " << embed->kind();
  return os.str();
}

CommChoice comm_choice(const std::string& flag) {
  if (flag == "auto") return CommChoice::Auto;
  if (flag == "nccl") return CommChoice::Nccl;
  check(flag == "mpi", "`device.comm` ", flag, ": expected auto, nccl or mpi");
  return CommChoice::Mpi;
}

Grid make_grid(MPI_Comm world, const Layout& l, Backend& be, CommChoice choice, bool tied) {
  Grid g;
  g.layout = l;
  MPI_Comm_rank(world, &g.rank);
  g.coord = coord_of(l, g.rank);
  const Coord& c = g.coord;
  const bool nccl_possible =
      choice != CommChoice::Mpi && have_nccl() && be.device() == Device::CUDA;
  // The color names every coordinate except the group's own; the key orders the group.
  const auto split = [&](int color, int key, const std::string& name) {
    MPI_Comm comm;
    MPI_Comm_split(world, color, key, &comm);
    int size = 0;
    MPI_Comm_size(comm, &size);
    // Every member sees the same size, so shares_device (collective) runs on all or none.
    const bool nccl = nccl_possible && (size > 1 || choice == CommChoice::Nccl);
    if (nccl && !shares_device(comm, be)) return make_nccl_comm(comm, name, be);
    std::unique_ptr<Comm> made = make_mpi_comm(comm, name);  // a group of one: self_comm.hpp
    made->bind_backend(&be);
    return made;
  };
  g.tp = split(rank_of(l, {0, c.cp, c.pp, c.dp}), c.tp, "tp");
  g.cp = split(rank_of(l, {c.tp, 0, c.pp, c.dp}), c.cp, "cp");
  g.pp = split(rank_of(l, {c.tp, c.cp, 0, c.dp}), c.pp, "pp");
  g.dp = split(rank_of(l, {c.tp, c.cp, c.pp, 0}), c.dp, "dp");
  g.dp_cp = split(rank_of(l, {c.tp, 0, c.pp, 0}), c.cp + l.cp * c.dp, "dp_cp");
  // The ends of the pipeline of one (tp, cp, dp) pair up; a stage between them is alone (its
  // color past every rank number).
  if (tied && l.pp > 1) {
    const bool end = c.pp == 0 || c.pp == l.pp - 1;
    g.embed = split(end ? rank_of(l, {c.tp, c.cp, 0, c.dp}) : l.world() + g.rank, c.pp, "embed");
  }
  // world carries host values only (barriers, the GEMM probe's rate), always over MPI.
  MPI_Comm dup;
  MPI_Comm_dup(world, &dup);
  g.world = make_mpi_comm(dup, "world");
  g.world->bind_backend(&be);
  return g;
}

}  // namespace tetra
