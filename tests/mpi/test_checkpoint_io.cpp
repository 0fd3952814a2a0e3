// Checkpoints over real ranks: four ranks of a TP 2 x DP 2 layout save their ZeRO shares
// together and every rank reads the whole tensors back; a failure on one rank stops all of
// them with the same message, and leaves the previous checkpoint as it was.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../support/checkpoint_fixture.hpp"
#include "checkpoint/checkpoint.hpp"
#include "model/config.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
using namespace tetra;
using namespace tetra::ckpt;
using namespace tetra::test;

namespace {

constexpr int kRanks = 4;  // TP 2 x DP 2

// The first four ranks of the world, so that the test also runs under a larger mpirun.
struct Ranks {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  Ranks() {
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < kRanks ? 0 : MPI_UNDEFINED, world_rank, &comm);
    if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
  }
  ~Ranks() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

std::string broadcast(MPI_Comm comm, std::string s) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, comm);
  return s;
}

// A directory made by rank 0 for all of them, removed at the end.
struct SharedTempDir {
  MPI_Comm comm;
  std::string path;
  explicit SharedTempDir(MPI_Comm c) : comm(c) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    std::string templ = (fs::temp_directory_path() / "tetra_ckpt_io_XXXXXX").string();
    if (rank == 0 && ::mkdtemp(templ.data()) == nullptr) std::abort();
    path = broadcast(comm, templ);
  }
  ~SharedTempDir() {
    MPI_Barrier(comm);
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    std::error_code ec;
    if (rank == 0) fs::remove_all(path, ec);
  }
};

RunState state_at(int64_t step, const ModelConfig& cfg) {
  RunState s;
  s.step = step;
  s.tokens_seen = step * 4 * cfg.seq_len;
  s.seed = 42;
  s.sampler_step = step;
  s.global_batch = 4;
  s.model = model_to_json(cfg);
  s.layout = {{"tp", 2}, {"cp", 1}, {"pp", 1}, {"dp", 2}};
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs save, returning the error message ("" for none).
std::string save_error(MPI_Comm comm, const std::string& dir, const RunState& st,
                       const std::vector<Segment>& segments) {
  try {
    save(comm, dir, st, segments, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checkpoint io: TP 2 x DP 2 ranks save together and each reads whole tensors back") {
  const Ranks ranks;
  if (ranks.comm == MPI_COMM_NULL) return;
  const SharedTempDir tmp(ranks.comm);
  const ModelConfig cfg = checkpoint_model();
  const Weights global = make_weights(cfg, 0);
  const RankShard mine = shard_of(cfg, global, 2, ranks.rank % 2, 2, ranks.rank / 2);
  const std::string dir = tmp.path + "/ckpt";

  std::string path;
  for (int64_t step = 1; step <= 3; ++step) {
    RunState st = state_at(step, cfg);
    if (!path.empty()) st.parent = reference_to(dir, path);  // one line: 1, 2, 3
    path = save(ranks.comm, dir, st, mine.segments, 2);
  }
  CHECK(path == dir + "/step_00000003");
  CHECK(broadcast(ranks.comm, path) == path);
  CHECK(read_text(dir + "/latest") == "step_00000003\n");
  CHECK_FALSE(fs::exists(dir + "/step_00000001"));
  CHECK(fs::exists(dir + "/step_00000002"));
  for (int r = 0; r < kRanks; ++r)
    CHECK(fs::exists(path + "/rank_0000" + std::to_string(r) + ".safetensors"));

  CHECK(verify(path) == "");
  const Reader reader(path);
  CHECK(reader.state().step == 3);
  const Reader::Kind kinds[3] = {Reader::Kind::Param, Reader::Kind::AdamM, Reader::Kind::AdamV};
  for (const UnitSpec& u : make_units(cfg, 1, 0)) {
    for (const ParamInfo& p : u.params) {
      CAPTURE(p.name);
      for (int k = 0; k < 3; ++k) CHECK(reader.tensor(p.name, kinds[k]) == global.of(k).at(p.name));
    }
  }
}

TEST_CASE("checkpoint io: one rank's failure makes every rank throw the same error") {
  const Ranks ranks;
  if (ranks.comm == MPI_COMM_NULL) return;
  const SharedTempDir tmp(ranks.comm);
  const ModelConfig cfg = checkpoint_model();
  const Weights global = make_weights(cfg, 0);
  const RankShard mine = shard_of(cfg, global, 2, ranks.rank % 2, 2, ranks.rank / 2);
  const std::string dir = tmp.path + "/ckpt";
  REQUIRE(save_error(ranks.comm, dir, state_at(1, cfg), mine.segments) == "");

  // Rank 2 does not see the directory rank 0 prepared (as on a node without the shared
  // filesystem): it fails while the others succeed in writing their shards.
  const std::string bad_dir = "/proc/tetra_ckpt_io";
  std::string err =
      save_error(ranks.comm, ranks.rank == 2 ? bad_dir : dir, state_at(2, cfg), mine.segments);
  CHECK(err.find("cannot write checkpoint directory '" + bad_dir + "'") == 0);
  CHECK(err.find("on rank 2") != std::string::npos);
  CHECK(broadcast(ranks.comm, err) == err);

  // Rank 3 hands over a segment the model does not have.
  std::vector<Segment> segments = mine.segments;
  if (ranks.rank == 3) segments[0].name = "model.layers.5.mlp.up_proj.weight";
  err = save_error(ranks.comm, dir, state_at(2, cfg), segments);
  CHECK(err.find("'model.layers.5.mlp.up_proj.weight' of rank 3") != std::string::npos);
  CHECK(broadcast(ranks.comm, err) == err);

  MPI_Barrier(ranks.comm);
  CHECK_FALSE(fs::exists(dir + "/step_00000002"));
  CHECK_FALSE(fs::exists(dir + "/step_00000002.tmp"));
  CHECK(read_text(dir + "/latest") == "step_00000001\n");
  CHECK(verify(dir + "/step_00000001") == "");
}
