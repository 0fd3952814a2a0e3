// The NCCL communicator on one GPU: groups of one rank (all a one-GPU machine can build) still
// run every NCCL call, in fp32, bf16 and i32, and count nothing, as the group of one
// (self_comm.hpp) counts nothing. make_grid under --comm nccl gives every group of a one-rank
// world an NCCL communicator, under auto and mpi none (each gets the group of one). Without a
// GPU the cases say so and pass; without NCCL in the build, asking for it is an error.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "parallel/grid.hpp"
#include "parallel/nccl_comm.hpp"

#ifdef TETRA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace tetra;

namespace {

bool have_gpu() {
#ifdef TETRA_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}

MPI_Comm self_copy() {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_SELF, &c);
  return c;
}

template <typename T>
std::vector<T> down(Backend& be, const Tensor& t) {
  std::vector<T> h(size_t(t.bytes() / sizeof(T)));
  be.download(h.data(), t);
  return h;
}

}  // namespace

TEST_CASE("nccl: a group of one runs every call in fp32, bf16 and i32 and counts none") {
  if (!have_nccl()) {
    auto be = make_cpu_backend(1);
    CHECK_THROWS_AS(make_nccl_comm(self_copy(), "tp", *be), Error);
    MESSAGE("no NCCL in this build: checked the error only");
    return;
  }
  if (!have_gpu()) {
    MESSAGE("no GPU: skipped");
    return;
  }
#ifdef TETRA_HAVE_CUDA
  auto be = make_cuda_backend(0);
  auto comm = make_nccl_comm(self_copy(), "dp_cp", *be);
  CHECK(std::string(comm->kind()) == "nccl");
  CHECK(comm->size() == 1);

  const std::vector<float> x = {1.5f, -2.f, 3.25f, 1e-3f};
  Buffer a(*be, 4), b(*be, 4);
  be->upload(a.flat(), x.data());
  comm->all_reduce(a.flat());
  CHECK(down<float>(*be, a.flat()) == x);
  comm->all_reduce(a.flat(), ReduceOp::Max);
  CHECK(down<float>(*be, a.flat()) == x);
  comm->reduce_scatter(b.flat(), a.flat());
  CHECK(down<float>(*be, b.flat()) == x);
  be->fill(b.flat(), 0.f);
  comm->all_gather(b.flat(), a.flat());
  CHECK(down<float>(*be, b.flat()) == x);
  comm->broadcast(b.flat(), 0);
  CHECK(down<float>(*be, b.flat()) == x);

  // bf16: bit patterns survive a sum over one rank (MPI would add them as integers).
  const std::vector<uint16_t> h = {0x3fc0, 0xc000, 0x4050, 0x3a83};
  Buffer c(*be, 4, DType::BF16), d(*be, 4, DType::BF16);
  be->upload(c.flat(), h.data());
  comm->all_reduce(c.flat());
  comm->reduce_scatter(d.flat(), c.flat());
  CHECK(down<uint16_t>(*be, d.flat()) == h);

  const std::vector<int32_t> n = {7, -3, 1 << 30, 0};
  Buffer e(*be, 4, DType::I32);
  be->upload(e.flat(), n.data());
  comm->all_reduce(e.flat());
  CHECK(down<int32_t>(*be, e.flat()) == n);

  double host[2] = {1.25, -4};
  comm->all_reduce_host(host, 2);
  CHECK(host[0] == 1.25);
  comm->barrier();
  CHECK(comm->stats.calls == 0);
  CHECK(comm->stats.bytes == 0);
#endif
}

TEST_CASE("nccl: queued calls run on a stream of their own, joined by events, with the same bits") {
  if (!have_nccl() || !have_gpu()) {
    MESSAGE("no NCCL or no GPU: skipped");
    return;
  }
#ifdef TETRA_HAVE_CUDA
  auto be = make_cuda_backend(0);
  auto comm = make_nccl_comm(self_copy(), "dp_cp", *be);
  const std::vector<float> x = {1.5f, -2.f, 3.25f, 1e-3f};
  Buffer a(*be, 4), b(*be, 4), c(*be, 4);
  be->upload(a.flat(), x.data());
  // The compute stream's copy after the join reads what the queue stream wrote.
  std::unique_ptr<Comm::Request> r = comm->queue_reduce_scatter(b.flat(), a.flat());
  r->wait();
  be->copy(c.flat(), b.flat());
  CHECK(down<float>(*be, c.flat()) == x);
  be->fill(b.flat(), 0.f);
  r = comm->queue_all_gather(b.flat(), a.flat());
  r->wait();
  CHECK(down<float>(*be, b.flat()) == x);
  // bf16 in place, and a request never waited for joins when it goes.
  const std::vector<uint16_t> h = {0x3fc0, 0xc000, 0x4050, 0x3a83};
  Buffer d(*be, 4, DType::BF16);
  be->upload(d.flat(), h.data());
  comm->queue_all_gather(d.flat(), d.flat());
  CHECK(down<uint16_t>(*be, d.flat()) == h);
  CHECK(comm->stats.calls == 0);
#endif
}

TEST_CASE("nccl: make_grid gives a one-rank world NCCL in every group under nccl, none else") {
  if (!have_nccl() || !have_gpu()) {
    MESSAGE("no NCCL or no GPU: skipped");
    return;
  }
#ifdef TETRA_HAVE_CUDA
  auto be = make_cuda_backend(0);
  CHECK_FALSE(shares_device(MPI_COMM_SELF, *be));
  const Grid g = make_grid(MPI_COMM_SELF, Layout{}, *be, CommChoice::Nccl);
  CHECK(g.comm_kinds() == "tp nccl, cp nccl, pp nccl, dp_cp nccl");
  for (CommChoice choice : {CommChoice::Auto, CommChoice::Mpi}) {
    const Grid m = make_grid(MPI_COMM_SELF, Layout{}, *be, choice);
    CHECK(m.comm_kinds() == "tp self, cp self, pp self, dp_cp self");
  }
#endif
}

TEST_CASE("nccl: a CPU backend never asks for NCCL and shares no device") {
  auto be = make_cpu_backend(1);
  CHECK_FALSE(shares_device(MPI_COMM_WORLD, *be));
  const Grid g = make_grid(MPI_COMM_SELF, Layout{}, *be, CommChoice::Nccl);
  CHECK(g.comm_kinds() == "tp self, cp self, pp self, dp_cp self");
}
