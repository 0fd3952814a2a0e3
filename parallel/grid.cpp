#include "parallel/grid.hpp"

#include <sstream>

#include "model/error.hpp"
#include "parallel/mpi_comm.hpp"

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
  check(tp >= 1 && cp >= 1 && pp >= 1 && dp >= 0, "--tp, --cp and --pp must be at least 1 and ",
        "--dp at least 1 (or left out)");
  const int inner = tp * cp * pp;
  if (dp == 0) {
    check(world % inner == 0, "TP*CP*PP = ", tp, "*", cp, "*", pp, " = ", inner,
          " does not divide the ", world, " ranks, so --dp cannot be inferred");
    dp = world / inner;
  }
  check(inner * dp == world, "the layout TP*CP*PP*DP = ", tp, "*", cp, "*", pp, "*", dp, " = ",
        inner * dp, " must equal the number of ranks (", world, ")");
  return Layout{tp, cp, pp, dp};
}

namespace {

std::unique_ptr<Comm> split(MPI_Comm world, int color, int key, const std::string& name) {
  MPI_Comm c;
  MPI_Comm_split(world, color, key, &c);
  return make_mpi_comm(c, name);
}

}  // namespace

void Grid::bind_backend(Backend& be) {
  for (Comm* c : {world.get(), tp.get(), cp.get(), pp.get(), dp.get(), dp_cp.get()})
    c->bind_backend(&be);
}

Grid make_grid(MPI_Comm world, const Layout& l) {
  Grid g;
  g.layout = l;
  MPI_Comm_rank(world, &g.rank);
  g.coord = coord_of(l, g.rank);
  const Coord& c = g.coord;
  // The color names every coordinate except the group's own; the key orders the group.
  g.tp = split(world, rank_of(l, {0, c.cp, c.pp, c.dp}), c.tp, "tp");
  g.cp = split(world, rank_of(l, {c.tp, 0, c.pp, c.dp}), c.cp, "cp");
  g.pp = split(world, rank_of(l, {c.tp, c.cp, 0, c.dp}), c.pp, "pp");
  g.dp = split(world, rank_of(l, {c.tp, c.cp, c.pp, 0}), c.dp, "dp");
  g.dp_cp = split(world, rank_of(l, {c.tp, 0, c.pp, 0}), c.cp + l.cp * c.dp, "dp_cp");
  MPI_Comm dup;
  MPI_Comm_dup(world, &dup);
  g.world = make_mpi_comm(dup, "world");
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &g.local_ranks);
  MPI_Comm_rank(node, &g.local_rank);
  MPI_Comm_free(&node);
  return g;
}

}  // namespace tetra
