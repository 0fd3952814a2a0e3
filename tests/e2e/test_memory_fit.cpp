// A step that cannot fit in memory: refused before step 0 with one message (the plan's
// memory model against what the machine has left), and an allocation that fails inside the
// CPU backend's OpenMP attention loops is a tetra::Error after the loop, not a terminate.
#include <doctest/doctest.h>

#include <vector>

#include "../support/spawn.hpp"
#include "backend/backend.hpp"

using namespace tetra;
using namespace tetra::test;

TEST_CASE("train: a step that cannot fit in memory is refused before step 0") {
  // [10^6, 10^6] fp32 attention scores per thread alone are 4 TB (the 100000 needs
  // 80 GB, which a large machine might have).
  const Spawned s = spawn(tetra_bin() + " train --steps 1 --seq-len 1000000 --global-batch 1", 60);
  CHECK(s.status == 2);
  CHECK(count(s.err, "tetra: error:") == 1);
  CHECK(s.err.find("a step needs about") != std::string::npos);
  CHECK(s.err.find("available") != std::string::npos);
  CHECK(s.out.find("step     0") == std::string::npos);
}

TEST_CASE("cpu backend: a failed allocation inside attention's parallel loop is a tetra::Error") {
  const std::unique_ptr<Backend> be = make_cpu_backend(2);
  // 4 queries against 2^42 keys: a thread's [4, 2^42] block of scores (64 TB) cannot be
  // allocated, and it is allocated before anything is read or written, so the small buffers
  // behind the claimed shapes are never touched.
  const int64_t Sq = 4, Sk = int64_t(1) << 42, hd = 8;
  std::vector<float> small(64, 0.f);
  std::vector<int32_t> pos(64, 0);
  const AttnShape shape{1, Sq, Sk, 2, 1, int(hd)};
  const Tensor q(small.data(), {Sq, 2 * hd}), lse(small.data(), {2 * Sq});
  const Tensor kt(small.data(), {Sk, hd}), vt(small.data(), {Sk, hd});
  const Tensor dkt(small.data(), {Sk, hd}), dvt(small.data(), {Sk, hd});
  const Tensor qp(pos.data(), {Sq}, DType::I32), kp(pos.data(), {Sk}, DType::I32);
  CHECK_THROWS_WITH_AS(be->attention_forward(q, lse, q, kt, vt, {qp, kp, {}, {}}, shape),
                       doctest::Contains("out of host memory in attention forward"), Error);
  CHECK_THROWS_WITH_AS(
      be->attention_backward(q, dkt, dvt, q, q, kt, vt, q, lse, {qp, kp, {}, {}}, shape),
      doctest::Contains("out of host memory in attention backward"), Error);
}
