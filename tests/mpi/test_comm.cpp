// The MPI communicator itself, on 4 ranks: bf16 reductions reduce values, not bit patterns
// (MPI has no bf16 type and would add them as 16-bit integers), and every call gives the
// same result whether the tensors are host memory handed to MPI as they are or the guarded
// backend's memory, which the communicator must stage through the backend. Groups of one get
// no communicator (the group of one, self_comm.hpp), under every --comm choice on the CPU.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "parallel/grid.hpp"
#include "parallel/mpi_comm.hpp"
#include "util/bf16.hpp"

using namespace tetra;

namespace {

std::unique_ptr<Comm> world_comm(Backend& be) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  auto comm = make_mpi_comm(c, "dp");
  comm->bind_backend(&be);
  return comm;
}

template <typename T>
std::vector<T> down(Backend& be, const Tensor& t) {
  std::vector<T> h(t.bytes() / sizeof(T));
  be.download(h.data(), t);
  return h;
}

std::vector<uint16_t> bf16s(std::vector<float> xs) {
  std::vector<uint16_t> out;
  for (float x : xs) out.push_back(float_to_bf16(x));
  return out;
}

}  // namespace

TEST_CASE("comm: bf16 sums and maxima, on host memory and through the guarded backend") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(size == 4);
  for (const bool guarded : {false, true}) {
    CAPTURE(guarded);
    auto be = guarded ? make_guarded_cpu_backend(1) : make_cpu_backend(1);
    auto comm = world_comm(*be);
    // Rank r holds 1.5 (r + 1) and -0.25 r: every partial sum is exact in bf16, so any
    // reduction order gives 15 and -1.5.
    const float r = float(rank);
    Buffer x(*be, 3, DType::BF16);
    be->upload(x.flat(), bf16s({1.5f * (r + 1), -0.25f * r, r}).data());
    comm->all_reduce(x.flat());
    CHECK(down<uint16_t>(*be, x.flat()) == bf16s({15.f, -1.5f, 6.f}));
    CHECK(comm->stats.bytes == doctest::Approx(2.0 * 3 / 4 * 6));

    be->upload(x.flat(), bf16s({r, -r - 1, 0.5f}).data());
    comm->all_reduce(x.flat(), ReduceOp::Max);
    CHECK(down<uint16_t>(*be, x.flat()) == bf16s({3.f, -1.f, 0.5f}));

    // Part p of rank r's input is r + 1 + p: rank p receives 10 + 4p.
    Buffer in(*be, 8, DType::BF16), out(*be, 2, DType::BF16);
    std::vector<float> parts;
    for (int p = 0; p < 4; ++p) parts.insert(parts.end(), 2, r + 1 + float(p));
    be->upload(in.flat(), bf16s(parts).data());
    comm->reduce_scatter(out.flat(), in.flat());
    CHECK(down<uint16_t>(*be, out.flat()) == bf16s({10.f + 4 * r, 10.f + 4 * r}));

    // fp32 gather and broadcast through the same paths.
    Buffer mine(*be, 2), all(*be, 8);
    be->upload(mine.flat(), std::vector<float>{r, -r}.data());
    comm->all_gather(all.flat(), mine.flat());
    CHECK(down<float>(*be, all.flat()) == std::vector<float>{0, 0, 1, -1, 2, -2, 3, -3});
    comm->broadcast(mine.flat(), 2);
    CHECK(down<float>(*be, mine.flat()) == std::vector<float>{2, -2});
  }
}

TEST_CASE("comm: the reduce-scatter's ring, its order of sums, blocking and queued") {
  // Groups of 2 (ranks {0, 1}, {2, 3}), 3 ({0, 1, 2}) and 4. Rank q's part c holds
  // 1e8 (q == c + 1 mod n), -1e8 (q == c + 2 mod n) or q + 1, in every element: in fp32 the
  // sum depends on its order (1e8 + 1 rounds to 1e8), and the ring's order, as
  // ring_reduce_scatter says, is x_r + (x_{r-1} + (... + x_{r+1})) for rank r's part.
  int world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  auto be = make_cpu_backend(1);
  for (const int n : {2, 3, 4}) {
    CAPTURE(n);
    const int color = n == 2 ? world / 2 : (n == 3 && world == 3 ? MPI_UNDEFINED : 0);
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, color, world, &c);
    if (c == MPI_COMM_NULL) continue;
    auto comm = make_mpi_comm(c, "dp");
    comm->bind_backend(be.get());
    REQUIRE(comm->size() == n);
    const int r = comm->rank();
    constexpr int64_t kPart = 5;
    auto value = [n](int q, int part) {
      if (q == (part + 1) % n) return 1e8f;
      if (q == (part + 2) % n && n > 2) return -1e8f;
      return float(q + 1);
    };
    std::vector<float> mine;
    for (int part = 0; part < n; ++part) mine.insert(mine.end(), kPart, value(r, part));
    float want = value((r + 1) % n, r);
    for (int step = 2; step <= n; ++step) want = value((r + step) % n, r) + want;
    Buffer in(*be, kPart * n), out(*be, kPart), queued(*be, kPart);
    be->upload(in.flat(), mine.data());
    comm->reduce_scatter(out.flat(), in.flat());
    CHECK(down<float>(*be, out.flat()) == std::vector<float>(kPart, want));
    comm->queue_reduce_scatter(queued.flat(), in.flat())->wait();
    CHECK(down<float>(*be, queued.flat()) == std::vector<float>(kPart, want));
    CHECK(comm->stats.bytes == doctest::Approx(2.0 * (n - 1) * kPart * sizeof(float)));
  }
}

TEST_CASE("comm: a group of one copies through the backend, also the guarded one") {
  auto be = make_guarded_cpu_backend(1);
  MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  auto comm = make_mpi_comm(self, "tp");
  comm->bind_backend(be.get());
  CHECK(std::string(comm->kind()) == "self");
  Buffer a(*be, 4), b(*be, 4);
  const std::vector<float> x = {1.f, 2.f, 3.f, 4.f};
  be->upload(a.flat(), x.data());
  comm->reduce_scatter(b.flat(), a.flat());
  CHECK(down<float>(*be, b.flat()) == x);
  be->fill(b.flat(), 0.f);
  comm->all_gather(b.flat(), a.flat());
  CHECK(down<float>(*be, b.flat()) == x);
  CHECK(comm->stats.calls == 0);
}

TEST_CASE("comm: every group of one rank gets the group of one, groups of more MPI") {
  auto be = make_cpu_backend(1);
  struct Case {
    Layout layout;
    const char* kinds;
  };
  for (const Case& c : {Case{{1, 1, 1, 4}, "tp self, cp self, pp self, dp_cp mpi"},
                        Case{{2, 1, 1, 2}, "tp mpi, cp self, pp self, dp_cp mpi"},
                        Case{{1, 2, 2, 1}, "tp self, cp mpi, pp mpi, dp_cp mpi"},
                        Case{{4, 1, 1, 1}, "tp mpi, cp self, pp self, dp_cp self"}}) {
    for (CommChoice choice : {CommChoice::Mpi, CommChoice::Auto, CommChoice::Nccl}) {
      CAPTURE(c.layout.str());
      CAPTURE(int(choice));
      const Grid g = make_grid(MPI_COMM_WORLD, c.layout, *be, choice);
      CHECK(g.comm_kinds() == c.kinds);
      CHECK(std::string(g.dp->kind()) == (c.layout.dp > 1 ? "mpi" : "self"));
      CHECK(std::string(g.world->kind()) == "mpi");
      // A group of one sends nothing and counts nothing, its copies included.
      Buffer a(*be, 4), b(*be, 4);
      be->fill(a.flat(), 2.f);
      for (Comm* one : {g.tp.get(), g.cp.get(), g.pp.get(), g.dp_cp.get()}) {
        if (one->size() > 1) continue;
        one->all_reduce(a.flat());
        one->reduce_scatter(b.flat(), a.flat());
        one->all_gather(b.flat(), a.flat());
        one->barrier();
        CHECK(one->rank() == 0);
        CHECK(one->stats.calls == 0);
        CHECK(one->stats.bytes == 0);
        CHECK_THROWS_AS(one->send(a.flat(), 0, 0), Error);
      }
      CHECK(down<float>(*be, b.flat()) == std::vector<float>(4, 2.f));
    }
  }
  CHECK(comm_choice("auto") == CommChoice::Auto);
  CHECK_THROWS_AS(comm_choice("gloo"), Error);
}
